//! Restarting a job that stopped on an error it may recover from, with exponential backoff.
//!
//! A job restarts from its last checkpoint (its committed state and source positions) when its
//! sources cannot be opened (the Kafka brokers are unreachable at a server's start, or when
//! the job comes back after an error), or when reading or running it fails (its brokers went
//! away: librdkafka reports all brokers down). Until its sources open again the job is
//! `RESTARTING` in `SHOW JOBS`, with the last error and when it tries again; its committed rows
//! stay readable and nothing it read is lost or read twice, since it resumes from the committed
//! positions. Neither the server's start nor the other jobs wait for it.
//!
//! The delays are Flink's `exponential-delay` restart strategy with its defaults: 1 s after the
//! first failure, times 1.5 after each failure that follows, at most 1 minute; a job that has
//! run for an hour since its last restart starts again at 1 s
//! (`restart-strategy.exponential-delay.*`: `initial-backoff` 1 s, `backoff-multiplier` 1.5,
//! `max-backoff` 1 min, `reset-backoff-threshold` 1 h). Unlike Flink the attempts are not
//! bounded: a job never gives up on its own, as a Kafka consumer never does.
//!
//! A source that opens can take long to fail (librdkafka's metadata request waits for its
//! timeout when no broker answers), so a due restart opens its job's sources without the
//! engine's lock ([`Engine::due_restarts`], [`PendingOpen::open`]) and the engine only installs
//! them ([`Engine::install_restarted`]): statements never wait for an unreachable cluster.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::Engine;
use crate::error::Result;
use crate::runtime::relation::connector_of;
use crate::source::{progress_key, SourceProgress, SourceTask};
use weir_catalog::{Relation, RelationKind};

/// The first delay before a failed job restarts (Flink's `initial-backoff`).
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// Each further consecutive failure multiplies the delay by this (Flink's `backoff-multiplier`).
pub const BACKOFF_MULTIPLIER: f64 = 1.5;
/// The longest delay (Flink's `max-backoff`).
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A job that ran this long since its last restart counts its next failure as the first
/// (Flink's `reset-backoff-threshold`).
pub const RESET_BACKOFF_THRESHOLD: Duration = Duration::from_secs(3600);

/// The failures of a job that has failed since this process started, and when it restarts.
#[derive(Debug, Clone)]
pub struct Restart {
    /// The last failure's error.
    pub error: String,
    /// When it happened, ms since the Unix epoch.
    pub failed_at_ms: i64,
    /// Failures since the job last ran [`RESET_BACKOFF_THRESHOLD`] without one.
    pub consecutive: u32,
    /// Every restart since this process started (Flink's `numRestarts`).
    pub restarts: u64,
    /// When the job tries to open its sources again; `None` once it runs again.
    pub retry_at: Option<Instant>,
    /// Since when the job runs again (its last successful restart).
    pub running_since: Instant,
}

impl Restart {
    /// Whether the job waits to restart (`RESTARTING`).
    pub fn waiting(&self) -> bool {
        self.retry_at.is_some()
    }

    /// `SHOW JOBS`'s error of a job waiting to restart: the error, the attempt, the delay left.
    pub fn describe(&self) -> String {
        let left = self.retry_at.map_or(Duration::ZERO, |at| at.saturating_duration_since(Instant::now()));
        let when = if left.is_zero() { "trying now".to_string() } else { format!("in {:.1} s", left.as_secs_f64()) };
        format!("{} (restart {} from the last checkpoint: {when})", self.error, self.restarts)
    }
}

/// The delay before restart number `consecutive` (1 for the first failure) of a job.
pub fn backoff(consecutive: u32) -> Duration {
    let factor = BACKOFF_MULTIPLIER.powi(consecutive.saturating_sub(1).min(64) as i32);
    INITIAL_BACKOFF.mul_f64(factor).min(MAX_BACKOFF)
}

/// What opening a restarting job's sources needs, taken under the engine's read lock so that
/// the opening itself runs without it.
pub struct PendingOpen {
    pub job: String,
    /// Each connector table the job reads, with its committed progress.
    tables: Vec<(Relation, Option<SourceProgress>)>,
    /// The read-ahead of the job's sources (parallelism 2 or more).
    read_ahead: Option<usize>,
}

impl PendingOpen {
    /// Opens every source task of the job, or none.
    ///
    /// # Errors
    /// The first reader's that cannot open (its brokers unreachable, say).
    pub fn open(&self) -> Result<Vec<((String, String), SourceTask)>> {
        self.tables
            .iter()
            .map(|(rel, progress)| {
                let task = SourceTask::open(&self.job, rel, progress.clone(), self.read_ahead)?;
                Ok(((self.job.clone(), rel.name.clone()), task))
            })
            .collect()
    }
}

