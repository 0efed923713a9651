//! The clauses of Flink's `JSON_VALUE(json, path [RETURNING type] [NULL ON EMPTY] [NULL ON
//! ERROR])` (Flink docs, JSON Functions), made to parse as plain calls: the statement's text is
//! rewritten at the token level before it is parsed ([`rewrite_json_clauses`]).
//!
//! - `RETURNING type`: the value cast to `type`, NULL when it does not convert (Flink's default
//!   `NULL ON ERROR`): `TRY_CAST(JSON_VALUE(json, path) AS type)`.
//! - `NULL ON EMPTY`, `NULL ON ERROR`: the defaults, dropped.
//! - `ERROR ON ...` and `DEFAULT value ON ...` are refused, naming the clause.
//!
//! Text inside string literals and quoted names is left alone.

use sqlparser::tokenizer::Token;

use crate::error::{Result, WeirError};

/// Rewrites the clauses of every `JSON_VALUE` call in `sql`; text without them comes back
/// unchanged.
///
/// # Errors
/// `Syntax` when the text cannot be tokenized; `Unsupported` for an `ERROR ON` or `DEFAULT ON`
/// clause.
pub fn rewrite_json_clauses(sql: &str) -> Result<String> {
    let upper = sql.to_ascii_uppercase();
    if !upper.contains("JSON_VALUE") || !(upper.contains("RETURNING") || upper.contains(" ON ")) {
        return Ok(sql.to_string());
    }
    let t = crate::sql::token_rewrite::Tokens::new(sql)?;
    let (tokens, texts, sig) = (&t.tokens, &t.texts, &t.sig);
    let word_at = |k: usize| t.word_at(k);
    let mut rewritten: std::collections::HashMap<usize, String> = std::collections::HashMap::new();
    for k in 0..sig.len() {
        if word_at(k).as_deref() != Some("JSON_VALUE") || sig.get(k + 1).is_none_or(|i| tokens[*i] != Token::LParen) {
            continue;
        }
        let starts_clause = |j: usize| match word_at(j).as_deref() {
            Some("RETURNING") => true,
            // Right after the path (not an argument of its own), ON soon after.
            Some("NULL" | "ERROR" | "DEFAULT") => {
                (j + 1..sig.len()).take(4).any(|n| word_at(n).as_deref() == Some("ON"))
                    && !matches!(tokens[sig[j - 1]], Token::Comma | Token::LParen)
            }
            _ => false,
        };
        let Some((close, start)) = call_clauses(&t, k, starts_clause) else { continue };
        // The clauses' words, split into RETURNING's type and the ON clauses.
        let text = |from: usize, to: usize| -> String { texts[sig[from]..sig[to]].concat().trim().to_string() };
        let mut at = start;
        let mut returning = None;
        if word_at(at).as_deref() == Some("RETURNING") {
            let mut end = at + 1;
            while end < close && !matches!(word_at(end).as_deref(), Some("NULL" | "ERROR" | "DEFAULT")) {
                end += 1;
            }
            returning = Some(text(at + 1, end));
            at = end;
        }
        while at < close {
            match (word_at(at).as_deref(), word_at(at + 1).as_deref(), word_at(at + 2).as_deref()) {
                (Some("NULL"), Some("ON"), Some("EMPTY" | "ERROR")) => at += 3,
                _ => {
                    return Err(WeirError::unsupported(format!(
                        "JSON_VALUE's clause '{}': only RETURNING <type>, NULL ON EMPTY and NULL ON ERROR are supported (a value that is missing or does not convert is NULL)",
                        text(at, close)
                    )))
                }
            }
        }
        for i in sig[start - 1] + 1..sig[close] {
            rewritten.insert(i, String::new());
        }
        if let Some(t) = returning {
            if t.is_empty() {
                return Err(WeirError::syntax("JSON_VALUE: RETURNING needs a type", None));
            }
            rewritten.insert(sig[k], format!("TRY_CAST({}", texts[sig[k]]));
            rewritten.insert(sig[close], format!(") AS {t})"));
        }
    }
    Ok(t.render(&rewritten))
}

/// The closing parenthesis of the call whose name is significant token `k`, and its first
/// clause: the first token at the call's own depth for which `starts_clause` holds; `None`
/// when the call is not closed or has no clause.
fn call_clauses(t: &crate::sql::token_rewrite::Tokens<'_>, k: usize, starts_clause: impl Fn(usize) -> bool) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let mut clauses = None;
    for (j, &i) in t.sig.iter().enumerate().skip(k + 1) {
        match t.tokens[i] {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    return clauses.map(|start| (j, start));
                }
            }
            _ if depth == 1 && clauses.is_none() && starts_clause(j) => clauses = Some(j),
            _ => {}
        }
    }
    None
}

