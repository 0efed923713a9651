//! INSERT, UPDATE and DELETE on plain tables (with `RETURNING` and `ON CONFLICT`), and INSERT
//! INTO connector tables (sink checks).
//!
//! A write statement becomes a [`WriteStep`]: an INSERT's (or COPY's) rows as computed when the
//! statement runs, an UPDATE or DELETE as parsed. [`apply`] turns a step into table writes and
//! changelog chunks ([`TableChanges`]) over some state ([`WriteBase`]) without touching the
//! engine:
//! - outside a transaction block, over the latest commit under the engine; the engine then
//!   commits the changes at once as the statement's epoch ([`Engine::commit_table_changes`]),
//!   so an acknowledged row is durable;
//! - inside one, first when the statement runs, over the last commit read through the block's
//!   own writes (for its row count, `RETURNING` and its errors), then at COMMIT again over the
//!   latest commit, every step of the block into one epoch. So UPDATE and DELETE see what was
//!   committed meanwhile, as Postgres's READ COMMITTED re-checks rows changed under a
//!   statement; an INSERT writes the rows it computed.
//!
//! Keyed tables upsert: an INSERT of an existing key replaces its row (Flink's semantics for a
//! table with a primary key). `ON CONFLICT (key) DO NOTHING` keeps the stored row instead, `DO
//! UPDATE SET ... [WHERE ...]` updates it from `excluded.*` (Postgres's rules: the target names
//! the primary key; one statement may not update a row twice, 21000).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray, RecordBatch, UInt32Array};
use arrow::compute::{concat_batches, take_record_batch};
use arrow::datatypes::{Field, Int64Type, Schema, SchemaRef};
use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::{LogicalPlan, WriteOp};
use datafusion::sql::parser::Statement as DfStatement;
use sqlparser::ast::{
    AssignmentTarget, ConflictTarget, Delete, DoUpdate, Expr, FromTable, Ident, Insert, OnConflict, OnConflictAction,
    OnInsert, SelectItem, Statement, TableFactor, TableObject, Update, VisitMut, VisitorMut,
};
use weir_catalog::Catalog;

use crate::engine::{table_store, Engine, TableChanges};
use crate::error::{ErrorKind, Result, WeirError};
use crate::plan::updating_operator;
use crate::runtime::table::{TableStore, KEY_COLUMN};
use crate::sql::parser::{ident, object_name};
use crate::sql::planning::CatalogSources;
use crate::sql::relations::{session_context, Snapshot, SystemTables};
use crate::state::{Overlaid, ScanState};

/// Where the row ids of a transaction block's keyless tables start while its statements run:
/// far above any real one, so they never collide (COMMIT numbers the rows again).
const TENTATIVE_ROW_IDS: u64 = 1 << 63;

/// A write statement on a plain table, as [`apply`] runs it.
#[derive(Debug, Clone)]
pub enum WriteStep {
    /// `INSERT` or `COPY FROM`: rows of the table's columns, in order, cast to their types, as
    /// evaluated when the statement ran; `ON CONFLICT` if it had one.
    Insert { table: String, alias: Option<Ident>, rows: Vec<RecordBatch>, on_conflict: Option<OnConflict> },
    Update(Box<Update>),
    Delete(Box<Delete>),
}

/// The state a [`WriteStep`] is applied over.
pub struct WriteBase<'a> {
    pub catalog: Arc<Catalog>,
    /// The committed state under the changes.
    pub state: Arc<dyn ScanState>,
    /// The system tables, for a WHERE that reads one.
    pub system: SystemTables,
    /// Where keyless tables' row ids start: the engine's sequences, or tentative ones.
    pub row_ids: RowIds<'a>,
    /// The statement's interrupt, checked before each batch of rows it writes
    /// ([`crate::engine::interrupt`]): writing a million rows into a keyed table is seconds of
    /// work without an await point.
    pub interrupt: crate::engine::Interrupt,
}

/// Where a keyless table's row ids start.
pub enum RowIds<'a> {
    /// At the engine's sequence (a statement that commits).
    Engine(&'a Engine),
    /// Far above it (a transaction block's statement, before COMMIT).
    Tentative,
}

impl RowIds<'_> {
    fn first(&self, table: u32) -> Result<u64> {
        match self {
            RowIds::Engine(engine) => engine.peek_row_id(table),
            RowIds::Tentative => Ok(TENTATIVE_ROW_IDS),
        }
    }
}

impl<'a> WriteBase<'a> {
    /// The engine's latest commit, for a statement that commits under the engine.
    pub fn of_engine(engine: &'a Engine) -> Self {
        Self {
            catalog: Arc::clone(&engine.catalog),
            state: Arc::clone(&engine.store) as Arc<dyn ScanState>,
            system: SystemTables::ready(Arc::new(engine.system_state())),
            row_ids: RowIds::Engine(engine),
            interrupt: engine.interrupt(),
        }
    }
}

/// What a step did: the rows it wrote (the new rows of an INSERT or UPDATE, the old ones of a
/// DELETE; `RETURNING` reads them) and their count.
pub struct Applied {
    pub count: usize,
    pub rows: Vec<RecordBatch>,
    /// The rows' schema: the table's columns.
    pub schema: SchemaRef,
}

/// The table `INSERT` writes to.
///
/// # Errors
/// `Unsupported` for `INSERT INTO` a table function.
pub fn insert_table(insert: &Insert) -> Result<String> {
    match &insert.table {
        TableObject::TableName(name) => Ok(object_name(name)),
        _ => Err(WeirError::unsupported("INSERT INTO a table function")),
    }
}

