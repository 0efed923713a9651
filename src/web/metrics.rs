//! `/metrics`: the Prometheus exposition (OpenMetrics text) of one [`SystemState`] and the
//! process's [`Instruments`].
//!
//! Names follow Flink's metrics where Flink has one (in Prometheus's spelling: snake case, a
//! `weir_` prefix, `_total` on counters, units in the name). Every series and its labels:
//!
//! | metric | type | labels | Flink / Kafka name |
//! |---|---|---|---|
//! | `weir_job_info` | gauge (1) | job_name, job_id, kind, status | job status |
//! | `weir_job_restarts_total` | counter | job_name, job_id | numRestarts |
//! | `weir_operator_records_in_total` | counter | job_name, operator_index, operator | numRecordsIn |
//! | `weir_operator_records_out_total` | counter | job_name, operator_index, operator | numRecordsOut |
//! | `weir_operator_busy_seconds_total` | counter | job_name, operator_index, operator | busyTimeMsPerSecond (its rate × 1000) |
//! | `weir_operator_parallelism` | gauge | job_name, operator_index, operator | parallelism |
//! | `weir_operator_watermark_ms` | gauge | job_name, operator_index, operator | currentOutputWatermark |
//! | `weir_operator_late_records_dropped_total` | counter | job_name, operator_index, operator | numLateRecordsDropped |
//! | `weir_source_records_read_total` | counter | job_name, table | numRecordsIn (source) |
//! | `weir_source_dead_letters_total` | counter | job_name, table | numRecordsInErrors |
//! | `weir_source_records_skipped_total` | counter | job_name, table | (Kafka records deleted by retention before they were read, `'scan.out-of-range'`) |
//! | `weir_source_records_lag` | gauge | job_name, table, partition | records-lag (Kafka; bounded nexmark: rows to go) |
//! | `weir_source_records_lag_max` | gauge | job_name, table | records-lag-max (Kafka) |
//! | `weir_source_watermark_ms` | gauge | job_name, table, partition | currentEmitEventTimeLag's watermark |
//! | `weir_source_position` | gauge | job_name, table, partition | current-offsets |
//! | `weir_state_table_cache_entries` | gauge | job_name, operator_index, operator, table | |
//! | `weir_state_table_cache_bytes` | gauge | job_name, operator_index, operator, table | |
//! | `weir_state_table_disk_bytes` | gauge | job_name, operator_index, operator, table | RocksDB total-sst-files-size |
//! | `weir_state_table_cache_hits_total` | counter | job_name, operator_index, operator, table | RocksDB block-cache-hit |
//! | `weir_state_table_cache_misses_total` | counter | job_name, operator_index, operator, table | RocksDB block-cache-miss |
//! | `weir_sink_records_written_total` | counter | job_name, job_id, table | numRecordsOut (sink) |
//! | `weir_table_watermark_ms` | gauge | table | |
//! | `weir_epoch` | gauge | | lastCompletedCheckpointId |
//! | `weir_epoch_committed_timestamp_seconds` | gauge | | lastCompletedCheckpointTime |
//! | `weir_epochs_committed_total` | counter | | numberOfCompletedCheckpoints |
//! | `weir_epoch_commit_duration_seconds` | histogram | | checkpointDuration (its write) |
//! | `weir_connections` | gauge | | |
//! | `weir_connections_opened_total` | counter | | |
//! | `weir_statements_total` | counter | kind, outcome | |
//! | `weir_statement_duration_seconds` | histogram | kind, outcome | |
//!
//! The operator figures count from the job's start in this process (a restart starts them
//! again, which Prometheus's `rate()` takes as a counter reset); a source's rows read and dead
//! letters are kept with its committed positions.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::engine::SystemState;
use crate::observe::instruments;

