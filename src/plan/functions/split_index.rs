//! `SPLIT_INDEX(str, sep, idx)`: splits `str` at every occurrence of the string `sep` and
//! returns piece `idx`, counted from 0 (Flink docs, String Functions; Flink's
//! `SqlFunctionUtils.splitIndex`, which uses commons-lang
//! `StringUtils.splitByWholeSeparatorPreserveAllTokens`).
//!
//! - Every token is kept, empty ones too: `SPLIT_INDEX('a//b', '/', 1)` is `''`, and a leading
//!   or trailing `sep` gives an empty first or last piece.
//! - NULL when any argument is NULL, when `idx` is negative or not less than the number of
//!   pieces, and for the empty string (which has no pieces).
//! - An empty `sep` splits at each whitespace character (Java's `Character.isWhitespace`).
//! - `sep` may also be an integer, the code of a single character in 1..=255 (Flink's second
//!   form); any other code gives NULL.

use std::sync::Arc;

use arrow::array::StringBuilder;
use arrow::datatypes::DataType;
use datafusion::common::plan_err;
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{as_integer_type, as_string_type, num_rows, IntArg, StrArg};

/// `SPLIT_INDEX`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct SplitIndex {
    signature: Signature,
}

impl SplitIndex {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

/// The separator argument: a string, or a character code.
enum Sep<'a> {
    Str(StrArg<'a>),
    Code(IntArg<'a>),
}

impl ScalarUDFImpl for SplitIndex {
    fn name(&self) -> &str {
        "split_index"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = "SPLIT_INDEX(string, separator, index)";
        let [s, sep, idx] = arg_types else {
            return plan_err!("{usage} takes 3 arguments, got {}", arg_types.len());
        };
        let Some(s) = as_string_type(s) else {
            return plan_err!("{usage}: the string must be a string, got {s}");
        };
        let Some(sep) = as_string_type(sep).or_else(|| as_integer_type(sep)) else {
            return plan_err!("{usage}: the separator must be a string or a character code, got {sep}");
        };
        let Some(idx) = as_integer_type(idx) else {
            return plan_err!("{usage}: the index must be an integer, got {idx}");
        };
        Ok(vec![s, sep, idx])
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let strings = StrArg::new(&args.args[0])?;
        let seps = if args.args[1].data_type() == DataType::Int64 {
            Sep::Code(IntArg::new(&args.args[1])?)
        } else {
            Sep::Str(StrArg::new(&args.args[1])?)
        };
        let indexes = IntArg::new(&args.args[2])?;
        let mut out = StringBuilder::with_capacity(n, 0);
        let mut code_buf = [0u8; 4];
        for i in 0..n {
            let sep = match &seps {
                Sep::Str(a) => a.get(i),
                // Flink: a code outside 1..=255 gives NULL.
                Sep::Code(a) => a
                    .get(i)
                    .and_then(|code| u8::try_from(code).ok().filter(|c| *c >= 1))
                    .map(|c| &*char::from(c).encode_utf8(&mut code_buf)),
            };
            let piece = match (strings.get(i), sep, indexes.get(i)) {
                (Some(s), Some(sep), Some(idx)) => piece(s, sep, idx),
                _ => None,
            };
            out.append_option(piece);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// Piece `idx` of `s` split at `sep`, every token kept.
fn piece<'s>(s: &'s str, sep: &str, idx: i64) -> Option<&'s str> {
    let idx = usize::try_from(idx).ok()?;
    if s.is_empty() {
        return None;
    }
    if sep.is_empty() {
        s.split(is_java_whitespace).nth(idx)
    } else {
        s.split(sep).nth(idx)
    }
}

/// Java's `Character.isWhitespace`: Unicode space separators except the no-break ones, line and
/// paragraph separators, and the ASCII controls \t \n \u{B} \u{C} \r \u{1C}..\u{1F}.
fn is_java_whitespace(c: char) -> bool {
    match c {
        '\t' | '\n' | '\u{B}' | '\u{C}' | '\r' | '\u{1C}'..='\u{1F}' => true,
        '\u{A0}' | '\u{2007}' | '\u{202F}' | '\u{85}' => false,
        c => c.is_whitespace(),
    }
}
