//! `avro-confluent`: Avro records in the Confluent wire format, schemas in a schema registry.
//!
//! A payload is a magic byte `0`, the writer schema's registry id (4 bytes, big-endian) and the
//! Avro binary datum (Confluent's `KafkaAvroSerializer`, Flink's `avro-confluent`).
//!
//! # Options (Flink's names, behind the format's prefix)
//! - `avro-confluent.url` (required): the registry's base URL (`http://` or `https://`).
//! - `avro-confluent.subject`: the subject a writer registers its schema under; default
//!   `<topic>-value`, or `<topic>-key` for `'key.format'` (Confluent's TopicNameStrategy).
//! - `avro-confluent.basic-auth.user-info` (`user:password`), `avro-confluent.bearer-auth.token`;
//!   `avro-confluent.basic-auth.credentials-source` and `.bearer-auth.credentials-source` are
//!   accepted (`USER_INFO` / `STATIC_TOKEN` are the only sources).
//!
//! # Reading
//! The writer schema is fetched by id once (`GET /schemas/ids/{id}`) and kept; a record's
//! fields are matched to columns by name (case-insensitive), a missing field is NULL, a union
//! with `null` is read through. Types: `long`/`int` to any integer column (range checked),
//! DOUBLE, DECIMAL (scaled), DATE (days) or TIMESTAMP (ms); `float`/`double` to DOUBLE, FLOAT or
//! DECIMAL; `string`/`enum`/`uuid` to STRING; `bytes`/`fixed` to BYTES; `decimal` (bytes or
//! fixed) to DECIMAL with the writer's scale; `date`; `timestamp-millis`/`-micros`/`-nanos` and
//! the `local-` ones to TIMESTAMP(3) (truncated to ms); a `record` to a ROW column (its fields
//! by name, as the top level's), an `array` to an ARRAY column, a `map` to a MAP column with
//! STRING keys, nested to any depth (a decimal inside them is refused: its scale is not
//! carried). A record that is not in the wire
//! format, names a schema id the registry does not have, or has a value of the wrong type is a
//! dead letter. A registry that cannot be reached is an error of the environment
//! ([`ConnectorError::Registry`]): the source retries from its last commit.
//!
//! # Writing
//! The writer schema is derived from the columns (record `record` in namespace
//! `org.apache.flink.avro.generated`, as Flink names it; a nullable column is a union with
//! `null`; BIGINT `long`, INT/SMALLINT/TINYINT `int`, DOUBLE `double`, FLOAT `float`, BOOLEAN
//! `boolean`, STRING `string`, BYTES `bytes`, DECIMAL(p,s) `bytes` with logical type
//! `decimal`, DATE `int`/`date`, TIMESTAMP(3) and TIMESTAMP_LTZ(3) `long`/`timestamp-millis`,
//! ROW a `record` named after its column's path (`record_buyer_address`), ARRAY an `array`,
//! MAP with STRING keys a `map`; nested fields, elements and values are unions with `null`)
//! and registered under the subject at the first write (`POST /subjects/{subject}/versions`,
//! which returns the existing id for a schema already registered).
//!
//! Registry calls run on a short-lived thread of their own (the HTTP client blocks and must
//! not run on an async runtime's thread); they happen once per schema, not per record.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use apache_avro::types::Value;
use apache_avro::Schema;
use arrow::array::{
    ArrayRef, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder,
    Int16Builder, Int32Builder, Int64Builder, Int8Builder, RecordBatch, StringBuilder, TimestampMillisecondBuilder,
};
use arrow::array::builder::NullBufferBuilder;
use arrow::array::{Array, AsArray, ListArray, MapArray, StructArray};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, FieldRef, Fields, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    Int8Type, SchemaRef, TimeUnit, TimestampMillisecondType,
};
use schema_registry_converter::blocking::schema_registry::{get_schema_by_id, post_schema, SrSettings};
use schema_registry_converter::schema_registry_common::{SchemaType, SuppliedSchema};

use super::codec::{DecodeError, Decoded, Decoder, Encoder, Op};
use crate::ConnectorError;

/// The `avro-confluent.*` options a format takes.
pub(super) const AVRO_OPTIONS: &[&str] = &[
    "url",
    "subject",
    "basic-auth.credentials-source",
    "basic-auth.user-info",
    "bearer-auth.credentials-source",
    "bearer-auth.token",
];

/// Where the schemas are: the registry and how to log in, and the subject a writer uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryOptions {
    /// `avro-confluent.url`.
    pub url: String,
    /// `avro-confluent.subject`, or the TopicNameStrategy subject of the table's topic.
    pub subject: Option<String>,
    /// `avro-confluent.basic-auth.user-info`: (user, password).
    pub basic_auth: Option<(String, Option<String>)>,
    /// `avro-confluent.bearer-auth.token`.
    pub bearer_token: Option<String>,
}

