//! The server-wide database: catalog, storage and running jobs, and the execution of one
//! statement for a session. Frontends call [`Database::execute`] once per statement.
//!
//! Reads (`SELECT`, `SHOW`) take the read side of the database's lock and see the last committed
//! epoch; writes (DDL, DML, `FLUSH`) take the write side and run one at a time, each committing
//! its own epoch before it returns.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::sql::parser::Statement as DfStatement;
use sqlparser::ast::Statement;
use tokio::sync::RwLock;

use crate::error::{Result, WeirError};
use crate::engine::{Committed, CommittedSlot, Engine, SystemState, TableChanges};
use crate::observe::Activities;
use crate::sql::parser::{self, object_name, DropKind, JobRef, WeirStatement};
use crate::sql::planning::{plan_job, JobKind, SqlPlanner};
use crate::sql::dml::{self, WriteBase, WriteStep};
use crate::sql::ddl;
use crate::sql::subscribe::{Cursor, Cursors, Subscription};
use crate::sql::transaction::Transaction;
use crate::sql::relations::{session_context, NullCollation, Snapshot, SystemLoader, SystemTables};
use crate::sql::show::{self, text_rows, DEFAULT_SETTINGS};
use crate::state::{ScanState, Store, StoreOptions};

/// Per-connection state: settings (`SET` / `SHOW` / `RESET`), the transaction block, cursors.
#[derive(Debug, Default, Clone)]
pub struct Session {
    /// Settings made with `SET 'key' = 'value'`, by key.
    pub settings: BTreeMap<String, String>,
    /// The settings the client asked for at startup (its time zone): what `RESET` returns to.
    pub startup_settings: BTreeMap<String, String>,
    /// The connection's process id (`pg_backend_pid()`, `pg_stat_activity.pid`); 0 outside
    /// a client connection.
    pub pid: i32,
    /// The open transaction block, if any ([`crate::sql::transaction`]).
    pub txn: Option<Transaction>,
    /// Declared cursors ([`crate::sql::subscribe`]).
    pub cursors: Cursors,
    /// The user the connection authenticated as (or gave, when the server trusts everyone).
    pub user: String,
    /// The user's role reads only: writes fail with 42501.
    pub read_only: bool,
    /// The INSERT statements of an open Flink statement set (`BEGIN STATEMENT SET`), run
    /// together at `END` ([`Database::execute`]).
    pub statement_set: Option<Vec<String>>,
    /// The session's temporary views ([`crate::sql::temporary_views`]).
    pub temporary_views: crate::sql::temporary_views::TemporaryViews,
    /// The session's temporary tables ([`crate::sql::temporary_tables`]).
    pub temporary_tables: crate::sql::temporary_tables::TemporaryTables,
    /// The connection's cancel flag, with the running statement's `statement_timeout`
    /// deadline ([`crate::engine::interrupt`]): checked by the work a statement does without
    /// an await point (a write's rows and views, a backfill).
    pub interrupt: crate::engine::Interrupt,
    /// The notices and warnings of the statements run since the connection last sent them
    /// ([`crate::sql::notices`]).
    pub notices: Vec<crate::sql::notices::Notice>,
}

impl Session {
    /// Where the session stands, for ReadyForQuery: idle, in a block, or in a failed block.
    pub fn transaction_state(&self) -> TransactionState {
        match &self.txn {
            None => TransactionState::Idle,
            Some(t) if t.failed => TransactionState::Failed,
            Some(_) => TransactionState::InBlock,
        }
    }
}

/// A session's transaction state (Postgres's ReadyForQuery status: `I`, `T`, `E`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionState {
    Idle,
    InBlock,
    Failed,
}

/// What one statement returns to the client.
#[derive(Debug)]
pub enum StatementResult {
    /// Rows, with their schema (also sent for zero rows).
    Rows { schema: SchemaRef, batches: Vec<RecordBatch> },
    /// A write statement's `RETURNING` rows; `tag` is its command (`INSERT`, `UPDATE`, ...),
    /// counted with the rows.
    Returned { tag: String, schema: SchemaRef, batches: Vec<RecordBatch> },
    /// A command tag: `tag` is the command name as Postgres sends it ("INSERT", "CREATE TABLE",
    /// "FLUSH", ...) and `rows` the affected row count where Postgres reports one.
    Command { tag: String, rows: Option<usize> },
    /// `COPY t FROM STDIN`: the client sends the rows next (`columns` of `table`, in
    /// `format`), which [`Database::copy_in`] inserts.
    CopyIn { table: String, columns: Vec<String>, format: crate::sql::copy::CopyFormat },
    /// `COPY ... TO STDOUT`: rows to send in COPY `format`.
    CopyOut { schema: SchemaRef, batches: Vec<RecordBatch>, format: crate::sql::copy::CopyFormat },
    /// `SUBSCRIBE`: rows to stream as they come, until the subscription ends.
    Subscribe(Box<Subscription>),
    /// `COPY (SUBSCRIBE ...) TO STDOUT`: the same, as COPY text.
    CopySubscribe(Box<Subscription>),
}

impl StatementResult {
    /// The result with its TIMESTAMP_LTZ columns shown in `zone`, the session time zone
    /// ([`crate::plan::time_zone::batch_shown_in`]); the same in UTC.
    ///
    /// # Errors
    /// Arrow's, for rows that are not what their schema says.
    pub fn shown_in(self, zone: crate::plan::time_zone::Zone) -> Result<Self> {
        use crate::plan::time_zone::{batch_shown_in, schema_shown_in};
        if zone.is_utc() {
            return Ok(self);
        }
        let shown = |batches: Vec<RecordBatch>| batches.iter().map(|b| batch_shown_in(b, zone)).collect::<std::result::Result<Vec<_>, _>>();
        Ok(match self {
            StatementResult::Rows { schema, batches } => StatementResult::Rows { schema: schema_shown_in(&schema, zone), batches: shown(batches)? },
            StatementResult::Returned { tag, schema, batches } => {
                StatementResult::Returned { tag, schema: schema_shown_in(&schema, zone), batches: shown(batches)? }
            }
            StatementResult::CopyOut { schema, batches, format } => {
                StatementResult::CopyOut { schema: schema_shown_in(&schema, zone), batches: shown(batches)?, format }
            }
            StatementResult::Subscribe(mut s) => {
                s.show_in(zone);
                StatementResult::Subscribe(s)
            }
            StatementResult::CopySubscribe(mut s) => {
                s.show_in(zone);
                StatementResult::CopySubscribe(s)
            }
            other => other,
        })
    }
}

/// How long a look at the system tables (a `SELECT` of one, `SHOW JOBS`, `/metrics`, the web
/// page) waits for the engine, which a write statement holds while it runs, before it takes the
/// figures of the last look instead.
pub const STATE_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// The system tables' rows: taken from the engine under its read lock, or the last ones taken.
struct SystemFigures {
    /// Weak: the database's own reference is the one whose end closes the store ([`Database`]'s
    /// drop waits for the others).
    engine: std::sync::Weak<RwLock<Engine>>,
    activities: Arc<Activities>,
    /// The figures of the last look that got them (at first, those of the database's
    /// opening).
    last: std::sync::Mutex<Arc<SystemState>>,
}

impl SystemFigures {
    /// The figures now (`false`), or, when a statement holds the engine for longer than
    /// [`STATE_WAIT`], those of the last look (`true`: stale; the jobs and figures of before
    /// that statement, with the connections of now).
    async fn get(&self) -> (Arc<SystemState>, bool) {
        let now = match tokio::time::timeout(STATE_WAIT, self.take()).await {
            Ok(now) => now,
            Err(_) => {
                let mut state = (**self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner)).clone();
                state.activity = self.activities.all();
                return (Arc::new(state), true);
            }
        };
        *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::clone(&now);
        (now, false)
    }

    /// The engine's figures (under its read lock) and the connections.
    async fn take(&self) -> Arc<SystemState> {
        let mut state = match self.engine.upgrade() {
            Some(engine) => engine.read().await.system_state(),
            // The database is closing.
            None => (**self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner)).clone(),
        };
        state.activity = self.activities.all();
        Arc::new(state)
    }
}

fn command(tag: &str) -> StatementResult {
    StatementResult::Command { tag: tag.to_string(), rows: None }
}

/// The database shared by all connections.
pub struct Database {
    engine: Arc<RwLock<Engine>>,
    /// The last committed epoch, which reads use without taking the engine's lock.
    committed: CommittedSlot,
    /// Where reads run their query plans: worker threads of their own, so a heavy `SELECT`
    /// never occupies the threads that accept connections and run the other statements.
    queries: QueryRuntime,
    /// The parallelism of jobs created without `SET 'parallelism.default'` (`--workers`), shown
    /// by `SHOW parallelism.default` until the session sets it.
    workers: usize,
    /// The client connections, kept by the frontend (`pg_stat_activity`).
    activities: Arc<Activities>,
    /// The system tables' rows, and the last ones taken.
    figures: Arc<SystemFigures>,
    /// The temporary tables the open sessions hold ([`crate::sql::temporary_tables`]).
    temporary_tables: crate::sql::temporary_tables::Live,
}

/// The store closes when the last holder of the engine lets it go; the source thread holds it
/// for the rest of a slice of reading. Dropping a database waits for that (up to 5 s), so the
/// same process can open its directory again right after (RocksDB's lock is per process).
impl Drop for Database {
    fn drop(&mut self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while Arc::strong_count(&self.engine) > 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// The engine held for a write statement: the jobs running on threads of their own are taken
/// back when it is taken ([`Engine::attach_jobs`]), so the statement sees and commits every job,
/// and run on their own again when it is dropped ([`Engine::detach_jobs`]).
pub struct EngineWrite<'a>(tokio::sync::RwLockWriteGuard<'a, Engine>);

impl std::ops::Deref for EngineWrite<'_> {
    type Target = Engine;

    fn deref(&self) -> &Engine {
        &self.0
    }
}

impl std::ops::DerefMut for EngineWrite<'_> {
    fn deref_mut(&mut self) -> &mut Engine {
        &mut self.0
    }
}

impl EngineWrite<'_> {
    /// This engine, with its work for the statement stopping once `interrupt` is raised.
    fn interruptible(mut self, interrupt: &crate::engine::Interrupt) -> Self {
        self.0.set_interrupt(interrupt);
        self
    }
}

impl Drop for EngineWrite<'_> {
    fn drop(&mut self) {
        self.0.clear_interrupt();
        self.0.detach_jobs();
    }
}

/// The name prefix of the temporary materialized views of `SUBSCRIBE (query)`.
const TEMPORARY_VIEW_PREFIX: &str = "weir_subscribe_";

/// A `SUBSCRIBE (query)`'s temporary materialized view, dropped (on the current Tokio runtime,
/// in the background) when the subscription holding it is.
struct TemporaryView {
    engine: Arc<RwLock<Engine>>,
    name: String,
}

impl Drop for TemporaryView {
    fn drop(&mut self) {
        let (engine, name) = (Arc::clone(&self.engine), std::mem::take(&mut self.name));
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime: the server is stopping; the next open drops the view.
            return;
        };
        runtime.spawn(async move {
            let mut engine = engine.write().await;
            let dropped = engine.attach_jobs().and_then(|()| {
                engine.drop_relations(weir_catalog::RelationKind::MaterializedView, &[name.clone()], true, false)
            });
            engine.detach_jobs();
            if let Err(e) = dropped {
                tracing::warn!("dropping {name}, the temporary view of a subscription: {e}");
            }
        });
    }
}

/// Drops the temporary views of subscriptions a stopped server left ([`TemporaryView`]).
fn drop_temporary_views(engine: &mut Engine) {
    let names: Vec<String> = engine
        .catalog
        .relations
        .values()
        .filter(|r| r.kind == weir_catalog::RelationKind::MaterializedView && r.name.starts_with(TEMPORARY_VIEW_PREFIX))
        .map(|r| r.name.clone())
        .collect();
    if !names.is_empty() {
        if let Err(e) = engine.drop_relations(weir_catalog::RelationKind::MaterializedView, &names, true, false) {
            tracing::warn!("dropping the temporary views of earlier subscriptions {names:?}: {e}");
        }
    }
}

/// A Tokio runtime for query execution, shut down without waiting when the database is dropped
/// (a runtime may not be dropped from async code, where the database usually is).
struct QueryRuntime(Option<tokio::runtime::Runtime>);

impl QueryRuntime {
    fn new() -> Result<Self> {
        let workers = std::thread::available_parallelism().map_or(2, usize::from);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("weir-query")
            .enable_all()
            .build()
            .map_err(|e| WeirError::internal(format!("cannot start the query threads: {e}")))?;
        Ok(Self(Some(runtime)))
    }

    /// Runs `future` on the query threads and waits for it. Dropping the wait (the statement
    /// was cancelled, or its client left) stops the query at its next await point.
    async fn run<T: Send + 'static>(&self, future: impl std::future::Future<Output = Result<T>> + Send + 'static) -> Result<T> {
        let runtime = self.0.as_ref().ok_or_else(|| WeirError::internal("the query threads are shut down"))?;
        let mut task = AbortOnDrop(runtime.spawn(future));
        (&mut task.0).await.map_err(|e| WeirError::internal(format!("a query task failed: {e}")))?
    }
}

/// A query task, aborted when whoever waits for it stops waiting.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Drop for QueryRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// How a [`Database`] is opened.
#[derive(Debug, Clone, Copy)]
pub struct OpenOptions {
    /// Whether a thread reads the connector sources (`false`: the caller drives them with
    /// [`Engine::poll_sources`], as in-process benchmarks do).
    pub read_sources: bool,
    /// The store's options: the state cache size.
    pub store: StoreOptions,
    /// The parallelism of jobs created without `SET 'parallelism.default'` (`weir serve
    /// --workers`); the default is the number of cores.
    pub workers: usize,
}

/// The number of cores this process may use: the default of [`OpenOptions::workers`].
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self { read_sources: true, store: StoreOptions::default(), workers: default_workers() }
    }
}

impl Database {
    /// Opens (or creates) the database in `data_dir`, restarting every materialized view's job
    /// from the last committed epoch.
    ///
    /// # Errors
    /// `Storage` when the directory cannot be opened (another server holds it, permissions) or
    /// the stored state cannot be read.
    pub fn open(data_dir: &std::path::Path) -> Result<Arc<Self>> {
        Self::open_with(data_dir, OpenOptions::default())
    }

