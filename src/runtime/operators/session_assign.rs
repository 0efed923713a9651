//! SessionAssign: the streaming side of SESSION windows.
//!
//! Keeps the rows of open sessions per partition (PARTITION BY columns, or one partition for
//! all rows) and gives each row its session `[first row, last row + gap)`. When a row extends or
//! bridges sessions, the rows whose session changed are retracted with the old window and
//! re-emitted with the new one (`-U`/`+U`), so a GROUP BY window_start, window_end downstream
//! follows merges. A row is late when its session, after it merged with the open sessions it
//! touches, is closed (Flink's merging window operator: `isWindowLate(actualWindow)`): when its
//! own window is (`t + gap - 1 <= watermark`) and it touches no open session. It is then
//! dropped and counted, as is a row whose event time is NULL (in no session) and a retraction
//! of a closed session's row. When the watermark reaches a session's `window_time` (`end - 1`)
//! the session is closed and its rows leave state; a later row within its gap starts a new
//! session, as in Flink.
//!
//! Changelog mode: any in → retract out.
//!
//! # State
//! - `rows`: partition key ++ time (memcomparable i64) ++ row → count (cached whole).
//! - `watermark`: the watermark and the late-row count.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, TimestampMillisecondArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};

use crate::error::{Result, WeirError};
use crate::plan::window::{sessions_of, windowed_rows, WindowSpec};
use crate::runtime::changelog::{Op, StreamChunk};
use crate::runtime::operator::{OpContext, Operator};
use crate::runtime::operators::materialize::decode_count;
use crate::runtime::operators::progress::{Progress, WATERMARK};
use crate::state::codec::{decode_i64, encode_i64};
use crate::state::{EpochWrites, RowCodec, StateTable, Store, TableRef};

/// The stable name of the open-session rows table.
pub const ROWS: &str = "rows";

/// Assigns session windows; see the module docs.
pub struct SessionAssign {
    spec: WindowSpec,
    /// Output schema: input columns then the three window columns.
    schema: SchemaRef,
    /// Input schema.
    input_schema: SchemaRef,
    /// Codec of a whole input row.
    row_codec: RowCodec,
    /// Codec of the partition key (empty for a global session).
    key_codec: Option<RowCodec>,
    rows: StateTable,
    /// Watermark and late-row count.
    progress: Progress,
    /// The earliest row time of each partition that has rows (a lower bound: a retraction may
    /// have removed it), and the same ordered by time, so a watermark visits only the
    /// partitions that may have a session to close rather than all of the state.
    min_time: HashMap<Vec<u8>, i64>,
    by_time: BTreeSet<(i64, Vec<u8>)>,
}

/// One stored row: its time and encoded contents, with its count.
struct Member {
    time: i64,
    row: Vec<u8>,
    count: i64,
}

impl SessionAssign {
    /// A session assigner for `spec` over rows of `input_schema`, producing `schema`.
    pub fn try_new(
        spec: WindowSpec,
        input_schema: SchemaRef,
        schema: SchemaRef,
        state_table: &mut dyn FnMut(&str) -> TableRef,
        store: &Store,
    ) -> Result<Self> {
        let types: Vec<DataType> = input_schema.fields().iter().map(|f| f.data_type().clone()).collect();
        let key_codec = if spec.partition_by.is_empty() {
            None
        } else {
            Some(RowCodec::try_new(spec.partition_by.iter().map(|i| types[*i].clone()).collect())?)
        };
        // A partition's rows are cached a partition at a time (sessions are computed over all
        // of them); without PARTITION BY, the whole table is one group.
        let rows = match &key_codec {
            Some(codec) => StateTable::grouped(state_table(ROWS), store, codec.group_len()),
            None => StateTable::grouped(state_table(ROWS), store, Box::new(|_: &[u8]| 0)),
        };
        let mut op = Self {
            row_codec: RowCodec::try_new(types)?,
            key_codec,
            rows,
            progress: Progress::load(state_table(WATERMARK), store)?,
            spec,
            schema,
            input_schema,
            min_time: HashMap::new(),
            by_time: BTreeSet::new(),
        };
        // Rebuild the partition index from the stored rows.
        let mut entries = Vec::new();
        let key_codec = &op.key_codec;
        op.rows.scan(store, |k, _| {
            let len = key_codec.as_ref().map_or(0, |codec| codec.encoded_len(k));
            let time = k.get(len..len + 8).ok_or_else(|| WeirError::storage("corrupt session row key"))?;
            entries.push((k[..len].to_vec(), decode_i64(time.try_into().expect("8 bytes"))));
            Ok(true)
        })?;
        for (key, time) in entries {
            op.note_row(&key, time);
        }
        Ok(op)
    }

