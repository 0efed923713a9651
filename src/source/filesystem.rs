//! The `filesystem` connector's reader: JSON lines or CSV, one file or every file of a
//! directory (in name order, hidden files skipped), bounded: each file is one partition that
//! ends at the end of the file. A partition's position is the byte offset of its next line.
//!
//! Options (Flink's names): `'path'` (file or directory, required), `'format'` = `json`
//! (default), `csv`, or a changelog format (`debezium-json`, `maxwell-json`, `canal-json`),
//! and the format's own options (`'json.ignore-parse-errors'`, `'csv.field-delimiter'`, ..):
//! each line is decoded by the format's decoder, as a Kafka table's message is.
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

struct Partition {
    path: PathBuf,
    reader: Option<BufReader<File>>,
    position: u64,
    finished: bool,
}

/// Reads the files of one `filesystem` table, one file after the other.
pub struct FileReader {
    partitions: Vec<Partition>,
    /// Lines of the current batch, each ending in `\n`, reused.
    buffer: Vec<u8>,
    /// Where each line of `buffer` ends (past its `\n`), and its byte offset in its file.
    lines: Vec<(usize, u64)>,
    /// Lines that did not decode since the last [`SourceReader::take_dead_letters`].
    dead_letters: Vec<DeadLetter>,
    /// The table's format's decoder (a Kafka table's, with the same options), one record per
    /// line.
    decoder: Box<dyn weir_connectors::format::Decoder>,
}

impl FileReader {
    /// The reader of table `rel` producing `physical`, resuming at byte offsets `positions`.
    ///
    /// # Errors
    /// `InvalidOption` for a bad format; `Storage` when the path cannot be listed.
    pub fn open(rel: &Relation, physical: SchemaRef, positions: Option<&[u64]>) -> Result<Self> {
        let path = PathBuf::from(rel.options.get("path").map(String::as_str).unwrap_or_default());
        let options = weir_connectors::with_file_format(&rel.options);
        let format = &options["format"];
        if !["json", "csv", "debezium-json", "maxwell-json", "canal-json"].contains(&format.as_str()) {
            return Err(WeirError::option(format!(
                "table {}: the 'filesystem' connector reads format 'json', 'csv', 'debezium-json', 'maxwell-json' or 'canal-json', not '{format}'",
                rel.name
            )));
        }
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
        let decoder = weir_connectors::format::decoder(&options, "", schema)
            .map_err(|e| WeirError::option(format!("table {}: {e}", rel.name)))?;
        Ok(FileReader { partitions, buffer: Vec::new(), lines: Vec::new(), dead_letters: Vec::new(), decoder })
    }

    /// Decodes `self.buffer` (whole lines): the rows, their operations (a changelog format's),
    /// and the lines that fail as dead letters with their file and byte offset.
    fn decode(&mut self, p: usize) -> Result<(RecordBatch, Option<Vec<crate::runtime::changelog::Op>>)> {
        let mut records: Vec<&[u8]> = Vec::with_capacity(self.lines.len());
        let mut from = 0;
        for &(end, _) in &self.lines {
            records.push(&self.buffer[from..end - 1]);
            from = end;
        }
        let decoded = self.decoder.decode_lines(&self.buffer, &records).map_err(|e| WeirError::internal(e.to_string()))?;
        for error in decoded.errors {
            self.dead_letters.push(DeadLetter {
                partition: p,
                source: self.partitions[p].path.display().to_string(),
                offset: self.lines[error.index].1 as i64,
                raw: records[error.index].to_vec(),
                error: error.message,
            });
        }
        Ok((decoded.batch, decoded.ops))
    }
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
        self.lines.clear();
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
                self.lines.push((self.buffer.len(), part.position));
                rows += 1;
            }
            part.position += n as u64;
        }
        if rows == 0 {
            return Ok(SourcePoll::Pending);
        }
        let (batch, ops) = self.decode(p)?;
        Ok(SourcePoll::Batch { partition: p, batch, ops })
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
