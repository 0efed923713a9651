//! Flink's conversions between strings, epoch numbers and time values (Flink docs, Temporal
//! Functions; Flink's `DateTimeUtils`), in place of DataFusion's functions of the same names,
//! which read chrono patterns, count seconds and return other types:
//!
//! | call | returns |
//! |---|---|
//! | `TO_TIMESTAMP(string)` | TIMESTAMP(3): `yyyy-M[M]-d[d]`, optionally followed by ` H[H]:m[m]:s[s]` and a fraction of up to 9 digits (Flink's `DEFAULT_TIMESTAMP_FORMATTER`), the fraction cut to milliseconds |
//! | `TO_TIMESTAMP(string, format)` | TIMESTAMP(3): `string` read in the Java pattern `format` (the letters of [`super::date_format`]); a string that does not match is read as above, as Flink falls back to `Timestamp.valueOf` |
//! | `TO_TIMESTAMP_LTZ(numeric [, precision])` | TIMESTAMP_LTZ(3): epoch seconds (`precision` 0) or milliseconds (3, the default); a fractional number is cut toward zero; another precision is refused |
//! | `TO_TIMESTAMP_LTZ(string [, format [, zone]])` | TIMESTAMP_LTZ(3): the string read as `TO_TIMESTAMP` does, as a local time in the session time zone ([`crate::plan::time_zone`]), as a cast reads one, or in `zone` (Flink 2; NULL for a name that is no zone) |
//! | `FROM_UNIXTIME(seconds [, format])` | STRING: epoch seconds written in the Java pattern `format` (default `yyyy-MM-dd HH:mm:ss`) in the session time zone |
//! | `TO_DATE(string [, format])` | DATE: `yyyy[-M[M][-d[d]]]` before the first space (Flink's `parseDate`), or the string read in `format` |
//!
//! NULL in, NULL out. A string that does not parse, and an instant outside the years 0000 to
//! 9999 (Flink's `MIN_EPOCH_MILLS`, `MAX_EPOCH_MILLS`), give NULL, as in Flink. A literal
//! `format` with an unknown letter, and a literal `precision` other than 0 or 3, are refused
//! when the statement is planned.

use std::sync::Arc;

use arrow::array::{Array, AsArray, StringBuilder, TimestampMillisecondBuilder};
use arrow::datatypes::{DataType, Field, FieldRef, Float64Type, Int64Type, TimeUnit, TimestampMillisecondType};
use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use datafusion::common::{exec_err, internal_err, plan_err, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{as_integer_type, as_string_type, literal_str, num_rows, IntArg, StrArg};
use super::date_format::{parse_pattern, write_items};
use super::unix_timestamp::{chrono_format, Parser, Parsers};
use crate::plan::time_zone::{instants, Overlap, Zone};

/// `yyyy-MM-dd HH:mm:ss`, FROM_UNIXTIME's default pattern.
const DEFAULT_PATTERN: &str = "yyyy-MM-dd HH:mm:ss";

/// The first and last instants Flink's timestamps hold: 0000-01-01 00:00:00.000 and
/// 9999-12-31 23:59:59.999 UTC, in milliseconds since 1970.
const MIN_EPOCH_MILLIS: i64 = -62_167_219_200_000;
const MAX_EPOCH_MILLIS: i64 = 253_402_300_799_999;

/// Which of the module's functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Conversion {
    ToTimestamp,
    ToTimestampLtz,
    FromUnixtime,
    ToDate,
}

/// One of the module's functions (module docs).
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct TimeConversion {
    conversion: Conversion,
    signature: Signature,
    /// The session time zone: where TO_TIMESTAMP_LTZ reads a string and FROM_UNIXTIME writes.
    zone: Zone,
}

impl TimeConversion {
    pub(super) fn new(conversion: Conversion, zone: Zone) -> Self {
        Self { conversion, signature: Signature::user_defined(Volatility::Immutable), zone }
    }

    pub(super) fn all(zone: Zone) -> [Self; 4] {
        [Conversion::ToTimestamp, Conversion::ToTimestampLtz, Conversion::FromUnixtime, Conversion::ToDate].map(|c| Self::new(c, zone))
    }

    fn usage(&self) -> &'static str {
        match self.conversion {
            Conversion::ToTimestamp => "TO_TIMESTAMP(string [, format])",
            Conversion::ToTimestampLtz => {
                "TO_TIMESTAMP_LTZ(numeric [, precision]) or TO_TIMESTAMP_LTZ(string [, format [, zone]])"
            }
            Conversion::FromUnixtime => "FROM_UNIXTIME(seconds [, format])",
            Conversion::ToDate => "TO_DATE(string [, format])",
        }
    }
}

