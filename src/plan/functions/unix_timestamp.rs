//! `UNIX_TIMESTAMP()`, `UNIX_TIMESTAMP(string [, format])`: BIGINT seconds since the Unix
//! epoch (Flink docs, Temporal Functions; Flink's `DateTimeUtils.unixTimestamp`).
//!
//! - Without arguments: now, evaluated once per batch of rows (processing time).
//! - With a string: the string read in the Java date pattern `format` (default `yyyy-MM-dd
//!   HH:mm:ss`, the letters of [`super::date_format`]: `y`, `M`, `d`, `D`, `H`, `h`, `m`, `s`,
//!   `S` (3, 6 or 9 of them), `a`, `E`), in the session time zone ([`crate::plan::time_zone`];
//!   a time the clocks repeat is the later instant, as SimpleDateFormat reads it). A pattern without a
//!   time of day reads a date at midnight; text after the pattern is ignored (SimpleDateFormat's
//!   `parse`). Unlike SimpleDateFormat, an impossible date (February 30) does not parse.
//! - A string that does not match the pattern gives `-9223372036854775808` (Java's
//!   `Long.MIN_VALUE`), as in Flink; NULL in, NULL out. A literal pattern with an unknown
//!   letter is refused when the statement is planned.

use std::sync::Arc;

use arrow::array::Int64Builder;
use arrow::datatypes::{DataType, Field, FieldRef};
use chrono::{NaiveDate, NaiveDateTime};
use datafusion::common::plan_err;
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{as_string_type, literal_str, num_rows, StrArg};
use super::date_format::{parse_pattern, Item};
use crate::plan::time_zone::{Overlap, Zone};

/// Flink's default pattern.
const DEFAULT_PATTERN: &str = "yyyy-MM-dd HH:mm:ss";

/// What Flink returns for a string that does not parse.
const UNPARSED: i64 = i64::MIN;

/// `UNIX_TIMESTAMP`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct UnixTimestamp {
    signature: Signature,
    /// The session time zone, in which a string is read.
    zone: Zone,
}

impl UnixTimestamp {
    pub(super) fn new(zone: Zone) -> Self {
        // Volatile: without arguments it reads the clock.
        Self { signature: Signature::user_defined(Volatility::Volatile), zone }
    }
}

