//! SlicedWindowAggregate: a HOP or CUMULATE window aggregation with EMIT ON WINDOW CLOSE that
//! keeps one accumulator per (group, slice) and assembles each window from its slices when it
//! fires (DESIGN.md "Window slicing"; Flink's `SliceSharedWindowAggProcessor`). Planned by
//! [`crate::plan::slicing`] over a window assigner in slice mode, instead of WindowAssign (one
//! row per window) + GroupAggregate; its output is the same.
//!
//! Input: rows whose window columns hold their slice's bounds (HOP: the slide, CUMULATE: the
//! step). Each row updates the accumulators of its (group, slice): COUNT, SUM and AVG add (a
//! retraction subtracts), MIN and MAX keep the extreme (append-only input only).
//!
//! Output: append-only. When the watermark reaches a window's `window_time` (`window_end - 1
//! ms`), one `+I` row per group with rows in the window: the group columns, with
//! `window_start`, `window_end` and `window_time` those of the window, then the aggregates
//! merged over the window's slices. Windows are emitted in end order, groups in key order.
//!
//! Late rows (every window of their slice has fired) are dropped and counted by the window
//! assigner below, which also reports the watermark; none reaches this operator.
//!
//! # State
//! - `slice_runs`: the slices kept in memory ([`slices`]) are written per epoch, those of a group
//!   that changed in the epoch and lie in one block (one entry per group, block and epoch, not
//!   one per slice: a RocksDB put per slice was most of HOP's cost at one row per slice). Key:
//!   the end of the run's last slice (ms, memcomparable) ++ group key ++ the run's sequence
//!   number (u64 big-endian); value: per slice, its index (a varint: the first absolute, then
//!   the distance from the one before) and its row count and accumulators ([`encode_accs`]).
//!   A slice written again in a later epoch is in two runs; restore keeps the one of the
//!   higher sequence number. A run is deleted once the last window that holds its last slice
//!   has fired (HOP: `size` after that slice's start; CUMULATE: at the end of its cumulation),
//!   by one range delete below the first slice end still needed, so state is bounded by the
//!   open windows' slices plus, per group, the freed slices of a run not yet deleted (less
//!   than a block); restore skips freed slices.
//! - `watermark`: the last watermark (key empty; ms, i64 little-endian) and the last run's
//!   sequence number (key `seq`; u64 big-endian).
//!
//! Parallel instances (a hash exchange on the group key, without the window columns) share
//! both tables: each writes runs of its own groups only, restores only those, and numbers its
//! runs after the highest stored; the range delete and the watermark are the same for all.
//!
//! # Output types
//! As GroupAggregate's: COUNT BIGINT; SUM and AVG as the planner typed them (AVG of integers
//! is an integer, truncated); MIN and MAX the argument's type.
//!
//! # Float sums
//! A float SUM or AVG adds per slice, then slices: the rounding may differ from adding the
//! rows in arrival order.

pub mod session;
mod slices;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use ahash::AHashMap;
use arrow::array::{
    Array, ArrayRef, Decimal128Array, Decimal128Builder, Float64Array, Float64Builder, Int64Array, Int64Builder,
    RecordBatch, TimestampMillisecondArray, UInt32Array, UInt64Builder,
};
use arrow::compute::{cast, cast_with_options, take, CastOptions};
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{Result, WeirError};
use crate::plan::slicing::WindowColumn;
use crate::plan::window::{WindowKind, WindowSpec};
use crate::runtime::changelog::{Op, StreamChunk};
use crate::runtime::operator::{OpContext, Operator};
use crate::runtime::operators::group_agg::{
    accumulator_kind, avg_int, downcast, number, AggCall, AggKind, Number, SumKind,
};
use crate::state::codec::{encode_i64, get_varint, put_null, put_varint};
use crate::state::key_group::key_group;
use crate::state::{EpochWrites, KeyGroups, RowCodec, StateTable, Store, TableRef};

use slices::{Acc, Accs, Geometry, GroupSlices, Window};

/// The stable name of the table of (group, slice) accumulator runs. (Until 2026-11-30 the
/// table `slices` held one entry per slice; a view planned with it fails its restart, as any
/// whose state tables changed.)
pub const SLICES: &str = "slice_runs";
/// The key of the last run's sequence number in the watermark table.
const SEQ_KEY: &[u8] = b"seq";
/// The stable name of the watermark table.
pub const WATERMARK: &str = "watermark";

/// What a sliced window aggregate computes.
pub struct SlicedWindowAggOptions {
    /// Group expressions over the input, in output order.
    pub group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    /// For each group expression, the window column it is (its input value is the slice's).
    pub window_columns: Vec<Option<WindowColumn>>,
    /// The aggregates: COUNT, SUM, AVG, MIN, MAX, without DISTINCT or FILTER.
    pub aggs: Vec<AggCall>,
    /// The window: HOP or CUMULATE (SESSION for [`session::SessionWindowAggregate`]).
    pub window: WindowSpec,
    /// Output schema: group columns, then one column per aggregate.
    pub schema: SchemaRef,
    /// Emits each window once, when it closes; otherwise (sessions only) keeps each open
    /// window's row up to date.
    pub emit_on_window_close: bool,
}

