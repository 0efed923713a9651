//! One field of a date or a time, as BIGINT: Flink's `YEAR`, `QUARTER`, `MONTH`, `WEEK`,
//! `DAYOFYEAR`, `DAYOFMONTH`, `DAYOFWEEK` (of a DATE or TIMESTAMP) and `HOUR`, `MINUTE`,
//! `SECOND` (of a TIMESTAMP or TIME). Each is `EXTRACT(<unit> FROM x)` (Flink docs, "System
//! (Built-in) Functions", Temporal Functions).
//!
//! - `WEEK`: the ISO 8601 week, 1..53 (a week starts on Monday; week 1 holds January 4th).
//! - `DAYOFWEEK`: 1 (Sunday) to 7 (Saturday). `DAYOFYEAR`: 1..366. `QUARTER`: 1..4.
//! - `SECOND`: whole seconds, 0..59; the fraction is dropped.
//! - A `TIMESTAMP_LTZ` is read in the session time zone, as in Flink
//!   ([`crate::plan::time_zone`]). NULL in, NULL out.
//!
//! Computed with Arrow's `date_part` kernel on the whole column.

use arrow::array::ArrayRef;
use arrow::compute::cast;
use arrow::compute::kernels::temporal::{date_part, DatePart};
use arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::plan_err;
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use crate::plan::time_zone::{wall_clock, Zone};

/// Which argument types a field can be taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Of {
    /// DATE or TIMESTAMP (the date fields).
    Date,
    /// TIME or TIMESTAMP (the time-of-day fields).
    Time,
}

/// One of the functions, e.g. `HOUR(ts)`. Its name says which: equality and hash go by name
/// and zone.
#[derive(Debug)]
pub(super) struct TimePart {
    /// The SQL name, lower case.
    name: &'static str,
    part: DatePart,
    of: Of,
    signature: Signature,
    /// The session time zone, in which a TIMESTAMP_LTZ is read.
    zone: Zone,
}

impl PartialEq for TimePart {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.zone == other.zone
    }
}

impl Eq for TimePart {}

impl std::hash::Hash for TimePart {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
        self.zone.hash(state);
    }
}

impl TimePart {
    /// Every function of the family.
    pub(super) fn all(zone: Zone) -> Vec<TimePart> {
        [
            ("year", DatePart::Year, Of::Date),
            ("quarter", DatePart::Quarter, Of::Date),
            ("month", DatePart::Month, Of::Date),
            ("week", DatePart::WeekISO, Of::Date),
            ("dayofyear", DatePart::DayOfYear, Of::Date),
            ("dayofmonth", DatePart::Day, Of::Date),
            ("dayofweek", DatePart::DayOfWeekSunday1, Of::Date),
            ("hour", DatePart::Hour, Of::Time),
            ("minute", DatePart::Minute, Of::Time),
            ("second", DatePart::Second, Of::Time),
        ]
        .into_iter()
        .map(|(name, part, of)| TimePart { name, part, of, signature: Signature::user_defined(Volatility::Immutable), zone })
        .collect()
    }
}

impl ScalarUDFImpl for TimePart {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let name = self.name.to_uppercase();
        let [t] = arg_types else {
            return plan_err!("{name} takes one argument, got {}", arg_types.len());
        };
        let ok = match (t, self.of) {
            (DataType::Timestamp(..), _) => true,
            (DataType::Date32 | DataType::Date64, Of::Date) => true,
            (DataType::Time32(_) | DataType::Time64(_), Of::Time) => true,
            (DataType::Null, _) => return Ok(vec![DataType::Timestamp(TimeUnit::Millisecond, None)]),
            _ => false,
        };
        if !ok {
            let valid = match self.of {
                Of::Date => "a DATE or a TIMESTAMP",
                Of::Time => "a TIMESTAMP or a TIME",
            };
            return plan_err!("{name} takes {valid}, got {t}");
        }
        Ok(vec![t.clone()])
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays: Vec<ArrayRef> = ColumnarValue::values_to_arrays(&args.args)?;
        let part = date_part(&wall_clock(&arrays[0], self.zone)?, self.part)?;
        Ok(ColumnarValue::Array(cast(&part, &DataType::Int64)?))
    }
}
