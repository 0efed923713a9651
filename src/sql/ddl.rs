//! CREATE TABLE, CREATE VIEW and CREATE MATERIALIZED VIEW (DROP is the engine's:
//! [`Engine::drop_relations`]).
//!
//! Every DDL statement is one epoch: the new catalog is committed in the same atomic write as
//! the state it creates (a view's backfill) or removes (a dropped relation's state tables), so
//! a crash leaves the old catalog or the new one, never a mix.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use sqlparser::ast::Query;
use weir_catalog::{Column, Relation, RelationKind, Watermark};

use crate::engine::Engine;
use crate::error::{ErrorKind, Result, WeirError};
use crate::runtime::relation::connector_of;
use crate::sql::parser::{ColumnSpec, CreateTable, SchemaChange, WeirStatement};
use crate::sql::planning::{plan_job, JobKind, PlanningBase};
use crate::sql::relations::{session_context, Snapshot};
use crate::state::EpochWrites;

/// `CREATE TABLE`.
pub async fn create_table(engine: &mut Engine, t: &CreateTable, definition: &str) -> Result<()> {
    if t.name.is_empty() {
        return Err(WeirError::syntax("zero-length delimited identifier: a table needs a name", None));
    }
    if engine.catalog.get(&t.name).is_some() {
        if t.if_not_exists {
            crate::sql::notices::relation_exists(&t.name);
            return Ok(());
        }
        return Err(ErrorKind::DuplicateTable(t.name.clone()).into());
    }
    let mut rel = table_relation(t, definition).await?;
    let mut catalog = (*engine.catalog).clone();
    if let Some(side) = t.options.get(crate::engine::LATE_ROWS_TABLE) {
        create_late_rows_table(&mut catalog, &t.name, side, &rel.columns)?;
    }
    if let Some(side) = t.options.get(crate::source::DEAD_LETTER_TABLE) {
        create_dead_letter_table(&mut catalog, &t.name, side)?;
    }
    if connector_of(&rel) == "table" {
        rel.state_table = Some(catalog.allocate_state_table());
    }
    catalog.relations.insert(t.name.clone(), rel);
    engine.commit(EpochWrites::default(), Some(catalog))
}

/// The relation of table `t` (without its state table), with every check of `CREATE TABLE`
/// made: its options (the connector's and the server's), column types, computed columns, the
/// primary key, the watermark.
///
/// # Errors
/// The first check that fails, as `CREATE TABLE` reports it.
async fn table_relation(t: &CreateTable, definition: &str) -> Result<Relation> {
    let named = t.options.get("connector").map(|c| c.to_lowercase()).unwrap_or_else(|| "table".into());
    if t.options.contains_key(crate::source::DEAD_LETTER_TOPIC) && !matches!(named.as_str(), "kafka" | "upsert-kafka") {
        return Err(WeirError::option(format!(
            "table {}: '{}' is for 'kafka' and 'upsert-kafka' tables (use 'dead-letter.table' for a '{named}' table)",
            t.name,
            crate::source::DEAD_LETTER_TOPIC
        )));
    }
    let (connector, _) =
        weir_connectors::validate(&t.options, table_options).map_err(|e| WeirError::option(format!("table {}: {e}", t.name)))?;
    let plain = connector == "table";
    for key in [crate::engine::IDLE_ADVANCE, crate::source::IDLE_TIMEOUT] {
        if let Some(value) = t.options.get(key) {
            crate::plan::duration::parse_duration_ms(key, value)?;
        }
    }
    if connector == "upsert-kafka" && t.primary_key.is_empty() {
        // Flink: "'upsert-kafka' tables require to define a PRIMARY KEY constraint".
        return Err(WeirError::plan(format!(
            "table {}: an 'upsert-kafka' table needs a PRIMARY KEY (..) NOT ENFORCED: its columns are the Kafka message key",
            t.name
        )));
    }

    // Physical columns first: computed columns and the watermark are typed against them.
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    for c in &t.columns {
        if columns.iter().any(|x: &Column| x.name == c.name) {
            return Err(WeirError::new(ErrorKind::DuplicateColumn(format!(
                "column \"{}\" specified more than once in table {}",
                c.name, t.name
            ))));
        }
        if let Some(sql_type) = &c.data_type {
            if c.metadata.is_some() && plain {
                return Err(WeirError::plan(format!(
                    "metadata column {} on a plain table; METADATA FROM reads a connector's record metadata",
                    c.name
                )));
            }
            let arrow_type = crate::sql::types::arrow_type(sql_type)?;
            let nullable = !c.not_null && !t.primary_key.contains(&c.name);
            fields.push(Field::new(&c.name, arrow_type.clone(), nullable));
            columns.push(Column {
                name: c.name.clone(),
                arrow_type: arrow_type.to_string(),
                sql_type: declared_type_name(sql_type, &arrow_type),
                nullable,
                computed: c.metadata.as_ref().map(|key| crate::source::metadata_marker(key)),
            });
        }
    }
    let physical = Arc::new(Schema::new(fields.clone()));
    let values: Vec<Field> =
        fields.iter().zip(&columns).filter(|(_, c)| c.computed.is_none()).map(|(f, _)| f.clone()).collect();
    for key in ["format", "value.format"] {
        if let Some(format) = t.options.get(key) {
            weir_connectors::format::check_declared_types(format, &Arc::new(Schema::new(values.clone())))
                .map_err(|e| WeirError::unsupported(format!("table {}: {e}", t.name)))?;
        }
    }
    if let (true, Some(fields)) = (connector == "kafka", weir_connectors::format::key_fields(&t.options)) {
        let message = Arc::new(Schema::new(values.clone()));
        let key = crate::source::kafka::key_field_columns(&t.name, &fields, &message)?;
        weir_connectors::format::check_key_fields(&t.options, message, &key)
            .map_err(|e| WeirError::option(format!("table {}: {e}", t.name)))?;
    }
    for c in &t.columns {
        if let Some(expr) = &c.computed {
            if plain {
                return Err(WeirError::unsupported(format!(
                    "computed column {} on a plain table; declare it on a connector table, or compute it in a view",
                    c.name
                )));
            }
            let arrow_type = expr_type(&t.name, &physical, &expr.to_string()).await?;
            fields.push(Field::new(&c.name, arrow_type.clone(), true));
            columns.push(Column {
                name: c.name.clone(),
                arrow_type: arrow_type.to_string(),
                sql_type: format!("AS {expr}"),
                nullable: true,
                computed: Some(expr.to_string()),
            });
        }
    }
    let all = Arc::new(Schema::new(fields));
    let valid = || columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ");
    for (i, k) in t.primary_key.iter().enumerate() {
        // Flink's rules (its `DefaultSchemaResolver`): each column once, a physical one.
        if t.primary_key[..i].contains(k) {
            return Err(ErrorKind::InvalidTableDefinition(format!(
                "Invalid primary key. A primary key must not contain duplicate columns. Found: [{k}]"
            ))
            .into());
        }
        if t.columns.iter().any(|c| &c.name == k && (c.computed.is_some() || c.metadata.is_some())) {
            return Err(ErrorKind::InvalidTableDefinition(format!(
                "Could not create a PRIMARY KEY. Column '{k}' is not a physical column."
            ))
            .into());
        }
        if all.index_of(k).is_err() {
            return Err(ErrorKind::UnknownColumn(format!(
                "primary key column \"{k}\" does not exist in table {}; columns: {}",
                t.name,
                valid()
            ))
            .into());
        }
    }
    let watermark = match &t.watermark {
        None => None,
        Some((column, expr)) => {
            let Ok(field) = all.field_with_name(column) else {
                return Err(ErrorKind::UnknownColumn(format!(
                    "WATERMARK FOR {column}: column \"{column}\" does not exist in table {}; columns: {}",
                    t.name,
                    valid()
                ))
                .into());
            };
            let proctime = t.columns.iter().any(|c| {
                &c.name == column
                    && c.computed.as_ref().is_some_and(|e| {
                        let text = e.to_string().to_ascii_uppercase();
                        text == "PROCTIME()" || text == "CURRENT_ROW_TIMESTAMP()"
                    })
            });
            if proctime {
                return Err(ErrorKind::InvalidTableDefinition(format!(
                    "WATERMARK FOR {column}: A watermark can not be defined for a processing-time attribute."
                ))
                .into());
            }
            if !matches!(field.data_type(), DataType::Timestamp(..)) {
                return Err(WeirError::plan(format!(
                    "WATERMARK FOR {column}: column {column} has type {}, but the event-time attribute of a watermark must be of type TIMESTAMP(3) or TIMESTAMP_LTZ(3)",
                    sql_type_of(&columns, column)
                )));
            }
            let wm_type = expr_type(&t.name, &all, &expr.to_string()).await?;
            if !matches!(wm_type, DataType::Timestamp(..)) {
                return Err(WeirError::plan(format!(
                    "WATERMARK FOR {column} AS {expr}: the watermark expression has type {wm_type}, but it must return a TIMESTAMP (the event-time type of {column})"
                )));
            }
            Some(Watermark { column: column.clone(), expr: expr.to_string() })
        }
    };
    if plain {
        // Fails early for types the state codec cannot store.
        crate::state::RowCodec::try_new(all.fields().iter().map(|f| f.data_type().clone()).collect())?;
    }
    crate::source::fails_on_decode_error(&t.name, &t.options)?;
    // In the order declared, as Flink keeps it (`SELECT *`, DESCRIBE): a computed column may
    // stand between physical ones.
    let declared = |name: &str| t.columns.iter().position(|c| c.name == name).unwrap_or(usize::MAX);
    columns.sort_by_key(|c| declared(&c.name));
    let rel = Relation {
            name: t.name.clone(),
            kind: RelationKind::Table,
            state_table: None,
            columns,
            primary_key: t.primary_key.clone(),
            stream_key: None,
            watermark,
            options: t.options.clone(),
            definition: definition.to_string(),
            query: None,
            depends_on: vec![],
            job: None,
            operator_state: BTreeMap::new(),
            emit_on_window_close: false,
            temporary_views: Vec::new(),
    };
    if connector == "nexmark" || connector == "datagen" {
        // Checks the declared columns against the generator's table (nexmark) or the
        // per-column options (datagen) now, not at first read.
        crate::source::SourceTask::open("", &rel, None, None)?;
    }
    Ok(rel)
}

