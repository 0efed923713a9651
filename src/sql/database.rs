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
use datafusion::dataframe::DataFrame;
use datafusion::sql::parser::Statement as DfStatement;
use sqlparser::ast::Statement;
use tokio::sync::RwLock;

use crate::error::{Result, WeirError};
use crate::sql::engine::{CommittedSlot, Engine};
use crate::sql::parser::{self, object_name, WeirStatement};
use crate::sql::relations::{session_context, Snapshot, SystemLoader, SystemTables};
use crate::sql::show::{self, text_rows, DEFAULT_SETTINGS};
use crate::state::{ScanState, Store};

/// Per-connection settings (`SET` / `SHOW` / `RESET`).
#[derive(Debug, Default, Clone)]
pub struct Session {
    /// Settings made with `SET 'key' = 'value'`, by key.
    pub settings: BTreeMap<String, String>,
}

/// What one statement returns to the client.
#[derive(Debug)]
pub enum StatementResult {
    /// Rows, with their schema (also sent for zero rows).
    Rows { schema: SchemaRef, batches: Vec<RecordBatch> },
    /// A command tag: `tag` is the command name as Postgres sends it ("INSERT", "CREATE TABLE",
    /// "FLUSH", ...) and `rows` the affected row count where Postgres reports one.
    Command { tag: String, rows: Option<usize> },
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

    /// Runs `future` on the query threads and waits for it.
    async fn run<T: Send + 'static>(&self, future: impl std::future::Future<Output = Result<T>> + Send + 'static) -> Result<T> {
        let runtime = self.0.as_ref().ok_or_else(|| WeirError::internal("the query threads are shut down"))?;
        runtime.spawn(future).await.map_err(|e| WeirError::internal(format!("a query task failed: {e}")))?
    }
}