impl Engine {
    /// Records that job `job` failed with `error`: it restarts from its last checkpoint after
    /// [`backoff`] (counted from its consecutive failures).
    pub fn note_failure(&mut self, job: &str, error: &str) {
        let now = Instant::now();
        let entry = self.restarting.entry(job.to_string()).or_insert_with(|| Restart {
            error: String::new(),
            failed_at_ms: 0,
            consecutive: 0,
            restarts: 0,
            retry_at: None,
            running_since: now,
        });
        if entry.retry_at.is_none() && now.duration_since(entry.running_since) >= RESET_BACKOFF_THRESHOLD {
            entry.consecutive = 0;
        }
        entry.consecutive += 1;
        entry.restarts += 1;
        entry.error = error.to_string();
        entry.failed_at_ms = crate::observe::now_ms();
        let delay = backoff(entry.consecutive);
        entry.retry_at = Some(now + delay);
        tracing::warn!(job, "job failed: {error}; restarting from the last checkpoint in {:.1} s", delay.as_secs_f64());
    }

    /// Whether job `job` waits to restart (`RESTARTING`).
    pub fn waiting_to_restart(&self, job: &str) -> bool {
        self.restarting.get(job).is_some_and(Restart::waiting)
    }

    /// The jobs due to restart now, with what opening their sources needs.
    ///
    /// # Errors
    /// `Storage` when a source's committed progress cannot be read.
    pub fn due_restarts(&self) -> Result<Vec<PendingOpen>> {
        let now = Instant::now();
        self.restarting
            .iter()
            .filter(|(job, r)| r.retry_at.is_some_and(|at| at <= now) && self.jobs.contains_key(*job))
            .map(|(job, _)| self.pending_open(job))
            .collect()
    }

    /// What opening the sources of job `job` needs: its connector tables and their progress.
    fn pending_open(&self, job: &str) -> Result<PendingOpen> {
        let reads: Vec<String> = self.jobs.get(job).map(|j| j.reads().iter().map(|r| r.to_string()).collect()).unwrap_or_default();
        let mut tables = Vec::new();
        for table in reads {
            let Some(rel) = self.catalog.get(&table) else { continue };
            if rel.kind != RelationKind::Table || connector_of(rel) == "table" {
                continue;
            }
            let progress = match self.store.get_meta(&progress_key(job, &table))? {
                Some(bytes) => Some(serde_json::from_slice::<SourceProgress>(&bytes).map_err(|e| {
                    crate::error::WeirError::storage(format!("source progress of {job}/{table}: {e}"))
                })?),
                None => None,
            };
            tables.push((rel.clone(), progress));
        }
        let read_ahead = self.jobs.get(job).is_some_and(|j| j.parallelism() > 1).then_some(super::SOURCE_BATCH_ROWS);
        Ok(PendingOpen { job: job.to_string(), tables, read_ahead })
    }

    /// Installs the outcome of opening a restarting job's sources ([`PendingOpen::open`]): the
    /// job runs again, or waits longer with the new error. Nothing happens when the job no
    /// longer waits (dropped, suspended, resumed or reloaded meanwhile).
    pub fn install_restarted(&mut self, job: &str, opened: Result<Vec<((String, String), SourceTask)>>) {
        let still_waiting = self.waiting_to_restart(job)
            && self.jobs.contains_key(job)
            && !self.failed.contains_key(job)
            && !self.suspended.contains(job)
            && !self.sources.keys().any(|(j, _)| j == job);
        if !still_waiting {
            return;
        }
        match opened {
            Ok(tasks) => {
                self.sources.extend(tasks);
                self.mark_running(job);
            }
            Err(e) => self.note_failure(job, &e.to_string()),
        }
    }

    /// Job `job` opened its sources: it runs again.
    fn mark_running(&mut self, job: &str) {
        if let Some(entry) = self.restarting.get_mut(job) {
            if entry.retry_at.take().is_some() {
                entry.running_since = Instant::now();
                tracing::info!(job, restarts = entry.restarts, "job restarted from its last checkpoint");
            }
        }
    }

    /// At load: opens the sources of job `job` unless it waits to restart; a failure to open
    /// them makes it wait ([`Engine::note_failure`]) instead of failing the load.
    ///
    /// # Errors
    /// `Storage` when a source's committed progress cannot be read.
    pub(super) fn open_sources_or_wait(&mut self, job: &str) -> Result<()> {
        if self.waiting_to_restart(job) {
            return Ok(());
        }
        match self.pending_open(job)?.open() {
            Ok(tasks) => {
                self.sources.extend(tasks);
                self.mark_running(job);
            }
            Err(e) => self.note_failure(job, &e.to_string()),
        }
        Ok(())
    }

    /// The restart figures of every job that failed since this process started.
    pub fn restarts(&self) -> BTreeMap<String, Restart> {
        self.restarting.clone()
    }
}
