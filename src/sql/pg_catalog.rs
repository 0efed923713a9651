//! psql's catalog queries (`\d`, `\dt`, `\dv`, `\dm`, `\d NAME`, their `+` forms) answered
//! from Weir's catalog.
//!
//! psql describes objects by querying Postgres's system catalogs (`pg_class`, `pg_namespace`,
//! `pg_attribute`, ...) with Postgres-only syntax (`OPERATOR(pg_catalog.~)`, `COLLATE
//! pg_catalog.default`, `::pg_catalog.regclass`, `pg_catalog.*` functions) that DataFusion cannot
//! plan, and Weir has no such tables. This module is pragmatic, not a SQL engine over a fake
//! catalog: it recognizes the *shape* of the queries psql sends (`psql -E` prints them; the
//! source is psql's `describe.c`) and answers them directly:
//!
//! | the query reads | answered with |
//! |---|---|
//! | only `pg_class` (joined with `pg_namespace`, `pg_am`) | one row per matching relation |
//! | only `pg_attribute` | one row per column of the relation `a.attrelid` names |
//! | only `pg_namespace` (`\dn`) | schema `public`, if it matches |
//! | `pg_get_viewdef(oid)`, no table (`\d+`) | the query of that view or materialized view |
//! | `'name'::pg_catalog.regclass::pg_catalog.oid` (`\sv`) | the relation's OID, or "relation does not exist" |
//! | any other `pg_catalog.pg_*` table (indexes, inheritance, policies, publications, statistics, triggers, ...) | no rows |
//!
//! Relations are filtered by what psql puts in the `WHERE` clause: `c.oid = '<oid>'`,
//! `c.relkind IN (...)`, and the name patterns `c.relname OPERATOR(pg_catalog.~) '<regex>'`
//! and `n.nspname OPERATOR(pg_catalog.~) '<regex>'`. Every other condition is assumed to hold
//! (Weir's relations are all visible, permanent, in schema `public`). Columns are produced
//! from the query's own select list, by alias or the column name Postgres would give the
//! expression (`c.relkind` → `relkind`, `pg_catalog.format_type(..)` → `format_type`); a
//! column this module does not know is NULL, which psql reads as the empty string, false or 0.
//! So a footer query psql adds in a later version still gets a result of the right width.
//!
//! It is the fallback: a query is planned by DataFusion first, over the real catalog tables of
//! [`super::pg_schema`] and with [`super::pg_compat`]'s rewrites, and comes here only when
//! that fails (Postgres-only syntax such as `COLLATE pg_catalog.default`, or a catalog table
//! Weir does not make). A query that reads none of `pg_catalog`'s tables, or selects `*` from
//! one (psql never does; the columns would be unknown), is not answered here: [`answer`]
//! returns `None` and DataFusion's error stands.
//!
//! # Mapping Weir's catalog to Postgres's
//!
//! - Schema `public`, owner `weir`, persistence permanent, no indexes, rules, triggers,
//!   policies, inheritance or tablespaces.
//! - `relkind`: table `r`, view `v`, materialized view `m`.
//! - OIDs: 16384 (Postgres's first user OID) plus a hash of the name, stable across restarts
//!   and independent of other relations, so psql's follow-up `WHERE c.oid = '...'` queries find
//!   the relation its first query named even if DDL ran in between.
//! - Column types in `format_type`'s spelling of the type the column has on the wire (the Arrow
//!   type, as `frontend/encode.rs` maps it): `bigint`, `integer`, `text`, `numeric(12,2)`,
//!   `timestamp(3) without time zone`, `double precision`, ... A declared `VARCHAR(20)` is
//!   `text`, since that is what Weir stores and returns.
//! - `attnotnull` (psql's "not null") is set only on tables, for `NOT NULL` and primary key
//!   columns: Postgres never marks the columns of views or materialized views not null.
//! - A computed column (`name AS expr`, connector tables) is shown as Postgres shows a
//!   generated column, `generated always as (expr) stored`: psql 15 has no wording for a
//!   virtual one.
//!
//! # Edge cases
//! - Name patterns are regular expressions (psql turns `*` into `.*`, `?` into `.`); they are
//!   matched with Arrow's regex kernel, whose syntax agrees with Postgres's for what psql
//!   generates. An invalid one is an error, as in Postgres.
//! - Only the simple query protocol (psql's) is answered: the extended protocol's Describe
//!   still plans with DataFusion, so a driver sending these queries as prepared statements
//!   gets DataFusion's error.
//! - The shapes are psql 15's (`psql -E`); other versions send the same `pg_class` and
//!   `pg_attribute` queries with more or fewer columns, which the select-list projection
//!   absorbs.
//! - Rows come out ordered by name, which is the order psql asks for (`ORDER BY 1,2` or
//!   `2, 3`, schema being constant); names compare bytewise (the C collation).

use std::collections::BTreeSet;
use std::str::FromStr;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow::compute::kernels::regexp::regexp_is_match_scalar;
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use weir_catalog::{Catalog, Column, Relation, RelationKind};

