//! A table's format options (Flink's names) and the decoder and encoder they select.
//!
//! The format is `'format'` (or, for `upsert-kafka`, `'key.format'` / `'value.format'`); its own
//! options are `'<format>.<name>'` behind the same prefix (Flink: `'value.json.ignore-parse-errors'`).
//!
//! | format | options (default) |
//! | --- | --- |
//! | `json` | `json.timestamp-format.standard` (`SQL` \| `ISO-8601`), `json.ignore-parse-errors` (`false`), `json.encode.ignore-null-fields` (`false`), `json.fail-on-missing-field` (`false` only) |
//! | `csv` | `csv.field-delimiter` (`,`; one character or `\t`), `csv.quote-character` (`"`), `csv.escape-character` (none), `csv.allow-comments` (`false`, `#` lines), `csv.null-literal` (none), `csv.ignore-parse-errors` (`false`) |
//! | `raw` | `raw.charset` (`UTF-8` only), `raw.endianness` (accepted, unused: only BYTES and STRING columns) |
//! | `debezium-json` | `debezium-json.schema-include` (accepted; both envelopes are read), `debezium-json.ignore-parse-errors`, `debezium-json.timestamp-format.standard`, `debezium-json.encode.ignore-null-fields` |
//!
//! | `avro-confluent` | `avro-confluent.url` (required), `avro-confluent.subject` (`<topic>-value` / `<topic>-key`), `avro-confluent.basic-auth.user-info`, `avro-confluent.bearer-auth.token` (see [`super::avro`]) |

use std::collections::BTreeMap;

use arrow::datatypes::{DataType, SchemaRef};

use super::avro::{AvroConfluentDecoder, AvroConfluentEncoder, RegistryOptions, AVRO_OPTIONS};
use super::change_json::{ChangeLog, ChangeLogDecoder};
use super::codec::{Decoder, Encoder};
use super::csv::{CsvDecoder, CsvEncoder};
use super::debezium::{DebeziumDecoder, DebeziumEncoder};
use super::json::{JsonDecoder, JsonEncoder};
use super::raw::{RawDecoder, RawEncoder};
use crate::{parse_bool, ConnectorError};

/// The formats with a decoder and an encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatKind {
    /// `json`: one JSON object per record.
    Json,
    /// `csv`: one CSV line per record.
    Csv,
    /// `raw`: the payload is the single column's value.
    Raw,
    /// `debezium-json`: Debezium change envelopes.
    DebeziumJson,
    /// `maxwell-json`: Maxwell change events (read only).
    MaxwellJson,
    /// `canal-json`: Canal change events (read only).
    CanalJson,
    /// `avro-confluent`: Avro in the Confluent wire format, schemas in a schema registry.
    AvroConfluent,
}

/// How timestamps are written (Flink `'json.timestamp-format.standard'`); both are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampStandard {
    /// `2024-05-01 12:00:00.123` (and `...123Z` for TIMESTAMP_LTZ).
    #[default]
    Sql,
    /// `2024-05-01T12:00:00.123` (and `...123Z` for TIMESTAMP_LTZ).
    Iso8601,
}

/// The CSV dialect (Flink's `csv.*` options).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvOptions {
    /// `csv.field-delimiter`, one byte.
    pub delimiter: u8,
    /// `csv.quote-character`.
    pub quote: u8,
    /// `csv.escape-character`.
    pub escape: Option<u8>,
    /// `csv.allow-comments`: lines starting with `#` are skipped (they decode to no row).
    pub allow_comments: bool,
    /// `csv.null-literal`: the field text read and written as NULL. Without it an empty field is
    /// NULL for every type except STRING (an empty string), and NULL is written as an empty field.
    pub null_literal: Option<String>,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions { delimiter: b',', quote: b'"', escape: None, allow_comments: false, null_literal: None }
    }
}

/// A validated format configuration: the format and its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatOptions {
    /// Which format.
    pub kind: FormatKind,
    /// `<format>.timestamp-format.standard`: how timestamps are written.
    pub timestamp_standard: TimestampStandard,
    /// `<format>.ignore-parse-errors`: a value of the wrong type becomes NULL instead of failing
    /// its record (records that are not the format at all still fail).
    pub ignore_parse_errors: bool,
    /// `<format>.encode.ignore-null-fields`: NULL columns are left out of written JSON objects.
    pub ignore_null_fields: bool,
    /// The CSV dialect (used by `csv` only).
    pub csv: CsvOptions,
    /// The schema registry (used by `avro-confluent` only).
    pub registry: Option<RegistryOptions>,
}

