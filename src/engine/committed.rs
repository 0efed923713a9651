//! What readers see of the engine: the last committed epoch, published by every commit.
//!
//! A commit ends with [`Engine::publish`]: the epoch's catalog and a RocksDB snapshot taken
//! right after its write (no other write can come between: commits run under the engine's
//! lock) go into the [`CommittedSlot`]. A `SELECT` clones the `Arc` out of the slot and plans
//! and scans against it with no lock held, so it never waits for a job or a statement, and a
//! commit never waits for it (DESIGN.md, "State and progress": reads through a snapshot of the
//! last committed epoch).

use std::sync::Arc;

use weir_catalog::Catalog;

use super::Engine;
use crate::state::StoreSnapshot;

/// What readers see: the last committed epoch's catalog and a snapshot of the store as of that
/// commit, so every relation a query reads is of the same epoch. [`super::Engine::commit`] replaces
/// it after each commit; a reader clones the `Arc` out of the slot (a lock held for that clone
/// only) and then holds nothing a job or statement waits for.
pub struct Committed {
    /// The epoch's number.
    pub epoch: u64,
    pub catalog: Arc<Catalog>,
    /// The store as of the epoch's commit.
    pub state: Arc<StoreSnapshot>,
}

/// The slot that holds the last [`Committed`] epoch, shared by the engine and its readers.
pub type CommittedSlot = Arc<std::sync::RwLock<Arc<Committed>>>;

impl Engine {
    /// The reader's slot, holding the last committed epoch: see [`Committed`].
    pub fn committed(&self) -> &CommittedSlot {
        &self.committed
    }

    /// Puts the current (just committed or loaded) epoch into the readers' slot.
    pub(super) fn publish(&self) {
        let committed = Arc::new(Committed {
            epoch: self.epoch,
            catalog: Arc::clone(&self.catalog),
            state: Arc::new(StoreSnapshot::of(&self.store)),
        });
        *self.committed.write().unwrap_or_else(std::sync::PoisonError::into_inner) = committed;
    }
}
