//! Kafka records with a key and a value, each in its own format: `upsert-kafka` tables, and
//! `kafka` tables with `'key.fields'` (Flink's Kafka connectors, "Key and Value Formats").
//!
//! The key columns (an `upsert-kafka` table's primary key, a `kafka` table's `'key.fields'`,
//! `;`-separated) are the Kafka key, in `'key.format'`; the value is in `'value.format'` (a
//! `kafka` table's `'format'` too) and holds every column (`'value.fields-include' = 'ALL'`,
//! the default) or the others only (`'EXCEPT_KEY'`). With `'key.fields-prefix'` (a `kafka`
//! table, `EXCEPT_KEY` only, as in Flink) each key column's name starts with the prefix, and the
//! key format names the field without it (column `k_id` is the key's `id`).
//!
//! # `kafka` tables with `'key.fields'`
//! The table stays append-only: a record is `+I` with its key columns from the key (NULL when
//! the record has no key) and its other columns from the value, or, with `ALL`, every column
//! from the value (Flink's source sets the value's fields after the key's); a record without a value makes
//! no row, as in a `kafka` table without a key. Writing, each row is one message: its key
//! columns encoded as the key, its value columns as the value. The value format is a plain one
//! (`json`, `csv`, `raw`, `avro-confluent`): a changelog format's several rows per record have
//! no key of their own.
//!
//! # `upsert-kafka` tables
//! A message without a value (a tombstone) deletes its key.
//!
//! # Reading
//! A record with a value gives `+I` (an upsert: it replaces any earlier row of its key, so the
//! output is an upsert changelog keyed by the primary key); a tombstone gives `-D` with the key
//! columns set and the others NULL. The key columns always come from the Kafka key. A record
//! without a key, or whose key or value does not decode, fails alone.
//!
//! # Writing
//! `+I`/`+U` rows give (key, value); `-D` rows give (key, tombstone); a `-U` row gives a
//! tombstone for its key unless the next row is a `+U` of the same key, which then replaces it
//! (so an update that keeps its key is one message, and one that changes its key deletes the
//! old one).

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::SchemaRef;

use super::codec::{DecodeError, Decoded, Decoder, Encoder, Op};
use super::options::{FormatKind, FormatOptions};
use crate::ConnectorError;

/// A Kafka record's key and value as [`UpsertDecoder::decode`] takes them: `None` for no key,
/// or for no value (a tombstone).
pub type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Which columns the value holds (Flink `'value.fields-include'`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ValueFields {
    /// `ALL`: every column, the key columns too.
    #[default]
    All,
    /// `EXCEPT_KEY`: the columns that are not in the key.
    ExceptKey,
}

impl ValueFields {
    /// Reads `'value.fields-include'` (default `ALL`).
    ///
    /// # Errors
    /// [`ConnectorError::InvalidValue`] for another value.
    pub fn from_options(options: &BTreeMap<String, String>) -> Result<Self, ConnectorError> {
        match options.get("value.fields-include").map(|v| v.to_ascii_uppercase()).as_deref() {
            None | Some("ALL") => Ok(ValueFields::All),
            Some("EXCEPT_KEY") => Ok(ValueFields::ExceptKey),
            Some(_) => Err(ConnectorError::InvalidValue {
                option: "value.fields-include".into(),
                value: options["value.fields-include"].clone(),
                valid: "ALL, EXCEPT_KEY".into(),
            }),
        }
    }
}

/// The columns of a `kafka` table's `'key.fields'` (`;`-separated names, Flink's form), or
/// `None` without the option.
pub fn key_fields(options: &BTreeMap<String, String>) -> Option<Vec<String>> {
    let fields = options.get("key.fields")?;
    Some(fields.split(';').map(|f| f.trim().to_string()).filter(|f| !f.is_empty()).collect())
}

/// The prefix of a `kafka` table's value format options: `value.` when it names its value
/// format `'value.format'`, else none (`'format'`; Flink takes either).
pub fn value_prefix(options: &BTreeMap<String, String>) -> &'static str {
    if options.contains_key("value.format") {
        "value."
    } else {
        ""
    }
}

/// The value format a table names: `'format'`, or `'value.format'` (`kafka`, `upsert-kafka`).
pub fn value_format(options: &BTreeMap<String, String>) -> Option<&str> {
    options.get(&format!("{}format", value_prefix(options))).map(String::as_str)
}

