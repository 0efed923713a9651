//! Sinks: the root of an `INSERT INTO <connector table>` job.
//!
//! - [`Blackhole`] (`'connector' = 'blackhole'`): counts the changelog rows and drops them
//!   (Flink's blackhole, for benchmarks).
//! - [`PrintSink`] (`'connector' = 'print'`): prints each changelog row (Flink's print).
//! - [`FileSink`] (`'connector' = 'filesystem'`, `'path'` a directory): appends the rows as
//!   JSON lines (or CSV) to `<path>/part-<job id>.<format>`, exactly once: rows are buffered
//!   during an epoch and written and synced at its barrier, and the file's length is stored in
//!   the same epoch's commit. A restarted job truncates the file to its committed length before
//!   the sources replay what followed, so no row is lost or written twice.
//!
//! Append-only sinks take inserts only; the planner refuses an updating query first
//! (`is_append_only_sink`), so a delete reaching one is our bug.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use crate::error::{Result, WeirError};
use crate::runtime::changelog::StreamChunk;
use crate::runtime::operator::{OpContext, Operator};
use crate::state::{EpochWrites, Store};

/// Counts and drops every changelog row.
pub struct Blackhole {
    /// Rows received (inserts, deletes and updates alike), shared with whoever watches.
    pub rows: Arc<AtomicU64>,
}

impl Operator for Blackhole {
    fn name(&self) -> &'static str {
        "BlackholeSink"
    }
    fn process_batch(&mut self, _: usize, chunk: StreamChunk, _: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        self.rows.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        Ok(None)
    }
}

/// Prints every changelog row as Flink's `print` connector does: `+I[1, abc]` (the row kind,
/// then the values in column order, NULL as `null`), after `'print-identifier'> ` when the table
/// has one, to the server's standard output, or its standard error with
/// `'standard-error' = 'true'`. Rows of any kind: updates print as `-U[..]` and `+U[..]`.
pub struct PrintSink {
    /// `'print-identifier'`, with the `> ` that follows it; empty without one.
    pub prefix: String,
    /// `'standard-error' = 'true'`.
    pub stderr: bool,
}

impl Operator for PrintSink {
    fn name(&self) -> &'static str {
        "PrintSink"
    }
    fn process_batch(&mut self, _: usize, chunk: StreamChunk, _: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        use arrow::util::display::{ArrayFormatter, FormatOptions};
        let options = FormatOptions::default().with_null("null");
        let formatters = chunk
            .batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let mut text = String::new();
        for (row, op) in chunk.ops.iter().enumerate() {
            let values: Vec<String> = formatters.iter().map(|f| f.value(row).to_string()).collect();
            text.push_str(&format!("{}{op}[{}]\n", self.prefix, values.join(", ")));
        }
        // One write per chunk, so rows of two jobs do not interleave within a line.
        let written = if self.stderr {
            std::io::stderr().lock().write_all(text.as_bytes())
        } else {
            std::io::stdout().lock().write_all(text.as_bytes())
        };
        written.map_err(|e| WeirError::storage(format!("print sink: {e}")))?;
        Ok(None)
    }
}

/// The record format a [`FileSink`] writes: one record of the table's format per line, by the
/// format's encoder (a Kafka table's, with the same options: `json` writes timestamps in Flink's
/// `SQL` form unless `'json.timestamp-format.standard' = 'ISO-8601'`, and leaves NULL fields
/// out with `'json.encode.ignore-null-fields'`).
pub struct FileFormat {
    /// The files' extension: the format's name (`json`, `csv`).
    pub extension: &'static str,
    pub encoder: Box<dyn weir_connectors::format::Encoder>,
}

/// Appends rows to one file of a directory, exactly once; see the module docs.
pub struct FileSink {
    path: PathBuf,
    /// The sink table's physical columns, which rows are renamed and cast to, in the job's zone.
    assignment: Assignment,
    file: File,
    format: FileFormat,
    /// Rows of this epoch, encoded.
    buffer: Vec<u8>,
    /// The file's length after the last barrier.
    length: u64,
    /// The state table holding the committed length under key `len`.
    state: u32,
}

const LENGTH_KEY: &[u8] = b"len";

