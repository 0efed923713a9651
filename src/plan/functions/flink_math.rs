//! Flink's arithmetic functions that DataFusion lacks (Flink docs, Arithmetic Functions):
//!
//! - `SIGN(x)`: -1, 0 or 1 in `x`'s own type (Flink's `SIGN`: `Integer.signum`,
//!   `Math.signum` for floats, so NaN stays NaN; a DECIMAL keeps its precision and scale).
//! - `E()`: Euler's number, a DOUBLE.
//! - `RAND_INTEGER(bound)`: a pseudorandom INT in `[0, bound)`; a bound of 0 or less is an error,
//!   as Java's `Random.nextInt(bound)` throws. Volatile: a new value for every row. The seeded
//!   forms `RAND_INTEGER(seed, bound)` and `RAND(seed)` are refused: Flink's repeat Java's
//!   `Random` sequence per operator instance, which a shared function cannot.
//!
//! NULL in, NULL out.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, Int32Builder, PrimitiveArray};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use datafusion::common::{exec_err, plan_err, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};
use rand::Rng;

use super::args::{as_integer_type, num_rows, IntArg};

/// Which function a [`FlinkMath`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Sign,
    E,
    RandInteger,
}

/// One of the functions of this module.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct FlinkMath {
    signature: Signature,
    kind: Kind,
}

impl FlinkMath {
    /// Every function of this module.
    pub(super) fn all() -> Vec<Self> {
        [(Kind::Sign, Volatility::Immutable), (Kind::E, Volatility::Immutable), (Kind::RandInteger, Volatility::Volatile)]
            .into_iter()
            .map(|(kind, volatility)| Self { signature: Signature::user_defined(volatility), kind })
            .collect()
    }
}

impl ScalarUDFImpl for FlinkMath {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Sign => "sign",
            Kind::E => "e",
            Kind::RandInteger => "rand_integer",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match (self.kind, arg_types) {
            (Kind::Sign, [DataType::Null]) => Ok(vec![DataType::Int32]),
            (Kind::Sign, [t]) if t.is_numeric() && !matches!(t, DataType::Float16 | DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal256(..)) => {
                Ok(vec![t.clone()])
            }
            (Kind::Sign, [t @ (DataType::Decimal32(..) | DataType::Decimal64(..))]) => {
                let (p, s) = match t {
                    DataType::Decimal32(p, s) | DataType::Decimal64(p, s) => (*p, *s),
                    _ => unreachable!("matched above"),
                };
                Ok(vec![DataType::Decimal128(p, s)])
            }
            (Kind::Sign, _) => plan_err!("SIGN(numeric): got {}", list(arg_types)),
            (Kind::E, []) => Ok(vec![]),
            (Kind::E, _) => plan_err!("E() takes no arguments, got {}", arg_types.len()),
            (Kind::RandInteger, [bound]) => match as_integer_type(bound) {
                Some(i) => Ok(vec![i]),
                None => plan_err!("RAND_INTEGER(bound): the bound must be an integer, got {bound}"),
            },
            (Kind::RandInteger, [_, _]) => {
                plan_err!("RAND_INTEGER(seed, bound) is not supported (a seeded sequence per operator instance); use RAND_INTEGER(bound)")
            }
            (Kind::RandInteger, _) => plan_err!("RAND_INTEGER(bound): got {} arguments", arg_types.len()),
        }
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(match self.kind {
            Kind::Sign => arg_types.first().cloned().unwrap_or(DataType::Int32),
            Kind::E => DataType::Float64,
            Kind::RandInteger => DataType::Int32,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        // The batch's rows: RAND_INTEGER of a constant bound still draws one value per row.
        let n = if self.kind == Kind::RandInteger { args.number_rows } else { num_rows(&args.args) };
        match self.kind {
            Kind::E => Ok(ColumnarValue::Scalar(ScalarValue::Float64(Some(std::f64::consts::E)))),
            Kind::RandInteger => {
                let bound = IntArg::new(&args.args[0])?;
                let mut rng = rand::rng();
                let mut out = Int32Builder::with_capacity(n);
                for i in 0..n {
                    match bound.get(i) {
                        None => out.append_null(),
                        Some(b) if b > 0 && b <= i64::from(i32::MAX) => out.append_value(rng.random_range(0..b as i32)),
                        Some(b) => return exec_err!("RAND_INTEGER: the bound must be a positive INT, got {b}"),
                    }
                }
                Ok(ColumnarValue::Array(Arc::new(out.finish())))
            }
            Kind::Sign => {
                let values = args.args[0].to_array(n)?;
                let out: ArrayRef = match values.data_type() {
                    DataType::Int8 => sign::<Int8Type>(&values, |v| v.signum()),
                    DataType::Int16 => sign::<Int16Type>(&values, |v| v.signum()),
                    DataType::Int32 => sign::<Int32Type>(&values, |v| v.signum()),
                    DataType::Int64 => sign::<Int64Type>(&values, |v| v.signum()),
                    DataType::UInt8 => sign::<UInt8Type>(&values, |v| v.min(1)),
                    DataType::UInt16 => sign::<UInt16Type>(&values, |v| v.min(1)),
                    DataType::UInt32 => sign::<UInt32Type>(&values, |v| v.min(1)),
                    DataType::UInt64 => sign::<UInt64Type>(&values, |v| v.min(1)),
                    // Math.signum: NaN and signed zeros come back as they are.
                    DataType::Float32 => sign::<Float32Type>(&values, |v| if v == 0.0 || v.is_nan() { v } else { v.signum() }),
                    DataType::Float64 => sign::<Float64Type>(&values, |v| if v == 0.0 || v.is_nan() { v } else { v.signum() }),
                    DataType::Decimal128(p, s) => {
                        let one = 10i128.pow(u32::from(*s as u8));
                        let (p, s) = (*p, *s);
                        Arc::new(values.as_primitive::<Decimal128Type>().unary::<_, Decimal128Type>(|v| v.signum() * one).with_precision_and_scale(p, s)?)
                    }
                    other => return exec_err!("SIGN: unexpected argument type {other}"),
                };
                Ok(ColumnarValue::Array(out))
            }
        }
    }
}

/// `f` of every value of `values`, in their type.
fn sign<T: ArrowPrimitiveType>(values: &ArrayRef, f: impl Fn(T::Native) -> T::Native) -> ArrayRef {
    let out: PrimitiveArray<T> = values.as_primitive::<T>().unary(f);
    Arc::new(out)
}

fn list(types: &[DataType]) -> String {
    types.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}
