//! `ts AT TIME ZONE zone`, as Postgres computes it (Flink has no such operator; its
//! `CONVERT_TZ` works on strings):
//!
//! | `ts` | result |
//! |---|---|
//! | TIMESTAMP_LTZ (`timestamptz`) | the TIMESTAMP the clocks in `zone` show at that instant |
//! | TIMESTAMP, DATE (at midnight) | the TIMESTAMP_LTZ of the instant at which the clocks in `zone` show it |
//!
//! `zone` is a constant: a region (`'Asia/Tokyo'`), `'UTC'`, an offset in hours or
//! `GMT+08:00` (the names `SET TIME ZONE` takes). A wall-clock time the clocks skip or show
//! twice is read with the offset before the gap and the earlier instant of an overlap, as
//! `CAST` reads one. NULL in, NULL out.

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::{plan_err, ScalarValue};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use crate::plan::time_zone::{instants, wall_clock, Overlap, Zone};

/// `AT TIME ZONE` (module docs), `weir_at_time_zone(ts, zone)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct AtTimeZone {
    signature: Signature,
}

impl AtTimeZone {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for AtTimeZone {
    fn name(&self) -> &str {
        "weir_at_time_zone"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [ts, zone] = arg_types else { return plan_err!("AT TIME ZONE takes a time and a zone") };
        let ts = match ts {
            DataType::Timestamp(..) => ts.clone(),
            DataType::Date32 | DataType::Date64 => DataType::Timestamp(TimeUnit::Microsecond, None),
            // An untyped literal is a timestamptz, as Postgres reads `'..' AT TIME ZONE`.
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => {
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
            }
            other => return plan_err!("AT TIME ZONE takes a TIMESTAMP, TIMESTAMP_LTZ or DATE, not {other}"),
        };
        if !matches!(zone, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null) {
            return plan_err!("AT TIME ZONE takes a zone name (a string), not {zone}");
        }
        Ok(vec![ts, DataType::Utf8])
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match &arg_types[0] {
            DataType::Timestamp(unit, Some(_)) => Ok(DataType::Timestamp(*unit, None)),
            DataType::Timestamp(unit, None) => Ok(DataType::Timestamp(*unit, Some("UTC".into()))),
            other => plan_err!("AT TIME ZONE takes a TIMESTAMP, TIMESTAMP_LTZ or DATE, not {other}"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let zone = match &args.args[1] {
            ColumnarValue::Scalar(ScalarValue::Utf8(Some(z)) | ScalarValue::LargeUtf8(Some(z)) | ScalarValue::Utf8View(Some(z))) => {
                Zone::session(z).map_err(DataFusionError::Execution)?
            }
            ColumnarValue::Scalar(s) if s.is_null() => {
                return Ok(ColumnarValue::Scalar(ScalarValue::try_from(args.return_field.data_type())?));
            }
            _ => return Err(DataFusionError::Execution("AT TIME ZONE needs a constant zone name".into())),
        };
        let values: ArrayRef = args.args[0].to_array(args.number_rows)?;
        let out = match values.data_type() {
            DataType::Timestamp(_, Some(_)) => wall_clock(&values, zone)?,
            _ => instants(&values, zone, Overlap::Earlier)?,
        };
        Ok(ColumnarValue::Array(out))
    }
}
