//! SQL type names (Flink's and Postgres's spellings) to Arrow types, and Arrow types to the
//! Postgres types Weir sends them as ([`pg_type`]).
//!
//! | SQL | Arrow |
//! |---|---|
//! | `TINYINT` / `SMALLINT`, `INT2` / `INT`, `INTEGER`, `INT4` / `BIGINT`, `INT8` | Int8 / Int16 / Int32 / Int64 |
//! | `FLOAT`, `REAL`, `FLOAT4` (Flink: 4 bytes) / `DOUBLE`, `DOUBLE PRECISION`, `FLOAT8` | Float32 / Float64 |
//! | `DECIMAL(p, s)`, `NUMERIC(p, s)`; `DECIMAL` alone is Flink's `DECIMAL(10, 0)`, `NUMERIC` alone `NUMERIC(38, 10)` | Decimal128(p, s) |
//! | `STRING`, `TEXT`, `VARCHAR(n)`, `CHAR(n)` | Utf8 |
//! | `BOOLEAN`, `BOOL` | Boolean |
//! | `TIMESTAMP(p)` (p ≤ 3: ms, ≤ 6: µs, else ns; default 6) | Timestamp(unit, None) |
//! | `TIMESTAMP_LTZ(p)`, `TIMESTAMP(p) WITH [LOCAL] TIME ZONE`, `TIMESTAMPTZ` | Timestamp(unit, "UTC") |
//! | `DATE` / `TIME(p)` | Date32 / Time64(µs) |
//! | `BYTES`, `BYTEA`, `BINARY`, `VARBINARY` | Binary |
//! | `ARRAY<T>`, `T ARRAY`, `T[]` | List(T) |
//! | `INTERVAL` | Interval(MonthDayNano) |

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, IntervalUnit, TimeUnit};
use pgwire::api::Type;
use sqlparser::ast::DataType as SqlType;

use crate::error::{Result, WeirError};

/// The Arrow type of a declared SQL type.
///
/// # Errors
/// `Unsupported` naming the type, for `ROW<...>`, `MAP<...>` and unknown names.
pub fn arrow_type(t: &SqlType) -> Result<DataType> {
    arrow_type_of_text(&t.to_string())
}

fn unit_of(precision: Option<u32>) -> TimeUnit {
    match precision.unwrap_or(6) {
        0..=3 => TimeUnit::Millisecond,
        4..=6 => TimeUnit::Microsecond,
        _ => TimeUnit::Nanosecond,
    }
}

