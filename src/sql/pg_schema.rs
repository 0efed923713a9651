//! Postgres's system catalogs as real tables DataFusion plans queries over: schema
//! `pg_catalog` (also found unqualified, as Postgres's search path puts it first) and schema
//! `information_schema`, made from Weir's catalog for each statement. Drivers and tools (SQLAlchemy,
//! pgjdbc's `DatabaseMetaData`, asyncpg, DBeaver) introspect with these; psql's own `\d`
//! queries, with syntax DataFusion cannot plan, are still answered by [`super::pg_catalog`].
//!
//! | table | rows |
//! |---|---|
//! | `pg_namespace` | `pg_catalog` (11), `public` (2200), `information_schema` (13000) |
//! | `pg_class` | every table (`relkind` `r`), view (`v`), materialized view (`m`), and a primary key's index (`i`, `<table>_pkey`) |
//! | `pg_attribute` | every column of those (`attnum` from 1; an index's key columns) |
//! | `pg_type` | the built-in types Weir sends and their array types (Postgres's OIDs) |
//! | `pg_index`, `pg_constraint` | a table's primary key |
//! | `pg_database`, `pg_roles`, `pg_user` | database `weir`, role `weir` |
//! | `pg_settings` | the settings `SHOW` knows, with their defaults |
//! | `pg_am` | `heap`, `btree` |
//! | `pg_description`, `pg_proc`, `pg_inherits`, `pg_attrdef`, `pg_enum`, `pg_collation`, `pg_extension`, `pg_sequence` | none (their columns, so queries plan) |
//! | `information_schema.schemata`, `.tables`, `.views`, `.columns` | as Postgres shows them: `table_type` `BASE TABLE` / `VIEW` (a materialized view is not listed in `tables`, as in Postgres), `data_type` in Postgres's spelling |
//!
//! OIDs: a relation's is [`super::pg_catalog::relation_oid`] (stable across restarts), an index's
//! the same of `<table>_pkey`; types have Postgres's own. Owner: role 10 (`weir`).

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Float32Array, Int16Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::error::DataFusionError;
use pgwire::api::Type;
use weir_catalog::{Catalog, Relation, RelationKind};

use super::pg_catalog::{format_type, relation_oid};
use crate::runtime::relation::relation_schema;
use crate::sql::types::{array_pairs, element_of};

/// OID of schema `pg_catalog`.
pub const PG_CATALOG_OID: i64 = 11;
/// OID of schema `public`.
pub const PUBLIC_OID: i64 = 2200;
/// OID of schema `information_schema`.
const INFORMATION_SCHEMA_OID: i64 = 13000;
/// OID of role `weir`, the owner of everything.
const OWNER_OID: i64 = 10;
/// OID of database `weir`.
const DATABASE_OID: i64 = 16384;

/// The tables of schema `pg_catalog` this module makes.
pub const PG_TABLES: &[&str] = &[
    "pg_namespace",
    "pg_class",
    "pg_attribute",
    "pg_type",
    "pg_index",
    "pg_constraint",
    "pg_database",
    "pg_roles",
    "pg_user",
    "pg_settings",
    "pg_am",
    "pg_description",
    "pg_proc",
    "pg_inherits",
    "pg_attrdef",
    "pg_enum",
    "pg_collation",
    "pg_extension",
    "pg_sequence",
];

/// The tables of schema `information_schema`.
const INFO_TABLES: &[&str] = &["schemata", "tables", "views", "columns"];

/// A cell of a catalog row.
enum V {
    I(i64),
    S(String),
    B(bool),
    F(f32),
    /// An array of small integers (`conkey`, `indkey`).
    L(Vec<i64>),
    N,
}

fn s(v: impl Into<String>) -> V {
    V::S(v.into())
}

