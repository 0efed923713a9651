//! More of Flink's string and collection functions that DataFusion lacks (Flink docs, String
//! and Collection Functions), each as Flink's Java code computes it:
//!
//! - `HEX(n)`: an integer's two's-complement hexadecimal digits, upper case (Java's
//!   `Long.toHexString`: `HEX(-1)` is `FFFFFFFFFFFFFFFF`); `HEX(s)`: the hexadecimal of the
//!   string's UTF-8 bytes, upper case.
//! - `BIN(n)`: an integer's two's-complement binary digits (Java's `Long.toBinaryString`).
//! - `HASH_CODE(s)`: the absolute value of Java's `String.hashCode()` (an INT over the UTF-16
//!   code units), as Flink's `SqlFunctionUtils.hashCode` computes it: `Math.abs`, so a hash of
//!   `Integer.MIN_VALUE` stays negative.
//! - `URL_ENCODE(s)` / `URL_DECODE(s)`: `application/x-www-form-urlencoded` in UTF-8, as Java's
//!   `URLEncoder` / `URLDecoder` (space is `+`; letters, digits and `.-*_` stay); a malformed
//!   escape decodes to NULL (Flink's rule).
//! - `SPLIT(s, delimiter)`: an `ARRAY<STRING>` of the parts between delimiters (empty parts
//!   kept); an empty delimiter splits into characters.
//! - `STR_TO_MAP(s [, list delimiter, key-value delimiter])`: a `MAP<STRING, STRING>` (defaults
//!   `,` and `=`, both regular expressions as in Flink); an entry without the key-value
//!   delimiter has a NULL value; a repeated key keeps its last value; an empty text is an empty
//!   map.
//! - `ELEMENT(array)`: the only element of an array, NULL for an empty one; an array of more
//!   than one element is an error (Flink's).
//! - `REGEXP(s, regex)`: whether some substring of `s` matches `regex` (Flink's
//!   `SqlFunctionUtils.regExp`): FALSE for an empty regex or one that does not compile. The
//!   regex is Rust's `regex` syntax, Java's without backreferences and lookaround.
//!
//! - `IS_ALPHA(s)`, `IS_DIGIT(s)`, `IS_DECIMAL(s)` (Flink's `SqlFunctionUtils.isAlpha`,
//!   `isDigit`, `isDecimal`): whether `s` is all letters (`Character.isLetter`), all digits
//!   (`Character.isDigit`), or a number Java's `Integer.parseInt`, `Long.parseLong` or
//!   `Double.parseDouble` reads (`1e3`, ` 2.5 `, `-.5`, `1.5f`, `NaN`, `0x1p3`); FALSE for an
//!   empty string and for NULL (not NULL: Flink's rule).
//! - `JSON_QUOTE(s)`: `s` as a JSON string literal, quotes added, `"`, `\`, `/`, `\b`, `\f`,
//!   `\n`, `\r`, `\t` escaped and every character past ASCII as `\uXXXX` (lower-case hex;
//!   Flink 2.0's `JsonQuoteFunction`); other control characters stay as they are, as in Flink.
//!   A character past U+FFFF is its UTF-16 surrogate pair (`\ud83d\ude00`), valid JSON, where
//!   Flink writes its code point and then its low surrogate. `JSON_UNQUOTE(s)`: a JSON string literal's value; anything else (not
//!   quoted, or not a valid literal) comes back as it is (Flink's `JsonUnquoteFunction`).
//! - `ELT(index, s1, s2, ..)`: the `index`-th string, from 1; NULL when `index` is NULL or out
//!   of range (Flink 2.0).
//! - `UNHEX(s)`: the bytes of hexadecimal digits `s`, read in pairs from the end; of an odd
//!   number of digits the first is checked but dropped and a zero byte takes its place
//!   (`UNHEX('ABC')` is `\x00bc`, Flink 2.0's `UnhexFunction`); NULL for a character that is
//!   not a hexadecimal digit.
//!
//! NULL in, NULL out, but for the IS_ functions.

