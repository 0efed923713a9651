//! The catalog as DataFusion sees it: a schema provider whose tables read Weir's state tables.
//!
//! Every statement plans against a [`Snapshot`]: a catalog and a reader of the state tables. A
//! read (`SELECT`) gets the last committed epoch's catalog and a RocksDB snapshot of that commit
//! ([`crate::engine::Committed`]), so it never sees half an epoch nor waits for one; a statement
//! that holds the engine (DML, DDL) gets the engine's catalog and the store's latest commit.
//! Tables and materialized views are scanned from their state tables; views are planned from
//! their stored query; connector tables plan but refuse to scan.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, Session, TableProvider};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::{TableType, ViewTable};
use datafusion::error::DataFusionError;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use weir_catalog::{Catalog, RelationKind};

use crate::error::{Result, WeirError};
use crate::engine::SystemState;
use crate::runtime::relation::{connector_of, layout_of, relation_schema};
use crate::runtime::table::{scan_rows, RowLayout};
use crate::state::ScanState;

/// The default catalog and schema names, as psql and drivers expect.
pub const CATALOG_NAME: &str = "weir";
pub const SCHEMA_NAME: &str = "public";

/// What one statement plans against.
pub struct Snapshot {
    pub catalog: Arc<Catalog>,
    /// When `catalog` has a session's temporary views added ([`crate::sql::temporary_views`]):
    /// the catalog without them. A permanent view reads its relations from it, so a temporary
    /// view never changes what a permanent one reads.
    pub permanent: Option<Arc<Catalog>>,
    /// Where tables' and materialized views' rows are read: the store itself for statements
    /// that hold the engine (DML, DDL), a [`crate::state::StoreSnapshot`] of the last committed
    /// epoch for reads, which hold nothing.
    pub reader: Arc<dyn ScanState>,
    /// A table whose scans carry the hidden storage-key column (UPDATE and DELETE).
    pub keyed_table: Option<String>,
    /// Event-time progress and job state for the system tables.
    pub system: SystemTables,
    /// The server's client connections, for `pg_cancel_backend` (reads only).
    pub activities: Option<Arc<crate::observe::Activities>>,
    /// Where NULL sorts in an ORDER BY that does not say (also those of the plain views the
    /// statement reads).
    pub nulls: NullCollation,
}

/// Where NULL sorts in an `ORDER BY` without `NULLS FIRST` or `NULLS LAST`.
///
/// Ad-hoc queries sort as Postgres does ([`NullCollation::High`]); views and jobs, whose
/// ORDER BY decides which rows a Top-N, a deduplication or an OVER window keeps, sort as
/// Flink does ([`NullCollation::Low`]), so a pipeline ported from Flink keeps the same rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NullCollation {
    /// Postgres: NULL is larger than every value, so last ascending and first descending
    /// (DataFusion's `nulls_max`).
    #[default]
    High,
    /// Flink (`FlinkPlannerImpl.defaultNullCollation = NullCollation.LOW`): NULL is smaller
    /// than every value, so first ascending and last descending (DataFusion's `nulls_min`).
    Low,
}

/// A loader of [`SystemState`], run at most once per statement.
pub type SystemLoader = Arc<dyn Fn() -> futures::future::BoxFuture<'static, Arc<SystemState>> + Send + Sync>;

/// The rows of the system tables for one statement: made when the statement started (statements
/// that hold the engine), or loaded at the first system table the statement reads, so a read
/// that touches none never waits for the engine.
#[derive(Clone)]
pub struct SystemTables {
    state: Arc<tokio::sync::OnceCell<Arc<SystemState>>>,
    load: Option<SystemLoader>,
}

impl SystemTables {
    /// System tables showing `state`.
    pub fn ready(state: Arc<SystemState>) -> Self {
        Self { state: Arc::new(tokio::sync::OnceCell::new_with(Some(state))), load: None }
    }

