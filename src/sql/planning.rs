//! The one planning entry point: a query (SQL text) to the stream plan of a job, with its
//! allowed lateness and state TTL applied. It serves `CREATE MATERIALIZED VIEW`, `INSERT INTO`
//! jobs, `EXPLAIN` and the restart of every stored view and job (as the engine's
//! [`JobPlanner`]), so a job restarts with exactly the plan it was created with.

use std::collections::BTreeMap;
use std::sync::Arc;

use weir_catalog::{Catalog, Relation, RelationKind};

use crate::engine::{Engine, JobPlanner};
use crate::error::{Result, WeirError};
use crate::plan::duration::parse_duration_ms;
use crate::plan::{ChangelogMode, SourceCatalog, SourceInfo, StreamPlan};
use crate::runtime::relation::{connector_of, relation_schema};
use crate::sql::relations::{session_context, NullCollation, Snapshot, SystemTables};
use crate::sql::settings::{state_ttl_of, ALLOW_LATENESS, NULL_COLLATION};

/// What a query is planned for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// A materialized view; with `emit_on_window_close` its window aggregation emits each
    /// window once, when it closes.
    View { emit_on_window_close: bool },
    /// An `INSERT INTO` job: every window aggregation emits each window once, final, when it
    /// closes (Flink's window TVF aggregation), also under a join.
    Sink,
}

/// The stream plan of `query` for a job of `kind` over `base`'s catalog with the temporary
/// views `temporary` ([`crate::sql::temporary_views`]: the session's when the job is created,
/// its stored copies afterwards), with the allowed lateness and state TTL of `options` (a
/// job's catalog options: [`crate::sql::settings::job_options`] of the session's settings when
/// it is created, as stored afterwards).
///
/// # Errors
/// The planner's: unknown relations and columns, query shapes the stream planner refuses (by
/// name), a bad duration in `options`.
pub async fn plan_job(
    base: &PlanningBase,
    query: &str,
    kind: JobKind,
    options: &BTreeMap<String, String>,
    temporary: &[Relation],
) -> Result<StreamPlan> {
    // In the session time zone the job was created in (Flink compiles it into the job).
    crate::sql::settings::in_job(options, Box::pin(plan_job_in_zone(base, query, kind, options, temporary))).await
}

async fn plan_job_in_zone(
    base: &PlanningBase,
    query: &str,
    kind: JobKind,
    options: &BTreeMap<String, String>,
    temporary: &[Relation],
) -> Result<StreamPlan> {
    let nulls = match options.get(NULL_COLLATION).map(String::as_str) {
        Some("low") => NullCollation::Low,
        _ => NullCollation::High,
    };
    let ctx = session_context(snapshot_with_nulls(base, None, nulls, temporary));
    let plan = ctx.state().create_logical_plan(&alias_repeats(query, kind)?).await?;
    crate::plan::temporal::mark_lookup_joins(&plan);
    let plan = ctx.state().optimize(&plan)?;
    let mut stream = crate::plan::plan_stream(&plan, &CatalogSources(&base.catalog))?;
    match kind {
        JobKind::View { emit_on_window_close: true } => stream.set_emit_on_window_close()?,
        JobKind::View { emit_on_window_close: false } => {}
        JobKind::Sink => {
            stream.set_window_aggregations_final();
            stream.set_global_aggregates_flink();
        }
    }
    crate::plan::slicing::sessionize(&mut stream);
    if let Some(key) = options.get(crate::sql::sink_jobs::UPSERT_MATERIALIZE) {
        let key = key
            .split(',')
            .map(|i| i.trim().parse::<usize>())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| WeirError::internal(format!("option {} = '{key}'", crate::sql::sink_jobs::UPSERT_MATERIALIZE)))?;
        stream = stream.materialize_upsert(key);
    }
    let lateness = options.get(ALLOW_LATENESS).map(|v| parse_duration_ms(ALLOW_LATENESS, v)).transpose()?;
    if lateness.is_some_and(|l| l > 0) && has_final_window_rank(&stream) {
        return Err(WeirError::unsupported(format!(
            "'{ALLOW_LATENESS}' with a window Top-N or deduplication that emits each window once, final (EMIT ON \
             WINDOW CLOSE, or an INSERT INTO job): late rows could not change what it emitted; RESET '{ALLOW_LATENESS}', \
             or use a materialized view without EMIT ON WINDOW CLOSE"
        )));
    }
    stream.set_allowed_lateness(lateness.unwrap_or(0));
    stream.set_state_ttl(&state_ttl_of(options, query)?)?;
    Ok(stream)
}