/// The 8-byte value under `key` in an operator's watermark table `meta`, if any.
///
/// # Errors
/// `Storage` when RocksDB fails to read or the value is not 8 bytes (`what` names it).
fn meta_word(meta: &mut StateTable, store: &Store, key: &[u8], what: &str) -> Result<Option<[u8; 8]>> {
    match meta.get(store, key)? {
        Some(v) => Ok(Some(v.as_slice().try_into().map_err(|_| WeirError::storage(format!("corrupt {what}")))?)),
        None => Ok(None),
    }
}

/// An aggregate's argument over one batch, in its accumulator's form.
enum Arg {
    /// COUNT(*).
    Star,
    /// COUNT(x): only validity matters.
    Valid(ArrayRef),
    Int(Int64Array),
    Dec(Decimal128Array),
    Float(Float64Array),
    /// MIN/MAX: each row's memcomparable encoding, `data[offsets[r]..offsets[r + 1]]`, empty
    /// for NULL.
    Bytes { data: Vec<u8>, offsets: Vec<usize> },
}

/// The operator; see the module docs.
pub struct SlicedWindowAggregate {
    opts: SlicedWindowAggOptions,
    geometry: Geometry,
    /// Indexes of the group expressions that are not window columns (the group key).
    key_exprs: Vec<usize>,
    /// Index of the `window_end` group expression (the slice's end in the input).
    end_expr: usize,
    /// Codec of the group key (the non-window group columns).
    key_codec: RowCodec,
    /// Codec of each MIN/MAX argument.
    value_codecs: Vec<Option<RowCodec>>,
    /// Accumulators of no rows.
    empty: Accs,
    /// Groups by id; `None` for a freed id (reused from `free_ids`).
    groups: Vec<Option<GroupSlices>>,
    free_ids: Vec<u32>,
    /// Group key → id.
    index: AHashMap<Vec<u8>, u32>,
    /// Ids of the groups that hold slices.
    live: Vec<u32>,
    /// Whether `live` is in group key order.
    live_sorted: bool,
    /// Whether slices were freed in memory since their state entries were last range-deleted.
    freed_any: bool,
    /// (group, absolute position, slice) of the slices changed since the last barrier.
    dirty: Vec<(u32, u64, i64)>,
    /// The last watermark, ms.
    watermark_ms: Option<i64>,
    /// The sequence number of the last run written.
    seq: u64,
    slices_table: StateTable,
    meta: StateTable,
    /// The key groups of this instance: it restores only their groups' slices.
    key_groups: KeyGroups,
}

impl SlicedWindowAggregate {
    /// A sliced window aggregate, its state in `state_table(SLICES)` and
    /// `state_table(WATERMARK)`, loaded from `store`.
    ///
    /// # Errors
    /// `Internal` for a window that is not HOP or CUMULATE, options that do not emit on window
    /// close, or group columns without `window_end`; `Unsupported` for an aggregate with
    /// DISTINCT or FILTER or argument types the accumulators cannot hold; `Storage` for corrupt
    /// state.
    pub fn try_new(opts: SlicedWindowAggOptions, state_table: &mut dyn FnMut(&str) -> TableRef, store: &Store) -> Result<Self> {
        let spec = &opts.window;
        if !matches!(spec.kind, WindowKind::Hop | WindowKind::Cumulate)
            || spec.slide_ms <= 0
            || spec.size_ms % spec.slide_ms != 0
            || !opts.emit_on_window_close
        {
            return Err(WeirError::internal(format!("sliced window aggregate over {} windows", spec.kind.name())));
        }
        let mut geometry = Geometry {
            kind: spec.kind,
            n: spec.size_ms / spec.slide_ms,
            slide_ms: spec.slide_ms,
            offset_ms: spec.offset_ms,
            subtract: false,
        };
        let end_expr = opts
            .window_columns
            .iter()
            .position(|c| *c == Some(WindowColumn::End))
            .ok_or_else(|| WeirError::internal("sliced window aggregate without a window_end group column"))?;
        let types: Vec<DataType> = opts.schema.fields().iter().map(|f| f.data_type().clone()).collect();
        let key_exprs: Vec<usize> = (0..opts.group_exprs.len()).filter(|i| opts.window_columns[*i].is_none()).collect();
        let key_codec = RowCodec::try_new(key_exprs.iter().map(|i| types[*i].clone()).collect())?;
        let (value_codecs, empty) = accumulators(&opts.aggs)?;
        geometry.subtract = spec.kind == WindowKind::Hop && empty.subtracts();
        let mut meta = StateTable::new(state_table(WATERMARK));
        let watermark_ms = meta_word(&mut meta, store, b"", "sliced window aggregate watermark")?.map(i64::from_le_bytes);
        let seq = meta_word(&mut meta, store, SEQ_KEY, "sliced window aggregate sequence number")?.map_or(0, u64::from_be_bytes);
        let slices = state_table(SLICES);
        let key_groups = slices.key_groups.clone();
        let slices_table = StateTable::new(slices);
        let mut op = Self {
            opts,
            geometry,
            key_exprs,
            end_expr,
            key_codec,
            value_codecs,
            empty,
            groups: Vec::new(),
            free_ids: Vec::new(),
            index: AHashMap::new(),
            live: Vec::new(),
            live_sorted: false,
            freed_any: false,
            dirty: Vec::new(),
            watermark_ms,
            seq,
            slices_table,
            meta,
            key_groups,
        };
        op.restore(store)?;
        Ok(op)
    }

