//! `DATE_FORMAT(ts, format)`: `ts` as a string in the Java date pattern `format` (Flink docs,
//! Temporal Functions: "the format string is compatible with Java's SimpleDateFormat"; Flink
//! formats a TIMESTAMP with `java.time.DateTimeFormatter` in `DateTimeUtils.formatTimestamp`).
//!
//! `ts` is a TIMESTAMP (a TIMESTAMP_LTZ is shown in the session time zone,
//! [`crate::plan::time_zone`]), a DATE (at
//! midnight), or a string `yyyy-MM-dd HH:mm:ss` (Flink's second form; anything after the
//! seconds is ignored, and a string that does not parse gives NULL). NULL in, NULL out.
//!
//! # Pattern letters (DateTimeFormatter's)
//! | letter | field | 1 | 2 | 3 | 4 | 5 |
//! |---|---|---|---|---|---|---|
//! | `y` | year of era | `2015` | `15` | `2015` | `2015` (pad to the count) | |
//! | `M`, `L` | month | `7` | `07` | `Jul` | `July` | `J` |
//! | `d` | day of month | `5` | `05` | | | |
//! | `D` | day of year | `9` | `09` | `009` | | |
//! | `E` | day of week | `Wed` | `Wed` | `Wed` | `Wednesday` | `W` |
//! | `a` | AM/PM | `PM` | | | | |
//! | `H`, `k` | hour 0-23, 1-24 | `9` | `09` | | | |
//! | `h`, `K` | hour 1-12, 0-11 | `9` | `09` | | | |
//! | `m`, `s` | minute, second | `5` | `05` | | | |
//! | `S` | fraction of second | `1` | `12` | `123` | ... up to 9 digits | |
//!
//! Text in single quotes is copied (`''` is a quote), as is any character that is not an ASCII
//! letter; `[` and `]` (optional sections) print their content. `S` is DateTimeFormatter's
//! fraction, so `SSS` gives milliseconds as in SimpleDateFormat.
//!
//! # Errors
//! Another letter, too many of one letter, `#`, `{`, `}` or an unclosed quote: a literal
//! format is refused when the statement is planned, naming the letter and the valid ones; a
//! format read from a column gives NULL for that row.

use std::fmt::Write;
use std::sync::Arc;

use arrow::array::{Array, AsArray, StringBuilder};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, FieldRef, TimeUnit, TimestampMicrosecondType};
use chrono::{Datelike, NaiveDateTime, Timelike};
use datafusion::common::{exec_err, internal_err, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::args::{as_string_type, literal_str, num_rows, StrArg};
use crate::plan::time_zone::Zone;

/// `DATE_FORMAT` (Java patterns), or Postgres's `TO_CHAR` of a timestamp (its templates,
/// [`super::pg_to_char`]), which read their first argument alike.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct DateFormat {
    signature: Signature,
    /// `TO_CHAR`.
    postgres: bool,
    /// The session time zone, in which a TIMESTAMP_LTZ is read.
    zone: Zone,
}

impl DateFormat {
    pub(super) fn new(zone: Zone) -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable), postgres: false, zone }
    }

    /// Postgres's `TO_CHAR(timestamp | timestamptz | date, template)`.
    pub(super) fn to_char(zone: Zone) -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable), postgres: true, zone }
    }
}

/// A parsed format.
enum Format {
    Java(Vec<Item>),
    Postgres(Vec<super::pg_to_char::Piece>),
}

/// The string form Flink parses, `yyyy-MM-dd HH:mm:ss`.
const STRING_INPUT: &str = "%Y-%m-%d %H:%M:%S";

const VALID_LETTERS: &str = "y M L d D E a H k h K m s S";

