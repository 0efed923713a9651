//! Rank: deduplication and Top-N, a rank function filtered to a range of ranks (SQL.md
//! "Deduplication and Top-N"; Flink's Deduplicate and Rank operators).
//!
//! For each partition (PARTITION BY) the rows are ordered by the ORDER BY keys, ties by arrival,
//! and numbered: ROW_NUMBER 1, 2, 3, ...; RANK 1, 1, 3 (one plus the rows strictly before);
//! DENSE_RANK 1, 1, 2 (the distinct keys up to the row's). The output is the rows whose rank
//! lies in `lo..=hi`, with the rank appended when the query reads it. It always equals the
//! query over every row received so far: an earlier row arriving later replaces the first one
//! (keep-first on event time), DESC keeps the last, and deleting a kept row brings back the next.
//!
//! Changelog mode: append-only or retract in (upsert input is refused by the planner) →
//! - append-only out for keep-first by arrival over an append-only input: the first `hi` rows
//!   of a partition never change (Flink's processing-time keep-first deduplication);
//! - retract out otherwise. Per partition touched by a chunk, the operator compares the kept
//!   rows before and after the chunk and emits only the difference: a row that left or changed
//!   rank is retracted, a row that entered or changed rank inserted; identical rows cancel.
//!   With ROW_NUMBER and the rank in the output (stream key = partition, rank) a position whose
//!   row changed is one `-U`/`+U` pair; otherwise all retractions of the chunk come before all
//!   inserts, so an upsert by any stream key stays right, and a lone pair is `-U`/`+U`.
//!
//! # State
//! - `rows`: partition key ++ order key ++ arrival sequence (u64, big-endian; inverted for
//!   arrival DESC) → the input row (codec bytes; processing-time columns last). Cached whole, so
//!   the kept rows of a partition are an ordered in-memory range scan. Over an updating input
//!   every row is kept: any of them may have to refill the top after a delete. Over an
//!   append-only input only the rows ranked `<= hi` are kept: nothing can bring the others back.
//! - `seen` (keep-first by arrival only): partition key → rows seen so far (u64, at most `hi`).
//! - `kept` (a deduplication, `ROW_NUMBER` with rank range `1..=1`, over an append-only input,
//!   instead of `rows`): partition key → the one kept row: its sort key (order key ++ arrival
//!   sequence) length-prefixed (u32 little-endian), then the row. One point read per row, as
//!   Flink's Deduplicate keeps one row per key, instead of a partition's range.
//!
//! # Window Top-N and window deduplication
//! When a PARTITION BY column is a window's `window_end` (window Top-N, window dedup), the rows
//! of a window leave state once the watermark reaches its `window_time` (`window_end - 1`):
//! the window has fired, and rows for it are late and dropped before they get here (with an
//! allowed lateness, once the watermark passes `window_time` by that much; late rows until then
//! update the window's ranking, as in a window aggregation). The view
//! keeps the ranked rows already emitted. The open windows' partitions are indexed in memory by
//! window end (rebuilt from state when the job restarts), so a watermark reads only the windows
//! it closes. With `EMIT ON WINDOW CLOSE` (and in every `INSERT INTO` job) nothing is emitted
//! while a window is open; when it closes, each of its partitions' ranked rows are emitted
//! once, `+I`, final (append-only output; Flink's WindowRank and WindowDeduplicate).
//!
//! A retraction is matched with a kept row of the same partition and order key and equal
//! columns, except processing-time ones (a retraction carries a new processing time); of equal
//! rows the latest is removed. Deletes free state, and so does a state TTL (`RankSpec::state_ttl_ms`,
//! unwindowed input only): a stored row, or a keep-first partition's count, not written for that
//! long expires; the partition then ranks without it (a deduplication lets the key's next row
//! through again), and a retraction of an expired row is dropped (Flink).
//!
//! # Order keys
//! Each ORDER BY key is one byte (`0` NULL when NULLS FIRST, `1` a value, `2` NULL when NULLS
//! LAST) and, for a value, its memcomparable bytes, inverted for DESC (the codec's encoding
//! is prefix-free, so inverting reverses the order).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ahash::AHashMap as HashMap;
use arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use arrow::compute::cast;
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::logical_expr::SortExpr;
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{Result, WeirError};
use crate::plan::rank::{RankFunction, RankSpec};
use crate::runtime::changelog::{Op, StreamChunk};
use crate::runtime::operator::{OpContext, Operator};
use crate::runtime::operators::group_agg::window_ends;
use crate::state::codec::put_u64;
use crate::state::{EpochWrites, RowCodec, StateTable, Store, TableRef};

/// The stable name of the kept-rows table.
pub const ROWS: &str = "rows";
/// The stable name of the per-partition row count of keep-first by arrival.
pub const SEEN: &str = "seen";
/// The stable name of a deduplication's kept row per partition.
pub const KEPT: &str = "kept";

/// Length of the arrival sequence at the end of a `rows` key.
const SEQ_LEN: usize = 8;

/// What [`Rank::try_new`] needs.
pub struct RankOptions {
    pub spec: RankSpec,
    /// `spec.partition_by`, over the input schema.
    pub partition_exprs: Vec<Arc<dyn PhysicalExpr>>,
    /// `spec.order_by` expressions, over the input schema, in order.
    pub order_exprs: Vec<Arc<dyn PhysicalExpr>>,
    pub input_schema: SchemaRef,
    /// Whether the input is append-only (no retractions ever arrive).
    pub append_only_input: bool,
    /// The input columns, then the rank if `spec.output_rank`.
    pub schema: SchemaRef,
    /// The index among `partition_exprs` of a window's `window_end`, for window Top-N.
    pub window_end_partition: Option<usize>,
    /// Window Top-N: how long a fired window's partitions stay for late rows, ms
    /// (`table.exec.emit.allow-lateness`; 0 under EOWC, which refuses a lateness).
    pub allowed_lateness_ms: i64,
}

/// One ORDER BY key, encoded as the module docs' "Order keys" say.
pub(super) struct OrderKey {
    expr: Arc<dyn PhysicalExpr>,
    /// Codec of the key's one value.
    codec: RowCodec,
    asc: bool,
    nulls_first: bool,
}