    /// Loads every (group, slice) accumulator from the store: of each slice not yet freed, the
    /// version of the latest run.
    fn restore(&mut self, store: &Store) -> Result<()> {
        let corrupt = || WeirError::storage("corrupt sliced window aggregate slice run");
        let first_needed = self.first_needed_slice().unwrap_or(i64::MIN);
        // (group key, slice, run sequence number, accumulators)
        let mut slices: Vec<(Vec<u8>, i64, u64, Accs)> = Vec::new();
        store.scan(self.slices_table.id(), |key, value| {
            if key.len() < 16 {
                return Err(corrupt());
            }
            let group = &key[8..key.len() - 8];
            let seq = u64::from_be_bytes(key[key.len() - 8..].try_into().expect("8 bytes"));
            let (mut pos, mut idx) = (0, 0i64);
            while pos < value.len() {
                let (delta, len) = get_varint(&value[pos..]).ok_or_else(corrupt)?;
                idx = i64::try_from(delta).ok().and_then(|d| idx.checked_add(d)).ok_or_else(corrupt)?;
                let (accs, accs_len) = decode_accs(&value[pos + len..], &self.empty)?;
                pos += len + accs_len;
                if idx >= first_needed {
                    slices.push((group.to_vec(), idx, seq, accs));
                }
            }
            Ok(true)
        })?;
        // Parallel instances share the table: each restores its own key groups' slices, and
        // numbers its next runs after every run stored (a group's runs keep increasing numbers
        // when a restart with another parallelism moves it to another instance).
        slices.retain(|s| {
            self.seq = self.seq.max(s.2 + 1);
            self.key_groups.owns(&s.0)
        });
        slices.sort_unstable_by(|a, b| (&a.0, a.1, a.2).cmp(&(&b.0, b.1, b.2)));
        let mut slices = slices.into_iter().peekable();
        while let Some((group, idx, _, accs)) = slices.next() {
            if slices.peek().is_some_and(|next| next.0 == group && next.1 == idx) {
                // A later run holds this slice too.
                continue;
            }
            let g = self.group_id(&group);
            self.groups[g as usize].as_mut().expect("live group").restore(idx, accs);
        }
        Ok(())
    }

    /// The id of the group with key `key`, created if new.
    fn group_id(&mut self, key: &[u8]) -> u32 {
        if let Some(g) = self.index.get(key) {
            return *g;
        }
        let group = GroupSlices::new(key.to_vec());
        let g = match self.free_ids.pop() {
            Some(g) => {
                self.groups[g as usize] = Some(group);
                g
            }
            None => {
                self.groups.push(Some(group));
                (self.groups.len() - 1) as u32
            }
        };
        self.index.insert(key.to_vec(), g);
        self.live.push(g);
        self.live_sorted = false;
        g
    }

    /// The first slice a window that can still fire needs; earlier slices are freed.
    fn first_needed_slice(&self) -> Option<i64> {
        self.watermark_ms.map(|wm| self.geometry.first_slice(self.geometry.next_window(wm)))
    }

    /// Fires the windows `[from, to)` (end slice indexes) of every live group, in end order
    /// and group key order.
    ///
    /// Group by group: a group's window changes only where a slice of the group enters or
    /// leaves it, so it is assembled once per run of equal windows ([`GroupSlices::window`])
    /// and its aggregate row repeated for each window of the run (`take`); the rows are then
    /// put in window order by a counting sort (stable: groups stay in key order).
    fn fire(&mut self, from: i64, to: i64) -> Result<Option<StreamChunk>> {
        if !self.live_sorted {
            let groups = &self.groups;
            let key = |g: &u32| groups[*g as usize].as_ref().map(|s| s.key.as_slice());
            self.live.sort_unstable_by(|a, b| key(a).cmp(&key(b)));
            self.live_sorted = true;
        }
        let geometry = self.geometry;
        // Every live group has a row in most windows: room for that many output rows.
        let capacity = (self.live.len() as u64).saturating_mul(to.saturating_sub(from).max(0) as u64).min(1 << 20) as usize;
        let mut out_groups: Vec<u32> = Vec::with_capacity(capacity);
        let mut out_windows: Vec<i64> = Vec::with_capacity(capacity);
        // Each output row's row in the aggregate columns.
        let mut out_values: Vec<u32> = Vec::with_capacity(capacity);
        let mut values = 0u32;
        let mut agg_columns = self.opts.aggs.iter().map(|agg| AggColumn::new(agg, capacity)).collect::<Result<Vec<_>>>()?;
        let mut window = self.empty.clone();
        for g in &self.live {
            let group = self.groups[*g as usize].as_mut().expect("live group");
            let mut e = from;
            while e < to {
                self.freed_any |= group.free_before(geometry.first_slice(e)) > 0;
                let until = match group.window(&geometry, e, &mut window) {
                    Window::NoSlices => break,
                    Window::Empty { next } => {
                        e = next;
                        continue;
                    }
                    Window::Assembled { until } => until.min(to),
                };
                if window.rows > 0 {
                    for ((column, agg), acc) in agg_columns.iter_mut().zip(&self.opts.aggs).zip(&window.accs) {
                        column.push(agg, acc)?;
                    }
                    for w in e..until {
                        out_groups.push(*g);
                        out_windows.push(w);
                        out_values.push(values);
                    }
                    values += 1;
                }
                e = until;
            }
        }
        let out = if out_groups.is_empty() {
            None
        } else {
            let order = window_order(&out_windows, from, to);
            let groups: Vec<u32> = order.iter().map(|i| out_groups[*i as usize]).collect();
            let windows: Vec<i64> = order.iter().map(|i| out_windows[*i as usize]).collect();
            let values_of: Vec<u32> = order.iter().map(|i| out_values[*i as usize]).collect();
            Some(self.output(&groups, &windows, &values_of, values as usize, agg_columns)?)
        };
        self.free_slices(geometry.first_slice(to));
        Ok(out)
    }

