//! `debezium-json`: Debezium change events as a changelog (Flink's `debezium-json` format).
//!
//! A record is `{"before": {..}|null, "after": {..}|null, "op": "c"|"r"|"u"|"d", ...}`, or the
//! same inside `"payload"` (Kafka Connect's JSON converter with `schemas.enable`, which also
//! writes a `"schema"` field); other fields (`source`, `ts_ms`, ...) are ignored. Rows:
//!
//! | op | rows |
//! | --- | --- |
//! | `c` (create), `r` (snapshot read) | `+I after` |
//! | `u` (update) | `-U before`, `+U after` |
//! | `d` (delete) | `-D before` |
//!
//! # Errors per record
//! An unknown `op`, or a missing image it needs: `u` or `d` without `before` is refused as Flink
//! does (Debezium's Postgres connector sends no `before` unless the table has
//! `REPLICA IDENTITY FULL`). A Kafka tombstone (the null message Debezium sends after a delete)
//! is not a record: the caller skips it, as Flink does.
//!
//! # Writing
//! As Flink: `+I` and `+U` rows are written as `{"before":null,"after":row,"op":"c"}`, `-D` and
//! `-U` rows as `{"before":row,"after":null,"op":"d"}`: one message per row, no `u` envelopes.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StructArray, UInt32Array};
use arrow::compute::kernels::zip::zip;
use arrow::compute::{concat, is_not_null, take};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use arrow::json::writer::EncoderOptions;

use super::codec::{DecodeError, Decoded, Decoder, Encoder, Op};
use super::json::{check_batch, encoder_options, for_each_object, JsonRows};
use super::options::TimestampStandard;
use crate::ConnectorError;

/// Decodes Debezium JSON envelopes into a changelog of its schema.
#[derive(Debug, Clone)]
pub struct DebeziumDecoder {
    schema: SchemaRef,
    envelope: JsonRows,
}

impl DebeziumDecoder {
    /// A decoder producing rows of `schema`; `ignore_parse_errors` reads values of the wrong
    /// type as NULL.
    ///
    /// # Errors
    /// [`ConnectorError::Unsupported`] when Arrow's JSON reader cannot build `schema`.
    pub fn try_new(schema: SchemaRef, ignore_parse_errors: bool) -> Result<Self, ConnectorError> {
        let row = DataType::Struct(schema.fields().clone());
        let change = Fields::from(vec![
            Field::new("before", row.clone(), true),
            Field::new("after", row, true),
            Field::new("op", DataType::Utf8, true),
        ]);
        let mut fields: Vec<Field> = change.iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("payload", DataType::Struct(change), true));
        let envelope = JsonRows::try_new(Arc::new(Schema::new(fields)), ignore_parse_errors)?;
        Ok(DebeziumDecoder { schema, envelope })
    }
}

