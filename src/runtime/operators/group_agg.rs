//! GroupAggregate: unwindowed GROUP BY with retractions (Flink's GroupAggFunction).
//!
//! Changelog mode: any in → retract out, keyed by the group columns (the stream key). For each
//! group touched by a chunk the operator emits `+I` for a new group, `-U`/`+U` when its result
//! row changed, and `-D` when its last row was retracted. A global aggregate (no GROUP BY)
//! of a view always has exactly one row, as in Postgres: it starts as `COUNT(*) = 0`, other
//! aggregates NULL; in an `INSERT INTO` job it comes and goes with its rows, as Flink's
//! ([`GroupAggregate::with_empty_row`]).
//!
//! Aggregates: COUNT(*), COUNT(x), SUM, AVG, MIN, MAX, COUNT/SUM/AVG(DISTINCT x), STRING_AGG
//! (LISTAGG) and ARRAY_AGG, each with an optional `FILTER (WHERE ...)`. NULL arguments are
//! skipped (SQL), but by ARRAY_AGG. SUM and AVG keep a sum and a
//! count of non-NULL values, so a retraction subtracts; MIN, MAX and the DISTINCT aggregates
//! keep the multiset of values per group, so deleting the current extreme brings back the next
//! one, and a DISTINCT aggregate counts (SUM/AVG: adds) a value when its count in the multiset
//! rises from zero and takes it back when it falls to zero (Flink's distinct aggregates). Over an
//! append-only input MIN and MAX keep only the current extreme in the group's state, with no
//! value multiset (Flink: `MaxAggFunction` for insert-only input, `MaxWithRetractAggFunction`
//! otherwise). STRING_AGG and ARRAY_AGG keep each group's values in arrival order and
//! join them (STRING_AGG skips NULLs; ARRAY_AGG keeps them, as Postgres and Flink); a
//! retraction takes out the earliest equal value (Flink's `ListAggWithRetractAggFunction`,
//! `ArrayAggFunction`), so a value deleted and inserted again moves to the end.
//!
//! FIRST_VALUE and LAST_VALUE (Flink's `FirstValueAggFunction`, `LastValueAggFunction`): the
//! first and the last non-NULL value of the group in arrival order, NULL while it has none.
//! Over an append-only input the group's accumulator holds that one value; over an updating
//! input each one keeps the group's non-NULL values in arrival order as STRING_AGG does (its
//! `lists/<i>` table), and a retraction takes out the earliest equal value, so deleting the
//! last value brings back the one before it (Flink's `FirstValueWithRetractAggFunction`,
//! `LastValueWithRetractAggFunction`).
//!
//! # State
//! - `groups`: group key → row count and accumulators (cached whole in memory).
//! - `values/<i>`: for the i-th MIN or MAX (over an updating input): group key ++ value →
//!   count.
//! - `distinct/<i>`: for the DISTINCT aggregates over one argument, `i` the first of them: group
//!   key ++ value → the value's count in each of them (i64 little-endian each, in aggregate
//!   order), as Flink's distinct aggregates over one argument share one `MapView` whose value
//!   counts per FILTER (`DistinctInfo`). Nexmark q16's `COUNT(DISTINCT bidder)`, unfiltered and
//!   with three disjoint FILTERs, is then one point read and one write per row (two before,
//!   each with a table and a cache entry of its own). A COUNT(DISTINCT) alone over its argument
//!   keeps `values/<i>` with one count, and so does each of a state written before multisets
//!   were shared (its `values/<i>` tables not all empty).
//! - `lists/<i>`: for the i-th STRING_AGG or ARRAY_AGG, and FIRST_VALUE or LAST_VALUE over an
//!   updating input: group key ++ arrival number (u64 big-endian, from the group's
//!   accumulator) → the value's field.
//!
//! A group's entries are deleted when its row count reaches zero. With a state TTL
//! ([`GroupAggregate::with_state_ttl`], unwindowed only) a group not written for that long
//! expires: it is swept from `groups` with its `values` entries, and a later row of it starts
//! a new group, emitted `+I` (the view, keyed by the group, replaces its old row); a
//! retraction reaching an expired group is dropped (Flink's GroupAggFunction).
//!
//! # Window aggregation
//! When a group column is a window's `window_end` (GROUP BY window_start, window_end, ... over
//! TUMBLE, HOP or CUMULATE), a window's groups are freed once the watermark reaches its
//! `window_time` (`window_end - 1 ms`; Flink: the window fires), so state is bounded by the open
//! windows. The view keeps the rows already emitted. With `EMIT ON WINDOW CLOSE` nothing is
//! emitted while a window is open; when it closes each of its groups is emitted once, `+I`,
//! final (append-only output). Rows for closed windows never reach this operator: the window
//! assigner drops and counts them. With an allowed lateness (`table.exec.emit.allow-lateness`)
//! a fired window keeps its state until the watermark passes `window_time + lateness`; late rows
//! in that time update it (`-U`/`+U`, also after an EOWC emission).
//!
//! # Output types
//! COUNT: BIGINT. SUM: the planner's type (DataFusion: BIGINT for integers, DECIMAL(p+10, s),
//! DOUBLE). AVG: DOUBLE for integer and float input, DECIMAL with the planner's scale for decimal
//! input, truncated integer division for an integer output type. MIN/MAX: the argument's type.

use std::sync::Arc;

use ahash::AHashMap as HashMap;
use arrow::array::{Array, ArrayRef, BooleanArray, Decimal128Array, Float64Array, Int64Array, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{ErrorKind, Result, WeirError};
use crate::runtime::changelog::{Op, StreamChunk};
use crate::runtime::operator::{OpContext, Operator};
use crate::state::codec::{get_bytes, put_bytes, put_f64, put_i128, put_i64, put_list, put_null, put_u64};
use crate::state::{EpochWrites, RowCodec, StateTable, Store, TableRef};

/// The stable name of the group state table.
pub const GROUPS: &str = "groups";
/// The stable name prefix of the per-aggregate value multisets (`values/<i>`).
pub const VALUES: &str = "values";
/// The stable name prefix of the value multisets COUNT(DISTINCT)s over one argument share
/// (`distinct/<i>`, `i` the first of them).
pub const DISTINCT: &str = "distinct";
/// The stable name prefix of the per-aggregate value lists of STRING_AGG and ARRAY_AGG
/// (`lists/<i>`).
pub const LISTS: &str = "lists";
/// The stable name of the window aggregation's watermark table.
pub const WATERMARK: &str = "watermark";

/// An aggregate function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggKind {
    Count,
    Sum,
    Avg,
    Min,
    Max,
    /// `STRING_AGG(x, sep)` / `LISTAGG(x [, sep])`: the non-NULL values joined by
    /// [`AggCall::separator`] in arrival order; NULL over no values.
    StringAgg,
    /// `ARRAY_AGG(x)`: the values, NULLs included, in arrival order; NULL over no rows.
    ArrayAgg,
    /// `FIRST_VALUE(x)`: the first non-NULL value in arrival order.
    FirstValue,
    /// `LAST_VALUE(x)`: the last non-NULL value in arrival order.
    LastValue,
}

impl AggKind {
    /// STRING_AGG or ARRAY_AGG: the values live in the `lists/<i>` table.
    pub fn is_list(self) -> bool {
        matches!(self, AggKind::StringAgg | AggKind::ArrayAgg)
    }

    /// An aggregate of the values in arrival order (STRING_AGG, ARRAY_AGG, FIRST_VALUE,
    /// LAST_VALUE), which takes no DISTINCT or ORDER BY in a streaming GROUP BY.
    pub fn by_arrival(self) -> bool {
        self.is_list() || matches!(self, AggKind::FirstValue | AggKind::LastValue)
    }
}

