//! Postgres text format: each value exactly as psql shows it (Postgres 16 defaults:
//! `DateStyle = ISO`, `IntervalStyle = postgres`, `extra_float_digits = 1`,
//! `bytea_output = hex`; a `timestamptz` in the session's `TimeZone`).
//!
//! | value                 | text                                                        |
//! |-----------------------|-------------------------------------------------------------|
//! | boolean               | `t`, `f`                                                    |
//! | float                 | shortest round-trip digits: `20`, `0.1`, `1e+15`, `NaN`, `Infinity` |
//! | decimal               | exactly its scale: `1761.520`                               |
//! | date                  | `2015-07-15`, `0044-03-15 BC`                               |
//! | timestamp             | `2015-07-15 00:00:05.5` (fraction only when non-zero)       |
//! | timestamptz           | `2015-07-15 00:00:05.5+00`                                  |
//! | time                  | `13:45:00.25`                                               |
//! | interval              | `1 year 2 mons 3 days 04:05:06.5`, `-1 days +01:00:00`      |
//! | bytea                 | `\x0a0b`                                                    |
//! | array                 | `{1,2,NULL}`, `{"a b","x\"y"}`                              |
//!
//! # Floats
//! Postgres (12+) prints the shortest digits that read back to the same value, in fixed
//! notation when the decimal exponent is in `-4..15` (`-4..6` for `real`), else as
//! `d.ddde±XX` (src/common/d2s.c and f2s.c, "matches %g"). Rust's `{:e}` gives the same shortest
//! digits; we only lay them out.
//!
//! # Fractions of a second
//! Postgres keeps microseconds; Arrow may carry nanoseconds. We print every non-zero digit up to
//! nanoseconds and trim trailing zeros, so microsecond data prints exactly as Postgres does and
//! nanosecond data loses nothing.

use std::fmt::{self, Write as _};

use bytes::{BufMut, BytesMut};
use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Timelike};

/// Nanoseconds per second, minute, hour.
const NANOS_PER_SECOND: u128 = 1_000_000_000;
const NANOS_PER_MINUTE: u128 = 60 * NANOS_PER_SECOND;
const NANOS_PER_HOUR: u128 = 60 * NANOS_PER_MINUTE;

/// A small formatting buffer on the stack, so formatting a number allocates nothing.
pub(crate) struct StackBuf {
    bytes: [u8; 128],
    len: usize,
}

impl StackBuf {
    pub(crate) fn new() -> Self {
        Self {
            bytes: [0; 128],
            len: 0,
        }
    }

    /// Formats `value` with `Display` (the longest we format, an `i256`, takes 78 bytes).
    pub(crate) fn display(value: impl fmt::Display) -> Self {
        let mut buf = Self::new();
        write!(buf, "{value}").expect("a number's Display fits in 128 bytes");
        buf
    }

    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).expect("only whole strs are written")
    }
}