impl OrderKey {
    /// The keys `exprs` (over `input_schema`) sorted as `order_by` says, one per ORDER BY key.
    ///
    /// # Errors
    /// `Internal` when the two lists differ in length; `Unsupported` for a key type the state
    /// codec cannot store.
    pub(super) fn all(exprs: Vec<Arc<dyn PhysicalExpr>>, order_by: &[SortExpr], input_schema: &SchemaRef) -> Result<Vec<Self>> {
        if exprs.len() != order_by.len() {
            return Err(WeirError::internal("one physical expression per ORDER BY key"));
        }
        exprs
            .into_iter()
            .zip(order_by)
            .map(|(expr, s)| {
                let codec = RowCodec::try_new(vec![expr.data_type(input_schema)?])?;
                Ok(OrderKey { expr, codec, asc: s.asc, nulls_first: s.nulls_first })
            })
            .collect()
    }

    /// The order key bytes of every row of `batch` under `keys`: bytewise order is the ORDER BY.
    ///
    /// # Errors
    /// Evaluation errors of the keys' expressions; the codec's for a value of another type.
    pub(super) fn encode(keys: &[OrderKey], batch: &RecordBatch) -> Result<Vec<Vec<u8>>> {
        let n = batch.num_rows();
        let mut out = vec![Vec::new(); n];
        for k in keys {
            let values = k.expr.evaluate(batch)?.into_array(n)?;
            let encoded = k.codec.encode_rows(&[values], n)?;
            for (key, value) in out.iter_mut().zip(encoded) {
                if value.first() == Some(&0) {
                    key.push(if k.nulls_first { 0 } else { 2 });
                } else {
                    key.push(1);
                    if k.asc {
                        key.extend_from_slice(&value[1..]);
                    } else {
                        key.extend(value[1..].iter().map(|b| !b));
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The rank operator; see the module docs.
pub struct Rank {
    function: RankFunction,
    /// The first and last rank emitted, 1-based, inclusive.
    lo: u64,
    hi: u64,
    output_rank: bool,
    pair_by_rank: bool,
    keep_first: bool,
    append_only_input: bool,
    /// `Some(asc)`: the last order key is arrival; `None`: arrival only breaks ties.
    arrival: Option<bool>,
    partition_exprs: Vec<Arc<dyn PhysicalExpr>>,
    partition_codec: RowCodec,
    order_keys: Vec<OrderKey>,
    /// Input column indexes in stored order: non-processing-time columns, then the others.
    stored_order: Vec<usize>,
    /// How many of `stored_order` a retraction must match (the non-processing-time ones).
    num_match_columns: usize,
    /// Codec of a stored row (columns in `stored_order`).
    row_codec: RowCodec,
    /// Codec of the columns a retraction must match.
    match_codec: RowCodec,
    /// Codec of an output row: stored columns, then the rank when output.
    out_codec: RowCodec,
    /// For each output column, its index among the decoded `out_codec` columns.
    out_positions: Vec<usize>,
    /// The rank column's type (UInt64 from DataFusion).
    rank_type: DataType,
    schema: SchemaRef,
    /// `rows`, or `seen` under keep-first.
    state: StateTable,
    /// The arrival sequence of the next row.
    next_seq: u64,
    /// For window Top-N: the partition column that is `window_end`.
    window_end_partition: Option<usize>,
    /// Window Top-N: emit each window's rows once, when it closes.
    emit_on_window_close: bool,
    /// Window Top-N: a fired window's partitions are freed only once the watermark passes its
    /// `window_time` by this much, ms; late rows in that time update its ranking.
    allowed_lateness_ms: i64,
    /// A deduplication over an append-only input: one kept row per partition in `kept`.
    point_dedup: bool,
    /// Window Top-N: the partitions holding state, by window end (ms).
    open_windows: BTreeMap<i64, BTreeSet<Vec<u8>>>,
}

/// A kept row in rank range: its output bytes (stored row, then rank if output) and rank; for
/// [`super::over_window`], an output row and its position in its partition.
pub(super) type Ranked = (Vec<u8>, u64);

impl Rank {
    /// A rank operator; `state_table(name)` returns the id of its state table `name`, loaded
    /// whole from `store`.
    ///
    /// # Errors
    /// `Unsupported` for partition, order or column types the state codec cannot store.
    pub fn try_new(opts: RankOptions, state_table: &mut dyn FnMut(&str) -> TableRef, store: &Store) -> Result<Self> {
        let RankOptions {
            spec,
            partition_exprs,
            order_exprs,
            input_schema,
            append_only_input,
            schema,
            window_end_partition,
            allowed_lateness_ms,
        } = opts;
        let types_of = |exprs: &[Arc<dyn PhysicalExpr>]| -> Result<Vec<DataType>> {
            exprs.iter().map(|e| Ok(e.data_type(&input_schema)?)).collect()
        };
        let partition_codec = RowCodec::try_new(types_of(&partition_exprs)?)?;
        let order_keys = OrderKey::all(order_exprs, &spec.order_by, &input_schema)?;
        let num_inputs = input_schema.fields().len();
        let mut stored_order: Vec<usize> =
            (0..num_inputs).filter(|i| !spec.arrival_columns.contains(i)).collect();
        let num_match_columns = stored_order.len();
        stored_order.extend(spec.arrival_columns.iter().copied().filter(|i| *i < num_inputs));
        let input_types: Vec<DataType> = input_schema.fields().iter().map(|f| f.data_type().clone()).collect();
        let stored_types: Vec<DataType> = stored_order.iter().map(|i| input_types[*i].clone()).collect();
        let row_codec = RowCodec::try_new(stored_types.clone())?;
        let match_codec = RowCodec::try_new(stored_types[..num_match_columns].to_vec())?;
        let rank_type = if spec.output_rank {
            schema
                .fields()
                .get(num_inputs)
                .map(|f| f.data_type().clone())
                .ok_or_else(|| WeirError::internal("rank: output schema has no rank column"))?
        } else {
            DataType::UInt64
        };
        let mut out_types = stored_types;
        let mut out_positions: Vec<usize> =
            (0..num_inputs).map(|i| stored_order.iter().position(|s| *s == i).expect("every column is stored")).collect();
        if spec.output_rank {
            out_types.push(rank_type.clone());
            out_positions.push(num_inputs);
        }
        if schema.fields().len() != out_positions.len() {
            return Err(WeirError::internal("rank: output schema does not match its input"));
        }
        let out_codec = RowCodec::try_new(out_types)?;
        let point_dedup = append_only_input
            && !spec.keep_first
            && spec.function == RankFunction::RowNumber
            && (spec.lo, spec.hi) == (1, 1);
        let table = if spec.keep_first {
            SEEN
        } else if point_dedup {
            KEPT
        } else {
            ROWS
        };
        let state = if spec.keep_first || point_dedup {
            // Deduplication reads one key (the partition) per row.
            StateTable::point(state_table(table), store)
        } else {
            // Top-N reads a partition's rows in order: cached a partition at a time.
            StateTable::grouped(state_table(table), store, partition_codec.group_len())
        }
        .with_ttl(spec.state_ttl_ms);
        // One pass over the state: the next arrival sequence, and the open windows' partitions.
        let mut next_seq = 0;
        let mut open_windows: BTreeMap<i64, BTreeSet<Vec<u8>>> = BTreeMap::new();
        if !spec.keep_first || window_end_partition.is_some() {
            let invert = spec.arrival == Some(false);
            let mut partitions: BTreeSet<Vec<u8>> = BTreeSet::new();
            state.scan(store, |key, value| {
                if point_dedup {
                    next_seq = next_seq.max(seq_of(&split_kept(value)?.0, invert)? + 1);
                } else if !spec.keep_first {
                    next_seq = next_seq.max(seq_of(key, invert)? + 1);
                }
                if window_end_partition.is_some() {
                    let len = partition_codec.encoded_len(key);
                    if partitions.last().is_none_or(|p| p.as_slice() != &key[..len]) {
                        partitions.insert(key[..len].to_vec());
                    }
                }
                Ok(true)
            })?;
            if let Some(k) = window_end_partition {
                let partitions: Vec<Vec<u8>> = partitions.into_iter().collect();
                let mut decoder = partition_codec.decoder(partitions.len());
                for p in &partitions {
                    decoder.append(p)?;
                }
                if !partitions.is_empty() {
                    let ends = window_ends(&decoder.finish()?[k])?;
                    for (p, end) in partitions.into_iter().zip(ends) {
                        open_windows.entry(end).or_default().insert(p);
                    }
                }
            }
        }
        Ok(Self {
            function: spec.function,
            lo: spec.lo,
            hi: spec.hi,
            output_rank: spec.output_rank,
            pair_by_rank: spec.pair_by_rank,
            keep_first: spec.keep_first,
            append_only_input,
            arrival: spec.arrival,
            partition_exprs,
            partition_codec,
            order_keys,
            stored_order,
            num_match_columns,
            row_codec,
            match_codec,
            out_codec,
            out_positions,
            rank_type,
            schema,
            state,
            next_seq,
            window_end_partition,
            emit_on_window_close: spec.emit_on_window_close,
            allowed_lateness_ms,
            point_dedup,
            open_windows,
        })
    }
}

impl Operator for Rank {
    fn name(&self) -> &'static str {
        "Rank"
    }

    fn state_tables(&self) -> &'static [&'static str] {
        &[ROWS, SEEN, KEPT]
    }

    fn state(&self) -> Vec<(String, &StateTable)> {
        let name = if self.keep_first {
            SEEN
        } else if self.point_dedup {
            KEPT
        } else {
            ROWS
        };
        vec![(name.to_string(), &self.state)]
    }

    fn key_groups(&self, _input: usize, chunk: &StreamChunk) -> Result<Vec<u16>> {
        super::key_groups_of(&self.partition_exprs, &self.partition_codec, &chunk.batch)
    }

    fn process_batch(
        &mut self,
        _input: usize,
        chunk: StreamChunk,
        ctx: &OpContext<'_>,
    ) -> Result<Option<StreamChunk>> {
        let n = chunk.len();
        if n == 0 {
            return Ok(None);
        }
        let batch = &chunk.batch;
        let (partition_cols, partitions) = super::partition_keys(&self.partition_exprs, &self.partition_codec, batch)?;
        if let Some(k) = self.window_end_partition {
            for (p, end) in partitions.iter().zip(window_ends(&partition_cols[k])?) {
                self.open_windows.entry(end).or_default().insert(p.clone());
            }
        }
        if self.keep_first {
            return self.keep_first_rows(&chunk, &partitions, ctx);
        }
        let order = OrderKey::encode(&self.order_keys, batch)?;
        let (chunk, partitions, order) = if self.drops_beyond_top() {
            self.drop_beyond_top(chunk, partitions, order, ctx.store)?
        } else {
            (chunk, partitions, order)
        };
        let n = chunk.len();
        if n == 0 {
            return Ok(None);
        }
        let batch = &chunk.batch;
        let stored_cols: Vec<ArrayRef> = self.stored_order.iter().map(|i| Arc::clone(batch.column(*i))).collect();
        let mut rows = self.row_codec.encode_rows(&stored_cols, n)?;
        let matches = if self.num_match_columns == stored_cols.len() {
            None
        } else {
            Some(self.match_codec.encode_rows(&stored_cols[..self.num_match_columns], n)?)
        };

        let groups = super::rows_by_partition(&partitions);

        let mut ops = Vec::new();
        let mut out = Vec::new();
        let (mut retracts, mut inserts): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (Vec::new(), Vec::new());
        for (partition, rows_of) in groups {
            // Under EOWC a window's rows are emitted when it closes, not as they change.
            let before = if self.emit_on_window_close { Vec::new() } else { self.ranked(ctx.store, partition)? };
            for &row in &rows_of {
                let mut key = partition.to_vec();
                key.extend_from_slice(&order[row]);
                if chunk.ops[row].is_insert() {
                    let seq = if self.arrival == Some(false) { !self.next_seq } else { self.next_seq };
                    self.next_seq += 1;
                    key.extend_from_slice(&seq.to_be_bytes());
                    if self.point_dedup {
                        self.offer_kept(ctx.store, partition, &key[partition.len()..], &rows[row])?;
                    } else {
                        // Each row is inserted once: its encoding moves into the state.
                        self.state.put(key, std::mem::take(&mut rows[row]));
                    }
                } else if self.point_dedup {
                    return Err(WeirError::internal("rank: a retraction in an append-only input"));
                } else {
                    let wanted = matches.as_ref().map_or(&rows[row], |m| &m[row]);
                    let found = self
                        .state
                        .prefix_iter(ctx.store, &key)?
                        .rev()
                        .find(|(_, stored)| stored.starts_with(wanted))
                        .map(|(k, _)| k.to_vec());
                    match found {
                        Some(k) => self.state.delete(k),
                        // A row whose state expired (state TTL).
                        None if self.state.has_ttl() => {}
                        None => {
                            return Err(WeirError::internal(
                                "rank: retraction of a row the operator does not hold",
                            ))
                        }
                    }
                }
            }
            let trim = self.append_only_input && !self.point_dedup;
            if self.emit_on_window_close {
                if trim {
                    self.trim(ctx.store, partition)?;
                }
                continue;
            }
            // One walk gives the ranked rows and trims those after them.
            let after = self.ranked_trimming(ctx.store, partition, trim)?;
            let (gone, came) = difference(before, after);
            if self.pair_by_rank {
                emit_by_rank(gone, came, &mut ops, &mut out);
            } else {
                retracts.extend(gone.into_iter().map(|(r, _)| r));
                inserts.extend(came.into_iter().map(|(r, _)| r));
            }
        }
        if retracts.len() == 1 && inserts.len() == 1 {
            ops.extend([Op::UpdateBefore, Op::UpdateAfter]);
        } else {
            ops.extend(std::iter::repeat_n(Op::Delete, retracts.len()));
            ops.extend(std::iter::repeat_n(Op::Insert, inserts.len()));
        }
        out.extend(retracts);
        out.extend(inserts);
        if out.is_empty() {
            return Ok(None);
        }
        Ok(Some(StreamChunk::new(ops, self.decode(&out)?)))
    }

    /// Window Top-N: frees the state of the windows the watermark closed (their `window_time`,
    /// `window_end - 1`, is at or below it, less the allowed lateness); under EOWC emits their
    /// ranked rows first.
    fn on_watermark(
        &mut self,
        _input: usize,
        watermark_ms: i64,
        ctx: &OpContext<'_>,
    ) -> Result<(Option<StreamChunk>, Option<i64>)> {
        if self.window_end_partition.is_none() {
            return Ok((None, Some(watermark_ms)));
        }
        let cut = watermark_ms.saturating_sub(self.allowed_lateness_ms).saturating_add(2);
        let still_open = self.open_windows.split_off(&cut);
        let closed = std::mem::replace(&mut self.open_windows, still_open);
        let mut out = Vec::new();
        for partition in closed.into_values().flatten() {
            if self.emit_on_window_close {
                out.extend(self.ranked(ctx.store, &partition)?.into_iter().map(|(row, _)| row));
            }
            if self.keep_first || self.point_dedup {
                self.state.delete(partition);
            } else {
                self.state.delete_prefix(ctx.store, &partition)?;
            }
        }
        if out.is_empty() {
            return Ok((None, Some(watermark_ms)));
        }
        let ops = vec![Op::Insert; out.len()];
        Ok((Some(StreamChunk::new(ops, self.decode(&out)?)), Some(watermark_ms)))
    }

    fn on_barrier(&mut self, writes: &mut EpochWrites, ctx: &OpContext<'_>) -> Result<()> {
        self.state.sweep_expired(ctx.store)?;
        self.state.flush(writes);
        Ok(())
    }
}

impl Rank {
    /// Keep-first by arrival over an append-only input: the first `hi` rows of each partition
    /// pass (those ranked from `lo` on), the rest are dropped.
    fn keep_first_rows(
        &mut self,
        chunk: &StreamChunk,
        partitions: &[Vec<u8>],
        ctx: &OpContext<'_>,
    ) -> Result<Option<StreamChunk>> {
        let mut keep = Vec::new();
        let mut ranks = Vec::new();
        for (row, p) in partitions.iter().enumerate() {
            if !chunk.ops[row].is_insert() {
                return Err(WeirError::internal("rank: a retraction in an append-only input"));
            }
            let seen = match self.state.get(ctx.store, p)? {
                Some(v) => u64::from_le_bytes(
                    v.as_slice().try_into().map_err(|_| WeirError::storage("corrupt rank row count"))?,
                ),
                None => 0,
            };
            if seen >= self.hi {
                continue;
            }
            let rank = seen + 1;
            self.state.put(p.clone(), rank.to_le_bytes().to_vec());
            if rank >= self.lo {
                keep.push(u32::try_from(row).map_err(|_| WeirError::internal("chunk too large"))?);
                ranks.push(rank);
            }
        }
        if keep.is_empty() {
            return Ok(None);
        }
        let kept = chunk.take(&keep, vec![Op::Insert; keep.len()])?;
        let mut columns = kept.batch.columns().to_vec();
        if self.output_rank {
            columns.push(cast(&(Arc::new(UInt64Array::from(ranks)) as ArrayRef), &self.rank_type)?);
        }
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), columns)?;
        Ok(Some(StreamChunk::new(kept.ops, batch)))
    }

    /// Whether rows that rank after a full partition's last kept row are dropped on arrival: a
    /// Top-N by ROW_NUMBER over an append-only input (nothing is ever deleted, so such a row
    /// can never enter), whose new rows sort after equal old ones (arrival not descending), and
    /// whose rows do not expire (no TTL).
    fn drops_beyond_top(&self) -> bool {
        self.append_only_input
            && !self.point_dedup
            && !self.keep_first
            && self.function == RankFunction::RowNumber
            && self.arrival != Some(false)
            && !self.state.has_ttl()
    }

    /// The rows of `chunk` (with their partition and order keys) less those that rank after
    /// the `hi`-th kept row of a partition holding `hi` rows: with a larger arrival sequence
    /// than every stored row, a row ranks after it when its order key is equal or greater.
    /// What the rows do is then the same as if they were stored and trimmed, without the work.
    fn drop_beyond_top(
        &mut self,
        chunk: StreamChunk,
        partitions: Vec<Vec<u8>>,
        order: Vec<Vec<u8>>,
        store: &Store,
    ) -> Result<(StreamChunk, Vec<Vec<u8>>, Vec<Vec<u8>>)> {
        let Some(last) = self.hi.checked_sub(1).and_then(|h| usize::try_from(h).ok()) else {
            return Ok((chunk, partitions, order));
        };
        // Per partition, the order key of its last kept row when it is full.
        let mut bounds: HashMap<&[u8], Option<Vec<u8>>> = HashMap::new();
        let mut keep = Vec::with_capacity(partitions.len());
        for (i, p) in partitions.iter().enumerate() {
            let bound = match bounds.get(p.as_slice()) {
                Some(b) => b,
                None => {
                    let b = self.state.prefix_iter(store, p)?.nth(last).map(|(k, _)| {
                        k[p.len()..k.len().saturating_sub(SEQ_LEN)].to_vec()
                    });
                    bounds.entry(p.as_slice()).or_insert(b)
                }
            };
            keep.push(bound.as_ref().is_none_or(|b| order[i] < *b));
        }
        if keep.iter().all(|k| *k) {
            return Ok((chunk, partitions, order));
        }
        let indices: Vec<u32> = (0..keep.len())
            .filter(|i| keep[*i])
            .map(|i| u32::try_from(i).map_err(|_| WeirError::internal("chunk too large")))
            .collect::<Result<_>>()?;
        let kept = chunk.take(&indices, vec![Op::Insert; indices.len()])?;
        let take = |v: Vec<Vec<u8>>| -> Vec<Vec<u8>> { v.into_iter().zip(&keep).filter(|(_, k)| **k).map(|(x, _)| x).collect() };
        Ok((kept, take(partitions), take(order)))
    }

    /// A deduplication: keeps the row `row` with sort key `sort` (order key ++ arrival
    /// sequence) for `partition` if it ranks before the one kept.
    fn offer_kept(&mut self, store: &Store, partition: &[u8], sort: &[u8], row: &[u8]) -> Result<()> {
        if let Some(kept) = self.state.get(store, partition)? {
            if split_kept(&kept)?.0 <= sort {
                return Ok(());
            }
        }
        let mut value = Vec::with_capacity(4 + sort.len() + row.len());
        value.extend_from_slice(&(sort.len() as u32).to_le_bytes());
        value.extend_from_slice(sort);
        value.extend_from_slice(row);
        self.state.put(partition.to_vec(), value);
        Ok(())
    }

    /// The kept rows of `partition` whose rank is in `lo..=hi`, in rank order.
    fn ranked(&mut self, store: &Store, partition: &[u8]) -> Result<Vec<Ranked>> {
        self.ranked_trimming(store, partition, false)
    }

    /// [`Rank::ranked`], and with `trim` (an append-only input) deletes the rows ranked after
    /// `hi`, which can never come back, in the same walk.
    fn ranked_trimming(&mut self, store: &Store, partition: &[u8], trim: bool) -> Result<Vec<Ranked>> {
        let (lo, hi, output_rank) = (self.lo, self.hi, self.output_rank);
        if self.point_dedup {
            let Some(kept) = self.state.get(store, partition)? else { return Ok(Vec::new()) };
            let mut row = split_kept(&kept)?.1.to_vec();
            if output_rank {
                put_u64(&mut row, 1);
            }
            return Ok(vec![(row, 1)]);
        }
        let mut out = Vec::new();
        let mut beyond = Vec::new();
        self.walk(store, partition, |key, stored, rank| {
            if rank > hi {
                if trim {
                    beyond.push(key.to_vec());
                }
                return trim;
            }
            if rank >= lo {
                // Room for the rank (a present marker and 8 bytes): no reallocation to add it.
                let mut row = Vec::with_capacity(stored.len() + 9);
                row.extend_from_slice(stored);
                if output_rank {
                    put_u64(&mut row, rank);
                }
                out.push((row, rank));
            }
            true
        })?;
        for key in beyond {
            self.state.delete(key);
        }
        Ok(out)
    }

    /// Over an append-only input: deletes the rows ranked after `hi`, which can never come back.
    fn trim(&mut self, store: &Store, partition: &[u8]) -> Result<()> {
        let hi = self.hi;
        let mut beyond = Vec::new();
        self.walk(store, partition, |key, _, rank| {
            if rank > hi {
                beyond.push(key.to_vec());
            }
            true
        })?;
        for key in beyond {
            self.state.delete(key);
        }
        Ok(())
    }

    /// Calls `visit(key, stored row, rank)` for the rows of `partition` in order while it
    /// returns true.
    fn walk(
        &mut self,
        store: &Store,
        partition: &[u8],
        mut visit: impl FnMut(&[u8], &[u8], u64) -> bool,
    ) -> Result<()> {
        let (arrival, function) = (self.arrival, self.function);
        let mut previous: Option<&[u8]> = None;
        let mut rank = 0u64;
        for (position, (key, stored)) in self.state.prefix_iter(store, partition)?.enumerate() {
            // With arrival in the order, no two rows tie.
            let tie_part = match arrival {
                Some(_) => key,
                None => &key[..key.len().saturating_sub(SEQ_LEN)],
            };
            let tied = previous == Some(tie_part);
            rank = match function {
                RankFunction::RowNumber => position as u64 + 1,
                RankFunction::Rank if tied => rank,
                RankFunction::Rank => position as u64 + 1,
                RankFunction::DenseRank if tied => rank,
                RankFunction::DenseRank => rank + 1,
            };
            previous = Some(tie_part);
            if !visit(key, stored, rank) {
                break;
            }
        }
        Ok(())
    }

    /// Output rows from their bytes (stored columns, then the rank).
    fn decode(&self, rows: &[Vec<u8>]) -> Result<RecordBatch> {
        let mut decoder = self.out_codec.decoder(rows.len());
        for r in rows {
            decoder.append(r)?;
        }
        let decoded = decoder.finish()?;
        let columns = self.out_positions.iter().map(|p| Arc::clone(&decoded[*p])).collect();
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), columns)?)
    }
}

