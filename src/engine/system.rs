//! What the system tables (`weir_watermarks`, `weir_late_rows`, `weir_operator_watermarks`,
//! `weir_sources`, `weir_state_tables`) show: the live state of the running jobs, gathered
//! under the engine's lock when a statement reads one of them.

use std::sync::Arc;

use super::sources::SourceRow;
use super::Engine;

/// The rows of the system tables at one moment.
#[derive(Debug, Default)]
pub struct SystemState {
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

/// One row of `weir_state_tables`.
#[derive(Debug)]
pub struct StateTableRow {
    /// The view, or the `INSERT INTO` job's id.
    pub job: String,
    pub operator_index: u64,
    pub operator: String,
    /// The table's stable name within its operator (`groups`, `left`, `values/0`, ...).
    pub name: String,
    /// The state table id (its RocksDB key prefix).
    pub id: u32,
    /// Entries and bytes (keys plus values as stored) of a table held in memory.
    pub size: Option<(u64, u64)>,
    /// State TTL, ms.
    pub ttl_ms: Option<i64>,
}

impl Engine {
    /// What the system tables show now.
    pub fn system_state(&self) -> Arc<SystemState> {
        let operators: Vec<_> = self
            .jobs
            .iter()
            .flat_map(|(view, job)| {
                let job_id = self.catalog.get(view).and_then(|r| r.job.clone()).unwrap_or_default();
                job.event_time_operators()
                    .into_iter()
                    .map(move |(i, op, wm, n)| (view.clone(), job_id.clone(), i as u64, op.to_string(), wm, n))
            })
            .collect();
        Arc::new(SystemState {
            watermarks: self.watermarks.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            late_rows: operators.iter().map(|o| (o.0.clone(), o.1.clone(), o.2, o.3.clone(), o.5)).collect(),
            operator_watermarks: operators.iter().map(|o| (o.0.clone(), o.1.clone(), o.2, o.3.clone(), o.4)).collect(),
            sources: self.source_rows(),
            state_tables: self
                .jobs
                .iter()
                .flat_map(|(job, j)| {
                    j.state_tables().into_iter().map(move |(i, op, name, t)| StateTableRow {
                        job: job.clone(),
                        operator_index: i as u64,
                        operator: op.to_string(),
                        name,
                        id: t.id(),
                        size: t.size(),
                        ttl_ms: t.ttl_ms(),
                    })
                })
                .collect(),
        })
    }
}