/// One aggregate call of the GROUP BY.
pub struct AggCall {
    pub kind: AggKind,
    /// The argument over the input schema; `None` for `COUNT(*)`.
    pub arg: Option<Arc<dyn PhysicalExpr>>,
    /// `COUNT`, `SUM` or `AVG` `(DISTINCT x)`.
    pub distinct: bool,
    /// `FILTER (WHERE ...)` over the input schema.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    /// The argument's type (`Null` for `COUNT(*)`).
    pub arg_type: DataType,
    /// The result type.
    pub output_type: DataType,
    /// STRING_AGG's separator (`None` for every other aggregate).
    pub separator: Option<String>,
}

impl AggCall {
    /// `COUNT`, `SUM` or `AVG` `(DISTINCT x)`: its values live in a [`DistinctSet`].
    fn in_distinct_set(&self) -> bool {
        self.distinct && matches!(self.kind, AggKind::Count | AggKind::Sum | AggKind::Avg)
    }
}

/// The accumulator of one aggregate in one group.
#[derive(Debug, Clone, PartialEq)]
enum Acc {
    /// COUNT: the count.
    Count(i64),
    /// SUM/AVG over integers and decimals: the unscaled sum and the count of non-NULL values.
    SumInt(i128, i64),
    /// SUM/AVG over floats.
    SumFloat(f64, i64),
    /// MIN/MAX: the values live in the `values/<i>` table.
    Values,
    /// MIN/MAX over an append-only input: the extreme so far, encoded by the value codec
    /// (memcomparable, so byte order is value order); FIRST_VALUE/LAST_VALUE over an
    /// append-only input: the first or last value so far; `None` before the first non-NULL
    /// value.
    Extreme(Option<Vec<u8>>),
    /// COUNT(DISTINCT): the number of distinct non-NULL values (they live in its
    /// [`DistinctSet`]'s table).
    Distinct(i64),
    /// STRING_AGG/ARRAY_AGG, and FIRST_VALUE/LAST_VALUE over an updating input: the values
    /// live in the `lists/<i>` table; this is the arrival number the next one gets.
    List(u64),
}

#[derive(Debug, Clone, PartialEq)]
struct GroupState {
    /// Rows in the group (inserts minus retractions).
    rows: i64,
    accs: Vec<Acc>,
}

/// An aggregate's argument for one batch, in its accumulator's physical form.
enum ArgCol {
    Star,
    Valid(ArrayRef),
    Int(Int64Array),
    Dec(Decimal128Array),
    Float(Float64Array),
    /// Encoded values (MIN/MAX/DISTINCT); `None` for NULL.
    Bytes(Vec<Option<Vec<u8>>>),
    /// COUNT(DISTINCT): evaluated once for its [`DistinctSet`].
    Shared,
}

/// The DISTINCT aggregates (COUNT, SUM, AVG) over one argument and the value multiset they
/// share; see the module docs.
struct DistinctSet {
    /// The aggregates, as indices into `aggs`, in order; the first one's argument and codec
    /// serve them all.
    members: Vec<usize>,
    /// The table's stable name: `distinct/<i>`, or `values/<i>` for a single aggregate.
    name: String,
    /// Group key ++ value → the value's count in each member.
    table: StateTable,
}

/// The GROUP BY operator; see the module docs.
pub struct GroupAggregate {
    /// Group key expressions over the input schema; empty for a global aggregate.
    group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    aggs: Vec<AggCall>,
    /// Codec of the group key.
    key_codec: RowCodec,
    /// MIN and MAX keep only the extreme ([`Acc::Extreme`]): the input is append-only.
    append_only_input: bool,
    /// Codec of each MIN/MAX/DISTINCT argument (one column).
    value_codecs: Vec<Option<RowCodec>>,
    /// Codec of an output row: group columns then aggregates.
    out_codec: RowCodec,
    /// Output schema: group columns then one column per aggregate.
    schema: SchemaRef,
    groups: StateTable,
    /// MIN/MAX over an updating input: each one's value multiset.
    values: Vec<Option<StateTable>>,
    /// STRING_AGG/ARRAY_AGG: each one's values by arrival, group key ++ arrival number (u64
    /// big-endian) → the value's field as its value codec encodes it.
    lists: Vec<Option<StateTable>>,
    distinct_sets: Vec<DistinctSet>,
    /// For a window aggregation: the index of the `window_end` group column.
    window_end_key: Option<usize>,
    /// Emit each window's groups once, when the watermark closes it.
    emit_on_window_close: bool,
    /// How long a fired window's state is kept for late rows, ms.
    allowed_lateness_ms: i64,
    /// The last watermark, ms (window aggregations only; persisted in `meta`).
    watermark_ms: Option<i64>,
    meta: Option<StateTable>,
    /// Open windows' groups by window end (ms), for freeing them on the watermark.
    open_windows: std::collections::BTreeMap<i64, std::collections::BTreeSet<Vec<u8>>>,
    /// A global aggregate's row exists without input (Postgres's); else it comes and goes
    /// with its rows (Flink's). See [`GroupAggregate::with_empty_row`].
    empty_row: bool,
}

impl GroupAggregate {
    /// A GROUP BY producing `schema` (group columns, then aggregates).
    ///
    /// `state_table(name)` returns the id of this operator's state table `name` (allocating it
    /// when the job is created); tables are loaded from `store`. `append_only_input`: the input
    /// never retracts (its changelog mode is append-only), so MIN and MAX keep no value
    /// multiset.
    ///
    /// # Errors
    /// `Unsupported` for argument types the accumulators cannot hold.
    pub fn try_new(
        group_exprs: Vec<Arc<dyn PhysicalExpr>>,
        aggs: Vec<AggCall>,
        schema: SchemaRef,
        window: Option<(usize, bool, i64)>,
        append_only_input: bool,
        state_table: &mut dyn FnMut(&str) -> TableRef,
        store: &Store,
    ) -> Result<Self> {
        let types: Vec<DataType> = schema.fields().iter().map(|f| f.data_type().clone()).collect();
        let key_codec = RowCodec::try_new(types[..group_exprs.len()].to_vec())?;
        let out_codec = RowCodec::try_new(types)?;
        let mut value_codecs = Vec::with_capacity(aggs.len());
        let mut values = Vec::with_capacity(aggs.len());
        let mut lists = Vec::with_capacity(aggs.len());
        for (i, agg) in aggs.iter().enumerate() {
            let extreme = matches!(agg.kind, AggKind::Min | AggKind::Max);
            if extreme || agg.in_distinct_set() || agg.kind.by_arrival() {
                value_codecs.push(Some(RowCodec::try_new(vec![agg.arg_type.clone()])?));
            } else {
                value_codecs.push(None);
            }
            if extreme && !append_only_input {
                // MIN/MAX read a group's values in order: cached a group at a time.
                let id = state_table(&format!("{VALUES}/{i}"));
                values.push(Some(StateTable::grouped(id, store, key_codec.group_len())));
            } else {
                values.push(None);
            }
            let listed = agg.kind.is_list() || (agg.kind.by_arrival() && !append_only_input);
            lists.push(match listed {
                // A group's list is read whole, in order: cached a group at a time.
                true => Some(StateTable::grouped(state_table(&format!("{LISTS}/{i}")), store, key_codec.group_len())),
                false => None,
            });
            if matches!(agg.kind, AggKind::Sum | AggKind::Avg) {
                accumulator_kind(&agg.arg_type)?;
            }
        }
        let groups = StateTable::point(state_table(GROUPS), store);
        let distinct_sets = distinct_sets(&aggs, &key_codec, state_table, store)?;
        let mut meta = match window {
            Some(_) => Some(StateTable::new(state_table(WATERMARK))),
            None => None,
        };
        let watermark_ms = match &mut meta {
            Some(m) => m
                .get(store, b"")?
                .map(|v| v.as_slice().try_into().map(i64::from_le_bytes))
                .transpose()
                .map_err(|_| WeirError::storage("corrupt window aggregation watermark"))?,
            None => None,
        };
        let mut op = Self {
            group_exprs,
            aggs,
            append_only_input,
            key_codec,
            value_codecs,
            out_codec,
            schema,
            groups,
            values,
            lists,
            distinct_sets,
            window_end_key: window.map(|(k, _, _)| k),
            emit_on_window_close: window.is_some_and(|(_, eowc, _)| eowc),
            allowed_lateness_ms: window.map_or(0, |(_, _, l)| l),
            watermark_ms,
            meta,
            open_windows: Default::default(),
            empty_row: true,
        };
        op.index_open_windows(store)?;
        Ok(op)
    }