impl fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        if end > self.bytes.len() {
            return Err(fmt::Error);
        }
        self.bytes[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// `t` or `f`.
pub(crate) fn write_bool(value: bool, out: &mut BytesMut) {
    out.put_u8(if value { b't' } else { b'f' });
}

/// An integer in decimal.
pub(crate) fn write_int(value: impl fmt::Display, out: &mut BytesMut) {
    write!(out, "{value}").expect("BytesMut grows as needed");
}

/// A `double precision` as Postgres prints it.
pub(crate) fn write_f64(value: f64, out: &mut BytesMut) {
    if value.is_finite() {
        layout_float(
            StackBuf::display(format_args!("{value:e}")).as_str(),
            15,
            out,
        );
    } else {
        write_non_finite(value.is_nan(), value.is_sign_negative(), out);
    }
}

/// A `real` as Postgres prints it: the shortest digits of the `f32`, not of its `f64` widening.
pub(crate) fn write_f32(value: f32, out: &mut BytesMut) {
    if value.is_finite() {
        layout_float(
            StackBuf::display(format_args!("{value:e}")).as_str(),
            6,
            out,
        );
    } else {
        write_non_finite(value.is_nan(), value.is_sign_negative(), out);
    }
}

fn write_non_finite(is_nan: bool, is_negative: bool, out: &mut BytesMut) {
    out.put_slice(match (is_nan, is_negative) {
        (true, _) => b"NaN",
        (false, false) => b"Infinity",
        (false, true) => b"-Infinity",
    });
}

/// Lays out Rust's shortest scientific form (`-1.5e-7`) the way Postgres does: fixed notation
/// when `-4 <= exponent < max_fixed_exponent`, else `1.5e-07`.
fn layout_float(scientific: &str, max_fixed_exponent: i32, out: &mut BytesMut) {
    let (negative, unsigned) = match scientific.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, scientific),
    };
    let (mantissa, exponent) = unsigned.split_once('e').unwrap_or((unsigned, "0"));
    let exponent: i32 = exponent
        .parse()
        .expect("Rust's {:e} writes a decimal exponent");
    let (first, rest) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    // `first` is one digit; `digits` are all significant digits, without the point.
    let num_digits = first.len() + rest.len();
    let digit = |i: usize| -> u8 {
        if i < first.len() {
            first.as_bytes()[i]
        } else {
            rest.as_bytes()[i - first.len()]
        }
    };
    if negative {
        out.put_u8(b'-');
    }
    if (-4..max_fixed_exponent).contains(&exponent) {
        if exponent >= 0 {
            let int_len = exponent as usize + 1;
            for i in 0..int_len {
                out.put_u8(if i < num_digits { digit(i) } else { b'0' });
            }
            if num_digits > int_len {
                out.put_u8(b'.');
                (int_len..num_digits).for_each(|i| out.put_u8(digit(i)));
            }
        } else {
            out.put_slice(b"0.");
            out.put_bytes(b'0', (-exponent - 1) as usize);
            (0..num_digits).for_each(|i| out.put_u8(digit(i)));
        }
    } else {
        out.put_u8(digit(0));
        if num_digits > 1 {
            out.put_u8(b'.');
            (1..num_digits).for_each(|i| out.put_u8(digit(i)));
        }
        let sign = if exponent < 0 { '-' } else { '+' };
        write!(out, "e{sign}{:02}", exponent.unsigned_abs()).expect("BytesMut grows as needed");
    }
}

/// A decimal given as its unscaled integer in decimal (`-1761520`) and its scale (`3`):
/// `-1761.520`, always with exactly `scale` fraction digits. A negative scale appends zeros.
pub(crate) fn write_decimal(unscaled: &str, scale: i8, out: &mut BytesMut) {
    let (negative, digits) = match unscaled.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, unscaled),
    };
    if negative {
        out.put_u8(b'-');
    }
    if scale <= 0 {
        out.put_slice(digits.as_bytes());
        if digits != "0" {
            out.put_bytes(b'0', scale.unsigned_abs() as usize);
        }
        return;
    }
    let scale = scale as usize;
    if digits.len() > scale {
        let (int, frac) = digits.split_at(digits.len() - scale);
        out.put_slice(int.as_bytes());
        out.put_u8(b'.');
        out.put_slice(frac.as_bytes());
    } else {
        out.put_slice(b"0.");
        out.put_bytes(b'0', scale - digits.len());
        out.put_slice(digits.as_bytes());
    }
}

/// `2015-07-15`; a year before 1 AD as Postgres does, `0044-03-15 BC`.
pub(crate) fn write_date(date: NaiveDate, out: &mut BytesMut) {
    let bc = write_ymd(date, out);
    if bc {
        out.put_slice(b" BC");
    }
}

