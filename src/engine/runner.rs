//! Independent jobs run on threads of their own.
//!
//! A job is *independent* when every relation it reads is a connector table, read by source
//! tasks of its own, no other job reads its output, it is not FAILED, and its sources route
//! nothing into other relations (no `'dead-letter.table'`, `'dead-letter.topic'` or
//! `'late-rows.table'` option). Between two of its checkpoints such a job needs nothing from the
//! rest of the engine, so while no statement holds the engine it runs on a thread of its own
//! (a *runner*): it reads its source tasks, pushes their batches and watermarks through its
//! operators and, every [`CHECKPOINT_INTERVAL`] (or [`EPOCH_WRITE_BYTES`] of state writes), or
//! when its sources go quiet or end, commits an
//! epoch of its own: its operators' writes and its source positions in one atomic write,
//! numbered and published to readers by the same [`Commits`] as the engine's epochs. Two
//! independent jobs use two cores, and neither waits for the other's work.
//!
//! A write statement takes the jobs back first ([`Engine::attach_jobs`]): each runner stops at
//! the end of its current slice of reading and hands back its job and source tasks with their
//! uncommitted state, which the statement's own epoch then commits with the rest. After the
//! statement the engine lets them run again ([`Engine::detach_jobs`]). A runner that stops on
//! its own hands back its job with the reason: a source whose `'decode.on-error' = 'fail'` met
//! a bad record (the job is FAILED, as on the engine's thread), or an error, after which the
//! job is dropped with what it did since its last commit and restarts from that commit after
//! a delay ([`super::restart`]). The rest of the engine goes on: the job's epochs were its own.
//! Nor does a reload of the engine (a failure on its own source thread, or of a statement)
//! stop the jobs running on threads of their own.
//!
//! An `INSERT INTO` job whose sources have all ended (they are bounded, or it has none: `INSERT
//! INTO .. VALUES`) stops on its own once its last epoch has committed, and the engine keeps it
//! as `FINISHED` (Flink's status for a bounded job that ran to its end): suspended with its
//! state and positions, never started again ([`Engine::finished`]). A view's job keeps running.
//!
//! While a job runs detached, the system tables show what its runner published at its last
//! commit ([`JobStats`], [`SourceRow`]s).
//!
//! # Commits behind the job
//! A runner commits each epoch on a thread of its own while the job goes on with the next
//! epoch's rows (an asynchronous checkpoint, as Flink's RocksDB backend uploads a snapshot while
//! the task runs): at the barrier the job's operators hand their writes to the epoch and keep
//! them readable until RocksDB has them ([`EpochWrites::committed_behind`]); the source
//! positions are taken at the barrier. One epoch is in flight at most: the next barrier, and
//! every stop, waits for it first, and only then are the operators and source tasks told it
//! committed ([`Job::on_committed`], the change feeds' publication; Kafka's consumer-group
//! offsets). A job at parallelism 1, or with an exactly-once Kafka sink, commits on its own
//! thread as before ([`Job::commits_behind`]). While an epoch is in flight its writes are held
//! twice (the batch being written, the tables' committing layers) beside the next epoch's, so
//! a job's epoch writes take up to about three times [`EPOCH_WRITE_BYTES`] of memory.
//!
//! # Pipelined jobs
//! At parallelism 2 or more a runner runs its job as a pipeline ([`Job::pipelined`]): each
//! operator on a thread of its own, fed by bounded channels, the runner's thread reading the
//! sources into it. The barrier of an epoch then goes through the pipeline with the rows: the
//! source positions are taken as it goes in, each operator hands its writes to the epoch as it
//! passes, and the job's root starts the commit once all have; meanwhile the operators below
//! are already at the next epoch's rows. The notice that an epoch committed travels the same
//! way. A job that cannot commit behind drains its pipeline at each epoch instead and commits
//! as above. The pipeline also drains when the sources go quiet or end and when the runner
//! stops, so a job handed back is whole.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use weir_catalog::RelationKind;