const JSON_OPTIONS: &[&str] =
    &["timestamp-format.standard", "ignore-parse-errors", "encode.ignore-null-fields", "fail-on-missing-field"];
const DEBEZIUM_OPTIONS: &[&str] =
    &["schema-include", "timestamp-format.standard", "ignore-parse-errors", "encode.ignore-null-fields"];
const CSV_OPTIONS: &[&str] = &[
    "field-delimiter",
    "quote-character",
    "escape-character",
    "allow-comments",
    "null-literal",
    "ignore-parse-errors",
];
const RAW_OPTIONS: &[&str] = &["charset", "endianness"];

/// The formats [`FormatOptions::from_options`] knows, with a decoder or not.
pub const FORMAT_NAMES: &[&str] = &["json", "csv", "raw", "debezium-json", "maxwell-json", "canal-json", "avro-confluent"];
/// The options of the read-only change-log formats (`maxwell-json.*`, `canal-json.*`).
const CHANGE_LOG_OPTIONS: &[&str] = &["ignore-parse-errors"];

/// The own options of format `name` (`'<format>.<option>'`, listed without the `<format>.`),
/// or `None` for a format [`FORMAT_NAMES`] does not hold.
pub fn format_option_names(name: &str) -> Option<&'static [&'static str]> {
    Some(match name {
        "json" => JSON_OPTIONS,
        "csv" => CSV_OPTIONS,
        "raw" => RAW_OPTIONS,
        "debezium-json" => DEBEZIUM_OPTIONS,
        "maxwell-json" | "canal-json" => CHANGE_LOG_OPTIONS,
        "avro-confluent" => AVRO_OPTIONS,
        _ => return None,
    })
}

impl FormatOptions {
    /// Reads `'<prefix>format'` and the format's own options `'<prefix><format>.*'`.
    ///
    /// `prefix` is `""` for `kafka` (`'format'`), `"key."` or `"value."` for `upsert-kafka`.
    ///
    /// # Errors
    /// - [`ConnectorError::MissingOption`] without `'<prefix>format'`;
    /// - [`ConnectorError::InvalidValue`] for an unknown format or a bad option value (naming the
    ///   valid values);
    /// - [`ConnectorError::UnknownOption`] for a `'<prefix><format>.x'` the format does not have;
    /// - [`ConnectorError::MissingOption`] for `avro-confluent` without `avro-confluent.url`.
    pub fn from_options(options: &BTreeMap<String, String>, prefix: &str) -> Result<Self, ConnectorError> {
        let format_key = format!("{prefix}format");
        let connector = options.get("connector").cloned().unwrap_or_else(|| "kafka".into());
        let name = options
            .get(&format_key)
            .ok_or_else(|| ConnectorError::MissingOption { connector: connector.clone(), option: format_key.clone() })?;
        let kind = match name.as_str() {
            "json" => FormatKind::Json,
            "csv" => FormatKind::Csv,
            "raw" => FormatKind::Raw,
            "debezium-json" => FormatKind::DebeziumJson,
            "maxwell-json" => FormatKind::MaxwellJson,
            "canal-json" => FormatKind::CanalJson,
            "avro-confluent" => FormatKind::AvroConfluent,
            other => {
                return Err(ConnectorError::InvalidValue {
                    option: format_key,
                    value: other.into(),
                    valid: FORMAT_NAMES.join(", "),
                })
            }
        };
        let known = format_option_names(name).unwrap_or_default();
        let own = format!("{prefix}{name}.");
        for key in options.keys().filter(|k| k.starts_with(&own)) {
            if !known.contains(&&key[own.len()..]) {
                return Err(ConnectorError::UnknownOption {
                    connector: format!("{connector}' format '{name}"),
                    option: key.clone(),
                    valid: known.iter().map(|k| format!("{own}{k}")).collect::<Vec<_>>().join(", "),
                });
            }
        }
        let get = |option: &str| options.get(&format!("{own}{option}")).map(|v| (format!("{own}{option}"), v.as_str()));
        let flag = |option: &str| -> Result<bool, ConnectorError> {
            match get(option) {
                None => Ok(false),
                Some((key, value)) => parse_bool(&key, value),
            }
        };
        let timestamp_standard = match get("timestamp-format.standard") {
            None => TimestampStandard::Sql,
            Some((_, v)) if v.eq_ignore_ascii_case("SQL") => TimestampStandard::Sql,
            Some((_, v)) if v.eq_ignore_ascii_case("ISO-8601") => TimestampStandard::Iso8601,
            Some((key, v)) => return Err(invalid(&key, v, "SQL, ISO-8601")),
        };
        if let Some((key, v)) = get("fail-on-missing-field") {
            if parse_bool(&key, v)? {
                return Err(ConnectorError::Unsupported {
                    feature: format!("'{key}' = 'true' (a missing field is read as NULL)"),
                });
            }
        }
        if let Some((key, v)) = get("charset") {
            if !v.eq_ignore_ascii_case("UTF-8") {
                return Err(invalid(&key, v, "UTF-8"));
            }
        }
        if let Some((key, v)) = get("endianness") {
            if v != "big-endian" && v != "little-endian" {
                return Err(invalid(&key, v, "big-endian, little-endian"));
            }
        }
        if let Some((key, v)) = get("schema-include") {
            parse_bool(&key, v)?;
        }
        let mut csv = CsvOptions::default();
        if kind == FormatKind::Csv {
            if let Some((key, v)) = get("field-delimiter") {
                csv.delimiter = one_byte(&key, v)?;
            }
            if let Some((key, v)) = get("quote-character") {
                csv.quote = one_byte(&key, v)?;
            }
            if let Some((key, v)) = get("escape-character") {
                csv.escape = Some(one_byte(&key, v)?);
            }
            csv.allow_comments = flag("allow-comments")?;
            csv.null_literal = get("null-literal").map(|(_, v)| v.to_string());
        }
        let registry = match kind {
            FormatKind::AvroConfluent => Some(RegistryOptions::from_options(options, prefix, &own)?),
            _ => None,
        };
        Ok(FormatOptions {
            kind,
            timestamp_standard,
            ignore_parse_errors: flag("ignore-parse-errors")?,
            ignore_null_fields: flag("encode.ignore-null-fields")?,
            csv,
            registry,
        })
    }