use crate::error::{Result, WeirError};
use crate::sql::database::StatementResult;

/// The schema every relation is in.
const SCHEMA: &str = "public";
/// The owner psql shows for every relation.
const OWNER: &str = "weir";
/// Postgres's first OID for user objects (`FirstNormalObjectId`).
const FIRST_USER_OID: u32 = 16384;
/// How psql turns a relation name into its OID (`\sv`, `\ef`).
const REGCLASS_OID: &str = "::pg_catalog.regclass::pg_catalog.oid";

/// Answers `sql` if it is one of psql's catalog queries; `None` for any other statement.
///
/// `sql` is the text of one statement. Statements that do not mention `pg_catalog` return
/// `None` after one substring search.
///
/// The result has one column per item of the query's select list, named as Postgres would
/// name it; booleans are `Boolean`, counts and OIDs `Int64`, everything else `Utf8`.
///
/// # Errors
/// - `Execution` when a name pattern is not a valid regular expression.
/// - `UnknownTable` when a `regclass` cast names no relation.
/// - `Internal` if the result batch cannot be built.
pub fn answer(catalog: &Catalog, sql: &str) -> Result<Option<StatementResult>> {
    if !sql.contains("pg_catalog") {
        return Ok(None);
    }
    if sql.contains("typeinfo_tree") {
        return type_introspection(sql).map(Some);
    }
    let text = normalize(sql);
    let Some(query) = SelectQuery::parse(&text) else {
        return Ok(None);
    };
    // psql names its columns; for `SELECT *` the columns of the table would be needed.
    if query.items.iter().any(|i| i.text == "*" || i.text.ends_with(".*")) {
        return Ok(None);
    }
    let tables = query.catalog_tables();
    let names: Vec<&str> = query.items.iter().map(|i| i.name.as_str()).collect();
    let rows: Vec<Vec<Value>> = if tables.contains("pg_class")
        && tables.iter().all(|t| matches!(t.as_str(), "pg_class" | "pg_namespace" | "pg_am"))
    {
        matching_relations(catalog, query.from)?
            .into_iter()
            .map(|r| names.iter().map(|n| class_value(r, n)).collect())
            .collect()
    } else if tables.len() == 1 && tables.contains("pg_attribute") {
        let rel = oid_after(query.from, "a.attrelid").and_then(|oid| relation_by_oid(catalog, oid));
        rel.map(|r| {
            r.columns
                .iter()
                .enumerate()
                .map(|(i, c)| names.iter().map(|n| attribute_value(r, i, c, n)).collect())
                .collect()
        })
        .unwrap_or_default()
    } else if tables.len() == 1 && tables.contains("pg_namespace") {
        let schema_matches = match regex_after(query.from, "n.nspname") {
            Some(pattern) => regex_matches(&[SCHEMA], &pattern)?[0],
            None => true,
        };
        let row = names.iter().map(|n| namespace_value(n)).collect();
        if schema_matches {
            vec![row]
        } else {
            Vec::new()
        }
    } else if tables.is_empty() && query.items.len() == 1 && query.items[0].text.contains("pg_get_viewdef(") {
        let rel = oid_after(&query.items[0].text, "pg_get_viewdef(").and_then(|oid| relation_by_oid(catalog, oid));
        vec![vec![rel.map(view_definition).unwrap_or(Value::Null)]]
    } else if tables.is_empty() && query.items.len() == 1 && query.items[0].text.ends_with(REGCLASS_OID) {
        // `'name'::pg_catalog.regclass::pg_catalog.oid` (`\sv`): the OID of a relation name.
        let item = &query.items[0].text;
        let (literal, _) = string_literal(item).ok_or_else(|| WeirError::plan(format!("expected a name in {item}")))?;
        let rel = relation_by_regclass(catalog, &literal).ok_or_else(|| WeirError::unknown_table(literal.clone()))?;
        vec![vec![Value::Int(i64::from(relation_oid(&rel.name)))]]
    } else if !tables.is_empty() {
        Vec::new()
    } else {
        return Ok(None);
    };
    Ok(Some(build_result(&names, rows)?))
}

/// The OID psql sees for relation `name`.
pub fn relation_oid(name: &str) -> u32 {
    // FNV-1a: fixed, unlike std's hasher, so OIDs survive restarts and upgrades.
    let mut hash: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    FIRST_USER_OID + hash % (i32::MAX as u32 - FIRST_USER_OID)
}

