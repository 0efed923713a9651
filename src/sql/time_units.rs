//! Flink's calls that take a time unit keyword, made to parse as plain function calls: the
//! statement's text is rewritten at the token level before it is parsed
//! ([`rewrite_time_units`]), and the functions of [`crate::plan::functions`] do the rest.
//!
//! | Flink | rewritten |
//! |---|---|
//! | `TIMESTAMPDIFF(SECOND, t1, t2)` | `TIMESTAMPDIFF('SECOND', t1, t2)` |
//! | `TIMESTAMPADD(MONTH, n, t)` | `TIMESTAMPADD('MONTH', n, t)` |
//! | `FLOOR(t TO HOUR)` | `time_floor('HOUR', t)` |
//! | `CEIL(t TO DAY)`, `CEILING(t TO DAY)` | `time_ceil('DAY', t)` |
//! | `LOCALTIMESTAMP` | `localtimestamp()` (Flink: the current time as a TIMESTAMP(3) in the session time zone, UTC, read per row in a streaming job) |
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
    if !["TIMESTAMPDIFF", "TIMESTAMPADD", "FLOOR", "CEIL", "LOCALTIMESTAMP"].iter().any(|w| upper.contains(w)) {
        return Ok(sql.to_string());
    }
    let t = crate::sql::token_rewrite::Tokens::new(sql)?;
    let (tokens, sig) = (&t.tokens, &t.sig);
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
            "FLOOR" | "CEIL" | "CEILING" if is(k + 1, Token::LParen) => {
                // `TO unit` right before the call's closing parenthesis, at its own depth.
                let mut depth = 0usize;
                let mut close = None;
                for (j, &i) in sig.iter().enumerate().skip(k + 1) {
                    match tokens[i] {
                        Token::LParen => depth += 1,
                        Token::RParen => {
                            depth -= 1;
                            if depth == 0 {
                                close = Some(j);
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                let Some(close) = close else { continue };
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
            "LOCALTIMESTAMP" if !is(k + 1, Token::LParen) => {
                rewritten.insert(sig[k], "localtimestamp()".to_string());
            }
            _ => {}
        }
    }
    Ok(t.render(&rewritten))
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
