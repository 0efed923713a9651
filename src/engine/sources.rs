//! The engine's side of connector sources: opening a [`SourceTask`] for each connector table a
//! job reads, pushing their batches and watermarks into the jobs, and storing their progress
//! with every epoch (see [`crate::source`]).

use std::time::{Duration, Instant};

use arrow::array::{BinaryArray, Int32Array, Int64Array, StringArray};
use weir_catalog::RelationKind;

use super::Engine;
use crate::error::{Result, WeirError};
use crate::runtime::relation::connector_of;
use crate::runtime::StreamChunk;
use crate::source::{has_source, progress_key, SourceProgress, SourceTask, DEAD_LETTER_TABLE, DEAD_LETTER_TOPIC};
use crate::state::EpochWrites;

/// Rows per source batch.
pub const SOURCE_BATCH_ROWS: usize = 8192;

/// What one [`Engine::poll_sources`] call did.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct SourceStep {
    /// Rows pushed into jobs.
    pub rows: u64,
    /// Whether any task's watermark moved.
    pub watermark_moved: bool,
    /// Whether every task has read all of its (bounded) input.
    pub all_finished: bool,
}

impl Engine {
    /// Opens a source task for every connector table job `job` reads directly, resuming from
    /// the committed progress.
    ///
    /// # Errors
    /// `Unsupported` for a connector without a source runtime; the reader's errors.
    pub fn open_sources(&mut self, job: &str, tables: &[String]) -> Result<()> {
        self.open_sources_from(job, tables, std::collections::BTreeMap::new())
    }

    /// [`Engine::open_sources`], a table without committed progress starting from its entry in
    /// `starts` if it has one (a savepoint's positions), else from its startup mode.
    ///
    /// # Errors
    /// As [`Engine::open_sources`].
    pub fn open_sources_from(
        &mut self,
        job: &str,
        tables: &[String],
        mut starts: std::collections::BTreeMap<String, SourceProgress>,
    ) -> Result<()> {
        for table in tables {
            let Some(rel) = self.catalog.get(table) else { continue };
            if rel.kind != RelationKind::Table || connector_of(rel) == "table" {
                continue;
            }
            if !has_source(connector_of(rel)) {
                return Err(WeirError::unsupported(format!(
                    "{job} reads table {table}, whose '{}' connector's source is not built yet in this version",
                    connector_of(rel)
                )));
            }
            let progress = match self.committed_progress(job, table)? {
                Some(progress) => Some(progress),
                None => starts.remove(table),
            };
            // At parallelism 2 or more a job's sources read ahead on threads of their own.
            let read_ahead = self.jobs.get(job).is_some_and(|j| j.parallelism() > 1).then_some(SOURCE_BATCH_ROWS);
            let task = SourceTask::open(job, rel, progress, read_ahead)?;
            self.sources.insert((job.to_string(), table.clone()), task);
        }
        Ok(())
    }

    /// The committed progress of job `job`'s source task of `table`, if it has committed any.
    ///
    /// # Errors
    /// `Storage` when it cannot be read.
    pub(super) fn committed_progress(&self, job: &str, table: &str) -> Result<Option<SourceProgress>> {
        self.store
            .get_meta(&progress_key(job, table))?
            .map(|bytes| {
                serde_json::from_slice::<SourceProgress>(&bytes)
                    .map_err(|e| WeirError::storage(format!("source progress of {job}/{table}: {e}")))
            })
            .transpose()
    }

    /// Writes every source task's progress into `writes` (called by the epoch commit).
    pub fn write_source_progress(&self, writes: &mut EpochWrites) {
        for ((job, table), task) in &self.sources {
            let bytes = serde_json::to_vec(&task.progress).expect("progress serializes");
            writes.put_meta(&progress_key(job, table), &bytes);
        }
    }

