//! What Postgres clients send besides their own queries, made to plan in DataFusion: Postgres's
//! information functions, its casts to OID types and qualified function names (rewritten in
//! the statement before planning), and its names for output columns.
//!
//! Functions ([`register`]): `version()` (a `PostgreSQL 16.0 ...` string, which drivers parse),
//! `current_schema()` / `current_schema`, `current_schemas(bool)`, `current_database()`,
//! `current_user` / `session_user` / `user` / `current_role`, `current_setting(name)`
//! (`SHOW`'s settings and the ones drivers ask: `jit`, `server_version_num`, ...),
//! `has_table_privilege(...)` and the other `has_*_privilege` (always true: Weir has one
//! role), `pg_table_is_visible(oid)`, `pg_type_is_visible(oid)`, `format_type(oid, typmod)`,
//! `pg_typeof(x)` (the type's name, as a `regtype` prints it),
//! `pg_get_userbyid(oid)`, `obj_description`, `col_description`, `shobj_description` (NULL:
//! no comments), `pg_get_indexdef(oid)`, `pg_get_constraintdef(oid)`, `pg_get_expr` (NULL),
//! `pg_encoding_to_char(int)`, `quote_ident(text)`.
//!
//! Rewrites ([`rewrite`]): `pg_catalog.f(...)` calls `f(...)`; `pg_backend_pid()` is the
//! connection's pid (as `pg_stat_activity` shows it); `'t'::regclass` is relation
//! `t`'s OID (an unknown name: Postgres's "relation does not exist"); other casts to `oid`,
//! `regclass`, `regtype`, `regproc`, `regnamespace` are casts to BIGINT (Weir's OID columns);
//! `OPERATOR(pg_catalog.~)` and its kin are the plain operators.
//!
//! Column names ([`output_names`]): Postgres names an unaliased output column after the
//! column it reads, else after the function it calls (`count(*)` is `count`), else
//! `?column?`; DataFusion names it after the expression's text (`Int64(1)`, `count(*)`).

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, ListBuilder, StringArray, StringBuilder};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use datafusion::prelude::SessionContext;
use sqlparser::ast::{
    BinaryOperator, CastKind, DataType as SqlType, Expr, Function, FunctionArguments, Ident, ObjectName, ObjectNamePart,
    Query, SelectItem, SetExpr, Statement, Value, ValueWithSpan, VisitMut, VisitorMut,
};
use weir_catalog::Catalog;

use crate::error::{Result, WeirError};
use crate::sql::pg_catalog::relation_oid;

/// What `version()` returns: Postgres's form first, which drivers parse (SQLAlchemy reads the
/// major and minor numbers), then what it really is.
pub const VERSION: &str = concat!(
    "PostgreSQL 16.0 (Weir ",
    env!("CARGO_PKG_VERSION"),
    ", a streaming SQL database) on x86_64-pc-linux-gnu, compiled by rustc, 64-bit"
);

/// The settings `current_setting` knows besides `SHOW`'s.
const EXTRA_SETTINGS: &[(&str, &str)] = &[
    ("server_version_num", "160000"),
    ("jit", "off"),
    ("lc_collate", "C"),
    ("lc_ctype", "C"),
    ("max_index_keys", "32"),
    ("default_transaction_isolation", "read committed"),
    ("default_transaction_read_only", "off"),
    ("is_superuser", "on"),
    ("session_authorization", "weir"),
];

/// The value of setting `name` as `current_setting` returns it in a session with `settings`.
fn setting(settings: &BTreeMap<String, String>, name: &str) -> Option<String> {
    let name = name.to_lowercase();
    crate::sql::settings::shown_value(settings, &name)
        .or_else(|| EXTRA_SETTINGS.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string()))
}

/// A function of rows: the arguments as arrays and the row count give the result array.
type Body = Arc<dyn Fn(&[ArrayRef], usize) -> DfResult<ArrayRef> + Send + Sync>;

/// One of the functions of this module.
struct PgFunction {
    name: &'static str,
    signature: Signature,
    returns: DataType,
    body: Body,
}

impl std::fmt::Debug for PgFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

// One function per name and context: its identity is its name.
impl PartialEq for PgFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for PgFunction {}

impl std::hash::Hash for PgFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for PgFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(self.returns.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        Ok(ColumnarValue::Array((self.body)(&arrays, args.number_rows)?))
    }
}

/// A text constant for every row.
fn text(value: Option<&'static str>) -> Body {
    Arc::new(move |_, rows| Ok(Arc::new(StringArray::from(vec![value; rows])) as ArrayRef))
}

/// `current_user([name])`: no argument, or the name the rewrite passes.
fn user_signature() -> Signature {
    use datafusion::logical_expr::TypeSignature;
    Signature::one_of(vec![TypeSignature::Nullary, TypeSignature::Any(1)], Volatility::Stable)
}

/// The user named by the one argument, else `weir`.
fn user() -> Body {
    let fallback = text(Some("weir"));
    Arc::new(move |args, rows| match args.first() {
        Some(name) => Ok(arrow::compute::cast(name, &DataType::Utf8)?),
        None => fallback(args, rows),
    })
}

/// A boolean constant for every row.
fn truth(value: bool) -> Body {
    Arc::new(move |_, rows| Ok(Arc::new(BooleanArray::from(vec![value; rows])) as ArrayRef))
}

/// Maps the first argument, cast to BIGINT, through `f`.
fn by_oid(f: impl Fn(i64) -> Option<String> + Send + Sync + 'static) -> Body {
    Arc::new(move |args, rows| {
        let Some(first) = args.first() else { return Ok(Arc::new(StringArray::from(vec![None::<String>; rows])) as ArrayRef) };
        let oids = arrow::compute::cast(first, &DataType::Int64)?;
        let out: StringArray = oids.as_primitive::<Int64Type>().iter().map(|o| o.and_then(&f)).collect();
        Ok(Arc::new(out) as ArrayRef)
    })
}

