//! The engine: the catalog, the running jobs, and the epoch commit of every write statement.
//!
//! One engine per server, behind the database's write lock: DDL and DML statements run one at
//! a time. Each write statement is one epoch: its table changes are pushed through every job
//! that reads them (in dependency order, so a view's changes reach the views built on it), every
//! operator hands its writes to the epoch, and the store commits them with the catalog and the
//! epoch number in one atomic write. If anything fails before the commit, the engine drops all
//! in-memory state and reloads it from the last commit, so a failed statement leaves nothing.

use std::collections::{BTreeMap, HashMap};

use arrow::array::Array;
use std::sync::Arc;

use weir_catalog::{Catalog, Relation, RelationKind};

use crate::error::{Result, WeirError};
use crate::plan::{ChangelogMode, SourceCatalog, SourceInfo, StreamPlan};
use crate::runtime::operators::materialize::StorageMode;
use crate::runtime::table::TableStore;
use crate::runtime::{Job, StreamChunk};
use crate::sql::relations::{connector_of, relation_schema, session_context, Snapshot, SystemState, SystemTables};
use crate::state::{EpochWrites, Store, StoreSnapshot};

/// The catalog, jobs and sequences of a database.
pub struct Engine {
    pub store: Arc<Store>,
    pub catalog: Arc<Catalog>,
    /// Running jobs by materialized view name.
    pub jobs: BTreeMap<String, Job>,
    /// Materialized view names, each after everything it reads.
    pub job_order: Vec<String>,
    /// The last committed epoch.
    pub epoch: u64,
    /// Next row id of keyless tables, by state table id.
    pub row_ids: HashMap<u32, u64>,
    /// The watermark (ms) of each table with a WATERMARK that has seen rows.
    pub watermarks: BTreeMap<String, i64>,
    /// Late rows dropped during this statement, for side tables: (view, operator, table,
    /// rows, watermark ms).
    pub pending_late: Vec<(String, &'static str, String, arrow::array::RecordBatch, i64)>,
    /// For tables with `'watermark.idle-advance'`: when rows last arrived and the watermark
    /// then (ms). Not persisted: after a restart a table advances only after new rows.
    pub idle_base: HashMap<String, (std::time::Instant, i64)>,
    /// Connector source tasks by (job, table): see [`crate::source`].
    pub sources: BTreeMap<(String, String), crate::source::SourceTask>,
    /// Rows received by each blackhole sink job, by job id.
    pub sink_rows: std::sync::Mutex<HashMap<String, Arc<std::sync::atomic::AtomicU64>>>,
    /// Jobs that stopped on an error (`'decode.on-error' = 'fail'`), with it: they read no more
    /// input and show FAILED in `SHOW JOBS`; kept in meta `failed/<job>` across restarts.
    pub failed: BTreeMap<String, String>,
    /// Producers of the `'dead-letter.topic'` of connector tables, by table, opened at their
    /// first dead letter.
    pub dead_letter_writers: HashMap<String, weir_connectors::kafka::KafkaWriter>,
    /// The last committed epoch as readers see it, replaced at each commit.
    committed: CommittedSlot,
}

/// What readers see: the last committed epoch's catalog and a snapshot of the store as of that
/// commit, so every relation a query reads is of the same epoch. [`Engine::commit`] replaces
/// it after each commit; a reader clones the `Arc` out of the slot (a lock held for that clone
/// only) and then holds nothing a job or statement waits for.
pub struct Committed {
    /// The epoch's number.
    pub epoch: u64,
    pub catalog: Arc<Catalog>,
    /// The store as of the epoch's commit.
    pub state: Arc<StoreSnapshot>,
}

/// The slot that holds the last [`Committed`] epoch, shared by the engine and its readers.
pub type CommittedSlot = Arc<std::sync::RwLock<Arc<Committed>>>;

impl Engine {
    /// Loads the engine from the last committed state of `store`.
    pub fn load(store: Arc<Store>) -> Result<Self> {
        let catalog = match store.get_meta("catalog")? {
            Some(bytes) => Catalog::from_bytes(&bytes).map_err(|e| WeirError::storage(e.to_string()))?,
            None => Catalog::default(),
        };
        let epoch = store.committed_epoch()?;
        let store_for_readers = Arc::clone(&store);
        let mut engine = Engine {
            store,
            catalog: Arc::new(catalog),
            jobs: BTreeMap::new(),
            job_order: Vec::new(),
            epoch,
            row_ids: HashMap::new(),
            watermarks: BTreeMap::new(),
            pending_late: Vec::new(),
            idle_base: HashMap::new(),
            sources: BTreeMap::new(),
            sink_rows: Default::default(),
            failed: BTreeMap::new(),
            dead_letter_writers: HashMap::new(),
            committed: Arc::new(std::sync::RwLock::new(Arc::new(Committed {
                epoch,
                catalog: Arc::new(Catalog::default()),
                state: Arc::new(StoreSnapshot::of(&store_for_readers)),
            }))),
        };
        for rel in engine.catalog.relations.values().filter(|r| r.job.is_some()) {
            if let Some(error) = engine.store.get_meta(&failed_key(&rel.name))? {
                engine.failed.insert(rel.name.clone(), String::from_utf8_lossy(&error).into_owned());
            }
        }
        for rel in engine.catalog.relations.values().filter(|r| r.watermark.is_some()) {
            if let Some(b) = engine.store.get_meta(&watermark_key(&rel.name))? {
                let b: [u8; 8] = b.as_slice().try_into().map_err(|_| WeirError::storage("bad watermark"))?;
                engine.watermarks.insert(rel.name.clone(), i64::from_be_bytes(b));
            }
        }
        engine.start_jobs()?;
        engine.publish();
        Ok(engine)
    }

