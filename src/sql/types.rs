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
//! | `ROW<a T, b U>`, `ROW(a T, b U)` (Flink), `STRUCT<a T, b U>` | Struct(a: T, b: U), fields nullable |
//! | `MAP<K, V>` (Flink), `MAP(K, V)` | Map(entries: Struct(key: K not null, value: V)) |
//! | `INTERVAL` | Interval(MonthDayNano) |
//!
//! Field names of a `ROW` follow the rule for column names: unquoted ones are lower-cased,
//! quoted ones kept as written; a field is read as `r.a` (or `r['a']`), a map's value as
//! `m['key']`. sqlparser has no grammar for Flink's `ROW<...>`, `ROW(...)` and `MAP<...>` types,
//! so [`rewrite_nested_types`] turns them into the `STRUCT<...>` and `MAP(...)` it parses first.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, IntervalUnit, TimeUnit};
use pgwire::api::Type;
use sqlparser::ast::DataType as SqlType;

use crate::error::{Result, WeirError};

/// The Arrow type of a declared SQL type.
///
/// # Errors
/// `Unsupported` naming the type, for unknown names; `Plan` for a `ROW` field without a name
/// or named twice, and a DECIMAL out of range.
pub fn arrow_type(t: &SqlType) -> Result<DataType> {
    use sqlparser::ast::ArrayElemTypeDef;
    Ok(match t {
        SqlType::Array(ArrayElemTypeDef::AngleBracket(item) | ArrayElemTypeDef::SquareBracket(item, _) | ArrayElemTypeDef::Parenthesis(item)) => {
            DataType::List(Arc::new(Field::new("item", arrow_type(item)?, true)))
        }
        SqlType::Struct(fields, _) => {
            let mut out: Vec<Field> = Vec::with_capacity(fields.len());
            for (i, f) in fields.iter().enumerate() {
                let name = match &f.field_name {
                    Some(ident) if ident.quote_style.is_some() => ident.value.clone(),
                    Some(ident) => ident.value.to_lowercase(),
                    None => return Err(WeirError::plan(format!("field {} of {t} has no name: ROW<name TYPE, ...>", i + 1))),
                };
                if out.iter().any(|o| o.name() == &name) {
                    // Postgres's duplicate_column, as for a composite type's attribute.
                    return Err(WeirError::new(crate::error::ErrorKind::DuplicateColumn(format!(
                        "field \"{name}\" is declared twice in {t}"
                    ))));
                }
                out.push(Field::new(name, arrow_type(&f.field_type)?, true));
            }
            DataType::Struct(out.into())
        }
        SqlType::Map(key, value) => map_type(arrow_type(key)?, arrow_type(value)?),
        _ => arrow_type_of_text(&t.to_string())?,
    })
}

/// The Arrow type of `MAP<key, value>`: entries of a non-null key and a nullable value, as
/// DataFusion's `map` functions make them.
pub fn map_type(key: DataType, value: DataType) -> DataType {
    let entries = DataType::Struct(vec![Field::new("key", key, false), Field::new("value", value, true)].into());
    DataType::Map(Arc::new(Field::new("entries", entries, false)), false)
}

/// Type names that may follow a field name in Flink's `ROW(name TYPE, ...)`.
const TYPE_WORDS: &[&str] = &[
    "TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT", "FLOAT", "REAL", "DOUBLE", "DECIMAL", "DEC", "NUMERIC",
    "STRING", "TEXT", "VARCHAR", "CHAR", "BOOLEAN", "BOOL", "TIMESTAMP", "TIMESTAMP_LTZ", "DATE", "TIME",
    "BYTES", "BYTEA", "BINARY", "VARBINARY", "INTERVAL", "ARRAY", "ROW", "MAP", "STRUCT",
];