/// Maps the first argument, as text, through `f`.
fn by_text(f: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Body {
    Arc::new(move |args, rows| {
        let Some(first) = args.first() else { return Ok(Arc::new(StringArray::from(vec![None::<String>; rows])) as ArrayRef) };
        let values = arrow::compute::cast(first, &DataType::Utf8)?;
        let out: StringArray = values.as_string::<i32>().iter().map(|v| v.and_then(&f)).collect();
        Ok(Arc::new(out) as ArrayRef)
    })
}

/// `format_type(oid, typmod)`: the type's name, with `numeric(p,s)` and the fractional digits
/// of a timestamp or time from the modifier (Postgres's `format_type`).
fn format_type() -> Body {
    Arc::new(|args, rows| {
        let nulls = || Arc::new(StringArray::from(vec![None::<String>; rows])) as ArrayRef;
        let Some(first) = args.first() else { return Ok(nulls()) };
        let oids = arrow::compute::cast(first, &DataType::Int64)?;
        let mods = match args.get(1) {
            Some(m) => Some(arrow::compute::cast(m, &DataType::Int64)?),
            None => None,
        };
        let oids = oids.as_primitive::<Int64Type>();
        let out: StringArray = (0..oids.len())
            .map(|i| {
                let t = type_of_oid(if oids.is_null(i) { return None } else { oids.value(i) })?;
                let typmod = mods.as_ref().map(|m| m.as_primitive::<Int64Type>()).filter(|m| m.is_valid(i)).map_or(-1, |m| m.value(i));
                let name = crate::sql::types::format_type_name(&t);
                Some(match (t.clone(), typmod) {
                    (pgwire::api::Type::NUMERIC, m) if m >= 4 => format!("numeric({},{})", (m - 4) >> 16, (m - 4) & 0xffff),
                    (pgwire::api::Type::TIMESTAMP | pgwire::api::Type::TIMESTAMPTZ | pgwire::api::Type::TIME, m) if m >= 0 => {
                        name.replacen(' ', &format!("({m}) "), 1)
                    }
                    _ => name,
                })
            })
            .collect();
        Ok(Arc::new(out) as ArrayRef)
    })
}

/// `json_build_object(key, value, ...)`: a JSON object per row, as text (Weir has no json
/// type): keys as strings, numbers and booleans as themselves, NULL as null, the rest as
/// strings. An odd number of arguments is an error, as in Postgres.
fn json_build_object() -> Body {
    Arc::new(|args, rows| {
        if args.len() % 2 != 0 {
            return Err(datafusion::error::DataFusionError::Plan(
                "argument list must have even number of elements (json_build_object takes key, value pairs)".into(),
            ));
        }
        let formatted: Vec<(ArrayRef, bool)> = args
            .iter()
            .map(|a| {
                let bare = a.data_type().is_numeric() || *a.data_type() == DataType::Boolean;
                Ok((arrow::compute::cast(a, &DataType::Utf8)?, bare))
            })
            .collect::<DfResult<_>>()?;
        let quoted = |s: &str| serde_json::Value::String(s.to_string()).to_string();
        let out: StringArray = (0..rows)
            .map(|row| {
                let pairs: Vec<String> = formatted
                    .chunks(2)
                    .map(|pair| {
                        let (key, value) = (pair[0].0.as_string::<i32>(), pair[1].0.as_string::<i32>());
                        let key = if key.is_null(row) { "null".to_string() } else { quoted(key.value(row)) };
                        let value = match (value.is_null(row), pair[1].1) {
                            (true, _) => "null".to_string(),
                            (false, true) => value.value(row).to_string(),
                            (false, false) => quoted(value.value(row)),
                        };
                        format!("{key} : {value}")
                    })
                    .collect();
                Some(format!("{{{}}}", pairs.join(", ")))
            })
            .collect();
        Ok(Arc::new(out) as ArrayRef)
    })
}

/// The built-in type of OID `oid`.
fn type_of_oid(oid: i64) -> Option<pgwire::api::Type> {
    u32::try_from(oid).ok().and_then(pgwire::api::Type::from_oid)
}

/// Registers this module's functions on `ctx`, for statements over `catalog`.
pub fn register(ctx: &SessionContext, catalog: &Arc<Catalog>) {
    // The settings of the session whose statement this plans.
    let settings = crate::sql::settings::planning_settings();
    let any = |_min_args: usize| Signature::variadic_any(Volatility::Stable);
    let none = || Signature::nullary(Volatility::Stable);
    let mut functions: Vec<(&'static str, Signature, DataType, Body)> = vec![
        ("version", none(), DataType::Utf8, text(Some(VERSION))),
        ("current_schema", none(), DataType::Utf8, text(Some("public"))),
        ("current_database", none(), DataType::Utf8, text(Some("weir"))),
        // The rewrite passes the connection's user ([`rewrite`]).
        ("current_user", user_signature(), DataType::Utf8, user()),
        ("session_user", user_signature(), DataType::Utf8, user()),
        ("pg_get_userbyid", any(1), DataType::Utf8, text(Some("weir"))),
        ("obj_description", any(1), DataType::Utf8, text(None)),
        ("col_description", any(1), DataType::Utf8, text(None)),
        ("shobj_description", any(1), DataType::Utf8, text(None)),
        ("pg_get_expr", any(1), DataType::Utf8, text(None)),
        ("pg_encoding_to_char", any(1), DataType::Utf8, text(Some("UTF8"))),
        ("has_table_privilege", any(1), DataType::Boolean, truth(true)),
        ("has_schema_privilege", any(1), DataType::Boolean, truth(true)),
        ("has_database_privilege", any(1), DataType::Boolean, truth(true)),
        ("has_column_privilege", any(1), DataType::Boolean, truth(true)),
        ("pg_table_is_visible", any(1), DataType::Boolean, truth(true)),
        ("pg_type_is_visible", any(1), DataType::Boolean, truth(true)),
        ("current_setting", any(1), DataType::Utf8, by_text(move |name| setting(&settings, name))),
        ("format_type", any(1), DataType::Utf8, format_type()),
        // The Postgres type of the argument, as a `regtype` prints (no precision).
        (
            "pg_typeof",
            Signature::any(1, Volatility::Immutable),
            DataType::Utf8,
            Arc::new(|args, rows| {
                let name = match args.first().map(|a| a.data_type()) {
                    None | Some(DataType::Null) => "unknown".to_string(),
                    Some(t) => {
                        let full = crate::sql::pg_catalog::format_type(t);
                        match (full.find('('), full.find(')')) {
                            (Some(open), Some(close)) => format!("{}{}", &full[..open], &full[close + 1..]),
                            _ => full,
                        }
                    }
                };
                Ok(Arc::new(StringArray::from(vec![name; rows])) as ArrayRef)
            }),
        ),
        // No sequences, no user functions: NULL or nothing.
        ("pg_get_serial_sequence", any(1), DataType::Utf8, text(None)),
        ("pg_get_function_result", any(1), DataType::Utf8, text(None)),
        ("pg_get_function_arguments", any(1), DataType::Utf8, text(None)),
        ("pg_get_functiondef", any(1), DataType::Utf8, text(None)),
        ("pg_function_is_visible", any(1), DataType::Boolean, truth(true)),
        ("json_build_object", any(0), DataType::Utf8, json_build_object()),
        // `set_config(name, value, is_local)`: Weir's settings are SET's; the value back.
        ("set_config", any(1), DataType::Utf8, Arc::new(|args, rows| match args.get(1) {
            Some(value) => Ok(arrow::compute::cast(value, &DataType::Utf8)?),
            None => Ok(Arc::new(StringArray::from(vec![None::<String>; rows])) as ArrayRef),
        })),
        (
            "quote_ident",
            any(1),
            DataType::Utf8,
            by_text(|name| {
                let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
                    && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                Some(if plain { name.to_string() } else { format!("\"{}\"", name.replace('"', "\"\"")) })
            }),
        ),
    ];
    let keyed = |catalog: &Arc<Catalog>, f: fn(&weir_catalog::Relation) -> String| {
        let catalog = Arc::clone(catalog);
        by_oid(move |oid| {
            catalog
                .relations
                .values()
                .find(|r| !r.primary_key.is_empty() && i64::from(relation_oid(&format!("{}_pkey", r.name))) == oid)
                .map(f)
        })
    };
    functions.push((
        "pg_get_indexdef",
        any(1),
        DataType::Utf8,
        keyed(catalog, |r| format!("CREATE UNIQUE INDEX {0}_pkey ON public.{0} USING btree ({1})", r.name, r.primary_key.join(", "))),
    ));
    let constraint = Arc::clone(catalog);
    functions.push((
        "pg_get_constraintdef",
        any(1),
        DataType::Utf8,
        by_oid(move |oid| {
            constraint
                .relations
                .values()
                .find(|r| !r.primary_key.is_empty() && i64::from(relation_oid(&format!("{}_pkey_constraint", r.name))) == oid)
                .map(|r| format!("PRIMARY KEY ({})", r.primary_key.join(", ")))
        }),
    ));
    for (name, signature, returns, body) in functions {
        ctx.register_udf(ScalarUDF::new_from_impl(PgFunction { name, signature, returns, body }));
    }
    let schemas: Body = Arc::new(|_, rows| {
        let mut list = ListBuilder::new(StringBuilder::new());
        for _ in 0..rows {
            list.values().append_value("pg_catalog");
            list.values().append_value("public");
            list.append(true);
        }
        Ok(Arc::new(list.finish()) as ArrayRef)
    });
    let list_type = DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)));
    ctx.register_udf(ScalarUDF::new_from_impl(PgFunction {
        name: "current_schemas",
        signature: any(1),
        returns: list_type,
        body: schemas,
    }));
}

