//! SessionWindowAggregate: a SESSION window aggregation over an append-only input, grouped by
//! the SESSION's `PARTITION BY` columns, with EMIT ON WINDOW CLOSE or not (Flink's session
//! window aggregation: `MergingWindowSet` with mergeable accumulators). Planned by
//! [`crate::plan::slicing`] ("Session windows") over a window assigner that gives each row its
//! lone session `[t, t + gap)`, instead of the session assigner (which keeps every row of an
//! open session and retracts them all when the session grows) + GroupAggregate; its output
//! makes the same view (with EMIT ON WINDOW CLOSE, the same rows).
//!
//! Each group keeps its open sessions, each with one accumulator per aggregate (COUNT, SUM,
//! AVG, MIN, MAX, as the sliced window aggregate's). A row's lone session merges with every
//! open session of its group that it overlaps or touches (`start <= other.end && end >=
//! other.start`, Flink's `TimeWindow.intersects`: rows exactly `gap` apart are one session,
//! as [`crate::plan::window::sessions_of`] has it): the merged session spans them all and its
//! accumulators are theirs merged.
//!
//! Output, with EMIT ON WINDOW CLOSE: append-only. When the watermark reaches a session's
//! `window_time` (`window_end - 1 ms`), one `+I` row: the group columns, with `window_start`,
//! `window_end` and `window_time` those of the session, then the aggregates. Sessions are
//! emitted in end order, then group key order, then start order.
//!
//! Output without it (a view that shows open sessions as they grow): retracting. After each
//! chunk, a `-D` of the row of every session the chunk changed or merged away, as it was
//! emitted, then a `+I` of the new row of every session the chunk changed (group key order,
//! then start order); the view always holds one row per session. When the watermark reaches a
//! session's `window_time`, it leaves state and its row stays as it is.
//!
//! Either way a closed session leaves state, so a later row within its gap starts a new
//! session (Flink, and the session assigner).
//!
//! A row is late when its session, merged with the open sessions it touches, is closed (Flink's
//! merging window operator: `isWindowLate(actualWindow)`): when its lone session's
//! `window_time` is at or below this operator's watermark and it touches no open session. Late
//! rows are dropped and counted here (the window assigner below passes every row on, since only
//! this operator knows the open sessions); they do not reach a `'late-rows.table'`.
//!
//! # State
//! - `sessions`: key = the group key (the non-window group columns, memcomparable); value = its
//!   open sessions, each start and end (ms, i64 little-endian) then its accumulators
//!   ([`encode_accs`]). Written at a barrier for the groups that changed in the epoch, deleted
//!   when a group has no open session. Parallel instances (a hash exchange on the group key)
//!   share the table; each restores its own key groups' entries.
//! - `watermark`: the last watermark (key empty; ms, i64 little-endian) and the late-row count
//!   (key `late`; u64 little-endian).

use std::collections::BTreeSet;
use std::sync::Arc;

use ahash::{AHashMap, AHashSet};
use arrow::array::{Array, ArrayRef, RecordBatch, TimestampMillisecondArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, TimeUnit};

use super::{accumulators, apply, decode_accs, encode_accs, eval_args, meta_word, AggColumn, SlicedWindowAggOptions};
use super::slices::Accs;
use crate::error::{Result, WeirError};
use crate::plan::slicing::WindowColumn;
use crate::plan::window::WindowKind;
use crate::runtime::changelog::{Op, StreamChunk};
use crate::runtime::operator::{OpContext, Operator};
use crate::runtime::operators::group_agg::downcast;
use crate::state::key_group::key_group;
use crate::state::{EpochWrites, KeyGroups, RowCodec, StateTable, Store, TableRef};

/// The stable name of the table of open sessions.
pub const SESSIONS: &str = "sessions";
/// The stable name of the watermark table.
pub const WATERMARK: &str = "watermark";
/// The key of the late-row count in the watermark table.
const LATE_KEY: &[u8] = b"late";

/// One open session of a group.
#[derive(Debug, Clone, PartialEq)]
struct Session {
    /// `window_start`, ms: its first row's time.
    start: i64,
    /// `window_end`, ms: its last row's time + gap.
    end: i64,
    accs: Accs,
    /// Changed in the chunk being processed, so its row is emitted at the chunk's end (without
    /// EMIT ON WINDOW CLOSE). Not stored: false between chunks.
    changed: bool,
}