/// `format_type`'s spelling of the Postgres type a column of Arrow type `t` has on the wire.
pub fn format_type(t: &DataType) -> String {
    use crate::plan::type_names::precision;
    match t {
        DataType::Boolean => "boolean".into(),
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => "smallint".into(),
        DataType::Int32 | DataType::UInt16 => "integer".into(),
        // UInt64 (ROW_NUMBER, RANK): int8 on the wire (`pg_type`).
        DataType::Int64 | DataType::UInt32 | DataType::UInt64 => "bigint".into(),
        DataType::Float16 | DataType::Float32 => "real".into(),
        DataType::Float64 => "double precision".into(),
        DataType::Decimal32(p, s)
        | DataType::Decimal64(p, s)
        | DataType::Decimal128(p, s)
        | DataType::Decimal256(p, s) => {
            format!("numeric({p},{s})")
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => {
            "bytea".into()
        }
        DataType::Date32 | DataType::Date64 => "date".into(),
        DataType::Time32(_) | DataType::Time64(_) => "time without time zone".into(),
        // Postgres's default precision is 6: `timestamp(6)` and `timestamp` are one type, and
        // format_type prints the precision only when one was given.
        DataType::Timestamp(TimeUnit::Microsecond, None) => "timestamp without time zone".into(),
        DataType::Timestamp(TimeUnit::Microsecond, Some(_)) => "timestamp with time zone".into(),
        DataType::Timestamp(u, None) => format!("timestamp({}) without time zone", precision(u)),
        DataType::Timestamp(u, Some(_)) => format!("timestamp({}) with time zone", precision(u)),
        DataType::Interval(_) | DataType::Duration(_) => "interval".into(),
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            format!("{}[]", format_type(f.data_type()))
        }
        DataType::Dictionary(_, values) => format_type(values),
        _ => "text".into(),
    }
}

/// A value of one result cell.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Null,
    Text(String),
    Bool(bool),
    Int(i64),
}

fn text(s: &str) -> Value {
    Value::Text(s.to_string())
}

/// The value of column `name` of the `pg_class` row (joined with its namespace) of `rel`.
fn class_value(rel: &Relation, name: &str) -> Value {
    let (relkind, kind_name) = match rel.kind {
        RelationKind::Table => ("r", "table"),
        RelationKind::View => ("v", "view"),
        RelationKind::MaterializedView => ("m", "materialized view"),
        RelationKind::SinkJob => ("j", "job"),
    };
    match name {
        "oid" => Value::Int(i64::from(relation_oid(&rel.name))),
        "nspname" | "Schema" => text(SCHEMA),
        "relname" | "Name" => text(&rel.name),
        "Type" => text(kind_name),
        "Owner" => text(OWNER),
        "relkind" => text(relkind),
        "relchecks" | "reltablespace" => Value::Int(0),
        "relhasindex"
        | "relhasrules"
        | "relhastriggers"
        | "relrowsecurity"
        | "relforcerowsecurity"
        | "relhasoids"
        | "relispartition" => Value::Bool(false),
        "relpersistence" => text("p"),
        "relreplident" => text("d"),
        "Persistence" => text("permanent"),
        "pg_get_viewdef" => view_definition(rel),
        _ => Value::Null,
    }
}

/// The value of column `name` of the `pg_namespace` row of schema `public`.
fn namespace_value(name: &str) -> Value {
    match name {
        "nspname" | "Name" => text(SCHEMA),
        "Owner" => text(OWNER),
        _ => Value::Null,
    }
}

/// `pg_get_viewdef`'s text for a view or materialized view: its query, with the leading space
/// and the semicolon Postgres's pretty-printed form has; NULL for a table.
fn view_definition(rel: &Relation) -> Value {
    rel.query.as_ref().map(|q| Value::Text(format!(" {q};"))).unwrap_or(Value::Null)
}

/// The relation a `regclass` input names: `name`, `"Name"`, `public.name`.
fn relation_by_regclass<'a>(catalog: &'a Catalog, input: &str) -> Option<&'a Relation> {
    let ident = |s: &str| match s.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(quoted) => quoted.replace("\"\"", "\""),
        None => s.to_lowercase(),
    };
    let input = input.trim();
    let name = match split_top_level(input, '.').as_slice() {
        [name] => ident(name),
        [schema, name] if ident(schema) == SCHEMA => ident(name),
        _ => return None,
    };
    catalog.get(&name)
}

/// The value of column `name` of the `pg_attribute` row of column `index` (0-based) of `rel`.
fn attribute_value(rel: &Relation, index: usize, col: &Column, name: &str) -> Value {
    let data_type = DataType::from_str(&col.arrow_type).unwrap_or(DataType::Utf8);
    match name {
        "attname" => text(&col.name),
        "format_type" => Value::Text(format_type(&data_type)),
        "attnum" => Value::Int(index as i64 + 1),
        "attrelid" => Value::Int(i64::from(relation_oid(&rel.name))),
        // The default or generation expression (`pg_get_expr(d.adbin, ...)`).
        "pg_get_expr" => col.computed.clone().map(Value::Text).unwrap_or(Value::Null),
        "attnotnull" => Value::Bool(rel.kind == RelationKind::Table && !col.nullable),
        "attidentity" => text(""),
        "attgenerated" => text(if col.computed.is_some() { "s" } else { "" }),
        // Postgres stores fixed-width types inline (`plain`), variable-width ones `extended`.
        "attstorage" => text(match data_type {
            DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::List(_)
            | DataType::LargeList(_) => "x",
            DataType::Decimal128(..) | DataType::Decimal256(..) => "m",
            _ => "p",
        }),
        "attcompression" => text(""),
        _ => Value::Null,
    }
}

