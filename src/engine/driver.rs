//! What drives the engine between statements: the thread that reads the connector sources
//! and commits their epochs, and the task that advances idle tables' watermarks. Both take the
//! engine's write lock for a slice of work at a time and stop when the engine is dropped.

use std::sync::{Arc, Weak};

use tokio::sync::RwLock;

use super::sources::SOURCE_SLICE;
use super::Engine;
use crate::error::{Result, WeirError};
use crate::state::EpochWrites;

/// Starts the drivers of `engine`: the idle-watermark task (on the current Tokio runtime, if
/// any) and, with `read_sources`, the source thread; without it the caller drives the sources
/// with [`Engine::poll_sources`] (benchmarks, tests).
///
/// # Errors
/// `Internal` when the source thread cannot be started.
pub fn start(engine: &Arc<RwLock<Engine>>, read_sources: bool) -> Result<()> {
    // Idle tables' watermarks advance with processing time: checked every 100 ms.
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        let weak = Arc::downgrade(engine);
        handle.spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(shared) = weak.upgrade() else { break };
                // Most databases have no table whose watermark advances when idle: look under the
                // read lock, and take the write lock only when there is one.
                if shared.read().await.idle_base.is_empty() {
                    continue;
                }
                let advanced = shared.write().await.advance_idle_watermarks();
                if let Err(e) = advanced {
                    tracing::error!("advancing idle watermarks: {e}");
                }
            }
        });
    }
    // Connector sources are read by one thread, a slice at a time under the write lock.
    if read_sources {
        let weak = Arc::downgrade(engine);
        std::thread::Builder::new()
            .name("weir-sources".into())
            .spawn(move || source_loop(weak))
            .map_err(|e| WeirError::internal(format!("cannot start the source thread: {e}")))?;
    }
    Ok(())
}

/// How often the source loop commits an epoch while sources deliver rows (Flink's
/// 'execution.checkpointing.interval'); a source that goes quiet is committed at once.
pub const CHECKPOINT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(200);

/// An epoch is also cut, before its interval is up, once its jobs' state writes reach this many
/// bytes ([`crate::state::StateTable::pending_bytes`]). Until it commits, an epoch's writes are
/// held in memory about three times over (the state tables' pending writes, the write batch,
/// RocksDB's memtable), so a job that writes fast would otherwise peak at hundreds of MB per
/// interval: Nexmark q20 at 290 k events/s with 1 s epochs swung between 0.65 and 1.15 GB of
/// RSS (bench/README.md).
pub const EPOCH_WRITE_BYTES: u64 = 32 << 20;

/// Reads the connector sources until the engine is dropped: a slice of reading under the
/// write lock, an epoch commit every [`CHECKPOINT_INTERVAL`] (or when the sources go quiet, or
/// the jobs' writes reach [`EPOCH_WRITE_BYTES`]),
/// and a short pause when nothing is available. A failure reloads the engine from the last
/// commit, so the sources resume from their committed positions.
fn source_loop(weak: Weak<RwLock<Engine>>) {
    let mut last_commit = std::time::Instant::now();
    let mut dirty = false;
    loop {
        let Some(shared) = weak.upgrade() else { return };
        let mut engine = shared.blocking_write();
        restart_due_jobs(&mut engine, &weak);
        // Jobs running on threads of their own that stopped on a failure come back here;
        // independent jobs the engine holds (after a reload, say) go back to threads of their own.
        match engine.reap_runners() {
            Ok(false) => {}
            // A job erred and the engine reloaded: back off as after a failure of this thread.
            Ok(true) => {
                drop(engine);
                drop(shared);
                std::thread::sleep(std::time::Duration::from_secs(1));
                continue;
            }
            Err(e) => tracing::error!("taking back a failed job: {e}"),
        }
        engine.detach_jobs();
        if engine.sources.is_empty() {
            drop(engine);
            drop(shared);
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        }
        let mut quiet = false;
        let step = engine.poll_sources(SOURCE_SLICE).and_then(|step| {
            dirty |= step.rows > 0 || step.watermark_moved;
            quiet = step.rows == 0 && !step.watermark_moved;
            let due = last_commit.elapsed() >= CHECKPOINT_INTERVAL || engine.pending_bytes() >= EPOCH_WRITE_BYTES;
            if dirty && (quiet || step.all_finished || due) {
                engine.commit(EpochWrites::default(), None)?;
                dirty = false;
                last_commit = std::time::Instant::now();
            }
            Ok(step)
        });
        if let Err(e) = step {
            tracing::error!("reading connector sources: {e}; resuming from the last commit");
            dirty = false;
            if let Err(e) = engine.reload() {
                tracing::error!("reloading after a source failure: {e}");
            }
            drop(engine);
            drop(shared);
            std::thread::sleep(std::time::Duration::from_secs(1));
            continue;
        }
        drop(engine);
        drop(shared);
        if quiet {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// Restarts the jobs whose delay after a failure is up ([`super::restart`]): each one's sources
/// are opened on a thread of its own, without the engine's lock (an unreachable Kafka cluster
/// makes an open wait seconds for its metadata), and installed under it; meanwhile the other
/// jobs and statements go on.
fn restart_due_jobs(engine: &mut Engine, shared: &Weak<RwLock<Engine>>) {
    let due = match engine.take_due_restarts() {
        Ok(due) => due,
        Err(e) => {
            tracing::error!("reading the progress of a job to restart: {e}");
            return;
        }
    };
    for pending in due {
        let shared = Weak::clone(shared);
        let job = pending.job.clone();
        let spawned = std::thread::Builder::new().name(format!("weir-restart-{job}")).spawn(move || {
            let opened = pending.open();
            if let Some(shared) = shared.upgrade() {
                shared.blocking_write().install_restarted(&pending.job, &pending.relations(), opened);
            }
        });
        if let Err(e) = spawned {
            engine.install_restarted(&job, &[], Err(WeirError::internal(format!("cannot start a thread to restart it: {e}"))));
        }
    }
}