/// Whether option `key` of a table may change while jobs read or write it: the client's
/// settings (`properties.*`: brokers, security, timeouts), the idle-source options and how
/// often a Kafka source looks for new partitions. The others decide what the jobs read or
/// write (the topic, the path, the format) and so what their positions and state mean.
fn changes_live(key: &str) -> bool {
    key.starts_with("properties.")
        || [crate::source::IDLE_TIMEOUT, crate::engine::IDLE_ADVANCE, weir_connectors::kafka::DISCOVERY_INTERVAL].contains(&key)
}

/// `ALTER TABLE [IF EXISTS] name SET ('k' = 'v', ...)` / `RESET ('k', ...)` (Flink's): changes
/// the options of connector table `name`, checked as `CREATE TABLE` checks them, and its
/// definition (`SHOW CREATE TABLE`). The jobs that read or write the table start again from
/// the checkpoint the statement commits, with the new options (Flink changes the catalog only,
/// and a job sees the change when it is submitted again); one that cannot open its connectors
/// with them waits to restart, and a job waiting to restart tries at once. So a job whose
/// brokers moved, or whose credentials changed, goes on from where it was.
///
/// # Errors
/// `UnknownTable` (unless `if_exists`); `Plan` for a view or materialized view; `Unsupported`
/// for a plain table (no connector options); `InvalidOption` for a change of `'connector'`,
/// for options `CREATE TABLE` would refuse, and, while jobs read or write the table, for a
/// change of an option other than `properties.*`, the idle-source ones and the partition
/// discovery interval ([`changes_live`]).
pub async fn alter_table_options(
    engine: &mut Engine,
    name: &str,
    if_exists: bool,
    set: &BTreeMap<String, String>,
    reset: &[String],
) -> Result<()> {
    let Some(rel) = engine.catalog.get(name).cloned() else {
        return skipped_if_exists(name, if_exists);
    };
    if rel.kind != RelationKind::Table {
        return Err(WeirError::plan(format!(
            "ALTER TABLE {name}: {name} is a {}; ALTER TABLE .. SET changes a connector table's options",
            rel.kind.sql_name()
        )));
    }
    if connector_of(&rel) == "table" {
        return Err(WeirError::unsupported(format!("ALTER TABLE {name} SET/RESET: a plain table has no connector options")));
    }
    let mut options = rel.options.clone();
    for key in reset {
        if options.remove(key).is_none() {
            return Err(WeirError::option(format!("table {name} has no option '{key}' to RESET")));
        }
    }
    options.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
    let changed: Vec<String> =
        options.keys().chain(rel.options.keys()).filter(|k| options.get(*k) != rel.options.get(*k)).cloned().collect();
    if changed.iter().any(|k| k.as_str() == "connector") {
        return Err(WeirError::option(format!(
            "table {name}: 'connector' cannot change; drop the table and create it again"
        )));
    }
    if changed.is_empty() {
        return Ok(());
    }
    // Checked as CREATE TABLE checks them first: a misspelt key gets its suggestion.
    let WeirStatement::CreateTable(mut table) = crate::sql::parser::parse_statement(&rel.definition)? else {
        return Err(WeirError::internal(format!("the definition of table {name} is not a CREATE TABLE")));
    };
    table.options = options;
    table.if_not_exists = false;
    // A temporary table's definition names it as its session does: the catalog's name stays.
    table.name = name.to_string();
    let definition = with_options(&rel.definition, crate::sql::parser::create_table_options_at(&rel.definition)?, &table.options);
    let mut altered = table_relation(&table, &definition).await?;
    let users = jobs_using(&engine.catalog, name);
    if let (Some(key), false) = (changed.iter().find(|k| !changes_live(k)), users.is_empty()) {
        return Err(WeirError::option(format!(
            "table {name}: option '{key}' cannot change while jobs read or write the table ({}): it decides what they \
             read or write, and so what their positions and state mean; only 'properties.*', '{}' and '{}' can. \
             Drop the jobs first, or declare another table",
            users.join(", "),
            crate::source::IDLE_TIMEOUT,
            crate::engine::IDLE_ADVANCE
        )));
    }
    altered.state_table = rel.state_table;
    let mut catalog = (*engine.catalog).clone();
    let added = |key: &str| table.options.get(key).filter(|side| rel.options.get(key) != Some(*side));
    if let Some(side) = added(crate::engine::LATE_ROWS_TABLE) {
        create_late_rows_table(&mut catalog, name, side, &altered.columns)?;
    }
    if let Some(side) = added(crate::source::DEAD_LETTER_TABLE) {
        create_dead_letter_table(&mut catalog, name, side)?;
    }
    catalog.relations.insert(name.to_string(), altered);
    engine.commit(EpochWrites::default(), Some(catalog))?;
    engine.restart_now(&users);
    Ok(())
}

