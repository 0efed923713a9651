//! Formats: record payloads (Kafka message values and keys) to Arrow rows and back.
//!
//! [`decoder`] and [`encoder`] build the codec a table's `'format'` (or `'key.format'` /
//! `'value.format'`) names, with Flink's option names (see [`FormatOptions`]): `json`, `csv`,
//! `raw`, `debezium-json`, `maxwell-json` and `canal-json` (read only), `avro-confluent`; `upsert-kafka` pairs a key and a value format ([`UpsertDecoder`],
//! [`UpsertEncoder`]).
//!
//! # Types
//! Columns are nullable Arrow columns of Weir's types: BIGINT `Int64`, INT `Int32`, SMALLINT
//! `Int16`, TINYINT `Int8`, DOUBLE `Float64`, FLOAT `Float32`, BOOLEAN `Boolean`, STRING `Utf8`,
//! BYTES `Binary`, DECIMAL(p,s) `Decimal128`, DATE `Date32`, TIMESTAMP(3)
//! `Timestamp(Millisecond, None)`, TIMESTAMP_LTZ(3) `Timestamp(Millisecond, "UTC")`.
//!
//! # Dead letters
//! A record that does not decode never stops the others: [`Decoded::errors`] lists each with
//! its input position and the reason, and the good records' rows keep their input positions in
//! [`Decoded::sources`]. Decoding is batch at a time (Arrow's JSON and CSV readers over the
//! whole slice); bad records are isolated without re-parsing the good ones more than once or
//! twice (see `isolate.rs`).

mod avro;
mod change_json;
mod codec;
mod csv;
mod debezium;
mod isolate;
mod json;
mod options;
mod raw;
#[cfg(test)]
mod tests;
mod upsert;

pub use avro::{avro_schema_of, AvroConfluentDecoder, AvroConfluentEncoder, RegistryOptions};
pub use change_json::{ChangeLog, ChangeLogDecoder};
pub use codec::{DecodeError, Decoded, Decoder, Encoder, Op};
pub use csv::{CsvDecoder, CsvEncoder};
pub use debezium::{DebeziumDecoder, DebeziumEncoder};
pub use isolate::message_of;
pub use json::{JsonDecoder, JsonEncoder};
pub use options::{
    check_declared_types, decoder, encoder, format_option_names, CsvOptions, FormatKind, FormatOptions, TimestampStandard,
    FORMAT_NAMES,
};
pub use raw::{RawDecoder, RawEncoder};
pub use upsert::{check_key_fields, key_fields, value_format, value_prefix, KeyValue, UpsertDecoder, UpsertEncoder, UpsertMessage, ValueFields};
