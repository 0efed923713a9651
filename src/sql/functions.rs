//! Scalar functions of Flink's dialect that DataFusion lacks, registered on every context.
//!
//! - `PROCTIME()`: the processing time, `TIMESTAMP_LTZ(3)` (Flink's processing-time attribute).
//! - `MOD(a, b)`: the remainder of `a / b` with the sign of `a` (Flink, Postgres); integers stay
//!   BIGINT, anything else is computed as DOUBLE. `b = 0` is an error, as in Postgres.

use std::sync::Arc;

use arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::prelude::SessionContext;

/// Registers Weir's functions on `ctx`.
pub fn register(ctx: &SessionContext) {
    ctx.register_udf(ScalarUDF::new_from_impl(ProcTime::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(Mod::new()));
}

/// `PROCTIME()`: the wall-clock time when the row is processed, in milliseconds, UTC.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ProcTime {
    signature: Signature,
}

impl ProcTime {
    fn new() -> Self {
        Self { signature: Signature::exact(vec![], Volatility::Volatile) }
    }
}

impl ScalarUDFImpl for ProcTime {

    fn name(&self) -> &str {
        "proctime"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Timestamp(TimeUnit::Millisecond, Some(Arc::from("UTC"))))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let now = chrono::Utc::now().timestamp_millis();
        Ok(ColumnarValue::Scalar(ScalarValue::TimestampMillisecond(Some(now), Some(Arc::from("UTC")))))
    }
}

/// `MOD(a, b)`, the `%` operator as a function.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Mod {
    signature: Signature,
}

impl Mod {
    fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }

    fn common_type(arg_types: &[DataType]) -> Result<DataType> {
        if arg_types.len() != 2 {
            return datafusion::common::plan_err!("MOD takes two arguments, got {}", arg_types.len());
        }
        if arg_types.iter().all(|t| t.is_integer() || *t == DataType::Null) {
            Ok(DataType::Int64)
        } else if arg_types.iter().all(|t| t.is_numeric() || *t == DataType::Null) {
            Ok(DataType::Float64)
        } else {
            datafusion::common::plan_err!("MOD takes numbers, got {} and {}", arg_types[0], arg_types[1])
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