impl Drop for QueryRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
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
        Self::open_with(data_dir, true)
    }

    /// The engine, for in-process drivers (benchmarks) that run the sources themselves.
    pub async fn engine(&self) -> tokio::sync::RwLockWriteGuard<'_, Engine> {
        self.engine.write().await
    }

    /// [`Database::open`]; with `read_sources` false no thread reads the connector sources and
    /// the caller drives them with [`Engine::poll_sources`].
    ///
    /// # Errors
    /// As [`Database::open`].
    pub fn open_with(data_dir: &std::path::Path, read_sources: bool) -> Result<Arc<Self>> {
        let store = Arc::new(Store::open(data_dir)?);
        let engine = Engine::load(store)?;
        tracing::info!(
            epoch = engine.epoch,
            relations = engine.catalog.relations.len(),
            jobs = engine.jobs.len(),
            "opened {}",
            data_dir.display()
        );
        // From here on the idle-watermark task and the source thread take the lock.
        let committed = Arc::clone(engine.committed());
        let db = Arc::new(Self { engine: Arc::new(RwLock::new(engine)), committed, queries: QueryRuntime::new()? });
        // Idle tables' watermarks advance with processing time: checked every 100 ms.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let weak = Arc::downgrade(&db);
            handle.spawn(async move {
                let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let Some(db) = weak.upgrade() else { break };
                    let mut engine = db.engine.write().await;
                    if engine.idle_base.is_empty() {
                        continue;
                    }
                    if let Err(e) = engine.advance_idle_watermarks() {
                        tracing::error!("advancing idle watermarks: {e}");
                    }
                }
            });
        }
        // Connector sources are read by one thread, a slice at a time under the write lock.
        if read_sources {
            let weak = Arc::downgrade(&db);
            std::thread::Builder::new()
                .name("weir-sources".into())
                .spawn(move || source_loop(weak))
                .map_err(|e| WeirError::internal(format!("cannot start the source thread: {e}")))?;
        }
        Ok(db)
    }

    /// Splits a query string into statements at top-level semicolons; empty ones are dropped.
    pub fn split_statements(sql: &str) -> Result<Vec<String>> {
        parser::split_statements(sql)
    }

    /// Executes one statement.
    pub async fn execute(&self, session: &mut Session, sql: &str) -> Result<StatementResult> {
        let stmt = parser::parse_statement(sql)?;
        self.execute_parsed(session, stmt, sql).await
    }

    /// The result schema a statement would return (`None` for a command), without running it.
    /// Used by the extended protocol's Describe.
    pub async fn describe(&self, session: &Session, sql: &str) -> Result<Option<SchemaRef>> {
        let stmt = parser::parse_statement(sql)?;
        match &stmt {
            WeirStatement::Sql(s) if matches!(s.as_ref(), Statement::Query(_)) => {
                let snapshot = self.read_snapshot();
                if let Some(StatementResult::Rows { schema, .. }) = crate::sql::pg_catalog::answer(&snapshot.catalog, sql)? {
                    return Ok(Some(schema));
                }
                let ctx = session_context(snapshot);
                let plan = ctx.state().statement_to_plan(DfStatement::Statement(s.clone())).await?;
                Ok(Some(Arc::new(plan.schema().as_arrow().clone())))
            }
            WeirStatement::Show(_)
            | WeirStatement::ShowCreate(_)
            | WeirStatement::Describe(_)
            | WeirStatement::ShowVariable(_)
            | WeirStatement::Explain(_) => {
                let mut session = session.clone();
                match self.execute_parsed(&mut session, stmt, sql).await? {
                    StatementResult::Rows { schema, .. } => Ok(Some(schema)),
                    StatementResult::Command { .. } => Ok(None),
                }
            }
            _ => Ok(None),
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
        let ctx = session_context(self.read_snapshot());
        let plan = ctx.state().statement_to_plan(DfStatement::Statement(stmt)).await?;
        let types = plan.get_parameter_types()?;
        let n = types.keys().filter_map(|k| k.trim_start_matches('$').parse::<usize>().ok()).max().unwrap_or(0);
        Ok((1..=n).map(|i| types.get(&format!("${i}")).cloned().flatten()).collect())
    }

    /// What a read plans against: the last committed epoch (its catalog and a store snapshot
    /// of it), with the system tables loaded from the engine only if the statement reads one.
    fn read_snapshot(&self) -> Arc<Snapshot> {
        let committed = Arc::clone(&self.committed.read().unwrap_or_else(std::sync::PoisonError::into_inner));
        let engine = Arc::clone(&self.engine);
        let load: SystemLoader = Arc::new(move || {
            let engine = Arc::clone(&engine);
            Box::pin(async move { engine.read().await.system_state() })
        });
        let reader: Arc<dyn ScanState> = Arc::clone(&committed.state) as Arc<dyn ScanState>;
        Arc::new(Snapshot {
            catalog: Arc::clone(&committed.catalog),
            reader,
            keyed_table: None,
            system: SystemTables::lazy(load),
        })
    }

    async fn execute_parsed(&self, session: &mut Session, stmt: WeirStatement, sql: &str) -> Result<StatementResult> {
        match stmt {
            WeirStatement::CreateTable(t) => {
                self.engine.write().await.create_table(&t, sql).await?;
                Ok(command("CREATE TABLE"))
            }
            WeirStatement::CreateMaterializedView { name, if_not_exists, query, emit_on_window_close } => {
                let mut engine = self.engine.write().await;
                engine
                    .create_materialized_view(&name, &query, if_not_exists, emit_on_window_close, &session.settings, sql)
                    .await?;
                Ok(command("CREATE MATERIALIZED VIEW"))
            }
            WeirStatement::Drop { kind, names, if_exists, cascade } => {
                self.engine.write().await.drop_relations(kind, &names, if_exists, cascade)?;
                Ok(command(match kind {
                    parser::DropKind::Table => "DROP TABLE",
                    parser::DropKind::View => "DROP VIEW",
                    parser::DropKind::MaterializedView => "DROP MATERIALIZED VIEW",
                }))
            }
            WeirStatement::Flush => {
                // Every write statement commits before it returns; taking the write lock waits
                // for the ones in flight. Bounded sources are then read to their end, and what
                // the sources read is committed.
                let mut engine = self.engine.write().await;
                let deadline = std::time::Instant::now() + FLUSH_TIMEOUT;
                loop {
                    let step = engine.poll_sources(crate::sql::sources::SOURCE_SLICE)?;
                    if engine.bounded_sources_finished() {
                        break;
                    }
                    if step.rows == 0 && !step.watermark_moved {
                        tokio::task::yield_now().await;
                    }
                    if std::time::Instant::now() > deadline {
                        return Err(WeirError::execution(format!(
                            "FLUSH: the bounded sources did not reach their end within {} s",
                            FLUSH_TIMEOUT.as_secs()
                        )));
                    }
                }
                engine.commit(crate::state::EpochWrites::default(), None)?;
                Ok(command("FLUSH"))
            }
            WeirStatement::Show(list) => {
                let engine = self.engine.read().await;
                let late: BTreeMap<String, u64> = engine
                    .jobs
                    .iter()
                    .map(|(name, job)| (name.clone(), job.late_rows().iter().map(|(_, _, n)| n).sum()))
                    .collect();
                show::show_list(&engine.catalog, list, &late, &engine.failed)
            }
            WeirStatement::ShowCreate(name) => show::show_create(&self.read_snapshot().catalog, &name),
            WeirStatement::Describe(name) => show::describe(&self.read_snapshot().catalog, &name),
            WeirStatement::Set { key, value } => {
                crate::sql::settings::validate(&key.to_lowercase(), &value)?;
                session.settings.insert(key.to_lowercase(), value);
                Ok(command("SET"))
            }
            WeirStatement::ShowVariable(key) => {
                let key = key.to_lowercase();
                let value = session
                    .settings
                    .get(&key)
                    .cloned()
                    .or_else(|| DEFAULT_SETTINGS.iter().find(|(k, _)| *k == key).map(|(_, v)| v.to_string()));
                match value {
                    Some(v) => text_rows(&[key.as_str()], vec![vec![Some(v)]]),
                    None if key == "all" => text_rows(
                        &["name", "setting"],
                        DEFAULT_SETTINGS
                            .iter()
                            .map(|(k, v)| {
                                let v = session.settings.get(*k).cloned().unwrap_or_else(|| v.to_string());
                                vec![Some(k.to_string()), Some(v)]
                            })
                            .collect(),
                    ),
                    None => Err(WeirError::option(format!(
                        "unrecognized configuration parameter \"{key}\"; known: {}",
                        DEFAULT_SETTINGS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
                    ))),
                }
            }
            WeirStatement::Reset(key) => {
                match key {
                    Some(k) => {
                        session.settings.remove(&k.to_lowercase());
                    }
                    None => session.settings.clear(),
                }
                Ok(command("RESET"))
            }
            WeirStatement::StopJob { id, .. } => {
                self.engine.write().await.stop_job(&id)?;
                Ok(command("STOP JOB"))
            }
            WeirStatement::Explain(inner) => self.explain(*inner, &session.settings).await,
            WeirStatement::Sql(stmt) => self.execute_sql(*stmt, sql, &session.settings).await,
        }
    }

    /// The stream plan of a query, with the session's allowed lateness and state TTL applied
    /// as a view created now would have them.
    async fn explain(&self, stmt: WeirStatement, settings: &BTreeMap<String, String>) -> Result<StatementResult> {
        let engine = self.engine.read().await;
        let mut eowc = false;
        let query = match &stmt {
            WeirStatement::CreateMaterializedView { query, emit_on_window_close, .. } => {
                eowc = *emit_on_window_close;
                query.to_string()
            }
            WeirStatement::Sql(s) => match s.as_ref() {
                Statement::Query(q) => q.to_string(),
                Statement::Insert(i) => match &i.source {
                    Some(q) => q.to_string(),
                    None => return Err(WeirError::unsupported("EXPLAIN of INSERT without a query")),
                },
                other => return Err(WeirError::unsupported(format!("EXPLAIN of {other}"))),
            },
            _ => return Err(WeirError::unsupported("EXPLAIN of this statement")),
        };
        let mut plan = engine.plan_stream_query(&query, eowc).await?;
        let options = crate::sql::settings::job_options(settings)?;
        if let Some(v) = options.get(crate::sql::settings::ALLOW_LATENESS) {
            plan.set_allowed_lateness(crate::sql::settings::parse_duration_ms(crate::sql::settings::ALLOW_LATENESS, v)?);
        }
        plan.set_state_ttl(&crate::sql::settings::state_ttl_of(&options, &query)?)?;
        text_rows(&["QUERY PLAN"], plan.explain().into_iter().map(|l| vec![Some(l)]).collect())
    }

    async fn execute_sql(&self, stmt: Statement, sql: &str, settings: &BTreeMap<String, String>) -> Result<StatementResult> {
        match &stmt {
            Statement::Query(_) => {
                // The last committed epoch, read without the engine's lock: a job or a write
                // statement running meanwhile neither waits for this read nor changes what it
                // sees (README, "Design notes").
                let snapshot = self.read_snapshot();
                // psql's `\d` commands query pg_catalog, which DataFusion cannot plan.
                if let Some(result) = crate::sql::pg_catalog::answer(&snapshot.catalog, sql)? {
                    return Ok(result);
                }
                self.queries
                    .run(async move {
                        let ctx = session_context(snapshot);
                        let plan = ctx.state().statement_to_plan(DfStatement::Statement(Box::new(stmt))).await?;
                        let schema: SchemaRef = Arc::new(plan.schema().as_arrow().clone());
                        let batches = DataFrame::new(ctx.state(), plan).collect().await?;
                        Ok(StatementResult::Rows { schema, batches })
                    })
                    .await
            }
            Statement::Insert(insert) => {
                let n = self.engine.write().await.insert(&stmt, insert, settings).await?;
                Ok(StatementResult::Command { tag: "INSERT".into(), rows: Some(n) })
            }
            Statement::Update(update) => {
                let n = self.engine.write().await.update(update).await?;
                Ok(StatementResult::Command { tag: "UPDATE".into(), rows: Some(n) })
            }
            Statement::Delete(delete) => {
                let n = self.engine.write().await.delete(delete).await?;
                Ok(StatementResult::Command { tag: "DELETE".into(), rows: Some(n) })
            }
            Statement::CreateView(v) => {
                let name = object_name(&v.name);
                let mut engine = self.engine.write().await;
                if v.materialized {
                    engine.create_materialized_view(&name, &v.query, v.if_not_exists, false, settings, sql).await?;
                    return Ok(command("CREATE MATERIALIZED VIEW"));
                }
                if !v.columns.is_empty() {
                    return Err(WeirError::unsupported("a column list in CREATE VIEW; alias the columns in the query"));
                }
                engine.create_view(&name, &v.query, v.or_replace, sql).await?;
                Ok(command("CREATE VIEW"))
            }
            Statement::StartTransaction { .. } => Ok(command("BEGIN")),
            Statement::Commit { .. } => Ok(command("COMMIT")),
            Statement::Rollback { .. } => Ok(command("ROLLBACK")),
            Statement::Set(_) => Ok(command("SET")),
            other => Err(WeirError::unsupported(format!(
                "statement {}",
                other.to_string().split_whitespace().take(3).collect::<Vec<_>>().join(" ")
            ))),
        }
    }
}