/// A `kept` value: (sort key, row).
fn split_kept(value: &[u8]) -> Result<(&[u8], &[u8])> {
    let corrupt = || WeirError::storage("corrupt deduplication state");
    let len = u32::from_le_bytes(value.get(..4).ok_or_else(corrupt)?.try_into().map_err(|_| corrupt())?) as usize;
    let sort = value.get(4..4 + len).ok_or_else(corrupt)?;
    Ok((sort, &value[4 + len..]))
}

/// The arrival sequence at the end of a `rows` key.
pub(super) fn seq_of(key: &[u8], inverted: bool) -> Result<u64> {
    let bytes: [u8; SEQ_LEN] = key
        .get(key.len().saturating_sub(SEQ_LEN)..)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| WeirError::storage("corrupt rank state key"))?;
    let seq = u64::from_be_bytes(bytes);
    Ok(if inverted { !seq } else { seq })
}

/// The multiset difference of two rank-ordered row lists: (rows only in `before`, rows only in
/// `after`), each in rank order.
pub(super) fn difference(before: Vec<Ranked>, after: Vec<Ranked>) -> (Vec<Ranked>, Vec<Ranked>) {
    let mut counts: HashMap<&[u8], i64> = HashMap::new();
    for (row, _) in &before {
        *counts.entry(row.as_slice()).or_default() += 1;
    }
    let mut came_idx = Vec::new();
    for (i, (row, _)) in after.iter().enumerate() {
        match counts.get_mut(row.as_slice()) {
            Some(c) if *c > 0 => *c -= 1,
            _ => came_idx.push(i),
        }
    }
    // What is left in `counts` was in `before` only.
    let mut gone_idx = Vec::new();
    for (i, (row, _)) in before.iter().enumerate() {
        if let Some(c) = counts.get_mut(row.as_slice()) {
            if *c > 0 {
                *c -= 1;
                gone_idx.push(i);
            }
        }
    }
    let pick = |list: Vec<Ranked>, idx: Vec<usize>| -> Vec<Ranked> {
        let mut list: Vec<Option<Ranked>> = list.into_iter().map(Some).collect();
        idx.into_iter().filter_map(|i| list[i].take()).collect()
    };
    (pick(before, gone_idx), pick(after, came_idx))
}

