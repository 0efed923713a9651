//! A cast between a TIMESTAMP_LTZ and a wall-clock type in the session time zone
//! ([`crate::plan::time_zone`]), which `CAST` becomes when the session's zone is not UTC
//! (`crate::sql::text_casts`; in UTC Arrow's cast is the same):
//!
//! | from | to | value |
//! |---|---|---|
//! | TIMESTAMP_LTZ | TIMESTAMP, DATE, TIME | the wall-clock time (date, time of day) of the instant in the zone |
//! | TIMESTAMP, DATE | TIMESTAMP_LTZ | the instant at which the zone's clocks show it (a DATE at midnight) |
//! | string | TIMESTAMP_LTZ | the string's instant when it names a zone or an offset (`+08:00`, `Z`), else its wall-clock time read as above |
//!
//! A wall-clock time the clocks skip or show twice is read as `java.time` reads it, as Flink's
//! `CAST` does: with the offset before the gap, the earlier instant of an overlap. NULL in,
//! NULL out; a string that is not a time is an error (NULL for `TRY_CAST`).

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::{cast, cast_with_options, CastOptions};
use arrow::datatypes::{DataType, TimeUnit};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use crate::plan::time_zone::{instants, wall_clock, Overlap, Zone};

/// The cast to `to` in `zone` (module docs); `lenient` for `TRY_CAST`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ZoneCast {
    to: DataType,
    zone: Zone,
    lenient: bool,
    signature: Signature,
}

impl ZoneCast {
    pub fn new(to: DataType, zone: Zone, lenient: bool) -> Self {
        Self { to, zone, lenient, signature: Signature::any(1, Volatility::Immutable) }
    }

    /// Whether a cast from `from` to `to` reads or writes a wall-clock time, so that the
    /// session's zone matters.
    pub fn applies(from: &DataType, to: &DataType) -> bool {
        let wall_clock = |t: &DataType| {
            matches!(t, DataType::Timestamp(_, None) | DataType::Date32 | DataType::Date64 | DataType::Time32(_) | DataType::Time64(_))
        };
        let text = |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
        match (from, to) {
            (DataType::Timestamp(_, Some(_)), t) => wall_clock(t),
            (f, DataType::Timestamp(_, Some(_))) => (wall_clock(f) && !matches!(f, DataType::Time32(_) | DataType::Time64(_))) || text(f),
            _ => false,
        }
    }
}

impl ScalarUDFImpl for ZoneCast {
    fn name(&self) -> &str {
        "weir_zone_cast"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(self.to.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let input = args.args[0].to_array(args.number_rows)?;
        Ok(ColumnarValue::Array(cast_in_zone(&input, &self.to, self.zone, self.lenient)?))
    }
}

/// `values` cast to `to` as `CAST` casts them in a session in `zone`: through [`ZoneCast`] when
/// the zone matters to the cast ([`ZoneCast::applies`] and not UTC), else Arrow's cast; `safe`
/// turns a value that does not convert into NULL. For the casts Weir makes outside a query
/// (an UPDATE's assignments, COPY FROM's text).
///
/// # Errors
/// Arrow's, for a value that does not convert when not `safe`.
pub fn cast_in_zone(values: &ArrayRef, to: &DataType, zone: Zone, safe: bool) -> arrow::error::Result<ArrayRef> {
    let options = CastOptions { safe, ..Default::default() };
    if zone.is_utc() || !ZoneCast::applies(values.data_type(), to) {
        return cast_with_options(values, to, &options);
    }
    match values.data_type() {
        DataType::Timestamp(_, Some(_)) => cast_with_options(&wall_clock(values, zone)?, to, &options),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let DataType::Timestamp(unit, _) = to else { return cast_with_options(values, to, &options) };
            strings(values, to, *unit, zone, &options)
        }
        _ => {
            let DataType::Timestamp(unit, _) = to else { return cast_with_options(values, to, &options) };
            let local = cast_with_options(values, &DataType::Timestamp(*unit, None), &options)?;
            cast(&instants(&local, zone, Overlap::Earlier)?, to)
        }
    }
}