/// Builds a table of `columns` (name, Arrow type: Int64, Int32, Int16, Utf8, Boolean,
/// Float32, or a list of Int16) from `rows`.
fn table(columns: &[(&str, DataType)], rows: Vec<Vec<V>>) -> Result<Arc<dyn TableProvider>, DataFusionError> {
    let schema = Arc::new(Schema::new(columns.iter().map(|(n, t)| Field::new(*n, t.clone(), true)).collect::<Vec<_>>()));
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len());
    for (i, (_, t)) in columns.iter().enumerate() {
        let cell = |r: &Vec<V>| match r.get(i) {
            Some(V::I(v)) => Some(*v),
            _ => None,
        };
        let array: ArrayRef = match t {
            DataType::Int64 => Arc::new(rows.iter().map(cell).collect::<Int64Array>()),
            DataType::Int32 => Arc::new(rows.iter().map(|r| cell(r).map(|v| v as i32)).collect::<Int32Array>()),
            DataType::Int16 => Arc::new(rows.iter().map(|r| cell(r).map(|v| v as i16)).collect::<Int16Array>()),
            DataType::Boolean => Arc::new(
                rows.iter()
                    .map(|r| match r.get(i) {
                        Some(V::B(b)) => Some(*b),
                        _ => None,
                    })
                    .collect::<BooleanArray>(),
            ),
            DataType::Float32 => Arc::new(
                rows.iter()
                    .map(|r| match r.get(i) {
                        Some(V::F(f)) => Some(*f),
                        _ => None,
                    })
                    .collect::<Float32Array>(),
            ),
            DataType::Utf8 => Arc::new(
                rows.iter()
                    .map(|r| match r.get(i) {
                        Some(V::S(v)) => Some(v.clone()),
                        _ => None,
                    })
                    .collect::<StringArray>(),
            ),
            DataType::List(item) if *item.data_type() == DataType::Int16 => {
                let mut list = arrow::array::ListBuilder::new(arrow::array::Int16Builder::new());
                for r in &rows {
                    match r.get(i) {
                        Some(V::L(values)) => {
                            for v in values {
                                list.values().append_value(*v as i16);
                            }
                            list.append(true);
                        }
                        _ => list.append(false),
                    }
                }
                Arc::new(list.finish())
            }
            // ACL arrays and the like: always NULL here.
            other => arrow::array::new_null_array(other, rows.len()),
        };
        arrays.push(array);
    }
    let batch = RecordBatch::try_new(Arc::clone(&schema), arrays)?;
    Ok(Arc::new(MemTable::try_new(schema, vec![vec![batch]])?))
}

use DataType::{Boolean as BOOL, Float32 as F32, Int16 as I16, Int32 as I32, Int64 as I64, Utf8 as TEXT};

/// The relations Postgres's catalogs list: tables, views and materialized views.
fn relations(catalog: &Catalog) -> impl Iterator<Item = &Relation> {
    catalog.relations.values().filter(|r| crate::sql::temporary_tables::listed(r))
}

fn relkind(rel: &Relation) -> &'static str {
    match rel.kind {
        RelationKind::View => "v",
        RelationKind::MaterializedView => "m",
        _ => "r",
    }
}

/// The built-in types of `pg_type`: what Weir sends, plus the names drivers look up.
fn builtin_types() -> Vec<Type> {
    vec![
        Type::BOOL,
        Type::BYTEA,
        Type::CHAR,
        Type::NAME,
        Type::INT8,
        Type::INT2,
        Type::INT4,
        Type::TEXT,
        Type::OID,
        Type::JSON,
        Type::FLOAT4,
        Type::FLOAT8,
        Type::BPCHAR,
        Type::VARCHAR,
        Type::DATE,
        Type::TIME,
        Type::TIMESTAMP,
        Type::TIMESTAMPTZ,
        Type::INTERVAL,
        Type::NUMERIC,
        Type::UUID,
        Type::JSONB,
        Type::BOOL_ARRAY,
        Type::BYTEA_ARRAY,
        Type::INT2_ARRAY,
        Type::INT4_ARRAY,
        Type::INT8_ARRAY,
        Type::TEXT_ARRAY,
        Type::VARCHAR_ARRAY,
        Type::FLOAT4_ARRAY,
        Type::FLOAT8_ARRAY,
        Type::DATE_ARRAY,
        Type::TIME_ARRAY,
        Type::TIMESTAMP_ARRAY,
        Type::TIMESTAMPTZ_ARRAY,
        Type::INTERVAL_ARRAY,
        Type::NUMERIC_ARRAY,
    ]
}

