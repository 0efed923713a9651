//! Rewrites of a parsed query that DataFusion would plan otherwise than Flink, applied wherever a
//! query is planned: a batch statement ([`crate::sql::pg_compat::rewrite`]), a view's or job's
//! query when it is created and when it replans, an `INSERT`'s query.
//!
//! - Flink's lateral `UNNEST` ([`crate::sql::lateral_unnest`]).
//! - Flink's group windows, `GROUP BY TUMBLE(ts, size)` and kin, as window TVF aggregations
//!   ([`crate::sql::group_windows`]).
//! - Flink's `JSON_OBJECT(k VALUE v, .. [NULL | ABSENT ON NULL])` and `JSON_ARRAY(v, ..
//!   [NULL | ABSENT ON NULL])` as calls of `weir_json_object` and `weir_json_array`
//!   ([`crate::plan::functions`], `json_construct.rs`): the null clause and which values are
//!   nested constructors (inserted as JSON) become their two first arguments. (`KEY` before a
//!   key is dropped before parsing: [`crate::sql::json_clauses::strip_json_object_keys`].)
//! - `CAST(x AS VARCHAR(n))` (and `CHARACTER VARYING(n)`) keeps the first `n` characters, and
//!   `CAST(x AS CHAR(n))` pads with spaces to `n` or cuts to it, as Flink (since 1.15) and
//!   Postgres do; DataFusion's string type has no length, and its cast ignored it.
//! - Flink's `ARRAY_SORT(array, ascending [, nulls_first])` with BOOLEAN literals as
//!   DataFusion's `array_sort(array, 'ASC' | 'DESC', 'NULLS FIRST' | 'NULLS LAST')`; NULLs
//!   first when ascending and last when descending unless `nulls_first` says (Flink's
//!   `ArraySortFunction`). `ARRAY_SLICE(array, start)` (Flink's: to the end) as
//!   `array_slice(array, start, -1)`, and a literal end of 0 as 1 (Flink's `ArraySliceFunction`).
//! - `x op ANY(array)` (and `SOME`) with Postgres's NULLs: true when some element compares
//!   true; else false for an empty array; else NULL when an element or `x` is NULL; else
//!   false. DataFusion's reads only the non-NULL elements (`2 = ANY(ARRAY[1, NULL])` was false).

use std::ops::ControlFlow;

use sqlparser::ast::{
    CharacterLength, DataType, Expr, FunctionArg, FunctionArgExpr, FunctionArgOperator, FunctionArgumentClause, FunctionArguments,
    JsonNullClause, Statement, VisitMut, VisitorMut,
};

use crate::error::{Result, WeirError};

/// Applies every rewrite of this module to `stmt`.
///
/// # Errors
/// [`crate::sql::lateral_unnest::rewrite`]'s.
pub fn rewrite(stmt: &mut Statement) -> Result<()> {
    crate::sql::lateral_unnest::rewrite(stmt)?;
    crate::sql::group_windows::rewrite(stmt)?;
    let _ = stmt.visit(&mut SizedStringCasts);
    let _ = stmt.visit(&mut ArrayArguments);
    let _ = stmt.visit(&mut AnyWithNulls);
    let mut json = JsonConstructors { error: None };
    let _ = stmt.visit(&mut json);
    json.error.map_or(Ok(()), Err)
}