/// Rewrites Flink's nested type syntax into what sqlparser parses: `ROW<...>` into
/// `STRUCT<...>`, `ROW(a INT, ...)` into `STRUCT<a INT, ...>`, `MAP<K, V>` into `MAP(K, V)`,
/// the map constructor `MAP[k1, v1, k2, v2]` into `MAP {k1: v1, k2: v2}`, and a field of an
/// element, `items[1].sku`, into `items[1]['sku']` (DataFusion reads a dot after a subscript
/// only with a string).
/// `ROW(...)` is taken for a type only when a type name follows its first word (`ROW(a INT`),
/// so a row constructor `ROW(1, 'x')` is left alone. Text without them comes back unchanged.
///
/// # Errors
/// `Syntax` when the text cannot be tokenized.
pub fn rewrite_nested_types(sql: &str) -> Result<String> {
    use sqlparser::tokenizer::Token;
    let upper = sql.to_ascii_uppercase();
    if !upper.contains("ROW") && !upper.contains("MAP") && !upper.contains("].") {
        return Ok(sql.to_string());
    }
    let t = crate::sql::token_rewrite::Tokens::new(sql)?;
    let (tokens, sig) = (&t.tokens, &t.sig);
    let word_at = |k: usize| t.word_at(k);
    // What each open bracket closes with, for brackets opened since the start: a rewritten
    // `ROW(` closes with `>`, a rewritten `MAP<` with `)`, any other with itself.
    #[derive(PartialEq)]
    enum Open {
        Paren,
        RowParen,
        Angle,
        MapAngle,
        Bracket,
        Brace,
        /// `MAP[`: its commas so far at its own level.
        MapBracket(usize),
    }
    let mut stack: Vec<Open> = Vec::new();
    let mut rewritten = std::collections::HashMap::new();
    // Whether the last significant token closed a subscript (`]`, or a rewritten `['field']`).
    let mut after_subscript = false;
    for (k, &i) in sig.iter().enumerate() {
        let next = sig.get(k + 1).map(|j| &tokens[*j]);
        if after_subscript && tokens[i] == Token::Period {
            if let Some(Token::Word(w)) = next {
                let name = if w.quote_style.is_some() { w.value.clone() } else { w.value.to_lowercase() };
                rewritten.insert(i, String::new());
                rewritten.insert(sig[k + 1], format!("['{}']", name.replace('\'', "''")));
                continue;
            }
        }
        after_subscript = tokens[i] == Token::RBracket || rewritten.get(&i).is_some_and(|r| r.starts_with("['"));
        match (&tokens[i], word_at(k).as_deref()) {
            (Token::Word(_), Some("ROW")) if next == Some(&Token::Lt) => {
                rewritten.insert(i, "STRUCT".to_string());
            }
            (Token::Word(_), Some("ROW"))
                if next == Some(&Token::LParen)
                    && matches!(sig.get(k + 2).map(|j| &tokens[*j]), Some(Token::Word(_)))
                    && word_at(k + 3).is_some_and(|w| TYPE_WORDS.contains(&w.as_str())) =>
            {
                rewritten.insert(i, "STRUCT".to_string());
                rewritten.insert(sig[k + 1], "<".to_string());
                stack.push(Open::RowParen);
                continue;
            }
            (Token::Word(_), Some("MAP")) if next == Some(&Token::Lt) => {
                rewritten.insert(sig[k + 1], "(".to_string());
                stack.push(Open::MapAngle);
                continue;
            }
            (Token::Word(_), Some("MAP")) if next == Some(&Token::LBracket) => {
                rewritten.insert(i, "MAP ".to_string());
                rewritten.insert(sig[k + 1], "{".to_string());
                stack.push(Open::MapBracket(0));
                continue;
            }
            _ => {}
        }
        // The bracket of a `ROW(` or `MAP<` was pushed with its keyword; skip it here.
        if rewritten.get(&i).is_some_and(|r| r == "<" || r == "(" || r == "{") {
            continue;
        }
        match &tokens[i] {
            Token::LParen => stack.push(Open::Paren),
            Token::LBracket => stack.push(Open::Bracket),
            Token::LBrace => stack.push(Open::Brace),
            Token::RBracket => {
                if matches!(stack.pop(), Some(Open::MapBracket(_))) {
                    rewritten.insert(i, "}".to_string());
                }
            }
            Token::RBrace => {
                stack.pop();
            }
            Token::Comma => {
                if let Some(Open::MapBracket(commas)) = stack.last_mut() {
                    if *commas % 2 == 0 {
                        rewritten.insert(i, ":".to_string());
                    }
                    *commas += 1;
                }
            }
            Token::Lt if k > 0 && matches!(word_at(k - 1).as_deref(), Some("ARRAY" | "ROW" | "STRUCT")) => stack.push(Open::Angle),
            Token::RParen => {
                if stack.pop() == Some(Open::RowParen) {
                    rewritten.insert(i, ">".to_string());
                }
            }
            Token::Gt | Token::ShiftRight => {
                let closes = if tokens[i] == Token::ShiftRight { 2 } else { 1 };
                let mut text = String::new();
                for _ in 0..closes {
                    match stack.last() {
                        Some(Open::MapAngle) => {
                            stack.pop();
                            text.push(')');
                        }
                        Some(Open::Angle) => {
                            stack.pop();
                            text.push('>');
                        }
                        _ => text.push('>'),
                    }
                }
                if text != tokens[i].to_string() {
                    rewritten.insert(i, text);
                }
            }
            _ => {}
        }
    }
    if rewritten.is_empty() {
        return Ok(sql.to_string());
    }
    Ok(t.render(&rewritten))
}

