//! Flink's string functions that DataFusion lacks (Flink docs, String Functions):
//!
//! - `TO_BASE64(string)`: the base64 (RFC 2045 alphabet, padded, as Java's `Base64.getEncoder`)
//!   of the string's UTF-8 bytes.
//! - `FROM_BASE64(string)`: the string whose UTF-8 bytes `string` encodes, padded or not (as
//!   Java's `Base64.getDecoder` reads it); bytes that are not
//!   UTF-8 become U+FFFD, as Java's `new String(bytes, UTF_8)` makes them. Text that is not
//!   base64 gives NULL (Flink fails the job on it: here one bad row does not stop a pipeline).
//! - `LOCATE(needle, haystack [, from])`: the 1-based character position of the first `needle`
//!   in `haystack` at or after position `from` (default 1; below 1 counts as 1), 0 when there is
//!   none; an INT (Flink's `SqlFunctionUtils.position`: `haystack.indexOf(needle, from - 1) + 1`).
//!
//! NULL in, NULL out.

use std::sync::Arc;

use arrow::array::{Int32Builder, StringBuilder};
use arrow::datatypes::DataType;
use base64::Engine as _;
use datafusion::common::plan_err;
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{as_integer_type, as_string_type, num_rows, IntArg, StrArg};

/// `TO_BASE64` (`decode: false`) or `FROM_BASE64`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Base64 {
    signature: Signature,
    decode: bool,
}

impl Base64 {
    pub(super) fn new(decode: bool) -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable), decode }
    }
}

