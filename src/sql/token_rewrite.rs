//! What Weir's token-level rewrites of Flink syntax share ([`crate::sql::time_units`],
//! [`crate::sql::json_clauses`], [`crate::sql::types`]): a statement's tokens with their text
//! as written, the significant ones (not whitespace) to look at, and the text put back together
//! with some tokens replaced, every other one copied as written.

use std::collections::HashMap;

use sqlparser::tokenizer::Token;

use crate::error::Result;

/// The tokens of a statement.
pub struct Tokens<'a> {
    /// Every token, whitespace included.
    pub tokens: Vec<Token>,
    /// Each token's text as written.
    pub texts: Vec<&'a str>,
    /// The positions in `tokens` of those that are not whitespace.
    pub sig: Vec<usize>,
}

impl<'a> Tokens<'a> {
    /// The tokens of `sql`.
    ///
    /// # Errors
    /// `Syntax` when the text cannot be tokenized.
    pub fn new(sql: &'a str) -> Result<Self> {
        let (tokens, texts): (Vec<Token>, Vec<&str>) = crate::sql::parser::tokens_with_text(sql)?.into_iter().unzip();
        let sig = (0..tokens.len()).filter(|i| !matches!(tokens[*i], Token::Whitespace(_))).collect();
        Ok(Tokens { tokens, texts, sig })
    }

    /// Significant token `k`, upper-cased, if it is an unquoted word.
    pub fn word_at(&self, k: usize) -> Option<String> {
        match self.sig.get(k).map(|i| &self.tokens[*i]) {
            Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
            _ => None,
        }
    }

    /// Whether significant token `k` is `t`.
    pub fn is(&self, k: usize, t: &Token) -> bool {
        self.sig.get(k).is_some_and(|i| self.tokens[*i] == *t)
    }

    /// The text with token `i` (a position in `tokens`) replaced by `rewritten[i]` where it has
    /// an entry.
    pub fn render(&self, rewritten: &HashMap<usize, String>) -> String {
        let mut out = String::with_capacity(self.texts.iter().map(|t| t.len()).sum::<usize>() + 16);
        for (i, text) in self.texts.iter().enumerate() {
            out.push_str(rewritten.get(&i).map_or(*text, String::as_str));
        }
        out
    }
}