/// Checks a `kafka` table's message key as it is declared: `'key.fields-prefix'` with
/// `EXCEPT_KEY` and on every key column, plain key and value formats, and types the key format
/// can hold (`key_columns`: positions of `'key.fields'` in `schema`, the message's columns).
///
/// # Errors
/// As [`UpsertDecoder::appending`]; `Unsupported` for a key column type the key format cannot
/// hold.
pub fn check_key_fields(
    options: &BTreeMap<String, String>,
    schema: SchemaRef,
    key_columns: &[usize],
) -> Result<(), ConnectorError> {
    let layout = Layout::try_new(Keyed::Append, options, schema, key_columns)?;
    layout.formats(options)?;
    super::check_declared_types(&options["key.format"], &layout.key_schema()?)
}

/// How the records of a table with a key behave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keyed {
    /// `upsert-kafka`: a record upserts its key, a tombstone deletes it.
    Upsert,
    /// `kafka` with `'key.fields'`: every record is a new row.
    Append,
}

/// The key and value layout of a table with a key.
#[derive(Debug, Clone)]
struct Layout {
    keyed: Keyed,
    schema: SchemaRef,
    key_columns: Vec<usize>,
    value_columns: Vec<usize>,
    /// `'key.fields-prefix'`: stripped from the key columns' names in the key format.
    key_prefix: String,
}

impl Layout {
    fn try_new(
        keyed: Keyed,
        options: &BTreeMap<String, String>,
        schema: SchemaRef,
        key_columns: &[usize],
    ) -> Result<Self, ConnectorError> {
        if key_columns.is_empty() || key_columns.iter().any(|&k| k >= schema.fields().len()) {
            return Err(ConnectorError::MissingOption {
                connector: if keyed == Keyed::Upsert { "upsert-kafka" } else { "kafka" }.into(),
                option: if keyed == Keyed::Upsert { "PRIMARY KEY (the Kafka key's columns)" } else { "key.fields" }.into(),
            });
        }
        let fields = ValueFields::from_options(options)?;
        let key_prefix = options.get("key.fields-prefix").cloned().unwrap_or_default();
        if !key_prefix.is_empty() {
            // Flink: a prefix needs 'value.fields-include' = 'EXCEPT_KEY'.
            if fields != ValueFields::ExceptKey {
                return Err(ConnectorError::InvalidValue {
                    option: "value.fields-include".into(),
                    value: options.get("value.fields-include").cloned().unwrap_or_else(|| "ALL".into()),
                    valid: "EXCEPT_KEY ('key.fields-prefix' needs it; ALL is the default when the option is not given)".into(),
                });
            }
            if let Some(k) = key_columns.iter().find(|&&k| !schema.field(k).name().starts_with(&key_prefix)) {
                return Err(ConnectorError::InvalidValue {
                    option: "key.fields".into(),
                    value: schema.field(*k).name().clone(),
                    valid: format!("columns whose names start with the 'key.fields-prefix' '{key_prefix}'"),
                });
            }
        }
        let value_columns = (0..schema.fields().len())
            .filter(|c| fields == ValueFields::All || !key_columns.contains(c))
            .collect();
        Ok(Layout { keyed, schema, key_columns: key_columns.to_vec(), value_columns, key_prefix })
    }

    fn project(&self, columns: &[usize]) -> Result<SchemaRef, ConnectorError> {
        Ok(Arc::new(self.schema.project(columns).map_err(internal)?))
    }

    /// The key format's schema: the key columns, named without the prefix.
    fn key_schema(&self) -> Result<SchemaRef, ConnectorError> {
        let projected = self.project(&self.key_columns)?;
        let fields: Vec<arrow::datatypes::Field> = projected
            .fields()
            .iter()
            .map(|f| {
                let name = f.name().strip_prefix(&self.key_prefix).unwrap_or(f.name());
                f.as_ref().clone().with_name(name)
            })
            .collect();
        Ok(Arc::new(arrow::datatypes::Schema::new(fields)))
    }

    /// The key columns of `batch` as the key format's batch.
    fn key_batch(&self, batch: &RecordBatch) -> Result<RecordBatch, ConnectorError> {
        let columns = self.key_columns.iter().map(|&k| Arc::clone(batch.column(k))).collect();
        RecordBatch::try_new(self.key_schema()?, columns).map_err(internal)
    }