/// `ALTER TABLE | VIEW name RENAME TO to` (Flink's and Postgres's): the table or view `name`
/// is named `to` from this epoch on; its rows (a plain table's state), options and columns stay,
/// and its definition (`SHOW CREATE`) names it anew. `view` is `ALTER VIEW`, which renames
/// only a view; `ALTER TABLE` renames a table or a view, as Postgres's does.
///
/// Refused (2BP01) while a view, materialized view or job reads or writes it: they name it in
/// their queries, which Weir keeps as text. A materialized view is not renamed (its job runs
/// under its name).
///
/// # Errors
/// `UnknownTable` (unless `if_exists`); `WrongObjectType`; `DuplicateTable` for a name taken;
/// `DependentObjects`; `Unsupported` for a materialized view; the commit's.
pub fn rename_relation(engine: &mut Engine, view: bool, name: &str, if_exists: bool, to: &str) -> Result<()> {
    let Some(rel) = engine.catalog.get(name).cloned() else {
        return skipped_if_exists(name, if_exists);
    };
    match rel.kind {
        RelationKind::View => {}
        RelationKind::Table if !view => {}
        RelationKind::MaterializedView => {
            return Err(WeirError::unsupported(format!(
                "renaming materialized view {name}: its job runs under its name; create it again under the new one and drop it"
            )))
        }
        other => return Err(ErrorKind::WrongObjectType(format!("\"{name}\" is not a view (it is a {})", other.sql_name())).into()),
    }
    if to.is_empty() {
        return Err(WeirError::syntax("zero-length delimited identifier: a table or view needs a name", None));
    }
    if crate::sql::temporary_tables::is_temporary(to) {
        return Err(WeirError::plan(format!(
            "table name \"{to}\" is taken: names starting with {} are those of temporary tables",
            crate::sql::temporary_tables::PREFIX
        )));
    }
    if engine.catalog.get(to).is_some() {
        return Err(ErrorKind::DuplicateTable(to.to_string()).into());
    }
    refuse_readers(&engine.catalog, &rel, "rename")?;
    let mut renamed = rel.clone();
    renamed.name = to.to_string();
    renamed.definition = crate::sql::parser::with_created_name(&rel.definition, to)?;
    let mut catalog = (*engine.catalog).clone();
    catalog.relations.remove(name);
    catalog.relations.insert(to.to_string(), renamed);
    engine.commit(EpochWrites::default(), Some(catalog))
}

/// Refuses to `what` (rename, add a column to) relation `rel` while a view, materialized view
/// or job names it: they keep their queries as text, planned against its columns and name.
///
/// # Errors
/// `DependentObjects` (2BP01) naming them.
fn refuse_readers(catalog: &weir_catalog::Catalog, rel: &Relation, what: &str) -> Result<()> {
    let mut readers: Vec<String> = catalog
        .relations
        .values()
        .filter(|r| r.name != rel.name && r.depends_on.iter().any(|d| *d == rel.name))
        .map(|r| match r.kind {
            RelationKind::SinkJob => format!("job {}", r.name),
            kind => format!("{} {}", kind.sql_name(), crate::sql::create_table_as::identifier(&r.name)),
        })
        .collect();
    readers.sort();
    match readers.is_empty() {
        true => Ok(()),
        false => Err(ErrorKind::DependentObjects(format!(
            "cannot {what} {} {} because other objects name it: {}; drop them first (their queries name it)",
            rel.kind.sql_name(),
            rel.name,
            readers.join(", ")
        ))
        .into()),
    }
}