    /// System tables whose rows `load` fetches when first read.
    pub fn lazy(load: SystemLoader) -> Self {
        Self { state: Arc::new(tokio::sync::OnceCell::new()), load: Some(load) }
    }

    async fn get(&self) -> Arc<SystemState> {
        let load = self.load.clone();
        let state = self
            .state
            .get_or_init(|| async move {
                match load {
                    Some(load) => load().await,
                    None => Arc::new(SystemState::default()),
                }
            })
            .await;
        Arc::clone(state)
    }
}

/// The system tables, read-only, queryable like any table:
///
/// - `weir_watermarks (relation, watermark)`: the current watermark of every table with a
///   WATERMARK that has seen rows (TIMESTAMP(3)).
/// - `weir_late_rows (view, job_id, operator_index, operator, late_rows)`: the rows each
///   event-time operator dropped because their window had closed.
/// - `weir_operator_watermarks (view, job_id, operator_index, operator, watermark)`: the
///   current watermark of each event-time operator of each running job (NULL before the first).
/// - `weir_sources (job, relation, partition, position, high_watermark, lag, watermark,
///   finished, rows_read, dead_letters, skipped)`: each partition of each connector source task: the
///   position after the last record read (a row offset for `nexmark`, a byte offset for
///   `filesystem`, the next offset for `kafka`), Kafka's high watermark (a bounded `nexmark`
///   table's rows of the partition in all) and the lag behind it,
///   the partition's watermark (the largest WATERMARK expression value of its rows), whether it
///   has ended, and the rows and undecodable records the task has read in all, and the Kafka
///   records it skipped because retention had deleted them (`'scan.out-of-range'`).
/// - `weir_state_tables (job, operator_index, operator, state_table, table_id, entries,
///   disk_bytes, cache_entries, cache_bytes, cache_hit_rate, ttl_ms)`: each state table of each
///   running job's operators: its entries (keys) as of the last committed epoch (counted when
///   the table is read), its approximate bytes in RocksDB's files (compressed; 0 while all of
///   it is still in the memtable), what its state cache holds now (entries, estimated bytes;
///   NULL for tables read from RocksDB without a cache: a view's own rows, window slices), the
///   fraction of its reads the cache served since the job started (NULL before any), and its
///   state TTL in ms (NULL: none).
/// - `weir_operators (job, job_id, operator_index, parent_index, operator, exchange,
///   parallelism, rows_in, rows_out, busy_ms, watermark, late_rows, detail)`: every operator of
///   every running job since the job started in this process (EXPLAIN ANALYZE's figures): the
///   node it feeds (NULL for the root: the view's rows or the sink; the first of those it
///   feeds for a reused sub-plan, README "Sub-plan reuse"), how rows reach its
///   instances, the changelog rows in and out, the time its instances spent on them (summed),
///   its watermark (event-time operators) and late rows, and its EXPLAIN line.
/// - `pg_stat_activity (datname, pid, usename, application_name, client_addr, backend_start,
///   query_start, state_change, state, query, backend_type)`: Postgres's view of the client
///   connections: each one's running statement (`state` `active`) or last one (`idle`).
pub const SYSTEM_TABLES: &[&str] = &[
    "weir_watermarks",
    "weir_late_rows",
    "weir_operator_watermarks",
    "weir_sources",
    "weir_state_tables",
    "weir_operators",
    "pg_stat_activity",
];