impl ScalarUDFImpl for Base64 {
    fn name(&self) -> &str {
        if self.decode {
            "from_base64"
        } else {
            "to_base64"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let name = self.name().to_uppercase();
        match arg_types {
            [t] => match as_string_type(t) {
                Some(s) => Ok(vec![s]),
                None => plan_err!("{name}(string): the argument must be a string, got {t}"),
            },
            _ => plan_err!("{name}(string) takes one argument, got {}", arg_types.len()),
        }
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let strings = StrArg::new(&args.args[0])?;
        // Java's decoder takes the padding or not; its encoder writes it.
        let engine = base64::engine::GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            base64::engine::GeneralPurposeConfig::new().with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
        );
        let mut out = StringBuilder::with_capacity(n, 0);
        for i in 0..n {
            match strings.get(i) {
                None => out.append_null(),
                Some(s) if self.decode => match engine.decode(s) {
                    Ok(bytes) => out.append_value(String::from_utf8_lossy(&bytes)),
                    Err(_) => out.append_null(),
                },
                Some(s) => out.append_value(engine.encode(s)),
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// `LOCATE(needle, haystack [, from])`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Locate {
    signature: Signature,
}

impl Locate {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for Locate {
    fn name(&self) -> &str {
        "locate"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = "LOCATE(needle, haystack [, from])";
        let (strings, from) = match arg_types {
            [a, b] => ([a, b], None),
            [a, b, c] => ([a, b], Some(c)),
            _ => return plan_err!("{usage} takes 2 or 3 arguments, got {}", arg_types.len()),
        };
        let mut out = Vec::with_capacity(3);
        for t in strings {
            match as_string_type(t) {
                Some(s) => out.push(s),
                None => return plan_err!("{usage}: the needle and the haystack must be strings, got {t}"),
            }
        }
        if let Some(t) = from {
            match as_integer_type(t) {
                Some(i) => out.push(i),
                None => return plan_err!("{usage}: the position must be an integer, got {t}"),
            }
        }
        Ok(out)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let needles = StrArg::new(&args.args[0])?;
        let haystacks = StrArg::new(&args.args[1])?;
        let froms = args.args.get(2).map(IntArg::new).transpose()?;
        let mut out = Int32Builder::with_capacity(n);
        for i in 0..n {
            let from = match &froms {
                Some(f) => f.get(i),
                None => Some(1),
            };
            match (needles.get(i), haystacks.get(i), from) {
                (Some(needle), Some(haystack), Some(from)) => out.append_value(locate(needle, haystack, from)),
                _ => out.append_null(),
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// The 1-based character position of `needle` in `haystack` at or after `from`, or 0 (Java's
/// `indexOf(needle, from - 1) + 1`: a start past the end finds only the empty string, at the end).
fn locate(needle: &str, haystack: &str, from: i64) -> i32 {
    let skip = usize::try_from(from.saturating_sub(1)).unwrap_or(0).min(haystack.chars().count());
    let start = haystack.char_indices().nth(skip).map_or(haystack.len(), |(at, _)| at);
    match haystack[start..].find(needle) {
        Some(at) => i32::try_from(skip + haystack[start..start + at].chars().count() + 1).unwrap_or(i32::MAX),
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_counts_characters_from_one() {
        assert_eq!(locate("b", "abc", 1), 2);
        assert_eq!(locate("x", "abc", 1), 0);
        assert_eq!(locate("a", "abca", 2), 4);
        assert_eq!(locate("a", "abca", -3), 1);
        assert_eq!(locate("é", "aéé", 3), 3);
        assert_eq!(locate("", "abc", 4), 4);
        assert_eq!(locate("a", "abc", 9), 0);
        assert_eq!(locate("", "abc", 9), 4);
    }
}

/// `weir_substring(s, pos [, len])`: `SUBSTRING(s FROM pos [FOR len])` / `SUBSTR(s, pos [,
/// len])` as Flink's `BinaryStringDataUtil.substringSQL` computes it, in characters: a position
/// from 1; 0 is the first character too, and a negative one counts from the end
/// (`SUBSTRING('hello', -3, 2)` is `ll`); past the end, or before the start, an empty string; a
/// negative length is NULL. The SUBSTRING syntax is rewritten into it
/// ([`crate::sql::query_rewrites`]); DataFusion's `substr` is Postgres's (position 0 takes one
/// character less, a negative length fails).
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Substring {
    signature: Signature,
}

impl Substring {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

/// The characters of `s` from 0-based character `start`, at most `len` of them.
fn char_range(s: &str, start: usize, len: usize) -> &str {
    let mut indices = s.char_indices().map(|(i, _)| i).chain(std::iter::once(s.len())).skip(start);
    let Some(from) = indices.next() else { return "" };
    let to = if len == 0 { from } else { indices.nth(len - 1).unwrap_or(s.len()) };
    &s[from..to]
}

/// Flink's `substringSQL` of `s` (`len` `None`: to the end); `None` is NULL.
fn flink_substring(s: &str, pos: i64, len: Option<i64>) -> Option<&str> {
    if len.is_some_and(|l| l < 0) {
        return None;
    }
    let chars = s.chars().count() as i64;
    let start = match pos {
        p if p > 0 => p - 1,
        p if p < 0 => chars + p,
        _ => 0,
    };
    if start < 0 || start >= chars {
        return Some("");
    }
    let len = len.unwrap_or(i64::MAX).min(chars - start);
    Some(char_range(s, start as usize, len as usize))
}

impl ScalarUDFImpl for Substring {
    fn name(&self) -> &str {
        "weir_substring"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = "SUBSTRING(string FROM position [FOR length])";
        let (text, numbers) = match arg_types {
            [s, rest @ ..] if (1..=2).contains(&rest.len()) => (s, rest),
            _ => return plan_err!("{usage} takes 2 or 3 arguments, got {}", arg_types.len()),
        };
        let Some(text) = as_string_type(text) else {
            return plan_err!("{usage}: the string must be a string, got {text}");
        };
        let mut out = vec![text];
        for t in numbers {
            match as_integer_type(t) {
                Some(i) => out.push(i),
                None => return plan_err!("{usage}: the position and the length must be integers, got {t}"),
            }
        }
        Ok(out)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let strings = StrArg::new(&args.args[0])?;
        let positions = IntArg::new(&args.args[1])?;
        let lengths = args.args.get(2).map(IntArg::new).transpose()?;
        let mut out = StringBuilder::with_capacity(n, 0);
        for i in 0..n {
            let length = match &lengths {
                Some(l) => match l.get(i) {
                    Some(l) => Some(l),
                    None => {
                        out.append_null();
                        continue;
                    }
                },
                None => None,
            };
            match (strings.get(i), positions.get(i)) {
                (Some(s), Some(p)) => out.append_option(flink_substring(s, p, length)),
                _ => out.append_null(),
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// A function of DataFusion's under its own name, returning NULL for a row where any argument
/// is NULL: Flink's `CONCAT` (NULL if any argument is NULL), where DataFusion's (Postgres's)
/// skips NULL arguments (`CONCAT('a', NULL, 'b')` is NULL, not `ab`). `||` and `CONCAT_WS`
/// are already as Flink's.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct NullIfAnyNull {
    inner: Arc<datafusion::logical_expr::ScalarUDF>,
}

impl NullIfAnyNull {
    /// Flink's `CONCAT`, over DataFusion's.
    pub(super) fn concat() -> Self {
        Self { inner: datafusion::functions::string::concat() }
    }
}

impl ScalarUDFImpl for NullIfAnyNull {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        // A NULL constant makes every row NULL; else the rows where some argument is NULL.
        let mut nulls: Option<arrow::buffer::NullBuffer> = None;
        for arg in &args.args {
            match arg {
                ColumnarValue::Scalar(s) if s.is_null() => {
                    let t = args.return_field.data_type();
                    return Ok(ColumnarValue::Scalar(datafusion::common::ScalarValue::try_from(t)?));
                }
                ColumnarValue::Scalar(_) => {}
                ColumnarValue::Array(a) => nulls = arrow::buffer::NullBuffer::union(nulls.as_ref(), a.logical_nulls().as_ref()),
            }
        }
        let out = self.inner.invoke_with_args(args)?;
        let Some(nulls) = nulls.filter(|b| b.null_count() > 0) else { return Ok(out) };
        let values = out.into_array(n)?;
        let keep = arrow::array::BooleanArray::new(nulls.inner().clone(), None);
        let masked = arrow::compute::kernels::nullif::nullif(&values, &arrow::compute::not(&keep)?)?;
        Ok(ColumnarValue::Array(masked))
    }
}