    /// Records that partition `key` has a row at `time`.
    fn note_row(&mut self, key: &[u8], time: i64) {
        match self.min_time.get_mut(key) {
            Some(t) if *t <= time => {}
            Some(t) => {
                self.by_time.remove(&(*t, key.to_vec()));
                *t = time;
                self.by_time.insert((time, key.to_vec()));
            }
            None => {
                self.min_time.insert(key.to_vec(), time);
                self.by_time.insert((time, key.to_vec()));
            }
        }
    }

    /// The rows of partition `key`, in time order, each with its session.
    fn members(&mut self, store: &Store, key: &[u8]) -> Result<(Vec<Member>, Vec<(i64, i64)>)> {
        let members: Vec<Member> = self
            .rows
            .prefix_iter(store, key)?
            .map(|(k, v)| Member {
                time: decode_i64(k[key.len()..key.len() + 8].try_into().expect("8 bytes")),
                row: k[key.len() + 8..].to_vec(),
                count: decode_count(v).unwrap_or(0),
            })
            .collect();
        let times: Vec<i64> = members.iter().map(|m| m.time).collect();
        let sessions = sessions_of(&times, self.spec.size_ms);
        Ok((members, sessions))
    }

    /// Whether a row at `t` of partition `key` touches one of its open sessions, which it then
    /// joins. Every stored row is in an open session and a session's rows are at most a gap
    /// apart, so the row's window `[t, t + gap)` touches a session exactly when one of the
    /// partition's rows lies within a gap of `t`.
    fn touches_open_session(&mut self, store: &Store, key: &[u8], t: i64) -> Result<bool> {
        let gap = self.spec.size_ms;
        Ok(self.rows.prefix_iter(store, key)?.any(|(k, _)| {
            k.get(key.len()..key.len() + 8)
                .is_some_and(|time| (decode_i64(time.try_into().expect("8 bytes")) - t).abs() <= gap)
        }))
    }

    fn entry_key(key: &[u8], time: i64, row: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(key.len() + 8 + row.len());
        k.extend_from_slice(key);
        k.extend_from_slice(&encode_i64(time));
        k.extend_from_slice(row);
        k
    }

    /// Builds the output chunk from (op, encoded row, window).
    fn output(&self, out: Vec<(Op, Vec<u8>, (i64, i64))>) -> Result<Option<StreamChunk>> {
        if out.is_empty() {
            return Ok(None);
        }
        let mut decoder = self.row_codec.decoder(out.len());
        for (_, row, _) in &out {
            decoder.append(row)?;
        }
        let batch = RecordBatch::try_new(Arc::clone(&self.input_schema), decoder.finish()?)?;
        let rows: Vec<u32> = (0..out.len() as u32).collect();
        let windows: Vec<(i64, i64)> = out.iter().map(|o| o.2).collect();
        let batch = windowed_rows(&batch, &self.schema, &rows, &windows)?;
        Ok(Some(StreamChunk::new(out.into_iter().map(|o| o.0).collect(), batch)))
    }
}