    /// Frees every slice before `first`, in memory and in the state table (one range delete of
    /// the runs whose last slice is before `first`: run keys start with that slice's end), and
    /// the groups left without slices.
    fn free_slices(&mut self, first: i64) {
        let mut emptied = Vec::new();
        for g in &self.live {
            let group = self.groups[*g as usize].as_mut().expect("live group");
            self.freed_any |= group.free_before(first) > 0;
            if group.slices.is_empty() {
                emptied.push(*g);
            }
        }
        if std::mem::take(&mut self.freed_any) {
            self.slices_table.delete_below(&encode_i64(self.geometry.ms(first).saturating_add(1)));
        }
        if emptied.is_empty() {
            return;
        }
        for g in &emptied {
            let group = self.groups[*g as usize].take().expect("live group");
            self.index.remove(&group.key);
            self.free_ids.push(*g);
        }
        let groups = &self.groups;
        self.live.retain(|g| groups[*g as usize].is_some());
    }

    /// Writes the `dirty` slices as runs of sequence number `self.seq`, one per group and
    /// block, and empties `dirty`.
    fn write_runs(&mut self, dirty: &mut Vec<(u32, u64, i64)>, writes: &mut EpochWrites) {
        dirty.sort_unstable_by_key(|(g, _, idx)| (*g, *idx));
        let table = self.slices_table.id();
        let geometry = self.geometry;
        let mut key = Vec::new();
        let mut value = Vec::new();
        let mut rest = dirty.as_slice();
        while let Some(&(g, _, first)) = rest.first() {
            let block = geometry.block(first);
            let len = rest.iter().position(|(h, _, idx)| *h != g || geometry.block(*idx) != block).unwrap_or(rest.len());
            let (run, next) = rest.split_at(len);
            rest = next;
            let Some(group) = self.groups.get_mut(g as usize).and_then(|g| g.as_mut()) else { continue };
            value.clear();
            let mut last = None;
            for &(_, abs, idx) in run {
                let Some(slice) = group.slice_mut(abs, idx) else { continue };
                if !slice.dirty {
                    continue;
                }
                slice.dirty = false;
                // The first slice's index, then each one's distance from the one before.
                put_varint(&mut value, idx as i128 - last.map_or(0, |l| l as i128));
                encode_accs(&mut value, &slice.accs);
                last = Some(idx);
            }
            let Some(last) = last else { continue };
            key.clear();
            put_run_key(&mut key, &geometry, last, &group.key, self.seq);
            writes.put(table, &key, &value);
        }
        dirty.clear();
    }

