//! `INSERT INTO <connector table> SELECT ...`: a continuous job writing into a sink, kept in
//! the catalog as a [`RelationKind::SinkJob`] named by its job id (`SHOW JOBS`, `STOP JOB`).
//!
//! Sinks by connector: `blackhole` (counts and drops rows of any shape), `filesystem`
//! (exactly-once JSON lines or CSV files), `kafka` (append-only, the table's `'format'`) and
//! `upsert-kafka` (the primary key as message key, tombstones for deletes), at least once; see
//! [`crate::runtime::operators::sink`]. A job's
//! window aggregation emits each window once, when it closes (Flink's window TVF
//! aggregation), and a query that would still update is refused before the job starts when the
//! sink is append-only.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use weir_catalog::{Catalog, Relation, RelationKind};

use crate::error::{Result, WeirError};
use crate::plan::StreamPlan;
use crate::runtime::operator::Operator;
use crate::runtime::operators::sink::{Blackhole, FileFormat, FileSink, KafkaEncoding, KafkaSink};
use crate::runtime::Job;
use crate::sql::engine::Engine;
use crate::sql::relations::connector_of;
use crate::state::EpochWrites;

/// The option of a sink job naming the table it writes.
pub const SINK_OPTION: &str = "sink";

impl Engine {
    /// Starts the job of `INSERT INTO sink query`, where `sink` is a connector table and
    /// `query` SQL text; commits it with the catalog. Returns the job id.
    ///
    /// # Errors
    /// `Unsupported` for a connector without a sink runtime; `Plan` when the query's columns do
    /// not match the sink's; the planner's errors.
    pub async fn start_sink_job(
        &mut self,
        sink: &Relation,
        query: &str,
        depends_on: Vec<String>,
        definition: &str,
        settings: &BTreeMap<String, String>,
    ) -> Result<String> {
        let connector = connector_of(sink);
        if connector == "upsert-kafka" && sink.primary_key.is_empty() {
            return Err(WeirError::plan(format!(
                "INSERT INTO {}: an 'upsert-kafka' table needs a PRIMARY KEY (..) NOT ENFORCED: it is the message key",
                sink.name
            )));
        }
        if !matches!(connector, "blackhole" | "filesystem" | "kafka" | "upsert-kafka") {
            return Err(WeirError::unsupported(format!(
                "INSERT INTO {}: the '{connector}' connector's sink is not built yet in this version",
                sink.name
            )));
        }
        let mut plan = self.plan_sink_job(query).await?;
        // The state TTL is kept; an allowed lateness would make window results updating.
        let mut options = crate::sql::settings::job_options(settings)?;
        options.remove(crate::sql::settings::ALLOW_LATENESS);
        plan.set_state_ttl(&crate::sql::settings::state_ttl_of(&options, query)?)?;
        options.insert(SINK_OPTION.to_string(), sink.name.clone());
        let eowc = true;
        let physical = sink.columns.iter().filter(|c| c.computed.is_none()).count();
        // A blackhole takes rows of any shape.
        if connector != "blackhole" && plan.schema.fields().len() != physical {
            return Err(WeirError::plan(format!(
                "INSERT INTO {}: the query has {} columns but the table has {physical}",
                sink.name,
                plan.schema.fields().len()
            )));
        }
        let mut catalog = (*self.catalog).clone();
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
        };
        catalog.relations.insert(id.clone(), rel.clone());
        let mut job = self.build_job(&rel, &plan, &mut catalog)?;
        self.backfill(&mut job, &plan)?;
        self.jobs.insert(id.clone(), job);
        let result = self.open_sources(&id, &plan.sources()).and_then(|()| self.commit(EpochWrites::default(), Some(catalog)));
        if let Err(e) = result {
            self.jobs.remove(&id);
            self.sources.retain(|(job, _), _| *job != id);
            return Err(e);
        }
        tracing::info!(job = %id, sink = %sink.name, "started INSERT INTO job");
        Ok(id)
    }

    /// The stream plan of an INSERT INTO job's query: every window aggregation emits each window
    /// once, final, when it closes (Flink's window TVF aggregation), also under a join.
    pub async fn plan_sink_job(&self, query: &str) -> Result<StreamPlan> {
        let mut plan = self.plan_stream_query(query, false).await?;
        plan.set_window_aggregations_final();
        Ok(plan)
    }

    /// Instantiates sink job `rel`: `plan` ending in the sink of its target table.
    pub(crate) fn build_sink_job(&self, rel: &Relation, plan: &StreamPlan, allocate: &mut dyn FnMut(&str) -> u32) -> Result<Job> {
        let sink_name = rel.options.get(SINK_OPTION).cloned().unwrap_or_default();
        let sink = self.catalog.get(&sink_name).ok_or_else(|| WeirError::unknown_table(&sink_name))?;
        let root: Box<dyn Operator> = match connector_of(sink) {
            "blackhole" => {
                let rows = Arc::new(AtomicU64::new(0));
                self.sink_rows.lock().expect("sink counters").insert(rel.name.clone(), Arc::clone(&rows));
                Box::new(Blackhole { rows })
            }
            "filesystem" => {
                let dir = PathBuf::from(sink.options.get("path").cloned().unwrap_or_default());
                let format = match sink.options.get("format").map(String::as_str).unwrap_or("json") {
                    "json" => FileFormat::Json,
                    "csv" => FileFormat::Csv,
                    other => {
                        return Err(WeirError::option(format!(
                            "table {}: the 'filesystem' sink writes format 'json' or 'csv', not '{other}'",
                            sink.name
                        )))
                    }
                };
                let physical = Arc::new(arrow::datatypes::Schema::new(physical_fields(sink)?));
                let state = allocate("sink");
                Box::new(FileSink::open(&dir, &rel.name, format, physical, state, &self.store)?)
            }
            kind @ ("kafka" | "upsert-kafka") => {
                let schema = Arc::new(arrow::datatypes::Schema::new(physical_fields(sink)?));
                let config = weir_connectors::kafka::KafkaSinkConfig::from_options(&sink.options)
                    .map_err(|e| WeirError::option(format!("table {}: {e}", sink.name)))?;
                let writer = weir_connectors::kafka::KafkaWriter::open(&config)
                    .map_err(|e| WeirError::execution(format!("table {}: {e}", sink.name)))?;
                let encoding = if kind == "kafka" {
                    KafkaEncoding::Value(
                        weir_connectors::format::encoder(&sink.options, "", Arc::clone(&schema))
                            .map_err(|e| WeirError::option(format!("table {}: {e}", sink.name)))?,
                    )
                } else {
                    let key: Vec<usize> = sink
                        .primary_key
                        .iter()
                        .map(|k| schema.index_of(k).map_err(|_| WeirError::plan(format!("primary key column {k}"))))
                        .collect::<Result<_>>()?;
                    KafkaEncoding::Upsert(
                        weir_connectors::format::UpsertEncoder::try_new(&sink.options, Arc::clone(&schema), &key)
                            .map_err(|e| WeirError::option(format!("table {}: {e}", sink.name)))?,
                    )
                };
                Box::new(KafkaSink::new(writer, encoding, schema))
            }
            other => {
                return Err(WeirError::unsupported(format!(
                    "job {}: the '{other}' connector's sink is not built yet in this version",
                    rel.name
                )))
            }
        };
        Job::build_with_root(plan, root, allocate, &self.store)
    }

    /// `STOP JOB 'id'`: stops and removes an INSERT INTO job, freeing its state.
    ///
    /// # Errors
    /// `Plan` for an unknown job; `Unsupported` for the job of a materialized view.
    pub fn stop_job(&mut self, id: &str) -> Result<()> {
        let Some(rel) = self.catalog.relations.values().find(|r| r.job.as_deref() == Some(id)) else {
            return Err(WeirError::plan(format!("no job '{id}'; SHOW JOBS lists them")));
        };
        if rel.kind != RelationKind::SinkJob {
            return Err(WeirError::unsupported(format!(
                "STOP JOB '{id}': it maintains materialized view {}; drop the view to stop it",
                rel.name
            )));
        }
        let name = rel.name.clone();
        let mut catalog: Catalog = (*self.catalog).clone();
        let mut writes = EpochWrites::default();
        if let Some(r) = catalog.relations.remove(&name) {
            for table in r.operator_state.values() {
                writes.delete_table(*table);
            }
        }
        for (job, table) in self.sources.keys().filter(|(job, _)| *job == name) {
            writes.delete_meta(&crate::source::progress_key(job, table));
        }
        let job = self.jobs.remove(&name);
        let tasks: Vec<_> = self.sources.keys().filter(|(job, _)| *job == name).cloned().collect();
        let tasks: Vec<_> = tasks.into_iter().filter_map(|k| self.sources.remove(&k).map(|t| (k, t))).collect();
        if let Err(e) = self.commit(writes, Some(catalog)) {
            if let Some(job) = job {
                self.jobs.insert(name, job);
            }
            self.sources.extend(tasks);
            return Err(e);
        }
        Ok(())
    }
}

/// The written columns of sink table `sink` (declared, not computed nor metadata), nullable.
fn physical_fields(sink: &Relation) -> Result<Vec<arrow::datatypes::Field>> {
    let schema = crate::sql::relations::relation_schema(sink)?;
    Ok(sink
        .columns
        .iter()
        .zip(schema.fields())
        .filter(|(c, _)| c.computed.is_none())
        .map(|(_, f)| f.as_ref().clone().with_nullable(true))
        .collect())
}
