//! What `FLUSH` waits for: every bounded source of a running job read to its end, and every
//! Kafka source read up to where its topic ended when `FLUSH` began, then committed.
//!
//! `FLUSH` waits in two parts. First without the engine's lock
//! ([`Engine::flush_sources_reached`], asked every few milliseconds under the read lock): the
//! jobs on threads of their own ([`super::runner`]) and the source thread ([`super::driver`])
//! read and commit as at any other time, so views keep committing, reads see them, and other
//! sessions' statements go on. Then, once the sources are there (or the wait ran out, or a job
//! went away), under the write lock as any write statement: the jobs are taken back, what is
//! left is read ([`Engine::source_behind`], [`Engine::bounded_sources_finished`]) and the engine
//! commits, so `FLUSH` returns with every view up to date.

use weir_catalog::Relation;

use super::Engine;
use crate::error::{ErrorKind, Result, WeirError};
use crate::runtime::relation::connector_of;

/// Where one Kafka source task has to read to for `FLUSH`: per partition, the end of its topic
/// when `FLUSH` began ([`crate::source::kafka::end_positions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceEnd {
    pub job: String,
    pub table: String,
    /// Per partition index, the position to reach.
    pub ends: Vec<u64>,
    /// Whether the table's sources look for partitions added to the topic
    /// ([`crate::source::kafka::discovers_partitions`]): a partition of `ends` the task has not
    /// found yet is then waited for; otherwise it is never read, and not waited for.
    pub discovers: bool,
}

/// A Kafka source task `FLUSH` waits for: its job, its table and the table's definition.
pub type KafkaSource = (String, String, Relation);

impl Engine {
    /// The Kafka (and upsert-kafka) source tasks of every job not FAILED, those on threads of
    /// their own included, for [`source_ends`].
    ///
    /// # Errors
    /// `External` (58000) naming a job that waits to restart ([`super::restart`]): it has no
    /// sources open to read to anywhere.
    pub fn kafka_sources(&self) -> Result<Vec<KafkaSource>> {
        self.flush_can_wait()?;
        let held = self.sources.keys();
        let detached = self.runners.iter().flat_map(|(job, r)| r.tables.iter().map(move |(table, _)| (job, table)));
        Ok(held
            .map(|(job, table)| (job, table))
            .chain(detached)
            .filter(|(job, _)| !self.failed.contains_key(*job))
            .filter_map(|(job, table)| {
                let rel = self.catalog.get(table)?;
                matches!(connector_of(rel), "kafka" | "upsert-kafka").then(|| (job.clone(), table.clone(), rel.clone()))
            })
            .collect())
    }

    /// Whether `FLUSH` can wait for every running job: not when one waits to restart after an
    /// error (its sources are closed until it restarts, and it may fail again the same way).
    /// Asked before `FLUSH` waits and again once its sources are there: a job that failed
    /// meanwhile (an operator's error on a row `FLUSH` waited for) is why its view is behind.
    ///
    /// # Errors
    /// `External` (58000) naming the jobs and the first one's error.
    pub fn flush_can_wait(&self) -> Result<()> {
        let waiting: Vec<&String> = self.restarting.iter().filter(|(_, r)| r.waiting()).map(|(job, _)| job).collect();
        let Some(first) = waiting.first() else { return Ok(()) };
        let names: Vec<&str> = waiting.iter().map(|j| j.as_str()).collect();
        Err(WeirError::new(ErrorKind::External(format!(
            "FLUSH cannot wait for job {}: RESTARTING after an error ({first}: {}). FLUSH waits for every \
             source of a running job; suspend or stop such a job (ALTER MATERIALIZED VIEW .. SUSPEND, STOP JOB) \
             to FLUSH without it",
            names.join(", "),
            self.restarting[*first].describe()
        ))))
    }

