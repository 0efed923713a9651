//! [`NexmarkGenerator`]: one partition of one Nexmark table, as Arrow batches.
//!
//! # Partitions
//! Partition `p` of `P` generates the events of the epochs (blocks of 50 event ids) whose index
//! is ≡ p mod P: person, auctions and bids of an epoch stay together, every partition gets
//! 1/P of each table, and its rows come in event-id order, so `date_time` never decreases
//! within a partition. The union over partitions is the single-partition output: each event's
//! values depend only on the seed and its id (NEXMARK.md "Our choices"), and all partitions
//! share one event-time timeline (`event-rate` is the aggregate rate). The shared nexmark-gen
//! files with `--partitions P` route events to part files the same way.
//!
//! # Position
//! [`NexmarkGenerator::offset`] is the number of rows this partition has produced; a source
//! stores it at each epoch's barrier and a restarted source calls [`NexmarkGenerator::seek`]
//! with the committed value. Seeking is O(1): row k's event id is a closed form of k.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::SchemaRef;

use super::auction::{self, AuctionColumns};
use super::bid::{self, BidColumns};
use super::config::{NexmarkConfig, NexmarkTable};
use super::ids::EPOCH_LEN;
use super::person::{self, PersonColumns};
use super::rng::Rng;
use super::strings::Tables;
use crate::ConnectorError;

/// Rows the builders are sized for before the first batch asks for more.
const INITIAL_CAPACITY: usize = 1024;

/// The Arrow schema of a Nexmark table (NEXMARK.md §1.1, snake_case columns;
/// `TIMESTAMP(3)` is `Timestamp(Millisecond, None)`, `BIGINT` `Int64`, `VARCHAR` `Utf8`).
pub fn schema(table: NexmarkTable) -> SchemaRef {
    Arc::new(match table {
        NexmarkTable::Person => person::schema(),
        NexmarkTable::Auction => auction::schema(),
        NexmarkTable::Bid => bid::schema(),
    })
}

/// The columns of one table, appended one event at a time.
pub(super) trait TableColumns {
    /// Draws event `event_id`'s fields from `rng` in Flink's order and appends one row.
    fn append(&mut self, config: &NexmarkConfig, event_id: u64, ts_ms: i64, rng: &mut Rng, tables: &Tables);
    /// The arrays of the rows appended since the last call, in schema order; the builders are
    /// left empty for the next batch.
    fn finish(&mut self) -> Vec<ArrayRef>;
}

enum Columns {
    Person(Box<PersonColumns>),
    Auction(Box<AuctionColumns>),
    Bid(Box<BidColumns>),
}

/// One partition of one Nexmark table.
pub struct NexmarkGenerator {
    config: NexmarkConfig,
    /// This partition's index, `< num_partitions`.
    partition: u64,
    num_partitions: u64,
    /// The table's first offset within an epoch (person 0, auction 1, bid 4).
    slot_start: u64,
    /// The table's events per epoch (person 1, auction 3, bid 46).
    slots: u64,
    schema: SchemaRef,
    /// Extra pool, hot URLs and channels of the seed, shared with the other partitions.
    pub(super) tables: Arc<Tables>,
    columns: Columns,
    /// Rows this partition has produced so far: the resumable position.
    offset: u64,
}

impl NexmarkGenerator {
    /// Partition `partition` of `num_partitions` of `config.table`, at offset 0.
    ///
    /// # Errors
    /// [`ConnectorError::Internal`] when `num_partitions` is 0 or `partition >= num_partitions`.
    pub fn try_new(config: NexmarkConfig, partition: usize, num_partitions: usize) -> Result<Self, ConnectorError> {
        if partition >= num_partitions {
            return Err(ConnectorError::Internal {
                message: format!("nexmark source partition {partition} of {num_partitions} does not exist"),
            });
        }
        let (slot_start, slots, columns) = match config.table {
            NexmarkTable::Person => (0, 1, Columns::Person(Box::new(PersonColumns::with_capacity(INITIAL_CAPACITY)))),
            NexmarkTable::Auction => {
                (1, 3, Columns::Auction(Box::new(AuctionColumns::with_capacity(INITIAL_CAPACITY))))
            }
            NexmarkTable::Bid => (4, 46, Columns::Bid(Box::new(BidColumns::with_capacity(INITIAL_CAPACITY)))),
        };
        Ok(NexmarkGenerator {
            schema: schema(config.table),
            tables: Tables::shared(config.seed),
            config,
            partition: partition as u64,
            num_partitions: num_partitions as u64,
            slot_start,
            slots,
            columns,
            offset: 0,
        })
    }