    /// Reads from the source tasks for up to `budget`, pushing rows and watermarks into their
    /// jobs and on through the views built on them. Nothing is committed: the caller commits an
    /// epoch (which stores the tasks' progress) when it chooses.
    ///
    /// # Errors
    /// A reader's or an operator's error; the caller should [`Engine::reload`] to return to the
    /// last commit. The job whose source or operators erred restarts from there after a delay
    /// ([`super::restart`]).
    pub fn poll_sources(&mut self, budget: Duration) -> Result<SourceStep> {
        super::blocking(|| {
            let start = Instant::now();
            let mut step = SourceStep::default();
            let keys: Vec<(String, String)> = self.sources.keys().cloned().collect();
            let mut progressed = true;
            while progressed && start.elapsed() < budget {
                progressed = false;
                for key in &keys {
                    if self.failed.contains_key(&key.0) {
                        // A failed job takes no more input from any of its tasks.
                        continue;
                    }
                    let Some(task) = self.sources.get_mut(key) else { continue };
                    let next = match task.next(SOURCE_BATCH_ROWS) {
                        Ok(next) => next,
                        Err(e) => return Err(self.restart_after(&key.0, e)),
                    };
                    if let Some(error) = task.failure.clone() {
                        if !self.failed.contains_key(&key.0) {
                            self.fail_job(&key.0, error);
                        }
                        continue;
                    }
                    let Some((batch, watermark)) = next else { continue };
                    progressed = true;
                    if let Some(chunk) = batch {
                        step.rows += chunk.len() as u64;
                        if let Err(e) = self.push_into_job(&key.0, &key.1, &chunk) {
                            return Err(self.restart_after(&key.0, e));
                        }
                    }
                    if let Some(wm) = watermark {
                        step.watermark_moved = true;
                        if let Err(e) = self.watermark_into_job(&key.0, &key.1, wm) {
                            return Err(self.restart_after(&key.0, e));
                        }
                    }
                }
            }
            step.all_finished = self.bounded_sources_finished()
                && self.sources.values().all(|t| t.bounded() || self.failed.contains_key(&t.job));
            Ok(step)
        })
    }

    /// Notes that job `job` failed with `e` (it restarts after a delay, [`super::restart`]), and
    /// returns `e`.
    fn restart_after(&mut self, job: &str, e: WeirError) -> WeirError {
        self.note_failure(job, &e.to_string());
        e
    }

    /// Stops job `job` on `error`: it takes no more input (its failed task reads nothing more
    /// and keeps the position of the last batch it pushed, committed with the job's state), and
    /// `SHOW JOBS` shows it FAILED with the error until it is stopped or dropped. The next commit
    /// records it; after a restart its sources stay closed.
    pub fn fail_job(&mut self, job: &str, error: String) {
        tracing::error!(job, "job failed: {error}");
        self.failed.insert(job.to_string(), error);
    }

    /// Whether every bounded source task has read all of its input (unbounded ones never do).
    pub fn bounded_sources_finished(&self) -> bool {
        self.unfinished_bounded_sources().is_empty()
    }