    /// The engine, for in-process drivers (benchmarks that run the sources themselves, tests).
    /// While it is held, the jobs that run on threads of their own are taken back, as for a
    /// write statement ([`EngineWrite`]).
    ///
    /// # Errors
    /// As [`Engine::attach_jobs`].
    pub async fn engine(&self) -> Result<EngineWrite<'_>> {
        self.write_engine().await
    }

    /// [`Database::open`] with `options`.
    ///
    /// # Errors
    /// As [`Database::open`].
    pub fn open_with(data_dir: &std::path::Path, options: OpenOptions) -> Result<Arc<Self>> {
        let OpenOptions { read_sources, store, workers } = options;
        let store = Arc::new(Store::open_with(data_dir, store)?);
        let mut engine = Engine::load(store, Arc::new(SqlPlanner), workers)?;
        tracing::info!(
            epoch = engine.epoch(),
            relations = engine.catalog.relations.len(),
            jobs = engine.jobs.len(),
            "opened {}",
            data_dir.display()
        );
        drop_temporary_views(&mut engine);
        let temporary_tables = crate::sql::temporary_tables::Live::default();
        crate::sql::temporary_tables::drop_orphans(&mut engine, &temporary_tables);
        if read_sources {
            engine.run_jobs_detached();
        }
        // From here on the idle-watermark task and the source thread take the lock.
        let committed = Arc::clone(engine.committed());
        let first = std::sync::Mutex::new(Arc::new(engine.system_state()));
        let engine = Arc::new(RwLock::new(engine));
        let activities: Arc<Activities> = Arc::default();
        let figures = SystemFigures { engine: Arc::downgrade(&engine), activities: Arc::clone(&activities), last: first };
        let db = Arc::new(Self {
            engine,
            committed,
            queries: QueryRuntime::new()?,
            workers: workers.max(1),
            activities,
            figures: Arc::new(figures),
            temporary_tables,
        });
        crate::engine::driver::start(&db.engine, read_sources)?;
        Ok(db)
    }

    /// The client connections, which the frontend keeps up to date.
    pub fn activities(&self) -> &Arc<Activities> {
        &self.activities
    }

    /// The last committed epoch, as reads see it (no lock a job or statement holds).
    pub fn last_commit(&self) -> Arc<Committed> {
        Arc::clone(&self.committed.read().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// What the system tables, `/metrics` and the web page show: taken under the engine's
    /// read lock (for as long as it takes to copy the figures out; jobs on threads of their
    /// own are shown as of their last commit), with the connections; or, while a statement
    /// holds the engine for longer than [`STATE_WAIT`], the figures of the last look (`true`:
    /// stale; at first those of the opening), so that a look never waits for a long statement.
    pub async fn system_state(&self) -> (Arc<SystemState>, bool) {
        self.figures.get().await
    }

    /// The engine for a write statement; see [`EngineWrite`].
    async fn write_engine(&self) -> Result<EngineWrite<'_>> {
        let mut engine = self.engine.write().await;
        engine.attach_jobs()?;
        Ok(EngineWrite(engine))
    }

    /// `FLUSH`: waits until every bounded source of a running job is read to its end and every
    /// Kafka source up to where its topic ends now, then commits; see
    /// [`crate::engine::flush`]. The wait is first without the engine's lock (jobs go on
    /// committing, other statements run), then under it, for what is left and the commit;
    /// taking the write lock also waits for the write statements in flight, each of which
    /// commits before it returns.
    ///
    /// # Errors
    /// `External` for a job waiting to restart or brokers that cannot be reached; `Execution`
    /// when the sources are not there within [`FLUSH_TIMEOUT`], naming them; a source's or
    /// operator's error (the engine then reloads from its last commit).
    async fn flush(&self) -> Result<()> {
        let deadline = std::time::Instant::now() + FLUSH_TIMEOUT;
        let sources = self.engine.read().await.kafka_sources()?;
        let kafka_ends = if sources.is_empty() {
            Vec::new()
        } else {
            tokio::task::spawn_blocking(move || crate::engine::flush::source_ends(&sources))
                .await
                .map_err(|e| WeirError::internal(format!("asking the brokers where the topics end: {e}")))??
        };
        let mut asked = std::time::Instant::now();
        while std::time::Instant::now() < deadline && !self.engine.read().await.flush_sources_reached(&kafka_ends) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            // A look for new partitions that failed (the brokers away a moment) is tried again.
            if !kafka_ends.is_empty() && asked.elapsed() >= std::time::Duration::from_secs(1) {
                crate::source::kafka::request_discovery();
                asked = std::time::Instant::now();
            }
        }
        let mut engine = self.write_engine().await?;
        loop {
            // A source or operator that errs leaves its job's state uncertain: back to the
            // last commit, from which the job restarts after a delay.
            let step = match engine.poll_sources(crate::engine::SOURCE_SLICE) {
                Ok(step) => step,
                Err(e) => {
                    if let Err(reload) = engine.reload() {
                        tracing::error!("reloading after a failed FLUSH failed: {reload}");
                    }
                    return Err(e);
                }
            };
            let behind = engine.source_behind(&kafka_ends);
            if engine.bounded_sources_finished() && behind.is_none() {
                break;
            }
            if step.rows == 0 && !step.watermark_moved {
                tokio::task::yield_now().await;
            }
            if std::time::Instant::now() > deadline {
                return Err(WeirError::execution(match behind {
                    Some(at) => format!(
                        "FLUSH: the Kafka sources did not reach the end their topics had when FLUSH began within {} s: {at}",
                        FLUSH_TIMEOUT.as_secs()
                    ),
                    None => {
                        let unfinished: Vec<String> = engine
                            .unfinished_bounded_sources()
                            .iter()
                            .map(|(job, table)| format!("{table} (read by {job})"))
                            .collect();
                        format!(
                            "FLUSH: the bounded sources did not reach their end within {} s: {} (a \
                             'rows-per-second' limit makes a generator take that long in real time)",
                            FLUSH_TIMEOUT.as_secs(),
                            unfinished.join(", ")
                        )
                    }
                }));
            }
        }
        engine.flush_can_wait()?;
        engine.commit(crate::state::EpochWrites::default(), None)?;
        Ok(())
    }

    /// Whether every source task has read all of its input ([`Engine::sources_finished`]).
    ///
    /// # Errors
    /// As [`Engine::sources_finished`]: a FAILED job.
    pub async fn sources_finished(&self) -> Result<bool> {
        self.engine.read().await.sources_finished()
    }

    /// The jobs running on threads of their own now, by name (see [`crate::engine::runner`]).
    pub async fn detached_jobs(&self) -> Vec<String> {
        self.engine.read().await.detached_jobs()
    }

    /// Splits a query string into statements at top-level semicolons; empty ones are dropped.
    pub fn split_statements(sql: &str) -> Result<Vec<String>> {
        parser::split_statements(sql)
    }

    /// Executes one statement.
    ///
    /// Inside a transaction block an error aborts the block: until ROLLBACK every statement
    /// fails with 25P02 ([`crate::sql::transaction`]).
    pub async fn execute(&self, session: &mut Session, sql: &str) -> Result<StatementResult> {
        // A cancel that came between statements is not for this one; past the session's
        // statement_timeout the statement stops (Postgres: every statement, writes included,
        // which roll back), at its next await point or the engine's next check.
        let limit = crate::sql::settings::statement_timeout(&session.settings)?;
        session.interrupt.reset();
        session.interrupt = session.interrupt.within(limit);
        if let Some(result) = self.statement_set(session, sql).await {
            return result.map_err(crate::sql::messages::in_sql_terms);
        }
        // Planned in the session's time zone as it was when the statement began.
        let settings = session.settings.clone();
        let run = crate::sql::settings::in_session(
            &settings,
            Box::pin(async {
                match parser::parse_statement(sql) {
                    Ok(stmt) => self.execute_parsed(session, stmt, sql).await,
                    Err(e) => Err(e),
                }
            }),
        );
        let timed = async {
            match limit {
                Some(limit) => tokio::time::timeout(limit, run)
                    .await
                    .unwrap_or_else(|_| Err(WeirError::new(crate::error::ErrorKind::StatementTimeout))),
                None => run.await,
            }
        };
        let (result, notices) = crate::sql::notices::collect(timed).await;
        session.notices.extend(notices);
        let result = result
            .map_err(|e| crate::sql::messages::in_sql_terms(e.locate_name(|name| parser::position_of_name(sql, name))))
            .and_then(|r| r.shown_in(crate::sql::settings::session_zone(&settings)));
        if result.is_err() {
            if let Some(txn) = session.txn.as_mut() {
                txn.failed = true;
            }
        }
        result
    }

    /// Flink's statement sets: `BEGIN STATEMENT SET;` (or `EXECUTE STATEMENT SET BEGIN` and
    /// the first statement), then `INSERT INTO` statements, each checked as it comes as its
    /// job's start would check it (so a mistake shows at once, and the set stays open) and
    /// answered `INSERT 0 0`, then `END;`,
    /// which runs them in order: each starts its job as it would alone. All or nothing, as
    /// Flink submits a set as one job: when one fails, the jobs the set had started are
    /// stopped and its error returned. `None` for a statement outside a set.
    ///
    /// # Errors
    /// 0A000 for a statement other than INSERT in a set; 55000 for a second BEGIN; 25001 inside
    /// a transaction block; 42501 for a read-only role; the INSERT's errors.
    async fn statement_set(&self, session: &mut Session, sql: &str) -> Option<Result<StatementResult>> {
        use parser::StatementSetPart;
        match parser::statement_set_part(sql) {
            StatementSetPart::Begin(first) => {
                if session.statement_set.is_some() {
                    return Some(Err(WeirError::not_in_state("a statement set is open already; END; runs it")));
                }
                if session.txn.is_some() {
                    return Some(Err(WeirError::new(crate::error::ErrorKind::ActiveTransaction(
                        "a statement set cannot start inside a transaction block".into(),
                    ))));
                }
                session.statement_set = Some(Vec::new());
                Some(match first {
                    Some(first) => self.add_to_statement_set(session, &first).await,
                    None => Ok(command("BEGIN STATEMENT SET")),
                })
            }
            StatementSetPart::End => {
                let set = session.statement_set.take()?;
                Some(self.run_statement_set(session, &set).await)
            }
            StatementSetPart::Other => {
                session.statement_set.as_ref()?;
                Some(self.add_to_statement_set(session, sql).await)
            }
        }
    }

    /// Checks `sql`, an INSERT, and adds it to the session's open statement set.
    async fn add_to_statement_set(&self, session: &mut Session, sql: &str) -> Result<StatementResult> {
        let located = |e: WeirError| e.locate_name(|name| parser::position_of_name(sql, name));
        let mut stmt = parser::parse_statement(sql).map_err(located)?;
        session.temporary_tables.rename_statement(&mut stmt);
        let WeirStatement::Sql(inner) = &stmt else { return Err(not_in_a_statement_set()) };
        let Statement::Insert(insert) = inner.as_ref() else { return Err(not_in_a_statement_set()) };
        if session.read_only {
            return Err(WeirError::new(crate::error::ErrorKind::InsufficientPrivilege(format!(
                "permission denied: role \"{}\" is read-only (SELECT, SUBSCRIBE, SHOW, EXPLAIN, cursors and COPY ... TO)",
                session.user
            ))));
        }
        let table = dml::insert_table(insert)?;
        let rel = self.last_commit().catalog.get(&table).cloned().ok_or_else(|| located(WeirError::unknown_table(&table)))?;
        if crate::runtime::relation::connector_of(&rel) != "table" {
            // Every check the job's start makes, short of starting it.
            let mut engine = self.write_engine().await?;
            let check = crate::sql::sink_jobs::SinkJobMode::CheckOnly;
            let temporary = session.temporary_views.read_by_insert(insert);
            dml::insert_into_connector(&mut engine, &rel, insert, sql, &session.settings, check, temporary).await.map_err(located)?;
        } else {
            self.execute_parsed(session, WeirStatement::Explain(Box::new(stmt.clone())), sql).await.map_err(located)?;
        }
        session.statement_set.get_or_insert_with(Vec::new).push(sql.to_string());
        Ok(StatementResult::Command { tag: "INSERT".into(), rows: Some(0) })
    }

    /// Runs the statements of a statement set in order; see [`Database::statement_set`].
    async fn run_statement_set(&self, session: &mut Session, set: &[String]) -> Result<StatementResult> {
        let jobs = |db: &Database| -> std::collections::BTreeSet<String> {
            let catalog = Arc::clone(&db.last_commit().catalog);
            catalog.relations.values().filter(|r| r.kind == weir_catalog::RelationKind::SinkJob).map(|r| r.name.clone()).collect()
        };
        let mut started = Vec::new();
        for sql in set {
            let before = jobs(self);
            let result = match parser::parse_statement(sql) {
                Ok(stmt) => self.execute_parsed(session, stmt, sql).await,
                Err(e) => Err(e),
            };
            started.extend(jobs(self).difference(&before).cloned());
            if let Err(e) = result {
                let mut engine = self.write_engine().await?;
                for id in &started {
                    if let Err(stop) = engine.stop_job(id) {
                        tracing::warn!(job = %id, "stopping a job of a statement set that failed: {stop}");
                    }
                }
                tracing::warn!(jobs = ?started, "a statement of a statement set failed: its jobs started before it are stopped");
                return Err(e.locate_name(|name| parser::position_of_name(sql, name)));
            }
        }
        Ok(command("EXECUTE STATEMENT SET"))
    }

    /// Inserts the rows of a `COPY table (columns) FROM STDIN` (`data`: the whole stream the
    /// client sent) into `table`, as one epoch, or into the session's transaction block;
    /// returns the row count. Columns not listed are NULL.
    ///
    /// # Errors
    /// `InvalidText` for a malformed row or value (naming its line or column): nothing is
    /// inserted; the insert's errors.
    pub async fn copy_in(
        &self,
        session: &mut Session,
        table: &str,
        columns: &[String],
        format: &crate::sql::copy::CopyFormat,
        data: &[u8],
    ) -> Result<usize> {
        let settings = session.settings.clone();
        let result = crate::sql::settings::in_session(&settings, self.copy_rows(session, table, columns, format, data)).await;
        if result.is_err() {
            if let Some(txn) = session.txn.as_mut() {
                txn.failed = true;
            }
        }
        result
    }

    async fn copy_rows(
        &self,
        session: &mut Session,
        table: &str,
        columns: &[String],
        format: &crate::sql::copy::CopyFormat,
        data: &[u8],
    ) -> Result<usize> {
        let catalog = Arc::clone(&self.last_commit().catalog);
        let rel = catalog.get(table).ok_or_else(|| WeirError::unknown_table(table))?;
        let full = crate::runtime::relation::relation_schema(rel)?;
        let listed: Vec<usize> = if columns.is_empty() {
            (0..full.fields().len()).collect()
        } else {
            columns.iter().filter_map(|c| full.index_of(c).ok()).collect()
        };
        let copied = Arc::new(arrow::datatypes::Schema::new(listed.iter().map(|&i| full.field(i).clone()).collect::<Vec<_>>()));
        let parsed = crate::sql::copy::parse_rows(data, format, &copied)?;
        let rows = parsed.num_rows();
        let mut all: Vec<arrow::array::ArrayRef> = Vec::with_capacity(full.fields().len());
        for (i, field) in full.fields().iter().enumerate() {
            all.push(match listed.iter().position(|&l| l == i) {
                Some(p) => Arc::clone(parsed.column(p)),
                None => arrow::array::new_null_array(field.data_type(), rows),
            });
        }
        let batch = RecordBatch::try_new(dml::nullable(&full), all)?;
        let step = WriteStep::Insert { table: table.to_string(), alias: None, rows: vec![batch], on_conflict: None };
        Ok(self.write(session, "COPY", WriteRequest::Step(step)).await?.count)
    }

    /// The result schema a statement would return (`None` for a command), without running it.
    /// Used by the extended protocol's Describe.
    pub async fn describe(&self, session: &Session, sql: &str) -> Result<Option<SchemaRef>> {
        if parser::statement_set_part(sql) != parser::StatementSetPart::Other {
            // A statement set's BEGIN or END: no rows, whatever parse_statement thinks of it.
            return Ok(None);
        }
        let mut stmt = parser::parse_statement(sql)?;
        session.temporary_tables.rename_statement(&mut stmt);
        match &stmt {
            WeirStatement::Sql(s) if matches!(s.as_ref(), Statement::Query(_)) => {
                match self.query_schema(session, s).await {
                    Ok(schema) => Ok(Some(schema)),
                    // psql's catalog queries DataFusion cannot plan (`pg_catalog`).
                    Err(e) => match crate::sql::pg_catalog::answer(&self.session_snapshot(session).catalog, sql)? {
                        Some(StatementResult::Rows { schema, .. }) => Ok(Some(schema)),
                        _ => Err(e.locate_name(|name| parser::position_of_name(sql, name))),
                    },
                }
            }
            WeirStatement::Sql(s) if returning_of(s).is_some() => returning_schema(&self.read_snapshot().catalog, s).await,
            WeirStatement::Fetch { name, .. } => Ok(Some(session.cursors.schema(&name).await?)),
            WeirStatement::Subscribe(sub) if sub.query.is_some() => {
                let query = sub.query.as_ref().expect("checked").to_string();
                let schema = Box::pin(self.describe(session, &query)).await?;
                let schema = schema.ok_or_else(|| WeirError::internal("a subscribed query has no columns"))?;
                Ok(Some(crate::sql::subscribe::output_schema(&crate::runtime::feed::diff_schema(&schema), sub.progress)))
            }
            WeirStatement::Subscribe(sub) => {
                let catalog = Arc::clone(&self.read_snapshot().catalog);
                let rel = catalog.get(&sub.relation).ok_or_else(|| WeirError::unknown_table(&sub.relation))?;
                let schema = crate::runtime::relation::relation_schema(rel)?;
                Ok(Some(crate::sql::subscribe::output_schema(&crate::runtime::feed::diff_schema(&schema), sub.progress)))
            }
            WeirStatement::Show(..)
            | WeirStatement::ShowCreate(_)
            | WeirStatement::Describe(..)
            | WeirStatement::Use { .. }
            | WeirStatement::ShowVariable(_)
            | WeirStatement::Explain(_)
            | WeirStatement::ExplainAnalyze(_) => {
                let mut session = session.clone();
                match self.execute_parsed(&mut session, stmt, sql).await? {
                    StatementResult::Rows { schema, .. } => Ok(Some(schema)),
                    _ => Ok(None),
                }
            }
            _ => Ok(None),
        }
    }

    /// The result schema of query `stmt` (its relations renamed as the session names them),
    /// planned against the session's snapshot without running it: its columns named as
    /// Postgres names them (`?column?`, `count`), typed as its rows will be.
    async fn query_schema(&self, session: &Session, stmt: &Statement) -> Result<SchemaRef> {
        let snapshot = self.session_snapshot(session);
        let mut stmt = stmt.clone();
        let names = crate::sql::pg_compat::output_names(&stmt);
        crate::sql::pg_compat::rewrite(&mut stmt, &snapshot.catalog, session.pid, &session.user)?;
        let ctx = session_context(snapshot);
        let plan = ctx.state().statement_to_plan(DfStatement::Statement(Box::new(stmt))).await?;
        // The types after the analyzer's rules (a DOUBLE meeting a DECIMAL is a DOUBLE), as
        // the statement's rows have them.
        let plan = ctx.state().optimize(&plan)?;
        let schema: SchemaRef = Arc::new(plan.schema().as_arrow().clone());
        match names {
            Some(names) => Ok(crate::sql::pg_compat::rename(&schema, vec![], &names)?.0),
            None => Ok(schema),
        }
    }

    /// `CREATE TABLE .. AS query` ([`crate::sql::create_table_as`]): the table `CREATE TABLE`
    /// of the query's columns makes, then, unless `WITH NO DATA`, its rows: a plain table gets
    /// them once, as `INSERT INTO t query` would write them (Postgres's; tagged `SELECT n`), a
    /// connector table the job of that `INSERT` (Flink's; `SHOW JOBS` shows the CTAS). If they
    /// fail, the table is dropped again.
    async fn create_table_as(&self, session: &mut Session, ctas: parser::CreateTableAs, sql: &str) -> Result<StatementResult> {
        let name = ctas.table.name.clone();
        let exists = match ctas.table.temporary {
            true => session.temporary_tables.get(&name).is_some() || session.temporary_views.get(&name).is_some(),
            false => self.last_commit().catalog.get(&name).is_some(),
        };
        // Postgres: an existing table is not written, and its query not even planned.
        if exists && ctas.table.if_not_exists {
            crate::sql::notices::relation_exists(&name);
            return Ok(command("CREATE TABLE AS"));
        }
        if exists {
            return Err(crate::error::ErrorKind::DuplicateTable(name).into());
        }
        let schema = self.query_schema(session, &Statement::Query(ctas.query.clone())).await?;
        let definition = crate::sql::create_table_as::table_definition(&ctas, &schema)?;
        let created = parser::parse_statement(&definition)?;
        Box::pin(self.execute_renamed(session, created, &definition)).await?;
        if !ctas.with_data {
            return Ok(command("CREATE TABLE AS"));
        }
        // The query is renamed already, so the INSERT runs as it is, into the table made.
        let target = match ctas.table.temporary {
            true => session.temporary_tables.resolve(&name),
            false => name.clone(),
        };
        let into = format!("INSERT INTO \"{}\" SELECT 1", target.replace('"', "\"\""));
        let WeirStatement::Sql(insert) = parser::parse_statement(&into)? else {
            return Err(WeirError::internal("an INSERT parses as a statement"));
        };
        let Statement::Insert(mut insert) = *insert else { return Err(WeirError::internal("an INSERT parses as one")) };
        insert.source = Some(ctas.query);
        let plain = self.last_commit().catalog.get(&target).is_some_and(|r| crate::runtime::relation::connector_of(r) == "table");
        match Box::pin(self.execute_sql(session, Statement::Insert(insert), sql)).await {
            Ok(StatementResult::Command { rows, .. }) if plain => Ok(StatementResult::Command { tag: "SELECT".into(), rows }),
            Ok(_) => Ok(command("CREATE TABLE")),
            Err(e) => {
                let kind = if ctas.table.temporary { DropKind::TemporaryTable } else { DropKind::Table };
                let drop = WeirStatement::Drop { kind, names: vec![name], if_exists: true, cascade: false };
                if let Err(dropped) = Box::pin(self.execute_renamed(session, drop, sql)).await {
                    tracing::warn!(error = %dropped, "could not drop the table of a CREATE TABLE AS that failed");
                }
                Err(e)
            }
        }
    }

    /// Postgres's `TRUNCATE` (Flink 2's `TRUNCATE TABLE`): each plain table emptied, as
    /// `DELETE FROM t` empties it (views follow); in a block, with the block. Every table is
    /// checked first, and several go in one epoch (a block of their own outside one), so a
    /// TRUNCATE that fails empties none (Postgres's).
    ///
    /// # Errors
    /// `UnknownTable`; `WrongObjectType` (42809) for what is not a plain table; the writes'.
    async fn truncate(&self, session: &mut Session, truncate: &sqlparser::ast::Truncate) -> Result<StatementResult> {
        let catalog = Arc::clone(&self.session_snapshot(session).catalog);
        let mut deletes = Vec::new();
        for target in &truncate.table_names {
            let name = object_name(&target.name);
            let rel = catalog.get(&name).ok_or_else(|| WeirError::unknown_table(&name))?;
            if rel.kind != weir_catalog::RelationKind::Table || crate::runtime::relation::connector_of(rel) != "table" {
                let what = match rel.kind {
                    weir_catalog::RelationKind::Table => "connector table, which stores no rows".to_string(),
                    kind => kind.sql_name().to_string(),
                };
                return Err(crate::error::ErrorKind::WrongObjectType(format!(
                    "\"{}\" is not a plain table (it is a {what}): TRUNCATE empties plain tables",
                    crate::sql::temporary_tables::given_name(&name)
                ))
                .into());
            }
            let WeirStatement::Sql(delete) = parser::parse_statement(&format!("DELETE FROM {}", target.name))? else {
                return Err(WeirError::internal("a DELETE parses as a statement"));
            };
            let Statement::Delete(delete) = *delete else { return Err(WeirError::internal("a DELETE parses as one")) };
            deletes.push(delete);
        }
        let block = session.txn.is_none() && deletes.len() > 1;
        if block {
            Box::pin(self.execute_parsed(session, parser::parse_statement("BEGIN")?, "BEGIN")).await?;
        }
        for delete in deletes {
            if let Err(e) = self.write(session, "TRUNCATE", WriteRequest::Step(WriteStep::Delete(Box::new(delete)))).await {
                if block {
                    Box::pin(self.execute_parsed(session, parser::parse_statement("ROLLBACK")?, "ROLLBACK")).await?;
                }
                return Err(e);
            }
        }
        if block {
            Box::pin(self.execute_parsed(session, parser::parse_statement("COMMIT")?, "COMMIT")).await?;
        }
        Ok(command("TRUNCATE TABLE"))
    }

    /// `CREATE TABLE .. LIKE source` ([`crate::sql::create_table_like`]) as the `CREATE TABLE`
    /// it makes, and that statement's text (the table's definition). `source` is a table as the
    /// session names it (its temporary table first).
    ///
    /// # Errors
    /// `UnknownTable`; `WrongObjectType` for a view; the merge's.
    fn merge_like(&self, session: &Session, t: &parser::CreateTable) -> Result<(parser::CreateTable, String)> {
        let like = t.like.as_ref().ok_or_else(|| WeirError::internal("a CREATE TABLE without LIKE"))?;
        let catalog = Arc::clone(&self.last_commit().catalog);
        let rel = catalog.get(&session.temporary_tables.resolve(&like.source)).ok_or_else(|| WeirError::unknown_table(&like.source))?;
        if rel.kind != weir_catalog::RelationKind::Table {
            return Err(crate::error::ErrorKind::WrongObjectType(format!(
                "\"{}\" is a {}: CREATE TABLE .. LIKE takes a table",
                like.source,
                rel.kind.sql_name()
            ))
            .into());
        }
        let WeirStatement::CreateTable(source) = parser::parse_statement(&rel.definition)? else {
            return Err(WeirError::internal(format!("table {}'s definition is no CREATE TABLE", like.source)));
        };
        // The types of its computed columns, which Postgres's form may copy as plain columns.
        let computed_types: std::collections::BTreeMap<String, String> = rel
            .columns
            .iter()
            .filter(|c| c.computed.as_deref().is_some_and(|e| crate::source::metadata_key(e).is_none()))
            .filter_map(|c| {
                let arrow: arrow::datatypes::DataType = c.arrow_type.parse().ok()?;
                Some((c.name.clone(), crate::sql::show::sql_type_name(&arrow)))
            })
            .collect();
        let merged = crate::sql::create_table_like::merged(t, like, &source, &computed_types)?;
        let definition = crate::sql::create_table_like::definition(&merged);
        match parser::parse_statement(&definition)? {
            WeirStatement::CreateTable(table) => Ok((parser::CreateTable { if_not_exists: t.if_not_exists, ..*table }, definition)),
            _ => Err(WeirError::internal("a merged CREATE TABLE parses as one")),
        }
    }

    /// The types of a statement's parameters `$1..$n` as the planner infers them from their
    /// context (`id = $1`, `INSERT ... VALUES ($1)`); `None` where it cannot tell.
    pub async fn parameter_types(&self, sql: &str) -> Result<Vec<Option<arrow::datatypes::DataType>>> {
        let WeirStatement::Sql(stmt) = parser::parse_statement(sql)? else { return Ok(vec![]) };
        if !matches!(
            stmt.as_ref(),
            Statement::Query(_) | Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_)
        ) {
            return Ok(vec![]);
        }
        let snapshot = self.read_snapshot();
        let mut stmt = *stmt;
        crate::sql::pg_compat::rewrite(&mut stmt, &snapshot.catalog, 0, "")?;
        let arrays = crate::sql::pg_compat::any_placeholders(&mut stmt);
        let ctx = session_context(snapshot);
        let plan = ctx.state().statement_to_plan(DfStatement::Statement(Box::new(stmt))).await?;
        let mut types = plan.get_parameter_types()?;
        for name in arrays {
            if let Some(Some(element)) = types.get(&name).cloned() {
                let list = arrow::datatypes::DataType::List(Arc::new(arrow::datatypes::Field::new("item", element, true)));
                types.insert(name, Some(list));
            }
        }
        let n = types.keys().filter_map(|k| k.trim_start_matches('$').parse::<usize>().ok()).max().unwrap_or(0);
        Ok((1..=n).map(|i| types.get(&format!("${i}")).cloned().flatten()).collect())
    }

    /// What a read of `session` plans against: [`Database::read_snapshot`] with the session's
    /// temporary views, its plain tables read through the session's transaction block's
    /// writes, if it has any.
    fn session_snapshot(&self, session: &Session) -> Arc<Snapshot> {
        let snapshot = self.read_snapshot();
        let txn = session.txn.as_ref().filter(|t| !t.preview.writes.is_empty());
        if txn.is_none() && session.temporary_views.is_empty() && session.temporary_tables.is_empty() {
            return snapshot;
        }
        let reader: Arc<dyn ScanState> = match txn {
            Some(txn) => Arc::new(crate::state::Overlaid::new(Arc::clone(&snapshot.reader), Arc::new(txn.preview.writes.clone()))),
            None => Arc::clone(&snapshot.reader),
        };
        Arc::new(Snapshot {
            catalog: session.temporary_views.overlay(&session.temporary_tables.overlay(&snapshot.catalog)),
            permanent: Some(Arc::clone(&snapshot.catalog)),
            reader,
            keyed_table: None,
            system: snapshot.system.clone(),
            activities: snapshot.activities.clone(),
            nulls: NullCollation::High,
        })
    }

    /// Plans a write's `RETURNING` list over no rows, so that one naming what is not there
    /// fails before the write is applied, as in Postgres, which plans it with the statement.
    async fn check_returning(&self, session: &Session, stmt: &Statement) -> Result<()> {
        returning_schema(&self.session_snapshot(session).catalog, stmt).await.map(|_| ())
    }

    /// The catalog `SHOW CREATE` and `DESCRIBE` of `name` read: the session's, with its
    /// temporary table `name` (if it has one) under that name.
    fn shown_catalog(&self, session: &Session, name: &str) -> Arc<weir_catalog::Catalog> {
        let catalog = Arc::clone(&self.session_snapshot(session).catalog);
        match session.temporary_tables.shown(&catalog, name) {
            Some(rel) => {
                let mut shown = (*catalog).clone();
                shown.relations.insert(name.to_string(), rel);
                Arc::new(shown)
            }
            None => catalog,
        }
    }

    /// What a read plans against: the last committed epoch (its catalog and a store snapshot
    /// of it), with the system tables loaded from the engine only if the statement reads one.
    fn read_snapshot(&self) -> Arc<Snapshot> {
        let committed = Arc::clone(&self.committed.read().unwrap_or_else(std::sync::PoisonError::into_inner));
        let figures = Arc::clone(&self.figures);
        let load: SystemLoader = Arc::new(move || {
            let figures = Arc::clone(&figures);
            Box::pin(async move { figures.get().await.0 })
        });
        let reader: Arc<dyn ScanState> = Arc::clone(&committed.state) as Arc<dyn ScanState>;
        Arc::new(Snapshot {
            catalog: Arc::clone(&committed.catalog),
            permanent: None,
            reader,
            keyed_table: None,
            system: SystemTables::lazy(load),
            activities: Some(Arc::clone(&self.activities)),
            nulls: NullCollation::High,
        })
    }

    /// Runs `stmt` (parsed from `sql`) for `session`; its errors name the session's temporary
    /// tables as the session does.
    async fn execute_parsed(&self, session: &mut Session, stmt: WeirStatement, sql: &str) -> Result<StatementResult> {
        let result = self.execute_renamed(session, stmt, sql).await;
        result.map_err(|e| session.temporary_tables.given_names(e))
    }

    async fn execute_renamed(&self, session: &mut Session, mut stmt: WeirStatement, sql: &str) -> Result<StatementResult> {
        session.temporary_tables.rename_statement(&mut stmt);
        session.temporary_tables.check_access(&stmt, &self.temporary_tables)?;
        if session.read_only && writes(&stmt) {
            return Err(WeirError::new(crate::error::ErrorKind::InsufficientPrivilege(format!(
                "permission denied: role \"{}\" is read-only (SELECT, SUBSCRIBE, SHOW, EXPLAIN, cursors and COPY ... TO)",
                session.user
            ))));
        }
        if let Some(txn) = &session.txn {
            let ends_block = matches!(&stmt, WeirStatement::Sql(s) if matches!(s.as_ref(), Statement::Commit { .. } | Statement::Rollback { .. }));
            if txn.failed && !ends_block {
                return Err(WeirError::new(crate::error::ErrorKind::InFailedTransaction));
            }
            if let Some(what) = not_in_a_block(&stmt) {
                return Err(WeirError::new(crate::error::ErrorKind::ActiveTransaction(format!(
                    "{what} cannot run inside a transaction block"
                ))));
            }
        }
        match stmt {
            WeirStatement::AlterTableOptions { name, if_exists, set, reset } => {
                ddl::alter_table_options(&mut *self.write_engine().await?, &name, if_exists, &set, &reset).await?;
                Ok(command("ALTER TABLE"))
            }
            WeirStatement::CreateTable(t) if t.like.is_some() => {
                let (table, definition) = self.merge_like(session, &t)?;
                Box::pin(self.execute_renamed(session, WeirStatement::CreateTable(Box::new(table)), &definition)).await
            }
            WeirStatement::CreateTable(t) if t.temporary => {
                self.create_temporary_table(session, &t, sql).await?;
                Ok(command("CREATE TABLE"))
            }
            WeirStatement::CreateTable(t) => {
                if crate::sql::temporary_tables::is_temporary(&t.name) {
                    return Err(WeirError::plan(format!(
                        "table name \"{}\" is taken: names starting with {} are those of temporary tables",
                        t.name,
                        crate::sql::temporary_tables::PREFIX
                    )));
                }
                ddl::create_table(&mut *self.write_engine().await?, &t, sql).await?;
                Ok(command("CREATE TABLE"))
            }
            // Boxed, as the other large branches: the statement future stays small.
            WeirStatement::CreateTableAs(ctas) => Box::pin(self.create_table_as(session, *ctas, sql)).await,
            WeirStatement::CreateMaterializedView { name, if_not_exists, query, emit_on_window_close } => {
                let mut engine = self.write_engine().await?.interruptible(&session.interrupt);
                let temporary = session.temporary_views.read_by(&query);
                let created = (if_not_exists, emit_on_window_close);
                ddl::create_materialized_view(&mut engine, &name, &query, created, &session.settings, sql, temporary).await?;
                Ok(command("CREATE MATERIALIZED VIEW"))
            }
            WeirStatement::Drop { kind, names, if_exists, cascade } => {
                let relation_kind = match kind {
                    DropKind::Table | DropKind::TemporaryTable => weir_catalog::RelationKind::Table,
                    DropKind::View | DropKind::TemporaryView => weir_catalog::RelationKind::View,
                    DropKind::MaterializedView => weir_catalog::RelationKind::MaterializedView,
                };
                // DROP VIEW takes a temporary view first, as Postgres's search path does;
                // DROP TEMPORARY VIEW (Flink) only those. Tables likewise.
                let mut permanent = Vec::new();
                let mut temporary_tables = Vec::new();
                let mut temporary_views = Vec::new();
                for name in names {
                    let temporary = match kind {
                        DropKind::View | DropKind::TemporaryView => {
                            let found = session.temporary_views.get(&name).is_some();
                            if found {
                                temporary_views.push(name.clone());
                            }
                            found
                        }
                        DropKind::Table | DropKind::TemporaryTable => match session.temporary_tables.get(&name) {
                            Some(internal) => {
                                temporary_tables.push((name.clone(), internal.to_string()));
                                true
                            }
                            None => false,
                        },
                        DropKind::MaterializedView => false,
                    };
                    let only_temporary = matches!(kind, DropKind::TemporaryView | DropKind::TemporaryTable);
                    if !temporary && only_temporary && !if_exists {
                        return Err(WeirError::unknown_table(&name));
                    }
                    let missing = !temporary && (only_temporary || self.last_commit().catalog.get(&name).is_none());
                    if missing && if_exists {
                        crate::sql::notices::notice(format!("{} \"{name}\" does not exist, skipping", names_of_kind(kind)));
                    }
                    if !temporary && !only_temporary {
                        permanent.push(name);
                    }
                }
                // The session's temporary views that read what goes: refused, as Postgres
                // refuses to orphan a dependant, or dropped too with CASCADE.
                let going: Vec<String> =
                    permanent.iter().cloned().chain(temporary_tables.iter().map(|(_, internal)| internal.clone())).collect();
                let readers = session.temporary_views.readers_of(&temporary_views, &going);
                if !readers.is_empty() && !cascade {
                    // With the catalog's dependants, as the engine's refusal names them.
                    let catalog = Arc::clone(&self.last_commit().catalog);
                    let mut dependants: Vec<String> = catalog
                        .relations
                        .values()
                        .filter(|r| r.depends_on.iter().any(|d| going.contains(d)) && !going.contains(&r.name))
                        .map(|r| format!("{} {}", r.kind.sql_name(), r.name))
                        .collect();
                    dependants.extend(readers.iter().map(|v| format!("temporary view {v}")));
                    return Err(WeirError::new(crate::error::ErrorKind::DependentObjects(format!(
                        "cannot drop {} {} because other objects depend on it: {}; use DROP ... CASCADE to drop them too",
                        names_of_kind(kind),
                        temporary_views.first().or(going.first()).map(|g| crate::sql::temporary_tables::given_name(g)).unwrap_or_default(),
                        dependants.join(", ")
                    ))));
                }
                let mut engine = self.write_engine().await?;
                if !temporary_tables.is_empty() {
                    // DROP TEMPORARY TABLE of one a job reads leaves it to the job (Flink's: a
                    // job keeps the tables it was submitted with); DROP TABLE refuses, as
                    // Postgres does, unless CASCADE.
                    let read = |internal: &str| engine.catalog.relations.values().any(|r| r.depends_on.iter().any(|d| d == internal));
                    let detach = kind == DropKind::TemporaryTable && !cascade;
                    let internal: Vec<String> =
                        temporary_tables.iter().filter(|(_, i)| !(detach && read(i))).map(|(_, i)| i.clone()).collect();
                    if !internal.is_empty() {
                        engine.drop_relations(relation_kind, &internal, if_exists, cascade)?;
                    }
                    for (name, _) in &temporary_tables {
                        session.temporary_tables.remove(name);
                    }
                }
                if !permanent.is_empty() {
                    engine.drop_relations(relation_kind, &permanent, if_exists, cascade)?;
                }
                // Last, so a DROP the engine refuses leaves the session's views as they were.
                for view in temporary_views.iter().chain(readers.iter()) {
                    session.temporary_views.drop_view(view);
                }
                // A temporary table of an ended session goes with the last job reading it.
                crate::sql::temporary_tables::drop_orphans(&mut engine, &self.temporary_tables);
                Ok(command(match kind {
                    parser::DropKind::Table | parser::DropKind::TemporaryTable => "DROP TABLE",
                    parser::DropKind::View | parser::DropKind::TemporaryView => "DROP VIEW",
                    parser::DropKind::MaterializedView => "DROP MATERIALIZED VIEW",
                }))
            }
            WeirStatement::Flush => {
                self.flush().await?;
                Ok(command("FLUSH"))
            }
            WeirStatement::Show(list, like) => {
                let functions = match list {
                    parser::ShowList::Functions => function_names(&self.read_snapshot())
                        .into_iter()
                        .filter(|f| like.as_ref().is_none_or(|l| l.accepts(f)))
                        .collect(),
                    _ => Vec::new(),
                };
                // The relations of the last commit, without the engine's lock; SHOW VIEWS lists
                // the session's temporary views too (Flink's does). The jobs' statuses are the
                // system tables' (`SystemFigures`): they never wait for a long statement either.
                let catalog = Arc::clone(&self.session_snapshot(session).catalog);
                let jobs = match list {
                    parser::ShowList::Jobs => Some(self.system_state().await.0),
                    _ => None,
                };
                show::show_list(&catalog, &functions, list, like.as_ref(), jobs.as_deref())
            }
            WeirStatement::ShowCreate(name) => show::show_create(&self.shown_catalog(session, &name), &name),
            WeirStatement::Describe(name, like) => show::describe(&self.shown_catalog(session, &name), &name, like.as_ref()),
            WeirStatement::Use { .. } => Ok(command("USE")),
            WeirStatement::AlterSchema { name, if_exists, change } => {
                refuse_temporary_readers(session, &name, "change the schema of")?;
                if session.temporary_tables.get(&name).is_some() {
                    return Err(WeirError::unsupported(format!("changing the schema of temporary table {name}: create it again")));
                }
                Box::pin(ddl::alter_schema(&mut *self.write_engine().await?, &name, if_exists, change)).await?;
                Ok(command("ALTER TABLE"))
            }
            WeirStatement::Rename { view, name, if_exists, to } => {
                refuse_temporary_readers(session, &name, "rename")?;
                if session.temporary_tables.get(&name).is_some() || session.temporary_views.get(&name).is_some() {
                    return Err(WeirError::unsupported(format!(
                        "renaming temporary {} {name}: create it again under the new name",
                        if session.temporary_views.get(&name).is_some() { "view" } else { "table" }
                    )));
                }
                ddl::rename_relation(&mut *self.write_engine().await?, view, &name, if_exists, &to)?;
                Ok(command(if view { "ALTER VIEW" } else { "ALTER TABLE" }))
            }
            WeirStatement::Set { key, value, local } => {
                let key = key.to_lowercase();
                let key = crate::sql::settings::canonical_key(&key).to_string();
                // `SET x TO DEFAULT` is `RESET x`, as in Postgres.
                let value = match value.eq_ignore_ascii_case("default") {
                    true => session.startup_settings.get(&key).cloned(),
                    false => Some(crate::sql::settings::validate(&key, &value)?),
                };
                if let Some(notice) = crate::sql::settings::unread_key_notice(&key) {
                    crate::sql::notices::notice(notice);
                }
                // SET LOCAL lasts until the block ends; outside one it does nothing (Postgres
                // warns).
                match (local, session.txn.as_mut()) {
                    (true, None) => return Ok(command("SET")),
                    (true, Some(txn)) => {
                        txn.local_settings.entry(key.clone()).or_insert_with(|| session.settings.get(&key).cloned());
                    }
                    // A SET after a SET LOCAL of the key wins past the block (Postgres's guc.c).
                    (false, Some(txn)) => {
                        txn.local_settings.remove(&key);
                    }
                    (false, None) => {}
                }
                match value {
                    Some(value) => session.settings.insert(key, value),
                    None => session.settings.remove(&key),
                };
                Ok(command("SET"))
            }
            WeirStatement::ShowVariable(key) => {
                let key = key.to_lowercase();
                let value = crate::sql::settings::shown_value(&session.settings, &key)
                    .or_else(|| (key == crate::sql::settings::PARALLELISM).then(|| self.workers.to_string()));
                match value {
                    Some(v) => text_rows(&[key.as_str()], vec![vec![Some(v)]]),
                    None if key == "all" => text_rows(
                        &["name", "setting"],
                        DEFAULT_SETTINGS
                            .iter()
                            .map(|(k, v)| {
                                let v = session.settings.get(crate::sql::settings::canonical_key(k)).cloned().unwrap_or_else(|| v.to_string());
                                vec![Some(k.to_string()), Some(v)]
                            })
                            .collect(),
                    ),
                    None => Err(WeirError::option(format!(
                        "unrecognized configuration parameter \"{key}\"; known: {}, {}",
                        DEFAULT_SETTINGS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", "),
                        crate::sql::settings::PARALLELISM
                    ))),
                }
            }
            WeirStatement::Reset(key) => {
                match key {
                    Some(k) => {
                        let key = crate::sql::settings::canonical_key(&k.to_lowercase()).to_string();
                        match session.startup_settings.get(&key) {
                            Some(v) => session.settings.insert(key, v.clone()),
                            None => session.settings.remove(&key),
                        };
                    }
                    None => session.settings = session.startup_settings.clone(),
                }
                Ok(command("RESET"))
            }
            WeirStatement::StopJob { id, savepoint: false } => {
                let mut engine = self.write_engine().await?;
                engine.stop_job(&id)?;
                crate::sql::temporary_tables::drop_orphans(&mut engine, &self.temporary_tables);
                Ok(command("STOP JOB"))
            }
            WeirStatement::StopJob { id, savepoint: true } => {
                let mut engine = self.write_engine().await?;
                let names_view = |r: &weir_catalog::Relation| {
                    r.kind != weir_catalog::RelationKind::SinkJob && (r.job.as_deref() == Some(id.as_str()) || r.name == id)
                };
                if engine.catalog.relations.values().any(names_view) {
                    return Err(WeirError::unsupported(format!(
                        "STOP JOB '{id}' WITH SAVEPOINT: it maintains a materialized view; use ALTER MATERIALIZED VIEW ... SUSPEND"
                    )));
                }
                engine.suspend_job(&id)?;
                Ok(command("STOP JOB"))
            }
            WeirStatement::Suspend(JobRef::View(name) | JobRef::Id(name)) => {
                self.write_engine().await?.suspend_job(&name)?;
                Ok(command("ALTER MATERIALIZED VIEW"))
            }
            WeirStatement::Resume(job) => {
                let (name, tag) = match &job {
                    JobRef::View(name) => (name, "ALTER MATERIALIZED VIEW"),
                    JobRef::Id(id) => (id, "RESUME JOB"),
                };
                self.write_engine().await?.resume_job(name)?;
                Ok(command(tag))
            }
            WeirStatement::Subscribe(sub) => Ok(StatementResult::Subscribe(Box::new(self.subscribe(session, &sub).await?))),
            WeirStatement::CopySubscribe(sub) => {
                Ok(StatementResult::CopySubscribe(Box::new(self.subscribe(session, &sub).await?)))
            }
            WeirStatement::DeclareCursor { name, hold, query } => {
                if session.txn.is_none() && !hold {
                    return Err(WeirError::new(crate::error::ErrorKind::NoActiveTransaction(
                        "DECLARE CURSOR can only be used in transaction blocks (or declare it WITH HOLD)".into(),
                    )));
                }
                let cursor = match query {
                    parser::CursorQuery::Subscribe(sub) => Cursor::Subscription(Box::new(self.subscribe(session, &sub).await?)),
                    parser::CursorQuery::Select(query) => {
                        let text = query.to_string();
                        match Box::pin(self.execute_sql(session, Statement::Query(query), &text)).await? {
                            StatementResult::Rows { schema, batches } => Cursor::Rows { schema, ready: batches.into() },
                            _ => return Err(WeirError::internal("a cursor's query gave no rows")),
                        }
                    }
                };
                session.cursors.declare(&name, cursor, hold).await?;
                Ok(command("DECLARE CURSOR"))
            }
            WeirStatement::Fetch { name, count, timeout_ms } => {
                let timeout = timeout_ms.map(std::time::Duration::from_millis);
                let (schema, batches) = session.cursors.fetch(&name, count, timeout).await?;
                Ok(StatementResult::Returned { tag: "FETCH".into(), schema, batches })
            }
            WeirStatement::CloseCursor(name) => {
                session.cursors.close(name.as_deref()).await?;
                Ok(command(if name.is_some() { "CLOSE CURSOR" } else { "CLOSE CURSOR ALL" }))
            }
            WeirStatement::Explain(inner) => self.explain(*inner, session).await,
            WeirStatement::ExplainAnalyze(job) => {
                let (state, _) = self.system_state().await;
                show::explain_analyze(&state, &job)
            }
            WeirStatement::Sql(stmt) => self.execute_sql(session, *stmt, sql).await,
        }
    }

    /// The stream plan of a query, with the session's allowed lateness and state TTL applied
    /// as a view created now would have them. Planned against the last committed epoch, as a
    /// `SELECT` reads, so it never waits for a statement or a job that holds the engine.
    async fn explain(&self, stmt: WeirStatement, session: &Session) -> Result<StatementResult> {
        let base = crate::sql::planning::PlanningBase::of_snapshot(&self.read_snapshot());
        let mut kind = JobKind::View { emit_on_window_close: false };
        let mut sink = None;
        let query: &sqlparser::ast::Query = match &stmt {
            WeirStatement::CreateMaterializedView { query, emit_on_window_close, .. } => {
                kind = JobKind::View { emit_on_window_close: *emit_on_window_close };
                query
            }
            WeirStatement::Sql(s) => match s.as_ref() {
                Statement::Query(q) => q,
                // Planned as the job it starts: windowed operators emit final rows.
                Statement::Insert(i) => match &i.source {
                    Some(q) => {
                        kind = JobKind::Sink;
                        sink = base.catalog.get(&dml::insert_table(i)?).cloned();
                        q
                    }
                    None => return Err(WeirError::unsupported("EXPLAIN of INSERT without a query")),
                },
                other => return Err(WeirError::unsupported(format!("EXPLAIN of {other}"))),
            },
            _ => return Err(WeirError::unsupported("EXPLAIN of this statement")),
        };
        let temporary = session.temporary_views.read_by(query);
        // As the view or job would be created: its column names, Flink's FIRST_VALUE.
        let query = if matches!(stmt, WeirStatement::CreateMaterializedView { .. }) {
            ddl::as_created(query)?
        } else {
            let mut query = query.clone();
            crate::sql::pg_compat::name_nested_columns(&mut query);
            crate::sql::query_rewrites::first_last_value_ignore_nulls(&mut query);
            query
        };
        let query = query.to_string();
        let mut options = crate::sql::settings::job_options(&session.settings)?;
        let plan = match &sink {
            Some(sink) => crate::sql::sink_jobs::plan_sink_job(&base, sink, &query, &mut options, &temporary).await?,
            None => plan_job(&base, &query, kind, &options, &temporary).await?,
        };
        let parallelism = crate::sql::settings::parallelism_option(&options)?.unwrap_or(self.workers);
        let mut lines = plan.explain_parallel(parallelism);
        // An INSERT's plan ends in its sink (Flink's `Sink(table=[..], fields=[..])`).
        if let Some(sink) = &sink {
            let fields: Vec<String> = crate::engine::written_fields(sink)?.iter().map(|f| f.name().clone()).collect();
            let root = format!(
                "StreamSink: table={} connector={} fields=[{}]",
                sink.name,
                crate::runtime::relation::connector_of(sink),
                fields.join(", ")
            );
            lines = std::iter::once(root).chain(lines.into_iter().map(|l| format!("  {l}"))).collect();
        }
        text_rows(&["QUERY PLAN"], lines.into_iter().map(|l| vec![Some(l)]).collect())
    }

    async fn execute_sql(&self, session: &mut Session, stmt: Statement, sql: &str) -> Result<StatementResult> {
        let (settings, pid, user) = (&session.settings.clone(), session.pid, session.user.clone());
        match &stmt {
            Statement::Query(_) => {
                // The last committed epoch, read without the engine's lock: a job or a write
                // statement running meanwhile neither waits for this read nor changes what it
                // sees (README, "Design notes").
                let snapshot = self.session_snapshot(session);
                let catalog = Arc::clone(&snapshot.catalog);
                // Postgres's catalog functions, casts and column names (`pg_compat`).
                let mut stmt = stmt;
                // Named as written (`pg_backend_pid`, `regclass`), before the rewrite.
                let names = crate::sql::pg_compat::output_names(&stmt);
                crate::sql::pg_compat::rewrite(&mut stmt, &snapshot.catalog, pid, &user)?;
                let ctx = session_context(snapshot);
                let state = ctx.state();
                // Analyzed and optimized here, so a plan DataFusion cannot run fails now; the
                // optimized plan is what runs (not optimized again).
                let planned = match state.statement_to_plan(DfStatement::Statement(Box::new(stmt))).await {
                    Ok(plan) => state.optimize(&plan),
                    Err(e) => Err(e),
                };
                let plan = match planned {
                    Ok(plan) => plan,
                    // psql's `\d` queries use Postgres syntax DataFusion cannot plan; their
                    // shapes are answered from the catalog (`pg_catalog`).
                    Err(e) => match crate::sql::pg_catalog::answer(&catalog, sql)? {
                        Some(result) => {
                            tracing::debug!(error = %e, sql, "a catalog query DataFusion cannot plan, answered from the catalog's shapes");
                            return Ok(result);
                        }
                        None => return Err(e.into()),
                    },
                };
                // Past the session's statement_timeout `execute` stops waiting, which aborts the
                // query.
                self.queries
                    .run(async move {
                        let schema: SchemaRef = Arc::new(plan.schema().as_arrow().clone());
                        let physical = state.query_planner().create_physical_plan(&plan, &state).await?;
                        let batches = datafusion::physical_plan::collect(physical, state.task_ctx()).await?;
                        let (schema, batches) = match names {
                            Some(names) => crate::sql::pg_compat::rename(&schema, batches, &names)?,
                            None => (schema, batches),
                        };
                        Ok(StatementResult::Rows { schema, batches })
                    })
                    .await
            }
            Statement::Copy { .. } => match crate::sql::copy::plan(&stmt)? {
                crate::sql::copy::CopyPlan::In { table, columns, format } => {
                    let snapshot = self.read_snapshot();
                    let rel = snapshot.catalog.get(&table).ok_or_else(|| WeirError::unknown_table(&table))?;
                    if rel.kind != weir_catalog::RelationKind::Table || crate::runtime::relation::connector_of(rel) != "table" {
                        return Err(WeirError::unsupported(format!(
                            "COPY {table} FROM STDIN: {table} is not a plain table (a connector table is fed by its connector, a view by its query)"
                        )));
                    }
                    for c in &columns {
                        if !rel.columns.iter().any(|col| &col.name == c) {
                            return Err(crate::error::ErrorKind::UnknownColumn(format!(
                                "column \"{c}\" of relation \"{table}\" does not exist"
                            ))
                            .into());
                        }
                    }
                    let columns = if columns.is_empty() { rel.columns.iter().map(|c| c.name.clone()).collect() } else { columns };
                    Ok(StatementResult::CopyIn { table, columns, format })
                }
                crate::sql::copy::CopyPlan::Out { query, format } => {
                    let inner = parser::parse_statement(&query)?;
                    let WeirStatement::Sql(inner) = inner else {
                        return Err(WeirError::plan("COPY (query) TO STDOUT takes a SELECT"));
                    };
                    match Box::pin(self.execute_sql(session, *inner, &query)).await? {
                        StatementResult::Rows { schema, batches } => Ok(StatementResult::CopyOut { schema, batches, format }),
                        _ => Err(WeirError::plan("COPY (query) TO STDOUT takes a SELECT")),
                    }
                }
            },
            Statement::Insert(insert) => {
                let table = dml::insert_table(insert)?;
                let rel = self.last_commit().catalog.get(&table).cloned();
                if let Some(rel) = rel.filter(|r| crate::runtime::relation::connector_of(r) != "table") {
                    if session.txn.is_some() {
                        return Err(WeirError::new(crate::error::ErrorKind::ActiveTransaction(format!(
                            "INSERT INTO connector table {table} starts a job: it cannot run inside a transaction block"
                        ))));
                    }
                    let mut engine = self.write_engine().await?.interruptible(&session.interrupt);
                    // The catalog under the engine: the table may have changed since the read.
                    let rel = engine.catalog.get(&table).cloned().unwrap_or(rel);
                    let temporary = session.temporary_views.read_by_insert(insert);
                    dml::insert_into_connector(&mut engine, &rel, insert, sql, settings, crate::sql::sink_jobs::SinkJobMode::Start, temporary)
                        .await?;
                    return Ok(StatementResult::Command { tag: "INSERT".into(), rows: Some(0) });
                }
                self.check_returning(session, &stmt).await?;
                let written = self.write(session, "INSERT", WriteRequest::Insert(insert)).await?;
                self.write_result("INSERT", &table, insert.table_alias.as_ref().map(|a| &a.alias), insert.returning.as_deref(), written).await
            }
            Statement::Truncate(truncate) => Box::pin(self.truncate(session, truncate)).await,
            Statement::Update(update) => {
                let step = WriteStep::Update(Box::new(update.clone()));
                let table = dml::write_table(&step)?;
                self.check_returning(session, &stmt).await?;
                let written = self.write(session, "UPDATE", WriteRequest::Step(step)).await?;
                let alias = match &update.table.relation {
                    sqlparser::ast::TableFactor::Table { alias, .. } => alias.as_ref().map(|a| &a.name),
                    _ => None,
                };
                self.write_result("UPDATE", &table, alias, update.returning.as_deref(), written).await
            }
            Statement::Delete(delete) => {
                let step = WriteStep::Delete(Box::new(delete.clone()));
                let table = dml::write_table(&step)?;
                self.check_returning(session, &stmt).await?;
                let written = self.write(session, "DELETE", WriteRequest::Step(step)).await?;
                self.write_result("DELETE", &table, delete_alias(delete).as_ref(), delete.returning.as_deref(), written).await
            }
            Statement::CreateView(v) => {
                let name = object_name(&v.name);
                // `CREATE VIEW v (a, b) AS ..`: the names go into the query.
                let names: Vec<sqlparser::ast::Ident> = v.columns.iter().map(|c| c.name.clone()).collect();
                let mut v = v.clone();
                v.query = Box::new(crate::sql::pg_compat::with_view_column_names(&v.query, &name, &names)?);
                let v = &v;
                if v.temporary && !v.materialized {
                    if session.temporary_tables.get(&name).is_some() {
                        return Err(crate::error::ErrorKind::DuplicateTable(name).into());
                    }
                    let snapshot = self.session_snapshot(session);
                    let replace = (v.or_replace, v.if_not_exists);
                    session.temporary_views.create(snapshot, &name, &v.query, replace, sql).await?;
                    return Ok(command("CREATE VIEW"));
                }
                let temporary = session.temporary_views.read_by(&v.query);
                let mut engine = self.write_engine().await?.interruptible(&session.interrupt);
                if v.materialized {
                    ddl::create_materialized_view(&mut engine, &name, &v.query, (v.if_not_exists, false), settings, sql, temporary).await?;
                    return Ok(command("CREATE MATERIALIZED VIEW"));
                }
                // Flink's and Postgres's IF NOT EXISTS: an existing relation stays as it is.
                if v.if_not_exists && !v.or_replace && engine.catalog.get(&name).is_some() {
                    crate::sql::notices::relation_exists(&name);
                    return Ok(command("CREATE VIEW"));
                }
                if let Some(read) = temporary.first() {
                    return Err(WeirError::plan(format!(
                        "view {name} would read temporary view {}, which ends with this session; create it with CREATE TEMPORARY VIEW",
                        read.name
                    )));
                }
                if let Some(read) = ddl::relation_names(&v.query).iter().find(|r| crate::sql::temporary_tables::is_temporary(r)) {
                    return Err(WeirError::plan(format!(
                        "view {name} would read temporary table {}, which ends with this session; create it with CREATE TEMPORARY VIEW",
                        crate::sql::temporary_tables::given_name(read)
                    )));
                }
                ddl::create_view(&mut engine, &name, &v.query, v.or_replace, sql).await?;
                Ok(command("CREATE VIEW"))
            }
            Statement::StartTransaction { modes, begin, .. } => {
                // A BEGIN inside a block keeps the block (Postgres warns and goes on).
                match session.txn {
                    None => session.txn = Some(Transaction::new(read_only(modes), &session.settings)),
                    Some(_) => crate::sql::notices::warning("25001", "there is already a transaction in progress"),
                }
                Ok(command(if *begin { "BEGIN" } else { "START TRANSACTION" }))
            }
            Statement::Set(sqlparser::ast::Set::SetTransaction { modes, session: false, .. }) => {
                if let Some(txn) = session.txn.as_mut() {
                    txn.read_only = read_only(modes);
                }
                Ok(command("SET"))
            }
            Statement::Commit { .. } => {
                let txn = session.txn.take();
                if txn.is_some() {
                    session.cursors.end_block().await;
                }
                // A failed block rolls back, its SETs with it; a committed one keeps them but
                // for SET LOCAL's.
                if let Some(txn) = &txn {
                    session.settings = match txn.failed {
                        true => txn.settings_at_begin.clone(),
                        false => txn.committed_settings(std::mem::take(&mut session.settings)),
                    };
                }
                match txn {
                    None => {
                        crate::sql::notices::warning("25P01", "there is no transaction in progress");
                        Ok(command("COMMIT"))
                    }
                    Some(txn) if txn.failed => Ok(command("ROLLBACK")),
                    Some(txn) => {
                        self.commit_block(txn, &session.interrupt).await?;
                        Ok(command("COMMIT"))
                    }
                }
            }
            Statement::Rollback { savepoint: None, .. } => {
                match session.txn.take() {
                    Some(txn) => {
                        session.cursors.end_block().await;
                        session.settings = txn.settings_at_begin;
                    }
                    None => crate::sql::notices::warning("25P01", "there is no transaction in progress"),
                }
                Ok(command("ROLLBACK"))
            }
            Statement::Rollback { savepoint: Some(name), .. } => {
                session.settings = in_block(session, "ROLLBACK TO SAVEPOINT")?.rollback_to(&parser::ident(name))?;
                Ok(command("ROLLBACK"))
            }
            Statement::Savepoint { name } => {
                let settings = session.settings.clone();
                in_block(session, "SAVEPOINT")?.savepoint(parser::ident(name), &settings);
                Ok(command("SAVEPOINT"))
            }
            Statement::ReleaseSavepoint { name } => {
                in_block(session, "RELEASE SAVEPOINT")?.release(&parser::ident(name))?;
                Ok(command("RELEASE"))
            }
            Statement::Set(_) => Ok(command("SET")),
            Statement::AlterTable(alter) if alter.operations.iter().all(|o| matches!(o, sqlparser::ast::AlterTableOperation::AddColumn { .. })) => {
                let added = alter.operations.iter().map(ddl::added_column).collect::<Result<Vec<_>>>()?;
                let table = object_name(&alter.name);
                refuse_temporary_readers(session, &table, "add a column to")?;
                Box::pin(ddl::add_columns(&mut *self.write_engine().await?, &table, alter.if_exists, &added)).await?;
                Ok(command("ALTER TABLE"))
            }
            Statement::AlterTable(alter) if alter.operations.len() == 1 && matches!(alter.operations[0], sqlparser::ast::AlterTableOperation::RenameColumn { .. }) => {
                let sqlparser::ast::AlterTableOperation::RenameColumn { old_column_name, new_column_name } = &alter.operations[0] else {
                    return Err(WeirError::internal("a RENAME COLUMN is one"));
                };
                let (from, to) = (parser::ident(old_column_name), parser::ident(new_column_name));
                refuse_temporary_readers(session, &object_name(&alter.name), "rename a column of")?;
                Box::pin(ddl::rename_column(&mut *self.write_engine().await?, &object_name(&alter.name), alter.if_exists, &from, &to))
                    .await?;
                Ok(command("ALTER TABLE"))
            }
            Statement::AlterTable(alter) => Err(WeirError::unsupported(format!(
                "ALTER TABLE {}: only SET ('k' = 'v', ...) and RESET ('k', ...) of a connector table's options, ADD \
                 [COLUMN], Flink's ADD | MODIFY | DROP of columns, the primary key and the watermark, RENAME [COLUMN] and \
                 RENAME TO; to change a column's type, drop the table (and the jobs over it) and create it again",
                alter.name
            ))),
            // Prepared statements live in the wire protocol's store, where a client's Parse
            // replaces one of the same name; there are no SQL-level ones to drop. psycopg 3 sends
            // DEALLOCATE ALL after DDL, pgbouncer DISCARD ALL between clients.
            Statement::Deallocate { name, .. } => {
                Ok(command(if name.value.eq_ignore_ascii_case("all") { "DEALLOCATE ALL" } else { "DEALLOCATE" }))
            }
            Statement::Discard { object_type } => {
                use sqlparser::ast::DiscardObject;
                // Postgres: ALL resets the session's settings and drops its temporary objects
                // and cursors; TEMP drops the temporary objects.
                if matches!(object_type, DiscardObject::ALL) {
                    session.settings.clear();
                    session.cursors.close(None).await?;
                    session.statement_set = None;
                }
                if matches!(object_type, DiscardObject::ALL | DiscardObject::TEMP) {
                    session.temporary_views = Default::default();
                    if !session.temporary_tables.clear().is_empty() {
                        let mut engine = self.write_engine().await?;
                        crate::sql::temporary_tables::drop_orphans(&mut engine, &self.temporary_tables);
                    }
                }
                Ok(command(&format!("DISCARD {object_type}")))
            }
            other => Err(WeirError::unsupported(format!(
                "statement {}",
                other.to_string().split_whitespace().take(3).collect::<Vec<_>>().join(" ")
            ))),
        }
    }
}

