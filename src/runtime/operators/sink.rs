//! Sinks: the root of an `INSERT INTO <connector table>` job.
//!
//! - [`Blackhole`] (`'connector' = 'blackhole'`): counts the changelog rows and drops them
//!   (Flink's blackhole, for benchmarks).
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

/// The record format a [`FileSink`] writes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FileFormat {
    /// One JSON object per line.
    Json,
    /// One CSV record per line, no header.
    Csv,
}

/// Appends rows to one file of a directory, exactly once; see the module docs.
pub struct FileSink {
    path: PathBuf,
    /// The sink table's physical columns: rows are renamed and cast to them.
    schema: SchemaRef,
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
        let ext = match format {
            FileFormat::Json => "json",
            FileFormat::Csv => "csv",
        };
        let path = dir.join(format!("part-{job}.{ext}"));
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
        Ok(FileSink { path, schema, file, format, buffer: Vec::new(), length, state })
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
        let columns = chunk
            .batch
            .columns()
            .iter()
            .zip(self.schema.fields())
            .map(|(c, f)| if c.data_type() == f.data_type() { Ok(Arc::clone(c)) } else { arrow::compute::cast(c, f.data_type()) })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), columns)?;
        match self.format {
            FileFormat::Json => {
                let mut writer = arrow::json::LineDelimitedWriter::new(&mut self.buffer);
                writer.write(&batch)?;
                writer.finish()?;
            }
            FileFormat::Csv => {
                let mut writer = arrow::csv::WriterBuilder::new().with_header(false).build(&mut self.buffer);
                writer.write(&batch)?;
            }
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
    /// for a delete.
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
    writer: weir_connectors::kafka::KafkaWriter,
    encoding: KafkaEncoding,
    /// The sink table's physical columns: rows are renamed and cast to them.
    schema: SchemaRef,
    /// With exactly-once: the outbox of transactions.
    outbox: Option<Outbox>,
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
    pub fn new(writer: weir_connectors::kafka::KafkaWriter, encoding: KafkaEncoding, schema: SchemaRef) -> Self {
        KafkaSink { writer, encoding, schema, outbox: None }
    }

    /// An exactly-once sink over transactional `writer`, its outbox in state table `state`;
    /// first sends again, each in a transaction of its own, the outbox's transactions that
    /// Kafka's marker does not cover (see the type's docs).
    ///
    /// # Errors
    /// `Storage` for an unreadable outbox; `Execution` when Kafka cannot be asked or written.
    pub fn exactly_once(
        mut writer: weir_connectors::kafka::KafkaWriter,
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
                writer.send(key.as_deref(), value.as_deref(), &[], None).map_err(sink_error)?;
            }
            writer.flush(std::time::Duration::from_secs(30)).map_err(sink_error)?;
            writer.commit_transaction(seq).map_err(sink_error)?;
        }
        let delivered = pending.keys().next_back().copied();
        let outbox = Outbox { state, sequence, messages: Vec::new(), precommitted: None, delivered, failure: None };
        Ok(KafkaSink { writer, encoding, schema, outbox: Some(outbox) })
    }

    fn send(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) -> Result<()> {
        self.writer.send(key, value, &[], None).map_err(sink_error)?;
        if let Some(outbox) = &mut self.outbox {
            encode_message(key, value, &mut outbox.messages);
        }
        Ok(())
    }

    fn check(&self) -> Result<()> {
        match self.outbox.as_ref().and_then(|o| o.failure.as_ref()) {
            Some(failure) => Err(WeirError::execution(format!("kafka sink: {failure}"))),
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
        let columns = chunk
            .batch
            .columns()
            .iter()
            .zip(self.schema.fields())
            .map(|(c, f)| if c.data_type() == f.data_type() { Ok(Arc::clone(c)) } else { arrow::compute::cast(c, f.data_type()) })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), columns)?;
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
            return self.writer.flush(std::time::Duration::from_secs(30)).map_err(sink_error);
        };
        if let Some(done) = outbox.delivered.take() {
            writes.delete_below(outbox.state, &outbox_key(done + 1, 0));
        }
        if outbox.messages.is_empty() {
            return Ok(());
        }
        // The pre-commit: every message of the transaction acknowledged.
        self.writer.flush(std::time::Duration::from_secs(30)).map_err(sink_error)?;
        // A transaction whose epoch did not commit keeps its number and grows.
        let seq = outbox.precommitted.unwrap_or(outbox.sequence + 1);
        writes.put(outbox.state, SEQUENCE_KEY, &seq.to_be_bytes());
        for (i, part) in outbox_parts(&outbox.messages).into_iter().enumerate() {
            writes.put(outbox.state, &outbox_key(seq, i as u32), part);
        }
        outbox.precommitted = Some(seq);
        Ok(())
    }

    fn on_committed(&mut self) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
