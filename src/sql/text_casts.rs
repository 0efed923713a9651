//! Timestamps cast to text as Flink writes them.
//!
//! Flink's `CAST(ts AS STRING)` (`TimestampToStringCastRule`, `DateTimeUtils.formatTimestamp`)
//! writes `yyyy-MM-dd HH:mm:ss`, then a point and the fraction of the second with as many
//! digits as the type's precision (more only for non-zero digits past it): a `TIMESTAMP(3)`
//! of ten o'clock is `2024-01-01 10:00:00.000`, a `TIMESTAMP(0)` has no fraction. A
//! `TIMESTAMP_LTZ` is written in the session time zone, without an offset. A literal's precision is the digits it is written with, as Flink types
//! `TIMESTAMP '2024-01-01 10:00:00'` TIMESTAMP(0). Weir keeps TIMESTAMP(0) to TIMESTAMP(3) as
//! milliseconds, so those columns are written with 3 digits. Arrow's cast kernel, which
//! DataFusion's `CAST` calls, writes ISO 8601 instead (`2024-01-01T10:00:00`), so a key or a
//! message built from a window's bounds differed from Flink's.
//!
//! [`TimestampTextCasts`], an analyzer rule run after DataFusion's type coercion, turns each
//! cast of a timestamp to a string type, written (`CAST`, `::`, `TRY_CAST`) or added by the
//! coercion (`'at ' || ts`), into a call of [`TimestampToText`]. In a session time zone other
//! than UTC it also turns each cast between a TIMESTAMP_LTZ and a wall-clock type (TIMESTAMP,
//! DATE, TIME, a string), written or added by the coercion (a TIMESTAMP_LTZ compared with a
//! TIMESTAMP or a string), into a call of [`ZoneCast`], which reads the wall-clock side in that
//! zone as Flink and Postgres do ([`crate::plan::time_zone`]).

use std::fmt::Write as _;
use std::sync::Arc;

use chrono::{Datelike, Timelike};

use arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use arrow::datatypes::{
    DataType, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::ScalarValue;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use crate::plan::functions::zone_cast::ZoneCast;
use crate::plan::time_zone::{wall_clock, Zone};

/// The analyzer rule, for a session in `zone`; see the module docs.
#[derive(Debug, Default)]
pub struct TimestampTextCasts {
    pub zone: Zone,
}

impl AnalyzerRule for TimestampTextCasts {
    fn name(&self) -> &str {
        "weir_timestamp_text_casts"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> DfResult<LogicalPlan> {
        crate::sql::row_cast::rewrite_typed_expressions(plan, |e, schema| {
            if let Some(local) = self.field_in_zone(&e, schema) {
                return Ok(Transformed::yes(local));
            }
            let (inner, target) = match &e {
                Expr::Cast(c) => (c.expr.as_ref(), c.field.data_type()),
                Expr::TryCast(c) => (c.expr.as_ref(), c.field.data_type()),
                _ => return Ok(Transformed::no(e)),
            };
            let Ok(from) = inner.get_type(schema) else { return Ok(Transformed::no(e)) };
            let to_text = is_text(target) && matches!(from, DataType::Timestamp(..));
            if !to_text && !(!self.zone.is_utc() && ZoneCast::applies(&from, target)) {
                return Ok(Transformed::no(e));
            }
            let target = target.clone();
            let lenient = matches!(e, Expr::TryCast(_));
            let inner = match e {
                Expr::Cast(c) => *c.expr,
                Expr::TryCast(c) => *c.expr,
                _ => unreachable!("matched above"),
            };
            if !to_text {
                return Ok(Transformed::yes(ScalarUDF::new_from_impl(ZoneCast::new(target, self.zone, lenient)).call(vec![inner])));
            }
            let digits = literal_digits(&inner);
            let text = ScalarUDF::new_from_impl(TimestampToText::new(digits, self.zone)).call(vec![inner]);
            // `Utf8View` or `LargeUtf8` as the cast asked.
            Ok(Transformed::yes(if target == DataType::Utf8 { text } else { text.cast_to(&target, schema)? }))
        })
    }
}

impl TimestampTextCasts {
    /// DataFusion's `date_part` (`EXTRACT`) and `date_trunc` of a TIMESTAMP_LTZ, read in the
    /// session's zone when it is not UTC, as Postgres reads a `timestamptz`: the field of the
    /// wall-clock time (but the `epoch`, an instant's), and the instant of the truncated
    /// wall-clock time. `None` for any other expression.
    fn field_in_zone(&self, e: &Expr, schema: &datafusion::common::DFSchema) -> Option<Expr> {
        let Expr::ScalarFunction(f) = e else { return None };
        let name = f.name();
        if self.zone.is_utc() || !matches!(name, "date_part" | "date_trunc") || f.args.len() != 2 {
            return None;
        }
        let Ok(DataType::Timestamp(unit, Some(tz))) = f.args[1].get_type(schema) else { return None };
        if matches!(&f.args[0], Expr::Literal(ScalarValue::Utf8(Some(p)), _) if p.eq_ignore_ascii_case("epoch")) {
            return None;
        }
        // date_trunc of a TIMESTAMP_LTZ(3) to a unit FLOOR knows is FLOOR, which keeps the
        // input's offset in a repeated hour.
        if let (Expr::Literal(ScalarValue::Utf8(Some(part)), _), "date_trunc", TimeUnit::Millisecond) = (&f.args[0], name, unit) {
            if ["second", "minute", "hour", "day", "month", "quarter", "year"].contains(&part.to_ascii_lowercase().as_str()) {
                return Some(crate::plan::functions::time_floor(self.zone).call(vec![f.args[0].clone(), f.args[1].clone()]));
            }
        }
        let zone_cast = |to: DataType, e: Expr| ScalarUDF::new_from_impl(ZoneCast::new(to, self.zone, false)).call(vec![e]);
        let mut f = f.clone();
        let t = f.args.pop()?;
        f.args.push(zone_cast(DataType::Timestamp(unit, None), t));
        let call = Expr::ScalarFunction(f);
        Some(if name == "date_trunc" { zone_cast(DataType::Timestamp(unit, Some(tz)), call) } else { call })
    }
}

fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// When `e` is a literal timestamp (a string literal cast to a timestamp, as `TIMESTAMP
/// '2024-01-01 10:00:00.50'` is planned), the digits of its fraction as written (here 2). A
/// cast of such a literal to another timestamp type has that type's digits.
fn literal_digits(e: &Expr) -> Option<usize> {
    let inner = match e {
        Expr::Cast(c) => c.expr.as_ref(),
        Expr::TryCast(c) => c.expr.as_ref(),
        _ => return None,
    };
    match inner {
        Expr::Literal(ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)), _) => {
            // The fraction follows the seconds: a point after the last colon.
            let seconds = &s[s.rfind(':')?..];
            Some(seconds.split_once('.').map_or(0, |(_, f)| f.bytes().take_while(u8::is_ascii_digit).count()))
        }
        _ => None,
    }
}

/// `ts` as Flink's `CAST(ts AS STRING)` writes it (module docs): `Timestamp(unit, _)` to
/// `Utf8`, NULL for NULL, a TIMESTAMP_LTZ in `zone`. `digits`: the precision of a literal,
/// else the unit's.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TimestampToText {
    digits: Option<usize>,
    zone: Zone,
    signature: Signature,
}