impl RegistryOptions {
    /// Reads the options `'<own>*'` (`own` is `'<prefix>avro-confluent.'`); the default subject
    /// is `<topic>-key` for the `key.` prefix, else `<topic>-value`.
    pub(super) fn from_options(
        options: &BTreeMap<String, String>,
        prefix: &str,
        own: &str,
    ) -> Result<Self, ConnectorError> {
        let get = |name: &str| options.get(&format!("{own}{name}")).cloned();
        let url = get("url").ok_or_else(|| ConnectorError::MissingOption {
            connector: options.get("connector").cloned().unwrap_or_else(|| "kafka".into()) + "' format 'avro-confluent",
            option: format!("{own}url"),
        })?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ConnectorError::InvalidValue {
                option: format!("{own}url"),
                value: url,
                valid: "an http:// or https:// URL of a Confluent schema registry".into(),
            });
        }
        let role = if prefix == "key." { "key" } else { "value" };
        let subject = get("subject").or_else(|| options.get("topic").map(|t| format!("{}-{role}", t.trim())));
        let basic_auth = get("basic-auth.user-info").map(|info| match info.split_once(':') {
            Some((user, password)) => (user.to_string(), Some(password.to_string())),
            None => (info, None),
        });
        Ok(RegistryOptions { url: url.trim_end_matches('/').to_string(), subject, basic_auth, bearer_token: get("bearer-auth.token") })
    }

    /// Runs `call` against the registry on a thread of its own (see the module docs).
    fn call<T: Send>(
        &self,
        call: impl FnOnce(&SrSettings) -> Result<T, schema_registry_converter::error::SRCError> + Send,
    ) -> Result<T, RegistryFailure> {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let mut builder = SrSettings::new_builder(self.url.clone());
                    builder.set_timeout(std::time::Duration::from_secs(30));
                    if let Some((user, password)) = &self.basic_auth {
                        builder.set_basic_authorization(user, password.as_deref());
                    }
                    if let Some(token) = &self.bearer_token {
                        builder.set_token_authorization(token);
                    }
                    let settings = builder.build().map_err(|e| RegistryFailure::Unreachable(e.to_string()))?;
                    call(&settings).map_err(|e| {
                        let message = match &e.cause {
                            Some(cause) => format!("{}: {cause}", e.error),
                            None => e.error.clone(),
                        };
                        if e.retriable {
                            RegistryFailure::Unreachable(message)
                        } else {
                            RegistryFailure::Refused(message)
                        }
                    })
                })
                .join()
                .unwrap_or_else(|_| Err(RegistryFailure::Unreachable("the registry call panicked".into())))
        })
    }

    fn error(&self, message: String) -> ConnectorError {
        ConnectorError::Registry { url: self.url.clone(), message }
    }
}

/// Why a registry call failed.
#[derive(Debug, Clone)]
enum RegistryFailure {
    /// Network or server trouble: worth retrying.
    Unreachable(String),
    /// The registry answered no (an unknown id, an incompatible schema).
    Refused(String),
}

/// A writer schema fetched from the registry, with each column's field in it.
struct WriterSchema {
    avro: Schema,
    /// Per output column: the position of its field in the writer schema's record (a decoded
    /// record lists its fields in that order), if the schema has the column.
    fields: Vec<Option<usize>>,
    /// Per output column: the decimal scale of its field, if it is a decimal.
    scales: Vec<Option<usize>>,
}

/// Decodes `avro-confluent` payloads into rows of a schema.
pub struct AvroConfluentDecoder {
    schema: SchemaRef,
    registry: RegistryOptions,
    /// By schema id: the writer schema, or why the registry refused it.
    writers: HashMap<u32, Result<Arc<WriterSchema>, String>>,
}

impl AvroConfluentDecoder {
    /// A decoder producing `schema`, reading writer schemas from `registry`.
    pub fn new(schema: SchemaRef, registry: RegistryOptions) -> Self {
        AvroConfluentDecoder { schema, registry, writers: HashMap::new() }
    }

    /// The writer schema `id`; `Ok(Err(why))` when the registry refused it.
    fn writer(&mut self, id: u32) -> Result<Result<Arc<WriterSchema>, String>, ConnectorError> {
        if let Some(w) = self.writers.get(&id) {
            return Ok(w.clone());
        }
        let fetched = match self.registry.call(move |settings| get_schema_by_id(id, settings)) {
            Ok(registered) => match Schema::parse_str(&registered.schema) {
                Ok(avro) => Ok(Arc::new(self.bind(avro))),
                Err(e) => Err(format!("schema id {id} is not an Avro schema: {e}")),
            },
            Err(RegistryFailure::Refused(message)) => Err(format!("schema id {id}: {message}")),
            Err(RegistryFailure::Unreachable(message)) => {
                return Err(self.registry.error(format!("fetching schema id {id}: {message}")))
            }
        };
        self.writers.insert(id, fetched.clone());
        Ok(fetched)
    }

    fn bind(&self, avro: Schema) -> WriterSchema {
        let record_fields: Vec<(String, Schema)> = match &avro {
            Schema::Record(r) => r.fields.iter().map(|f| (f.name.clone(), f.schema.clone())).collect(),
            _ => Vec::new(),
        };
        let mut fields = Vec::new();
        let mut scales = Vec::new();
        for column in self.schema.fields() {
            let found = record_fields.iter().position(|(name, _)| name.eq_ignore_ascii_case(column.name()));
            fields.push(found);
            scales.push(found.and_then(|i| decimal_scale(&record_fields[i].1)));
        }
        WriterSchema { avro, fields, scales }
    }
}

/// The decimal scale of a field's schema (through a union with null).
fn decimal_scale(schema: &Schema) -> Option<usize> {
    match schema {
        Schema::Decimal(d) => Some(d.scale),
        Schema::Union(u) => u.variants().iter().find_map(decimal_scale),
        _ => None,
    }
}

/// One value read from a record, before it is put in its column.
enum Cell {
    Null,
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    Bytes(Vec<u8>),
    /// An unscaled decimal and its scale.
    Decimal(i128, usize),
    /// A record, an array, a map, as read.
    Record(Vec<(String, Value)>),
    Array(Vec<Value>),
    Map(HashMap<String, Value>),
    /// Checked for a ROW, ARRAY or MAP column: the fields', elements' or entries' cells.
    Row(Vec<Cell>),
    Items(Vec<Cell>),
    Entries(Vec<(String, Cell)>),
}

/// Why a value does not fit its column: the path of the nested field it is in (empty at the
/// top), and the reason.
struct Misfit {
    path: Vec<String>,
    message: String,
}

impl From<String> for Misfit {
    fn from(message: String) -> Self {
        Misfit { path: Vec::new(), message }
    }
}

