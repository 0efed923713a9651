//! What the system tables (`weir_watermarks`, `weir_late_rows`, `weir_operator_watermarks`,
//! `weir_sources`, `weir_state_tables`, `weir_operators`), EXPLAIN ANALYZE, `/metrics` and the
//! web page show: the live state of the running jobs, gathered under the engine's read lock
//! when one of them asks (jobs on threads of their own as of their last commit).

use std::collections::BTreeMap;
use weir_catalog::RelationKind;

use super::sources::SourceRow;
use super::Engine;
use crate::runtime::job::{NodeStats, OperatorStats};
use crate::runtime::Job;
use crate::state::state_table::CacheStats;

/// The rows of the system tables at one moment.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SystemState {
    /// The last committed epoch's number, and when it was committed (ms since the Unix epoch).
    pub epoch: u64,
    pub committed_at_ms: i64,
    /// Every job of a materialized view or `INSERT INTO`, by relation name.
    pub jobs: Vec<JobRow>,
    /// The client connections (`pg_stat_activity`), filled in by the sql layer, which knows
    /// them.
    pub activity: Vec<crate::observe::Activity>,
    /// Each table's watermark, ms.
    pub watermarks: Vec<(String, i64)>,
    /// Late rows per event-time operator: (view, job id, operator index, operator, count).
    pub late_rows: Vec<(String, String, u64, String, u64)>,
    /// Watermark per event-time operator: (view, job id, operator index, operator, ms).
    pub operator_watermarks: Vec<(String, String, u64, String, Option<i64>)>,
    /// Source partitions.
    pub sources: Vec<SourceRow>,
    /// Operator state tables.
    pub state_tables: Vec<StateTableRow>,
}

/// One job: a materialized view's or an `INSERT INTO` job's.
#[derive(Debug, Clone, serde::Serialize)]
pub struct JobRow {
    /// The relation it belongs to: the view's name, or the `INSERT INTO` job's id.
    pub name: String,
    /// Its id (`SHOW JOBS`, `STOP JOB`).
    pub job_id: String,
    /// `materialized view` or `job` (an `INSERT INTO` job): the relation kind's SQL name, as
    /// `SHOW JOBS` shows it.
    pub kind: String,
    /// `RUNNING`, `RESTARTING`, `FAILED` or `SUSPENDED` ([`job_status`]).
    pub status: String,
    /// Why a FAILED job stopped, or why a RESTARTING one failed and when it restarts.
    pub error: Option<String>,
    /// How often the job restarted after a failure since this process started (Flink's
    /// `numRestarts`; [`super::restart`]).
    pub restarts: u64,
    /// The statement that created it.
    pub definition: String,
    /// For an `INSERT INTO` job, the table it writes.
    pub sink: Option<String>,
    /// Its operators, the root first (none for a FAILED job: it no longer runs).
    pub operators: Vec<OperatorStats>,
    /// When the operators' figures were taken, ms since the Unix epoch (see
    /// [`JobStats::taken_at_ms`]; 0 for a FAILED job).
    pub figures_at_ms: i64,
}

/// One row of `weir_state_tables`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StateTableRow {
    /// The view, or the `INSERT INTO` job's id.
    pub job: String,
    pub operator_index: u64,
    pub operator: String,
    /// The table's stable name within its operator (`groups`, `left`, `values/0`, ...).
    pub name: String,
    /// The state table id (its RocksDB key prefix).
    pub id: u32,
    /// The table's state cache now (`None`: a table read from RocksDB without one).
    pub cache: Option<CacheStats>,
    /// The approximate bytes of the table in RocksDB's files (compressed; rows still only in
    /// the memtable not counted).
    pub disk_bytes: u64,
    /// State TTL, ms.
    pub ttl_ms: Option<i64>,
}