    /// Drops in-memory state and reloads everything from the last commit. Readers keep the
    /// slot they hold: it gets the reloaded epoch.
    pub fn reload(&mut self) -> Result<()> {
        let slot = Arc::clone(&self.committed);
        *self = Engine::load(Arc::clone(&self.store))?;
        self.committed = slot;
        self.publish();
        Ok(())
    }

    /// Restarts every view and job of the catalog from its committed state. One that cannot
    /// restart (its query no longer plans, or plans with other state tables than it was
    /// created with, after an upgrade of Weir) does not stop the others or the database: it is
    /// marked FAILED with the reason (`SHOW JOBS`), its committed rows stay readable, and it
    /// takes no input until it is dropped and created again.
    fn start_jobs(&mut self) -> Result<()> {
        let views: Vec<Relation> = self.catalog.jobs_in_dependency_order().into_iter().cloned().collect();
        for rel in views {
            let job = match self.restart_job(&rel) {
                Ok(job) => job,
                Err(e) => {
                    let error = format!("cannot restart {}: {e}; drop it and create it again", rel.name);
                    tracing::error!("{error}");
                    self.failed.insert(rel.name.clone(), error);
                    continue;
                }
            };
            let reads: Vec<String> = job.reads().iter().map(|r| r.to_string()).collect();
            self.jobs.insert(rel.name.clone(), job);
            if !self.failed.contains_key(&rel.name) {
                self.open_sources(&rel.name, &reads)?;
            }
        }
        self.refresh_job_order();
        Ok(())
    }