/// The column an `ALTER TABLE .. ADD [COLUMN] [IF NOT EXISTS] c type [NULL | NOT NULL]` adds,
/// and its `IF NOT EXISTS`.
///
/// # Errors
/// `Unsupported` for `FIRST` / `AFTER` and a column option but NULL and NOT NULL (`DEFAULT`:
/// fill the column with UPDATE); `Internal` for another operation.
pub fn added_column(operation: &sqlparser::ast::AlterTableOperation) -> Result<(ColumnSpec, bool)> {
    let sqlparser::ast::AlterTableOperation::AddColumn { if_not_exists, column_def, column_position, .. } = operation else {
        return Err(WeirError::internal(format!("{operation} adds no column")));
    };
    let name = crate::sql::parser::ident(&column_def.name);
    if column_position.is_some() {
        return Err(WeirError::unsupported(format!("ALTER TABLE .. ADD {name} FIRST | AFTER: a new column goes after the others")));
    }
    let mut not_null = false;
    for option in &column_def.options {
        match &option.option {
            sqlparser::ast::ColumnOption::Null => {}
            sqlparser::ast::ColumnOption::NotNull => not_null = true,
            other => {
                return Err(WeirError::unsupported(format!(
                    "ALTER TABLE .. ADD {name} .. {other}: a new column takes a type and NULL or NOT NULL; fill it with UPDATE"
                )))
            }
        }
    }
    let data_type = Some(column_def.data_type.clone());
    Ok((ColumnSpec { name, data_type, not_null, computed: None, metadata: None, is_virtual: false }, *if_not_exists))
}

/// `ALTER TABLE t ADD [COLUMN] [IF NOT EXISTS] c type [NULL], ..` (Postgres's; Flink's `ADD c
/// type`): nullable columns after the table's others. A plain table's rows are not rewritten:
/// each reads NULL for them ([`crate::state::RowCodec`]'s `append_row`), as Postgres adds a
/// column without a default. Refused while a view or job names the table, for a column that
/// is NOT NULL, has a DEFAULT or another constraint, or goes FIRST or AFTER another, and on a
/// table with a late-rows side table (its columns are the table's).
///
/// # Errors
/// `UnknownTable` (unless `if_exists`); `WrongObjectType`; `DuplicateColumn` (42701) for a
/// name taken (unless the column's `IF NOT EXISTS`); `DependentObjects`; `Unsupported`; the
/// checks of `CREATE TABLE`.
pub async fn add_columns(engine: &mut Engine, name: &str, if_exists: bool, added: &[(ColumnSpec, bool)]) -> Result<()> {
    let Some(rel) = engine.catalog.get(name).cloned() else {
        return skipped_if_exists(name, if_exists);
    };
    // Only IF NOT EXISTS of columns it has: nothing to do (Postgres's notice).
    if added.iter().all(|(c, if_not_exists)| *if_not_exists && rel.columns.iter().any(|r| r.name == c.name)) {
        for (column, _) in added {
            crate::sql::notices::column_exists(&column.name, name);
        }
        return Ok(());
    }
    let mut table = alterable_table(&engine.catalog, &rel, "add a column to")?;
    let plain = connector_of(&rel) == "table";
    for (column, if_not_exists) in added {
        if table.columns.iter().any(|c| c.name == column.name) {
            if *if_not_exists {
                crate::sql::notices::column_exists(&column.name, name);
                continue;
            }
            return Err(ErrorKind::DuplicateColumn(format!("column \"{}\" of relation \"{name}\" already exists", column.name)).into());
        }
        if column.not_null && plain {
            return Err(WeirError::unsupported(format!(
                "ALTER TABLE {name} ADD {} .. NOT NULL: the table's rows would hold NULL in it; add it nullable",
                column.name
            )));
        }
        table.columns.push(column.clone());
    }
    replace_table(engine, &rel, table).await
}

