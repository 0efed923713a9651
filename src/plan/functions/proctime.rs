//! `PROCTIME()`: the processing time, `TIMESTAMP_LTZ(3)` (Flink's processing-time attribute,
//! "Time Attributes" in the Flink docs): the wall-clock time, in ms, UTC, when the row is
//! processed. Volatile: never folded into a constant.

use std::sync::Arc;

use arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

/// `PROCTIME()`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct ProcTime {
    signature: Signature,
}

impl ProcTime {
    pub(super) fn new() -> Self {
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