/// `pg_type.typlen` of a built-in type (-1: variable length).
fn type_len(t: &Type) -> i64 {
    match *t {
        Type::BOOL | Type::CHAR => 1,
        Type::INT2 => 2,
        Type::INT4 | Type::OID | Type::FLOAT4 | Type::DATE => 4,
        Type::INT8 | Type::FLOAT8 | Type::TIME | Type::TIMESTAMP | Type::TIMESTAMPTZ => 8,
        Type::INTERVAL | Type::UUID => 16,
        Type::NAME => 64,
        _ => -1,
    }
}

/// `pg_type.typcategory` of a built-in type.
fn type_category(t: &Type) -> &'static str {
    match element_of(t) {
        Some(_) => "A",
        None => match *t {
            Type::BOOL => "B",
            Type::INT2 | Type::INT4 | Type::INT8 | Type::OID | Type::FLOAT4 | Type::FLOAT8 | Type::NUMERIC => "N",
            Type::DATE | Type::TIME | Type::TIMESTAMP | Type::TIMESTAMPTZ => "D",
            Type::INTERVAL => "T",
            Type::JSON | Type::JSONB | Type::UUID | Type::BYTEA => "U",
            _ => "S",
        },
    }
}

/// The `information_schema.columns.data_type` / `format_type` name of a column's type, without
/// its modifiers (`numeric(12,2)` is `numeric`).
fn base_type_name(t: &DataType) -> String {
    let full = format_type(t);
    match full.find('(') {
        Some(i) if !full.starts_with("timestamp") && !full.starts_with("time") => full[..i].to_string(),
        _ => full.replace("(3)", "").replace("(6)", "").replace("(0)", "").replace("(9)", ""),
    }
}

