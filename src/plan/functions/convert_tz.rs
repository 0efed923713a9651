//! `CONVERT_TZ(datetime, from_zone, to_zone)`: the wall-clock time `datetime` (text
//! `yyyy-MM-dd HH:mm:ss`) in zone `from_zone`, as the wall-clock time of the same instant in
//! `to_zone`, text in the same form (Flink docs, Temporal Functions; Flink's
//! `DateTimeUtils.convertTz`). `CONVERT_TZ('1970-01-01 00:00:00', 'UTC',
//! 'America/Los_Angeles')` is `'1969-12-31 16:00:00'`.
//!
//! Zones are named as Java's `TimeZone.getTimeZone` reads them: a region
//! (`America/Los_Angeles`), `UTC` or `GMT`, a custom `GMT+8`, `GMT-08:00` or `GMT+0800`, or one
//! of Java's three-letter IDs (`PST` is America/Los_Angeles, `CTT` Asia/Shanghai, `EST` a fixed
//! -05:00). A name Java does not know is GMT, as in Java and Flink.
//!
//! The text is read as Java's lenient `SimpleDateFormat` reads it, which Flink uses: fields out
//! of range roll over (`2020-02-30 00:00:00` is March 1st, hour 25 the next day's 01:00), a time
//! the clocks skip (a spring-forward gap) is read with the offset before the gap, and one they
//! repeat (a fall-back hour) as standard time, the later instant (`GregorianCalendar`). Text
//! after the seconds (a fraction) is ignored; text that is not such a time is NULL.
//!
//! NULL in, NULL out.

use std::sync::Arc;

use arrow::array::StringBuilder;
use arrow::datatypes::DataType;
use chrono::NaiveDateTime;
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{all_strings, num_rows, StrArg};
use crate::plan::time_zone::{Overlap, Zone};

/// `CONVERT_TZ`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct ConvertTz {
    signature: Signature,
}

impl ConvertTz {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for ConvertTz {
    fn name(&self) -> &str {
        "convert_tz"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        all_strings("CONVERT_TZ(datetime string, from zone, to zone)", arg_types, 3..=3)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let (times, from, to) = (StrArg::new(&args.args[0])?, StrArg::new(&args.args[1])?, StrArg::new(&args.args[2])?);
        let mut out = StringBuilder::with_capacity(n, 0);
        for i in 0..n {
            let converted = match (times.get(i), from.get(i), to.get(i)) {
                (Some(t), Some(f), Some(z)) => convert(t, &Zone::named(f), &Zone::named(z)),
                _ => None,
            };
            out.append_option(converted);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// `text` (`yyyy-MM-dd HH:mm:ss`, anything after the seconds ignored) read leniently, as
/// Java's `SimpleDateFormat`: each field a number of up to its width's digits or more, then
/// rolled over from January 1st of the year (month 13 is the next January, day 0 the month's
/// day before the first).
fn lenient_local(text: &str) -> Option<NaiveDateTime> {
    static FORM: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^\s*(\d{1,9})-(\d{1,9})-(\d{1,9}) (\d{1,9}):(\d{1,9}):(\d{1,9})").expect("a valid regex")
    });
    let c = FORM.captures(text)?;
    let field = |i: usize| c[i].parse::<i64>().ok();
    let (year, month, day) = (i32::try_from(field(1)?).ok()?, field(2)?, field(3)?);
    let (hour, minute, second) = (field(4)?, field(5)?, field(6)?);
    let start = chrono::NaiveDate::from_ymd_opt(year, 1, 1)?;
    let months = chrono::Months::new(u32::try_from((month - 1).unsigned_abs()).ok()?);
    let date = if month >= 1 { start.checked_add_months(months)? } else { start.checked_sub_months(months)? };
    let date = date.checked_add_signed(chrono::Duration::days(day - 1))?.and_hms_opt(0, 0, 0)?;
    date.checked_add_signed(chrono::Duration::seconds(hour * 3600 + minute * 60 + second))
}

/// `CONVERT_TZ` of one value.
fn convert(time: &str, from: &Zone, to: &Zone) -> Option<String> {
    let local = to.local(from.instant(lenient_local(time)?, Overlap::Later)?);
    // Java writes the year's digits (10000, not chrono's +10000).
    Some(format!("{:04}-{}", chrono::Datelike::year(&local), local.format("%m-%d %H:%M:%S")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tz(t: &str, from: &str, to: &str) -> Option<String> {
        convert(t, &Zone::named(from), &Zone::named(to))
    }

    #[test]
    fn converts_as_java_zones() {
        // Flink's docs' example: LA is 8 hours behind UTC in January.
        assert_eq!(tz("1970-01-01 00:00:00", "UTC", "America/Los_Angeles").as_deref(), Some("1969-12-31 16:00:00"));
        // July: daylight time, 7 hours.
        assert_eq!(tz("2024-07-01 12:00:00", "UTC", "PST").as_deref(), Some("2024-07-01 05:00:00"));
        assert_eq!(tz("2024-07-01 12:00:00", "UTC", "EST").as_deref(), Some("2024-07-01 07:00:00"));
        assert_eq!(tz("2024-01-01 00:00:00", "GMT+08:00", "GMT-0130").as_deref(), Some("2023-12-31 14:30:00"));
        assert_eq!(tz("2024-01-01 00:00:00", "Asia/Shanghai", "UTC").as_deref(), Some("2023-12-31 16:00:00"));
        assert_eq!(tz("2024-01-01 00:00:00", "No/Such_Zone", "GMT+1").as_deref(), Some("2024-01-01 01:00:00"), "unknown is GMT");
        assert_eq!(tz("2024-01-01 00:00:00.789", "UTC", "JST").as_deref(), Some("2024-01-01 09:00:00"));
        // 02:30 on 2024-03-10 does not exist in Los Angeles: read at -08:00, shown in daylight time.
        assert_eq!(tz("2024-03-10 02:30:00", "America/Los_Angeles", "America/Los_Angeles").as_deref(), Some("2024-03-10 03:30:00"));
        assert_eq!(tz("2024-01-01", "UTC", "UTC"), None);
        // Lenient fields roll over; a repeated hour is standard time (PST, -08:00).
        assert_eq!(tz("2020-02-30 00:00:00", "UTC", "UTC").as_deref(), Some("2020-03-01 00:00:00"));
        assert_eq!(tz("2020-01-01 25:00:00", "UTC", "UTC").as_deref(), Some("2020-01-02 01:00:00"));
        assert_eq!(tz("2020-13-01 00:00:00", "UTC", "UTC").as_deref(), Some("2021-01-01 00:00:00"));
        assert_eq!(tz("2024-11-03 01:30:00", "America/Los_Angeles", "UTC").as_deref(), Some("2024-11-03 09:30:00"));
        assert_eq!(tz("9999-12-31 23:00:00", "UTC", "Asia/Tokyo").as_deref(), Some("10000-01-01 08:00:00"));
    }
}
