//! Extended-protocol parameters: where `$n` occurs in a statement, the type each parameter is
//! described with, and the SQL literal a bound value becomes.
//!
//! The database executes SQL text, so Bind substitutes each `$n` with a literal of its value
//! before execution (as pgJDBC does client-side): text as `'...'` with quotes doubled, numbers
//! unquoted (negative ones in parentheses, so `x-$1` cannot become a `--` comment), booleans as
//! `TRUE`/`FALSE`, `NULL`, bytes as `X'0a0b'`, dates and times as `CAST('...' AS TIMESTAMP)`.
//! Strings are standard-conforming: a backslash is an ordinary character.
//!
//! # Parameter types
//! A type the client declared in Parse wins. Otherwise the statement text decides: `$1::int`,
//! `CAST($1 AS BIGINT)`, `LIMIT $1` / `OFFSET $1` (bigint); anything else is described as
//! `text`, so a typed client (tokio-postgres) must bind a string for it.
//!
//! # Lexing
//! `$n` is found outside `'...'` and `E'...'` strings, `"..."` and `` `...` `` identifiers,
//! `$tag$...$tag$` strings, `--` and (nested) `/* */` comments, and not inside an identifier
//! (`a$1`).

use std::ops::Range;

use chrono::{DateTime, Duration, NaiveDate, NaiveTime};
use pgwire::api::portal::Format;
use pgwire::api::results::FieldFormat;
use pgwire::api::Type;

use super::error::{FrontendError, Result};

/// One `$n` in statement text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    /// Byte range of `$n` in the statement.
    pub range: Range<usize>,
    /// `n`, 1-based (0 and overflowing numbers are kept, and refused at Bind).
    pub number: usize,
}

/// Every `$n` of `sql`, in order.
pub fn placeholders(sql: &str) -> Vec<Placeholder> {
    let bytes = sql.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let next = bytes.get(i + 1).copied();
        i = match bytes[i] {
            b'\'' => {
                let escapes = i > 0
                    && matches!(bytes[i - 1], b'e' | b'E')
                    && (i < 2 || !is_identifier_byte(bytes[i - 2]));
                skip_quoted(bytes, i, b'\'', escapes)
            }
            b'"' => skip_quoted(bytes, i, b'"', false),
            b'`' => skip_quoted(bytes, i, b'`', false),
            b'-' if next == Some(b'-') => bytes[i..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |p| i + p + 1),
            b'/' if next == Some(b'*') => skip_block_comment(bytes, i),
            b'$' if i > 0 && is_identifier_byte(bytes[i - 1]) => i + 1,
            b'$' if next.is_some_and(|b| b.is_ascii_digit()) => {
                let end = i
                    + 1
                    + bytes[i + 1..]
                        .iter()
                        .take_while(|b| b.is_ascii_digit())
                        .count();
                let number = sql[i + 1..end].parse().unwrap_or(usize::MAX);
                found.push(Placeholder {
                    range: i..end,
                    number,
                });
                end
            }
            b'$' => skip_dollar_quoted(bytes, i),
            _ => i + 1,
        };
    }
    found
}

/// The types the statement's parameters are described with: one per parameter up to the
/// highest `$n` or the number the client declared, whichever is more.
pub fn parameter_types(sql: &str, declared: &[Option<Type>]) -> Vec<Type> {
    let found = placeholders(sql);
    let count = found
        .iter()
        .map(|p| p.number)
        .filter(|&n| n != usize::MAX)
        .max()
        .unwrap_or(0)
        .max(declared.len());
    (1..=count)
        .map(|number| {
            declared
                .get(number - 1)
                .cloned()
                .flatten()
                .filter(|ty| *ty != Type::UNKNOWN)
                .or_else(|| {
                    found
                        .iter()
                        .filter(|p| p.number == number)
                        .find_map(|p| type_from_context(sql, &p.range))
                })
                .unwrap_or(Type::TEXT)
        })
        .collect()
}