/// The operator; see the module docs.
pub struct SessionWindowAggregate {
    opts: SlicedWindowAggOptions,
    /// Indexes of the group expressions that are not window columns (the group key).
    key_exprs: Vec<usize>,
    /// Index of the `window_end` group expression (the row's lone session's end).
    end_expr: usize,
    /// The session gap, ms.
    gap_ms: i64,
    /// Codec of the group key.
    key_codec: RowCodec,
    /// Codec of each MIN/MAX argument.
    value_codecs: Vec<Option<RowCodec>>,
    /// Accumulators of no rows.
    empty: Accs,
    /// Each group's open sessions, in start order (disjoint: merged sessions are one).
    groups: AHashMap<Vec<u8>, Vec<Session>>,
    /// (end, group key, start) of every open session: the order they fire in.
    by_end: BTreeSet<(i64, Vec<u8>, i64)>,
    /// Groups changed since the last barrier.
    dirty: AHashSet<Vec<u8>>,
    /// Without EMIT ON WINDOW CLOSE: the sessions, as last emitted, that the chunk being
    /// processed changed or merged away, and the groups whose sessions it changed.
    retracted: Vec<(Vec<u8>, Session)>,
    touched: AHashSet<Vec<u8>>,
    /// The last watermark, ms.
    watermark_ms: Option<i64>,
    /// Late rows dropped, in all.
    late_rows: u64,
    sessions_table: StateTable,
    meta: StateTable,
    /// The key groups of this instance: it restores only their groups' sessions.
    key_groups: KeyGroups,
}

impl SessionWindowAggregate {
    /// A session window aggregate, its state in `state_table(SESSIONS)` and
    /// `state_table(WATERMARK)`, loaded from `store`.
    ///
    /// # Errors
    /// `Internal` for a window that is not SESSION or group columns without `window_end`;
    /// `Unsupported` for an aggregate with DISTINCT or FILTER or argument types the
    /// accumulators cannot hold; `Storage` for corrupt state.
    pub fn try_new(opts: SlicedWindowAggOptions, state_table: &mut dyn FnMut(&str) -> TableRef, store: &Store) -> Result<Self> {
        if opts.window.kind != WindowKind::Session || opts.window.size_ms <= 0 {
            return Err(WeirError::internal(format!("session window aggregate over {} windows", opts.window.kind.name())));
        }
        let end_expr = opts
            .window_columns
            .iter()
            .position(|c| *c == Some(WindowColumn::End))
            .ok_or_else(|| WeirError::internal("session window aggregate without a window_end group column"))?;
        let types: Vec<DataType> = opts.schema.fields().iter().map(|f| f.data_type().clone()).collect();
        let key_exprs: Vec<usize> = (0..opts.group_exprs.len()).filter(|i| opts.window_columns[*i].is_none()).collect();
        let key_codec = RowCodec::try_new(key_exprs.iter().map(|i| types[*i].clone()).collect())?;
        let (value_codecs, empty) = accumulators(&opts.aggs)?;
        let mut meta = StateTable::new(state_table(WATERMARK));
        let watermark_ms = meta_word(&mut meta, store, b"", "session window aggregate watermark")?.map(i64::from_le_bytes);
        let late_rows = meta_word(&mut meta, store, LATE_KEY, "session window aggregate late-row count")?.map_or(0, u64::from_le_bytes);
        let sessions = state_table(SESSIONS);
        let key_groups = sessions.key_groups.clone();
        let mut op = Self {
            gap_ms: opts.window.size_ms,
            opts,
            key_exprs,
            end_expr,
            key_codec,
            value_codecs,
            empty,
            groups: AHashMap::new(),
            by_end: BTreeSet::new(),
            dirty: AHashSet::new(),
            retracted: Vec::new(),
            touched: AHashSet::new(),
            watermark_ms,
            late_rows,
            sessions_table: StateTable::new(sessions),
            meta,
            key_groups,
        };
        op.restore(store)?;
        Ok(op)
    }