use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, AsArray, BooleanBuilder, Int32Builder, ListBuilder, MapBuilder, MapFieldNames, StringBuilder, UInt64Array};
use arrow::datatypes::{DataType, Field};
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{all_strings, as_integer_type, as_string_type, num_rows, IntArg, StrArg};

/// Which function a [`FlinkText`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Hex,
    Bin,
    HashCode,
    UrlEncode,
    UrlDecode,
    Split,
    StrToMap,
    Element,
    Regexp,
    IsAlpha,
    IsDigit,
    IsDecimal,
    JsonQuote,
    JsonUnquote,
    Elt,
    Unhex,
}

/// One of the functions of this module.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct FlinkText {
    signature: Signature,
    kind: Kind,
}

impl FlinkText {
    /// Every function of this module.
    pub(super) fn all() -> Vec<Self> {
        [
            Kind::Hex,
            Kind::Bin,
            Kind::HashCode,
            Kind::UrlEncode,
            Kind::UrlDecode,
            Kind::Split,
            Kind::StrToMap,
            Kind::Element,
            Kind::Regexp,
            Kind::IsAlpha,
            Kind::IsDigit,
            Kind::IsDecimal,
            Kind::JsonQuote,
            Kind::JsonUnquote,
            Kind::Elt,
            Kind::Unhex,
        ]
            .into_iter()
            .map(|kind| Self { signature: Signature::user_defined(Volatility::Immutable), kind })
            .collect()
    }

    fn usage(&self) -> &'static str {
        match self.kind {
            Kind::Hex => "HEX(integer or string)",
            Kind::Bin => "BIN(integer)",
            Kind::HashCode => "HASH_CODE(string)",
            Kind::UrlEncode => "URL_ENCODE(string)",
            Kind::UrlDecode => "URL_DECODE(string)",
            Kind::Split => "SPLIT(string, delimiter)",
            Kind::StrToMap => "STR_TO_MAP(string [, list delimiter, key-value delimiter])",
            Kind::Element => "ELEMENT(array)",
            Kind::Regexp => "REGEXP(string, regex)",
            Kind::IsAlpha => "IS_ALPHA(string)",
            Kind::IsDigit => "IS_DIGIT(string)",
            Kind::IsDecimal => "IS_DECIMAL(string)",
            Kind::JsonQuote => "JSON_QUOTE(string)",
            Kind::JsonUnquote => "JSON_UNQUOTE(string)",
            Kind::Elt => "ELT(index, string, ..)",
            Kind::Unhex => "UNHEX(string)",
        }
    }
}

/// `MAP<STRING, STRING>` as Weir spells a map type ([`crate::sql::types`]).
fn string_map_type() -> DataType {
    let entries = DataType::Struct(
        vec![Field::new("key", DataType::Utf8, false), Field::new("value", DataType::Utf8, true)].into(),
    );
    DataType::Map(Arc::new(Field::new("entries", entries, false)), false)
}