/// The table an UPDATE or DELETE writes to.
///
/// # Errors
/// `Unsupported` for UPDATE ... FROM, an UPDATE of a join, DELETE ... USING or of several
/// tables.
pub fn write_table(step: &WriteStep) -> Result<String> {
    match step {
        WriteStep::Insert { table, .. } => Ok(table.clone()),
        WriteStep::Update(update) => {
            if update.from.is_some() || !update.table.joins.is_empty() {
                return Err(WeirError::unsupported("UPDATE ... FROM and UPDATE of a join"));
            }
            table_factor_name(&update.table.relation)
        }
        WriteStep::Delete(delete) => {
            let tables = match &delete.from {
                FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
            };
            if tables.len() != 1 || !tables[0].joins.is_empty() || delete.using.is_some() {
                return Err(WeirError::unsupported("DELETE from several tables or with USING"));
            }
            table_factor_name(&tables[0].relation)
        }
    }
}

/// The step of `INSERT INTO table ...` on a plain table: its rows (VALUES or the query,
/// evaluated over `snapshot`), cast to the table's column types, unlisted columns NULL.
///
/// # Errors
/// `UnknownTable`, planning and evaluation errors; `Unsupported` for MySQL's `ON DUPLICATE KEY
/// UPDATE`.
pub async fn insert_step(snapshot: Arc<Snapshot>, insert: &Insert) -> Result<WriteStep> {
    let table = insert_table(insert)?;
    let (store, _) = table_store(&snapshot.catalog, &table)?;
    let on_conflict = match &insert.on {
        None => None,
        Some(OnInsert::OnConflict(c)) => Some(c.clone()),
        Some(_) => return Err(WeirError::unsupported("ON DUPLICATE KEY UPDATE; use ON CONFLICT (key) DO UPDATE")),
    };
    let mut plain = insert.clone();
    plain.on = None;
    plain.returning = None;
    let columns = snapshot.catalog.get(&table).map_or(&[][..], |r| &r.columns[..]);
    if plain.columns.is_empty() {
        if let Some(width) = short_values(&plain, columns.len()) {
            // Postgres fills the columns a VALUES row leaves out at the end with NULL (their
            // default): the same INSERT with the first columns listed.
            plain.columns = columns[..width]
                .iter()
                .map(|c| sqlparser::ast::ObjectName::from(vec![Ident::with_quote('"', &c.name)]))
                .collect();
        }
    }
    let targets = if plain.columns.is_empty() { columns.len() } else { plain.columns.len() };
    if let Some(sqlparser::ast::SetExpr::Values(values)) = plain.source.as_ref().map(|s| s.body.as_ref()) {
        // A short row without a column list was filled above; any other row must fit.
        if let Some(width) = values.rows.iter().map(|r| r.len()).find(|w| *w != targets) {
            return Err(WeirError::insert_column_count(width, targets));
        }
    }
    let ctx = session_context(snapshot);
    // `INSERT INTO t SELECT x, x FROM s`: the columns go by position, so repeats are fine.
    let mut statement = Statement::Insert(plain);
    crate::sql::query_rewrites::rewrite(&mut statement)?;
    crate::sql::pg_compat::alias_nested_repeats(&mut statement, true);
    let plan = match ctx.state().statement_to_plan(DfStatement::Statement(Box::new(statement))).await {
        // DataFusion's "Column count doesn't match insert query!", in Postgres's words.
        Err(e) if e.to_string().contains("Column count doesn't match insert query") => {
            let Some(source) = &insert.source else { return Err(e.into()) };
            let given = ctx.state().create_logical_plan(&source.to_string()).await?.schema().fields().len();
            return Err(WeirError::insert_column_count(given, targets));
        }
        planned => planned?,
    };
    let LogicalPlan::Dml(dml) = plan else {
        return Err(WeirError::internal("INSERT did not plan as DML"));
    };
    if !matches!(dml.op, WriteOp::Insert(_)) {
        return Err(WeirError::internal("INSERT planned as another write"));
    }
    check_assignments(&dml.input, &table)?;
    let input = round_into_integers(dml.input.as_ref().clone())?;
    let batches = DataFrame::new(ctx.state(), input).collect().await?;
    let rows = batches.iter().map(|b| conform(b, store.schema())).collect::<Result<Vec<_>>>()?;
    let alias = insert.table_alias.as_ref().map(|a| a.alias.clone());
    Ok(WriteStep::Insert { table, alias, rows, on_conflict })
}

/// The width of `insert`'s VALUES rows when they all have the same number of values and fewer
/// than the table's `columns`.
fn short_values(insert: &Insert, columns: usize) -> Option<usize> {
    let sqlparser::ast::SetExpr::Values(values) = insert.source.as_ref()?.body.as_ref() else { return None };
    let width = values.rows.first()?.len();
    (width < columns && values.rows.iter().all(|r| r.len() == width)).then_some(width)
}