use super::committed::Commits;
use super::driver::{CHECKPOINT_INTERVAL, EPOCH_WRITE_BYTES};
use super::sources::{source_rows_of, SourceRow, SOURCE_BATCH_ROWS, SOURCE_SLICE};
use super::system::JobStats;
use super::Engine;
use crate::error::{Result, WeirError};
use crate::runtime::relation::connector_of;
use crate::runtime::{Job, StreamChunk};
use crate::source::{progress_key, SourceTask, DEAD_LETTER_TABLE, DEAD_LETTER_TOPIC};
use crate::state::{EpochWrites, Store};

/// A job's source tasks, by (job, table).
type Tasks = Vec<((String, String), SourceTask)>;

/// What a runner publishes for the system tables: the job's operators and its sources' rows.
type Published = Arc<Mutex<(JobStats, Vec<SourceRow>)>>;

/// A job running on a thread of its own.
pub struct Runner {
    /// Set to make the runner stop at the end of its current slice.
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Handback>,
    /// What the job showed at its last commit.
    published: Published,
    /// Its source tasks' tables, each with whether its input is bounded.
    pub(super) tables: Vec<(String, bool)>,
}

/// What a runner hands back when it stops.
struct Handback {
    job: Job,
    tasks: Tasks,
    why: Stopped,
}

/// Why a runner stopped.
enum Stopped {
    /// The engine asked.
    Asked,
    /// A source with `'decode.on-error' = 'fail'` met a record it cannot decode.
    Failed(String),
    /// Reading, an operator or the commit failed; the job's state is not to be trusted.
    Error(WeirError),
    /// An `INSERT INTO` job read every source to its end (they are bounded, or it has none:
    /// `INSERT INTO .. VALUES`) and committed its last epoch: Flink's `FINISHED`.
    Finished,
}

impl Runner {
    /// Whether the runner's thread has stopped on its own (failed or erred).
    fn finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// The rows of `weir_sources` the job published at its last commit: its sources' committed
    /// positions.
    pub(super) fn published_sources(&self) -> Vec<SourceRow> {
        self.published.lock().unwrap_or_else(PoisonError::into_inner).1.clone()
    }