/// Rewrites the clauses of every `JSON_QUERY(json, path [wrapper] [x ON EMPTY] [x ON ERROR])`
/// call (Flink docs, JSON Functions) into three more string arguments, which
/// [`crate::plan::functions`]' JSON_QUERY reads: the wrapper (`WITHOUT`, `UNCONDITIONAL` or
/// `CONDITIONAL`; `WITH [ARRAY] WRAPPER` is unconditional), then what `ON EMPTY` and `ON
/// ERROR` give (`NULL`, `EMPTY ARRAY`, `EMPTY OBJECT`). A call without clauses is left as it
/// is (the defaults: `WITHOUT ARRAY WRAPPER NULL ON EMPTY NULL ON ERROR`).
///
/// # Errors
/// `Syntax` when the text cannot be tokenized; `Unsupported` for `ERROR ON ..` and `RETURNING`.
pub fn rewrite_json_query_clauses(sql: &str) -> Result<String> {
    let upper = sql.to_ascii_uppercase();
    if !upper.contains("JSON_QUERY") || !(upper.contains("WRAPPER") || upper.contains(" ON ") || upper.contains("RETURNING")) {
        return Ok(sql.to_string());
    }
    let t = crate::sql::token_rewrite::Tokens::new(sql)?;
    let (tokens, texts, sig) = (&t.tokens, &t.texts, &t.sig);
    let word_at = |k: usize| t.word_at(k);
    let mut rewritten: std::collections::HashMap<usize, String> = std::collections::HashMap::new();
    for k in 0..sig.len() {
        if word_at(k).as_deref() != Some("JSON_QUERY") || !t.is(k + 1, &Token::LParen) {
            continue;
        }
        // A clause follows the path, not a comma (an argument of its own).
        let starts_clause = |j: usize| {
            !matches!(tokens[sig[j - 1]], Token::Comma | Token::LParen)
                && match word_at(j).as_deref() {
                    Some("WITH" | "WITHOUT" | "RETURNING") => true,
                    Some("NULL" | "EMPTY" | "ERROR") => (j + 1..sig.len()).take(3).any(|n| word_at(n).as_deref() == Some("ON")),
                    _ => false,
                }
        };
        let Some((close, start)) = call_clauses(&t, k, starts_clause) else { continue };
        let words: Vec<String> = (start..close).map(|j| word_at(j).unwrap_or_else(|| texts[sig[j]].to_string())).collect();
        let clause_text = words.join(" ");
        let refuse = || {
            WeirError::unsupported(format!(
                "JSON_QUERY's clause '{clause_text}': supported are [WITH [CONDITIONAL | UNCONDITIONAL] | WITHOUT] [ARRAY] \
                 WRAPPER and {{NULL | EMPTY ARRAY | EMPTY OBJECT}} ON {{EMPTY | ERROR}}"
            ))
        };
        let (mut wrapper, mut on_empty, mut on_error) = ("WITHOUT", "NULL".to_string(), "NULL".to_string());
        let mut at = 0;
        let word = |n: usize| words.get(n).map(String::as_str);
        while at < words.len() {
            match (word(at), word(at + 1)) {
                (Some("WITHOUT"), _) => {
                    at += 1;
                    wrapper = "WITHOUT";
                }
                (Some("WITH"), Some("CONDITIONAL")) => {
                    at += 2;
                    wrapper = "CONDITIONAL";
                }
                (Some("WITH"), Some("UNCONDITIONAL")) => {
                    at += 2;
                    wrapper = "UNCONDITIONAL";
                }
                (Some("WITH"), _) => {
                    at += 1;
                    wrapper = "UNCONDITIONAL";
                }
                (Some(w @ ("NULL" | "EMPTY")), _) => {
                    let behaviour = match (w, word(at + 1)) {
                        ("NULL", _) => "NULL",
                        (_, Some("ARRAY")) => "EMPTY ARRAY",
                        (_, Some("OBJECT")) => "EMPTY OBJECT",
                        _ => return Err(refuse()),
                    };
                    at += if w == "NULL" { 1 } else { 2 };
                    match (word(at), word(at + 1)) {
                        (Some("ON"), Some("EMPTY")) => on_empty = behaviour.to_string(),
                        (Some("ON"), Some("ERROR")) => on_error = behaviour.to_string(),
                        _ => return Err(refuse()),
                    }
                    at += 2;
                    continue;
                }
                _ => return Err(refuse()),
            }
            // After WITH/WITHOUT: [ARRAY] WRAPPER.
            if word(at) == Some("ARRAY") {
                at += 1;
            }
            if word(at) != Some("WRAPPER") {
                return Err(refuse());
            }
            at += 1;
        }
        rewritten.insert(sig[start], format!(", '{wrapper}', '{on_empty}', '{on_error}'"));
        for i in sig[start] + 1..sig[close] {
            rewritten.insert(i, String::new());
        }
    }
    Ok(t.render(&rewritten))
}