/// Rewrites `stmt` (see the module docs) so DataFusion can plan it; `pg_backend_pid()` is
/// `pid`, the connection's process id, and `current_user` / `session_user` is `user`, the
/// name the connection authenticated as (`weir` when empty).
///
/// # Errors
/// `UnknownTable` for `'name'::regclass` naming no relation.
pub fn rewrite(stmt: &mut Statement, catalog: &Catalog, pid: i32, user: &str) -> Result<()> {
    crate::sql::query_rewrites::rewrite(stmt)?;
    if stmt.to_string().contains("_pg_expandarray") {
        let _ = stmt.visit(&mut ExpandArray);
    }
    let user = if user.is_empty() { "weir" } else { user };
    let mut rewriter = Rewriter { catalog, pid, user, error: None };
    let _ = stmt.visit(&mut rewriter);
    if let Statement::Query(query) = stmt {
        name_nested_columns(query);
        crate::sql::query_rewrites::first_last_value_ignore_nulls(query);
        check_order_by_names(query)?;
        alias_repeated_items(query.body.as_mut());
        alias_output_collisions(query);
    }
    alias_nested_repeats(stmt, true);
    match rewriter.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Gives a select item that repeats an earlier one of its select list (`SELECT 1, 1`, `SELECT
/// x, t.x`, `SELECT current_user, user` once rewritten), or that holds a call with a
/// `FILTER`, an alias of its own, in every select
/// of the query's body: Postgres allows repeated output columns, DataFusion's projections need
/// unique names. The output columns are named as Postgres names them ([`output_names`] reads
/// the statement before this, and [`rename`] applies its names), so the alias never shows.
fn alias_repeated_items(body: &mut SetExpr) {
    alias_items(body, true);
}

/// `ORDER BY name` as Postgres reads it: an output column's name first. Refused where two
/// output columns of the select list are `name` and differ (`SELECT id, a AS id .. ORDER BY
/// id`): Postgres's 42702, `ORDER BY "id" is ambiguous`; the same column twice (`SELECT id,
/// t.id`) is not. The name Postgres gives an unaliased expression (`ORDER BY count` after
/// `SELECT count(*)`) becomes its position, which DataFusion reads. A wildcard's names are not
/// known here.
fn check_order_by_names(query: &mut Query) -> Result<()> {
    let positional = order_by_positions(query)?;
    if let Some(sqlparser::ast::OrderBy { kind: sqlparser::ast::OrderByKind::Expressions(items), .. }) = &mut query.order_by {
        for (i, at) in positional {
            items[i].expr = Expr::value(Value::Number(at.to_string(), false));
        }
    }
    Ok(())
}

/// [`check_order_by_names`]'s reading: the `ORDER BY` items (by index) that name an unaliased
/// expression of the select list, with its position.
fn order_by_positions(query: &Query) -> Result<Vec<(usize, usize)>> {
    let (Some(sqlparser::ast::OrderBy { kind: sqlparser::ast::OrderByKind::Expressions(items), .. }), Some(select)) =
        (&query.order_by, leftmost_select(query))
    else {
        return Ok(Vec::new());
    };
    // Each item's output name and expression, and its position while no wildcard comes before.
    let mut countable = true;
    let mut named: Vec<(String, &Expr, Option<usize>)> = Vec::new();
    for (i, item) in select.projection.iter().enumerate() {
        countable &= !matches!(item, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..));
        let at = countable.then_some(i + 1);
        match item {
            SelectItem::ExprWithAlias { expr, alias } => named.push((crate::sql::parser::ident(alias), expr, None)),
            SelectItem::UnnamedExpr(e @ Expr::Identifier(i)) => named.push((crate::sql::parser::ident(i), e, None)),
            SelectItem::UnnamedExpr(e @ Expr::CompoundIdentifier(parts)) => {
                named.extend(parts.last().map(|i| (crate::sql::parser::ident(i), e, None)))
            }
            // Only an unaliased expression's name is not one DataFusion finds itself.
            SelectItem::UnnamedExpr(e) => named.push((expr_name(e), e, at)),
            _ => {}
        }
    }
    let mut positional = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Expr::Identifier(id) = &item.expr else { continue };
        let name = crate::sql::parser::ident(id);
        let same: Vec<&(String, &Expr, Option<usize>)> = named.iter().filter(|(n, _, _)| *n == name).collect();
        if same.iter().any(|(_, e, _)| item_key(e) != item_key(same[0].1)) {
            return Err(WeirError::new(crate::error::ErrorKind::AmbiguousColumn(format!("ORDER BY \"{name}\" is ambiguous"))));
        }
        if let (Some((_, _, Some(at))), true) = (same.first(), same.iter().all(|(_, _, at)| at.is_some())) {
            positional.push((i, *at));
        }
    }
    Ok(positional)
}

/// Gives the items of a statement's own select list that name an output column another item
/// may name too an alias of its own (`weir_column_<n>`), as Postgres allows two output columns
/// of one name and DataFusion's projections do not: an alias an earlier item's name takes
/// (`SELECT id, a AS id`), and beside a wildcard every column and alias (`SELECT *, id`,
/// `SELECT *, a AS id`: the wildcard's names are not known here). [`output_names`] gives them
/// their names back. `ORDER BY` an alias renamed so reads the new alias. Each select of a
/// `UNION` likewise; the first names the output.
fn alias_output_collisions(query: &mut Query) {
    let renamed = alias_collisions_in(query.body.as_mut());
    let Some(sqlparser::ast::OrderBy { kind: sqlparser::ast::OrderByKind::Expressions(items), .. }) = &mut query.order_by else { return };
    for item in items {
        if let Expr::Identifier(id) = &item.expr {
            if let Some((_, alias)) = renamed.iter().find(|(name, _)| *name == crate::sql::parser::ident(id)) {
                item.expr = Expr::Identifier(alias.clone());
            }
        }
    }
}

