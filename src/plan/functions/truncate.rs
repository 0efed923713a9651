//! `TRUNCATE(x [, n])`: `x` cut (toward zero) to `n` digits after the decimal point (default
//! 0; a negative `n` zeroes digits before it), of `x`'s own type, as Flink's overloads compute
//! it (`BuiltInMethods.TRUNCATE_*`): `TRUNCATE(-7, -1)` is `0`, `TRUNCATE(1234, -2)` is `1200`,
//! `TRUNCATE(42.345, 2)` is `42.34`. A DECIMAL(p, s) cut to a literal `n` below `s` is a
//! DECIMAL(p - s + n, n), as Flink types it (`42.34`, not `42.340`). DataFusion's `trunc` turns integers into DOUBLE (losing
//! digits past 2^53) and gives `-0`.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Decimal128Array, Float64Array, Int64Array};
use arrow::datatypes::{DataType, Decimal128Type, Field, FieldRef, Float64Type, Int64Type};
use datafusion::common::{plan_err, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{as_integer_type, num_rows, IntArg};

/// `TRUNCATE`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Truncate {
    signature: Signature,
}

impl Truncate {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for Truncate {
    fn name(&self) -> &str {
        "truncate"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = "TRUNCATE(numeric [, integer])";
        let (x, n) = match arg_types {
            [x] => (x, None),
            [x, n] => (x, Some(n)),
            _ => return plan_err!("{usage} takes 1 or 2 arguments, got {}", arg_types.len()),
        };
        let x = match x {
            t if t.is_integer() || *t == DataType::Null => DataType::Int64,
            DataType::Decimal128(..) => x.clone(),
            t if t.is_numeric() => DataType::Float64,
            t => return plan_err!("{usage}: the value must be a number, got {t}"),
        };
        let mut out = vec![x];
        if let Some(n) = n {
            match as_integer_type(n) {
                Some(i) => out.push(i),
                None => return plan_err!("{usage}: the digits must be an integer, got {n}"),
            }
        }
        Ok(out)
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types.first().cloned().unwrap_or(DataType::Int64))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let x = args.arg_fields.first().map_or(DataType::Int64, |f| f.data_type().clone());
        let digits = match args.scalar_arguments.get(1) {
            None => Some(0),
            Some(Some(ScalarValue::Int64(Some(d)))) => Some(*d),
            Some(Some(ScalarValue::Int32(Some(d)))) => Some(i64::from(*d)),
            _ => None,
        };
        let t = match (x, digits) {
            (DataType::Decimal128(p, s), Some(d)) if (0..i64::from(s)).contains(&d) => {
                let d = d as i8;
                DataType::Decimal128((p as i8 - (s - d)).max(1) as u8, d)
            }
            (x, _) => x,
        };
        Ok(Arc::new(Field::new(self.name(), t, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let values = args.args[0].to_array(n)?;
        let digits = args.args.get(1).map(IntArg::new).transpose()?;
        let digits_at = |i: usize| match &digits {
            Some(d) => d.get(i),
            None => Some(0),
        };
        let out: ArrayRef = match values.data_type() {
            DataType::Int64 => {
                let v = values.as_primitive::<Int64Type>();
                Arc::new((0..n).map(|i| (v.is_valid(i)).then(|| digits_at(i).map(|d| truncate_int(v.value(i), d))).flatten()).collect::<Int64Array>())
            }
            DataType::Float64 => {
                let v = values.as_primitive::<Float64Type>();
                Arc::new((0..n).map(|i| (v.is_valid(i)).then(|| digits_at(i).map(|d| truncate_float(v.value(i), d))).flatten()).collect::<Float64Array>())
            }
            DataType::Decimal128(precision, scale) => {
                let v = values.as_primitive::<Decimal128Type>();
                let out: Decimal128Array = (0..n)
                    .map(|i| (v.is_valid(i)).then(|| digits_at(i).map(|d| truncate_decimal(v.value(i), *scale, d))).flatten())
                    .collect();
                let out = out.with_precision_and_scale(*precision, *scale)?;
                // The narrower type planned for a literal number of digits.
                match args.return_field.data_type() {
                    t @ DataType::Decimal128(..) if t != values.data_type() => arrow::compute::cast(&out, t)?,
                    _ => Arc::new(out),
                }
            }
            DataType::Null => Arc::new(Int64Array::new_null(n)),
            other => return plan_err!("TRUNCATE of {other}"),
        };
        Ok(ColumnarValue::Array(out))
    }
}

/// `x` with its last `-digits` digits zeroed (nothing for `digits >= 0`).
fn truncate_int(x: i64, digits: i64) -> i64 {
    if digits >= 0 {
        return x;
    }
    match 10i64.checked_pow(u32::try_from(-digits).unwrap_or(u32::MAX)) {
        Some(p) => x / p * p,
        None => 0,
    }
}

/// `x` cut to `digits` decimals; `0` rather than `-0`.
fn truncate_float(x: f64, digits: i64) -> f64 {
    let p = 10f64.powi(i32::try_from(digits).unwrap_or(if digits > 0 { i32::MAX } else { i32::MIN }));
    let cut = if p.is_finite() && p != 0.0 { (x * p).trunc() / p } else if digits > 0 { x } else { 0.0 };
    if cut == 0.0 {
        0.0
    } else {
        cut
    }
}

/// The unscaled decimal `v` (of `scale` decimals) cut to `digits` decimals, same scale.
fn truncate_decimal(v: i128, scale: i8, digits: i64) -> i128 {
    let cut = i64::from(scale) - digits;
    if cut <= 0 {
        return v;
    }
    match 10i128.checked_pow(u32::try_from(cut).unwrap_or(u32::MAX)) {
        Some(p) => v / p * p,
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_toward_zero_in_its_own_type() {
        assert_eq!(truncate_int(-7, -1), 0);
        assert_eq!(truncate_int(1234, -2), 1200);
        assert_eq!(truncate_int(9_007_199_254_740_993, 0), 9_007_199_254_740_993);
        assert_eq!(truncate_int(5, -30), 0);
        assert_eq!(truncate_float(42.345, 2), 42.34);
        assert_eq!(truncate_float(-0.5, 0).to_string(), "0");
        assert_eq!(truncate_float(-1.0, -1).to_string(), "0");
        // 42.345 as DECIMAL(5, 3) is 42345; to 2 decimals 42340, to -1 40000.
        assert_eq!(truncate_decimal(42345, 3, 2), 42340);
        assert_eq!(truncate_decimal(42345, 3, -1), 40000);
        assert_eq!(truncate_decimal(-42345, 3, 0), -42000);
    }
}