/// The relations a `pg_class` query's `FROM ... WHERE ...` text selects, by name.
fn matching_relations<'a>(catalog: &'a Catalog, from: &str) -> Result<Vec<&'a Relation>> {
    let mut rels: Vec<&Relation> = catalog.relations.values().filter(|r| crate::sql::temporary_tables::listed(r)).collect();
    if let Some(oid) = oid_after(from, "c.oid") {
        rels.retain(|r| relation_oid(&r.name) == oid);
    }
    if let Some(kinds) = relkind_list(from) {
        rels.retain(|r| {
            let kind = match r.kind {
                RelationKind::Table => "r",
                RelationKind::View => "v",
                RelationKind::MaterializedView => "m",
                RelationKind::SinkJob => "j",
            };
            kinds.iter().any(|k| k == kind)
        });
    }
    if let Some(pattern) = regex_after(from, "n.nspname") {
        if !regex_matches(&[SCHEMA], &pattern)?[0] {
            rels.clear();
        }
    }
    if let Some(pattern) = regex_after(from, "c.relname") {
        let names: Vec<&str> = rels.iter().map(|r| r.name.as_str()).collect();
        let keep = regex_matches(&names, &pattern)?;
        rels = rels.into_iter().zip(keep).filter(|(_, k)| *k).map(|(r, _)| r).collect();
    }
    Ok(rels)
}

fn relation_by_oid(catalog: &Catalog, oid: u32) -> Option<&Relation> {
    catalog.relations.values().find(|r| relation_oid(&r.name) == oid)
}

/// Which of `names` match the Postgres regular expression `pattern`.
fn regex_matches(names: &[&str], pattern: &str) -> Result<Vec<bool>> {
    let array = StringArray::from(names.to_vec());
    let matched = regexp_is_match_scalar(&array, pattern, None)
        .map_err(|e| WeirError::execution(format!("invalid regular expression {pattern:?}: {e}")))?;
    Ok((0..names.len()).map(|i| matched.value(i)).collect())
}

/// The OID in `<key> = '<oid>'` or `<key> = <oid>` (or `<key>'<oid>'`, for a function's
/// argument).
fn oid_after(s: &str, key: &str) -> Option<u32> {
    if let Some(oid) = literal_after(s, key, "=") {
        return oid.trim().parse().ok();
    }
    let mut from = 0;
    while let Some(i) = s[from..].find(key) {
        let start = from + i;
        from = start + key.len();
        let rest = s[from..].trim_start();
        let Some(rest) = rest.strip_prefix('=') else { continue };
        let rest = rest.trim_start();
        let digits = &rest[..rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len())];
        if !is_name_start(s, start) || digits.is_empty() {
            continue;
        }
        return digits.parse().ok();
    }
    None
}

/// The pattern in `<key> OPERATOR(pg_catalog.~) '<regex>'` (or `<key> ~ '<regex>'`).
fn regex_after(s: &str, key: &str) -> Option<String> {
    literal_after(s, key, "OPERATOR(pg_catalog.~)").or_else(|| literal_after(s, key, "~"))
}

/// The string literal in the first `<key> <operator> '<literal>'` of `s` (the operator
/// optional, spaces around it too), where `key` is a whole name (`c.oid`, not `tc.oid`).
fn literal_after(s: &str, key: &str, operator: &str) -> Option<String> {
    let mut from = 0;
    while let Some(i) = s[from..].find(key) {
        let start = from + i;
        from = start + key.len();
        let whole = is_name_start(s, start);
        let rest = s[from..].trim_start();
        let rest = rest.strip_prefix(operator).unwrap_or(rest).trim_start();
        if let Some((literal, _)) = string_literal(rest).filter(|_| whole) {
            return Some(literal);
        }
    }
    None
}

/// Whether a name starting at byte `start` of `s` is not the tail of a longer one (`c.oid`
/// inside `tc.oid`).
fn is_name_start(s: &str, start: usize) -> bool {
    !s[..start].ends_with(|c: char| c.is_alphanumeric() || c == '_')
}

/// The literals of `c.relkind IN ('r','p','')`, empty ones dropped.
fn relkind_list(s: &str) -> Option<Vec<String>> {
    const KEY: &str = "c.relkind IN (";
    let mut rest = &s[s.find(KEY)? + KEY.len()..];
    let mut kinds = Vec::new();
    while let Some((kind, after)) = string_literal(rest.trim_start()) {
        if !kind.is_empty() {
            kinds.push(kind);
        }
        rest = after.trim_start().strip_prefix(',').unwrap_or(after);
    }
    Some(kinds)
}

/// The SQL string literal `s` starts with (`'..'` with `''` for a quote, or `E'..'` with
/// backslash escapes), and the text after it.
fn string_literal(s: &str) -> Option<(String, &str)> {
    let (escapes, body) = match s.strip_prefix(['E', 'e']) {
        Some(rest) if rest.starts_with('\'') => (true, &rest[1..]),
        _ => (false, s.strip_prefix('\'')?),
    };
    let mut out = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' if body[i + 1..].starts_with('\'') => {
                out.push('\'');
                chars.next();
            }
            '\'' => return Some((out, &body[i + 1..])),
            '\\' if escapes => out.push(chars.next()?.1),
            c => out.push(c),
        }
    }
    None
}

