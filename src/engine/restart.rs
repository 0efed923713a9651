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
//! timeout when no broker answers), so a due restart opens its job's sources on a thread of its
//! own, without the engine's lock ([`Engine::take_due_restarts`], [`PendingOpen::open`]), and
//! the engine only installs them ([`Engine::install_restarted`]): statements and the other
//! jobs never wait for an unreachable cluster.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::Engine;
use crate::error::{ErrorKind, Result, WeirError};
use crate::runtime::relation::connector_of;
use crate::source::{SourceProgress, SourceTask};
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
    /// Whether its sources are being opened now ([`Engine::take_due_restarts`]).
    pub opening: bool,
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
        let when = if self.opening || left.is_zero() { "trying now".to_string() } else { format!("in {:.1} s", left.as_secs_f64()) };
        format!("{} (restart {} from the last checkpoint: {when})", self.error, self.restarts)
    }
}

/// The delay before restart number `consecutive` (1 for the first failure) of a job.
pub fn backoff(consecutive: u32) -> Duration {
    let factor = BACKOFF_MULTIPLIER.powi(consecutive.saturating_sub(1).min(64) as i32);
    INITIAL_BACKOFF.mul_f64(factor).min(MAX_BACKOFF)
}

/// What opening a restarting job's sources needs, taken under the engine's lock so that the
/// opening itself runs without it.
pub struct PendingOpen {
    pub job: String,
    /// Each connector table the job reads, with its committed progress.
    tables: Vec<(Relation, Option<SourceProgress>)>,
    /// The read-ahead of the job's sources (parallelism 2 or more).
    read_ahead: Option<usize>,
    /// For a job not built yet (its sink's cluster was unreachable, or it failed and the
    /// engine reloaded): the Kafka tables it reads or writes, whose clusters must answer
    /// before it is built under the engine's lock.
    probe: Option<Vec<Relation>>,
}

/// What [`PendingOpen::open`] got: the job's source tasks, or, for a job not built yet, that its
/// clusters answer.
pub enum Opened {
    Tasks(Vec<((String, String), SourceTask)>),
    Reachable,
}

impl PendingOpen {
    /// Opens every source task of the job, or none; for a job not built yet, asks each of its
    /// Kafka tables' clusters for the topic instead.
    ///
    /// # Errors
    /// The first reader's or cluster's that does not answer (its brokers unreachable, say).
    pub fn open(&self) -> Result<Opened> {
        if let Some(tables) = &self.probe {
            tables.iter().try_for_each(probe)?;
            return Ok(Opened::Reachable);
        }
        self.open_tasks().map(Opened::Tasks)
    }

    /// The definitions of the tables the opening reads (their options as they were when the
    /// restart was due), for [`Engine::install_restarted`] to tell whether they changed since.
    pub fn relations(&self) -> Vec<Relation> {
        let read = self.tables.iter().map(|(rel, _)| rel);
        read.chain(self.probe.iter().flatten()).cloned().collect()
    }

    /// Opens every source task of the job, or none.
    fn open_tasks(&self) -> Result<Vec<((String, String), SourceTask)>> {
        self.tables
            .iter()
            .map(|(rel, progress)| {
                let task = SourceTask::open(&self.job, rel, progress.clone(), self.read_ahead)?;
                Ok(((self.job.clone(), rel.name.clone()), task))
            })
            .collect()
    }
}

/// Asks the cluster of Kafka table `rel` for its topic's metadata, as its sink would open.
///
/// # Errors
/// `External` when the cluster does not answer within the connector's 10 s operation timeout,
/// or the topic does not exist; an option error when the table's options do not make a client.
fn probe(rel: &Relation) -> Result<()> {
    let options = rel.options.iter().filter(|(k, _)| !k.starts_with("sink.")).map(|(k, v)| (k.clone(), v.clone()));
    let config = weir_connectors::kafka::KafkaSinkConfig::from_options(&options.collect())
        .map_err(|e| WeirError::option(format!("table {}: {e}", rel.name)))?;
    weir_connectors::kafka::KafkaWriter::open(&config)
        .map_err(|e| WeirError::new(ErrorKind::External(format!("table {}: {e}", rel.name))))?;
    Ok(())
}