    /// Stops the runner and takes its job back.
    fn join(self) -> Handback {
        self.stop.store(true, Ordering::Release);
        match self.thread.join() {
            Ok(handback) => handback,
            // The runner's code catches its errors; a panic in it is a bug, not user input.
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl Engine {
    /// Whether job `name` can run on a thread of its own; see the module docs.
    fn independent(&self, name: &str) -> bool {
        let Some(job) = self.jobs.get(name) else { return false };
        if self.failed.contains_key(name) || self.job_order.iter().any(|other| {
            other != name && self.jobs.get(other).is_some_and(|j| j.reads().contains(&name))
        }) {
            return false;
        }
        job.reads().iter().all(|relation| {
            self.catalog.get(relation).is_some_and(|rel| {
                rel.kind == RelationKind::Table
                    && connector_of(rel) != "table"
                    && [DEAD_LETTER_TABLE, DEAD_LETTER_TOPIC, super::LATE_ROWS_TABLE].iter().all(|o| !rel.options.contains_key(*o))
                    && self.sources.contains_key(&(name.to_string(), relation.to_string()))
            })
        })
    }

    /// Lets every independent job run on a thread of its own, if the engine runs its sources
    /// itself ([`super::driver::start`]); a no-op otherwise, and for jobs already running so.
    pub fn detach_jobs(&mut self) {
        if !self.run_detached {
            return;
        }
        let names: Vec<String> = self.jobs.keys().filter(|n| self.independent(n)).cloned().collect();
        for name in names {
            let Some(job) = self.jobs.remove(&name) else { continue };
            let keys: Vec<(String, String)> = self.sources.keys().filter(|(j, _)| *j == name).cloned().collect();
            let tasks: Tasks = keys.into_iter().filter_map(|k| self.sources.remove(&k).map(|t| (k, t))).collect();
            let published: Published = Arc::new(Mutex::new((JobStats::of(&job), rows_of(&tasks))));
            let tables = tasks.iter().map(|((_, table), task)| (table.clone(), task.bounded())).collect();
            let stop = Arc::new(AtomicBool::new(false));
            let (store, commits) = (Arc::clone(&self.store), Arc::clone(&self.commits));
            let (flag, shown) = (Arc::clone(&stop), Arc::clone(&published));
            let finishes = self.catalog.get(&name).is_some_and(|r| r.kind == RelationKind::SinkJob);
            let spawned = std::thread::Builder::new()
                .name(format!("weir-job-{name}"))
                .spawn(move || run(job, tasks, (&store, &commits), (&flag, finishes), &shown));
            match spawned {
                Ok(thread) => {
                    self.runners.insert(name, Runner { stop, thread, published, tables });
                }
                // The job and its tasks moved into the closure that failed to start: reload
                // them from the last commit.
                Err(e) => {
                    tracing::error!(job = %name, "cannot start the job's thread: {e}; reloading");
                    self.runners_lost = true;
                }
            }
        }
    }

    /// Takes every running job back from its thread (see the module docs), so the engine holds
    /// all jobs with their uncommitted state. A job whose runner failed is FAILED; one whose
    /// runner erred waits to restart from its last commit.
    ///
    /// # Errors
    /// The reload's, when it fails.
    pub fn attach_jobs(&mut self) -> Result<()> {
        let names: Vec<String> = self.runners.keys().cloned().collect();
        self.take_back(names).map(drop)
    }

    /// Takes back the jobs whose runners stopped on their own (failed or erred), and commits a
    /// failure so that it survives a restart. The source thread calls it between slices.
    /// Returns whether the engine reloaded (a runner's thread could not be started; the caller
    /// backs off, as after a failure of its own, before the jobs run again).
    ///
    /// # Errors
    /// The reload's or the commit's.
    pub fn reap_runners(&mut self) -> Result<bool> {
        let names: Vec<String> = self.runners.iter().filter(|(_, r)| r.finished()).map(|(n, _)| n.clone()).collect();
        if names.is_empty() {
            return Ok(false);
        }
        let reloaded = self.take_back(names)?;
        self.commit(EpochWrites::default(), None)?;
        Ok(reloaded)
    }

    /// Takes the jobs of runners `names` back; returns whether the engine reloaded.
    fn take_back(&mut self, names: Vec<String>) -> Result<bool> {
        super::blocking(|| {
            let reload = std::mem::take(&mut self.runners_lost);
            for name in names {
                let Some(runner) = self.runners.remove(&name) else { continue };
                let Handback { job, tasks, why } = runner.join();
                // The job restarts from its last checkpoint after a delay, built again then
                // ([`super::restart`]): what it did since is dropped with it. Its epochs were its
                // own, so nothing else is reloaded: it fails alone.
                if let Stopped::Error(e) = why {
                    self.note_failure(&name, &e.to_string());
                    continue;
                }
                // Dropped with its tasks (its producer, its threads); its state stays committed.
                if let Stopped::Finished = why {
                    tracing::info!(job = %name, "finished: every source read to its end");
                    self.suspended.insert(name.clone());
                    self.finished.insert(name.clone());
                    self.newly_finished.push(name);
                    continue;
                }
                self.jobs.insert(name.clone(), job);
                self.sources.extend(tasks);
                if let Stopped::Failed(error) = why {
                    self.fail_job(&name, error);
                }
            }
            if reload {
                self.reload()?;
            }
            Ok(reload)
        })
    }

    /// Stops every runner and drops what it held (the engine's end: the last commit is what
    /// counts).
    pub(super) fn stop_runners(&mut self) {
        for (_, runner) in std::mem::take(&mut self.runners) {
            drop(runner.join());
        }
    }

    /// Whether every source task has read all of its input: those the engine holds, and those
    /// of the jobs on threads of their own as of their last commit (only bounded sources end).
    ///
    /// # Errors
    /// `Execution` when a job is FAILED (its sources stop reading), with its error.
    pub fn sources_finished(&self) -> Result<bool> {
        if let Some((job, error)) = self.failed.iter().next() {
            return Err(WeirError::execution(format!("job {job} failed: {error}")));
        }
        Ok(self.sources.values().all(SourceTask::finished)
            && self.runners.values().all(|r| {
                r.published.lock().unwrap_or_else(PoisonError::into_inner).1.iter().all(|row| row.finished)
            }))
    }

    /// The jobs running on threads of their own, by name.
    pub fn detached_jobs(&self) -> Vec<String> {
        self.runners.keys().cloned().collect()
    }

    /// What the system tables show of the jobs running detached: their stats by job, and
    /// their sources' rows.
    pub(super) fn detached_stats(&self) -> (BTreeMap<String, JobStats>, Vec<SourceRow>) {
        let mut stats = BTreeMap::new();
        let mut rows = Vec::new();
        for (name, runner) in &self.runners {
            let published = runner.published.lock().unwrap_or_else(PoisonError::into_inner);
            stats.insert(name.clone(), published.0.clone());
            rows.extend(published.1.iter().cloned());
        }
        (stats, rows)
    }
}

/// The rows of `weir_sources` for `tasks`.
fn rows_of(tasks: &Tasks) -> Vec<SourceRow> {
    tasks.iter().flat_map(|((job, table), task)| source_rows_of(job, table, task)).collect()
}

/// The runner's loop: slices of reading, a commit every [`CHECKPOINT_INTERVAL`] or
/// [`EPOCH_WRITE_BYTES`] of state writes (or when the sources go quiet or end), a short pause
/// when nothing is available, until asked to stop.
fn run(
    mut job: Job,
    mut tasks: Tasks,
    (store, commits): (&Arc<Store>, &Arc<Commits>),
    (stop, finishes): (&AtomicBool, bool),
    published: &Published,
) -> Handback {
    let mut last_commit = Instant::now();
    let mut dirty = false;
    let mut in_flight = None;
    let why = loop {
        if in_flight.as_mut().is_some_and(InFlight::finished) {
            if let Err(e) = land(&mut tell(&mut job), &mut tasks, &mut in_flight, published) {
                break Stopped::Error(e);
            }
        }
        if stop.load(Ordering::Acquire) {
            break Stopped::Asked;
        }
        let read = if job.parallelism() > 1 {
            let epochs = Epochs { finishes, commits, in_flight: &mut in_flight, last_commit: &mut last_commit, published };
            read_pipelined(&mut job, &mut tasks, (store, stop), epochs)
        } else {
            let mut push = |table: &str, batch: Option<StreamChunk>, watermark: Option<i64>| {
                if let Some(chunk) = batch {
                    job.push(table, &chunk, store)?;
                }
                if let Some(wm) = watermark {
                    job.on_watermark(table, wm, store)?;
                }
                drop(job.take_late_rows());
                Ok(())
            };
            read_slice(&mut tasks, &mut push)
        };
        let step = match read {
            Ok(step) => step,
            Err(e) => break Stopped::Error(e),
        };
        if let Some(error) = tasks.iter().find_map(|(_, t)| t.failure.clone()) {
            break Stopped::Failed(error);
        }
        dirty |= step.moved;
        let due = last_commit.elapsed() >= CHECKPOINT_INTERVAL || job.pending_bytes() >= EPOCH_WRITE_BYTES;
        if dirty && (step.idle || step.finished || due) {
            if let Err(e) = commit(&mut job, &mut tasks, (store, commits), &mut in_flight, published) {
                break Stopped::Error(e);
            }
            dirty = false;
            last_commit = Instant::now();
        }
        // Everything read was committed (a pipelined job's epoch has landed too).
        if finishes && step.finished && !dirty && in_flight.is_none() {
            break Stopped::Finished;
        }
        if step.idle {
            std::thread::sleep(IDLE_PAUSE);
        }
    };
    // The job goes back with its last epoch committed, or, when that commit failed, is
    // reloaded whatever else stopped it (a FAILED job's state must not go on without it).
    // A pipeline's failure drops the barrier in flight, so the commit's loss is not the cause
    // to report then: the failure that stopped the job is.
    let why = match (land(&mut tell(&mut job), &mut tasks, &mut in_flight, published), why) {
        (Err(_), Stopped::Error(cause)) => Stopped::Error(cause),
        (Err(e), _) => Stopped::Error(e),
        (Ok(()), why) => why,
    };
    Handback { job, tasks, why }
}

/// How long a runner waits before it reads its sources again when they had nothing.
const IDLE_PAUSE: Duration = Duration::from_millis(20);

/// What a barrier saw: each task's positions, and what the system tables are to show once
/// its epoch is committed (the job's figures come with the commit's outcome when the barrier
/// went through a pipelined job).
struct AtBarrier {
    positions: Vec<Vec<u64>>,
    stats: Option<JobStats>,
    sources: Vec<SourceRow>,
}

/// How an epoch's commit ended: its number, and the job's figures at its barrier when the
/// root of a pipelined job completed the barrier.
type Outcome = Result<(u64, Option<JobStats>)>;

/// An epoch committing behind the job.
struct InFlight {
    /// Where the commit's thread sends its outcome.
    done: Receiver<Outcome>,
    /// The outcome, once it arrived.
    outcome: Option<Outcome>,
    barrier: AtBarrier,
}

impl InFlight {
    /// Whether the commit has ended (or never will: its barrier was dropped by a pipeline that
    /// failed, or its thread panicked).
    fn finished(&mut self) -> bool {
        if self.outcome.is_none() {
            self.outcome = match self.done.try_recv() {
                Ok(outcome) => Some(outcome),
                Err(TryRecvError::Empty) => return false,
                Err(TryRecvError::Disconnected) => Some(Err(lost_commit())),
            };
        }
        true
    }

    /// Waits for the commit's outcome.
    fn wait(mut self) -> (Outcome, AtBarrier) {
        let outcome = match self.outcome.take() {
            Some(outcome) => outcome,
            None => self.done.recv().unwrap_or_else(|_| Err(lost_commit())),
        };
        (outcome, self.barrier)
    }
}

fn lost_commit() -> WeirError {
    WeirError::internal("an epoch's commit did not end: its thread panicked, or the job's pipeline failed before it")
}

/// Commits `writes` on a thread of its own, sending the outcome (with `stats`) to `done`.
fn commit_behind(commits: &Arc<Commits>, writes: EpochWrites, stats: Option<JobStats>, done: SyncSender<Outcome>) {
    let commits = Arc::clone(commits);
    let failed = done.clone();
    let spawned = std::thread::Builder::new().name("weir-commit".into()).spawn(move || {
        // The runner stopped waiting only when it failed itself.
        let _ = done.send(commits.commit(writes, None).map(|epoch| (epoch, stats)));
    });
    if let Err(e) = spawned {
        let _ = failed.send(Err(WeirError::internal(format!("cannot start an epoch's commit thread: {e}"))));
    }
}

/// How to tell a job's operators that an epoch committed: `job` held by the runner's thread.
fn tell(job: &mut Job) -> impl FnMut(u64) -> Result<()> + '_ {
    |epoch| {
        job.on_committed(epoch);
        Ok(())
    }
}

/// Waits for the epoch in flight, if any, then tells the job's operators (`tell`) and source
/// tasks it committed, and publishes what its barrier saw.
///
/// # Errors
/// The commit's, `tell`'s.
fn land(
    tell: &mut dyn FnMut(u64) -> Result<()>,
    tasks: &mut Tasks,
    in_flight: &mut Option<InFlight>,
    published: &Published,
) -> Result<()> {
    let Some(f) = in_flight.take() else { return Ok(()) };
    let (outcome, barrier) = f.wait();
    let (epoch, stats) = outcome?;
    committed(tell, tasks, epoch, (barrier, stats), published)
}

/// Tells the job's operators (`tell`) and source tasks that epoch `epoch`, whose barrier saw
/// `barrier` (and the job's figures `stats`, if the barrier carried them), is committed, and
/// publishes what the barrier saw.
fn committed(
    tell: &mut dyn FnMut(u64) -> Result<()>,
    tasks: &mut Tasks,
    epoch: u64,
    (barrier, stats): (AtBarrier, Option<JobStats>),
    published: &Published,
) -> Result<()> {
    for ((_, task), positions) in tasks.iter_mut().zip(barrier.positions) {
        task.on_committed_at(&positions);
    }
    tell(epoch)?;
    let stats = stats.or(barrier.stats).unwrap_or_default();
    *published.lock().unwrap_or_else(PoisonError::into_inner) = (stats, barrier.sources);
    Ok(())
}

/// Puts the tasks' progress (positions, counts) into an epoch's `writes`; returns what the
/// barrier saw of them.
fn take_positions(tasks: &mut Tasks, writes: &mut EpochWrites) -> AtBarrier {
    let mut positions = Vec::with_capacity(tasks.len());
    for ((name, table), task) in tasks.iter_mut() {
        let bytes = serde_json::to_vec(&task.progress).expect("progress serializes");
        writes.put_meta(&progress_key(name, table), &bytes);
        positions.push(task.positions());
        // Counted in the progress; an independent job's tables have no dead-letter place.
        task.dead_letters.clear();
    }
    AtBarrier { positions, stats: None, sources: rows_of(tasks) }
}

/// What one slice of reading, or several, did.
struct Slice {
    /// Whether rows or a watermark went into the job.
    moved: bool,
    /// Whether the last slice found nothing to read (the sources are quiet).
    idle: bool,
    /// Whether every task has read all of its (bounded) input.
    finished: bool,
}

/// Where a batch or watermark a task read goes: `(table, batch, watermark)`.
type Push<'a> = dyn FnMut(&str, Option<StreamChunk>, Option<i64>) -> Result<()> + 'a;

/// Reads the tasks round-robin for up to [`SOURCE_SLICE`] (as [`Engine::poll_sources`] does for
/// the jobs the engine holds), handing their batches and watermarks to `push`.
fn read_slice(tasks: &mut Tasks, push: &mut Push<'_>) -> Result<Slice> {
    let start = Instant::now();
    let mut moved = false;
    let mut progressed = true;
    while progressed && start.elapsed() < SOURCE_SLICE {
        progressed = false;
        for ((_, table), task) in tasks.iter_mut() {
            let next = task.next(SOURCE_BATCH_ROWS)?;
            if task.failure.is_some() {
                return Ok(Slice { moved, idle: !moved, finished: false });
            }
            let Some((batch, watermark)) = next else { continue };
            progressed = true;
            moved = true;
            push(table, batch, watermark)?;
        }
    }
    Ok(Slice { moved, idle: !moved, finished: tasks.iter().all(|(_, t)| t.bounded() && t.finished()) })
}

/// A runner's epochs: where they commit, the one in flight, when the last was cut, and where
/// what each barrier saw is published.
struct Epochs<'a> {
    /// Whether the job finishes once its sources have ended (an `INSERT INTO` job).
    finishes: bool,
    commits: &'a Arc<Commits>,
    in_flight: &'a mut Option<InFlight>,
    last_commit: &'a mut Instant,
    published: &'a Published,
}

/// At parallelism 2 or more: reads slices into the job run as a pipeline ([`Job::pipelined`],
/// its operators on threads of their own) until a source or a stage fails or the runner is
/// asked to stop; returns once the pipeline has drained.
///
/// The pipeline stays up while the sources are quiet or have ended: its stages wait on their
/// channels and the feeder reads the sources again every [`IDLE_PAUSE`], landing the epoch in
/// flight when its commit ends. (Draining the pipeline and starting it again at each pause
/// cost an idle job at parallelism 2 about 0.5-0.8% of a core in thread starts.)
///
/// Epochs are cut by barriers that go through the pipeline with the rows
/// ([`crate::runtime::job::Feeder::barrier`]) every [`CHECKPOINT_INTERVAL`] or
/// [`EPOCH_WRITE_BYTES`]: the tasks' positions are taken as the barrier goes in, the job's root
/// starts the epoch's commit behind the job once every operator has added its writes, and the
/// next barrier first waits for that commit to land (one epoch in flight, as at parallelism 1)
/// and sends the notice that it committed through the pipeline. A job that cannot commit
/// behind ([`Job::commits_behind`]) returns when an epoch is due instead, so the caller commits
/// it with the pipeline drained. Late rows are counted by their operators; an independent job
/// has no side table to send them to; such a job also returns when its sources go quiet or end
/// with rows in the epoch, for its caller to commit.
fn read_pipelined(job: &mut Job, tasks: &mut Tasks, (store, stop): (&Store, &AtomicBool), epochs: Epochs<'_>) -> Result<Slice> {
    let Epochs { finishes, commits, in_flight, last_commit, published } = epochs;
    let in_band = job.commits_behind();
    job.pipelined(store, |feeder| {
        let mut moved = false;
        loop {
            let mut push = |table: &str, batch: Option<StreamChunk>, watermark: Option<i64>| {
                if let Some(chunk) = batch {
                    feeder.push(table, &chunk)?;
                }
                if let Some(wm) = watermark {
                    feeder.watermark(table, wm)?;
                }
                Ok(())
            };
            let slice = read_slice(tasks, &mut push)?;
            moved |= slice.moved;
            let quiet = slice.idle || slice.finished;
            // Due, or the sources went quiet with rows in the epoch: cut it (as at parallelism 1).
            let cut = moved && (quiet || last_commit.elapsed() >= CHECKPOINT_INTERVAL || feeder.pending_bytes() >= EPOCH_WRITE_BYTES);
            let failed = tasks.iter().any(|(_, t)| t.failure.is_some());
            if failed || feeder.stopped() || stop.load(Ordering::Acquire) || (cut && !in_band) {
                return Ok(Slice { moved, ..slice });
            }
            if cut {
                land(&mut |epoch| feeder.committed(epoch), tasks, in_flight, published)?;
                let mut writes = EpochWrites::committed_behind();
                let barrier = take_positions(tasks, &mut writes);
                let (done, outcome) = sync_channel(1);
                let commits = Arc::clone(commits);
                feeder.barrier(
                    writes,
                    Box::new(move |writes, nodes| commit_behind(&commits, writes, Some(JobStats::of_nodes(nodes)), done)),
                )?;
                *in_flight = Some(InFlight { done: outcome, outcome: None, barrier });
                *last_commit = Instant::now();
                moved = false;
            }
            if quiet {
                if in_flight.as_mut().is_some_and(InFlight::finished) {
                    land(&mut |epoch| feeder.committed(epoch), tasks, in_flight, published)?;
                }
                // Its sources ended and their last epoch landed: the job is done.
                if finishes && slice.finished && !moved && in_flight.is_none() {
                    return Ok(Slice { moved, ..slice });
                }
                std::thread::sleep(IDLE_PAUSE);
            }
        }
    })
}

/// Commits the job's epoch: its operators' writes and its tasks' positions, atomically;
/// behind the job (see the module docs) unless an operator says no.
fn commit(
    job: &mut Job,
    tasks: &mut Tasks,
    (store, commits): (&Arc<Store>, &Arc<Commits>),
    in_flight: &mut Option<InFlight>,
    published: &Published,
) -> Result<()> {
    land(&mut tell(job), tasks, in_flight, published)?;
    let behind = job.commits_behind();
    let mut writes = if behind { EpochWrites::committed_behind() } else { EpochWrites::default() };
    job.on_barrier(store, &mut writes)?;
    let mut barrier = take_positions(tasks, &mut writes);
    barrier.stats = Some(JobStats::of(job));
    if !behind {
        let epoch = commits.commit(writes, None)?;
        return committed(&mut tell(job), tasks, epoch, (barrier, None), published);
    }
    let (done, outcome) = sync_channel(1);
    commit_behind(commits, writes, None, done);
    *in_flight = Some(InFlight { done: outcome, outcome: None, barrier });
    Ok(())
}