/// Applies `step` over `base` as changed by `changes`, adding what it writes to `changes`.
///
/// # Errors
/// `UnknownTable`; a NOT NULL or primary-key violation; `ON CONFLICT` errors; planning and
/// evaluation errors of UPDATE and DELETE. `changes` may hold part of the step then: drop it.
pub async fn apply(base: &WriteBase<'_>, changes: &mut TableChanges, step: &WriteStep) -> Result<Applied> {
    let table = write_table(step)?;
    let (store, id) = table_store(&base.catalog, &table)?;
    let schema = nullable(store.schema());
    let (count, rows) = match step {
        WriteStep::Insert { rows, on_conflict, alias, .. } => {
            let rows = match on_conflict {
                Some(c) => resolve_conflicts(base, changes, &store, (id, &table, alias.as_ref()), rows, c).await?,
                None => rows.clone(),
            };
            let mut next = changes.next_row_id(id, &|t| base.row_ids.first(t))?;
            let mut count = 0;
            for batch in &rows {
                base.interrupt.check()?;
                count += batch.num_rows();
                // Without ON CONFLICT the rows go through the views in the order written, the
                // watermark moving between them where a row needs it.
                let cuts = match on_conflict {
                    None => watermark_cuts(base, changes, &table, batch).await?,
                    Some(_) => Vec::new(),
                };
                let mut start = 0;
                for (at, watermark) in cuts.into_iter().chain([(batch.num_rows(), None)]) {
                    if at > start {
                        let part = batch.slice(start, at - start);
                        let chunk = store.insert(&part, &*base.state, &mut changes.writes, &mut next)?;
                        changes.chunks.push((table.clone(), chunk));
                    }
                    if let Some(w) = watermark {
                        changes.mark_watermark(&table, w);
                    }
                    start = at;
                }
            }
            changes.row_ids.insert(id, next);
            raise_watermark(base, changes, &table, &rows).await?;
            (count, rows)
        }
        WriteStep::Update(update) => {
            let (count, rows) = apply_update(base, changes, &store, &table, &schema, update).await?;
            raise_watermark(base, changes, &table, &rows).await?;
            (count, rows)
        }
        WriteStep::Delete(delete) => {
            let target = match &delete.from {
                FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t.first().map(|t| &t.relation),
            };
            let mut sql = format!("SELECT * FROM {}{}", quote(&table), target.map(alias_of).unwrap_or_default());
            if let Some(w) = &delete.selection {
                sql.push_str(&format!(" WHERE {w}"));
            }
            let batches = keyed_scan(base, changes, &table, &sql).await?;
            let ncols = schema.fields().len();
            let mut count = 0;
            let mut rows = Vec::with_capacity(batches.len());
            for batch in batches {
                base.interrupt.check()?;
                let keys = key_column(&batch, ncols)?;
                let old = RecordBatch::try_new(Arc::clone(&schema), batch.columns()[..ncols].to_vec())?;
                count += old.num_rows();
                let chunk = store.delete(&keys, &old, &mut changes.writes)?;
                changes.chunks.push((table.clone(), chunk));
                rows.push(old);
            }
            (count, rows)
        }
    };
    Ok(Applied { count, rows, schema })
}

/// ` AS alias` of an UPDATE's or DELETE's target (`UPDATE t AS x SET .. WHERE x.a = 1`, as
/// Postgres takes it), or nothing.
fn alias_of(target: &sqlparser::ast::TableFactor) -> String {
    match target {
        sqlparser::ast::TableFactor::Table { alias: Some(alias), .. } => format!(" AS {}", alias.name),
        _ => String::new(),
    }
}

/// UPDATE's changes: each matching row with the SET expressions evaluated over it.
async fn apply_update(
    base: &WriteBase<'_>,
    changes: &mut TableChanges,
    store: &TableStore,
    table: &str,
    schema: &SchemaRef,
    update: &Update,
) -> Result<(usize, Vec<RecordBatch>)> {
    let mut new_exprs = Vec::new();
    let mut targets = Vec::new();
    for a in &update.assignments {
        let index = assigned_column(&a.target, table, schema)?;
        targets.push(index);
        new_exprs.push(format!("({}) AS \"__weir_new_{}\"", a.value, targets.len() - 1));
    }
    let mut sql = format!("SELECT *, {} FROM {}{}", new_exprs.join(", "), quote(table), alias_of(&update.table.relation));
    if let Some(w) = &update.selection {
        sql.push_str(&format!(" WHERE {w}"));
    }
    let batches = keyed_scan(base, changes, table, &sql).await?;
    let ncols = schema.fields().len();
    let mut count = 0;
    let mut rows = Vec::with_capacity(batches.len());
    for batch in &batches {
        base.interrupt.check()?;
        let keys = key_column(batch, ncols)?;
        let old = RecordBatch::try_new(Arc::clone(schema), batch.columns()[..ncols].to_vec())?;
        let mut cols: Vec<ArrayRef> = old.columns().to_vec();
        for (i, target) in targets.iter().enumerate() {
            let value = batch.column(ncols + 1 + i);
            let column = schema.field(*target);
            check_assignment(value.data_type(), column.data_type(), column.name(), table)?;
            cols[*target] = strict_cast(value, column.data_type())?;
        }
        let new = RecordBatch::try_new(Arc::clone(schema), cols)?;
        count += new.num_rows();
        let chunk = store.update(&keys, &old, &new, &*base.state, &mut changes.writes)?;
        changes.chunks.push((table.to_string(), chunk));
        rows.push(new);
    }
    Ok((count, rows))
}

/// The index in `schema` of the column an assignment sets.
fn assigned_column(target: &AssignmentTarget, table: &str, schema: &SchemaRef) -> Result<usize> {
    let AssignmentTarget::ColumnName(col) = target else {
        return Err(WeirError::unsupported("UPDATE of a tuple of columns"));
    };
    let col = col.0.last().and_then(|p| p.as_ident()).map(ident).unwrap_or_default();
    schema.index_of(&col).map_err(|_| {
        ErrorKind::UnknownColumn(format!(
            "column \"{col}\" of table {table} does not exist; columns: {}",
            schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ")
        ))
        .into()
    })
}

