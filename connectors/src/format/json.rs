//! `json`: one JSON object per record (Flink's `json` format).
//!
//! - Reading: a field whose name equals a column's (case-sensitive, as Flink) fills it; a
//!   missing field or `null` is NULL; other fields are ignored. Numbers and booleans are read
//!   into STRING columns as their text (Flink's `asText`). TIMESTAMP and TIMESTAMP_LTZ accept
//!   `2024-05-01 12:00:00[.fff]` and `2024-05-01T12:00:00[.fff]`, with an optional `Z` or
//!   offset (both of Flink's `'json.timestamp-format.standard'` forms), or epoch milliseconds;
//!   DATE `2024-05-01`; DECIMAL a number or a numeric string; BYTES a hex string (Arrow's JSON
//!   form; Flink uses base64).
//! - A record that is not one JSON object, or has a value of the wrong type, fails alone
//!   ([`super::DecodeError`]); with `'json.ignore-parse-errors'` a value of the wrong type is
//!   read as NULL instead.
//! - Writing: one object per row with every column in schema order (`null` for NULL, or left
//!   out with `'json.encode.ignore-null-fields'`); timestamps as Flink writes them, in the SQL
//!   form `2024-05-01 12:00:00.123` by default, `2024-05-01T12:00:00.123` with `ISO-8601`, the
//!   fraction only when not zero and without trailing zeros (`12:00:00`, `12:00:00.5`), with a
//!   `Z` for TIMESTAMP_LTZ; DECIMAL as a number; BYTES as hex.

use std::sync::Arc;

use arrow::array::{Array, RecordBatch, StructArray};
use arrow::datatypes::{DataType, Field, SchemaRef};
use arrow::error::ArrowError;
use arrow::json::reader::Decoder as ArrowJsonDecoder;
use arrow::json::writer::{make_encoder, EncoderOptions, NullableEncoder};
use arrow::json::ReaderBuilder;

use super::codec::{Decoded, Decoder, Encoder, Op};
use super::isolate::{decode_isolated, RowStream};
use super::options::TimestampStandard;
use crate::ConnectorError;

/// Decodes JSON objects into rows of its schema.
#[derive(Debug, Clone)]
pub struct JsonDecoder {
    rows: JsonRows,
}

impl JsonDecoder {
    /// A decoder producing `schema`; `ignore_parse_errors` reads values of the wrong type as NULL.
    ///
    /// # Errors
    /// [`ConnectorError::Unsupported`] when Arrow's JSON reader cannot build `schema`.
    pub fn try_new(schema: SchemaRef, ignore_parse_errors: bool) -> Result<Self, ConnectorError> {
        Ok(JsonDecoder { rows: JsonRows::try_new(schema, ignore_parse_errors)? })
    }
}

impl Decoder for JsonDecoder {
    fn decode(&mut self, records: &[&[u8]]) -> Result<Decoded, ConnectorError> {
        let isolated = self.rows.decode(records, "json")?;
        Ok(Decoded { batch: isolated.batch, ops: None, sources: isolated.sources, errors: isolated.errors })
    }

    /// JSON lines read in one pass by Arrow's reader (a file's: one call, not two a record);
    /// when that fails or does not give one row per line, the lines are
    /// decoded one by one, so each bad line is found. (One pass takes a line holding two objects
    /// beside a line holding none of its own as the objects they hold.)
    fn decode_lines(&mut self, text: &[u8], records: &[&[u8]]) -> Result<Decoded, ConnectorError> {
        if let Ok(mut stream) = self.rows.stream(records.len()) {
            let whole = stream.decoder.decode(text).is_ok_and(|n| n == text.len()) && !stream.decoder.has_partial_record();
            if whole && stream.decoder.len() == records.len() {
                if let Ok(Some(batch)) = stream.decoder.flush() {
                    if batch.num_rows() == records.len() {
                        return Ok(Decoded { batch, ops: None, sources: (0..records.len()).collect(), errors: Vec::new() });
                    }
                }
            }
        }
        self.decode(records)
    }
}

/// Arrow's JSON reader set up for one schema, shared by `json` and `debezium-json`.
#[derive(Debug, Clone)]
pub(super) struct JsonRows {
    pub schema: SchemaRef,
    ignore_type_conflicts: bool,
}

impl JsonRows {
    pub fn try_new(schema: SchemaRef, ignore_type_conflicts: bool) -> Result<Self, ConnectorError> {
        let rows = JsonRows { schema, ignore_type_conflicts };
        rows.stream(1).map_err(|e| ConnectorError::Unsupported { feature: format!("JSON for this schema: {e}") })?;
        Ok(rows)
    }

