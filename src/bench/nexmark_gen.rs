//! `weir bench nexmark-gen`: the Nexmark tables of the built-in generator written as JSON
//! lines (`person.json`, `auction.json`, `bid.json`), the same rows the `nexmark` connector
//! produces for the same options, so the files can feed Weir's `filesystem` source, another
//! engine, or an independent checker.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use weir_connectors::nexmark::{NexmarkConfig, NexmarkGenerator, NexmarkTable};

use crate::error::{Result, WeirError};

/// Rows per generated batch.
const BATCH_ROWS: usize = 8192;

/// Writes events `0..events` of seed `seed` at `event_rate` events per second of event time into `out` (created if missing), one file per
/// table; returns the row count of each table in [`NexmarkTable::ALL`] order. Timestamps are
/// written as ISO-8601 without a zone (`2015-07-15T00:00:00.001`), the generator's UTC values.
///
/// # Errors
/// `Storage` when `out` cannot be created or written.
pub fn write_json(out: &Path, events: u64, seed: Option<u64>, event_rate: Option<f64>) -> Result<[u64; 3]> {
    std::fs::create_dir_all(out).map_err(|e| WeirError::storage(format!("creating {}: {e}", out.display())))?;
    let mut counts = [0u64; 3];
    for (i, table) in NexmarkTable::ALL.into_iter().enumerate() {
        let mut config = NexmarkConfig::new(table);
        config.num_events = Some(events);
        if let Some(seed) = seed {
            config.seed = seed;
        }
        if let Some(rate) = event_rate {
            config.event_rate = rate;
        }
        let mut generator = NexmarkGenerator::try_new(config, 0, 1).map_err(|e| WeirError::internal(e.to_string()))?;
        let path = out.join(format!("{}.json", table.name()));
        let file = File::create(&path).map_err(|e| WeirError::storage(format!("creating {}: {e}", path.display())))?;
        let mut writer = arrow::json::LineDelimitedWriter::new(BufWriter::new(file));
        while let Some(batch) = generator.next_batch(BATCH_ROWS) {
            counts[i] += batch.num_rows() as u64;
            writer.write(&batch)?;
        }
        writer.finish()?;
    }
    Ok(counts)
}
