//! `csv`: one CSV line per record (Flink's `csv` format), fields in column order.
//!
//! - Reading: the fields are split by Arrow's CSV reader (`csv.field-delimiter`,
//!   `csv.quote-character`, `csv.escape-character`), then each column is parsed from its text
//!   with Arrow's cast: integers, floats, DECIMAL, BOOLEAN (`true`/`false`, `t`/`f`, `1`/`0`,
//!   ...), DATE `2024-05-01`, TIMESTAMP `2024-05-01 12:00:00[.fff]` or with a `T`. An empty field
//!   is NULL except for STRING (an empty string); `csv.null-literal` names the text read as NULL
//!   in every column. With `csv.allow-comments`, a record starting with `#` gives no row and no
//!   error.
//! - A record with the wrong number of fields, broken quoting, invalid UTF-8, or a field that
//!   does not parse as its column's type fails alone ([`super::DecodeError`], naming the column
//!   and text). With `csv.ignore-parse-errors` (Flink: "fields are set to null in case of
//!   errors"), a field that does not parse and missing trailing fields are NULL instead.
//! - Writing: one line per row without its line end, quoted where needed, NULL as the null
//!   literal or an empty field, timestamps as for `json` (SQL form by default), BYTES as hex.

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, StringArray};
use arrow::compute::kernels::cmp::eq;
use arrow::compute::{cast_with_options, filter_record_batch, nullif, CastOptions};
use arrow::csv::reader::{Decoder as ArrowCsvDecoder, Format};
use arrow::csv::{ReaderBuilder, WriterBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::util::display::FormatOptions;
use regex::Regex;

use super::codec::{DecodeError, Decoded, Decoder, Encoder, Op};
use super::isolate::{decode_isolated, RowStream};
use super::json::check_batch;
use super::options::{CsvOptions, TimestampStandard};
use crate::ConnectorError;

/// Decodes CSV lines into rows of its schema.
#[derive(Debug, Clone)]
pub struct CsvDecoder {
    schema: SchemaRef,
    /// The schema with every column STRING: what the CSV reader produces.
    text_schema: SchemaRef,
    options: CsvOptions,
    ignore_parse_errors: bool,
    null_regex: Regex,
}

impl CsvDecoder {
    /// A decoder producing `schema` from lines of the `options` dialect.
    ///
    /// # Errors
    /// [`ConnectorError::Internal`] when the null literal makes no valid pattern (it is escaped,
    /// so never).
    pub fn try_new(schema: SchemaRef, options: CsvOptions, ignore_parse_errors: bool) -> Result<Self, ConnectorError> {
        let text_schema = Arc::new(Schema::new(
            schema.fields().iter().map(|f| Field::new(f.name(), DataType::Utf8, true)).collect::<Vec<_>>(),
        ));
        // The reader's NULL test: the null literal, or nothing (we tell empty fields apart per type).
        let pattern = match &options.null_literal {
            Some(literal) => format!("^{}$", regex::escape(literal)),
            None => r"[^\s\S]".to_string(),
        };
        let null_regex = Regex::new(&pattern)
            .map_err(|e| ConnectorError::Internal { message: format!("csv null pattern {pattern}: {e}") })?;
        Ok(CsvDecoder { schema, text_schema, options, ignore_parse_errors, null_regex })
    }

    fn stream(&self, capacity: usize) -> CsvStream {
        let mut format = Format::default()
            .with_header(false)
            .with_delimiter(self.options.delimiter)
            .with_quote(self.options.quote)
            .with_null_regex(self.null_regex.clone())
            .with_truncated_rows(self.ignore_parse_errors);
        if let Some(escape) = self.options.escape {
            format = format.with_escape(escape);
        }
        let decoder = ReaderBuilder::new(Arc::clone(&self.text_schema))
            .with_format(format)
            .with_batch_size(capacity + 1)
            .build_decoder();
        CsvStream { decoder }
    }

    /// Parses the text columns into the schema's types; rows with a field that does not parse
    /// are reported in `errors` and dropped (unless parse errors are ignored: NULL).
    fn parse_columns(
        &self,
        text: RecordBatch,
        sources: Vec<usize>,
        errors: &mut Vec<DecodeError>,
    ) -> Result<(RecordBatch, Vec<usize>), ConnectorError> {
        let n = text.num_rows();
        let mut bad: Vec<Option<String>> = vec![None; n];
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(text.num_columns());
        let safe = CastOptions { safe: true, format_options: FormatOptions::default() };
        for (field, column) in self.schema.fields().iter().zip(text.columns()) {
            if field.data_type() == &DataType::Utf8 {
                columns.push(Arc::clone(column));
                continue;
            }
            let strings: &StringArray = column.as_string::<i32>();
            let empty = eq(strings, &StringArray::new_scalar("")).map_err(internal)?;
            let strings = nullif(strings, &empty).map_err(internal)?;
            let parsed = cast_with_options(&strings, field.data_type(), &safe).map_err(|e| ConnectorError::Unsupported {
                feature: format!("csv column '{}' of type {}: {e}", field.name(), field.data_type()),
            })?;
            if parsed.null_count() != strings.null_count() {
                let text = strings.as_string::<i32>();
                for (row, slot) in bad.iter_mut().enumerate() {
                    if slot.is_none() && text.is_valid(row) && parsed.is_null(row) {
                        *slot = Some(format!(
                            "csv: column '{}': cannot parse '{}' as {}",
                            field.name(),
                            text.value(row),
                            field.data_type()
                        ));
                    }
                }
            }
            columns.push(parsed);
        }
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), columns).map_err(internal)?;
        if self.ignore_parse_errors || bad.iter().all(Option::is_none) {
            return Ok((batch, sources));
        }
        let keep: BooleanArray = bad.iter().map(|b| Some(b.is_none())).collect();
        let mut kept_sources = Vec::with_capacity(n);
        for (row, message) in bad.into_iter().enumerate() {
            match message {
                None => kept_sources.push(sources[row]),
                Some(message) => errors.push(DecodeError { index: sources[row], message }),
            }
        }
        errors.sort_by_key(|e| e.index);
        let batch = filter_record_batch(&batch, &keep).map_err(internal)?;
        Ok((batch, kept_sources))
    }
}