/// Turns a number literal in E notation whose value does not fit `DECIMAL(38)` (`1e300`,
/// `2.5E-60`) into `CAST('1e300' AS DOUBLE)`. A number literal is read as a DECIMAL, as
/// Postgres reads it (`0.1 + 0.2 = 0.3`), and DataFusion refuses one beyond its decimal types
/// ("Decimal scale -300 exceeds the minimum supported scale"); Flink types every E-notation
/// literal DOUBLE. The literals that fit stay DECIMALs. Text without one comes back unchanged.
///
/// # Errors
/// `Syntax` when the text cannot be tokenized.
pub fn rewrite_wide_number_literals(sql: &str) -> Result<String> {
    use sqlparser::tokenizer::Token;
    let bytes = sql.as_bytes();
    let exponent_at = |i: usize| {
        matches!(bytes[i], b'e' | b'E')
            && i > 0
            && (bytes[i - 1].is_ascii_digit() || bytes[i - 1] == b'.')
            && bytes.get(i + 1).is_some_and(|b| b.is_ascii_digit() || *b == b'-' || *b == b'+')
    };
    if !(0..bytes.len()).any(exponent_at) {
        return Ok(sql.to_string());
    }
    let t = crate::sql::token_rewrite::Tokens::new(sql)?;
    let mut rewritten = std::collections::HashMap::new();
    for &i in &t.sig {
        if let Token::Number(text, _) = &t.tokens[i] {
            if !fits_decimal_38(text) {
                rewritten.insert(i, format!("CAST('{text}' AS DOUBLE)"));
            }
        }
    }
    Ok(if rewritten.is_empty() { sql.to_string() } else { t.render(&rewritten) })
}

