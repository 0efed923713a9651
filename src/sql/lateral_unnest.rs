//! Flink's lateral UNNEST, `FROM orders CROSS JOIN UNNEST(orders.tags) AS t (tag)` (also
//! `FROM orders, UNNEST(tags) AS t (tag)`, and `LEFT JOIN UNNEST(..) AS t (tag) ON TRUE`), as
//! the select-list UNNEST that DataFusion plans in a batch query and Weir in a streaming one:
//!
//! ```sql
//! FROM (SELECT orders.*, UNNEST(orders.tags) AS tag FROM orders) AS orders
//! ```
//!
//! with `t.tag` read as `orders.tag`. DataFusion plans the lateral form as a correlated
//! subquery that it cannot run ("OuterReferenceColumn").
//!
//! Flink's rules (its `UNNEST` of an array): one row per element; a row whose array is NULL or
//! empty gives none with CROSS JOIN and one with a NULL element with LEFT JOIN ... ON TRUE
//! (`unnest_outer`). The element column is named by the alias's column list, else by the
//! alias (`AS t`: `t`, as Postgres), else `unnest`. `SELECT *` gives the left relation's columns
//! and then the element, as in Flink.
//!
//! With a column list of several names, a MAP (`UNNEST(m) AS t (k, v)`: its keys and values,
//! Flink's), an ARRAY of ROW (`UNNEST(items) AS t (sku, qty)`: its fields, Flink's), several
//! arrays (`UNNEST(a, b) AS t (x, y)`: zipped, Postgres's) or `WITH ORDINALITY` (a last column,
//! the position from 1: Postgres's and Flink's) unnest one array of ROWs that
//! [`crate::plan::functions::unnest_rows`] makes of them, whose fields become the columns:
//!
//! ```sql
//! FROM (SELECT o.* EXCLUDE (__weir_unnest), o.__weir_unnest['c1'] AS k, o.__weir_unnest['c2'] AS v
//!       FROM (SELECT o.*, UNNEST(weir_unnest_rows(2, false, o.m)) AS __weir_unnest FROM o) AS o) AS o
//! ```

use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, Ident, JoinConstraint, JoinOperator, Query, SetExpr, Statement, TableFactor, TableWithJoins, VisitMut, VisitorMut,
};

use crate::error::{Result, WeirError};

/// Rewrites every lateral UNNEST in `stmt` (see the module docs).
///
/// # Errors
/// `Unsupported` for `WITH OFFSET`, a lateral UNNEST after a join (its left side must be one
/// table, view or subquery), or an outer join other than `LEFT JOIN .. ON TRUE`; `Plan` for
/// several arrays or `WITH ORDINALITY` without a column list.
pub fn rewrite(stmt: &mut Statement) -> Result<()> {
    if !stmt.to_string().to_ascii_uppercase().contains("UNNEST") {
        return Ok(());
    }
    let mut visitor = Lateral { error: None };
    let _ = stmt.visit(&mut visitor);
    visitor.error.map_or(Ok(()), Err)
}

struct Lateral {
    error: Option<WeirError>,
}