/// [`rewrite`] of a query's text: the text itself when nothing changes (or it does not parse
/// here: the planner then says why).
///
/// # Errors
/// As [`rewrite`].
pub fn rewrite_text(query: &str) -> Result<String> {
    let upper = query.to_ascii_uppercase();
    let rewritten = ["UNNEST", "CHAR", "JSON_", "ARRAY_S", "ANY", "SOME"];
    if !rewritten.iter().any(|w| upper.contains(w)) && !crate::sql::group_windows::may_apply(&upper) {
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

/// `x op ANY(array)` with Postgres's NULLs (module docs), as a CASE around DataFusion's: not a
/// subquery's (DataFusion's has them), a parameter's or a string's (`'{1,2}'`, which
/// [`crate::sql::pg_compat`] reads as an array later).
struct AnyWithNulls;

impl VisitorMut for AnyWithNulls {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        with_postgres_nulls(expr);
        ControlFlow::Continue(())
    }
}

/// `expr`, when it is `x op ANY(array)` of an array expression, with Postgres's NULLs (module
/// docs); [`crate::sql::pg_compat`] calls it for a string array it has read (`'{1,NULL}'`).
pub fn with_postgres_nulls(expr: &mut Expr) {
    let Expr::AnyOp { left, right, .. } = &*expr else { return };
    if matches!(right.as_ref(), Expr::Subquery(_) | Expr::Value(_)) {
        return;
    }
    let text = format!(
        "CASE WHEN {expr} THEN TRUE WHEN cardinality({right}) = 0 THEN FALSE \
         WHEN ({left}) IS NULL OR array_contains({right}, NULL) THEN NULL ELSE {expr} END"
    );
    let parsed = sqlparser::parser::Parser::new(&sqlparser::dialect::GenericDialect {}).try_with_sql(&text).and_then(|mut p| p.parse_expr());
    if let Ok(case) = parsed {
        *expr = case;
    }
}

/// Marks each `FIRST_VALUE(x)` and `LAST_VALUE(x)` aggregate call (not a window function's,
/// and not one that names its null treatment) `IGNORE NULLS`: Flink's aggregates skip NULLs
/// (`FirstValueAggFunction`: the first non-NULL value), DataFusion's take the first row's.
/// A GROUP BY of such calls is then a group aggregate's FIRST_VALUE/LAST_VALUE
/// ([`crate::runtime::operators::group_agg`]), where without the mark a GROUP BY of only
/// `first_value` calls would be planned as `SELECT DISTINCT ON`'s (the first row per group).
///
/// Applied when a view, job or batch query is created, and stored with it, not when a stored
/// one replans: a view created before keeps its plan and state.
pub fn first_last_value_ignore_nulls(query: &mut sqlparser::ast::Query) {
    struct IgnoreNulls;
    impl VisitorMut for IgnoreNulls {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            let Expr::Function(f) = expr else { return ControlFlow::Continue(()) };
            let name = f.name.0.last().and_then(|p| p.as_ident()).map(|i| i.value.to_ascii_lowercase());
            let named_treatment = match &f.args {
                FunctionArguments::List(list) => {
                    list.clauses.iter().any(|c| matches!(c, FunctionArgumentClause::IgnoreOrRespectNulls(_)))
                }
                _ => false,
            };
            if matches!(name.as_deref(), Some("first_value" | "last_value"))
                && f.over.is_none()
                && f.null_treatment.is_none()
                && !named_treatment
            {
                f.null_treatment = Some(sqlparser::ast::NullTreatment::IgnoreNulls);
            }
            ControlFlow::Continue(())
        }
    }
    let _ = query.visit(&mut IgnoreNulls);
}

/// Flink's arguments of `ARRAY_SORT` and `ARRAY_SLICE` as DataFusion's (module docs).
struct ArrayArguments;