/// Rewrites Flink's `value IS [NOT] JSON [VALUE | SCALAR | ARRAY | OBJECT]` (Flink docs, JSON
/// Functions; sqlparser does not parse it) into `(weir_is_json(value, 'KIND'))`, or `(NOT
/// weir_is_json(..))`. `value` is what stands before `IS`: a column (`t.doc`), a literal, a
/// call (`UPPER(doc)`), a parenthesized expression or one of those with subscripts
/// (`doc['k']`), joined by the operators that bind tighter than `IS JSON` in Calcite's grammar
/// (`||`, arithmetic, comparisons: `'{' || '}' IS JSON` is `('{' || '}') IS JSON`); `AND`, `OR`
/// and `NOT` bind looser and end it.
///
/// # Errors
/// `Syntax` when the text cannot be tokenized.
pub fn rewrite_is_json(sql: &str) -> Result<String> {
    let upper = sql.to_ascii_uppercase();
    if !upper.contains("JSON") || !upper.contains("IS") {
        return Ok(sql.to_string());
    }
    let t = crate::sql::token_rewrite::Tokens::new(sql)?;
    let (texts, sig) = (&t.texts, &t.sig);
    let mut rewritten: std::collections::HashMap<usize, String> = std::collections::HashMap::new();
    for k in 1..sig.len() {
        if t.word_at(k).as_deref() != Some("IS") {
            continue;
        }
        let not = t.word_at(k + 1).as_deref() == Some("NOT");
        let json = k + 1 + usize::from(not);
        if t.word_at(json).as_deref() != Some("JSON") {
            continue;
        }
        let (kind, end) = match t.word_at(json + 1).as_deref() {
            Some(kind @ ("VALUE" | "SCALAR" | "ARRAY" | "OBJECT")) => (kind.to_string(), json + 1),
            _ => ("VALUE".to_string(), json),
        };
        let Some(start) = operand_start(&t, k - 1) else { continue };
        let not = if not { "NOT " } else { "" };
        let first = rewritten.get(&sig[start]).cloned().unwrap_or_else(|| texts[sig[start]].to_string());
        rewritten.insert(sig[start], format!("({not}weir_is_json({first}"));
        rewritten.insert(sig[k], format!(", '{kind}'))"));
        for i in sig[k] + 1..=sig[end] {
            rewritten.insert(i, String::new());
        }
    }
    Ok(t.render(&rewritten))
}

/// The first significant token of the operand of `IS JSON` that ends at significant token
/// `last`: primaries ([`primary_start`]) joined by operators that bind tighter than `IS JSON`.
fn operand_start(t: &crate::sql::token_rewrite::Tokens<'_>, last: usize) -> Option<usize> {
    let start = primary_start(t, last)?;
    let tighter = start >= 2
        && matches!(
            t.tokens[t.sig[start - 1]],
            Token::StringConcat
                | Token::Plus
                | Token::Minus
                | Token::Mul
                | Token::Div
                | Token::Mod
                | Token::Eq
                | Token::DoubleEq
                | Token::Neq
                | Token::Lt
                | Token::Gt
                | Token::LtEq
                | Token::GtEq
        );
    Some(if tighter { operand_start(t, start - 2).unwrap_or(start) } else { start })
}

