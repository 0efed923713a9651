//! Flink's calls that take a time unit keyword, and LISTAGG, made to parse as plain function
//! calls: the statement's text is rewritten at the token level before it is parsed
//! ([`rewrite_time_units`]), and the functions of [`crate::plan::functions`] (and
//! DataFusion's `string_agg`) do the rest.
//!
//! | Flink | rewritten |
//! |---|---|
//! | `TIMESTAMPDIFF(SECOND, t1, t2)` | `TIMESTAMPDIFF('SECOND', t1, t2)` |
//! | `TIMESTAMPADD(MONTH, n, t)` | `TIMESTAMPADD('MONTH', n, t)` |
//! | `FLOOR(t TO HOUR)` | `time_floor('HOUR', t)` |
//! | `CEIL(t TO DAY)`, `CEILING(t TO DAY)` | `time_ceil('DAY', t)` |
//! | `LOCALTIMESTAMP` | `localtimestamp()` (Flink: the current time as a TIMESTAMP(3) in the session time zone, read per row in a streaming job) |
//! | `LOCALTIME` | `localtime()` (Flink: the time of day now as a TIME(0), in the session time zone) |
//! | `LISTAGG(x)`, `LISTAGG(x, sep)` | `STRING_AGG(x, ',')`, `STRING_AGG(x, sep)` (Flink: the separator defaults to `','`) |
//! | `TRIM(BOTH FROM s)`, `TRIM(LEADING FROM s)`, `TRIM(FROM s)` | `TRIM(BOTH ' ' FROM s)`, .. (SQL's and Postgres's: the characters default to a space) |
//!
//! Text inside string literals and quoted names is left alone; `FLOOR(x)` without `TO` too.

use sqlparser::tokenizer::Token;

use crate::error::Result;

/// Rewrites the calls of the table above in `sql`; text without them comes back unchanged.
///
/// # Errors
/// `Syntax` when the text cannot be tokenized.
pub fn rewrite_time_units(sql: &str) -> Result<String> {
    let upper = sql.to_ascii_uppercase();
    if !["TIMESTAMPDIFF", "TIMESTAMPADD", "FLOOR", "CEIL", "LOCALTIME", "LISTAGG", "TRIM"].iter().any(|w| upper.contains(w)) {
        return Ok(sql.to_string());
    }
    let t = crate::sql::token_rewrite::Tokens::new(sql)?;
    let sig = &t.sig;
    let word_at = |k: usize| t.word_at(k);
    let is = |k: usize, token: Token| t.is(k, &token);
    let mut rewritten = std::collections::HashMap::new();
    for k in 0..sig.len() {
        let Some(word) = word_at(k) else { continue };
        // A qualified name (`t.floor`) is a column, not a call.
        if k > 0 && is(k - 1, Token::Period) {
            continue;
        }
        match word.as_str() {
            "TIMESTAMPDIFF" | "TIMESTAMPADD" if is(k + 1, Token::LParen) && is(k + 3, Token::Comma) => {
                if let Some(unit) = word_at(k + 2) {
                    rewritten.insert(sig[k + 2], format!("'{unit}'"));
                }
            }
            "LISTAGG" if is(k + 1, Token::LParen) => {
                let Some((close, commas)) = call_end(&t, k + 1) else { continue };
                rewritten.insert(sig[k], "STRING_AGG".to_string());
                if commas == 0 {
                    rewritten.insert(sig[close], ", ',')".to_string());
                }
            }
            "FLOOR" | "CEIL" | "CEILING" if is(k + 1, Token::LParen) => {
                // `TO unit` right before the call's closing parenthesis, at its own depth.
                let Some((close, _)) = call_end(&t, k + 1) else { continue };
                if close < k + 5 || word_at(close - 2).as_deref() != Some("TO") {
                    continue;
                }
                let Some(unit) = word_at(close - 1) else { continue };
                let function = if word == "FLOOR" { "time_floor" } else { "time_ceil" };
                rewritten.insert(sig[k], function.to_string());
                rewritten.insert(sig[k + 1], format!("('{unit}', "));
                // `TO unit` and the spaces around it go.
                for i in sig[close - 3] + 1..sig[close] {
                    rewritten.insert(i, String::new());
                }
            }
            "TRIM" if is(k + 1, Token::LParen) => {
                // `TRIM(FROM s)` and `TRIM(BOTH | LEADING | TRAILING FROM s)`: no characters.
                match word_at(k + 2).as_deref() {
                    Some("FROM") => {
                        rewritten.insert(sig[k + 2], "BOTH ' ' FROM".to_string());
                    }
                    Some("BOTH" | "LEADING" | "TRAILING") if word_at(k + 3).as_deref() == Some("FROM") => {
                        rewritten.insert(sig[k + 3], "' ' FROM".to_string());
                    }
                    _ => {}
                }
            }
            "LOCALTIMESTAMP" if !is(k + 1, Token::LParen) => {
                rewritten.insert(sig[k], "localtimestamp()".to_string());
            }
            "LOCALTIME" if !is(k + 1, Token::LParen) => {
                rewritten.insert(sig[k], "localtime()".to_string());
            }
            _ => {}
        }
    }
    Ok(t.render(&rewritten))
}

/// The significant token that closes the parenthesis opened at significant token `open`, and
/// the commas between them at the call's own depth (its arguments less one); `None` when it
/// is never closed.
fn call_end(t: &crate::sql::token_rewrite::Tokens<'_>, open: usize) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let mut commas = 0;
    for (j, &i) in t.sig.iter().enumerate().skip(open) {
        match t.tokens[i] {
            Token::LParen | Token::LBracket => depth += 1,
            Token::RParen | Token::RBracket => {
                depth -= 1;
                if depth == 0 {
                    return Some((j, commas));
                }
            }
            Token::Comma if depth == 1 => commas += 1,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_become_literals_and_floor_to_a_call() -> Result<()> {
        assert_eq!(
            rewrite_time_units("SELECT TIMESTAMPDIFF(second, a, b), timestampadd(MONTH, 1, t) FROM x")?,
            "SELECT TIMESTAMPDIFF('SECOND', a, b), timestampadd('MONTH', 1, t) FROM x"
        );
        assert_eq!(
            rewrite_time_units("SELECT FLOOR(CAST(ts AS TIMESTAMP(3)) TO HOUR), CEIL(ts TO day) FROM x")?,
            "SELECT time_floor('HOUR', CAST(ts AS TIMESTAMP(3))), time_ceil('DAY', ts) FROM x"
        );
        assert_eq!(
            rewrite_time_units("SELECT LISTAGG(name), listagg(f(a, b), ';') FILTER (WHERE x) FROM t")?,
            "SELECT STRING_AGG(name, ','), STRING_AGG(f(a, b), ';') FILTER (WHERE x) FROM t"
        );
        // Doubled quotes stay as written.
        assert_eq!(
            rewrite_time_units("SELECT TIMESTAMPADD(DAY, 1, t), 'O''Brien' FROM x")?,
            "SELECT TIMESTAMPADD('DAY', 1, t), 'O''Brien' FROM x"
        );
        Ok(())
    }

    #[test]
    fn other_text_is_left_alone() -> Result<()> {
        for sql in [
            "SELECT FLOOR(x), CEIL(1.5) FROM t",
            "SELECT 'FLOOR(ts TO HOUR)', \"floor\" FROM t",
            "SELECT t.floor FROM t",
            "SELECT 1",
        ] {
            assert_eq!(rewrite_time_units(sql)?, sql);
        }
        Ok(())
    }
}