/// `query` with the repeated select items of its nested queries aliased
/// ([`crate::sql::pg_compat::alias_nested_repeats`]), and of its own select list for an `INSERT
/// INTO` job, whose columns go to the sink by position. `query` itself when nothing repeats
/// (or it does not parse here: the planner then says why).
///
/// # Errors
/// `DuplicateColumn` (42701, Postgres's "column \"a\" specified more than once") for a view
/// whose own select list repeats an item: its columns need distinct names.
fn alias_repeats(query: &str, kind: JobKind) -> Result<String> {
    use sqlparser::ast::Statement;
    let Ok(mut statements) = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::GenericDialect {}, query) else {
        return Ok(query.to_string());
    };
    let [Statement::Query(q)] = statements.as_slice() else { return Ok(query.to_string()) };
    if kind != JobKind::Sink {
        if let Some(name) = crate::sql::pg_compat::repeated_output(q) {
            return Err(WeirError::new(crate::error::ErrorKind::DuplicateColumn(format!(
                "column \"{name}\" specified more than once: a view's columns need distinct names; give it an alias \
                 (SELECT a, a AS a2)"
            ))));
        }
    }
    let before = statements[0].clone();
    crate::sql::query_rewrites::rewrite(&mut statements[0])?;
    crate::sql::pg_compat::alias_nested_repeats(&mut statements[0], kind == JobKind::Sink);
    if statements[0] == before {
        return Ok(query.to_string());
    }
    Ok(statements[0].to_string())
}

/// Refuses a new job whose `plan` has an operator that emits each window once, when the
/// watermark closes it (with EMIT ON WINDOW CLOSE, and every window operator of an `INSERT INTO`
/// job), over inputs none of which declares a WATERMARK, directly or through the views it
/// reads: no watermark ever reaches such an operator, so it would never emit a row. Flink
/// refuses a window over a column that is not a time attribute ("The window function requires
/// the timecol is a time attribute type"); a materialized view without EMIT ON WINDOW CLOSE
/// shows such windows as they grow and is taken. Checked when a job is created, not when a
/// stored one restarts.
///
/// # Errors
/// `Plan` (42804) naming the operator and the relations without a WATERMARK.
pub fn check_windows_close(plan: &StreamPlan, catalog: &Catalog, kind: JobKind) -> Result<()> {
    use crate::plan::StreamNode;
    let closes = match &plan.node {
        StreamNode::GroupAggregate { emit_on_window_close: true, .. } => Some("the window aggregation"),
        StreamNode::SlicedWindowAggregate { spec, .. } if spec.emit_on_window_close => Some("the window aggregation"),
        StreamNode::Rank { spec, .. } if spec.emit_on_window_close => Some("the window Top-N or deduplication"),
        StreamNode::Join { join, .. } if join.emit_on_window_close => Some("the window or interval join"),
        _ => None,
    };
    if let Some(what) = closes {
        let sources = plan.sources();
        if !sources.iter().any(|s| declares_watermark(catalog, s)) {
            let (why, instead) = match kind {
                JobKind::Sink => (
                    "as every window of an INSERT INTO job does, as in Flink",
                    "or keep the windows in a materialized view without EMIT ON WINDOW CLOSE, which shows each window as it grows",
                ),
                JobKind::View { .. } => {
                    ("with EMIT ON WINDOW CLOSE", "or drop EMIT ON WINDOW CLOSE to see each window as it grows")
                }
            };
            return Err(WeirError::plan(format!(
                "{what} would never emit: it emits each window once, when the watermark closes it ({why}), and no \
                 watermark reaches it, since {} no WATERMARK. Declare one in the CREATE TABLE of the table the \
                 window's time column comes from (WATERMARK FOR ts AS ts - INTERVAL '5' SECOND; Flink requires a \
                 time attribute for a window), {instead}",
                match sources.as_slice() {
                    [] => "its input (VALUES) has".to_string(),
                    [one] => format!("{one} declares"),
                    many => format!("none of {} declares", many.join(", ")),
                }
            )));
        }
    }
    plan.inputs().into_iter().try_for_each(|input| check_windows_close(input, catalog, kind))
}

