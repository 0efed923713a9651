//! CREATE TABLE, CREATE VIEW, CREATE MATERIALIZED VIEW and DROP.
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

use crate::error::{ErrorKind, Result, WeirError};
use crate::runtime::table::scan_rows;
use crate::runtime::StreamChunk;
use crate::sql::engine::Engine;
use crate::sql::parser::{CreateTable, DropKind};
use crate::sql::relations::{layout_of, relation_schema, session_context};
use crate::state::EpochWrites;

impl Engine {
    /// `CREATE TABLE`.
    pub async fn create_table(&mut self, t: &CreateTable, definition: &str) -> Result<()> {
        if self.catalog.get(&t.name).is_some() {
            if t.if_not_exists {
                return Ok(());
            }
            return Err(ErrorKind::DuplicateTable(t.name.clone()).into());
        }
        let (connector, _) = weir_connectors::validate(&t.options).map_err(|e| WeirError::option(e.to_string()))?;
        let plain = connector == "table";
        if t.options.contains_key(crate::source::DEAD_LETTER_TOPIC) && !matches!(connector.as_str(), "kafka" | "upsert-kafka") {
            return Err(WeirError::option(format!(
                "table {}: '{}' is for 'kafka' and 'upsert-kafka' tables (use 'dead-letter.table' for a '{connector}' table)",
                t.name,
                crate::source::DEAD_LETTER_TOPIC
            )));
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
                return Err(WeirError::plan(format!("column \"{}\" is declared twice in table {}", c.name, t.name)));
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
                    sql_type: sql_type.to_string(),
                    nullable,
                    computed: c.metadata.as_ref().map(|key| crate::source::metadata_marker(key)),
                });
            }
        }
        let physical = Arc::new(Schema::new(fields.clone()));
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
        for k in &t.primary_key {
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
        let mut catalog = (*self.catalog).clone();
        if let Some(side) = t.options.get(crate::sql::engine::LATE_ROWS_TABLE) {
            self.create_late_rows_table(&mut catalog, &t.name, side, &columns)?;
        }
        if let Some(side) = t.options.get(crate::source::DEAD_LETTER_TABLE) {
            self.create_dead_letter_table(&mut catalog, &t.name, side)?;
        }
        crate::source::fails_on_decode_error(&t.name, &t.options)?;
        let state_table = plain.then(|| catalog.allocate_state_table());
        let rel = Relation {
                name: t.name.clone(),
                kind: RelationKind::Table,
                state_table,
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
        };
        if connector == "nexmark" {
            // Checks the declared columns against the generator's table now, not at first read.
            crate::source::SourceTask::open("", &rel, None)?;
        }
        catalog.relations.insert(t.name.clone(), rel);
        self.commit(EpochWrites::default(), Some(catalog))
    }

    /// Adds the late-row side table `side` of table `table` (columns `columns`) to `catalog`:
    /// the table's columns, then `late_view`, `late_operator` and `late_watermark`. An existing
    /// table of exactly that shape is reused.
    fn create_late_rows_table(
        &self,
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
        insert_side_table(catalog, crate::sql::engine::LATE_ROWS_TABLE, side, side_columns, format!("-- late rows of table {table}, created with it"))
    }

    /// Adds the dead-letter table `side` of connector table `table` (option
    /// `'dead-letter.table'`): `job`, `source` (topic or file), `record_partition`,
    /// `record_offset`, `raw` (the record's bytes) and `error`.
    fn create_dead_letter_table(&self, catalog: &mut weir_catalog::Catalog, table: &str, side: &str) -> Result<()> {
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
            },
        );
        Ok(())
}

impl Engine {

    /// `CREATE VIEW name AS query`.
    pub async fn create_view(&mut self, name: &str, query: &Query, or_replace: bool, definition: &str) -> Result<()> {
        if let Some(existing) = self.catalog.get(name) {
            if !(or_replace && existing.kind == RelationKind::View) {
                return Err(ErrorKind::DuplicateTable(name.to_string()).into());
            }
            if !self.catalog.dependents(name).is_empty() {
                return Err(ErrorKind::DependentObjects(format!(
                    "cannot replace view {name}: {} depend on it",
                    self.catalog.dependents(name).join(", ")
                ))
                .into());
            }
        }
        let query_text = query.to_string();
        let ctx = session_context(self.snapshot(None));
        let plan = ctx.state().create_logical_plan(&query_text).await?;
        let columns = output_columns(&plan, name)?;
        let depends_on = self.named_relations(query);
        let mut catalog = (*self.catalog).clone();
        catalog.relations.insert(
            name.to_string(),
            Relation {
                name: name.to_string(),
                kind: RelationKind::View,
                state_table: None,
                columns,
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
            },
        );
        self.commit(EpochWrites::default(), Some(catalog))
    }

