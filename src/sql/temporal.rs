//! Flink's `FOR SYSTEM_TIME AS OF`, turned into a DataFusion table function.
//!
//! `t FOR SYSTEM_TIME AS OF o.ts [AS] r` has no place in sqlparser's generic grammar, so
//! [`rewrite_system_time`] rewrites it, at the token level, into `weir_versioned('t', 'o.ts')
//! AS r` (the alias defaults to `t`, so `t.col` still resolves). The table function registered
//! by [`register`] returns a [`VersionedTable`] over `t`; see [`crate::plan::temporal`].
//!
//! The AS OF operand must be a column of the other join input (`o.ts` or `ts`), as in Flink.

use std::sync::Arc;

use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::Expr;
use datafusion::prelude::SessionContext;
use sqlparser::dialect::GenericDialect;
use sqlparser::tokenizer::{Token, Tokenizer, Word};

use crate::error::{Result, WeirError};
use crate::plan::temporal::{VersionedTable, FUNCTION};

/// Words that end a table reference, so they are not taken for an alias.
const NOT_ALIAS: &[&str] = &[
    "ON", "USING", "JOIN", "INNER", "LEFT", "RIGHT", "FULL", "CROSS", "NATURAL", "WHERE", "GROUP", "HAVING", "ORDER",
    "LIMIT", "UNION", "WINDOW", "EMIT",
];

/// Rewrites every `t FOR SYSTEM_TIME AS OF col [AS] alias` in `sql` into
/// `weir_versioned('t', 'col') AS alias`. Text without the clause comes back unchanged.
///
/// # Errors
/// `Syntax` when the clause does not follow a table name or is not followed by a column.
pub fn rewrite_system_time(sql: &str) -> Result<String> {
    if !sql.to_ascii_uppercase().contains("SYSTEM_TIME") {
        return Ok(sql.to_string());
    }
    let tokens =
        Tokenizer::new(&GenericDialect {}, sql).tokenize().map_err(|e| WeirError::syntax(e.message.clone(), None))?;
    let sig: Vec<usize> = (0..tokens.len()).filter(|i| !matches!(tokens[*i], Token::Whitespace(_))).collect();
    let word_at = |k: usize| match sig.get(k).map(|i| &tokens[*i]) {
        Some(Token::Word(w)) => Some(w),
        _ => None,
    };
    let keyword =
        |k: usize, kw: &str| word_at(k).is_some_and(|w| w.quote_style.is_none() && w.value.eq_ignore_ascii_case(kw));
    let period = |k: usize| sig.get(k).is_some_and(|i| tokens[*i] == Token::Period);
    let mut out = String::with_capacity(sql.len());
    let mut copied = 0; // tokens[..copied] are in `out`
    let mut k = 0;
    while k < sig.len() {
        if !(keyword(k, "FOR") && keyword(k + 1, "SYSTEM_TIME") && keyword(k + 2, "AS") && keyword(k + 3, "OF")) {
            k += 1;
            continue;
        }
        // The table name before: word (. word)*.
        let mut start = k;
        while start > 0 && word_at(start - 1).is_some() {
            start -= 1;
            if start >= 2 && period(start - 1) && word_at(start - 2).is_some() {
                start -= 1;
            } else {
                break;
            }
        }
        if start == k {
            return Err(WeirError::syntax("FOR SYSTEM_TIME AS OF must follow a table name", None));
        }
        let table = dotted(&(start..k).filter_map(word_at).collect::<Vec<_>>());
        // The column after: word (. word)*.
        let mut end = k + 4;
        let mut parts = Vec::new();
        while let Some(w) = word_at(end) {
            parts.push(w);
            end += 1;
            if period(end) {
                end += 1;
            } else {
                break;
            }
        }
        if parts.is_empty() {
            return Err(WeirError::syntax(
                format!("FOR SYSTEM_TIME AS OF on {table} needs a time column of the other input, such as o.event_ts"),
                None,
            ));
        }
        let as_of = dotted(&parts);
        // The alias: [AS] word, unless the word starts the next clause.
        let mut alias = table.rsplit('.').next().unwrap_or(&table).to_string();
        if keyword(end, "AS") {
            if let Some(w) = word_at(end + 1) {
                alias = w.to_string();
                end += 2;
            }
        } else if let Some(w) = word_at(end) {
            if !NOT_ALIAS.iter().any(|kw| keyword(end, kw)) {
                alias = w.to_string();
                end += 1;
            }
        }
        for t in &tokens[copied..sig[start]] {
            out.push_str(&t.to_string());
        }
        out.push_str(&format!(
            "{FUNCTION}('{}', '{}') AS {alias}",
            table.replace('\'', "''"),
            as_of.replace('\'', "''")
        ));
        copied = sig[end - 1] + 1;
        k = end;
    }
    for t in &tokens[copied..] {
        out.push_str(&t.to_string());
    }
    Ok(out)
}