fn system_table(name: &str, state: &SystemState, reader: &dyn ScanState) -> Result<Option<Arc<dyn TableProvider>>> {
    use arrow::array::{ArrayRef, RecordBatch, StringArray, TimestampMillisecondArray, UInt64Array};
    let (schema, columns): (SchemaRef, Vec<ArrayRef>) = match name {
        "weir_watermarks" => (
            Arc::new(Schema::new(vec![
                Field::new("relation", DataType::Utf8, false),
                Field::new("watermark", DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None), false),
            ])),
            vec![
                Arc::new(StringArray::from_iter_values(state.watermarks.iter().map(|w| w.0.as_str()))),
                Arc::new(TimestampMillisecondArray::from_iter_values(state.watermarks.iter().map(|w| w.1))),
            ],
        ),
        "weir_late_rows" => (
            Arc::new(Schema::new(vec![
                Field::new("view", DataType::Utf8, false),
                Field::new("job_id", DataType::Utf8, false),
                Field::new("operator_index", DataType::UInt64, false),
                Field::new("operator", DataType::Utf8, false),
                Field::new("late_rows", DataType::UInt64, false),
            ])),
            vec![
                Arc::new(StringArray::from_iter_values(state.late_rows.iter().map(|l| l.0.as_str()))),
                Arc::new(StringArray::from_iter_values(state.late_rows.iter().map(|l| l.1.as_str()))),
                Arc::new(UInt64Array::from_iter_values(state.late_rows.iter().map(|l| l.2))),
                Arc::new(StringArray::from_iter_values(state.late_rows.iter().map(|l| l.3.as_str()))),
                Arc::new(UInt64Array::from_iter_values(state.late_rows.iter().map(|l| l.4))),
            ],
        ),
        "weir_operator_watermarks" => (
            Arc::new(Schema::new(vec![
                Field::new("view", DataType::Utf8, false),
                Field::new("job_id", DataType::Utf8, false),
                Field::new("operator_index", DataType::UInt64, false),
                Field::new("operator", DataType::Utf8, false),
                Field::new("watermark", DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None), true),
            ])),
            vec![
                Arc::new(StringArray::from_iter_values(state.operator_watermarks.iter().map(|o| o.0.as_str()))),
                Arc::new(StringArray::from_iter_values(state.operator_watermarks.iter().map(|o| o.1.as_str()))),
                Arc::new(UInt64Array::from_iter_values(state.operator_watermarks.iter().map(|o| o.2))),
                Arc::new(StringArray::from_iter_values(state.operator_watermarks.iter().map(|o| o.3.as_str()))),
                Arc::new(TimestampMillisecondArray::from(state.operator_watermarks.iter().map(|o| o.4).collect::<Vec<_>>())),
            ],
        ),
        "weir_sources" => {
            let ts = || DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None);
            let rows = &state.sources;
            (
                Arc::new(Schema::new(vec![
                    Field::new("job", DataType::Utf8, false),
                    Field::new("relation", DataType::Utf8, false),
                    Field::new("partition", DataType::UInt64, false),
                    Field::new("position", DataType::UInt64, false),
                    Field::new("high_watermark", DataType::Int64, true),
                    Field::new("lag", DataType::Int64, true),
                    Field::new("watermark", ts(), true),
                    Field::new("finished", DataType::Boolean, false),
                    Field::new("rows_read", DataType::UInt64, false),
                    Field::new("dead_letters", DataType::UInt64, false),
                    Field::new("skipped", DataType::UInt64, false),
                ])),
                vec![
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|s| s.job.as_str()))),
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|s| s.relation.as_str()))),
                    Arc::new(UInt64Array::from_iter_values(rows.iter().map(|s| s.partition))),
                    Arc::new(UInt64Array::from_iter_values(rows.iter().map(|s| s.position))),
                    Arc::new(arrow::array::Int64Array::from(rows.iter().map(|s| s.high_watermark).collect::<Vec<_>>())),
                    Arc::new(arrow::array::Int64Array::from(rows.iter().map(|s| s.lag).collect::<Vec<_>>())),
                    Arc::new(TimestampMillisecondArray::from(rows.iter().map(|s| s.watermark).collect::<Vec<_>>())),
                    Arc::new(arrow::array::BooleanArray::from(rows.iter().map(|s| s.finished).collect::<Vec<_>>())),
                    Arc::new(UInt64Array::from_iter_values(rows.iter().map(|s| s.rows_read))),
                    Arc::new(UInt64Array::from_iter_values(rows.iter().map(|s| s.dead_letters))),
                    Arc::new(UInt64Array::from_iter_values(rows.iter().map(|s| s.skipped))),
                ],
            )
        }
        "weir_state_tables" => {
            let rows = &state.state_tables;
            let mut entries = Vec::with_capacity(rows.len());
            for row in rows {
                let mut n = 0u64;
                reader.scan_table(row.id, &mut |_, _| {
                    n += 1;
                    Ok(true)
                })?;
                entries.push(n);
            }
            (
                Arc::new(Schema::new(vec![
                    Field::new("job", DataType::Utf8, false),
                    Field::new("operator_index", DataType::UInt64, false),
                    Field::new("operator", DataType::Utf8, false),
                    Field::new("state_table", DataType::Utf8, false),
                    Field::new("table_id", DataType::UInt64, false),
                    Field::new("entries", DataType::UInt64, false),
                    Field::new("disk_bytes", DataType::UInt64, false),
                    Field::new("cache_entries", DataType::UInt64, true),
                    Field::new("cache_bytes", DataType::UInt64, true),
                    Field::new("cache_hit_rate", DataType::Float64, true),
                    Field::new("ttl_ms", DataType::Int64, true),
                ])),
                vec![
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|s| s.job.as_str()))),
                    Arc::new(UInt64Array::from_iter_values(rows.iter().map(|s| s.operator_index))),
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|s| s.operator.as_str()))),
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|s| s.name.as_str()))),
                    Arc::new(UInt64Array::from_iter_values(rows.iter().map(|s| u64::from(s.id)))),
                    Arc::new(UInt64Array::from(entries)),
                    Arc::new(UInt64Array::from_iter_values(rows.iter().map(|s| s.disk_bytes))),
                    Arc::new(UInt64Array::from(rows.iter().map(|s| s.cache.map(|c| c.entries)).collect::<Vec<_>>())),
                    Arc::new(UInt64Array::from(rows.iter().map(|s| s.cache.map(|c| c.bytes)).collect::<Vec<_>>())),
                    Arc::new(arrow::array::Float64Array::from(
                        rows.iter()
                            .map(|s| s.cache.filter(|c| c.hits + c.misses > 0).map(|c| c.hits as f64 / (c.hits + c.misses) as f64))
                            .collect::<Vec<_>>(),
                    )),
                    Arc::new(arrow::array::Int64Array::from(rows.iter().map(|s| s.ttl_ms).collect::<Vec<_>>())),
                ],
            )
        }
        "weir_operators" => {
            let ops: Vec<_> = state.jobs.iter().flat_map(|j| j.operators.iter().map(move |o| (j, o))).collect();
            let ts = DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None);
            (
                Arc::new(Schema::new(vec![
                    Field::new("job", DataType::Utf8, false),
                    Field::new("job_id", DataType::Utf8, false),
                    Field::new("operator_index", DataType::UInt64, false),
                    Field::new("parent_index", DataType::UInt64, true),
                    Field::new("operator", DataType::Utf8, false),
                    Field::new("exchange", DataType::Utf8, false),
                    Field::new("parallelism", DataType::UInt64, false),
                    Field::new("rows_in", DataType::UInt64, false),
                    Field::new("rows_out", DataType::UInt64, false),
                    Field::new("busy_ms", DataType::Float64, false),
                    Field::new("watermark", ts, true),
                    Field::new("late_rows", DataType::UInt64, false),
                    Field::new("detail", DataType::Utf8, false),
                ])),
                vec![
                    Arc::new(StringArray::from_iter_values(ops.iter().map(|(j, _)| j.name.as_str()))),
                    Arc::new(StringArray::from_iter_values(ops.iter().map(|(j, _)| j.job_id.as_str()))),
                    Arc::new(UInt64Array::from_iter_values(ops.iter().map(|(_, o)| o.index as u64))),
                    Arc::new(UInt64Array::from(ops.iter().map(|(_, o)| o.parent.map(|p| p as u64)).collect::<Vec<_>>())),
                    Arc::new(StringArray::from_iter_values(ops.iter().map(|(_, o)| o.name.as_str()))),
                    Arc::new(StringArray::from_iter_values(ops.iter().map(|(_, o)| o.exchange.as_str()))),
                    Arc::new(UInt64Array::from_iter_values(ops.iter().map(|(_, o)| o.parallelism as u64))),
                    Arc::new(UInt64Array::from_iter_values(ops.iter().map(|(_, o)| o.rows_in))),
                    Arc::new(UInt64Array::from_iter_values(ops.iter().map(|(_, o)| o.rows_out))),
                    Arc::new(arrow::array::Float64Array::from_iter_values(ops.iter().map(|(_, o)| o.busy_ns as f64 / 1e6))),
                    Arc::new(TimestampMillisecondArray::from(ops.iter().map(|(_, o)| o.watermark).collect::<Vec<_>>())),
                    Arc::new(UInt64Array::from_iter_values(ops.iter().map(|(_, o)| o.late_rows))),
                    Arc::new(StringArray::from_iter_values(ops.iter().map(|(_, o)| o.detail.as_str()))),
                ],
            )
        }
        "pg_stat_activity" => {
            let rows = &state.activity;
            let tz = DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, Some("UTC".into()));
            let times = |f: &dyn Fn(&crate::observe::Activity) -> Option<i64>| -> ArrayRef {
                Arc::new(TimestampMillisecondArray::from(rows.iter().map(f).collect::<Vec<_>>()).with_timezone("UTC"))
            };
            (
                Arc::new(Schema::new(vec![
                    Field::new("datname", DataType::Utf8, false),
                    Field::new("pid", DataType::Int32, false),
                    Field::new("usename", DataType::Utf8, false),
                    Field::new("application_name", DataType::Utf8, false),
                    Field::new("client_addr", DataType::Utf8, true),
                    Field::new("backend_start", tz.clone(), false),
                    Field::new("query_start", tz.clone(), true),
                    Field::new("state_change", tz, false),
                    Field::new("state", DataType::Utf8, false),
                    Field::new("query", DataType::Utf8, false),
                    Field::new("backend_type", DataType::Utf8, false),
                ])),
                vec![
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|a| a.datname.as_str()))),
                    Arc::new(arrow::array::Int32Array::from_iter_values(rows.iter().map(|a| a.pid))),
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|a| a.usename.as_str()))),
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|a| a.application_name.as_str()))),
                    Arc::new(StringArray::from(rows.iter().map(|a| a.client_addr.clone()).collect::<Vec<_>>())),
                    times(&|a| Some(a.backend_start)),
                    times(&|a| a.query_start),
                    times(&|a| Some(a.state_change)),
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|a| a.state))),
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|a| a.query.as_str()))),
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|_| "client backend"))),
                ],
            )
        }
        _ => return Ok(None),
    };
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns)?;
    Ok(Some(Arc::new(datafusion::datasource::MemTable::try_new(schema, vec![vec![batch]])?)))
}

