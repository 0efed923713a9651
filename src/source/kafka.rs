//! The `kafka` connector's reader: every partition of a topic
//! ([`weir_connectors::kafka::KafkaReader`], manual assignment), each record's value decoded by
//! the table's `'format'` (or `'value.format'`), metadata columns filled from the record
//! (Flink's `METADATA FROM` keys `partition`, `offset`, `timestamp`, `key`, `headers`, `topic`).
//! With `'key.fields'` those columns come from the record's key, decoded by `'key.format'`
//! (NULL for a record without a key), and the rest from its value
//! ([`weir_connectors::format::UpsertDecoder::appending`]).
//!
//! Partitions added to the topic while a job runs are found every
//! `'scan.topic-partition-discovery.interval'` (5 minutes unless set; `0`: never) and at each
//! `FLUSH`, and read from their earliest offset (Flink's partition discovery); one added while
//! the job was stopped is read from its earliest offset when it starts again.
//!
//! A partition's position is the offset of its next record. A record whose value (or key) does
//! not decode is a dead letter (see [`DeadLetter`]); a tombstone (no value) is skipped.
//!
//! The `upsert-kafka` connector reads the same way with the record's key decoded too (by
//! `'key.format'`, into the PRIMARY KEY columns) and the value by `'value.format'`: a record
//! with a value is `+I` (an upsert of its key), a tombstone is `-D` of its key with the other
//! columns NULL, and a record without a key is a dead letter. That upsert changelog is made a
//! retracting one by the planner's `ChangelogNormalize` (see `runtime::operators::normalize`).
//! Flink's upsert-kafka reads from the earliest offset; so does Weir's unless
//! `'scan.startup.mode'` says otherwise.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{
    ArrayRef, BinaryBuilder, Int32Array, Int64Array, MapBuilder, RecordBatch, RecordBatchOptions, StringArray,
    StringBuilder, TimestampMillisecondArray,
};
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use weir_catalog::Relation;
use weir_connectors::format::{Decoder, UpsertDecoder};
use weir_connectors::kafka::{KafkaReader, KafkaRecord, KafkaSourceConfig};

use super::{metadata_columns, DeadLetter, SourcePoll, SourceReader};
use crate::error::{Result, WeirError};
use crate::runtime::changelog::Op;

/// How long one poll waits for the first record.
const POLL_WAIT: Duration = Duration::from_millis(5);
/// How often the partitions' high watermarks (for the lag) are fetched.
const LAG_REFRESH: Duration = Duration::from_secs(1);

/// Asks of every Kafka source in the process, at its next poll, to look for partitions added to
/// its topic now rather than at its next discovery interval (`FLUSH` does, so that it reads
/// what was produced into them before it began). Sources with discovery off (`0`) do not look.
pub fn request_discovery() {
    DISCOVERY_REQUESTS.fetch_add(1, Ordering::Relaxed);
}

/// How many times [`request_discovery`] was called.
static DISCOVERY_REQUESTS: AtomicU64 = AtomicU64::new(0);

/// Whether a source of `kafka` or `upsert-kafka` table `rel` looks for partitions added to its
/// topic (`'scan.topic-partition-discovery.interval'` is not `0`).
pub fn discovers_partitions(rel: &Relation) -> bool {
    source_config(rel).is_ok_and(|c| c.discovery_interval.is_some())
}

/// Reads one `kafka` table.
pub struct KafkaSource {
    reader: KafkaReader,
    config: KafkaSourceConfig,
    decoder: ValueDecoder,
    /// The physical columns (value and metadata), all nullable.
    schema: SchemaRef,
    /// Per physical column, its metadata key (`None`: from the value).
    metadata: Vec<Option<String>>,
    /// The value columns' schema (what the decoder produces).
    value_schema: SchemaRef,
    /// Records polled but not yet returned, one partition each: the partition index, its rows
    /// (none when every record was a tombstone or a dead letter), and the partition's position
    /// after them. A position moves only when its rows are returned, so a commit never covers
    /// rows still queued here.
    ready: VecDeque<(usize, Option<(RecordBatch, Option<Vec<Op>>)>, i64)>,
    /// Per partition index, the offset of the next record to return.
    positions: Vec<i64>,
    /// Dead letters of queued records, released with them.
    queued_dead_letters: Vec<(usize, DeadLetter)>,
    dead_letters: Vec<DeadLetter>,
    /// Per partition index, the last high watermark fetched, and when.
    high_watermarks: Vec<Option<i64>>,
    lag_fetched: Option<Instant>,
    /// Records skipped by `'scan.out-of-range'` since the last `take_skipped`.
    skipped: Vec<(usize, u64)>,
    /// When the reader last looked for new partitions, and the [`request_discovery`] count then.
    discovered: (Instant, u64),
}

