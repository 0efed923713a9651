//! INSERT, UPDATE and DELETE on plain tables, and INSERT INTO connector tables (sink checks).
//!
//! Each statement is one epoch: the table's changelog is computed against its stored rows,
//! pushed through every view that reads it, and committed with their state in one write. The
//! statement returns after that commit, so an acknowledged row is durable.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BinaryArray, RecordBatch};
use arrow::compute::cast;
use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::{LogicalPlan, WriteOp};
use datafusion::sql::parser::Statement as DfStatement;
use sqlparser::ast::{AssignmentTarget, Delete, FromTable, Insert, Statement, TableFactor, TableObject, Update};

use crate::engine::Engine;
use crate::error::{Result, WeirError};
use crate::plan::updating_operator;
use crate::runtime::relation::connector_of;
use crate::runtime::table::KEY_COLUMN;
use crate::sql::parser::{ident, object_name};
use crate::sql::planning::CatalogSources;
use crate::sql::relations::session_context;
use crate::state::EpochWrites;

/// `INSERT INTO table ...`; returns the number of rows written.
pub async fn insert(
    engine: &mut Engine,
    stmt: &Statement,
    insert: &Insert,
    settings: &std::collections::BTreeMap<String, String>,
) -> Result<usize> {
    let TableObject::TableName(name) = &insert.table else {
        return Err(WeirError::unsupported("INSERT INTO a table function"));
    };
    let table = object_name(name);
    let rel = engine.catalog.get(&table).ok_or_else(|| WeirError::unknown_table(&table))?.clone();
    if connector_of(&rel) != "table" {
        return insert_into_connector(engine, &rel, insert, settings).await;
    }
    engine.table_store(&table)?;
    let ctx = session_context(crate::sql::planning::planning_snapshot(engine, None));
    let plan = ctx.state().statement_to_plan(DfStatement::Statement(Box::new(stmt.clone()))).await?;
    let LogicalPlan::Dml(dml) = plan else {
        return Err(WeirError::internal("INSERT did not plan as DML"));
    };
    if !matches!(dml.op, WriteOp::Insert(_)) {
        return Err(WeirError::internal("INSERT planned as another write"));
    }
    let batches = DataFrame::new(ctx.state(), dml.input.as_ref().clone()).collect().await?;
    insert_batches(engine, &table, &batches).await
}

/// Inserts `batches` (the table's columns, in order; types cast to the table's) into plain
/// table `table` as one epoch (`INSERT`, `COPY ... FROM STDIN`); returns the rows written.
///
/// # Errors
/// `UnknownTable`; a NOT NULL or primary-key violation; the commit's. Nothing is written then.
pub async fn insert_batches(engine: &mut Engine, table: &str, batches: &[RecordBatch]) -> Result<usize> {
    let (store, id) = engine.table_store(table)?;
    let batches = batches.iter().map(|b| conform(b, store.schema())).collect::<Result<Vec<_>>>()?;
    let table = table.to_string();
    let watermark = watermark_of_rows(engine, &table, &batches).await?;
    let mut writes = EpochWrites::default();
    let mut next = engine.next_row_id(id)?;
    let mut count = 0;
    let result: Result<()> = (|| {
        for batch in batches {
            count += batch.num_rows();
            let chunk = store.insert(&batch, &engine.store, &mut writes, &mut next)?;
            engine.propagate(&table, &chunk)?;
        }
        engine.row_ids.insert(id, next);
        engine.flush_late_rows(&mut writes)?;
        if let Some(w) = watermark {
            engine.advance_watermark(&table, w, &mut writes)?;
        }
        Ok(())
    })();
    finish_write(engine, result, writes, id, next)?;
    Ok(count)
}