/// [`alias_output_collisions`] of a query's body: the aliases of its first select renamed, and
/// their new names.
fn alias_collisions_in(body: &mut SetExpr) -> Vec<(String, Ident)> {
    let select = match body {
        SetExpr::Select(select) => select,
        SetExpr::SetOperation { left, right, .. } => {
            alias_collisions_in(right);
            return alias_collisions_in(left);
        }
        SetExpr::Query(q) => return alias_collisions_in(q.body.as_mut()),
        _ => return Vec::new(),
    };
    let wildcards = select.projection.iter().filter(|i| matches!(i, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..))).count();
    // Names of several wildcards are not given back ([`output_names`]).
    if wildcards > 1 {
        return Vec::new();
    }
    let mut names: Vec<String> = Vec::new();
    let mut renamed: Vec<(String, Ident)> = Vec::new();
    for (i, item) in select.projection.iter_mut().enumerate() {
        let (name, expr, aliased) = match &*item {
            SelectItem::ExprWithAlias { expr, alias } => (crate::sql::parser::ident(alias), expr.clone(), true),
            SelectItem::UnnamedExpr(e) => match e {
                Expr::Identifier(i) => (crate::sql::parser::ident(i), e.clone(), false),
                Expr::CompoundIdentifier(parts) => match parts.last() {
                    Some(last) => (crate::sql::parser::ident(last), e.clone(), false),
                    None => continue,
                },
                _ => continue,
            },
            _ => continue,
        };
        let collides = wildcards == 1 || names.contains(&name);
        if collides && !name.starts_with("weir_column_") {
            let alias = Ident::with_quote('"', format!("weir_column_{}", i + 1));
            if aliased {
                renamed.push((name.clone(), alias.clone()));
            }
            *item = SelectItem::ExprWithAlias { expr, alias };
        }
        names.push(name);
    }
    renamed
}

/// Gives each select item that repeats an earlier one of its list an alias of its own, in every
/// query nested in `stmt` (a derived table, a CTE, a subquery, an INSERT's query), and with
/// `outer` in the statement's own query too; Postgres allows `SELECT * FROM (SELECT 1, 1) s`
/// and `INSERT INTO t SELECT x, x FROM s`, DataFusion's projections need unique names. Only
/// repeats, which DataFusion refuses, are aliased, so a query that planned before keeps its
/// column names (a stored view replans to the same columns).
pub fn alias_nested_repeats(stmt: &mut Statement, outer: bool) {
    // An INSERT's query is its own level: its columns go to the table by position.
    let outer = outer || matches!(stmt, Statement::Insert(_));
    alias_repeats_in(stmt, outer);
}

/// [`alias_nested_repeats`] of a query (`outer`: its own select list too).
pub fn alias_query_repeats(query: &mut Query, outer: bool) {
    alias_repeats_in(query, outer);
}

fn alias_repeats_in(node: &mut impl VisitMut, outer: bool) {
    struct Nested {
        depth: usize,
        outer: bool,
    }
    impl VisitorMut for Nested {
        type Break = ();
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
            if self.depth > 0 || self.outer {
                alias_items(query.body.as_mut(), false);
            }
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
    }
    let _ = node.visit(&mut Nested { depth: 0, outer });
}

/// Postgres's name of the first item of `query`'s own select list that repeats an earlier one
/// (`SELECT a, a`, `SELECT CAST(ts AS DATE), CAST(ts AS STRING)`), if one does: a view's
/// columns need distinct names.
pub fn repeated_output(query: &Query) -> Option<String> {
    let SetExpr::Select(select) = query.body.as_ref() else { return None };
    let mut seen = Vec::new();
    for item in &select.projection {
        let SelectItem::UnnamedExpr(e) = item else { continue };
        let key = item_key(e);
        if seen.contains(&key) {
            return Some(expr_name(e));
        }
        seen.push(key);
    }
    None
}

/// Names the columns of a view over `query` as Postgres does: each unaliased expression of its
/// select list (`count(*)`, `max(t.price)`, `CAST(ts AS DATE)`, `upper(name)`) gets the name
/// Postgres gives it (`count`, `max`, `ts`, `upper`; `?column?` for an operator or a constant),
/// written into the query as an alias, so the catalog stores the query with its names and a
/// restart replans it to the same columns. A column reference keeps its own name. Without this
/// a view's columns were DataFusion's (`count(*)`, `max(t.price)`), unlike a plain SELECT's.
///
/// The select lists of the queries nested in `query` (derived tables, CTEs) get the same names
/// where the name is the only one of its select list, so `SELECT * FROM (SELECT k, count(*)
/// FROM t GROUP BY k)` names its columns `k` and `count`; a name two items of a nested list
/// would share is left to DataFusion (Postgres allows it there; only a reference to it is
/// ambiguous).
///
/// # Errors
/// `DuplicateColumn` (42701, Postgres's `column "count" specified more than once`) when two
/// columns of the view would share a name: Postgres refuses such a view too.
pub fn name_view_columns(query: &mut Query) -> Result<()> {
    name_columns(query, true)
}

/// `query` with its columns named `names`, for `CREATE [MATERIALIZED] VIEW v (a, b) AS query`
/// (Postgres and Flink): a plain select list gets the names as aliases, its first items if
/// there are fewer names than items (Postgres: the rest keep theirs); any other query (a set
/// operation, a `*`) is read as `SELECT * FROM (query) AS v (a, b)`.
///
/// # Errors
/// `Plan` for more names than a plain select list has items (Postgres: "CREATE VIEW specifies
/// more column names than columns").
pub fn with_view_column_names(query: &Query, view: &str, names: &[Ident]) -> Result<Query> {
    if names.is_empty() {
        return Ok(query.clone());
    }
    let mut named = query.clone();
    if let SetExpr::Select(select) = named.body.as_mut() {
        let plain = select.projection.iter().all(|i| matches!(i, SelectItem::UnnamedExpr(_) | SelectItem::ExprWithAlias { .. }));
        if plain {
            if names.len() > select.projection.len() {
                return Err(WeirError::plan(format!(
                    "CREATE VIEW {view} specifies more column names ({}) than columns ({})",
                    names.len(),
                    select.projection.len()
                )));
            }
            for (item, name) in select.projection.iter_mut().zip(names) {
                let expr = match item {
                    SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e.clone(),
                    _ => unreachable!("a plain select list"),
                };
                *item = SelectItem::ExprWithAlias { expr, alias: name.clone() };
            }
            return Ok(named);
        }
    }
    let columns = names.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    let text = format!("SELECT * FROM ({query}) AS __weir_view ({columns})");
    match sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::GenericDialect {}, &text).ok().and_then(|mut s| s.pop()) {
        Some(Statement::Query(q)) => Ok(*q),
        _ => Err(WeirError::internal("a view's query with its column names did not parse back")),
    }
}

/// [`name_view_columns`] of the queries nested in a plain query (`SELECT * FROM (SELECT k,
/// count(*) ..) s` shows `count`, as Postgres's); its own select list is named after planning
/// ([`output_names`]).
pub fn name_nested_columns(query: &mut Query) {
    let _ = name_columns(query, false);
}