/// How a record becomes a row: its value alone (`kafka`), or its key and value (`upsert-kafka`,
/// and `kafka` with `'key.fields'`).
enum ValueDecoder {
    Value(Box<dyn Decoder>),
    Upsert(UpsertDecoder),
}

impl KafkaSource {
    /// The reader of table `rel` producing `physical`, at offsets `positions` (one per
    /// partition, ascending partition id) or else per `'scan.startup.mode'`.
    ///
    /// # Errors
    /// `InvalidOption` for bad options or a format that cannot decode the columns; `Execution`
    /// when the brokers cannot be reached or the topic does not exist.
    pub fn open(rel: &Relation, physical: SchemaRef, positions: Option<&[u64]>) -> Result<Self> {
        let upsert = crate::runtime::relation::connector_of(rel) == "upsert-kafka";
        let config = source_config(rel)?;
        let metadata = metadata_columns(rel);
        let schema = Arc::new(arrow::datatypes::Schema::new(
            physical.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>(),
        ));
        let value_schema = Arc::new(arrow::datatypes::Schema::new(
            schema.fields().iter().zip(&metadata).filter(|(_, m)| m.is_none()).map(|(f, _)| f.as_ref().clone()).collect::<Vec<_>>(),
        ));
        for (field, key) in schema.fields().iter().zip(&metadata) {
            if let Some(key) = key {
                check_metadata_type(&rel.name, field.name(), key, field.data_type())?;
            }
        }
        let decoder = if upsert {
            let key: Option<Vec<usize>> = rel.primary_key.iter().map(|k| value_schema.index_of(k).ok()).collect();
            let key = key.filter(|k| !k.is_empty()).ok_or_else(|| {
                WeirError::plan(format!(
                    "table {}: an 'upsert-kafka' table needs a PRIMARY KEY (..) NOT ENFORCED of value columns: it is the Kafka key",
                    rel.name
                ))
            })?;
            ValueDecoder::Upsert(
                UpsertDecoder::try_new(&rel.options, Arc::clone(&value_schema), &key)
                    .map_err(|e| WeirError::option(format!("table {}: {e}", rel.name)))?,
            )
        } else if let Some(fields) = weir_connectors::format::key_fields(&rel.options) {
            let key = key_field_columns(&rel.name, &fields, &value_schema)?;
            ValueDecoder::Upsert(
                UpsertDecoder::appending(&rel.options, Arc::clone(&value_schema), &key)
                    .map_err(|e| WeirError::option(format!("table {}: {e}", rel.name)))?,
            )
        } else {
            let prefix = weir_connectors::format::value_prefix(&rel.options);
            ValueDecoder::Value(
                weir_connectors::format::decoder(&rel.options, prefix, Arc::clone(&value_schema))
                    .map_err(|e| WeirError::option(format!("table {}: {e}", rel.name)))?,
            )
        };
        // The partitions are known once the reader opens; a resumed reader gets its offsets
        // by partition id after it has listed them.
        let probe = KafkaReader::open(&config, &BTreeMap::new()).map_err(kafka_error)?;
        let ids: Vec<i32> = probe.partitions().to_vec();
        let reader = match positions {
            Some(positions) => {
                drop(probe);
                let resume: BTreeMap<i32, i64> = ids.iter().zip(positions).map(|(id, p)| (*id, *p as i64)).collect();
                KafkaReader::open(&config, &resume).map_err(kafka_error)?
            }
            None => probe,
        };
        let positions = reader.partitions().iter().map(|id| reader.positions().get(id).copied().unwrap_or(0)).collect();
        let n = reader.partitions().len();
        Ok(KafkaSource {
            reader,
            config,
            decoder,
            schema,
            metadata,
            value_schema,
            ready: VecDeque::new(),
            positions,
            dead_letters: Vec::new(),
            queued_dead_letters: Vec::new(),
            high_watermarks: vec![None; n],
            lag_fetched: None,
            skipped: Vec::new(),
            discovered: (Instant::now(), DISCOVERY_REQUESTS.load(Ordering::Relaxed)),
        })
    }