/// `ALTER TABLE t RENAME [COLUMN] c TO d` (Postgres's; Flink's `RENAME c TO d`): the column,
/// and every mention of it in the table's primary key, watermark and computed columns, is
/// named anew; rows stay as they are (they hold values by position). Refused while a view or
/// job names the table, and on a table with a late-rows side table.
///
/// # Errors
/// `UnknownTable` (unless `if_exists`); `WrongObjectType`; `UnknownColumn` (42703)
/// for no column `from`; `DuplicateColumn` (42701) for a column `to`; `DependentObjects`.
pub async fn rename_column(engine: &mut Engine, name: &str, if_exists: bool, from: &str, to: &str) -> Result<()> {
    use sqlparser::ast::{Expr, Ident};
    let Some(rel) = engine.catalog.get(name).cloned() else {
        return skipped_if_exists(name, if_exists);
    };
    let mut table = alterable_table(&engine.catalog, &rel, "rename a column of")?;
    if !table.columns.iter().any(|c| c.name == from) {
        return Err(WeirError::new(ErrorKind::UnknownColumn(format!("column \"{from}\" does not exist"))));
    }
    if table.columns.iter().any(|c| c.name == to) {
        return Err(ErrorKind::DuplicateColumn(format!("column \"{to}\" of relation \"{name}\" already exists")).into());
    }
    let rename = |s: &mut String| {
        if s == from {
            *s = to.to_string();
        }
    };
    // The column in the table's expressions (computed columns, the watermark).
    let rename_in = |expr: &mut Expr| {
        let _ = sqlparser::ast::visit_expressions_mut(expr, |e| {
            if let Expr::Identifier(i) = e {
                if crate::sql::parser::ident(i) == from {
                    // Quoted only where the name needs it.
                    *i = match crate::sql::create_table_as::identifier(to) == to {
                        true => Ident::new(to),
                        false => Ident::with_quote('"', to),
                    };
                }
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
    };
    for c in &mut table.columns {
        rename(&mut c.name);
        if let Some(expr) = &mut c.computed {
            rename_in(expr);
        }
    }
    table.primary_key.iter_mut().for_each(rename);
    if let Some((column, expr)) = &mut table.watermark {
        rename(column);
        rename_in(expr);
    }
    replace_table(engine, &rel, table).await
}

/// Flink's `ALTER TABLE t ADD | MODIFY | DROP ..` of a table's schema (Flink 1.17+; messages
/// as Flink's `AlterSchemaConverter`): `ADD` columns (after the others, as [`add_columns`]), a
/// primary key or a watermark the table does not have; `MODIFY` the primary key or watermark it
/// has; `DROP` its watermark, primary key or columns. A plain table's rows are stored by
/// position under their key, so it refuses a new or changed primary key and dropped columns;
/// a column's type is not changed (MODIFY of a column). Refused while a view or job names the
/// table.
///
/// # Errors
/// `UnknownTable` (unless `if_exists`); `WrongObjectType`; `DependentObjects`; `DuplicateColumn`;
/// `UnknownColumn`; `Plan` for what the table has or lacks, and for a dropped column another
/// part of the schema names; `Unsupported`; the checks of `CREATE TABLE`.
pub async fn alter_schema(engine: &mut Engine, name: &str, if_exists: bool, change: SchemaChange) -> Result<()> {
    let Some(rel) = engine.catalog.get(name).cloned() else {
        return skipped_if_exists(name, if_exists);
    };
    let mut table = alterable_table(&engine.catalog, &rel, "change the schema of")?;
    let plain = connector_of(&rel) == "table";
    let rekeyed = || {
        WeirError::unsupported(format!(
            "ALTER TABLE {name}: a plain table's rows are stored under its primary key; create it again with the key it needs"
        ))
    };
    match change {
        SchemaChange::Add(declared) => {
            for (i, column) in declared.columns.iter().enumerate() {
                if declared.columns[..i].iter().any(|c| c.name == column.name) {
                    return Err(ErrorKind::DuplicateColumn(format!("Encounter duplicate column `{}`.", column.name)).into());
                }
                if table.columns.iter().any(|c| c.name == column.name) {
                    return Err(ErrorKind::DuplicateColumn(format!("Try to add a column `{}` which already exists in the table.", column.name)).into());
                }
                if column.not_null && plain {
                    return Err(WeirError::unsupported(format!(
                        "ALTER TABLE {name} ADD {} .. NOT NULL: the table's rows would hold NULL in it; add it nullable",
                        column.name
                    )));
                }
                table.columns.push(column.clone());
            }
            if !declared.primary_key.is_empty() {
                if !table.primary_key.is_empty() {
                    return Err(ErrorKind::InvalidTableDefinition(format!(
                        "The base table has already defined the primary key constraint [{}]. You might want to drop it before adding a new one.",
                        quoted_list(&table.primary_key)
                    ))
                    .into());
                }
                if plain {
                    return Err(rekeyed());
                }
                table.primary_key = declared.primary_key.clone();
            }
            if let Some(watermark) = declared.watermark {
                if let Some((column, expr)) = &table.watermark {
                    return Err(ErrorKind::InvalidTableDefinition(format!(
                        "The base table has already defined the watermark strategy `{column}` AS {expr}. You might want to drop it before adding a new one."
                    ))
                    .into());
                }
                table.watermark = Some(watermark);
            }
        }
        SchemaChange::Modify(declared) => {
            if let Some(column) = declared.columns.first() {
                return Err(WeirError::unsupported(format!(
                    "ALTER TABLE {name} MODIFY {}: a column's type or definition does not change; drop the table (and the jobs over it) and create it again",
                    column.name
                )));
            }
            if !declared.primary_key.is_empty() {
                if table.primary_key.is_empty() {
                    return Err(ErrorKind::UndefinedObject(
                        "The base table does not define any primary key constraint. You might want to add a new one.".into(),
                    )
                    .into());
                }
                if plain {
                    return Err(rekeyed());
                }
                table.primary_key = declared.primary_key.clone();
            }
            if let Some(watermark) = declared.watermark {
                if table.watermark.is_none() {
                    return Err(ErrorKind::UndefinedObject("The base table does not define any watermark. You might want to add a new one.".into()).into());
                }
                table.watermark = Some(watermark);
            }
        }
        SchemaChange::DropWatermark => {
            if table.watermark.take().is_none() {
                return Err(ErrorKind::UndefinedObject("The base table does not define any watermark strategy.".into()).into());
            }
        }
        SchemaChange::DropPrimaryKey => {
            if table.primary_key.is_empty() {
                return Err(ErrorKind::UndefinedObject("The base table does not define any primary key.".into()).into());
            }
            if plain {
                return Err(rekeyed());
            }
            table.primary_key.clear();
        }
        SchemaChange::DropColumns(dropped) => {
            let mut columns = Vec::new();
            for (column, if_exists) in dropped {
                if columns.contains(&column) {
                    return Err(ErrorKind::DuplicateColumn(format!("Duplicate column `{column}`.")).into());
                }
                if !table.columns.iter().any(|c| c.name == column) {
                    if if_exists {
                        crate::sql::notices::notice(format!("column \"{column}\" of relation \"{name}\" does not exist, skipping"));
                        continue;
                    }
                    return Err(WeirError::new(ErrorKind::UnknownColumn(format!("The column `{column}` does not exist in the base table."))));
                }
                columns.push(column);
            }
            if columns.is_empty() {
                return Ok(());
            }
            for column in &columns {
                if plain {
                    return Err(WeirError::unsupported(format!(
                        "ALTER TABLE {name} DROP {column}: a plain table's rows hold their values by position; create it again without it"
                    )));
                }
                let depends = |m: String| -> WeirError { ErrorKind::DependentObjects(m).into() };
                if table.primary_key.contains(column) {
                    return Err(depends(format!("The column `{column}` is used as the primary key.")));
                }
                if let Some((time, expr)) = &table.watermark {
                    if time == column || names_column(expr, column) {
                        return Err(depends(format!("The column `{column}` is referenced by watermark expression `{time}` AS {expr}.")));
                    }
                }
                if let Some(computed) = table.columns.iter().find(|c| !columns.contains(&c.name) && c.computed.as_ref().is_some_and(|e| names_column(e, column))) {
                    return Err(depends(format!("The column `{column}` is referenced by computed column `{}`.", computed.name)));
                }
            }
            table.columns.retain(|c| !columns.contains(&c.name));
            if table.columns.is_empty() {
                return Err(WeirError::plan(format!("ALTER TABLE {name} DROP: a table keeps one column at least")));
            }
        }
    }
    replace_table(engine, &rel, table).await
}

/// What an `ALTER .. IF EXISTS` of missing relation `name` does: nothing, with Postgres's
/// NOTICE; without IF EXISTS `UnknownTable`.
fn skipped_if_exists(name: &str, if_exists: bool) -> Result<()> {
    if !if_exists {
        return Err(WeirError::unknown_table(name));
    }
    crate::sql::notices::notice(format!("relation \"{name}\" does not exist, skipping"));
    Ok(())
}

/// `a`, `b` in backquotes, as Flink lists names.
fn quoted_list(names: &[String]) -> String {
    names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

/// Whether `expr` names column `column`.
fn names_column(expr: &sqlparser::ast::Expr, column: &str) -> bool {
    let found = sqlparser::ast::visit_expressions(expr, |e| match e {
        sqlparser::ast::Expr::Identifier(i) if crate::sql::parser::ident(i) == column => std::ops::ControlFlow::Break(()),
        _ => std::ops::ControlFlow::Continue(()),
    });
    found.is_break()
}

/// The `CREATE TABLE` of table `rel` whose columns `what` (add a column to, rename a column
/// of) changes: refused for what is not a table, while a view or job names it, and for a table
/// with a late-rows side table (whose columns are the table's).
///
/// # Errors
/// `WrongObjectType`; `DependentObjects`; `Unsupported`.
fn alterable_table(catalog: &weir_catalog::Catalog, rel: &Relation, what: &str) -> Result<CreateTable> {
    let name = &rel.name;
    if rel.kind != RelationKind::Table {
        return Err(ErrorKind::WrongObjectType(format!("\"{name}\" is not a table (it is a {})", rel.kind.sql_name())).into());
    }
    refuse_readers(catalog, rel, what)?;
    if rel.options.contains_key(crate::engine::LATE_ROWS_TABLE) {
        return Err(WeirError::unsupported(format!(
            "cannot {what} table {name}: its late-rows side table has its columns; create both again"
        )));
    }
    match crate::sql::parser::parse_statement(&rel.definition)? {
        WeirStatement::CreateTable(table) => Ok(*table),
        _ => Err(WeirError::internal(format!("the definition of table {name} is not a CREATE TABLE"))),
    }
}

/// Table `rel` as `table` (its columns changed) declares it, with its rows (its state table).
/// A temporary table's definition names it as its session does: the catalog's name stays.
async fn replace_table(engine: &mut Engine, rel: &Relation, mut table: CreateTable) -> Result<()> {
    table.if_not_exists = false;
    let definition = crate::sql::create_table_like::definition(&table);
    table.name = rel.name.clone();
    let mut altered = table_relation(&table, &definition).await?;
    altered.state_table = rel.state_table;
    let mut catalog = (*engine.catalog).clone();
    catalog.relations.insert(rel.name.clone(), altered);
    engine.commit(EpochWrites::default(), Some(catalog))
}

/// The jobs that read table `table` (directly or through plain views) or write it.
fn jobs_using(catalog: &weir_catalog::Catalog, table: &str) -> Vec<String> {
    fn reads(catalog: &weir_catalog::Catalog, rel: &Relation, table: &str, depth: usize) -> bool {
        depth < 64
            && rel.depends_on.iter().any(|d| {
                d == table || catalog.get(d).is_some_and(|v| v.kind == RelationKind::View && reads(catalog, v, table, depth + 1))
            })
    }
    let mut jobs: Vec<String> = catalog
        .relations
        .values()
        .filter(|r| r.job.is_some())
        .filter(|r| {
            reads(catalog, r, table, 0)
                || r.temporary_views.iter().any(|v| reads(catalog, v, table, 0))
                || r.options.get(crate::engine::SINK_OPTION).is_some_and(|s| s == table)
        })
        .map(|r| r.name.clone())
        .collect();
    jobs.sort();
    jobs
}

/// `definition` (a `CREATE TABLE` as the user wrote it) with its `WITH` clause, which starts at
/// byte `options_at` (the end when `None`), written anew from `options`.
pub(crate) fn with_options(definition: &str, options_at: Option<usize>, options: &BTreeMap<String, String>) -> String {
    let head = options_at.and_then(|at| definition.get(..at)).unwrap_or(definition).trim_end().trim_end_matches(';').trim_end();
    let quote = |s: &str| format!("'{}'", s.replace('\'', "''"));
    let list: Vec<String> = options.iter().map(|(k, v)| format!("{} = {}", quote(k), quote(v))).collect();
    format!("{head} WITH ({})", list.join(", "))
}

/// The options the server reads for a table of `connector`, besides the connector's own
/// ([`weir_connectors::validate`] refuses every other one).
fn table_options(connector: &str) -> &'static [&'static str] {
    use crate::engine::{IDLE_ADVANCE, LATE_ROWS_TABLE};
    use crate::source::{DEAD_LETTER_TABLE, DEAD_LETTER_TOPIC, IDLE_TIMEOUT, ON_DECODE_ERROR};
    match connector {
        "table" => &[LATE_ROWS_TABLE, IDLE_ADVANCE],
        "kafka" | "upsert-kafka" => &[LATE_ROWS_TABLE, DEAD_LETTER_TABLE, DEAD_LETTER_TOPIC, ON_DECODE_ERROR, IDLE_TIMEOUT],
        "filesystem" => &[LATE_ROWS_TABLE, DEAD_LETTER_TABLE, ON_DECODE_ERROR, IDLE_TIMEOUT],
        "nexmark" | "datagen" => &[LATE_ROWS_TABLE, IDLE_TIMEOUT],
        _ => &[],
    }
}

/// Adds the late-row side table `side` of table `table` (columns `columns`) to `catalog`:
/// the table's columns, then `late_view`, `late_operator` and `late_watermark`. An existing
/// table of exactly that shape is reused.
fn create_late_rows_table(
    catalog: &mut weir_catalog::Catalog,
    table: &str,
    side: &str,
    columns: &[Column],
) -> Result<()> {
    let text = |name: &str| Column {
        name: name.into(),
        arrow_type: DataType::Utf8.to_string(),
        sql_type: "STRING".into(),
        nullable: true,
        computed: None,
    };
    let mut side_columns: Vec<Column> =
        columns.iter().filter(|c| c.computed.is_none()).cloned().map(|c| Column { nullable: true, ..c }).collect();
    side_columns.push(text("late_view"));
    side_columns.push(text("late_operator"));
    side_columns.push(Column {
        name: "late_watermark".into(),
        arrow_type: DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None).to_string(),
        sql_type: "TIMESTAMP(3)".into(),
        nullable: true,
        computed: None,
    });
    insert_side_table(catalog, crate::engine::LATE_ROWS_TABLE, side, side_columns, format!("-- late rows of table {table}, created with it"))
}

/// Adds the dead-letter table `side` of connector table `table` (option
/// `'dead-letter.table'`): `job`, `source` (topic or file), `record_partition`,
/// `record_offset`, `raw` (the record's bytes) and `error`.
fn create_dead_letter_table(catalog: &mut weir_catalog::Catalog, table: &str, side: &str) -> Result<()> {
    let column = |name: &str, t: DataType, sql: &str| Column {
        name: name.into(),
        arrow_type: t.to_string(),
        sql_type: sql.into(),
        nullable: true,
        computed: None,
    };
    let columns = vec![
        column("job", DataType::Utf8, "STRING"),
        column("source", DataType::Utf8, "STRING"),
        column("record_partition", DataType::Int32, "INT"),
        column("record_offset", DataType::Int64, "BIGINT"),
        column("raw", DataType::Binary, "BYTES"),
        column("error", DataType::Utf8, "STRING"),
    ];
    insert_side_table(catalog, crate::source::DEAD_LETTER_TABLE, side, columns, format!("-- records of table {table} that did not decode, created with it"))
}

/// Adds plain table `side` with `side_columns` to `catalog` for option `option`, or reuses an
/// existing one of exactly that shape.
fn insert_side_table(
    catalog: &mut weir_catalog::Catalog,
    option: &str,
    side: &str,
    side_columns: Vec<Column>,
    definition: String,
) -> Result<()> {
        if let Some(existing) = catalog.get(side) {
            if existing.kind == RelationKind::Table && existing.columns == side_columns {
                return Ok(());
            }
            return Err(WeirError::option(format!(
                "'{option}' = '{side}': a relation of that name exists with another shape; name a new table"
            )));
        }
        let id = catalog.allocate_state_table();
        catalog.relations.insert(
            side.to_string(),
            Relation {
                name: side.to_string(),
                kind: RelationKind::Table,
                state_table: Some(id),
                columns: side_columns,
                primary_key: vec![],
                stream_key: None,
                watermark: None,
                options: BTreeMap::new(),
                definition,
                query: None,
                depends_on: vec![],
                job: None,
                operator_state: BTreeMap::new(),
                emit_on_window_close: false,
                temporary_views: Vec::new(),
            },
        );
        Ok(())
}


/// `CREATE VIEW name AS query`.
pub async fn create_view(engine: &mut Engine, name: &str, query: &Query, or_replace: bool, definition: &str) -> Result<()> {
    if let Some(existing) = engine.catalog.get(name) {
        if !(or_replace && existing.kind == RelationKind::View) {
            return Err(ErrorKind::DuplicateTable(name.to_string()).into());
        }
        if !engine.catalog.dependents(name).is_empty() {
            return Err(ErrorKind::DependentObjects(format!(
                "cannot replace view {name}: {} depend on it",
                engine.catalog.dependents(name).join(", ")
            ))
            .into());
        }
    }
    let view = view_relation(crate::sql::planning::planning_snapshot(engine, None, &[]), name, query, definition).await?;
    let mut catalog = (*engine.catalog).clone();
    catalog.relations.insert(name.to_string(), view);
    engine.commit(EpochWrites::default(), Some(catalog))
}

/// The relation of view `name` over `query`, planned against `snapshot` for its columns; it
/// depends on the relations of `snapshot`'s catalog that the query names.
///
/// # Errors
/// The planner's; `DuplicateColumn` (42701) for two columns of one name.
pub(crate) async fn view_relation(snapshot: Arc<Snapshot>, name: &str, query: &Query, definition: &str) -> Result<Relation> {
    let catalog = Arc::clone(&snapshot.catalog);
    let query = as_created(query)?;
    let query_text = query.to_string();
    let plan = session_context(snapshot).state().create_logical_plan(&crate::sql::query_rewrites::rewrite_text(&query_text)?).await?;
    let mut depends_on: Vec<String> = Vec::new();
    for read in relation_names(&query) {
        if catalog.get(&read).is_some() && !depends_on.contains(&read) {
            depends_on.push(read);
        }
    }
    Ok(Relation {
        name: name.to_string(),
        kind: RelationKind::View,
        state_table: None,
        columns: output_columns(&plan, name)?,
        primary_key: vec![],
        stream_key: None,
        watermark: None,
        options: BTreeMap::new(),
        definition: definition.to_string(),
        query: Some(query_text),
        depends_on,
        job: None,
        operator_state: BTreeMap::new(),
        emit_on_window_close: false,
        temporary_views: Vec::new(),
    })
}

/// A view's `query` as it is stored when the view is created (and EXPLAIN shows it): its
/// columns named as Postgres names them ([`crate::sql::pg_compat::name_view_columns`]) and a
/// user's FIRST_VALUE/LAST_VALUE as Flink's
/// ([`crate::sql::query_rewrites::first_last_value_ignore_nulls`]). Stored so, a restart
/// replans it to the same columns and plan.
///
/// # Errors
/// `DuplicateColumn` (42701) for two columns of one name.
pub(crate) fn as_created(query: &Query) -> Result<Query> {
    let mut query = query.clone();
    crate::sql::pg_compat::name_view_columns(&mut query)?;
    crate::sql::query_rewrites::first_last_value_ignore_nulls(&mut query);
    Ok(query)
}

/// `CREATE MATERIALIZED VIEW [IF NOT EXISTS] name AS query [EMIT ON WINDOW CLOSE]` (the
/// pair `(if_not_exists, emit_on_window_close)`): plans the job and has the engine start it
/// (backfilled from the rows its sources hold, committed with its state and the catalog in one
/// epoch). `temporary` are the session's temporary views the query reads
/// ([`crate::sql::temporary_views::TemporaryViews::read_by`]): the view keeps them.
pub async fn create_materialized_view(
    engine: &mut Engine,
    name: &str,
    query: &Query,
    (if_not_exists, emit_on_window_close): (bool, bool),
    settings: &BTreeMap<String, String>,
    definition: &str,
    temporary: Vec<Relation>,
) -> Result<()> {
    if engine.catalog.get(name).is_some() {
        if if_not_exists {
            crate::sql::notices::relation_exists(&name);
            return Ok(());
        }
        return Err(ErrorKind::DuplicateTable(name.to_string()).into());
    }
    let query = &as_created(query)?;
    let query_text = query.to_string();
    let depends_on = crate::sql::temporary_views::job_dependencies(engine, query, &temporary);
    let options = crate::sql::settings::job_options(settings)?;
    let plan = plan_job(&PlanningBase::of(engine), &query_text, JobKind::View { emit_on_window_close }, &options, &temporary).await?;
    crate::sql::planning::check_windows_close(&plan, &engine.catalog, JobKind::View { emit_on_window_close })?;
    if let Some(f) = plan.schema.as_arrow().fields().iter().find(|f| has_null_type(f.data_type())) {
        // Flink refuses it too ("Illegal use of 'NULL'"); stored, it could not be read back.
        return Err(WeirError::plan(format!(
            "column \"{}\" of view {name} is only NULL, so it has no type; give it one: CAST(NULL AS INT)",
            f.name()
        )));
    }
    let columns = output_columns_of_schema(plan.schema.as_arrow(), name)?;
    let mut catalog = (*engine.catalog).clone();
    let state_table = catalog.allocate_state_table();
    let job_id = catalog.allocate_job();
    let rel = Relation {
        name: name.to_string(),
        kind: RelationKind::MaterializedView,
        state_table: Some(state_table),
        columns,
        primary_key: vec![],
        stream_key: plan.stream_key.clone(),
        watermark: None,
        options,
        definition: definition.to_string(),
        query: Some(query_text),
        depends_on,
        job: Some(job_id),
        operator_state: BTreeMap::new(),
        emit_on_window_close,
        temporary_views: temporary,
    };
    catalog.relations.insert(name.to_string(), rel.clone());
    engine.start_job(&rel, &plan, catalog, settings.get(crate::sql::settings::SAVEPOINT_PATH).map(String::as_str))
}

/// The catalog relations a query names (views not expanded), each once: those in FROM, and
/// the input table of each window TVF (its first argument: `TABLE(SESSION(TABLE t, ...))`,
/// which [`crate::sql::window_tvf::rewrite_window_tvfs`] made `session('t', ...)`, or the short
/// form's `SESSION(t, ...)`).
pub(crate) fn named_relations(engine: &Engine, query: &Query) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in relation_names(query) {
        if engine.catalog.get(&name).is_some() && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// Every relation name `query` reads (as [`named_relations`], whether the catalog has it or
/// not: a CTE's name, a temporary view's), in the order met.
pub(crate) fn relation_names(query: &Query) -> Vec<String> {
    use sqlparser::ast::Visit;
    let mut names = NamedRelations(Vec::new());
    let _ = query.visit(&mut names);
    names.0
}

/// Collects the relation names of [`named_relations`], in the order met.
struct NamedRelations(Vec<String>);

impl sqlparser::ast::Visitor for NamedRelations {
    type Break = ();

    fn pre_visit_relation(&mut self, relation: &sqlparser::ast::ObjectName) -> std::ops::ControlFlow<()> {
        self.0.push(crate::sql::parser::object_name(relation));
        std::ops::ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &sqlparser::ast::TableFactor) -> std::ops::ControlFlow<()> {
        use sqlparser::ast::{Expr, FunctionArg, FunctionArgExpr, TableFactor, Value};
        let TableFactor::Table { name, args: Some(args), .. } = factor else { return std::ops::ControlFlow::Continue(()) };
        if !crate::sql::window_tvf::is_window_function(&crate::sql::parser::object_name(name)) {
            return std::ops::ControlFlow::Continue(());
        }
        match args.args.first() {
            Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))) => {
                if let Value::SingleQuotedString(table) = &v.value {
                    self.0.push(table.to_lowercase());
                }
            }
            Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Identifier(table)))) => {
                self.0.push(crate::sql::parser::ident(table));
            }
            Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::CompoundIdentifier(parts)))) => {
                if let Some(table) = parts.last() {
                    self.0.push(crate::sql::parser::ident(table));
                }
            }
            _ => {}
        }
        std::ops::ControlFlow::Continue(())
    }
}