/// `sql` with every `$n` replaced by the literal of bound value `n`, read as `types[n - 1]` in
/// the format `formats` gives it (none: all text; one: for all; else one per value).
///
/// # Errors
/// [`FrontendError::ParameterCount`] when the number of values differs from `types`,
/// [`FrontendError::FormatCount`], [`FrontendError::NoSuchParameter`] for `$0`,
/// [`FrontendError::InvalidParameter`] for a value that does not read as its type,
/// [`FrontendError::UnsupportedBinaryParameter`].
pub fn bind(
    sql: &str,
    types: &[Type],
    values: &[Option<impl AsRef<[u8]>>],
    formats: &Format,
) -> Result<String> {
    if values.len() != types.len() {
        return Err(FrontendError::ParameterCount {
            given: values.len(),
            required: types.len(),
        });
    }
    if let Format::Individual(codes) = formats {
        if codes.len() != values.len() {
            return Err(FrontendError::FormatCount {
                what: "parameter",
                given: codes.len(),
                expected: values.len(),
            });
        }
    }
    let literals = values
        .iter()
        .zip(types)
        .enumerate()
        .map(|(i, (value, ty))| {
            let value = value.as_ref().map(AsRef::as_ref);
            literal(i + 1, ty, value, formats.format_for(i))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut bound =
        String::with_capacity(sql.len() + literals.iter().map(String::len).sum::<usize>());
    let mut copied = 0;
    for placeholder in placeholders(sql) {
        let literal = placeholder
            .number
            .checked_sub(1)
            .and_then(|i| literals.get(i))
            .ok_or(FrontendError::NoSuchParameter(placeholder.number))?;
        bound.push_str(&sql[copied..placeholder.range.start]);
        bound.push_str(literal);
        copied = placeholder.range.end;
    }
    bound.push_str(&sql[copied..]);
    Ok(bound)
}

/// The SQL literal of parameter `number` (1-based), `value` read as `ty` in `format`.
fn literal(number: usize, ty: &Type, value: Option<&[u8]>, format: FieldFormat) -> Result<String> {
    let Some(value) = value else {
        return Ok("NULL".to_owned());
    };
    let invalid = || FrontendError::InvalidParameter {
        index: number,
        type_name: ty.name().to_owned(),
        value: String::from_utf8_lossy(value).into_owned(),
    };
    if let postgres_types::Kind::Array(element) = ty.kind() {
        return match format {
            FieldFormat::Text => {
                let text = std::str::from_utf8(value).map_err(|_| invalid())?;
                array_text_literal(number, element, text)?.ok_or_else(invalid)
            }
            FieldFormat::Binary => binary_array_literal(number, element, value).ok_or_else(invalid)?,
        };
    }
    let text = match format {
        FieldFormat::Text => std::str::from_utf8(value).map_err(|_| invalid())?,
        FieldFormat::Binary => return binary_literal(number, ty, value).ok_or_else(invalid)?,
    };
    let trimmed = text.trim();
    Ok(match *ty {
        Type::INT2 | Type::INT4 | Type::INT8 => {
            number_literal(&trimmed.parse::<i64>().map_err(|_| invalid())?.to_string())
        }
        Type::OID => trimmed.parse::<u32>().map_err(|_| invalid())?.to_string(),
        Type::FLOAT4 | Type::FLOAT8 => {
            let value = trimmed.parse::<f64>().map_err(|_| invalid())?;
            float_literal(value, trimmed, ty)
        }
        Type::NUMERIC => {
            if is_decimal_number(trimmed) {
                number_literal(trimmed)
            } else if trimmed.eq_ignore_ascii_case("nan") {
                "CAST('NaN' AS DOUBLE)".to_owned()
            } else {
                return Err(invalid());
            }
        }
        Type::BOOL => match trimmed.to_ascii_lowercase().as_str() {
            "t" | "true" | "y" | "yes" | "on" | "1" => "TRUE".to_owned(),
            "f" | "false" | "n" | "no" | "off" | "0" => "FALSE".to_owned(),
            _ => return Err(invalid()),
        },
        Type::BYTEA => match text.strip_prefix("\\x") {
            Some(hex) => bytes_literal(&decode_hex(hex).ok_or_else(invalid)?),
            None => bytes_literal(text.as_bytes()),
        },
        Type::DATE => cast_literal(text, "DATE"),
        Type::TIME => cast_literal(text, "TIME"),
        Type::TIMESTAMP => cast_literal(text, "TIMESTAMP"),
        Type::TIMESTAMPTZ => cast_literal(text, "TIMESTAMP WITH TIME ZONE"),
        Type::INTERVAL => cast_literal(text, "INTERVAL"),
        _ => string_literal(text),
    })
}

/// The literal of a binary-format value; `None` when it is malformed, an error when we do not
/// read that type's binary form.
fn binary_literal(number: usize, ty: &Type, value: &[u8]) -> Option<Result<String>> {
    let literal = match *ty {
        Type::BOOL => match value {
            [0] => "FALSE".to_owned(),
            [1] => "TRUE".to_owned(),
            _ => return None,
        },
        Type::INT2 => number_literal(&i16::from_be_bytes(value.try_into().ok()?).to_string()),
        Type::INT4 => number_literal(&i32::from_be_bytes(value.try_into().ok()?).to_string()),
        Type::INT8 => number_literal(&i64::from_be_bytes(value.try_into().ok()?).to_string()),
        Type::OID => u32::from_be_bytes(value.try_into().ok()?).to_string(),
        Type::FLOAT4 => {
            let value = f32::from_be_bytes(value.try_into().ok()?);
            float_literal(value.into(), &value.to_string(), ty)
        }
        Type::FLOAT8 => {
            let value = f64::from_be_bytes(value.try_into().ok()?);
            float_literal(value, &value.to_string(), ty)
        }
        Type::NUMERIC => decode_numeric(value)?,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN | Type::JSON => {
            string_literal(std::str::from_utf8(value).ok()?)
        }
        Type::JSONB => match value.split_first() {
            Some((1, json)) => string_literal(std::str::from_utf8(json).ok()?),
            _ => return None,
        },
        Type::BYTEA => bytes_literal(value),
        Type::UUID => {
            let hex = value.iter().map(|b| format!("{b:02x}")).collect::<String>();
            if hex.len() != 32 {
                return None;
            }
            let uuid = [
                &hex[..8],
                &hex[8..12],
                &hex[12..16],
                &hex[16..20],
                &hex[20..],
            ]
            .join("-");
            string_literal(&uuid)
        }
        Type::DATE => {
            let days = i32::from_be_bytes(value.try_into().ok()?);
            let epoch = NaiveDate::from_ymd_opt(2000, 1, 1).expect("2000-01-01 exists");
            let date = epoch.checked_add_signed(Duration::days(days.into()))?;
            cast_literal(&date.format("%Y-%m-%d").to_string(), "DATE")
        }
        Type::TIMESTAMP | Type::TIMESTAMPTZ => {
            let micros = i64::from_be_bytes(value.try_into().ok()?);
            let unix_micros = micros.checked_add(946_684_800_000_000)?;
            let datetime = DateTime::from_timestamp_micros(unix_micros)?.naive_utc();
            let text = datetime.format("%Y-%m-%d %H:%M:%S%.f").to_string();
            if *ty == Type::TIMESTAMP {
                cast_literal(&text, "TIMESTAMP")
            } else {
                cast_literal(&format!("{text}+00:00"), "TIMESTAMP WITH TIME ZONE")
            }
        }
        Type::TIME => {
            let micros = i64::from_be_bytes(value.try_into().ok()?);
            let seconds = u32::try_from(micros.div_euclid(1_000_000)).ok()?;
            let nanos = (micros.rem_euclid(1_000_000) * 1000) as u32;
            let time = NaiveTime::from_num_seconds_from_midnight_opt(seconds, nanos)?;
            cast_literal(&time.format("%H:%M:%S%.f").to_string(), "TIME")
        }
        Type::INTERVAL => {
            let (micros, rest) = value.split_first_chunk::<8>()?;
            let (days, months) = rest.split_first_chunk::<4>()?;
            let months: [u8; 4] = months.try_into().ok()?;
            let text = format!(
                "{} months {} days {} microseconds",
                i32::from_be_bytes(months),
                i32::from_be_bytes(*days),
                i64::from_be_bytes(*micros)
            );
            cast_literal(&text, "INTERVAL")
        }
        _ => {
            return Some(Err(FrontendError::UnsupportedBinaryParameter {
                index: number,
                type_name: ty.name().to_owned(),
            }))
        }
    };
    Some(Ok(literal))
}

/// A `numeric` from its binary form (see `encode/binary.rs`): a decimal number literal.
fn decode_numeric(value: &[u8]) -> Option<String> {
    let word = |i: usize| -> Option<i16> {
        Some(i16::from_be_bytes(
            value.get(2 * i..2 * i + 2)?.try_into().ok()?,
        ))
    };
    let (num_digits, weight, sign, scale) = (word(0)?, word(1)?, word(2)? as u16, word(3)?);
    match sign {
        0x0000 | 0x4000 => {}
        0xC000 => return Some("CAST('NaN' AS DOUBLE)".to_owned()),
        0xD000 => return Some("CAST('Infinity' AS DOUBLE)".to_owned()),
        0xF000 => return Some("CAST('-Infinity' AS DOUBLE)".to_owned()),
        _ => return None,
    }
    if value.len() != 8 + 2 * usize::try_from(num_digits).ok()? || scale < 0 {
        return None;
    }
    let digits = (0..num_digits as usize)
        .map(|i| word(4 + i))
        .collect::<Option<Vec<_>>>()?;
    if digits.iter().any(|d| !(0..10_000).contains(d)) {
        return None;
    }
    let digit = |power: i32| -> i16 {
        // The base-10000 digit for 10000^power.
        usize::try_from(i32::from(weight) - power)
            .ok()
            .and_then(|i| digits.get(i).copied())
            .unwrap_or(0)
    };
    let mut text = String::new();
    if sign == 0x4000 {
        text.push('-');
    }
    let top = i32::from(weight).max(0);
    text.push_str(&digit(top).to_string());
    for power in (0..top).rev() {
        text.push_str(&format!("{:04}", digit(power)));
    }
    if scale > 0 {
        text.push('.');
        let mut fraction = String::new();
        let mut power = -1;
        while fraction.len() < scale as usize {
            fraction.push_str(&format!("{:04}", digit(power)));
            power -= 1;
        }
        fraction.truncate(scale as usize);
        text.push_str(&fraction);
    }
    Some(number_literal(&text))
}

/// An array parameter in Postgres's text form (`{1,2,NULL}`, `{"a b","c\\"d"}`, nested braces
/// for more dimensions) as `ARRAY[...]` of its elements' literals; `None` when malformed.
fn array_text_literal(number: usize, element: &Type, text: &str) -> Result<Option<String>> {
    let chars: Vec<char> = text.trim().chars().collect();
    let mut at = 0;
    let literal = parse_array_text(number, element, &chars, &mut at)?;
    Ok(literal.filter(|_| chars[at..].iter().all(|c| c.is_whitespace())))
}

/// One `{...}` at `chars[*at]`, moving `at` past it.
fn parse_array_text(number: usize, element: &Type, chars: &[char], at: &mut usize) -> Result<Option<String>> {
    if chars.get(*at) != Some(&'{') {
        return Ok(None);
    }
    *at += 1;
    let mut items = Vec::new();
    loop {
        while chars.get(*at).is_some_and(|c| c.is_whitespace()) {
            *at += 1;
        }
        match chars.get(*at) {
            None => return Ok(None),
            Some('}') if items.is_empty() => {
                *at += 1;
                return Ok(Some("make_array()".to_owned()));
            }
            Some('{') => match parse_array_text(number, element, chars, at)? {
                Some(inner) => items.push(inner),
                None => return Ok(None),
            },
            Some('"') => {
                *at += 1;
                let mut value = String::new();
                loop {
                    match chars.get(*at) {
                        None => return Ok(None),
                        Some('\\') => {
                            let Some(c) = chars.get(*at + 1) else { return Ok(None) };
                            value.push(*c);
                            *at += 2;
                        }
                        Some('"') => {
                            *at += 1;
                            break;
                        }
                        Some(c) => {
                            value.push(*c);
                            *at += 1;
                        }
                    }
                }
                items.push(literal(number, element, Some(value.as_bytes()), FieldFormat::Text)?);
            }
            Some(_) => {
                let start = *at;
                while chars.get(*at).is_some_and(|c| *c != ',' && *c != '}') {
                    *at += 1;
                }
                let value: String = chars[start..*at].iter().collect::<String>().trim().to_owned();
                items.push(if value.eq_ignore_ascii_case("null") {
                    "NULL".to_owned()
                } else {
                    literal(number, element, Some(value.as_bytes()), FieldFormat::Text)?
                });
            }
        }
        while chars.get(*at).is_some_and(|c| c.is_whitespace()) {
            *at += 1;
        }
        match chars.get(*at) {
            Some(',') => *at += 1,
            Some('}') => {
                *at += 1;
                return Ok(Some(format!("ARRAY[{}]", items.join(", "))));
            }
            _ => return Ok(None),
        }
    }
}

/// An array parameter in Postgres's binary form (dimensions, a null flag, the element OID,
/// each dimension's length and lower bound, then each element as its length and bytes, -1
/// for NULL) as `ARRAY[...]`; `None` when malformed.
fn binary_array_literal(number: usize, element: &Type, value: &[u8]) -> Option<Result<String>> {
    let mut rest = value;
    fn int(rest: &mut &[u8]) -> Option<i32> {
        let (head, tail) = rest.split_first_chunk::<4>()?;
        *rest = tail;
        Some(i32::from_be_bytes(*head))
    }
    let dims = usize::try_from(int(&mut rest)?).ok()?;
    let _has_null = int(&mut rest)?;
    let _oid = int(&mut rest)?;
    if dims == 0 {
        return Some(Ok("make_array()".to_owned()));
    }
    let mut lengths = Vec::with_capacity(dims);
    for _ in 0..dims {
        lengths.push(usize::try_from(int(&mut rest)?).ok()?);
        let _lower = int(&mut rest)?;
    }
    let total: usize = lengths.iter().product();
    let mut items = Vec::with_capacity(total);
    for _ in 0..total {
        let len = int(&mut rest)?;
        if len < 0 {
            items.push("NULL".to_owned());
            continue;
        }
        let len = usize::try_from(len).ok()?;
        let (item, tail) = (rest.get(..len)?, rest.get(len..)?);
        rest = tail;
        match binary_literal(number, element, item)? {
            Ok(l) => items.push(l),
            Err(e) => return Some(Err(e)),
        }
    }
    if !rest.is_empty() {
        return None;
    }
    // Rows of the last dimension nest inside the ones before.
    for len in lengths.iter().rev().take(dims - 1) {
        items = items.chunks(*len).map(|c| format!("ARRAY[{}]", c.join(", "))).collect();
    }
    Some(Ok(format!("ARRAY[{}]", items.join(", "))))
}

/// A number as SQL: in parentheses when negative.
fn number_literal(text: &str) -> String {
    if text.starts_with('-') {
        format!("({text})")
    } else {
        text.to_owned()
    }
}

/// A float as SQL: its digits when finite, else a cast of `NaN` / `Infinity` / `-Infinity`.
fn float_literal(value: f64, text: &str, ty: &Type) -> String {
    let sql_type = if *ty == Type::FLOAT4 {
        "REAL"
    } else {
        "DOUBLE"
    };
    if value.is_nan() {
        format!("CAST('NaN' AS {sql_type})")
    } else if value.is_infinite() {
        let sign = if value < 0.0 { "-" } else { "" };
        format!("CAST('{sign}Infinity' AS {sql_type})")
    } else {
        // Rust's float grammar only admits digits, signs, `.` and `e` in finite values.
        number_literal(text.trim_start_matches('+'))
    }
}

/// `'text'` with quotes doubled.
fn string_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// `CAST('text' AS sql_type)`.
fn cast_literal(text: &str, sql_type: &str) -> String {
    format!("CAST({} AS {sql_type})", string_literal(text))
}

/// `X'0a0b'`.
fn bytes_literal(bytes: &[u8]) -> String {
    let mut literal = String::with_capacity(3 + 2 * bytes.len());
    literal.push_str("X'");
    for byte in bytes {
        literal.push_str(&format!("{byte:02x}"));
    }
    literal.push('\'');
    literal
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `[+-]digits[.digits][e[+-]digits]` (or `.digits`): a number literal SQL reads as is.
fn is_decimal_number(text: &str) -> bool {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, Some(exponent)),
        None => (unsigned, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let exponent_ok = exponent.is_none_or(|e| {
        let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
        !digits.is_empty() && all_digits(digits)
    });
    !(int.is_empty() && frac.is_empty()) && all_digits(int) && all_digits(frac) && exponent_ok
}

/// The type the text around a placeholder gives it: `$1::type`, `CAST($1 AS type)`,
/// `LIMIT $1`, `OFFSET $1`.
fn type_from_context(sql: &str, range: &Range<usize>) -> Option<Type> {
    let after = sql[range.end..].trim_start();
    if let Some(name) = after.strip_prefix("::") {
        return type_from_name(name.trim_start());
    }
    let before = sql[..range.start].trim_end();
    if let Some(open) = before.strip_suffix('(') {
        if ends_with_keyword(open.trim_end(), "cast") {
            let rest = after.get(..2).filter(|kw| kw.eq_ignore_ascii_case("as"))?;
            return type_from_name(after[rest.len()..].trim_start());
        }
    }
    if ends_with_keyword(before, "limit") || ends_with_keyword(before, "offset") {
        return Some(Type::INT8);
    }
    None
}

/// Whether `text` ends with the word `keyword` (any case).
fn ends_with_keyword(text: &str, keyword: &str) -> bool {
    let Some(start) = text.len().checked_sub(keyword.len()) else {
        return false;
    };
    text.is_char_boundary(start)
        && text[start..].eq_ignore_ascii_case(keyword)
        && !text[..start].bytes().last().is_some_and(is_identifier_byte)
}

/// The Postgres type a SQL type name (Flink or Postgres spelling) at the start of `text` means.
fn type_from_name(text: &str) -> Option<Type> {
    let word_len = text
        .bytes()
        .take_while(|&b| b.is_ascii_alphanumeric() || b == b'_')
        .count();
    let word = text[..word_len].to_ascii_lowercase();
    let rest = text[word_len..].trim_start().to_ascii_lowercase();
    // `oid[]`, `int8[]`, ...: the array type of the element type.
    if rest.starts_with("[]") {
        let element = type_from_name(&text[..word_len])?;
        return crate::sql::types::array_type_of(&element);
    }
    Some(match word.as_str() {
        "oid" | "regtype" | "regclass" => Type::OID,
        "bool" | "boolean" => Type::BOOL,
        "tinyint" | "smallint" | "int2" => Type::INT2,
        "int" | "integer" | "int4" => Type::INT4,
        "bigint" | "int8" => Type::INT8,
        "real" | "float4" => Type::FLOAT4,
        "float" | "float8" | "double" => Type::FLOAT8,
        "decimal" | "numeric" | "dec" => Type::NUMERIC,
        "text" | "string" | "varchar" | "char" | "character" => Type::TEXT,
        "bytea" | "bytes" | "binary" | "varbinary" => Type::BYTEA,
        "date" => Type::DATE,
        "time" => Type::TIME,
        "timestamp" if rest.starts_with("with time zone") || rest.starts_with("with local") => {
            Type::TIMESTAMPTZ
        }
        "timestamp" => Type::TIMESTAMP,
        "timestamptz" | "timestamp_ltz" => Type::TIMESTAMPTZ,
        "interval" => Type::INTERVAL,
        _ => return None,
    })
}

fn is_identifier_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$' || byte >= 0x80
}

/// The index after the string or identifier quoted by `quote` that starts at `start`; a doubled
/// quote is part of it, and with `backslash_escapes` so is the byte after a backslash.
fn skip_quoted(bytes: &[u8], start: usize, quote: u8, backslash_escapes: bool) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        if backslash_escapes && bytes[i] == b'\\' {
            i += 2;
        } else if bytes[i] == quote {
            if bytes.get(i + 1) == Some(&quote) {
                i += 2;
            } else {
                return i + 1;
            }
        } else {
            i += 1;
        }
    }
    bytes.len()
}

