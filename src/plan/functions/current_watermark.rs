//! `CURRENT_WATERMARK(rowtime)`: the watermark of the stream at the operator evaluating it, of
//! the rowtime attribute's type, or NULL before the first watermark (Flink's
//! `CURRENT_WATERMARK`, "System (Built-in) Functions"). The operators that evaluate expressions
//! (Project, Filter) publish their input's current watermark while they evaluate
//! ([`crate::runtime::operator::with_current_watermark`]); in an ad-hoc `SELECT` it is NULL.
//!
//! The usual use: `WHERE CURRENT_WATERMARK(ts) IS NULL OR ts > CURRENT_WATERMARK(ts)` keeps
//! only the rows that are not late where they are filtered.

use arrow::datatypes::DataType;
use datafusion::common::{plan_err, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

/// `CURRENT_WATERMARK(ts)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct CurrentWatermark {
    signature: Signature,
}

impl CurrentWatermark {
    pub(super) fn new() -> Self {
        Self { signature: Signature::any(1, Volatility::Volatile) }
    }
}

impl ScalarUDFImpl for CurrentWatermark {
    fn name(&self) -> &str {
        "current_watermark"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args.first() {
            Some(t @ DataType::Timestamp(..)) => Ok(t.clone()),
            other => plan_err!(
                "CURRENT_WATERMARK takes the table's event-time attribute (a TIMESTAMP column), not {}",
                other.map(|t| t.to_string()).unwrap_or_default()
            ),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let wm = crate::runtime::operator::current_watermark();
        let tz = match args.return_field.data_type() {
            DataType::Timestamp(_, tz) => tz.clone(),
            _ => None,
        };
        let ms = ScalarValue::TimestampMillisecond(wm, tz);
        Ok(ColumnarValue::Scalar(ms.cast_to(args.return_field.data_type())?))
    }
}