/// The rows of `rows` to write under `ON CONFLICT`: those whose key is new, and for `DO
/// UPDATE` the stored rows of the others, updated.
async fn resolve_conflicts(
    base: &WriteBase<'_>,
    changes: &TableChanges,
    store: &TableStore,
    (id, table, alias): (u32, &str, Option<&Ident>),
    rows: &[RecordBatch],
    conflict: &OnConflict,
) -> Result<Vec<RecordBatch>> {
    let schema = nullable(store.schema());
    let pk: Vec<String> = store.primary_key_columns().iter().map(|&i| schema.field(i).name().clone()).collect();
    let no_constraint = || {
        WeirError::new(ErrorKind::InvalidConflictTarget(format!(
            "there is no unique or exclusion constraint matching the ON CONFLICT specification (table {table} has {})",
            if pk.is_empty() { "no primary key".to_string() } else { format!("PRIMARY KEY ({})", pk.join(", ")) }
        )))
    };
    if pk.is_empty() {
        return Err(no_constraint());
    }
    match &conflict.conflict_target {
        None if matches!(conflict.action, OnConflictAction::DoUpdate(_)) => {
            return Err(WeirError::syntax(
                "ON CONFLICT DO UPDATE requires inference specification or constraint name; name the primary key: ON CONFLICT (key) DO UPDATE",
                None,
            ));
        }
        None => {}
        Some(ConflictTarget::Columns(cols)) => {
            let mut named: Vec<String> = cols.iter().map(ident).collect();
            let mut key = pk.clone();
            named.sort();
            key.sort();
            if named != key {
                return Err(no_constraint());
            }
        }
        Some(ConflictTarget::OnConstraint(name)) => {
            if object_name(name) != format!("{table}_pkey") {
                return Err(no_constraint());
            }
        }
    }
    let batch = concat_batches(&schema, rows)?;
    let keys = store.primary_keys(&batch)?.expect("a keyed table has keys");
    let stored = changes.writes.get_many(&*base.state, id, &keys)?;
    let mut first_of_key: HashMap<&[u8], usize> = HashMap::new();
    let mut fresh: Vec<u32> = Vec::new();
    let mut conflicting: Vec<(u32, Vec<u8>)> = Vec::new();
    for (i, (key, old)) in keys.iter().zip(stored).enumerate() {
        let repeated = first_of_key.insert(key.as_slice(), i).is_some();
        match (&conflict.action, old) {
            (OnConflictAction::DoNothing, Some(_)) => {}
            (OnConflictAction::DoNothing, None) if repeated => {}
            (OnConflictAction::DoUpdate(_), _) if repeated => {
                return Err(WeirError::new(ErrorKind::CardinalityViolation(
                    "ON CONFLICT DO UPDATE command cannot affect row a second time (a key appears twice among the rows proposed for insertion)".into(),
                )));
            }
            (OnConflictAction::DoUpdate(_), Some(old)) => conflicting.push((i as u32, old)),
            (_, None) => fresh.push(i as u32),
        }
    }
    let mut out = vec![take_record_batch(&batch, &UInt32Array::from(fresh))?];
    if let (OnConflictAction::DoUpdate(update), false) = (&conflict.action, conflicting.is_empty()) {
        let (positions, old): (Vec<u32>, Vec<Vec<u8>>) = conflicting.into_iter().unzip();
        let stored = store.decode_rows(&old)?;
        let excluded = take_record_batch(&batch, &UInt32Array::from(positions))?;
        out.push(updated_rows((table, alias), &schema, store.primary_key_columns(), (&stored, &excluded), update).await?);
    }
    Ok(out)
}

/// `DO UPDATE SET ... [WHERE ...]` over stored rows and the rows proposed for them
/// (`excluded`), row by row: the updated rows, cast to the table's types, those the WHERE
/// keeps.
async fn updated_rows(
    (table, alias): (&str, Option<&Ident>),
    schema: &SchemaRef,
    key: &[usize],
    (stored, excluded): (&RecordBatch, &RecordBatch),
    update: &DoUpdate,
) -> Result<RecordBatch> {
    // One table of the stored row's columns followed by the proposed row's, renamed, so a bare
    // column and `table.column` name the stored row and `excluded.column` the proposed one.
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(schema.fields().iter().map(|f| Field::new(excluded_name(f.name()), f.data_type().clone(), true)));
    let mut columns: Vec<ArrayRef> = stored.columns().to_vec();
    columns.extend(excluded.columns().iter().cloned());
    let both = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
    let mut assigned: Vec<Option<String>> = vec![None; schema.fields().len()];
    for a in &update.assignments {
        let index = assigned_column(&a.target, table, schema)?;
        if key.contains(&index) {
            return Err(WeirError::unsupported(format!(
                "ON CONFLICT DO UPDATE of primary key column {} (the row's key is the conflict's)",
                schema.field(index).name()
            )));
        }
        let mut value = a.value.clone();
        let _ = value.visit(&mut ExcludedColumns { schema });
        assigned[index] = Some(value.to_string());
    }
    let select: Vec<String> = schema
        .fields()
        .iter()
        .zip(&assigned)
        .map(|(f, a)| format!("{} AS {}", a.clone().unwrap_or_else(|| quote(f.name())), quote(f.name())))
        .collect();
    let from = match alias {
        Some(a) => format!("{} AS {a}", quote(table)),
        None => quote(table),
    };
    let mut sql = format!("SELECT {} FROM {from}", select.join(", "));
    if let Some(w) = &update.selection {
        let mut w = w.clone();
        let _ = w.visit(&mut ExcludedColumns { schema });
        sql.push_str(&format!(" WHERE {w}"));
    }
    let (result, batches) = query_over(table, both, &sql).await?;
    for (got, column) in result.fields().iter().zip(schema.fields()) {
        check_assignment(got.data_type(), column.data_type(), column.name(), table)?;
    }
    conform(&concat_batches(&result, &batches)?, schema)
}

