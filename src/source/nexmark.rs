//! The `nexmark` connector's reader: the built-in generator
//! ([`weir_connectors::nexmark::NexmarkGenerator`]), `'nexmark.partitions'` partitions, each
//! position a row offset of its partition. With `'nexmark.rate-limited' = 'true'` it emits no
//! more than `'nexmark.event-rate'` events per second of wall time (event ids over all tables,
//! counted from where the reader opened), so event time keeps pace with the clock.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::SchemaRef;
use weir_catalog::Relation;
use weir_connectors::nexmark::{NexmarkConfig, NexmarkGenerator, OPT_PARTITIONS};

use super::{SourcePoll, SourceReader};
use crate::error::{Result, WeirError};

/// Reads one `nexmark` table's partitions round-robin.
pub struct NexmarkReader {
    generators: Vec<NexmarkGenerator>,
    /// For each physical column, its index in the generator's schema.
    projection: Vec<usize>,
    physical: SchemaRef,
    /// The partition polled next.
    next: usize,
    /// With `nexmark.rate-limited`: when the reader opened and the least event id due then.
    rate_limit: Option<(Instant, u64)>,
}

impl NexmarkReader {
    /// The reader of table `rel` producing `physical`, each partition at `positions[p]` rows.
    ///
    /// # Errors
    /// `InvalidOption` for bad `nexmark.*` options or a declared column the generator's table
    /// does not have (the message lists the ones it has).
    pub fn open(rel: &Relation, physical: SchemaRef, positions: Option<&[u64]>) -> Result<Self> {
        let config = NexmarkConfig::from_options(&rel.options).map_err(|e| WeirError::option(e.to_string()))?;
        let partitions = match rel.options.get(OPT_PARTITIONS) {
            Some(v) => v.trim().parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                WeirError::option(format!("option '{OPT_PARTITIONS}' = '{v}' is not valid; valid values: an integer >= 1"))
            })?,
            None => 1,
        };
        let generated = weir_connectors::nexmark::schema(config.table);
        let projection = physical
            .fields()
            .iter()
            .map(|f| {
                generated.index_of(f.name()).map_err(|_| {
                    WeirError::option(format!(
                        "table {}: column {} is not a column of the nexmark '{}' table; its columns: {}",
                        rel.name,
                        f.name(),
                        config.table,
                        generated.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ")
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut generators = (0..partitions)
            .map(|p| NexmarkGenerator::try_new(config.clone(), p, partitions).map_err(|e| WeirError::internal(e.to_string())))
            .collect::<Result<Vec<_>>>()?;
        if let Some(positions) = positions {
            for (g, pos) in generators.iter_mut().zip(positions) {
                g.seek(*pos);
            }
        }
        let rate_limit = config.rate_limited.then(|| {
            (Instant::now(), generators.iter().map(NexmarkGenerator::next_event_id).min().unwrap_or(0))
        });
        Ok(NexmarkReader { generators, projection, physical, next: 0, rate_limit })
    }
}

impl SourceReader for NexmarkReader {
    fn num_partitions(&self) -> usize {
        self.generators.len()
    }

    fn poll(&mut self, max_rows: usize) -> Result<SourcePoll> {
        let n = self.generators.len();
        for _ in 0..n {
            let p = self.next;
            self.next = (self.next + 1) % n;
            let mut rows = max_rows;
            if let Some((opened, first)) = self.rate_limit {
                let generator = &self.generators[p];
                let rate = generator.config().event_rate;
                // Events whose id is below `due` may have been emitted by now (the first at once).
                let due = first + 1 + (opened.elapsed().as_secs_f64() * rate) as u64;
                rows = rows.min(generator.rows_before(due).saturating_sub(generator.offset()) as usize);
                if rows == 0 {
                    continue;
                }
            }
            let Some(batch) = self.generators[p].next_batch(rows) else { continue };
            if batch.num_rows() == 0 {
                continue;
            }
            let columns: Vec<ArrayRef> = self
                .projection
                .iter()
                .zip(self.physical.fields())
                .map(|(i, f)| {
                    let c = batch.column(*i);
                    if c.data_type() == f.data_type() {
                        Ok(Arc::clone(c))
                    } else {
                        Ok(arrow::compute::cast(c, f.data_type())?)
                    }
                })
                .collect::<Result<_>>()?;
            let nullable = Arc::new(arrow::datatypes::Schema::new(
                self.physical.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>(),
            ));
            let batch = RecordBatch::try_new_with_options(
                nullable,
                columns,
                &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
            )?;
            return Ok(SourcePoll::Batch { partition: p, batch, ops: None });
        }
        Ok(if self.generators.iter().all(|g| g.is_finished()) { SourcePoll::Finished } else { SourcePoll::Pending })
    }

    fn positions(&self) -> Vec<u64> {
        self.generators.iter().map(|g| g.offset()).collect()
    }

    fn partition_finished(&self, p: usize) -> bool {
        self.generators[p].is_finished()
    }

    fn bounded(&self) -> bool {
        self.generators[0].config().num_events.is_some()
    }

    /// A bounded run's rows of each partition in all (so its lag is the rows not read yet);
    /// none for an unbounded one.
    fn high_watermarks(&self) -> Vec<Option<i64>> {
        self.generators.iter().map(|g| g.total_rows().map(|n| n as i64)).collect()
    }
}
