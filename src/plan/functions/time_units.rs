//! Flink's functions that take a time unit keyword: `TIMESTAMPDIFF(unit, t1, t2)`,
//! `TIMESTAMPADD(unit, n, t)`, `FLOOR(t TO unit)` and `CEIL(t TO unit)` (Flink docs, Temporal
//! Functions; Calcite's `SqlTimestampDiffFunction`, `SqlTimestampAddFunction` and
//! `DateTimeUtils`, which Flink runs). The parser takes the unit for a column name, so the
//! statement's text is rewritten first ([`crate::sql::time_units`]): the unit becomes a string
//! literal, and `FLOOR`/`CEIL ... TO` become `time_floor('unit', t)` / `time_ceil('unit', t)`.
//!
//! - Units: `SECOND`, `MINUTE`, `HOUR`, `DAY`, `WEEK`, `MONTH`, `QUARTER`, `YEAR` (Flink's
//!   `timepointunit` / `timeintervalunit`; `FLOOR`/`CEIL` take all but `WEEK`, whose start
//!   Calcite and DataFusion put on different days). Another is refused when the statement is
//!   planned.
//! - `TIMESTAMPDIFF` is `t2 - t1` in whole units, an INT, truncated toward zero. Months count
//!   calendar months: the largest `n` with `t1 + n months <= t2`, where adding months keeps the
//!   day of month or, past a shorter month's end, takes its last day (so from January 31 to
//!   February 29 is one month); a quarter is 3 of them, a year 12.
//! - `TIMESTAMPADD` adds `n` units (months as above) and keeps `t`'s type: a DATE stays a DATE
//!   for `DAY` and longer units and becomes a TIMESTAMP for shorter ones, as in Calcite.
//! - `FLOOR(t TO unit)` is the start of the unit `t` falls in, `CEIL(t TO unit)` the start of
//!   the next one unless `t` is a start already; both keep `t`'s type (a DATE stays a DATE).
//! - `FLOOR` and `CEIL` read a TIMESTAMP_LTZ in the session time zone
//!   ([`crate::plan::time_zone`]): its day starts at local midnight, and the result is the
//!   instant of the rounded wall-clock time: at the input's offset from UTC when the zone shows
//!   that instant as that time (so 01:30 of the second, standard-time pass of a fall-back hour
//!   floors to its 01:00, as in Flink and Postgres), else as a cast reads it. `TIMESTAMPDIFF` and `TIMESTAMPADD` count a
//!   TIMESTAMP_LTZ's units in UTC. Milliseconds are the finest unit kept, as in TIMESTAMP(3).
//! - NULL in, NULL out. An `n` or a result outside the timestamp range is an error.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Date32Builder, Int32Builder, TimestampMillisecondBuilder};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, FieldRef, TimeUnit, TimestampMillisecondType};
use chrono::{Datelike, Months, NaiveDate, NaiveDateTime};
use datafusion::common::{exec_err, plan_err, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{as_integer_type, as_string_type, num_rows, IntArg, StrArg};
use crate::plan::time_zone::{wall_clock, Overlap, Zone};

/// A unit of `TIMESTAMPDIFF`, `TIMESTAMPADD`, `FLOOR ... TO`, `CEIL ... TO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

impl Unit {
    /// The unit named `name` (any case; Flink's `SQL_TSI_*` synonyms too).
    pub fn parse(name: &str) -> Option<Unit> {
        let upper = name.trim().to_ascii_uppercase();
        Some(match upper.strip_prefix("SQL_TSI_").unwrap_or(&upper) {
            "SECOND" => Unit::Second,
            "MINUTE" => Unit::Minute,
            "HOUR" => Unit::Hour,
            "DAY" => Unit::Day,
            "WEEK" => Unit::Week,
            "MONTH" => Unit::Month,
            "QUARTER" => Unit::Quarter,
            "YEAR" => Unit::Year,
            _ => return None,
        })
    }

    /// Its length in ms for the fixed units; `None` for months, quarters and years.
    fn fixed_ms(self) -> Option<i64> {
        match self {
            Unit::Second => Some(1_000),
            Unit::Minute => Some(60_000),
            Unit::Hour => Some(3_600_000),
            Unit::Day => Some(86_400_000),
            Unit::Week => Some(7 * 86_400_000),
            Unit::Month | Unit::Quarter | Unit::Year => None,
        }
    }

    /// Its length in months for the calendar units.
    fn months(self) -> i64 {
        match self {
            Unit::Quarter => 3,
            Unit::Year => 12,
            _ => 1,
        }
    }
}

/// The unit literal of argument `index`, checked: `Ok(None)` when it is not a literal.
fn literal_unit(function: &str, scalars: &[Option<&ScalarValue>], index: usize) -> Result<Option<Unit>> {
    match scalars.get(index).copied().flatten() {
        Some(ScalarValue::Utf8(Some(name))) => match Unit::parse(name) {
            Some(unit) => Ok(Some(unit)),
            None => plan_err!(
                "{function}: '{name}' is not a time unit; use SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, QUARTER or YEAR"
            ),
        },
        _ => Ok(None),
    }
}

/// The unit of each row of argument `v` (a constant, in practice).
fn units<'a>(function: &'a str, v: &'a ColumnarValue) -> Result<impl Fn(usize) -> Result<Option<Unit>> + 'a> {
    let names = StrArg::new(v)?;
    Ok(move |i: usize| match names.get(i) {
        None => Ok(None),
        Some(name) => match Unit::parse(name) {
            Some(unit) => Ok(Some(unit)),
            None => exec_err!("{function}: '{name}' is not a time unit"),
        },
    })
}

/// The type a time argument is coerced to: a timestamp in ms (keeping its time zone), or
/// `None` when `t` is not a time.
fn as_time_type(t: &DataType) -> Option<DataType> {
    match t {
        DataType::Timestamp(_, tz) => Some(DataType::Timestamp(TimeUnit::Millisecond, tz.clone())),
        DataType::Date32 | DataType::Date64 | DataType::Null => Some(DataType::Timestamp(TimeUnit::Millisecond, None)),
        _ => None,
    }
}

/// A time argument as ms since the Unix epoch, UTC.
fn millis(v: &ColumnarValue, n: usize) -> Result<arrow::array::PrimitiveArray<TimestampMillisecondType>> {
    let array = v.to_array(n)?;
    let ms = cast(&array, &DataType::Timestamp(TimeUnit::Millisecond, None))?;
    Ok(ms.as_primitive::<TimestampMillisecondType>().clone())
}

fn to_datetime(ms: i64) -> Option<NaiveDateTime> {
    chrono::DateTime::from_timestamp_millis(ms).map(|t| t.naive_utc())
}

/// `t` plus `months` calendar months, the day clamped to the month's last (Calcite's
/// `addMonths`).
fn add_months(t: NaiveDateTime, months: i64) -> Option<NaiveDateTime> {
    let m = u32::try_from(months.unsigned_abs()).ok()?;
    if months >= 0 {
        t.checked_add_months(Months::new(m))
    } else {
        t.checked_sub_months(Months::new(m))
    }
}

/// Whole calendar months from `t1` to `t2`, truncated toward zero (Calcite's
/// `DateTimeUtils.subtractMonths`).
fn months_between(t1: NaiveDateTime, t2: NaiveDateTime) -> Option<i64> {
    if t2 < t1 {
        return months_between(t2, t1).map(|m| -m);
    }
    let mut m = i64::from(t2.year() - t1.year()) * 12 + i64::from(t2.month()) - i64::from(t1.month());
    while m > 0 && add_months(t1, m)? > t2 {
        m -= 1;
    }
    Some(m)
}

/// `TIMESTAMPDIFF(unit, t1, t2)` of one row.
fn diff(unit: Unit, t1: i64, t2: i64) -> Option<i64> {
    match unit.fixed_ms() {
        Some(len) => Some((t2 - t1) / len),
        None => Some(months_between(to_datetime(t1)?, to_datetime(t2)?)? / unit.months()),
    }
}

/// `TIMESTAMPADD(unit, n, t)` of one row, ms.
fn add(unit: Unit, n: i64, t: i64) -> Option<i64> {
    match unit.fixed_ms() {
        Some(len) => t.checked_add(n.checked_mul(len)?),
        None => Some(add_months(to_datetime(t)?, n.checked_mul(unit.months())?)?.and_utc().timestamp_millis()),
    }
}

/// The start of the `unit` that `t` falls in, ms.
fn floor(unit: Unit, t: i64) -> Option<i64> {
    if let Some(len) = unit.fixed_ms() {
        return Some(t - t.rem_euclid(len));
    }
    let d = to_datetime(t)?.date();
    let month0 = d.month0() - d.month0() % u32::try_from(unit.months()).ok()?;
    let start = NaiveDate::from_ymd_opt(d.year(), month0 + 1, 1)?;
    Some(start.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis())
}

/// The start of the next `unit` after `t`, or `t` when it is a start.
fn ceil(unit: Unit, t: i64) -> Option<i64> {
    let start = floor(unit, t)?;
    if start == t {
        Some(t)
    } else {
        add(unit, 1, start)
    }
}

/// `TIMESTAMPDIFF(unit, t1, t2)`: INT.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct TimestampDiff {
    signature: Signature,
}