/// The column of a proposed row's `name` in the table [`updated_rows`] queries.
fn excluded_name(name: &str) -> String {
    format!("__weir_excluded_{name}")
}

/// Rewrites `excluded.c` into the column [`excluded_name`] names.
struct ExcludedColumns<'a> {
    schema: &'a SchemaRef,
}

impl VisitorMut for ExcludedColumns<'_> {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> std::ops::ControlFlow<()> {
        if let Expr::CompoundIdentifier(parts) = expr {
            if parts.len() == 2 && parts[0].value.eq_ignore_ascii_case("excluded") {
                let name = ident(&parts[1]);
                let column = self
                    .schema
                    .fields()
                    .iter()
                    .find(|f| f.name().eq_ignore_ascii_case(&name))
                    .map_or(name, |f| f.name().clone());
                *expr = Expr::Identifier(Ident::with_quote('"', excluded_name(&column)));
            }
        }
        std::ops::ControlFlow::Continue(())
    }
}

/// `name` as a quoted SQL identifier.
fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Runs `sql` over one in-memory table named `name` holding `rows`, with Weir's functions;
/// returns the result's schema and rows.
async fn query_over(name: &str, rows: RecordBatch, sql: &str) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let ctx = datafusion::prelude::SessionContext::new();
    crate::plan::functions::register(&ctx, crate::plan::time_zone::Zone::utc());
    let mem = datafusion::datasource::MemTable::try_new(rows.schema(), vec![vec![rows]])?;
    ctx.register_table(quote(name).as_str(), Arc::new(mem))?;
    let frame = ctx.sql(sql).await?;
    let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
    Ok((schema, frame.collect().await?))
}

/// The rows of `RETURNING items` over `applied`'s rows (of table `table`, named `alias` too if
/// the statement gave one), with Postgres's output column names.
///
/// # Errors
/// Planning and evaluation errors of the items (an unknown column, say).
pub async fn returning(table: &str, alias: Option<&Ident>, applied: &Applied, items: &[SelectItem]) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let rows = concat_batches(&applied.schema, &applied.rows)?;
    let list = items.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    let from = match alias {
        Some(a) => format!("{} AS {a}", quote(table)),
        None => quote(table),
    };
    let sql = format!("SELECT {list} FROM {from}");
    let names = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::GenericDialect {}, &sql)
        .ok()
        .and_then(|stmts| stmts.first().and_then(crate::sql::pg_compat::output_names));
    let (schema, batches) = query_over(table, rows, &sql).await?;
    match names {
        Some(names) => crate::sql::pg_compat::rename(&schema, batches, &names),
        None => Ok((schema, batches)),
    }
}

/// Where the watermark of `table` must move within `batch`, rows of an INSERT that arrive in
/// the order written (SQL.md: "the watermark moves row by row"): `(i, Some(w))` raises it to
/// `w`, what the rows before row `i` reach, before row `i` goes through the views. A cut is
/// made only before a row whose event time is at or below that watermark, and above the one
/// already in force (the last commit's, or these changes'): a row above the watermark is late
/// for no operator, so rows in order of time, or out of order by less than the WATERMARK's
/// delay, go through in one chunk. Empty for a table without a WATERMARK.
///
/// # Errors
/// Evaluating the WATERMARK expression over the rows.
async fn watermark_cuts(base: &WriteBase<'_>, changes: &TableChanges, table: &str, batch: &RecordBatch) -> Result<Vec<(usize, Option<i64>)>> {
    let Some(wm) = base.catalog.get(table).and_then(|r| r.watermark.clone()) else { return Ok(Vec::new()) };
    if batch.num_rows() < 2 {
        return Ok(Vec::new());
    }
    // One partition: the values come back in the rows' order.
    let config = datafusion::prelude::SessionConfig::new().with_target_partitions(1);
    let ctx = datafusion::prelude::SessionContext::new_with_config(config);
    crate::plan::functions::register(&ctx, crate::plan::time_zone::Zone::utc());
    let mem = datafusion::datasource::MemTable::try_new(batch.schema(), vec![vec![batch.clone()]])?;
    ctx.register_table("t", Arc::new(mem))?;
    let ms = |e: &str| format!("CAST(CAST({e} AS TIMESTAMP(3)) AS BIGINT)");
    let sql = format!("SELECT {} AS row_time, {} AS row_watermark FROM t", ms(&quote(&wm.column)), ms(&wm.expr));
    let committed = match base.row_ids {
        RowIds::Engine(engine) => engine.watermarks.get(table).copied(),
        RowIds::Tentative => None,
    };
    let mut in_force = committed.max(changes.watermark(table));
    let mut reached = in_force;
    let mut cuts = Vec::new();
    let mut row = 0;
    for values in ctx.sql(&sql).await?.collect().await? {
        let times = values.column(0).as_primitive::<Int64Type>();
        let marks = values.column(1).as_primitive::<Int64Type>();
        for i in 0..values.num_rows() {
            if times.is_valid(i) && reached.is_some_and(|w| times.value(i) <= w) && reached > in_force {
                cuts.push((row, reached));
                in_force = reached;
            }
            if marks.is_valid(i) {
                reached = reached.max(Some(marks.value(i)));
            }
            row += 1;
        }
    }
    Ok(cuts)
}