    /// Lets groups expire `ttl_ms` after their last change (`None`: never); see the module
    /// docs. Set the same TTL every time the operator is built: stored values depend on it.
    pub fn with_state_ttl(mut self, ttl_ms: Option<i64>) -> Self {
        self.groups.set_ttl(ttl_ms);
        self
    }

    /// With `empty_row` (the default), a global aggregate has its one row from the start, as
    /// Postgres's; without it, as Flink's `GroupAggFunction`, the row is inserted with the first
    /// input row and deleted when the last one is retracted (an `INSERT INTO` job's).
    pub fn with_empty_row(mut self, empty_row: bool) -> Self {
        self.empty_row = empty_row;
        self
    }

    /// The tables beside `groups` that hold a group's values: MIN/MAX's multisets, the
    /// STRING_AGG/ARRAY_AGG lists and the DISTINCT sets.
    fn value_tables(&mut self) -> impl Iterator<Item = &mut StateTable> {
        let sets = self.distinct_sets.iter_mut().map(|s| &mut s.table);
        self.values.iter_mut().flatten().chain(self.lists.iter_mut().flatten()).chain(sets)
    }

    /// Deletes the value multiset and list entries of group `key` ([`Self::value_tables`]).
    fn free_values(&mut self, store: &Store, key: &[u8]) -> Result<()> {
        for table in self.value_tables() {
            table.delete_prefix(store, key)?;
        }
        Ok(())
    }

    /// Rebuilds the window index from the groups held in state.
    fn index_open_windows(&mut self, store: &Store) -> Result<()> {
        let Some(k) = self.window_end_key else { return Ok(()) };
        let mut keys: Vec<Vec<u8>> = Vec::new();
        self.groups.scan(store, |key, _| {
            keys.push(key.to_vec());
            Ok(true)
        })?;
        if keys.is_empty() {
            return Ok(());
        }
        let mut decoder = self.key_codec.decoder(keys.len());
        for key in &keys {
            decoder.append(key)?;
        }
        let ends = window_ends(&decoder.finish()?[k])?;
        for (key, end) in keys.into_iter().zip(ends) {
            self.open_windows.entry(end).or_default().insert(key);
        }
        Ok(())
    }

    /// Deletes every state entry of group `key`.
    fn free_group(&mut self, store: &Store, key: &[u8]) -> Result<()> {
        self.groups.delete(key.to_vec());
        self.free_values(store, key)
    }

    /// The encoded output row (group columns, then aggregates) of group `key` as it stands now,
    /// or `None` when the group has no state (an OVER aggregate reads its frame's aggregates so).
    ///
    /// # Errors
    /// `Storage` when RocksDB fails to read or the state is corrupt.
    pub(crate) fn output_of(&mut self, store: &Store, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let Some(bytes) = self.groups.get(store, key)? else { return Ok(None) };
        let state = decode_state(&bytes, &self.empty_state())?;
        Ok(Some(self.output_row(store, key, &state)?))
    }

    /// The codec of [`GroupAggregate::output_of`]'s rows.
    pub(crate) fn out_codec(&self) -> &RowCodec {
        &self.out_codec
    }

    fn is_global(&self) -> bool {
        self.group_exprs.is_empty()
    }

    fn empty_state(&self) -> GroupState {
        let accs = self
            .aggs
            .iter()
            .map(|a| match a.kind {
                AggKind::Count if a.distinct => Acc::Distinct(0),
                AggKind::Count => Acc::Count(0),
                AggKind::Sum | AggKind::Avg => match accumulator_kind(&a.arg_type) {
                    Ok(SumKind::Float) => Acc::SumFloat(0.0, 0),
                    _ => Acc::SumInt(0, 0),
                },
                AggKind::Min | AggKind::Max if self.append_only_input => Acc::Extreme(None),
                AggKind::Min | AggKind::Max => Acc::Values,
                AggKind::FirstValue | AggKind::LastValue if self.append_only_input => Acc::Extreme(None),
                AggKind::StringAgg | AggKind::ArrayAgg | AggKind::FirstValue | AggKind::LastValue => Acc::List(0),
            })
            .collect();
        GroupState { rows: 0, accs }
    }

    fn eval_arg(&self, i: usize, batch: &RecordBatch) -> Result<ArgCol> {
        let agg = &self.aggs[i];
        let Some(expr) = &agg.arg else { return Ok(ArgCol::Star) };
        if agg.kind == AggKind::Count && agg.distinct {
            return Ok(ArgCol::Shared);
        }
        // SUM/AVG(DISTINCT) add a value as it enters their distinct set: as numbers.
        self.eval_expr(i, expr, batch, agg.distinct)
    }

    /// Aggregate `i`'s argument `expr` over `batch`, as its accumulator takes it; as numbers
    /// (a SUM's or AVG's) when `numbers`, else encoded if the aggregate has a value codec.
    fn eval_expr(&self, i: usize, expr: &Arc<dyn PhysicalExpr>, batch: &RecordBatch, numbers: bool) -> Result<ArgCol> {
        let agg = &self.aggs[i];
        let array = expr.evaluate(batch)?.into_array(batch.num_rows())?;
        let codec = if numbers { &None } else { &self.value_codecs[i] };
        Ok(match (agg.kind, codec) {
            (_, Some(codec)) => {
                let prepared = codec.prepare(&[Arc::clone(&array)])?;
                ArgCol::Bytes(
                    (0..array.len())
                        .map(|r| {
                            array.is_valid(r).then(|| {
                                let mut out = Vec::with_capacity(9);
                                codec.encode_row(&prepared, r, &mut out);
                                out
                            })
                        })
                        .collect(),
                )
            }
            (AggKind::Count, None) => ArgCol::Valid(array),
            _ => match accumulator_kind(array.data_type())? {
                SumKind::Int => ArgCol::Int(downcast::<Int64Array>(&cast(&array, &DataType::Int64)?)?),
                SumKind::Decimal => ArgCol::Dec(downcast::<Decimal128Array>(&array)?),
                SumKind::Float => ArgCol::Float(downcast::<Float64Array>(&cast(&array, &DataType::Float64)?)?),
            },
        })
    }

    /// The encoded output row of a group in state `state`.
    fn output_row(&mut self, store: &Store, key: &[u8], state: &GroupState) -> Result<Vec<u8>> {
        let mut out = key.to_vec();
        for (i, (agg, acc)) in self.aggs.iter().zip(&state.accs).enumerate() {
            match acc {
                Acc::Count(c) | Acc::Distinct(c) => put_i64(&mut out, *c),
                Acc::SumInt(_, 0) | Acc::SumFloat(_, 0) => put_null(&mut out),
                Acc::SumInt(sum, n) => match agg.kind {
                    AggKind::Sum => put_number(&mut out, &agg.output_type, *sum as f64, Some(*sum))?,
                    _ => put_avg_int(&mut out, agg, *sum, *n)?,
                },
                Acc::SumFloat(sum, n) => {
                    let v = if agg.kind == AggKind::Sum { *sum } else { sum / *n as f64 };
                    put_number(&mut out, &agg.output_type, v, None)?
                }
                Acc::Extreme(Some(v)) => out.extend_from_slice(v),
                Acc::Extreme(None) => put_null(&mut out),
                Acc::Values => {
                    // The group's least or greatest value, without reading all of its values.
                    let table = self.values[i].as_mut().expect("MIN/MAX have a value table");
                    match table.prefix_extreme(store, key, agg.kind == AggKind::Max)? {
                        Some((k, _)) => out.extend_from_slice(&k[key.len()..]),
                        None => put_null(&mut out),
                    }
                }
                Acc::List(_) if matches!(agg.kind, AggKind::FirstValue | AggKind::LastValue) => {
                    // The earliest or latest entry, without reading the group's list whole.
                    let table = self.lists[i].as_mut().expect("FIRST_VALUE/LAST_VALUE have a list table");
                    match table.prefix_extreme(store, key, agg.kind == AggKind::LastValue)? {
                        Some((_, v)) => out.extend_from_slice(&v),
                        None => put_null(&mut out),
                    }
                }
                Acc::List(_) => {
                    let table = self.lists[i].as_mut().expect("STRING_AGG/ARRAY_AGG have a list table");
                    let mut entries = table.prefix_iter(store, key)?.map(|(_, v)| v).peekable();
                    if entries.peek().is_none() {
                        put_null(&mut out);
                    } else if agg.kind == AggKind::ArrayAgg {
                        put_list(&mut out, entries);
                    } else {
                        let separator = agg.separator.as_deref().unwrap_or_default().as_bytes();
                        let mut joined = Vec::new();
                        for (n, field) in entries.enumerate() {
                            if n > 0 {
                                joined.extend_from_slice(separator);
                            }
                            let value = get_bytes(field)?.ok_or_else(|| WeirError::storage("a NULL in STRING_AGG's list"))?;
                            joined.extend_from_slice(&value);
                        }
                        put_bytes(&mut out, &joined);
                    }
                }
            }
        }
        Ok(out)
    }
}