impl Decoder for CsvDecoder {
    fn decode(&mut self, records: &[&[u8]]) -> Result<Decoded, ConnectorError> {
        // Comment records give nothing; the others are decoded with their input positions.
        let (positions, lines): (Vec<usize>, Vec<&[u8]>) = records
            .iter()
            .enumerate()
            .filter(|(_, r)| !(self.options.allow_comments && r.first() == Some(&b'#')))
            .map(|(i, r)| (i, *r))
            .unzip();
        let new_stream = |capacity: usize| Ok(self.stream(capacity));
        let isolated = decode_isolated(&lines, &self.text_schema, "csv", &new_stream)?;
        let mut errors: Vec<DecodeError> = isolated
            .errors
            .into_iter()
            .map(|e| DecodeError { index: positions[e.index], message: e.message })
            .collect();
        let sources = isolated.sources.iter().map(|&i| positions[i]).collect();
        let (batch, sources) = self.parse_columns(isolated.batch, sources, &mut errors)?;
        Ok(Decoded { batch, ops: None, sources, errors })
    }
}

struct CsvStream {
    decoder: ArrowCsvDecoder,
}

impl RowStream for CsvStream {
    fn feed(&mut self, record: &[u8]) -> Result<(), String> {
        let before = self.decoder.capacity();
        let record = record.strip_suffix(b"\n").unwrap_or(record);
        let record = record.strip_suffix(b"\r").unwrap_or(record);
        let consumed = self.decoder.decode(record).map_err(|e| e.to_string())?;
        if consumed != record.len() {
            return Err("the record holds more than one CSV line".into());
        }
        self.decoder.decode(b"\n").map_err(|e| e.to_string())?;
        match before - self.decoder.capacity() {
            1 => Ok(()),
            0 => Err("the record holds no complete CSV line (empty, or a quote left open)".into()),
            n => Err(format!("the record holds {n} CSV lines, not one")),
        }
    }