impl Decoder for DebeziumDecoder {
    fn decode(&mut self, records: &[&[u8]]) -> Result<Decoded, ConnectorError> {
        let isolated = self.envelope.decode(records, "debezium-json")?;
        let mut errors = isolated.errors;
        let envelopes = &isolated.batch;
        let n = envelopes.num_rows();
        // The top-level change, or else the one inside "payload".
        let payload = envelopes.column(3).as_struct();
        let top_op = envelopes.column(2);
        let use_top = is_not_null(top_op).map_err(internal)?;
        let pick = |i: usize| -> Result<ArrayRef, ConnectorError> {
            let payload_child = payload_child(payload, i)?;
            zip(&use_top, envelopes.column(i), &payload_child).map_err(internal)
        };
        let before = pick(0)?;
        let after = pick(1)?;
        let op = pick(2)?;
        let op = op.as_string::<i32>();
        // Rows to take from concat(before, after): before row r is r, after row r is n + r.
        let mut take_rows: Vec<u32> = Vec::with_capacity(n + n / 8);
        let mut ops = Vec::with_capacity(n + n / 8);
        let mut sources = Vec::with_capacity(n + n / 8);
        for r in 0..n {
            let source = isolated.sources[r];
            let has_before = before.is_valid(r);
            let has_after = after.is_valid(r);
            let fail = |message: String| DecodeError { index: source, message: format!("debezium-json: {message}") };
            let (r32, a32) = (r as u32, (n + r) as u32);
            let rows: &[(u32, Op)] = match (op.is_valid(r).then(|| op.value(r)), has_before, has_after) {
                (Some("c" | "r"), _, true) => &[(a32, Op::Insert)],
                (Some("u"), true, true) => &[(r32, Op::UpdateBefore), (a32, Op::UpdateAfter)],
                (Some("d"), true, _) => &[(r32, Op::Delete)],
                (Some(o @ ("c" | "r")), _, false) => {
                    errors.push(fail(format!("op '{o}' without an \"after\" row")));
                    continue;
                }
                (Some(o @ ("u" | "d")), false, _) => {
                    errors.push(fail(format!(
                        "op '{o}' without a \"before\" row; for Debezium's Postgres connector, set the table's REPLICA IDENTITY to FULL"
                    )));
                    continue;
                }
                (Some("u"), true, false) => {
                    errors.push(fail("op 'u' without an \"after\" row".into()));
                    continue;
                }
                (Some(other), _, _) => {
                    errors.push(fail(format!("unknown op '{other}'; valid ops: c, r, u, d")));
                    continue;
                }
                (None, _, _) => {
                    errors.push(fail("no \"op\" field (neither at the top nor in \"payload\")".into()));
                    continue;
                }
            };
            for &(row, kind) in rows {
                take_rows.push(row);
                ops.push(kind);
                sources.push(source);
            }
        }
        errors.sort_by_key(|e| e.index);
        let images = concat(&[before.as_ref(), after.as_ref()]).map_err(internal)?;
        let rows = take(images.as_ref(), &UInt32Array::from(take_rows), None).map_err(internal)?;
        let (_, columns, _) = rows.as_struct().clone().into_parts();
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), columns).map_err(internal)?;
        Ok(Decoded { batch, ops: Some(ops), sources, errors })
    }
}

/// Child `i` of the `payload` struct, NULL where `payload` itself is NULL.
fn payload_child(payload: &StructArray, i: usize) -> Result<ArrayRef, ConnectorError> {
    let child = payload.column(i);
    match payload.nulls() {
        None => Ok(Arc::clone(child)),
        Some(nulls) => {
            let merged = arrow::buffer::NullBuffer::union(Some(nulls), child.nulls());
            let data = child.to_data().into_builder().nulls(merged).build().map_err(internal)?;
            Ok(arrow::array::make_array(data))
        }
    }
}

fn internal(e: arrow::error::ArrowError) -> ConnectorError {
    ConnectorError::Internal { message: format!("debezium-json: {e}") }
}

/// Encodes a changelog as Debezium JSON envelopes.
#[derive(Debug, Clone)]
pub struct DebeziumEncoder {
    schema: SchemaRef,
    options: EncoderOptions,
}

impl DebeziumEncoder {
    /// An encoder for rows of `schema`, writing timestamps per `standard`; `ignore_null_fields`
    /// leaves NULL columns out of the row objects.
    pub fn new(schema: SchemaRef, standard: TimestampStandard, ignore_null_fields: bool) -> Self {
        DebeziumEncoder { options: encoder_options(standard, ignore_null_fields), schema }
    }
}

impl Encoder for DebeziumEncoder {
    fn encode(&mut self, batch: &RecordBatch, ops: Option<&[Op]>) -> Result<Vec<Option<Vec<u8>>>, ConnectorError> {
        check_batch(&self.schema, batch, ops, "debezium-json")?;
        let mut out = Vec::with_capacity(batch.num_rows());
        for_each_object(&self.schema, batch, &self.options, |row, object| {
            let mut message = Vec::with_capacity(object.len() + 40);
            match ops.map_or(Op::Insert, |ops| ops[row]) {
                Op::Insert | Op::UpdateAfter => {
                    message.extend_from_slice(b"{\"before\":null,\"after\":");
                    message.extend_from_slice(object);
                    message.extend_from_slice(b",\"op\":\"c\"}");
                }
                Op::Delete | Op::UpdateBefore => {
                    message.extend_from_slice(b"{\"before\":");
                    message.extend_from_slice(object);
                    message.extend_from_slice(b",\"after\":null,\"op\":\"d\"}");
                }
            }
            out.push(Some(message));
        })?;
        Ok(out)
    }
}
