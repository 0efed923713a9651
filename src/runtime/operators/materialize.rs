//! Materialize: keeps a materialized view's rows in its state table and forwards its changelog
//! to the views built on it.
//!
//! Changelog mode: any in → the same out.
//!
//! State, one table (the view's rows, read by `SELECT`):
//! - keyed by the stream key when the plan has one: key = stream key columns, value = the whole
//!   row; `+I`/`+U` put, `-D`/`-U` delete (upsert semantics);
//! - otherwise a multiset: key = the whole row, value = its count (i64 little-endian);
//!   `+I`/`+U` add one copy, `-D`/`-U` remove one. A count that would go below zero is our bug
//!   (a retraction of a row never inserted) and fails the epoch.
//!
//! Nothing frees the state but deletes: the view is the state.
//!
//! # Change feed
//! While the view has subscribers ([`crate::runtime::feed`]), each row's change is also kept as
//! diff rows and published when its epoch commits ([`Operator::on_committed`]): in keyed mode
//! the row a put replaces or a delete removes is read from the state first (-1 of the old row,
//! +1 of the new), so the diffs are right whatever the changelog's shape (upsert or retract);
//! in multiset mode each row's diff is its op's sign.

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch};
use arrow::compute::interleave;
use arrow::datatypes::SchemaRef;

use crate::error::{Result, WeirError};
use crate::runtime::changelog::StreamChunk;
use crate::runtime::feed::{with_diffs, ChangeFeed};
use crate::runtime::operator::{OpContext, Operator};
use crate::state::{EpochWrites, RowCodec, StateTable};

/// The stable name of the view's row table.
pub const ROWS: &str = "rows";

/// How a view's rows are stored; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageMode {
    /// Keyed by these output columns.
    Keyed(Vec<usize>),
    /// A multiset of whole rows.
    Multiset,
}

/// Writes a view's changelog into its state table.
pub struct Materialize {
    mode: StorageMode,
    /// Codec of the whole row.
    row_codec: RowCodec,
    /// Codec of the stream key columns (keyed mode).
    key_codec: Option<RowCodec>,
    rows: StateTable,
    /// Where the view's committed changes go; none for a root without subscribers to have.
    feed: Option<Arc<ChangeFeed>>,
    /// This epoch's changes as diff rows, kept while the feed has subscribers.
    pending: Vec<RecordBatch>,
    /// The changes up to the last barrier, published when its epoch is committed (the job may
    /// have gone on with the next epoch's rows by then: [`Operator::commits_behind`]).
    barrier_changes: Vec<RecordBatch>,
}

impl Materialize {
    /// A materialization of rows of `schema` into state table `table`.
    ///
    /// # Errors
    /// `Unsupported` for column types the state codec cannot store.
    pub fn try_new(schema: &SchemaRef, mode: StorageMode, table: u32) -> Result<Self> {
        let types: Vec<_> = schema.fields().iter().map(|f| f.data_type().clone()).collect();
        let key_codec = match &mode {
            StorageMode::Keyed(cols) => {
                Some(RowCodec::try_new(cols.iter().map(|c| types[*c].clone()).collect())?)
            }
            StorageMode::Multiset => None,
        };
        Ok(Self {
            mode,
            row_codec: RowCodec::try_new(types)?,
            key_codec,
            rows: StateTable::new(table),
            feed: None,
            pending: Vec::new(),
            barrier_changes: Vec::new(),
        })
    }

    /// The same, publishing the view's committed changes to `feed`.
    pub fn with_feed(mut self, feed: Arc<ChangeFeed>) -> Self {
        self.feed = Some(feed);
        self
    }

