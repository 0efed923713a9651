//! Flink's group window aggregation (its legacy syntax, deprecated in favour of the window TVFs
//! but still taken by Flink 1.x and 2.x, and in many tutorials), planned as the window TVF
//! aggregation it equals:
//!
//! ```sql
//! SELECT user, TUMBLE_START(ts, INTERVAL '1' HOUR) AS w, COUNT(*)
//! FROM clicks GROUP BY user, TUMBLE(ts, INTERVAL '1' HOUR)
//! -- is planned as
//! SELECT user, window_start AS w, COUNT(*)
//! FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' HOUR)) AS clicks
//! GROUP BY user, window_start, window_end
//! ```
//!
//! - `TUMBLE(t, size)`, `HOP(t, slide, size)` and `SESSION(t, gap)` in `GROUP BY` (one per
//!   query, as Flink allows), over one table or view in `FROM`.
//! - `*_START` is `window_start`, `*_END` `window_end` and `*_ROWTIME` / `*_PROCTIME`
//!   `window_time` (Flink: the window's end minus 1 ms, a time attribute), in the select list
//!   and `HAVING`; the prefix must be the group window's.
//! - A SESSION group window is a session per group, as Flink's: the other `GROUP BY` columns
//!   are its `PARTITION BY`.
//!
//! The window's rules are the TVF's (SQL.md: a view shows a window's row as it grows; an
//! `INSERT INTO` an append-only sink emits it once, when the watermark closes it, which is what
//! Flink's group windows always do).

use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, Ident, Query, Select, SetExpr, Statement, TableFactor,
    VisitMut, VisitorMut,
};

use crate::error::{Result, WeirError};

/// The group window functions and their TVF names.
const WINDOWS: [&str; 3] = ["tumble", "hop", "session"];

/// Rewrites every query block of `stmt` that groups by a group window (module docs).
///
/// # Errors
/// `Plan` for a group window over something other than one table or view, for two of them,
/// for an auxiliary function of another window or without one, for a SESSION grouped by an
/// expression other than a column.
pub fn rewrite(stmt: &mut Statement) -> Result<()> {
    let mut rewriter = GroupWindows { error: None };
    let _ = stmt.visit(&mut rewriter);
    rewriter.error.map_or(Ok(()), Err)
}

/// Whether `text` may hold a group window (the cheap test before parsing).
pub fn may_apply(upper: &str) -> bool {
    WINDOWS.iter().any(|w| upper.contains(&w.to_ascii_uppercase()))
}

struct GroupWindows {
    error: Option<WeirError>,
}

impl VisitorMut for GroupWindows {
    type Break = ();

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let rewritten = in_set_expr(&mut query.body).and_then(|window| match (window, &mut query.order_by) {
            // `ORDER BY TUMBLE_START(..)` of a query block that groups by the window.
            (Some(kind), Some(order_by)) => {
                let mut error = None;
                let _ = sqlparser::ast::visit_expressions_mut(order_by, |e: &mut Expr| {
                    replace_auxiliary(e, &kind, &mut error, &mut false);
                    ControlFlow::<()>::Continue(())
                });
                error.map_or(Ok(()), Err)
            }
            _ => Ok(()),
        });
        match rewritten {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}

/// Rewrites the query blocks of `body`; the group window of a lone block that has one.
fn in_set_expr(body: &mut SetExpr) -> Result<Option<GroupWindow>> {
    match body {
        SetExpr::Select(select) => in_select(select),
        SetExpr::SetOperation { left, right, .. } => {
            in_set_expr(left)?;
            in_set_expr(right)?;
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// A group window call: its kind (`tumble`, `hop`, `session`) and arguments.
#[derive(Debug, Clone, PartialEq)]
struct GroupWindow {
    kind: &'static str,
    time: String,
    intervals: Vec<String>,
}

/// `e` as a group window call, if it is one.
fn group_window(e: &Expr) -> Option<Result<GroupWindow>> {
    let Expr::Function(f) = e else { return None };
    let name = f.name.0.last()?.as_ident()?.value.to_ascii_lowercase();
    let kind = *WINDOWS.iter().find(|w| **w == name)?;
    let args = match &f.args {
        FunctionArguments::List(list) => &list.args,
        _ => return None,
    };
    let exprs: Vec<&Expr> = args
        .iter()
        .filter_map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
            _ => None,
        })
        .collect();
    let wanted = if kind == "hop" { 3 } else { 2 };
    let upper = kind.to_ascii_uppercase();
    if exprs.len() != args.len() || exprs.len() != wanted {
        let shape = if kind == "hop" { "HOP(time_attr, slide, size)" } else { &format!("{upper}(time_attr, interval)") };
        return Some(Err(WeirError::plan(format!("the group window {upper} in GROUP BY takes {shape}"))));
    }
    let Some(time) = column_name(exprs[0]) else {
        return Some(Err(WeirError::plan(format!(
            "the group window {upper} needs a time attribute column as its first argument, got {}",
            exprs[0]
        ))));
    };
    Some(Ok(GroupWindow { kind, time, intervals: exprs[1..].iter().map(|e| e.to_string()).collect() }))
}

/// The column `e` names (its last part), if it is a column.
fn column_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Identifier(i) => Some(crate::sql::parser::ident(i)),
        Expr::CompoundIdentifier(parts) => parts.last().map(crate::sql::parser::ident),
        _ => None,
    }
}

