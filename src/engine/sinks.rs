//! The sinks of `INSERT INTO` jobs: the operator at the root of a job writing into a connector
//! table, by connector, and stopping such a job.
//!
//! Sinks by connector: `blackhole` (counts and drops rows of any shape), `print` (prints
//! each changelog row, as Flink's), `filesystem`
//! (exactly-once JSON lines or CSV files), `kafka` (append-only, the table's `'format'`) and
//! `upsert-kafka` (the primary key as message key, tombstones for deletes), at least once; see
//! [`crate::runtime::operators::sink`].

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use weir_catalog::{Catalog, Relation, RelationKind};

use super::Engine;
use crate::error::{Result, WeirError};
use crate::plan::StreamPlan;
use crate::runtime::operator::Operator;
use crate::runtime::operators::sink::{Blackhole, FileFormat, FileSink, KafkaEncoding, KafkaSink, PrintSink};
use crate::runtime::relation::connector_of;
use crate::runtime::Job;
use crate::state::EpochWrites;

/// The option of a sink job naming the table it writes.
pub const SINK_OPTION: &str = "sink";

impl Engine {
    /// Instantiates sink job `rel`: `plan` ending in the sink of its target table.
    pub(super) fn build_sink_job(&self, rel: &Relation, plan: &StreamPlan, allocate: &mut dyn FnMut(&str) -> u32) -> Result<Job> {
        let sink_name = rel.options.get(SINK_OPTION).cloned().unwrap_or_default();
        let sink = self.catalog.get(&sink_name).ok_or_else(|| WeirError::unknown_table(&sink_name))?;
        // Rows are cast to the table's columns in the zone the job was created in.
        let zone = crate::plan::time_zone::Zone::of_settings(&rel.options);
        let root: Box<dyn Operator> = match connector_of(sink) {
            "blackhole" => {
                let rows = Arc::new(AtomicU64::new(0));
                self.sink_rows.lock().expect("sink counters").insert(rel.name.clone(), Arc::clone(&rows));
                Box::new(Blackhole { rows })
            }
            "print" => Box::new(PrintSink {
                prefix: sink.options.get("print-identifier").map(|p| format!("{p}> ")).unwrap_or_default(),
                stderr: sink.options.get("standard-error").is_some_and(|v| v.eq_ignore_ascii_case("true")),
            }),
            "filesystem" => {
                let dir = PathBuf::from(sink.options.get("path").cloned().unwrap_or_default());
                let physical = Arc::new(arrow::datatypes::Schema::new(written_fields(sink)?));
                let options = weir_connectors::with_file_format(&sink.options);
                let extension = match options["format"].as_str() {
                    "json" => "json",
                    "csv" => "csv",
                    other => {
                        return Err(WeirError::option(format!(
                            "table {}: the 'filesystem' sink writes format 'json' or 'csv', not '{other}'",
                            sink.name
                        )))
                    }
                };
                let encoder = weir_connectors::format::encoder(&options, "", Arc::clone(&physical))
                    .map_err(|e| WeirError::option(format!("table {}: {e}", sink.name)))?;
                let format = FileFormat { extension, encoder };
                let state = allocate("sink");
                Box::new(FileSink::open(&dir, &rel.name, format, physical, state, &self.store)?.in_zone(zone))
            }
            kind @ ("kafka" | "upsert-kafka") => {
                let schema = Arc::new(arrow::datatypes::Schema::new(written_fields(sink)?));
                let config = weir_connectors::kafka::KafkaSinkConfig::from_options(&sink.options)
                    .map_err(|e| WeirError::option(format!("table {}: {e}", sink.name)))?;
                let fields = weir_connectors::format::key_fields(&sink.options);
                let encoding = if let (true, Some(fields)) = (kind == "kafka", fields) {
                    // A `kafka` table with a message key: one message per row, as Flink's.
                    let key = crate::source::kafka::key_field_columns(&sink.name, &fields, &schema)?;
                    KafkaEncoding::Upsert(
                        weir_connectors::format::UpsertEncoder::appending(&sink.options, Arc::clone(&schema), &key)
                            .map_err(|e| WeirError::option(format!("table {}: {e}", sink.name)))?,
                    )
                } else if kind == "kafka" {
                    let prefix = weir_connectors::format::value_prefix(&sink.options);
                    KafkaEncoding::Value(
                        weir_connectors::format::encoder(&sink.options, prefix, Arc::clone(&schema))
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
                // The cluster unreachable: External, which a restart retries ([`super::restart`]).
                let opening =
                    |e| WeirError::new(crate::error::ErrorKind::External(format!("table {}: {e}", sink.name)));
                match &config.transactional_id_prefix {
                    Some(prefix) if config.delivery == weir_connectors::kafka::DeliveryGuarantee::ExactlyOnce => {
                        // Stable per job, so a restarted job fences its previous instance.
                        let id = format!("{prefix}-{}", rel.name);
                        let writer = weir_connectors::kafka::KafkaWriter::open_transactional(&config, &id).map_err(opening)?;
                        Box::new(KafkaSink::exactly_once(Box::new(writer), encoding, schema, allocate("sink"), &self.store)?.in_zone(zone))
                    }
                    _ => {
                        let writer = weir_connectors::kafka::KafkaWriter::open(&config).map_err(opening)?;
                        Box::new(KafkaSink::new(Box::new(writer), encoding, schema).in_zone(zone))
                    }
                }
            }
            other => {
                return Err(WeirError::unsupported(format!(
                    "job {}: the '{other}' connector's sink is not built yet in this version",
                    rel.name
                )))
            }
        };
        Job::build_with_root(plan, root, allocate, &self.store, self.parallelism_of(rel)?)
    }

    /// `STOP JOB 'id'`: stops and removes an INSERT INTO job (running or suspended), freeing its
    /// state.
    ///
    /// # Errors
    /// `UndefinedObject` for an unknown job; `Unsupported` for the job of a materialized view.
    pub fn stop_job(&mut self, id: &str) -> Result<()> {
        let Some(rel) = self.catalog.relations.values().find(|r| r.job.as_deref() == Some(id)) else {
            return Err(WeirError::undefined_object(format!("no job '{id}'; SHOW JOBS lists them")));
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
            // Its sources' positions (of its tasks, or kept while it is suspended).
            for table in &r.depends_on {
                writes.delete_meta(&crate::source::progress_key(&name, table));
            }
        }
        for (job, table) in self.sources.keys().filter(|(job, _)| *job == name) {
            writes.delete_meta(&crate::source::progress_key(job, table));
        }
        writes.delete_meta(&super::suspend::suspended_key(&name));
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
        self.suspended.remove(&name);
        self.finished.remove(&name);
        self.restarting.remove(&name);
        Ok(())
    }
}

/// The written columns of sink table `sink` (declared, not computed nor metadata), nullable.
pub fn written_fields(sink: &Relation) -> Result<Vec<arrow::datatypes::Field>> {
    let schema = crate::runtime::relation::relation_schema(sink)?;
    Ok(sink
        .columns
        .iter()
        .zip(schema.fields())
        .filter(|(c, _)| c.computed.is_none())
        .map(|(_, f)| f.as_ref().clone().with_nullable(true))
        .collect())
}