    /// Looks for partitions added to the topic when the discovery interval is up or
    /// [`request_discovery`] was called since the last look; new ones are read from their
    /// earliest offset, numbered after the others. A look that fails (the brokers away) is
    /// logged and tried again at the next interval: the partitions known are read on.
    fn discover_if_due(&mut self) {
        let Some(interval) = self.config.discovery_interval else { return };
        let requests = DISCOVERY_REQUESTS.load(Ordering::Relaxed);
        if self.discovered.0.elapsed() < interval && self.discovered.1 == requests {
            return;
        }
        self.discovered = (Instant::now(), requests);
        match self.reader.discover() {
            Ok(added) => {
                for id in &added {
                    tracing::info!(topic = %self.config.topic, partition = id, "reading a partition added to the topic, from its earliest offset");
                    self.positions.push(self.reader.positions().get(id).copied().unwrap_or(0));
                    self.high_watermarks.push(None);
                }
            }
            Err(e) => tracing::warn!(topic = %self.config.topic, "looking for partitions added to the topic: {e}"),
        }
    }

    fn index_of(&self, partition: i32) -> Option<usize> {
        self.reader.partitions().iter().position(|p| *p == partition)
    }

    /// Decodes the records of one partition into a batch of the physical columns.
    fn decode(&mut self, index: usize, records: &[KafkaRecord]) -> Result<Option<(RecordBatch, Option<Vec<Op>>)>> {
        // The records decoded: those with a value (`kafka`), or all of them (`upsert-kafka`,
        // where a tombstone is a delete).
        let (inputs, decoded) = match &mut self.decoder {
            ValueDecoder::Value(decoder) => {
                let inputs: Vec<&KafkaRecord> = records.iter().filter(|r| r.payload.is_some()).collect();
                if inputs.is_empty() {
                    return Ok(None);
                }
                let payloads: Vec<&[u8]> = inputs.iter().map(|r| r.payload.as_deref().unwrap_or_default()).collect();
                (inputs, decoder.decode(&payloads))
            }
            ValueDecoder::Upsert(decoder) => {
                let inputs: Vec<&KafkaRecord> = records.iter().collect();
                let pairs: Vec<_> = inputs.iter().map(|r| (r.key.as_deref(), r.payload.as_deref())).collect();
                (inputs, decoder.decode(&pairs))
            }
        };
        let decoded = decoded.map_err(|e| match e {
            // The schema registry is out of reach: the source retries from its last commit.
            weir_connectors::ConnectorError::Registry { .. } => WeirError::execution(e.to_string()),
            other => WeirError::internal(other.to_string()),
        })?;
        for e in &decoded.errors {
            let r = inputs[e.index];
            self.queued_dead_letters.push((index, DeadLetter {
                partition: index,
                source: self.config.topic.clone(),
                offset: r.offset,
                raw: r.payload.clone().or_else(|| r.key.clone()).unwrap_or_default(),
                error: e.message.clone(),
            }));
        }
        if decoded.batch.num_rows() == 0 {
            return Ok(None);
        }
        let rows: Vec<&KafkaRecord> = decoded.sources.iter().map(|i| inputs[*i]).collect();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        for (field, key) in self.schema.fields().iter().zip(&self.metadata) {
            let column = match key {
                None => {
                    let i = self.value_schema.index_of(field.name())?;
                    Arc::clone(decoded.batch.column(i))
                }
                Some(key) => metadata_column(key, &rows, &self.config.topic, field.data_type())?,
            };
            columns.push(column);
        }
        let ops = decoded.ops;
        let batch = RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows.len())),
        )?;
        Ok(Some((batch, ops)))
    }
}

/// Per partition of `rel`'s topic (ascending ids, as a [`KafkaSource`] of it numbers them),
/// the position at which a reader has read every record readable now (the last stable offset
/// under `read_committed`; [`KafkaReader::end_offsets`]). `FLUSH` waits for these.
///
/// # Errors
/// `InvalidOption` for bad options; `Execution` when the brokers cannot be reached or the
/// topic does not exist (`FLUSH` reports it as 58000, naming the table and job).
pub fn end_positions(rel: &Relation) -> Result<Vec<u64>> {
    let ends = KafkaReader::end_offsets(&source_config(rel)?).map_err(kafka_error)?;
    Ok(ends.into_values().map(|end| end.max(0) as u64).collect())
}