/// A DataFusion context for one statement over `snapshot`.
/// Flink's type names that DataFusion's SQL planner does not know, wherever a query names a
/// type (`CAST(x AS TIMESTAMP_LTZ(3))`): read as `CREATE TABLE` reads them
/// ([`crate::sql::types::arrow_type`]).
#[derive(Debug)]
struct FlinkTypes;

impl datafusion::logical_expr::planner::TypePlanner for FlinkTypes {
    fn plan_type_field(
        &self,
        sql_type: &sqlparser::ast::DataType,
    ) -> datafusion::common::Result<Option<arrow::datatypes::FieldRef>> {
        Ok(match sql_type {
            // A TIMESTAMP without a precision is TIMESTAMP(6), as in Flink and in CREATE TABLE:
            // microseconds (DataFusion's nanoseconds end in 2262, so `TIMESTAMP '9999-12-31
            // 00:00:00'`, the usual open end of a validity range, did not fit).
            sqlparser::ast::DataType::Timestamp(None, _)
            | sqlparser::ast::DataType::Custom(..)
            | sqlparser::ast::DataType::Struct(..)
            | sqlparser::ast::DataType::Map(..) => crate::sql::types::arrow_type(sql_type)
                .ok()
                .map(|t| Arc::new(arrow::datatypes::Field::new("", t, true))),
            _ => None,
        })
    }
}