/// `sql` with runs of whitespace outside quotes collapsed to one space, trimmed, without its
/// trailing semicolon.
fn normalize(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quote: Option<char> = None;
    let mut space = false;
    for c in sql.trim().trim_end_matches(';').trim_end().chars() {
        match quote {
            Some(q) => {
                out.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c.is_whitespace() => space = true,
            None => {
                if space && !out.is_empty() {
                    out.push(' ');
                }
                space = false;
                if c == '\'' || c == '"' {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    out
}

/// One item of a select list.
#[derive(Debug)]
struct SelectItem {
    /// The expression as written (normalized).
    text: String,
    /// The column name Postgres gives it.
    name: String,
}

/// A normalized `SELECT` statement split into its select list and the rest.
#[derive(Debug)]
struct SelectQuery<'a> {
    items: Vec<SelectItem>,
    /// From the top-level `FROM` (exclusive) to the end; empty without a `FROM`.
    from: &'a str,
}

impl<'a> SelectQuery<'a> {
    fn parse(text: &'a str) -> Option<Self> {
        if !text.get(..7)?.eq_ignore_ascii_case("SELECT ") {
            return None;
        }
        let body = &text[7..];
        let (list, from) = match find_top_level(body, " FROM ") {
            Some(i) => (&body[..i], &body[i + 6..]),
            None => (body, ""),
        };
        let list = list.strip_prefix("DISTINCT ").unwrap_or(list);
        let items = split_top_level(list, ',')
            .into_iter()
            .map(|item| {
                let item = item.trim();
                SelectItem { text: item.to_string(), name: column_name(item) }
            })
            .collect();
        Some(Self { items, from })
    }

    /// The `pg_catalog` tables read by the `FROM` clause (and its `WHERE`, joins, ...).
    fn catalog_tables(&self) -> BTreeSet<String> {
        const PREFIX: &str = "pg_catalog.";
        let mut tables = BTreeSet::new();
        for part in outside_quotes(self.from) {
            let mut rest = part;
            while let Some(i) = rest.find(PREFIX) {
                rest = &rest[i + PREFIX.len()..];
                let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
                let ident = &rest[..end];
                if ident.starts_with("pg_") && !rest[end..].starts_with('(') {
                    tables.insert(ident.to_string());
                }
            }
        }
        tables
    }
}

/// The column name Postgres gives a select item (its `FigureColname`): its alias, else the
/// function's or column's name (through casts), else `?column?`.
fn column_name(item: &str) -> String {
    if let Some(i) = rfind_top_level_ci(item, " AS ") {
        let alias = item[i + 4..].trim();
        return alias.trim_matches('"').to_string();
    }
    if let Some(i) = find_top_level(item, "::") {
        // A cast keeps its operand's name; an anonymous operand takes the type's name.
        let name = column_name(&item[..i]);
        if name != "?column?" {
            return name;
        }
        let last_type = item.rsplit("::").next().unwrap_or("");
        return column_name(last_type.split('(').next().unwrap_or(last_type));
    }
    if let Some(inner) = item.strip_prefix('(').and_then(|s| s.strip_suffix(')')) {
        // A scalar subquery is named after its own (first) column.
        return SelectQuery::parse(inner.trim())
            .and_then(|q| q.items.into_iter().next())
            .map(|i| i.name)
            .unwrap_or_else(|| "?column?".into());
    }
    if item.len() >= 5 && item[..5].eq_ignore_ascii_case("CASE ") {
        return "case".into();
    }
    let head = match item.find('(') {
        Some(i) => &item[..i],
        None => item,
    };
    let name = head.rsplit('.').next().unwrap_or(head).trim().trim_matches('"');
    if !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        name.to_string()
    } else {
        "?column?".into()
    }
}

/// The byte offset of the first `needle` (ASCII, case-insensitive) in `s` outside parentheses
/// and quotes.
fn find_top_level(s: &str, needle: &str) -> Option<usize> {
    top_level_positions(s).find(|&i| s.get(i..i + needle.len()).is_some_and(|w| w.eq_ignore_ascii_case(needle)))
}

fn rfind_top_level_ci(s: &str, needle: &str) -> Option<usize> {
    top_level_positions(s)
        .filter(|&i| s.get(i..i + needle.len()).is_some_and(|w| w.eq_ignore_ascii_case(needle)))
        .last()
}

/// `s` split at `sep` where it stands outside parentheses and quotes.
fn split_top_level(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    for i in top_level_positions(s) {
        if s[i..].starts_with(sep) {
            parts.push(&s[start..i]);
            start = i + sep.len_utf8();
        }
    }
    parts.push(&s[start..]);
    parts
}

/// Byte offsets of the characters of `s` at parenthesis depth 0, outside quotes.
fn top_level_positions(s: &str) -> impl Iterator<Item = usize> + '_ {
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    s.char_indices().filter_map(move |(i, c)| {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            return None;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                None
            }
            '(' => {
                depth += 1;
                None
            }
            ')' => {
                depth -= 1;
                None
            }
            _ if depth == 0 => Some(i),
            _ => None,
        }
    })
}