impl FileSink {
    /// The sink writing `dir/part-<job>.<ext>`; truncates the file to the length committed in
    /// state table `state` (or creates it empty for a new job).
    ///
    /// # Errors
    /// `Storage` when the directory or file cannot be created or truncated.
    pub fn open(dir: &Path, job: &str, format: FileFormat, schema: SchemaRef, state: u32, store: &Store) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| WeirError::storage(format!("creating {}: {e}", dir.display())))?;
        let path = dir.join(format!("part-{job}.{}", format.extension));
        let length = match store.get(state, LENGTH_KEY)? {
            Some(b) => u64::from_be_bytes(b.as_slice().try_into().map_err(|_| WeirError::storage("bad sink length"))?),
            None => 0,
        };
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| WeirError::storage(format!("opening {}: {e}", path.display())))?;
        file.set_len(length).map_err(|e| WeirError::storage(format!("truncating {}: {e}", path.display())))?;
        Ok(FileSink { path, assignment: Assignment::utc(schema), file, format, buffer: Vec::new(), length, state })
    }

    /// This sink converting rows in time zone `zone`, the job's ([`Assignment`]).
    pub fn in_zone(mut self, zone: crate::plan::time_zone::Zone) -> Self {
        self.assignment.zone = zone;
        self
    }
}

impl Operator for FileSink {
    fn name(&self) -> &'static str {
        "FileSink"
    }

    fn process_batch(&mut self, _: usize, chunk: StreamChunk, _: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        if !chunk.ops.iter().all(|op| op.is_insert()) {
            return Err(WeirError::internal("a retraction reached the append-only file sink"));
        }
        let batch = self.assignment.batch(&chunk)?;
        let records = self.format.encoder.encode(&batch, None).map_err(|e| WeirError::execution(format!("{}: {e}", self.path.display())))?;
        for record in records.into_iter().flatten() {
            self.buffer.extend_from_slice(&record);
            self.buffer.push(b'\n');
        }
        Ok(None)
    }

    fn on_barrier(&mut self, writes: &mut EpochWrites, _ctx: &OpContext<'_>) -> Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let fail = |e: std::io::Error| WeirError::storage(format!("writing {}: {e}", self.path.display()));
        self.file.write_all(&self.buffer).map_err(fail)?;
        self.file.sync_data().map_err(fail)?;
        self.length += self.buffer.len() as u64;
        self.buffer.clear();
        writes.put(self.state, LENGTH_KEY, &self.length.to_be_bytes());
        Ok(())
    }
}

/// How a [`KafkaSink`] turns rows into messages.
pub enum KafkaEncoding {
    /// `kafka`: the value only, by the table's `'format'`; no key (round-robin partitions).
    Value(Box<dyn weir_connectors::format::Encoder>),
    /// `upsert-kafka`: the primary key as the message key, the row as the value, a tombstone
    /// for a delete. A `kafka` table with `'key.fields'`: those columns as the message key, one
    /// message per row.
    Upsert(weir_connectors::format::UpsertEncoder),
}

/// Writes rows to a Kafka topic.
///
/// At least once (the default): messages are sent as rows arrive and the epoch's barrier waits
/// until the broker has acknowledged all of them, so a committed epoch's rows are in the topic
/// (a crash between the flush and the commit writes them again after the restart).
///
/// Exactly once (`'sink.delivery-guarantee' = 'exactly-once'`, [`KafkaSink::exactly_once`]),
/// two-phase as Flink's `TwoPhaseCommitSinkFunction`: the epoch's messages go into one Kafka
/// transaction; the barrier pre-commits it (flush) and writes the epoch's messages, under the
/// transaction's sequence number, to the sink's state table (the *outbox*) in the epoch's
/// commit; after the commit ([`Operator::on_committed`]) the transaction is committed in Kafka
/// with its sequence number as marker; the next barrier deletes the outbox entries of
/// transactions Kafka has. On restart the sink's transactional id fences the previous instance
/// and aborts its open transaction, and every transaction still in the outbox whose sequence
/// number is above Kafka's marker is sent again in a transaction of its own. So whatever the
/// moment of a crash:
///
/// - before the epoch's commit: the transaction is aborted and the epoch replays from the
///   sources' committed positions;
/// - after the commit, before Kafka's: the outbox has the epoch's messages and Kafka's marker
///   does not, so they are sent again;
/// - after Kafka's commit: the marker covers the outbox entries, which are dropped.
///
/// (librdkafka cannot resume another producer's open transaction, as Flink's Java client does
/// by reflection; the outbox is what makes the second phase replayable without it.)
pub struct KafkaSink {
    writer: Box<dyn KafkaProducer>,
    encoding: KafkaEncoding,
    /// The sink table's physical columns, which rows are renamed and cast to, in the job's zone.
    assignment: Assignment,
    /// With exactly-once: the outbox of transactions.
    outbox: Option<Outbox>,
}

