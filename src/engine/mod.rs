//! The engine: the running jobs of a database, the scheduling between them, watermark routing,
//! the epoch commit, and the wiring of sources and sinks.
//!
//! It sits below `sql/`, which turns statements into stream plans and commands and calls down
//! (`Engine::start_job`, `Engine::drop_relations`, `Engine::commit`, ...), and above the
//! operators (`runtime/`), the source readers (`source/`) and the store (`state/`). Nothing here
//! imports `sql/`: a restart re-plans stored queries through the [`JobPlanner`] the engine is
//! loaded with, and readers see the last commit through [`Committed`].
//!
//! | file | what |
//! |---|---|
//! | `jobs.rs` | [`Engine`]: load and restart, starting a job, change and watermark propagation, the epoch commit, idle watermarks |
//! | `committed.rs` | epoch numbers, the atomic write of each epoch, the last one as readers see it |
//! | `sources.rs` | connector source tasks: opening, polling, progress, dead letters |
//! | `sinks.rs` | the sink operators of `INSERT INTO` jobs, `STOP JOB` |
//! | `runner.rs` | independent jobs on threads of their own, committing their own epochs |
//! | `restart.rs` | restarting a job that failed (its brokers unreachable) from its last checkpoint, with backoff |
//! | `interrupt.rs` | stopping a statement's work under the engine: cancel, `statement_timeout`, shutdown |
//! | `table_writes.rs` | write statements' changes to plain tables, committed as one epoch |
//! | `flush.rs` | what `FLUSH` waits for, first without the engine's lock |
//! | `drop.rs` | `DROP` of relations with their jobs and state |
//! | `suspend.rs` | savepoints: suspending and resuming jobs, starting a job from a suspended one's positions |
//! | `system.rs` | the rows of the system tables |
//! | `driver.rs` | the source thread and the idle-watermark task |
pub mod committed;
pub mod driver;
pub mod drop;
pub mod flush;
pub mod interrupt;
pub mod jobs;
pub mod restart;
pub mod runner;
pub mod sinks;
pub mod sources;
pub mod suspend;
pub mod system;
pub mod table_writes;

pub use committed::{Commits, Committed, CommittedSlot};
pub use driver::{CHECKPOINT_INTERVAL, EPOCH_WRITE_BYTES};
pub use interrupt::Interrupt;
pub use restart::Restart;
pub use jobs::{table_store, watermark_key, Engine, JobPlanner, IDLE_ADVANCE, LATE_ROWS_TABLE};
pub use table_writes::TableChanges;
pub use sinks::{written_fields, SINK_OPTION};
pub use sources::{SourceRow, SourceStep, SOURCE_BATCH_ROWS, SOURCE_SLICE};
pub use system::{job_status, JobStats, StateTableRow, SystemState};

/// Runs `work`, which may take long (a backfill, joining a job's thread, an epoch's write,
/// a slice of the sources), without holding up the async threads' other tasks.
///
/// On a worker of a multi-thread Tokio runtime (a statement's task in `weir serve`) it runs
/// through `tokio::task::block_in_place`: the worker's queued tasks and its turn at the I/O
/// driver move to another thread first. Without that, a `CREATE MATERIALIZED VIEW` backfilling
/// millions of rows kept a `SELECT` or a new connection that had been queued on its worker
/// waiting until it ended. Elsewhere (a plain thread such as the source thread or a job's
/// runner, a current-thread runtime, or a call nested in another) `work` runs directly.
pub fn blocking<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}