    /// The bounded sources not read to their end yet, as (job, table), of jobs not FAILED.
    pub fn unfinished_bounded_sources(&self) -> Vec<(String, String)> {
        self.sources
            .iter()
            .filter(|((job, _), t)| t.bounded() && !self.failed.contains_key(job) && !t.finished())
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Pushes a change of `relation` into job `job` only, and its output on to the views
    /// built on it.
    fn push_into_job(&mut self, job: &str, relation: &str, chunk: &StreamChunk) -> Result<()> {
        let Some(j) = self.jobs.get_mut(job) else { return Ok(()) };
        let out = j.push(relation, chunk, &self.store)?;
        for (op, table, rows, wm) in j.take_late_rows() {
            self.pending_late.push((job.to_string(), op, table, rows, wm));
        }
        if let Some(out) = out {
            self.propagate(job, &out)?;
        }
        Ok(())
    }

    /// Sends a watermark of `relation` into job `job` only, and what follows on.
    fn watermark_into_job(&mut self, job: &str, relation: &str, watermark_ms: i64) -> Result<()> {
        let Some(j) = self.jobs.get_mut(job) else { return Ok(()) };
        let (chunk, out) = j.on_watermark(relation, watermark_ms, &self.store)?;
        if let Some(chunk) = chunk {
            self.propagate(job, &chunk)?;
        }
        if let Some(w) = out {
            self.propagate_watermark(job, w)?;
        }
        Ok(())
    }

    /// Rows of `weir_sources`, one per partition of each task the engine holds.
    pub fn source_rows(&self) -> Vec<SourceRow> {
        self.sources.iter().flat_map(|((job, table), task)| source_rows_of(job, table, task)).collect()
    }

    /// Writes the dead letters read since the last commit into their tables'
    /// `'dead-letter.table'` and `'dead-letter.topic'`; those of a table without either were
    /// only counted and logged.
    ///
    /// # Errors
    /// `Execution` when the dead-letter topic cannot be written (the epoch then does not
    /// commit, and its records are read again).
    pub fn flush_dead_letters(&mut self, writes: &mut EpochWrites) -> Result<()> {
        let mut batches = Vec::new();
        let mut to_topics = Vec::new();
        for ((job, table), task) in self.sources.iter_mut() {
            let letters = std::mem::take(&mut task.dead_letters);
            if letters.is_empty() {
                continue;
            }
            if let Some(rel) = self.catalog.get(table).filter(|r| r.options.contains_key(DEAD_LETTER_TOPIC)) {
                to_topics.push((rel.clone(), job.clone(), letters.clone()));
            }
            let Some(side) = self.catalog.get(table).and_then(|r| r.options.get(DEAD_LETTER_TABLE)).cloned() else {
                continue;
            };
            if letters.is_empty() || self.catalog.get(&side).is_none() {
                continue;
            }
            let n = letters.len();
            let columns: Vec<arrow::array::ArrayRef> = vec![
                std::sync::Arc::new(StringArray::from(vec![job.as_str(); n])),
                std::sync::Arc::new(StringArray::from_iter_values(letters.iter().map(|d| d.source.as_str()))),
                std::sync::Arc::new(Int32Array::from_iter_values(letters.iter().map(|d| d.partition as i32))),
                std::sync::Arc::new(Int64Array::from_iter_values(letters.iter().map(|d| d.offset))),
                std::sync::Arc::new(BinaryArray::from_iter_values(letters.iter().map(|d| d.raw.as_slice()))),
                std::sync::Arc::new(StringArray::from_iter_values(letters.iter().map(|d| d.error.as_str()))),
            ];
            batches.push((side, columns));
        }
        for (rel, job, letters) in to_topics {
            self.send_dead_letters(&rel, &job, &letters)?;
        }
        for (side, columns) in batches {
            self.insert_side_rows(&side, columns, writes)?;
        }
        Ok(())
    }

    /// Writes `letters` of job `job` to table `rel`'s `'dead-letter.topic'` and waits for the
    /// broker's acknowledgement (see [`DEAD_LETTER_TOPIC`]).
    fn send_dead_letters(&mut self, rel: &weir_catalog::Relation, job: &str, letters: &[crate::source::DeadLetter]) -> Result<()> {
        use weir_connectors::kafka::{KafkaHeader, KafkaSinkConfig, KafkaWriter};
        let kafka = |e: weir_connectors::ConnectorError| WeirError::execution(format!("table {}: dead-letter topic: {e}", rel.name));
        if !self.dead_letter_writers.contains_key(&rel.name) {
            let mut options: std::collections::BTreeMap<String, String> =
                rel.options.iter().filter(|(k, _)| !k.starts_with("sink.")).map(|(k, v)| (k.clone(), v.clone())).collect();
            options.insert("topic".into(), rel.options[DEAD_LETTER_TOPIC].clone());
            let config = KafkaSinkConfig::from_options(&options).map_err(kafka)?;
            self.dead_letter_writers.insert(rel.name.clone(), KafkaWriter::open(&config).map_err(kafka)?);
        }
        let writer = self.dead_letter_writers.get_mut(&rel.name).expect("opened above");
        for d in letters {
            let header = |key: &str, value: String| KafkaHeader { key: key.into(), value: Some(value.into_bytes()) };
            let headers = [
                header("weir.dlq.error", d.error.clone()),
                header("weir.dlq.job", job.to_string()),
                header("weir.dlq.topic", d.source.clone()),
                header("weir.dlq.partition", d.partition.to_string()),
                header("weir.dlq.offset", d.offset.to_string()),
            ];
            writer.send(None, Some(&d.raw), &headers, None).map_err(kafka)?;
        }
        writer.flush(std::time::Duration::from_secs(30)).map_err(kafka)
    }
}

/// The rows of `weir_sources` of task `task` of job `job` reading `table`, one per partition.
pub fn source_rows_of(job: &str, table: &str, task: &SourceTask) -> Vec<SourceRow> {
    let high = task.high_watermarks();
    task.progress
        .partitions
        .iter()
        .enumerate()
        .map(|(p, part)| {
            let high_watermark = high.get(p).copied().flatten();
            SourceRow {
                job: job.to_string(),
                relation: table.to_string(),
                partition: p as u64,
                position: part.position,
                high_watermark,
                lag: high_watermark.map(|h| (h - part.position as i64).max(0)),
                watermark: part.watermark,
                finished: part.finished,
                rows_read: part.rows,
                dead_letters: part.dead_letters,
                skipped: part.skipped,
            }
        })
        .collect()
}

/// One row of `weir_sources`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SourceRow {
    pub job: String,
    pub relation: String,
    /// The partition index within the task (Kafka: partitions in ascending id order).
    pub partition: u64,
    /// The position after the last record read (committed at the next epoch).
    pub position: u64,
    /// Kafka: the partition's high watermark (offset after its last record), refreshed every
    /// second; a bounded `nexmark` table: the partition's rows in all.
    pub high_watermark: Option<i64>,
    /// `high_watermark - position`: records not read yet.
    pub lag: Option<i64>,
    /// The partition's watermark (ms).
    pub watermark: Option<i64>,
    pub finished: bool,
    /// Rows of the partition the task has pushed into its job.
    pub rows_read: u64,
    /// Records of the partition that did not decode.
    pub dead_letters: u64,
    /// Records of the partition skipped because they were no longer in Kafka when the task
    /// came to them (`'scan.out-of-range'` = `earliest` / `latest`).
    pub skipped: u64,
}

/// How long the source loop reads before it gives other statements the lock.
pub const SOURCE_SLICE: Duration = Duration::from_millis(50);
