//! More of Flink's string and collection functions that DataFusion lacks (Flink docs, String
//! and Collection Functions), each as Flink's Java code computes it:
//!
//! - `HEX(n)`: an integer's two's-complement hexadecimal digits, upper case (Java's
//!   `Long.toHexString`: `HEX(-1)` is `FFFFFFFFFFFFFFFF`); `HEX(s)`: the hexadecimal of the
//!   string's UTF-8 bytes, upper case.
//! - `BIN(n)`: an integer's two's-complement binary digits (Java's `Long.toBinaryString`).
//! - `HASH_CODE(s)`: Java's `String.hashCode()`, an INT over the UTF-16 code units.
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
//! NULL in, NULL out.

use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, AsArray, BooleanBuilder, Int32Builder, ListBuilder, MapBuilder, MapFieldNames, StringBuilder, UInt64Array};
use arrow::datatypes::{DataType, Field};
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{as_integer_type, as_string_type, num_rows, IntArg, StrArg};

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
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = self.usage();
        let strings = |n: std::ops::RangeInclusive<usize>| -> Result<Vec<DataType>> {
            if !n.contains(&arg_types.len()) {
                return plan_err!("{usage}: wrong number of arguments ({})", arg_types.len());
            }
            arg_types
                .iter()
                .map(|t| match as_string_type(t) {
                    Some(s) => Ok(s),
                    None => plan_err!("{usage}: expected strings, got {t}"),
                })
                .collect()
        };
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
            (Kind::HashCode | Kind::UrlEncode | Kind::UrlDecode, _) => strings(1..=1),
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
            Kind::Regexp => DataType::Boolean,
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
                    out.append_option(s.get(i).map(java_hash_code));
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