/// [`name_view_columns`]'s work; `outer`: `query`'s own select list too.
fn name_columns(query: &mut Query, outer: bool) -> Result<()> {
    struct Nested {
        depth: usize,
        outer: bool,
        error: Option<WeirError>,
    }
    impl VisitorMut for Nested {
        type Break = ();
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
            if self.depth == 0 && !self.outer {
                self.depth += 1;
                return ControlFlow::Continue(());
            }
            if let Err(e) = name_select_items(query.body.as_mut(), self.depth == 0) {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
    }
    let mut nested = Nested { depth: 0, outer, error: None };
    let _ = query.visit(&mut nested);
    nested.error.map_or(Ok(()), Err)
}

/// [`name_view_columns`] of one query body: its leftmost select list names the columns (a
/// set operation's right side is named by its left). `view`: the view's own list, where a
/// shared name is an error rather than left alone.
fn name_select_items(body: &mut SetExpr, view: bool) -> Result<()> {
    let select = match body {
        SetExpr::Select(select) => select,
        SetExpr::SetOperation { left, .. } => return name_select_items(left, view),
        _ => return Ok(()),
    };
    let names: Vec<Option<String>> = select
        .projection
        .iter()
        .map(|item| match item {
            SelectItem::UnnamedExpr(e) => Some(expr_name(e)),
            SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.clone()),
            _ => None,
        })
        .collect();
    for (i, item) in select.projection.iter_mut().enumerate() {
        let Some(name) = &names[i] else { continue };
        let shared = names.iter().enumerate().any(|(j, other)| j != i && other.as_deref() == Some(name.as_str()));
        if shared {
            if view && names[..i].iter().any(|other| other.as_deref() == Some(name.as_str())) {
                return Err(WeirError::new(crate::error::ErrorKind::DuplicateColumn(format!(
                    "column \"{name}\" specified more than once: a view's columns need distinct names; name each with AS"
                ))));
            }
            continue;
        }
        if let SelectItem::UnnamedExpr(e) = item {
            if !matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
                let expr = e.clone();
                *item = SelectItem::ExprWithAlias { expr, alias: Ident::with_quote('"', name.clone()) };
            }
        }
    }
    Ok(())
}

/// What DataFusion names a select item after, near enough to tell repeats: a column by its
/// name, a cast by what it casts (`CAST(ts AS DATE)` and `CAST(ts AS STRING)` are both named
/// `t.ts`), anything else by its text without the casts and qualifiers inside it (`abs(v)` and
/// `abs(CAST(t.v AS BIGINT))` are both named `abs(t.v)`).
fn item_key(e: &Expr) -> String {
    struct Bare;
    impl VisitorMut for Bare {
        type Break = ();
        fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            let bare = match expr {
                Expr::Cast { expr: inner, .. } | Expr::Nested(inner) => Some(inner.as_ref().clone()),
                Expr::CompoundIdentifier(parts) => parts.last().cloned().map(Expr::Identifier),
                _ => None,
            };
            if let Some(bare) = bare {
                *expr = bare;
            }
            ControlFlow::Continue(())
        }
    }
    match e {
        Expr::CompoundIdentifier(parts) => parts.last().map(|p| p.value.clone()).unwrap_or_default(),
        Expr::Cast { expr, .. } | Expr::Nested(expr) => item_key(expr),
        // DataFusion names every scalar subquery alike.
        Expr::Subquery(_) => "(<subquery>)".to_string(),
        other => {
            let mut bare = other.clone();
            let _ = bare.visit(&mut Bare);
            bare.to_string()
        }
    }
}

/// [`alias_repeated_items`]'s work; `filtered`: also items holding a call with a FILTER.
fn alias_items(body: &mut SetExpr, filtered: bool) {
    match body {
        SetExpr::Select(select) => {
            let mut seen: Vec<String> = Vec::new();
            for (i, item) in select.projection.iter_mut().enumerate() {
                let SelectItem::UnnamedExpr(e) = item else { continue };
                let key = item_key(e);
                // DataFusion names an aggregate called by another of its names (`EVERY`,
                // `VARIANCE`) without its FILTER, so `every(x), every(x) FILTER (..)` collide.
                let filtered = filtered
                    && sqlparser::ast::visit_expressions(&*e, |e| match e {
                        Expr::Function(f) if f.filter.is_some() => std::ops::ControlFlow::Break(()),
                        _ => std::ops::ControlFlow::Continue(()),
                    })
                    .is_break();
                if seen.contains(&key) || filtered {
                    let alias = sqlparser::ast::Ident::with_quote('"', format!("weir_column_{}", i + 1));
                    let expr = e.clone();
                    *item = SelectItem::ExprWithAlias { expr, alias };
                } else {
                    seen.push(key);
                }
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            alias_items(left, filtered);
            alias_items(right, filtered);
        }
        SetExpr::Query(q) => alias_items(q.body.as_mut(), filtered),
        _ => {}
    }
}

struct Rewriter<'a> {
    catalog: &'a Catalog,
    /// The connection's process id, for `pg_backend_pid()`.
    pid: i32,
    /// The connection's user, for `current_user` and `session_user`.
    user: &'a str,
    error: Option<WeirError>,
}

/// Whether SQL type `t` is one of Postgres's OID types.
fn oid_type(t: &SqlType) -> Option<&'static str> {
    let name = t.to_string().to_lowercase();
    let name = name.rsplit('.').next().unwrap_or(&name).to_string();
    ["oid", "regclass", "regtype", "regproc", "regprocedure", "regnamespace", "regrole"].into_iter().find(|n| *n == name)
}

fn plain_function(name: &str) -> Expr {
    Expr::Function(Function {
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new(name))]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(sqlparser::ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: vec![],
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

impl Rewriter<'_> {
    /// What special value `call` ([`special_value`]) is: the connection's user for the user
    /// functions, else a call of the function.
    fn special(&self, call: &str) -> Expr {
        let mut f = plain_function(call);
        if matches!(call, "current_user" | "session_user") {
            // A call, not a literal, so `current_user, session_user` keep distinct names.
            if let Expr::Function(Function { args: FunctionArguments::List(list), .. }) = &mut f {
                let name = Expr::value(Value::SingleQuotedString(self.user.to_string()));
                list.args.push(sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(name)));
            }
        }
        f
    }
}

