//! Rewrites of a parsed query that DataFusion would plan otherwise than Flink, applied wherever a
//! query is planned: a batch statement ([`crate::sql::pg_compat::rewrite`]), a view's or job's
//! query when it is created and when it replans, an `INSERT`'s query.
//!
//! - Flink's lateral `UNNEST` ([`crate::sql::lateral_unnest`]).
//! - `CAST(x AS VARCHAR(n))` (and `CHARACTER VARYING(n)`) keeps the first `n` characters, and
//!   `CAST(x AS CHAR(n))` pads with spaces to `n` or cuts to it, as Flink (since 1.15) and
//!   Postgres do; DataFusion's string type has no length, and its cast ignored it.

use std::ops::ControlFlow;

use sqlparser::ast::{CharacterLength, DataType, Expr, Statement, VisitMut, VisitorMut};

use crate::error::Result;

/// Applies every rewrite of this module to `stmt`.
///
/// # Errors
/// [`crate::sql::lateral_unnest::rewrite`]'s.
pub fn rewrite(stmt: &mut Statement) -> Result<()> {
    crate::sql::lateral_unnest::rewrite(stmt)?;
    let _ = stmt.visit(&mut SizedStringCasts);
    Ok(())
}

/// [`rewrite`] of a query's text: the text itself when nothing changes (or it does not parse
/// here: the planner then says why).
///
/// # Errors
/// As [`rewrite`].
pub fn rewrite_text(query: &str) -> Result<String> {
    let upper = query.to_ascii_uppercase();
    if !upper.contains("UNNEST") && !upper.contains("CHAR") {
        return Ok(query.to_string());
    }
    let Ok(mut statements) = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::GenericDialect {}, query) else {
        return Ok(query.to_string());
    };
    let [stmt] = statements.as_mut_slice() else { return Ok(query.to_string()) };
    let before = stmt.clone();
    rewrite(stmt)?;
    Ok(if *stmt == before { query.to_string() } else { stmt.to_string() })
}

/// `CAST(x AS VARCHAR(n))` as `LEFT(CAST(x AS VARCHAR), n)`, `CAST(x AS CHAR(n))` as
/// `RPAD(CAST(x AS VARCHAR), n)`; `TRY_CAST` and `::` alike.
struct SizedStringCasts;

impl VisitorMut for SizedStringCasts {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Cast { kind, expr: inner, data_type, array: false, format: None } = expr else {
            return ControlFlow::Continue(());
        };
        let (function, length) = match data_type {
            DataType::Varchar(Some(CharacterLength::IntegerLength { length, .. }))
            | DataType::CharacterVarying(Some(CharacterLength::IntegerLength { length, .. })) => ("LEFT", *length),
            DataType::Char(Some(CharacterLength::IntegerLength { length, .. }))
            | DataType::Character(Some(CharacterLength::IntegerLength { length, .. })) => ("RPAD", *length),
            _ => return ControlFlow::Continue(()),
        };
        let unsized_cast = Expr::Cast {
            kind: kind.clone(),
            expr: inner.clone(),
            data_type: DataType::Varchar(None),
            array: false,
            format: None,
        };
        let text = format!("{function}({unsized_cast}, {length})");
        if let Ok(rewritten) = sqlparser::parser::Parser::new(&sqlparser::dialect::GenericDialect {})
            .try_with_sql(&text)
            .and_then(|mut p| p.parse_expr())
        {
            *expr = rewritten;
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_string_casts_cut_and_pad() {
        let text = |sql: &str| rewrite_text(sql).unwrap();
        assert_eq!(text("SELECT CAST(name AS VARCHAR(3)) FROM t"), "SELECT LEFT(CAST(name AS VARCHAR), 3) FROM t");
        assert_eq!(text("SELECT x::character varying(2), CAST(x AS CHAR(4))"), "SELECT LEFT(x::VARCHAR, 2), RPAD(CAST(x AS VARCHAR), 4)");
        assert_eq!(text("SELECT CAST(x AS VARCHAR), CAST(x AS STRING)"), "SELECT CAST(x AS VARCHAR), CAST(x AS STRING)");
    }
}
