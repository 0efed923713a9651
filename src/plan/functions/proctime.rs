//! `PROCTIME()`: the processing time, `TIMESTAMP_LTZ(3)` (Flink's processing-time attribute,
//! "Time Attributes" in the Flink docs): the wall-clock time, in ms, UTC, when the row is
//! processed. Volatile: never folded into a constant. `CURRENT_ROW_TIMESTAMP()` is the same
//! value under Flink's other name (the current time, read for each row).
//!
//! `CURRENT_TIMESTAMP` and `NOW()` (replacing DataFusion's, a TIMESTAMP with nanoseconds):
//! Flink's `TIMESTAMP_LTZ(3)`, the time the statement was planned, in ms, one value wherever
//! it appears in the statement (DataFusion folds it into a literal; in a view, the time the view
//! was created, README).

use std::sync::Arc;

use arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

/// `PROCTIME()`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct ProcTime {
    signature: Signature,
    aliases: Vec<String>,
}

impl ProcTime {
    pub(super) fn new() -> Self {
        Self { signature: Signature::exact(vec![], Volatility::Volatile), aliases: vec!["current_row_timestamp".to_string()] }
    }
}

impl ScalarUDFImpl for ProcTime {
    fn name(&self) -> &str {
        "proctime"
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Timestamp(TimeUnit::Millisecond, Some(Arc::from("UTC"))))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        Ok(ColumnarValue::Scalar(ltz_ms(chrono::Utc::now().timestamp_millis())))
    }
}

/// `CURRENT_TIMESTAMP`, `NOW()`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct CurrentTimestamp {
    signature: Signature,
    aliases: Vec<String>,
}

impl CurrentTimestamp {
    pub(super) fn new() -> Self {
        Self { signature: Signature::nullary(Volatility::Stable), aliases: vec!["current_timestamp".to_string()] }
    }
}

impl ScalarUDFImpl for CurrentTimestamp {
    fn name(&self) -> &str {
        "now"
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Timestamp(TimeUnit::Millisecond, Some(Arc::from("UTC"))))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        // Planning folds every call (below); one left unfolded takes the time now.
        Ok(ColumnarValue::Scalar(ltz_ms(chrono::Utc::now().timestamp_millis())))
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        let Some(start) = info.query_execution_start_time() else { return Ok(ExprSimplifyResult::Original(args)) };
        Ok(ExprSimplifyResult::Simplified(Expr::Literal(ltz_ms(start.timestamp_millis()), None)))
    }
}

/// A TIMESTAMP_LTZ(3) value: `ms` since the epoch, UTC.
fn ltz_ms(ms: i64) -> ScalarValue {
    ScalarValue::TimestampMillisecond(Some(ms), Some(Arc::from("UTC")))
}