/// What a [`KafkaSink`] needs of a Kafka producer: [`weir_connectors::kafka::KafkaWriter`]
/// against brokers; a model broker with Kafka's transaction semantics in this module's tests.
pub trait KafkaProducer: Send + Sync {
    /// Queues a message (in a transactional producer: in the open transaction, begun if none).
    fn send(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) -> std::result::Result<(), weir_connectors::ConnectorError>;
    /// Waits until every queued message is acknowledged (the pre-commit).
    fn flush(&mut self) -> std::result::Result<(), weir_connectors::ConnectorError>;
    /// Commits the open transaction with marker `sequence`; a no-op without one.
    fn commit_transaction(&mut self, sequence: u64) -> std::result::Result<(), weir_connectors::ConnectorError>;
    /// The marker of the last committed transaction.
    fn committed_marker(&self) -> std::result::Result<Option<u64>, weir_connectors::ConnectorError>;
}

/// How long a flush (pre-commit) may wait for the brokers.
const FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl KafkaProducer for weir_connectors::kafka::KafkaWriter {
    fn send(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) -> std::result::Result<(), weir_connectors::ConnectorError> {
        weir_connectors::kafka::KafkaWriter::send(self, key, value, &[], None)
    }
    fn flush(&mut self) -> std::result::Result<(), weir_connectors::ConnectorError> {
        weir_connectors::kafka::KafkaWriter::flush(self, FLUSH_TIMEOUT)
    }
    fn commit_transaction(&mut self, sequence: u64) -> std::result::Result<(), weir_connectors::ConnectorError> {
        weir_connectors::kafka::KafkaWriter::commit_transaction(self, sequence)
    }
    fn committed_marker(&self) -> std::result::Result<Option<u64>, weir_connectors::ConnectorError> {
        weir_connectors::kafka::KafkaWriter::committed_marker(self)
    }
}

/// One message: key and value (`None`: no key; a tombstone).
type Message = (Option<Vec<u8>>, Option<Vec<u8>>);

/// An exactly-once sink's transactions as its state table records them. Keys: `seq` holds the
/// last sequence number committed in state (u64, big-endian); `o` + sequence (u64 BE) + part
/// (u32 BE) holds up to [`OUTBOX_PART_BYTES`] of that transaction's messages, each as
/// [`encode_message`] writes it.
struct Outbox {
    state: u32,
    /// The last sequence number of a transaction committed in state.
    sequence: u64,
    /// The messages of the open transaction (sent since the last commit in Kafka), encoded.
    messages: Vec<u8>,
    /// The sequence number given to the open transaction at the last barrier, when its
    /// epoch's commit has not been reported yet.
    precommitted: Option<u64>,
    /// Kafka has every transaction up to this sequence number; the next barrier deletes them
    /// from the outbox.
    delivered: Option<u64>,
    /// Why the last Kafka commit failed; returned at the next batch or barrier, so the job
    /// recovers from the last commit.
    failure: Option<String>,
}

const SEQUENCE_KEY: &[u8] = b"seq";
const OUTBOX_PREFIX: u8 = b'o';
/// The size of one outbox value (the last of a transaction may be smaller; one message larger).
const OUTBOX_PART_BYTES: usize = 1 << 20;

fn outbox_key(sequence: u64, part: u32) -> Vec<u8> {
    let mut key = Vec::with_capacity(13);
    key.push(OUTBOX_PREFIX);
    key.extend_from_slice(&sequence.to_be_bytes());
    key.extend_from_slice(&part.to_be_bytes());
    key
}

