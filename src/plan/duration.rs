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
    weir_connectors::duration_ms(value).ok_or_else(|| {
        WeirError::option(format!(
            "{key} = '{value}' is not a duration; write a whole number and a unit: ms, s, min, h, d (e.g. '10 s', '1500 ms'); a number alone is milliseconds"
        ))
    })
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
        // Flink's rule: whole numbers only, within 64 bits of milliseconds.
        assert!(parse_duration_ms("k", "1.5 s").is_err());
        assert!(parse_duration_ms("k", "99999999999999999999").is_err());
        assert!(parse_duration_ms("k", "9223372036854775807 d").is_err());
        assert_eq!(parse_duration_ms("k", "9223372036854775807")?, i64::MAX);
        Ok(())
    }
}