    /// Plans view or job `rel` again and instantiates it over its existing state tables.
    ///
    /// # Errors
    /// The planner's; `Internal` when the plan needs state tables the view was not created with.
    fn restart_job(&self, rel: &Relation) -> Result<Job> {
        let query = rel.query.clone().unwrap_or_default();
        let lateness = match rel.options.get(crate::sql::settings::ALLOW_LATENESS) {
            Some(v) => crate::sql::settings::parse_duration_ms(crate::sql::settings::ALLOW_LATENESS, v)?,
            None => 0,
        };
        let mut plan = if rel.kind == RelationKind::SinkJob {
            futures::executor::block_on(self.plan_sink_job(&query))?
        } else {
            futures::executor::block_on(self.plan_stream_query(&query, rel.emit_on_window_close))?
        };
        plan.set_allowed_lateness(lateness);
        plan.set_state_ttl(&crate::sql::settings::state_ttl_of(&rel.options, &query)?)?;
        let mut catalog = (*self.catalog).clone();
        let job = self.build_job(rel, &plan, &mut catalog)?;
        if catalog != *self.catalog {
            return Err(WeirError::internal(format!(
                "the plan of {} changed since it was created (its state tables differ)",
                rel.name
            )));
        }
        Ok(job)
    }

    /// Recomputes [`Engine::job_order`] from the catalog.
    pub fn refresh_job_order(&mut self) {
        self.job_order = self.catalog.jobs_in_dependency_order().iter().map(|r| r.name.clone()).collect();
    }

    /// A snapshot of the current catalog for planning.
    pub fn snapshot(&self, keyed_table: Option<String>) -> Arc<Snapshot> {
        let store: Arc<Store> = Arc::clone(&self.store);
        Arc::new(Snapshot {
            catalog: Arc::clone(&self.catalog),
            reader: store,
            keyed_table,
            system: SystemTables::ready(self.system_state()),
        })
    }

    /// What the system tables show now.
    pub fn system_state(&self) -> Arc<SystemState> {
        let operators: Vec<_> = self
            .jobs
            .iter()
            .flat_map(|(view, job)| {
                let job_id = self.catalog.get(view).and_then(|r| r.job.clone()).unwrap_or_default();
                job.event_time_operators()
                    .into_iter()
                    .map(move |(i, op, wm, n)| (view.clone(), job_id.clone(), i as u64, op.to_string(), wm, n))
            })
            .collect();
        Arc::new(SystemState {
            watermarks: self.watermarks.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            late_rows: operators.iter().map(|o| (o.0.clone(), o.1.clone(), o.2, o.3.clone(), o.5)).collect(),
            operator_watermarks: operators.iter().map(|o| (o.0.clone(), o.1.clone(), o.2, o.3.clone(), o.4)).collect(),
            sources: self.source_rows(),
            state_tables: self
                .jobs
                .iter()
                .flat_map(|(job, j)| {
                    j.state_tables().into_iter().map(move |(i, op, name, t)| crate::sql::relations::StateTableRow {
                        job: job.clone(),
                        operator_index: i as u64,
                        operator: op.to_string(),
                        name,
                        id: t.id(),
                        size: t.size(),
                        ttl_ms: t.ttl_ms(),
                    })
                })
                .collect(),
        })
    }

    /// The reader's slot, holding the last committed epoch: see [`Committed`].
    pub fn committed(&self) -> &CommittedSlot {
        &self.committed
    }

    /// Puts the current (just committed or loaded) epoch into the readers' slot.
    fn publish(&self) {
        let committed = Arc::new(Committed {
            epoch: self.epoch,
            catalog: Arc::clone(&self.catalog),
            state: Arc::new(StoreSnapshot::of(&self.store)),
        });
        *self.committed.write().unwrap_or_else(std::sync::PoisonError::into_inner) = committed;
    }

    /// Plans `query` (SQL text) as a stream over the current catalog; with
    /// `emit_on_window_close`, its window aggregation emits each window once, when it closes.
    pub async fn plan_stream_query(&self, query: &str, emit_on_window_close: bool) -> Result<StreamPlan> {
        let ctx = session_context(self.snapshot(None));
        let plan = ctx.state().create_logical_plan(query).await?;
        crate::plan::temporal::mark_lookup_joins(&plan);
        let plan = ctx.state().optimize(&plan)?;
        let mut stream = crate::plan::plan_stream(&plan, &CatalogSources(&self.catalog))?;
        if emit_on_window_close {
            stream.set_emit_on_window_close()?;
        }
        Ok(stream)
    }