    fn formats(&self, options: &BTreeMap<String, String>) -> Result<(FormatOptions, FormatOptions), ConnectorError> {
        let key = FormatOptions::from_options(options, "key.")?;
        let value_prefix = if self.keyed == Keyed::Upsert { "value." } else { value_prefix(options) };
        let value = FormatOptions::from_options(options, value_prefix)?;
        let changelog = [FormatKind::DebeziumJson, FormatKind::MaxwellJson, FormatKind::CanalJson];
        for (prefix, f) in [("key.", &key), (value_prefix, &value)] {
            if changelog.contains(&f.kind) {
                let what = if self.keyed == Keyed::Upsert { "upsert-kafka" } else { "a 'kafka' table with 'key.fields'" };
                return Err(ConnectorError::Unsupported {
                    feature: format!("'{prefix}format' = '{}' with {what} (use json, csv, raw or avro-confluent)", options[&format!("{prefix}format")]),
                });
            }
        }
        Ok((key, value))
    }
}

fn internal(e: arrow::error::ArrowError) -> ConnectorError {
    ConnectorError::Internal { message: format!("upsert-kafka: {e}") }
}

/// Decodes (key, value) records into an upsert changelog of the table's schema.
pub struct UpsertDecoder {
    layout: Layout,
    key: Box<dyn Decoder>,
    value: Box<dyn Decoder>,
}

impl UpsertDecoder {
    /// The decoder of a table of `schema` whose primary key is the columns `key_columns`
    /// (positions in `schema`), with its `'key.format'`, `'value.format'` and
    /// `'value.fields-include'` from `options`.
    ///
    /// # Errors
    /// As [`FormatOptions::from_options`]; [`ConnectorError::MissingOption`] without key columns;
    /// [`ConnectorError::Unsupported`] for `debezium-json` as key or value format.
    pub fn try_new(
        options: &BTreeMap<String, String>,
        schema: SchemaRef,
        key_columns: &[usize],
    ) -> Result<Self, ConnectorError> {
        Self::with(Keyed::Upsert, options, schema, key_columns)
    }

    /// The decoder of a `kafka` table of `schema` whose `'key.fields'` are the columns
    /// `key_columns`: append-only rows (see the module docs).
    ///
    /// # Errors
    /// As [`UpsertDecoder::try_new`]; `InvalidValue` for a `'key.fields-prefix'` without
    /// `EXCEPT_KEY` or a key column without the prefix.
    pub fn appending(
        options: &BTreeMap<String, String>,
        schema: SchemaRef,
        key_columns: &[usize],
    ) -> Result<Self, ConnectorError> {
        Self::with(Keyed::Append, options, schema, key_columns)
    }

    fn with(
        keyed: Keyed,
        options: &BTreeMap<String, String>,
        schema: SchemaRef,
        key_columns: &[usize],
    ) -> Result<Self, ConnectorError> {
        let layout = Layout::try_new(keyed, options, schema, key_columns)?;
        let (key, value) = layout.formats(options)?;
        let key = key.decoder(layout.key_schema()?)?;
        let value = value.decoder(layout.project(&layout.value_columns)?)?;
        Ok(UpsertDecoder { layout, key, value })
    }