    /// The decoder of this format producing `schema`.
    ///
    /// # Errors
    /// [`ConnectorError::Unsupported`] for a column type the format cannot read (naming the
    /// column), or a `raw` schema that is not one BYTES or STRING column.
    pub fn decoder(&self, schema: SchemaRef) -> Result<Box<dyn Decoder>, ConnectorError> {
        check_types(&schema, self.kind)?;
        Ok(match self.kind {
            FormatKind::Json => Box::new(JsonDecoder::try_new(schema, self.ignore_parse_errors)?),
            FormatKind::Csv => Box::new(CsvDecoder::try_new(schema, self.csv.clone(), self.ignore_parse_errors)?),
            FormatKind::Raw => Box::new(RawDecoder::try_new(schema)?),
            FormatKind::DebeziumJson => Box::new(DebeziumDecoder::try_new(schema, self.ignore_parse_errors)?),
            FormatKind::MaxwellJson => {
                Box::new(ChangeLogDecoder::try_new(ChangeLog::Maxwell, schema, self.ignore_parse_errors)?)
            }
            FormatKind::CanalJson => Box::new(ChangeLogDecoder::try_new(ChangeLog::Canal, schema, self.ignore_parse_errors)?),
            FormatKind::AvroConfluent => Box::new(AvroConfluentDecoder::new(schema, self.registry()?)),
        })
    }

    /// The encoder of this format for rows of `schema`.
    ///
    /// # Errors
    /// As [`FormatOptions::decoder`].
    pub fn encoder(&self, schema: SchemaRef) -> Result<Box<dyn Encoder>, ConnectorError> {
        check_types(&schema, self.kind)?;
        Ok(match self.kind {
            FormatKind::Json => Box::new(JsonEncoder::new(schema, self.timestamp_standard, self.ignore_null_fields)),
            FormatKind::Csv => Box::new(CsvEncoder::new(schema, self.csv.clone(), self.timestamp_standard)),
            FormatKind::Raw => Box::new(RawEncoder::try_new(schema)?),
            FormatKind::DebeziumJson => {
                Box::new(DebeziumEncoder::new(schema, self.timestamp_standard, self.ignore_null_fields))
            }
            FormatKind::AvroConfluent => Box::new(AvroConfluentEncoder::try_new(schema, self.registry()?)?),
            FormatKind::MaxwellJson | FormatKind::CanalJson => {
                return Err(ConnectorError::Unsupported {
                    feature: format!("writing {:?} (it is read only; write a changelog as 'debezium-json')", self.kind),
                })
            }
        })
    }