/// A write statement for [`Database::write`].
enum WriteRequest<'a> {
    /// An INSERT on a plain table: its rows are evaluated where it runs.
    Insert(&'a sqlparser::ast::Insert),
    /// A step already made (UPDATE, DELETE, COPY's rows).
    Step(WriteStep),
}

impl Database {
    /// Runs a write on plain tables: outside a transaction block under the engine, committed
    /// at once as one epoch; inside one over the last commit and the block's own writes, kept
    /// for COMMIT ([`crate::sql::transaction`]). `what` names it for a read-only block's error.
    async fn write(&self, session: &mut Session, what: &str, request: WriteRequest<'_>) -> Result<dml::Applied> {
        if let Some(txn) = session.txn.as_ref() {
            txn.check_writable(what)?;
            let snapshot = self.session_snapshot(session);
            let step = match request {
                WriteRequest::Insert(insert) => dml::insert_step(Arc::clone(&snapshot), insert).await?,
                WriteRequest::Step(step) => step,
            };
            let base = WriteBase {
                catalog: Arc::clone(&snapshot.catalog),
                state: Arc::clone(&self.last_commit().state) as Arc<dyn ScanState>,
                system: snapshot.system.clone(),
                row_ids: dml::RowIds::Tentative,
                interrupt: session.interrupt.clone(),
            };
            let txn = session.txn.as_mut().expect("checked above");
            // On an error the block is aborted: what the step wrote to the preview is dropped
            // with it at ROLLBACK.
            let applied = dml::apply(&base, &mut txn.preview, &step).await?;
            txn.steps.push(step);
            return Ok(applied);
        }
        let mut engine = self.write_engine().await?.interruptible(&session.interrupt);
        let step = match request {
            WriteRequest::Insert(insert) => {
                let temporary = session.temporary_views.read_by_insert(&insert);
                dml::insert_step(crate::sql::planning::planning_snapshot(&engine, None, &temporary), insert).await?
            }
            WriteRequest::Step(step) => step,
        };
        let mut changes = TableChanges::one_statement();
        let applied = dml::apply(&WriteBase::of_engine(&engine), &mut changes, &step).await?;
        engine.commit_table_changes(changes)?;
        Ok(applied)
    }