/// Appends a message to `out`: a flags byte (1: has a key, 2: has a value), the key's and the
/// value's lengths (u32 BE), their bytes.
fn encode_message(key: Option<&[u8]>, value: Option<&[u8]>, out: &mut Vec<u8>) {
    let (k, v) = (key.unwrap_or_default(), value.unwrap_or_default());
    out.push(u8::from(key.is_some()) | (u8::from(value.is_some()) << 1));
    out.extend_from_slice(&(k.len() as u32).to_be_bytes());
    out.extend_from_slice(&(v.len() as u32).to_be_bytes());
    out.extend_from_slice(k);
    out.extend_from_slice(v);
}

/// The messages [`encode_message`] appended to `bytes`.
fn decode_messages(mut bytes: &[u8]) -> Result<Vec<Message>> {
    let bad = || WeirError::storage("a malformed message in a Kafka sink's outbox");
    let mut out = Vec::new();
    while let Some((&flags, rest)) = bytes.split_first() {
        let len = |at: usize| rest.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize);
        let (k, v) = (len(0).ok_or_else(bad)?, len(4).ok_or_else(bad)?);
        let key = rest.get(8..8 + k).ok_or_else(bad)?;
        let value = rest.get(8 + k..8 + k + v).ok_or_else(bad)?;
        out.push(((flags & 1 != 0).then(|| key.to_vec()), (flags & 2 != 0).then(|| value.to_vec())));
        bytes = &rest[8 + k + v..];
    }
    Ok(out)
}

/// Splits encoded messages into parts of at least [`OUTBOX_PART_BYTES`] (a message is never
/// split).
fn outbox_parts(mut bytes: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    while !bytes.is_empty() {
        let mut end = 0;
        while end < bytes.len() && end < OUTBOX_PART_BYTES {
            let len = |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as usize;
            end += 9 + len(end + 1) + len(end + 5);
        }
        let end = end.min(bytes.len());
        parts.push(&bytes[..end]);
        bytes = &bytes[end..];
    }
    parts
}

impl KafkaSink {
    /// A sink writing rows of `schema` with `writer` and `encoding`, at least once (or with
    /// no guarantee, as the writer's config says).
    pub fn new(writer: Box<dyn KafkaProducer>, encoding: KafkaEncoding, schema: SchemaRef) -> Self {
        KafkaSink { writer, encoding, assignment: Assignment::utc(schema), outbox: None }
    }

    /// An exactly-once sink over transactional `writer`, its outbox in state table `state`;
    /// first sends again, each in a transaction of its own, the outbox's transactions that
    /// Kafka's marker does not cover (see the type's docs).
    ///
    /// # Errors
    /// `Storage` for an unreadable outbox; `Execution` when Kafka cannot be asked or written.
    pub fn exactly_once(
        mut writer: Box<dyn KafkaProducer>,
        encoding: KafkaEncoding,
        schema: SchemaRef,
        state: u32,
        store: &Store,
    ) -> Result<Self> {
        let sequence = match store.get(state, SEQUENCE_KEY)? {
            Some(b) => u64::from_be_bytes(b.as_slice().try_into().map_err(|_| WeirError::storage("bad sink sequence"))?),
            None => 0,
        };
        let mut pending: std::collections::BTreeMap<u64, Vec<Message>> = std::collections::BTreeMap::new();
        store.scan_prefix(state, &[OUTBOX_PREFIX], |key, value| {
            let sequence = u64::from_be_bytes(key.get(1..9).and_then(|k| k.try_into().ok()).ok_or_else(|| WeirError::storage("bad outbox key"))?);
            pending.entry(sequence).or_default().extend(decode_messages(value)?);
            Ok(true)
        })?;
        let marker = writer.committed_marker().map_err(sink_error)?;
        for (&seq, messages) in &pending {
            if marker.is_some_and(|m| m >= seq) {
                continue;
            }
            tracing::info!(transaction = seq, messages = messages.len(), "kafka sink: sending a committed epoch's transaction again");
            for (key, value) in messages {
                writer.send(key.as_deref(), value.as_deref()).map_err(sink_error)?;
            }
            writer.flush().map_err(sink_error)?;
            writer.commit_transaction(seq).map_err(sink_error)?;
        }
        let delivered = pending.keys().next_back().copied();
        let outbox = Outbox { state, sequence, messages: Vec::new(), precommitted: None, delivered, failure: None };
        Ok(KafkaSink { writer, encoding, assignment: Assignment::utc(schema), outbox: Some(outbox) })
    }