    /// The watermark table `table` reaches with `rows` (its schema): the largest value of its
    /// WATERMARK expression over them, in ms; `None` without a WATERMARK or rows.
    pub async fn watermark_of_rows(&self, table: &str, rows: &[arrow::array::RecordBatch]) -> Result<Option<i64>> {
        let Some(wm) = self.catalog.get(table).and_then(|r| r.watermark.clone()) else { return Ok(None) };
        let Some(first) = rows.first() else { return Ok(None) };
        if rows.iter().all(|b| b.num_rows() == 0) {
            return Ok(None);
        }
        let ctx = datafusion::prelude::SessionContext::new();
        crate::sql::functions::register(&ctx);
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

    /// Instantiates the job of materialized view `rel` from `plan`, allocating its operator
    /// state tables in `catalog` where they are new.
    pub fn build_job(&self, rel: &Relation, plan: &StreamPlan, catalog: &mut Catalog) -> Result<Job> {
        if rel.kind == RelationKind::SinkJob {
            let mut operator_state = catalog.get(&rel.name).map(|r| r.operator_state.clone()).unwrap_or_default();
            let mut allocate = |name: &str| -> u32 {
                if let Some(id) = operator_state.get(name) {
                    return *id;
                }
                let id = catalog.allocate_state_table();
                operator_state.insert(name.to_string(), id);
                id
            };
            let job = self.build_sink_job(rel, plan, &mut allocate)?;
            if let Some(r) = catalog.relations.get_mut(&rel.name) {
                r.operator_state = operator_state;
            }
            return Ok(job);
        }
        let mode = match &rel.stream_key {
            Some(key) => StorageMode::Keyed(key.clone()),
            None => StorageMode::Multiset,
        };
        let rows_table = rel
            .state_table
            .ok_or_else(|| WeirError::internal(format!("{} has no state table", rel.name)))?;
        let mut operator_state = catalog.get(&rel.name).map(|r| r.operator_state.clone()).unwrap_or_default();
        let mut allocate = |name: &str| -> u32 {
            if let Some(id) = operator_state.get(name) {
                return *id;
            }
            let id = catalog.allocate_state_table();
            operator_state.insert(name.to_string(), id);
            id
        };
        let job = Job::build(plan, mode, rows_table, &mut allocate, &self.store)?;
        if let Some(r) = catalog.relations.get_mut(&rel.name) {
            r.operator_state = operator_state;
        }
        Ok(job)
    }

    /// The table store of plain table `name`.
    pub fn table_store(&self, name: &str) -> Result<(TableStore, u32)> {
        let rel = self.catalog.get(name).ok_or_else(|| WeirError::unknown_table(name))?;
        if rel.kind != RelationKind::Table {
            return Err(WeirError::plan(format!(
                "{name} is a {}; only tables take INSERT, UPDATE and DELETE",
                rel.kind.sql_name()
            )));
        }
        if connector_of(rel) != "table" {
            return Err(WeirError::unsupported(format!(
                "writing to table {name}: its '{}' connector's sink is not built yet in this version",
                connector_of(rel)
            )));
        }
        let id = rel.state_table.ok_or_else(|| WeirError::internal(format!("{name} has no state table")))?;
        let schema = relation_schema(rel)?;
        let pk: Vec<usize> = rel
            .primary_key
            .iter()
            .map(|k| schema.index_of(k).map_err(|_| WeirError::internal(format!("primary key column {k}"))))
            .collect::<Result<_>>()?;
        Ok((TableStore::try_new(id, schema, &pk)?, id))
    }

    /// The next row id of keyless table `id`.
    pub fn next_row_id(&mut self, id: u32) -> Result<u64> {
        if let Some(n) = self.row_ids.get(&id) {
            return Ok(*n);
        }
        let n = match self.store.get_meta(&format!("seq/{id}"))? {
            Some(b) => u64::from_be_bytes(b.as_slice().try_into().map_err(|_| WeirError::storage("bad sequence"))?),
            None => 0,
        };
        self.row_ids.insert(id, n);
        Ok(n)
    }

    /// The materialized views whose jobs read `relation`, in dependency order.
    fn readers_of(&self, relation: &str) -> Vec<String> {
        self.job_order
            .iter()
            .filter(|name| !self.failed.contains_key(*name))
            .filter(|name| self.jobs.get(*name).is_some_and(|j| j.reads().contains(&relation)))
            .cloned()
            .collect()
    }

    /// Pushes a change of `relation` through every job that reads it, and on through the views
    /// built on those.
    pub fn propagate(&mut self, relation: &str, chunk: &StreamChunk) -> Result<()> {
        let readers = self.readers_of(relation);
        for name in readers {
            let job = self.jobs.get_mut(&name).expect("reader job exists");
            let out = job.push(relation, chunk, &self.store)?;
            for (op, table, rows, wm) in job.take_late_rows() {
                self.pending_late.push((name.clone(), op, table, rows, wm));
            }
            if let Some(out) = out {
                self.propagate(&name, &out)?;
            }
        }
        Ok(())
    }

    /// Writes the late rows of this statement into their tables' side tables
    /// (`'late-rows.table'`): the row, `late_view`, `late_operator` and `late_watermark`.
    /// Rows of a table without one were only counted.
    pub fn flush_late_rows(&mut self, writes: &mut EpochWrites) -> Result<()> {
        // A side table may itself feed windows; a few rounds settle any chain.
        for _ in 0..8 {
            let pending = std::mem::take(&mut self.pending_late);
            if pending.is_empty() {
                return Ok(());
            }
            for (view, op, table, rows, wm) in pending {
                let Some(side) = self.catalog.get(&table).and_then(|r| r.options.get(LATE_ROWS_TABLE)).cloned() else {
                    continue;
                };
                if self.catalog.get(&side).is_none() {
                    continue;
                }
                let (store, id) = self.table_store(&side)?;
                let n = rows.num_rows();
                let mut columns = rows.columns().to_vec();
                columns.push(Arc::new(arrow::array::StringArray::from(vec![view.as_str(); n])));
                columns.push(Arc::new(arrow::array::StringArray::from(vec![op; n])));
                columns.push(Arc::new(arrow::array::TimestampMillisecondArray::from(vec![wm; n])));
                let batch = arrow::array::RecordBatch::try_new(Arc::clone(store.schema()), columns)?;
                let mut next = self.next_row_id(id)?;
                let chunk = store.insert(&batch, &self.store, writes, &mut next)?;
                self.row_ids.insert(id, next);
                self.propagate(&side, &chunk)?;
            }
        }
        Ok(())
    }

    /// Moves the watermark of table `table` to `watermark_ms` if that is later, recording it in
    /// the epoch and sending it through every job that reads the table. Watermarks never move
    /// back (SQL.md: late rows never move a watermark back).
    pub fn advance_watermark(&mut self, table: &str, watermark_ms: i64, writes: &mut EpochWrites) -> Result<()> {
        if self.watermarks.get(table).is_some_and(|w| *w >= watermark_ms) {
            return Ok(());
        }
        if self.catalog.get(table).is_some_and(|r| r.options.contains_key(IDLE_ADVANCE)) {
            self.idle_base.insert(table.to_string(), (std::time::Instant::now(), watermark_ms));
        }
        self.watermarks.insert(table.to_string(), watermark_ms);
        writes.put_meta(&watermark_key(table), &watermark_ms.to_be_bytes());
        self.propagate_watermark(table, watermark_ms)
    }

    /// Sends a watermark of `relation` through the jobs that read it, and the changes and
    /// watermarks they emit on to the views built on them.
    pub fn propagate_watermark(&mut self, relation: &str, watermark_ms: i64) -> Result<()> {
        let readers = self.readers_of(relation);
        for name in readers {
            let job = self.jobs.get_mut(&name).expect("reader job exists");
            let (chunk, out) = job.on_watermark(relation, watermark_ms, &self.store)?;
            if let Some(chunk) = chunk {
                self.propagate(&name, &chunk)?;
            }
            if let Some(w) = out {
                self.propagate_watermark(&name, w)?;
            }
        }
        Ok(())
    }

    /// Commits an epoch: late rows pending for side tables, every job's writes, the source
    /// tasks' progress, the row sequences, `catalog` if given, the epoch.
    pub fn commit(&mut self, mut writes: EpochWrites, catalog: Option<Catalog>) -> Result<()> {
        self.flush_late_rows(&mut writes)?;
        self.flush_dead_letters(&mut writes)?;
        self.write_source_progress(&mut writes);
        for job in self.jobs.values_mut() {
            job.on_barrier(&mut writes)?;
        }
        for (id, next) in &self.row_ids {
            writes.put_meta(&format!("seq/{id}"), &next.to_be_bytes());
        }
        let catalog_now = catalog.as_ref().unwrap_or(&self.catalog);
        self.failed.retain(|job, error| {
            let kept = catalog_now.get(job).is_some();
            if kept {
                writes.put_meta(&failed_key(job), error.as_bytes());
            } else {
                writes.delete_meta(&failed_key(job));
            }
            kept
        });
        if let Some(c) = &catalog {
            writes.put_meta("catalog", &c.to_bytes());
        }
        self.store.commit(writes, self.epoch + 1)?;
        self.epoch += 1;
        for task in self.sources.values_mut() {
            task.on_committed();
        }
        if let Some(c) = catalog {
            self.catalog = Arc::new(c);
            self.refresh_job_order();
        }
        self.publish();
        Ok(())
    }
}

/// The meta key of a failed job's error.
fn failed_key(job: &str) -> String {
    format!("failed/{job}")
}

/// The catalog as the stream planner sees it.
pub struct CatalogSources<'a>(pub &'a Catalog);

impl SourceCatalog for CatalogSources<'_> {
    fn source_info(&self, name: &str) -> Result<SourceInfo> {
        let rel = self.0.get(name).ok_or_else(|| WeirError::unknown_table(name))?;
        let schema = relation_schema(rel)?;
        let pk = || -> Option<Vec<usize>> {
            if rel.primary_key.is_empty() {
                return None;
            }
            rel.primary_key.iter().map(|k| schema.index_of(k).ok()).collect()
        };
        Ok(match rel.kind {
            RelationKind::Table => match connector_of(rel) {
                "table" => SourceInfo { changelog: ChangelogMode::Retract, stream_key: pk() },
                "upsert-kafka" => SourceInfo { changelog: ChangelogMode::Upsert, stream_key: pk() },
                // Debezium's envelopes carry deletes and updates (Flink: a changelog source).
                "kafka" if rel.options.get("format").map(String::as_str) == Some("debezium-json") => {
                    SourceInfo { changelog: ChangelogMode::Retract, stream_key: pk() }
                }
                _ => SourceInfo { changelog: ChangelogMode::AppendOnly, stream_key: pk() },
            },
            RelationKind::MaterializedView => {
                SourceInfo { changelog: ChangelogMode::Retract, stream_key: rel.stream_key.clone() }
            }
            RelationKind::View => return Err(WeirError::internal(format!("view {name} was not inlined"))),
            RelationKind::SinkJob => return Err(WeirError::unknown_table(name)),
        })
    }