/// Identifier parts joined with dots, unquoted ones lower-cased (as DataFusion resolves them).
fn dotted(parts: &[&Word]) -> String {
    parts
        .iter()
        .map(|w| if w.quote_style.is_none() { w.value.to_lowercase() } else { w.value.clone() })
        .collect::<Vec<_>>()
        .join(".")
}

/// Looks a relation's provider up by name.
pub type TableLookup = Arc<dyn Fn(&str) -> Option<Arc<dyn TableProvider>> + Send + Sync>;

/// Registers `weir_versioned`; `lookup(name)` returns a relation's provider.
pub fn register(ctx: &SessionContext, lookup: TableLookup) {
    ctx.register_udtf(FUNCTION, Arc::new(VersionedFunction { lookup }));
}

struct VersionedFunction {
    lookup: TableLookup,
}

impl std::fmt::Debug for VersionedFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VersionedFunction")
    }
}

impl TableFunctionImpl for VersionedFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let df_err = |e: WeirError| DataFusionError::External(Box::new(e));
        let text = |e: &Expr| match e {
            Expr::Literal(ScalarValue::Utf8(Some(s)), _) => Some(s.clone()),
            _ => None,
        };
        let (table, as_of) = match args.exprs() {
            [t, a] => (text(t), text(a)),
            _ => (None, None),
        };
        let (Some(table), Some(as_of)) = (table, as_of) else {
            return Err(df_err(WeirError::plan(format!(
                "{FUNCTION} takes ('table', 'time column'); write t FOR SYSTEM_TIME AS OF o.ts instead"
            ))));
        };
        // A schema-qualified name: relations live in one schema.
        let table = table.rsplit('.').next().unwrap_or(&table).to_string();
        let input = (self.lookup)(&table).ok_or_else(|| df_err(WeirError::unknown_table(&table)))?;
        Ok(Arc::new(VersionedTable { table, as_of, input, processing_time: Default::default() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_the_clause_with_and_without_alias() -> Result<()> {
        assert_eq!(
            rewrite_system_time("SELECT * FROM o JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.c = r.c")?,
            "SELECT * FROM o JOIN weir_versioned('rates', 'o.ts') AS r ON o.c = r.c"
        );
        assert_eq!(
            rewrite_system_time("SELECT * FROM o LEFT JOIN public.Rates FOR SYSTEM_TIME AS OF ts r ON c = r.c")?,
            "SELECT * FROM o LEFT JOIN weir_versioned('public.rates', 'ts') AS r ON c = r.c"
        );
        assert_eq!(
            rewrite_system_time("SELECT * FROM o JOIN rates FOR SYSTEM_TIME AS OF O.TS ON o.c = rates.c")?,
            "SELECT * FROM o JOIN weir_versioned('rates', 'o.ts') AS rates ON o.c = rates.c"
        );
        assert_eq!(rewrite_system_time("SELECT 'FOR SYSTEM_TIME AS OF'")?, "SELECT 'FOR SYSTEM_TIME AS OF'");
        Ok(())
    }

    #[test]
    fn needs_a_table_and_a_column() {
        assert!(rewrite_system_time("SELECT * FROM o JOIN (SELECT 1) FOR SYSTEM_TIME AS OF o.ts").is_err());
        assert!(rewrite_system_time("SELECT * FROM o JOIN r FOR SYSTEM_TIME AS OF 5").is_err());
    }
}