    /// `CREATE TEMPORARY TABLE name (..) WITH (..)`: a table of `session` alone, created in the
    /// catalog under a name of its own ([`crate::sql::temporary_tables`]) and dropped when the
    /// session ends, unless a job reads it then.
    ///
    /// # Errors
    /// `DuplicateTable` when the session has a temporary table or view `name` (a table
    /// without IF NOT EXISTS); `CREATE TABLE`'s.
    async fn create_temporary_table(&self, session: &mut Session, t: &parser::CreateTable, sql: &str) -> Result<()> {
        if session.temporary_tables.get(&t.name).is_some() && t.if_not_exists {
            crate::sql::notices::relation_exists(&t.name);
            return Ok(());
        }
        if session.temporary_tables.get(&t.name).is_some() || session.temporary_views.get(&t.name).is_some() {
            return Err(crate::error::ErrorKind::DuplicateTable(t.name.clone()).into());
        }
        let mut engine = self.write_engine().await?;
        let internal = session.temporary_tables.new_name(&engine.catalog, &t.name);
        let created = parser::CreateTable { name: internal.clone(), if_not_exists: false, ..t.clone() };
        ddl::create_table(&mut engine, &created, sql).await?;
        session.temporary_tables.add(&t.name, &internal, &self.engine, &self.temporary_tables);
        Ok(())
    }