/// The reader configuration of `kafka` or `upsert-kafka` table `rel`.
///
/// # Errors
/// `InvalidOption` for bad options.
fn source_config(rel: &Relation) -> Result<KafkaSourceConfig> {
    let mut options = rel.options.clone();
    if crate::runtime::relation::connector_of(rel) == "upsert-kafka" {
        options.entry("scan.startup.mode".into()).or_insert_with(|| "earliest-offset".into());
    }
    KafkaSourceConfig::from_options(&options).map_err(|e| WeirError::option(e.to_string()))
}

fn kafka_error(e: weir_connectors::ConnectorError) -> WeirError {
    match e {
        weir_connectors::ConnectorError::Kafka { .. } => WeirError::execution(e.to_string()),
        other => WeirError::option(other.to_string()),
    }
}

/// The positions in `value_schema` (a table's columns read from the message) of a `kafka`
/// table's `'key.fields'` `fields`.
///
/// # Errors
/// `InvalidOption` naming a field that is not such a column, or one named twice.
pub fn key_field_columns(table: &str, fields: &[String], value_schema: &arrow::datatypes::Schema) -> Result<Vec<usize>> {
    if let Some(twice) = fields.iter().enumerate().find_map(|(i, f)| fields[..i].contains(f).then_some(f)) {
        return Err(WeirError::option(format!("table {table}: 'key.fields' names '{twice}' twice")));
    }
    fields
        .iter()
        .map(|f| {
            value_schema.index_of(f).map_err(|_| {
                let columns: Vec<&str> = value_schema.fields().iter().map(|c| c.name().as_str()).collect();
                WeirError::option(format!(
                    "table {table}: 'key.fields' names '{f}', which is not one of the columns the message holds ({})",
                    columns.join(", ")
                ))
            })
        })
        .collect()
}

/// The types a metadata key can be read as (Flink's Kafka connector).
fn check_metadata_type(table: &str, column: &str, key: &str, t: &DataType) -> Result<()> {
    let ok = match key {
        "partition" => matches!(t, DataType::Int32 | DataType::Int64),
        "offset" => matches!(t, DataType::Int64),
        "timestamp" => matches!(t, DataType::Timestamp(TimeUnit::Millisecond, _)),
        "key" => matches!(t, DataType::Binary | DataType::Utf8),
        "topic" => matches!(t, DataType::Utf8),
        "headers" => matches!(t, DataType::Map(..)),
        _ => {
            return Err(WeirError::plan(format!(
                "table {table}: column {column}: unknown Kafka metadata '{key}'; valid: topic, partition, offset, timestamp, key, headers"
            )))
        }
    };
    if ok {
        Ok(())
    } else {
        Err(WeirError::plan(format!(
            "table {table}: column {column} reads Kafka metadata '{key}' but has type {t}; use {}",
            match key {
                "partition" => "INT",
                "offset" => "BIGINT",
                "timestamp" => "TIMESTAMP(3) or TIMESTAMP_LTZ(3)",
                "key" => "BYTES or STRING",
                "topic" => "STRING",
                _ => "MAP<STRING, BYTES>",
            }
        )))
    }
}

/// The column of metadata `key` for `rows`.
fn metadata_column(key: &str, rows: &[&KafkaRecord], topic: &str, t: &DataType) -> Result<ArrayRef> {
    Ok(match key {
        "partition" => {
            let a: ArrayRef = Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.partition)));
            arrow::compute::cast(&a, t)?
        }
        "offset" => Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.offset))),
        "timestamp" => {
            let a: ArrayRef = Arc::new(TimestampMillisecondArray::from(rows.iter().map(|r| r.timestamp_ms).collect::<Vec<_>>()));
            arrow::compute::cast(&a, t)?
        }
        "topic" => Arc::new(StringArray::from(vec![topic; rows.len()])),
        "key" => match t {
            DataType::Utf8 => Arc::new(StringArray::from(
                rows.iter().map(|r| r.key.as_ref().map(|k| String::from_utf8_lossy(k).into_owned())).collect::<Vec<_>>(),
            )),
            _ => {
                let mut b = BinaryBuilder::new();
                for r in rows {
                    b.append_option(r.key.as_deref());
                }
                Arc::new(b.finish())
            }
        },
        _ => {
            // headers: MAP<STRING, BYTES>
            let mut b = MapBuilder::new(None, StringBuilder::new(), BinaryBuilder::new());
            for r in rows {
                for h in &r.headers {
                    b.keys().append_value(&h.key);
                    b.values().append_option(h.value.as_deref());
                }
                b.append(true)?;
            }
            let a: ArrayRef = Arc::new(b.finish());
            if a.data_type() == t {
                a
            } else {
                arrow::compute::cast(&a, t)?
            }
        }
    })
}

