//! Connector sources: the tasks that read a connector table's records into the jobs that read
//! the table.
//!
//! Flink semantics, not RisingWave's TABLE: a connector table stores no rows. Each job (a
//! materialized view or an `INSERT INTO` job) that reads a connector table directly gets its
//! own [`SourceTask`], which reads the table from the start position of its connector
//! (`nexmark`: event 0; `filesystem`: the start of each file) and pushes the rows into that job
//! only; the job's output then flows on to the views built on it as usual.
//!
//! # Positions and epochs
//! A task keeps, per source partition, the position after the last row it pushed and the
//! largest value of the table's WATERMARK expression seen there. Every epoch commit
//! ([`crate::engine::Engine::commit`]) writes all tasks' positions with the jobs' state in
//! the same atomic RocksDB write (meta key `src/<job>/<table>`), so after a crash a restarted
//! task resumes exactly after the rows whose effects were committed: no loss, no duplicates.
//!
//! # Watermarks
//! A partition's watermark is the largest WATERMARK expression value of its rows; the task's
//! watermark is the minimum over its partitions that have not ended (Flink: per-split
//! watermarks combined by minimum). A partition without rows yet holds the watermark back.
//! When every partition of a bounded source has ended, the watermark jumps to
//! [`END_OF_INPUT_WATERMARK`], which fires every remaining window (Flink emits
//! `Long.MAX_VALUE` at the end of bounded input).

pub mod datagen;
pub mod filesystem;
pub mod kafka;
pub mod nexmark;
mod read_ahead;

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::compute::kernels::aggregate::max;
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use datafusion::common::DFSchema;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::prelude::SessionContext;
use serde::{Deserialize, Serialize};
use weir_catalog::Relation;

use crate::error::{Result, WeirError};
use crate::runtime::relation::{connector_of, relation_schema};

/// The watermark of a bounded source whose every partition has ended: 9999-12-31
/// 23:59:59.999 in ms, later than any event time, yet a valid TIMESTAMP(3) to show in SQL.
pub const END_OF_INPUT_WATERMARK: i64 = 253_402_300_799_999;

/// What one poll of a reader gives.
#[derive(Debug)]
pub enum SourcePoll {
    /// Rows of partition `partition`, in the table's physical columns (declared columns that are
    /// not computed, in declaration order).
    Batch {
        partition: usize,
        batch: RecordBatch,
        /// The changelog operation of each row; `None` when all are inserts (a `debezium-json`
        /// source gives deletes and updates).
        ops: Option<Vec<crate::runtime::changelog::Op>>,
    },
    /// Nothing available now; poll again later.
    Pending,
    /// Every partition has ended (bounded input).
    Finished,
    /// The source cannot go on (a file that cannot be opened): its job fails with this reason
    /// (FAILED in `SHOW JOBS`), the rest of the database runs on.
    Failed(String),
}

/// A connector's reader: partitions, positions, batches.
pub trait SourceReader: Send + Sync {
    /// The number of source partitions. It may grow (a Kafka source discovers partitions
    /// added to its topic) but never shrinks, and a partition's index never changes.
    fn num_partitions(&self) -> usize;
    /// The next batch of at most `max_rows` rows.
    ///
    /// # Errors
    /// A source that cannot be read for now (a broker refusing, a read failing) returns the
    /// error; the caller logs it and retries later from the last committed position. One that
    /// cannot go on at all (a file gone) returns [`SourcePoll::Failed`] instead.
    fn poll(&mut self, max_rows: usize) -> Result<SourcePoll>;
    /// The position after the last row returned, per partition (connector-defined: a row
    /// offset, a byte offset, a Kafka offset), to store at the next commit.
    fn positions(&self) -> Vec<u64>;
    /// Whether partition `p` has ended (bounded input read to its end).
    fn partition_finished(&self, p: usize) -> bool;
    /// Partition `p` had ended at the last commit: it is not read again (a file read to its
    /// end is not reopened after a restart, so it may be gone).
    fn resume_finished(&mut self, _p: usize) {}
    /// Whether the input ends (a file, `nexmark.events` > 0) rather than runs forever.
    fn bounded(&self) -> bool;
    /// Records that did not decode since the last call.
    fn take_dead_letters(&mut self) -> Vec<DeadLetter> {
        Vec::new()
    }
    /// Records skipped since the last call because they were gone when the reader came to
    /// them (Kafka retention, `'scan.out-of-range'`), as (partition index, records); the
    /// positions already moved past them.
    fn take_skipped(&mut self) -> Vec<(usize, u64)> {
        Vec::new()
    }
    /// Called after an epoch with `positions` committed (Kafka: commit them to the consumer
    /// group too, so standard lag tools see them).
    fn on_committed(&mut self, _positions: &[u64]) {}
    /// Per partition, the position after the last record the source holds now (Kafka's high
    /// watermark; a bounded nexmark run's rows of the partition), when the connector knows it:
    /// with the position, the lag.
    fn high_watermarks(&self) -> Vec<Option<i64>> {
        Vec::new()
    }
}