/// Table `name` of schema `pg_catalog` for `catalog`, if this module makes it.
///
/// # Errors
/// Arrow's, for a batch that does not build (a bug).
pub fn pg_table(catalog: &Catalog, name: &str) -> Result<Option<Arc<dyn TableProvider>>, DataFusionError> {
    let owner = || V::I(OWNER_OID);
    Ok(Some(match name {
        "pg_namespace" => table(
            &[("oid", I64), ("nspname", TEXT), ("nspowner", I64), ("nspacl", TEXT)],
            vec![
                vec![V::I(PG_CATALOG_OID), s("pg_catalog"), owner(), V::N],
                vec![V::I(PUBLIC_OID), s("public"), owner(), V::N],
                vec![V::I(INFORMATION_SCHEMA_OID), s("information_schema"), owner(), V::N],
            ],
        )?,
        "pg_class" => {
            let mut rows = Vec::new();
            for rel in relations(catalog) {
                let natts = rel.columns.len() as i64;
                let has_pk = !rel.primary_key.is_empty();
                let mut row = class_row(relation_oid(&rel.name), &rel.name, relkind(rel), natts, has_pk);
                if crate::sql::temporary_tables::is_temporary_table(rel) {
                    // relpersistence: Postgres's 't' for a temporary table.
                    row[15] = s("t");
                }
                rows.push(row);
                if has_pk {
                    let index = format!("{}_pkey", rel.name);
                    rows.push(class_row(relation_oid(&index), &index, "i", rel.primary_key.len() as i64, false));
                }
            }
            table(
                &[
                    ("oid", I64),
                    ("relname", TEXT),
                    ("relnamespace", I64),
                    ("reltype", I64),
                    ("reloftype", I64),
                    ("relowner", I64),
                    ("relam", I64),
                    ("relfilenode", I64),
                    ("reltablespace", I64),
                    ("relpages", I32),
                    ("reltuples", F32),
                    ("relallvisible", I32),
                    ("reltoastrelid", I64),
                    ("relhasindex", BOOL),
                    ("relisshared", BOOL),
                    ("relpersistence", TEXT),
                    ("relkind", TEXT),
                    ("relnatts", I16),
                    ("relchecks", I16),
                    ("relhasrules", BOOL),
                    ("relhastriggers", BOOL),
                    ("relhassubclass", BOOL),
                    ("relrowsecurity", BOOL),
                    ("relforcerowsecurity", BOOL),
                    ("relispopulated", BOOL),
                    ("relreplident", TEXT),
                    ("relispartition", BOOL),
                    ("relacl", TEXT),
                    ("reloptions", TEXT),
                    ("relpartbound", TEXT),
                ],
                rows,
            )?
        }
        "pg_attribute" => {
            let mut rows = Vec::new();
            for rel in relations(catalog) {
                let Ok(schema) = relation_schema(rel) else { continue };
                let oid = relation_oid(&rel.name);
                let table_like = rel.kind == RelationKind::Table;
                for (i, (column, field)) in rel.columns.iter().zip(schema.fields()).enumerate() {
                    let t = crate::sql::types::pg_type(field.data_type());
                    let not_null = table_like && (!column.nullable || rel.primary_key.contains(&column.name));
                    let generated = if column.computed.is_some() { "s" } else { "" };
                    let mut row = attribute_row(oid, &column.name, &t, i as i64 + 1, not_null, generated);
                    row[8] = V::I(typmod(field.data_type()));
                    rows.push(row);
                }
                if !rel.primary_key.is_empty() {
                    let index = relation_oid(&format!("{}_pkey", rel.name));
                    for (i, key) in rel.primary_key.iter().enumerate() {
                        let t = rel
                            .columns
                            .iter()
                            .zip(schema.fields())
                            .find(|(c, _)| &c.name == key)
                            .map_or(Type::TEXT, |(_, f)| crate::sql::types::pg_type(f.data_type()));
                        rows.push(attribute_row(index, key, &t, i as i64 + 1, true, ""));
                    }
                }
            }
            table(
                &[
                    ("attrelid", I64),
                    ("attname", TEXT),
                    ("atttypid", I64),
                    ("attstattarget", I32),
                    ("attlen", I16),
                    ("attnum", I16),
                    ("attndims", I32),
                    ("attcacheoff", I32),
                    ("atttypmod", I32),
                    ("attbyval", BOOL),
                    ("attalign", TEXT),
                    ("attstorage", TEXT),
                    ("attnotnull", BOOL),
                    ("atthasdef", BOOL),
                    ("atthasmissing", BOOL),
                    ("attidentity", TEXT),
                    ("attgenerated", TEXT),
                    ("attisdropped", BOOL),
                    ("attislocal", BOOL),
                    ("attinhcount", I32),
                    ("attcollation", I64),
                    ("attacl", TEXT),
                    ("attoptions", TEXT),
                ],
                rows,
            )?
        }
        "pg_type" => {
            let rows = builtin_types()
                .iter()
                .map(|t| {
                    let elem = element_of(t).map_or(0, |e| i64::from(e.oid()));
                    let array = array_pairs().into_iter().find(|(e, _)| e == t).map_or(0, |(_, a)| i64::from(a.oid()));
                    vec![
                        V::I(i64::from(t.oid())),
                        s(t.name()),
                        V::I(PG_CATALOG_OID),
                        owner(),
                        V::I(type_len(t)),
                        V::B(type_len(t) > 0 && type_len(t) <= 8),
                        s("b"),
                        s(type_category(t)),
                        V::B(false),
                        V::B(true),
                        s(","),
                        V::I(0),
                        V::I(elem),
                        V::I(array),
                        s(format!("{}in", t.name())),
                        s(format!("{}out", t.name())),
                        s("i"),
                        s("p"),
                        V::B(false),
                        V::I(0),
                        V::I(-1),
                        V::I(0),
                        V::I(0),
                        V::N,
                        V::N,
                    ]
                })
                .collect();
            table(
                &[
                    ("oid", I64),
                    ("typname", TEXT),
                    ("typnamespace", I64),
                    ("typowner", I64),
                    ("typlen", I16),
                    ("typbyval", BOOL),
                    ("typtype", TEXT),
                    ("typcategory", TEXT),
                    ("typispreferred", BOOL),
                    ("typisdefined", BOOL),
                    ("typdelim", TEXT),
                    ("typrelid", I64),
                    ("typelem", I64),
                    ("typarray", I64),
                    ("typinput", TEXT),
                    ("typoutput", TEXT),
                    ("typalign", TEXT),
                    ("typstorage", TEXT),
                    ("typnotnull", BOOL),
                    ("typbasetype", I64),
                    ("typtypmod", I32),
                    ("typndims", I32),
                    ("typcollation", I64),
                    ("typdefault", TEXT),
                    ("typacl", TEXT),
                ],
                rows,
            )?
        }
        "pg_index" => {
            let rows = relations(catalog)
                .filter(|r| !r.primary_key.is_empty())
                .map(|r| {
                    let positions = key_positions(r);
                    vec![
                        V::I(relation_oid(&format!("{}_pkey", r.name)).into()),
                        V::I(relation_oid(&r.name).into()),
                        V::I(positions.len() as i64),
                        V::I(positions.len() as i64),
                        V::B(true),
                        V::B(true),
                        V::B(false),
                        V::B(true),
                        V::B(true),
                        V::B(true),
                        V::B(false),
                        V::L(positions.clone()),
                        V::N,
                        V::N,
                    ]
                })
                .collect();
            table(
                &[
                    ("indexrelid", I64),
                    ("indrelid", I64),
                    ("indnatts", I16),
                    ("indnkeyatts", I16),
                    ("indisunique", BOOL),
                    ("indisprimary", BOOL),
                    ("indisexclusion", BOOL),
                    ("indimmediate", BOOL),
                    ("indisvalid", BOOL),
                    ("indisready", BOOL),
                    ("indisclustered", BOOL),
                    ("indkey", INT2_LIST.clone()),
                    ("indexprs", TEXT),
                    ("indpred", TEXT),
                ],
                rows,
            )?
        }
        "pg_constraint" => {
            let rows = relations(catalog)
                .filter(|r| !r.primary_key.is_empty())
                .map(|r| {
                    let positions = key_positions(r);
                    let name = format!("{}_pkey", r.name);
                    vec![
                        V::I(relation_oid(&format!("{name}_constraint")).into()),
                        s(name.clone()),
                        V::I(PUBLIC_OID),
                        s("p"),
                        V::B(false),
                        V::B(false),
                        V::B(true),
                        V::I(relation_oid(&r.name).into()),
                        V::I(relation_oid(&name).into()),
                        V::L(positions.clone()),
                        V::N,
                    ]
                })
                .collect();
            table(
                &[
                    ("oid", I64),
                    ("conname", TEXT),
                    ("connamespace", I64),
                    ("contype", TEXT),
                    ("condeferrable", BOOL),
                    ("condeferred", BOOL),
                    ("convalidated", BOOL),
                    ("conrelid", I64),
                    ("conindid", I64),
                    ("conkey", INT2_LIST.clone()),
                    ("confkey", TEXT),
                ],
                rows,
            )?
        }
        "pg_database" => table(
            &[
                ("oid", I64),
                ("datname", TEXT),
                ("datdba", I64),
                ("encoding", I32),
                ("datlocprovider", TEXT),
                ("datcollate", TEXT),
                ("datctype", TEXT),
                ("daticulocale", TEXT),
                ("datistemplate", BOOL),
                ("datallowconn", BOOL),
                ("datconnlimit", I32),
                ("dattablespace", I64),
                ("datacl", DataType::List(Arc::new(Field::new("item", TEXT, true)))),
            ],
            vec![vec![
                V::I(DATABASE_OID),
                s("weir"),
                owner(),
                V::I(6),
                s("c"),
                s("C"),
                s("C"),
                V::N,
                V::B(false),
                V::B(true),
                V::I(-1),
                V::I(1663),
                V::N,
            ]],
        )?,
        "pg_roles" | "pg_user" => {
            let (name_col, id_col) = if name == "pg_roles" { ("rolname", "oid") } else { ("usename", "usesysid") };
            table(
                &[
                    (name_col, TEXT),
                    (id_col, I64),
                    (if name == "pg_roles" { "rolsuper" } else { "usesuper" }, BOOL),
                    (if name == "pg_roles" { "rolcanlogin" } else { "usecreatedb" }, BOOL),
                ],
                vec![vec![s("weir"), owner(), V::B(true), V::B(true)]],
            )?
        }
        "pg_settings" => {
            // The session's values (the statement's planning settings), under Postgres's names.
            let session = crate::sql::settings::planning_settings();
            table(
                &[("name", TEXT), ("setting", TEXT), ("unit", TEXT), ("category", TEXT), ("short_desc", TEXT), ("context", TEXT), ("vartype", TEXT), ("source", TEXT)],
                super::show::DEFAULT_SETTINGS
                    .iter()
                    .map(|(k, v)| {
                        let set = session.get(crate::sql::settings::canonical_key(k));
                        let name = match *k {
                            "timezone" => "TimeZone",
                            "datestyle" => "DateStyle",
                            other => other,
                        };
                        let source = if set.is_some() { "session" } else { "default" };
                        vec![s(name), s(set.map_or(*v, String::as_str)), V::N, s("Weir"), V::N, s("user"), s("string"), s(source)]
                    })
                    .collect(),
            )?
        }
        "pg_am" => table(
            &[("oid", I64), ("amname", TEXT), ("amhandler", TEXT), ("amtype", TEXT)],
            vec![vec![V::I(2), s("heap"), s("heap_tableam_handler"), s("t")], vec![V::I(403), s("btree"), s("bthandler"), s("i")]],
        )?,
        "pg_description" => table(&[("objoid", I64), ("classoid", I64), ("objsubid", I32), ("description", TEXT)], vec![])?,
        "pg_proc" => table(
            &[("oid", I64), ("proname", TEXT), ("pronamespace", I64), ("proowner", I64), ("prokind", TEXT), ("prorettype", I64), ("proargtypes", TEXT), ("prosrc", TEXT)],
            vec![],
        )?,
        "pg_inherits" => table(&[("inhrelid", I64), ("inhparent", I64), ("inhseqno", I32)], vec![])?,
        "pg_attrdef" => table(&[("oid", I64), ("adrelid", I64), ("adnum", I16), ("adbin", TEXT)], vec![])?,
        "pg_enum" => table(&[("oid", I64), ("enumtypid", I64), ("enumsortorder", F32), ("enumlabel", TEXT)], vec![])?,
        "pg_collation" => table(&[("oid", I64), ("collname", TEXT), ("collnamespace", I64)], vec![])?,
        "pg_extension" => table(&[("oid", I64), ("extname", TEXT), ("extversion", TEXT)], vec![])?,
        "pg_sequence" => table(
            &[("seqrelid", I64), ("seqtypid", I64), ("seqstart", I64), ("seqincrement", I64), ("seqmax", I64), ("seqmin", I64), ("seqcache", I64), ("seqcycle", BOOL)],
            vec![],
        )?,
        _ => return Ok(None),
    }))
}