/// How long FLUSH waits for bounded sources to reach their end.
pub const FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// How often the source loop commits an epoch while sources deliver rows (Flink's
/// 'execution.checkpointing.interval'); a source that goes quiet is committed at once.
pub const CHECKPOINT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(200);

/// Reads the connector sources until the database is dropped: a slice of reading under the
/// write lock, an epoch commit every [`CHECKPOINT_INTERVAL`] (or when the sources go quiet),
/// and a short pause when nothing is available. A failure reloads the engine from the last
/// commit, so the sources resume from their committed positions.
fn source_loop(db: std::sync::Weak<Database>) {
    use crate::sql::sources::SOURCE_SLICE;
    let mut last_commit = std::time::Instant::now();
    let mut dirty = false;
    loop {
        let Some(db) = db.upgrade() else { return };
        let mut engine = db.engine.blocking_write();
        if engine.sources.is_empty() {
            drop(engine);
            drop(db);
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        }
        let mut quiet = false;
        let step = engine.poll_sources(SOURCE_SLICE).and_then(|step| {
            dirty |= step.rows > 0 || step.watermark_moved;
            quiet = step.rows == 0 && !step.watermark_moved;
            if dirty && (quiet || step.all_finished || last_commit.elapsed() >= CHECKPOINT_INTERVAL) {
                engine.commit(crate::state::EpochWrites::default(), None)?;
                dirty = false;
                last_commit = std::time::Instant::now();
            }
            Ok(step)
        });
        if let Err(e) = step {
            tracing::error!("reading connector sources: {e}; resuming from the last commit");
            dirty = false;
            if let Err(e) = engine.reload() {
                tracing::error!("reloading after a source failure: {e}");
            }
            drop(engine);
            drop(db);
            std::thread::sleep(std::time::Duration::from_secs(1));
            continue;
        }
        drop(engine);
        drop(db);
        if quiet {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