fn arrow_type_of_text(text: &str) -> Result<DataType> {
    let upper = text.trim().to_uppercase();
    if let Some(inner) = upper.strip_suffix("[]") {
        return Ok(DataType::List(Arc::new(Field::new("item", arrow_type_of_text(inner)?, true))));
    }
    if let Some(inner) = upper.strip_suffix(" ARRAY") {
        return Ok(DataType::List(Arc::new(Field::new("item", arrow_type_of_text(inner)?, true))));
    }
    if let Some(inner) = upper.strip_prefix("ARRAY<").and_then(|r| r.strip_suffix('>')) {
        return Ok(DataType::List(Arc::new(Field::new("item", arrow_type_of_text(inner)?, true))));
    }
    // Base name, parenthesized arguments, and the rest (WITH TIME ZONE).
    let (base, args, rest) = match upper.find('(') {
        Some(open) => {
            let close = upper[open..].find(')').map(|c| open + c).unwrap_or(upper.len());
            let args: Vec<u32> = upper[open + 1..close]
                .split(',')
                .filter_map(|a| a.trim().parse().ok())
                .collect();
            (upper[..open].trim().to_string(), args, upper.get(close + 1..).unwrap_or("").trim().to_string())
        }
        None => {
            let (b, r) = match upper.find(" WITH") {
                Some(i) => (upper[..i].to_string(), upper[i..].trim().to_string()),
                None => (upper.clone(), String::new()),
            };
            (b.trim().to_string(), vec![], r)
        }
    };
    let with_tz = rest.starts_with("WITH TIME ZONE") || rest.starts_with("WITH LOCAL TIME ZONE");
    let decimal = |default: (u32, u32)| -> Result<DataType> {
        let (p, s) = match args.as_slice() {
            [] => default,
            [p] => (*p, 0),
            [p, s, ..] => (*p, *s),
        };
        if p == 0 || p > 38 || s > p {
            return Err(WeirError::plan(format!(
                "DECIMAL({p}, {s}) is out of range: precision 1 to 38, scale 0 to precision"
            )));
        }
        Ok(DataType::Decimal128(p as u8, s as i8))
    };
    Ok(match base.as_str() {
        "TINYINT" | "INT1" => DataType::Int8,
        "SMALLINT" | "INT2" | "INT16" => DataType::Int16,
        "INT" | "INTEGER" | "INT4" | "INT32" => DataType::Int32,
        "BIGINT" | "INT8" | "INT64" | "LONG" => DataType::Int64,
        "FLOAT" | "REAL" | "FLOAT4" | "FLOAT32" => DataType::Float32,
        "DOUBLE" | "DOUBLE PRECISION" | "FLOAT8" | "FLOAT64" => DataType::Float64,
        "DECIMAL" | "DEC" => decimal((10, 0))?,
        "NUMERIC" => decimal((38, 10))?,
        "STRING" | "TEXT" | "VARCHAR" | "CHAR" | "CHARACTER" | "CHARACTER VARYING" | "CHAR VARYING"
        | "BPCHAR" | "NVARCHAR" => DataType::Utf8,
        "BOOLEAN" | "BOOL" => DataType::Boolean,
        "TIMESTAMP" | "DATETIME" => {
            DataType::Timestamp(unit_of(args.first().copied()), with_tz.then(|| "UTC".into()))
        }
        "TIMESTAMP_LTZ" | "TIMESTAMPTZ" => DataType::Timestamp(unit_of(args.first().copied()), Some("UTC".into())),
        "DATE" => DataType::Date32,
        "TIME" => DataType::Time64(TimeUnit::Microsecond),
        "BYTES" | "BYTEA" | "BINARY" | "VARBINARY" | "BLOB" => DataType::Binary,
        "INTERVAL" => DataType::Interval(IntervalUnit::MonthDayNano),
        _ => {
            return Err(WeirError::unsupported(format!(
                "type {text}; supported: BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p, s), STRING/VARCHAR/TEXT, BYTES, DATE, TIME, TIMESTAMP(p), TIMESTAMP_LTZ(p), INTERVAL, ARRAY<T>"
            )))
        }
    })
}

/// The Postgres type of values of `data_type`.
pub fn pg_type(data_type: &DataType) -> Type {
    match data_type {
        DataType::Boolean => Type::BOOL,
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => Type::INT2,
        DataType::Int32 | DataType::UInt16 => Type::INT4,
        // UInt64: COUNT, ROW_NUMBER; bigint as Postgres and Flink type them.
        DataType::Int64 | DataType::UInt32 | DataType::UInt64 => Type::INT8,
        DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => Type::NUMERIC,
        DataType::Float16 | DataType::Float32 => Type::FLOAT4,
        DataType::Float64 => Type::FLOAT8,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Type::TEXT,
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => Type::BYTEA,
        DataType::Date32 | DataType::Date64 => Type::DATE,
        DataType::Time32(_) | DataType::Time64(_) => Type::TIME,
        DataType::Timestamp(_, None) => Type::TIMESTAMP,
        DataType::Timestamp(_, Some(_)) => Type::TIMESTAMPTZ,
        DataType::Interval(_) | DataType::Duration(_) => Type::INTERVAL,
        DataType::List(element)
        | DataType::LargeList(element)
        | DataType::FixedSizeList(element, _) => {
            array_type(element.data_type()).unwrap_or(Type::TEXT)
        }
        DataType::Dictionary(_, values) => pg_type(values),
        DataType::Null
        | DataType::ListView(_)
        | DataType::LargeListView(_)
        | DataType::Struct(_)
        | DataType::Union(..)
        | DataType::Map(..)
        | DataType::RunEndEncoded(..) => Type::TEXT,
    }
}