impl From<&str> for Misfit {
    fn from(message: &str) -> Self {
        message.to_string().into()
    }
}

impl Misfit {
    /// This misfit, inside field `name`.
    fn inside(mut self, name: &str) -> Self {
        self.path.insert(0, name.to_string());
        self
    }
}

fn cell(value: Value, scale: Option<usize>) -> Result<Cell, String> {
    Ok(match value {
        Value::Null => Cell::Null,
        Value::Union(_, inner) => cell(*inner, scale)?,
        Value::Boolean(b) => Cell::Bool(b),
        Value::Int(i) | Value::Date(i) | Value::TimeMillis(i) => Cell::Int(i64::from(i)),
        Value::Long(i) | Value::TimestampMillis(i) | Value::LocalTimestampMillis(i) => Cell::Int(i),
        Value::TimestampMicros(i) | Value::LocalTimestampMicros(i) | Value::TimeMicros(i) => Cell::Int(i.div_euclid(1_000)),
        Value::TimestampNanos(i) | Value::LocalTimestampNanos(i) => Cell::Int(i.div_euclid(1_000_000)),
        Value::Float(f) => Cell::Float(f64::from(f)),
        Value::Double(f) => Cell::Float(f),
        Value::String(s) | Value::Enum(_, s) => Cell::Str(s),
        Value::Uuid(u) => Cell::Str(u.to_string()),
        Value::Bytes(b) | Value::Fixed(_, b) => Cell::Bytes(b),
        Value::Record(fields) => Cell::Record(fields),
        Value::Array(items) => Cell::Array(items),
        Value::Map(entries) => Cell::Map(entries),
        Value::Decimal(_) if scale.is_none() => {
            return Err("a decimal inside a record, array or map is not read (its scale is not carried)".into())
        }
        Value::Decimal(d) => {
            let bytes = <Vec<u8>>::try_from(&d).map_err(|e| format!("decimal: {e}"))?;
            if bytes.len() > 16 {
                return Err(format!("a decimal of {} bytes does not fit DECIMAL(38)", bytes.len()));
            }
            let fill = if bytes.first().is_some_and(|b| b & 0x80 != 0) { 0xFF } else { 0 };
            let mut wide = [fill; 16];
            wide[16 - bytes.len()..].copy_from_slice(&bytes);
            Cell::Decimal(i128::from_be_bytes(wide), scale.unwrap_or(0))
        }
        other => return Err(format!("an Avro {} value has no column type", value_kind(&other))),
    })
}

fn value_kind(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "array",
        Value::Map(_) => "map",
        Value::Record(_) => "record",
        Value::Duration(_) => "duration",
        Value::BigDecimal(_) => "big-decimal",
        _ => "scalar",
    }
}

/// Column builders of the output schema.
enum Column {
    I64(Int64Builder),
    I32(Int32Builder),
    I16(Int16Builder),
    I8(Int8Builder),
    F64(Float64Builder),
    F32(Float32Builder),
    Bool(BooleanBuilder),
    Str(StringBuilder),
    Bin(BinaryBuilder),
    Dec(Decimal128Builder, u8, i8),
    Date(Date32Builder),
    Ts(TimestampMillisecondBuilder, Option<Arc<str>>),
    /// A ROW: its fields (name, column), nulls, and its Arrow fields.
    Struct(Vec<(String, Column)>, NullBufferBuilder, Fields),
    /// An ARRAY: the elements' column, offsets, nulls, the element field.
    List(Box<Column>, Vec<i32>, NullBufferBuilder, FieldRef),
    /// A MAP with STRING keys: keys, values, offsets, nulls, the entries field.
    Map(StringBuilder, Box<Column>, Vec<i32>, NullBufferBuilder, FieldRef),
}

impl Column {
    fn new(t: &DataType) -> Result<Self, ConnectorError> {
        Ok(match t {
            DataType::Int64 => Column::I64(Int64Builder::new()),
            DataType::Int32 => Column::I32(Int32Builder::new()),
            DataType::Int16 => Column::I16(Int16Builder::new()),
            DataType::Int8 => Column::I8(Int8Builder::new()),
            DataType::Float64 => Column::F64(Float64Builder::new()),
            DataType::Float32 => Column::F32(Float32Builder::new()),
            DataType::Boolean => Column::Bool(BooleanBuilder::new()),
            DataType::Utf8 => Column::Str(StringBuilder::new()),
            DataType::Binary => Column::Bin(BinaryBuilder::new()),
            DataType::Decimal128(p, s) => Column::Dec(Decimal128Builder::new(), *p, *s),
            DataType::Date32 => Column::Date(Date32Builder::new()),
            DataType::Timestamp(TimeUnit::Millisecond, tz) => Column::Ts(TimestampMillisecondBuilder::new(), tz.clone()),
            DataType::Struct(fields) => Column::Struct(
                fields.iter().map(|f| Ok((f.name().clone(), Column::new(f.data_type())?))).collect::<Result<_, ConnectorError>>()?,
                NullBufferBuilder::new(0),
                fields.clone(),
            ),
            DataType::List(item) => {
                Column::List(Box::new(Column::new(item.data_type())?), vec![0], NullBufferBuilder::new(0), Arc::clone(item))
            }
            DataType::Map(entries, _) => match entries.data_type() {
                DataType::Struct(kv) if kv.len() == 2 && *kv[0].data_type() == DataType::Utf8 => Column::Map(
                    StringBuilder::new(),
                    Box::new(Column::new(kv[1].data_type())?),
                    vec![0],
                    NullBufferBuilder::new(0),
                    Arc::clone(entries),
                ),
                _ => {
                    return Err(ConnectorError::Unsupported {
                        feature: format!("a column of type {t} in avro-confluent (Avro map keys are strings)"),
                    })
                }
            },
            other => {
                return Err(ConnectorError::Unsupported { feature: format!("a column of type {other} in avro-confluent") })
            }
        })
    }