/// The pieces of `s` outside single-quoted literals.
fn outside_quotes(s: &str) -> impl Iterator<Item = &str> {
    s.split('\'').step_by(2)
}

/// A result with columns `names`, typed by their first non-null value (text when none is).
/// asyncpg's type introspection (`INTRO_LOOKUP_TYPES`: a recursive walk of `pg_type` from the
/// OIDs of `ti.oid = any($1::oid[])` through element, base, range and attribute types), which
/// asyncpg runs for the types it has no codec of, arrays among them: the built-in types of those
/// OIDs and, for an array, its element, deepest first. The columns keep their types with no
/// rows too, as the statement is described before it runs.
fn type_introspection(sql: &str) -> Result<StatementResult> {
    use arrow::array::Int32Array;
    use pgwire::api::Type;
    let wanted: Vec<u32> = sql
        .find("ti.oid = any(")
        .map(|at| {
            let rest = &sql[at + "ti.oid = any(".len()..];
            let list = &rest[..rest.find(')').unwrap_or(rest.len())];
            list.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse().ok()).collect()
        })
        .unwrap_or_default();
    // (type, depth): each wanted type at depth 0, an array's element one deeper.
    let mut found: Vec<(Type, i32)> = Vec::new();
    let mut queue: Vec<(Type, i32)> = wanted.into_iter().filter_map(|o| Type::from_oid(o).map(|t| (t, 0))).collect();
    while let Some((t, depth)) = queue.pop() {
        if let Some(element) = crate::sql::types::element_of(&t) {
            queue.push((element, depth + 1));
        }
        if !found.iter().any(|(f, _)| *f == t) {
            found.push((t, depth));
        }
    }
    found.sort_by_key(|(_, depth)| -depth);
    let elements: Vec<Option<Type>> = found.iter().map(|(t, _)| crate::sql::types::element_of(t)).collect();
    let texts = |f: &dyn Fn(usize, &Type) -> Option<String>| -> ArrayRef {
        Arc::new(StringArray::from(found.iter().enumerate().map(|(i, (t, _))| f(i, t)).collect::<Vec<_>>()))
    };
    let nulls_text = || -> ArrayRef { Arc::new(StringArray::from(vec![None::<&str>; found.len()])) };
    let nulls_int = || -> ArrayRef { Arc::new(Int64Array::from(vec![None::<i64>; found.len()])) };
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("oid", Arc::new(found.iter().map(|(t, _)| Some(i64::from(t.oid()))).collect::<Int64Array>())),
        ("ns", texts(&|_, _| Some("pg_catalog".into()))),
        ("name", texts(&|_, t| Some(t.name().to_string()))),
        ("kind", texts(&|_, _| Some("b".into()))),
        ("basetype", nulls_int()),
        ("elemtype", Arc::new(elements.iter().map(|e| Some(e.as_ref().map_or(0, |e| i64::from(e.oid())))).collect::<Int64Array>())),
        ("elemdelim", texts(&|i, _| elements[i].as_ref().map(|_| ",".into()))),
        ("range_subtype", nulls_int()),
        ("attrtypoids", nulls_text()),
        ("attrnames", nulls_text()),
        ("depth", Arc::new(found.iter().map(|(_, d)| Some(*d)).collect::<Int32Array>())),
        ("basetype_name", nulls_text()),
        ("elemtype_name", texts(&|i, _| Some(elements[i].as_ref().map_or("-".into(), crate::sql::types::format_type_name)))),
        ("range_subtype_name", nulls_text()),
    ];
    let schema = Arc::new(Schema::new(
        columns.iter().map(|(n, a)| Field::new(*n, a.data_type().clone(), true)).collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns.into_iter().map(|(_, a)| a).collect())?;
    Ok(StatementResult::Rows { schema, batches: vec![batch] })
}