    /// The output chunk of the emitted (group, window) pairs and their aggregates (output row
    /// `i` has row `values[i]` of the `distinct_values` rows of `agg_columns`). Each group's key
    /// is decoded once and repeated with `take`, and so is an aggregate row used again.
    fn output(
        &self,
        groups: &[u32],
        windows: &[i64],
        values: &[u32],
        distinct_values: usize,
        agg_columns: Vec<AggColumn>,
    ) -> Result<StreamChunk> {
        let n = groups.len();
        let mut slot = vec![u32::MAX; self.groups.len()];
        let mut distinct = Vec::new();
        let indices: UInt32Array = groups
            .iter()
            .map(|g| {
                let s = &mut slot[*g as usize];
                if *s == u32::MAX {
                    *s = distinct.len() as u32;
                    distinct.push(*g);
                }
                *s
            })
            .collect();
        let mut keys = self.key_codec.decoder(distinct.len());
        for g in &distinct {
            keys.append(&self.groups[*g as usize].as_ref().expect("emitted group").key)?;
        }
        let mut key_cols = keys.finish()?.into_iter().map(|c| take(&c, &indices, None));
        let agg_types = self.opts.schema.fields()[self.opts.group_exprs.len()..].iter().map(|f| f.data_type());
        let value_indices = UInt32Array::from(values.to_vec());
        let mut agg_cols = Vec::with_capacity(agg_columns.len());
        for ((column, codec), t) in agg_columns.into_iter().zip(&self.value_codecs).zip(agg_types) {
            agg_cols.push(take(&column.finish(codec.as_ref(), distinct_values, t)?, &value_indices, None)?);
        }
        let g = &self.geometry;
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.opts.schema.fields().len());
        for (i, role) in self.opts.window_columns.iter().enumerate() {
            let values: Vec<i64> = match role {
                None => {
                    columns.push(key_cols.next().ok_or_else(|| WeirError::internal("missing group key column"))??);
                    continue;
                }
                Some(WindowColumn::Start) => windows.iter().map(|e| g.ms(g.first_slice(*e))).collect(),
                Some(WindowColumn::End) => windows.iter().map(|e| g.ms(*e)).collect(),
                Some(WindowColumn::Time) => windows.iter().map(|e| g.ms(*e) - 1).collect(),
            };
            let array: ArrayRef = Arc::new(TimestampMillisecondArray::from(values));
            columns.push(cast(&array, self.opts.schema.field(i).data_type())?);
        }
        columns.extend(agg_cols);
        let batch = RecordBatch::try_new(Arc::clone(&self.opts.schema), columns)?;
        Ok(StreamChunk::new(vec![Op::Insert; n], batch))
    }
}

impl Operator for SlicedWindowAggregate {
    fn name(&self) -> &'static str {
        "SlicedWindowAggregate"
    }

    fn state_tables(&self) -> &'static [&'static str] {
        &[SLICES, WATERMARK]
    }

    fn state(&self) -> Vec<(String, &StateTable)> {
        vec![(SLICES.to_string(), &self.slices_table)]
    }

    fn key_groups(&self, _input: usize, chunk: &StreamChunk) -> Result<Vec<u16>> {
        let n = chunk.len();
        let cols = self
            .key_exprs
            .iter()
            .map(|i| Ok(self.opts.group_exprs[*i].evaluate(&chunk.batch)?.into_array(n)?))
            .collect::<Result<Vec<_>>>()?;
        Ok(self.key_codec.encode_rows(&cols, n)?.iter().map(|k| key_group(k)).collect())
    }

    fn process_batch(&mut self, _input: usize, chunk: StreamChunk, _ctx: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        let n = chunk.len();
        let batch = &chunk.batch;
        let key_cols = self
            .key_exprs
            .iter()
            .map(|i| Ok(self.opts.group_exprs[*i].evaluate(batch)?.into_array(n)?))
            .collect::<Result<Vec<_>>>()?;
        let prepared = self.key_codec.prepare(&key_cols)?;
        let ends = self.opts.group_exprs[self.end_expr].evaluate(batch)?.into_array(n)?;
        let ends = cast(&ends, &DataType::Timestamp(TimeUnit::Millisecond, None))?;
        let ends = downcast::<TimestampMillisecondArray>(&ends)?;
        let args = eval_args(&self.opts.aggs, &self.value_codecs, batch)?;
        let first_needed = self.first_needed_slice();
        let geometry = self.geometry;
        let mut key = Vec::new();
        for row in 0..n {
            if ends.is_null(row) {
                continue;
            }
            let idx = geometry.slice_ending_at(ends.value(row));
            if first_needed.is_some_and(|f| idx < f) {
                // Every window of the slice has fired: the window assigner drops such rows.
                continue;
            }
            key.clear();
            self.key_codec.encode_row(&prepared, row, &mut key);
            let g = self.group_id(&key);
            let sign = chunk.ops[row].sign();
            let group = self.groups[g as usize].as_mut().expect("live group");
            if let Some(abs) = group.add(&geometry, idx, &self.empty, |accs| apply(accs, &args, row, sign)) {
                self.dirty.push((g, abs, idx));
            }
        }
        Ok(None)
    }

    fn on_watermark(&mut self, _input: usize, watermark_ms: i64, _ctx: &OpContext<'_>) -> Result<(Option<StreamChunk>, Option<i64>)> {
        if self.watermark_ms.is_some_and(|w| watermark_ms <= w) {
            return Ok((None, Some(watermark_ms)));
        }
        let g = self.geometry;
        let to = g.next_window(watermark_ms);
        let earliest = self.live.iter().filter_map(|id| self.groups[*id as usize].as_ref()?.slices.front().map(|s| s.idx)).min();
        let from = match (self.watermark_ms, earliest) {
            (_, None) => to,
            (Some(wm), Some(e)) => g.next_window(wm).max(e + 1),
            (None, Some(e)) => e + 1,
        };
        self.watermark_ms = Some(watermark_ms);
        self.meta.put(Vec::new(), watermark_ms.to_le_bytes().to_vec());
        if from >= to {
            return Ok((None, Some(watermark_ms)));
        }
        Ok((self.fire(from, to)?, Some(watermark_ms)))
    }

    fn on_barrier(&mut self, writes: &mut EpochWrites, _ctx: &OpContext<'_>) -> Result<()> {
        // The range delete of the freed runs first; the new runs are all above it and go
        // straight into the epoch's batch (no overlay: this table is only read at restore).
        self.slices_table.flush(writes);
        let mut dirty = std::mem::take(&mut self.dirty);
        if !dirty.is_empty() {
            self.seq += 1;
            self.meta.put(SEQ_KEY.to_vec(), self.seq.to_be_bytes().to_vec());
            self.write_runs(&mut dirty, writes);
        }
        self.dirty = dirty;
        self.meta.flush(writes);
        Ok(())
    }
}