/// Raises `table`'s watermark in `changes` to what `rows` reach.
async fn raise_watermark(base: &WriteBase<'_>, changes: &mut TableChanges, table: &str, rows: &[RecordBatch]) -> Result<()> {
    if let Some(w) = watermark_of_rows(&base.catalog, table, rows).await? {
        changes.raise_watermark(table, w);
    }
    Ok(())
}

/// Runs `sql` with `table`'s hidden storage-key column visible, over `base` as `changes` left it.
async fn keyed_scan(base: &WriteBase<'_>, changes: &TableChanges, table: &str, sql: &str) -> Result<Vec<RecordBatch>> {
    let reader: Arc<dyn ScanState> = if changes.writes.is_empty() {
        Arc::clone(&base.state)
    } else {
        Arc::new(Overlaid::new(Arc::clone(&base.state), Arc::new(changes.writes.clone())))
    };
    let ctx = session_context(Arc::new(Snapshot {
        catalog: Arc::clone(&base.catalog),
        permanent: None,
        reader,
        keyed_table: Some(table.to_string()),
        system: base.system.clone(),
        activities: None,
        nulls: crate::sql::relations::NullCollation::High,
    }));
    Ok(ctx.sql(sql).await?.collect().await?)
}

/// INSERT INTO a connector table: checks the query's changelog against the sink, then starts
/// the job that writes it (with [`SinkJobMode::Start`](crate::sql::sink_jobs::SinkJobMode)).
/// `text` is the statement as the user wrote it: `SHOW JOBS` shows it as the job's definition.
/// `temporary` are the session's temporary views the query reads: the job keeps them.
pub async fn insert_into_connector(
    engine: &mut Engine,
    rel: &weir_catalog::Relation,
    insert: &Insert,
    text: &str,
    settings: &std::collections::BTreeMap<String, String>,
    mode: crate::sql::sink_jobs::SinkJobMode,
    temporary: Vec<weir_catalog::Relation>,
) -> Result<usize> {
    let Some(source) = &insert.source else {
        return Err(WeirError::unsupported("INSERT without a query"));
    };
    // The columns go to the sink by position, so a repeated one is fine (`SELECT x, x`).
    let mut source = source.clone();
    // A derived table's or CTE's columns are named as Postgres names them, as in a view.
    crate::sql::pg_compat::name_nested_columns(&mut source);
    crate::sql::pg_compat::alias_query_repeats(&mut source, true);
    crate::sql::query_rewrites::first_last_value_ignore_nulls(&mut source);
    let source = &source;
    let ctx = session_context(crate::sql::planning::planning_snapshot(engine, None, &temporary));
    let query = match insert.columns.as_slice() {
        [] => source.to_string(),
        listed => {
            let given = ctx.state().create_logical_plan(&source.to_string()).await?.schema().fields().len();
            if given != listed.len() {
                return Err(WeirError::insert_column_count(given, listed.len()));
            }
            with_target_columns(rel, listed, &source.to_string())?
        }
    };
    let plan = ctx.state().create_logical_plan(&crate::sql::query_rewrites::rewrite_text(&query)?).await?;
    crate::plan::temporal::mark_lookup_joins(&plan);
    let plan = ctx.state().optimize(&plan)?;
    // What would make the query updating, to name in the refusal of an append-only sink (the
    // stream plan decides whether it is).
    let updating = match weir_connectors::is_append_only_sink(&rel.options) {
        true => updating_operator(&plan, &CatalogSources(&engine.catalog))?,
        false => None,
    };
    let depends_on = crate::sql::temporary_views::job_dependencies(engine, source, &temporary);
    let definition = text.trim().trim_end_matches(';').trim_end();
    let job = crate::sql::sink_jobs::SinkJob { query: &query, depends_on, definition, temporary };
    crate::sql::sink_jobs::start_sink_job(engine, rel, job, settings, updating, mode).await?;
    Ok(0)
}

/// The query of `INSERT INTO sink (listed) query` as one that gives every written column of
/// `sink` in its order: a listed column takes the query's column in the list's position, one
/// not listed is NULL (Postgres's and Flink's partial insert).
///
/// # Errors
/// `Plan` for a listed name that is not a written column of `sink` or is listed twice.
fn with_target_columns(sink: &weir_catalog::Relation, listed: &[sqlparser::ast::ObjectName], query: &str) -> Result<String> {
    let written: Vec<&str> = sink.columns.iter().filter(|c| c.computed.is_none()).map(|c| c.name.as_str()).collect();
    let mut positions = vec![None; written.len()];
    for (i, name) in listed.iter().enumerate() {
        let name = object_name(name);
        let Some(at) = written.iter().position(|w| *w == name) else {
            return Err(WeirError::plan(format!("column \"{name}\" of relation \"{}\" does not exist", sink.name)));
        };
        if positions[at].replace(i).is_some() {
            return Err(WeirError::plan(format!("column \"{name}\" specified more than once")));
        }
    }
    let aliases: Vec<String> = (0..listed.len()).map(|i| format!("__weir_c{i}")).collect();
    let select: Vec<String> = positions
        .iter()
        .zip(&written)
        .map(|(at, name)| match at {
            Some(i) => format!("__weir_insert.{} AS \"{name}\"", aliases[*i]),
            None => format!("NULL AS \"{name}\""),
        })
        .collect();
    Ok(format!("SELECT {} FROM ({query}) AS __weir_insert({})", select.join(", "), aliases.join(", ")))
}

