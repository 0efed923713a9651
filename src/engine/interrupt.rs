//! Stopping a long statement while it runs under the engine: a cancel (psql's Ctrl-C, a
//! CancelRequest, `pg_cancel_backend`), the session's `statement_timeout`, the server's
//! shutdown.
//!
//! A write statement's changes go through every view that reads its tables on the statement's
//! own thread, synchronously, and a `CREATE MATERIALIZED VIEW` backfills the same way, so a
//! cancel that only drops the statement's future is seen when that work ends, minutes later
//! for millions of rows under several views. An [`Interrupt`] is checked instead between
//! chunks, before each batch of rows a write statement writes (`sql/dml.rs`), and before the
//! commit ([`Engine::check_interrupt`]): the statement fails with 57014 (57P01 at shutdown)
//! and, as after any failed statement, the engine reloads from its last commit, so nothing of
//! it remains (Postgres: a cancelled statement is rolled back).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Engine;
use crate::error::{ErrorKind, Result, WeirError};

/// Nothing asks the statement to stop.
const RUNNING: u8 = 0;
/// A cancel: the client's, or `pg_cancel_backend`.
const CANCELLED: u8 = 1;
/// The server is shutting down.
const TERMINATED: u8 = 2;

/// A connection's cancel flag, with the deadline of the statement it runs, if any.
///
/// Clones share the flag: the connection keeps one for its cancel paths, the session one
/// that its statements hand to the engine.
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    stop: Arc<AtomicU8>,
    deadline: Option<Instant>,
}

impl Interrupt {
    /// Asks the statement running now, if any, to stop.
    pub fn cancel(&self) {
        self.stop.store(CANCELLED, Ordering::Relaxed);
    }

    /// Stops the statement running now, if any: the server is shutting down.
    pub fn terminate(&self) {
        self.stop.store(TERMINATED, Ordering::Relaxed);
    }

    /// A new statement starts: a cancel that came before it (between statements) is not for it.
    pub fn reset(&self) {
        self.stop.store(RUNNING, Ordering::Relaxed);
    }

    /// This flag, with the statement stopping once `limit` has passed from now (`None`: no
    /// limit; the session's `statement_timeout`).
    #[must_use]
    pub fn within(&self, limit: Option<Duration>) -> Self {
        Self { stop: Arc::clone(&self.stop), deadline: limit.map(|l| Instant::now() + l) }
    }

    /// The statement may go on.
    ///
    /// # Errors
    /// `Cancelled` once cancelled, `StatementTimeout` past the deadline (57014 both),
    /// `AdminShutdown` when the server shuts down (57P01); Postgres's messages.
    pub fn check(&self) -> Result<()> {
        match self.stop.load(Ordering::Relaxed) {
            RUNNING => {}
            CANCELLED => return Err(WeirError::new(ErrorKind::Cancelled)),
            _ => return Err(WeirError::new(ErrorKind::AdminShutdown)),
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(WeirError::new(ErrorKind::StatementTimeout));
        }
        Ok(())
    }
}

impl Engine {
    /// From now until [`Engine::clear_interrupt`], changes pushed through the jobs and
    /// backfills stop with `interrupt`'s error once it is raised.
    pub fn set_interrupt(&mut self, interrupt: &Interrupt) {
        self.interrupt = Some(interrupt.clone());
    }

    /// Work under the engine runs to its end again (the source thread's and job runners'
    /// epochs are never interrupted: they are not a statement).
    pub fn clear_interrupt(&mut self) {
        self.interrupt = None;
    }

    /// The interrupt of the statement that holds the engine; one never raised when none does.
    pub fn interrupt(&self) -> Interrupt {
        self.interrupt.clone().unwrap_or_default()
    }

    /// Whether the statement running under the engine may go on.
    ///
    /// # Errors
    /// As [`Interrupt::check`].
    pub fn check_interrupt(&self) -> Result<()> {
        self.interrupt.as_ref().map_or(Ok(()), Interrupt::check)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_is_seen_by_every_clone_until_reset() {
        let interrupt = Interrupt::default();
        let statement = interrupt.within(None);
        assert!(statement.check().is_ok());
        interrupt.cancel();
        assert_eq!(statement.check().unwrap_err().sqlstate(), "57014");
        interrupt.reset();
        assert!(statement.check().is_ok());
        interrupt.terminate();
        assert_eq!(statement.check().unwrap_err().sqlstate(), "57P01");
    }

    #[test]
    fn a_deadline_passes() {
        let statement = Interrupt::default().within(Some(Duration::ZERO));
        let error = statement.check().unwrap_err();
        assert!(matches!(error.kind(), ErrorKind::StatementTimeout), "{error}");
        assert!(Interrupt::default().within(Some(Duration::from_secs(3600))).check().is_ok());
    }
}