/// [`probe`]s every table of `tables` at once, each on a thread of its own, so that a start
/// with many tables on an unreachable cluster waits one timeout, not one per table. Returns
/// the error of each table that did not answer, by name.
fn probe_all(tables: &[Relation]) -> BTreeMap<String, String> {
    std::thread::scope(|scope| {
        let probes: Vec<_> = tables.iter().map(|rel| (rel, scope.spawn(move || probe(rel)))).collect();
        probes
            .into_iter()
            .filter_map(|(rel, probe)| {
                let error = match probe.join() {
                    Ok(Ok(())) => return None,
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => format!("table {}: probing its cluster panicked", rel.name),
                };
                Some((rel.name.clone(), error))
            })
            .collect()
    })
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
            opening: false,
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
        entry.opening = false;
        tracing::warn!(job, "job failed: {error}; restarting from the last checkpoint in {:.1} s", delay.as_secs_f64());
    }

    /// Job `job` no longer waits to restart (it is suspended): its restarts stay counted, as
    /// Flink's `numRestarts` (a counter, which a reset would make Prometheus read as one), and a
    /// later failure backs off from the first delay again.
    pub fn set_aside_failure(&mut self, job: &str) {
        if let Some(entry) = self.restarting.get_mut(job) {
            entry.retry_at = None;
            entry.opening = false;
            entry.consecutive = 0;
        }
    }

    /// Whether job `job` waits to restart (`RESTARTING`).
    pub fn waiting_to_restart(&self, job: &str) -> bool {
        self.restarting.get(job).is_some_and(Restart::waiting)
    }

    /// The jobs due to restart now, with what opening their sources needs; each is marked as
    /// being opened until [`Engine::install_restarted`] hears how that went.
    ///
    /// # Errors
    /// `Storage` when a source's committed progress cannot be read.
    pub fn take_due_restarts(&mut self) -> Result<Vec<PendingOpen>> {
        let now = Instant::now();
        let due: Vec<String> = self
            .restarting
            .iter()
            .filter(|(job, r)| {
                !r.opening
                    && r.retry_at.is_some_and(|at| at <= now)
                    && self.catalog.get(job).is_some()
                    && !self.failed.contains_key(*job)
                    && !self.suspended.contains(*job)
            })
            .map(|(job, _)| job.clone())
            .collect();
        let pending = due
            .iter()
            .map(|job| match self.jobs.contains_key(job) {
                true => self.pending_open(job),
                false => Ok(self.pending_build(job)),
            })
            .collect::<Result<Vec<_>>>()?;
        for job in &due {
            if let Some(entry) = self.restarting.get_mut(job) {
                entry.opening = true;
            }
        }
        Ok(pending)
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
            tables.push((rel.clone(), self.committed_progress(job, &table)?));
        }
        let read_ahead = self.jobs.get(job).is_some_and(|j| j.parallelism() > 1).then_some(super::SOURCE_BATCH_ROWS);
        Ok(PendingOpen { job: job.to_string(), tables, read_ahead, probe: None })
    }

    /// What a job not built yet needs before it is: the Kafka tables it reads or writes.
    fn pending_build(&self, job: &str) -> PendingOpen {
        PendingOpen { job: job.to_string(), tables: Vec::new(), read_ahead: None, probe: Some(self.kafka_tables_of(job)) }
    }

    /// The Kafka tables job `job` reads or writes (named in its statement), whose clusters must
    /// answer before it is built.
    pub(super) fn kafka_tables_of(&self, job: &str) -> Vec<Relation> {
        self.catalog
            .get(job)
            .map(|rel| {
                rel.depends_on
                    .iter()
                    .filter_map(|name| self.catalog.get(name))
                    .filter(|r| r.kind == RelationKind::Table && matches!(connector_of(r), "kafka" | "upsert-kafka"))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Installs the outcome of opening a restarting job's sources ([`PendingOpen::open`]): the
    /// job runs again (a job not built yet is built now, its clusters having answered), or
    /// waits longer with the new error. Nothing happens when the job no longer waits (dropped,
    /// suspended, resumed or reloaded meanwhile), nor when a table of `used` (the definitions
    /// the opening read, [`PendingOpen::relations`]) changed meanwhile (`ALTER TABLE .. SET`):
    /// what was opened or asked used the old options, and the next attempt uses the new.
    pub fn install_restarted(&mut self, job: &str, used: &[Relation], opened: Result<Opened>) {
        if let Some(entry) = self.restarting.get_mut(job) {
            entry.opening = false;
        }
        if used.iter().any(|rel| self.catalog.get(&rel.name) != Some(rel)) {
            return;
        }
        let still_waiting = self.waiting_to_restart(job)
            && self.catalog.get(job).is_some()
            && !self.failed.contains_key(job)
            && !self.suspended.contains(job)
            && !self.sources.keys().any(|(j, _)| j == job);
        if !still_waiting {
            return;
        }
        match opened {
            Ok(Opened::Tasks(tasks)) if self.jobs.contains_key(job) => {
                self.sources.extend(tasks);
                self.mark_running(job);
            }
            Ok(Opened::Reachable) if !self.jobs.contains_key(job) => {
                if let Err(e) = self.build_restarted(job) {
                    self.note_failure(job, &e.to_string());
                }
            }
            // Built or dropped by a reload meanwhile: the next attempt looks again.
            Ok(_) => self.note_failure(job, "the job changed while it restarted"),
            Err(e) => self.note_failure(job, &e.to_string()),
        }
    }

    /// Builds job `job` again over its state tables and opens its sources (its clusters answer
    /// now). A job that no longer plans the same way is FAILED, as at a server's start.
    fn build_restarted(&mut self, job: &str) -> Result<()> {
        let Some(rel) = self.catalog.get(job).cloned() else { return Ok(()) };
        let built = match self.restart_job(&rel) {
            Ok(built) => built,
            Err(e) if matches!(e.kind(), ErrorKind::External(_)) => return Err(e),
            Err(e) => {
                let error = format!("cannot restart {job}: {e}; drop it and create it again");
                tracing::error!("{error}");
                self.restarting.remove(job);
                self.failed.insert(job.to_string(), error);
                return Ok(());
            }
        };
        self.jobs.insert(job.to_string(), built);
        self.refresh_job_order();
        let tasks = self.pending_open(job)?.open_tasks()?;
        self.sources.extend(tasks);
        self.mark_running(job);
        Ok(())
    }

    /// Starts jobs `jobs` again from their last checkpoint, now, with the catalog as it is (a
    /// table's options changed: `ALTER TABLE .. SET`). The caller has just committed, so the
    /// checkpoint holds all they did. The clusters of their Kafka tables are asked first, all
    /// at once ([`probe_all`]); a job whose cluster does not answer, or that cannot open its
    /// connectors, waits to restart ([`Engine::note_failure`]). A job waiting to restart
    /// tries at once too (so a FLUSH right after sees it running); a FAILED or suspended job
    /// is left as it is.
    pub fn restart_now(&mut self, jobs: &[String]) {
        let jobs: Vec<&String> = jobs
            .iter()
            .filter(|job| !self.failed.contains_key(*job) && !self.suspended.contains(*job) && self.catalog.get(job).is_some())
            .collect();
        let unreachable = self.unreachable_jobs(jobs.iter().map(|j| j.as_str()));
        for job in jobs {
            self.unload(job);
            let built = match unreachable.get(job) {
                Some(error) => Err(error.clone()),
                None => self.build_restarted(job).map_err(|e| e.to_string()),
            };
            if let Err(error) = built {
                self.note_failure(job, &error);
            }
        }
        self.refresh_job_order();
    }

    /// The jobs of `jobs` whose Kafka tables' clusters do not answer, each with the first such
    /// table's error. Every table is asked once, all at once ([`probe_all`]).
    pub(super) fn unreachable_jobs<'a>(&self, jobs: impl Iterator<Item = &'a str>) -> BTreeMap<String, String> {
        let tables_of: Vec<(&str, Vec<Relation>)> = jobs.map(|job| (job, self.kafka_tables_of(job))).collect();
        let mut tables: Vec<Relation> = tables_of.iter().flat_map(|(_, t)| t.iter().cloned()).collect();
        tables.sort_by(|a, b| a.name.cmp(&b.name));
        tables.dedup_by(|a, b| a.name == b.name);
        if tables.is_empty() {
            return BTreeMap::new();
        }
        let unreachable = probe_all(&tables);
        tables_of
            .into_iter()
            .filter_map(|(job, tables)| Some((job.to_string(), tables.iter().find_map(|t| unreachable.get(&t.name))?.clone())))
            .collect()
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
        match self.pending_open(job)?.open_tasks() {
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