    /// Whether the first part of `FLUSH`'s wait is over: every bounded source read to its end
    /// and every Kafka source at its `ends`, as the engine's own tasks are now and as the jobs
    /// on threads of their own last committed. Also true when the engine does not read its
    /// sources itself (nothing reads them until `FLUSH` takes the lock), and when a job of
    /// `ends` is neither here nor on a thread (dropped, or waiting to restart): the locked part
    /// sees to those. FAILED jobs are not waited for.
    pub fn flush_sources_reached(&self, ends: &[SourceEnd]) -> bool {
        if !self.run_detached {
            return true;
        }
        if !self.bounded_sources_finished() || self.source_behind(ends).is_some() {
            return false;
        }
        let detached_bounded_finished = self.runners.iter().filter(|(job, _)| !self.failed.contains_key(*job)).all(|(job, runner)| {
            let published = runner.published_sources();
            runner.tables.iter().filter(|(_, bounded)| *bounded).all(|(table, _)| {
                published.iter().filter(|row| row.job == *job && row.relation == *table).all(|row| row.finished)
            })
        });
        detached_bounded_finished
            && ends.iter().filter(|end| !self.failed.contains_key(&end.job)).all(|end| {
                let Some(runner) = self.runners.get(&end.job) else {
                    // Held by the engine (checked above), or gone.
                    return true;
                };
                let published = runner.published_sources();
                end.ends.iter().enumerate().all(|(p, to)| {
                    published
                        .iter()
                        .find(|row| row.relation == end.table && row.partition == p as u64)
                        .map_or(!end.discovers, |row| row.position >= *to)
                })
            })
    }

    /// The first partition of `ends` whose task the engine holds and has not read up to its
    /// end, described for an error ("table t (job j) partition 0 at position 3 of 10"); `None`
    /// once every one has. The tasks of a job FAILED or dropped since count as done. A
    /// partition the task has not found (added to the topic after it opened) is waited for
    /// when the task looks for new partitions ([`SourceEnd::discovers`]).
    pub fn source_behind(&self, ends: &[SourceEnd]) -> Option<String> {
        ends.iter().find_map(|end| {
            if self.failed.contains_key(&end.job) {
                return None;
            }
            let task = self.sources.get(&(end.job.clone(), end.table.clone()))?;
            let positions = task.positions();
            let behind = positions.iter().zip(&end.ends).enumerate().find(|(_, (at, end))| at < end).map(|(p, (at, to))| {
                format!("table {} (job {}) partition {p} at position {at} of {to}", end.table, end.job)
            });
            behind.or_else(|| {
                (end.discovers && positions.len() < end.ends.len()).then(|| {
                    format!(
                        "table {} (job {}) partition {}, added to the topic, not found yet",
                        end.table,
                        end.job,
                        positions.len()
                    )
                })
            })
        })
    }
}

/// The [`SourceEnd`] of each of `sources`, asked of the brokers now (once per table, however
/// many jobs read it). Blocks for the brokers' answers: call it without the engine's lock. The
/// sources are asked to look for partitions added to their topics at once
/// ([`crate::source::kafka::request_discovery`]), so that `FLUSH` need not wait for their
/// discovery interval.
///
/// # Errors
/// `External` (58000) naming the table and the job when its brokers cannot be reached.
pub fn source_ends(sources: &[KafkaSource]) -> Result<Vec<SourceEnd>> {
    if !sources.is_empty() {
        crate::source::kafka::request_discovery();
    }
    let mut asked: std::collections::BTreeMap<&str, Vec<u64>> = std::collections::BTreeMap::new();
    let mut out = Vec::with_capacity(sources.len());
    for (job, table, rel) in sources {
        let ends = match asked.get(table.as_str()) {
            Some(ends) => ends.clone(),
            None => {
                let ends = crate::source::kafka::end_positions(rel).map_err(|e| {
                    WeirError::new(ErrorKind::External(format!(
                        "FLUSH cannot ask the brokers of table {table} where its topic ends, so it cannot wait for job {job} to \
                         read it: {e}. FLUSH waits for every Kafka source of a running job; suspend or stop that job (ALTER \
                         MATERIALIZED VIEW .. SUSPEND, STOP JOB) to FLUSH without it"
                    )))
                })?;
                asked.insert(table, ends.clone());
                ends
            }
        };
        let discovers = crate::source::kafka::discovers_partitions(rel);
        out.push(SourceEnd { job: job.clone(), table: table.clone(), ends, discovers });
    }
    Ok(out)
}
