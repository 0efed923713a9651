//! The decoder and encoder interfaces shared by every format, and what a decode returns.

use arrow::array::RecordBatch;

use crate::ConnectorError;

/// The operation of one changelog row: Flink's row kinds `+I` insert, `-D` delete, `-U`
/// update-before, `+U` update-after. One type for the whole project: the engine's changelog
/// chunks (`weir::runtime::changelog`) carry it, formats decode and encode it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `+I`: a new row (for an upsert source: the new value of its key).
    Insert,
    /// `-D`: a row withdrawn.
    Delete,
    /// `-U`: the old row of an update; directly followed by its `+U`.
    UpdateBefore,
    /// `+U`: the new row of an update.
    UpdateAfter,
}

impl Op {
    /// Whether the row adds to the result (`+I`, `+U`).
    pub fn is_insert(self) -> bool {
        matches!(self, Op::Insert | Op::UpdateAfter)
    }

    /// `+1` for `+I`/`+U`, `-1` for `-D`/`-U`.
    pub fn sign(self) -> i64 {
        if self.is_insert() {
            1
        } else {
            -1
        }
    }
}

/// `+I`, `-D`, `-U`, `+U`.
impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Op::Insert => "+I",
            Op::Delete => "-D",
            Op::UpdateBefore => "-U",
            Op::UpdateAfter => "+U",
        })
    }
}

/// One record that did not decode. It is not in [`Decoded::batch`]; the caller routes it to a
/// dead-letter table or counts and logs it, and goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// The record's position in the slice given to [`Decoder::decode`].
    pub index: usize,
    /// Why, naming the format and, when known, the column (for example
    /// `json: failed to parse "x" as Int64`).
    pub message: String,
}

/// What one [`Decoder::decode`] call gives.
///
/// ```text
///  records:  r0   r1 (bad)   r2 (debezium "u": two rows)   r3
///  batch:    row0            row1 (-U)  row2 (+U)          row3
///  sources:  0               2          2                  3
///  ops:      +I              -U         +U                 +I     (None if all +I)
///  errors:   [{index: 1, ..}]
/// ```
#[derive(Debug, Clone)]
pub struct Decoded {
    /// The rows that decoded, in input order, with the decoder's schema. A record gives one
    /// row, except a Debezium update (two rows) and a skipped record (none).
    pub batch: RecordBatch,
    /// The operation of each row of `batch`; `None` when every row is an insert.
    pub ops: Option<Vec<Op>>,
    /// The input index of each row of `batch` (non-decreasing), for Kafka offsets and metadata
    /// columns.
    pub sources: Vec<usize>,
    /// The records that did not decode, in input order.
    pub errors: Vec<DecodeError>,
}

/// Turns record payloads (Kafka message values, or keys) into Arrow rows.
///
/// Built by [`super::decoder`] for one schema; reusable across calls and keeps no rows
/// between calls. A tombstone (a Kafka message without a value) is not a payload: the caller
/// handles it (for `upsert-kafka`, [`super::UpsertDecoder`] does).
pub trait Decoder: Send + Sync {
    /// Decodes `records`, one payload each.
    ///
    /// A record that does not decode (not the format, a value of the wrong type) is reported in
    /// [`Decoded::errors`] and does not stop the others.
    ///
    /// # Errors
    /// Only for a fault of Weir's ([`ConnectorError::Internal`]), never for bad data.
    fn decode(&mut self, records: &[&[u8]]) -> Result<Decoded, ConnectorError>;

    /// [`Decoder::decode`] of `records`, the lines of `text` (one record per line, each line
    /// ending in `\n`, none empty): a file's lines. A format may read `text` in one pass and
    /// fall back to `decode` when that does not give one row per line.
    ///
    /// # Errors
    /// As [`Decoder::decode`].
    fn decode_lines(&mut self, text: &[u8], records: &[&[u8]]) -> Result<Decoded, ConnectorError> {
        let _ = text;
        self.decode(records)
    }
}

/// Turns Arrow rows into record payloads.
pub trait Encoder: Send + Sync {
    /// One payload per row of `batch` (whose schema is the encoder's), in row order; `ops` gives
    /// each row's operation (`None`: all inserts). A format that cannot carry deletions (`json`,
    /// `csv`, `raw`) encodes the row whatever its operation: the planner gives an append-only
    /// sink inserts only. `None` in the output is a tombstone (a Kafka message with no value):
    /// `raw` gives one for a NULL value.
    ///
    /// # Errors
    /// [`ConnectorError::Internal`] when `ops` is not one per row or the batch does not have the
    /// encoder's schema; [`ConnectorError::Encode`] when a value has no form in the format.
    fn encode(&mut self, batch: &RecordBatch, ops: Option<&[Op]>) -> Result<Vec<Option<Vec<u8>>>, ConnectorError>;
}