/// The metrics text of `state` and the process's instruments (OpenMetrics 1.0, which
/// Prometheus reads; content type [`CONTENT_TYPE`]).
pub fn render(state: std::sync::Arc<SystemState>) -> String {
    let i = instruments();
    let mut registry = Registry::default();
    registry.register("weir_connections", "Client connections open now", i.connections.clone());
    registry.register("weir_connections_opened", "Client connections accepted", i.connections_total.clone());
    registry.register("weir_statements", "Statements run, by kind and outcome", i.statements.clone());
    registry.register(
        "weir_statement_duration_seconds",
        "Statement latency from receipt to the complete result, s",
        i.statement_seconds.clone(),
    );
    registry.register("weir_epochs_committed", "Epochs committed", i.epochs.clone());
    registry.register(
        "weir_epoch_commit_duration_seconds",
        "The atomic RocksDB write of one epoch (state writes and source positions), s",
        i.epoch_commit_seconds.clone(),
    );
    registry.register_collector(Box::new(StateCollector(state)));
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The series read from a [`SystemState`] at the scrape.
#[derive(Debug)]
struct StateCollector(std::sync::Arc<SystemState>);

type Labels = Vec<(&'static str, String)>;

/// Writes one metric family: `name` with one sample per (labels, value), each value made a
/// metric by `make` (`ConstGauge::new`, `ConstCounter::new`: the text format appends `_total`
/// to a counter's name); nothing if there are no samples.
fn family<V, M: EncodeMetric>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    make: fn(V) -> M,
    samples: impl IntoIterator<Item = (Labels, V)>,
) -> std::fmt::Result {
    let mut samples = samples.into_iter().map(|(labels, v)| (labels, make(v))).peekable();
    let Some((_, first)) = samples.peek() else { return Ok(()) };
    let mut metric = encoder.encode_descriptor(name, help, None, first.metric_type())?;
    for (labels, value) in samples {
        value.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for StateCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let s = &self.0;
        family(
            &mut e,
            "weir_job_info",
            "Each job of a materialized view or INSERT INTO (1), with its status",
            ConstGauge::new,
            s.jobs.iter().map(|j| {
                let labels = vec![
                    ("job_name", j.name.clone()),
                    ("job_id", j.job_id.clone()),
                    ("kind", j.kind.clone()),
                    ("status", j.status.clone()),
                ];
                (labels, 1i64)
            }),
        )?;
        family(
            &mut e,
            "weir_job_restarts",
            "Restarts of a job from its last checkpoint after a failure, since the server started",
            ConstCounter::new,
            s.jobs.iter().map(|j| (vec![("job_name", j.name.clone()), ("job_id", j.job_id.clone())], j.restarts)),
        )?;
        let operators: Vec<_> = s.jobs.iter().flat_map(|j| j.operators.iter().map(move |o| (j, o))).collect();
        let op_labels = |job: &str, index: usize, op: &str| -> Labels {
            vec![("job_name", job.to_string()), ("operator_index", index.to_string()), ("operator", op.to_string())]
        };
        family(
            &mut e,
            "weir_operator_records_in",
            "Changelog rows that reached the operator",
            ConstCounter::new,
            operators.iter().map(|(j, o)| (op_labels(&j.name, o.index, &o.name), o.rows_in)),
        )?;
        family(
            &mut e,
            "weir_operator_records_out",
            "Changelog rows the operator emitted",
            ConstCounter::new,
            operators.iter().map(|(j, o)| (op_labels(&j.name, o.index, &o.name), o.rows_out)),
        )?;
        family(
            &mut e,
            "weir_operator_busy_seconds",
            "Time the operator's instances spent on rows and watermarks, summed, s",
            ConstCounter::new,
            operators.iter().map(|(j, o)| (op_labels(&j.name, o.index, &o.name), o.busy_ns as f64 / 1e9)),
        )?;
        family(
            &mut e,
            "weir_operator_parallelism",
            "The operator's instances",
            ConstGauge::new,
            operators.iter().map(|(j, o)| (op_labels(&j.name, o.index, &o.name), o.parallelism as i64)),
        )?;
        family(
            &mut e,
            "weir_operator_watermark_ms",
            "An event-time operator's watermark, ms since the Unix epoch",
            ConstGauge::new,
            operators.iter().filter_map(|(j, o)| Some((op_labels(&j.name, o.index, &o.name), o.watermark?))),
        )?;
        family(
            &mut e,
            "weir_operator_late_records_dropped",
            "Rows an event-time operator dropped as late",
            ConstCounter::new,
            operators
                .iter()
                .filter(|(_, o)| o.watermark.is_some() || o.late_rows > 0)
                .map(|(j, o)| (op_labels(&j.name, o.index, &o.name), o.late_rows)),
        )?;

        // Sources: the task's counts (its partitions' summed) once per (job, table), the rest
        // per partition.
        let part_labels = |r: &crate::engine::SourceRow| -> Labels {
            vec![("job_name", r.job.clone()), ("table", r.relation.clone()), ("partition", r.partition.to_string())]
        };
        let task_labels =
            |r: &crate::engine::SourceRow| -> Labels { vec![("job_name", r.job.clone()), ("table", r.relation.clone())] };
        // (labels, rows read, dead letters, skipped) per task, in the order of its first partition.
        let mut tasks: Vec<(Labels, u64, u64, u64)> = Vec::new();
        for r in s.sources.iter() {
            let labels = task_labels(r);
            match tasks.iter_mut().find(|t| t.0 == labels) {
                Some(t) => (t.1, t.2, t.3) = (t.1 + r.rows_read, t.2 + r.dead_letters, t.3 + r.skipped),
                None => tasks.push((labels, r.rows_read, r.dead_letters, r.skipped)),
            }
        }
        family(
            &mut e,
            "weir_source_records_read",
            "Rows a source task has pushed into its job",
            ConstCounter::new,
            tasks.iter().map(|t| (t.0.clone(), t.1)),
        )?;
        family(
            &mut e,
            "weir_source_dead_letters",
            "Records of a source task that did not decode",
            ConstCounter::new,
            tasks.iter().map(|t| (t.0.clone(), t.2)),
        )?;
        family(
            &mut e,
            "weir_source_records_skipped",
            "Kafka records a source task skipped because retention had deleted them before it read them ('scan.out-of-range')",
            ConstCounter::new,
            tasks.iter().map(|t| (t.0.clone(), t.3)),
        )?;
        family(&mut e, "weir_source_records_lag", "Records of a partition not read yet (Kafka: its high watermark minus the position; a bounded nexmark table: rows not generated yet)", ConstGauge::new,
            s.sources.iter().filter_map(|r| Some((part_labels(r), r.lag?))),
        )?;
        let mut lag_max: Vec<(Labels, i64)> = Vec::new();
        for r in s.sources.iter() {
            let Some(lag) = r.lag else { continue };
            let labels = task_labels(r);
            match lag_max.iter_mut().find(|(l, _)| *l == labels) {
                Some((_, max)) => *max = (*max).max(lag),
                None => lag_max.push((labels, lag)),
            }
        }
        family(
            &mut e,
            "weir_source_records_lag_max",
            "The largest lag of a source's partitions",
            ConstGauge::new,
            lag_max,
        )?;
        family(
            &mut e,
            "weir_source_watermark_ms",
            "A source partition's watermark, ms since the Unix epoch",
            ConstGauge::new,
            s.sources.iter().filter_map(|r| Some((part_labels(r), r.watermark?))),
        )?;
        family(
            &mut e,
            "weir_source_position",
            "A source partition's position (Kafka: the next offset; files: a byte offset; nexmark: a row)",
            ConstGauge::new,
            s.sources.iter().map(|r| (part_labels(r), r.position as i64)),
        )?;

        // The operator by EXPLAIN's name, as the operator series name it.
        let operator_name = |t: &crate::engine::StateTableRow| -> String {
            let op = s
                .jobs
                .iter()
                .filter(|j| j.name == t.job)
                .flat_map(|j| &j.operators)
                .find(|o| o.index as u64 == t.operator_index);
            op.map_or_else(|| t.operator.clone(), |o| o.name.clone())
        };
        let table_labels = |t: &crate::engine::StateTableRow| -> Labels {
            vec![
                ("job_name", t.job.clone()),
                ("operator_index", t.operator_index.to_string()),
                ("operator", operator_name(t)),
                ("table", t.name.clone()),
            ]
        };
        let cached: Vec<_> = s.state_tables.iter().filter_map(|t| Some((t, t.cache?))).collect();
        family(
            &mut e,
            "weir_state_table_cache_entries",
            "Entries a state table's cache holds",
            ConstGauge::new,
            cached.iter().map(|(t, c)| (table_labels(t), c.entries as i64)),
        )?;
        family(
            &mut e,
            "weir_state_table_cache_bytes",
            "Estimated bytes a state table's cache holds",
            ConstGauge::new,
            cached.iter().map(|(t, c)| (table_labels(t), c.bytes as i64)),
        )?;
        family(
            &mut e,
            "weir_state_table_disk_bytes",
            "Approximate bytes of a state table in RocksDB's files (compressed)",
            ConstGauge::new,
            s.state_tables.iter().map(|t| (table_labels(t), t.disk_bytes as i64)),
        )?;
        family(
            &mut e,
            "weir_state_table_cache_hits",
            "State reads served from the cache",
            ConstCounter::new,
            cached.iter().map(|(t, c)| (table_labels(t), c.hits)),
        )?;
        family(
            &mut e,
            "weir_state_table_cache_misses",
            "State reads that went to RocksDB",
            ConstCounter::new,
            cached.iter().map(|(t, c)| (table_labels(t), c.misses)),
        )?;

        family(
            &mut e,
            "weir_sink_records_written",
            "Changelog rows an INSERT INTO job handed to its sink",
            ConstCounter::new,
            s.jobs.iter().filter_map(|j| {
                let table = j.sink.clone()?;
                Some((vec![("job_name", j.name.clone()), ("job_id", j.job_id.clone()), ("table", table)], j.operators.first()?.rows_in))
            }),
        )?;
        family(
            &mut e,
            "weir_table_watermark_ms",
            "A table's watermark, ms since the Unix epoch",
            ConstGauge::new,
            s.watermarks.iter().map(|(t, w)| (vec![("table", t.clone())], *w)),
        )?;
        family(
            &mut e,
            "weir_epoch",
            "The last committed epoch's number",
            ConstGauge::new,
            [(Labels::new(), s.epoch as i64)],
        )?;
        family(
            &mut e,
            "weir_epoch_committed_timestamp_seconds",
            "When the last epoch was committed, s since the Unix epoch",
            ConstGauge::new,
            [(Labels::new(), s.committed_at_ms as f64 / 1e3)],
        )?;
        Ok(())
    }
}