    /// Loads the open sessions of this instance's groups.
    fn restore(&mut self, store: &Store) -> Result<()> {
        let mut restored = Vec::new();
        store.scan(self.sessions_table.id(), |key, value| {
            if self.key_groups.owns(key) {
                restored.push((key.to_vec(), decode_sessions(value, &self.empty)?));
            }
            Ok(true)
        })?;
        for (key, sessions) in restored {
            for s in &sessions {
                self.by_end.insert((s.end, key.clone(), s.start));
            }
            self.groups.insert(key, sessions);
        }
        Ok(())
    }

    /// Whether a row whose lone session is `[start, end)` is late: its session, merged with
    /// the open sessions of group `key` it overlaps or touches, is closed (its `window_time` at
    /// or below the watermark; Flink's `isWindowLate(actualWindow)`). Open sessions are not
    /// closed, so it is late when its lone session is closed and touches none of them.
    fn is_late(&self, key: &[u8], start: i64, end: i64) -> bool {
        if self.watermark_ms.is_none_or(|wm| end - 1 > wm) {
            return false;
        }
        let Some(sessions) = self.groups.get(key) else { return true };
        let first = sessions.partition_point(|s| s.end < start);
        sessions.get(first).is_none_or(|s| s.start > end)
    }

    /// Adds a row whose lone session is `[start, end)` to group `key`: merges it with the open
    /// sessions it overlaps or touches, and applies it to the merged accumulators with `add`.
    /// Without EMIT ON WINDOW CLOSE, notes the sessions whose emitted rows this changes.
    fn add(&mut self, key: &[u8], start: i64, end: i64, add: impl FnOnce(&mut Accs)) {
        let updating = !self.opts.emit_on_window_close;
        if !self.groups.contains_key(key) {
            self.groups.insert(key.to_vec(), Vec::new());
        }
        let sessions = self.groups.get_mut(key).expect("inserted above");
        // Sessions are disjoint and in start order: those the row meets are consecutive.
        let first = sessions.partition_point(|s| s.end < start);
        let last = first + sessions[first..].iter().take_while(|s| s.start <= end).count();
        let merged = if last == first + 1 && sessions[first].start <= start && sessions[first].end >= end {
            // Inside one session: it stays as it is but for the row.
            let session = &mut sessions[first];
            if updating && !session.changed {
                self.retracted.push((key.to_vec(), session.clone()));
            }
            session
        } else {
            let mut merged = Session { start, end, accs: self.empty.clone(), changed: false };
            for s in sessions.drain(first..last) {
                self.by_end.remove(&(s.end, key.to_vec(), s.start));
                merged.start = merged.start.min(s.start);
                merged.end = merged.end.max(s.end);
                merged.accs.merge(&s.accs);
                if updating && !s.changed {
                    self.retracted.push((key.to_vec(), s));
                }
            }
            self.by_end.insert((merged.end, key.to_vec(), merged.start));
            sessions.insert(first, merged);
            &mut sessions[first]
        };
        add(&mut merged.accs);
        if updating {
            merged.changed = true;
            if !self.touched.contains(key) {
                self.touched.insert(key.to_vec());
            }
        }
        if !self.dirty.contains(key) {
            self.dirty.insert(key.to_vec());
        }
    }

    /// Without EMIT ON WINDOW CLOSE, at the end of a chunk: the retraction of the rows of the
    /// sessions it changed or merged away, then the rows of the sessions it changed.
    fn emit_changes(&mut self) -> Result<Option<StreamChunk>> {
        let mut rows = std::mem::take(&mut self.retracted);
        let mut ops = vec![Op::Delete; rows.len()];
        let mut keys: Vec<Vec<u8>> = self.touched.drain().collect();
        keys.sort_unstable();
        for key in keys {
            let Some(sessions) = self.groups.get_mut(&key) else { continue };
            for s in sessions.iter_mut().filter(|s| s.changed) {
                s.changed = false;
                rows.push((key.clone(), s.clone()));
                ops.push(Op::Insert);
            }
        }
        if rows.is_empty() {
            return Ok(None);
        }
        self.output(&rows, ops).map(Some)
    }