/// A timestamp given as seconds and nanoseconds since 1970-01-01 00:00:00 UTC:
/// `2015-07-15 00:00:05.5`; a `timestamptz` is given the offset (seconds east of UTC) of the
/// session time zone at that instant, and written as its wall-clock time there with the
/// offset after it, as Postgres writes it (`2015-07-15 08:00:05.5+08`, `+05:30`).
/// `None` when it is outside chrono's range (±262,000 years).
pub(crate) fn write_timestamp(
    seconds: i64,
    nanos: u32,
    offset: Option<i32>,
    out: &mut BytesMut,
) -> Option<()> {
    let local = seconds.checked_add(i64::from(offset.unwrap_or(0)))?;
    let datetime: NaiveDateTime = DateTime::from_timestamp(local, nanos)?.naive_utc();
    let bc = write_ymd(datetime.date(), out);
    out.put_u8(b' ');
    let time = datetime.time();
    let nanos_of_day = u128::from(time.num_seconds_from_midnight()) * NANOS_PER_SECOND
        + u128::from(time.nanosecond());
    write_clock(nanos_of_day, out);
    if let Some(offset) = offset {
        out.put_slice(crate::plan::time_zone::offset_text(offset).as_bytes());
    }
    if bc {
        out.put_slice(b" BC");
    }
    Some(())
}

/// A time of day given in nanoseconds since midnight: `13:45:00.25`.
pub(crate) fn write_time(nanos_of_day: u128, out: &mut BytesMut) {
    write_clock(nanos_of_day, out);
}

/// An interval as Postgres prints it with `IntervalStyle = postgres`
/// (src/backend/utils/adt/datetime.c, `EncodeInterval`): `1 year 2 mons 3 days 04:05:06.5`.
/// Each field keeps its own sign; a positive field after a negative one gets a `+`
/// (`-1 days +01:00:00`); the zero interval is `00:00:00`.
pub(crate) fn write_interval(months: i64, days: i64, nanos: i128, out: &mut BytesMut) {
    let mut is_zero = true;
    let mut is_before = false;
    let mut part = |value: i64, unit: &str, out: &mut BytesMut| {
        if value == 0 {
            return;
        }
        let space = if is_zero { "" } else { " " };
        let plus = if is_before && value > 0 { "+" } else { "" };
        let plural = if value != 1 { "s" } else { "" };
        write!(out, "{space}{plus}{value} {unit}{plural}").expect("BytesMut grows as needed");
        is_before = value < 0;
        is_zero = false;
    };
    part(months / 12, "year", out);
    part(months % 12, "mon", out);
    part(days, "day", out);
    if is_zero || nanos != 0 {
        if !is_zero {
            out.put_u8(b' ');
        }
        if nanos < 0 {
            out.put_u8(b'-');
        } else if is_before {
            out.put_u8(b'+');
        }
        write_clock(nanos.unsigned_abs(), out);
    }
}

/// `\x` and the bytes in lowercase hex.
pub(crate) fn write_bytea(bytes: &[u8], out: &mut BytesMut) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(2 + 2 * bytes.len());
    out.put_slice(b"\\x");
    for byte in bytes {
        out.put_u8(HEX[usize::from(byte >> 4)]);
        out.put_u8(HEX[usize::from(byte & 0xf)]);
    }
}

/// Quotes the array element written at `out[start..]` if Postgres would (`array_out`): when
/// it is empty, is `NULL` in any case, or holds `"`, `\`, `{`, `}`, `,` or white space.
pub(crate) fn quote_array_element(out: &mut BytesMut, start: usize) {
    let element = &out[start..];
    let needs_quotes = element.is_empty()
        || element.eq_ignore_ascii_case(b"null")
        || element
            .iter()
            .any(|b| matches!(b, b'"' | b'\\' | b'{' | b'}' | b',') || b.is_ascii_whitespace());
    if !needs_quotes {
        return;
    }
    let element = out.split_off(start);
    out.reserve(element.len() + 2);
    out.put_u8(b'"');
    for &byte in element.iter() {
        if byte == b'"' || byte == b'\\' {
            out.put_u8(b'\\');
        }
        out.put_u8(byte);
    }
    out.put_u8(b'"');
}