impl TimestampToText {
    pub fn new(digits: Option<usize>, zone: Zone) -> Self {
        Self { digits, zone, signature: Signature::any(1, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for TimestampToText {
    fn name(&self) -> &str {
        "weir_timestamp_to_text"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        Ok(ColumnarValue::Array(timestamps_to_text(&wall_clock(&arrays[0], self.zone)?, self.digits)?))
    }
}

/// Each timestamp of `array` (any unit; a zone's values are UTC instants, written in UTC) as
/// Flink writes it, with at least `digits` digits of fraction (default: the unit's).
///
/// # Errors
/// `Execution` for an array that is not of timestamps.
pub fn timestamps_to_text(array: &ArrayRef, digits: Option<usize>) -> DfResult<ArrayRef> {
    let DataType::Timestamp(unit, _) = array.data_type() else {
        return datafusion::common::exec_err!("weir_timestamp_to_text of a {}", array.data_type());
    };
    // Nanoseconds per unit, and the type's precision (digits of the fraction).
    let (scale, precision): (i64, usize) = match unit {
        TimeUnit::Second => (1_000_000_000, 0),
        TimeUnit::Millisecond => (1_000_000, 3),
        TimeUnit::Microsecond => (1_000, 6),
        TimeUnit::Nanosecond => (1, 9),
    };
    let values: &[i64] = match unit {
        TimeUnit::Second => array.as_primitive::<TimestampSecondType>().values(),
        TimeUnit::Millisecond => array.as_primitive::<TimestampMillisecondType>().values(),
        TimeUnit::Microsecond => array.as_primitive::<TimestampMicrosecondType>().values(),
        TimeUnit::Nanosecond => array.as_primitive::<TimestampNanosecondType>().values(),
    };
    let precision = digits.unwrap_or(precision).min(9);
    let per_second = 1_000_000_000 / scale;
    let mut out = StringBuilder::with_capacity(array.len(), array.len() * (20 + precision));
    for (i, v) in values.iter().enumerate() {
        if array.is_null(i) {
            out.append_null();
            continue;
        }
        let (seconds, part) = (v.div_euclid(per_second), v.rem_euclid(per_second));
        let Some(at) = chrono::DateTime::from_timestamp(seconds, (part * scale) as u32) else {
            return datafusion::common::exec_err!("timestamp {v} ({unit:?} since 1970) is out of range");
        };
        // Written straight into the array's buffer, the row ended by the empty append.
        let t = at.naive_utc();
        let (y, mo, d, h, mi, se) = (t.year(), t.month(), t.day(), t.hour(), t.minute(), t.second());
        let _ = write!(out, "{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{se:02}");
        let nanos = at.timestamp_subsec_nanos();
        let digits = significant_digits(nanos).max(precision);
        if digits > 0 {
            let _ = write!(out, ".{:0digits$}", nanos / 10u32.pow(9 - digits as u32));
        }
        out.append_value("");
    }
    Ok(Arc::new(out.finish()))
}

/// The digits of a fraction of `nanos` ns (of 9) up to its last non-zero one.
fn significant_digits(nanos: u32) -> usize {
    if nanos == 0 {
        return 0;
    }
    let (mut n, mut digits) = (nanos, 9);
    while n % 10 == 0 {
        n /= 10;
        digits -= 1;
    }
    digits
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{StringArray, TimestampMicrosecondArray, TimestampMillisecondArray, TimestampSecondArray};
    use datafusion::common::DFSchema;

    fn texts(array: ArrayRef) -> Vec<Option<String>> {
        let out = timestamps_to_text(&array, None).unwrap();
        out.as_any().downcast_ref::<StringArray>().unwrap().iter().map(|s| s.map(str::to_string)).collect()
    }

    #[test]
    fn fractions_have_the_precision_of_the_type() {
        // 2024-01-01 10:00:00 UTC is 1704103200 s since 1970.
        let ms = TimestampMillisecondArray::from(vec![Some(1_704_103_200_000), Some(1_704_103_200_120), None]);
        assert_eq!(
            texts(Arc::new(ms)),
            vec![Some("2024-01-01 10:00:00.000".into()), Some("2024-01-01 10:00:00.120".into()), None]
        );
        let us = TimestampMicrosecondArray::from(vec![1_704_103_200_000_005]).with_timezone("UTC");
        assert_eq!(texts(Arc::new(us)), vec![Some("2024-01-01 10:00:00.000005".into())]);
        let s = TimestampSecondArray::from(vec![1_704_103_200]);
        assert_eq!(texts(Arc::new(s)), vec![Some("2024-01-01 10:00:00".into())]);
    }

    #[test]
    fn a_literal_has_the_digits_it_is_written_with() {
        let literal = |s: &str| {
            let text = Expr::Literal(ScalarValue::Utf8(Some(s.into())), None);
            text.cast_to(&DataType::Timestamp(TimeUnit::Microsecond, None), &DFSchema::empty()).unwrap()
        };
        assert_eq!(literal_digits(&literal("2024-01-01 10:00:00")), Some(0));
        assert_eq!(literal_digits(&literal("2024-01-01 10:00:00.50")), Some(2));
        let at = TimestampMicrosecondArray::from(vec![1_704_103_200_500_000]);
        let out = timestamps_to_text(&(Arc::new(at) as ArrayRef), Some(2)).unwrap();
        assert_eq!(out.as_string::<i32>().value(0), "2024-01-01 10:00:00.50");
    }

    #[test]
    fn instants_before_1970_count_back() {
        // -1 ms is 1969-12-31 23:59:59.999.
        let ms = TimestampMillisecondArray::from(vec![-1]);
        assert_eq!(texts(Arc::new(ms)), vec![Some("1969-12-31 23:59:59.999".into())]);
    }
}