impl Operator for GroupAggregate {
    fn name(&self) -> &'static str {
        "GroupAggregate"
    }

    /// A global aggregate's one row exists from the start (COUNT 0, the rest NULL), unless it
    /// comes with its rows ([`GroupAggregate::with_empty_row`]).
    fn on_create(&mut self, ctx: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        if !self.is_global() || !self.empty_row || self.groups.get(ctx.store, &[])?.is_some() {
            return Ok(None);
        }
        let state = self.empty_state();
        let row = self.output_row(ctx.store, &[], &state)?;
        self.groups.put(Vec::new(), encode_state(&state));
        let mut decoder = self.out_codec.decoder(1);
        decoder.append(&row)?;
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), decoder.finish()?)?;
        Ok(Some(StreamChunk::new(vec![Op::Insert], batch)))
    }

    fn state_tables(&self) -> &'static [&'static str] {
        &[GROUPS, VALUES, DISTINCT, LISTS]
    }

    fn state(&self) -> Vec<(String, &StateTable)> {
        let mut out = vec![(GROUPS.to_string(), &self.groups)];
        for (i, t) in self.values.iter().enumerate() {
            if let Some(t) = t {
                out.push((format!("{VALUES}/{i}"), t));
            }
        }
        for (i, t) in self.lists.iter().enumerate() {
            if let Some(t) = t {
                out.push((format!("{LISTS}/{i}"), t));
            }
        }
        out.extend(self.distinct_sets.iter().map(|s| (s.name.clone(), &s.table)));
        out
    }

    fn key_groups(&self, _input: usize, chunk: &StreamChunk) -> Result<Vec<u16>> {
        super::key_groups_of(&self.group_exprs, &self.key_codec, &chunk.batch)
    }

    fn process_batch(
        &mut self,
        _input: usize,
        chunk: StreamChunk,
        ctx: &OpContext<'_>,
    ) -> Result<Option<StreamChunk>> {
        let n = chunk.len();
        let batch = &chunk.batch;
        let mut ends: Vec<i64> = Vec::new();
        let keys: Vec<Vec<u8>> = if self.is_global() {
            vec![Vec::new(); n]
        } else {
            let cols = self
                .group_exprs
                .iter()
                .map(|e| Ok(e.evaluate(batch)?.into_array(n)?))
                .collect::<Result<Vec<_>>>()?;
            if let Some(k) = self.window_end_key {
                ends = window_ends(&cols[k])?;
            }
            self.key_codec.encode_rows(&cols, n)?
        };
        let args = (0..self.aggs.len()).map(|i| self.eval_arg(i, batch)).collect::<Result<Vec<_>>>()?;
        // Each distinct set's argument, evaluated once for its members.
        let set_values = self
            .distinct_sets
            .iter()
            .map(|set| {
                let first = set.members[0];
                let expr = self.aggs[first].arg.as_ref().expect("COUNT(DISTINCT) has an argument");
                match self.eval_expr(first, expr, batch, false)? {
                    ArgCol::Bytes(values) => Ok(values),
                    _ => Err(WeirError::internal("COUNT(DISTINCT) argument not encoded")),
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let filters = self
            .aggs
            .iter()
            .map(|a| match &a.filter {
                Some(f) => Ok(Some(downcast::<BooleanArray>(&f.evaluate(batch)?.into_array(n)?)?)),
                None => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;

        // Groups touched by this chunk, in first-touched order: key, output before, state.
        let mut slots: Vec<(Vec<u8>, Option<Vec<u8>>, GroupState)> = Vec::new();
        // For EOWC: whether each slot's window has fired (its changes are then emitted).
        let mut fired: Vec<bool> = Vec::new();
        let mut index: HashMap<Vec<u8>, usize> = HashMap::with_capacity(keys.len() + 1);
        let global_keys = if self.is_global() { vec![Vec::new()] } else { Vec::new() };
        for (i, key) in global_keys.iter().chain(keys.iter()).enumerate() {
            if index.contains_key(key) {
                continue;
            }
            fired.push(match (self.window_end_key, i.checked_sub(global_keys.len())) {
                (Some(_), Some(row)) => self.watermark_ms.is_some_and(|wm| ends[row] - 1 <= wm),
                _ => false,
            });
            let (old_out, state) = match self.groups.get(ctx.store, key)? {
                Some(bytes) => {
                    let state = decode_state(&bytes, &self.empty_state())?;
                    (Some(self.output_row(ctx.store, key, &state)?), state)
                }
                None => {
                    if self.groups.has_ttl() {
                        // What an expired group left in the value tables, if anything.
                        self.free_values(ctx.store, key)?;
                    }
                    (None, self.empty_state())
                }
            };
            index.insert(key.clone(), slots.len());
            slots.push((key.clone(), old_out, state));
        }

        for row in 0..n {
            let sign = chunk.ops[row].sign();
            let slot = index[&keys[row]];
            let state = &mut slots[slot].2;
            state.rows += sign;
            for (j, acc) in state.accs.iter_mut().enumerate() {
                if matches!(acc, Acc::Distinct(_)) || self.aggs[j].distinct {
                    // Counted (SUM/AVG: added) with its distinct set, below.
                    continue;
                }
                if let Some(f) = &filters[j] {
                    if !(f.is_valid(row) && f.value(row)) {
                        continue;
                    }
                }
                match (acc, &args[j]) {
                    (Acc::Count(c), ArgCol::Star) => *c += sign,
                    (Acc::Count(c), ArgCol::Valid(a)) => {
                        if a.is_valid(row) {
                            *c += sign
                        }
                    }
                    (Acc::SumInt(s, c), ArgCol::Int(a)) => {
                        if a.is_valid(row) {
                            add_exact(s, sign as i128 * a.value(row) as i128)?;
                            *c += sign;
                        }
                    }
                    (Acc::SumInt(s, c), ArgCol::Dec(a)) => {
                        if a.is_valid(row) {
                            add_exact(s, (sign as i128).saturating_mul(a.value(row)))?;
                            *c += sign;
                        }
                    }
                    (Acc::SumFloat(s, c), ArgCol::Float(a)) => {
                        if a.is_valid(row) {
                            *s += sign as f64 * a.value(row);
                            *c += sign;
                        }
                    }
                    (Acc::Extreme(extreme), ArgCol::Bytes(vals)) => {
                        let Some(v) = &vals[row] else { continue };
                        if sign < 0 {
                            return Err(WeirError::internal("a retraction reached an aggregate over an append-only input"));
                        }
                        let better = match (&*extreme, self.aggs[j].kind) {
                            (None, _) | (Some(_), AggKind::LastValue) => true,
                            (Some(_), AggKind::FirstValue) => false,
                            (Some(e), AggKind::Min) => v < e,
                            (Some(e), _) => v > e,
                        };
                        if better {
                            *extreme = Some(v.clone());
                        }
                    }
                    (Acc::Values, ArgCol::Bytes(vals)) => {
                        let Some(v) = &vals[row] else { continue };
                        let table = self.values[j].as_mut().expect("value table exists");
                        let mut entry = keys[row].clone();
                        entry.extend_from_slice(v);
                        let count = match table.get(ctx.store, &entry)? {
                            Some(b) => super::materialize::decode_count(&b)?,
                            None => 0,
                        } + sign;
                        if count == 0 {
                            table.delete(entry);
                        } else {
                            table.put(entry, count.to_le_bytes().to_vec());
                        }
                    }
                    (Acc::List(next), ArgCol::Bytes(vals)) => {
                        // ARRAY_AGG keeps NULLs (as Postgres and Flink), STRING_AGG skips them.
                        let value = match &vals[row] {
                            Some(v) => v.clone(),
                            None if self.aggs[j].kind == AggKind::ArrayAgg => {
                                let mut null = Vec::with_capacity(1);
                                put_null(&mut null);
                                null
                            }
                            None => continue,
                        };
                        let table = self.lists[j].as_mut().expect("list table exists");
                        if sign > 0 {
                            let mut entry = keys[row].clone();
                            entry.extend_from_slice(&next.to_be_bytes());
                            table.put(entry, value);
                            *next += 1;
                        } else {
                            // Flink's ListAggWithRetractAggFunction: a retraction takes out the
                            // earliest equal value still in the list.
                            let found = table.prefix_iter(ctx.store, &keys[row])?.find(|(_, v)| *v == value.as_slice());
                            if let Some(entry) = found.map(|(k, _)| k.to_vec()) {
                                table.delete(entry);
                            }
                        }
                    }
                    _ => return Err(WeirError::internal("aggregate argument of the wrong kind")),
                }
            }
            let counts_row = |m: usize| filters[m].as_ref().is_none_or(|f| f.is_valid(row) && f.value(row));
            for (set, values) in self.distinct_sets.iter_mut().zip(&set_values) {
                let Some(v) = &values[row] else { continue };
                if !set.members.iter().any(|&m| counts_row(m)) {
                    continue;
                }
                let mut entry = keys[row].clone();
                entry.extend_from_slice(v);
                let mut counts = match set.table.get(ctx.store, &entry)? {
                    Some(b) => decode_counts(&b, set.members.len())?,
                    None => vec![0; set.members.len()],
                };
                for (count, &m) in counts.iter_mut().zip(&set.members) {
                    if !counts_row(m) {
                        continue;
                    }
                    let before = *count;
                    *count += sign;
                    // +1 when the value enters the set, -1 when it leaves it.
                    let change = match (before > 0, *count > 0) {
                        (false, true) => 1,
                        (true, false) => -1,
                        _ => continue,
                    };
                    match (&mut state.accs[m], &args[m]) {
                        (Acc::Distinct(d), _) => *d += change,
                        (Acc::SumInt(s, c), ArgCol::Int(a)) => {
                            add_exact(s, change as i128 * a.value(row) as i128)?;
                            *c += change;
                        }
                        (Acc::SumInt(s, c), ArgCol::Dec(a)) => {
                            add_exact(s, (change as i128).saturating_mul(a.value(row)))?;
                            *c += change;
                        }
                        (Acc::SumFloat(s, c), ArgCol::Float(a)) => {
                            *s += change as f64 * a.value(row);
                            *c += change;
                        }
                        _ => return Err(WeirError::internal("DISTINCT aggregate argument of the wrong kind")),
                    }
                }
                if counts.iter().all(|c| *c == 0) {
                    set.table.delete(entry);
                } else {
                    set.table.put(entry, counts.iter().flat_map(|c| c.to_le_bytes()).collect());
                }
            }
        }

        if self.window_end_key.is_some() {
            for (row, key) in keys.iter().enumerate() {
                self.open_windows.entry(ends[row]).or_default().insert(key.clone());
            }
        }
        let mut ops = Vec::new();
        let mut rows: Vec<Vec<u8>> = Vec::new();
        for ((key, old_out, state), fired) in slots.into_iter().zip(fired) {
            if state.rows < 0 {
                if self.groups.has_ttl() {
                    // Retractions of rows whose group expired.
                    self.free_group(ctx.store, &key)?;
                    continue;
                }
                return Err(WeirError::internal("group aggregate: more retractions than rows"));
            }
            let exists = (self.is_global() && self.empty_row) || state.rows > 0;
            if self.emit_on_window_close && !fired {
                // Emitted when the window closes.
                if exists {
                    self.groups.put(key, encode_state(&state));
                } else {
                    self.free_group(ctx.store, &key)?;
                }
                continue;
            }
            let new_out = if exists { Some(self.output_row(ctx.store, &key, &state)?) } else { None };
            match (old_out, new_out) {
                (None, Some(new)) => {
                    ops.push(Op::Insert);
                    rows.push(new);
                }
                (Some(old), None) => {
                    ops.push(Op::Delete);
                    rows.push(old);
                }
                (Some(old), Some(new)) if old != new => {
                    ops.extend([Op::UpdateBefore, Op::UpdateAfter]);
                    rows.push(old);
                    rows.push(new);
                }
                _ => {}
            }
            if exists {
                self.groups.put(key, encode_state(&state));
            } else {
                self.groups.delete(key);
            }
        }
        if ops.is_empty() {
            return Ok(None);
        }
        let mut decoder = self.out_codec.decoder(rows.len());
        for r in &rows {
            decoder.append(r)?;
        }
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), decoder.finish()?)?;
        Ok(Some(StreamChunk::new(ops, batch)))
    }

    fn on_watermark(
        &mut self,
        _input: usize,
        watermark_ms: i64,
        ctx: &OpContext<'_>,
    ) -> Result<(Option<StreamChunk>, Option<i64>)> {
        if self.window_end_key.is_none() || self.watermark_ms.is_some_and(|w| watermark_ms <= w) {
            return Ok((None, Some(watermark_ms)));
        }
        let previous = self.watermark_ms.unwrap_or(i64::MIN);
        self.watermark_ms = Some(watermark_ms);
        if let Some(meta) = &mut self.meta {
            meta.put(Vec::new(), watermark_ms.to_le_bytes().to_vec());
        }
        // EOWC: windows whose window_time (end - 1) the watermark reached just now fire.
        let mut rows = Vec::new();
        if self.emit_on_window_close {
            let fired: Vec<Vec<u8>> = self
                .open_windows
                .range(previous.saturating_add(2)..watermark_ms.saturating_add(2))
                .flat_map(|(_, keys)| keys.iter().cloned())
                .collect();
            for key in fired {
                let Some(bytes) = self.groups.get(ctx.store, &key)? else { continue };
                let state = decode_state(&bytes, &self.empty_state())?;
                if state.rows > 0 {
                    rows.push(self.output_row(ctx.store, &key, &state)?);
                }
            }
        }
        // Windows past their allowed lateness are freed.
        let cut = watermark_ms.saturating_sub(self.allowed_lateness_ms).saturating_add(2);
        let still_open = self.open_windows.split_off(&cut);
        let expired = std::mem::replace(&mut self.open_windows, still_open);
        for key in expired.into_values().flatten() {
            self.free_group(ctx.store, &key)?;
        }
        if rows.is_empty() {
            return Ok((None, Some(watermark_ms)));
        }
        let mut decoder = self.out_codec.decoder(rows.len());
        for r in &rows {
            decoder.append(r)?;
        }
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), decoder.finish()?)?;
        Ok((Some(StreamChunk::new(vec![Op::Insert; rows.len()], batch)), Some(watermark_ms)))
    }

    fn on_barrier(&mut self, writes: &mut EpochWrites, ctx: &OpContext<'_>) -> Result<()> {
        for key in self.groups.sweep_expired(ctx.store)? {
            self.free_values(ctx.store, &key)?;
        }
        self.groups.flush(writes);
        if let Some(meta) = &mut self.meta {
            meta.flush(writes);
        }
        for table in self.value_tables() {
            table.flush(writes);
        }
        Ok(())
    }
}