/// The watermark table `table` reaches with `rows` (its schema): the largest value of its
/// WATERMARK expression over them, in ms; `None` without a WATERMARK or rows.
async fn watermark_of_rows(catalog: &Catalog, table: &str, rows: &[RecordBatch]) -> Result<Option<i64>> {
    let Some(wm) = catalog.get(table).and_then(|r| r.watermark.clone()) else { return Ok(None) };
    let Some(first) = rows.first() else { return Ok(None) };
    if rows.iter().all(|b| b.num_rows() == 0) {
        return Ok(None);
    }
    let ctx = datafusion::prelude::SessionContext::new();
    crate::plan::functions::register(&ctx, crate::plan::time_zone::Zone::utc());
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
///
/// # Errors
/// `Plan` when the column counts differ; a cast that fails.
pub fn conform(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
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
        .map(|(c, f)| if c.data_type() == f.data_type() { Ok(Arc::clone(c)) } else { strict_cast(c, f.data_type()) })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new_with_options(
        nullable(schema),
        cols,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?)
}

/// Refuses an INSERT whose query gives a column of `table` a value of a type that cannot be
/// assigned to it ([`check_assignment`]). DataFusion plans the INSERT as a projection that
/// casts each query column to its table column's type; those casts are read here, before any
/// row is evaluated.
///
/// # Errors
/// As [`check_assignment`].
fn check_assignments(input: &LogicalPlan, table: &str) -> Result<()> {
    use datafusion::common::tree_node::TreeNode;
    use datafusion::logical_expr::{Cast, Expr as DfExpr, ExprSchemable, TryCast};
    // Each cast of `exprs` (one per column named by `names`), its argument typed over `over`.
    let check = |exprs: &[DfExpr], names: &[String], over: &datafusion::common::DFSchema| -> Result<()> {
        for (expr, name) in exprs.iter().zip(names) {
            let expr = match expr {
                DfExpr::Alias(a) => a.expr.as_ref(),
                e => e,
            };
            let (DfExpr::Cast(Cast { expr: source, field: to }) | DfExpr::TryCast(TryCast { expr: source, field: to })) = expr else {
                continue;
            };
            check_assignment(&source.get_type(over)?, to.data_type(), name, table)?;
        }
        Ok(())
    };
    let none = datafusion::common::DFSchema::empty();
    let values_rows = |values: &datafusion::logical_expr::Values, names: &[String]| -> Result<()> {
        values.values.iter().try_for_each(|row| check(row, names, &none))
    };
    match input {
        LogicalPlan::Projection(projection) => {
            let names: Vec<String> = projection.schema.fields().iter().map(|f| f.name().clone()).collect();
            check(&projection.expr, &names, projection.input.schema())?;
            // `VALUES` under it: DataFusion casts each row's values to the table's types. A
            // VALUES column is named by the table column the projection puts it in.
            if let LogicalPlan::Values(values) = projection.input.as_ref() {
                let target = |column: &str| {
                    projection.expr.iter().zip(&names).find_map(|(e, name)| {
                        let mut reads = false;
                        let _ = e.apply(|e| {
                            reads |= matches!(e, DfExpr::Column(c) if c.name == column);
                            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
                        });
                        reads.then(|| name.clone())
                    })
                };
                let names: Vec<String> =
                    values.schema.fields().iter().map(|f| target(f.name()).unwrap_or_else(|| f.name().clone())).collect();
                values_rows(values, &names)?;
            }
            Ok(())
        }
        LogicalPlan::Values(values) => values_rows(values, &values.schema.fields().iter().map(|f| f.name().clone()).collect::<Vec<_>>()),
        _ => Ok(()),
    }
}

/// The INSERT's plan with each cast of a DOUBLE or DECIMAL to an integer column (in its top
/// projection and in the rows of a `VALUES` under it) rounding half away from zero first, as
/// Postgres's assignment does (`2.5` into an INT is 3, `-2.5` is -3; DataFusion's cast
/// truncates to 2).
///
/// # Errors
/// DataFusion's, rebuilding the plan.
fn round_into_integers(input: LogicalPlan) -> Result<LogicalPlan> {
    use datafusion::logical_expr::{Cast, Expr as DfExpr, ExprSchemable};
    // The cast an expression is (under its alias), DataFusion's coercion to the column's type;
    // casts inside it are the query's own and stay as written.
    let rounded = |expr: DfExpr, over: &datafusion::common::DFSchema| -> Result<DfExpr> {
        let (inner, alias) = match expr {
            DfExpr::Alias(a) => (*a.expr, Some((a.relation, a.name))),
            e => (e, None),
        };
        let inner = match inner {
            DfExpr::Cast(Cast { expr: source, field: to })
                if to.data_type().is_integer() && {
                    let from = source.get_type(over)?;
                    from.is_floating() || matches!(from, arrow::datatypes::DataType::Decimal128(..))
                } =>
            {
                let round = datafusion::functions::math::round();
                let source = DfExpr::ScalarFunction(datafusion::logical_expr::expr::ScalarFunction::new_udf(round, vec![*source]));
                DfExpr::Cast(Cast { expr: Box::new(source), field: to })
            }
            other => other,
        };
        Ok(match alias {
            Some((relation, name)) => inner.alias_qualified(relation, name),
            None => inner,
        })
    };
    let LogicalPlan::Projection(projection) = input else { return Ok(input) };
    let inner = match projection.input.as_ref() {
        LogicalPlan::Values(values) => {
            let none = datafusion::common::DFSchema::empty();
            let rows = values
                .values
                .iter()
                .map(|row| row.iter().map(|e| rounded(e.clone(), &none)).collect::<Result<Vec<_>>>())
                .collect::<Result<Vec<_>>>()?;
            Arc::new(LogicalPlan::Values(datafusion::logical_expr::Values { schema: Arc::clone(&values.schema), values: rows }))
        }
        _ => Arc::clone(&projection.input),
    };
    let exprs = projection.expr.iter().map(|e| rounded(e.clone(), inner.schema())).collect::<Result<Vec<_>>>()?;
    Ok(LogicalPlan::Projection(datafusion::logical_expr::Projection::try_new(exprs, inner)?))
}

/// Whether a value of type `from` may be written into a column of type `to` of a table, as
/// Postgres's assignment casts allow (and Flink's implicit casts): as into a sink
/// ([`crate::sql::sink_jobs::assignable`]: numbers into numbers, anything into a string, dates
/// and timestamps into each other, ..), and a string into anything, as Postgres takes a string
/// literal (`INSERT INTO t VALUES ('8')` into an INT; a value that does not parse fails the
/// statement). A timestamp or a boolean into a number, a number into a date, are refused.
///
/// # Errors
/// `Plan` (42804), Postgres's `column "x" is of type bigint but expression is of type ..`.
fn check_assignment(from: &arrow::datatypes::DataType, to: &arrow::datatypes::DataType, column: &str, table: &str) -> Result<()> {
    if assignable_into_table(from, to) {
        return Ok(());
    }
    let name = crate::sql::show::sql_type_name;
    Err(WeirError::plan(format!(
        "column \"{column}\" of {table} is of type {} but expression is of type {}; rewrite or cast the expression",
        name(to),
        name(from)
    )))
}

/// [`check_assignment`]'s rule: a string goes anywhere, at any depth (`ROW('z', '5')` into a
/// `ROW<sku STRING, qty INT>`), the rest as into a sink.
fn assignable_into_table(from: &arrow::datatypes::DataType, to: &arrow::datatypes::DataType) -> bool {
    use arrow::datatypes::DataType::{LargeList, LargeUtf8, List, Map, Struct, Utf8, Utf8View};
    match (from, to) {
        (Utf8 | LargeUtf8 | Utf8View, _) => true,
        (Struct(a), Struct(b)) => a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| assignable_into_table(x.data_type(), y.data_type())),
        (List(a) | LargeList(a), List(b) | LargeList(b)) | (Map(a, _), Map(b, _)) => assignable_into_table(a.data_type(), b.data_type()),
        _ => crate::sql::sink_jobs::assignable(from, to),
    }
}