/// Whether number literal `text` (`1.5e10`, `42`, `.5E-3`) is a value of `DECIMAL(38, s)` for
/// some scale `0 <= s <= 38`: at most 38 digits, counting the integer digits its exponent adds
/// and the fraction digits it needs.
fn fits_decimal_38(text: &str) -> bool {
    let Some(e) = text.find(['e', 'E']) else { return true };
    let Ok(exponent) = text[e + 1..].parse::<i64>() else { return false };
    let mantissa = &text[..e];
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = format!("{int}{frac}").trim_start_matches('0').to_string();
    if digits.is_empty() {
        return true; // zero
    }
    // value = digits * 10^-scale
    let scale = frac.len() as i64 - exponent;
    let precision = if scale >= 0 { (digits.len() as i64).max(scale) } else { digits.len() as i64 - scale };
    precision <= 38 && scale <= 38
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
                "type {text}; supported: BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p, s), STRING/VARCHAR/TEXT, BYTES, DATE, TIME, TIMESTAMP(p), TIMESTAMP_LTZ(p), INTERVAL, ARRAY<T>, ROW<name T, ...>, MAP<K, V>"
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
    fn number_literals_beyond_decimal_38_are_doubles() -> Result<()> {
        let cases = [
            ("SELECT 1e300, 1.5e10, 2", "SELECT CAST('1e300' AS DOUBLE), 1.5e10, 2"),
            ("SELECT 1E-39 * x, 1E-38, 0.0e-400", "SELECT CAST('1E-39' AS DOUBLE) * x, 1E-38, 0.0e-400"),
            ("SELECT 1e38, 1e37, 12.5e36, 12.5e37", "SELECT CAST('1e38' AS DOUBLE), 1e37, 12.5e36, CAST('12.5e37' AS DOUBLE)"),
            ("SELECT 'x1e300', c1e5 FROM t", "SELECT 'x1e300', c1e5 FROM t"),
        ];
        for (sql, rewritten) in cases {
            assert_eq!(rewrite_wide_number_literals(sql)?, rewritten, "{sql}");
        }
        Ok(())
    }

    #[test]
    fn flink_nested_types_are_rewritten_and_row_constructors_left_alone() -> Result<()> {
        let cases = [
            ("CREATE TABLE t (r ROW<a INT, b STRING>)", "CREATE TABLE t (r STRUCT<a INT, b STRING>)"),
            ("CREATE TABLE t (r ROW(a INT, b ROW(c DECIMAL(10, 2))))", "CREATE TABLE t (r STRUCT<a INT, b STRUCT<c DECIMAL(10, 2)>>)"),
            ("CREATE TABLE t (m MAP<STRING, ARRAY<INT>>, n INT)", "CREATE TABLE t (m MAP(STRING, ARRAY<INT>), n INT)"),
            ("CREATE TABLE t (m MAP<STRING, MAP<INT, ROW<a INT>>>)", "CREATE TABLE t (m MAP(STRING, MAP(INT, STRUCT<a INT>)))"),
            ("SELECT MAP['a', 1 + 2, 'b', f(3, 4)], x[1]", "SELECT MAP {'a': 1 + 2, 'b': f(3, 4)}, x[1]"),
            ("SELECT items[1].sku, items[2].Pos.\"X\", t.r.a FROM t", "SELECT items[1]['sku'], items[2]['pos']['X'], t.r.a FROM t"),
            ("SELECT ROW(1, 'x'), a > b, c < d FROM t", "SELECT ROW(1, 'x'), a > b, c < d FROM t"),
            ("SELECT count(*) OVER (ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM t", "SELECT count(*) OVER (ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM t"),
        ];
        for (flink, parsed) in cases {
            assert_eq!(rewrite_nested_types(flink)?, parsed, "{flink}");
        }
        Ok(())
    }

    #[test]
    fn row_and_map_types_name_their_fields() -> Result<()> {
        use sqlparser::dialect::GenericDialect;
        use sqlparser::parser::Parser;
        let parse = |t: &str| -> Result<DataType> {
            let text = rewrite_nested_types(t)?;
            let sql_type = Parser::new(&GenericDialect {}).try_with_sql(&text).and_then(|mut p| p.parse_data_type()).map_err(|e| WeirError::syntax(e.to_string(), None))?;
            arrow_type(&sql_type)
        };
        let row = parse("ROW<A INT, \"B\" STRING>")?;
        assert_eq!(row, DataType::Struct(vec![Field::new("a", DataType::Int32, true), Field::new("B", DataType::Utf8, true)].into()));
        assert_eq!(parse("MAP<STRING, BIGINT>")?, map_type(DataType::Utf8, DataType::Int64));
        assert_eq!(parse("ARRAY<ROW<x INT>>")?, DataType::List(Arc::new(Field::new("item", DataType::Struct(vec![Field::new("x", DataType::Int32, true)].into()), true))));
        assert!(parse("ROW<a INT, a STRING>").is_err());
        Ok(())
    }

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