impl VisitorMut for ArrayArguments {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Function(f) = expr else { return ControlFlow::Continue(()) };
        let name = f.name.0.last().and_then(|p| p.as_ident()).map(|i| i.value.to_ascii_lowercase());
        let FunctionArguments::List(list) = &mut f.args else { return ControlFlow::Continue(()) };
        let literal = |text: &str| FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(sqlparser::ast::Value::SingleQuotedString(text.into()).into())));
        let boolean = |arg: &FunctionArg| match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v))) => match v.value {
                sqlparser::ast::Value::Boolean(b) => Some(b),
                _ => None,
            },
            _ => None,
        };
        match (name.as_deref(), list.args.len()) {
            (Some("array_sort" | "list_sort"), 2 | 3) => {
                let Some(ascending) = boolean(&list.args[1]) else { return ControlFlow::Continue(()) };
                let nulls_first = match list.args.get(2) {
                    Some(arg) => match boolean(arg) {
                        Some(b) => b,
                        None => return ControlFlow::Continue(()),
                    },
                    None => ascending,
                };
                list.args.truncate(1);
                list.args.push(literal(if ascending { "ASC" } else { "DESC" }));
                list.args.push(literal(if nulls_first { "NULLS FIRST" } else { "NULLS LAST" }));
            }
            // Flink reads an end of 0 as the first element (ArraySliceFunction: `end == 0 ? 1`).
            (Some("array_slice" | "list_slice"), 3) => {
                if let FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v))) = &mut list.args[2] {
                    if v.value == sqlparser::ast::Value::Number("0".into(), false) {
                        v.value = sqlparser::ast::Value::Number("1".into(), false);
                    }
                }
            }
            (Some("array_slice" | "list_slice"), 2) => {
                let minus_one = sqlparser::parser::Parser::new(&sqlparser::dialect::GenericDialect {})
                    .try_with_sql("-1")
                    .and_then(|mut p| p.parse_expr());
                if let Ok(minus_one) = minus_one {
                    list.args.push(FunctionArg::Unnamed(FunctionArgExpr::Expr(minus_one)));
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
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

/// `JSON_OBJECT(..)` and `JSON_ARRAY(..)` as `weir_json_object(mode, kinds, ..)` and
/// `weir_json_array(mode, kinds, ..)` (inner calls first, so an outer one sees them rewritten).
struct JsonConstructors {
    error: Option<WeirError>,
}

impl VisitorMut for JsonConstructors {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Function(f) = expr else { return ControlFlow::Continue(()) };
        let name = f.name.to_string().to_ascii_lowercase();
        let object = match name.as_str() {
            "json_object" => true,
            "json_array" => false,
            _ => return ControlFlow::Continue(()),
        };
        match json_call(object, &f.args) {
            Ok(rewritten) => *expr = rewritten,
            Err(e) => {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}

/// Whether `expr` is a JSON constructor's call, rewritten.
fn is_json_constructor(expr: &Expr) -> bool {
    matches!(expr, Expr::Function(f) if matches!(f.name.to_string().to_ascii_lowercase().as_str(), "weir_json_object" | "weir_json_array"))
}

/// The `weir_json_*` call of a `JSON_OBJECT` (`object`) or `JSON_ARRAY` with `args`.
fn json_call(object: bool, args: &FunctionArguments) -> Result<Expr> {
    let usage = if object { "JSON_OBJECT([KEY] k VALUE v, ..)" } else { "JSON_ARRAY(v, ..)" };
    let (args, clauses) = match args {
        FunctionArguments::List(list) => (list.args.as_slice(), list.clauses.as_slice()),
        FunctionArguments::None => (&[][..], &[][..]),
        FunctionArguments::Subquery(_) => return Err(WeirError::unsupported(format!("{usage} of a subquery"))),
    };
    let mut absent = !object;
    for clause in clauses {
        match clause {
            FunctionArgumentClause::JsonNullClause(JsonNullClause::NullOnNull) => absent = false,
            FunctionArgumentClause::JsonNullClause(JsonNullClause::AbsentOnNull) => absent = true,
            other => return Err(WeirError::unsupported(format!("{usage}: the clause {other}"))),
        }
    }
    let mut kinds = String::new();
    let mut parts = Vec::new();
    for arg in args {
        let (key, value) = match arg {
            FunctionArg::ExprNamed { name, arg: FunctionArgExpr::Expr(v), operator: FunctionArgOperator::Value } if object => {
                (Some(name.to_string()), v)
            }
            FunctionArg::Named { name, arg: FunctionArgExpr::Expr(v), operator: FunctionArgOperator::Value } if object => {
                (Some(name.to_string()), v)
            }
            FunctionArg::Unnamed(FunctionArgExpr::Expr(v)) if !object => (None, v),
            other => return Err(WeirError::unsupported(format!("{usage}: the argument {other}"))),
        };
        kinds.push(if is_json_constructor(value) { 'R' } else { 'V' });
        parts.extend(key);
        parts.push(value.to_string());
    }
    let function = if object { "weir_json_object" } else { "weir_json_array" };
    let mode = if absent { "ABSENT" } else { "NULL" };
    let text = format!("{function}('{mode}', '{kinds}'{})", parts.iter().map(|p| format!(", {p}")).collect::<String>());
    sqlparser::parser::Parser::new(&sqlparser::dialect::GenericDialect {})
        .try_with_sql(&text)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| WeirError::internal(format!("rewriting {usage} as {text}: {e}")))
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

    #[test]
    fn json_constructors_take_their_clauses_as_arguments() {
        let text = |sql: &str| rewrite_text(sql).unwrap();
        assert_eq!(
            text("SELECT JSON_OBJECT('a' VALUE 1, 'b' VALUE JSON_ARRAY(x, y NULL ON NULL) ABSENT ON NULL)"),
            "SELECT weir_json_object('ABSENT', 'VR', 'a', 1, 'b', weir_json_array('NULL', 'VV', x, y))"
        );
        assert_eq!(text("SELECT JSON_ARRAY()"), "SELECT weir_json_array('ABSENT', '')");
        assert!(rewrite_text("SELECT JSON_OBJECT('a', 1)").is_err());
    }
}