/// The COUNT(DISTINCT)s of `aggs` in sets by argument, each set with the multiset table its
/// aggregates share (see the module docs), in the order of their first aggregates.
///
/// A state written before multisets were shared has one `values/<i>` table per COUNT(DISTINCT);
/// where any of a set's is not empty (in any operator instance: the whole table is read), the
/// set's aggregates keep theirs, as single-aggregate sets. Both layouts describe empty
/// multisets alike, so a set whose old tables are all empty takes the shared one.
///
/// # Errors
/// `Storage` when RocksDB fails to read.
fn distinct_sets(
    aggs: &[AggCall],
    key_codec: &RowCodec,
    state_table: &mut dyn FnMut(&str) -> TableRef,
    store: &Store,
) -> Result<Vec<DistinctSet>> {
    let mut by_arg: Vec<Vec<usize>> = Vec::new();
    for (i, agg) in aggs.iter().enumerate().filter(|(_, a)| a.in_distinct_set()) {
        let same_arg = |set: &&mut Vec<usize>| {
            let first = &aggs[set[0]];
            first.arg_type == agg.arg_type && matches!((&first.arg, &agg.arg), (Some(a), Some(b)) if **a == **b)
        };
        match by_arg.iter_mut().find(same_arg) {
            Some(set) => set.push(i),
            None => by_arg.push(vec![i]),
        }
    }
    // COUNT(DISTINCT) reads one value at a time; a group's values can be many.
    let point = |table: TableRef| StateTable::point(table, store).with_partition_len(key_codec.group_len());
    let mut sets = Vec::new();
    for members in by_arg {
        let own: Vec<(usize, TableRef)> = members.iter().map(|&i| (i, state_table(&format!("{VALUES}/{i}")))).collect();
        // A set of several shares a table unless an old one of its aggregates holds values.
        let mut shared = members.len() > 1;
        for (_, table) in &own {
            if !shared {
                break;
            }
            shared = store.is_empty_table(table.id)?;
        }
        if !shared {
            sets.extend(own.into_iter().map(|(i, table)| DistinctSet {
                members: vec![i],
                name: format!("{VALUES}/{i}"),
                table: point(table),
            }));
        } else {
            let name = format!("{DISTINCT}/{}", members[0]);
            let table = point(state_table(&name));
            sets.push(DistinctSet { members, name, table });
        }
    }
    Ok(sets)
}

