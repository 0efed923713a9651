//! The `datagen` connector's reader: the generator of [`weir_connectors::datagen`] (Flink's
//! DataGen source), one partition whose position is the rows generated, no more than
//! `'rows-per-second'` per second of wall time from when the reader opened.

use std::time::Instant;

use arrow::datatypes::SchemaRef;
use weir_catalog::Relation;
use weir_connectors::datagen::DatagenGenerator;

use super::{SourcePoll, SourceReader};
use crate::error::{Result, WeirError};

/// Reads one `datagen` table.
pub struct DatagenReader {
    generator: DatagenGenerator,
    /// When the reader opened, and its position then: the rate limit counts from there.
    opened: (Instant, u64),
}

impl DatagenReader {
    /// The reader of table `rel` producing `physical` (its columns but computed ones), at
    /// `positions[0]` rows.
    ///
    /// # Errors
    /// `InvalidOption` for a bad option or one naming no column; `Unsupported` for a column
    /// type datagen does not generate.
    pub fn open(rel: &Relation, physical: SchemaRef, positions: Option<&[u64]>) -> Result<Self> {
        let nullable = std::sync::Arc::new(arrow::datatypes::Schema::new(
            physical.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>(),
        ));
        let mut generator = DatagenGenerator::try_new(&rel.options, &rel.name, nullable).map_err(|e| match e {
            weir_connectors::ConnectorError::Unsupported { feature } => {
                WeirError::unsupported(format!("table {}: {feature}", rel.name))
            }
            other => WeirError::option(format!("table {}: {other}", rel.name)),
        })?;
        if let Some(&at) = positions.and_then(|p| p.first()) {
            generator.seek(at);
        }
        let opened = (Instant::now(), generator.offset());
        Ok(DatagenReader { generator, opened })
    }
}

impl SourceReader for DatagenReader {
    fn num_partitions(&self) -> usize {
        1
    }

    fn poll(&mut self, max_rows: usize) -> Result<SourcePoll> {
        if self.generator.is_finished() {
            return Ok(SourcePoll::Finished);
        }
        let (opened, first) = self.opened;
        let due = first + (opened.elapsed().as_secs_f64() * self.generator.rows_per_second()) as u64;
        let rows = (due.saturating_sub(self.generator.offset()) as usize).min(max_rows);
        if rows == 0 {
            return Ok(SourcePoll::Pending);
        }
        let now_ms = chrono::Utc::now().timestamp_millis();
        match self.generator.next_batch(rows, now_ms).map_err(|e| WeirError::internal(e.to_string()))? {
            Some(batch) => Ok(SourcePoll::Batch { partition: 0, batch, ops: None }),
            None => Ok(SourcePoll::Finished),
        }
    }

    fn positions(&self) -> Vec<u64> {
        vec![self.generator.offset()]
    }

    fn partition_finished(&self, _: usize) -> bool {
        self.generator.is_finished()
    }

    fn bounded(&self) -> bool {
        self.generator.total_rows().is_some()
    }

    /// A bounded table's rows in all (its lag is the rows not generated yet).
    fn high_watermarks(&self) -> Vec<Option<i64>> {
        vec![self.generator.total_rows().map(|n| n as i64)]
    }
}
