//! ChangelogNormalize: makes an upsert changelog (an `upsert-kafka` source's) a retracting one.
//!
//! Changelog mode: upsert in (`+I`/`+U` replace the row of their key, `-D` deletes the key's
//! row and may carry only the key columns) → retract out, with the same stream key.
//!
//! Flink's ChangelogNormalize (`DeduplicateFunctionHelper.processLastRowOnChangelog`), row by
//! row in input order:
//! - an upsert of a key without a row: `+I` new, stored;
//! - an upsert of a key with a row: `-U` stored, `+U` new, stored; nothing when the new row
//!   equals the stored one (a re-sent record changes nothing);
//! - a delete of a key with a row: `-D` of the stored row (with all its columns), removed;
//! - a delete of a key without a row: nothing (a tombstone of a key never seen, or already
//!   deleted).
//!
//! State, one table `rows`: key = the stream key columns, value = the whole row. With a state
//! TTL (`table.exec.state.ttl`) a key's row expires after that long without an upsert, and
//! then its key is unknown again.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;

use crate::error::Result;
use crate::runtime::changelog::{Op, StreamChunk};
use crate::runtime::operator::{OpContext, Operator};
use super::Origin;
use crate::state::{EpochWrites, RowCodec, StateTable, Store, TableRef};

/// The stable name of the last-row-per-key table.
pub const ROWS: &str = "rows";

/// See the module docs.
pub struct ChangelogNormalize {
    key: Vec<usize>,
    key_codec: RowCodec,
    row_codec: RowCodec,
    rows: StateTable,
}

impl ChangelogNormalize {
    /// The normalizer of rows of `schema` (their column types) keyed by columns `key`, its state in the table
    /// `state_table(ROWS)` names, loaded from `store`, entries living `ttl_ms` (`None`: forever).
    ///
    /// # Errors
    /// `Unsupported` for column types the state codec cannot store; `Storage` when the state
    /// cannot be read.
    pub fn try_new(
        schema: SchemaRef,
        key: Vec<usize>,
        ttl_ms: Option<i64>,
        state_table: &mut dyn FnMut(&str) -> TableRef,
        store: &Store,
    ) -> Result<Self> {
        let types: Vec<_> = schema.fields().iter().map(|f| f.data_type().clone()).collect();
        let key_codec = RowCodec::try_new(key.iter().map(|k| types[*k].clone()).collect())?;
        let row_codec = RowCodec::try_new(types)?;
        let rows = StateTable::point(state_table(ROWS), store).with_ttl(ttl_ms);
        Ok(Self { key, key_codec, row_codec, rows })
    }
}

impl Operator for ChangelogNormalize {
    fn name(&self) -> &'static str {
        "ChangelogNormalize"
    }

    fn state_tables(&self) -> &'static [&'static str] {
        &[ROWS]
    }

    fn state(&self) -> Vec<(String, &StateTable)> {
        vec![(ROWS.to_string(), &self.rows)]
    }

    fn key_groups(&self, _input: usize, chunk: &StreamChunk) -> Result<Vec<u16>> {
        super::key_groups_by_columns(&self.key, &self.key_codec, chunk)
    }

    fn process_batch(&mut self, _input: usize, chunk: StreamChunk, ctx: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        let key_columns: Vec<_> = self.key.iter().map(|k| Arc::clone(chunk.batch.column(*k))).collect();
        let keys = self.key_codec.encode_rows(&key_columns, chunk.len())?;
        let rows = self.row_codec.encode_rows(chunk.batch.columns(), chunk.len())?;
        let mut out: Vec<(Op, Origin)> = Vec::new();
        let mut stored: Vec<Vec<u8>> = Vec::new();
        for (i, ((op, key), row)) in chunk.ops.iter().zip(keys).zip(rows).enumerate() {
            let old = self.rows.get(ctx.store, &key)?;
            if op.is_insert() {
                match old {
                    Some(old) if old == row => continue,
                    Some(old) => {
                        out.push((Op::UpdateBefore, Origin::Stored(stored.len())));
                        stored.push(old);
                        out.push((Op::UpdateAfter, Origin::Input(i as u32)));
                    }
                    None => out.push((Op::Insert, Origin::Input(i as u32))),
                }
                self.rows.put(key, row);
            } else if let Some(old) = old {
                out.push((Op::Delete, Origin::Stored(stored.len())));
                stored.push(old);
                self.rows.delete(key);
            }
        }
        super::emit_rows(out, &stored, &self.row_codec, &chunk)
    }

    fn on_barrier(&mut self, writes: &mut EpochWrites, ctx: &OpContext<'_>) -> Result<()> {
        self.rows.sweep_expired(ctx.store)?;
        self.rows.flush(writes);
        Ok(())
    }
}