/// The type of `expr` over a table `name` of `schema`.
async fn expr_type(name: &str, schema: &Arc<Schema>, expr: &str) -> Result<DataType> {
    let ctx = SessionContext::new();
    crate::plan::functions::register(&ctx, crate::plan::time_zone::Zone::utc());
    ctx.register_table(name, Arc::new(MemTable::try_new(Arc::clone(schema), vec![vec![]])?))?;
    let plan = ctx.state().create_logical_plan(&format!("SELECT {expr} FROM {name}")).await?;
    Ok(plan.schema().field(0).data_type().clone())
}

/// A declared type as DESCRIBE shows it: as written, but nested types in Flink's spelling
/// (`ROW<\`a\` INT>`, `MAP<K, V>`), which [`crate::sql::types::rewrite_nested_types`] rewrote.
pub(crate) fn declared_type_name(sql_type: &sqlparser::ast::DataType, arrow_type: &arrow::datatypes::DataType) -> String {
    if crate::sql::row_cast::holds_row(arrow_type) {
        crate::sql::show::sql_type_name(arrow_type)
    } else {
        sql_type.to_string()
    }
}

fn sql_type_of(columns: &[Column], name: &str) -> String {
    columns.iter().find(|c| c.name == name).map(|c| c.sql_type.clone()).unwrap_or_default()
}