    /// Starts a subscription ([`crate::sql::subscribe`]). Under the engine, with every job
    /// taken back, the epoch in flight is committed first: so no change of the relation is
    /// half applied while its feed gets the reader (a change computed before would miss it),
    /// the snapshot is the relation at exactly that epoch, and the reader gets every later one.
    ///
    /// A query (`SUBSCRIBE (SELECT ...)`) first becomes a temporary materialized view named
    /// `weir_subscribe_...`, created as `CREATE MATERIALIZED VIEW` would (its snapshot is the
    /// query's result once its job has read what is there) and dropped when the subscription
    /// ends; one left by a server that stopped meanwhile is dropped when the database opens.
    ///
    /// # Errors
    /// `UnknownTable`; `Unsupported` for a view (computed when read) or a connector table (no
    /// stored rows); a query's CREATE MATERIALIZED VIEW's; the commit's.
    async fn subscribe(&self, session: &Session, sub: &crate::sql::parser::Subscribe) -> Result<Subscription> {
        use weir_catalog::RelationKind;
        let mut temporary = None;
        let mut sub = sub.clone();
        if let Some(query) = sub.query.take() {
            static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let name = format!("{TEMPORARY_VIEW_PREFIX}{}_{n}", crate::observe::now_ms());
            // Outside the caller's transaction block (DDL is refused in one) and role (a
            // read-only user may SUBSCRIBE): the view is the server's, not the user's.
            let mut own = Session {
                settings: session.settings.clone(),
                user: session.user.clone(),
                temporary_views: session.temporary_views.clone(),
                temporary_tables: session.temporary_tables.clone(),
                interrupt: session.interrupt.clone(),
                ..Session::default()
            };
            let create = format!("CREATE MATERIALIZED VIEW {name} AS {query}");
            Box::pin(self.execute(&mut own, &create)).await?;
            temporary = Some(TemporaryView { engine: Arc::clone(&self.engine), name: name.clone() });
            sub.relation = name;
        }
        let mut engine = self.write_engine().await?;
        let rel = engine.catalog.get(&sub.relation).filter(|r| r.kind != RelationKind::SinkJob).cloned();
        let rel = rel.ok_or_else(|| WeirError::unknown_table(&sub.relation))?;
        let name = &rel.name;
        match rel.kind {
            RelationKind::MaterializedView => {}
            RelationKind::Table if crate::runtime::relation::connector_of(&rel) == "table" => {}
            RelationKind::Table => {
                return Err(WeirError::unsupported(format!(
                    "SUBSCRIBE to connector table {name}: it stores no rows; subscribe to a materialized view over it"
                )))
            }
            _ => {
                return Err(WeirError::unsupported(format!(
                    "SUBSCRIBE to view {name}: a view is computed when read; subscribe to a materialized view of its query"
                )))
            }
        }
        let epoch = engine.commit_epoch(crate::state::EpochWrites::default(), None)?;
        let schema = crate::runtime::relation::relation_schema(&rel)?;
        let reader = engine.feeds().of(name, &schema).subscribe();
        let snapshot = sub.snapshot.then(|| crate::state::StoreSnapshot::of(&engine.store));
        drop(engine);
        let rows = match (snapshot, rel.state_table) {
            (Some(snapshot), Some(id)) => {
                crate::runtime::table::scan_rows(&snapshot, id, &schema, crate::runtime::relation::layout_of(&rel), false)?
            }
            _ => Vec::new(),
        };
        let subscription = Subscription::new(name, reader, epoch, rows, sub.progress)?;
        Ok(match temporary {
            Some(view) => subscription.owning(Box::new(view)),
            None => subscription,
        })
    }

