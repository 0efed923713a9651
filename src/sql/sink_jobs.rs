//! `INSERT INTO <connector table> SELECT ...`: a continuous job writing into a sink, kept in
//! the catalog as a [`RelationKind::SinkJob`] named by its job id (`SHOW JOBS`, `STOP JOB`).
//!
//! The engine runs it with the sink operator of its table's connector ([`crate::engine::sinks`]).
//! A job's
//! window aggregation emits each window once, when it closes (Flink's window TVF
//! aggregation), and a query that would still update is refused before the job starts when the
//! sink is append-only.

use std::collections::BTreeMap;

use arrow::datatypes::DataType;

use weir_catalog::{Relation, RelationKind};

use crate::engine::{Engine, SINK_OPTION};
use crate::error::{Result, WeirError};
use crate::runtime::relation::connector_of;
use crate::sql::planning::{plan_job, JobKind, PlanningBase};

/// Whether [`start_sink_job`] starts the job or only checks that it would start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkJobMode {
    Start,
    /// Every check of the query against the sink, and its planning, but no job (a statement
    /// set's INSERT, checked as it comes and started at END).
    CheckOnly,
}

/// What an `INSERT INTO` job is made of, besides its sink.
pub struct SinkJob<'a> {
    /// The query, as SQL text.
    pub query: &'a str,
    /// The relations it reads (the sink is added).
    pub depends_on: Vec<String>,
    /// The statement as the user wrote it (`SHOW JOBS`).
    pub definition: &'a str,
    /// The session's temporary views the query reads: the job keeps them
    /// ([`crate::sql::temporary_views`]).
    pub temporary: Vec<Relation>,
}

/// Starts `job`, the job of `INSERT INTO sink query` where `sink` is a connector table;
/// commits it with the catalog. Returns the job id. `updating` names what would make the
/// query updating (`plan::updating_operator`), for the refusal of an append-only sink; whether
/// it is comes from the stream plan's changelog.
///
/// # Errors
/// `Unsupported` for a connector without a sink runtime; `Plan` when the query's columns do
/// not match the sink's, or when an append-only sink gets an updating query; the planner's
/// errors.
pub async fn start_sink_job(
    engine: &mut Engine,
    sink: &Relation,
    job: SinkJob<'_>,
    settings: &BTreeMap<String, String>,
    updating: Option<String>,
    mode: SinkJobMode,
) -> Result<String> {
    let SinkJob { query, depends_on, definition, temporary } = job;
    let connector = connector_of(sink);
    if connector == "upsert-kafka" && sink.primary_key.is_empty() {
        return Err(WeirError::plan(format!(
            "INSERT INTO {}: an 'upsert-kafka' table needs a PRIMARY KEY (..) NOT ENFORCED: it is the message key",
            sink.name
        )));
    }
    if !matches!(connector, "blackhole" | "print" | "filesystem" | "kafka" | "upsert-kafka") {
        return Err(WeirError::unsupported(format!(
            "INSERT INTO {}: the '{connector}' connector's sink is not built yet in this version",
            sink.name
        )));
    }
    // The state TTL is kept; an allowed lateness would make window results updating.
    let mut options = crate::sql::settings::job_options(settings)?;
    options.remove(crate::sql::settings::ALLOW_LATENESS);
    let plan = plan_sink_job(&PlanningBase::of(engine), sink, query, &mut options, &temporary).await?;
    crate::sql::planning::check_windows_close(&plan, &engine.catalog, JobKind::Sink)?;
    check_changelog(sink, &plan, updating)?;
    options.insert(SINK_OPTION.to_string(), sink.name.clone());
    let eowc = true;
    let physical = sink.columns.iter().filter(|c| c.computed.is_none()).count();
    // A blackhole takes rows of any shape.
    if connector != "blackhole" && plan.schema.fields().len() != physical {
        // Postgres's 42601, with the counts.
        return Err(WeirError::new(crate::error::ErrorKind::InsertColumnCount(format!(
            "INSERT INTO {}: the query has {} columns but the table has {physical}",
            sink.name,
            plan.schema.fields().len()
        ))));
    }
    if connector != "blackhole" {
        let written = crate::engine::written_fields(sink)?;
        for ((i, got), want) in plan.schema.fields().iter().enumerate().zip(&written) {
            if !assignable(got.data_type(), want.data_type()) {
                let name = crate::sql::show::sql_type_name;
                return Err(WeirError::plan(format!(
                    "INSERT INTO {}: column \"{}\" is of type {}, but the query's column {} is of type {}; CAST it",
                    sink.name,
                    want.name(),
                    name(want.data_type()),
                    i + 1,
                    name(got.data_type())
                )));
            }
        }
    }
    if mode == SinkJobMode::CheckOnly {
        return Ok(String::new());
    }
    let mut catalog = (*engine.catalog).clone();
    let id = catalog.allocate_job();
    let mut depends_on = depends_on;
    if !depends_on.contains(&sink.name) {
        depends_on.push(sink.name.clone());
    }
    let rel = Relation {
        name: id.clone(),
        kind: RelationKind::SinkJob,
        state_table: None,
        columns: crate::sql::ddl::output_columns_of_schema(plan.schema.as_arrow(), &id)?,
        primary_key: vec![],
        stream_key: plan.stream_key.clone(),
        watermark: None,
        options,
        definition: definition.to_string(),
        query: Some(query.to_string()),
        depends_on,
        job: Some(id.clone()),
        operator_state: BTreeMap::new(),
        emit_on_window_close: eowc,
        temporary_views: temporary,
    };
    catalog.relations.insert(id.clone(), rel.clone());
    engine.start_job(&rel, &plan, catalog, settings.get(crate::sql::settings::SAVEPOINT_PATH).map(String::as_str))?;
    tracing::info!(job = %id, sink = %sink.name, "started INSERT INTO job");
    Ok(id)
}

