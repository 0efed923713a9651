//! The engine: the catalog, the running jobs, and the epoch commit.
//!
//! One engine per server, behind the database's write lock: DDL and DML statements and the
//! source driver ([`super::driver`]) run one at a time. Each write statement is one epoch: its
//! table changes are pushed through every job that reads them (in dependency order, so a view's
//! changes reach the views built on it), every operator hands its writes to the epoch, and the
//! store commits them with the catalog and the epoch number in one atomic write. If anything
//! fails before the commit, the engine drops all in-memory state and reloads it from the last
//! commit, so a failed statement leaves nothing.
//!
//! The engine takes plans, never SQL: statements are planned by `sql/`, and a restart plans
//! each stored view and job again through the [`JobPlanner`] the engine was loaded with.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use weir_catalog::{Catalog, Relation, RelationKind};

use super::committed::{Commits, CommittedSlot};
use super::runner::Runner;
use crate::error::{Result, WeirError};
use crate::plan::StreamPlan;
use crate::runtime::operators::materialize::StorageMode;
use crate::runtime::relation::{connector_of, layout_of, relation_schema};
use crate::runtime::table::{scan_rows, TableStore};
use crate::runtime::{Job, StreamChunk};
use crate::state::{EpochWrites, Store};

/// The catalog, jobs and sequences of a database.
pub struct Engine {
    pub store: Arc<Store>,
    pub catalog: Arc<Catalog>,
    /// Running jobs by materialized view name.
    pub jobs: BTreeMap<String, Job>,
    /// Materialized view names, each after everything it reads.
    pub job_order: Vec<String>,
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
    /// Jobs suspended with their state and source positions (`STOP JOB ... WITH SAVEPOINT`,
    /// `ALTER MATERIALIZED VIEW ... SUSPEND`): not running, `SUSPENDED` in `SHOW JOBS`; kept
    /// in meta `suspended/<job>` across restarts. See [`super::suspend`].
    pub suspended: std::collections::BTreeSet<String>,
    /// The `INSERT INTO` jobs of `suspended` that finished (Flink's `FINISHED`): every source
    /// they read is bounded and was read to its end, and their last epoch is committed; they no
    /// longer run. Kept in meta `suspended/<job>` = [`super::suspend::FINISHED`]. See
    /// [`super::runner`].
    pub finished: std::collections::BTreeSet<String>,
    /// Jobs that finished since the last commit, whose meta it writes.
    pub(super) newly_finished: Vec<String>,
    /// Producers of the `'dead-letter.topic'` of connector tables, by table, opened at their
    /// first dead letter.
    pub dead_letter_writers: HashMap<String, weir_connectors::kafka::KafkaWriter>,
    /// Epoch numbers, the atomic write of each epoch, and the last one as readers see it;
    /// shared with the job runners.
    pub(super) commits: Arc<Commits>,
    /// Plans stored views and jobs again when they restart.
    planner: Arc<dyn JobPlanner>,
    /// Jobs running on threads of their own, by name; see [`super::runner`].
    pub(super) runners: BTreeMap<String, Runner>,
    /// Whether independent jobs run on threads of their own (set when the engine reads its
    /// sources itself: [`Engine::run_jobs_detached`]).
    pub(super) run_detached: bool,
    /// Set when a job was lost while it was handed to a thread: the next take-back reloads.
    pub(super) runners_lost: bool,
    /// The parallelism of jobs created without `parallelism.default` (`weir serve --workers`).
    pub workers: usize,
    /// Jobs that failed since this process started, and when they restart: see
    /// [`super::restart`]. Kept across reloads.
    pub(super) restarting: BTreeMap<String, super::restart::Restart>,
    /// The interrupt of the statement that holds the engine, checked between chunks
    /// ([`super::interrupt`]); `None` for the source thread and between statements.
    pub(super) interrupt: Option<super::Interrupt>,
}

/// Stops the jobs running on threads of their own: nothing commits after the engine is gone.
impl Drop for Engine {
    fn drop(&mut self) {
        self.stop_runners();
    }
}

/// Plans a view's or job's stored query again when it restarts: the sql layer's planner, handed
/// to the engine when it loads, so that the engine never imports `sql/`.
pub trait JobPlanner: Send + Sync {
    /// The stream plan of `rel` (a materialized view or an `INSERT INTO` job) over `engine`'s
    /// catalog, with the allowed lateness and state TTL it was created with.
    ///
    /// # Errors
    /// The planner's: the stored query no longer plans.
    fn plan_job(&self, engine: &Engine, rel: &Relation) -> Result<StreamPlan>;
}