/// The index after the `/* */` comment starting at `start`; comments nest, as in Postgres.
fn skip_block_comment(bytes: &[u8], start: usize) -> usize {
    let mut depth = 0;
    let mut i = start;
    while i + 1 < bytes.len() {
        match (bytes[i], bytes[i + 1]) {
            (b'/', b'*') => {
                depth += 1;
                i += 2;
            }
            (b'*', b'/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The index after the `$tag$...$tag$` string starting at `start`, or `start + 1` when the `$`
/// there does not open one.
fn skip_dollar_quoted(bytes: &[u8], start: usize) -> usize {
    let tag_len = bytes[start + 1..]
        .iter()
        .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80)
        .count();
    let tag_end = start + 1 + tag_len;
    if bytes.get(tag_end) != Some(&b'$') || bytes.get(start + 1).is_some_and(u8::is_ascii_digit) {
        return start + 1;
    }
    let tag = &bytes[start..=tag_end];
    bytes[tag_end + 1..]
        .windows(tag.len())
        .position(|window| window == tag)
        .map_or(bytes.len(), |p| tag_end + 1 + p + tag.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(sql: &str) -> Vec<usize> {
        placeholders(sql).into_iter().map(|p| p.number).collect()
    }

    fn bind_text(sql: &str, types: &[Type], values: &[Option<&str>]) -> Result<String> {
        bind(sql, types, values, &Format::UnifiedText)
    }

    #[test]
    fn placeholders_skip_strings_identifiers_and_comments() {
        assert_eq!(numbers("SELECT $1, $2 + $10"), [1, 2, 10]);
        assert_eq!(numbers("SELECT '$1', \"$2\", `$3`, $4"), [4]);
        assert_eq!(numbers("SELECT 'it''s $1', $2"), [2]);
        assert_eq!(numbers("SELECT E'\\' $1', $2"), [2]);
        assert_eq!(numbers("SELECT $$ $1 $$, $tag$ $2 $tag$, $3"), [3]);
        assert_eq!(
            numbers("SELECT 1 -- $1\n, $2 /* $3 /* $4 */ $5 */ , $6"),
            [2, 6]
        );
        assert_eq!(numbers("SELECT a$1, $1"), [1]);
        assert_eq!(numbers("SELECT 'unterminated $1"), Vec::<usize>::new());
    }

    #[test]
    fn types_come_from_declarations_then_context() {
        let sql = "SELECT $1, $2::BIGINT, CAST($3 AS timestamp with time zone), $4 LIMIT $5";
        let types = parameter_types(sql, &[None, None, None, Some(Type::INT4)]);
        assert_eq!(
            types,
            [
                Type::TEXT,
                Type::INT8,
                Type::TIMESTAMPTZ,
                Type::INT4,
                Type::INT8
            ]
        );
        assert_eq!(
            parameter_types("SELECT 1", &[Some(Type::BOOL)]),
            [Type::BOOL]
        );
    }

    #[test]
    fn text_values_become_literals() -> Result<()> {
        let sql = "SELECT $1, $2, $3, $4, $5";
        let types = [
            Type::TEXT,
            Type::INT8,
            Type::INT8,
            Type::BOOL,
            Type::NUMERIC,
        ];
        let bound = bind_text(
            sql,
            &types,
            &[Some("it's"), Some("42"), Some("-5"), None, Some("1.5")],
        )?;
        assert_eq!(bound, "SELECT 'it''s', 42, (-5), NULL, 1.5");
        let bound = bind_text("SELECT x-$1", &[Type::INT4], &[Some("-1")])?;
        assert_eq!(bound, "SELECT x-(-1)");
        let bound = bind_text(
            "SELECT $1",
            &[Type::TIMESTAMP],
            &[Some("2015-07-15 00:00:01")],
        )?;
        assert_eq!(bound, "SELECT CAST('2015-07-15 00:00:01' AS TIMESTAMP)");
        let bound = bind_text("SELECT $1", &[Type::BYTEA], &[Some("\\x0a0b")])?;
        assert_eq!(bound, "SELECT X'0a0b'");
        let bound = bind_text("SELECT $1, $1", &[Type::FLOAT8], &[Some("NaN")])?;
        assert_eq!(bound, "SELECT CAST('NaN' AS DOUBLE), CAST('NaN' AS DOUBLE)");
        Ok(())
    }

    #[test]
    fn bad_values_are_refused() {
        let err = bind_text("SELECT $1", &[Type::INT8], &[Some("1; DROP TABLE t")]).unwrap_err();
        assert_eq!(err.sqlstate(), "22P02");
        let err = bind_text("SELECT $1", &[Type::NUMERIC], &[Some("1)--")]).unwrap_err();
        assert_eq!(err.sqlstate(), "22P02");
        let err = bind_text("SELECT $1, $2", &[Type::TEXT], &[Some("a")]).unwrap_err();
        assert_eq!(err.sqlstate(), "42P02");
        let err = bind_text("SELECT $1", &[Type::TEXT], &[]).unwrap_err();
        assert_eq!(err.sqlstate(), "08P01");
        let err = bind_text("SELECT $0", &[], &[]).unwrap_err();
        assert_eq!(err.sqlstate(), "42P02");
        assert!(bind_text("SELECT $1", &[Type::INT4_ARRAY], &[Some("{1,x}")]).is_err());
        assert!(bind_text("SELECT $1", &[Type::INT4_ARRAY], &[Some("{1,2")]).is_err());
    }

    /// Arrays in Postgres's text form: quoted elements with escapes, NULL, nesting, empty.
    #[test]
    fn text_arrays_become_array_literals() -> Result<()> {
        let bound = bind_text(
            "SELECT $1, $2, $3",
            &[Type::TEXT_ARRAY, Type::INT4_ARRAY, Type::INT4_ARRAY],
            &[Some(r#"{r,"p q","a\"b",NULL}"#), Some("{{1,2},{3,-4}}"), Some("{}")],
        )?;
        assert_eq!(bound, r#"SELECT ARRAY['r', 'p q', 'a"b', NULL], ARRAY[ARRAY[1, 2], ARRAY[3, (-4)]], make_array()"#);
        Ok(())
    }

    #[test]
    fn binary_values_become_literals() -> Result<()> {
        let bind_binary = |ty: Type, value: &[u8]| {
            bind("SELECT $1", &[ty], &[Some(value)], &Format::UnifiedBinary)
        };
        assert_eq!(
            bind_binary(Type::INT8, &(-7i64).to_be_bytes())?,
            "SELECT (-7)"
        );
        assert_eq!(bind_binary(Type::INT4, &7i32.to_be_bytes())?, "SELECT 7");
        assert_eq!(
            bind_binary(Type::FLOAT8, &0.1f64.to_be_bytes())?,
            "SELECT 0.1"
        );
        assert_eq!(bind_binary(Type::BOOL, &[1])?, "SELECT TRUE");
        assert_eq!(bind_binary(Type::TEXT, b"a'b")?, "SELECT 'a''b'");
        assert_eq!(bind_binary(Type::BYTEA, &[0x0a, 0x0b])?, "SELECT X'0a0b'");
        assert_eq!(
            bind_binary(Type::TIMESTAMP, &500_000i64.to_be_bytes())?,
            "SELECT CAST('2000-01-01 00:00:00.500' AS TIMESTAMP)"
        );
        assert_eq!(
            bind_binary(Type::DATE, &(-1i32).to_be_bytes())?,
            "SELECT CAST('1999-12-31' AS DATE)"
        );
        // numeric 1761.520: 2 digits, weight 0, positive, scale 3, [1761, 5200]
        let numeric = [0, 2, 0, 0, 0, 0, 0, 3, 0x06, 0xe1, 0x14, 0x50];
        assert_eq!(bind_binary(Type::NUMERIC, &numeric)?, "SELECT 1761.520");
        // numeric -0.05: 1 digit, weight -1, negative, scale 2, [500]
        let numeric = [0, 1, 0xff, 0xff, 0x40, 0, 0, 2, 0x01, 0xf4];
        assert_eq!(bind_binary(Type::NUMERIC, &numeric)?, "SELECT (-0.05)");
        assert_eq!(
            bind_binary(Type::INT8, &[1, 2]).unwrap_err().sqlstate(),
            "22P02"
        );
        assert_eq!(
            bind_binary(Type::INT4_ARRAY, &[]).unwrap_err().sqlstate(),
            "22P02"
        );
        // int8[] {1, NULL, 3}: 1 dimension, has nulls, OID 20, length 3 from 1, elements.
        let mut array = Vec::new();
        for word in [1i32, 1, 20, 3, 1] {
            array.extend_from_slice(&word.to_be_bytes());
        }
        array.extend_from_slice(&8i32.to_be_bytes());
        array.extend_from_slice(&1i64.to_be_bytes());
        array.extend_from_slice(&(-1i32).to_be_bytes());
        array.extend_from_slice(&8i32.to_be_bytes());
        array.extend_from_slice(&3i64.to_be_bytes());
        assert_eq!(bind_binary(Type::INT8_ARRAY, &array)?, "SELECT ARRAY[1, NULL, 3]");
        Ok(())
    }
}