/// A record that did not decode: by default it never stops the job; it is counted in
/// `weir_sources`, logged, and written to the table's `'dead-letter.table'` and
/// `'dead-letter.topic'` when it has them.
/// With `'decode.on-error' = 'fail'` ([`ON_DECODE_ERROR`]) it stops the job instead.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    /// The partition index in the task.
    pub partition: usize,
    /// Where it came from: the topic or the file.
    pub source: String,
    /// The Kafka offset or the byte offset in the file.
    pub offset: i64,
    /// The record as read.
    pub raw: Vec<u8>,
    /// Why it did not decode.
    pub error: String,
}

/// How a metadata column (`c BIGINT METADATA FROM 'offset'`) is kept in the catalog: as the
/// column's computed expression, this text.
pub fn metadata_marker(key: &str) -> String {
    format!("METADATA FROM '{key}'")
}

/// The metadata key of a column whose computed expression is a [`metadata_marker`].
pub fn metadata_key(computed: &str) -> Option<&str> {
    computed.strip_prefix("METADATA FROM '")?.strip_suffix('\'')
}

/// The metadata key of each of `rel`'s physical columns (`None` for a value column).
pub fn metadata_columns(rel: &Relation) -> Vec<Option<String>> {
    rel.columns
        .iter()
        .filter(|c| c.computed.as_deref().is_none_or(|e| metadata_key(e).is_some()))
        .map(|c| c.computed.as_deref().and_then(metadata_key).map(str::to_string))
        .collect()
}

/// Whether a connector has a source runtime in this version.
pub fn has_source(connector: &str) -> bool {
    matches!(connector, "nexmark" | "datagen" | "filesystem" | "kafka" | "upsert-kafka")
}

/// Opens the reader of connector table `rel` producing `physical` (its non-computed columns),
/// resuming at `positions` (one per partition) when given.
///
/// # Errors
/// `Unsupported` for a connector without a source runtime; `InvalidOption` for bad options;
/// `Storage` for unreadable files.
pub fn open_reader(rel: &Relation, physical: SchemaRef, positions: Option<&[u64]>) -> Result<Box<dyn SourceReader>> {
    if !matches!(connector_of(rel), "kafka" | "upsert-kafka") {
        if let Some(key) = metadata_columns(rel).into_iter().flatten().next() {
            return Err(WeirError::plan(format!(
                "table {}: the '{}' connector has no metadata '{key}'; METADATA FROM is for 'kafka' tables",
                rel.name,
                connector_of(rel)
            )));
        }
    }
    match connector_of(rel) {
        "kafka" | "upsert-kafka" => Ok(Box::new(kafka::KafkaSource::open(rel, physical, positions)?)),
        "nexmark" => Ok(Box::new(nexmark::NexmarkReader::open(rel, physical, positions)?)),
        "datagen" => Ok(Box::new(datagen::DatagenReader::open(rel, physical, positions)?)),
        "filesystem" => Ok(Box::new(filesystem::FileReader::open(rel, physical, positions)?)),
        other => Err(WeirError::unsupported(format!(
            "table {}: the '{other}' connector's source is not built yet in this version",
            rel.name
        ))),
    }
}

