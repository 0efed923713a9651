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
//! - `slices`: slice end (ms, memcomparable) ++ group key → row count and accumulators. Kept in
//!   memory ([`slices`]), written per epoch for the slices that changed; a slice is deleted once
//!   the last window that holds it has fired (HOP: `size` after its start; CUMULATE: at the end
//!   of its cumulation), so state is bounded by the open windows' slices.
//! - `watermark`: the last watermark (ms, i64 little-endian), one entry.
//!
//! # Output types
//! As GroupAggregate's: COUNT BIGINT; SUM and AVG as the planner typed them (AVG of integers
//! is an integer, truncated); MIN and MAX the argument's type.
//!
//! # Float sums
//! A float SUM or AVG adds per slice, then slices: the rounding may differ from adding the
//! rows in arrival order.

mod slices;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use ahash::AHashMap;
use arrow::array::{Array, ArrayRef, Decimal128Array, Float64Array, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{Result, WeirError};
use crate::plan::slicing::WindowColumn;
use crate::plan::window::{WindowKind, WindowSpec};
use crate::runtime::changelog::{Op, StreamChunk};
use crate::runtime::operator::{OpContext, Operator};
use crate::runtime::operators::group_agg::{
    accumulator_kind, downcast, put_avg_int, put_number, AggCall, AggKind, SumKind,
};
use crate::state::codec::{decode_i64, encode_i64, put_i64, put_null};
use crate::state::{EpochWrites, RowCodec, StateTable, Store};

use slices::{Acc, Accs, Geometry, GroupSlices, Slice};

/// The stable name of the (group, slice) accumulator table.
pub const SLICES: &str = "slices";
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
    /// The window: HOP or CUMULATE.
    pub window: WindowSpec,
    /// Output schema: group columns, then one column per aggregate.
    pub schema: SchemaRef,
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
    /// Codec of the aggregate columns of an output row.
    agg_codec: RowCodec,
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
    /// (group, slice) pairs changed since the last barrier.
    dirty: Vec<(u32, i64)>,
    /// The last watermark, ms.
    watermark_ms: Option<i64>,
    slices_table: StateTable,
    meta: StateTable,
}

