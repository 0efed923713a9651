//! Durations in options and settings, in Flink's syntax: `'10 s'`, `'500 ms'`, `'2 min'`,
//! `'1 h'`, `'1 d'`, or a bare number of milliseconds. Used by session settings
//! (`table.exec.state.ttl`, `table.exec.emit.allow-lateness`) and table options
//! (`'watermark.idle-advance'`, `'scan.watermark.idle-timeout'`).

use crate::error::{Result, WeirError};

/// Milliseconds of a duration such as `'1 h'`, `'30 s'`, `'500 ms'`, `'2 min'`, `'1 d'`, or a
/// bare number of milliseconds (Flink's duration syntax).
///
/// # Errors
/// `InvalidOption` naming the value and the accepted units.
pub fn parse_duration_ms(key: &str, value: &str) -> Result<i64> {
    let v = value.trim().to_lowercase();
    let split = v.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let bad = || {
        WeirError::option(format!(
            "{key} = '{value}' is not a duration; write a number and a unit: ms, s, min, h, d (e.g. '10 s')"
        ))
    };
    let n: f64 = num.parse().map_err(|_| bad())?;
    let factor = match unit.trim() {
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1.0,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000.0,
        "min" | "mins" | "minute" | "minutes" => 60_000.0,
        "h" | "hour" | "hours" => 3_600_000.0,
        "d" | "day" | "days" => 86_400_000.0,
        _ => return Err(bad()),
    };
    Ok((n * factor).round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() -> Result<()> {
        assert_eq!(parse_duration_ms("k", "1 h")?, 3_600_000);
        assert_eq!(parse_duration_ms("k", "30s")?, 30_000);
        assert_eq!(parse_duration_ms("k", "0 ms")?, 0);
        assert_eq!(parse_duration_ms("k", "250")?, 250);
        assert!(parse_duration_ms("k", "soon").is_err());
        Ok(())
    }
}