/// Whether relation `name` declares a WATERMARK, or is a view or materialized view reading one
/// that does (its job then passes the watermark on).
fn declares_watermark(catalog: &Catalog, name: &str) -> bool {
    catalog.get(name).is_some_and(|rel| {
        rel.watermark.is_some()
            || (rel.kind != RelationKind::Table && rel.depends_on.iter().any(|d| d != name && declares_watermark(catalog, d)))
    })
}

/// What a job is planned against: the relations of a catalog, where their rows are read, and
/// the system tables.
///
/// A statement that holds the engine (CREATE, INSERT INTO, DML, a restart) plans against the
/// engine itself ([`PlanningBase::of`]); `EXPLAIN` plans against the last committed epoch, as
/// a `SELECT` reads, so it never waits for a statement or a job that holds the engine.
#[derive(Clone)]
pub struct PlanningBase {
    pub catalog: Arc<Catalog>,
    /// Where a plan that reads rows while it is planned (a plain view's scan) reads them.
    pub reader: Arc<dyn crate::state::ScanState>,
    pub system: SystemTables,
}

impl PlanningBase {
    /// The engine's current catalog and store, and the system tables as they are now.
    pub fn of(engine: &Engine) -> Self {
        Self {
            catalog: Arc::clone(&engine.catalog),
            reader: Arc::clone(&engine.store) as Arc<dyn crate::state::ScanState>,
            system: SystemTables::ready(Arc::new(engine.system_state())),
        }
    }

    /// What `snapshot` reads, its catalog without the session's temporary views (those are
    /// passed to [`plan_job`] on their own).
    pub fn of_snapshot(snapshot: &Snapshot) -> Self {
        Self {
            catalog: Arc::clone(snapshot.permanent.as_ref().unwrap_or(&snapshot.catalog)),
            reader: Arc::clone(&snapshot.reader),
            system: snapshot.system.clone(),
        }
    }
}

/// What a statement that holds the engine plans against: its current catalog with the
/// session's temporary views `temporary`, the store's latest commit, and the system tables as
/// they are now.
pub fn planning_snapshot(engine: &Engine, keyed_table: Option<String>, temporary: &[Relation]) -> Arc<Snapshot> {
    snapshot_with_nulls(&PlanningBase::of(engine), keyed_table, NullCollation::High, temporary)
}

/// What `base` reads, with `temporary` laid over its catalog and ORDER BYs that sort NULL as
/// `nulls` says.
fn snapshot_with_nulls(base: &PlanningBase, keyed_table: Option<String>, nulls: NullCollation, temporary: &[Relation]) -> Arc<Snapshot> {
    Arc::new(Snapshot {
        catalog: crate::sql::temporary_views::overlay(&base.catalog, temporary),
        permanent: (!temporary.is_empty()).then(|| Arc::clone(&base.catalog)),
        reader: Arc::clone(&base.reader),
        keyed_table,
        system: base.system.clone(),
        activities: None,
        nulls,
    })
}

/// The engine's [`JobPlanner`]: [`plan_job`] over a relation's stored query and options.
pub struct SqlPlanner;

impl JobPlanner for SqlPlanner {
    fn plan_job(&self, engine: &Engine, rel: &Relation) -> Result<StreamPlan> {
        let query = rel.query.clone().unwrap_or_default();
        let kind = match rel.kind {
            RelationKind::SinkJob => JobKind::Sink,
            _ => JobKind::View { emit_on_window_close: rel.emit_on_window_close },
        };
        // DataFusion's planning completes without waiting on anything (the catalog is in
        // memory), so the restart, itself not async, runs it to the end here.
        futures::executor::block_on(plan_job(&PlanningBase::of(engine), &query, kind, &rel.options, &rel.temporary_views))
    }
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
                // Debezium's, Maxwell's and Canal's events carry deletes and updates (Flink: a
                // changelog source).
                "kafka" | "filesystem"
                    if weir_connectors::format::value_format(&rel.options)
                        .is_some_and(|f| ["debezium-json", "maxwell-json", "canal-json"].contains(&f)) =>
                {
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

/// Whether `plan` has a Top-N or deduplication that emits on window close.
fn has_final_window_rank(plan: &StreamPlan) -> bool {
    matches!(&plan.node, crate::plan::StreamNode::Rank { spec, .. } if spec.emit_on_window_close)
        || plan.inputs().into_iter().any(has_final_window_rank)
}