fn build_result(names: &[&str], rows: Vec<Vec<Value>>) -> Result<StatementResult> {
    let mut fields = Vec::with_capacity(names.len());
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let column = rows.iter().map(|r| &r[i]);
        let array: ArrayRef = match column.clone().find(|v| **v != Value::Null) {
            Some(Value::Bool(_)) => Arc::new(BooleanArray::from(
                column.map(|v| if let Value::Bool(b) = v { Some(*b) } else { None }).collect::<Vec<_>>(),
            )),
            Some(Value::Int(_)) => Arc::new(Int64Array::from(
                column.map(|v| if let Value::Int(n) = v { Some(*n) } else { None }).collect::<Vec<_>>(),
            )),
            _ => Arc::new(StringArray::from(
                column.map(|v| if let Value::Text(s) = v { Some(s.as_str()) } else { None }).collect::<Vec<_>>(),
            )),
        };
        fields.push(Field::new(*name, array.data_type().clone(), true));
        arrays.push(array);
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(Arc::clone(&schema), arrays)?;
    Ok(StatementResult::Rows { schema, batches: vec![batch] })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use arrow::util::display::array_value_to_string;

    use super::*;

    /// psql 15's `\dt` (`\d`, `\dv`, `\dm` differ in the relkind list), from `psql -E`.
    const LIST_TABLES: &str = r#"SELECT n.nspname as "Schema",
  c.relname as "Name",
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
  pg_catalog.pg_get_userbyid(c.relowner) as "Owner"
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
WHERE c.relkind IN ('r','p','')
      AND n.nspname <> 'pg_catalog'
      AND n.nspname !~ '^pg_toast'
      AND n.nspname <> 'information_schema'
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 1,2;"#;

    /// psql 15's first query of `\d NAME`.
    const LOOKUP: &str = r#"SELECT c.oid,
  n.nspname,
  c.relname
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname OPERATOR(pg_catalog.~) '^(NAME)$' COLLATE pg_catalog.default
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 2, 3;"#;

    /// psql 15's second query of `\d NAME`.
    const TABLE_INFO: &str = r#"SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, '', c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname
FROM pg_catalog.pg_class c
 LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)
LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)
WHERE c.oid = 'OID';"#;

    /// psql 15's column query of `\d NAME`.
    const COLUMNS: &str = r#"SELECT a.attname,
  pg_catalog.format_type(a.atttypid, a.atttypmod),
  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)
   FROM pg_catalog.pg_attrdef d
   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),
  a.attnotnull,
  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t
   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,
  a.attidentity,
  a.attgenerated
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = 'OID' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum;"#;

    /// One of the footer queries of `\d NAME` (inheritance).
    const PARENTS: &str = r#"SELECT c.oid::pg_catalog.regclass
FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
WHERE c.oid = i.inhparent AND i.inhrelid = 'OID'
  AND c.relkind != 'p' AND c.relkind != 'I'