    /// `CREATE MATERIALIZED VIEW name AS query`: plans the job, backfills it from the rows its
    /// sources hold, and commits view, state and catalog in one epoch.
    pub async fn create_materialized_view(
        &mut self,
        name: &str,
        query: &Query,
        if_not_exists: bool,
        emit_on_window_close: bool,
        settings: &BTreeMap<String, String>,
        definition: &str,
    ) -> Result<()> {
        if self.catalog.get(name).is_some() {
            if if_not_exists {
                return Ok(());
            }
            return Err(ErrorKind::DuplicateTable(name.to_string()).into());
        }
        let query_text = query.to_string();
        let depends_on = self.named_relations(query);
        let mut plan = self.plan_stream_query(&query_text, emit_on_window_close).await?;
        let options = crate::sql::settings::job_options(settings)?;
        if let Some(v) = options.get(crate::sql::settings::ALLOW_LATENESS) {
            plan.set_allowed_lateness(crate::sql::settings::parse_duration_ms(crate::sql::settings::ALLOW_LATENESS, v)?);
        }
        plan.set_state_ttl(&crate::sql::settings::state_ttl_of(&options, &query_text)?)?;
        let columns = output_columns_of_schema(plan.schema.as_arrow(), name)?;
        let mut catalog = (*self.catalog).clone();
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
        };
        catalog.relations.insert(name.to_string(), rel.clone());
        let mut job = self.build_job(&rel, &plan, &mut catalog)?;
        self.backfill(&mut job, &plan)?;
        self.jobs.insert(name.to_string(), job);
        let result = self.open_sources(name, &plan.sources()).and_then(|()| self.commit(EpochWrites::default(), Some(catalog)));
        if result.is_err() {
            self.jobs.remove(name);
            self.sources.retain(|(job, _), _| job != name);
        }
        result
    }

    /// Starts a new job: lets its operators emit their first rows, pushes every row its
    /// sources hold now (plain tables, materialized views) as inserts, then the sources'
    /// watermarks, which close the windows the backfill left behind.
    ///
    /// The epoch in flight is committed first: the rows are read from the store, and a view's
    /// changes not yet committed have already gone to the jobs that existed, not to this one
    /// (without the commit a job created over a view fed by a Kafka source lost them).
    pub(crate) fn backfill(&mut self, job: &mut crate::runtime::Job, plan: &crate::plan::StreamPlan) -> Result<()> {
        self.commit(EpochWrites::default(), None)?;
        job.on_create(&self.store)?;
        for source in plan.sources() {
            let src = self.catalog.get(&source).ok_or_else(|| WeirError::unknown_table(&source))?;
            let (Some(id), schema) = (src.state_table, relation_schema(src)?) else { continue };
            for batch in scan_rows(&*self.store, id, &schema, layout_of(src), false)? {
                job.push(&source, &StreamChunk::inserts(batch), &self.store)?;
            }
        }
        for source in plan.sources() {
            if let Some(wm) = self.watermarks.get(&source) {
                job.on_watermark(&source, *wm, &self.store)?;
            }
        }
        Ok(())
    }

    /// The catalog relations a query names (views not expanded), each once.
    pub(crate) fn named_relations(&self, query: &Query) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let _ = sqlparser::ast::visit_relations(query, |name| {
            let name = crate::sql::parser::object_name(name);
            if self.catalog.get(&name).is_some() && !out.contains(&name) {
                out.push(name);
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
        out
    }

    /// `DROP TABLE | VIEW | MATERIALIZED VIEW [IF EXISTS] names [CASCADE]`.
    pub fn drop_relations(&mut self, kind: DropKind, names: &[String], if_exists: bool, cascade: bool) -> Result<()> {
        let mut catalog = (*self.catalog).clone();
        let mut writes = EpochWrites::default();
        let mut dropped_jobs = Vec::new();
        for name in names {
            let Some(rel) = catalog.get(name) else {
                if if_exists {
                    continue;
                }
                return Err(WeirError::unknown_table(name));
            };
            let expected = match kind {
                DropKind::Table => RelationKind::Table,
                DropKind::View => RelationKind::View,
                DropKind::MaterializedView => RelationKind::MaterializedView,
            };
            if rel.kind != expected {
                let right = match rel.kind {
                    RelationKind::Table => "DROP TABLE",
                    RelationKind::View => "DROP VIEW",
                    RelationKind::MaterializedView => "DROP MATERIALIZED VIEW",
                    RelationKind::SinkJob => "STOP JOB",
                };
                return Err(WeirError::plan(format!("\"{name}\" is a {}; use {right}", rel.kind.sql_name())));
            }
            let order = catalog.cascade_order(name);
            if !cascade && order.len() > 1 {
                let dependents: Vec<String> = order[..order.len() - 1]
                    .iter()
                    .map(|d| format!("{} {d}", catalog.get(d).map(|r| r.kind.sql_name()).unwrap_or("relation")))
                    .collect();
                return Err(ErrorKind::DependentObjects(format!(
                    "cannot drop {} {name} because other objects depend on it: {}; use DROP ... CASCADE to drop them too",
                    rel.kind.sql_name(),
                    dependents.join(", ")
                ))
                .into());
            }
            for victim in order {
                if let Some(r) = catalog.relations.remove(&victim) {
                    if self.watermarks.remove(&victim).is_some() {
                        writes.delete_meta(&crate::sql::engine::watermark_key(&victim));
                    }
                    if let Some(id) = r.state_table {
                        writes.delete_table(id);
                        self.row_ids.remove(&id);
                    }
                    for id in r.operator_state.values() {
                        writes.delete_table(*id);
                    }
                    if r.kind == RelationKind::MaterializedView {
                        for (job, table) in self.sources.keys().filter(|(job, _)| *job == victim) {
                            writes.delete_meta(&crate::source::progress_key(job, table));
                        }
                        dropped_jobs.push(victim);
                    }
                }
            }
        }
        let removed: Vec<_> = dropped_jobs.iter().filter_map(|n| self.jobs.remove(n).map(|j| (n.clone(), j))).collect();
        let tasks: Vec<_> = self.sources.keys().filter(|(job, _)| dropped_jobs.contains(job)).cloned().collect();
        let tasks: Vec<_> = tasks.into_iter().filter_map(|k| self.sources.remove(&k).map(|t| (k, t))).collect();
        match self.commit(writes, Some(catalog)) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.jobs.extend(removed);
                self.sources.extend(tasks);
                Err(e)
            }
        }
    }
}