/// The value codec of each aggregate (MIN/MAX: its argument's) and the accumulators of no
/// rows.
///
/// # Errors
/// `Unsupported` for an aggregate with DISTINCT or FILTER or an argument type the accumulators
/// cannot hold.
fn accumulators(aggs: &[AggCall]) -> Result<(Vec<Option<RowCodec>>, Accs)> {
    let mut value_codecs = Vec::with_capacity(aggs.len());
    let mut accs = Vec::with_capacity(aggs.len());
    for agg in aggs {
        if agg.distinct || agg.filter.is_some() || agg.kind.by_arrival() {
            return Err(WeirError::unsupported(
                "DISTINCT, FILTER, STRING_AGG, ARRAY_AGG, FIRST_VALUE or LAST_VALUE in a window aggregate over slices or sessions",
            ));
        }
        AggColumn::new(agg, 0)?;
        value_codecs.push(match agg.kind {
            AggKind::Min | AggKind::Max => Some(RowCodec::try_new(vec![agg.arg_type.clone()])?),
            _ => None,
        });
        accs.push(match agg.kind {
            AggKind::Count => Acc::Count(0),
            AggKind::Sum | AggKind::Avg => match accumulator_kind(&agg.arg_type)? {
                SumKind::Float => Acc::SumFloat(0.0, 0),
                SumKind::Int | SumKind::Decimal => Acc::SumInt(0, 0),
            },
            AggKind::Min => Acc::Min(None),
            AggKind::Max => Acc::Max(None),
            AggKind::StringAgg | AggKind::ArrayAgg | AggKind::FirstValue | AggKind::LastValue => {
                return Err(WeirError::internal("an aggregate by arrival over slices"))
            }
        });
    }
    Ok((value_codecs, Accs { rows: 0, accs }))
}

/// The arguments of `aggs` over `batch`, MIN/MAX's encoded with their `value_codecs`.
fn eval_args(aggs: &[AggCall], value_codecs: &[Option<RowCodec>], batch: &RecordBatch) -> Result<Vec<Arg>> {
    let n = batch.num_rows();
    let mut out = Vec::with_capacity(aggs.len());
    for (agg, codec) in aggs.iter().zip(value_codecs) {
        let Some(expr) = &agg.arg else {
            out.push(Arg::Star);
            continue;
        };
        let array = expr.evaluate(batch)?.into_array(n)?;
        out.push(match (agg.kind, codec) {
            (_, Some(codec)) => {
                let prepared = codec.prepare(&[Arc::clone(&array)])?;
                let mut data = Vec::with_capacity(n * 9);
                let mut offsets = Vec::with_capacity(n + 1);
                offsets.push(0);
                for r in 0..n {
                    if array.is_valid(r) {
                        codec.encode_row(&prepared, r, &mut data);
                    }
                    offsets.push(data.len());
                }
                Arg::Bytes { data, offsets }
            }
            (AggKind::Count, None) => Arg::Valid(array),
            _ => match accumulator_kind(array.data_type())? {
                SumKind::Int => Arg::Int(downcast::<Int64Array>(&cast(&array, &DataType::Int64)?)?),
                SumKind::Decimal => Arg::Dec(downcast::<Decimal128Array>(&array)?),
                SumKind::Float => Arg::Float(downcast::<Float64Array>(&cast(&array, &DataType::Float64)?)?),
            },
        });
    }
    Ok(out)
}