impl Engine {
    /// Loads the engine from the last committed state of `store`, restarting every view and
    /// job with plans from `planner`.
    ///
    /// # Errors
    /// `Storage` when the stored catalog or metadata cannot be read. A view or job that cannot
    /// restart is FAILED alone (see [`Engine::failed`]), not an error.
    ///
    /// `workers` is the parallelism of a job whose `parallelism.default` was not set when it was
    /// created (`weir serve --workers`): such jobs take the server's, also after a restart with
    /// another (their state is in key groups, [`crate::state::key_group`]).
    pub fn load(store: Arc<Store>, planner: Arc<dyn JobPlanner>, workers: usize) -> Result<Self> {
        Self::load_with(store, planner, None, workers, BTreeMap::new(), &BTreeSet::new())
    }

    /// [`Engine::load`] with the epochs and readers' slot, and the restarting jobs, of an
    /// engine being reloaded; the jobs `detached` run on threads of their own meanwhile and
    /// are not loaded.
    fn load_with(
        store: Arc<Store>,
        planner: Arc<dyn JobPlanner>,
        commits: Option<Arc<Commits>>,
        workers: usize,
        restarting: BTreeMap<String, super::restart::Restart>,
        detached: &BTreeSet<String>,
    ) -> Result<Self> {
        let catalog = match store.get_meta("catalog")? {
            Some(bytes) => Catalog::from_bytes(&bytes).map_err(|e| WeirError::storage(e.to_string()))?,
            None => Catalog::default(),
        };
        let epoch = store.committed_epoch()?;
        let catalog = Arc::new(catalog);
        let commits = match commits {
            Some(commits) => {
                commits.reset(Arc::clone(&catalog))?;
                commits
            }
            None => Arc::new(Commits::new(Arc::clone(&store), epoch, Arc::clone(&catalog))),
        };
        let mut engine = Engine {
            store,
            catalog,
            jobs: BTreeMap::new(),
            job_order: Vec::new(),
            row_ids: HashMap::new(),
            watermarks: BTreeMap::new(),
            pending_late: Vec::new(),
            idle_base: HashMap::new(),
            sources: BTreeMap::new(),
            sink_rows: Default::default(),
            failed: BTreeMap::new(),
            suspended: std::collections::BTreeSet::new(),
            finished: std::collections::BTreeSet::new(),
            newly_finished: Vec::new(),
            dead_letter_writers: HashMap::new(),
            commits,
            planner,
            runners: BTreeMap::new(),
            run_detached: false,
            runners_lost: false,
            workers: workers.max(1),
            restarting,
            interrupt: None,
        };
        for rel in engine.catalog.relations.values().filter(|r| r.job.is_some()) {
            if let Some(error) = engine.store.get_meta(&failed_key(&rel.name))? {
                engine.failed.insert(rel.name.clone(), String::from_utf8_lossy(&error).into_owned());
            }
            if let Some(mark) = engine.store.get_meta(&super::suspend::suspended_key(&rel.name))? {
                engine.suspended.insert(rel.name.clone());
                if mark == super::suspend::FINISHED {
                    engine.finished.insert(rel.name.clone());
                }
            }
        }
        for rel in engine.catalog.relations.values().filter(|r| r.watermark.is_some()) {
            if let Some(b) = engine.store.get_meta(&watermark_key(&rel.name))? {
                let b: [u8; 8] = b.as_slice().try_into().map_err(|_| WeirError::storage("bad watermark"))?;
                engine.watermarks.insert(rel.name.clone(), i64::from_be_bytes(b));
            }
        }
        engine.start_jobs(detached)?;
        Ok(engine)
    }

    /// Drops the in-memory state of everything the engine holds and reloads it from the last
    /// commit. The jobs running on threads of their own go on: they commit epochs of their
    /// own, so nothing of theirs is lost, and a failure elsewhere does not restart them (a
    /// failed job fails alone, as in Flink's region failover). Readers keep the slot they hold:
    /// it gets the reloaded epoch.
    ///
    /// # Errors
    /// As [`Engine::load`]; the engine is left as it was then.
    pub fn reload(&mut self) -> Result<()> {
        super::blocking(|| {
            let runners = std::mem::take(&mut self.runners);
            let detached: BTreeSet<String> = runners.keys().cloned().collect();
            let loaded = Engine::load_with(
                Arc::clone(&self.store),
                Arc::clone(&self.planner),
                Some(Arc::clone(&self.commits)),
                self.workers,
                self.restarting.clone(),
                &detached,
            );
            let result = loaded.map(|engine| {
                let run_detached = self.run_detached;
                *self = engine;
                self.run_detached = run_detached;
            });
            self.runners = runners;
            result
        })
    }