    /// The diff rows of a keyed chunk whose rows' current values (before the chunk, each key
    /// as the rows before it in the chunk left it) are `olds`: -1 of each old row, +1 of each
    /// inserted one, in the chunk's order.
    fn keyed_diffs(&self, feed: &ChangeFeed, chunk: &StreamChunk, olds: &[Option<Vec<u8>>]) -> Result<RecordBatch> {
        let mut decoder = self.row_codec.decoder(olds.len());
        let mut order: Vec<(usize, usize)> = Vec::with_capacity(chunk.len() * 2);
        let mut diffs: Vec<i64> = Vec::with_capacity(chunk.len() * 2);
        let mut retracted = 0;
        for (i, (op, old)) in chunk.ops.iter().zip(olds).enumerate() {
            if let Some(old) = old {
                decoder.append(old)?;
                order.push((1, retracted));
                diffs.push(-1);
                retracted += 1;
            }
            if op.is_insert() {
                order.push((0, i));
                diffs.push(1);
            }
        }
        let old_columns = decoder.finish()?;
        let columns = chunk
            .batch
            .columns()
            .iter()
            .zip(&old_columns)
            .map(|(new, old)| Ok(interleave(&[new.as_ref(), old.as_ref()], &order)?))
            .collect::<Result<Vec<_>>>()?;
        with_diffs(feed.schema(), Int64Array::from(diffs), columns)
    }
}

impl Operator for Materialize {
    fn name(&self) -> &'static str {
        "Materialize"
    }

    fn state_tables(&self) -> &'static [&'static str] {
        &[ROWS]
    }

    fn state(&self) -> Vec<(String, &StateTable)> {
        vec![(ROWS.to_string(), &self.rows)]
    }

    fn process_batch(
        &mut self,
        _input: usize,
        chunk: StreamChunk,
        ctx: &OpContext<'_>,
    ) -> Result<Option<StreamChunk>> {
        let rows = self.row_codec.encode_rows(chunk.columns(), chunk.len())?;
        match (&self.mode, &self.key_codec) {
            (StorageMode::Keyed(cols), Some(key_codec)) => {
                let key_cols: Vec<_> =
                    cols.iter().map(|c| std::sync::Arc::clone(chunk.batch.column(*c))).collect();
                let keys = key_codec.encode_rows(&key_cols, chunk.len())?;
                let feed = self.feed.as_ref().filter(|f| f.is_active()).map(Arc::clone);
                let mut olds = Vec::with_capacity(if feed.is_some() { chunk.len() } else { 0 });
                for ((op, key), row) in chunk.ops.iter().zip(keys).zip(rows) {
                    if feed.is_some() {
                        olds.push(self.rows.get(ctx.store, &key)?);
                    }
                    if op.is_insert() {
                        self.rows.put(key, row);
                    } else {
                        self.rows.delete(key);
                    }
                }
                if let Some(feed) = feed {
                    let diffs = self.keyed_diffs(&feed, &chunk, &olds)?;
                    self.pending.push(diffs);
                }
            }
            _ => {
                if let Some(feed) = self.feed.as_ref().filter(|f| f.is_active()) {
                    self.pending.push(feed.diff_rows(&chunk)?);
                }
                for (op, row) in chunk.ops.iter().zip(rows) {
                    let count = match self.rows.get(ctx.store, &row)? {
                        Some(v) => decode_count(&v)?,
                        None => 0,
                    };
                    let count = count + op.sign();
                    if count < 0 {
                        return Err(WeirError::internal(
                            "materialize: retraction of a row the view does not hold",
                        ));
                    }
                    if count == 0 {
                        self.rows.delete(row);
                    } else {
                        self.rows.put(row, count.to_le_bytes().to_vec());
                    }
                }
            }
        }
        Ok(Some(chunk))
    }

    fn on_barrier(&mut self, writes: &mut EpochWrites, _ctx: &OpContext<'_>) -> Result<()> {
        self.rows.flush(writes);
        self.barrier_changes.append(&mut self.pending);
        Ok(())
    }

    fn on_committed(&mut self, epoch: u64) {
        let changes = std::mem::take(&mut self.barrier_changes);
        if let Some(feed) = self.feed.as_ref().filter(|f| f.is_active() || !changes.is_empty()) {
            feed.publish(epoch, changes);
        }
    }
}

/// The count of a multiset entry.
pub fn decode_count(v: &[u8]) -> Result<i64> {
    Ok(i64::from_le_bytes(
        v.try_into().map_err(|_| WeirError::storage("multiset count is not 8 bytes"))?,
    ))
}