pub fn session_context(snapshot: Arc<Snapshot>) -> SessionContext {
    let mut config = SessionConfig::new()
        .with_default_catalog_and_schema(CATALOG_NAME, SCHEMA_NAME)
        // Weir's own information_schema (Postgres's columns and type names), `pg_schema`.
        .with_information_schema(false)
        .with_target_partitions(1);
    config.options_mut().sql_parser.parse_float_as_decimal = true;
    config.options_mut().sql_parser.default_null_ordering = match snapshot.nulls {
        NullCollation::High => "nulls_max",
        NullCollation::Low => "nulls_min",
    }
    .to_string();
    let mut optimizer_rules = datafusion::optimizer::Optimizer::new().rules;
    // One aggregate operator with a value multiset beats DataFusion's two-level rewrite of a
    // single COUNT(DISTINCT) for incremental maintenance.
    optimizer_rules.retain(|r| r.name() != "single_distinct_aggregation_to_group_by");
    // An inner join whose right side is unique on the keys, of which only left columns are
    // used, becomes a semi join there; the stream planner has no semi join yet, and the inner
    // join is what Flink keeps (Nexmark q5, q8).
    optimizer_rules.retain(|r| r.name() != "eliminate_join");
    // After DataFusion's type coercion: casts to ROW types by position (`row_cast`).
    let mut analyzer_rules = datafusion::optimizer::Analyzer::new().rules;
    // Before DataFusion's type coercion, which would cast a string compared with a number
    // row by row (`comparisons`).
    let coercion = analyzer_rules.iter().position(|r| r.name() == "type_coercion").unwrap_or(0);
    analyzer_rules.insert(coercion, Arc::new(crate::sql::comparisons::StringNumberComparisons));
    // Before it too: a float meets a DECIMAL as a DOUBLE, not as DECIMAL(30, 15).
    analyzer_rules.insert(coercion + 1, Arc::new(crate::sql::comparisons::FloatDecimalComparisons));
    // Before it too: a DECIMAL division as Flink types and rounds it (`decimal_division`), but in
    // a view or job created before that rule (it keeps its state's types).
    if crate::sql::settings::flink_decimal_division() {
        analyzer_rules.insert(coercion + 2, Arc::new(crate::sql::decimal_division::DecimalDivision));
    }
    analyzer_rules.push(Arc::new(crate::sql::row_cast::PositionalRowCasts));

    // After it: a timestamp cast to text, written or added by the coercion, as Flink writes it.
    let zone = crate::sql::settings::planning_zone();
    analyzer_rules.push(Arc::new(crate::sql::text_casts::TimestampTextCasts { zone }));
    // `x IN (VALUES ...)` and kin planned as `(SELECT * FROM (VALUES ...))` (`values_subquery`).
    analyzer_rules.push(Arc::new(crate::sql::values_subquery::ValuesSubqueries));
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_optimizer_rules(optimizer_rules)
        .with_analyzer_rules(analyzer_rules)
        .with_type_planner(Arc::new(FlinkTypes))
        .build();
    let ctx = SessionContext::new_with_state(state);
    crate::plan::functions::register(&ctx, zone);
    if let Some(activities) = &snapshot.activities {
        crate::sql::pg_cancel::register(&ctx, Arc::clone(activities));
    }
    let schema = Arc::new(WeirSchema { snapshot });
    let lookup_schema = Arc::clone(&schema);
    // The lookup runs inside DataFusion's planning, itself run by `block_on` when jobs restart,
    // so it must not start an executor of its own: the future completes on its first poll.
    let lookup: crate::sql::temporal::TableLookup = Arc::new(move |name: &str| {
        let mut table = lookup_schema.table(name);
        match futures::FutureExt::now_or_never(&mut table) {
            Some(found) => found.ok().flatten(),
            None => futures::executor::block_on(table).ok().flatten(),
        }
    });
    crate::sql::window_tvf::register(&ctx, Arc::clone(&lookup), zone);
    crate::sql::temporal::register(&ctx, lookup);
    crate::sql::pg_compat::register(&ctx, &schema.snapshot.catalog);
    if let Some(catalog) = ctx.catalog(CATALOG_NAME) {
        let pg = |information_schema| {
            Arc::new(crate::sql::pg_schema::PgSchema {
                catalog: Arc::clone(&schema.snapshot.catalog),
                information_schema,
                fallback: Arc::clone(&schema) as Arc<dyn SchemaProvider>,
            })
        };
        let _ = catalog.register_schema("pg_catalog", pg(false));
        let _ = catalog.register_schema("information_schema", pg(true));
        // Replaces the in-memory default schema.
        let _ = catalog.register_schema(SCHEMA_NAME, schema);
    }
    ctx
}