    /// Checks that `c` fits this column, returning what to append.
    fn check(&self, c: Cell) -> Result<Cell, Misfit> {
        let int = |i: i64, lo: i64, hi: i64, name: &str| {
            if (lo..=hi).contains(&i) {
                Ok(Cell::Int(i))
            } else {
                Err(format!("{i} is out of range for {name}").into())
            }
        };
        match (self, c) {
            (_, Cell::Null) => Ok(Cell::Null),
            (Column::Struct(fields, ..), Cell::Record(mut values)) => {
                let mut row = Vec::with_capacity(fields.len());
                for (name, column) in fields {
                    let value = values
                        .iter_mut()
                        .find(|(n, _)| n.eq_ignore_ascii_case(name))
                        .map_or(Value::Null, |(_, v)| std::mem::replace(v, Value::Null));
                    let checked = cell(value, None).map_err(Misfit::from).and_then(|c| column.check(c));
                    row.push(checked.map_err(|m| m.inside(name))?);
                }
                Ok(Cell::Row(row))
            }
            (Column::List(item, ..), Cell::Array(values)) => Ok(Cell::Items(
                values.into_iter().map(|v| cell(v, None).map_err(Misfit::from).and_then(|c| item.check(c))).collect::<Result<_, _>>()?,
            )),
            (Column::Map(_, value, ..), Cell::Map(entries)) => {
                let mut checked: Vec<(String, Cell)> = Vec::with_capacity(entries.len());
                for (k, v) in entries {
                    let c = cell(v, None).map_err(Misfit::from).and_then(|c| value.check(c)).map_err(|m| m.inside(&k))?;
                    checked.push((k, c));
                }
                // Avro maps are unordered; entries are kept in key order, so equal maps are equal rows.
                checked.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(Cell::Entries(checked))
            }
            (Column::Struct(..), _) => Err("a value that is not a record where the column is a ROW".into()),
            (Column::List(..), _) => Err("a value that is not an array where the column is an ARRAY".into()),
            (Column::Map(..), _) => Err("a value that is not a map where the column is a MAP".into()),
            (_, Cell::Record(_)) => Err("a record where the column is not a ROW".into()),
            (_, Cell::Array(_)) => Err("an array where the column is not an ARRAY".into()),
            (_, Cell::Map(_)) => Err("a map where the column is not a MAP".into()),
            (_, Cell::Row(_) | Cell::Items(_) | Cell::Entries(_)) => Err("a nested value checked twice".into()),
            (Column::I64(_) | Column::Ts(..), Cell::Int(i)) => Ok(Cell::Int(i)),
            (Column::I32(_) | Column::Date(_), Cell::Int(i)) => int(i, i32::MIN.into(), i32::MAX.into(), "INT"),
            (Column::I16(_), Cell::Int(i)) => int(i, i16::MIN.into(), i16::MAX.into(), "SMALLINT"),
            (Column::I8(_), Cell::Int(i)) => int(i, i8::MIN.into(), i8::MAX.into(), "TINYINT"),
            (Column::F64(_) | Column::F32(_), Cell::Int(i)) => Ok(Cell::Float(i as f64)),
            (Column::F64(_) | Column::F32(_), Cell::Float(f)) => Ok(Cell::Float(f)),
            (Column::Bool(_), Cell::Bool(b)) => Ok(Cell::Bool(b)),
            (Column::Str(_), Cell::Str(s)) => Ok(Cell::Str(s)),
            (Column::Bin(_), Cell::Bytes(b)) => Ok(Cell::Bytes(b)),
            (Column::Bin(_), Cell::Str(s)) => Ok(Cell::Bytes(s.into_bytes())),
            (Column::Dec(_, p, s), cell) => {
                let s = *s as i32;
                let unscaled = match cell {
                    Cell::Decimal(v, from) => rescale(v, from as i32, s),
                    Cell::Int(i) => rescale(i128::from(i), 0, s),
                    Cell::Float(f) => {
                        let scaled = (f * 10f64.powi(s)).round();
                        (scaled.is_finite() && scaled.abs() < 1e38).then_some(scaled as i128)
                    }
                    _ => None,
                };
                match unscaled {
                    Some(v) if v.unsigned_abs() < 10u128.pow(u32::from(*p)) => Ok(Cell::Decimal(v, s as usize)),
                    _ => Err(format!("the value does not fit DECIMAL({p}, {s})").into()),
                }
            }
            (_, Cell::Int(_)) => Err("a number where the column is not numeric".into()),
            (_, Cell::Float(_)) => Err("a floating-point number where the column is not DOUBLE, FLOAT or DECIMAL".into()),
            (_, Cell::Bool(_)) => Err("a boolean where the column is not BOOLEAN".into()),
            (_, Cell::Str(_)) => Err("a string where the column is not STRING or BYTES".into()),
            (_, Cell::Bytes(_)) => Err("bytes where the column is not BYTES".into()),
            (_, Cell::Decimal(..)) => Err("a decimal where the column is not DECIMAL".into()),
        }
    }