impl VisitorMut for Lateral {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let SetExpr::Select(select) = query.body.as_mut() else { return ControlFlow::Continue(()) };
        let mut renames = Vec::new();
        if let Err(e) = rewrite_from(&mut select.from, &mut renames) {
            self.error = Some(e);
            return ControlFlow::Break(());
        }
        if !renames.is_empty() {
            let mut requalify = Requalify { renames, error: None };
            let _ = query.visit(&mut requalify);
            if let Some(e) = requalify.error {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}

/// A lateral UNNEST found in a FROM list: its arrays, alias and whether it keeps rows with no
/// element.
struct Unnest {
    arrays: Vec<Expr>,
    alias: Option<sqlparser::ast::TableAlias>,
    outer: bool,
    ordinality: bool,
}

/// An UNNEST's alias, read as the relation it was folded into.
struct Rename {
    /// The UNNEST's alias (`t`).
    alias: Ident,
    /// The relation's name (`orders`).
    relation: Ident,
    /// The UNNEST's columns (`tag`), the only ones `t.` may name.
    columns: Vec<Ident>,
}

/// Folds each lateral UNNEST of `from` into the relation on its left; `renames` gets each
/// UNNEST's alias.
fn rewrite_from(from: &mut Vec<TableWithJoins>, renames: &mut Vec<Rename>) -> Result<()> {
    // `FROM UNNEST(..) ..`: no relation on its left.
    if let Some(first) = from.first_mut() {
        if let Some(unnest) = as_unnest(&first.relation, false)? {
            standalone(&mut first.relation, unnest)?;
        }
    }
    let mut i = 0;
    while i < from.len() {
        // `FROM a, UNNEST(..)`: the next item of the list, alone.
        if i + 1 < from.len() && from[i + 1].joins.is_empty() {
            if let Some(unnest) = as_unnest(&from[i + 1].relation, false)? {
                if !from[i].joins.is_empty() {
                    return Err(after_a_join());
                }
                fold(&mut from[i].relation, unnest, renames)?;
                from.remove(i + 1);
                continue;
            }
        }
        // `FROM a CROSS JOIN UNNEST(..)`, `FROM a LEFT JOIN UNNEST(..) ON TRUE`.
        let joins = &mut from[i].joins;
        let mut j = 0;
        while j < joins.len() {
            let outer = match &joins[j].join_operator {
                JoinOperator::CrossJoin(JoinConstraint::None) => Some(false),
                JoinOperator::Left(c) | JoinOperator::LeftOuter(c) if is_on_true(c) => Some(true),
                _ => None,
            };
            let unnest = match outer {
                Some(outer) => as_unnest(&joins[j].relation, outer)?,
                None if matches!(joins[j].relation, TableFactor::UNNEST { .. }) => {
                    return Err(WeirError::unsupported(
                        "this join with UNNEST; use CROSS JOIN UNNEST(..) AS t (x), or LEFT JOIN UNNEST(..) AS t (x) ON TRUE",
                    ))
                }
                None => None,
            };
            if let Some(unnest) = unnest {
                if j > 0 {
                    return Err(after_a_join());
                }
                joins.remove(j);
                fold(&mut from[i].relation, unnest, renames)?;
                break;
            }
            j += 1;
        }
        if from[i].joins.iter().any(|j| matches!(j.relation, TableFactor::UNNEST { .. })) {
            continue;
        }
        i += 1;
    }
    Ok(())
}

fn after_a_join() -> WeirError {
    WeirError::unsupported(
        "a lateral UNNEST after a join; UNNEST in a subquery over one relation instead: \
         FROM (SELECT * FROM a CROSS JOIN UNNEST(a.xs) AS t (x)) AS a JOIN b ON ..",
    )
}

fn is_on_true(constraint: &JoinConstraint) -> bool {
    matches!(constraint, JoinConstraint::On(Expr::Value(v)) if v.value == sqlparser::ast::Value::Boolean(true))
}

/// `factor` as a lateral UNNEST, if it is one.
fn as_unnest(factor: &TableFactor, outer: bool) -> Result<Option<Unnest>> {
    let TableFactor::UNNEST { alias, array_exprs, with_offset, with_ordinality, .. } = factor else { return Ok(None) };
    if *with_offset {
        return Err(WeirError::unsupported("UNNEST .. WITH OFFSET; use WITH ORDINALITY (positions from 1)"));
    }
    if array_exprs.is_empty() {
        return Err(WeirError::plan("UNNEST() needs an array or a map"));
    }
    Ok(Some(Unnest { arrays: array_exprs.clone(), alias: alias.clone(), outer, ordinality: *with_ordinality }))
}

/// Makes `relation` the subquery that adds `unnest`'s element column to its rows, under the
/// relation's own name.
fn fold(relation: &mut TableFactor, unnest: Unnest, renames: &mut Vec<Rename>) -> Result<()> {
    let name = match relation {
        TableFactor::Table { alias: Some(a), .. } | TableFactor::Derived { alias: Some(a), .. } => a.name.clone(),
        TableFactor::Table { name, alias: None, .. } => match name.0.last().and_then(|p| p.as_ident()) {
            Some(ident) => ident.clone(),
            None => return Err(WeirError::unsupported("a lateral UNNEST beside this relation")),
        },
        _ => {
            return Err(WeirError::unsupported(
                "a lateral UNNEST beside this relation; give it a name: (SELECT ..) AS a CROSS JOIN UNNEST(a.xs) AS t (x)",
            ))
        }
    };
    let named: Vec<Ident> = unnest.alias.as_ref().map(|a| a.columns.iter().map(|c| c.name.clone()).collect()).unwrap_or_default();
    let function = if unnest.outer { "unnest_outer" } else { "UNNEST" };
    let arrays = unnest.arrays.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    let general = unnest.arrays.len() > 1 || unnest.ordinality || named.len() > 1;
    let (columns, text) = match general {
        // One array, one column: its elements.
        false => {
            let column = match &unnest.alias {
                Some(a) => named.first().cloned().unwrap_or_else(|| a.name.clone()),
                None => Ident::new("unnest"),
            };
            let text = format!("SELECT * FROM (SELECT {name}.*, {function}({arrays}) AS {column} FROM {relation}) AS {name}");
            (vec![column], text)
        }
        // The rows of `weir_unnest_rows`, each field a column.
        true => {
            check_names(&named)?;
            let fields = named.iter().enumerate().map(|(i, c)| format!("{name}.{ROWS}['c{}'] AS {c}", i + 1)).collect::<Vec<_>>();
            let text = format!(
                "SELECT * FROM (SELECT {name}.* EXCLUDE ({ROWS}), {} FROM (SELECT {name}.*, {function}({}) AS {ROWS} \
                 FROM {relation}) AS {name}) AS {name}",
                fields.join(", "),
                rows_call(&unnest, named.len()),
            );
            (named, text)
        }
    };
    if let Some(alias) = &unnest.alias {
        renames.push(Rename { alias: alias.name.clone(), relation: name.clone(), columns: columns.clone() });
    }
    *relation = derived(&text)?;
    Ok(())
}

/// A standalone UNNEST with several columns (`FROM UNNEST(a, b) WITH ORDINALITY AS t (x, y,
/// n)`), which DataFusion does not take, as the derived table of `weir_unnest_rows`' rows'
/// fields, named by its alias; any other UNNEST stays DataFusion's.
fn standalone(relation: &mut TableFactor, unnest: Unnest) -> Result<()> {
    let named: Vec<Ident> = unnest.alias.as_ref().map(|a| a.columns.iter().map(|c| c.name.clone()).collect()).unwrap_or_default();
    if !(unnest.arrays.len() > 1 || unnest.ordinality || named.len() > 1) {
        return Ok(());
    }
    check_names(&named)?;
    let alias = unnest.alias.as_ref().map_or_else(|| Ident::new("unnest"), |a| a.name.clone());
    let fields = named.iter().enumerate().map(|(i, c)| format!("{ROWS}['c{}'] AS {c}", i + 1)).collect::<Vec<_>>();
    let text = format!(
        "SELECT * FROM (SELECT {} FROM (SELECT UNNEST({}) AS {ROWS}) AS {ROWS}) AS {alias}",
        fields.join(", "),
        rows_call(&unnest, named.len())
    );
    *relation = derived(&text)?;
    Ok(())
}

/// The column names of an UNNEST that gives several columns: some, each once.
///
/// # Errors
/// `Plan` for none, `DuplicateColumn` (42701) for a name given twice.
fn check_names(named: &[Ident]) -> Result<()> {
    if named.is_empty() {
        return Err(WeirError::plan("UNNEST of several arrays or WITH ORDINALITY gives several columns: name them, AS t (a, b, ..)"));
    }
    match named.iter().enumerate().find_map(|(i, c)| named[..i].iter().any(|d| same_name(c, d)).then_some(c)) {
        Some(c) => Err(WeirError::new(crate::error::ErrorKind::DuplicateColumn(format!(
            "column \"{}\" specified more than once in UNNEST(..) AS t (..)",
            c.value
        )))),
        None => Ok(()),
    }
}

/// `weir_unnest_rows(n, ordinality, arrays..)` of `unnest` for `n` named columns.
fn rows_call(unnest: &Unnest, n: usize) -> String {
    let arrays = unnest.arrays.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    format!("{}({n}, {}, {arrays})", crate::plan::functions::unnest_rows::NAME, unnest.ordinality)
}

/// The derived table of `text`, `SELECT * FROM (..) AS name`.
fn derived(text: &str) -> Result<TableFactor> {
    let parsed = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::GenericDialect {}, text)
        .map_err(|e| WeirError::internal(format!("rewriting an UNNEST as {text}: {e}")))?;
    match parsed.into_iter().next() {
        Some(Statement::Query(q)) => match *q.body {
            SetExpr::Select(mut s) if s.from.len() == 1 => Ok(s.from.remove(0).relation),
            _ => Err(WeirError::internal(format!("rewriting an UNNEST as {text}"))),
        },
        _ => Err(WeirError::internal(format!("rewriting an UNNEST as {text}"))),
    }
}

/// The column of a lateral UNNEST's rows (`weir_unnest_rows`) in the subquery it becomes.
const ROWS: &str = "__weir_unnest";

/// Reads `alias.x` as `relation.x` for each UNNEST's alias; `alias.y` for a `y` other than
/// its columns is an error, as the UNNEST has no such column.
struct Requalify {
    renames: Vec<Rename>,
    error: Option<WeirError>,
}

impl VisitorMut for Requalify {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        match expr {
            // `t.x[1]`, `t.x.f`: the alias, then the column.
            Expr::CompoundFieldAccess { root, access_chain } => match (root.as_mut(), access_chain.first()) {
                (Expr::Identifier(first), Some(sqlparser::ast::AccessExpr::Dot(Expr::Identifier(second)))) => self.requalify(first, second),
                _ => ControlFlow::Continue(()),
            },
            Expr::CompoundIdentifier(parts) => match parts.as_mut_slice() {
                [first, second, ..] => self.requalify(first, &second.clone()),
                _ => ControlFlow::Continue(()),
            },
            _ => ControlFlow::Continue(()),
        }
    }
}