    /// Decodes `records`, each a (key, value) pair, `None` for a missing key or a tombstone.
    ///
    /// Output as [`Decoder::decode`], with `ops` always set (`+I` or `-D`).
    ///
    /// # Errors
    /// Only for a fault of Weir's.
    pub fn decode(&mut self, records: &[KeyValue<'_>]) -> Result<Decoded, ConnectorError> {
        let mut errors = Vec::new();
        let (key_inputs, keys): (Vec<usize>, Vec<&[u8]>) =
            records.iter().enumerate().filter_map(|(i, (k, _))| k.map(|k| (i, k))).unzip();
        let (value_inputs, values): (Vec<usize>, Vec<&[u8]>) =
            records.iter().enumerate().filter_map(|(i, (_, v))| v.map(|v| (i, v))).unzip();
        let keys = self.key.decode(&keys)?;
        let values = self.value.decode(&values)?;
        // Per input record: its row in the key batch and in the value batch.
        let mut key_row: Vec<Option<u32>> = vec![None; records.len()];
        for (row, &s) in keys.sources.iter().enumerate() {
            key_row[key_inputs[s]] = Some(row as u32);
        }
        let mut value_row: Vec<Option<u32>> = vec![None; records.len()];
        for (row, &s) in values.sources.iter().enumerate() {
            value_row[value_inputs[s]] = Some(row as u32);
        }
        let append = self.layout.keyed == Keyed::Append;
        // A `kafka` table's record without a key has NULL key columns, unless one is NOT NULL.
        let not_null = self.layout.key_columns.iter().find(|&&k| !self.layout.schema.field(k).is_nullable());
        let mut failed = vec![false; records.len()];
        for (i, (key, _)) in records.iter().enumerate() {
            if key.is_none() && (!append || not_null.is_some()) {
                failed[i] = true;
                let message = match not_null {
                    Some(&k) if append => {
                        format!("kafka: the record has no key, and key column '{}' is NOT NULL", self.layout.schema.field(k).name())
                    }
                    _ => "upsert-kafka: the record has no key".into(),
                };
                errors.push(DecodeError { index: i, message });
            }
        }
        for e in keys.errors {
            let index = key_inputs[e.index];
            failed[index] = true;
            errors.push(DecodeError { index, message: format!("key: {}", e.message) });
        }
        for e in values.errors {
            let index = value_inputs[e.index];
            if !failed[index] {
                failed[index] = true;
                errors.push(DecodeError { index, message: format!("value: {}", e.message) });
            }
        }
        errors.sort_by_key(|e| e.index);
        let mut ops = Vec::with_capacity(records.len());
        let mut sources = Vec::with_capacity(records.len());
        let mut take_key = Vec::with_capacity(records.len());
        let mut take_value = Vec::with_capacity(records.len());
        for (i, (key, value)) in records.iter().enumerate() {
            // A `kafka` table's record without a value makes no row.
            if failed[i] || (append && value.is_none()) {
                continue;
            }
            let (k, v) = (key_row[i], value_row[i]);
            if (key.is_some() && k.is_none()) || (value.is_some() && v.is_none()) {
                return Err(ConnectorError::Internal { message: format!("kafka: record {i} lost its key or value row") });
            }
            ops.push(if value.is_some() { Op::Insert } else { Op::Delete });
            sources.push(i);
            // No key: NULL key columns (a `kafka` table's).
            take_key.push(k);
            take_value.push(v);
        }
        let take_key = UInt32Array::from(take_key);
        let take_value = UInt32Array::from(take_value);
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.layout.schema.fields().len());
        for c in 0..self.layout.schema.fields().len() {
            // A `kafka` table's record always has a value; with `ALL` it holds the key columns
            // too, and those are read (Flink's source sets the value's fields after the key's).
            let from_key = match self.layout.key_columns.iter().position(|&k| k == c) {
                Some(_) if append && self.layout.value_columns.contains(&c) => None,
                k => k,
            };
            let column = match from_key {
                Some(k) => take(keys.batch.column(k).as_ref(), &take_key, None),
                None => {
                    let v = self.layout.value_columns.iter().position(|&v| v == c).ok_or_else(|| {
                        ConnectorError::Internal { message: format!("upsert-kafka: column {c} in neither key nor value") }
                    })?;
                    take(values.batch.column(v).as_ref(), &take_value, None)
                }
            };
            columns.push(column.map_err(internal)?);
        }
        let batch = RecordBatch::try_new(Arc::clone(&self.layout.schema), columns).map_err(internal)?;
        let ops = (!append).then_some(ops);
        Ok(Decoded { batch, ops, sources, errors })
    }
}

/// One Kafka message of an `upsert-kafka` sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpsertMessage {
    /// The input row it comes from.
    pub row: usize,
    /// The encoded primary key (`None` only if a `raw` key column is NULL).
    pub key: Option<Vec<u8>>,
    /// The encoded value; `None` is a tombstone (a delete).
    pub value: Option<Vec<u8>>,
}

/// Encodes a changelog into `upsert-kafka` messages.
pub struct UpsertEncoder {
    layout: Layout,
    key: Box<dyn Encoder>,
    value: Box<dyn Encoder>,
}

impl UpsertEncoder {
    /// The encoder of a table of `schema` whose primary key is the columns `key_columns`.
    ///
    /// # Errors
    /// As [`UpsertDecoder::try_new`].
    pub fn try_new(
        options: &BTreeMap<String, String>,
        schema: SchemaRef,
        key_columns: &[usize],
    ) -> Result<Self, ConnectorError> {
        Self::with(Keyed::Upsert, options, schema, key_columns)
    }