    fn stream(&self, capacity: usize) -> Result<JsonStream, ArrowError> {
        let decoder = ReaderBuilder::new(Arc::clone(&self.schema))
            .with_batch_size(capacity + 1)
            .with_coerce_primitive(true)
            .with_ignore_type_conflicts(self.ignore_type_conflicts)
            .build_decoder()?;
        Ok(JsonStream { decoder })
    }

    /// Decodes `records`, isolating the bad ones; `what` names the format in messages.
    pub fn decode(&self, records: &[&[u8]], what: &str) -> Result<super::isolate::Isolated, ConnectorError> {
        let new_stream = |capacity: usize| {
            self.stream(capacity)
                .map_err(|e| ConnectorError::Internal { message: format!("{what}: building the JSON reader: {e}") })
        };
        decode_isolated(records, &self.schema, what, &new_stream)
    }
}

struct JsonStream {
    decoder: ArrowJsonDecoder,
}

impl RowStream for JsonStream {
    fn feed(&mut self, record: &[u8]) -> Result<(), String> {
        let before = self.decoder.len();
        let consumed = self.decoder.decode(record).map_err(|e| e.to_string())?;
        if consumed != record.len() {
            return Err("the record holds more than one JSON value".into());
        }
        // An object is complete at its closing brace; anything else (a number, a literal, a
        // cut-off record) needs a separator to end.
        if record.trim_ascii_end().last() != Some(&b'}') {
            self.decoder.decode(b"\n").map_err(|e| e.to_string())?;
        }
        if self.decoder.has_partial_record() {
            return Err("the record ends inside a JSON value".into());
        }
        match self.decoder.len() - before {
            1 => Ok(()),
            0 => Err("the record holds no JSON value".into()),
            n => Err(format!("the record holds {n} JSON values, not one")),
        }
    }

    fn flush(&mut self) -> Result<Option<RecordBatch>, ArrowError> {
        self.decoder.flush()
    }
}

/// Encodes rows as JSON objects.
#[derive(Debug, Clone)]
pub struct JsonEncoder {
    schema: SchemaRef,
    options: EncoderOptions,
}

impl JsonEncoder {
    /// An encoder for rows of `schema`, writing timestamps per `standard`; `ignore_null_fields`
    /// leaves NULL columns out.
    pub fn new(schema: SchemaRef, standard: TimestampStandard, ignore_null_fields: bool) -> Self {
        JsonEncoder { options: encoder_options(standard, ignore_null_fields), schema }
    }
}

impl Encoder for JsonEncoder {
    fn encode(&mut self, batch: &RecordBatch, ops: Option<&[Op]>) -> Result<Vec<Option<Vec<u8>>>, ConnectorError> {
        check_batch(&self.schema, batch, ops, "json")?;
        let mut out = Vec::with_capacity(batch.num_rows());
        for_each_object(&self.schema, batch, &self.options, |_, object| out.push(Some(object.to_vec())))?;
        Ok(out)
    }
}

/// The arrow JSON writer options: explicit nulls unless `ignore_null_fields`, timestamps as
/// [`FlinkTimestamps`] writes them in `standard`, dates `2024-05-01`.
pub(super) fn encoder_options(standard: TimestampStandard, ignore_null_fields: bool) -> EncoderOptions {
    EncoderOptions::default()
        .with_explicit_nulls(!ignore_null_fields)
        .with_encoder_factory(Arc::new(FlinkTimestamps { standard }))
        .with_date_format("%Y-%m-%d".into())
}

/// Writes TIMESTAMP and TIMESTAMP_LTZ values (at any depth) as Flink's JSON format writes them
/// ([`FlinkTimestampColumn`]): `2024-05-01 12:00:00` in the `SQL` standard,
/// `2024-05-01T12:00:00` in `ISO-8601`, `12:00:00.5`, `12:00:00.123` (Java's
/// `appendFraction(NANO_OF_SECOND, 0, 9, true)`), `..Z` for a TIMESTAMP_LTZ.
#[derive(Debug)]
struct FlinkTimestamps {
    standard: TimestampStandard,
}

impl arrow::json::writer::EncoderFactory for FlinkTimestamps {
    fn make_default_encoder<'a>(
        &self,
        _field: &'a arrow::datatypes::FieldRef,
        array: &'a dyn Array,
        _options: &'a EncoderOptions,
    ) -> Result<Option<NullableEncoder<'a>>, ArrowError> {
        let Some(column) = FlinkTimestampColumn::of(array, self.standard) else { return Ok(None) };
        Ok(Some(NullableEncoder::new(Box::new(column), array.logical_nulls())))
    }
}