impl Requalify {
    /// `first.second` read as `relation.second` when `first` is an UNNEST's alias; an error
    /// (and a break) when `second` is none of its columns.
    fn requalify(&mut self, first: &mut Ident, second: &Ident) -> ControlFlow<()> {
        let Some(rename) = self.renames.iter().find(|r| same_name(&r.alias, first)) else { return ControlFlow::Continue(()) };
        if !rename.columns.iter().any(|c| same_name(c, second)) {
            let columns = rename.columns.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
            self.error = Some(WeirError::new(crate::error::ErrorKind::UnknownColumn(format!(
                "column {first}.{second} does not exist: UNNEST(..) AS {} ({columns}) has the columns {columns}",
                rename.alias
            ))));
            return ControlFlow::Break(());
        }
        *first = rename.relation.clone();
        ControlFlow::Continue(())
    }
}

/// Whether two identifiers name the same thing: quoted ones as written, others in any case.
fn same_name(a: &Ident, b: &Ident) -> bool {
    match (a.quote_style, b.quote_style) {
        (None, None) => a.value.eq_ignore_ascii_case(&b.value),
        _ => a.value == b.value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> String {
        let mut stmt = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::GenericDialect {}, sql).unwrap().remove(0);
        rewrite(&mut stmt).unwrap();
        stmt.to_string()
    }

    #[test]
    fn cross_join_comma_and_left_join_become_a_select_list_unnest() {
        assert_eq!(
            rewritten("SELECT o.id, t.tag FROM o CROSS JOIN UNNEST(o.tags) AS t (tag) WHERE t.tag <> 'x'"),
            "SELECT o.id, o.tag FROM (SELECT o.*, UNNEST(o.tags) AS tag FROM o) AS o WHERE o.tag <> 'x'"
        );
        assert_eq!(
            rewritten("SELECT id, tag FROM orders AS o, UNNEST(tags) AS t(tag)"),
            "SELECT id, tag FROM (SELECT o.*, UNNEST(tags) AS tag FROM orders AS o) AS o"
        );
        assert_eq!(
            rewritten("SELECT * FROM o LEFT JOIN UNNEST(o.tags) AS t ON TRUE"),
            "SELECT * FROM (SELECT o.*, unnest_outer(o.tags) AS t FROM o) AS o"
        );
        // Inside a subquery, and with a join after it.
        assert_eq!(
            rewritten("SELECT * FROM (SELECT id, x FROM s CROSS JOIN UNNEST(xs) AS u (x)) AS q JOIN r ON q.id = r.id"),
            "SELECT * FROM (SELECT id, x FROM (SELECT s.*, UNNEST(xs) AS x FROM s) AS s) AS q JOIN r ON q.id = r.id"
        );
    }

    #[test]
    fn several_columns_read_the_fields_of_one_array_of_rows() {
        assert_eq!(
            rewritten("SELECT o.id, t.k, v FROM o CROSS JOIN UNNEST(o.m) AS t (k, v)"),
            "SELECT o.id, o.k, v FROM (SELECT o.* EXCLUDE (__weir_unnest), o.__weir_unnest['c1'] AS k, \
             o.__weir_unnest['c2'] AS v FROM (SELECT o.*, UNNEST(weir_unnest_rows(2, false, o.m)) AS __weir_unnest FROM o) AS o) AS o"
        );
        assert_eq!(
            rewritten("SELECT * FROM o LEFT JOIN UNNEST(o.a, o.b) WITH ORDINALITY AS t (x, y, n) ON TRUE"),
            "SELECT * FROM (SELECT o.* EXCLUDE (__weir_unnest), o.__weir_unnest['c1'] AS x, o.__weir_unnest['c2'] AS y, \
             o.__weir_unnest['c3'] AS n FROM (SELECT o.*, unnest_outer(weir_unnest_rows(3, true, o.a, o.b)) AS __weir_unnest \
             FROM o) AS o) AS o"
        );
    }

    #[test]
    fn the_alias_names_only_the_element() {
        let mut stmt = sqlparser::parser::Parser::parse_sql(
            &sqlparser::dialect::GenericDialect {},
            "SELECT t.tag, t.id FROM o CROSS JOIN UNNEST(o.tags) AS t (tag)",
        )
        .unwrap()
        .remove(0);
        assert_eq!(rewrite(&mut stmt).unwrap_err().sqlstate(), "42703");
    }

    #[test]
    fn forms_it_cannot_fold_are_refused() {
        for sql in [
            "SELECT * FROM a JOIN b ON a.id = b.id CROSS JOIN UNNEST(b.xs) AS t (x)",
            "SELECT * FROM a RIGHT JOIN UNNEST(a.xs) AS t (x) ON TRUE",
            "SELECT * FROM a JOIN UNNEST(a.xs) AS t (x) ON t.x > 1",
        ] {
            let mut stmt = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::GenericDialect {}, sql).unwrap().remove(0);
            let error = rewrite(&mut stmt).unwrap_err();
            assert_eq!(error.sqlstate(), "0A000", "{sql}: {error}");
        }
    }
}