/// Writes `YYYY-MM-DD` (at least four year digits) and returns whether the year is BC.
fn write_ymd(date: NaiveDate, out: &mut BytesMut) -> bool {
    let year = date.year();
    let (year, bc) = if year <= 0 {
        (1 - year, true)
    } else {
        (year, false)
    };
    write!(out, "{year:04}-{:02}-{:02}", date.month(), date.day())
        .expect("BytesMut grows as needed");
    bc
}

/// `HH:MM:SS` and the fraction without trailing zeros; hours may exceed 23 (intervals).
fn write_clock(nanos: u128, out: &mut BytesMut) {
    let hours = nanos / NANOS_PER_HOUR;
    let minutes = nanos / NANOS_PER_MINUTE % 60;
    let seconds = nanos / NANOS_PER_SECOND % 60;
    write!(out, "{hours:02}:{minutes:02}:{seconds:02}").expect("BytesMut grows as needed");
    write_fraction((nanos % NANOS_PER_SECOND) as u32, out);
}

/// `.5`, `.001`, `.000000001`; nothing for zero.
fn write_fraction(nanos: u32, out: &mut BytesMut) {
    if nanos == 0 {
        return;
    }
    let mut digits = StackBuf::display(format_args!("{nanos:09}"));
    while digits.as_str().ends_with('0') {
        digits.len -= 1;
    }
    out.put_u8(b'.');
    out.put_slice(digits.as_str().as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(write: impl FnOnce(&mut BytesMut)) -> String {
        let mut out = BytesMut::new();
        write(&mut out);
        String::from_utf8(out.to_vec()).expect("text output is UTF-8")
    }

    #[test]
    fn booleans_are_t_and_f() {
        assert_eq!(text(|o| write_bool(true, o)), "t");
        assert_eq!(text(|o| write_bool(false, o)), "f");
    }

    #[test]
    fn doubles_print_like_postgres() {
        let cases: &[(f64, &str)] = &[
            (20.0, "20"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0 / 3.0, "0.3333333333333333"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (123456789012345.0, "123456789012345"),
            (1e15, "1e+15"),
            (1.5e300, "1.5e+300"),
            (1761.52, "1761.52"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (value, expected) in cases {
            assert_eq!(text(|o| write_f64(*value, o)), *expected, "{value:?}");
        }
    }

    #[test]
    fn reals_print_their_own_shortest_digits() {
        let cases: &[(f32, &str)] = &[
            (0.1, "0.1"),
            (20.0, "20"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (1e-5, "1e-05"),
            (f32::NAN, "NaN"),
        ];
        for (value, expected) in cases {
            assert_eq!(text(|o| write_f32(*value, o)), *expected, "{value:?}");
        }
    }

    #[test]
    fn decimals_keep_exactly_their_scale() {
        assert_eq!(text(|o| write_decimal("1761520", 3, o)), "1761.520");
        assert_eq!(text(|o| write_decimal("-5", 2, o)), "-0.05");
        assert_eq!(text(|o| write_decimal("0", 2, o)), "0.00");
        assert_eq!(text(|o| write_decimal("42", 0, o)), "42");
        assert_eq!(text(|o| write_decimal("42", -2, o)), "4200");
        assert_eq!(text(|o| write_decimal("0", -2, o)), "0");
    }

    #[test]
    fn timestamps_trim_the_fraction() {
        let ts = |seconds, nanos, tz| text(|o| write_timestamp(seconds, nanos, tz, o).unwrap());
        // 2015-07-15 00:00:01 UTC
        assert_eq!(ts(1_436_918_401, 0, None), "2015-07-15 00:00:01");
        assert_eq!(
            ts(1_436_918_405, 500_000_000, None),
            "2015-07-15 00:00:05.5"
        );
        assert_eq!(
            ts(1_436_918_404, 1_000_000, None),
            "2015-07-15 00:00:04.001"
        );
        assert_eq!(
            ts(1_436_918_404, 123_456_000, None),
            "2015-07-15 00:00:04.123456"
        );
        assert_eq!(ts(1_436_918_401, 0, Some(0)), "2015-07-15 00:00:01+00");
        assert_eq!(
            ts(1_436_918_405, 500_000_000, Some(0)),
            "2015-07-15 00:00:05.5+00"
        );
        assert_eq!(ts(-1, 0, None), "1969-12-31 23:59:59");
        // In a zone 8 hours east (Asia/Shanghai), and 5.5 (Asia/Kolkata).
        assert_eq!(ts(1_436_918_401, 0, Some(8 * 3600)), "2015-07-15 08:00:01+08");
        assert_eq!(ts(1_436_918_401, 0, Some(-(5 * 3600 + 1800))), "2015-07-14 18:30:01-05:30");
        // 44 BC (year -43 in chrono's proleptic count)
        let bc = NaiveDate::from_ymd_opt(-43, 3, 15)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap();
        assert_eq!(
            ts(bc.and_utc().timestamp(), 0, Some(0)),
            "0044-03-15 00:00:00+00 BC"
        );
        assert!(write_timestamp(i64::MAX, 0, None, &mut BytesMut::new()).is_none());
    }

    #[test]
    fn dates_and_times() {
        let date = NaiveDate::from_ymd_opt(2015, 7, 15).unwrap();
        assert_eq!(text(|o| write_date(date, o)), "2015-07-15");
        let bc = NaiveDate::from_ymd_opt(0, 1, 1).unwrap();
        assert_eq!(text(|o| write_date(bc, o)), "0001-01-01 BC");
        let nanos = (13 * 3600 + 45 * 60) * NANOS_PER_SECOND + 250_000_000;
        assert_eq!(text(|o| write_time(nanos, o)), "13:45:00.25");
        assert_eq!(text(|o| write_time(0, o)), "00:00:00");
    }

    #[test]
    fn intervals_print_in_postgres_style() {
        let hms = |h: i128, m: i128, s: i128| ((h * 60 + m) * 60 + s) * 1_000_000_000;
        let interval = |months, days, nanos| text(|o| write_interval(months, days, nanos, o));
        assert_eq!(interval(0, 0, 0), "00:00:00");
        assert_eq!(
            interval(14, 3, hms(4, 5, 6) + 500_000_000),
            "1 year 2 mons 3 days 04:05:06.5"
        );
        assert_eq!(interval(1, 0, 0), "1 mon");
        assert_eq!(interval(0, 1, 0), "1 day");
        assert_eq!(interval(0, -1, 0), "-1 days");
        assert_eq!(interval(0, -1, hms(1, 0, 0)), "-1 days +01:00:00");
        assert_eq!(interval(0, 1, -hms(1, 0, 0)), "1 day -01:00:00");
        assert_eq!(interval(0, 0, hms(25, 0, 0)), "25:00:00");
        assert_eq!(interval(0, 0, 5_000_000), "00:00:00.005");
        assert_eq!(interval(-13, 0, 0), "-1 years -1 mons");
    }

    #[test]
    fn bytea_is_hex() {
        assert_eq!(text(|o| write_bytea(&[0x0a, 0x0b], o)), "\\x0a0b");
        assert_eq!(text(|o| write_bytea(&[], o)), "\\x");
    }

    #[test]
    fn array_elements_are_quoted_like_postgres() {
        let quoted = |element: &str| {
            text(|o| {
                o.put_slice(b"{");
                o.put_slice(element.as_bytes());
                quote_array_element(o, 1);
            })
        };
        assert_eq!(quoted("abc"), "{abc");
        assert_eq!(quoted(""), "{\"\"");
        assert_eq!(quoted("a b"), "{\"a b\"");
        assert_eq!(quoted("null"), "{\"null\"");
        assert_eq!(quoted("x\"y\\"), "{\"x\\\"y\\\\\"");
        assert_eq!(quoted("\\x0a"), "{\"\\\\x0a\"");
    }
}