/// One partition's committed progress.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PartitionProgress {
    /// The reader's position after the last row pushed.
    pub position: u64,
    /// The largest WATERMARK expression value (ms) of the partition's rows.
    pub watermark: Option<i64>,
    /// Whether the partition has ended.
    pub finished: bool,
    /// Rows of the partition pushed into the job (counted since 2026-12-06: a job created
    /// before counts only its rows read since).
    #[serde(default)]
    pub rows: u64,
    /// Records of the partition that did not decode (dead letters), counted as `rows`.
    #[serde(default)]
    pub dead_letters: u64,
    /// Records of the partition skipped as gone (Kafka retention), counted as `rows`.
    #[serde(default)]
    pub skipped: u64,
}

/// What a task stores at each commit.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SourceProgress {
    pub partitions: Vec<PartitionProgress>,
    /// The watermark last sent into the job (ms).
    pub watermark: Option<i64>,
    /// Rows pushed into the job since it was created.
    pub rows: u64,
    /// Records that did not decode (dead letters) since the job was created.
    #[serde(default)]
    pub dead_letters: u64,
    /// Records skipped as gone (Kafka retention) since the job was created.
    #[serde(default)]
    pub skipped: u64,
}

/// The reading of one connector table for one job.
pub struct SourceTask {
    /// The job (materialized view or INSERT job name) the rows go to.
    pub job: String,
    /// The connector table read.
    pub table: String,
    reader: Box<dyn SourceReader>,
    /// The table's full schema (its columns in declaration order), as the job's plan sees it.
    schema: SchemaRef,
    /// Computed columns, evaluated over the physical columns, in declaration order.
    computed: Vec<Arc<dyn PhysicalExpr>>,
    /// Where each of the table's columns comes from among the physical ones then the
    /// computed ones (a computed column may stand between physical ones, as declared).
    order: Vec<usize>,
    /// The WATERMARK expression over the full schema, if the table has one.
    watermark_expr: Option<Arc<dyn PhysicalExpr>>,
    /// Progress so far (committed or not).
    pub progress: SourceProgress,
    /// Dead letters read but not yet committed.
    pub dead_letters: Vec<DeadLetter>,
    /// When rows last arrived, per partition (for `'scan.watermark.idle-timeout'`).
    partition_seen: Vec<Option<std::time::Instant>>,
    /// When the task opened: a partition without rows since is idle after the timeout.
    started: std::time::Instant,
    /// `'scan.watermark.idle-timeout'`: a partition without rows for this long no longer holds
    /// the watermark back (Flink).
    idle_timeout: Option<std::time::Duration>,
    /// `'decode.on-error' = 'fail'`.
    fail_on_decode_error: bool,
    /// Why the task stopped (a record that did not decode, in fail mode); it reads no more.
    pub failure: Option<String>,
}

/// The table option choosing what a record that does not decode does: `'dead-letter'` (the
/// default: counted, logged, written to the dead-letter table, and the job goes on) or
/// `'fail'` (the job stops before it, FAILED in `SHOW JOBS` with the error; its position stays
/// before the batch holding the record, and the job reads nothing more until it is recreated).
pub const ON_DECODE_ERROR: &str = "decode.on-error";

/// Whether the records of table `table`, with options `options`, that do not decode stop the
/// job ([`ON_DECODE_ERROR`]).
///
/// # Errors
/// `InvalidOption` for a value other than `dead-letter` and `fail`.
pub fn fails_on_decode_error(table: &str, options: &std::collections::BTreeMap<String, String>) -> Result<bool> {
    match options.get(ON_DECODE_ERROR).map(|v| v.to_lowercase()).as_deref() {
        None | Some("dead-letter") => Ok(false),
        Some("fail") => Ok(true),
        Some(other) => Err(crate::error::WeirError::option(format!(
            "table {table}: '{ON_DECODE_ERROR}' = '{other}'; valid values: 'dead-letter', 'fail'"
        ))),
    }
}

/// The table option naming a connector table's dead-letter table.
pub const DEAD_LETTER_TABLE: &str = "dead-letter.table";

/// The table option naming a Kafka topic (on the table's own brokers) for a `kafka` or
/// `upsert-kafka` table's dead letters: each is written there as its raw bytes, with headers
/// `weir.dlq.error`, `weir.dlq.job`, `weir.dlq.topic`, `weir.dlq.partition` and
/// `weir.dlq.offset` (Kafka Connect's dead-letter queue convention: the record untouched, the
/// context in headers). At least once: written before the epoch that counts them commits.
pub const DEAD_LETTER_TOPIC: &str = "dead-letter.topic";