impl SourceReader for KafkaSource {
    fn num_partitions(&self) -> usize {
        self.reader.partitions().len()
    }

    fn poll(&mut self, max_rows: usize) -> Result<SourcePoll> {
        if self.lag_fetched.is_none_or(|t| t.elapsed() >= LAG_REFRESH) {
            self.lag_fetched = Some(Instant::now());
            if let Ok(hw) = self.reader.high_watermarks() {
                for (i, id) in self.reader.partitions().iter().enumerate() {
                    self.high_watermarks[i] = hw.get(id).copied();
                }
            }
        }
        if self.ready.is_empty() {
            self.discover_if_due();
            let records = match self.reader.poll(max_rows, POLL_WAIT) {
                // The job fails alone; its committed position stays where it was.
                Err(e @ weir_connectors::ConnectorError::OutOfRange { .. }) => return Ok(SourcePoll::Failed(e.to_string())),
                polled => polled.map_err(kafka_error)?,
            };
            // Nothing is queued (`ready` is empty): a moved position holds from here.
            for reset in self.reader.take_resets() {
                if let Some(index) = self.index_of(reset.partition) {
                    tracing::warn!(
                        topic = %self.config.topic, partition = reset.partition, from = reset.from, to = reset.to,
                        "the next offset is no longer in the partition; skipping {} records ('scan.out-of-range')", reset.skipped
                    );
                    self.positions[index] = reset.to;
                    self.skipped.push((index, reset.skipped));
                }
            }
            let mut by_partition: BTreeMap<i32, Vec<KafkaRecord>> = BTreeMap::new();
            for r in records {
                by_partition.entry(r.partition).or_default().push(r);
            }
            let mut queued = self.positions.clone();
            for (partition, records) in by_partition {
                let Some(index) = self.index_of(partition) else { continue };
                let next = records.last().map(|r| r.offset + 1).unwrap_or(self.positions[index]);
                let batch = self.decode(index, &records)?;
                self.ready.push_back((index, batch, next));
                queued[index] = next;
            }
            // Offsets the reader passed without a record (transaction markers, aborted
            // messages): the position moves past them once what came before is released.
            for (index, id) in self.reader.partitions().iter().enumerate() {
                if let Some(&position) = self.reader.positions().get(id).filter(|p| **p > queued[index]) {
                    self.ready.push_back((index, None, position));
                }
            }
        }
        // Release queued records in order; tombstones and dead letters only move a position.
        while let Some((partition, batch, next)) = self.ready.pop_front() {
            self.positions[partition] = next;
            let (mine, rest): (Vec<_>, Vec<_>) =
                std::mem::take(&mut self.queued_dead_letters).into_iter().partition(|(p, _)| *p == partition);
            self.queued_dead_letters = rest;
            self.dead_letters.extend(mine.into_iter().map(|(_, d)| d));
            if let Some((batch, ops)) = batch {
                return Ok(SourcePoll::Batch { partition, batch, ops });
            }
        }
        Ok(SourcePoll::Pending)
    }

    fn positions(&self) -> Vec<u64> {
        self.positions.iter().map(|p| (*p).max(0) as u64).collect()
    }

    fn partition_finished(&self, _: usize) -> bool {
        false
    }

    fn bounded(&self) -> bool {
        false
    }

    fn take_dead_letters(&mut self) -> Vec<DeadLetter> {
        std::mem::take(&mut self.dead_letters)
    }

    fn take_skipped(&mut self) -> Vec<(usize, u64)> {
        std::mem::take(&mut self.skipped)
    }

    fn on_committed(&mut self, positions: &[u64]) {
        if self.config.group_id.is_none() {
            return;
        }
        let offsets: BTreeMap<i32, i64> =
            self.reader.partitions().iter().zip(positions).map(|(id, p)| (*id, *p as i64)).collect();
        if let Err(e) = self.reader.commit_to_group(&offsets) {
            tracing::warn!("committing offsets to consumer group: {e}");
        }
    }

    fn high_watermarks(&self) -> Vec<Option<i64>> {
        self.high_watermarks.clone()
    }
}