/// Emits the changes of one partition position by position: `-U`/`+U` where a rank's row
/// changed, `-D` where a rank is gone, `+I` where one is new.
fn emit_by_rank(gone: Vec<Ranked>, came: Vec<Ranked>, ops: &mut Vec<Op>, out: &mut Vec<Vec<u8>>) {
    let mut gone = gone.into_iter().peekable();
    let mut came = came.into_iter().peekable();
    loop {
        match (gone.peek().map(|g| g.1), came.peek().map(|c| c.1)) {
            (Some(g), Some(c)) if g == c => {
                ops.extend([Op::UpdateBefore, Op::UpdateAfter]);
                out.push(gone.next().expect("peeked").0);
                out.push(came.next().expect("peeked").0);
            }
            (Some(g), c) if c.is_none_or(|c| g < c) => {
                ops.push(Op::Delete);
                out.push(gone.next().expect("peeked").0);
            }
            (_, Some(_)) => {
                ops.push(Op::Insert);
                out.push(came.next().expect("peeked").0);
            }
            (None, None) => break,
            (Some(_), None) => unreachable!("handled above"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use arrow::array::{Array, Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use datafusion::logical_expr::{col, SortExpr};
    use datafusion::physical_expr::expressions::Column as PhysicalColumn;

    /// Input rows `(k BIGINT, v BIGINT, s STRING)`.
    fn input_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("v", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
        ]))
    }

    /// Parses a changelog, one row a line: `+I 1 10 a` (`NULL` for a null).
    fn chunk(text: &str) -> StreamChunk {
        let (mut ops, mut k, mut v, mut s) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let f: Vec<&str> = line.split_whitespace().collect();
            ops.push(match f[0] {
                "+I" => Op::Insert,
                "-D" => Op::Delete,
                "-U" => Op::UpdateBefore,
                "+U" => Op::UpdateAfter,
                other => panic!("bad op {other}"),
            });
            let int = |x: &str| (x != "NULL").then(|| x.parse::<i64>().expect("an integer"));
            k.push(int(f[1]));
            v.push(int(f[2]));
            s.push((f[3] != "NULL").then(|| f[3].to_string()));
        }
        let batch = RecordBatch::try_new(
            input_schema(),
            vec![
                Arc::new(Int64Array::from(k)),
                Arc::new(Int64Array::from(v)),
                Arc::new(StringArray::from(s)),
            ],
        )
        .expect("valid batch");
        StreamChunk::new(ops, batch)
    }

    /// Prints a chunk as the lines [`chunk`] parses, with the rank column if any.
    fn pretty(out: Option<StreamChunk>) -> Vec<String> {
        let Some(c) = out else { return vec![] };
        let text = |a: &ArrayRef, i: usize| {
            if a.is_null(i) {
                "NULL".to_string()
            } else {
                arrow::util::display::array_value_to_string(a, i).expect("displayable")
            }
        };
        (0..c.len())
            .map(|i| {
                let mut line = c.ops[i].to_string();
                for a in c.columns() {
                    line.push(' ');
                    line.push_str(&text(a, i));
                }
                line
            })
            .collect()
    }

    struct Harness {
        op: Rank,
        store: Store,
        _dir: tempfile::TempDir,
    }

    impl Harness {
        fn push(&mut self, text: &str) -> Vec<String> {
            let ctx = OpContext { store: &self.store };
            pretty(self.op.process_batch(0, chunk(text), &ctx).expect("process"))
        }
    }

    /// A rank over partition `k`, order `v` (ASC when `asc`), keeping `lo..=hi`.
    fn rank(function: RankFunction, asc: bool, lo: u64, hi: u64, output_rank: bool, append_only: bool) -> Harness {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path()).expect("store");
        let spec = RankSpec {
            function,
            partition_by: vec![col("k")],
            order_by: vec![SortExpr::new(col("v"), asc, false)],
            arrival: None,
            arrival_columns: vec![],
            lo,
            hi,
            output_rank,
            pair_by_rank: output_rank && function == RankFunction::RowNumber,
            keep_first: false,
            state_ttl_ms: None,
            emit_on_window_close: false,
        };
        harness(spec, append_only, dir, store)
    }

    fn harness(spec: RankSpec, append_only: bool, dir: tempfile::TempDir, store: Store) -> Harness {
        let input = input_schema();
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        if spec.output_rank {
            fields.push(Field::new("rn", DataType::UInt64, false));
        }
        let column = |name: &str, i: usize| Arc::new(PhysicalColumn::new(name, i)) as Arc<dyn PhysicalExpr>;
        let order_exprs = if spec.order_by.is_empty() { vec![] } else { vec![column("v", 1)] };
        let opts = RankOptions {
            spec,
            partition_exprs: vec![column("k", 0)],
            order_exprs,
            input_schema: input,
            append_only_input: append_only,
            schema: Arc::new(Schema::new(fields)),
            window_end_partition: None,
            allowed_lateness_ms: 0,
        };
        let mut next = 0;
        let mut tables = |_: &str| -> TableRef {
            next += 1;
            next.into()
        };
        let op = Rank::try_new(opts, &mut tables, &store).expect("rank");
        Harness { op, store, _dir: dir }
    }

    #[test]
    fn keep_first_on_time_replaces_with_an_earlier_row_and_promotes_on_delete() {
        let mut h = rank(RankFunction::RowNumber, true, 1, 1, false, false);
        assert_eq!(h.push("+I 1 5 a\n+I 1 7 b\n+I 2 3 c"), vec!["+I 1 5 a", "+I 2 3 c"]);
        // Later but not earlier: nothing.
        assert_eq!(h.push("+I 1 6 d"), Vec::<String>::new());
        // Earlier: replaces.
        assert_eq!(h.push("+I 1 4 e"), vec!["-U 1 5 a", "+U 1 4 e"]);
        // Deleting the kept row brings back the next.
        assert_eq!(h.push("-D 1 4 e"), vec!["-U 1 4 e", "+U 1 5 a"]);
        // Deleting a row that is not kept changes nothing.
        assert_eq!(h.push("-D 1 7 b"), Vec::<String>::new());
        assert_eq!(h.push("-D 2 3 c"), vec!["-D 2 3 c"]);
    }

    #[test]
    fn keep_last_orders_descending() {
        let mut h = rank(RankFunction::RowNumber, false, 1, 1, false, false);
        assert_eq!(h.push("+I 1 5 a\n+I 1 7 b"), vec!["+I 1 7 b"]);
        assert_eq!(h.push("+I 1 9 c\n+I 1 8 d"), vec!["-U 1 7 b", "+U 1 9 c"]);
        assert_eq!(h.push("-U 1 9 c\n+U 1 1 c"), vec!["-U 1 9 c", "+U 1 8 d"]);
    }

    #[test]
    fn top_n_with_rank_pairs_changes_by_position() {
        let mut h = rank(RankFunction::RowNumber, true, 1, 3, true, false);
        assert_eq!(
            h.push("+I 1 10 a\n+I 1 20 b\n+I 1 30 c\n+I 1 40 d"),
            vec!["+I 1 10 a 1", "+I 1 20 b 2", "+I 1 30 c 3"]
        );
        // A new second: ranks 2 and 3 change rows, d stays out.
        assert_eq!(h.push("+I 1 15 e"), vec!["-U 1 20 b 2", "+U 1 15 e 2", "-U 1 30 c 3", "+U 1 20 b 3"]);
        // Deleting the first shifts every rank up and brings c back.
        assert_eq!(
            h.push("-D 1 10 a"),
            vec!["-U 1 10 a 1", "+U 1 15 e 1", "-U 1 15 e 2", "+U 1 20 b 2", "-U 1 20 b 3", "+U 1 30 c 3"]
        );
        // An update below the top changes nothing; one out of the top moves in at the end.
        assert_eq!(h.push("-U 1 40 d\n+U 1 41 d"), Vec::<String>::new());
        assert_eq!(h.push("-U 1 30 c\n+U 1 31 c"), vec!["-U 1 30 c 3", "+U 1 31 c 3"]);
    }

    #[test]
    fn a_range_without_the_first_rank() {
        let mut h = rank(RankFunction::RowNumber, true, 2, 3, false, false);
        assert_eq!(h.push("+I 1 10 a\n+I 1 20 b"), vec!["+I 1 20 b"]);
        assert_eq!(h.push("+I 1 5 c"), vec!["+I 1 10 a"]);
        assert_eq!(h.push("+I 1 1 d"), vec!["-U 1 20 b", "+U 1 5 c"]);
    }

    #[test]
    fn rank_and_dense_rank_share_ties() {
        let mut r = rank(RankFunction::Rank, true, 1, 2, true, false);
        let mut d = rank(RankFunction::DenseRank, true, 1, 2, true, false);
        let rows = "+I 1 10 a\n+I 1 10 b\n+I 1 20 c";
        assert_eq!(r.push(rows), vec!["+I 1 10 a 1", "+I 1 10 b 1"]);
        assert_eq!(d.push(rows), vec!["+I 1 10 a 1", "+I 1 10 b 1", "+I 1 20 c 2"]);
        // A third 10: RANK 1, 1, 1 (c is rank 4); DENSE_RANK unchanged but one more row.
        assert_eq!(r.push("+I 1 10 e"), vec!["+I 1 10 e 1"]);
        assert_eq!(d.push("+I 1 10 e"), vec!["+I 1 10 e 1"]);
        // Deleting two of the 10s: RANK brings c back at 2.
        assert_eq!(r.push("-D 1 10 a\n-D 1 10 b"), vec!["-D 1 10 a 1", "-D 1 10 b 1", "+I 1 20 c 2"]);
        assert_eq!(d.push("-D 1 10 a\n-D 1 10 b"), vec!["-D 1 10 a 1", "-D 1 10 b 1"]);
    }

    #[test]
    fn identical_rows_cancel() {
        let mut h = rank(RankFunction::RowNumber, true, 1, 2, false, false);
        assert_eq!(h.push("+I 1 10 a\n+I 1 10 a\n+I 1 10 a"), vec!["+I 1 10 a", "+I 1 10 a"]);
        // One copy fewer: still two in the top.
        assert_eq!(h.push("-D 1 10 a"), Vec::<String>::new());
        assert_eq!(h.push("-D 1 10 a"), vec!["-D 1 10 a"]);
    }

    #[test]
    fn append_only_input_keeps_only_the_top() -> Result<()> {
        let mut h = rank(RankFunction::RowNumber, true, 1, 2, false, true);
        assert_eq!(h.push("+I 1 30 a\n+I 1 20 b\n+I 1 10 c\n+I 1 40 d"), vec!["+I 1 10 c", "+I 1 20 b"]);
        let held = |h: &Harness| {
            let mut n = 0;
            h.op.state.scan(&h.store, |_, _| Ok({ n += 1; true })).expect("scan");
            n
        };
        assert_eq!(held(&h), 2);
        assert_eq!(h.push("+I 1 15 e"), vec!["-U 1 20 b", "+U 1 15 e"]);
        assert_eq!(held(&h), 2);
        Ok(())
    }

    /// Over an append-only input a full partition drops a row that ranks after its last kept
    /// row before storing it: a greater order key, or an equal one (the earlier arrival keeps
    /// the boundary), in the chunk that filled the partition or a later one; a smaller key
    /// still enters, also in a chunk with dropped rows.
    #[test]
    fn a_full_top_n_drops_rows_beyond_its_last_on_arrival() {
        let mut h = rank(RankFunction::RowNumber, true, 1, 2, true, true);
        assert_eq!(h.push("+I 1 10 a\n+I 1 20 b\n+I 1 20 c"), vec!["+I 1 10 a 1", "+I 1 20 b 2"]);
        assert_eq!(h.push("+I 1 20 d\n+I 1 30 e\n+I 2 50 f"), vec!["+I 2 50 f 1"]);
        assert_eq!(h.push("+I 1 99 g\n+I 1 5 h\n+I 1 10 i"), vec!["-U 1 10 a 1", "+U 1 5 h 1", "-U 1 20 b 2", "+U 1 10 a 2"]);
        let mut held = 0;
        h.op.state.scan(&h.store, |_, _| Ok({ held += 1; true })).expect("scan");
        assert_eq!(held, 3, "partition 1 keeps 5 and 10 (a), partition 2 keeps 50");
    }

    #[test]
    fn keep_first_by_arrival_is_append_only() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path()).expect("store");
        let spec = RankSpec {
            function: RankFunction::RowNumber,
            partition_by: vec![col("k")],
            order_by: vec![],
            arrival: Some(true),
            arrival_columns: vec![],
            lo: 1,
            hi: 1,
            output_rank: true,
            pair_by_rank: true,
            keep_first: true,
            state_ttl_ms: None,
            emit_on_window_close: false,
        };
        let mut h = harness(spec, true, dir, store);
        assert_eq!(h.push("+I 1 5 a\n+I 1 1 b\n+I 2 9 c"), vec!["+I 1 5 a 1", "+I 2 9 c 1"]);
        assert_eq!(h.push("+I 2 1 d\n+I 3 0 e"), vec!["+I 3 0 e 1"]);
    }

    #[test]
    fn keep_last_by_arrival_ignores_processing_time_when_retracting() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path()).expect("store");
        // Column v plays the processing time: a retraction carries another value.
        let spec = RankSpec {
            function: RankFunction::RowNumber,
            partition_by: vec![col("k")],
            order_by: vec![],
            arrival: Some(false),
            arrival_columns: vec![1],
            lo: 1,
            hi: 1,
            output_rank: false,
            pair_by_rank: false,
            keep_first: false,
            state_ttl_ms: None,
            emit_on_window_close: false,
        };
        let mut h = harness(spec, false, dir, store);
        assert_eq!(h.push("+I 1 100 a"), vec!["+I 1 100 a"]);
        assert_eq!(h.push("+I 1 200 b"), vec!["-U 1 100 a", "+U 1 200 b"]);
        assert_eq!(h.push("-D 1 300 b"), vec!["-U 1 200 b", "+U 1 100 a"]);
    }

    #[test]
    fn state_survives_a_restart() -> Result<()> {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path())?;
        let spec = || RankSpec {
            function: RankFunction::RowNumber,
            partition_by: vec![col("k")],
            order_by: vec![SortExpr::new(col("v"), true, false)],
            arrival: None,
            arrival_columns: vec![],
            lo: 1,
            hi: 2,
            output_rank: true,
            pair_by_rank: true,
            keep_first: false,
            state_ttl_ms: None,
            emit_on_window_close: false,
        };
        let mut h = harness(spec(), false, dir, store);
        assert_eq!(h.push("+I 1 10 a\n+I 1 10 b"), vec!["+I 1 10 a 1", "+I 1 10 b 2"]);
        let mut writes = EpochWrites::default();
        h.op.on_barrier(&mut writes, &OpContext { store: &h.store })?;
        h.store.commit(writes, 1)?;
        let Harness { store, _dir, .. } = h;
        let mut h = harness(spec(), false, _dir, store);
        // Ties go by arrival, continued after the restart: c is third.
        assert_eq!(h.push("+I 1 10 c"), Vec::<String>::new());
        assert_eq!(h.push("-D 1 10 a"), vec!["-U 1 10 a 1", "+U 1 10 b 1", "-U 1 10 b 2", "+U 1 10 c 2"]);
        Ok(())
    }

    #[test]
    fn nulls_and_descending_strings_order() -> Result<()> {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path())?;
        let input = input_schema();
        let spec = RankSpec {
            function: RankFunction::RowNumber,
            partition_by: vec![],
            order_by: vec![SortExpr::new(col("s"), false, false)],
            arrival: None,
            arrival_columns: vec![],
            lo: 1,
            hi: 10,
            output_rank: true,
            pair_by_rank: true,
            keep_first: false,
            state_ttl_ms: None,
            emit_on_window_close: false,
        };
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("rn", DataType::UInt64, false));
        let opts = RankOptions {
            spec,
            partition_exprs: vec![],
            order_exprs: vec![Arc::new(PhysicalColumn::new("s", 2))],
            input_schema: input,
            append_only_input: false,
            schema: Arc::new(Schema::new(fields)),
            window_end_partition: None,
            allowed_lateness_ms: 0,
        };
        let op = Rank::try_new(opts, &mut |_| 1.into(), &store)?;
        let mut h = Harness { op, store, _dir: dir };
        assert_eq!(
            h.push("+I 1 1 ab\n+I 1 2 NULL\n+I 1 3 b\n+I 1 4 a"),
            vec!["+I 1 3 b 1", "+I 1 1 ab 2", "+I 1 4 a 3", "+I 1 2 NULL 4"]
        );
        Ok(())
    }
}
