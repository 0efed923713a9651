//! Postgres binary format (the `*send` functions of src/backend/utils/adt): big-endian integers
//! and IEEE floats, times as microseconds and dates as days since 2000-01-01, `numeric` as
//! base-10000 digits, one-dimensional arrays with a header.
//!
//! Fractions below a microsecond, which Postgres cannot hold, are truncated toward negative
//! infinity for timestamps and toward zero for intervals.

use bytes::{BufMut, BytesMut};

/// Microseconds from 1970-01-01 (Unix) to 2000-01-01 (the Postgres epoch).
pub(crate) const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;
/// Days from 1970-01-01 to 2000-01-01.
pub(crate) const POSTGRES_EPOCH_DAYS: i32 = 10_957;

/// `numeric` sign words.
const NUMERIC_POSITIVE: u16 = 0x0000;
const NUMERIC_NEGATIVE: u16 = 0x4000;

/// A timestamp given in microseconds since the Unix epoch; `None` if it overflows.
pub(crate) fn write_timestamp(unix_micros: i64, out: &mut BytesMut) -> Option<()> {
    out.put_i64(unix_micros.checked_sub(POSTGRES_EPOCH_MICROS)?);
    Some(())
}

/// A date given in days since the Unix epoch; `None` if it overflows.
pub(crate) fn write_date(unix_days: i64, out: &mut BytesMut) -> Option<()> {
    let days = i32::try_from(unix_days)
        .ok()?
        .checked_sub(POSTGRES_EPOCH_DAYS)?;
    out.put_i32(days);
    Some(())
}

/// An interval: microseconds, days, months, in that order; `None` if a part overflows.
pub(crate) fn write_interval(
    months: i64,
    days: i64,
    nanos: i128,
    out: &mut BytesMut,
) -> Option<()> {
    out.put_i64(i64::try_from(nanos / 1000).ok()?);
    out.put_i32(i32::try_from(days).ok()?);
    out.put_i32(i32::try_from(months).ok()?);
    Some(())
}

/// A `numeric` given as its unscaled integer in decimal (`-1761520`) and scale (`3`).
///
/// Layout: digit count, weight (the power of 10000 of the first digit), sign, display scale,
/// then the base-10000 digits without leading or trailing zero digits.
pub(crate) fn write_numeric(unscaled: &str, scale: i8, out: &mut BytesMut) {
    let (negative, digits) = match unscaled.strip_prefix('-') {
        Some(rest) => (true, rest.as_bytes()),
        None => (false, unscaled.as_bytes()),
    };
    // The value is `int_digits.frac_digits`; a negative scale appends zeros to the integer.
    let display_scale = scale.max(0) as usize;
    let extra_zeros = if scale < 0 {
        scale.unsigned_abs() as usize
    } else {
        0
    };
    let (int_digits, frac_digits): (&[u8], &[u8]) = if digits.len() > display_scale {
        digits.split_at(digits.len() - display_scale)
    } else {
        (&[], digits)
    };
    let int_len = int_digits.len() + extra_zeros;
    let frac_len = display_scale;
    // Decimal digit `i` of the sequence `0…0 int 0…0(extra) . 0…0 frac 0…0`, padded on the left
    // and right to whole groups of four.
    let pad_left = (4 - int_len % 4) % 4;
    let pad_right = (4 - frac_len % 4) % 4;
    let frac_pad_left = frac_len - frac_digits.len();
    let total = pad_left + int_len + frac_len + pad_right;
    let digit = |i: usize| -> i16 {
        let ascii = if i < pad_left {
            b'0'
        } else if i < pad_left + int_digits.len() {
            int_digits[i - pad_left]
        } else if i < pad_left + int_len {
            b'0'
        } else {
            let j = i - pad_left - int_len;
            if j < frac_pad_left || j >= frac_len {
                b'0'
            } else {
                frac_digits[j - frac_pad_left]
            }
        };
        i16::from(ascii - b'0')
    };
    let group = |g: usize| (0..4).fold(0i16, |acc, k| acc * 10 + digit(g * 4 + k));
    let num_groups = total / 4;
    let mut first = 0;
    while first < num_groups && group(first) == 0 {
        first += 1;
    }
    let mut end = num_groups;
    while end > first && group(end - 1) == 0 {
        end -= 1;
    }
    let (weight, sign) = if first == end {
        (0, NUMERIC_POSITIVE)
    } else {
        let weight = ((pad_left + int_len) / 4) as i64 - 1 - first as i64;
        (
            weight,
            if negative {
                NUMERIC_NEGATIVE
            } else {
                NUMERIC_POSITIVE
            },
        )
    };
    out.put_i16((end - first) as i16);
    out.put_i16(weight as i16);
    out.put_u16(sign);
    out.put_u16(display_scale as u16);
    (first..end).for_each(|g| out.put_i16(group(g)));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numeric header and digits of `unscaled`/`scale`.
    fn numeric(unscaled: &str, scale: i8) -> (i16, i16, u16, u16, Vec<i16>) {
        let mut out = BytesMut::new();
        write_numeric(unscaled, scale, &mut out);
        let word = |i: usize| i16::from_be_bytes([out[2 * i], out[2 * i + 1]]);
        let num_digits = word(0);
        let digits = (0..num_digits as usize).map(|i| word(4 + i)).collect();
        (num_digits, word(1), word(2) as u16, word(3) as u16, digits)
    }

    #[test]
    fn numeric_matches_postgres_numeric_send() {
        assert_eq!(numeric("1761520", 3), (2, 0, 0, 3, vec![1761, 5200]));
        assert_eq!(numeric("5", 2), (1, -1, 0, 2, vec![500]));
        assert_eq!(numeric("12345", 0), (2, 1, 0, 0, vec![1, 2345]));
        assert_eq!(numeric("-12345", 0), (2, 1, 0x4000, 0, vec![1, 2345]));
        assert_eq!(numeric("0", 2), (0, 0, 0, 2, vec![]));
        assert_eq!(numeric("10000", 0), (1, 1, 0, 0, vec![1]));
        assert_eq!(numeric("1", 8), (1, -2, 0, 8, vec![1]));
        assert_eq!(numeric("42", -4), (1, 1, 0, 0, vec![42]));
        assert_eq!(numeric("123456789", 4), (3, 1, 0, 4, vec![1, 2345, 6789]));
    }

    #[test]
    fn times_count_from_2000() {
        let mut out = BytesMut::new();
        write_timestamp(POSTGRES_EPOCH_MICROS + 1, &mut out).unwrap();
        assert_eq!(&out[..], &1i64.to_be_bytes());
        let mut out = BytesMut::new();
        write_date(i64::from(POSTGRES_EPOCH_DAYS) - 1, &mut out).unwrap();
        assert_eq!(&out[..], &(-1i32).to_be_bytes());
        assert!(write_timestamp(i64::MIN, &mut BytesMut::new()).is_none());
    }

    #[test]
    fn interval_is_micros_days_months() {
        let mut out = BytesMut::new();
        write_interval(14, 3, 1_500_000_000, &mut out).unwrap();
        let mut expected = Vec::new();
        expected.extend_from_slice(&1_500_000i64.to_be_bytes());
        expected.extend_from_slice(&3i32.to_be_bytes());
        expected.extend_from_slice(&14i32.to_be_bytes());
        assert_eq!(&out[..], &expected[..]);
    }
}