struct WeirSchema {
    snapshot: Arc<Snapshot>,
}

impl std::fmt::Debug for WeirSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WeirSchema")
    }
}

#[async_trait]
impl SchemaProvider for WeirSchema {

    fn table_names(&self) -> Vec<String> {
        self.snapshot.catalog.relations.values().filter(|r| crate::sql::temporary_tables::listed(r)).map(|r| r.name.clone()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>, DataFusionError> {
        let to_df = |e: WeirError| DataFusionError::External(Box::new(e));
        // A session's temporary table is read by its catalog name (statements are renamed); under
        // its own name it is only listed, so `public.t` never reaches it.
        let listed_only = |r: &&weir_catalog::Relation| crate::sql::temporary_tables::is_temporary_table(r) && !crate::sql::temporary_tables::is_temporary(name);
        let Some(rel) = self.snapshot.catalog.get(name).filter(|r| r.kind != RelationKind::SinkJob && !listed_only(r)) else {
            if !SYSTEM_TABLES.contains(&name) {
                // Postgres finds pg_catalog's tables unqualified (the search path starts there).
                return crate::sql::pg_schema::pg_table(&self.snapshot.catalog, name);
            }
            let state = self.snapshot.system.get().await;
            return system_table(name, &state, &*self.snapshot.reader).map_err(to_df);
        };
        let schema = relation_schema(rel).map_err(to_df)?;
        match rel.kind {
            RelationKind::View => {
                let query = rel.query.clone().unwrap_or_default();
                // A permanent view reads permanent relations; a temporary one, the session's.
                let permanent = self.snapshot.permanent.as_ref().filter(|p| p.get(name) == Some(rel));
                let (catalog, permanent) = match permanent {
                    Some(permanent) => (Arc::clone(permanent), None),
                    None => (Arc::clone(&self.snapshot.catalog), self.snapshot.permanent.clone()),
                };
                let ctx = session_context(Arc::new(Snapshot {
                    catalog,
                    permanent,
                    reader: Arc::clone(&self.snapshot.reader),
                    keyed_table: None,
                    system: self.snapshot.system.clone(),
                    activities: self.snapshot.activities.clone(),
                    nulls: self.snapshot.nulls,
                }));
                let state = ctx.state();
                let plan = state.create_logical_plan(&crate::sql::query_rewrites::rewrite_text(&query).map_err(to_df)?).await?;
                // Analyzed (type coercion, as DataFusion does for a whole query before running
                // it): the stream planner plans a view from this plan, and an `id > 0` over an
                // INT column must compare Int32 with Int32, not Int64.
                let plan = state.analyzer().execute_and_check(plan, state.config_options(), |_, _| {})?;
                Ok(Some(Arc::new(ViewTable::new(plan, Some(query)))))
            }
            RelationKind::Table if connector_of(rel) != "table" => Ok(Some(Arc::new(ConnectorTable {
                schema,
                name: rel.name.clone(),
                connector: connector_of(rel).to_string(),
                proctime: rel
                    .columns
                    .iter()
                    .filter(|c| c.computed.as_deref().is_some_and(|e| e.trim().eq_ignore_ascii_case("proctime()")))
                    .map(|c| (c.name.clone(), crate::plan::functions::proctime_expr()))
                    .collect(),
            }))),
            _ => {
                let id = rel
                    .state_table
                    .ok_or_else(|| to_df(WeirError::internal(format!("{} has no state table", rel.name))))?;
                let with_key = self.snapshot.keyed_table.as_deref() == Some(name);
                // DataFusion sees every column as nullable: NOT NULL and primary keys are
                // checked by the table's writer, with Postgres's message.
                let schema = Arc::new(Schema::new(
                    schema.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>(),
                ));
                Ok(Some(Arc::new(StoredRelation {
                    schema,
                    id,
                    layout: layout_of(rel),
                    reader: Arc::clone(&self.snapshot.reader),
                    with_key,
                })))
            }
        }
    }

    fn table_exist(&self, name: &str) -> bool {
        self.snapshot.catalog.get(name).is_some_and(|r| {
            r.kind != RelationKind::SinkJob
                && !(crate::sql::temporary_tables::is_temporary_table(r) && !crate::sql::temporary_tables::is_temporary(name))
        }) || SYSTEM_TABLES.contains(&name)
            || crate::sql::pg_schema::PG_TABLES.contains(&name)
    }
}

/// A table or materialized view read from its state table.
#[derive(Debug)]
struct StoredRelation {
    schema: SchemaRef,
    id: u32,
    layout: RowLayout,
    reader: Arc<dyn ScanState>,
    with_key: bool,
}

impl std::fmt::Debug for dyn ScanState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScanState")
    }
}