    fn flush(&mut self) -> Result<Option<RecordBatch>, ArrowError> {
        self.decoder.flush()
    }
}

fn internal(e: ArrowError) -> ConnectorError {
    ConnectorError::Internal { message: format!("csv: {e}") }
}

/// Encodes rows as CSV lines.
#[derive(Debug, Clone)]
pub struct CsvEncoder {
    schema: SchemaRef,
    writer: WriterBuilder,
    standard: TimestampStandard,
}

/// `batch` with its TIMESTAMP and TIMESTAMP_LTZ columns as the text Flink's CSV format writes
/// (its `TimeFormats`, as JSON's: [`super::json::FlinkTimestampColumn`]).
fn timestamps_as_text(batch: &RecordBatch, standard: TimestampStandard) -> Result<RecordBatch, ConnectorError> {
    use arrow::array::StringBuilder;
    if !batch.schema().fields().iter().any(|f| matches!(f.data_type(), DataType::Timestamp(..))) {
        return Ok(batch.clone());
    }
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        let Some(timestamps) = super::json::FlinkTimestampColumn::of(column.as_ref(), standard) else {
            fields.push(field.as_ref().clone());
            columns.push(Arc::clone(column));
            continue;
        };
        let mut text = StringBuilder::with_capacity(column.len(), column.len() * 24);
        let mut value = Vec::with_capacity(32);
        for i in 0..column.len() {
            value.clear();
            if column.is_null(i) || !timestamps.write(i, &mut value) {
                text.append_null();
            } else {
                text.append_value(String::from_utf8_lossy(&value));
            }
        }
        fields.push(Field::new(field.name(), DataType::Utf8, field.is_nullable()));
        columns.push(Arc::new(text.finish()));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| ConnectorError::Encode { message: format!("csv: {e}") })
}

impl CsvEncoder {
    /// An encoder for rows of `schema` in the `options` dialect, timestamps per `standard`.
    pub fn new(schema: SchemaRef, options: CsvOptions, standard: TimestampStandard) -> Self {
        // Timestamps are written as text ([`timestamps_as_text`]).
        let mut writer = WriterBuilder::new()
            .with_header(false)
            .with_delimiter(options.delimiter)
            .with_quote(options.quote)
            .with_date_format("%Y-%m-%d".into())
            .with_null(options.null_literal.clone().unwrap_or_default());
        if let Some(escape) = options.escape {
            writer = writer.with_escape(escape).with_double_quote(false);
        }
        CsvEncoder { schema, writer, standard }
    }
}

/// A `Write` into a buffer that the encoder reads between rows.
struct Shared(Rc<RefCell<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Encoder for CsvEncoder {
    fn encode(&mut self, batch: &RecordBatch, ops: Option<&[Op]>) -> Result<Vec<Option<Vec<u8>>>, ConnectorError> {
        check_batch(&self.schema, batch, ops, "csv")?;
        let batch = &timestamps_as_text(batch, self.standard)?;
        let buffer = Rc::new(RefCell::new(Vec::new()));
        let mut writer = self.writer.clone().build(Shared(Rc::clone(&buffer)));
        let mut out = Vec::with_capacity(batch.num_rows());
        for row in 0..batch.num_rows() {
            writer
                .write(&batch.slice(row, 1))
                .map_err(|e| ConnectorError::Encode { message: format!("csv: {e}") })?;
            let mut line = std::mem::take(&mut *buffer.borrow_mut());
            if line.ends_with(b"\n") {
                line.pop();
            }
            out.push(Some(line));
        }
        Ok(out)
    }
}