/// What the system tables show of one job's operators.
#[derive(Debug, Clone, Default)]
pub struct JobStats {
    /// Its event-time operators: (operator index, operator, watermark ms, late rows).
    pub event_time_operators: Vec<(usize, &'static str, Option<i64>, u64)>,
    /// Its operators' state tables: (operator index, operator, table name, table id, its
    /// cache's figures, TTL ms).
    pub state_tables: Vec<(usize, &'static str, String, u32, Option<CacheStats>, Option<i64>)>,
    /// Every operator, the root first: rows in and out, busy time, watermark.
    pub operators: Vec<OperatorStats>,
    /// When these figures were taken, ms since the Unix epoch (a job on a thread of its own
    /// publishes them at its commits): rates are over the time between two of them.
    pub taken_at_ms: i64,
}

impl JobStats {
    /// The stats of `job` now.
    pub fn of(job: &Job) -> Self {
        Self::of_nodes(job.node_stats())
    }

    /// The stats of a job whose operators showed `nodes` (in node order), taken now.
    pub fn of_nodes(nodes: Vec<NodeStats>) -> Self {
        let mut stats = Self { taken_at_ms: crate::observe::now_ms(), ..Self::default() };
        for (i, node) in nodes.into_iter().enumerate() {
            if let Some((watermark, late)) = node.event_time {
                stats.event_time_operators.push((i, node.op_name, watermark, late));
            }
            for t in node.tables {
                stats.state_tables.push((i, node.op_name, t.name, t.id, t.cache, t.ttl_ms));
            }
            stats.operators.push(node.operator);
        }
        stats
    }

    /// The rows the job's operators dropped as late, in all.
    pub fn late_rows(&self) -> u64 {
        self.event_time_operators.iter().map(|o| o.3).sum()
    }
}

impl Engine {
    /// The stats of every job, by name: those the engine holds now, those running on threads
    /// of their own as of their last commit.
    pub fn job_stats(&self) -> BTreeMap<String, JobStats> {
        let (mut stats, _) = self.detached_stats();
        stats.extend(self.jobs.iter().map(|(name, job)| (name.clone(), JobStats::of(job))));
        stats
    }

    /// Every job in the catalog, with its operators' figures from `stats` ([`Self::job_stats`]).
    fn job_rows(&self, stats: &BTreeMap<String, JobStats>) -> Vec<JobRow> {
        self.catalog
            .relations
            .values()
            .filter_map(|r| {
                let job_id = r.job.clone()?;
                let restart = self.restarting.get(&r.name);
                let waiting = restart.is_some_and(super::Restart::waiting);
                let failed = self.failed.get(&r.name).cloned();
                Some(JobRow {
                    name: r.name.clone(),
                    job_id,
                    kind: r.kind.sql_name().to_string(),
                    status: match self.finished.contains(&r.name) {
                        true => "FINISHED".to_string(),
                        false => job_status(failed.is_some(), self.suspended.contains(&r.name), waiting).to_string(),
                    },
                    error: failed.or_else(|| restart.filter(|r| r.waiting()).map(super::Restart::describe)),
                    restarts: restart.map_or(0, |r| r.restarts),
                    definition: r.definition.clone(),
                    sink: (r.kind == RelationKind::SinkJob).then(|| r.options.get(super::SINK_OPTION).cloned()).flatten(),
                    operators: stats.get(&r.name).map(|s| s.operators.clone()).unwrap_or_default(),
                    figures_at_ms: stats.get(&r.name).map_or(0, |s| s.taken_at_ms),
                })
            })
            .collect()
    }

    /// What the system tables show now (without [`SystemState::activity`]: the engine does
    /// not know the connections).
    pub fn system_state(&self) -> SystemState {
        let (_, detached_sources) = self.detached_stats();
        let stats = self.job_stats();
        let operators: Vec<_> = stats
            .iter()
            .flat_map(|(view, job)| {
                let job_id = self.catalog.get(view).and_then(|r| r.job.clone()).unwrap_or_default();
                job.event_time_operators
                    .iter()
                    .map(move |(i, op, wm, n)| (view.clone(), job_id.clone(), *i as u64, op.to_string(), *wm, *n))
            })
            .collect();
        let mut sources = self.source_rows();
        sources.extend(detached_sources);
        sources.sort_by(|a, b| (&a.job, &a.relation, a.partition).cmp(&(&b.job, &b.relation, b.partition)));
        let last = self.commits.last();
        SystemState {
            epoch: last.epoch,
            committed_at_ms: last.committed_at_ms,
            jobs: self.job_rows(&stats),
            activity: Vec::new(),
            watermarks: self.watermarks.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            late_rows: operators.iter().map(|o| (o.0.clone(), o.1.clone(), o.2, o.3.clone(), o.5)).collect(),
            operator_watermarks: operators.iter().map(|o| (o.0.clone(), o.1.clone(), o.2, o.3.clone(), o.4)).collect(),
            sources,
            state_tables: stats
                .iter()
                .flat_map(|(job, s)| {
                    s.state_tables.iter().map(move |(i, op, name, id, cache, ttl_ms)| StateTableRow {
                        job: job.clone(),
                        operator_index: *i as u64,
                        operator: op.to_string(),
                        name: name.clone(),
                        id: *id,
                        cache: *cache,
                        disk_bytes: self.store.approximate_bytes(*id),
                        ttl_ms: *ttl_ms,
                    })
                })
                .collect(),
        }
    }
}

/// A job's status as `SHOW JOBS` and the system tables show it (Flink's job statuses):
/// `FINISHED` (an `INSERT INTO` job that read its bounded sources to their end, shown as the
/// system tables build the row), `FAILED` (stopped on an error in its input, for good), `SUSPENDED` (stopped with a
/// savepoint, [`super::suspend`]), `RESTARTING` (failed, and waits to restart from its last
/// checkpoint, [`super::restart`]) or `RUNNING`.
pub fn job_status(failed: bool, suspended: bool, restarting: bool) -> &'static str {
    if failed {
        "FAILED"
    } else if suspended {
        "SUSPENDED"
    } else if restarting {
        "RESTARTING"
    } else {
        "RUNNING"
    }
}