#[async_trait]
impl TableProvider for StoredRelation {

    fn schema(&self) -> SchemaRef {
        if self.with_key {
            let mut fields: Vec<Field> = self.schema.fields().iter().map(|f| f.as_ref().clone()).collect();
            fields.push(Field::new(crate::runtime::table::KEY_COLUMN, DataType::Binary, false));
            Arc::new(Schema::new(fields))
        } else {
            Arc::clone(&self.schema)
        }
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>, DataFusionError> {
        let batches = scan_rows(&*self.reader, self.id, &self.schema, self.layout, self.with_key)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let exec = MemorySourceConfig::try_new_exec(&[batches], self.schema(), projection.cloned())?;
        Ok(exec)
    }
}

/// A connector table: it stores no rows (Flink's semantics), so it plans (a view or job over
/// it, a sink's checks) but refuses an ad-hoc scan, saying how to read it instead (SQL.md: a
/// `SELECT` that needs an unbounded source says how to turn it into a view or a job).
#[derive(Debug)]
struct ConnectorTable {
    schema: SchemaRef,
    name: String,
    connector: String,
    /// Its computed columns `c AS PROCTIME()`, with that expression.
    proctime: std::collections::HashMap<String, Expr>,
}

#[async_trait]
impl TableProvider for ConnectorTable {
    /// A computed column `c AS PROCTIME()` reports `PROCTIME()`: so the planner takes `c` for a
    /// processing-time attribute (`crate::plan::rank::defines_proctime`), as Flink does.
    fn get_column_default(&self, column: &str) -> Option<&Expr> {
        self.proctime.get(column)
    }

    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        _projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>, DataFusionError> {
        Err(DataFusionError::External(Box::new(WeirError::unsupported(format!(
            "a SELECT reads stored rows, and table {name} (connector '{}') stores none; read it in a materialized \
             view (CREATE MATERIALIZED VIEW v AS SELECT ... FROM {name}) and SELECT from that, or in an INSERT INTO job",
            self.connector,
            name = self.name
        )))))
    }
}