impl SlicedWindowAggregate {
    /// A sliced window aggregate, its state in `state_table(SLICES)` and
    /// `state_table(WATERMARK)`, loaded from `store`.
    ///
    /// # Errors
    /// `Internal` for a window that is not HOP or CUMULATE or group columns without
    /// `window_end`; `Unsupported` for an aggregate with DISTINCT or FILTER or argument types
    /// the accumulators cannot hold; `Storage` for corrupt state.
    pub fn try_new(opts: SlicedWindowAggOptions, state_table: &mut dyn FnMut(&str) -> u32, store: &Store) -> Result<Self> {
        let spec = &opts.window;
        if !matches!(spec.kind, WindowKind::Hop | WindowKind::Cumulate) || spec.slide_ms <= 0 || spec.size_ms % spec.slide_ms != 0 {
            return Err(WeirError::internal(format!("sliced window aggregate over {} windows", spec.kind.name())));
        }
        let geometry =
            Geometry { kind: spec.kind, n: spec.size_ms / spec.slide_ms, slide_ms: spec.slide_ms, offset_ms: spec.offset_ms };
        let end_expr = opts
            .window_columns
            .iter()
            .position(|c| *c == Some(WindowColumn::End))
            .ok_or_else(|| WeirError::internal("sliced window aggregate without a window_end group column"))?;
        let types: Vec<DataType> = opts.schema.fields().iter().map(|f| f.data_type().clone()).collect();
        let key_exprs: Vec<usize> = (0..opts.group_exprs.len()).filter(|i| opts.window_columns[*i].is_none()).collect();
        let key_codec = RowCodec::try_new(key_exprs.iter().map(|i| types[*i].clone()).collect())?;
        let agg_codec = RowCodec::try_new(types[opts.group_exprs.len()..].to_vec())?;
        let mut value_codecs = Vec::with_capacity(opts.aggs.len());
        let mut accs = Vec::with_capacity(opts.aggs.len());
        for agg in &opts.aggs {
            if agg.distinct || agg.filter.is_some() {
                return Err(WeirError::unsupported("DISTINCT or FILTER in a sliced window aggregate"));
            }
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
            });
        }
        let meta = StateTable::new(state_table(WATERMARK));
        let watermark_ms = match meta.get(store, b"")? {
            Some(v) => Some(i64::from_le_bytes(
                v.as_slice().try_into().map_err(|_| WeirError::storage("corrupt sliced window aggregate watermark"))?,
            )),
            None => None,
        };
        let slices_table = StateTable::new(state_table(SLICES));
        let mut op = Self {
            opts,
            geometry,
            key_exprs,
            end_expr,
            key_codec,
            value_codecs,
            agg_codec,
            empty: Accs { rows: 0, accs },
            groups: Vec::new(),
            free_ids: Vec::new(),
            index: AHashMap::new(),
            live: Vec::new(),
            live_sorted: false,
            dirty: Vec::new(),
            watermark_ms,
            slices_table,
            meta,
        };
        op.restore(store)?;
        Ok(op)
    }

    /// Loads every (group, slice) accumulator from the store.
    fn restore(&mut self, store: &Store) -> Result<()> {
        let mut entries = Vec::new();
        store.scan(self.slices_table.id(), |k, v| {
            entries.push((k.to_vec(), v.to_vec()));
            Ok(true)
        })?;
        for (key, value) in entries {
            let corrupt = || WeirError::storage("corrupt sliced window aggregate slice");
            let end: [u8; 8] = key.get(..8).ok_or_else(corrupt)?.try_into().map_err(|_| corrupt())?;
            let idx = self.geometry.slice_ending_at(decode_i64(end));
            let accs = decode_accs(&value, &self.empty)?;
            let g = self.group_id(&key[8..]);
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

    /// The arguments of the aggregates over `batch`.
    fn eval_args(&self, batch: &RecordBatch) -> Result<Vec<Arg>> {
        let n = batch.num_rows();
        let mut out = Vec::with_capacity(self.opts.aggs.len());
        for (agg, codec) in self.opts.aggs.iter().zip(&self.value_codecs) {
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

    /// The first slice a window that can still fire needs; earlier slices are freed.
    fn first_needed_slice(&self) -> Option<i64> {
        self.watermark_ms.map(|wm| self.geometry.first_slice(self.geometry.next_window(wm)))
    }

    /// Fires the windows `[from, to)` (end slice indexes) of every live group, in end order
    /// and group key order; returns the emitted groups, windows and aggregate bytes.
    fn fire(&mut self, mut from: i64, to: i64) -> Result<Option<StreamChunk>> {
        if !self.live_sorted {
            let groups = &self.groups;
            let key = |g: &u32| groups[*g as usize].as_ref().map(|s| s.key.as_slice());
            self.live.sort_unstable_by(|a, b| key(a).cmp(&key(b)));
            self.live_sorted = true;
        }
        let geometry = self.geometry;
        let mut out_groups: Vec<u32> = Vec::new();
        let mut out_windows: Vec<i64> = Vec::new();
        let mut agg_bytes: Vec<u8> = Vec::new();
        let mut agg_offsets: Vec<usize> = vec![0];
        let mut window = self.empty.clone();
        while from < to {
            let first = geometry.first_slice(from);
            // The earliest slice left in any group: windows before the first that holds it are
            // empty and skipped.
            let mut earliest = i64::MAX;
            for g in &self.live {
                let group = self.groups[*g as usize].as_mut().expect("live group");
                group.free_before(first, |key, s| delete_slice(&mut self.slices_table, &geometry, key, s));
                if group.window(&geometry, from, &mut window) && window.rows > 0 {
                    put_aggs(&mut agg_bytes, &self.opts.aggs, &window)?;
                    agg_offsets.push(agg_bytes.len());
                    out_groups.push(*g);
                    out_windows.push(from);
                }
                if let Some(s) = group.slices.front() {
                    earliest = earliest.min(s.idx);
                }
            }
            if earliest == i64::MAX {
                break;
            }
            from = (from + 1).max(earliest.saturating_add(1));
        }
        let out = if out_groups.is_empty() {
            None
        } else {
            Some(self.output(&out_groups, &out_windows, &agg_bytes, &agg_offsets)?)
        };
        self.free_slices(geometry.first_slice(to));
        Ok(out)
    }

    /// Frees every slice before `first`, and the groups left without slices.
    fn free_slices(&mut self, first: i64) {
        let geometry = self.geometry;
        let mut emptied = Vec::new();
        for g in &self.live {
            let group = self.groups[*g as usize].as_mut().expect("live group");
            group.free_before(first, |key, s| delete_slice(&mut self.slices_table, &geometry, key, s));
            if group.slices.is_empty() {
                emptied.push(*g);
            }
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

    /// The output chunk of the emitted (group, window) pairs.
    fn output(&self, groups: &[u32], windows: &[i64], agg_bytes: &[u8], agg_offsets: &[usize]) -> Result<StreamChunk> {
        let n = groups.len();
        let mut keys = self.key_codec.decoder(n);
        for g in groups {
            keys.append(&self.groups[*g as usize].as_ref().expect("emitted group").key)?;
        }
        let mut key_cols = keys.finish()?.into_iter();
        let mut aggs = self.agg_codec.decoder(n);
        for w in agg_offsets.windows(2) {
            aggs.append(&agg_bytes[w[0]..w[1]])?;
        }
        let g = &self.geometry;
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.opts.schema.fields().len());
        for (i, role) in self.opts.window_columns.iter().enumerate() {
            let values: Vec<i64> = match role {
                None => {
                    columns.push(key_cols.next().ok_or_else(|| WeirError::internal("missing group key column"))?);
                    continue;
                }
                Some(WindowColumn::Start) => windows.iter().map(|e| g.ms(g.first_slice(*e))).collect(),
                Some(WindowColumn::End) => windows.iter().map(|e| g.ms(*e)).collect(),
                Some(WindowColumn::Time) => windows.iter().map(|e| g.ms(*e) - 1).collect(),
            };
            let array: ArrayRef = Arc::new(TimestampMillisecondArray::from(values));
            columns.push(cast(&array, self.opts.schema.field(i).data_type())?);
        }
        columns.extend(aggs.finish()?);
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
        let args = self.eval_args(batch)?;
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
            if group.add(&geometry, idx, &self.empty, |accs| apply(accs, &args, row, sign)) {
                self.dirty.push((g, idx));
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

    fn on_barrier(&mut self, writes: &mut EpochWrites) -> Result<()> {
        for (g, idx) in std::mem::take(&mut self.dirty) {
            let Some(group) = self.groups.get_mut(g as usize).and_then(|g| g.as_mut()) else { continue };
            let Ok(pos) = group.slices.binary_search_by_key(&idx, |s| s.idx) else { continue };
            let slice = &mut group.slices[pos];
            if !slice.dirty {
                continue;
            }
            slice.dirty = false;
            slice.persisted = true;
            self.slices_table.put(slice_key(&self.geometry, idx, &group.key), encode_accs(&slice.accs));
        }
        self.slices_table.flush(writes);
        self.meta.flush(writes);
        Ok(())
    }
}

/// The state key of slice `idx` of group `key`: the slice's end (memcomparable), the key.
fn slice_key(g: &Geometry, idx: i64, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + key.len());
    k.extend_from_slice(&encode_i64(g.ms(idx + 1)));
    k.extend_from_slice(key);
    k
}

/// Deletes a freed slice's state entry, if it was written.
fn delete_slice(table: &mut StateTable, g: &Geometry, key: &[u8], s: &Slice) {
    if s.persisted {
        table.delete(slice_key(g, s.idx, key));
    }
}

/// Adds row `row` of the arguments, with `sign`, to `accs`.
fn apply(accs: &mut Accs, args: &[Arg], row: usize, sign: i64) {
    accs.rows += sign;
    for (acc, arg) in accs.accs.iter_mut().zip(args) {
        match (acc, arg) {
            (Acc::Count(c), Arg::Star) => *c += sign,
            (Acc::Count(c), Arg::Valid(a)) if a.is_valid(row) => *c += sign,
            (Acc::SumInt(s, c), Arg::Int(a)) if a.is_valid(row) => {
                *s += sign as i128 * a.value(row) as i128;
                *c += sign;
            }
            (Acc::SumInt(s, c), Arg::Dec(a)) if a.is_valid(row) => {
                *s += sign as i128 * a.value(row);
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

/// Appends the aggregate fields of a window's accumulators to `out`.
fn put_aggs(out: &mut Vec<u8>, aggs: &[AggCall], accs: &Accs) -> Result<()> {
    for (agg, acc) in aggs.iter().zip(&accs.accs) {
        match acc {
            Acc::Count(c) => put_i64(out, *c),
            Acc::SumInt(_, 0) | Acc::SumFloat(_, 0) => put_null(out),
            Acc::SumInt(sum, n) => match agg.kind {
                AggKind::Sum => put_number(out, &agg.output_type, *sum as f64, Some(*sum))?,
                _ => put_avg_int(out, agg, *sum, *n)?,
            },
            Acc::SumFloat(sum, n) => {
                let v = if agg.kind == AggKind::Sum { *sum } else { sum / *n as f64 };
                put_number(out, &agg.output_type, v, None)?
            }
            Acc::Min(Some(v)) | Acc::Max(Some(v)) => out.extend_from_slice(v),
            Acc::Min(None) | Acc::Max(None) => put_null(out),
        }
    }
    Ok(())
}

/// A slice's state value: rows, then each accumulator (i64 and i128 little-endian; MIN/MAX a
/// presence byte, a u32 length and the bytes).
fn encode_accs(accs: &Accs) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 24 * accs.accs.len());
    out.extend_from_slice(&accs.rows.to_le_bytes());
    for acc in &accs.accs {
        match acc {
            Acc::Count(c) => out.extend_from_slice(&c.to_le_bytes()),
            Acc::SumInt(s, c) => {
                out.extend_from_slice(&s.to_le_bytes());
                out.extend_from_slice(&c.to_le_bytes());
            }
            Acc::SumFloat(s, c) => {
                out.extend_from_slice(&s.to_le_bytes());
                out.extend_from_slice(&c.to_le_bytes());
            }
            Acc::Min(v) | Acc::Max(v) => match v {
                Some(v) => {
                    out.push(1);
                    out.extend_from_slice(&(v.len() as u32).to_le_bytes());
                    out.extend_from_slice(v);
                }
                None => out.push(0),
            },
        }
    }
    out
}

/// The accumulators of [`encode_accs`], shaped like `shape`.
fn decode_accs(bytes: &[u8], shape: &Accs) -> Result<Accs> {
    let corrupt = || WeirError::storage("corrupt sliced window aggregate slice");
    let mut pos = 0;
    let mut read = |n: usize| -> Result<&[u8]> {
        let s = bytes.get(pos..pos + n).ok_or_else(corrupt)?;
        pos += n;
        Ok(s)
    };
    let i64_of = |b: &[u8]| i64::from_le_bytes(b.try_into().expect("8 bytes"));
    let rows = i64_of(read(8)?);
    let mut accs = Vec::with_capacity(shape.accs.len());
    for acc in &shape.accs {
        accs.push(match acc {
            Acc::Count(_) => Acc::Count(i64_of(read(8)?)),
            Acc::SumInt(..) => {
                let s = i128::from_le_bytes(read(16)?.try_into().expect("16 bytes"));
                Acc::SumInt(s, i64_of(read(8)?))
            }
            Acc::SumFloat(..) => {
                let s = f64::from_le_bytes(read(8)?.try_into().expect("8 bytes"));
                Acc::SumFloat(s, i64_of(read(8)?))
            }
            Acc::Min(_) | Acc::Max(_) => {
                let v = match read(1)?[0] {
                    0 => None,
                    1 => {
                        let len = u32::from_le_bytes(read(4)?.try_into().expect("4 bytes")) as usize;
                        Some(read(len)?.to_vec())
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
    Ok(Accs { rows, accs })
}