fn in_select(select: &mut Select) -> Result<Option<GroupWindow>> {
    let GroupByExpr::Expressions(keys, _) = &mut select.group_by else { return Ok(None) };
    let mut windows = keys.iter().enumerate().filter_map(|(i, k)| group_window(k).map(|w| (i, w)));
    let Some((at, window)) = windows.next() else {
        return refuse_orphan_auxiliaries(select).map(|()| None);
    };
    let window = window?;
    if windows.next().is_some() {
        return Err(WeirError::plan("a query groups by one group window (TUMBLE, HOP or SESSION) at most"));
    }
    let upper = window.kind.to_ascii_uppercase();
    let others: Vec<Expr> = keys.iter().enumerate().filter(|(i, _)| *i != at).map(|(_, k)| k.clone()).collect();
    keys.splice(at..=at, [Expr::Identifier(Ident::new("window_start")), Expr::Identifier(Ident::new("window_end"))]);

    // The one table or view the window reads.
    let refused = || {
        WeirError::plan(format!(
            "the group window {upper}(..) in GROUP BY reads one table or view in FROM; for a join or a subquery, create \
             a view of it and group by the window over the view"
        ))
    };
    let [from] = select.from.as_mut_slice() else { return Err(refused()) };
    if !from.joins.is_empty() {
        return Err(refused());
    }
    let TableFactor::Table { name, alias, args: None, .. } = &from.relation else { return Err(refused()) };
    let table = name.0.last().and_then(|p| p.as_ident()).map(crate::sql::parser::ident).ok_or_else(refused)?;
    let alias = match alias {
        Some(a) if a.columns.is_empty() => a.name.clone(),
        Some(_) => return Err(refused()),
        None => Ident::new(&table),
    };
    let mut call = vec![quoted(&table), quoted(&window.time)];
    call.extend(window.intervals.iter().cloned());
    if window.kind == "session" && select.selection.is_some() {
        // Flink filters the rows before it merges them into sessions; the TVF's sessions are
        // merged before a WHERE over them.
        return Err(WeirError::plan(format!(
            "a SESSION group window over a WHERE: create a view of {table}'s rows the WHERE keeps and group by SESSION(..) \
             over the view (a filtered-out row would still join two sessions here)"
        )));
    }
    if window.kind == "session" {
        // Flink's group SESSION window is a session per group: the other keys partition it.
        let columns = others
            .iter()
            .map(|k| {
                column_name(k).ok_or_else(|| {
                    WeirError::plan(format!(
                        "a SESSION group window partitions its sessions by the other GROUP BY keys, which must be columns; \
                         {k} is not (compute it in a view first)"
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if !columns.is_empty() {
            call.push(quoted(&columns.join(",")));
        }
    }
    let text = format!("SELECT * FROM {}({}) AS {alias}", window.kind, call.join(", "));
    let parsed = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::GenericDialect {}, &text)
        .map_err(|e| WeirError::internal(format!("the group window's TVF does not parse: {e}")))?;
    let relation = match parsed.into_iter().next() {
        Some(Statement::Query(q)) => match *q.body {
            SetExpr::Select(s) => s.from.into_iter().next().map(|f| f.relation),
            _ => None,
        },
        _ => None,
    };
    from.relation = relation.ok_or_else(|| WeirError::internal("the group window's TVF has no relation"))?;

    // The auxiliary functions: the window's columns.
    let mut error = None;
    let mut reads_time = false;
    let mut replace = |e: &mut Expr| {
        replace_auxiliary(e, &window, &mut error, &mut reads_time);
        ControlFlow::<()>::Continue(())
    };
    for item in &mut select.projection {
        let _ = sqlparser::ast::visit_expressions_mut(item, &mut replace);
    }
    if let Some(having) = &mut select.having {
        let _ = sqlparser::ast::visit_expressions_mut(having, &mut replace);
    }
    if let Some(e) = error {
        return Err(e);
    }
    // `*_ROWTIME` (a time attribute for a window over this one, as in Flink's cascading
    // group windows) is a key too, as the TVF aggregation groups by it.
    if reads_time {
        if let GroupByExpr::Expressions(keys, _) = &mut select.group_by {
            keys.insert(at + 2, Expr::Identifier(Ident::new("window_time")));
        }
    }
    Ok(Some(window))
}

/// `e`, if it is an auxiliary function of a group window of `kind`, as the window's column;
/// one of another kind is an `error`. Sets `reads_time` for `*_ROWTIME` and `*_PROCTIME`.
fn replace_auxiliary(e: &mut Expr, window: &GroupWindow, error: &mut Option<WeirError>, reads_time: &mut bool) {
    let Some((prefix, column)) = auxiliary(e) else { return };
    *reads_time |= column == "window_time";
    // Calcite's rule: the auxiliary function repeats the group window's call.
    if named_window(e, prefix).as_ref() != Some(window) {
        error.get_or_insert_with(|| {
            WeirError::plan(format!(
                "Call to auxiliary group function '{}_{}' must have matching call to group function '{}' in GROUP BY \
                 clause: {}({}, {})",
                prefix.to_ascii_uppercase(),
                auxiliary_suffix(column),
                prefix.to_ascii_uppercase(),
                window.kind.to_ascii_uppercase(),
                window.time,
                window.intervals.join(", ")
            ))
        });
    }
    *e = Expr::Identifier(Ident::new(column));
}

/// `TUMBLE_START(..)` and kin without a group window in GROUP BY: Flink's message.
fn refuse_orphan_auxiliaries(select: &mut Select) -> Result<()> {
    let mut found = None;
    for item in &mut select.projection {
        let _ = sqlparser::ast::visit_expressions_mut(item, |e: &mut Expr| {
            if let Some((prefix, column)) = auxiliary(e) {
                found.get_or_insert((prefix, column));
            }
            ControlFlow::<()>::Continue(())
        });
    }
    match found {
        Some((prefix, column)) => Err(WeirError::plan(format!(
            "{}_{}(..) needs the group window {}(..) in GROUP BY",
            prefix.to_ascii_uppercase(),
            auxiliary_suffix(column),
            prefix.to_ascii_uppercase()
        ))),
        None => Ok(()),
    }
}

/// `e` as an auxiliary group window function: the window's kind and the TVF column it reads.
fn auxiliary(e: &Expr) -> Option<(&'static str, &'static str)> {
    let Expr::Function(f) = e else { return None };
    let name = f.name.0.last()?.as_ident()?.value.to_ascii_lowercase();
    let (prefix, suffix) = name.split_once('_')?;
    let kind = *WINDOWS.iter().find(|w| **w == prefix)?;
    let column = match suffix {
        "start" => "window_start",
        "end" => "window_end",
        "rowtime" | "proctime" => "window_time",
        _ => return None,
    };
    Some((kind, column))
}

/// The group window an auxiliary function call `e` names by its arguments (`TUMBLE_START(ts,
/// INTERVAL '1' HOUR)` names `TUMBLE(ts, INTERVAL '1' HOUR)`).
fn named_window(e: &Expr, kind: &'static str) -> Option<GroupWindow> {
    let Expr::Function(f) = e else { return None };
    let FunctionArguments::List(list) = &f.args else { return None };
    let mut exprs = list.args.iter().map(|a| match a {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
        _ => None,
    });
    let time = column_name(exprs.next()??)?;
    let intervals = exprs.map(|e| e.map(|e| e.to_string())).collect::<Option<Vec<_>>>()?;
    Some(GroupWindow { kind, time, intervals })
}

/// The suffix an auxiliary function of `column` has (for messages).
fn auxiliary_suffix(column: &str) -> &'static str {
    match column {
        "window_start" => "START",
        "window_end" => "END",
        _ => "ROWTIME",
    }
}

/// `s` as a string literal.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}