    /// This sink converting rows in time zone `zone`, the job's ([`Assignment`]).
    pub fn in_zone(mut self, zone: crate::plan::time_zone::Zone) -> Self {
        self.assignment.zone = zone;
        self
    }

    fn send(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) -> Result<()> {
        self.writer.send(key, value).map_err(sink_error)?;
        if let Some(outbox) = &mut self.outbox {
            encode_message(key, value, &mut outbox.messages);
        }
        Ok(())
    }

    fn check(&self) -> Result<()> {
        match self.failure() {
            Some(failure) => Err(WeirError::execution(failure)),
            None => Ok(()),
        }
    }
}

fn sink_error(e: weir_connectors::ConnectorError) -> WeirError {
    WeirError::execution(format!("kafka sink: {e}"))
}

impl Operator for KafkaSink {
    fn name(&self) -> &'static str {
        "KafkaSink"
    }

    fn process_batch(&mut self, _: usize, chunk: StreamChunk, _: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        self.check()?;
        let batch = self.assignment.batch(&chunk)?;
        let messages: Vec<Message> = match &mut self.encoding {
            KafkaEncoding::Value(encoder) => {
                encoder.encode(&batch, Some(&chunk.ops)).map_err(sink_error)?.into_iter().map(|payload| (None, payload)).collect()
            }
            KafkaEncoding::Upsert(encoder) => {
                encoder.encode(&batch, Some(&chunk.ops)).map_err(sink_error)?.into_iter().map(|m| (m.key, m.value)).collect()
            }
        };
        for (key, value) in &messages {
            self.send(key.as_deref(), value.as_deref())?;
        }
        Ok(None)
    }

    fn on_barrier(&mut self, writes: &mut EpochWrites, _ctx: &OpContext<'_>) -> Result<()> {
        self.check()?;
        let Some(outbox) = &mut self.outbox else {
            return self.writer.flush().map_err(sink_error);
        };
        if let Some(done) = outbox.delivered.take() {
            writes.delete_below(outbox.state, &outbox_key(done + 1, 0));
        }
        if outbox.messages.is_empty() {
            return Ok(());
        }
        // The pre-commit: every message of the transaction acknowledged.
        self.writer.flush().map_err(sink_error)?;
        // A transaction whose epoch did not commit keeps its number and grows.
        let seq = outbox.precommitted.unwrap_or(outbox.sequence + 1);
        writes.put(outbox.state, SEQUENCE_KEY, &seq.to_be_bytes());
        for (i, part) in outbox_parts(&outbox.messages).into_iter().enumerate() {
            writes.put(outbox.state, &outbox_key(seq, i as u32), part);
        }
        outbox.precommitted = Some(seq);
        Ok(())
    }

    /// Not an exactly-once sink: its open transaction holds every message sent since the last
    /// commit, so the next epoch's rows must wait for this one's commit.
    fn commits_behind(&self) -> bool {
        self.outbox.is_none()
    }

    fn failure(&self) -> Option<String> {
        self.outbox.as_ref().and_then(|o| o.failure.as_ref()).map(|failure| format!("kafka sink: {failure}"))
    }

    fn on_committed(&mut self, _epoch: u64) {
        let Some(outbox) = &mut self.outbox else { return };
        let Some(seq) = outbox.precommitted.take() else { return };
        outbox.sequence = seq;
        outbox.messages.clear();
        crate::failpoint::hit("after_precommit");
        match self.writer.commit_transaction(seq) {
            Ok(()) => outbox.delivered = Some(seq),
            Err(e) => {
                tracing::error!("kafka sink: transaction {seq} did not commit: {e}; recovering from the last commit");
                outbox.failure = Some(format!("transaction {seq} did not commit: {e}"));
            }
        }
    }
}


/// How a sink's rows become its table's columns: `schema`, the table's written columns, and
/// `zone`, the time zone of the job (the session's when it was created).
#[derive(Debug, Clone)]
struct Assignment {
    schema: SchemaRef,
    zone: crate::plan::time_zone::Zone,
}