impl VisitorMut for Rewriter<'_> {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        match expr {
            Expr::Function(f) if f.name.0.len() == 2 => {
                if f.name.0[0].as_ident().is_some_and(|i| i.value.eq_ignore_ascii_case("pg_catalog")) {
                    f.name.0.remove(0);
                }
            }
            // `generate_subscripts(a, 1)`: the subscripts of a one-dimensional array, beside an
            // `unnest(a)` (SQLAlchemy's primary-key query), as DataFusion can say it.
            Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("generate_subscripts") => {
                if let FunctionArguments::List(list) = &f.args {
                    if let Some(sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(array))) = list.args.first() {
                        let text = format!("unnest(range(1, CAST(array_length({array}, 1) AS BIGINT) + 1))");
                        let parsed = sqlparser::parser::Parser::new(&sqlparser::dialect::GenericDialect {})
                            .try_with_sql(&text)
                            .and_then(|mut p| p.parse_expr());
                        if let Ok(e) = parsed {
                            *expr = e;
                        }
                    }
                }
            }
            Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("pg_backend_pid") => {
                *expr = Expr::value(Value::Number(self.pid.to_string(), false));
            }
            Expr::Function(f) if f.name.0.len() == 1 && matches!(f.args, FunctionArguments::None) => {
                // `current_user`, `session_user`, `current_schema` without parentheses.
                let name = f.name.to_string().to_lowercase();
                if let Some(call) = special_value(&name) {
                    *expr = self.special(call);
                }
            }
            Expr::Identifier(ident) if ident.quote_style.is_none() => {
                if let Some(call) = special_value(&ident.value.to_lowercase()) {
                    *expr = self.special(call);
                }
            }
            Expr::Cast { data_type, expr: inner, .. } => {
                if let Some(kind) = oid_type(data_type) {
                    let literal = match inner.as_ref() {
                        Expr::Value(ValueWithSpan { value: Value::SingleQuotedString(s), .. }) => Some(s.clone()),
                        _ => None,
                    };
                    match (kind, literal) {
                        ("regclass", Some(name)) => {
                            let name = name.trim_matches('"').rsplit('.').next().unwrap_or_default().to_string();
                            let lower = name.to_lowercase();
                            let found = self.catalog.get(&name).or_else(|| self.catalog.get(&lower)).map(|r| relation_oid(&r.name));
                            match found.or_else(|| catalog_table_oid(&lower)) {
                                Some(oid) => *expr = Expr::value(Value::Number(oid.to_string(), false)),
                                None => {
                                    self.error = Some(WeirError::unknown_table(name));
                                    return ControlFlow::Break(());
                                }
                            }
                        }
                        ("oid" | "regclass", _) | (_, None) => {
                            *data_type = SqlType::BigInt(None);
                        }
                        (_, Some(_)) => *data_type = SqlType::BigInt(None),
                    }
                }
            }
            Expr::Subquery(query) => {
                if over_empty_catalog_table(query) {
                    *expr = Expr::value(Value::Null);
                } else {
                    first_of_catalog_subquery(query);
                }
            }
            // `x = ANY('{a,b}')`: Postgres reads the string as an array.
            Expr::AnyOp { right, .. } => {
                if let Expr::Value(ValueWithSpan { value: Value::SingleQuotedString(text), .. }) = right.as_ref() {
                    if let Some(items) = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                        let elem = items
                            .split(',')
                            .filter(|i| !i.trim().is_empty())
                            // An unquoted NULL is a NULL element (Postgres's array input).
                            .map(|i| match i.trim() {
                                null if null.eq_ignore_ascii_case("null") => Expr::value(Value::Null),
                                item => Expr::value(Value::SingleQuotedString(item.trim_matches('"').to_string())),
                            })
                            .collect();
                        **right = Expr::Array(sqlparser::ast::Array { elem, named: true });
                        crate::sql::query_rewrites::with_postgres_nulls(expr);
                    }
                }
            }
            Expr::BinaryOp { op, .. } => {
                if let BinaryOperator::PGCustomBinaryOperator(parts) = op {
                    let plain = match parts.last().map(String::as_str) {
                        Some("~") => Some(BinaryOperator::PGRegexMatch),
                        Some("~*") => Some(BinaryOperator::PGRegexIMatch),
                        Some("!~") => Some(BinaryOperator::PGRegexNotMatch),
                        Some("!~*") => Some(BinaryOperator::PGRegexNotIMatch),
                        Some("=") => Some(BinaryOperator::Eq),
                        Some("<>") => Some(BinaryOperator::NotEq),
                        Some("<") => Some(BinaryOperator::Lt),
                        Some(">") => Some(BinaryOperator::Gt),
                        Some("<=") => Some(BinaryOperator::LtEq),
                        Some(">=") => Some(BinaryOperator::GtEq),
                        _ => None,
                    };
                    if let Some(plain) = plain {
                        *op = plain;
                    }
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// `information_schema._pg_expandarray(a)`, the set of `(x, n)`: each element of `a` and its
/// subscript, as pgjdbc's `getPrimaryKeys` reads it (`(_pg_expandarray(k)).n AS key_seq`,
/// `_pg_expandarray(k) AS keys`, then `(keys).x` outside): `unnest(a)` for the element and its
/// `.x`, the subscripts as `generate_subscripts` gives them for `.n`.
struct ExpandArray;

fn is_expandarray(e: &Expr) -> Option<&Expr> {
    let Expr::Function(f) = e else { return None };
    if !f.name.to_string().to_lowercase().ends_with("_pg_expandarray") {
        return None;
    }
    let FunctionArguments::List(list) = &f.args else { return None };
    match list.args.first() {
        Some(sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(a))) => Some(a),
        _ => None,
    }
}

fn parsed_expr(text: &str) -> Option<Expr> {
    sqlparser::parser::Parser::new(&sqlparser::dialect::GenericDialect {}).try_with_sql(text).and_then(|mut p| p.parse_expr()).ok()
}

impl VisitorMut for ExpandArray {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::CompoundFieldAccess { root, access_chain } = expr {
            let field = match access_chain.as_slice() {
                [sqlparser::ast::AccessExpr::Dot(Expr::Identifier(i))] => i.value.to_lowercase(),
                _ => return ControlFlow::Continue(()),
            };
            let inner = match root.as_ref() {
                Expr::Nested(e) => e.as_ref().clone(),
                other => other.clone(),
            };
            let replaced = match (is_expandarray(&inner), field.as_str()) {
                (Some(a), "n") => parsed_expr(&format!("unnest(range(1, CAST(array_length({a}, 1) AS BIGINT) + 1))")),
                (Some(a), "x") => parsed_expr(&format!("unnest({a})")),
                // `(keys).x` of a column made from `_pg_expandarray(...)`: the element itself.
                (None, "x") => Some(inner),
                _ => None,
            };
            if let Some(r) = replaced {
                *expr = r;
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Some(a) = is_expandarray(expr) {
            if let Some(r) = parsed_expr(&format!("unnest({a})")) {
                *expr = r;
            }
        }
        ControlFlow::Continue(())
    }
}

/// Rewrites `x op ANY($n)` into `x op $n` and returns the `$n`s, for parameter type
/// inference: DataFusion infers `$n` from `x` in the second form; in the first, `$n` is an
/// array of that type (asyncpg's `WHERE id = ANY($1)` with a list).
pub fn any_placeholders(stmt: &mut Statement) -> Vec<String> {
    struct Any(Vec<String>);
    impl VisitorMut for Any {
        type Break = ();
        fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            if let Expr::AnyOp { left, compare_op, right, .. } = expr {
                if let Expr::Value(ValueWithSpan { value: Value::Placeholder(p), .. }) = right.as_ref() {
                    self.0.push(p.clone());
                    *expr = Expr::BinaryOp { left: left.clone(), op: compare_op.clone(), right: right.clone() };
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut any = Any(Vec::new());
    let _ = stmt.visit(&mut any);
    any.0
}

/// The OID Postgres gives a catalog table (`'pg_class'::regclass`, as drivers join
/// `pg_description.classoid` with it); others of `pg_catalog` get one made from the name.
fn catalog_table_oid(name: &str) -> Option<u32> {
    let known = [
        ("pg_type", 1247),
        ("pg_attribute", 1249),
        ("pg_proc", 1255),
        ("pg_class", 1259),
        ("pg_attrdef", 2604),
        ("pg_constraint", 2606),
        ("pg_description", 2609),
        ("pg_index", 2610),
        ("pg_namespace", 2615),
        ("pg_database", 1262),
    ];
    known.iter().find(|(n, _)| *n == name).map(|(_, oid)| *oid).or_else(|| {
        crate::sql::pg_schema::PG_TABLES.contains(&name).then(|| relation_oid(name))
    })
}

/// The catalog tables that have no rows in Weir (no comments, functions, inheritance,
/// column defaults, enums, collations, extensions or sequences).
const EMPTY_CATALOG_TABLES: &[&str] =
    &["pg_description", "pg_proc", "pg_inherits", "pg_attrdef", "pg_enum", "pg_collation", "pg_extension", "pg_sequence"];

/// Whether `query` is a SELECT whose first FROM table is one of [`EMPTY_CATALOG_TABLES`]: as a
/// scalar subquery it is NULL (SQLAlchemy's column default and identity subqueries, which
/// DataFusion cannot decorrelate).
fn over_empty_catalog_table(query: &Query) -> bool {
    let SetExpr::Select(select) = query.body.as_ref() else { return false };
    select.from.first().is_some_and(|t| {
        matches!(&t.relation, sqlparser::ast::TableFactor::Table { name, .. }
            if name.0.last().and_then(|p| p.as_ident()).is_some_and(|i| EMPTY_CATALOG_TABLES.contains(&i.value.to_lowercase().as_str())))
    })
}

/// A scalar subquery over catalog tables that returns a plain column (SQLAlchemy's and
/// pgjdbc's `(SELECT d.adbin FROM pg_attrdef d WHERE d.adrelid = a.attrelid ...)`): Postgres
/// runs it as is (at most one row, or an error); DataFusion plans a correlated one only when
/// it aggregates, so its column is taken with `first_value`, which gives the same for zero
/// rows or one.
fn first_of_catalog_subquery(query: &mut Query) {
    let SetExpr::Select(select) = query.body.as_mut() else { return };
    let over_catalog = !select.from.is_empty()
        && select.from.iter().flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation))).all(|t| {
            matches!(t, sqlparser::ast::TableFactor::Table { name, .. }
                if name.0.last().and_then(|p| p.as_ident()).is_some_and(|i| i.value.to_lowercase().starts_with("pg_")))
        });
    let grouped = !matches!(&select.group_by, sqlparser::ast::GroupByExpr::Expressions(e, _) if e.is_empty());
    if !over_catalog || grouped || select.projection.len() != 1 {
        return;
    }
    let aggregate = |e: &Expr| {
        matches!(e, Expr::Function(f) if ["count", "sum", "min", "max", "avg", "array_agg", "string_agg", "bool_and", "bool_or", "first_value", "last_value"]
            .contains(&f.name.to_string().to_lowercase().rsplit('.').next().unwrap_or_default()))
    };
    let item = match &mut select.projection[0] {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
        _ => return,
    };
    if aggregate(item) {
        return;
    }
    let inner = std::mem::replace(item, Expr::value(Value::Null));
    let mut call = plain_function("first_value");
    if let Expr::Function(f) = &mut call {
        f.args = FunctionArguments::List(sqlparser::ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: vec![sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(inner))],
            clauses: vec![],
        });
    }
    *item = call;
}