/// `values` as `to`, failing on a value that does not convert (`UPDATE t SET n = 99999999999`
/// into an INT, a row's field `'x'` into an INT), as Postgres does, never a silent NULL.
///
/// # Errors
/// `Execution` naming the value that does not convert.
///
/// A DOUBLE or DECIMAL into an integer type is rounded half away from zero first, as Postgres
/// assigns it (`7.6` into an INT is 8, `-2.5` is -3), where Arrow's cast truncates.
fn strict_cast(values: &ArrayRef, to: &arrow::datatypes::DataType) -> Result<ArrayRef> {
    use arrow::datatypes::{DataType, Decimal128Type, Float32Type, Float64Type};
    let options = arrow::compute::CastOptions { safe: false, ..Default::default() };
    let rounded: Option<ArrayRef> = match values.data_type() {
        _ if !to.is_integer() => None,
        DataType::Float64 => Some(Arc::new(values.as_primitive::<Float64Type>().unary::<_, Float64Type>(f64::round))),
        DataType::Float32 => Some(Arc::new(values.as_primitive::<Float32Type>().unary::<_, Float32Type>(f32::round))),
        DataType::Decimal128(p, s) if *s > 0 => {
            let unit = 10i128.pow(u32::from(s.unsigned_abs()));
            let half = unit / 2;
            let round = |v: i128| {
                let whole = (v.abs() + half) / unit * unit;
                if v < 0 { -whole } else { whole }
            };
            let out = values.as_primitive::<Decimal128Type>().unary::<_, Decimal128Type>(round);
            Some(Arc::new(out.with_precision_and_scale((*p).min(38), *s)?))
        }
        _ => None,
    };
    let zone = crate::sql::settings::planning_zone();
    Ok(crate::plan::functions::zone_cast::cast_in_zone(rounded.as_ref().unwrap_or(values), to, zone, options.safe)?)
}

/// `schema` with every column nullable: the table's writer checks NOT NULL itself, with
/// Postgres's message, instead of Arrow refusing the batch.
pub fn nullable(schema: &SchemaRef) -> SchemaRef {
    Arc::new(Schema::new(schema.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>()))
}
