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
//! - Flink's function semantics where DataFusion follows Postgres: `REGEXP_REPLACE(s, regex,
//!   replacement)` replaces every match (DataFusion's, without its `'g'` flag, the first);
//!   `SUBSTRING` / `SUBSTR` as `weir_substring` (Flink's positions);
//!   `EXTRACT(DOW FROM t)` is 1 (Sunday) to 7, as `DAYOFWEEK` (Postgres's `date_part('dow',
//!   ..)` keeps 0 to 6).
//! - Flink's (the SQL standard's) interval literals of two fields, `INTERVAL '1:30' HOUR TO
//!   MINUTE`, `'2-3' YEAR TO MONTH`, `'1 12:00:00.5' DAY TO SECOND`, as the single-field
//!   literal they equal (`INTERVAL '5400' SECOND`), which DataFusion plans.
//! - `x op ANY(array)` (and `SOME`) with Postgres's NULLs: true when some element compares
//!   true; else false for an empty array; else NULL when an element or `x` is NULL; else
//!   false. DataFusion's reads only the non-NULL elements (`2 = ANY(ARRAY[1, NULL])` was false).

use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, CharacterLength, DataType, Expr, FunctionArg, FunctionArgExpr, FunctionArgOperator, FunctionArgumentClause, FunctionArguments,
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
    let mut flink = FlinkExpressions { error: None };
    let _ = stmt.visit(&mut flink);
    if let Some(e) = flink.error {
        return Err(e);
    }
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
    let rewritten = ["UNNEST", "CHAR", "JSON_", "ARRAY_S", "ANY", "SOME", "REGEXP_REPLACE", "DOW", " TO ", "SUBSTR"];
    let scaled_interval = upper.contains("INTERVAL") && (upper.contains('*') || upper.contains('/'));
    let postgres_operators = upper.contains("SIMILAR") || upper.contains('^') || upper.contains("TIME ZONE");
    if !rewritten.iter().any(|w| upper.contains(w)) && !scaled_interval && !postgres_operators && !crate::sql::group_windows::may_apply(&upper) {
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

/// `EXTRACT(DOW ..)`, `SUBSTRING(..)` and two-field interval literals as Flink reads them
/// (module docs).
struct FlinkExpressions {
    error: Option<WeirError>,
}

impl VisitorMut for FlinkExpressions {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        use sqlparser::ast::DateTimeField;
        match expr {
            Expr::Extract { field: DateTimeField::Dow, expr: of, .. } => {
                let call = format!("DAYOFWEEK({of})");
                if let Some(parsed) = parsed_expr(&call) {
                    *expr = parsed;
                }
            }
            // DataFusion plans the SUBSTRING syntax (also `substr(..)`) with its own function:
            // Flink's is `weir_substring` (`crate::plan::functions`, `flink_strings.rs`).
            Expr::Substring { expr: of, substring_from: Some(from), substring_for, .. } => {
                let call = match substring_for {
                    Some(len) => format!("weir_substring({of}, {from}, {len})"),
                    None => format!("weir_substring({of}, {from})"),
                };
                if let Some(parsed) = parsed_expr(&call) {
                    *expr = parsed;
                }
            }
            // An interval literal times or divided by a number literal (Postgres and Calcite
            // scale intervals; DataFusion has no such operator): the literal of the product.
            Expr::BinaryOp { left, op: op @ (BinaryOperator::Multiply | BinaryOperator::Divide), right } => {
                let divide = *op == BinaryOperator::Divide;
                let scaled = match (left.as_ref(), right.as_ref()) {
                    (Expr::Interval(i), n) => scaled_interval(i, n, divide),
                    (n, Expr::Interval(i)) if !divide => scaled_interval(i, n, false),
                    _ => None,
                };
                if let Some(scaled) = scaled {
                    *expr = scaled;
                }
            }
            // Postgres's AT TIME ZONE (DataFusion's relabels a timestamp's zone instead).
            Expr::AtTimeZone { timestamp, time_zone } => {
                let call = format!("weir_at_time_zone({timestamp}, {time_zone})");
                if let Some(parsed) = parsed_expr(&call) {
                    *expr = parsed;
                }
            }
            // Postgres's `^` is the power (its XOR is `#`); Flink has no `^`.
            Expr::BinaryOp { left, op: BinaryOperator::BitwiseXor, right } => {
                let call = format!("power({left}, {right})");
                if let Some(parsed) = parsed_expr(&call) {
                    *expr = parsed;
                }
            }
            // DataFusion matches SIMILAR TO's pattern as a POSIX regular expression; SQL's
            // (Postgres's and Flink's) has `%` and `_` and matches the whole value.
            Expr::SimilarTo { negated, expr: of, pattern, escape_char } => {
                let Expr::Value(v) = pattern.as_ref() else { return ControlFlow::Continue(()) };
                let sqlparser::ast::Value::SingleQuotedString(text) = &v.value else { return ControlFlow::Continue(()) };
                let escape = match escape_char.as_ref().map(|e| &e.value) {
                    None => Some('\\'),
                    Some(sqlparser::ast::Value::SingleQuotedString(e)) if e.is_empty() => None,
                    Some(sqlparser::ast::Value::SingleQuotedString(e)) if e.chars().count() == 1 => e.chars().next(),
                    _ => return ControlFlow::Continue(()),
                };
                let regex = similar_to_regex(text, escape).replace('\'', "''");
                let call = format!("{}regexp_like({of}, '{regex}')", if *negated { "NOT " } else { "" });
                if let Some(parsed) = parsed_expr(&call) {
                    *expr = parsed;
                }
            }
            Expr::Interval(interval) if interval.last_field.is_some() => match single_field_interval(interval) {
                Ok(Some(single)) => *expr = single,
                Ok(None) => {}
                Err(e) => {
                    self.error = Some(e);
                    return ControlFlow::Break(());
                }
            },
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// `text` parsed as an expression; `None` when it does not parse (the rewrite is then left out
/// and the planner says what is wrong with the original).
fn parsed_expr(text: &str) -> Option<Expr> {
    sqlparser::parser::Parser::new(&sqlparser::dialect::GenericDialect {}).try_with_sql(text).and_then(|mut p| p.parse_expr()).ok()
}

/// The regular expression (Rust's `regex`, as DataFusion runs it) of SQL's SIMILAR TO
/// pattern `pattern` (Postgres's `similar_escape`): `%` any text, `_` any character, `|`, `*`,
/// `+`, `?`, `{..}`, `(..)` and `[..]` as in regular expressions, `escape` before a character
/// for that character itself, anything else itself; the whole value must match.
fn similar_to_regex(pattern: &str, escape: Option<char>) -> String {
    let mut out = String::from("^(?:");
    let mut chars = pattern.chars();
    let mut in_brackets = false;
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            if let Some(next) = chars.next() {
                out.push_str(&regex_literal(next));
            }
            continue;
        }
        match c {
            _ if in_brackets => {
                if c == ']' {
                    in_brackets = false;
                }
                out.push(c);
            }
            '[' => {
                in_brackets = true;
                out.push(c);
            }
            '%' => out.push_str(".*"),
            '_' => out.push('.'),
            '|' | '*' | '+' | '?' | '{' | '}' | '(' | ')' => out.push(c),
            _ => out.push_str(&regex_literal(c)),
        }
    }
    out.push_str(")$");
    out
}

/// `c` matching itself in a regular expression.
fn regex_literal(c: char) -> String {
    if c.is_ascii_punctuation() {
        format!("\\{c}")
    } else {
        c.to_string()
    }
}

/// `interval` (a single-field literal: `INTERVAL '1' DAY`) times `factor` (a number literal,
/// maybe negative), or divided by it: the literal of the result as months, days and seconds
/// (`INTERVAL '1' DAY * 1.5` is `INTERVAL '1 days 43200.000000 seconds'`, which prints `1 day
/// 12:00:00`, as Postgres computes it). `None` for anything else, or a division by zero
/// (DataFusion says why).
fn scaled_interval(interval: &sqlparser::ast::Interval, factor: &Expr, divide: bool) -> Option<Expr> {
    if interval.last_field.is_some() || interval.leading_field.is_none() {
        return None;
    }
    let Expr::Value(v) = interval.value.as_ref() else { return None };
    let sqlparser::ast::Value::SingleQuotedString(text) = &v.value else { return None };
    fn number(e: &Expr) -> Option<f64> {
        match e {
            Expr::Value(v) => match &v.value {
                sqlparser::ast::Value::Number(n, _) => n.parse().ok(),
                _ => None,
            },
            Expr::UnaryOp { op: sqlparser::ast::UnaryOperator::Minus, expr } => number(expr).map(|n| -n),
            Expr::Nested(inner) => number(inner),
            _ => None,
        }
    }
    let factor = number(factor)?;
    let value: f64 = text.trim().parse().ok()?;
    if divide && factor == 0.0 {
        return None;
    }
    let scaled = if divide { value / factor } else { value * factor };
    if !scaled.is_finite() {
        return None;
    }
    let mut out = interval.clone();
    // Postgres's spill of a fraction into the next smaller units (a month is 30 days, a day
    // 24 hours), to microseconds.
    use sqlparser::ast::DateTimeField::{Day, Hour, Minute, Month, Second, Year};
    let (months, days, seconds) = match out.leading_field.as_ref()? {
        Year => (scaled * 12.0, 0.0, 0.0),
        Month => (scaled, 0.0, 0.0),
        Day => (0.0, scaled, 0.0),
        Hour => (0.0, 0.0, scaled * 3_600.0),
        Minute => (0.0, 0.0, scaled * 60.0),
        Second => (0.0, 0.0, scaled),
        _ => return None,
    };
    let days = days + months.fract() * 30.0;
    let seconds = seconds + days.fract() * 86_400.0;
    let (months, days, micros) = (months.trunc() as i64, days.trunc() as i64, (seconds * 1e6).round() as i64);
    let mut parts = Vec::new();
    if months != 0 {
        parts.push(format!("{months} months"));
    }
    if days != 0 {
        parts.push(format!("{days} days"));
    }
    if micros != 0 || parts.is_empty() {
        let sign = if micros < 0 { "-" } else { "" };
        parts.push(format!("{sign}{}.{:06} seconds", micros.unsigned_abs() / 1_000_000, micros.unsigned_abs() % 1_000_000));
    }
    out.leading_field = None;
    out.value = Box::new(Expr::Value(sqlparser::ast::Value::SingleQuotedString(parts.join(" ")).into()));
    Some(Expr::Interval(out))
}

/// The single-field literal a two-field interval literal equals (`INTERVAL '1:30' HOUR TO
/// MINUTE` is `INTERVAL '90' MINUTE`, `'2-3' YEAR TO MONTH` is `INTERVAL '27' MONTH`, seconds
/// with their fraction); `None` for one whose value is not a string literal, or whose fields
/// are no such pair (DataFusion says why).
///
/// # Errors
/// `InvalidDatetime` (22007) for text that is not of the fields' form, naming it.
fn single_field_interval(interval: &sqlparser::ast::Interval) -> Result<Option<Expr>> {
    use sqlparser::ast::DateTimeField::{Day, Hour, Minute, Month, Second, Year};
    let Expr::Value(v) = interval.value.as_ref() else { return Ok(None) };
    let sqlparser::ast::Value::SingleQuotedString(text) = &v.value else { return Ok(None) };
    let (Some(first), Some(last)) = (&interval.leading_field, &interval.last_field) else { return Ok(None) };
    // Each field's place, from years to seconds, and the separator before it.
    let rank = |f: &sqlparser::ast::DateTimeField| match f {
        Year => Some(0),
        Month => Some(1),
        Day => Some(2),
        Hour => Some(3),
        Minute => Some(4),
        Second => Some(5),
        _ => None,
    };
    let (Some(from), Some(to)) = (rank(first), rank(last)) else { return Ok(None) };
    if from >= to || (from <= 1) != (to <= 1) {
        return Ok(None);
    }
    let bad = || {
        WeirError::new(crate::error::ErrorKind::InvalidDatetime(format!(
            "invalid interval literal '{text}' for {first} TO {last}: expected {}",
            match (from, to) {
                (0, 1) => "'years-months'",
                (2, 3) => "'days hours'",
                (2, 4) => "'days hours:minutes'",
                (2, 5) => "'days hours:minutes:seconds'",
                (3, 4) => "'hours:minutes'",
                (3, 5) => "'hours:minutes:seconds'",
                _ => "'minutes:seconds'",
            }
        )))
    };
    let trimmed = text.trim();
    let (negative, body) = match trimmed.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, trimmed.strip_prefix('+').unwrap_or(trimmed)),
    };
    let sign = if negative { "-" } else { "" };
    let literal = |value: String, unit: &str| -> Result<Option<Expr>> {
        let sql = format!("INTERVAL '{sign}{value}' {unit}");
        let parsed = sqlparser::parser::Parser::new(&sqlparser::dialect::GenericDialect {}).try_with_sql(&sql).and_then(|mut p| p.parse_expr());
        parsed.map(Some).map_err(|e| WeirError::internal(format!("{sql}: {e}")))
    };
    if from == 0 {
        let (y, m) = body.split_once('-').ok_or_else(bad)?;
        let (y, m): (u64, u64) = (y.trim().parse().map_err(|_| bad())?, m.trim().parse().map_err(|_| bad())?);
        if m >= 12 {
            return Err(bad());
        }
        return literal((y * 12 + m).to_string(), "MONTH");
    }
    // Days, then hours:minutes:seconds from the field after the days.
    let (days, clock) = match from {
        2 => {
            let (d, rest) = body.split_once(' ').ok_or_else(bad)?;
            (d.trim().parse::<u64>().map_err(|_| bad())?, rest.trim())
        }
        _ => (0, body),
    };
    let parts: Vec<&str> = clock.split(':').collect();
    let first_clock = from.max(3);
    if parts.len() != to - first_clock + 1 {
        return Err(bad());
    }
    let mut whole: u64 = days * 24;
    let mut fraction = String::new();
    for (i, part) in parts.iter().enumerate() {
        let place = first_clock + i;
        // A field after the first is within its unit (Flink refuses `'1:75' HOUR TO MINUTE`).
        let limit = match place {
            3 => 24,
            _ => 60,
        };
        let bounded = place > from;
        let (int, frac) = match part.split_once('.') {
            Some((int, frac)) if place == 5 && !frac.is_empty() && frac.bytes().all(|b| b.is_ascii_digit()) => (int, Some(frac)),
            _ => (*part, None),
        };
        let n: u64 = int.trim().parse().map_err(|_| bad())?;
        if bounded && n >= limit {
            return Err(bad());
        }
        whole = if place == 3 { whole + n } else { whole * 60 + n };
        if let Some(frac) = frac {
            fraction = format!(".{frac}");
        }
    }
    // `whole` counts units of the last field (hours from DAY TO HOUR).
    let unit = match to {
        3 => "HOUR",
        4 => "MINUTE",
        _ => "SECOND",
    };
    literal(format!("{whole}{fraction}"), unit)
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
            // Flink's REGEXP_REPLACE replaces every match.
            (Some("regexp_replace"), 3) => list.args.push(literal("g")),
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
            "json_arrayagg" => {
                match json_arrayagg(f) {
                    Ok(rewritten) => *expr = rewritten,
                    Err(e) => {
                        self.error = Some(e);
                        return ControlFlow::Break(());
                    }
                }
                return ControlFlow::Continue(());
            }
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