/// Postgres's type modifier of a column of Arrow type `t` (`atttypmod`): `numeric(p,s)` is
/// `(p << 16 | s) + 4`, a timestamp's or time's is its fractional digits (6 at most); -1 for
/// none.
pub fn typmod(t: &DataType) -> i64 {
    use arrow::datatypes::TimeUnit;
    let digits = |u: &TimeUnit| match u {
        TimeUnit::Second => 0,
        TimeUnit::Millisecond => 3,
        TimeUnit::Microsecond | TimeUnit::Nanosecond => 6,
    };
    match t {
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => ((i64::from(*p) << 16) | i64::from(*s as u8)) + 4,
        DataType::Timestamp(u, _) | DataType::Time64(u) | DataType::Time32(u) => digits(u),
        _ => -1,
    }
}

/// The 1-based column numbers of `rel`'s primary key, as text (pg_index.indkey, conkey).
fn key_positions(rel: &Relation) -> Vec<i64> {
    rel.primary_key.iter().filter_map(|k| rel.columns.iter().position(|c| &c.name == k).map(|p| p as i64 + 1)).collect()
}

/// `int2[]` (`conkey`; `indkey`, an `int2vector` in Postgres, read alike).
static INT2_LIST: std::sync::LazyLock<DataType> =
    std::sync::LazyLock::new(|| DataType::List(Arc::new(Field::new("item", DataType::Int16, true))));

