//! `MOD(a, b)`: the remainder of `a / b` with the sign of `a` (Flink's MOD, Postgres' `%`):
//! integers stay BIGINT, any other number is computed as DOUBLE. `b = 0` is an error, as in
//! Postgres.

use arrow::datatypes::DataType;
use datafusion::common::plan_err;
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

/// `MOD(a, b)`, the `%` operator as a function.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Mod {
    signature: Signature,
}

impl Mod {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }

    fn common_type(arg_types: &[DataType]) -> Result<DataType> {
        if arg_types.len() != 2 {
            return plan_err!("MOD takes two arguments, got {}", arg_types.len());
        }
        if arg_types.iter().all(|t| t.is_integer() || *t == DataType::Null) {
            Ok(DataType::Int64)
        } else if arg_types.iter().all(|t| t.is_numeric() || *t == DataType::Null) {
            Ok(DataType::Float64)
        } else {
            plan_err!("MOD takes numbers, got {} and {}", arg_types[0], arg_types[1])
        }
    }
}

impl ScalarUDFImpl for Mod {
    fn name(&self) -> &str {
        "mod"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let t = Self::common_type(arg_types)?;
        Ok(vec![t.clone(), t])
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Self::common_type(arg_types)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let (a, b) = (&arrays[0], &arrays[1]);
        let out = arrow::compute::kernels::numeric::rem(a, b)?;
        Ok(ColumnarValue::Array(out))
    }
}