    fn registry(&self) -> Result<RegistryOptions, ConnectorError> {
        self.registry.clone().ok_or_else(|| ConnectorError::Internal { message: "avro-confluent without registry options".into() })
    }
}

/// The decoder selected by `'<prefix>format'` for rows of `schema` (all columns nullable).
///
/// ```
/// use std::collections::BTreeMap;
/// use std::sync::Arc;
/// use arrow::datatypes::{DataType, Field, Schema};
/// let options = BTreeMap::from([("format".to_string(), "json".to_string())]);
/// let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
/// let mut decoder = weir_connectors::format::decoder(&options, "", schema).expect("valid options");
/// let decoded = decoder.decode(&[br#"{"id": 1}"#, b"not json", br#"{"id": 3}"#]).expect("no bug");
/// assert_eq!(decoded.batch.num_rows(), 2);
/// assert_eq!(decoded.sources, vec![0, 2]);
/// assert_eq!(decoded.errors[0].index, 1);
/// ```
///
/// # Errors
/// As [`FormatOptions::from_options`] and [`FormatOptions::decoder`].
pub fn decoder(
    options: &BTreeMap<String, String>,
    prefix: &str,
    schema: SchemaRef,
) -> Result<Box<dyn Decoder>, ConnectorError> {
    FormatOptions::from_options(options, prefix)?.decoder(schema)
}

/// The encoder selected by `'<prefix>format'` for rows of `schema`.
///
/// # Errors
/// As [`FormatOptions::from_options`] and [`FormatOptions::encoder`].
pub fn encoder(
    options: &BTreeMap<String, String>,
    prefix: &str,
    schema: SchemaRef,
) -> Result<Box<dyn Encoder>, ConnectorError> {
    FormatOptions::from_options(options, prefix)?.encoder(schema)
}

/// Refuses, when a table is declared with format `format`, the value columns `schema` that
/// format cannot read or write: nested types in `csv` (other formats are checked when their
/// decoder or encoder is built, with their options).
///
/// # Errors
/// [`ConnectorError::Unsupported`] naming the column.
pub fn check_declared_types(format: &str, schema: &SchemaRef) -> Result<(), ConnectorError> {
    match format {
        "csv" => check_types(schema, FormatKind::Csv),
        _ => Ok(()),
    }
}

/// Refuses column types outside Weir's set (see the crate docs of [`super`]): the scalar types
/// everywhere, and ROW, ARRAY and MAP (nested to any depth) in every format but `csv`.
fn check_types(schema: &SchemaRef, kind: FormatKind) -> Result<(), ConnectorError> {
    if kind == FormatKind::Raw {
        return Ok(()); // RawDecoder checks its one column
    }
    fn supported(t: &DataType, nested: bool) -> bool {
        match t {
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Float32
            | DataType::Float64
            | DataType::Boolean
            | DataType::Utf8
            | DataType::Binary
            | DataType::Decimal128(_, _)
            | DataType::Date32
            | DataType::Timestamp(_, _) => true,
            DataType::Struct(fields) => nested && fields.iter().all(|f| supported(f.data_type(), nested)),
            DataType::List(item) => nested && supported(item.data_type(), nested),
            DataType::Map(entries, _) => nested && supported(entries.data_type(), nested),
            _ => false,
        }
    }
    let nested = kind != FormatKind::Csv;
    for field in schema.fields() {
        if !supported(field.data_type(), nested) {
            return Err(ConnectorError::Unsupported {
                feature: format!(
                    "column '{}' of type {} in a {kind:?} format (supported: BIGINT, INT, SMALLINT, TINYINT, DOUBLE, FLOAT, BOOLEAN, STRING, BYTES, DECIMAL, DATE, TIMESTAMP, TIMESTAMP_LTZ{})",
                    field.name(),
                    field.data_type(),
                    if nested { ", and ROW, ARRAY, MAP of them" } else { "" },
                ),
            });
        }
    }
    Ok(())
}

fn one_byte(key: &str, value: &str) -> Result<u8, ConnectorError> {
    match value {
        "\\t" => Ok(b'\t'),
        v if v.len() == 1 => Ok(v.as_bytes()[0]),
        _ => Err(invalid(key, value, "one ASCII character, or \\t")),
    }
}

fn invalid(option: &str, value: &str, valid: &str) -> ConnectorError {
    ConnectorError::InvalidValue { option: option.into(), value: value.into(), valid: valid.into() }
}