    /// Drops job `job`'s operators and source tasks from memory; its committed state and
    /// positions stay in the store.
    pub(super) fn unload(&mut self, job: &str) {
        self.jobs.remove(job);
        self.sources.retain(|(j, _), _| j != job);
    }

    /// From now on, independent jobs run on threads of their own between statements (see
    /// [`super::runner`]); for an engine whose sources [`super::driver`] reads.
    pub fn run_jobs_detached(&mut self) {
        self.run_detached = true;
        self.detach_jobs();
    }

    /// The last committed epoch's number.
    pub fn epoch(&self) -> u64 {
        self.commits.epoch()
    }

    /// The readers' slot, holding the last committed epoch: see [`super::Committed`].
    pub fn committed(&self) -> &CommittedSlot {
        self.commits.slot()
    }

    /// Restarts every view and job of the catalog from its committed state. One that cannot
    /// restart (its query no longer plans, or plans with other state tables than it was
    /// created with, after an upgrade of Weir) does not stop the others or the database: it is
    /// marked FAILED with the reason (`SHOW JOBS`), its committed rows stay readable, and it
    /// takes no input until it is dropped and created again. One whose sources cannot open
    /// (its Kafka brokers unreachable) waits to restart ([`super::restart`]), nor does it stop
    /// the others.
    fn start_jobs(&mut self, detached: &BTreeSet<String>) -> Result<()> {
        let views: Vec<Relation> = self
            .catalog
            .jobs_in_dependency_order()
            .into_iter()
            .filter(|rel| !detached.contains(&rel.name))
            .cloned()
            .collect();
        self.probe_clusters(&views);
        for rel in views {
            // A job waiting to restart is built when its delay is up ([`super::restart`]).
            if self.suspended.contains(&rel.name) || self.waiting_to_restart(&rel.name) {
                continue;
            }
            let job = match self.restart_job(&rel) {
                Ok(job) => job,
                // Its sink's cluster unreachable: it restarts later, as when its sources are.
                Err(e) if matches!(e.kind(), crate::error::ErrorKind::External(_)) => {
                    self.note_failure(&rel.name, &e.to_string());
                    continue;
                }
                Err(e) => {
                    let error = format!("cannot restart {}: {e}; drop it and create it again", rel.name);
                    tracing::error!("{error}");
                    self.failed.insert(rel.name.clone(), error);
                    continue;
                }
            };
            self.jobs.insert(rel.name.clone(), job);
            if !self.failed.contains_key(&rel.name) {
                self.open_sources_or_wait(&rel.name)?;
            }
        }
        self.refresh_job_order();
        Ok(())
    }

    /// Asks the cluster of every Kafka table that the jobs `views` about to start read or
    /// write for its topic, all at once; a job with a table that does not answer waits to
    /// restart ([`super::restart`]) instead of being built. Building a job opens its Kafka sink,
    /// and opening its sources reads their topics' metadata, each waiting up to 10 s for an
    /// unreachable cluster: without the probe a start (or a reload, under the engine's lock)
    /// waited that long for each such job, one after the other.
    fn probe_clusters(&mut self, views: &[Relation]) {
        let starting = views.iter().filter(|rel| {
            !self.suspended.contains(&rel.name) && !self.waiting_to_restart(&rel.name) && !self.failed.contains_key(&rel.name)
        });
        for (job, error) in self.unreachable_jobs(starting.map(|rel| rel.name.as_str())) {
            self.note_failure(&job, &error);
        }
    }

