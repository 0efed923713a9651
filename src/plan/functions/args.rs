//! Reading the arguments of a scalar function batch-at-a-time: a constant (a pattern, a
//! separator, an index) is read once per batch and never expanded into an array.
//!
//! The functions' `coerce_types` bring every string to `Utf8` and every integer to `Int64`, so
//! only those two array types are read here; anything else is our bug (`Internal`).

use arrow::array::{Array, AsArray, Int64Array, StringArray};
use arrow::datatypes::{DataType, Int64Type};
use datafusion::common::{internal_err, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::ColumnarValue;

/// The number of rows to compute: the length of the first array argument, or 1 when every
/// argument is a constant (DataFusion turns a one-row result of constants back into a constant).
pub(super) fn num_rows(args: &[ColumnarValue]) -> usize {
    args.iter()
        .find_map(|a| match a {
            ColumnarValue::Array(a) => Some(a.len()),
            ColumnarValue::Scalar(_) => None,
        })
        .unwrap_or(1)
}

/// The type a string argument is coerced to, if `t` is a string (or NULL).
pub(super) fn as_string_type(t: &DataType) -> Option<DataType> {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => Some(DataType::Utf8),
        DataType::Dictionary(_, v) => as_string_type(v),
        _ => None,
    }
}

/// The coerced types of a call whose arguments are all strings, `arity` of them.
///
/// # Errors
/// `Plan` naming `usage` for another number of arguments or an argument that is no string.
pub(super) fn all_strings(usage: &str, arg_types: &[DataType], arity: std::ops::RangeInclusive<usize>) -> Result<Vec<DataType>> {
    if !arity.contains(&arg_types.len()) {
        return datafusion::common::plan_err!("{usage}: wrong number of arguments ({})", arg_types.len());
    }
    arg_types
        .iter()
        .map(|t| match as_string_type(t) {
            Some(s) => Ok(s),
            None => datafusion::common::plan_err!("{usage}: expected strings, got {t}"),
        })
        .collect()
}

/// The type an integer argument is coerced to, if `t` is an integer (or NULL).
pub(super) fn as_integer_type(t: &DataType) -> Option<DataType> {
    (t.is_integer() || *t == DataType::Null).then_some(DataType::Int64)
}

/// A `Utf8` argument: one value for the batch, or one per row.
pub(super) enum StrArg<'a> {
    Const(Option<&'a str>),
    Rows(&'a StringArray),
}

impl<'a> StrArg<'a> {
    pub(super) fn new(v: &'a ColumnarValue) -> Result<Self> {
        match v {
            ColumnarValue::Scalar(ScalarValue::Utf8(s)) => Ok(Self::Const(s.as_deref())),
            ColumnarValue::Scalar(ScalarValue::Null) => Ok(Self::Const(None)),
            ColumnarValue::Array(a) => match a.as_string_opt::<i32>() {
                Some(a) => Ok(Self::Rows(a)),
                None => internal_err!("expected a Utf8 argument, got {}", a.data_type()),
            },
            ColumnarValue::Scalar(other) => internal_err!("expected a Utf8 argument, got {}", other.data_type()),
        }
    }

    /// The value in row `i`, `None` for NULL.
    pub(super) fn get(&self, i: usize) -> Option<&'a str> {
        match self {
            Self::Const(s) => *s,
            Self::Rows(a) => a.is_valid(i).then(|| a.value(i)),
        }
    }
}

/// An `Int64` argument: one value for the batch, or one per row.
pub(super) enum IntArg<'a> {
    Const(Option<i64>),
    Rows(&'a Int64Array),
}

impl<'a> IntArg<'a> {
    pub(super) fn new(v: &'a ColumnarValue) -> Result<Self> {
        match v {
            ColumnarValue::Scalar(ScalarValue::Int64(n)) => Ok(Self::Const(*n)),
            ColumnarValue::Scalar(ScalarValue::Null) => Ok(Self::Const(None)),
            ColumnarValue::Array(a) => match a.as_primitive_opt::<Int64Type>() {
                Some(a) => Ok(Self::Rows(a)),
                None => internal_err!("expected an Int64 argument, got {}", a.data_type()),
            },
            ColumnarValue::Scalar(other) => internal_err!("expected an Int64 argument, got {}", other.data_type()),
        }
    }

    /// The value in row `i`, `None` for NULL.
    pub(super) fn get(&self, i: usize) -> Option<i64> {
        match self {
            Self::Const(n) => *n,
            Self::Rows(a) => a.is_valid(i).then(|| a.value(i)),
        }
    }
}

/// The literal string argument `i` of a call being planned, if it is one (`None` for a column,
/// an expression, or NULL).
pub(super) fn literal_str<'a>(scalars: &[Option<&'a ScalarValue>], i: usize) -> Option<&'a str> {
    match scalars.get(i).copied().flatten()? {
        ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => s.as_deref(),
        _ => None,
    }
}