    /// Appends a value [`Column::check`] accepted.
    fn append(&mut self, c: Cell) {
        match (self, c) {
            (Column::I64(b), Cell::Int(i)) => b.append_value(i),
            (Column::I32(b), Cell::Int(i)) => b.append_value(i as i32),
            (Column::I16(b), Cell::Int(i)) => b.append_value(i as i16),
            (Column::I8(b), Cell::Int(i)) => b.append_value(i as i8),
            (Column::F64(b), Cell::Float(f)) => b.append_value(f),
            (Column::F32(b), Cell::Float(f)) => b.append_value(f as f32),
            (Column::Bool(b), Cell::Bool(v)) => b.append_value(v),
            (Column::Str(b), Cell::Str(s)) => b.append_value(s),
            (Column::Bin(b), Cell::Bytes(v)) => b.append_value(v),
            (Column::Dec(b, ..), Cell::Decimal(v, _)) => b.append_value(v),
            (Column::Date(b), Cell::Int(i)) => b.append_value(i as i32),
            (Column::Ts(b, _), Cell::Int(i)) => b.append_value(i),
            (Column::Struct(fields, nulls, _), Cell::Row(cells)) => {
                nulls.append_non_null();
                for ((_, column), c) in fields.iter_mut().zip(cells) {
                    column.append(c);
                }
            }
            (Column::List(item, offsets, nulls, _), Cell::Items(cells)) => {
                nulls.append_non_null();
                let end = offsets.last().copied().unwrap_or(0) + cells.len() as i32;
                for c in cells {
                    item.append(c);
                }
                offsets.push(end);
            }
            (Column::Map(keys, values, offsets, nulls, _), Cell::Entries(entries)) => {
                nulls.append_non_null();
                let end = offsets.last().copied().unwrap_or(0) + entries.len() as i32;
                for (k, c) in entries {
                    keys.append_value(k);
                    values.append(c);
                }
                offsets.push(end);
            }
            (column, _) => column.append_null(),
        }
    }

    fn append_null(&mut self) {
        match self {
            Column::I64(b) => b.append_null(),
            Column::I32(b) => b.append_null(),
            Column::I16(b) => b.append_null(),
            Column::I8(b) => b.append_null(),
            Column::F64(b) => b.append_null(),
            Column::F32(b) => b.append_null(),
            Column::Bool(b) => b.append_null(),
            Column::Str(b) => b.append_null(),
            Column::Bin(b) => b.append_null(),
            Column::Dec(b, ..) => b.append_null(),
            Column::Date(b) => b.append_null(),
            Column::Ts(b, _) => b.append_null(),
            Column::Struct(fields, nulls, _) => {
                nulls.append_null();
                for (_, column) in fields {
                    column.append_null();
                }
            }
            Column::List(_, offsets, nulls, _) | Column::Map(_, _, offsets, nulls, _) => {
                nulls.append_null();
                offsets.push(offsets.last().copied().unwrap_or(0));
            }
        }
    }

    fn finish(self) -> Result<ArrayRef, ConnectorError> {
        let internal = |e: arrow::error::ArrowError| ConnectorError::Internal { message: format!("avro-confluent: {e}") };
        Ok(match self {
            Column::I64(mut b) => Arc::new(b.finish()),
            Column::I32(mut b) => Arc::new(b.finish()),
            Column::I16(mut b) => Arc::new(b.finish()),
            Column::I8(mut b) => Arc::new(b.finish()),
            Column::F64(mut b) => Arc::new(b.finish()),
            Column::F32(mut b) => Arc::new(b.finish()),
            Column::Bool(mut b) => Arc::new(b.finish()),
            Column::Str(mut b) => Arc::new(b.finish()),
            Column::Bin(mut b) => Arc::new(b.finish()),
            Column::Dec(mut b, p, s) => Arc::new(b.finish().with_precision_and_scale(p, s).map_err(internal)?),
            Column::Date(mut b) => Arc::new(b.finish()),
            Column::Ts(mut b, tz) => Arc::new(b.finish().with_timezone_opt(tz)),
            Column::Struct(fields, mut nulls, names) => {
                let children = fields.into_iter().map(|(_, c)| c.finish()).collect::<Result<Vec<_>, _>>()?;
                Arc::new(StructArray::try_new(names, children, nulls.finish()).map_err(internal)?)
            }
            Column::List(item, offsets, mut nulls, field) => Arc::new(
                ListArray::try_new(field, OffsetBuffer::new(offsets.into()), item.finish()?, nulls.finish()).map_err(internal)?,
            ),
            Column::Map(mut keys, values, offsets, mut nulls, entries) => {
                let DataType::Struct(kv) = entries.data_type() else { unreachable!("checked by Column::new") };
                let pairs = StructArray::try_new(kv.clone(), vec![Arc::new(keys.finish()), values.finish()?], None).map_err(internal)?;
                Arc::new(
                    MapArray::try_new(entries, OffsetBuffer::new(offsets.into()), pairs, nulls.finish(), false).map_err(internal)?,
                )
            }
        })
    }
}

/// `v` at scale `from` as an unscaled value at scale `to`; `None` when digits would be lost
/// or it overflows.
fn rescale(v: i128, from: i32, to: i32) -> Option<i128> {
    if to >= from {
        v.checked_mul(10i128.checked_pow((to - from) as u32)?)
    } else {
        let d = 10i128.checked_pow((from - to) as u32)?;
        (v % d == 0).then_some(v / d)
    }
}

/// Splits a Confluent wire-format payload into its schema id and datum.
fn wire(payload: &[u8]) -> Result<(u32, &[u8]), String> {
    match payload {
        [0, a, b, c, d, rest @ ..] => Ok((u32::from_be_bytes([*a, *b, *c, *d]), rest)),
        [magic, ..] if payload.len() >= 5 => {
            Err(format!("not the Confluent wire format: magic byte {magic}, expected 0"))
        }
        _ => Err(format!("not the Confluent wire format: {} bytes, fewer than the 5-byte header", payload.len())),
    }
}