    /// Plans view or job `rel` again and instantiates it over its existing state tables.
    ///
    /// # Errors
    /// The planner's; `Internal` when the plan needs state tables the view was not created with.
    pub(super) fn restart_job(&self, rel: &Relation) -> Result<Job> {
        let plan = self.planner.plan_job(self, rel)?;
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

    /// Starts job `rel`, a new materialized view or `INSERT INTO` job already in `catalog`, from
    /// `plan`: builds it (allocating its state tables in `catalog`), backfills it, opens its
    /// sources and commits it with `catalog` in one epoch. Nothing is kept if a step fails.
    ///
    /// # Errors
    /// The operators' (a state table that cannot be read), the sources' (a connector that
    /// cannot be opened), the commit's.
    /// With `savepoint` (`'execution.savepoint.path'`, a suspended job), each source it shares
    /// with that job starts at that job's positions ([`super::suspend`]).
    pub fn start_job(&mut self, rel: &Relation, plan: &StreamPlan, mut catalog: Catalog, savepoint: Option<&str>) -> Result<()> {
        super::blocking(|| {
            let mut starts = std::collections::BTreeMap::new();
            if let Some(from) = savepoint {
                for table in plan.sources() {
                    if let Some(progress) = self.savepoint_progress(from, &table)? {
                        starts.insert(table, progress);
                    }
                }
            }
            let mut job = self.build_job(rel, plan, &mut catalog)?;
            self.backfill(&mut job, plan, savepoint.is_none())?;
            // A dropped job of the same name may have failed: this one starts afresh.
            self.restarting.remove(&rel.name);
            self.jobs.insert(rel.name.clone(), job);
            // A cancel or timeout that came during the backfill's last step still stops it.
            let result = self
                .check_interrupt()
                .and_then(|()| self.open_sources_from(&rel.name, &plan.sources(), starts))
                .and_then(|()| self.commit(EpochWrites::default(), Some(catalog)));
            if result.is_err() {
                self.unload(&rel.name);
            }
            result
        })
    }

    /// Starts a new job: lets its operators emit their first rows (without `constants`, a job
    /// started from a savepoint, not its constant relations' rows), pushes every row its
    /// sources hold now (plain tables, materialized views) as inserts, then the sources'
    /// watermarks, which close the windows the backfill left behind.
    ///
    /// The epoch in flight is committed first: the rows are read from the store, and a view's
    /// changes not yet committed have already gone to the jobs that existed, not to this one
    /// (without the commit a job created over a view fed by a Kafka source lost them).
    fn backfill(&mut self, job: &mut crate::runtime::Job, plan: &crate::plan::StreamPlan, constants: bool) -> Result<()> {
        self.commit(EpochWrites::default(), None)?;
        job.on_create(&self.store, constants)?;
        for source in plan.sources() {
            let src = self.catalog.get(&source).ok_or_else(|| WeirError::unknown_table(&source))?;
            let (Some(id), schema) = (src.state_table, relation_schema(src)?) else { continue };
            self.check_interrupt()?;
            for batch in scan_rows(&*self.store, id, &schema, layout_of(src), false)? {
                self.check_interrupt()?;
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

    /// Instantiates the job of materialized view or `INSERT INTO` job `rel` from `plan`,
    /// allocating its operator state tables in `catalog` where they are new.
    pub fn build_job(&self, rel: &Relation, plan: &StreamPlan, catalog: &mut Catalog) -> Result<Job> {
        let mut operator_state = catalog.get(&rel.name).map(|r| r.operator_state.clone()).unwrap_or_default();
        let mut allocate = |name: &str| -> u32 {
            if let Some(id) = operator_state.get(name) {
                return *id;
            }
            let id = catalog.allocate_state_table();
            operator_state.insert(name.to_string(), id);
            id
        };
        let job = if rel.kind == RelationKind::SinkJob {
            self.build_sink_job(rel, plan, &mut allocate)?
        } else {
            let mode = match &rel.stream_key {
                Some(key) => StorageMode::Keyed(key.clone()),
                None => StorageMode::Multiset,
            };
            let rows_table = rel
                .state_table
                .ok_or_else(|| WeirError::internal(format!("{} has no state table", rel.name)))?;
            // The feed's rows are as the job emits them.
            let schema: arrow::datatypes::SchemaRef = Arc::new(plan.schema.as_arrow().clone());
            let feed = self.commits.feeds().of(&rel.name, &schema);
            Job::build(plan, (mode, rows_table, feed), &mut allocate, &self.store, self.parallelism_of(rel)?)?
        };
        if let Some(r) = catalog.relations.get_mut(&rel.name) {
            r.operator_state = operator_state;
        }
        Ok(job)
    }

    /// The parallelism `rel`'s job runs with: its `parallelism.default` option, else the
    /// server's ([`Engine::workers`]).
    ///
    /// # Errors
    /// `InvalidOption` for a stored value that is not a parallelism.
    pub fn parallelism_of(&self, rel: &Relation) -> Result<usize> {
        crate::runtime::relation::parallelism_option(&rel.options).map(|p| p.unwrap_or(self.workers))
    }

    /// The table store of plain table `name`; see [`table_store`].
    ///
    /// # Errors
    /// As [`table_store`].
    pub fn table_store(&self, name: &str) -> Result<(TableStore, u32)> {
        table_store(&self.catalog, name)
    }

    /// The next row id of keyless table `id`, as the engine holds it now.
    ///
    /// # Errors
    /// `Storage` when the stored sequence cannot be read.
    pub fn peek_row_id(&self, id: u32) -> Result<u64> {
        if let Some(n) = self.row_ids.get(&id) {
            return Ok(*n);
        }
        Ok(match self.store.get_meta(&format!("seq/{id}"))? {
            Some(b) => u64::from_be_bytes(b.as_slice().try_into().map_err(|_| WeirError::storage("bad sequence"))?),
            None => 0,
        })
    }

    /// The next row id of keyless table `id`.
    pub fn next_row_id(&mut self, id: u32) -> Result<u64> {
        let n = self.peek_row_id(id)?;
        self.row_ids.insert(id, n);
        Ok(n)
    }

    /// Inserts rows (`columns` of plain table `side`, in order) that the engine routes there
    /// itself (late rows, dead letters) into this epoch's `writes`, and pushes them through the
    /// views that read it.
    pub(super) fn insert_side_rows(&mut self, side: &str, columns: Vec<arrow::array::ArrayRef>, writes: &mut EpochWrites) -> Result<()> {
        let (store, id) = self.table_store(side)?;
        let batch = arrow::array::RecordBatch::try_new(Arc::clone(store.schema()), columns)?;
        let mut next = self.next_row_id(id)?;
        let mut rows = crate::state::TableWrites::log();
        let chunk = store.insert(&batch, &*self.store, &mut rows, &mut next)?;
        rows.write_into(writes);
        self.row_ids.insert(id, next);
        self.propagate(side, &chunk)
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
        self.check_interrupt()?;
        let readers = self.readers_of(relation);
        for name in readers {
            let job = self.jobs.get_mut(&name).expect("reader job exists");
            let out = job.push(relation, chunk, &self.store).map_err(|e| self.in_job(e, &name))?;
            let job = self.jobs.get_mut(&name).expect("reader job exists");
            for (op, table, rows, wm) in job.take_late_rows() {
                self.pending_late.push((name.clone(), op, table, rows, wm));
            }
            if let Some(out) = out {
                self.propagate(&name, &out)?;
            }
        }
        Ok(())
    }

    /// `e`, an error of job `job`'s operators, with the job named as its `CONTEXT`: a write to
    /// a table fails in the views that read it (Postgres names a trigger's function so).
    fn in_job(&self, e: WeirError, job: &str) -> WeirError {
        e.with_context(|| match self.catalog.get(job) {
            Some(rel) => format!("while maintaining {} {job}", rel.kind.sql_name()),
            None => format!("while running job {job}"),
        })
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
                let n = rows.num_rows();
                let mut columns = rows.columns().to_vec();
                columns.push(Arc::new(arrow::array::StringArray::from(vec![view.as_str(); n])));
                columns.push(Arc::new(arrow::array::StringArray::from(vec![op; n])));
                columns.push(Arc::new(arrow::array::TimestampMillisecondArray::from(vec![wm; n])));
                self.insert_side_rows(&side, columns, writes)?;
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
            let (chunk, out) = job.on_watermark(relation, watermark_ms, &self.store).map_err(|e| self.in_job(e, &name))?;
            if let Some(chunk) = chunk {
                self.propagate(&name, &chunk)?;
            }
            if let Some(w) = out {
                self.propagate_watermark(&name, w)?;
            }
        }
        Ok(())
    }

    /// Estimated bytes of the state writes the jobs the engine holds made since the last
    /// commit ([`Job::pending_bytes`]).
    pub fn pending_bytes(&self) -> u64 {
        self.jobs.values().map(Job::pending_bytes).sum()
    }

    /// Commits an epoch: late rows pending for side tables, every job's writes, the source
    /// tasks' progress, the row sequences, `catalog` if given, the epoch.
    pub fn commit(&mut self, writes: EpochWrites, catalog: Option<Catalog>) -> Result<()> {
        self.commit_epoch(writes, catalog).map(drop)
    }

    /// Takes the jobs whose operators kept a failure after the last commit ([`Job::failure`]: an
    /// exactly-once sink whose transaction did not commit) out of the engine's epochs, with
    /// their source tasks and what those hold: each restarts from its last checkpoint after a
    /// delay ([`super::restart`]), and the epoch being committed (another statement's, or the
    /// other jobs') goes on without it. Only a job that no other reads has such an operator
    /// (a sink job), so nothing downstream holds its rows.
    fn take_out_failed_jobs(&mut self) {
        let failed: Vec<(String, String)> =
            self.jobs.iter().filter_map(|(name, job)| job.failure().map(|e| (name.clone(), e))).collect();
        for (name, error) in failed {
            tracing::warn!(job = %name, "job failed after its last commit: {error}");
            self.unload(&name);
            self.pending_late.retain(|(job, ..)| *job != name);
            self.note_failure(&name, &error);
        }
    }

    /// [`Engine::commit`], returning the epoch's number.
    ///
    /// # Errors
    /// As [`Engine::commit`].
    pub fn commit_epoch(&mut self, mut writes: EpochWrites, catalog: Option<Catalog>) -> Result<u64> {
        super::blocking(|| {
            self.take_out_failed_jobs();
            self.flush_late_rows(&mut writes)?;
            self.flush_dead_letters(&mut writes)?;
            self.write_source_progress(&mut writes);
            for job in self.jobs.values_mut() {
                job.on_barrier(&self.store, &mut writes)?;
            }
            for (id, next) in &self.row_ids {
                writes.put_meta(&format!("seq/{id}"), &next.to_be_bytes());
            }
            for job in std::mem::take(&mut self.newly_finished) {
                if self.finished.contains(&job) {
                    writes.put_meta(&super::suspend::suspended_key(&job), super::suspend::FINISHED);
                }
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
            let changed = catalog.map(Arc::new);
            let epoch = self.commits.commit(writes, Some(Arc::clone(changed.as_ref().unwrap_or(&self.catalog))))?;
            for task in self.sources.values_mut() {
                task.on_committed();
            }
            if let Some(c) = changed {
                self.catalog = c;
                self.refresh_job_order();
            }
            // The second phase of two-phase sinks; views' change feeds.
            for job in self.jobs.values_mut() {
                job.on_committed(epoch);
            }
            Ok(epoch)
        })
    }

    /// The relations' change feeds ([`crate::runtime::feed`]).
    pub fn feeds(&self) -> &Arc<crate::runtime::feed::Feeds> {
        self.commits.feeds()
    }
}

/// The meta key of a failed job's error.
fn failed_key(job: &str) -> String {
    format!("failed/{job}")
}

/// The table option that lets an idle table's watermark advance with processing time.
pub const IDLE_ADVANCE: &str = "watermark.idle-advance";

impl Engine {
    /// Advances the watermark of every table with `'watermark.idle-advance' = d` that has had
    /// no rows for longer than `d`: to its watermark at the last row plus the wall-clock time
    /// since then, minus `d`. Commits an epoch if any watermark moved.
    pub fn advance_idle_watermarks(&mut self) -> Result<()> {
        super::blocking(|| {
            let now = std::time::Instant::now();
            let mut moves = Vec::new();
            for (table, (last, wm)) in &self.idle_base {
                let Some(option) = self.catalog.get(table).and_then(|r| r.options.get(IDLE_ADVANCE)) else { continue };
                let idle_ms = crate::plan::duration::parse_duration_ms(IDLE_ADVANCE, option)?;
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
        })
    }
}

/// The table option naming a table's late-row side table.
pub const LATE_ROWS_TABLE: &str = "late-rows.table";

/// The metadata key of a table's watermark.
pub fn watermark_key(table: &str) -> String {
    format!("wm/{table}")
}

/// The stored rows of plain table `name` in `catalog`, and the id of its state table.
///
/// # Errors
/// `UnknownTable`; `Plan` for a view or materialized view (only tables take INSERT, UPDATE and
/// DELETE); `Unsupported` for a connector table.
pub fn table_store(catalog: &Catalog, name: &str) -> Result<(TableStore, u32)> {
    let rel = catalog.get(name).ok_or_else(|| WeirError::unknown_table(name))?;
    if rel.kind != RelationKind::Table {
        return Err(WeirError::plan(format!(
            "{name} is a {}; only tables take INSERT, UPDATE and DELETE",
            rel.kind.sql_name()
        )));
    }
    if connector_of(rel) != "table" {
        // INSERT INTO a connector table starts a job elsewhere; what reaches here changes rows.
        return Err(WeirError::unsupported(format!(
            "UPDATE and DELETE change stored rows, and {name} is a '{}' connector table, which stores none (as in Flink): write to it with INSERT INTO {name} SELECT ... (a job), and UPDATE or DELETE the plain table that job reads",
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