impl ScalarUDFImpl for FlinkText {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Hex => "hex",
            Kind::Bin => "bin",
            Kind::HashCode => "hash_code",
            Kind::UrlEncode => "url_encode",
            Kind::UrlDecode => "url_decode",
            Kind::Split => "split",
            Kind::StrToMap => "str_to_map",
            Kind::Element => "element",
            Kind::Regexp => "regexp",
            Kind::IsAlpha => "is_alpha",
            Kind::IsDigit => "is_digit",
            Kind::IsDecimal => "is_decimal",
            Kind::JsonQuote => "json_quote",
            Kind::JsonUnquote => "json_unquote",
            Kind::Elt => "elt",
            Kind::Unhex => "unhex",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = self.usage();
        let strings = |arity: std::ops::RangeInclusive<usize>| all_strings(usage, arg_types, arity);
        match (self.kind, arg_types) {
            (Kind::Hex, [t]) => match (as_integer_type(t), as_string_type(t)) {
                (Some(i), _) if *t != DataType::Null => Ok(vec![i]),
                (_, Some(s)) => Ok(vec![s]),
                _ => plan_err!("{usage}: got {t}"),
            },
            (Kind::Bin, [t]) => match as_integer_type(t) {
                Some(i) => Ok(vec![i]),
                None => plan_err!("{usage}: got {t}"),
            },
            (Kind::HashCode | Kind::UrlEncode | Kind::UrlDecode | Kind::IsAlpha | Kind::IsDigit | Kind::IsDecimal, _) => strings(1..=1),
            (Kind::JsonQuote | Kind::JsonUnquote | Kind::Unhex, _) => strings(1..=1),
            (Kind::Elt, [index, rest @ ..]) if !rest.is_empty() => {
                let Some(index) = as_integer_type(index) else { return plan_err!("{usage}: the index must be an integer, got {index}") };
                let mut out = vec![index];
                for t in rest {
                    match as_string_type(t) {
                        Some(s) => out.push(s),
                        None => return plan_err!("{usage}: expected strings, got {t}"),
                    }
                }
                Ok(out)
            }
            (Kind::Split | Kind::Regexp, _) => strings(2..=2),
            (Kind::StrToMap, _) if arg_types.len() != 2 => strings(1..=3),
            (Kind::StrToMap, _) => plan_err!("{usage}: give both delimiters or neither"),
            (Kind::Element, [t @ (DataType::List(_) | DataType::LargeList(_))]) => Ok(vec![t.clone()]),
            (Kind::Element, [DataType::Null]) => Ok(vec![DataType::Null]),
            _ => plan_err!("{usage}: got {}", arg_types.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
        }
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(match self.kind {
            Kind::HashCode => DataType::Int32,
            Kind::Regexp | Kind::IsAlpha | Kind::IsDigit | Kind::IsDecimal => DataType::Boolean,
            Kind::Unhex => DataType::Binary,
            Kind::Split => DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true))),
            Kind::StrToMap => string_map_type(),
            Kind::Element => match arg_types.first() {
                Some(DataType::List(f) | DataType::LargeList(f)) => f.data_type().clone(),
                _ => DataType::Null,
            },
            _ => DataType::Utf8,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let out: ArrayRef = match self.kind {
            Kind::Hex if args.args[0].data_type() == DataType::Int64 => {
                let ints = IntArg::new(&args.args[0])?;
                strings_of(n, |i| ints.get(i).map(|v| format!("{v:X}")))
            }
            Kind::Bin => {
                let ints = IntArg::new(&args.args[0])?;
                strings_of(n, |i| ints.get(i).map(|v| format!("{v:b}")))
            }
            Kind::Hex => {
                let s = StrArg::new(&args.args[0])?;
                strings_of(n, |i| s.get(i).map(|v| v.bytes().map(|b| format!("{b:02X}")).collect()))
            }
            Kind::UrlEncode => {
                let s = StrArg::new(&args.args[0])?;
                strings_of(n, |i| s.get(i).map(url_encode))
            }
            Kind::UrlDecode => {
                let s = StrArg::new(&args.args[0])?;
                strings_of(n, |i| s.get(i).and_then(url_decode))
            }
            Kind::HashCode => {
                let s = StrArg::new(&args.args[0])?;
                let mut out = Int32Builder::with_capacity(n);
                for i in 0..n {
                    out.append_option(s.get(i).map(|s| java_hash_code(s).wrapping_abs()));
                }
                Arc::new(out.finish())
            }
            Kind::Split => {
                let (s, delimiter) = (StrArg::new(&args.args[0])?, StrArg::new(&args.args[1])?);
                let mut out = ListBuilder::new(StringBuilder::new());
                for i in 0..n {
                    match (s.get(i), delimiter.get(i)) {
                        (Some(s), Some(d)) => {
                            for part in split(s, d) {
                                out.values().append_value(part);
                            }
                            out.append(true);
                        }
                        _ => out.append(false),
                    }
                }
                Arc::new(out.finish())
            }
            Kind::StrToMap => str_to_map(n, &args.args)?,
            Kind::Regexp => {
                let (s, pattern) = (StrArg::new(&args.args[0])?, StrArg::new(&args.args[1])?);
                let mut out = BooleanBuilder::with_capacity(n);
                // The last row's pattern, compiled again only when it changes (None: does not compile).
                let mut compiled: Option<(&str, Option<regex::Regex>)> = None;
                for i in 0..n {
                    let (Some(s), Some(p)) = (s.get(i), pattern.get(i)) else {
                        out.append_null();
                        continue;
                    };
                    if compiled.as_ref().is_none_or(|(last, _)| *last != p) {
                        compiled = Some((p, (!p.is_empty()).then(|| regex::Regex::new(p).ok()).flatten()));
                    }
                    out.append_value(compiled.as_ref().and_then(|(_, r)| r.as_ref()).is_some_and(|r| r.is_match(s)));
                }
                Arc::new(out.finish())
            }
            Kind::Element => element(n, &args.args[0])?,
            Kind::IsAlpha | Kind::IsDigit | Kind::IsDecimal => {
                let s = StrArg::new(&args.args[0])?;
                let test: fn(&str) -> bool = match self.kind {
                    Kind::IsAlpha => |s| !s.is_empty() && s.chars().all(char::is_alphabetic),
                    Kind::IsDigit => |s| !s.is_empty() && s.chars().all(is_digit),
                    _ => java_number,
                };
                let mut out = BooleanBuilder::with_capacity(n);
                for i in 0..n {
                    out.append_value(s.get(i).is_some_and(test));
                }
                Arc::new(out.finish())
            }
            Kind::JsonQuote => {
                let s = StrArg::new(&args.args[0])?;
                strings_of(n, |i| s.get(i).map(json_quote))
            }
            Kind::JsonUnquote => {
                let s = StrArg::new(&args.args[0])?;
                strings_of(n, |i| s.get(i).map(json_unquote))
            }
            Kind::Elt => {
                let index = IntArg::new(&args.args[0])?;
                let choices = args.args[1..].iter().map(StrArg::new).collect::<Result<Vec<_>>>()?;
                strings_of(n, |i| {
                    let k = usize::try_from(index.get(i)?).ok()?.checked_sub(1)?;
                    choices.get(k)?.get(i).map(str::to_string)
                })
            }
            Kind::Unhex => {
                let s = StrArg::new(&args.args[0])?;
                let mut out = arrow::array::BinaryBuilder::with_capacity(n, 0);
                for i in 0..n {
                    out.append_option(s.get(i).and_then(unhex));
                }
                Arc::new(out.finish())
            }
        };
        Ok(ColumnarValue::Array(out))
    }
}