/// Whether `t` is the type of a bare `NULL` (DataFusion's `Null`), or holds one in a field or
/// element (`ARRAY[NULL]`).
fn has_null_type(t: &arrow::datatypes::DataType) -> bool {
    use arrow::datatypes::DataType;
    match t {
        DataType::Null => true,
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) | DataType::Map(f, _) => {
            has_null_type(f.data_type())
        }
        DataType::Struct(fields) => fields.iter().any(|f| has_null_type(f.data_type())),
        _ => false,
    }
}

/// The output columns of a query plan; names must be unique.
fn output_columns(plan: &LogicalPlan, view: &str) -> Result<Vec<Column>> {
    output_columns_of_schema(plan.schema().as_arrow(), view)
}

pub(crate) fn output_columns_of_schema(schema: &Schema, view: &str) -> Result<Vec<Column>> {
    let mut out: Vec<Column> = Vec::new();
    for f in schema.fields() {
        if out.iter().any(|c| c.name == *f.name()) {
            // Postgres's code and words for it (42701).
            return Err(WeirError::new(ErrorKind::DuplicateColumn(format!(
                "column \"{}\" specified more than once: view {view} would have two columns of that name; give them \
                 distinct aliases",
                f.name()
            ))));
        }
        out.push(Column {
            name: f.name().clone(),
            arrow_type: f.data_type().to_string(),
            sql_type: crate::sql::show::sql_type_name(f.data_type()),
            nullable: f.is_nullable(),
            computed: None,
        });
    }
    Ok(out)
}