/// The function a Postgres special value (`current_user`, ...) calls.
fn special_value(name: &str) -> Option<&'static str> {
    match name {
        "current_user" | "current_role" | "user" => Some("current_user"),
        "session_user" => Some("session_user"),
        "current_schema" => Some("current_schema"),
        "current_catalog" => Some("current_database"),
        _ => None,
    }
}

/// Postgres's names of the output columns of query `stmt`, one per select item (`None`:
/// DataFusion's name, which is Postgres's for a column); a wildcard (`*`, `t.*`), whose
/// columns keep their names, is one [`WILDCARD`] item that [`rename`] expands. `None` when the
/// select list has more than one wildcard or the statement is not a plain query.
pub fn output_names(stmt: &Statement) -> Option<Vec<Option<String>>> {
    let Statement::Query(query) = stmt else { return None };
    let select = leftmost_select(query)?;
    let mut names = Vec::with_capacity(select.projection.len());
    for item in &select.projection {
        names.push(match item {
            SelectItem::UnnamedExpr(e) => Some(expr_name(e)),
            // As DataFusion names it, whatever alias [`alias_output_collisions`] gives it.
            SelectItem::ExprWithAlias { alias, .. } => Some(crate::sql::parser::ident(alias)),
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => Some(WILDCARD.to_string()),
            _ => return None,
        });
    }
    (names.iter().filter(|n| n.as_deref() == Some(WILDCARD)).count() <= 1).then_some(names)
}

/// The item of [`output_names`] that stands for a wildcard's columns (no SQL name holds a NUL).
const WILDCARD: &str = "\0*";

fn leftmost_select(query: &Query) -> Option<&sqlparser::ast::Select> {
    let mut body = query.body.as_ref();
    loop {
        match body {
            SetExpr::Select(select) => return Some(select),
            SetExpr::SetOperation { left, .. } => body = left.as_ref(),
            SetExpr::Query(q) => body = q.body.as_ref(),
            _ => return None,
        }
    }
}

/// Postgres's name of an unaliased output expression (its `FigureColname`).
fn expr_name(e: &Expr) -> String {
    match e {
        Expr::Identifier(i) => i.value.clone(),
        Expr::CompoundIdentifier(parts) => parts.last().map(|i| i.value.clone()).unwrap_or_default(),
        Expr::Function(f) => {
            let name = f.name.0.last().and_then(|p| p.as_ident()).map(|i| i.value.to_lowercase()).unwrap_or_default();
            // `FLOOR(ts TO DAY)` was rewritten into `time_floor('DAY', ts)` before parsing.
            match name.as_str() {
                "time_floor" => "floor".into(),
                "time_ceil" => "ceil".into(),
                // `x IS JSON`, rewritten into `weir_is_json(x, ..)`: an operator's `?column?`.
                "weir_is_json" => "?column?".into(),
                _ => name,
            }
        }
        Expr::Cast { expr, data_type, kind, .. } => match expr.as_ref() {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Function(_) | Expr::Cast { .. } | Expr::Nested(_) => {
                expr_name(expr)
            }
            _ if matches!(kind, CastKind::DoubleColon | CastKind::Cast) => cast_type_name(data_type),
            _ => "?column?".into(),
        },
        Expr::Nested(inner) => expr_name(inner),
        // A field or element (`r['b']`, `xs[1]`, `xs[1]['sku']`): its last field's name, else
        // the array's (Postgres's FigureColname of an indirection).
        Expr::CompoundFieldAccess { root, access_chain } => access_chain
            .iter()
            .rev()
            .find_map(|a| match a {
                sqlparser::ast::AccessExpr::Dot(Expr::Identifier(i)) => Some(i.value.clone()),
                sqlparser::ast::AccessExpr::Subscript(sqlparser::ast::Subscript::Index { index: Expr::Value(v) }) => match &v.value {
                    sqlparser::ast::Value::SingleQuotedString(s) => Some(s.clone()),
                    _ => None,
                },
                _ => None,
            })
            .unwrap_or_else(|| expr_name(root)),
        Expr::Case { .. } => "case".into(),
        Expr::Exists { .. } => "exists".into(),
        Expr::Array(_) => "array".into(),
        // SQL-syntax functions, by the function Postgres calls.
        Expr::Substring { .. } => "substring".into(),
        Expr::Trim { trim_where, .. } => match trim_where {
            Some(sqlparser::ast::TrimWhereField::Leading) => "ltrim".into(),
            Some(sqlparser::ast::TrimWhereField::Trailing) => "rtrim".into(),
            _ => "btrim".into(),
        },
        Expr::Position { .. } => "position".into(),
        Expr::Extract { .. } => "extract".into(),
        Expr::Overlay { .. } => "overlay".into(),
        Expr::Floor { .. } => "floor".into(),
        Expr::Ceil { .. } => "ceil".into(),
        // A typed literal by its type (`DATE '2024-01-01'` is `date`), a boolean `bool`.
        Expr::TypedString(t) => typed_literal_name(&t.data_type),
        Expr::Interval(_) => "interval".into(),
        Expr::Value(v) if matches!(v.value, Value::Boolean(_)) => "bool".into(),
        // A scalar subquery by its one column.
        Expr::Subquery(q) => leftmost_select(q)
            .and_then(|s| match s.projection.first() {
                Some(SelectItem::UnnamedExpr(e)) => Some(expr_name(e)),
                Some(SelectItem::ExprWithAlias { alias, .. }) => Some(alias.value.clone()),
                _ => None,
            })
            .unwrap_or_else(|| "?column?".into()),
        _ => "?column?".into(),
    }
}