/// A string column of `n` rows from `f`.
fn strings_of(n: usize, f: impl Fn(usize) -> Option<String>) -> ArrayRef {
    let mut out = StringBuilder::with_capacity(n, 0);
    for i in 0..n {
        out.append_option(f(i));
    }
    Arc::new(out.finish())
}

/// Java's `String.hashCode()`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code units, wrapping.
fn java_hash_code(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// The value of decimal digit `c` of any common script (Java's `Character.digit(c, 10)`, whose
/// digits are Unicode's `Nd`: ASCII, Arabic-Indic, Devanagari, Bengali, Thai, fullwidth, ..;
/// Rust's `char::to_digit` knows ASCII only). Each script's digits are ten code points from
/// its zero.
fn digit_value(c: char) -> Option<u32> {
    const ZEROS: [u32; 24] = [
        0x0030, 0x0660, 0x06F0, 0x07C0, 0x0966, 0x09E6, 0x0A66, 0x0AE6, 0x0B66, 0x0BE6, 0x0C66, 0x0CE6, 0x0D66, 0x0DE6,
        0x0E50, 0x0ED0, 0x0F20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x19D0, 0xFF10, 0x1D7CE,
    ];
    let c = u32::from(c);
    ZEROS.iter().find(|zero| (**zero..*zero + 10).contains(&c)).map(|zero| c - zero)
}

/// Java's `Character.isDigit`, for the scripts [`digit_value`] knows.
fn is_digit(c: char) -> bool {
    digit_value(c).is_some()
}

/// Whether Java's `Integer.parseInt`, `Long.parseLong` or `Double.parseDouble` reads `s`
/// (Flink's `isDecimal`): the last trims characters up to U+0020 and takes an optional sign,
/// then `NaN`, `Infinity`, a decimal number with an optional exponent, or a hexadecimal one
/// with a binary exponent, each with an optional `f`, `F`, `d` or `D` after it.
fn java_number(s: &str) -> bool {
    static DOUBLE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"^[+-]?(NaN|Infinity|(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)|(0[xX]([0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+[fFdD]?))$",
        )
        .expect("a valid regex")
    });
    // Long.parseLong: a sign, then digits of any script, within the range of a long.
    let integer = |s: &str| {
        let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
        let value = digits.chars().try_fold(0i128, |v, c| Some(v * 10 + i128::from(digit_value(c)?)).filter(|v| *v <= 1 << 63));
        !digits.is_empty() && value.is_some_and(|v| v < 1 << 63 || s.starts_with('-'))
    };
    let trimmed = s.trim_matches(|c: char| c <= ' ');
    integer(s) || (!trimmed.is_empty() && DOUBLE.is_match(trimmed))
}