impl Assignment {
    /// Into `schema`, in UTC (a job's zone is set with the sink's `in_zone`).
    fn utc(schema: SchemaRef) -> Self {
        Assignment { schema, zone: crate::plan::time_zone::Zone::utc() }
    }

    /// The batch of `chunk`'s rows as the table's columns, each converted to its column's type
    /// as `CAST` converts it in the job's zone (a TIMESTAMP_LTZ into a TIMESTAMP column is its
    /// wall-clock time there, as Flink's sink writes it), failing on a value that does not fit
    /// (a number out of range) instead of writing NULL: the job fails loudly, as Postgres fails
    /// the INSERT.
    ///
    /// # Errors
    /// Arrow's, for a value that does not convert.
    fn batch(&self, chunk: &StreamChunk) -> Result<RecordBatch> {
        let columns = chunk
            .batch
            .columns()
            .iter()
            .zip(self.schema.fields())
            .map(|(c, f)| match c.data_type() == f.data_type() {
                true => Ok(Arc::clone(c)),
                false => crate::plan::functions::zone_cast::cast_in_zone(c, f.data_type(), self.zone, false),
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), columns)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A JSON file sink writes NULLs as `null`, in a row's fields, a map's values and at the
    /// top (Flink's json format; 'json.encode.ignore-null-fields' is false by default), and
    /// leaves them out with the option (a map's NULL values too).
    #[test]
    fn a_json_file_sink_writes_nulls() -> Result<()> {
        use arrow::array::{ArrayRef, Int32Builder, MapBuilder, StringBuilder, StructBuilder};
        use crate::runtime::changelog::Op;
        use arrow::datatypes::{DataType, Field, Fields, Schema};
        let dir = tempfile::tempdir().map_err(|e| WeirError::storage(e.to_string()))?;
        let store = Store::open(&dir.path().join("state"))?;
        let row = Fields::from(vec![Field::new("a", DataType::Utf8, true)]);
        let mut r = StructBuilder::from_fields(row.clone(), 1);
        r.field_builder::<StringBuilder>(0).expect("a").append_null();
        r.append(true);
        let mut m = MapBuilder::new(None, StringBuilder::new(), Int32Builder::new());
        m.keys().append_value("a");
        m.values().append_value(1);
        m.keys().append_value("b");
        m.values().append_null();
        m.append(true).map_err(|e| WeirError::internal(e.to_string()))?;
        let columns: Vec<ArrayRef> =
            vec![Arc::new(arrow::array::Int32Array::from(vec![None::<i32>])), Arc::new(r.finish()), Arc::new(m.finish())];
        let fields: Vec<Field> =
            ["id", "r", "tags"].iter().zip(&columns).map(|(n, c)| Field::new(*n, c.data_type().clone(), true)).collect();
        let schema = Arc::new(Schema::new(fields));
        let batch = RecordBatch::try_new(Arc::clone(&schema), columns)?;
        let mut lines = Vec::new();
        for (job, explicit_nulls) in [("nulls", true), ("no-nulls", false)] {
            let encoder = Box::new(weir_connectors::format::JsonEncoder::new(Arc::clone(&schema), Default::default(), !explicit_nulls));
            let format = FileFormat { extension: "json", encoder };
            let mut sink = FileSink::open(&dir.path().join("out"), job, format, Arc::clone(&schema), 1, &store)?;
            let ctx = OpContext { store: &store };
            sink.process_batch(0, StreamChunk::new(vec![Op::Insert], batch.clone()), &ctx)?;
            sink.on_barrier(&mut EpochWrites::default(), &ctx)?;
            let path = dir.path().join("out").join(format!("part-{job}.json"));
            lines.push(std::fs::read_to_string(path).map_err(|e| WeirError::storage(e.to_string()))?);
        }
        assert_eq!(lines[0], "{\"id\":null,\"r\":{\"a\":null},\"tags\":{\"a\":1,\"b\":null}}\n");
        assert_eq!(lines[1], "{\"r\":{},\"tags\":{\"a\":1}}\n");
        Ok(())
    }

    /// A model of Kafka's transactions for one transactional id: every message goes to the log
    /// with its transaction; a commit makes the transaction visible to `read_committed`
    /// readers and stores its marker in the same step; a transaction never committed (its
    /// producer crashed, or was fenced by a new one) stays invisible.
    #[derive(Default)]
    struct ModelBroker {
        log: Vec<(u64, Message)>,
        committed: std::collections::HashSet<u64>,
        marker: Option<u64>,
        transactions: u64,
    }

    impl ModelBroker {
        fn read_committed(&self) -> Vec<Message> {
            self.log.iter().filter(|(t, _)| self.committed.contains(t)).map(|(_, m)| m.clone()).collect()
        }
    }

    /// One producer instance (a restart makes a new one).
    struct ModelProducer {
        broker: Arc<Mutex<ModelBroker>>,
        open: Option<u64>,
    }

    impl KafkaProducer for ModelProducer {
        fn send(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) -> std::result::Result<(), weir_connectors::ConnectorError> {
            let mut broker = self.broker.lock().expect("broker");
            let txn = *self.open.get_or_insert_with(|| {
                broker.transactions += 1;
                broker.transactions
            });
            broker.log.push((txn, (key.map(<[u8]>::to_vec), value.map(<[u8]>::to_vec))));
            Ok(())
        }
        fn flush(&mut self) -> std::result::Result<(), weir_connectors::ConnectorError> {
            Ok(())
        }
        fn commit_transaction(&mut self, sequence: u64) -> std::result::Result<(), weir_connectors::ConnectorError> {
            if let Some(txn) = self.open.take() {
                let mut broker = self.broker.lock().expect("broker");
                broker.committed.insert(txn);
                broker.marker = Some(sequence);
            }
            Ok(())
        }
        fn committed_marker(&self) -> std::result::Result<Option<u64>, weir_connectors::ConnectorError> {
            Ok(self.broker.lock().expect("broker").marker)
        }
    }

    const EPOCHS: usize = 4;
    const PER_EPOCH: usize = 3;

    fn value(epoch: usize, i: usize) -> String {
        format!("e{epoch}-{i}")
    }

    /// The moments a crash can hit an epoch.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Crash {
        /// Messages sent, no barrier yet.
        BeforeBarrier,
        /// Pre-committed (the barrier's writes made), the epoch not committed.
        AfterPrecommit,
        /// The epoch committed in the store, the Kafka transaction not yet.
        AfterStoreCommit,
        /// Both committed; the outbox entries not deleted yet.
        AfterKafkaCommit,
    }