impl ScalarUDFImpl for UnixTimestamp {
    fn name(&self) -> &str {
        "unix_timestamp"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = "UNIX_TIMESTAMP([string [, format]])";
        if arg_types.len() > 2 {
            return plan_err!("{usage} takes at most 2 arguments, got {}", arg_types.len());
        }
        arg_types
            .iter()
            .map(|t| match as_string_type(t) {
                Some(s) => Ok(s),
                None => plan_err!("{usage}: the arguments must be strings, got {t}"),
            })
            .collect()
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        if let Some(format) = literal_str(args.scalar_arguments, 1) {
            if let Err(e) = chrono_format(format) {
                return plan_err!("UNIX_TIMESTAMP: the format '{format}' is invalid: {e}");
            }
        }
        Ok(Arc::new(Field::new(self.name(), DataType::Int64, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if args.args.is_empty() {
            let now = chrono::Utc::now().timestamp();
            return Ok(ColumnarValue::Scalar(datafusion::common::ScalarValue::Int64(Some(now))));
        }
        let n = num_rows(&args.args);
        let strings = StrArg::new(&args.args[0])?;
        let formats = args.args.get(1).map(StrArg::new).transpose()?;
        let mut parsers = Parsers::default();
        let mut out = Int64Builder::with_capacity(n);
        for i in 0..n {
            let format = match &formats {
                Some(f) => f.get(i),
                None => Some(DEFAULT_PATTERN),
            };
            let (Some(s), Some(format)) = (strings.get(i), format) else {
                out.append_null();
                continue;
            };
            let parsed = parsers.get(format).and_then(|p| p.seconds(s, self.zone));
            out.append_value(parsed.unwrap_or(UNPARSED));
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// A Java pattern as chrono reads it.
pub(super) struct Parser {
    format: String,
    /// Whether it has a time of day (else a date is read, at midnight).
    has_time: bool,
}

impl Parser {
    /// Seconds since the Unix epoch of `s`, a wall-clock time in `zone`; `None` when it does
    /// not match.
    fn seconds(&self, s: &str, zone: Zone) -> Option<i64> {
        // Text after the pattern is ignored, as SimpleDateFormat's `parse` does.
        Some(zone.instant(self.datetime(s, false)?, Overlap::Later)?.timestamp())
    }

    /// `s` read in the pattern (a date without a time of day at midnight); with `whole`, only
    /// if nothing follows (DateTimeFormatter's `parse`), else text after it is ignored
    /// (SimpleDateFormat's). `None` when it does not match.
    pub(super) fn datetime(&self, s: &str, whole: bool) -> Option<NaiveDateTime> {
        let (t, rest) = if self.has_time {
            NaiveDateTime::parse_and_remainder(s, &self.format).ok()?
        } else {
            let (d, rest) = NaiveDate::parse_and_remainder(s, &self.format).ok()?;
            (d.and_hms_opt(0, 0, 0)?, rest)
        };
        (!whole || rest.is_empty()).then_some(t)
    }
}

/// The parser of the last format seen (a column of formats is mostly one format).
#[derive(Default)]
pub(super) struct Parsers {
    last: Option<(String, Option<Parser>)>,
}

impl Parsers {
    /// The parser of Java pattern `format`; `None` when it cannot be read.
    pub(super) fn get(&mut self, format: &str) -> Option<&Parser> {
        if self.last.as_ref().is_none_or(|(f, _)| f != format) {
            self.last = Some((format.to_string(), chrono_format(format).ok()));
        }
        self.last.as_ref().and_then(|(_, p)| p.as_ref())
    }
}

/// The chrono format of Java pattern `pattern`; the error names what it cannot read.
pub(super) fn chrono_format(pattern: &str) -> std::result::Result<Parser, String> {
    let mut format = String::new();
    let mut has_time = false;
    for item in parse_pattern(pattern)? {
        match item {
            Item::Literal(text) => format.push_str(&text.replace('%', "%%")),
            Item::Field { letter, count } => {
                let spec = match (letter, count) {
                    ('y', 2) => "%y",
                    ('y', _) => "%Y",
                    ('M' | 'L', 1 | 2) => "%m",
                    ('M' | 'L', 3) => "%b",
                    ('M' | 'L', 4) => "%B",
                    ('d', _) => "%d",
                    ('D', _) => "%j",
                    ('E', 4) => "%A",
                    ('E', _) => "%a",
                    ('H' | 'k', _) => "%H",
                    ('h' | 'K', _) => "%I",
                    ('m', _) => "%M",
                    ('s', _) => "%S",
                    ('a', _) => "%p",
                    ('S', 3) => "%3f",
                    ('S', 6) => "%6f",
                    ('S', 9) => "%9f",
                    (letter, count) => {
                        return Err(format!("'{}' cannot be read; use 3, 6 or 9 'S' for fractions", letter.to_string().repeat(count)))
                    }
                };
                has_time |= matches!(letter, 'H' | 'k' | 'h' | 'K' | 'm' | 's' | 'S' | 'a');
                format.push_str(spec);
            }
        }
    }
    Ok(Parser { format, has_time })
}

/// `LOCALTIMESTAMP` (rewritten into `localtimestamp()`, [`crate::sql::time_units`]): now as a
/// TIMESTAMP(3), the wall-clock time in the session time zone. Volatile, so a streaming job
/// reads the clock for each batch of rows as Flink does per record, rather than once when it
/// is planned.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct LocalTimestamp {
    signature: Signature,
    zone: Zone,
}

impl LocalTimestamp {
    pub(super) fn new(zone: Zone) -> Self {
        Self { signature: Signature::nullary(Volatility::Volatile), zone }
    }
}

impl ScalarUDFImpl for LocalTimestamp {
    fn name(&self) -> &str {
        "localtimestamp"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let now = self.zone.local(chrono::Utc::now()).and_utc().timestamp_millis();
        Ok(ColumnarValue::Scalar(datafusion::common::ScalarValue::TimestampMillisecond(Some(now), None)))
    }
}

/// `LOCALTIME` (rewritten into `localtime()`, [`crate::sql::time_units`]) and `CURRENT_TIME`:
/// the time of day now in the session time zone, a TIME(0) (Flink: the current time in the local time zone,
/// TIME(0)). Volatile, as [`LocalTimestamp`].
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct LocalTime {
    signature: Signature,
    zone: Zone,
}

impl LocalTime {
    pub(super) fn new(zone: Zone) -> Self {
        Self { signature: Signature::nullary(Volatility::Volatile), zone }
    }
}

impl ScalarUDFImpl for LocalTime {
    fn name(&self) -> &str {
        "localtime"
    }

    /// Flink's `CURRENT_TIME` is `LOCALTIME` (DataFusion's is UTC's, in nanoseconds).
    fn aliases(&self) -> &[String] {
        static ALIASES: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| vec!["current_time".to_string()]);
        &ALIASES
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Time32(arrow::datatypes::TimeUnit::Second))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let seconds = self.zone.local(chrono::Utc::now()).and_utc().timestamp().rem_euclid(86_400) as i32;
        Ok(ColumnarValue::Scalar(datafusion::common::ScalarValue::Time32Second(Some(seconds))))
    }
}

/// `CURRENT_DATE`: today's date in the session time zone (DataFusion's reads its own zone
/// setting). Volatile, as [`LocalTimestamp`].
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct CurrentDate {
    signature: Signature,
    zone: Zone,
}

impl CurrentDate {
    pub(super) fn new(zone: Zone) -> Self {
        Self { signature: Signature::nullary(Volatility::Volatile), zone }
    }
}

impl ScalarUDFImpl for CurrentDate {
    fn name(&self) -> &str {
        "current_date"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Date32)
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let days = self.zone.local(chrono::Utc::now()).and_utc().timestamp().div_euclid(86_400) as i32;
        Ok(ColumnarValue::Scalar(datafusion::common::ScalarValue::Date32(Some(days))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seconds(s: &str, pattern: &str) -> Option<i64> {
        chrono_format(pattern).unwrap().seconds(s, Zone::utc())
    }

    #[test]
    fn strings_are_read_in_java_patterns() {
        // 2024-01-01 00:00:00 UTC is 1704067200 s.
        assert_eq!(seconds("2024-01-01 00:00:00", DEFAULT_PATTERN), Some(1_704_067_200));
        assert_eq!(seconds("2024-01-01 00:01:05", DEFAULT_PATTERN), Some(1_704_067_265));
        assert_eq!(seconds("20240102", "yyyyMMdd"), Some(1_704_153_600));
        assert_eq!(seconds("02/01/2024 10:30:00.250", "dd/MM/yyyy HH:mm:ss.SSS"), Some(1_704_191_400));
        assert_eq!(seconds("2024-01-01", DEFAULT_PATTERN), None);
        assert_eq!(seconds("2024-01-01 00:00:00.999", DEFAULT_PATTERN), Some(1_704_067_200), "the rest ignored");
        assert_eq!(seconds("not a time", DEFAULT_PATTERN), None);
        assert!(chrono_format("yyyy-MM-dd SS").is_err());
    }
}