/// `JSON_QUOTE`: `s` as a JSON string literal, escaped as Flink 2.0's `JsonQuoteFunction`.
fn json_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_ascii() => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

/// `JSON_UNQUOTE`: the value of JSON string literal `s`, or `s` itself when it is not one.
fn json_unquote(s: &str) -> String {
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        if let Ok(serde_json::Value::String(value)) = serde_json::from_str::<serde_json::Value>(s) {
            return value;
        }
    }
    s.to_string()
}

/// `UNHEX`: the bytes of hexadecimal digits `s` (Flink's `UnhexFunction`: pairs from the end;
/// an odd first digit is checked and left as a zero byte); `None` for any other character.
fn unhex(s: &str) -> Option<Vec<u8>> {
    let digit = |b: u8| char::from(b).to_digit(16).filter(|_| b.is_ascii()).map(|d| d as u8);
    let bytes = s.as_bytes();
    let odd = bytes.len() % 2;
    if odd == 1 {
        digit(bytes[0])?;
    }
    let mut out = vec![0u8; odd];
    for pair in bytes[odd..].chunks(2) {
        out.push(digit(pair[0])? << 4 | digit(pair[1])?);
    }
    Some(out)
}

/// Java's `URLEncoder.encode(s, UTF_8)`.
fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => out.push(char::from(b)),
            b' ' => out.push('+'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// Java's `URLDecoder.decode(s, UTF_8)`; `None` for a `%` not followed by two hexadecimal
/// digits. Bytes that are not UTF-8 become U+FFFD, as Java decodes them.
fn url_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
                i += 2;
            }
            other => out.push(other),
        }
        i += 1;
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// The parts of `s` between `delimiter`s; each character for an empty delimiter.
fn split<'a>(s: &'a str, delimiter: &str) -> Vec<&'a str> {
    if delimiter.is_empty() {
        return s.char_indices().map(|(at, c)| &s[at..at + c.len_utf8()]).collect();
    }
    s.split(delimiter).collect()
}