/// Strings to TIMESTAMP_LTZ type `to`: those that name a zone or an offset as Arrow reads them,
/// the others as wall-clock times in `zone`.
fn strings(input: &ArrayRef, to: &DataType, unit: TimeUnit, zone: Zone, options: &CastOptions) -> arrow::error::Result<ArrayRef> {
    let text = cast(input, &DataType::Utf8)?;
    let text = text.as_string::<i32>();
    let zoned = cast_with_options(&text, to, options)?;
    let local = cast_with_options(&text, &DataType::Timestamp(unit, None), options)?;
    let local = cast(&instants(&local, zone, Overlap::Earlier)?, to)?;
    let keep: arrow::array::BooleanArray = text.iter().map(|s| Some(s.is_some_and(names_zone))).collect();
    arrow::compute::kernels::zip::zip(&keep, &zoned, &local)
}

/// Whether a time string names its zone or offset after the time of day: `Z`, `+08`,
/// `-03:30`, `+0530`, `UTC`, `Asia/Tokyo`.
fn names_zone(s: &str) -> bool {
    static TIME: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"\d:\d\d(:\d\d(\.\d*)?)?").expect("a valid regex"));
    TIME.find(s).is_some_and(|m| !s[m.end()..].trim().is_empty())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn strings_that_name_a_zone() {
        assert!(names_zone("2024-01-01 10:00:00+08"));
        assert!(names_zone("2024-01-01 10:00:00.5-03:30"));
        assert!(names_zone("2024-01-01T10:00:00Z"));
        assert!(!names_zone("2024-01-01 10:00:00"));
        assert!(!names_zone("2024-01-01"));
        assert!(!names_zone("2024-01-01 10:00:00.123"));
        assert!(names_zone("2024-01-01 10:00:00 Asia/Tokyo"));
        assert!(names_zone("2024-01-01T10:00:00.5 UTC"));
        assert!(!names_zone("2024-01-01T10:00"));
    }

    #[test]
    fn casts_in_the_zone() -> Result<()> {
        let shanghai = Zone::session("Asia/Shanghai").expect("a zone");
        let ltz = DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
        let run = |to: DataType, input: ArrayRef| -> Result<ArrayRef> {
            let f = ZoneCast::new(to.clone(), shanghai, false);
            let field = Arc::new(arrow::datatypes::Field::new("x", to, true));
            let args = ScalarFunctionArgs {
                number_rows: input.len(),
                arg_fields: vec![Arc::new(arrow::datatypes::Field::new("a", input.data_type().clone(), true))],
                args: vec![ColumnarValue::Array(input)],
                return_field: field,
                config_options: Arc::default(),
            };
            f.invoke_with_args(args)?.to_array(1)
        };
        // 2024-01-01 02:00:00 UTC is 1704074400000 ms; in Shanghai it is 10:00.
        let instant: ArrayRef = Arc::new(arrow::array::TimestampMillisecondArray::from(vec![1_704_074_400_000]).with_timezone("UTC"));
        let wall = run(DataType::Timestamp(TimeUnit::Millisecond, None), Arc::clone(&instant))?;
        assert_eq!(wall.as_primitive::<arrow::datatypes::TimestampMillisecondType>().value(0), 1_704_103_200_000);
        let back = run(ltz.clone(), wall)?;
        assert_eq!(back.as_primitive::<arrow::datatypes::TimestampMillisecondType>().value(0), 1_704_074_400_000);
        let strings: ArrayRef = Arc::new(arrow::array::StringArray::from(vec!["2024-01-01 10:00:00", "2024-01-01 10:00:00+00:00"]));
        let read = run(ltz, strings)?;
        let read = read.as_primitive::<arrow::datatypes::TimestampMillisecondType>();
        assert_eq!((read.value(0), read.value(1)), (1_704_074_400_000, 1_704_103_200_000));
        Ok(())
    }
}