impl Decoder for AvroConfluentDecoder {
    fn decode(&mut self, records: &[&[u8]]) -> Result<Decoded, ConnectorError> {
        // The writer schemas of this batch, fetched first, then one reader per schema.
        let split: Vec<Result<(u32, &[u8]), String>> = records.iter().map(|p| wire(p)).collect();
        let mut writers: HashMap<u32, Result<Arc<WriterSchema>, String>> = HashMap::new();
        for (id, _) in split.iter().flatten() {
            if !writers.contains_key(id) {
                let writer = self.writer(*id)?;
                writers.insert(*id, writer);
            }
        }
        let mut readers = HashMap::new();
        for (id, writer) in &writers {
            if let Ok(w) = writer {
                let reader = apache_avro::reader::datum::GenericDatumReader::builder(&w.avro)
                    .build()
                    .map_err(|e| ConnectorError::Internal { message: format!("avro-confluent reader: {e}") })?;
                readers.insert(*id, (reader, w));
            }
        }
        let mut columns: Vec<Column> =
            self.schema.fields().iter().map(|f| Column::new(f.data_type())).collect::<Result<_, _>>()?;
        let mut sources = Vec::with_capacity(records.len());
        let mut errors = Vec::new();
        let mut row: Vec<Cell> = Vec::with_capacity(columns.len());
        for (index, split) in split.into_iter().enumerate() {
            let read = split.and_then(|(id, mut datum)| {
                let (reader, writer) = match readers.get(&id) {
                    Some(r) => r,
                    None => return Err(writers[&id].as_ref().err().cloned().unwrap_or_default()),
                };
                let value = reader.read_value(&mut datum).map_err(|e| format!("schema id {id}: {e}"))?;
                let Value::Record(mut fields) = value else {
                    return Err(format!("schema id {id} is not a record schema"));
                };
                row.clear();
                for (c, column) in columns.iter().enumerate() {
                    let value = writer.fields[c]
                        .and_then(|i| fields.get_mut(i))
                        .map(|(_, v)| std::mem::replace(v, Value::Null))
                        .unwrap_or(Value::Null);
                    let checked = cell(value, writer.scales[c]).map_err(Misfit::from).and_then(|v| column.check(v));
                    row.push(checked.map_err(|m| {
                        let path: String = m.path.iter().map(|p| format!(".{p}")).collect();
                        format!("column {}{path}: {}", self.schema.field(c).name(), m.message)
                    })?);
                }
                Ok(())
            });
            match read {
                Ok(()) => {
                    for (column, v) in columns.iter_mut().zip(row.drain(..)) {
                        column.append(v);
                    }
                    sources.push(index);
                }
                Err(message) => errors.push(DecodeError { index, message: format!("avro-confluent: {message}") }),
            }
        }
        let arrays = columns.into_iter().map(Column::finish).collect::<Result<Vec<_>, _>>()?;
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), arrays)
            .map_err(|e| ConnectorError::Internal { message: format!("avro-confluent: {e}") })?;
        Ok(Decoded { batch, ops: None, sources, errors })
    }
}

/// The Avro schema (JSON) of rows of `schema` (module docs, "Writing").
pub fn avro_schema_of(schema: &SchemaRef) -> Result<String, ConnectorError> {
    let fields = record_fields(schema.fields(), "record")?;
    Ok(serde_json::json!({
        "type": "record",
        "name": "record",
        "namespace": "org.apache.flink.avro.generated",
        "fields": fields,
    })
    .to_string())
}

/// The Avro fields of a record of `fields`; `path` names the record (nested records are named
/// after it, as Avro names must be unique in a schema).
fn record_fields(fields: &Fields, path: &str) -> Result<Vec<serde_json::Value>, ConnectorError> {
    let mut out = Vec::new();
    for field in fields {
        let t = avro_type(field.data_type(), &format!("{path}_{}", field.name()), field.name())?;
        out.push(if field.is_nullable() {
            serde_json::json!({"name": field.name(), "type": ["null", t], "default": null})
        } else {
            serde_json::json!({"name": field.name(), "type": t})
        });
    }
    Ok(out)
}

/// The Avro type of values of `t`; `path` names a record type, `name` the column in errors.
fn avro_type(t: &DataType, path: &str, name: &str) -> Result<serde_json::Value, ConnectorError> {
    let nullable = |t: serde_json::Value, null: bool| if null { serde_json::json!(["null", t]) } else { t };
    Ok(match t {
            DataType::Int64 => serde_json::json!("long"),
            DataType::Int32 | DataType::Int16 | DataType::Int8 => serde_json::json!("int"),
            DataType::Float64 => serde_json::json!("double"),
            DataType::Float32 => serde_json::json!("float"),
            DataType::Boolean => serde_json::json!("boolean"),
            DataType::Utf8 => serde_json::json!("string"),
            DataType::Binary => serde_json::json!("bytes"),
            DataType::Decimal128(p, s) => {
                serde_json::json!({"type": "bytes", "logicalType": "decimal", "precision": p, "scale": s})
            }
            DataType::Date32 => serde_json::json!({"type": "int", "logicalType": "date"}),
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                serde_json::json!({"type": "long", "logicalType": "timestamp-millis"})
            }
            DataType::Struct(fields) => {
                serde_json::json!({"type": "record", "name": path, "fields": record_fields(fields, path)?})
            }
            DataType::List(item) => serde_json::json!({
                "type": "array",
                "items": nullable(avro_type(item.data_type(), path, name)?, item.is_nullable()),
            }),
            DataType::Map(entries, _) => match entries.data_type() {
                DataType::Struct(kv) if kv.len() == 2 && *kv[0].data_type() == DataType::Utf8 => serde_json::json!({
                    "type": "map",
                    "values": nullable(avro_type(kv[1].data_type(), path, name)?, kv[1].is_nullable()),
                }),
                other => {
                    return Err(ConnectorError::Unsupported {
                        feature: format!("column '{name}' of type MAP with {other} entries in avro-confluent (Avro map keys are strings)"),
                    })
                }
            },
            other => {
                return Err(ConnectorError::Unsupported {
                    feature: format!("column '{name}' of type {other} in avro-confluent"),
                })
            }
    })
}

