//! Session settings with meaning to Weir, and their values.
//!
//! | key | value | effect |
//! |---|---|---|
//! | `table.exec.emit.allow-lateness` | a duration | window views created afterwards keep a fired window open that long (Flink) |
//! | `table.exec.state.ttl` | a duration | reserved for state TTL (not applied yet) |

use crate::error::{Result, WeirError};

/// The allowed lateness of window views, a duration.
pub const ALLOW_LATENESS: &str = "table.exec.emit.allow-lateness";
/// State time-to-live, a duration.
pub const STATE_TTL: &str = "table.exec.state.ttl";

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

/// Checks a `SET` of a key Weir interprets.
pub fn validate(key: &str, value: &str) -> Result<()> {
    if key == ALLOW_LATENESS || key == STATE_TTL {
        parse_duration_ms(key, value)?;
    }
    Ok(())
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