fn class_row(oid: u32, name: &str, kind: &str, natts: i64, has_index: bool) -> Vec<V> {
    vec![
        V::I(oid.into()),
        s(name),
        V::I(PUBLIC_OID),
        V::I(0),
        V::I(0),
        V::I(OWNER_OID),
        V::I(if kind == "i" { 403 } else if kind == "v" { 0 } else { 2 }),
        V::I(0),
        V::I(0),
        V::I(0),
        V::F(-1.0),
        V::I(0),
        V::I(0),
        V::B(has_index),
        V::B(false),
        s("p"),
        s(kind),
        V::I(natts),
        V::I(0),
        V::B(false),
        V::B(false),
        V::B(false),
        V::B(false),
        V::B(false),
        V::B(true),
        s("d"),
        V::B(false),
        V::N,
        V::N,
        V::N,
    ]
}

fn attribute_row(relid: u32, name: &str, t: &Type, num: i64, not_null: bool, generated: &str) -> Vec<V> {
    vec![
        V::I(relid.into()),
        s(name),
        V::I(i64::from(t.oid())),
        V::I(-1),
        V::I(type_len(t)),
        V::I(num),
        V::I(i64::from(element_of(t).is_some())),
        V::I(-1),
        V::I(-1),
        V::B(type_len(t) > 0 && type_len(t) <= 8),
        s("i"),
        s("p"),
        V::B(not_null),
        V::B(false),
        V::B(false),
        s(""),
        s(generated),
        V::B(false),
        V::B(true),
        V::I(0),
        V::I(0),
        V::N,
        V::N,
    ]
}