impl Operator for SessionAssign {
    fn name(&self) -> &'static str {
        "SessionAssign"
    }

    fn state_tables(&self) -> &'static [&'static str] {
        &[ROWS, WATERMARK]
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
        let n = chunk.len();
        let times = cast(chunk.batch.column(self.spec.time_index), &DataType::Timestamp(TimeUnit::Millisecond, None))?;
        let times = times
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .ok_or_else(|| WeirError::internal("session time column did not cast to TIMESTAMP(3)"))?
            .clone();
        let rows = self.row_codec.encode_rows(chunk.columns(), n)?;
        let keys = match &self.key_codec {
            Some(codec) => {
                let cols: Vec<ArrayRef> =
                    self.spec.partition_by.iter().map(|i| Arc::clone(chunk.batch.column(*i))).collect();
                codec.encode_rows(&cols, n)?
            }
            None => vec![Vec::new(); n],
        };
        // Touched partitions and each one's sessions before this chunk.
        let mut before: HashMap<Vec<u8>, BTreeMap<(i64, Vec<u8>), (i64, (i64, i64))>> = HashMap::new();
        for key in &keys {
            if !before.contains_key(key) {
                let (members, sessions) = self.members(ctx.store, key)?;
                let map = members
                    .into_iter()
                    .zip(sessions)
                    .map(|(m, s)| ((m.time, m.row), (m.count, s)))
                    .collect();
                before.insert(key.clone(), map);
            }
        }
        let mut late = 0;
        for row in 0..n {
            if times.is_null(row) {
                // In no session: dropped and counted with the late rows (as WindowAssign does).
                late += 1;
                continue;
            }
            let t = times.value(row);
            let closed = self.progress.watermark_ms.is_some_and(|wm| t + self.spec.size_ms - 1 <= wm - self.spec.allowed_lateness_ms);
            if closed && !self.touches_open_session(ctx.store, &keys[row], t)? {
                // Dropped and counted, a retraction of a closed session's row too (as Flink
                // counts every dropped record).
                late += 1;
                continue;
            }
            let entry = Self::entry_key(&keys[row], t, &rows[row]);
            let count = match self.rows.get(ctx.store, &entry)? {
                Some(v) => decode_count(&v)?,
                None => 0,
            } + chunk.ops[row].sign();
            if count <= 0 {
                self.rows.delete(entry);
            } else {
                self.rows.put(entry, count.to_le_bytes().to_vec());
                self.note_row(&keys[row], t);
            }
        }
        self.progress.add_late(late);
        // Diff each touched partition's (row, session) multiset.
        let mut out = Vec::new();
        for (key, old) in before {
            let (members, sessions) = self.members(ctx.store, &key)?;
            let new: BTreeMap<(i64, Vec<u8>), (i64, (i64, i64))> = members
                .into_iter()
                .zip(sessions)
                .map(|(m, s)| ((m.time, m.row), (m.count, s)))
                .collect();
            let all: BTreeSet<&(i64, Vec<u8>)> = old.keys().chain(new.keys()).collect();
            for id in all {
                let (old_count, old_w) = old.get(id).copied().unwrap_or((0, (0, 0)));
                let (new_count, new_w) = new.get(id).copied().unwrap_or((0, (0, 0)));
                let row = &id.1;
                if old_w == new_w || old_count == 0 || new_count == 0 {
                    for _ in new_count..old_count {
                        out.push((Op::Delete, row.clone(), old_w));
                    }
                    for _ in old_count..new_count {
                        out.push((Op::Insert, row.clone(), new_w));
                    }
                    continue;
                }
                let both = old_count.min(new_count);
                for _ in 0..both {
                    out.push((Op::UpdateBefore, row.clone(), old_w));
                    out.push((Op::UpdateAfter, row.clone(), new_w));
                }
                for _ in both..old_count {
                    out.push((Op::Delete, row.clone(), old_w));
                }
                for _ in both..new_count {
                    out.push((Op::Insert, row.clone(), new_w));
                }
            }
        }
        self.output(out)
    }

    fn on_watermark(
        &mut self,
        _input: usize,
        watermark_ms: i64,
        ctx: &OpContext<'_>,
    ) -> Result<(Option<StreamChunk>, Option<i64>)> {
        if !self.progress.advance(watermark_ms) {
            return Ok((None, Some(watermark_ms)));
        }
        // Close sessions whose window_time (end - 1) the watermark reached. A session ends
        // `gap` after its last row, so only partitions whose earliest row is at least `gap`
        // behind the watermark can have one.
        let threshold = watermark_ms - self.spec.allowed_lateness_ms;
        let gap = self.spec.size_ms;
        let mut partitions = Vec::new();
        while let Some((t, _)) = self.by_time.first() {
            if *t + gap - 1 > threshold {
                break;
            }
            let (_, key) = self.by_time.pop_first().expect("checked above");
            self.min_time.remove(&key);
            partitions.push(key);
        }
        let mut closed = Vec::new();
        for key in partitions {
            let (members, sessions) = self.members(ctx.store, &key)?;
            let mut earliest_open = None;
            for (m, s) in members.iter().zip(sessions) {
                if s.1 - 1 <= threshold {
                    closed.push(Self::entry_key(&key, m.time, &m.row));
                } else if earliest_open.is_none() {
                    earliest_open = Some(m.time);
                }
            }
            if let Some(t) = earliest_open {
                self.note_row(&key, t);
            }
        }
        for k in closed {
            self.rows.delete(k);
        }
        Ok((None, Some(watermark_ms)))
    }

    fn event_time_watermark(&self) -> Option<Option<i64>> {
        Some(self.progress.watermark_ms)
    }

    fn num_late_rows(&self) -> u64 {
        self.progress.num_late_rows
    }

    fn on_barrier(&mut self, writes: &mut EpochWrites, _ctx: &OpContext<'_>) -> Result<()> {
        self.rows.flush(writes);
        self.progress.flush(writes);
        Ok(())
    }
}