/// Postgres's name of a typed literal's column: its type's name as Postgres spells it in
/// `SELECT DATE '2024-01-01'` (`date`, `timestamp`, `timestamptz`, `time`).
fn typed_literal_name(t: &SqlType) -> String {
    match t {
        SqlType::Date => "date".into(),
        SqlType::Timestamp(_, sqlparser::ast::TimezoneInfo::WithTimeZone | sqlparser::ast::TimezoneInfo::Tz) => "timestamptz".into(),
        SqlType::Timestamp(..) | SqlType::Datetime(_) => "timestamp".into(),
        SqlType::Time(..) => "time".into(),
        other => cast_type_name(other),
    }
}

/// Postgres's internal name of a cast's target type, which names a cast constant's column
/// (`SELECT 1::int` is `int4`).
fn cast_type_name(t: &SqlType) -> String {
    match t {
        SqlType::Int(_) | SqlType::Integer(_) | SqlType::Int4(_) => "int4".into(),
        SqlType::BigInt(_) | SqlType::Int8(_) => "int8".into(),
        SqlType::SmallInt(_) | SqlType::Int2(_) => "int2".into(),
        SqlType::Text | SqlType::String(_) => "text".into(),
        SqlType::Varchar(_) | SqlType::CharacterVarying(_) => "varchar".into(),
        SqlType::Boolean | SqlType::Bool => "bool".into(),
        SqlType::Real | SqlType::Float4 => "float4".into(),
        SqlType::DoublePrecision | SqlType::Double(_) | SqlType::Float8 => "float8".into(),
        SqlType::Numeric(_) | SqlType::Decimal(_) => "numeric".into(),
        SqlType::Date => "date".into(),
        SqlType::Timestamp(_, _) => "timestamp".into(),
        other => other.to_string().to_lowercase(),
    }
}

/// `schema` and `batches` with the output columns renamed to `names` (where given).
///
/// # Errors
/// Arrow's, when a batch does not take the renamed schema (it always does: same types).
pub fn rename(schema: &SchemaRef, batches: Vec<arrow::array::RecordBatch>, names: &[Option<String>]) -> Result<(SchemaRef, Vec<arrow::array::RecordBatch>)> {
    let width = schema.fields().len();
    let names: Vec<Option<String>> = match names.iter().position(|n| n.as_deref() == Some(WILDCARD)) {
        // The wildcard's columns are those the other items leave.
        Some(at) if width + 1 >= names.len() => {
            let expanded = std::iter::repeat_n(None, width + 1 - names.len());
            names[..at].iter().cloned().chain(expanded).chain(names[at + 1..].iter().cloned()).collect()
        }
        Some(_) => return Ok((Arc::clone(schema), batches)),
        None => names.to_vec(),
    };
    if names.len() != width || names.iter().all(Option::is_none) {
        return Ok((Arc::clone(schema), batches));
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .zip(&names)
        .map(|(f, n)| match n {
            Some(n) => f.as_ref().clone().with_name(n.clone()),
            None => f.as_ref().clone(),
        })
        .collect();
    let renamed = Arc::new(Schema::new(fields));
    let batches = batches
        .into_iter()
        .map(|b| arrow::array::RecordBatch::try_new(Arc::clone(&renamed), b.columns().to_vec()))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok((renamed, batches))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(sql: &str) -> Option<Vec<Option<String>>> {
        let stmt = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::PostgreSqlDialect {}, sql).expect("parses").remove(0);
        output_names(&stmt)
    }

    #[test]
    fn a_wildcard_keeps_its_columns_names_between_named_items() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("Utf8(\"x\")", DataType::Utf8, true),
            Field::new("a", DataType::Int32, true),
            Field::new("b", DataType::Int32, true),
            Field::new("Int64(1)", DataType::Int64, true),
        ]));
        let names = names("SELECT 'x', *, 1 FROM t").expect("one wildcard");
        let (renamed, _) = rename(&schema, vec![], &names).expect("renames");
        let got: Vec<&str> = renamed.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(got, ["?column?", "a", "b", "?column?"]);
    }

    #[test]
    fn names_output_columns_as_postgres() {
        let some = |v: &[&str]| Some(v.iter().map(|s| Some(s.to_string())).collect::<Vec<_>>());
        assert_eq!(names("SELECT 1"), some(&["?column?"]));
        assert_eq!(names("SELECT count(*), max(x) FROM t"), some(&["count", "max"]));
        assert_eq!(names("SELECT x, t.y, x + 1 FROM t"), some(&["x", "y", "?column?"]));
        assert_eq!(names("SELECT r['b'], xs[1], xs[2]['sku'], m['k'] FROM t"), some(&["b", "xs", "sku", "k"]));
        assert_eq!(names("SELECT 1::int, x::text, CAST(x AS BIGINT) FROM t"), some(&["int4", "x", "x"]));
        assert_eq!(names("SELECT CASE WHEN x THEN 1 END FROM t"), some(&["case"]));
        assert_eq!(names("SELECT x AS a, 2, y AS \"B\" FROM t"), some(&["a", "?column?", "B"]));
        let wildcard = Some(WILDCARD.to_string());
        assert_eq!(names("SELECT * FROM t"), Some(vec![wildcard.clone()]));
        assert_eq!(names("SELECT 'x', t.* FROM t"), Some(vec![Some("?column?".into()), wildcard]));
        assert_eq!(names("SELECT *, 1, * FROM t"), None);
        assert_eq!(names("SELECT 1 UNION ALL SELECT 2"), some(&["?column?"]));
    }
}