    /// Removes every session whose `window_time` (end - 1) is at or below `wm`, and emits
    /// them under EMIT ON WINDOW CLOSE.
    fn fire(&mut self, wm: i64) -> Result<Option<StreamChunk>> {
        let mut fired: Vec<(Vec<u8>, Session)> = Vec::new();
        while let Some((end, _, _)) = self.by_end.first() {
            if end - 1 > wm {
                break;
            }
            let (end, key, start) = self.by_end.pop_first().expect("checked above");
            let sessions = self.groups.get_mut(&key).ok_or_else(|| WeirError::internal("session of no group"))?;
            let i = sessions
                .iter()
                .position(|s| s.start == start && s.end == end)
                .ok_or_else(|| WeirError::internal("session index out of step"))?;
            let session = sessions.remove(i);
            if sessions.is_empty() {
                self.groups.remove(&key);
            }
            self.dirty.insert(key.clone());
            fired.push((key, session));
        }
        if fired.is_empty() || !self.opts.emit_on_window_close {
            return Ok(None);
        }
        let ops = vec![Op::Insert; fired.len()];
        self.output(&fired, ops).map(Some)
    }

    /// The output chunk of the sessions `fired`, in their order, with `ops`.
    fn output(&self, fired: &[(Vec<u8>, Session)], ops: Vec<Op>) -> Result<StreamChunk> {
        let n = fired.len();
        let mut keys = self.key_codec.decoder(n);
        for (key, _) in fired {
            keys.append(key)?;
        }
        let mut key_cols = keys.finish()?.into_iter();
        let mut agg_columns = self.opts.aggs.iter().map(|agg| AggColumn::new(agg, n)).collect::<Result<Vec<_>>>()?;
        for (_, session) in fired {
            for ((column, agg), acc) in agg_columns.iter_mut().zip(&self.opts.aggs).zip(&session.accs.accs) {
                column.push(agg, acc)?;
            }
        }
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.opts.schema.fields().len());
        for (i, role) in self.opts.window_columns.iter().enumerate() {
            let values: Vec<i64> = match role {
                None => {
                    columns.push(key_cols.next().ok_or_else(|| WeirError::internal("missing group key column"))?);
                    continue;
                }
                Some(WindowColumn::Start) => fired.iter().map(|(_, s)| s.start).collect(),
                Some(WindowColumn::End) => fired.iter().map(|(_, s)| s.end).collect(),
                Some(WindowColumn::Time) => fired.iter().map(|(_, s)| s.end - 1).collect(),
            };
            let array: ArrayRef = Arc::new(TimestampMillisecondArray::from(values));
            columns.push(cast(&array, self.opts.schema.field(i).data_type())?);
        }
        let agg_types = self.opts.schema.fields()[self.opts.group_exprs.len()..].iter().map(|f| f.data_type());
        for ((column, codec), t) in agg_columns.into_iter().zip(&self.value_codecs).zip(agg_types) {
            columns.push(column.finish(codec.as_ref(), n, t)?);
        }
        let batch = RecordBatch::try_new(Arc::clone(&self.opts.schema), columns)?;
        Ok(StreamChunk::new(ops, batch))
    }

    /// The encoded group key of every row of `batch`.
    fn keys(&self, batch: &RecordBatch) -> Result<Vec<Vec<u8>>> {
        let n = batch.num_rows();
        let cols = self
            .key_exprs
            .iter()
            .map(|i| Ok(self.opts.group_exprs[*i].evaluate(batch)?.into_array(n)?))
            .collect::<Result<Vec<_>>>()?;
        self.key_codec.encode_rows(&cols, n)
    }
}