/// Encodes rows in the Confluent wire format under a registered schema.
pub struct AvroConfluentEncoder {
    schema: SchemaRef,
    registry: RegistryOptions,
    avro_json: String,
    avro: Schema,
    /// The registry id of `avro`, once registered.
    id: Option<u32>,
}

impl AvroConfluentEncoder {
    /// An encoder of rows of `schema`, registering their Avro schema with `registry` at the
    /// first write.
    ///
    /// # Errors
    /// [`ConnectorError::Unsupported`] for a column type without an Avro form;
    /// [`ConnectorError::MissingOption`] without a subject (no `'topic'` and no
    /// `avro-confluent.subject`).
    pub fn try_new(schema: SchemaRef, registry: RegistryOptions) -> Result<Self, ConnectorError> {
        if registry.subject.is_none() {
            return Err(ConnectorError::MissingOption {
                connector: "avro-confluent".into(),
                option: "avro-confluent.subject (or 'topic')".into(),
            });
        }
        let avro_json = avro_schema_of(&schema)?;
        let avro = Schema::parse_str(&avro_json)
            .map_err(|e| ConnectorError::Internal { message: format!("avro-confluent: derived schema: {e}") })?;
        Ok(AvroConfluentEncoder { schema, registry, avro_json, avro, id: None })
    }

    fn id(&mut self) -> Result<u32, ConnectorError> {
        if let Some(id) = self.id {
            return Ok(id);
        }
        let subject = self.registry.subject.clone().unwrap_or_default();
        let supplied = SuppliedSchema::new(None, SchemaType::Avro, self.avro_json.clone());
        let registered = self
            .registry
            .call(|settings| post_schema(settings, subject.clone(), supplied))
            .map_err(|e| match e {
                RegistryFailure::Unreachable(m) | RegistryFailure::Refused(m) => {
                    self.registry.error(format!("registering the schema of subject '{subject}': {m}"))
                }
            })?;
        self.id = Some(registered.id);
        Ok(registered.id)
    }
}

fn avro_value(column: &ArrayRef, row: usize) -> Value {
    if column.is_null(row) {
        return Value::Null;
    }
    match column.data_type() {
        DataType::Int64 => Value::Long(column.as_primitive::<Int64Type>().value(row)),
        DataType::Int32 => Value::Int(column.as_primitive::<Int32Type>().value(row)),
        DataType::Int16 => Value::Int(column.as_primitive::<Int16Type>().value(row).into()),
        DataType::Int8 => Value::Int(column.as_primitive::<Int8Type>().value(row).into()),
        DataType::Float64 => Value::Double(column.as_primitive::<Float64Type>().value(row)),
        DataType::Float32 => Value::Float(column.as_primitive::<Float32Type>().value(row)),
        DataType::Boolean => Value::Boolean(column.as_boolean().value(row)),
        DataType::Utf8 => Value::String(column.as_string::<i32>().value(row).to_string()),
        DataType::Binary => Value::Bytes(column.as_binary::<i32>().value(row).to_vec()),
        DataType::Decimal128(..) => {
            let v = column.as_primitive::<Decimal128Type>().value(row);
            // The shortest big-endian two's complement form, as Java's BigInteger writes it.
            let bytes = v.to_be_bytes();
            let sign = if v < 0 { 0xFF } else { 0 };
            let mut start = 0;
            while start < 15 && bytes[start] == sign && (bytes[start + 1] & 0x80) == (sign & 0x80) {
                start += 1;
            }
            Value::Decimal(apache_avro::Decimal::from(&bytes[start..]))
        }
        DataType::Date32 => Value::Date(column.as_primitive::<Date32Type>().value(row)),
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            Value::TimestampMillis(column.as_primitive::<TimestampMillisecondType>().value(row))
        }
        DataType::Struct(fields) => {
            let s = column.as_struct();
            Value::Record(
                fields
                    .iter()
                    .zip(s.columns())
                    .map(|(f, c)| (f.name().clone(), union_for(avro_value(c, row), f.is_nullable())))
                    .collect(),
            )
        }
        DataType::List(item) => {
            let l = column.as_list::<i32>();
            let values = l.value(row);
            Value::Array((0..values.len()).map(|i| union_for(avro_value(&values, i), item.is_nullable())).collect())
        }
        DataType::Map(entries, _) => {
            let m = column.as_map();
            let range = m.value_offsets()[row] as usize..m.value_offsets()[row + 1] as usize;
            let nullable = matches!(entries.data_type(), DataType::Struct(kv) if kv.len() == 2 && kv[1].is_nullable());
            let keys = m.keys().as_string::<i32>();
            Value::Map(range.map(|i| (keys.value(i).to_string(), union_for(avro_value(m.values(), i), nullable))).collect())
        }
        _ => Value::Null, // refused by `avro_schema_of`
    }
}

/// `v` as the value of a field, element or map value of that nullability: a union with `null`
/// when nullable (see [`avro_schema_of`]).
fn union_for(v: Value, nullable: bool) -> Value {
    match (nullable, v) {
        (false, v) => v,
        (true, Value::Null) => Value::Union(0, Box::new(Value::Null)),
        (true, v) => Value::Union(1, Box::new(v)),
    }
}

