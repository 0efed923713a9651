//! The `nexmark` connector's generator: the Nexmark benchmark's `person`, `auction` and `bid`
//! tables as Arrow batches, following ../shared/NEXMARK.md (the Flink generator with our fixes).
//!
//! - Deterministic: event `e` draws its values from an RNG seeded by `(nexmark.seed, e)`, so the
//!   output is a pure function of the options, whatever the partitioning.
//! - Event ids start at 0; `e mod 50` gives the type (0 person, 1..=3 auction, else bid);
//!   event `e`'s `date_time` is `base-time + (long)(e · 1e6 / event-rate) / 1000` ms.
//! - Bounded by `nexmark.events` (ids `0..n`) or unbounded; split into partitions by epoch
//!   (see [`NexmarkGenerator`]); resumable by row offset.
//!
//! ```
//! use weir_connectors::nexmark::{NexmarkConfig, NexmarkGenerator, NexmarkTable};
//! let config = NexmarkConfig { num_events: Some(1000), ..NexmarkConfig::new(NexmarkTable::Bid) };
//! let mut bids = NexmarkGenerator::try_new(config, 0, 1).expect("partition 0 of 1");
//! let batch = bids.next_batch(8192).expect("a bounded run starts with rows");
//! assert_eq!(batch.num_rows(), 920); // 46 bids in each block of 50 events
//! assert!(bids.next_batch(8192).is_none());
//! ```

mod auction;
mod bid;
mod config;
mod generator;
mod ids;
mod person;
mod rng;
mod strings;
#[cfg(test)]
mod tests;

pub use config::{
    NexmarkConfig, NexmarkTable, DEFAULT_BASE_TIME_MS, DEFAULT_EVENT_RATE, DEFAULT_SEED, OPT_BASE_TIME, OPT_EVENTS,
    OPT_EVENT_RATE, OPT_PARTITIONS, OPT_SEED, OPT_TABLE,
};
pub(crate) use config::OPTIONS;
pub use generator::{schema, NexmarkGenerator};