/// The Postgres array type with elements of `element`, if it has one: scalar elements only
/// (a Postgres array of arrays is a multi-dimensional array, which ragged lists are not).
pub fn array_type(element: &DataType) -> Option<Type> {
    if !is_scalar(element) {
        return None;
    }
    let scalar = pg_type(element);
    array_pairs().into_iter().find(|(e, _)| *e == scalar).map(|(_, array)| array)
}

/// The built-in scalar types that have array types, with them.
pub fn array_pairs() -> [(Type, Type); 16] {
    [
        (Type::BOOL, Type::BOOL_ARRAY),
        (Type::OID, Type::OID_ARRAY),
        (Type::INT2, Type::INT2_ARRAY),
        (Type::INT4, Type::INT4_ARRAY),
        (Type::INT8, Type::INT8_ARRAY),
        (Type::NUMERIC, Type::NUMERIC_ARRAY),
        (Type::FLOAT4, Type::FLOAT4_ARRAY),
        (Type::FLOAT8, Type::FLOAT8_ARRAY),
        (Type::TEXT, Type::TEXT_ARRAY),
        (Type::VARCHAR, Type::VARCHAR_ARRAY),
        (Type::BYTEA, Type::BYTEA_ARRAY),
        (Type::DATE, Type::DATE_ARRAY),
        (Type::TIME, Type::TIME_ARRAY),
        (Type::TIMESTAMP, Type::TIMESTAMP_ARRAY),
        (Type::TIMESTAMPTZ, Type::TIMESTAMPTZ_ARRAY),
        (Type::INTERVAL, Type::INTERVAL_ARRAY),
    ]
}

/// The built-in array type of elements of type `element`.
pub fn array_type_of(element: &Type) -> Option<Type> {
    array_pairs().into_iter().find(|(e, _)| e == element).map(|(_, a)| a)
}

/// The element type of built-in array type `t`.
pub fn element_of(t: &Type) -> Option<Type> {
    array_pairs().into_iter().find(|(_, a)| a == t).map(|(e, _)| e)
}

/// Whether values of `data_type` are encoded directly (not nested, not dictionary-encoded).
fn is_scalar(data_type: &DataType) -> bool {
    !data_type.is_nested()
        && !matches!(
            data_type,
            DataType::Null | DataType::Dictionary(..) | DataType::RunEndEncoded(..)
        )
}

/// Postgres's `format_type` spelling of built-in type `t` (`integer`, `timestamp without time
/// zone`, `text[]`).
pub fn format_type_name(t: &Type) -> String {
    if let Some(element) = element_of(t) {
        return format!("{}[]", format_type_name(&element));
    }
    match *t {
        Type::BOOL => "boolean",
        Type::INT2 => "smallint",
        Type::INT4 => "integer",
        Type::INT8 => "bigint",
        Type::FLOAT4 => "real",
        Type::FLOAT8 => "double precision",
        Type::VARCHAR => "character varying",
        Type::BPCHAR => "character",
        Type::CHAR => "\"char\"",
        Type::TIME => "time without time zone",
        Type::TIMESTAMP => "timestamp without time zone",
        Type::TIMESTAMPTZ => "timestamp with time zone",
        _ => return t.name().to_string(),
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flink_and_postgres_spellings() -> Result<()> {
        assert_eq!(arrow_type_of_text("STRING")?, DataType::Utf8);
        assert_eq!(arrow_type_of_text("varchar(20)")?, DataType::Utf8);
        assert_eq!(arrow_type_of_text("DECIMAL(12, 2)")?, DataType::Decimal128(12, 2));
        assert_eq!(arrow_type_of_text("TIMESTAMP(3)")?, DataType::Timestamp(TimeUnit::Millisecond, None));
        assert_eq!(
            arrow_type_of_text("TIMESTAMP_LTZ(3)")?,
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
        );
        assert_eq!(
            arrow_type_of_text("TIMESTAMP WITH TIME ZONE")?,
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        );
        assert_eq!(arrow_type_of_text("INT8")?, DataType::Int64);
        assert!(matches!(arrow_type_of_text("ARRAY<INT>")?, DataType::List(_)));
        assert!(arrow_type_of_text("ROW<a INT>").is_err());
        Ok(())
    }
}