/// The catalog option of a sink job whose rows reach its `upsert-kafka` sink through a
/// SinkUpsertMaterializer: the sink's PRIMARY KEY as positions in the query's columns,
/// comma-separated ([`plan_sink_job`]). A job created before the materializer existed has no
/// such option and restarts with the plan it was created with.
pub const UPSERT_MATERIALIZE: &str = "weir.sink-upsert-materialize";

/// The stream plan of the job `INSERT INTO sink query`, with the job's catalog options
/// `options` (the session's, as [`crate::sql::settings::job_options`] gives them). When `sink`
/// is an `upsert-kafka` table and the query updates rows whose stream key its PRIMARY KEY does
/// not hold, or whose stream key the planner does not know (a GROUP BY column left out of the
/// select list, such as `window_end` beside `window_start`), two live rows of the query could
/// share a message key, and deleting one would write a tombstone while the other still holds
/// the key; so, as Flink does (`table.exec.sink.upsert-materialize` = `AUTO`), the plan ends in
/// a SinkUpsertMaterializer keyed by the PRIMARY KEY, and `options` gets
/// [`UPSERT_MATERIALIZE`] so the job restarts with the same plan. `temporary`: as
/// [`plan_job`]'s.
///
/// # Errors
/// The planner's.
pub async fn plan_sink_job(
    base: &PlanningBase,
    sink: &Relation,
    query: &str,
    options: &mut BTreeMap<String, String>,
    temporary: &[Relation],
) -> Result<crate::plan::StreamPlan> {
    use crate::plan::ChangelogMode;
    let plan = plan_job(base, query, JobKind::Sink, options, temporary).await?;
    if connector_of(sink) != "upsert-kafka" || plan.changelog == ChangelogMode::AppendOnly {
        return Ok(plan);
    }
    let written = crate::engine::written_fields(sink)?;
    let in_key = |i: &usize| written.get(*i).is_some_and(|f| sink.primary_key.iter().any(|k| k == f.name()));
    if plan.stream_key.as_ref().is_some_and(|key| key.iter().all(in_key)) {
        return Ok(plan);
    }
    let key: Vec<String> = (0..written.len()).filter(in_key).map(|i| i.to_string()).collect();
    if key.is_empty() || plan.schema.fields().len() != written.len() {
        // The column count is refused by the caller; a key is required by CREATE TABLE.
        return Ok(plan);
    }
    options.insert(UPSERT_MATERIALIZE.to_string(), key.join(","));
    plan_job(base, query, JobKind::Sink, options, temporary).await
}

/// Refuses a query whose changelog `sink` cannot take: an updating one (not append-only, as
/// the stream plan says: a window aggregation of a job emits final rows, whatever its input)
/// into an append-only sink. (An `upsert-kafka` sink takes any: [`plan_sink_job`].)
fn check_changelog(sink: &Relation, plan: &crate::plan::StreamPlan, updating: Option<String>) -> Result<()> {
    use crate::plan::ChangelogMode;
    if plan.changelog == ChangelogMode::AppendOnly {
        return Ok(());
    }
    let connector = connector_of(sink);
    if weir_connectors::is_append_only_sink(&sink.options) {
        let why = updating.unwrap_or_else(|| format!("its changelog is {}", plan.changelog));
        return Err(WeirError::plan(format!(
            "table {} ('{connector}' with format '{}') is an append-only sink, but the query produces an updating changelog: {why}. Write it to an 'upsert-kafka' table with a PRIMARY KEY, or use 'format' = 'debezium-json'",
            sink.name,
            weir_connectors::format::value_format(&sink.options).unwrap_or("json"),
        )));
    }
    Ok(())
}

/// Whether a query column of type `from` may be written into a sink column of type `to`,
/// converted when the row is written (Postgres's assignment casts): between numbers (a value
/// out of the column's range fails the job, never a silent NULL), between strings, anything
/// into a string, between dates and timestamps, between times, a bare NULL into anything, and
/// nested types whose parts may. A string into a number, a boolean or a date is refused: a
/// value that does not parse would fail the job mid-stream; the query CASTs it.
pub(crate) fn assignable(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    let numeric = |t: &DataType| t.is_numeric();
    let string = |t: &DataType| matches!(t, Utf8 | LargeUtf8 | Utf8View);
    let binary = |t: &DataType| matches!(t, Binary | LargeBinary | BinaryView | FixedSizeBinary(_));
    let dated = |t: &DataType| matches!(t, Date32 | Date64 | Timestamp(..));
    let list = |t: &DataType| match t {
        List(f) | LargeList(f) | ListView(f) | LargeListView(f) | FixedSizeList(f, _) => Some(f.data_type().clone()),
        _ => None,
    };
    if from == to || matches!(from, Null) || string(to) {
        return true;
    }
    match (from, to) {
        (a, b) if numeric(a) && numeric(b) => true,
        (a, b) if binary(a) && binary(b) => true,
        (a, b) if dated(a) && dated(b) => true,
        (Time32(_) | Time64(_), Time32(_) | Time64(_)) => true,
        (Struct(a), Struct(b)) => a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| assignable(x.data_type(), y.data_type())),
        (Map(a, _), Map(b, _)) => assignable(a.data_type(), b.data_type()),
        (a, b) => match (list(a), list(b)) {
            (Some(x), Some(y)) => assignable(&x, &y),
            _ => false,
        },
    }
}