/// Table `name` of `information_schema` for `catalog`.
fn info_table(catalog: &Catalog, name: &str) -> Result<Option<Arc<dyn TableProvider>>, DataFusionError> {
    let in_public = |name: &str| vec![s("weir"), s("public"), s(name)];
    Ok(Some(match name {
        "schemata" => table(
            &[("catalog_name", TEXT), ("schema_name", TEXT), ("schema_owner", TEXT)],
            ["pg_catalog", "public", "information_schema"].iter().map(|n| vec![s("weir"), s(*n), s("weir")]).collect(),
        )?,
        "tables" => table(
            &[("table_catalog", TEXT), ("table_schema", TEXT), ("table_name", TEXT), ("table_type", TEXT), ("is_insertable_into", TEXT)],
            relations(catalog)
                .filter(|r| r.kind != RelationKind::MaterializedView)
                .map(|r| {
                    let mut row = in_public(&r.name);
                    let plain = r.kind == RelationKind::Table;
                    row.push(s(if plain { "BASE TABLE" } else { "VIEW" }));
                    row.push(s(if plain { "YES" } else { "NO" }));
                    row
                })
                .collect(),
        )?,
        "views" => table(
            &[("table_catalog", TEXT), ("table_schema", TEXT), ("table_name", TEXT), ("view_definition", TEXT)],
            relations(catalog)
                .filter(|r| r.kind == RelationKind::View)
                .map(|r| {
                    let mut row = in_public(&r.name);
                    row.push(s(r.query.clone().unwrap_or_default()));
                    row
                })
                .collect(),
        )?,
        "columns" => {
            let mut rows = Vec::new();
            // Postgres's view lists tables and views, not materialized views.
            for rel in relations(catalog).filter(|r| r.kind != RelationKind::MaterializedView) {
                let Ok(schema) = relation_schema(rel) else { continue };
                for (i, (column, field)) in rel.columns.iter().zip(schema.fields()).enumerate() {
                    let mut row = in_public(&rel.name);
                    row.push(s(column.name.clone()));
                    row.push(V::I(i as i64 + 1));
                    row.push(V::N);
                    let nullable = !(rel.kind == RelationKind::Table && (!column.nullable || rel.primary_key.contains(&column.name)));
                    row.push(s(if nullable { "YES" } else { "NO" }));
                    row.push(s(base_type_name(field.data_type())));
                    let (precision, scale) = match field.data_type() {
                        DataType::Decimal128(p, sc) | DataType::Decimal256(p, sc) => (V::I(i64::from(*p)), V::I(i64::from(*sc))),
                        _ => (V::N, V::N),
                    };
                    row.push(precision);
                    row.push(scale);
                    row.push(s(crate::sql::types::pg_type(field.data_type()).name()));
                    let datetime = typmod(field.data_type());
                    row.push(if matches!(field.data_type(), DataType::Timestamp(..) | DataType::Time32(_) | DataType::Time64(_)) {
                        V::I(datetime)
                    } else {
                        V::N
                    });
                    row.push(V::N);
                    row.push(V::N);
                    row.push(s("weir"));
                    row.push(s("pg_catalog"));
                    row.push(s("NO"));
                    row.push(s(if column.computed.is_some() { "ALWAYS" } else { "NEVER" }));
                    row.push(column.computed.clone().map_or(V::N, V::S));
                    row.push(s(if rel.kind == RelationKind::Table { "YES" } else { "NO" }));
                    rows.push(row);
                }
            }
            table(
                &[
                    ("table_catalog", TEXT),
                    ("table_schema", TEXT),
                    ("table_name", TEXT),
                    ("column_name", TEXT),
                    ("ordinal_position", I32),
                    ("column_default", TEXT),
                    ("is_nullable", TEXT),
                    ("data_type", TEXT),
                    ("numeric_precision", I32),
                    ("numeric_scale", I32),
                    ("udt_name", TEXT),
                    ("datetime_precision", I32),
                    ("character_maximum_length", I32),
                    ("character_octet_length", I32),
                    ("udt_catalog", TEXT),
                    ("udt_schema", TEXT),
                    ("is_identity", TEXT),
                    ("is_generated", TEXT),
                    ("generation_expression", TEXT),
                    ("is_updatable", TEXT),
                ],
                rows,
            )?
        }
        _ => return Ok(None),
    }))
}

/// Schema `pg_catalog` or `information_schema` over one statement's catalog. `fallback`
/// answers the names this module does not make (`pg_catalog.pg_stat_activity`: Weir's system
/// table).
pub struct PgSchema {
    pub catalog: Arc<Catalog>,
    pub information_schema: bool,
    pub fallback: Arc<dyn SchemaProvider>,
}

impl std::fmt::Debug for PgSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.information_schema { "information_schema" } else { "pg_catalog" })
    }
}

#[async_trait]
impl SchemaProvider for PgSchema {
    fn table_names(&self) -> Vec<String> {
        let names = if self.information_schema { INFO_TABLES } else { PG_TABLES };
        names.iter().map(|n| n.to_string()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>, DataFusionError> {
        if self.information_schema {
            return info_table(&self.catalog, name);
        }
        match pg_table(&self.catalog, name)? {
            Some(t) => Ok(Some(t)),
            None if name == "pg_stat_activity" => self.fallback.table(name).await,
            None => Ok(None),
        }
    }

    fn table_exist(&self, name: &str) -> bool {
        if self.information_schema {
            INFO_TABLES.contains(&name)
        } else {
            PG_TABLES.contains(&name) || name == "pg_stat_activity"
        }
    }
}