/// The first significant token of the primary that ends at significant token `last`: a name
/// (`a.b.c`), a literal, or a group in parentheses or brackets with the call name or the
/// operand before it; `None` for anything else (a keyword such as `SELECT` or `AND`).
fn primary_start(t: &crate::sql::token_rewrite::Tokens<'_>, last: usize) -> Option<usize> {
    let (tokens, sig) = (&t.tokens, &t.sig);
    let mut j = last;
    loop {
        match &tokens[sig[j]] {
            Token::RParen | Token::RBracket => {
                // Back to the matching opening token.
                let mut depth = 0usize;
                loop {
                    match tokens[sig[j]] {
                        Token::RParen | Token::RBracket => depth += 1,
                        Token::LParen | Token::LBracket => depth -= 1,
                        _ => {}
                    }
                    if depth == 0 {
                        break;
                    }
                    j = j.checked_sub(1)?;
                }
                let bracket = tokens[sig[j]] == Token::LBracket;
                let called = j > 0
                    && matches!(&tokens[sig[j - 1]], Token::Word(w) if w.quote_style.is_some() || !is_clause_word(&w.value));
                if bracket || called {
                    // A subscript's base, or the name of a call.
                    j -= 1;
                    if bracket {
                        continue;
                    }
                }
            }
            Token::Word(w) if w.quote_style.is_none() && is_clause_word(&w.value) => return None,
            Token::Word(_) | Token::SingleQuotedString(_) | Token::Number(..) => {}
            _ => return None,
        }
        // A qualified name: `a.b` before this part.
        while j >= 2 && tokens[sig[j - 1]] == Token::Period && matches!(tokens[sig[j - 2]], Token::Word(_)) {
            j -= 2;
        }
        return Some(j);
    }
}

/// Whether `word` is a keyword that can stand before an opening parenthesis without naming a
/// call (`WHERE (a) IS JSON`, `AND (..)`).
fn is_clause_word(word: &str) -> bool {
    ["AND", "OR", "NOT", "WHERE", "SELECT", "ON", "WHEN", "THEN", "ELSE", "CASE", "IN", "BY", "HAVING", "AS", "FROM", "JOIN", "IS", "EXISTS", "DISTINCT", "ALL", "ANY", "SOME", "RETURN", "VALUES", "USING", "LATERAL"]
        .iter()
        .any(|k| k.eq_ignore_ascii_case(word))
}