/// `UPDATE table SET ... [WHERE ...]`; returns the number of rows updated.
pub async fn update(engine: &mut Engine, update: &Update) -> Result<usize> {
    if update.from.is_some() || !update.table.joins.is_empty() {
        return Err(WeirError::unsupported("UPDATE ... FROM and UPDATE of a join"));
    }
    let table = table_factor_name(&update.table.relation)?;
    let (store, id) = engine.table_store(&table)?;
    let schema = nullable(store.schema());
    let mut new_exprs = Vec::new();
    let mut targets = Vec::new();
    for a in &update.assignments {
        let AssignmentTarget::ColumnName(col) = &a.target else {
            return Err(WeirError::unsupported("UPDATE of a tuple of columns"));
        };
        let col = col.0.last().and_then(|p| p.as_ident()).map(ident).unwrap_or_default();
        let index = schema.index_of(&col).map_err(|_| {
            crate::error::ErrorKind::UnknownColumn(format!(
                "column \"{col}\" of table {table} does not exist; columns: {}",
                schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ")
            ))
        })?;
        targets.push(index);
        new_exprs.push(format!("({}) AS \"__weir_new_{}\"", a.value, targets.len() - 1));
    }
    let mut sql = format!("SELECT *, {} FROM {table}", new_exprs.join(", "));
    if let Some(w) = &update.selection {
        sql.push_str(&format!(" WHERE {w}"));
    }
    let batches = keyed_scan(engine, &table, &sql).await?;
    let ncols = schema.fields().len();
    let mut changes = Vec::with_capacity(batches.len());
    for batch in &batches {
        let keys = key_column(batch, ncols)?;
        let old = RecordBatch::try_new(Arc::clone(&schema), batch.columns()[..ncols].to_vec())?;
        let mut cols: Vec<ArrayRef> = old.columns().to_vec();
        for (i, target) in targets.iter().enumerate() {
            let value = batch.column(ncols + 1 + i);
            cols[*target] = cast(value, schema.field(*target).data_type())?;
        }
        changes.push((keys, old, RecordBatch::try_new(Arc::clone(&schema), cols)?));
    }
    let new_rows: Vec<RecordBatch> = changes.iter().map(|(_, _, new)| new.clone()).collect();
    let watermark = watermark_of_rows(engine, &table, &new_rows).await?;
    let mut writes = EpochWrites::default();
    let next = engine.next_row_id(id)?;
    let mut count = 0;
    let result: Result<()> = (|| {
        for (keys, old, new) in &changes {
            count += new.num_rows();
            let chunk = store.update(keys, old, new, &engine.store, &mut writes)?;
            engine.propagate(&table, &chunk)?;
        }
        engine.flush_late_rows(&mut writes)?;
        if let Some(w) = watermark {
            engine.advance_watermark(&table, w, &mut writes)?;
        }
        Ok(())
    })();
    finish_write(engine, result, writes, id, next)?;
    Ok(count)
}

/// `DELETE FROM table [WHERE ...]`; returns the number of rows deleted.
pub async fn delete(engine: &mut Engine, delete: &Delete) -> Result<usize> {
    let tables = match &delete.from {
        FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
    };
    if tables.len() != 1 || !tables[0].joins.is_empty() || delete.using.is_some() {
        return Err(WeirError::unsupported("DELETE from several tables or with USING"));
    }
    let table = table_factor_name(&tables[0].relation)?;
    let (store, id) = engine.table_store(&table)?;
    let schema = nullable(store.schema());
    let mut sql = format!("SELECT * FROM {table}");
    if let Some(w) = &delete.selection {
        sql.push_str(&format!(" WHERE {w}"));
    }
    let batches = keyed_scan(engine, &table, &sql).await?;
    let ncols = schema.fields().len();
    let mut writes = EpochWrites::default();
    let next = engine.next_row_id(id)?;
    let mut count = 0;
    let result: Result<()> = (|| {
        for batch in batches {
            let keys = key_column(&batch, ncols)?;
            let old = RecordBatch::try_new(Arc::clone(&schema), batch.columns()[..ncols].to_vec())?;
            count += old.num_rows();
            let chunk = store.delete(&keys, &old, &mut writes)?;
            engine.propagate(&table, &chunk)?;
        }
        Ok(())
    })();
    finish_write(engine, result, writes, id, next)?;
    Ok(count)
}

/// Commits a write statement's epoch, or on failure drops all in-memory state so the
/// engine matches the last commit again.
fn finish_write(engine: &mut Engine, result: Result<()>, writes: EpochWrites, table: u32, next_row_id: u64) -> Result<()> {
    let committed = result.and_then(|()| {
        engine.row_ids.insert(table, next_row_id);
        engine.commit(writes, None)
    });
    if let Err(e) = committed {
        if let Err(reload) = engine.reload() {
            tracing::error!("reloading after a failed statement failed: {reload}");
        }
        return Err(e);
    }
    Ok(())
}

/// Runs `sql` with `table`'s hidden storage-key column visible.
async fn keyed_scan(engine: &Engine, table: &str, sql: &str) -> Result<Vec<RecordBatch>> {
    let ctx = session_context(crate::sql::planning::planning_snapshot(engine, Some(table.to_string())));
    Ok(ctx.sql(sql).await?.collect().await?)
}