ORDER BY inhseqno;"#;

    fn relation(name: &str, kind: RelationKind, columns: &[(&str, DataType, bool)]) -> Relation {
        Relation {
            name: name.into(),
            kind,
            state_table: None,
            columns: columns
                .iter()
                .map(|(n, t, nullable)| Column {
                    name: (*n).into(),
                    arrow_type: t.to_string(),
                    sql_type: t.to_string(),
                    nullable: *nullable,
                    computed: None,
                })
                .collect(),
            primary_key: Vec::new(),
            stream_key: None,
            watermark: None,
            options: BTreeMap::new(),
            definition: String::new(),
            query: (kind != RelationKind::Table).then(|| "SELECT id FROM orders".into()),
            depends_on: Vec::new(),
            job: None,
            operator_state: BTreeMap::new(),
            emit_on_window_close: false,
            temporary_views: Vec::new(),
        }
    }

    fn catalog() -> Catalog {
        let mut catalog = Catalog::default();
        for rel in [
            relation(
                "orders",
                RelationKind::Table,
                &[("id", DataType::Int64, false), ("amount", DataType::Decimal128(12, 2), true)],
            ),
            relation("big", RelationKind::View, &[("id", DataType::Int64, false)]),
            relation("totals", RelationKind::MaterializedView, &[("id", DataType::Int64, false)]),
        ] {
            catalog.relations.insert(rel.name.clone(), rel);
        }
        catalog
    }

    /// Column names, then rows of values as text ("" for NULL).
    type Table = (Vec<String>, Vec<Vec<String>>);

    /// The answer to `sql`, as a [`Table`].
    fn run(catalog: &Catalog, sql: &str) -> Result<Option<Table>> {
        let Some(result) = answer(catalog, sql)? else { return Ok(None) };
        let StatementResult::Rows { schema, batches } = result else {
            return Err(WeirError::internal("a catalog answer is rows"));
        };
        let names = schema.fields().iter().map(|f| f.name().clone()).collect();
        let mut rows = Vec::new();
        for batch in &batches {
            for row in 0..batch.num_rows() {
                let cells = batch.columns().iter().map(|c| {
                    if c.is_null(row) {
                        Ok(String::new())
                    } else {
                        array_value_to_string(c, row)
                    }
                });
                rows.push(cells.collect::<std::result::Result<Vec<_>, _>>()?);
            }
        }
        Ok(Some((names, rows)))
    }

    #[test]
    fn lists_relations_of_the_kinds_asked() -> Result<()> {
        let catalog = catalog();
        let (names, rows) = run(&catalog, LIST_TABLES)?.expect("answered");
        assert_eq!(names, ["Schema", "Name", "Type", "Owner"]);
        assert_eq!(rows, [["public", "orders", "table", "weir"]]);
        let all = LIST_TABLES.replace("('r','p','')", "('r','p','v','m','S','f','')");
        let (_, rows) = run(&catalog, &all)?.expect("answered");
        let listed: Vec<(&str, &str)> = rows.iter().map(|r| (r[1].as_str(), r[2].as_str())).collect();
        assert_eq!(listed, [("big", "view"), ("orders", "table"), ("totals", "materialized view")]);
        Ok(())
    }

    #[test]
    fn describes_one_relation_by_its_oid() -> Result<()> {
        let catalog = catalog();
        let (names, rows) = run(&catalog, &LOOKUP.replace("NAME", "ord.*"))?.expect("answered");
        assert_eq!(names, ["oid", "nspname", "relname"]);
        let oid = relation_oid("orders").to_string();
        assert_eq!(rows, [[oid.as_str(), "public", "orders"]]);

        // `tc.oid` in the join must not be taken for the `c.oid = '...'` filter.
        let (_, rows) = run(&catalog, &TABLE_INFO.replace("OID", &oid))?.expect("answered");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0][1], "r");
        assert_eq!(rows[0][2], "false");

        let (names, rows) = run(&catalog, &COLUMNS.replace("OID", &oid))?.expect("answered");
        assert_eq!(names[..4], ["attname", "format_type", "pg_get_expr", "attnotnull"]);
        let columns: Vec<&[String]> = rows.iter().map(|r| &r[..4]).collect();
        assert_eq!(columns, [["id", "bigint", "", "true"], ["amount", "numeric(12,2)", "", "false"]]);

        // Views never carry NOT NULL, as in Postgres.
        let view_oid = relation_oid("big").to_string();
        let (_, rows) = run(&catalog, &COLUMNS.replace("OID", &view_oid))?.expect("answered");
        assert_eq!(rows[0][3], "false");
        Ok(())
    }

    #[test]
    fn footers_are_empty_and_other_queries_pass_through() -> Result<()> {
        let catalog = catalog();
        let oid = relation_oid("orders").to_string();
        let (names, rows) = run(&catalog, &PARENTS.replace("OID", &oid))?.expect("answered");
        assert_eq!(names, ["oid"]);
        assert!(rows.is_empty());
        assert!(run(&catalog, "SELECT * FROM orders")?.is_none());
        assert!(run(&catalog, "SELECT pg_catalog.version()")?.is_none());
        assert!(run(&catalog, "SELECT 'pg_catalog.pg_class' AS s FROM orders")?.is_none());
        assert!(run(&catalog, "SELECT * FROM pg_catalog.pg_class")?.is_none());
        assert!(run(&catalog, &LOOKUP.replace("NAME", "(")).is_err(), "an invalid pattern is an error");
        Ok(())
    }

    #[test]
    fn types_in_format_type_spelling() {
        let utc = Some("UTC".into());
        let cases = [
            (DataType::Boolean, "boolean"),
            (DataType::Int16, "smallint"),
            (DataType::Int32, "integer"),
            (DataType::Int64, "bigint"),
            (DataType::Float32, "real"),
            (DataType::Float64, "double precision"),
            (DataType::Decimal128(12, 2), "numeric(12,2)"),
            (DataType::Utf8, "text"),
            (DataType::Binary, "bytea"),
            (DataType::Date32, "date"),
            (DataType::Time64(TimeUnit::Microsecond), "time without time zone"),
            (DataType::Timestamp(TimeUnit::Millisecond, None), "timestamp(3) without time zone"),
            (DataType::Timestamp(TimeUnit::Microsecond, None), "timestamp without time zone"),
            (DataType::Timestamp(TimeUnit::Millisecond, utc), "timestamp(3) with time zone"),
            (DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano), "interval"),
            (DataType::List(Arc::new(Field::new("item", DataType::Int32, true))), "integer[]"),
        ];
        for (t, postgres) in cases {
            // The catalog keeps the display string; it must parse back.
            assert_eq!(DataType::from_str(&t.to_string()).ok(), Some(t.clone()), "{t}");
            assert_eq!(format_type(&t), postgres, "{t}");
        }
    }

    #[test]
    fn column_names_as_postgres_gives_them() {
        assert_eq!(column_name("c.relkind"), "relkind");
        assert_eq!(column_name(r#"n.nspname as "Schema""#), "Schema");
        assert_eq!(column_name("false AS relhasoids"), "relhasoids");
        assert_eq!(column_name("pg_catalog.format_type(a.atttypid, a.atttypmod)"), "format_type");
        assert_eq!(
            column_name("(SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true) FROM pg_catalog.pg_attrdef d)"),
            "pg_get_expr"
        );
        assert_eq!(column_name("CASE WHEN c.reloftype = 0 THEN '' ELSE 'x' END"), "case");
        assert_eq!(column_name("''"), "?column?");
        assert_eq!(column_name("c.oid::pg_catalog.regclass"), "oid");
        assert_eq!(column_name("'t'::pg_catalog.regclass::pg_catalog.oid"), "oid");
    }

    #[test]
    fn string_literals() {
        assert_eq!(string_literal("'^(it''s)$' COLLATE x"), Some(("^(it's)$".into(), " COLLATE x")));
        assert_eq!(string_literal(r"E'a\\b'"), Some((r"a\b".into(), "")));
        assert_eq!(string_literal("'open"), None);
    }
}