/// The table option after which a partition without rows stops holding the watermark back.
pub const IDLE_TIMEOUT: &str = "scan.watermark.idle-timeout";

/// The meta key of a task's progress.
pub fn progress_key(job: &str, table: &str) -> String {
    format!("src/{job}/{table}")
}

impl SourceTask {
    /// The task of `job` reading connector table `rel`, resuming from `progress` when given;
    /// with `read_ahead` = `Some(rows)` (a job at parallelism 2 or more) its reader runs on a
    /// thread of its own, reading batches of `rows` rows ahead (the `read_ahead` module).
    ///
    /// # Errors
    /// As [`open_reader`]; `Plan` when a computed column or the WATERMARK expression does not
    /// compile; `Internal` when the reading thread cannot start.
    pub fn open(job: &str, rel: &Relation, progress: Option<SourceProgress>, read_ahead: Option<usize>) -> Result<Self> {
        let schema = relation_schema(rel)?;
        let is_physical = |c: &weir_catalog::Column| c.computed.as_deref().is_none_or(|e| metadata_key(e).is_some());
        let physical_fields: Vec<_> = rel
            .columns
            .iter()
            .zip(schema.fields())
            .filter(|(c, _)| is_physical(c))
            .map(|(_, f)| f.as_ref().clone())
            .collect();
        let physical = Arc::new(arrow::datatypes::Schema::new(physical_fields));
        let ctx = SessionContext::new();
        crate::plan::functions::register(&ctx, crate::plan::time_zone::Zone::utc());
        let physical_df = DFSchema::try_from(physical.as_ref().clone())?;
        let computed = rel
            .columns
            .iter()
            .filter(|c| !is_physical(c))
            .filter_map(|c| c.computed.as_ref())
            .map(|sql| compile(&ctx, sql, &physical_df))
            .collect::<Result<Vec<_>>>()?;
        let (physical_count, mut next) = (physical.fields().len(), [0, 0]);
        let order = rel
            .columns
            .iter()
            .map(|c| {
                let (slot, base) = if is_physical(c) { (0, 0) } else { (1, physical_count) };
                next[slot] += 1;
                base + next[slot] - 1
            })
            .collect();
        let full_df = DFSchema::try_from(schema.as_ref().clone())?;
        let watermark_expr = rel.watermark.as_ref().map(|w| compile(&ctx, &w.expr, &full_df)).transpose()?;
        let positions: Option<Vec<u64>> = progress.as_ref().map(|p| p.partitions.iter().map(|p| p.position).collect());
        let mut reader = open_reader(rel, physical, positions.as_deref())?;
        let mut progress = progress.unwrap_or_default();
        progress.partitions.resize(reader.num_partitions(), PartitionProgress::default());
        for (p, partition) in progress.partitions.iter().enumerate() {
            if partition.finished {
                reader.resume_finished(p);
            }
        }
        let idle_timeout = match rel.options.get(IDLE_TIMEOUT) {
            Some(v) => Some(std::time::Duration::from_millis(
                crate::plan::duration::parse_duration_ms(IDLE_TIMEOUT, v)?.max(0) as u64,
            )),
            None => None,
        };
        if let Some(batch_rows) = read_ahead {
            reader = Box::new(read_ahead::ReadAhead::spawn(reader, format!("weir-src-{}", rel.name), batch_rows)?);
        }
        let partitions = reader.num_partitions();
        Ok(SourceTask {
            job: job.to_string(),
            table: rel.name.clone(),
            reader,
            schema,
            computed,
            order,
            watermark_expr,
            progress,
            dead_letters: Vec::new(),
            partition_seen: vec![None; partitions],
            started: std::time::Instant::now(),
            idle_timeout,
            fail_on_decode_error: fails_on_decode_error(&rel.name, &rel.options)?,
            failure: None,
        })
    }