/// `STR_TO_MAP` of every row.
fn str_to_map(n: usize, args: &[ColumnarValue]) -> Result<ArrayRef> {
    let text = StrArg::new(&args[0])?;
    let delimiters = match args {
        [_, list, pair] => Some((StrArg::new(list)?, StrArg::new(pair)?)),
        _ => None,
    };
    let names = MapFieldNames { entry: "entries".into(), key: "key".into(), value: "value".into() };
    let mut out = MapBuilder::new(Some(names), StringBuilder::new(), StringBuilder::new());
    // The patterns of the last row, compiled again only when they change.
    let mut compiled: Option<(String, String, regex::Regex, regex::Regex)> = None;
    for i in 0..n {
        let (list, pair) = match &delimiters {
            Some((l, p)) => (l.get(i), p.get(i)),
            None => (Some(","), Some("=")),
        };
        let (Some(s), Some(list), Some(pair)) = (text.get(i), list, pair) else {
            out.append(false)?;
            continue;
        };
        if !compiled.as_ref().is_some_and(|(l, p, ..)| l == list && p == pair) {
            let regex = |p: &str| regex::Regex::new(p).map_err(|e| datafusion::error::DataFusionError::Execution(format!("STR_TO_MAP: delimiter {p:?}: {e}")));
            compiled = Some((list.to_string(), pair.to_string(), regex(list)?, regex(pair)?));
        }
        // Flink's strToMap: an empty text is an empty map.
        if s.is_empty() {
            out.append(true)?;
            continue;
        }
        let (.., list_re, pair_re) = compiled.as_ref().expect("compiled above");
        // Java's split drops trailing empty strings; a HashMap keeps each key's last value.
        let mut parts: Vec<&str> = list_re.split(s).collect();
        while parts.len() > 1 && parts.last() == Some(&"") {
            parts.pop();
        }
        let mut entries: Vec<(&str, Option<&str>)> = Vec::new();
        for entry in parts {
            let mut kv = pair_re.splitn(entry, 2);
            let key = kv.next().unwrap_or_default();
            let value = kv.next();
            match entries.iter_mut().find(|(k, _)| *k == key) {
                Some(e) => e.1 = value,
                None => entries.push((key, value)),
            }
        }
        for (key, value) in entries {
            out.keys().append_value(key);
            out.values().append_option(value);
        }
        out.append(true)?;
    }
    Ok(Arc::new(out.finish()))
}

/// `ELEMENT` of every row.
fn element(n: usize, arg: &ColumnarValue) -> Result<ArrayRef> {
    let lists = arg.to_array(n)?;
    let (offsets, values): (Vec<(usize, usize)>, ArrayRef) = match lists.data_type() {
        DataType::List(_) => {
            let l = lists.as_list::<i32>();
            ((0..n).map(|i| (l.value_offsets()[i] as usize, l.value_length(i) as usize)).collect(), Arc::clone(l.values()))
        }
        DataType::LargeList(_) => {
            let l = lists.as_list::<i64>();
            ((0..n).map(|i| (l.value_offsets()[i] as usize, l.value_length(i) as usize)).collect(), Arc::clone(l.values()))
        }
        _ => return Ok(new_null_array(&DataType::Null, n)),
    };
    let mut take = Vec::with_capacity(n);
    for (i, (start, len)) in offsets.into_iter().enumerate() {
        match len {
            _ if lists.is_null(i) => take.push(None),
            0 => take.push(None),
            1 => take.push(Some(start as u64)),
            more => return exec_err!("ELEMENT of an array of {more} elements: it takes an array of at most one"),
        }
    }
    Ok(arrow::compute::take(values.as_ref(), &UInt64Array::from(take), None)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_string_functions() {
        assert_eq!(java_hash_code(""), 0);
        assert_eq!(java_hash_code("abc"), 96354);
        // 31^7 * 'h' + ... wraps as Java's int does.
        assert_eq!(java_hash_code("hello world"), 1794106052);
        assert_eq!(java_hash_code("€"), 8364);
        assert_eq!(url_encode("a b&c=d/é*~"), "a+b%26c%3Dd%2F%C3%A9*%7E");
        assert_eq!(url_decode("a+b%26c%3Dd%2F%C3%A9*%7E").as_deref(), Some("a b&c=d/é*~"));
        assert_eq!(url_decode("100%"), None);
        assert_eq!(url_decode("%zz"), None);
        assert_eq!(split("a,,b", ","), vec!["a", "", "b"]);
        assert_eq!(split("aé", ""), vec!["a", "é"]);
        assert_eq!(format!("{:X}", -1i64), "FFFFFFFFFFFFFFFF");
        assert_eq!(format!("{:b}", -2i64).len(), 64);
    }
}
