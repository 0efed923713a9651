//! Write statements' changes to plain tables, committed as one epoch.
//!
//! A write statement (or every statement of a transaction block, at COMMIT) computes its
//! changes without touching the engine: the rows it writes, readable by the statements after
//! it ([`TableWrites`]), and the changelog each write gives its table. The engine then commits
//! them together ([`Engine::commit_table_changes`]): the rows, the changelogs pushed through
//! every view that reads the tables, the views' state, the tables' watermarks, in one epoch.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::RecordBatch;

use super::Engine;
use crate::error::Result;
use crate::runtime::feed::ChangeFeed;
use crate::runtime::StreamChunk;
use crate::state::{EpochWrites, TableWrites};

/// What write statements did to plain tables, not committed yet.
#[derive(Debug, Default, Clone)]
pub struct TableChanges {
    /// The rows written, by state table and key.
    pub writes: TableWrites,
    /// The changelog of each write, in order: (table, chunk).
    pub chunks: Vec<(String, StreamChunk)>,
    /// The watermark each table reaches with the rows written (its WATERMARK expression's
    /// largest value), ms.
    pub watermarks: BTreeMap<String, i64>,
    /// Watermarks that move between the chunks: `(n, table, ms)` raises `table`'s watermark
    /// once the first `n` chunks have gone through the views, in order of `n` (an INSERT's
    /// rows arrive in the order written and the watermark moves row by row: SQL.md).
    pub marks: Vec<(usize, String, i64)>,
    /// The next row id of each keyless table written.
    pub row_ids: HashMap<u32, u64>,
}

impl TableChanges {
    /// The changes of one statement that is its own epoch: its writes are a log
    /// ([`TableWrites::log`]), as nothing after it in the epoch reads them.
    pub fn one_statement() -> Self {
        Self { writes: TableWrites::log(), ..Self::default() }
    }

    /// The next row id of keyless table `id`: the one after this change's last, else
    /// `first(id)`.
    ///
    /// # Errors
    /// `first`'s.
    pub fn next_row_id(&self, id: u32, first: &dyn Fn(u32) -> Result<u64>) -> Result<u64> {
        match self.row_ids.get(&id) {
            Some(n) => Ok(*n),
            None => first(id),
        }
    }

    /// Raises table `table`'s watermark to `watermark_ms` (ms).
    pub fn raise_watermark(&mut self, table: &str, watermark_ms: i64) {
        let w = self.watermarks.entry(table.to_string()).or_insert(watermark_ms);
        *w = (*w).max(watermark_ms);
    }

    /// Raises table `table`'s watermark to `watermark_ms` before the next chunk goes through
    /// the views ([`TableChanges::marks`]).
    pub fn mark_watermark(&mut self, table: &str, watermark_ms: i64) {
        self.marks.push((self.chunks.len(), table.to_string(), watermark_ms));
        self.raise_watermark(table, watermark_ms);
    }

    /// The watermark `table` has reached within these changes, ms.
    pub fn watermark(&self, table: &str) -> Option<i64> {
        self.watermarks.get(table).copied()
    }
}

impl Engine {
    /// Commits `changes` as one epoch: their rows, their changelogs pushed through the views
    /// reading the tables (and the views built on those), the late rows that routes, the
    /// tables' new watermarks. On failure the engine reloads from the last commit, so nothing
    /// of `changes` remains.
    ///
    /// # Errors
    /// An operator's (a view's rows that break its state's rules), the commit's; the reload's
    /// when that fails too (logged).
    pub fn commit_table_changes(&mut self, changes: TableChanges) -> Result<()> {
        super::blocking(|| {
            if let Err(e) = self.apply_table_changes(changes) {
                if let Err(reload) = self.reload() {
                    tracing::error!("reloading after a failed statement failed: {reload}");
                }
                return Err(e);
            }
            Ok(())
        })
    }

    fn apply_table_changes(&mut self, changes: TableChanges) -> Result<()> {
        let TableChanges { writes: rows, chunks, watermarks, marks, row_ids } = changes;
        let mut writes = EpochWrites::with_capacity(rows.log_bytes());
        rows.write_into(&mut writes);
        drop(rows);
        // The tables' own changes for their subscribers, published once committed.
        let mut followed: BTreeMap<String, (Arc<ChangeFeed>, Vec<RecordBatch>)> = BTreeMap::new();
        let mut marks = marks.into_iter().peekable();
        for (i, (table, chunk)) in chunks.iter().enumerate() {
            while let Some((_, marked, watermark)) = marks.next_if(|(n, ..)| *n <= i) {
                self.advance_watermark(&marked, watermark, &mut writes)?;
            }
            if let Some(feed) = self.feeds().get(table).filter(|f| f.is_active()) {
                let diffs = feed.diff_rows(chunk)?;
                followed.entry(table.clone()).or_insert_with(|| (feed, Vec::new())).1.push(diffs);
            }
            self.propagate(table, chunk)?;
        }
        self.row_ids.extend(row_ids);
        self.flush_late_rows(&mut writes)?;
        for (table, watermark) in watermarks {
            self.advance_watermark(&table, watermark, &mut writes)?;
        }
        // A cancel or timeout that came during the last chunk still stops the statement.
        self.check_interrupt()?;
        let epoch = self.commit_epoch(writes, None)?;
        for (feed, changes) in followed.into_values() {
            feed.publish(epoch, changes);
        }
        Ok(())
    }
}