/// The positions of `windows` (each in `[from, to)`) in window order, equal windows in their
/// order in `windows`: a counting sort when the range is not much wider than the rows, else a
/// stable comparison sort.
fn window_order(windows: &[i64], from: i64, to: i64) -> Vec<u32> {
    let n = windows.len();
    let range = to.saturating_sub(from) as u64;
    if range > 4 * n as u64 + 1024 {
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by_key(|i| windows[*i as usize]);
        return order;
    }
    let mut starts = vec![0u32; range as usize + 1];
    for w in windows {
        starts[(w - from) as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut order = vec![0u32; n];
    for (i, w) in windows.iter().enumerate() {
        let slot = &mut starts[(w - from) as usize];
        order[*slot as usize] = i as u32;
        *slot += 1;
    }
    order
}

/// Appends a run's state key: the end of its last slice `idx` (memcomparable), the group key
/// `key`, the run's sequence number `seq` (big-endian).
fn put_run_key(out: &mut Vec<u8>, g: &Geometry, idx: i64, key: &[u8], seq: u64) {
    out.extend_from_slice(&encode_i64(g.ms(idx + 1)));
    out.extend_from_slice(key);
    out.extend_from_slice(&seq.to_be_bytes());
}

/// Adds row `row` of the arguments, with `sign`, to `accs`.
fn apply(accs: &mut Accs, args: &[Arg], row: usize, sign: i64) {
    accs.rows += sign;
    for (acc, arg) in accs.accs.iter_mut().zip(args) {
        match (acc, arg) {
            (Acc::Count(c), Arg::Star) => *c += sign,
            (Acc::Count(c), Arg::Valid(a)) if a.is_valid(row) => *c += sign,
            (Acc::SumInt(s, c), Arg::Int(a)) if a.is_valid(row) => {
                *s = s.wrapping_add(sign as i128 * a.value(row) as i128);
                *c += sign;
            }
            (Acc::SumInt(s, c), Arg::Dec(a)) if a.is_valid(row) => {
                *s = s.wrapping_add((sign as i128).wrapping_mul(a.value(row)));
                *c += sign;
            }
            (Acc::SumFloat(s, c), Arg::Float(a)) if a.is_valid(row) => {
                *s += sign as f64 * a.value(row);
                *c += sign;
            }
            (Acc::Min(m), Arg::Bytes { data, offsets }) => {
                let v = &data[offsets[row]..offsets[row + 1]];
                if !v.is_empty() && m.as_deref().is_none_or(|m| v < m) {
                    set_bytes(m, v);
                }
            }
            (Acc::Max(m), Arg::Bytes { data, offsets }) => {
                let v = &data[offsets[row]..offsets[row + 1]];
                if !v.is_empty() && m.as_deref().is_none_or(|m| v > m) {
                    set_bytes(m, v);
                }
            }
            _ => {}
        }
    }
}

fn set_bytes(slot: &mut Option<Vec<u8>>, v: &[u8]) {
    match slot {
        Some(b) => {
            b.clear();
            b.extend_from_slice(v);
        }
        None => *slot = Some(v.to_vec()),
    }
}

/// One aggregate's output column, built as windows fire: integers, decimals and floats
/// directly (cast to the output type at the end), MIN/MAX as row-codec fields decoded at the
/// end.
enum AggColumn {
    Int(Int64Builder),
    UInt(UInt64Builder),
    Decimal(Decimal128Builder),
    Float(Float64Builder),
    Encoded(Vec<u8>),
}

impl AggColumn {
    /// An empty column for `agg`'s results, with room for `capacity` rows.
    fn new(agg: &AggCall, capacity: usize) -> Result<Self> {
        use DataType::*;
        Ok(match (agg.kind, &agg.output_type) {
            (AggKind::Min | AggKind::Max, _) => AggColumn::Encoded(Vec::with_capacity(capacity * 9)),
            (_, Int8 | Int16 | Int32 | Int64) => AggColumn::Int(Int64Builder::with_capacity(capacity)),
            (_, UInt8 | UInt16 | UInt32 | UInt64) => AggColumn::UInt(UInt64Builder::with_capacity(capacity)),
            (_, Decimal128(..)) => AggColumn::Decimal(Decimal128Builder::with_capacity(capacity)),
            (_, Float16 | Float32 | Float64) => AggColumn::Float(Float64Builder::with_capacity(capacity)),
            (_, other) => return Err(WeirError::internal(format!("aggregate output type {other}"))),
        })
    }

    /// Appends `agg`'s result over a window's accumulator `acc`: COUNT the count, SUM and AVG
    /// NULL over no values, MIN and MAX the extreme or NULL.
    fn push(&mut self, agg: &AggCall, acc: &Acc) -> Result<()> {
        let value = match acc {
            Acc::Count(c) => Some(Number::Int(*c)),
            Acc::SumInt(_, 0) | Acc::SumFloat(_, 0) => None,
            Acc::SumInt(sum, n) => Some(match agg.kind {
                AggKind::Sum => number(&agg.output_type, *sum as f64, Some(*sum))?,
                _ => avg_int(agg, *sum, *n)?,
            }),
            Acc::SumFloat(sum, n) => {
                let v = if agg.kind == AggKind::Sum { *sum } else { sum / *n as f64 };
                Some(number(&agg.output_type, v, None)?)
            }
            Acc::Min(v) | Acc::Max(v) => {
                let AggColumn::Encoded(out) = self else { return Err(WeirError::internal("MIN/MAX column kind")) };
                match v {
                    Some(v) => out.extend_from_slice(v),
                    None => put_null(out),
                }
                return Ok(());
            }
        };
        match (self, value) {
            (AggColumn::Int(b), Some(Number::Int(v))) => b.append_value(v),
            (AggColumn::UInt(b), Some(Number::UInt(v))) => b.append_value(v),
            (AggColumn::Decimal(b), Some(Number::Decimal(v))) => b.append_value(v),
            (AggColumn::Float(b), Some(Number::Float(v))) => b.append_value(v),
            (AggColumn::Int(b), None) => b.append_null(),
            (AggColumn::UInt(b), None) => b.append_null(),
            (AggColumn::Decimal(b), None) => b.append_null(),
            (AggColumn::Float(b), None) => b.append_null(),
            (_, v) => return Err(WeirError::internal(format!("aggregate result {v:?} for output type {}", agg.output_type))),
        }
        Ok(())
    }

    /// The column as `output_type`; `codec` decodes MIN/MAX fields of `n` rows.
    ///
    /// # Errors
    /// `NumericOutOfRange` (22003) for a result out of range of a narrower output type.
    fn finish(self, codec: Option<&RowCodec>, n: usize, output_type: &DataType) -> Result<ArrayRef> {
        let array: ArrayRef = match self {
            AggColumn::Int(mut b) => Arc::new(b.finish()),
            AggColumn::UInt(mut b) => Arc::new(b.finish()),
            AggColumn::Float(mut b) => Arc::new(b.finish()),
            AggColumn::Decimal(mut b) => match output_type {
                DataType::Decimal128(p, s) => {
                    let sums = b.finish().with_precision_and_scale(*p, *s)?;
                    sums.validate_decimal_precision(*p).map_err(|e| {
                        WeirError::from(crate::error::ErrorKind::NumericOutOfRange(format!("aggregate result out of range of {}: {e}", crate::plan::type_names::sql_type_name(output_type))))
                    })?;
                    Arc::new(sums)
                }
                other => return Err(WeirError::internal(format!("decimal aggregate column of type {other}"))),
            },
            AggColumn::Encoded(bytes) => {
                let codec = codec.ok_or_else(|| WeirError::internal("MIN/MAX without a value codec"))?;
                let mut decoder = codec.decoder(n);
                let mut pos = 0;
                while pos < bytes.len() {
                    pos += decoder.append(&bytes[pos..])?;
                }
                return decoder.finish()?.pop().ok_or_else(|| WeirError::internal("MIN/MAX column missing"));
            }
        };
        if array.data_type() == output_type {
            return Ok(array);
        }
        let strict = CastOptions { safe: false, ..Default::default() };
        cast_with_options(&array, output_type, &strict)
            .map_err(|e| crate::error::ErrorKind::NumericOutOfRange(format!("aggregate result out of range of {}: {e}", crate::plan::type_names::sql_type_name(output_type))).into())
    }
}

/// Appends a slice's state value: rows, then each accumulator, integers as varints
/// ([`put_varint`]: a slice of few rows takes a few bytes), a float sum as f64 little-endian,
/// MIN/MAX a presence byte, a varint length and the bytes.
fn encode_accs(out: &mut Vec<u8>, accs: &Accs) {
    put_varint(out, accs.rows as i128);
    for acc in &accs.accs {
        match acc {
            Acc::Count(c) => put_varint(out, *c as i128),
            Acc::SumInt(s, c) => {
                put_varint(out, *s);
                put_varint(out, *c as i128);
            }
            Acc::SumFloat(s, c) => {
                out.extend_from_slice(&s.to_le_bytes());
                put_varint(out, *c as i128);
            }
            Acc::Min(v) | Acc::Max(v) => match v {
                Some(v) => {
                    out.push(1);
                    put_varint(out, v.len() as i128);
                    out.extend_from_slice(v);
                }
                None => out.push(0),
            },
        }
    }
}

/// The accumulators of [`encode_accs`] at the start of `bytes`, shaped like `shape`, and the
/// number of bytes they took.
fn decode_accs(bytes: &[u8], shape: &Accs) -> Result<(Accs, usize)> {
    let corrupt = || WeirError::storage("corrupt sliced window aggregate slice");
    let mut pos = 0;
    let varint = |pos: &mut usize| -> Result<i128> {
        let (v, len) = get_varint(&bytes[*pos..]).ok_or_else(corrupt)?;
        *pos += len;
        Ok(v)
    };
    let int = |v: i128| i64::try_from(v).map_err(|_| corrupt());
    let rows = int(varint(&mut pos)?)?;
    let mut accs = Vec::with_capacity(shape.accs.len());
    for acc in &shape.accs {
        accs.push(match acc {
            Acc::Count(_) => Acc::Count(int(varint(&mut pos)?)?),
            Acc::SumInt(..) => {
                let s = varint(&mut pos)?;
                Acc::SumInt(s, int(varint(&mut pos)?)?)
            }
            Acc::SumFloat(..) => {
                let s = f64::from_le_bytes(bytes.get(pos..pos + 8).ok_or_else(corrupt)?.try_into().expect("8 bytes"));
                pos += 8;
                Acc::SumFloat(s, int(varint(&mut pos)?)?)
            }
            Acc::Min(_) | Acc::Max(_) => {
                let present = *bytes.get(pos).ok_or_else(corrupt)?;
                pos += 1;
                let v = match present {
                    0 => None,
                    1 => {
                        let len = usize::try_from(varint(&mut pos)?).map_err(|_| corrupt())?;
                        let v = bytes.get(pos..pos.checked_add(len).ok_or_else(corrupt)?).ok_or_else(corrupt)?.to_vec();
                        pos += len;
                        Some(v)
                    }
                    _ => return Err(corrupt()),
                };
                if matches!(acc, Acc::Min(_)) {
                    Acc::Min(v)
                } else {
                    Acc::Max(v)
                }
            }
        });
    }
    Ok((Accs { rows, accs }, pos))
}