/// INSERT INTO a connector table: checks the query's changelog against the sink.
async fn insert_into_connector(
    engine: &mut Engine,
    rel: &weir_catalog::Relation,
    insert: &Insert,
    settings: &std::collections::BTreeMap<String, String>,
) -> Result<usize> {
    let Some(source) = &insert.source else {
        return Err(WeirError::unsupported("INSERT without a query"));
    };
    let ctx = session_context(crate::sql::planning::planning_snapshot(engine, None));
    let plan = ctx.state().create_logical_plan(&source.to_string()).await?;
    crate::plan::temporal::mark_lookup_joins(&plan);
    let plan = ctx.state().optimize(&plan)?;
    let connector = connector_of(rel);
    if weir_connectors::is_append_only_sink(&rel.options) {
        if let Some(op) = updating_operator(&plan, &CatalogSources(&engine.catalog))? {
            return Err(WeirError::plan(format!(
                "table {} ('{connector}' with format '{}') is an append-only sink, but the query produces an updating changelog: {op}. Write it to an 'upsert-kafka' table with a PRIMARY KEY, or use 'format' = 'debezium-json'",
                rel.name,
                rel.options.get("format").map(String::as_str).unwrap_or("json"),
            )));
        }
    }
    let query = source.to_string();
    let depends_on = crate::sql::ddl::named_relations(engine, source);
    let definition = format!("INSERT INTO {} {query}", rel.name);
    crate::sql::sink_jobs::start_sink_job(engine, rel, &query, depends_on, &definition, settings).await?;
    Ok(0)
}

/// The watermark table `table` reaches with `rows` (its schema): the largest value of its
/// WATERMARK expression over them, in ms; `None` without a WATERMARK or rows.
async fn watermark_of_rows(engine: &Engine, table: &str, rows: &[arrow::array::RecordBatch]) -> Result<Option<i64>> {
    let Some(wm) = engine.catalog.get(table).and_then(|r| r.watermark.clone()) else { return Ok(None) };
    let Some(first) = rows.first() else { return Ok(None) };
    if rows.iter().all(|b| b.num_rows() == 0) {
        return Ok(None);
    }
    let ctx = datafusion::prelude::SessionContext::new();
    crate::plan::functions::register(&ctx);
    let mem = datafusion::datasource::MemTable::try_new(first.schema(), vec![rows.to_vec()])?;
    ctx.register_table("t", Arc::new(mem))?;
    let sql = format!("SELECT CAST(CAST(MAX({}) AS TIMESTAMP(3)) AS BIGINT) FROM t", wm.expr);
    let batches = ctx.sql(&sql).await?.collect().await?;
    let value = batches.first().and_then(|b| {
        let col = b.column(0);
        let a = col.as_any().downcast_ref::<arrow::array::Int64Array>()?;
        (!a.is_empty() && a.is_valid(0)).then(|| a.value(0))
    });
    Ok(value)
}

fn table_factor_name(t: &TableFactor) -> Result<String> {
    match t {
        TableFactor::Table { name, .. } => Ok(object_name(name)),
        other => Err(WeirError::unsupported(format!("DML on {other}"))),
    }
}

fn key_column(batch: &RecordBatch, index: usize) -> Result<BinaryArray> {
    batch
        .column(index)
        .as_any()
        .downcast_ref::<BinaryArray>()
        .cloned()
        .ok_or_else(|| WeirError::internal(format!("{KEY_COLUMN} is not binary")))
}

/// `batch` with the columns cast to `schema`'s types and labelled with its names.
fn conform(batch: &RecordBatch, schema: &arrow::datatypes::SchemaRef) -> Result<RecordBatch> {
    if batch.num_columns() != schema.fields().len() {
        return Err(WeirError::plan(format!(
            "INSERT has {} columns but the table has {}",
            batch.num_columns(),
            schema.fields().len()
        )));
    }
    let cols = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| if c.data_type() == f.data_type() { Ok(Arc::clone(c)) } else { Ok(cast(c, f.data_type())?) })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new_with_options(
        nullable(schema),
        cols,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?)
}

/// `schema` with every column nullable: the table's writer checks NOT NULL itself, with
/// Postgres's message, instead of Arrow refusing the batch.
fn nullable(schema: &arrow::datatypes::SchemaRef) -> arrow::datatypes::SchemaRef {
    Arc::new(arrow::datatypes::Schema::new(
        schema.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>(),
    ))
}
