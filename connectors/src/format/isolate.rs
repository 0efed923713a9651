//! Decoding a slice of records in one pass while finding the ones that fail.
//!
//! Arrow's JSON and CSV decoders read a byte stream into one batch, fast, but report one error
//! for the whole batch. Records are fed one at a time, so a record that is not exactly one
//! complete row (broken syntax, two JSON values, an unclosed quote) is caught as it is fed;
//! the decoder is then rebuilt and refed the good records since the last batch (each good record
//! is refed at most once). Errors found only when the batch is built (a value of the wrong
//! type) are isolated by bisection: `O(k log n)` rebuilds for `k` bad records.

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;

use super::codec::DecodeError;
use crate::ConnectorError;

/// A streaming decoder of newline-separated records (arrow's JSON or CSV decoder).
pub(super) trait RowStream {
    /// Feeds one record and its separator.
    ///
    /// # Errors
    /// A message when the record is not exactly one complete row; the stream is then unusable.
    fn feed(&mut self, record: &[u8]) -> Result<(), String>;
    /// The rows fed since the last flush, as one batch (`None` if none).
    fn flush(&mut self) -> Result<Option<RecordBatch>, ArrowError>;
}

/// Rows decoded from some records.
pub(super) struct Isolated {
    /// The good records' rows, in input order.
    pub batch: RecordBatch,
    /// The input index of each row.
    pub sources: Vec<usize>,
    /// The bad records, in input order.
    pub errors: Vec<DecodeError>,
}

/// Decodes `records` with streams from `new_stream`, isolating the records that fail. `what`
/// prefixes error messages (the format's name).
///
/// # Errors
/// [`ConnectorError::Internal`] when a stream cannot be built or the batches disagree with
/// `schema` (our bug, not bad data).
pub(super) fn decode_isolated<S: RowStream>(
    records: &[&[u8]],
    schema: &SchemaRef,
    what: &str,
    new_stream: &dyn Fn(usize) -> Result<S, ConnectorError>,
) -> Result<Isolated, ConnectorError> {
    let mut out = Output { batches: Vec::new(), sources: Vec::new(), errors: Vec::new() };
    let mut stream = new_stream(records.len())?;
    let mut segment: Vec<usize> = Vec::new();
    for (index, record) in records.iter().enumerate() {
        match stream.feed(record) {
            Ok(()) => segment.push(index),
            Err(message) => {
                out.errors.push(DecodeError { index, message: format!("{what}: {message}") });
                stream = new_stream(records.len())?;
                flush_segment(records, &segment, None, what, new_stream, &mut out)?;
                segment.clear();
            }
        }
    }
    flush_segment(records, &segment, Some(stream), what, new_stream, &mut out)?;
    out.errors.sort_by_key(|e| e.index);
    let batch = concat_batches(schema, &out.batches)
        .map_err(|e| ConnectorError::Internal { message: format!("{what}: joining decoded batches: {e}") })?;
    Ok(Isolated { batch, sources: out.sources, errors: out.errors })
}

struct Output {
    batches: Vec<RecordBatch>,
    sources: Vec<usize>,
    errors: Vec<DecodeError>,
}

/// Builds the batch of `segment` (records each known to be one complete row), from `stream` if
/// it holds exactly them, else from a new one; on failure, halves the segment.
fn flush_segment<S: RowStream>(
    records: &[&[u8]],
    segment: &[usize],
    stream: Option<S>,
    what: &str,
    new_stream: &dyn Fn(usize) -> Result<S, ConnectorError>,
    out: &mut Output,
) -> Result<(), ConnectorError> {
    if segment.is_empty() {
        return Ok(());
    }
    let mut stream = match stream {
        Some(s) => s,
        None => {
            let mut s = new_stream(segment.len())?;
            for &i in segment {
                s.feed(records[i]).map_err(|message| ConnectorError::Internal {
                    message: format!("{what}: record {i} decoded once but not twice: {message}"),
                })?;
            }
            s
        }
    };
    match stream.flush() {
        Ok(Some(batch)) if batch.num_rows() == segment.len() => {
            out.batches.push(batch);
            out.sources.extend_from_slice(segment);
        }
        Ok(batch) => {
            return Err(ConnectorError::Internal {
                message: format!(
                    "{what}: {} records gave {} rows",
                    segment.len(),
                    batch.map_or(0, |b| b.num_rows())
                ),
            })
        }
        Err(e) if segment.len() == 1 => {
            out.errors.push(DecodeError { index: segment[0], message: format!("{what}: {}", message_of(&e)) });
        }
        Err(_) => {
            let (left, right) = segment.split_at(segment.len() / 2);
            flush_segment(records, left, None, what, new_stream, out)?;
            flush_segment(records, right, None, what, new_stream, out)?;
        }
    }
    Ok(())
}

/// The text of a decoder's error, without Arrow's name for its kind (`Json error: `), and with
/// the path of the field it is in: Arrow's JSON reader says `whilst decoding field 'buyer':
/// whilst decoding field 'zip': failed to parse ...`, read here as `field buyer.zip: failed to
/// parse ...` (an element of an array adds no step: `items.qty`).
pub fn message_of(e: &ArrowError) -> String {
    let text = match e {
        ArrowError::JsonError(m) | ArrowError::CsvError(m) | ArrowError::ParseError(m) | ArrowError::CastError(m) => m.as_str(),
        _ => return e.to_string(),
    };
    let mut rest = text;
    let mut path = Vec::new();
    while let Some(after) = rest.strip_prefix("whilst decoding field '") {
        let Some((name, tail)) = after.split_once("': ") else { break };
        path.push(name);
        rest = tail;
    }
    if path.is_empty() {
        text.to_string()
    } else {
        format!("field {}: {rest}", path.join("."))
    }
}