/// A shared multiset entry's counts, one per member (`n`).
fn decode_counts(bytes: &[u8], n: usize) -> Result<Vec<i64>> {
    if bytes.len() != 8 * n {
        return Err(WeirError::storage("corrupt COUNT(DISTINCT) multiset entry"));
    }
    Ok(bytes.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
}

/// How SUM/AVG accumulate an argument type.
pub(crate) enum SumKind {
    Int,
    Decimal,
    Float,
}

pub(crate) fn accumulator_kind(t: &DataType) -> Result<SumKind> {
    use DataType::*;
    Ok(match t {
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 | Null => SumKind::Int,
        Decimal128(..) => SumKind::Decimal,
        Float16 | Float32 | Float64 => SumKind::Float,
        other => return Err(WeirError::plan(format!("SUM/AVG of type {other} is not supported"))),
    })
}

/// Window ends of a timestamp column, in ms (`i64::MIN` for NULL).
pub(crate) fn window_ends(col: &ArrayRef) -> Result<Vec<i64>> {
    let ms = cast(col, &DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None))?;
    let ms = cast(&ms, &DataType::Int64)?;
    let ms = downcast::<Int64Array>(&ms)?;
    Ok((0..ms.len()).map(|i| if ms.is_valid(i) { ms.value(i) } else { i64::MIN }).collect())
}

pub(crate) fn downcast<T: Array + Clone + 'static>(a: &ArrayRef) -> Result<T> {
    a.as_any()
        .downcast_ref::<T>()
        .cloned()
        .ok_or_else(|| WeirError::internal(format!("unexpected array type {}", a.data_type())))
}

/// An aggregate result in the physical form of its output type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Number {
    /// Signed integer types.
    Int(i64),
    /// Unsigned integer types.
    UInt(u64),
    /// DECIMAL: the unscaled value.
    Decimal(i128),
    /// Float types.
    Float(f64),
}

impl Number {
    /// Appends this as a field of the row codec.
    pub(crate) fn put(self, out: &mut Vec<u8>) {
        match self {
            Number::Int(i) => put_i64(out, i),
            Number::UInt(u) => put_u64(out, u),
            Number::Decimal(d) => put_i128(out, d),
            Number::Float(f) => put_f64(out, f),
        }
    }
}

/// Adds `v` to SUM's (and AVG's) exact accumulator `sum`.
///
/// # Errors
/// `NumericOutOfRange` (22003) when the sum leaves the 128 bits a DECIMAL(38, s) holds, as
/// Postgres refuses a numeric out of range (Flink's DECIMAL addition gives NULL there).
fn add_exact(sum: &mut i128, v: i128) -> Result<()> {
    *sum = sum.checked_add(v).ok_or_else(|| WeirError::new(ErrorKind::NumericOutOfRange("SUM: the sum is out of range of DECIMAL(38)".into())))?;
    Ok(())
}

/// `v` (or the exact integer `exact`) as a value of `output_type`.
///
/// # Errors
/// `NumericOutOfRange` (22003) when the value is out of the type's range (or a DECIMAL result is not exact);
/// `Internal` for a non-numeric output type.
pub(crate) fn number(output_type: &DataType, v: f64, exact: Option<i128>) -> Result<Number> {
    use DataType::*;
    let overflow = || WeirError::new(ErrorKind::NumericOutOfRange(format!("aggregate result out of range of {}", crate::plan::type_names::sql_type_name(output_type))));
    Ok(match output_type {
        Int8 | Int16 | Int32 | Int64 => {
            let i = exact.unwrap_or(v as i128);
            Number::Int(i64::try_from(i).map_err(|_| overflow())?)
        }
        UInt8 | UInt16 | UInt32 | UInt64 => {
            let i = exact.unwrap_or(v as i128);
            Number::UInt(u64::try_from(i).map_err(|_| overflow())?)
        }
        Decimal128(precision, _) => {
            let exact = exact.ok_or_else(overflow)?;
            let bound = 10i128.checked_pow(u32::from(*precision)).unwrap_or(i128::MAX);
            if exact.checked_abs().is_none_or(|e| e >= bound) {
                return Err(overflow());
            }
            Number::Decimal(exact)
        }
        Float16 | Float32 | Float64 => Number::Float(exact.map(|e| e as f64).unwrap_or(v)),
        other => return Err(WeirError::internal(format!("aggregate output type {other}"))),
    })
}

/// Appends `v` (or the exact integer `exact`) as a field of `output_type`; see [`number`].
pub(crate) fn put_number(out: &mut Vec<u8>, output_type: &DataType, v: f64, exact: Option<i128>) -> Result<()> {
    number(output_type, v, exact)?.put(out);
    Ok(())
}

/// AVG over integers or decimals, as the output type asks: a DECIMAL rounds half away from
/// zero, an integer truncates.
pub(crate) fn avg_int(agg: &AggCall, sum: i128, n: i64) -> Result<Number> {
    match (&agg.output_type, &agg.arg_type) {
        (DataType::Decimal128(_, out_scale), arg) => {
            let in_scale = match arg {
                DataType::Decimal128(_, s) => *s,
                _ => 0,
            };
            let shift = 10i128.pow((*out_scale - in_scale).max(0) as u32);
            let num = sum * shift;
            let n = n as i128;
            // Round half away from zero.
            let q = num / n;
            let r = num % n;
            let q = if 2 * r.abs() >= n { q + num.signum() } else { q };
            Ok(Number::Decimal(q))
        }
        (t, _) if t.is_integer() => number(t, 0.0, Some(sum / n as i128)),
        (t, _) => number(t, sum as f64 / n as f64, None),
    }
}

