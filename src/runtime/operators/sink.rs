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

/// Writes rows to a Kafka topic, at least once: messages are sent as rows arrive and the
/// epoch's barrier waits until the broker has acknowledged all of them, so a committed epoch's
/// rows are in the topic (a crash between the flush and the commit writes them again after the
/// restart; exactly-once needs Kafka transactions).
pub struct KafkaSink {
    writer: weir_connectors::kafka::KafkaWriter,
    encoding: KafkaEncoding,
    /// The sink table's physical columns: rows are renamed and cast to them.
    schema: SchemaRef,
}

impl KafkaSink {
    /// A sink writing rows of `schema` with `writer` and `encoding`.
    pub fn new(writer: weir_connectors::kafka::KafkaWriter, encoding: KafkaEncoding, schema: SchemaRef) -> Self {
        KafkaSink { writer, encoding, schema }
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
        let columns = chunk
            .batch
            .columns()
            .iter()
            .zip(self.schema.fields())
            .map(|(c, f)| if c.data_type() == f.data_type() { Ok(Arc::clone(c)) } else { arrow::compute::cast(c, f.data_type()) })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), columns)?;
        match &mut self.encoding {
            KafkaEncoding::Value(encoder) => {
                for payload in encoder.encode(&batch, Some(&chunk.ops)).map_err(sink_error)? {
                    self.writer.send(None, payload.as_deref(), &[], None).map_err(sink_error)?;
                }
            }
            KafkaEncoding::Upsert(encoder) => {
                for m in encoder.encode(&batch, Some(&chunk.ops)).map_err(sink_error)? {
                    self.writer.send(m.key.as_deref(), m.value.as_deref(), &[], None).map_err(sink_error)?;
                }
            }
        }
        Ok(None)
    }

    fn on_barrier(&mut self, _writes: &mut EpochWrites, _ctx: &OpContext<'_>) -> Result<()> {
        self.writer.flush(std::time::Duration::from_secs(30)).map_err(sink_error)
    }
}