    fn event_time_column(&self, name: &str) -> Result<Option<usize>> {
        let rel = self.0.get(name).ok_or_else(|| WeirError::unknown_table(name))?;
        let Some(wm) = &rel.watermark else { return Ok(None) };
        Ok(relation_schema(rel)?.index_of(&wm.column).ok())
    }
}

/// The table option that lets an idle table's watermark advance with processing time.
pub const IDLE_ADVANCE: &str = "watermark.idle-advance";

impl Engine {
    /// Advances the watermark of every table with `'watermark.idle-advance' = d` that has had
    /// no rows for longer than `d`: to its watermark at the last row plus the wall-clock time
    /// since then, minus `d`. Commits an epoch if any watermark moved.
    pub fn advance_idle_watermarks(&mut self) -> Result<()> {
        let now = std::time::Instant::now();
        let mut moves = Vec::new();
        for (table, (last, wm)) in &self.idle_base {
            let Some(option) = self.catalog.get(table).and_then(|r| r.options.get(IDLE_ADVANCE)) else { continue };
            let idle_ms = crate::sql::settings::parse_duration_ms(IDLE_ADVANCE, option)?;
            let quiet_ms = now.duration_since(*last).as_millis() as i64;
            if quiet_ms > idle_ms {
                let target = wm + (quiet_ms - idle_ms);
                if self.watermarks.get(table).is_none_or(|w| *w < target) {
                    moves.push((table.clone(), target));
                }
            }
        }
        if moves.is_empty() {
            return Ok(());
        }
        let mut writes = EpochWrites::default();
        let result: Result<()> = (|| {
            for (table, target) in moves {
                let base = self.idle_base.get(&table).copied();
                self.advance_watermark(&table, target, &mut writes)?;
                // Keep measuring idleness from the last row, not from this advance.
                if let Some(base) = base {
                    self.idle_base.insert(table, base);
                }
            }
            Ok(())
        })();
        match result.and_then(|()| self.commit(writes, None)) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.reload()?;
                Err(e)
            }
        }
    }
}