/// Flink's `JSON_ARRAYAGG(v [NULL | ABSENT ON NULL])`: the group's values as a JSON array in
/// arrival order (`ARRAY_AGG`'s order, kept under retractions), NULLs left out unless `NULL ON
/// NULL`; `[]` for a group without values. As `JSON_STRING` of the `ARRAY_AGG`.
///
/// A `FILTER (WHERE ..)` after the call is kept.
///
/// # Errors
/// `Unsupported` for another argument or clause (`ORDER BY` inside the call), `DISTINCT`, or an
/// `OVER` window.
fn json_arrayagg(f: &sqlparser::ast::Function) -> Result<Expr> {
    let usage = "JSON_ARRAYAGG(v [NULL | ABSENT ON NULL])";
    let FunctionArguments::List(list) = &f.args else { return Err(WeirError::unsupported(format!("{usage} without its value"))) };
    let [FunctionArg::Unnamed(FunctionArgExpr::Expr(value))] = list.args.as_slice() else {
        return Err(WeirError::unsupported(format!("{usage} takes one value")));
    };
    if list.duplicate_treatment.is_some() || f.over.is_some() || !f.within_group.is_empty() {
        return Err(WeirError::unsupported(format!("{usage} with DISTINCT, WITHIN GROUP or OVER")));
    }
    let mut absent = true;
    for clause in &list.clauses {
        match clause {
            FunctionArgumentClause::JsonNullClause(JsonNullClause::NullOnNull) => absent = false,
            FunctionArgumentClause::JsonNullClause(JsonNullClause::AbsentOnNull) => absent = true,
            other => return Err(WeirError::unsupported(format!("{usage}: the clause {other}"))),
        }
    }
    let filter = match (absent, &f.filter) {
        (true, Some(kept)) => format!(" FILTER (WHERE ({kept}) AND {value} IS NOT NULL)"),
        (true, None) => format!(" FILTER (WHERE {value} IS NOT NULL)"),
        (false, Some(kept)) => format!(" FILTER (WHERE {kept})"),
        (false, None) => String::new(),
    };
    let sql = format!("COALESCE(json_string(ARRAY_AGG({value}){filter}), '[]')");
    sqlparser::parser::Parser::new(&sqlparser::dialect::GenericDialect {})
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| WeirError::internal(format!("{sql}: {e}")))
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
