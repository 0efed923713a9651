//! The `filesystem` connector's reader: JSON lines or CSV, one file or every file of a
//! directory (in name order, hidden files skipped), bounded: each file is one partition that
//! ends at the end of the file. A partition's position is the byte offset of its next line.
//!
//! Options (Flink's names): `'path'` (file or directory, required), `'format'` = `json`
//! (default), `csv`, or a changelog format (`debezium-json`, `maxwell-json`, `canal-json`),
//! `'csv.field-delimiter'` (one character, default `,`).
//!
//! A changelog format replays a change log from files: each line is one event (a Debezium
//! envelope, a Maxwell or a Canal event: inserts, updates as `-U`/`+U`, deletes), decoded by
//! the same decoder as a Kafka table's, so the table is a changelog source (Flink's
//! filesystem connector takes the changelog formats too).

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use weir_catalog::Relation;

use super::{DeadLetter, SourcePoll, SourceReader};
use crate::error::{Result, WeirError};

/// The record formats the reader decodes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum FileFormat {
    Json,
    Csv { delimiter: u8 },
    /// A changelog format, decoded by [`FileReader::changelog`].
    Changelog,
}

struct Partition {
    path: PathBuf,
    reader: Option<BufReader<File>>,
    position: u64,
    finished: bool,
}

/// Reads the files of one `filesystem` table, one file after the other.
pub struct FileReader {
    partitions: Vec<Partition>,
    format: FileFormat,
    /// The physical columns, all nullable (what the decoder produces).
    schema: SchemaRef,
    /// Lines of the current batch, reused.
    buffer: Vec<u8>,
    /// Lines that did not decode since the last [`SourceReader::take_dead_letters`].
    dead_letters: Vec<DeadLetter>,
    /// The decoder of a changelog format (`debezium-json`), one record per line.
    changelog: Option<Box<dyn weir_connectors::format::Decoder>>,
}

impl FileReader {
    /// The reader of table `rel` producing `physical`, resuming at byte offsets `positions`.
    ///
    /// # Errors
    /// `InvalidOption` for a bad format; `Storage` when the path cannot be listed.
    pub fn open(rel: &Relation, physical: SchemaRef, positions: Option<&[u64]>) -> Result<Self> {
        let path = PathBuf::from(rel.options.get("path").map(String::as_str).unwrap_or_default());
        let format = match rel.options.get("format").map(String::as_str).unwrap_or("json") {
            "json" => FileFormat::Json,
            "csv" => {
                let delimiter = match rel.options.get("csv.field-delimiter").map(String::as_str) {
                    None => b',',
                    Some(d) if d.len() == 1 => d.as_bytes()[0],
                    Some("\\t") => b'\t',
                    Some(d) => {
                        return Err(WeirError::option(format!(
                            "option 'csv.field-delimiter' = '{d}' is not valid; valid values: one character"
                        )))
                    }
                };
                FileFormat::Csv { delimiter }
            }
            "debezium-json" | "maxwell-json" | "canal-json" => FileFormat::Changelog,
            other => {
                return Err(WeirError::option(format!(
                    "table {}: the 'filesystem' connector reads format 'json', 'csv', 'debezium-json', 'maxwell-json' or 'canal-json', not '{other}'",
                    rel.name
                )))
            }
        };
        let files = if path.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&path)
                .map_err(|e| WeirError::storage(format!("listing {}: {e}", path.display())))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(['.', '_'])))
                .collect();
            files.sort();
            files
        } else {
            vec![path]
        };
        let partitions = files
            .into_iter()
            .enumerate()
            .map(|(i, path)| Partition {
                path,
                reader: None,
                position: positions.and_then(|p| p.get(i).copied()).unwrap_or(0),
                finished: false,
            })
            .collect();
        let schema = Arc::new(arrow::datatypes::Schema::new(
            physical.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>(),
        ));
        let changelog = match format {
            FileFormat::Changelog => Some(
                weir_connectors::format::decoder(&rel.options, "", Arc::clone(&schema))
                    .map_err(|e| WeirError::option(format!("table {}: {e}", rel.name)))?,
            ),
            _ => None,
        };
        Ok(FileReader { partitions, format, schema, buffer: Vec::new(), dead_letters: Vec::new(), changelog })
    }

    /// Decodes `self.buffer` (whole lines) with a changelog format: the rows, their operations,
    /// and the lines that fail as dead letters with their file and byte offset.
    fn decode_changelog(&mut self, p: usize, start: u64) -> Result<(RecordBatch, Option<Vec<crate::runtime::changelog::Op>>)> {
        let decoder = self.changelog.as_mut().ok_or_else(|| WeirError::internal("changelog format without a decoder"))?;
        let mut records: Vec<&[u8]> = Vec::new();
        let mut offsets: Vec<u64> = Vec::new();
        let mut offset = start;
        for line in self.buffer.split_inclusive(|b| *b == b'\n') {
            records.push(line.strip_suffix(b"\n").unwrap_or(line));
            offsets.push(offset);
            offset += line.len() as u64;
        }
        let decoded = decoder.decode(&records).map_err(|e| WeirError::internal(e.to_string()))?;
        for error in decoded.errors {
            self.dead_letters.push(DeadLetter {
                partition: p,
                source: self.partitions[p].path.display().to_string(),
                offset: offsets[error.index] as i64,
                raw: records[error.index].to_vec(),
                error: error.message,
            });
        }
        Ok((decoded.batch, decoded.ops))
    }

    /// Decodes `self.buffer` (whole lines); on a decoding error, decodes line by line and
    /// makes the lines that fail dead letters, with their file and byte offset.
    fn decode(&mut self, p: usize, start: u64) -> Result<RecordBatch> {
        match decode_lines(self.format, &self.schema, &self.buffer) {
            Ok(batch) => Ok(batch),
            Err(_) => {
                let mut good = Vec::new();
                let mut offset = start;
                for line in self.buffer.split_inclusive(|b| *b == b'\n') {
                    match decode_lines(self.format, &self.schema, line) {
                        Ok(b) => good.push(b),
                        Err(e) => self.dead_letters.push(DeadLetter {
                            partition: p,
                            source: self.partitions[p].path.display().to_string(),
                            offset: offset as i64,
                            raw: line.strip_suffix(b"\n").unwrap_or(line).to_vec(),
                            error: e.to_string(),
                        }),
                    }
                    offset += line.len() as u64;
                }
                Ok(arrow::compute::concat_batches(&self.schema, &good)?)
            }
        }
    }
}