    /// COMMIT of `txn`: every step of the block applied again over the latest commit, as one
    /// epoch. Nothing is written when a step fails.
    async fn commit_block(&self, txn: Transaction, interrupt: &crate::engine::Interrupt) -> Result<()> {
        if txn.steps.is_empty() {
            return Ok(());
        }
        let mut engine = self.write_engine().await?.interruptible(interrupt);
        let mut changes = TableChanges::default();
        {
            let base = WriteBase::of_engine(&engine);
            for step in &txn.steps {
                dml::apply(&base, &mut changes, step).await?;
            }
        }
        engine.commit_table_changes(changes)
    }

    /// A write statement's result: its tag and count, or its `RETURNING` rows.
    async fn write_result(
        &self,
        tag: &str,
        table: &str,
        alias: Option<&sqlparser::ast::Ident>,
        returning: Option<&[sqlparser::ast::SelectItem]>,
        written: dml::Applied,
    ) -> Result<StatementResult> {
        match returning {
            Some(items) => {
                let (schema, batches) = dml::returning(table, alias, &written, items).await?;
                Ok(StatementResult::Returned { tag: tag.to_string(), schema, batches })
            }
            None => Ok(StatementResult::Command { tag: tag.into(), rows: Some(written.count) }),
        }
    }
}