impl ScalarUDFImpl for TimeConversion {
    fn name(&self) -> &str {
        match self.conversion {
            Conversion::ToTimestamp => "to_timestamp",
            Conversion::ToTimestampLtz => "to_timestamp_ltz",
            Conversion::FromUnixtime => "from_unixtime",
            Conversion::ToDate => "to_date",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = self.usage();
        let (first, second) = match arg_types {
            [first] => (first, None),
            [first, second] => (first, Some(second)),
            // Flink 2's TO_TIMESTAMP_LTZ(string, format, zone) (FLINK-36862).
            [first, format, zone] if self.conversion == Conversion::ToTimestampLtz => {
                return match (as_string_type(first), as_string_type(format), as_string_type(zone)) {
                    (Some(a), Some(b), Some(c)) => Ok(vec![a, b, c]),
                    _ => plan_err!("{usage}: TO_TIMESTAMP_LTZ(string, format, zone) takes three strings"),
                };
            }
            _ => return plan_err!("{usage} takes 1 or 2 arguments, got {}", arg_types.len()),
        };
        let string = as_string_type(first);
        let first = match self.conversion {
            Conversion::ToTimestamp | Conversion::ToDate => string,
            Conversion::FromUnixtime => as_integer_type(first),
            Conversion::ToTimestampLtz => string.or_else(|| match first {
                t if t.is_integer() => Some(DataType::Int64),
                t if t.is_floating() || matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..)) => {
                    Some(DataType::Float64)
                }
                _ => None,
            }),
        };
        let Some(first) = first else {
            if self.conversion == Conversion::ToTimestamp && arg_types[0].is_numeric() {
                return plan_err!(
                    "{usage} reads a string; for epoch seconds or milliseconds use TO_TIMESTAMP_LTZ(n, 0) or \
                     TO_TIMESTAMP_LTZ(n, 3)"
                );
            }
            return plan_err!("{usage}: the first argument cannot be a {}", arg_types[0]);
        };
        let mut out = vec![first.clone()];
        if let Some(second) = second {
            // A precision after a number, else a format.
            let precision = self.conversion == Conversion::ToTimestampLtz && first != DataType::Utf8;
            let coerced = if precision { as_integer_type(second) } else { as_string_type(second) };
            match coerced {
                Some(t) => out.push(t),
                None if precision => return plan_err!("{usage}: the precision must be an integer, got {second}"),
                None => return plan_err!("{usage}: the format must be a string, got {second}"),
            }
        }
        Ok(out)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(match self.conversion {
            Conversion::ToTimestamp => DataType::Timestamp(TimeUnit::Millisecond, None),
            Conversion::ToTimestampLtz => DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            Conversion::FromUnixtime => DataType::Utf8,
            Conversion::ToDate => DataType::Date32,
        })
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let name = self.name().to_uppercase();
        let numeric = args.arg_fields.first().is_some_and(|f| f.data_type() != &DataType::Utf8);
        if self.conversion == Conversion::ToTimestampLtz && numeric {
            if let Some(Some(p)) = args.scalar_arguments.get(1) {
                if let Some(p) = integer(p) {
                    check_precision(p)?;
                }
            }
        } else if let Some(format) = literal_str(args.scalar_arguments, 1) {
            if let Err(e) = parse_pattern(format).and_then(|_| self.check_format(format)) {
                return plan_err!("{name}: the format '{format}' is invalid: {e}");
            }
        }
        Ok(Arc::new(Field::new(self.name(), self.return_type(&[])?, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let out: arrow::array::ArrayRef = match self.conversion {
            Conversion::ToTimestamp => Arc::new(self.read_strings(&args.args, n, None)?),
            Conversion::ToTimestampLtz => match &args.args[0] {
                v if v.data_type() == DataType::Utf8 => {
                    // Flink reads the text as a TIMESTAMP and that in the zone as its CAST does
                    // (`LocalDateTime.atZone`: an overlap's earlier instant).
                    let local: arrow::array::ArrayRef = Arc::new(self.read_strings(&args.args[..2.min(args.args.len())], n, None)?);
                    let ltz = match args.args.get(2) {
                        None => instants(&local, self.zone, Overlap::Earlier)?,
                        Some(zones) => in_named_zones(&local, zones, n)?,
                    };
                    // The year range is the instant's, as Flink's.
                    Arc::new(ltz.as_primitive::<TimestampMillisecondType>().iter().map(|v| v.filter(|ms| in_range(*ms))).collect::<arrow::array::TimestampMillisecondArray>().with_timezone("UTC"))
                }
                _ => Arc::new(epoch_numbers(&args.args, n)?),
            },
            Conversion::FromUnixtime => Arc::new(from_unixtime(&args.args, n, self.zone)?),
            Conversion::ToDate => Arc::new(to_date(&args.args, n)?),
        };
        Ok(ColumnarValue::Array(out))
    }
}

impl TimeConversion {
    /// Whether `format` can be read (TO_TIMESTAMP, TO_DATE) or written (FROM_UNIXTIME).
    fn check_format(&self, format: &str) -> std::result::Result<(), String> {
        match self.conversion {
            Conversion::FromUnixtime => Ok(()),
            _ => chrono_format(format).map(|_| ()),
        }
    }

    /// TO_TIMESTAMP and the string form of TO_TIMESTAMP_LTZ: each string as milliseconds, in
    /// time zone `tz` (none: a TIMESTAMP). A string that does not match its format is read in
    /// the default form, as Flink falls back to `Timestamp.valueOf`.
    fn read_strings(&self, args: &[ColumnarValue], n: usize, tz: Option<&str>) -> Result<arrow::array::TimestampMillisecondArray> {
        let times = read_each(args, n, parse_default, |parser, s| {
            parser.and_then(|p| p.datetime(s, true)).or_else(|| parse_default(s))
        })?;
        let millis = times.into_iter().map(|t| t.map(|t| t.and_utc().timestamp_millis()).filter(|ms| in_range(*ms)));
        let out = arrow::array::TimestampMillisecondArray::from(millis.collect::<Vec<_>>());
        Ok(match tz {
            Some(tz) => out.with_timezone(tz),
            None => out,
        })
    }
}

/// Each row's string (the first argument) read by `default` when there is no format argument,
/// else by `with` given the parser of its format (`None`: a format that does not parse); NULL
/// when the string or its format is NULL.
fn read_each<T>(
    args: &[ColumnarValue],
    n: usize,
    default: impl Fn(&str) -> Option<T>,
    with: impl Fn(Option<&Parser>, &str) -> Option<T>,
) -> Result<Vec<Option<T>>> {
    let strings = StrArg::new(&args[0])?;
    let formats = args.get(1).map(StrArg::new).transpose()?;
    let mut parsers = Parsers::default();
    Ok((0..n)
        .map(|i| {
            let s = strings.get(i)?;
            match &formats {
                None => default(s),
                Some(formats) => with(parsers.get(formats.get(i)?), s),
            }
        })
        .collect())
}

fn integer(v: &ScalarValue) -> Option<i64> {
    match v {
        ScalarValue::Int8(Some(p)) => Some(i64::from(*p)),
        ScalarValue::Int16(Some(p)) => Some(i64::from(*p)),
        ScalarValue::Int32(Some(p)) => Some(i64::from(*p)),
        ScalarValue::Int64(Some(p)) => Some(*p),
        _ => None,
    }
}

/// Flink's refusal of a precision other than seconds and milliseconds, when planned.
fn check_precision(p: i64) -> Result<()> {
    if p == 0 || p == 3 {
        return Ok(());
    }
    plan_err!("{}", precision_refused(p))
}

/// Flink's words for a precision other than 0 and 3.
fn precision_refused(p: i64) -> String {
    format!(
        "The precision value '{p}' for function TO_TIMESTAMP_LTZ(numeric, precision) is unsupported, the supported \
         value is '0' for second or '3' for millisecond."
    )
}

fn in_range(ms: i64) -> bool {
    (MIN_EPOCH_MILLIS..=MAX_EPOCH_MILLIS).contains(&ms)
}

/// TO_TIMESTAMP_LTZ of numbers: seconds or milliseconds (the second argument, default 3).
fn epoch_numbers(args: &[ColumnarValue], n: usize) -> Result<arrow::array::TimestampMillisecondArray> {
    let precisions = args.get(1).map(IntArg::new).transpose()?;
    let values = match &args[0] {
        ColumnarValue::Array(a) => Arc::clone(a),
        ColumnarValue::Scalar(s) => s.to_array_of_size(1)?,
    };
    let at = |i: usize| if values.len() == 1 { 0 } else { i };
    // Read once per batch: integers, floats (DECIMAL too), or only NULLs.
    let (ints, floats) = (values.as_primitive_opt::<Int64Type>(), values.as_primitive_opt::<Float64Type>());
    if ints.is_none() && floats.is_none() && values.data_type() != &DataType::Null {
        return internal_err!("TO_TIMESTAMP_LTZ of {}", values.data_type());
    }
    let mut out = TimestampMillisecondBuilder::with_capacity(n);
    for i in 0..n {
        let precision = match &precisions {
            None => Some(3),
            Some(p) => p.get(i),
        };
        let (Some(precision), true) = (precision, values.is_valid(at(i))) else {
            out.append_null();
            continue;
        };
        if precision != 0 && precision != 3 {
            return exec_err!("{}", precision_refused(precision));
        }
        // Cut toward zero, as Java's `(long)` and `RoundingMode.DOWN`.
        let ms = if let Some(ints) = ints {
            let v = ints.value(at(i));
            if precision == 0 { v.checked_mul(1000) } else { Some(v) }
        } else if let Some(floats) = floats {
            let v = floats.value(at(i));
            let ms = if precision == 0 { v * 1000.0 } else { v };
            (ms.is_finite() && ms.abs() < 9.2e18).then(|| ms.trunc() as i64)
        } else {
            None
        };
        out.append_option(ms.filter(|ms| in_range(*ms)));
    }
    Ok(out.finish().with_timezone("UTC"))
}

/// Wall-clock times `local` (a TIMESTAMP(3) column) read each in the zone its row of `zones`
/// names (`Zone::session`'s forms; NULL for a name that is none), as TO_TIMESTAMP_LTZ's third
/// argument asks.
fn in_named_zones(local: &arrow::array::ArrayRef, zones: &ColumnarValue, n: usize) -> Result<arrow::array::ArrayRef> {
    let zones = StrArg::new(zones)?;
    let local = local.as_primitive::<TimestampMillisecondType>();
    let mut out = TimestampMillisecondBuilder::with_capacity(n);
    for i in 0..n {
        let instant = (|| {
            let zone = Zone::session(zones.get(i)?).ok()?;
            let t = chrono::DateTime::from_timestamp_millis(local.is_valid(i).then(|| local.value(i))?)?;
            Some(zone.instant(t.naive_utc(), Overlap::Earlier)?.timestamp_millis())
        })();
        out.append_option(instant);
    }
    Ok(Arc::new(out.finish().with_timezone("UTC")))
}

/// FROM_UNIXTIME: seconds since 1970 written in a Java pattern, in `zone`.
fn from_unixtime(args: &[ColumnarValue], n: usize, zone: Zone) -> Result<arrow::array::StringArray> {
    let seconds = IntArg::new(&args[0])?;
    let formats = args.get(1).map(StrArg::new).transpose()?;
    let mut last: Option<(&str, Option<Vec<super::date_format::Item>>)> = None;
    let mut out = StringBuilder::with_capacity(n, n * DEFAULT_PATTERN.len());
    for i in 0..n {
        let format = match &formats {
            None => Some(DEFAULT_PATTERN),
            Some(f) => f.get(i),
        };
        let (Some(s), Some(format)) = (seconds.get(i), format) else {
            out.append_null();
            continue;
        };
        if last.as_ref().is_none_or(|(f, _)| *f != format) {
            last = Some((format, parse_pattern(format).ok()));
        }
        let t = s.checked_mul(1000).filter(|ms| in_range(*ms)).and_then(chrono::DateTime::from_timestamp_millis);
        match (last.as_ref().and_then(|(_, items)| items.as_ref()), t) {
            (Some(items), Some(t)) => {
                if write_items(&mut out, items, &zone.local(t)).is_err() {
                    return exec_err!("FROM_UNIXTIME could not write {s} as '{format}'");
                }
                out.append_value("");
            }
            _ => out.append_null(),
        }
    }
    Ok(out.finish())
}

/// TO_DATE: days since 1970.
fn to_date(args: &[ColumnarValue], n: usize) -> Result<arrow::array::Date32Array> {
    let dates = read_each(args, n, parse_date, |parser, s| parser?.datetime(s, false).map(|t| t.date()))?;
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
    let days = dates.into_iter().map(|d| d.and_then(|d| i32::try_from((d - epoch).num_days()).ok()));
    Ok(arrow::array::Date32Array::from(days.collect::<Vec<_>>()))
}

/// Flink's default timestamp form (`DEFAULT_TIMESTAMP_FORMATTER`): `yyyy-M[M]-d[d]`, then
/// optionally ` H[H]:m[m]:s[s]` and `.` with up to 9 digits; the whole string, the fraction cut
/// to milliseconds.
pub(super) fn parse_default(s: &str) -> Option<NaiveDateTime> {
    let mut rest = s;
    let year = digits(&mut rest, 4, 4)?;
    let month = after(&mut rest, '-').then(|| digits(&mut rest, 1, 2)).flatten()?;
    let day = after(&mut rest, '-').then(|| digits(&mut rest, 1, 2)).flatten()?;
    let date = NaiveDate::from_ymd_opt(year as i32, month, day)?;
    if rest.is_empty() {
        return date.and_hms_opt(0, 0, 0);
    }
    let hour = after(&mut rest, ' ').then(|| digits(&mut rest, 1, 2)).flatten()?;
    let minute = after(&mut rest, ':').then(|| digits(&mut rest, 1, 2)).flatten()?;
    let second = after(&mut rest, ':').then(|| digits(&mut rest, 1, 2)).flatten()?;
    let mut nanos = 0;
    if after(&mut rest, '.') {
        let fraction: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if fraction.len() > 9 {
            return None;
        }
        rest = &rest[fraction.len()..];
        nanos = format!("{fraction:0<9}").parse::<u32>().ok()?;
    }
    if !rest.is_empty() {
        return None;
    }
    let millis = nanos / 1_000_000 * 1_000_000;
    Some(date.and_time(NaiveTime::from_hms_nano_opt(hour, minute, second, millis)?))
}

/// Reads `min..=max` ASCII digits off the front of `s`.
fn digits(s: &mut &str, min: usize, max: usize) -> Option<u32> {
    let count = s.bytes().take(max).take_while(u8::is_ascii_digit).count();
    if count < min {
        return None;
    }
    let v = s[..count].parse().ok()?;
    *s = &s[count..];
    Some(v)
}

/// Takes `c` off the front of `s`, if it is there.
fn after(s: &mut &str, c: char) -> bool {
    match s.strip_prefix(c) {
        Some(rest) => {
            *s = rest;
            true
        }
        None => false,
    }
}

/// Flink's `parseDate(String)`: what comes before the first space, `y`, `y-m` or `y-m-d`
/// (numbers, blanks around them allowed), a real date of the years 0 to 9999.
fn parse_date(s: &str) -> Option<NaiveDate> {
    let s = match s.find(' ') {
        Some(space) if space > 0 => &s[..space],
        _ => s,
    };
    let number = |p: &str| -> Option<u32> {
        let p = p.trim();
        (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())).then(|| p.parse().ok()).flatten()
    };
    let mut parts = s.splitn(3, '-');
    let year = number(parts.next()?)?;
    let month = parts.next().map(number).unwrap_or(Some(1))?;
    let day = parts.next().map(number).unwrap_or(Some(1))?;
    if year > 9999 {
        return None;
    }
    NaiveDate::from_ymd_opt(year as i32, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Option<String> {
        parse_default(s).map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
    }

    #[test]
    fn the_default_form_is_flinks() {
        assert_eq!(at("2024-01-02 03:04:05"), Some("2024-01-02 03:04:05.000".into()));
        assert_eq!(at("2024-1-2 3:4:5.123456"), Some("2024-01-02 03:04:05.123".into()), "cut to milliseconds");
        assert_eq!(at("2024-01-02"), Some("2024-01-02 00:00:00.000".into()));
        assert_eq!(at("2024-01-02 10:00:00.5"), Some("2024-01-02 10:00:00.500".into()));
        assert_eq!(at("2024-02-30 10:00:00"), None, "no such day");
        assert_eq!(at("2024-01-02T10:00:00"), None);
        assert_eq!(at("2024-01-02 10:00"), None);
        assert_eq!(at("2024-01-02 10:00:00 x"), None);
        assert_eq!(at("24-01-02"), None);
    }

    #[test]
    fn dates_are_read_as_flinks_parse_date() {
        let d = |s: &str| parse_date(s).map(|d| d.to_string());
        assert_eq!(d("2024-03-04"), Some("2024-03-04".into()));
        assert_eq!(d("2024-3-4 10:00:00"), Some("2024-03-04".into()));
        assert_eq!(d("2024"), Some("2024-01-01".into()));
        assert_eq!(d("2024-02-30"), None);
        assert_eq!(d("x"), None);
    }
}