/// Drops the optional `KEY` word before each key of a `JSON_OBJECT(KEY k VALUE v, ..)` call,
/// which sqlparser does not take (`JSON_OBJECT(k VALUE v)` is the same call; a column named
/// `key` stays: `KEY` followed by `VALUE` is the key itself).
///
/// # Errors
/// `Syntax` when the text cannot be tokenized.
pub fn strip_json_object_keys(sql: &str) -> Result<String> {
    if !sql.to_ascii_uppercase().contains("JSON_OBJECT") {
        return Ok(sql.to_string());
    }
    let t = crate::sql::token_rewrite::Tokens::new(sql)?;
    let (tokens, sig) = (&t.tokens, &t.sig);
    let mut rewritten: std::collections::HashMap<usize, String> = std::collections::HashMap::new();
    for k in 0..sig.len() {
        if t.word_at(k).as_deref() != Some("JSON_OBJECT") || !t.is(k + 1, &Token::LParen) {
            continue;
        }
        let mut depth = 0usize;
        for j in k + 1..sig.len() {
            match tokens[sig[j]] {
                Token::LParen => depth += 1,
                Token::RParen => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ if depth == 1
                    && t.word_at(j).as_deref() == Some("KEY")
                    && (t.is(j - 1, &Token::LParen) || t.is(j - 1, &Token::Comma))
                    && !(t.is(j + 1, &Token::Comma) || t.is(j + 1, &Token::RParen) || t.word_at(j + 1).as_deref() == Some("VALUE")) =>
                {
                    rewritten.insert(sig[j], String::new());
                }
                _ => {}
            }
        }
    }
    Ok(t.render(&rewritten))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_query_clauses_become_arguments() -> Result<()> {
        assert_eq!(
            rewrite_json_query_clauses("SELECT JSON_QUERY(doc, '$.a[*]' WITH ARRAY WRAPPER) FROM t")?,
            "SELECT JSON_QUERY(doc, '$.a[*]' , 'UNCONDITIONAL', 'NULL', 'NULL') FROM t"
        );
        assert_eq!(
            rewrite_json_query_clauses("SELECT json_query(doc, '$.a' with conditional wrapper empty array on empty empty object on error)")?,
            "SELECT json_query(doc, '$.a' , 'CONDITIONAL', 'EMPTY ARRAY', 'EMPTY OBJECT')"
        );
        assert_eq!(
            rewrite_json_query_clauses("SELECT JSON_QUERY(doc, '$.a' WITHOUT WRAPPER NULL ON ERROR)")?,
            "SELECT JSON_QUERY(doc, '$.a' , 'WITHOUT', 'NULL', 'NULL')"
        );
        assert!(rewrite_json_query_clauses("SELECT JSON_QUERY(doc, '$.a' ERROR ON EMPTY)").is_err());
        let plain = "SELECT JSON_QUERY(doc, '$.a'), 'WITH WRAPPER' FROM t";
        assert_eq!(rewrite_json_query_clauses(plain)?, plain);
        Ok(())
    }

    #[test]
    fn is_json_becomes_a_call() -> Result<()> {
        assert_eq!(rewrite_is_json("SELECT doc IS JSON FROM t")?, "SELECT (weir_is_json(doc , 'VALUE')) FROM t");
        assert_eq!(rewrite_is_json("SELECT t.doc IS NOT JSON OBJECT FROM t")?, "SELECT (NOT weir_is_json(t.doc , 'OBJECT')) FROM t");
        assert_eq!(rewrite_is_json("SELECT '[1]' IS JSON ARRAY")?, "SELECT (weir_is_json('[1]' , 'ARRAY'))");
        assert_eq!(rewrite_is_json("SELECT UPPER(doc) IS JSON SCALAR")?, "SELECT (weir_is_json(UPPER(doc) , 'SCALAR'))");
        assert_eq!(rewrite_is_json("SELECT * FROM t WHERE (a || b) IS JSON AND x")?, "SELECT * FROM t WHERE (weir_is_json((a || b) , 'VALUE')) AND x");
        assert_eq!(rewrite_is_json("SELECT m['k'] IS JSON")?, "SELECT (weir_is_json(m['k'] , 'VALUE'))");
        // `||` binds tighter than IS JSON, AND looser; a unary minus after SELECT is not an operand.
        assert_eq!(rewrite_is_json("SELECT '{' || '}' IS JSON")?, "SELECT (weir_is_json('{' || '}' , 'VALUE'))");
        assert_eq!(rewrite_is_json("SELECT a AND b || c IS JSON")?, "SELECT a AND (weir_is_json(b || c , 'VALUE'))");
        assert_eq!(rewrite_is_json("SELECT - x IS JSON")?, "SELECT - (weir_is_json(x , 'VALUE'))");
        let plain = "SELECT a IS NULL, 'IS JSON' FROM t";
        assert_eq!(rewrite_is_json(plain)?, plain);
        Ok(())
    }

    #[test]
    fn returning_becomes_a_try_cast_and_null_clauses_go() -> Result<()> {
        assert_eq!(
            rewrite_json_clauses("SELECT JSON_VALUE(doc, '$.a' RETURNING INT) FROM t")?,
            "SELECT TRY_CAST(JSON_VALUE(doc, '$.a') AS INT) FROM t"
        );
        assert_eq!(
            rewrite_json_clauses("SELECT json_value(doc, '$.p' RETURNING DECIMAL(10, 2) NULL ON EMPTY NULL ON ERROR) FROM t")?,
            "SELECT TRY_CAST(json_value(doc, '$.p') AS DECIMAL(10, 2)) FROM t"
        );
        assert_eq!(rewrite_json_clauses("SELECT JSON_VALUE(doc, '$.a' NULL ON EMPTY) FROM t")?, "SELECT JSON_VALUE(doc, '$.a') FROM t");
        assert_eq!(
            rewrite_json_clauses("SELECT JSON_VALUE(doc, '$[''a b'']' RETURNING INT) FROM t")?,
            "SELECT TRY_CAST(JSON_VALUE(doc, '$[''a b'']') AS INT) FROM t"
        );
        Ok(())
    }

    #[test]
    fn json_object_key_words_go() -> Result<()> {
        assert_eq!(
            strip_json_object_keys("SELECT JSON_OBJECT(KEY 'a' VALUE 1, KEY k VALUE JSON_OBJECT(KEY 'b' VALUE 2))")?,
            "SELECT JSON_OBJECT( 'a' VALUE 1,  k VALUE JSON_OBJECT( 'b' VALUE 2))"
        );
        assert_eq!(strip_json_object_keys("SELECT JSON_OBJECT(key VALUE 1)")?, "SELECT JSON_OBJECT(key VALUE 1)");
        Ok(())
    }

    #[test]
    fn other_clauses_are_refused_and_other_text_left_alone() -> Result<()> {
        assert!(rewrite_json_clauses("SELECT JSON_VALUE(doc, '$.a' DEFAULT 0 ON EMPTY) FROM t").is_err());
        assert!(rewrite_json_clauses("SELECT JSON_VALUE(doc, '$.a' ERROR ON ERROR) FROM t").is_err());
        for sql in ["SELECT JSON_VALUE(doc, '$.a') FROM t JOIN u ON t.a = u.a", "SELECT 'JSON_VALUE(x RETURNING INT)'"] {
            assert_eq!(rewrite_json_clauses(sql)?, sql);
        }
        Ok(())
    }
}
