//! Epochs: their numbering, their atomic write, and the last one as readers see it.
//!
//! Every epoch goes through [`Commits::commit`], whether the engine commits it (a statement, the
//! source thread) or a job running on a thread of its own ([`super::runner`]): under one mutex
//! it takes the next epoch number, writes the epoch's changes in one atomic RocksDB write, and
//! publishes the epoch: its catalog and a RocksDB snapshot taken right after the write (nothing
//! can be written between the two, as every write takes the same mutex). A `SELECT` clones the
//! published [`Committed`] out of its slot and plans and scans against it with no lock held, so
//! it never waits for a job or a statement, a commit never waits for it, and every relation it
//! reads is of the same epoch (DESIGN.md, "State and progress": reads through a snapshot of the
//! last committed epoch).

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use weir_catalog::Catalog;

use crate::error::Result;
use crate::observe::now_ms;
use crate::runtime::feed::Feeds;
use crate::state::{EpochWrites, Store, StoreSnapshot};

/// What readers see: the last committed epoch's catalog and a snapshot of the store as of that
/// commit. A reader clones the `Arc` out of the slot (a lock held for that clone only) and then
/// holds nothing a job or statement waits for.
pub struct Committed {
    /// The epoch's number.
    pub epoch: u64,
    pub catalog: Arc<Catalog>,
    /// The store as of the epoch's commit.
    pub state: Arc<StoreSnapshot>,
    /// When it was published (its commit, or the load of the store), ms since the Unix epoch:
    /// the views' freshness is now minus this.
    pub committed_at_ms: i64,
}

/// The slot that holds the last [`Committed`] epoch, shared by the engine and its readers.
pub type CommittedSlot = Arc<RwLock<Arc<Committed>>>;

/// The epoch counter and the readers' slot of one store, shared by the engine and its job
/// runners, and the relations' change feeds subscribers follow.
pub struct Commits {
    store: Arc<Store>,
    /// The last committed epoch's number, locked while an epoch is written and published.
    epoch: Mutex<u64>,
    slot: CommittedSlot,
    /// Each relation's committed changes, for `SUBSCRIBE` ([`crate::runtime::feed`]); kept
    /// across reloads, so a subscription outlives a job's recovery.
    feeds: Arc<Feeds>,
}

impl Commits {
    /// The commits of `store`, whose last epoch `epoch` has `catalog`; publishes it.
    pub fn new(store: Arc<Store>, epoch: u64, catalog: Arc<Catalog>) -> Self {
        let committed =
            Arc::new(Committed { epoch, catalog, state: Arc::new(StoreSnapshot::of(&store)), committed_at_ms: now_ms() });
        Self { store, epoch: Mutex::new(epoch), slot: Arc::new(RwLock::new(committed)), feeds: Arc::default() }
    }

    /// The relations' change feeds.
    pub fn feeds(&self) -> &Arc<Feeds> {
        &self.feeds
    }

    /// The readers' slot.
    pub fn slot(&self) -> &CommittedSlot {
        &self.slot
    }

    /// The last committed epoch as readers see it.
    pub fn last(&self) -> Arc<Committed> {
        Arc::clone(&self.slot.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The last committed epoch's number.
    pub fn epoch(&self) -> u64 {
        *self.epoch.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes the store's state as loaded again (after a reload): its last committed epoch,
    /// read under the commit mutex (a job on a thread of its own may commit meanwhile), with
    /// `catalog`.
    ///
    /// # Errors
    /// `Storage` when the epoch cannot be read.
    pub fn reset(&self, catalog: Arc<Catalog>) -> Result<()> {
        let mut last = self.epoch.lock().unwrap_or_else(PoisonError::into_inner);
        let epoch = self.store.committed_epoch()?;
        *last = epoch;
        self.publish(epoch, catalog);
        Ok(())
    }

    /// Writes `writes` as the next epoch, atomically and synced, and publishes it with
    /// `catalog` (`None`: the catalog readers see now, unchanged). Returns the epoch's number.
    ///
    /// # Errors
    /// `Storage` when RocksDB refuses the write; nothing is published then.
    pub fn commit(&self, writes: EpochWrites, catalog: Option<Arc<Catalog>>) -> Result<u64> {
        let mut last = self.epoch.lock().unwrap_or_else(PoisonError::into_inner);
        let epoch = *last + 1;
        let start = std::time::Instant::now();
        self.store.commit(writes, epoch)?;
        crate::observe::instruments().epoch_committed(start.elapsed());
        *last = epoch;
        let catalog = catalog.unwrap_or_else(|| Arc::clone(&self.slot.read().unwrap_or_else(PoisonError::into_inner).catalog));
        self.publish(epoch, catalog);
        Ok(epoch)
    }

    fn publish(&self, epoch: u64, catalog: Arc<Catalog>) {
        let state = Arc::new(StoreSnapshot::of(&self.store));
        let committed = Arc::new(Committed { epoch, catalog, state, committed_at_ms: now_ms() });
        *self.slot.write().unwrap_or_else(PoisonError::into_inner) = committed;
    }
}