    /// Makes room for partitions the reader discovered: each starts without rows or a
    /// watermark (holding the task's watermark back until it has rows, as a partition with no
    /// rows yet does) and is idle after `'scan.watermark.idle-timeout'` from now.
    fn add_discovered_partitions(&mut self) {
        let n = self.reader.num_partitions();
        if n > self.progress.partitions.len() {
            self.progress.partitions.resize(n, PartitionProgress::default());
            self.partition_seen.resize(n, Some(std::time::Instant::now()));
        }
    }

    /// Takes the reader's positions as the progress to commit (after rows, dead letters or
    /// skipped records moved them).
    fn sync_positions(&mut self) {
        let positions = self.reader.positions();
        for (p, progress) in self.progress.partitions.iter_mut().enumerate() {
            progress.position = positions[p];
        }
    }

    /// The next batch of at most `max_rows` rows in the table's full schema, the watermark the
    /// task reaches after it (if it moved forward), or `None` when nothing is available.
    ///
    /// # Errors
    /// The reader's errors; `Execution` when a computed column or the watermark fails on a row.
    pub fn next(&mut self, max_rows: usize) -> Result<Option<(Option<crate::runtime::StreamChunk>, Option<i64>)>> {
        if self.failure.is_some() {
            return Ok(None);
        }
        let polled = self.reader.poll(max_rows)?;
        self.add_discovered_partitions();
        let skipped = self.reader.take_skipped();
        if !skipped.is_empty() {
            for (p, n) in skipped {
                tracing::warn!(job = %self.job, table = %self.table, partition = p, skipped = n, "records were deleted before they were read; skipped per 'scan.out-of-range'");
                self.progress.skipped += n;
                if let Some(part) = self.progress.partitions.get_mut(p) {
                    part.skipped += n;
                }
            }
            self.sync_positions();
        }
        let dead = self.reader.take_dead_letters();
        if let (true, Some(d)) = (self.fail_on_decode_error, dead.first()) {
            // The batch is not pushed and the position stays before it.
            let error = format!(
                "table {}: the record at {} partition {} offset {} does not decode ('{ON_DECODE_ERROR}' = 'fail'): {}",
                self.table, d.source, d.partition, d.offset, d.error
            );
            tracing::error!(job = %self.job, "{error}");
            self.failure = Some(error);
            return Ok(None);
        }
        if !dead.is_empty() {
            for d in &dead {
                tracing::warn!(table = %self.table, source = %d.source, partition = d.partition, offset = d.offset, "record does not decode: {}", d.error);
            }
            self.progress.dead_letters += dead.len() as u64;
            for d in &dead {
                if let Some(part) = self.progress.partitions.get_mut(d.partition) {
                    part.dead_letters += 1;
                }
            }
            self.dead_letters.extend(dead);
            self.sync_positions();
        }
        let (partition, batch, ops) = match polled {
            SourcePoll::Batch { partition, batch, ops } => (partition, batch, ops),
            SourcePoll::Pending => {
                // Records that make no row (a Kafka tombstone or transaction marker) may have
                // moved a position.
                self.sync_positions();
                return Ok(self.advance_watermark().map(|w| (None, Some(w))));
            }
            SourcePoll::Failed(error) => {
                let error = format!("table {}: {error}", self.table);
                tracing::error!(job = %self.job, "{error}");
                self.failure = Some(error);
                return Ok(None);
            }
            SourcePoll::Finished => {
                for (p, progress) in self.progress.partitions.iter_mut().enumerate() {
                    progress.finished = self.reader.partition_finished(p);
                }
                return Ok(self.advance_watermark().map(|w| (None, Some(w))));
            }
        };
        let full = self.complete(&batch)?;
        let positions = self.reader.positions();
        for (p, progress) in self.progress.partitions.iter_mut().enumerate() {
            progress.position = positions[p];
            progress.finished = self.reader.partition_finished(p);
        }
        self.partition_seen[partition] = Some(std::time::Instant::now());
        if let Some(expr) = &self.watermark_expr {
            if let Some(wm) = max_timestamp_ms(expr.evaluate(&full)?.into_array(full.num_rows())?)? {
                let slot = &mut self.progress.partitions[partition].watermark;
                if slot.is_none_or(|w| w < wm) {
                    *slot = Some(wm);
                }
            }
        }
        self.progress.rows += full.num_rows() as u64;
        self.progress.partitions[partition].rows += full.num_rows() as u64;
        let wm = self.advance_watermark();
        let chunk = match ops {
            Some(ops) => crate::runtime::StreamChunk::new(ops, full),
            None => crate::runtime::StreamChunk::inserts(full),
        };
        Ok(Some((Some(chunk), wm)))
    }