impl arrow::json::writer::Encoder for FlinkTimestampColumn {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        out.push(b'"');
        if !self.write(idx, out) {
            out.pop();
            out.extend_from_slice(b"null");
            return;
        }
        out.push(b'"');
    }
}

/// A TIMESTAMP or TIMESTAMP_LTZ column's values, written as Flink's `TimeFormats` writes them
/// (its JSON and CSV formats): the date, a space (`SQL`) or `T` (`ISO-8601`), the time, the
/// fraction of a second only when it is not zero and without trailing zeros, and a `Z` after a
/// TIMESTAMP_LTZ (in UTC).
pub(super) struct FlinkTimestampColumn {
    values: arrow::buffer::ScalarBuffer<i64>,
    /// Units of the values in a second.
    per_second: i64,
    separator: char,
    zone: bool,
}

impl FlinkTimestampColumn {
    /// The column `array`, if it is a TIMESTAMP or TIMESTAMP_LTZ.
    pub(super) fn of(array: &dyn Array, standard: TimestampStandard) -> Option<Self> {
        let DataType::Timestamp(unit, zone) = array.data_type() else { return None };
        let per_second = match unit {
            arrow::datatypes::TimeUnit::Second => 1,
            arrow::datatypes::TimeUnit::Millisecond => 1_000,
            arrow::datatypes::TimeUnit::Microsecond => 1_000_000,
            arrow::datatypes::TimeUnit::Nanosecond => 1_000_000_000,
        };
        let separator = match standard {
            TimestampStandard::Sql => ' ',
            TimestampStandard::Iso8601 => 'T',
        };
        let data = array.to_data();
        let values = arrow::buffer::ScalarBuffer::new(data.buffers()[0].clone(), data.offset(), data.len());
        Some(FlinkTimestampColumn { values, per_second, separator, zone: zone.is_some() })
    }

    /// Appends value `idx` (not NULL); false, writing nothing, for a value out of the
    /// calendar's range.
    pub(super) fn write(&self, idx: usize, out: &mut Vec<u8>) -> bool {
        use std::io::Write;
        let v = self.values[idx];
        let (seconds, part) = (v.div_euclid(self.per_second), v.rem_euclid(self.per_second));
        let Some(at) = arrow::temporal_conversions::timestamp_s_to_datetime(seconds) else { return false };
        let _ = write!(out, "{}{}{}", at.format("%Y-%m-%d"), self.separator, at.format("%H:%M:%S"));
        if part != 0 {
            let digits = self.per_second.ilog10() as usize;
            let fraction = format!("{part:0digits$}");
            let _ = write!(out, ".{}", fraction.trim_end_matches('0'));
        }
        if self.zone {
            out.push(b'Z');
        }
        true
    }
}

/// Calls `f(row, object)` with each row of `batch` as a JSON object, in row order.
pub(super) fn for_each_object(
    schema: &SchemaRef,
    batch: &RecordBatch,
    options: &EncoderOptions,
    mut f: impl FnMut(usize, &[u8]),
) -> Result<(), ConnectorError> {
    let array = StructArray::from(batch.clone());
    let field = Arc::new(Field::new("row", DataType::Struct(schema.fields().clone()), false));
    let mut encoder: NullableEncoder<'_> = make_encoder(&field, &array, options)
        .map_err(|e| ConnectorError::Encode { message: format!("json: {e}") })?;
    let mut buffer = Vec::with_capacity(128);
    for row in 0..array.len() {
        buffer.clear();
        encoder.encode(row, &mut buffer);
        f(row, &buffer);
    }
    Ok(())
}

/// Checks that `batch` has `schema`'s columns and `ops` one operation per row.
pub(super) fn check_batch(
    schema: &SchemaRef,
    batch: &RecordBatch,
    ops: Option<&[Op]>,
    what: &str,
) -> Result<(), ConnectorError> {
    let types = |s: &arrow::datatypes::Schema| s.fields().iter().map(|f| f.data_type().clone()).collect::<Vec<_>>();
    if types(schema) != types(&batch.schema()) {
        return Err(ConnectorError::Internal {
            message: format!("{what} encoder for {schema:?} given a batch of {:?}", batch.schema()),
        });
    }
    if let Some(ops) = ops {
        if ops.len() != batch.num_rows() {
            return Err(ConnectorError::Internal {
                message: format!("{what} encoder given {} ops for {} rows", ops.len(), batch.num_rows()),
            });
        }
    }
    Ok(())
}