impl ScalarUDFImpl for DateFormat {
    fn name(&self) -> &str {
        if self.postgres {
            "to_char"
        } else {
            "date_format"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = if self.postgres { "TO_CHAR(timestamp, template)" } else { "DATE_FORMAT(timestamp, format)" };
        let [ts, format] = arg_types else {
            return plan_err!("{usage} takes 2 arguments, got {}", arg_types.len());
        };
        let ts = match ts {
            DataType::Timestamp(..) => ts.clone(),
            DataType::Date32 | DataType::Date64 | DataType::Null => DataType::Timestamp(TimeUnit::Millisecond, None),
            other if self.postgres => {
                return plan_err!(
                    "{usage}: the first argument must be a TIMESTAMP, a TIMESTAMP_LTZ or a DATE, got {other} (a number: \
                     CAST(x AS STRING) or PRINTF('%.2f', x))"
                )
            }
            other => match as_string_type(other) {
                Some(s) => s,
                None => {
                    return plan_err!(
                        "{usage}: the first argument must be a TIMESTAMP, a DATE or a string, got {other}"
                    )
                }
            },
        };
        let Some(format) = as_string_type(format) else {
            return plan_err!("{usage}: the format must be a string, got {format}");
        };
        Ok(vec![ts, format])
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        if let Some(format) = literal_str(args.scalar_arguments, 1).filter(|_| !self.postgres) {
            if let Err(e) = parse_pattern(format) {
                return plan_err!("DATE_FORMAT: the format '{format}' is invalid: {e}");
            }
        }
        Ok(Arc::new(Field::new(self.name(), DataType::Utf8, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let times = Times::new(&args.args[0], self.zone)?;
        let formats = StrArg::new(&args.args[1])?;
        let mut last: Option<(&str, Option<Format>)> = None;
        let mut out = StringBuilder::with_capacity(n, 0);
        for i in 0..n {
            // Postgres: an empty template gives NULL.
            let (Some(t), Some(format)) = (times.get(i), formats.get(i).filter(|f| !(self.postgres && f.is_empty()))) else {
                out.append_null();
                continue;
            };
            if last.as_ref().is_none_or(|(f, _)| *f != format) {
                let parsed = match self.postgres {
                    true => Some(Format::Postgres(super::pg_to_char::parse_template(format))),
                    false => parse_pattern(format).ok().map(Format::Java),
                };
                last = Some((format, parsed));
            }
            let written = match last.as_ref().and_then(|(_, parsed)| parsed.as_ref()) {
                Some(Format::Java(items)) => write_items(&mut out, items, &t),
                Some(Format::Postgres(pieces)) => {
                    // A TIMESTAMP_LTZ's zone as Postgres's `TZ` and `OF` show it.
                    let zone = times.zone_at(i).map(|(zone, at)| (zone.abbreviation_at(at), zone.offset_at(at)));
                    super::pg_to_char::write_template(&mut out, pieces, &t, zone.as_ref().map(|(a, o)| (a.as_str(), *o)))
                }
                None => {
                    out.append_null();
                    continue;
                }
            };
            if written.is_err() {
                return exec_err!("{} could not write '{t}' as '{format}'", self.name().to_uppercase());
            }
            out.append_value("");
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// The first argument, read as local date-times.
enum Times<'a> {
    /// Microseconds since 1970, UTC, shown in the zone when there is one (a TIMESTAMP_LTZ).
    Micros(arrow::array::PrimitiveArray<TimestampMicrosecondType>, Option<Zone>),
    Strings(StrArg<'a>),
}

impl<'a> Times<'a> {
    fn new(v: &'a ColumnarValue, session: Zone) -> Result<Self> {
        let array = match v {
            ColumnarValue::Array(a) if matches!(a.data_type(), DataType::Utf8) => {
                return Ok(Self::Strings(StrArg::new(v)?))
            }
            ColumnarValue::Scalar(s) if matches!(s.data_type(), DataType::Utf8) => {
                return Ok(Self::Strings(StrArg::new(v)?))
            }
            ColumnarValue::Array(a) => Arc::clone(a),
            ColumnarValue::Scalar(s) => s.to_array()?,
        };
        let DataType::Timestamp(_, tz) = array.data_type() else {
            return internal_err!("DATE_FORMAT of {}", array.data_type());
        };
        let zone = tz.is_some().then_some(session);
        let micros = cast(&array, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
        let Some(micros) = micros.as_primitive_opt::<TimestampMicrosecondType>() else {
            return internal_err!("DATE_FORMAT: cast to microseconds gave {}", micros.data_type());
        };
        Ok(Self::Micros(micros.clone(), zone))
    }

    /// A TIMESTAMP_LTZ's zone and row `i`'s instant.
    fn zone_at(&self, i: usize) -> Option<(Zone, chrono::DateTime<chrono::Utc>)> {
        let Self::Micros(a, Some(zone)) = self else { return None };
        let a_i = if a.len() == 1 { 0 } else { i };
        Some((*zone, chrono::DateTime::from_timestamp_micros(a.value(a_i))?))
    }

    fn get(&self, i: usize) -> Option<NaiveDateTime> {
        match self {
            Self::Micros(a, zone) => {
                let a_i = if a.len() == 1 { 0 } else { i };
                if a.is_null(a_i) {
                    return None;
                }
                let utc = chrono::DateTime::from_timestamp_micros(a.value(a_i))?;
                match zone {
                    Some(zone) => Some(zone.local(utc)),
                    None => Some(utc.naive_utc()),
                }
            }
            Self::Strings(s) => {
                let s = s.get(i)?;
                NaiveDateTime::parse_and_remainder(s, STRING_INPUT).ok().map(|(t, _)| t)
            }
        }
    }
}

/// One piece of a parsed pattern.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Item {
    Literal(String),
    /// A pattern letter repeated `count` times.
    Field {
        letter: char,
        count: usize,
    },
}

/// Parses a DateTimeFormatter pattern; the error says what is wrong.
pub(super) fn parse_pattern(format: &str) -> std::result::Result<Vec<Item>, String> {
    let mut items = Vec::new();
    let mut chars = format.chars().peekable();
    let mut literal = String::new();
    while let Some(c) = chars.next() {
        if c == '\'' {
            // Quoted text; '' inside or outside quotes is one quote.
            if chars.peek() == Some(&'\'') {
                chars.next();
                literal.push('\'');
                continue;
            }
            loop {
                match chars.next() {
                    Some('\'') if chars.peek() == Some(&'\'') => {
                        chars.next();
                        literal.push('\'');
                    }
                    Some('\'') => break,
                    Some(c) => literal.push(c),
                    None => return Err("a quote is not closed".to_string()),
                }
            }
        } else if c.is_ascii_alphabetic() {
            let mut count = 1;
            while chars.peek() == Some(&c) {
                chars.next();
                count += 1;
            }
            let max = match c {
                'y' => usize::MAX,
                'M' | 'L' | 'E' => 5,
                'D' => 3,
                'S' => 9,
                'a' => 1,
                'd' | 'H' | 'k' | 'h' | 'K' | 'm' | 's' => 2,
                other => return Err(format!("the letter '{other}' is not supported; valid letters: {VALID_LETTERS}")),
            };
            if count > max {
                return Err(format!("too many pattern letters '{c}' ({count}, at most {max})"));
            }
            if !literal.is_empty() {
                items.push(Item::Literal(std::mem::take(&mut literal)));
            }
            items.push(Item::Field { letter: c, count });
        } else if matches!(c, '#' | '{' | '}') {
            return Err(format!("'{c}' is reserved"));
        } else if !matches!(c, '[' | ']') {
            literal.push(c);
        }
    }
    if !literal.is_empty() {
        items.push(Item::Literal(literal));
    }
    Ok(items)
}

/// The months' English names, January first.
pub(super) const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

const WEEKDAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

/// Writes `t` as `items` (one row; the caller ends it).
pub(super) fn write_items(out: &mut impl Write, items: &[Item], t: &NaiveDateTime) -> std::fmt::Result {
    for item in items {
        let (letter, count) = match item {
            Item::Literal(s) => {
                out.write_str(s)?;
                continue;
            }
            Item::Field { letter, count } => (*letter, *count),
        };
        let hour = t.hour();
        match letter {
            'y' => {
                let year = t.year();
                let year_of_era = if year <= 0 { 1 - year } else { year };
                if count == 2 {
                    write!(out, "{:02}", year_of_era % 100)?;
                } else {
                    // DateTimeFormatter: 4 or more letters print a '+' when the year is wider.
                    let wide = count >= 4 && year_of_era >= 10i32.saturating_pow(count as u32);
                    write!(out, "{}{:0count$}", if wide { "+" } else { "" }, year_of_era)?;
                }
            }
            'M' | 'L' => {
                let name = MONTHS[t.month0() as usize];
                match count {
                    1 | 2 => write!(out, "{:0count$}", t.month())?,
                    3 => out.write_str(&name[..3])?,
                    4 => out.write_str(name)?,
                    _ => out.write_str(&name[..1])?,
                }
            }
            'E' => {
                let name = WEEKDAYS[t.weekday().num_days_from_monday() as usize];
                match count {
                    1..=3 => out.write_str(&name[..3])?,
                    4 => out.write_str(name)?,
                    _ => out.write_str(&name[..1])?,
                }
            }
            'd' => write!(out, "{:0count$}", t.day())?,
            'D' => write!(out, "{:0count$}", t.ordinal())?,
            'a' => out.write_str(if hour < 12 { "AM" } else { "PM" })?,
            'H' => write!(out, "{:0count$}", hour)?,
            'k' => write!(out, "{:0count$}", if hour == 0 { 24 } else { hour })?,
            'h' => write!(out, "{:0count$}", if hour % 12 == 0 { 12 } else { hour % 12 })?,
            'K' => write!(out, "{:0count$}", hour % 12)?,
            'm' => write!(out, "{:0count$}", t.minute())?,
            's' => write!(out, "{:0count$}", t.second())?,
            'S' => {
                // The first `count` digits of the nanoseconds (a leap second's are above 1e9).
                let digits = (t.nanosecond() % 1_000_000_000) / 10u32.pow(9 - count as u32);
                write!(out, "{digits:0count$}")?;
            }
            _ => return Err(std::fmt::Error),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(t: &str, pattern: &str) -> std::result::Result<String, String> {
        let t = NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S%.f").map_err(|e| e.to_string())?;
        let items = parse_pattern(pattern)?;
        let mut out = String::new();
        write_items(&mut out, &items, &t).map_err(|e| e.to_string())?;
        Ok(out)
    }

    #[test]
    fn patterns() -> std::result::Result<(), String> {
        let t = "2015-07-05 09:04:03.012345";
        assert_eq!(format(t, "yyyy-MM-dd HH:mm:ss")?, "2015-07-05 09:04:03");
        assert_eq!(format(t, "yyyy-MM-dd HH:mm:ss.SSS")?, "2015-07-05 09:04:03.012");
        assert_eq!(format(t, "yyMMdd")?, "150705");
        assert_eq!(format(t, "y/M/d H:m:s S SSSSSS")?, "2015/7/5 9:4:3 0 012345");
        assert_eq!(format(t, "EEE, d MMM yyyy hh:mm a")?, "Sun, 5 Jul 2015 09:04 AM");
        assert_eq!(format(t, "EEEE MMMM D DDD")?, "Sunday July 186 186");
        assert_eq!(format(t, "yyyy'T'HH 'o''clock' ''")?, "2015T09 o'clock '");
        assert_eq!(format("2015-07-05 00:30:00", "k K h a")?, "24 0 12 AM");
        assert_eq!(format("2015-07-05 12:30:00", "k K h a")?, "12 0 12 PM");
        assert_eq!(format(t, "[yyyy]")?, "2015");
        Ok(())
    }

    #[test]
    fn bad_patterns() {
        assert!(parse_pattern("yyyy-MM-dd Z").is_err_and(|e| e.contains("'Z'") && e.contains(VALID_LETTERS)));
        assert!(parse_pattern("ddd").is_err_and(|e| e.contains("too many")));
        assert!(parse_pattern("'open").is_err_and(|e| e.contains("quote")));
        assert!(parse_pattern("#").is_err());
    }
}