/// [`avg_int`] appended as a field of the row codec.
pub(crate) fn put_avg_int(out: &mut Vec<u8>, agg: &AggCall, sum: i128, n: i64) -> Result<()> {
    avg_int(agg, sum, n)?.put(out);
    Ok(())
}

fn encode_state(state: &GroupState) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 24 * state.accs.len());
    out.extend_from_slice(&state.rows.to_le_bytes());
    for acc in &state.accs {
        match acc {
            Acc::Count(c) | Acc::Distinct(c) => out.extend_from_slice(&c.to_le_bytes()),
            Acc::List(next) => out.extend_from_slice(&next.to_le_bytes()),
            Acc::SumInt(s, c) => {
                out.extend_from_slice(&s.to_le_bytes());
                out.extend_from_slice(&c.to_le_bytes());
            }
            Acc::SumFloat(s, c) => {
                out.extend_from_slice(&s.to_le_bytes());
                out.extend_from_slice(&c.to_le_bytes());
            }
            Acc::Values | Acc::Extreme(_) => {}
        }
    }
    // Variable-length extremes after the fixed-width accumulators: presence byte, then the
    // length (u32 little-endian) and the value.
    for acc in &state.accs {
        if let Acc::Extreme(e) = acc {
            match e {
                None => out.push(0),
                Some(v) => {
                    out.push(1);
                    out.extend_from_slice(&(v.len() as u32).to_le_bytes());
                    out.extend_from_slice(v);
                }
            }
        }
    }
    out
}