/// The type of `expr` over a table `name` of `schema`.
async fn expr_type(name: &str, schema: &Arc<Schema>, expr: &str) -> Result<DataType> {
    let ctx = SessionContext::new();
    crate::sql::functions::register(&ctx);
    ctx.register_table(name, Arc::new(MemTable::try_new(Arc::clone(schema), vec![vec![]])?))?;
    let plan = ctx.state().create_logical_plan(&format!("SELECT {expr} FROM {name}")).await?;
    Ok(plan.schema().field(0).data_type().clone())
}

fn sql_type_of(columns: &[Column], name: &str) -> String {
    columns.iter().find(|c| c.name == name).map(|c| c.sql_type.clone()).unwrap_or_default()
}

/// The output columns of a query plan; names must be unique.
fn output_columns(plan: &LogicalPlan, view: &str) -> Result<Vec<Column>> {
    output_columns_of_schema(plan.schema().as_arrow(), view)
}

pub(crate) fn output_columns_of_schema(schema: &Schema, view: &str) -> Result<Vec<Column>> {
    let mut out: Vec<Column> = Vec::new();
    for f in schema.fields() {
        if out.iter().any(|c| c.name == *f.name()) {
            return Err(WeirError::plan(format!(
                "view {view} would have two columns named \"{}\"; give them distinct aliases",
                f.name()
            )));
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