    fn open_sink(broker: &Arc<Mutex<ModelBroker>>, store: &Store) -> Result<KafkaSink> {
        let schema: SchemaRef = Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
            "v",
            arrow::datatypes::DataType::Utf8,
            true,
        )]));
        let options = std::collections::BTreeMap::from([("format".to_string(), "raw".to_string())]);
        let encoder = weir_connectors::format::encoder(&options, "", Arc::clone(&schema)).map_err(sink_error)?;
        let producer = Box::new(ModelProducer { broker: Arc::clone(broker), open: None });
        KafkaSink::exactly_once(producer, KafkaEncoding::Value(encoder), schema, 7, store)
    }

    fn send_epoch(sink: &mut KafkaSink, epoch: usize, store: &Store) -> Result<()> {
        let values: Vec<String> = (0..PER_EPOCH).map(|i| value(epoch, i)).collect();
        let batch = RecordBatch::try_new(
            Arc::clone(&sink.assignment.schema),
            vec![Arc::new(arrow::array::StringArray::from(values)) as arrow::array::ArrayRef],
        )?;
        sink.process_batch(0, StreamChunk::inserts(batch), &OpContext { store })?;
        Ok(())
    }

    /// Runs epochs 1..=EPOCHS into the model broker, crashing once at `crash` in epoch
    /// `crash_epoch` and recovering as Weir does (a new producer and sink over the store; the
    /// sources replay from the last epoch committed in the store); returns what a
    /// `read_committed` reader sees.
    fn run_with_crash(crash: Crash, crash_epoch: usize) -> Result<Vec<String>> {
        let dir = tempfile::tempdir().map_err(|e| WeirError::storage(e.to_string()))?;
        let store = Store::open(dir.path())?;
        let broker = Arc::new(Mutex::new(ModelBroker::default()));
        let mut sink = open_sink(&broker, &store)?;
        let mut stored_epoch = 0u64;
        let mut epoch = 1;
        let mut crashed = false;
        while epoch <= EPOCHS {
            send_epoch(&mut sink, epoch, &store)?;
            let at = |c: Crash| !crashed && epoch == crash_epoch && crash == c;
            if at(Crash::BeforeBarrier) {
                crashed = true;
                sink = open_sink(&broker, &store)?;
                continue; // the sources replay this epoch
            }
            let mut writes = EpochWrites::default();
            sink.on_barrier(&mut writes, &OpContext { store: &store })?;
            if at(Crash::AfterPrecommit) {
                crashed = true;
                sink = open_sink(&broker, &store)?;
                continue;
            }
            stored_epoch += 1;
            store.commit(writes, stored_epoch)?;
            if at(Crash::AfterStoreCommit) {
                crashed = true;
                sink = open_sink(&broker, &store)?;
                epoch += 1; // committed: the sources go on after it
                continue;
            }
            sink.on_committed(stored_epoch);
            if at(Crash::AfterKafkaCommit) {
                crashed = true;
                sink = open_sink(&broker, &store)?;
            }
            epoch += 1;
        }
        // One more barrier with nothing sent deletes what Kafka has from the outbox.
        let mut writes = EpochWrites::default();
        sink.on_barrier(&mut writes, &OpContext { store: &store })?;
        store.commit(writes, stored_epoch + 1)?;
        let mut outbox = 0;
        store.scan_prefix(7, &[OUTBOX_PREFIX], |_, _| {
            outbox += 1;
            Ok(true)
        })?;
        assert_eq!(outbox, 0, "{crash:?} in epoch {crash_epoch}: the outbox is emptied");
        let seen = broker.lock().expect("broker").read_committed();
        Ok(seen.into_iter().map(|(_, v)| String::from_utf8(v.unwrap_or_default()).unwrap_or_default()).collect())
    }

    /// Exactly once whatever the moment of the crash: a `read_committed` reader of the model
    /// broker sees every message of every epoch once, in order.
    #[test]
    fn exactly_once_through_a_crash_at_every_moment() -> Result<()> {
        let expected: Vec<String> = (1..=EPOCHS).flat_map(|e| (0..PER_EPOCH).map(move |i| value(e, i))).collect();
        for crash in [Crash::BeforeBarrier, Crash::AfterPrecommit, Crash::AfterStoreCommit, Crash::AfterKafkaCommit] {
            for crash_epoch in 1..=EPOCHS {
                assert_eq!(run_with_crash(crash, crash_epoch)?, expected, "{crash:?} in epoch {crash_epoch}");
            }
        }
        Ok(())
    }

    #[test]
    fn outbox_messages_round_trip() -> Result<()> {
        let messages: Vec<Message> =
            vec![(Some(b"k".to_vec()), Some(b"v".to_vec())), (None, Some(Vec::new())), (Some(Vec::new()), None), (None, None)];
        let mut bytes = Vec::new();
        for (k, v) in &messages {
            encode_message(k.as_deref(), v.as_deref(), &mut bytes);
        }
        assert_eq!(decode_messages(&bytes)?, messages);
        assert!(decode_messages(&bytes[..bytes.len() - 1]).is_err(), "a cut message is an error");
        assert!(outbox_key(1, 0) < outbox_key(1, 1) && outbox_key(1, u32::MAX) < outbox_key(2, 0));
        assert!(outbox_key(u64::MAX, u32::MAX).as_slice() < SEQUENCE_KEY, "the range deletes of the outbox keep `seq`");
        Ok(())
    }

    #[test]
    fn outbox_parts_split_between_messages() -> Result<()> {
        let mut bytes = Vec::new();
        let value = vec![7u8; 300_000];
        for i in 0..10u32 {
            encode_message(Some(&i.to_be_bytes()), Some(&value), &mut bytes);
        }
        let parts = outbox_parts(&bytes);
        assert_eq!(parts.len(), 3, "4 messages of 300 kB reach 1 MiB");
        let decoded: Vec<Message> = parts.iter().map(|p| decode_messages(p)).collect::<Result<Vec<_>>>()?.concat();
        assert_eq!(decoded.len(), 10);
        assert_eq!(decoded[9].0.as_deref(), Some(&9u32.to_be_bytes()[..]));
        Ok(())
    }
}