fn decode_state(bytes: &[u8], shape: &GroupState) -> Result<GroupState> {
    let corrupt = || WeirError::storage("corrupt group aggregate state");
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
            Acc::Distinct(_) => Acc::Distinct(i64_of(read(8)?)),
            Acc::SumInt(..) => {
                let s = i128::from_le_bytes(read(16)?.try_into().expect("16 bytes"));
                Acc::SumInt(s, i64_of(read(8)?))
            }
            Acc::SumFloat(..) => {
                let s = f64::from_le_bytes(read(8)?.try_into().expect("8 bytes"));
                Acc::SumFloat(s, i64_of(read(8)?))
            }
            Acc::Values => Acc::Values,
            Acc::Extreme(_) => Acc::Extreme(None),
            Acc::List(_) => Acc::List(u64::from_le_bytes(read(8)?.try_into().expect("8 bytes"))),
        });
    }
    for acc in &mut accs {
        if let Acc::Extreme(e) = acc {
            if read(1)?[0] == 1 {
                let len = u32::from_le_bytes(read(4)?.try_into().expect("4 bytes")) as usize;
                *e = Some(read(len)?.to_vec());
            }
        }
    }
    // Every byte read: a state written for another shape (another build) fails loudly.
    if pos != bytes.len() {
        return Err(corrupt());
    }
    Ok(GroupState { rows, accs })
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet, HashMap};

    use arrow::datatypes::{Field, Schema};
    use datafusion::common::ScalarValue;
    use datafusion::logical_expr::Operator as BinaryOp;
    use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};

    use super::*;
    use crate::test_rng::Rng;

    /// Input rows `(k BIGINT, v BIGINT, f BIGINT)`.
    fn input_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("v", DataType::Int64, true),
            Field::new("f", DataType::Int64, true),
        ]))
    }

    fn column(name: &str, i: usize) -> Arc<dyn PhysicalExpr> {
        Arc::new(Column::new(name, i))
    }

    /// `GROUP BY k`: `COUNT(*)`, `COUNT(DISTINCT v)`, the same `FILTER (WHERE f = 1)` and
    /// `FILTER (WHERE f = 2)`, and `COUNT(DISTINCT f)`: one multiset shared by three aggregates,
    /// one of its own.
    fn aggregate(store: &Store, tables: &mut HashMap<String, u32>) -> Result<GroupAggregate> {
        let f_is = |n: i64| -> Arc<dyn PhysicalExpr> {
            Arc::new(BinaryExpr::new(column("f", 2), BinaryOp::Eq, Arc::new(Literal::new(ScalarValue::Int64(Some(n))))))
        };
        let count = |arg: Option<Arc<dyn PhysicalExpr>>, distinct, filter| AggCall {
            kind: AggKind::Count,
            arg_type: if arg.is_some() { DataType::Int64 } else { DataType::Null },
            arg,
            distinct,
            filter,
            output_type: DataType::Int64,
            separator: None,
        };
        let aggs = vec![
            count(None, false, None),
            count(Some(column("v", 1)), true, None),
            count(Some(column("v", 1)), true, Some(f_is(1))),
            count(Some(column("v", 1)), true, Some(f_is(2))),
            count(Some(column("f", 2)), true, None),
        ];
        let fields = ["k", "n", "dv", "dv1", "dv2", "df"].map(|c| Field::new(c, DataType::Int64, true));
        let mut id = |name: &str| {
            let next = tables.len() as u32 + 1;
            TableRef::from(*tables.entry(name.to_string()).or_insert(next))
        };
        GroupAggregate::try_new(vec![column("k", 0)], aggs, Arc::new(Schema::new(fields.to_vec())), None, false, &mut id, store)
    }

    type Row = (Option<i64>, Option<i64>, Option<i64>);

    /// The expected result rows from the live input rows, by group: `COUNT(*)` and the four
    /// distinct counts, worked out from the rows themselves.
    fn expected(live: &[Row]) -> BTreeMap<Option<i64>, [i64; 5]> {
        let mut groups: BTreeMap<Option<i64>, (i64, [BTreeSet<i64>; 4])> = BTreeMap::new();
        for &(k, v, f) in live {
            let (n, sets) = groups.entry(k).or_default();
            *n += 1;
            if let Some(v) = v {
                sets[0].insert(v);
                if f == Some(1) {
                    sets[1].insert(v);
                }
                if f == Some(2) {
                    sets[2].insert(v);
                }
            }
            if let Some(f) = f {
                sets[3].insert(f);
            }
        }
        groups
            .into_iter()
            .map(|(k, (n, s))| (k, [n, s[0].len() as i64, s[1].len() as i64, s[2].len() as i64, s[3].len() as i64]))
            .collect()
    }

    /// Applies the operator's changelog to the view it maintains.
    fn apply(view: &mut BTreeMap<Option<i64>, [i64; 5]>, out: Option<StreamChunk>) {
        let Some(chunk) = out else { return };
        let col = |c: usize| downcast::<Int64Array>(&chunk.batch.columns()[c]).expect("BIGINT");
        let cols: Vec<Int64Array> = (0..6).map(col).collect();
        for (i, op) in chunk.ops.iter().enumerate() {
            let k = cols[0].is_valid(i).then(|| cols[0].value(i));
            let row = [1, 2, 3, 4, 5].map(|c| cols[c].value(i));
            match op {
                Op::Insert | Op::UpdateAfter => assert!(view.insert(k, row).is_none(), "{k:?} inserted twice"),
                Op::Delete | Op::UpdateBefore => assert_eq!(view.remove(&k), Some(row), "retracted row of {k:?}"),
            }
        }
    }

    fn entries(store: &Store, table: u32) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        store.scan(table, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            Ok(true)
        })?;
        Ok(out)
    }

    /// Rewrites the shared multiset as the build before shared multisets wrote it: one
    /// `values/<i>` table per COUNT(DISTINCT), each entry the value's count in that aggregate.
    fn unshare(store: &Store, tables: &HashMap<String, u32>, epoch: u64) -> Result<()> {
        let mut writes = EpochWrites::default();
        for (key, value) in entries(store, tables["distinct/1"])? {
            for (count, member) in decode_counts(&value, 3)?.into_iter().zip([1, 2, 3]) {
                if count != 0 {
                    writes.put(tables[&format!("values/{member}")], &key, &count.to_le_bytes());
                }
            }
            writes.delete(tables["distinct/1"], &key);
        }
        store.commit(writes, epoch)
    }

    /// Random inserts and deletes (NULLs included) through a restarting operator: the view
    /// its changelog builds always equals the distinct counts worked out from the live rows,
    /// with the shared multiset, with state as the build before wrote it (one table per
    /// aggregate, kept while not empty), and after the shared layout comes back.
    #[test]
    fn shared_distinct_multisets_count_each_filter_across_restarts() -> Result<()> {
        for seed in 1..25u64 {
            let dir = tempfile::tempdir()?;
            let store = Store::open(dir.path())?;
            let mut tables = HashMap::new();
            let mut op = aggregate(&store, &mut tables)?;
            assert_eq!(op.distinct_sets.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["distinct/1", "values/4"]);
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let (mut live, mut view, mut epoch) = (Vec::<Row>::new(), BTreeMap::new(), 0);
            // Whether the state is as the build before wrote it (from step 20 on, until no
            // row with a `v` is left).
            let mut legacy = false;
            for step in 0..90 {
                let mut ops = Vec::new();
                let mut rows = Vec::new();
                if step == 60 {
                    // Every row deleted: the shared layout takes over at the next restart.
                    ops = vec![Op::Delete; live.len()];
                    rows = std::mem::take(&mut live);
                }
                for _ in 0..rng.below(10) {
                    if !live.is_empty() && rng.below(3) == 0 {
                        ops.push(Op::Delete);
                        rows.push(live.swap_remove(rng.below(live.len() as u64) as usize));
                    } else if !(60..63).contains(&step) {
                        let row = (
                            (rng.below(6) > 0).then(|| rng.below(3)),
                            (rng.below(6) > 0).then(|| rng.below(5)),
                            (rng.below(6) > 0).then(|| rng.below(3)),
                        );
                        ops.push(Op::Insert);
                        rows.push(row);
                        live.push(row);
                    }
                }
                let column = |c: fn(&Row) -> Option<i64>| Arc::new(Int64Array::from(rows.iter().map(c).collect::<Vec<_>>())) as ArrayRef;
                let batch = RecordBatch::try_new(input_schema(), vec![column(|r| r.0), column(|r| r.1), column(|r| r.2)])?;
                apply(&mut view, op.process_batch(0, StreamChunk::new(ops, batch), &OpContext { store: &store })?);
                assert_eq!(view, expected(&live), "seed {seed}, step {step}");
                if step % 7 == 6 {
                    let mut writes = EpochWrites::default();
                    op.on_barrier(&mut writes, &OpContext { store: &store })?;
                    epoch += 1;
                    store.commit(writes, epoch)?;
                    if step == 20 {
                        epoch += 1;
                        unshare(&store, &tables, epoch)?;
                        legacy = true;
                    }
                    legacy &= live.iter().any(|r| r.1.is_some());
                    op = aggregate(&store, &mut tables)?;
                    let shared = op.distinct_sets.len() == 2;
                    assert_eq!(shared, !legacy, "seed {seed}, step {step}");
                }
            }
            assert!(!legacy, "seed {seed}: the state after step 60 is written shared");
        }
        Ok(())
    }

    /// `GROUP BY k`: `FIRST_VALUE(v)`, `LAST_VALUE(v)`.
    fn first_last(store: &Store, tables: &mut HashMap<String, u32>, append_only: bool) -> Result<GroupAggregate> {
        let call = |kind| AggCall {
            kind,
            arg: Some(column("v", 1)),
            distinct: false,
            filter: None,
            arg_type: DataType::Int64,
            output_type: DataType::Int64,
            separator: None,
        };
        let aggs = vec![call(AggKind::FirstValue), call(AggKind::LastValue)];
        let fields = ["k", "first", "last"].map(|c| Field::new(c, DataType::Int64, true));
        let mut id = |name: &str| {
            let next = tables.len() as u32 + 1;
            TableRef::from(*tables.entry(name.to_string()).or_insert(next))
        };
        GroupAggregate::try_new(vec![column("k", 0)], aggs, Arc::new(Schema::new(fields.to_vec())), None, append_only, &mut id, store)
    }

    /// Random rows through a restarting FIRST_VALUE/LAST_VALUE, over an append-only input
    /// (inserts only) and an updating one (deletes too): the view its changelog builds always
    /// holds, per group, the first and last non-NULL value of the group's values in arrival
    /// order, where a delete takes out the earliest equal value (Flink's
    /// `FirstValueWithRetractAggFunction`), worked out from a plain list per group.
    #[test]
    fn first_and_last_value_follow_arrival_across_restarts() -> Result<()> {
        for (seed, append_only) in (1..13u64).flat_map(|s| [(s, true), (s, false)]) {
            let dir = tempfile::tempdir()?;
            let store = Store::open(dir.path())?;
            let mut tables = HashMap::new();
            let mut op = first_last(&store, &mut tables, append_only)?;
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            // Per group, its values in arrival order (NULLs are not kept: both skip them).
            let mut lists: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
            let mut rows_per_group: BTreeMap<i64, i64> = BTreeMap::new();
            let mut live: Vec<(i64, Option<i64>)> = Vec::new();
            let mut view: BTreeMap<i64, (Option<i64>, Option<i64>)> = BTreeMap::new();
            let mut epoch = 0;
            for step in 0..60 {
                let (mut ops, mut rows) = (Vec::new(), Vec::new());
                for _ in 0..rng.below(8) {
                    if !append_only && !live.is_empty() && rng.below(3) == 0 {
                        let (k, v) = live.swap_remove(rng.below(live.len() as u64) as usize);
                        if let Some(v) = v {
                            let list = lists.get_mut(&k).expect("a live row's group");
                            let at = list.iter().position(|x| *x == v).expect("a live value");
                            list.remove(at);
                        }
                        *rows_per_group.get_mut(&k).expect("a live row's group") -= 1;
                        ops.push(Op::Delete);
                        rows.push((k, v));
                    } else {
                        let (k, v) = (rng.below(3) as i64, (rng.below(5) > 0).then(|| rng.below(4) as i64));
                        if let Some(v) = v {
                            lists.entry(k).or_default().push(v);
                        }
                        *rows_per_group.entry(k).or_default() += 1;
                        live.push((k, v));
                        ops.push(Op::Insert);
                        rows.push((k, v));
                    }
                }
                let ks = Arc::new(Int64Array::from(rows.iter().map(|r| Some(r.0)).collect::<Vec<_>>())) as ArrayRef;
                let vs = Arc::new(Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())) as ArrayRef;
                let fs = Arc::new(Int64Array::from(vec![None::<i64>; rows.len()])) as ArrayRef;
                let batch = RecordBatch::try_new(input_schema(), vec![ks, vs, fs])?;
                if let Some(chunk) = op.process_batch(0, StreamChunk::new(ops, batch), &OpContext { store: &store })? {
                    let col = |c: usize| downcast::<Int64Array>(&chunk.batch.columns()[c]).expect("BIGINT");
                    let (k, first, last) = (col(0), col(1), col(2));
                    for (i, op) in chunk.ops.iter().enumerate() {
                        let row = (first.is_valid(i).then(|| first.value(i)), last.is_valid(i).then(|| last.value(i)));
                        match op {
                            Op::Insert | Op::UpdateAfter => assert!(view.insert(k.value(i), row).is_none()),
                            Op::Delete | Op::UpdateBefore => assert_eq!(view.remove(&k.value(i)), Some(row)),
                        }
                    }
                }
                let expected: BTreeMap<i64, (Option<i64>, Option<i64>)> = rows_per_group
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(k, _)| {
                        let list = lists.get(k).map(Vec::as_slice).unwrap_or_default();
                        (*k, (list.first().copied(), list.last().copied()))
                    })
                    .collect();
                assert_eq!(view, expected, "seed {seed}, append-only {append_only}, step {step}");
                if step % 7 == 6 {
                    let mut writes = EpochWrites::default();
                    op.on_barrier(&mut writes, &OpContext { store: &store })?;
                    epoch += 1;
                    store.commit(writes, epoch)?;
                    op = first_last(&store, &mut tables, append_only)?;
                }
            }
            assert_eq!(tables.keys().any(|t| t.starts_with(LISTS)), !append_only, "a list table only over an updating input");
        }
        Ok(())
    }
}