impl Encoder for AvroConfluentEncoder {
    fn encode(&mut self, batch: &RecordBatch, _ops: Option<&[Op]>) -> Result<Vec<Option<Vec<u8>>>, ConnectorError> {
        let id = self.id()?;
        let writer = apache_avro::writer::datum::GenericDatumWriter::builder(&self.avro)
            .build()
            .map_err(|e| ConnectorError::Internal { message: format!("avro-confluent writer: {e}") })?;
        let mut out = Vec::with_capacity(batch.num_rows());
        for row in 0..batch.num_rows() {
            let fields = self
                .schema
                .fields()
                .iter()
                .zip(batch.columns())
                .map(|(f, column)| (f.name().clone(), union_for(avro_value(column, row), f.is_nullable())))
                .collect();
            let datum = writer
                .write_value_to_vec(Value::Record(fields))
                .map_err(|e| ConnectorError::Encode { message: format!("avro-confluent: {e}") })?;
            let mut payload = Vec::with_capacity(5 + datum.len());
            payload.push(0);
            payload.extend_from_slice(&id.to_be_bytes());
            payload.extend_from_slice(&datum);
            out.push(Some(payload));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod nested_tests {
    use arrow::array::{Int32Builder, ListBuilder, MapBuilder, StructBuilder};
    use arrow::datatypes::{Field, Schema as ArrowSchema};

    use super::*;

    fn registry() -> RegistryOptions {
        RegistryOptions { url: "http://registry.invalid".into(), subject: Some("t-value".into()), basic_auth: None, bearer_token: None }
    }

    /// A decoder whose writer schema 1 is `avro` (no registry call).
    fn decoder(schema: &SchemaRef, avro: &str) -> AvroConfluentDecoder {
        let mut d = AvroConfluentDecoder::new(Arc::clone(schema), registry());
        let writer = d.bind(Schema::parse_str(avro).expect("schema"));
        d.writers.insert(1, Ok(Arc::new(writer)));
        d
    }

    fn payloads(avro: &Schema, records: Vec<Value>) -> Vec<Vec<u8>> {
        let writer = apache_avro::writer::datum::GenericDatumWriter::builder(avro).build().expect("writer");
        records
            .into_iter()
            .map(|r| [vec![0, 0, 0, 0, 1], writer.write_value_to_vec(r).expect("datum")].concat())
            .collect()
    }

    /// ROW, ARRAY<ROW> and MAP columns written with the derived schema read back equal.
    #[test]
    fn nested_columns_round_trip() {
        let address = Fields::from(vec![Field::new("city", DataType::Utf8, true), Field::new("zip", DataType::Int32, true)]);
        let mut buyer = StructBuilder::from_fields(address.clone(), 2);
        for (city, zip, valid) in [(Some("Oslo"), Some(150), true), (None, None, false)] {
            buyer.field_builder::<StringBuilder>(0).expect("city").append_option(city);
            buyer.field_builder::<Int32Builder>(1).expect("zip").append_option(zip);
            buyer.append(valid);
        }
        let mut items = ListBuilder::new(Int32Builder::new());
        items.values().append_value(2);
        items.values().append_null();
        items.append(true);
        items.append(true);
        let mut tags = MapBuilder::new(None, StringBuilder::new(), Int32Builder::new());
        for (k, v) in [("a", Some(1)), ("b", None)] {
            tags.keys().append_value(k);
            tags.values().append_option(v);
        }
        tags.append(true).expect("map");
        tags.append(false).expect("map");
        let columns: Vec<ArrayRef> = vec![Arc::new(buyer.finish()), Arc::new(items.finish()), Arc::new(tags.finish())];
        let schema = Arc::new(ArrowSchema::new(
            [("buyer", &columns[0]), ("items", &columns[1]), ("tags", &columns[2])]
                .map(|(n, c)| Field::new(n, c.data_type().clone(), true))
                .to_vec(),
        ));
        let batch = RecordBatch::try_new(Arc::clone(&schema), columns).expect("batch");
        let avro_json = avro_schema_of(&schema).expect("schema");
        assert!(avro_json.contains(r#""name":"record_buyer""#), "{avro_json}");
        let avro = Schema::parse_str(&avro_json).expect("derived schema parses");
        let records = (0..2)
            .map(|row| {
                Value::Record(
                    schema
                        .fields()
                        .iter()
                        .zip(batch.columns())
                        .map(|(f, c)| (f.name().clone(), union_for(avro_value(c, row), true)))
                        .collect(),
                )
            })
            .collect();
        let payloads = payloads(&avro, records);
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let decoded = decoder(&schema, &avro_json).decode(&refs).expect("decode");
        assert!(decoded.errors.is_empty(), "{:?}", decoded.errors.iter().map(|e| &e.message).collect::<Vec<_>>());
        assert_eq!(decoded.batch, batch);
    }

    /// A nested value that does not fit its field makes the record a dead letter naming the
    /// field's path; the other records are read.
    #[test]
    fn a_nested_misfit_names_its_path() {
        let address = Fields::from(vec![Field::new("zip", DataType::Int32, true)]);
        let buyer = Fields::from(vec![Field::new("address", DataType::Struct(address), true)]);
        let schema = Arc::new(ArrowSchema::new(vec![Field::new("buyer", DataType::Struct(buyer), true)]));
        let avro_json = r#"{"type": "record", "name": "r", "fields": [{"name": "buyer", "type": {"type": "record", "name": "b",
            "fields": [{"name": "address", "type": {"type": "record", "name": "a", "fields": [{"name": "zip", "type": "long"}]}}]}}]}"#;
        let avro = Schema::parse_str(avro_json).expect("schema");
        let record = |zip: i64| {
            Value::Record(vec![(
                "buyer".into(),
                Value::Record(vec![("address".into(), Value::Record(vec![("zip".into(), Value::Long(zip))]))]),
            )])
        };
        let payloads = payloads(&avro, vec![record(7), record(1 << 40)]);
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let decoded = decoder(&schema, avro_json).decode(&refs).expect("decode");
        assert_eq!(decoded.sources, vec![0]);
        assert_eq!(decoded.errors.len(), 1);
        assert_eq!(decoded.errors[0].message, "avro-confluent: column buyer.address.zip: 1099511627776 is out of range for INT");
    }
}