/// The schema of a write statement's `RETURNING` rows over `catalog` (`None` without one),
/// planned over no rows: for Describe, and to fail before the write.
///
/// # Errors
/// The planning errors of the items (an unknown column, say).
async fn returning_schema(catalog: &weir_catalog::Catalog, stmt: &Statement) -> Result<Option<SchemaRef>> {
    let Some((table, alias, items)) = returning_of(stmt) else { return Ok(None) };
    let (store, _) = crate::engine::table_store(catalog, &table)?;
    let none = dml::Applied { count: 0, rows: vec![], schema: dml::nullable(store.schema()) };
    Ok(Some(dml::returning(&table, alias.as_ref(), &none, items).await?.0))
}

/// The table, alias and `RETURNING` items of a write statement that has them.
fn returning_of(stmt: &Statement) -> Option<(String, Option<sqlparser::ast::Ident>, &[sqlparser::ast::SelectItem])> {
    match stmt {
        Statement::Insert(i) => {
            let items = i.returning.as_deref()?;
            Some((dml::insert_table(i).ok()?, i.table_alias.as_ref().map(|a| a.alias.clone()), items))
        }
        Statement::Update(u) => {
            let items = u.returning.as_deref()?;
            let (table, alias) = match &u.table.relation {
                sqlparser::ast::TableFactor::Table { name, alias, .. } => (parser::object_name(name), alias.as_ref().map(|a| a.name.clone())),
                _ => return None,
            };
            Some((table, alias, items))
        }
        Statement::Delete(d) => {
            let items = d.returning.as_deref()?;
            let step = WriteStep::Delete(Box::new(d.clone()));
            Some((dml::write_table(&step).ok()?, delete_alias(d), items))
        }
        _ => None,
    }
}

/// The kind `DROP kind` names, in its error messages.
fn names_of_kind(kind: DropKind) -> &'static str {
    match kind {
        DropKind::Table | DropKind::TemporaryTable => "table",
        DropKind::View | DropKind::TemporaryView => "view",
        DropKind::MaterializedView => "materialized view",
    }
}

/// The alias of a DELETE's table (`DELETE FROM t AS x`).
fn delete_alias(delete: &sqlparser::ast::Delete) -> Option<sqlparser::ast::Ident> {
    let (sqlparser::ast::FromTable::WithFromKeyword(tables) | sqlparser::ast::FromTable::WithoutKeyword(tables)) = &delete.from;
    match &tables.first()?.relation {
        sqlparser::ast::TableFactor::Table { alias, .. } => alias.as_ref().map(|a| a.name.clone()),
        _ => None,
    }
}

/// Refuses to `what` (rename, add a column to) relation `name` while a temporary view of the
/// session reads it, as a permanent view refuses it ([`ddl::rename_relation`]).
///
/// # Errors
/// `DependentObjects` (2BP01) naming the views.
fn refuse_temporary_readers(session: &Session, name: &str, what: &str) -> Result<()> {
    let readers = session.temporary_views.readers_of(&[], &[name.to_string()]);
    match readers.is_empty() {
        true => Ok(()),
        false => Err(WeirError::new(crate::error::ErrorKind::DependentObjects(format!(
            "cannot {what} {} because other objects name it: {}; drop them first (their queries name it)",
            crate::sql::temporary_tables::given_name(name),
            readers.iter().map(|v| format!("temporary view {v}")).collect::<Vec<_>>().join(", ")
        )))),
    }
}

/// What a transaction block refuses (named as Postgres names it), if `stmt` is one of those.
fn not_in_a_block(stmt: &WeirStatement) -> Option<&'static str> {
    Some(match stmt {
        WeirStatement::CreateTable(_) => "CREATE TABLE",
        WeirStatement::CreateTableAs(_) => "CREATE TABLE AS",
        WeirStatement::AlterTableOptions { .. } | WeirStatement::AlterSchema { .. } => "ALTER TABLE",
        WeirStatement::Rename { view: true, .. } => "ALTER VIEW",
        WeirStatement::Rename { view: false, .. } => "ALTER TABLE",
        WeirStatement::CreateMaterializedView { .. } => "CREATE MATERIALIZED VIEW",
        WeirStatement::Drop { .. } => "DROP",
        WeirStatement::Flush => "FLUSH",
        WeirStatement::StopJob { .. } => "STOP JOB",
        WeirStatement::Suspend(_) => "ALTER MATERIALIZED VIEW ... SUSPEND",
        WeirStatement::Resume(_) => "RESUME",
        WeirStatement::Sql(s) => match s.as_ref() {
            Statement::CreateView(_) => "CREATE VIEW",
            Statement::CreateTable(_) => "CREATE TABLE",
            Statement::Drop { .. } => "DROP",
            Statement::AlterTable { .. } => "ALTER TABLE",
            Statement::Discard { object_type: sqlparser::ast::DiscardObject::ALL } => "DISCARD ALL",
            Statement::Discard { object_type: sqlparser::ast::DiscardObject::TEMP } => "DISCARD TEMP",
            _ => return None,
        },
        _ => return None,
    })
}

/// Whether `stmt` changes anything: what a read-only role may not run.
fn writes(stmt: &WeirStatement) -> bool {
    match stmt {
        WeirStatement::Subscribe(_)
        | WeirStatement::CopySubscribe(_)
        | WeirStatement::DeclareCursor { .. }
        | WeirStatement::Fetch { .. }
        | WeirStatement::CloseCursor(_)
        | WeirStatement::Show(..)
        | WeirStatement::ShowCreate(_)
        | WeirStatement::Describe(..)
        | WeirStatement::Use { .. }
        | WeirStatement::Set { .. }
        | WeirStatement::ShowVariable(_)
        | WeirStatement::Reset(_)
        | WeirStatement::Explain(_)
        | WeirStatement::ExplainAnalyze(_)
        | WeirStatement::Flush => false,
        WeirStatement::CreateTable(_)
        | WeirStatement::CreateTableAs(_)
        | WeirStatement::Rename { .. }
        | WeirStatement::AlterTableOptions { .. }
        | WeirStatement::AlterSchema { .. }
        | WeirStatement::CreateMaterializedView { .. }
        | WeirStatement::Drop { .. }
        | WeirStatement::StopJob { .. }
        | WeirStatement::Suspend(_)
        | WeirStatement::Resume(_) => true,
        WeirStatement::Sql(s) => match s.as_ref() {
            Statement::Query(_)
            | Statement::StartTransaction { .. }
            | Statement::Commit { .. }
            | Statement::Rollback { .. }
            | Statement::Savepoint { .. }
            | Statement::ReleaseSavepoint { .. }
            | Statement::Deallocate { .. }
            | Statement::Discard { .. }
            | Statement::Set(_) => false,
            Statement::Copy { to, .. } => !to,
            _ => true,
        },
    }
}

/// Whether transaction `modes` make the block read-only.
fn read_only(modes: &[sqlparser::ast::TransactionMode]) -> bool {
    use sqlparser::ast::{TransactionAccessMode, TransactionMode};
    modes.iter().any(|m| matches!(m, TransactionMode::AccessMode(TransactionAccessMode::ReadOnly)))
}

/// The session's open block, for a statement (`what`) that needs one.
///
/// # Errors
/// `NoActiveTransaction` outside a block.
fn in_block<'s>(session: &'s mut Session, what: &str) -> Result<&'s mut Transaction> {
    session.txn.as_mut().ok_or_else(|| {
        WeirError::new(crate::error::ErrorKind::NoActiveTransaction(format!("{what} can only be used in transaction blocks")))
    })
}

/// How long FLUSH waits for bounded sources to reach their end.
/// The refusal of a statement other than INSERT in a statement set.
fn not_in_a_statement_set() -> WeirError {
    WeirError::unsupported(
        "a statement set holds INSERT INTO statements only (as in Flink), so this one is refused; the set stays open: END; runs it, and this statement can run after that",
    )
}