/// The table option naming a table's late-row side table.
pub const LATE_ROWS_TABLE: &str = "late-rows.table";

/// The metadata key of a table's watermark.
pub fn watermark_key(table: &str) -> String {
    format!("wm/{table}")
}

#[cfg(test)]
mod tests {
    use crate::sql::{Database, Session, StatementResult};
    use crate::state::EpochWrites;

    /// The rows of `sql` as text, sorted.
    async fn rows(db: &Database, session: &mut Session, sql: &str) -> Vec<String> {
        let StatementResult::Rows { batches, .. } = db.execute(session, sql).await.expect(sql) else { panic!("{sql}: no rows") };
        let text = arrow::util::pretty::pretty_format_batches(&batches).expect("format").to_string();
        let mut lines: Vec<String> =
            text.lines().filter(|l| l.starts_with('|')).skip(1).map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
        lines.sort();
        lines
    }

    /// A view created while the epoch is in flight (a source's rows have reached the views
    /// it feeds but are not committed yet, as between two checkpoints) starts from those rows
    /// too: they went to the jobs that existed, so its backfill must not read an older commit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_view_created_mid_epoch_sees_the_uncommitted_rows_of_its_source() -> crate::error::Result<()> {
        let dir = tempfile::tempdir().expect("temp dir");
        // No background source loop: the test reads the source itself, without committing.
        let db = Database::open_with(dir.path(), false)?;
        let mut s = Session::default();
        for sql in [
            "CREATE TABLE b (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
                 date_time TIMESTAMP(3), extra VARCHAR)
             WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'nexmark.events' = '1000')",
            "CREATE MATERIALIZED VIEW bids AS SELECT COUNT(*) AS n FROM b",
        ] {
            db.execute(&mut s, sql).await?;
        }
        {
            let mut engine = db.engine().await;
            while !engine.poll_sources(std::time::Duration::from_millis(100))?.all_finished {}
        }
        db.execute(&mut s, "CREATE MATERIALIZED VIEW bids_again AS SELECT n FROM bids").await?;
        // 1 000 Nexmark events are 20 blocks of 50, each 46 bids (NEXMARK.md 1.3).
        assert_eq!(rows(&db, &mut s, "SELECT n FROM bids_again").await, ["| 920 |"]);
        assert_eq!(rows(&db, &mut s, "SELECT n FROM bids").await, ["| 920 |"]);
        Ok(())
    }

    /// A read takes the last committed epoch without the engine's lock: it is answered while
    /// the engine is held with an epoch in flight, and it sees none of that epoch's rows.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_neither_waits_for_the_engine_nor_sees_the_epoch_in_flight() -> crate::error::Result<()> {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = Database::open_with(dir.path(), false)?;
        let mut s = Session::default();
        for sql in [
            "CREATE TABLE b (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
                 date_time TIMESTAMP(3), extra VARCHAR)
             WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'nexmark.events' = '1000')",
            "CREATE MATERIALIZED VIEW bids AS SELECT auction, COUNT(*) AS n FROM b GROUP BY auction",
        ] {
            db.execute(&mut s, sql).await?;
        }
        let total = "SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) AS total FROM bids";
        let mut engine = db.engine().await;
        while !engine.poll_sources(std::time::Duration::from_millis(100))?.all_finished {}
        let read = tokio::time::timeout(std::time::Duration::from_secs(30), rows(&db, &mut s, total)).await;
        assert_eq!(read.expect("the read waited for the engine"), ["| 0 |"], "the epoch in flight is not committed");
        engine.commit(EpochWrites::default(), None)?;
        drop(engine);
        // 1 000 Nexmark events are 20 blocks of 50, each 46 bids (NEXMARK.md 1.3).
        assert_eq!(rows(&db, &mut s, total).await, ["| 920 |"]);
        Ok(())
    }

    /// A view whose plan no longer matches its state tables (as after an upgrade that changed
    /// how its query is planned) is FAILED at restart; the database opens, the other views run,
    /// the failed one keeps its committed rows, and dropping it clears the failure.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_view_that_cannot_restart_fails_alone() -> crate::error::Result<()> {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = Database::open(dir.path())?;
        let mut s = Session::default();
        for sql in [
            "CREATE TABLE t (k BIGINT, v BIGINT)",
            "INSERT INTO t VALUES (1, 10), (1, 5), (2, 7)",
            "CREATE MATERIALIZED VIEW v AS SELECT k, SUM(v) AS s FROM t GROUP BY k",
            "CREATE MATERIALIZED VIEW w AS SELECT k, COUNT(*) AS n FROM t GROUP BY k",
        ] {
            db.execute(&mut s, sql).await?;
        }
        {
            let mut engine = db.engine().await;
            let mut catalog = (*engine.catalog).clone();
            let state = &mut catalog.relations.get_mut("v").expect("v").operator_state;
            let first = state.keys().next().cloned().expect("v has operator state");
            state.remove(&first);
            engine.commit(EpochWrites::default(), Some(catalog))?;
            engine.reload()?;
            assert!(engine.failed.get("v").is_some_and(|e| e.contains("cannot restart v")), "{:?}", engine.failed);
            assert!(!engine.failed.contains_key("w"));
        }
        db.execute(&mut s, "INSERT INTO t VALUES (2, 1)").await?;
        assert_eq!(rows(&db, &mut s, "SELECT k, s FROM v").await, ["| 1 | 15 |", "| 2 | 7 |"], "as committed");
        assert_eq!(rows(&db, &mut s, "SELECT k, n FROM w").await, ["| 1 | 2 |", "| 2 | 2 |"], "still running");
        db.execute(&mut s, "DROP MATERIALIZED VIEW v").await?;
        db.execute(&mut s, "CREATE MATERIALIZED VIEW v AS SELECT k, SUM(v) AS s FROM t GROUP BY k").await?;
        assert!(db.engine().await.failed.is_empty());
        assert_eq!(rows(&db, &mut s, "SELECT k, s FROM v").await, ["| 1 | 15 |", "| 2 | 8 |"]);
        Ok(())
    }
}