    /// Recomputes the task's watermark; returns it if it moved forward.
    fn advance_watermark(&mut self) -> Option<i64> {
        self.watermark_expr.as_ref()?;
        let parts = &self.progress.partitions;
        let now = std::time::Instant::now();
        let idle = |i: usize| {
            self.idle_timeout.is_some_and(|t| now.duration_since(self.partition_seen[i].unwrap_or(self.started)) >= t)
        };
        let candidate = if parts.iter().all(|p| p.finished) {
            Some(END_OF_INPUT_WATERMARK)
        } else {
            let active: Vec<Option<i64>> =
                parts.iter().enumerate().filter(|(i, p)| !p.finished && !idle(*i)).map(|(_, p)| p.watermark).collect();
            if active.is_empty() {
                // Every partition idle: the watermark waits for the next row (Flink).
                None
            } else {
                active.into_iter().min().flatten()
            }
        };
        match candidate {
            Some(w) if self.progress.watermark.is_none_or(|old| old < w) => {
                self.progress.watermark = Some(w);
                Some(w)
            }
            _ => None,
        }
    }

    /// Tells the reader its positions were committed.
    pub fn on_committed(&mut self) {
        let positions = self.positions();
        self.reader.on_committed(&positions);
    }

    /// The position of each partition, as the next commit would store it.
    pub fn positions(&self) -> Vec<u64> {
        self.progress.partitions.iter().map(|p| p.position).collect()
    }

    /// Tells the reader that `positions` (from [`SourceTask::positions`] at a barrier) were
    /// committed, when the task has read on since.
    pub fn on_committed_at(&mut self, positions: &[u64]) {
        self.reader.on_committed(positions);
    }

    /// Per partition, the connector's high watermark (Kafka), if known.
    pub fn high_watermarks(&self) -> Vec<Option<i64>> {
        self.reader.high_watermarks()
    }

    /// Whether the task's input ends.
    pub fn bounded(&self) -> bool {
        self.reader.bounded()
    }

    /// Whether every partition has ended.
    pub fn finished(&self) -> bool {
        self.progress.partitions.iter().all(|p| p.finished)
    }

    /// `batch` (physical columns) with the computed columns, in the full schema.
    fn complete(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        for expr in &self.computed {
            columns.push(expr.evaluate(batch)?.into_array(batch.num_rows())?);
        }
        let columns = self
            .order
            .iter()
            .map(|i| Arc::clone(&columns[*i]))
            .zip(self.schema.fields())
            .map(|(c, f)| {
                if c.data_type() == f.data_type() {
                    Ok(c)
                } else {
                    Ok(arrow::compute::cast(&c, f.data_type())?)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let nullable = Arc::new(arrow::datatypes::Schema::new(
            self.schema.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>(),
        ));
        Ok(RecordBatch::try_new_with_options(
            nullable,
            columns,
            &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
        )?)
    }
}

/// Compiles SQL expression `sql` over `schema` with Weir's functions.
fn compile(ctx: &SessionContext, sql: &str, schema: &DFSchema) -> Result<Arc<dyn PhysicalExpr>> {
    let expr = ctx
        .parse_sql_expr(sql, schema)
        .map_err(|e| WeirError::plan(format!("expression {sql}: {e}")))?;
    Ok(ctx.create_physical_expr(expr, schema)?)
}

/// The largest value of a timestamp (or integer ms) array, in ms.
fn max_timestamp_ms(values: ArrayRef) -> Result<Option<i64>> {
    let ms = arrow::compute::cast(&values, &DataType::Timestamp(TimeUnit::Millisecond, None))?;
    let ms = arrow::compute::cast(&ms, &DataType::Int64)?;
    let ints = ms
        .as_any()
        .downcast_ref::<arrow::array::Int64Array>()
        .ok_or_else(|| WeirError::internal("watermark values did not cast to BIGINT"))?;
    Ok(max(ints))
}