/// The names of every scalar, aggregate and window function a query of this session can call
/// (DataFusion's, Weir's own, the Postgres catalog functions), sorted, each once.
fn function_names(snapshot: &Arc<Snapshot>) -> Vec<String> {
    let ctx = session_context(Arc::clone(snapshot));
    let state = ctx.state();
    // DataFusion's functions about its own machinery (Arrow types, unions, files scanned),
    // which a Flink user never calls, are left out, and so are Weir's targets of rewritten
    // calls, listed under the names written (`weir_json_object` as `json_object`).
    let internal = |f: &str| f.starts_with("arrow_") || f.starts_with("union_") || matches!(f, "input_file_name" | "file_row_index");
    let mut names: Vec<String> = state
        .scalar_functions()
        .keys()
        .chain(state.aggregate_functions().keys())
        .chain(state.window_functions().keys())
        .filter(|f| !internal(f))
        .map(|f| f.strip_prefix("weir_").unwrap_or(f).to_string())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

pub const FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

#[cfg(test)]
mod tests {
    use super::{Database, OpenOptions, Session, StatementResult};
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

    /// Flink's statement sets: INSERTs are planned as they come and start only at END, all or
    /// nothing; the `EXECUTE STATEMENT SET BEGIN ...` form arrives in the same pieces (a client
    /// splits at semicolons) and works the same. A statement that is not an INSERT, or an INSERT
    /// that does not plan, is refused and leaves the set open.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_statement_set_starts_its_jobs_at_end_all_or_none() -> crate::error::Result<()> {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = Database::open_with(dir.path(), OpenOptions { read_sources: false, ..OpenOptions::default() })?;
        let mut s = Session::default();
        let out = dir.path().join("out");
        for sql in [
            "CREATE TABLE src (k INT, v INT)".to_string(),
            "CREATE TABLE bh1 (k INT, v INT) WITH ('connector' = 'blackhole')".into(),
            "CREATE TABLE bh2 (k INT, v INT) WITH ('connector' = 'blackhole')".into(),
            format!("CREATE TABLE fs (k INT, n BIGINT) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json')", out.display()),
        ] {
            db.execute(&mut s, &sql).await?;
        }
        let jobs = |db: &Database| db.last_commit().catalog.relations.values().filter(|r| r.kind == weir_catalog::RelationKind::SinkJob).count();

        let tag = |r: StatementResult| match r {
            StatementResult::Command { tag, rows } => format!("{tag} {rows:?}"),
            _ => "rows".into(),
        };
        assert_eq!(tag(db.execute(&mut s, "BEGIN STATEMENT SET;").await?), "BEGIN STATEMENT SET None");
        assert_eq!(tag(db.execute(&mut s, "INSERT INTO bh1 SELECT k, v FROM src").await?), "INSERT Some(0)");
        let refused = db.execute(&mut s, "CREATE TABLE other (a INT)").await.expect_err("not an INSERT");
        assert_eq!(refused.sqlstate(), "0A000", "{refused}");
        let refused = db.execute(&mut s, "INSERT INTO bh2 SELECT nosuch FROM src").await.expect_err("does not plan");
        assert_eq!(refused.sqlstate(), "42703", "{refused}");
        db.execute(&mut s, "INSERT INTO bh2 SELECT k, v FROM src WHERE v > 0").await?;
        assert_eq!(jobs(&db), 0, "nothing starts before END");
        assert!(db.last_commit().catalog.get("other").is_none());
        assert_eq!(tag(db.execute(&mut s, "END;").await?), "EXECUTE STATEMENT SET None");
        assert_eq!(jobs(&db), 2, "both INSERTs run");
        assert!(s.statement_set.is_none());

        // A sink whose directory cannot be created, under a file: its job fails as it starts.
        std::fs::write(dir.path().join("a-file"), b"").expect("file");
        let bad = dir.path().join("a-file").join("out");
        db.execute(&mut s, &format!("CREATE TABLE fs_bad (k INT, v INT) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json')", bad.display())).await?;
        db.execute(&mut s, "CREATE TABLE gen (k INT, v INT) WITH ('connector' = 'datagen', 'number-of-rows' = '5')").await?;
        // Every check a job's start makes is made as the INSERT comes: an unknown target, an
        // updating query into an append-only sink.
        db.execute(&mut s, "EXECUTE STATEMENT SET BEGIN INSERT INTO bh1 SELECT k, v FROM src").await?;
        let refused = db.execute(&mut s, "INSERT INTO nosuch SELECT k, v FROM src").await.expect_err("unknown target");
        assert_eq!(refused.sqlstate(), "42P01", "{refused}");
        let refused = db.execute(&mut s, "INSERT INTO fs SELECT k, COUNT(*) FROM src GROUP BY k").await.expect_err("updating");
        assert!(refused.to_string().contains("append-only"), "{refused}");
        // One that fails only when its job starts: the job started before it is stopped too.
        db.execute(&mut s, "INSERT INTO fs_bad SELECT k, v FROM gen").await?;
        let failed = db.execute(&mut s, "END").await.expect_err("the sink's directory cannot be created");
        assert_eq!(failed.sqlstate(), "58030", "{failed}");
        assert_eq!(jobs(&db), 2, "the set's first job is stopped, the earlier set's two run on");
        // END outside a set is Postgres's (a COMMIT without a block).
        db.execute(&mut s, "END").await?;
        Ok(())
    }

    /// An INSERT INTO job's definition in `SHOW JOBS` is the statement as written (a window
    /// TVF in Flink's form, not the text Weir rewrites it into), and `EXPLAIN INSERT` shows the
    /// sink above the plan (Flink's `Sink(table=[..], fields=[..])`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn insert_jobs_show_their_statement_and_explain_their_sink() -> crate::error::Result<()> {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = Database::open_with(dir.path(), OpenOptions { read_sources: false, ..OpenOptions::default() })?;
        let mut s = Session::default();
        db.execute(&mut s, "CREATE TABLE ev (id BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)").await?;
        db.execute(&mut s, "CREATE TABLE snk (ws TIMESTAMP(3), n BIGINT) WITH ('connector' = 'blackhole')").await?;
        let insert = "INSERT INTO snk SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end";
        let StatementResult::Rows { batches, .. } = db.execute(&mut s, &format!("EXPLAIN {insert}")).await? else { panic!("no plan") };
        let plan = arrow::util::pretty::pretty_format_batches(&batches).expect("format").to_string();
        let lines: Vec<&str> = plan.lines().filter(|l| l.starts_with('|')).skip(1).collect();
        assert!(lines[0].contains("| StreamSink: table=snk connector=blackhole fields=[ws, n]"), "{plan}");
        assert!(lines[1].starts_with("|   Stream"), "the plan below the sink, indented: {plan}");
        db.execute(&mut s, &format!("  {insert} ;  ")).await?;
        let StatementResult::Rows { batches, .. } = db.execute(&mut s, "SHOW JOBS").await? else { panic!("no rows") };
        let definition = batches[0].column_by_name("definition").expect("definition");
        assert_eq!(definition.as_any().downcast_ref::<arrow::array::StringArray>().expect("text").value(0), insert);
        Ok(())
    }

    /// Flink's `SHOW FUNCTIONS`: every function a query can call, each once, sorted: scalar
    /// (`upper`), aggregate (`count`), window (`row_number`), Weir's own (`current_watermark`)
    /// and the Postgres catalog's (`pg_get_userbyid`), without DataFusion's internals; with
    /// `LIKE`, those that match; `SHOW USER FUNCTIONS`: none.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn show_functions_lists_every_callable_function_once() -> crate::error::Result<()> {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = Database::open_with(dir.path(), OpenOptions { read_sources: false, ..OpenOptions::default() })?;
        let mut s = Session::default();
        let StatementResult::Rows { schema, batches } = db.execute(&mut s, "SHOW FUNCTIONS").await? else { panic!("no rows") };
        assert_eq!(schema.field(0).name(), "function name");
        let names: Vec<String> = batches
            .iter()
            .flat_map(|b| {
                let column = b.column(0).as_any().downcast_ref::<arrow::array::StringArray>().expect("text");
                column.iter().map(|v| v.expect("a name").to_string()).collect::<Vec<_>>()
            })
            .collect();
        for f in ["upper", "count", "row_number", "current_watermark", "pg_get_userbyid", "json_value", "if"] {
            assert!(names.iter().any(|n| n == f), "{f} missing from {names:?}");
        }
        assert!(!names.iter().any(|n| n == "arrow_typeof" || n == "input_file_name"), "DataFusion's internals listed");
        assert_eq!(rows(&db, &mut s, "SHOW FUNCTIONS LIKE 'json_v%'").await, vec!["| json_value |"]);
        assert_eq!(
            rows(&db, &mut s, "SHOW FUNCTIONS ILIKE 'JSON%'").await,
            ["json_array", "json_build_object", "json_exists", "json_object", "json_query", "json_quote", "json_string", "json_unquote", "json_value"].map(|f| format!("| {f} |"))
        );
        assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted, each once");
        assert!(rows(&db, &mut s, "SHOW USER FUNCTIONS").await.is_empty());
        Ok(())
    }

    /// `CREATE TABLE name` over the bids of 1 000 Nexmark events (920 bids: 20 blocks of 50
    /// events, each 46 bids, NEXMARK.md 1.3), a bounded source.
    fn nexmark_bids(name: &str) -> String {
        format!(
            "CREATE TABLE {name} (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
                 date_time TIMESTAMP(3), extra VARCHAR)
             WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'nexmark.events' = '1000')"
        )
    }

    /// A view created while the epoch is in flight (a source's rows have reached the views
    /// it feeds but are not committed yet, as between two checkpoints) starts from those rows
    /// too: they went to the jobs that existed, so its backfill must not read an older commit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_view_created_mid_epoch_sees_the_uncommitted_rows_of_its_source() -> crate::error::Result<()> {
        let dir = tempfile::tempdir().expect("temp dir");
        // No background source loop: the test reads the source itself, without committing.
        let db = Database::open_with(dir.path(), OpenOptions { read_sources: false, ..OpenOptions::default() })?;
        let mut s = Session::default();
        for sql in [
            nexmark_bids("b").as_str(),
            "CREATE MATERIALIZED VIEW bids AS SELECT COUNT(*) AS n FROM b",
        ] {
            db.execute(&mut s, sql).await?;
        }
        {
            let mut engine = db.engine().await?;
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
        let db = Database::open_with(dir.path(), OpenOptions { read_sources: false, ..OpenOptions::default() })?;
        let mut s = Session::default();
        for sql in [
            nexmark_bids("b").as_str(),
            "CREATE MATERIALIZED VIEW bids AS SELECT auction, COUNT(*) AS n FROM b GROUP BY auction",
        ] {
            db.execute(&mut s, sql).await?;
        }
        let total = "SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) AS total FROM bids";
        let mut engine = db.engine().await?;
        while !engine.poll_sources(std::time::Duration::from_millis(100))?.all_finished {}
        let read = tokio::time::timeout(std::time::Duration::from_secs(30), rows(&db, &mut s, total)).await;
        assert_eq!(read.expect("the read waited for the engine"), ["| 0 |"], "the epoch in flight is not committed");
        engine.commit(EpochWrites::default(), None)?;
        drop(engine);
        // 1 000 Nexmark events are 20 blocks of 50, each 46 bids (NEXMARK.md 1.3).
        assert_eq!(rows(&db, &mut s, total).await, ["| 920 |"]);
        Ok(())
    }

    /// Polls `sql` (one BIGINT) until it returns `want`, for at most 60 s.
    async fn poll_until(db: &Database, s: &mut Session, sql: &str, want: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let got = rows(db, s, sql).await;
            if got == [want] {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{sql}: {got:?}, still not {want} after 60 s");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Independent jobs (every input a connector source of their own, no job reading them) run
    /// on threads of their own and commit their own epochs: their results and source positions
    /// are committed (readable, and kept through a restart), and a job that gets a reader comes
    /// back to the engine, which backfills the reader from its committed rows.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn independent_jobs_run_on_threads_of_their_own() -> crate::error::Result<()> {
        let dir = tempfile::tempdir().expect("temp dir");
        {
            let db = Database::open(dir.path())?;
            let mut s = Session::default();
            for sql in [
                nexmark_bids("b"),
                "CREATE MATERIALIZED VIEW n1 AS SELECT CAST(COUNT(*) AS BIGINT) AS n FROM b".to_string(),
                "CREATE MATERIALIZED VIEW n2 AS SELECT CAST(SUM(price) AS BIGINT) AS total FROM b".to_string(),
            ] {
                db.execute(&mut s, &sql).await?;
            }
            // 1 000 Nexmark events are 20 blocks of 50, each 46 bids (NEXMARK.md 1.3).
            poll_until(&db, &mut s, "SELECT n FROM n1", "| 920 |").await;
            poll_until(&db, &mut s, "SELECT CAST(COUNT(*) AS BIGINT) FROM weir_sources WHERE NOT finished", "| 0 |").await;
            let total = rows(&db, &mut s, "SELECT total FROM n2").await;
            assert_eq!(db.engine().await?.jobs.len(), 2, "taken back for the statement");
            db.execute(&mut s, "CREATE MATERIALIZED VIEW twice AS SELECT n * 2 AS n2 FROM n1").await?;
            assert_eq!(rows(&db, &mut s, "SELECT n2 FROM twice").await, ["| 1840 |"]);
            let engine = db.engine().await?;
            drop(engine);
            assert_eq!(db.detached_jobs().await, ["n2"], "n1 has a reader now; twice reads a view");
            assert_eq!(rows(&db, &mut s, "SELECT total FROM n2").await, total);
        }
        let db = Database::open(dir.path())?;
        let mut s = Session::default();
        assert_eq!(rows(&db, &mut s, "SELECT n FROM n1").await, ["| 920 |"], "committed by its thread");
        assert_eq!(rows(&db, &mut s, "SELECT n2 FROM twice").await, ["| 1840 |"]);
        assert_eq!(
            rows(&db, &mut s, "SELECT job, CAST(rows_read AS BIGINT), finished FROM weir_sources ORDER BY job").await,
            ["| n1 | 920 | true |", "| n2 | 920 | true |"],
            "positions committed with the results: nothing is read again"
        );
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
            let mut engine = db.engine().await?;
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
        assert!(db.engine().await?.failed.is_empty());
        assert_eq!(rows(&db, &mut s, "SELECT k, s FROM v").await, ["| 1 | 15 |", "| 2 | 8 |"]);
        Ok(())
    }

    /// A view created before views sorted NULL as Flink does (its catalog options have no
    /// `weir.null-collation`) restarts with the Postgres order it was created with, which its
    /// Top-N state is kept in: NULL is the highest score, so it ranks first descending. A view
    /// created now ranks it last.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_view_created_before_flinks_null_order_keeps_the_postgres_one() -> crate::error::Result<()> {
        use crate::sql::settings::NULL_COLLATION;
        let dir = tempfile::tempdir().expect("temp dir");
        let db = Database::open(dir.path())?;
        let mut s = Session::default();
        let top = |name: &str| {
            format!(
                "CREATE MATERIALIZED VIEW {name} AS SELECT id FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY score DESC) AS rn FROM t) WHERE rn <= 1"
            )
        };
        db.execute(&mut s, "CREATE TABLE t (id BIGINT, score INT, PRIMARY KEY (id) NOT ENFORCED)").await?;
        db.execute(&mut s, &top("old")).await?;
        {
            let mut engine = db.engine().await?;
            let mut catalog = (*engine.catalog).clone();
            let options = &mut catalog.relations.get_mut("old").expect("old").options;
            assert_eq!(options.remove(NULL_COLLATION).as_deref(), Some("low"), "every new view has it");
            engine.commit(EpochWrites::default(), Some(catalog))?;
            engine.reload()?;
            assert!(engine.failed.is_empty(), "{:?}", engine.failed);
        }
        db.execute(&mut s, &top("new")).await?;
        db.execute(&mut s, "INSERT INTO t VALUES (1, 10), (2, NULL), (3, 30)").await?;
        assert_eq!(rows(&db, &mut s, "SELECT id FROM old").await, ["| 2 |"], "Postgres: NULL is the highest");
        assert_eq!(rows(&db, &mut s, "SELECT id FROM new").await, ["| 3 |"], "Flink: NULL is the lowest");
        Ok(())
    }

    /// A job's state is kept by key group (`state::key_group`): jobs restarted with another
    /// parallelism (2, then 3, then 1 instances per keyed operator, as `weir serve --workers`
    /// after a restart) find every key's state with the instance that now owns it. Each round
    /// inserts rows and checks every view against the rows counted here.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restart_with_another_parallelism_keeps_every_keys_state() -> crate::error::Result<()> {
        use std::collections::BTreeMap;
        let dir = tempfile::tempdir().expect("temp dir");
        let db = Database::open_with(dir.path(), OpenOptions { read_sources: false, workers: 2, ..OpenOptions::default() })?;
        let mut s = Session::default();
        let mut inserted: Vec<(i64, i64)> = Vec::new();
        for (round, workers) in [2, 3, 1].into_iter().enumerate() {
            {
                let mut engine = db.engine().await?;
                engine.workers = workers;
                engine.reload()?;
                assert!(engine.failed.is_empty(), "{:?}", engine.failed);
            }
            if round == 0 {
                for sql in [
                    "CREATE TABLE t (k BIGINT, v BIGINT)",
                    "CREATE MATERIALIZED VIEW agg AS SELECT k, COUNT(*) AS n, SUM(v) AS total, MAX(v) AS highest FROM t GROUP BY k",
                    "CREATE MATERIALIZED VIEW top2 AS SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn FROM t) WHERE rn <= 2",
                    "CREATE MATERIALIZED VIEW pairs AS SELECT a.k, COUNT(*) AS n FROM t AS a JOIN t AS b ON a.k = b.k GROUP BY a.k",
                ] {
                    db.execute(&mut s, sql).await?;
                }
            }
            let new: Vec<(i64, i64)> = (0..300).map(|i| ((i * 7 + round as i64) % 41, (i * 7919 + round as i64 * 13) % 1000)).collect();
            let values = new.iter().map(|(k, v)| format!("({k}, {v})")).collect::<Vec<_>>().join(", ");
            db.execute(&mut s, &format!("INSERT INTO t VALUES {values}")).await?;
            inserted.extend(new);

            let mut by_key: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
            for (k, v) in &inserted {
                by_key.entry(*k).or_default().push(*v);
            }
            let sorted = |mut lines: Vec<String>| {
                lines.sort();
                lines
            };
            let agg = by_key
                .iter()
                .map(|(k, vs)| format!("| {k} | {} | {} | {} |", vs.len(), vs.iter().sum::<i64>(), vs.iter().max().expect("a row")))
                .collect();
            assert_eq!(rows(&db, &mut s, "SELECT k, n, total, highest FROM agg").await, sorted(agg), "round {round}");
            let top2 = by_key
                .iter()
                .flat_map(|(k, vs)| {
                    let mut vs = vs.clone();
                    vs.sort_unstable_by(|a, b| b.cmp(a));
                    vs.into_iter().take(2).map(move |v| format!("| {k} | {v} |"))
                })
                .collect();
            assert_eq!(rows(&db, &mut s, "SELECT k, v FROM top2").await, sorted(top2), "round {round}");
            let pairs = by_key.iter().map(|(k, vs)| format!("| {k} | {} |", vs.len() * vs.len())).collect();
            assert_eq!(rows(&db, &mut s, "SELECT k, n FROM pairs").await, sorted(pairs), "round {round}");
        }
        Ok(())
    }
}