    /// The schema of the batches, [`schema`] of the table.
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// The config this generator runs.
    pub fn config(&self) -> &NexmarkConfig {
        &self.config
    }

    /// Rows produced so far by this partition (the position to commit).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Continues from `offset` rows (a committed [`offset`](Self::offset)); the next batch starts
    /// with the row that followed them.
    pub fn seek(&mut self, offset: u64) {
        self.offset = offset;
    }

    /// How many rows this partition produces in all: `None` for an unbounded run.
    pub fn total_rows(&self) -> Option<u64> {
        Some(self.rows_before(self.config.num_events?))
    }

    /// How many of this partition's rows have an event id below `event_id` (the first offset
    /// whose event id is `event_id` or more; event ids grow with the offset).
    pub fn rows_before(&self, event_id: u64) -> u64 {
        let (mut lo, mut hi) = (0u64, event_id);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.event_id(mid) >= event_id {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }

    /// The event id of the next row this partition produces.
    pub fn next_event_id(&self) -> u64 {
        self.event_id(self.offset)
    }

    /// Whether a bounded run has produced all of this partition's rows.
    pub fn is_finished(&self) -> bool {
        self.config.num_events.is_some_and(|n| self.event_id(self.offset) >= n)
    }

    #[inline]
    fn event_id(&self, k: u64) -> u64 {
        event_id(k, self.partition, self.num_partitions, self.slot_start, self.slots)
    }

    /// The next up to `max_rows` rows, in event-id order; `None` once a bounded run
    /// (`nexmark.events`) is over. An unbounded run always returns `max_rows` rows.
    pub fn next_batch(&mut self, max_rows: usize) -> Option<RecordBatch> {
        if self.is_finished() {
            return None;
        }
        let (p, n, start, slots) = (self.partition, self.num_partitions, self.slot_start, self.slots);
        let id_of = move |k| event_id(k, p, n, start, slots);
        let (config, tables, offset) = (&self.config, self.tables.as_ref(), &mut self.offset);
        let columns = match &mut self.columns {
            Columns::Person(c) => fill(c.as_mut(), config, tables, max_rows, offset, id_of),
            Columns::Auction(c) => fill(c.as_mut(), config, tables, max_rows, offset, id_of),
            Columns::Bid(c) => fill(c.as_mut(), config, tables, max_rows, offset, id_of),
        };
        Some(RecordBatch::try_new(Arc::clone(&self.schema), columns).expect("the columns follow the table's schema"))
    }
}

/// The event id of a partition's row `k`: epoch `p + (k / slots)·P`, slot `k mod slots`.
#[inline]
fn event_id(k: u64, partition: u64, num_partitions: u64, slot_start: u64, slots: u64) -> u64 {
    (partition + (k / slots) * num_partitions) * EPOCH_LEN + slot_start + k % slots
}

/// Appends rows `offset..` until `max_rows` rows or the bounded end, advancing `offset`.
#[inline]
fn fill<C: TableColumns>(
    columns: &mut C,
    config: &NexmarkConfig,
    tables: &Tables,
    max_rows: usize,
    offset: &mut u64,
    event_id: impl Fn(u64) -> u64 + Copy,
) -> Vec<ArrayRef> {
    let end = config.num_events.unwrap_or(u64::MAX);
    for _ in 0..max_rows {
        let id = event_id(*offset);
        if id >= end {
            break;
        }
        let mut rng = Rng::for_event(config.seed, id);
        columns.append(config, id, config.timestamp_ms(id), &mut rng, tables);
        *offset += 1;
    }
    columns.finish()
}