    /// The encoder of a `kafka` table whose `'key.fields'` are the columns `key_columns`: one
    /// message per row, whatever its op (the `kafka` sink takes append-only input).
    ///
    /// # Errors
    /// As [`UpsertDecoder::appending`].
    pub fn appending(
        options: &BTreeMap<String, String>,
        schema: SchemaRef,
        key_columns: &[usize],
    ) -> Result<Self, ConnectorError> {
        Self::with(Keyed::Append, options, schema, key_columns)
    }

    fn with(
        keyed: Keyed,
        options: &BTreeMap<String, String>,
        schema: SchemaRef,
        key_columns: &[usize],
    ) -> Result<Self, ConnectorError> {
        let layout = Layout::try_new(keyed, options, schema, key_columns)?;
        let (key, value) = layout.formats(options)?;
        let key = key.encoder(layout.key_schema()?)?;
        let value = value.encoder(layout.project(&layout.value_columns)?)?;
        Ok(UpsertEncoder { layout, key, value })
    }

    /// The messages for `batch` (with `ops`, `None` = all inserts), in row order; a `-U`
    /// gives no message when a later row of the batch writes its key (`+I`/`+U`), and a
    /// tombstone otherwise (its row's new image has another key).
    ///
    /// # Errors
    /// As [`Encoder::encode`]; [`ConnectorError::Encode`] for a NULL in a key column.
    pub fn encode(&mut self, batch: &RecordBatch, ops: Option<&[Op]>) -> Result<Vec<UpsertMessage>, ConnectorError> {
        if ops.is_some_and(|ops| ops.len() != batch.num_rows()) {
            return Err(ConnectorError::Internal {
                message: format!("upsert-kafka encoder given {:?} ops for {} rows", ops.map(<[Op]>::len), batch.num_rows()),
            });
        }
        let project = |columns: &[usize]| -> Result<RecordBatch, ConnectorError> {
            batch.project(columns).map_err(internal)
        };
        if self.layout.keyed == Keyed::Append {
            let keys = self.key.encode(&self.layout.key_batch(batch)?, None)?;
            let values = self.value.encode(&project(&self.layout.value_columns)?, None)?;
            return Ok(keys
                .into_iter()
                .zip(values)
                .enumerate()
                .map(|(row, (key, value))| UpsertMessage { row, key, value })
                .collect());
        }
        // Flink's sink NOT NULL enforcer (`table.exec.sink.not-null-enforcer` = ERROR): a
        // PRIMARY KEY column is NOT NULL, and a NULL message key would be no key at all.
        for &k in &self.layout.key_columns {
            if batch.column(k).null_count() > 0 {
                return Err(ConnectorError::Encode {
                    message: format!(
                        "column '{}' is in the PRIMARY KEY (the message key), so it is NOT NULL, but the query writes NULL into it; filter those rows out (WHERE {0} IS NOT NULL) or COALESCE it",
                        self.layout.schema.field(k).name()
                    ),
                });
            }
        }
        let keys = self.key.encode(&self.layout.key_batch(batch)?, None)?;
        let mut values = self.value.encode(&project(&self.layout.value_columns)?, None)?;
        let op = |row: usize| ops.map_or(Op::Insert, |ops| ops[row]);
        // Whether a later row of the batch writes the same key: then an update-before of the
        // key is only the old image of that write (Flink's upsert sink drops it), not a delete.
        // The pair need not be adjacent: at parallelism 2 and more a batch interleaves the
        // update pairs of several keys.
        let mut written_later = vec![false; keys.len()];
        let mut seen: std::collections::HashSet<Option<&[u8]>> = std::collections::HashSet::new();
        for row in (0..keys.len()).rev() {
            written_later[row] = seen.contains(&keys[row].as_deref());
            if op(row).is_insert() {
                seen.insert(keys[row].as_deref());
            }
        }
        let mut out = Vec::with_capacity(batch.num_rows());
        for (row, key) in keys.iter().enumerate() {
            let value = match op(row) {
                Op::Insert | Op::UpdateAfter => values[row].take(),
                Op::Delete => None,
                Op::UpdateBefore if written_later[row] => continue,
                // The old image of a row whose new image has another key: its key is gone.
                Op::UpdateBefore => None,
            };
            out.push(UpsertMessage { row, key: key.clone(), value });
        }
        Ok(out)
    }
}