impl TimestampDiff {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for TimestampDiff {
    fn name(&self) -> &str {
        "timestampdiff"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = "TIMESTAMPDIFF(unit, timepoint1, timepoint2)";
        let [unit, t1, t2] = arg_types else {
            return plan_err!("{usage} takes 3 arguments, got {}", arg_types.len());
        };
        let Some(unit) = as_string_type(unit) else {
            return plan_err!("{usage}: the unit must be a keyword such as SECOND or DAY");
        };
        match (as_time_type(t1), as_time_type(t2)) {
            (Some(t1), Some(t2)) => Ok(vec![unit, t1, t2]),
            _ => plan_err!("{usage}: the time points must be TIMESTAMPs or DATEs, got {t1} and {t2}"),
        }
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int32)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        literal_unit("TIMESTAMPDIFF", args.scalar_arguments, 0)?;
        Ok(Arc::new(Field::new(self.name(), DataType::Int32, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let unit = units("TIMESTAMPDIFF", &args.args[0])?;
        let (t1, t2) = (millis(&args.args[1], n)?, millis(&args.args[2], n)?);
        let mut out = Int32Builder::with_capacity(n);
        for i in 0..n {
            let (Some(unit), false, false) = (unit(i)?, t1.is_null(i), t2.is_null(i)) else {
                out.append_null();
                continue;
            };
            let Some(d) = diff(unit, t1.value(i), t2.value(i)) else {
                return exec_err!("TIMESTAMPDIFF: a time point is out of range");
            };
            let Ok(d) = i32::try_from(d) else {
                return exec_err!("TIMESTAMPDIFF: {d} {unit:?}s is out of range for type INT");
            };
            out.append_value(d);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// `TIMESTAMPADD(unit, n, t)`: `t`'s type.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct TimestampAdd {
    signature: Signature,
}

impl TimestampAdd {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for TimestampAdd {
    fn name(&self) -> &str {
        "timestampadd"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = "TIMESTAMPADD(unit, interval, timepoint)";
        let [unit, n, t] = arg_types else {
            return plan_err!("{usage} takes 3 arguments, got {}", arg_types.len());
        };
        let Some(unit) = as_string_type(unit) else {
            return plan_err!("{usage}: the unit must be a keyword such as SECOND or DAY");
        };
        let Some(n) = as_integer_type(n) else {
            return plan_err!("{usage}: the interval must be an integer, got {n}");
        };
        // A DATE is kept as it is: the result's type depends on the unit.
        let t = match t {
            DataType::Date32 | DataType::Date64 => DataType::Date32,
            other => match as_time_type(other) {
                Some(t) => t,
                None => return plan_err!("{usage}: the time point must be a TIMESTAMP or a DATE, got {other}"),
            },
        };
        Ok(vec![unit, n, t])
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types.get(2).cloned().unwrap_or(DataType::Timestamp(TimeUnit::Millisecond, None)))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let unit = literal_unit("TIMESTAMPADD", args.scalar_arguments, 0)?;
        let t = args.arg_fields.get(2).map(|f| f.data_type().clone());
        let out = match (t, unit) {
            (Some(DataType::Date32), Some(u)) if u.fixed_ms().is_none_or(|len| len % 86_400_000 == 0) => DataType::Date32,
            (Some(DataType::Date32), _) => DataType::Timestamp(TimeUnit::Millisecond, None),
            (Some(t), _) => t,
            (None, _) => DataType::Timestamp(TimeUnit::Millisecond, None),
        };
        Ok(Arc::new(Field::new(self.name(), out, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = num_rows(&args.args);
        let unit = units("TIMESTAMPADD", &args.args[0])?;
        let counts = IntArg::new(&args.args[1])?;
        let times = millis(&args.args[2], rows)?;
        let mut values = Vec::with_capacity(rows);
        for i in 0..rows {
            let (Some(unit), Some(count), false) = (unit(i)?, counts.get(i), times.is_null(i)) else {
                values.push(None);
                continue;
            };
            match add(unit, count, times.value(i)) {
                Some(v) => values.push(Some(v)),
                None => return exec_err!("TIMESTAMPADD: the result is out of range"),
            }
        }
        let out: ArrayRef = match args.return_field.data_type() {
            DataType::Date32 => {
                let mut b = Date32Builder::with_capacity(rows);
                for v in values {
                    b.append_option(v.map(|ms| ms.div_euclid(86_400_000) as i32));
                }
                Arc::new(b.finish())
            }
            DataType::Timestamp(_, tz) => {
                Arc::new(arrow::array::TimestampMillisecondArray::from(values).with_timezone_opt(tz.clone()))
            }
            other => return exec_err!("TIMESTAMPADD returns {other}"),
        };
        Ok(ColumnarValue::Array(out))
    }
}

/// `FLOOR(t TO unit)` (`time_floor('unit', t)`) or `CEIL(t TO unit)` (`time_ceil`): `t`'s
/// TIMESTAMP type.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct TimeRound {
    signature: Signature,
    ceil: bool,
    /// The session time zone, in which a TIMESTAMP_LTZ is rounded.
    zone: Zone,
}

impl TimeRound {
    /// `time_floor`, or `time_ceil` with `ceil`.
    pub(super) fn new(ceil: bool, zone: Zone) -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable), ceil, zone }
    }

    /// The instant of wall-clock time `local_ms` in the zone, preferring offset `offset_ms`
    /// (the input's) when the zone shows that instant as `local_ms` (module docs).
    fn instant_of(&self, local_ms: i64, offset_ms: i64) -> Option<i64> {
        let at = local_ms - offset_ms;
        let shown = chrono::DateTime::from_timestamp_millis(at).map(|t| self.zone.local(t).and_utc().timestamp_millis());
        if shown == Some(local_ms) {
            return Some(at);
        }
        let local = chrono::DateTime::from_timestamp_millis(local_ms)?.naive_utc();
        Some(self.zone.instant(local, Overlap::Earlier)?.timestamp_millis())
    }

    fn keyword(&self) -> &'static str {
        if self.ceil {
            "CEIL"
        } else {
            "FLOOR"
        }
    }
}

impl ScalarUDFImpl for TimeRound {
    fn name(&self) -> &str {
        if self.ceil {
            "time_ceil"
        } else {
            "time_floor"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = format!("{}(timepoint TO unit)", self.keyword());
        let [unit, t] = arg_types else {
            return plan_err!("{usage} takes a time point and a unit");
        };
        let Some(unit) = as_string_type(unit) else {
            return plan_err!("{usage}: the unit must be a keyword such as HOUR or DAY");
        };
        // A DATE stays a DATE (Calcite's FLOOR and CEIL of a DATE).
        match (t, as_time_type(t)) {
            (DataType::Date32 | DataType::Date64, _) => Ok(vec![unit, DataType::Date32]),
            (_, Some(t)) => Ok(vec![unit, t]),
            (_, None) => plan_err!("{usage}: the time point must be a TIMESTAMP or a DATE, got {t}"),
        }
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types.get(1).cloned().unwrap_or(DataType::Timestamp(TimeUnit::Millisecond, None)))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        if literal_unit(self.keyword(), args.scalar_arguments, 0)? == Some(Unit::Week) {
            return plan_err!("{} ... TO WEEK is not supported: the week's first day differs between engines", self.keyword());
        }
        let t = args.arg_fields.get(1).map_or(DataType::Timestamp(TimeUnit::Millisecond, None), |f| f.data_type().clone());
        Ok(Arc::new(Field::new(self.name(), t, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let unit = units(self.keyword(), &args.args[0])?;
        let input = args.args[1].to_array(n)?;
        let zoned = matches!(input.data_type(), DataType::Timestamp(_, Some(_)));
        let instants_ms = millis(&ColumnarValue::Array(Arc::clone(&input)), n)?;
        let times = millis(&ColumnarValue::Array(wall_clock(&input, self.zone)?), n)?;
        let mut out = TimestampMillisecondBuilder::with_capacity(n);
        for i in 0..n {
            let (Some(unit), false) = (unit(i)?, times.is_null(i)) else {
                out.append_null();
                continue;
            };
            let t = times.value(i);
            let mut rounded = if self.ceil { ceil(unit, t) } else { floor(unit, t) };
            if zoned {
                rounded = rounded.and_then(|r| self.instant_of(r, t - instants_ms.value(i)));
            }
            match rounded {
                Some(v) => out.append_value(v),
                None => return exec_err!("{}: the result is out of range", self.keyword()),
            }
        }
        let out = out.finish();
        Ok(ColumnarValue::Array(match args.return_field.data_type() {
            DataType::Date32 => cast(&out, &DataType::Date32)?,
            DataType::Timestamp(_, tz) => Arc::new(out.with_timezone_opt(tz.clone())),
            other => return exec_err!("{} returns {other}", self.keyword()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> i64 {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f").unwrap().and_utc().timestamp_millis()
    }

    fn show(ms: i64) -> String {
        to_datetime(ms).unwrap().format("%Y-%m-%d %H:%M:%S%.3f").to_string()
    }

    #[test]
    fn differences_count_whole_units_toward_zero() {
        let (a, b) = (ms("2024-01-01 00:00:00.000"), ms("2024-01-01 00:01:30.000"));
        assert_eq!(diff(Unit::Second, a, b), Some(90));
        assert_eq!(diff(Unit::Minute, a, b), Some(1));
        assert_eq!(diff(Unit::Minute, b, a), Some(-1));
        assert_eq!(diff(Unit::Hour, a, b), Some(0));
        // Calendar months: January 31 + 1 month is February 29 (2024), not later.
        assert_eq!(diff(Unit::Month, ms("2024-01-31 00:00:00.000"), ms("2024-02-29 00:00:00.000")), Some(1));
        assert_eq!(diff(Unit::Month, ms("2024-01-31 00:00:00.000"), ms("2024-02-28 23:59:59.999")), Some(0));
        assert_eq!(diff(Unit::Month, ms("2024-01-15 10:00:00.000"), ms("2024-03-15 09:59:59.999")), Some(1));
        assert_eq!(diff(Unit::Month, ms("2024-03-15 10:00:00.000"), ms("2024-01-15 10:00:00.000")), Some(-2));
        assert_eq!(diff(Unit::Quarter, ms("2024-01-01 00:00:00.000"), ms("2024-12-31 00:00:00.000")), Some(3));
        assert_eq!(diff(Unit::Year, ms("2020-02-29 00:00:00.000"), ms("2024-02-28 00:00:00.000")), Some(3));
        assert_eq!(diff(Unit::Year, ms("2020-02-29 00:00:00.000"), ms("2024-02-29 00:00:00.000")), Some(4));
        assert_eq!(diff(Unit::Week, ms("2024-01-01 00:00:00.000"), ms("2024-01-15 00:00:00.000")), Some(2));
    }

    #[test]
    fn adding_months_clamps_to_the_months_end() {
        assert_eq!(show(add(Unit::Month, 1, ms("2024-01-31 12:00:00.000")).unwrap()), "2024-02-29 12:00:00.000");
        assert_eq!(show(add(Unit::Year, -1, ms("2024-02-29 00:00:00.000")).unwrap()), "2023-02-28 00:00:00.000");
        assert_eq!(show(add(Unit::Quarter, 1, ms("2024-11-30 00:00:00.000")).unwrap()), "2025-02-28 00:00:00.000");
        assert_eq!(show(add(Unit::Minute, -90, ms("2024-01-01 00:00:00.000")).unwrap()), "2023-12-31 22:30:00.000");
    }

    #[test]
    fn floor_and_ceil_round_to_the_units_start() {
        let t = ms("2024-05-17 10:30:15.250");
        assert_eq!(show(floor(Unit::Hour, t).unwrap()), "2024-05-17 10:00:00.000");
        assert_eq!(show(ceil(Unit::Hour, t).unwrap()), "2024-05-17 11:00:00.000");
        assert_eq!(show(floor(Unit::Quarter, t).unwrap()), "2024-04-01 00:00:00.000");
        assert_eq!(show(ceil(Unit::Year, t).unwrap()), "2025-01-01 00:00:00.000");
        assert_eq!(show(ceil(Unit::Day, ms("2024-05-17 00:00:00.000")).unwrap()), "2024-05-17 00:00:00.000");
        // Before 1970 the start is still below.
        assert_eq!(show(floor(Unit::Day, ms("1969-12-31 23:00:00.000")).unwrap()), "1969-12-31 00:00:00.000");
    }

    #[test]
    fn units_parse_in_any_case() {
        assert_eq!(Unit::parse("second"), Some(Unit::Second));
        assert_eq!(Unit::parse("SQL_TSI_MONTH"), Some(Unit::Month));
        assert_eq!(Unit::parse("fortnight"), None);
    }
}
