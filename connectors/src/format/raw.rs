//! `raw`: the payload is the value of the table's single column (Flink's `raw` format).
//!
//! The column is BYTES (the payload as is) or STRING (the payload as UTF-8; a record that is not
//! valid UTF-8 fails alone). Writing: the column's value is the payload; a NULL value is a
//! tombstone (`None`), as Flink writes a null message.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryBuilder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, SchemaRef};

use super::codec::{DecodeError, Decoded, Decoder, Encoder, Op};
use super::json::check_batch;
use crate::ConnectorError;

/// Decodes payloads into a one-column BYTES or STRING row.
#[derive(Debug, Clone)]
pub struct RawDecoder {
    schema: SchemaRef,
    text: bool,
}

impl RawDecoder {
    /// A decoder producing `schema`.
    ///
    /// # Errors
    /// [`ConnectorError::Unsupported`] unless `schema` is one BYTES or STRING column.
    pub fn try_new(schema: SchemaRef) -> Result<Self, ConnectorError> {
        let text = raw_column(&schema)?;
        Ok(RawDecoder { schema, text })
    }
}

/// Whether the single column of a `raw` schema is STRING (else BYTES).
fn raw_column(schema: &SchemaRef) -> Result<bool, ConnectorError> {
    match schema.fields().iter().map(|f| f.data_type()).collect::<Vec<_>>().as_slice() {
        [DataType::Utf8] => Ok(true),
        [DataType::Binary] => Ok(false),
        _ => Err(ConnectorError::Unsupported {
            feature: format!(
                "format 'raw' with columns ({}); it takes exactly one column of type BYTES or STRING",
                schema.fields().iter().map(|f| format!("{} {}", f.name(), f.data_type())).collect::<Vec<_>>().join(", ")
            ),
        }),
    }
}

impl Decoder for RawDecoder {
    fn decode(&mut self, records: &[&[u8]]) -> Result<Decoded, ConnectorError> {
        let bytes: usize = records.iter().map(|r| r.len()).sum();
        let mut sources = Vec::with_capacity(records.len());
        let mut errors = Vec::new();
        let column: ArrayRef = if self.text {
            let mut builder = StringBuilder::with_capacity(records.len(), bytes);
            for (index, record) in records.iter().enumerate() {
                match std::str::from_utf8(record) {
                    Ok(s) => {
                        builder.append_value(s);
                        sources.push(index);
                    }
                    Err(e) => errors.push(DecodeError { index, message: format!("raw: the payload is not UTF-8: {e}") }),
                }
            }
            Arc::new(builder.finish())
        } else {
            let mut builder = BinaryBuilder::with_capacity(records.len(), bytes);
            for record in records {
                builder.append_value(record);
            }
            sources.extend(0..records.len());
            Arc::new(builder.finish())
        };
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), vec![column])
            .map_err(|e| ConnectorError::Internal { message: format!("raw: {e}") })?;
        Ok(Decoded { batch, ops: None, sources, errors })
    }
}

/// Encodes the single column's value as the payload.
#[derive(Debug, Clone)]
pub struct RawEncoder {
    schema: SchemaRef,
}

impl RawEncoder {
    /// An encoder for `schema`.
    ///
    /// # Errors
    /// As [`RawDecoder::try_new`].
    pub fn try_new(schema: SchemaRef) -> Result<Self, ConnectorError> {
        raw_column(&schema)?;
        Ok(RawEncoder { schema })
    }
}

impl Encoder for RawEncoder {
    fn encode(&mut self, batch: &RecordBatch, ops: Option<&[Op]>) -> Result<Vec<Option<Vec<u8>>>, ConnectorError> {
        check_batch(&self.schema, batch, ops, "raw")?;
        let column = batch.column(0);
        Ok(match column.data_type() {
            DataType::Utf8 => column.as_string::<i32>().iter().map(|v| v.map(|s| s.as_bytes().to_vec())).collect(),
            _ => column.as_binary::<i32>().iter().map(|v| v.map(<[u8]>::to_vec)).collect(),
        })
    }
}