impl Operator for SessionWindowAggregate {
    fn name(&self) -> &'static str {
        "SessionWindowAggregate"
    }

    fn state_tables(&self) -> &'static [&'static str] {
        &[SESSIONS, WATERMARK]
    }

    fn state(&self) -> Vec<(String, &StateTable)> {
        vec![(SESSIONS.to_string(), &self.sessions_table)]
    }

    fn key_groups(&self, _input: usize, chunk: &StreamChunk) -> Result<Vec<u16>> {
        Ok(self.keys(&chunk.batch)?.iter().map(|k| key_group(k)).collect())
    }

    fn process_batch(&mut self, _input: usize, chunk: StreamChunk, _ctx: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        let n = chunk.len();
        let batch = &chunk.batch;
        let keys = self.keys(batch)?;
        let ends = self.opts.group_exprs[self.end_expr].evaluate(batch)?.into_array(n)?;
        let ends = cast(&ends, &DataType::Timestamp(TimeUnit::Millisecond, None))?;
        let ends = downcast::<TimestampMillisecondArray>(&ends)?;
        let args = eval_args(&self.opts.aggs, &self.value_codecs, batch)?;
        let mut late = 0;
        for (row, key) in keys.iter().enumerate() {
            if ends.is_null(row) {
                continue;
            }
            if !chunk.ops[row].is_insert() {
                return Err(WeirError::internal("session window aggregate: a retraction in its append-only input"));
            }
            let end = ends.value(row);
            if self.is_late(key, end - self.gap_ms, end) {
                late += 1;
                continue;
            }
            self.add(key, end - self.gap_ms, end, |accs| apply(accs, &args, row, 1));
        }
        if late > 0 {
            self.late_rows += late;
            self.meta.put(LATE_KEY.to_vec(), self.late_rows.to_le_bytes().to_vec());
        }
        if self.opts.emit_on_window_close {
            return Ok(None);
        }
        self.emit_changes()
    }

    fn on_watermark(&mut self, _input: usize, watermark_ms: i64, _ctx: &OpContext<'_>) -> Result<(Option<StreamChunk>, Option<i64>)> {
        if self.watermark_ms.is_some_and(|w| watermark_ms <= w) {
            return Ok((None, Some(watermark_ms)));
        }
        self.watermark_ms = Some(watermark_ms);
        self.meta.put(Vec::new(), watermark_ms.to_le_bytes().to_vec());
        Ok((self.fire(watermark_ms)?, Some(watermark_ms)))
    }

    fn num_late_rows(&self) -> u64 {
        self.late_rows
    }

    fn on_barrier(&mut self, writes: &mut EpochWrites, _ctx: &OpContext<'_>) -> Result<()> {
        // Written straight into the epoch's batch (no overlay: this table is only read at
        // restore).
        let table = self.sessions_table.id();
        let mut value = Vec::new();
        for key in self.dirty.drain() {
            match self.groups.get(&key) {
                Some(sessions) => {
                    value.clear();
                    encode_sessions(&mut value, sessions);
                    writes.put(table, &key, &value);
                }
                None => writes.delete(table, &key),
            }
        }
        self.meta.flush(writes);
        Ok(())
    }
}

/// Appends a group's sessions: each start and end (i64 little-endian) and accumulators.
fn encode_sessions(out: &mut Vec<u8>, sessions: &[Session]) {
    for s in sessions {
        out.extend_from_slice(&s.start.to_le_bytes());
        out.extend_from_slice(&s.end.to_le_bytes());
        encode_accs(out, &s.accs);
    }
}

/// The sessions [`encode_sessions`] wrote, their accumulators shaped like `shape`.
fn decode_sessions(bytes: &[u8], shape: &Accs) -> Result<Vec<Session>> {
    let corrupt = || WeirError::storage("corrupt session window aggregate state");
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let at = |p: usize| -> Result<i64> {
            Ok(i64::from_le_bytes(bytes.get(p..p + 8).ok_or_else(corrupt)?.try_into().expect("8 bytes")))
        };
        let (start, end) = (at(pos)?, at(pos + 8)?);
        let (accs, len) = decode_accs(&bytes[pos + 16..], shape)?;
        pos += 16 + len;
        out.push(Session { start, end, accs, changed: false });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_accs(rows: i64) -> Accs {
        Accs { rows, accs: vec![super::super::slices::Acc::Count(rows)] }
    }

    #[test]
    fn sessions_round_trip_through_their_encoding() {
        let sessions = vec![
            Session { start: -5, end: 10_000, accs: count_accs(3), changed: false },
            Session { start: 20_000, end: 31_000, accs: count_accs(1), changed: false },
        ];
        let mut bytes = Vec::new();
        encode_sessions(&mut bytes, &sessions);
        assert_eq!(decode_sessions(&bytes, &count_accs(0)).unwrap(), sessions);
        assert!(decode_sessions(&bytes[..bytes.len() - 1], &count_accs(0)).is_err());
    }
}