/// Decodes complete lines of `format` into one batch of `schema`.
///
/// # Errors
/// `Execution` naming the format and, for a nested value, the field's path (`json: field
/// buyer.zip: failed to parse ...`, as the Kafka formats say it).
fn decode_lines(format: FileFormat, schema: &SchemaRef, lines: &[u8]) -> Result<RecordBatch> {
    let what = match format {
        FileFormat::Csv { .. } => "csv",
        _ => "json",
    };
    decode_lines_arrow(format, schema, lines)
        .map_err(|e| WeirError::execution(format!("{what}: {}", weir_connectors::format::message_of(&e))))
}

fn decode_lines_arrow(format: FileFormat, schema: &SchemaRef, lines: &[u8]) -> std::result::Result<RecordBatch, arrow::error::ArrowError> {
    let mut batches = Vec::new();
    match format {
        FileFormat::Changelog => {
            return Err(arrow::error::ArrowError::InvalidArgumentError("a changelog format is decoded by its decoder".into()))
        }
        FileFormat::Json => {
            let reader = arrow::json::ReaderBuilder::new(Arc::clone(schema))
                .with_batch_size(usize::MAX.min(1 << 20))
                .build(lines)?;
            for b in reader {
                batches.push(b?);
            }
        }
        FileFormat::Csv { delimiter } => {
            let reader = arrow::csv::ReaderBuilder::new(Arc::clone(schema))
                .with_delimiter(delimiter)
                .with_batch_size(1 << 20)
                .build(lines)?;
            for b in reader {
                batches.push(b?);
            }
        }
    }
    arrow::compute::concat_batches(schema, &batches)
}

impl SourceReader for FileReader {
    fn num_partitions(&self) -> usize {
        self.partitions.len()
    }

    fn poll(&mut self, max_rows: usize) -> Result<SourcePoll> {
        let Some(p) = self.partitions.iter().position(|p| !p.finished) else { return Ok(SourcePoll::Finished) };
        let part = &mut self.partitions[p];
        if part.reader.is_none() {
            let mut file = match File::open(&part.path) {
                Ok(file) => file,
                // The job cannot read on (the file was deleted or is not readable): it fails
                // alone, as Flink's job fails on a FileNotFoundException.
                Err(e) => return Ok(SourcePoll::Failed(format!("opening {}: {e}", part.path.display()))),
            };
            file.seek(SeekFrom::Start(part.position))
                .map_err(|e| WeirError::storage(format!("reading {}: {e}", part.path.display())))?;
            part.reader = Some(BufReader::with_capacity(1 << 20, file));
        }
        let reader = part.reader.as_mut().expect("opened above");
        self.buffer.clear();
        let start = part.position;
        let mut rows = 0;
        while rows < max_rows {
            let before = self.buffer.len();
            let n = reader
                .read_until(b'\n', &mut self.buffer)
                .map_err(|e| WeirError::storage(format!("reading {}: {e}", part.path.display())))?;
            if n == 0 {
                part.finished = true;
                part.reader = None;
                break;
            }
            if !self.buffer.ends_with(b"\n") {
                self.buffer.push(b'\n');
            }
            if self.buffer[before..].iter().all(|b| b.is_ascii_whitespace()) {
                self.buffer.truncate(before);
            } else {
                rows += 1;
            }
            part.position += n as u64;
        }
        if rows == 0 {
            return Ok(SourcePoll::Pending);
        }
        if self.format == FileFormat::Changelog {
            let (batch, ops) = self.decode_changelog(p, start)?;
            return Ok(SourcePoll::Batch { partition: p, batch, ops });
        }
        let batch = self.decode(p, start)?;
        Ok(SourcePoll::Batch { partition: p, batch, ops: None })
    }

    fn positions(&self) -> Vec<u64> {
        self.partitions.iter().map(|p| p.position).collect()
    }

    fn partition_finished(&self, p: usize) -> bool {
        self.partitions[p].finished
    }

    fn resume_finished(&mut self, p: usize) {
        self.partitions[p].finished = true;
    }

    fn bounded(&self) -> bool {
        true
    }

    fn take_dead_letters(&mut self) -> Vec<DeadLetter> {
        std::mem::take(&mut self.dead_letters)
    }
}
