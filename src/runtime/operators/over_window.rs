//! OverWindow: window functions (`f(..) OVER (PARTITION BY .. ORDER BY .. [frame])`) over an
//! updating input (rules in [`crate::plan::over`], "Over an updating input").
//!
//! The operator keeps every row of its input, by partition, in ORDER BY order (ties by
//! arrival). Per partition touched by a chunk it evaluates the functions over the partition's
//! rows before and after the chunk's changes, with DataFusion's window function evaluators (so
//! the results are those of a batch `SELECT` over the same rows), and emits only the
//! difference: an output row (input row, results) that is gone is retracted, one that is new
//! inserted, and unchanged rows cancel. All retractions of a chunk come before all its
//! inserts, so an upsert by the stream key stays right; a lone pair is `-U`/`+U`.
//!
//! Which rows are evaluated: when every function is an aggregate over a bounded `ROWS` frame
//! reaching `before` rows back and `after` rows ahead, a change at position `c` can only
//! change the rows from `c - after` to `c + before` (in the order before the chunk for a row
//! that left, after it for one that came), so only those rows are evaluated, each run of them
//! with the rows its frames reach; a surviving row marked in either order is evaluated in both.
//! Otherwise (`RANGE`, `UNBOUNDED`, `ROW_NUMBER`, `LAG`, ..) every row of the partition is.
//! Reading the partition's keys is the part of the work that grows with its size.
//!
//! A retraction removes the latest stored row of its partition and order key equal to it.
//!
//! # State
//! - `rows`: partition key ++ order key (rank's encoding: [`OrderKey`]) ++ arrival sequence
//!   (u64, big-endian) → the input row (codec bytes). Cached a partition at a time.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::logical_expr::SortExpr;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::WindowExpr;

use crate::error::{Result, WeirError};
use crate::runtime::changelog::{Op, StreamChunk};
use crate::runtime::operator::{OpContext, Operator};
use crate::runtime::operators::join::conform;
use crate::runtime::operators::rank::{difference, seq_of, OrderKey, Ranked};
use crate::state::{EpochWrites, RowCodec, StateTable, Store, TableRef};

/// The stable name of the table of the input's rows.
pub const ROWS: &str = "rows";

/// What [`OverWindow::try_new`] needs.
pub struct OverWindowOptions {
    /// The PARTITION BY keys, over the input.
    pub partition_exprs: Vec<Arc<dyn PhysicalExpr>>,
    /// The ORDER BY keys, over the input, with their directions in `order_by`.
    pub order_exprs: Vec<Arc<dyn PhysicalExpr>>,
    pub order_by: Vec<SortExpr>,
    /// The window functions, over the input: each evaluates one sorted partition.
    pub functions: Vec<Arc<dyn WindowExpr>>,
    /// How far a row's result reaches, `(before, after)` rows, if bounded
    /// ([`crate::plan::over::OverWindowSpec::reach`]).
    pub reach: Option<(u64, u64)>,
    pub input_schema: SchemaRef,
    /// The input's columns, then one per function.
    pub schema: SchemaRef,
}

/// The operator; see the module docs.
pub struct OverWindow {
    partition_exprs: Vec<Arc<dyn PhysicalExpr>>,
    partition_codec: RowCodec,
    order_keys: Vec<OrderKey>,
    eval: Evaluator,
    rows: StateTable,
    next_seq: u64,
}

/// Evaluates the window functions over runs of a partition's rows.
struct Evaluator {
    functions: Vec<Arc<dyn WindowExpr>>,
    /// `(before, after)`: a row's result depends only on the rows this far before and after
    /// it ([`crate::plan::over::OverWindowSpec::reach`]); `None`: on the whole partition.
    reach: Option<(usize, usize)>,
    input_schema: SchemaRef,
    /// Codec of an input row.
    row_codec: RowCodec,
    /// Codec of one row's function results.
    result_codec: RowCodec,
    /// Codec of an output row: the input row's bytes, then its results' bytes.
    out_codec: RowCodec,
    schema: SchemaRef,
}

impl OverWindow {
    /// The operator; `state_table(name)` returns the id of its state table `name` in `store`.
    ///
    /// # Errors
    /// `Unsupported` for partition, order or column types the state codec cannot store;
    /// `Storage` for a corrupt state key.
    pub fn try_new(opts: OverWindowOptions, state_table: &mut dyn FnMut(&str) -> TableRef, store: &Store) -> Result<Self> {
        let OverWindowOptions { partition_exprs, order_exprs, order_by, functions, reach, input_schema, schema } = opts;
        let partition_types =
            partition_exprs.iter().map(|e| Ok(e.data_type(&input_schema)?)).collect::<Result<Vec<_>>>()?;
        let partition_codec = RowCodec::try_new(partition_types)?;
        let order_keys = OrderKey::all(order_exprs, &order_by, &input_schema)?;
        let input_types: Vec<DataType> = input_schema.fields().iter().map(|f| f.data_type().clone()).collect();
        let result_types: Vec<DataType> =
            schema.fields().iter().skip(input_types.len()).map(|f| f.data_type().clone()).collect();
        if result_types.len() != functions.len() {
            return Err(WeirError::internal("window functions: one output column per function"));
        }
        let row_codec = RowCodec::try_new(input_types.clone())?;
        let eval = Evaluator {
            functions,
            reach: reach.map(|(b, a)| (usize::try_from(b).unwrap_or(usize::MAX), usize::try_from(a).unwrap_or(usize::MAX))),
            input_schema,
            row_codec,
            result_codec: RowCodec::try_new(result_types.clone())?,
            out_codec: RowCodec::try_new(input_types.into_iter().chain(result_types).collect())?,
            schema,
        };
        let rows = StateTable::grouped(state_table(ROWS), store, partition_codec.group_len());
        let mut next_seq = 0;
        rows.scan(store, |key, _| {
            next_seq = next_seq.max(seq_of(key, false)? + 1);
            Ok(true)
        })?;
        Ok(Self { partition_exprs, partition_codec, order_keys, eval, rows, next_seq })
    }
}

/// A partition's rows, `(state key, input row)`, in order.
type Entries<'a> = Vec<(&'a [u8], &'a [u8])>;

impl Evaluator {
    /// The output rows (input row ++ results) of the rows of `list` marked in `dirty`, with
    /// their positions. Each run of marked rows is evaluated with the rows its results reach
    /// around it (the whole list when the reach is unbounded).
    fn outputs(&self, list: &Entries<'_>, dirty: &[bool]) -> Result<Vec<Ranked>> {
        let marked: Vec<usize> = (0..list.len()).filter(|i| dirty[*i]).collect();
        let mut out = Vec::with_capacity(marked.len());
        let mut i = 0;
        while i < marked.len() {
            // One run: marked rows whose contexts overlap or touch.
            let (run_lo, mut run_hi) = (marked[i], marked[i]);
            let mut j = i + 1;
            match self.reach {
                None => {
                    run_hi = *marked.last().expect("not empty");
                    j = marked.len();
                }
                Some((before, after)) => {
                    while j < marked.len() && marked[j] - run_hi <= before.saturating_add(after).saturating_add(1) {
                        run_hi = marked[j];
                        j += 1;
                    }
                }
            }
            let (lo, hi) = match self.reach {
                None => (0, list.len() - 1),
                Some((before, after)) => (run_lo.saturating_sub(before), run_hi.saturating_add(after).min(list.len() - 1)),
            };
            let results = self.evaluate(&list[lo..=hi])?;
            for &m in &marked[i..j] {
                let mut row = list[m].1.to_vec();
                row.extend_from_slice(&results[m - lo]);
                out.push((row, m as u64));
            }
            i = j;
        }
        Ok(out)
    }

    /// The functions' results (codec bytes) for every row of `rows`, a run of one partition in
    /// order.
    fn evaluate(&self, rows: &[(&[u8], &[u8])]) -> Result<Vec<Vec<u8>>> {
        let n = rows.len();
        let mut decoder = self.row_codec.decoder(n);
        for (_, row) in rows {
            decoder.append(row)?;
        }
        let batch = RecordBatch::try_new(Arc::clone(&self.input_schema), decoder.finish()?)?;
        let mut results = Vec::with_capacity(self.functions.len());
        for (i, f) in self.functions.iter().enumerate() {
            let values = f.evaluate(&batch)?;
            let field = self.schema.field(self.input_schema.fields().len() + i);
            results.push(if values.data_type() == field.data_type() {
                values
            } else {
                arrow::compute::cast(&values, field.data_type())?
            });
        }
        self.result_codec.encode_rows(&results, n)
    }

    /// Output rows from their bytes.
    fn decode(&self, rows: &[Vec<u8>]) -> Result<RecordBatch> {
        let mut decoder = self.out_codec.decoder(rows.len());
        for r in rows {
            decoder.append(r)?;
        }
        let columns = conform(decoder.finish()?, &self.schema)?;
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), columns)?)
    }

    /// Marks `dirty[c - after ..= c + before]`: the rows whose results reach position `c`.
    fn mark(&self, dirty: &mut [bool], c: usize) {
        match self.reach {
            None => dirty.iter_mut().for_each(|d| *d = true),
            Some((before, after)) => {
                let hi = c.saturating_add(before).min(dirty.len().saturating_sub(1));
                for d in &mut dirty[c.saturating_sub(after)..=hi] {
                    *d = true;
                }
            }
        }
    }
}

impl Operator for OverWindow {
    fn name(&self) -> &'static str {
        "OverWindow"
    }

    fn state_tables(&self) -> &'static [&'static str] {
        &[ROWS]
    }

    fn state(&self) -> Vec<(String, &StateTable)> {
        vec![(ROWS.to_string(), &self.rows)]
    }

    fn key_groups(&self, _input: usize, chunk: &StreamChunk) -> Result<Vec<u16>> {
        super::key_groups_of(&self.partition_exprs, &self.partition_codec, &chunk.batch)
    }

    fn process_batch(&mut self, _input: usize, chunk: StreamChunk, ctx: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        let n = chunk.len();
        if n == 0 {
            return Ok(None);
        }
        let batch = &chunk.batch;
        let (_, partitions) = super::partition_keys(&self.partition_exprs, &self.partition_codec, batch)?;
        let order = OrderKey::encode(&self.order_keys, batch)?;
        let rows = self.eval.row_codec.encode_rows(batch.columns(), n)?;

        let groups = super::rows_by_partition(&partitions);

        let (mut retracts, mut inserts): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (Vec::new(), Vec::new());
        for (partition, rows_of) in groups {
            // The chunk's net changes: keys inserted, and keys deleted with their rows.
            let mut inserted: HashSet<Vec<u8>> = HashSet::new();
            let mut deleted: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            for &row in &rows_of {
                let mut key = partition.to_vec();
                key.extend_from_slice(&order[row]);
                if chunk.ops[row].is_insert() {
                    key.extend_from_slice(&self.next_seq.to_be_bytes());
                    self.next_seq += 1;
                    self.rows.put(key.clone(), rows[row].clone());
                    inserted.insert(key);
                    continue;
                }
                let found = self
                    .rows
                    .prefix_iter(ctx.store, &key)?
                    .rev()
                    .find(|(_, stored)| *stored == rows[row].as_slice())
                    .map(|(k, _)| k.to_vec());
                let Some(found) = found else {
                    return Err(WeirError::internal("window functions: retraction of a row the operator does not hold"));
                };
                self.rows.delete(found.clone());
                if !inserted.remove(&found) {
                    deleted.insert(found, rows[row].clone());
                }
            }
            if inserted.is_empty() && deleted.is_empty() {
                continue;
            }
            let after: Entries<'_> = self.rows.prefix_iter(ctx.store, partition)?.collect();
            // The partition before the chunk: the rows now, less those inserted, with those
            // deleted, in key order; the survivors' positions in both.
            let mut before: Entries<'_> = Vec::with_capacity(after.len() + deleted.len());
            let mut survivors: Vec<(usize, usize)> = Vec::with_capacity(after.len());
            let mut gone = deleted.iter().map(|(k, v)| (k.as_slice(), v.as_slice())).peekable();
            let mut dirty_after = vec![false; after.len()];
            let mut gone_at = Vec::with_capacity(deleted.len());
            for (j, &(key, row)) in after.iter().enumerate() {
                while let Some(g) = gone.next_if(|g| g.0 < key) {
                    gone_at.push(before.len());
                    before.push(g);
                }
                if inserted.contains(key) {
                    self.eval.mark(&mut dirty_after, j);
                } else {
                    survivors.push((before.len(), j));
                    before.push((key, row));
                }
            }
            for g in gone {
                gone_at.push(before.len());
                before.push(g);
            }
            let mut dirty_before = vec![false; before.len()];
            for c in gone_at {
                self.eval.mark(&mut dirty_before, c);
            }
            // A surviving row whose frame changed in either order is recomputed in both.
            for &(i, j) in &survivors {
                let dirty = dirty_before[i] || dirty_after[j];
                dirty_before[i] = dirty;
                dirty_after[j] = dirty;
            }
            let old = self.eval.outputs(&before, &dirty_before)?;
            let new = self.eval.outputs(&after, &dirty_after)?;
            let (gone, came) = difference(old, new);
            retracts.extend(gone.into_iter().map(|(r, _)| r));
            inserts.extend(came.into_iter().map(|(r, _)| r));
        }
        let ops = if retracts.len() == 1 && inserts.len() == 1 {
            vec![Op::UpdateBefore, Op::UpdateAfter]
        } else {
            std::iter::repeat_n(Op::Delete, retracts.len()).chain(std::iter::repeat_n(Op::Insert, inserts.len())).collect()
        };
        retracts.extend(inserts);
        if retracts.is_empty() {
            return Ok(None);
        }
        Ok(Some(StreamChunk::new(ops, self.eval.decode(&retracts)?)))
    }

    fn on_barrier(&mut self, writes: &mut EpochWrites, _ctx: &OpContext<'_>) -> Result<()> {
        self.rows.flush(writes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray, TimestampMillisecondArray};
    use arrow::datatypes::{Field, Schema, TimeUnit};
    use datafusion::common::{DFSchema, ScalarValue};
    use datafusion::execution::context::ExecutionProps;
    use datafusion::functions_aggregate::sum::sum_udaf;
    use datafusion::logical_expr::expr::WindowFunction;
    use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
    use datafusion::logical_expr::{
        col, Expr, ExprFunctionExt, WindowFrame, WindowFrameBound, WindowFrameUnits, WindowFunctionDefinition,
    };
    use datafusion::physical_expr::expressions::Column;

    /// Input: a partition key `k`, a value `v`, a time `t` (ms).
    fn input_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new("v", DataType::Int64, true),
            Field::new("t", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        ]))
    }

    /// `SUM(v) OVER (PARTITION BY k ORDER BY t ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)`.
    fn open(store: &Store) -> OverWindow {
        let frame = (WindowFrameBound::Preceding(ScalarValue::UInt64(Some(1))), WindowFrameBound::CurrentRow);
        open_with(store, frame, Some((1, 0)))
    }

    /// `SUM(v) OVER (PARTITION BY k ORDER BY t ROWS BETWEEN start AND end)`, evaluating the
    /// rows `reach` says.
    fn open_with(store: &Store, (start, end): (WindowFrameBound, WindowFrameBound), reach: Option<(u64, u64)>) -> OverWindow {
        let input = input_schema();
        let logical = Expr::WindowFunction(Box::new(WindowFunction::new(
            WindowFunctionDefinition::AggregateUDF(sum_udaf()),
            vec![col("v")],
        )))
        .partition_by(vec![col("k")])
        .order_by(vec![col("t").sort(true, false)])
        .window_frame(WindowFrame::new_bounds(WindowFrameUnits::Rows, start, end))
        .build()
        .expect("window expression");
        let df_schema = DFSchema::try_from(input.as_ref().clone()).expect("schema");
        let function = datafusion::physical_planner::create_window_expr(
            &logical,
            &df_schema,
            &ExecutionProps::new(),
            &PhysicalPlanningContext::default(),
        )
        .expect("physical window expression");
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("s", DataType::Int64, true));
        let opts = OverWindowOptions {
            partition_exprs: vec![Arc::new(Column::new("k", 0))],
            order_exprs: vec![Arc::new(Column::new("t", 2))],
            order_by: vec![col("t").sort(true, false)],
            functions: vec![function],
            reach,
            input_schema: input,
            schema: Arc::new(Schema::new(fields)),
        };
        OverWindow::try_new(opts, &mut |_| 1.into(), store).expect("operator")
    }

    /// A chunk of `(op, k, v, t)` rows.
    fn chunk(items: &[(Op, &str, i64, i64)]) -> StreamChunk {
        let batch = RecordBatch::try_new(
            input_schema(),
            vec![
                Arc::new(StringArray::from(items.iter().map(|r| r.1).collect::<Vec<_>>())),
                Arc::new(Int64Array::from(items.iter().map(|r| r.2).collect::<Vec<_>>())),
                Arc::new(TimestampMillisecondArray::from(items.iter().map(|r| r.3).collect::<Vec<_>>())),
            ],
        )
        .expect("batch");
        StreamChunk::new(items.iter().map(|r| r.0).collect(), batch)
    }

    /// The `(op, k, v, t, s)` rows the operator emits for `items`.
    fn push(op: &mut OverWindow, store: &Store, items: &[(Op, &str, i64, i64)]) -> Vec<(Op, String, i64, i64, i64)> {
        let Some(out) = op.process_batch(0, chunk(items), &OpContext { store }).expect("chunk") else { return vec![] };
        let col = |i: usize| Arc::clone(out.batch.column(i));
        let (k, v, t, s) = (col(0), col(1), col(2), col(3));
        let k = k.as_any().downcast_ref::<StringArray>().expect("k");
        let v = v.as_any().downcast_ref::<Int64Array>().expect("v");
        let t = t.as_any().downcast_ref::<TimestampMillisecondArray>().expect("t");
        let s = s.as_any().downcast_ref::<Int64Array>().expect("s");
        (0..out.len()).map(|i| (out.ops[i], k.value(i).to_string(), v.value(i), t.value(i), s.value(i))).collect()
    }

    /// Each row carries the sum of itself and the row before it in time order; a row arriving
    /// earlier in time changes the row after it only; a delete changes the row after it; the
    /// rows and the arrival order of ties survive a restart.
    #[test]
    fn results_follow_inserts_and_deletes_through_a_restart() {
        use Op::{Delete as D, Insert as I, UpdateAfter as UA, UpdateBefore as UB};
        let dir = tempfile::tempdir().expect("dir");
        let store = Store::open(dir.path()).expect("store");
        let mut op = open(&store);
        let got = push(&mut op, &store, &[(I, "a", 1, 10), (I, "a", 2, 20), (I, "a", 4, 30), (I, "b", 7, 5)]);
        assert_eq!(
            got,
            vec![(I, "a".into(), 1, 10, 1), (I, "a".into(), 2, 20, 3), (I, "a".into(), 4, 30, 6), (I, "b".into(), 7, 5, 7)]
        );
        let mut writes = EpochWrites::default();
        op.on_barrier(&mut writes, &OpContext { store: &store }).expect("barrier");
        store.commit(writes, 1).expect("commit");

        let mut op = open(&store);
        // a@15 = 8 + 1; a@20 becomes 2 + 8; a@30 stays 4 + 2.
        assert_eq!(
            push(&mut op, &store, &[(I, "a", 8, 15)]),
            vec![(D, "a".into(), 2, 20, 3), (I, "a".into(), 8, 15, 9), (I, "a".into(), 2, 20, 10)]
        );
        // A tie at 30 after a restart comes after the earlier arrival: 5 + 4.
        assert_eq!(push(&mut op, &store, &[(I, "a", 5, 30)]), vec![(I, "a".into(), 5, 30, 9)]);
        // Deleting a@10: a@15 becomes 8 alone; a lone change is an update pair.
        assert_eq!(
            push(&mut op, &store, &[(D, "a", 1, 10)]),
            vec![(D, "a".into(), 1, 10, 1), (D, "a".into(), 8, 15, 9), (I, "a".into(), 8, 15, 8)]
        );
        assert_eq!(push(&mut op, &store, &[(D, "b", 7, 5), (I, "b", 6, 5)]), vec![(UB, "b".into(), 7, 5, 7), (UA, "b".into(), 6, 5, 6)]);
    }

    /// Evaluating only the rows a change reaches gives the same view as evaluating every row
    /// of the partition, over random inserts and deletes with ties, for a frame reaching both
    /// ways (`ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING`).
    #[test]
    fn evaluating_the_reached_rows_equals_evaluating_every_row() {
        let frame = || (WindowFrameBound::Preceding(ScalarValue::UInt64(Some(2))), WindowFrameBound::Following(ScalarValue::UInt64(Some(1))));
        let (dir_a, dir_b) = (tempfile::tempdir().expect("dir"), tempfile::tempdir().expect("dir"));
        let (store_a, store_b) = (Store::open(dir_a.path()).expect("store"), Store::open(dir_b.path()).expect("store"));
        let mut reached = open_with(&store_a, frame(), Some((2, 1)));
        let mut every = open_with(&store_b, frame(), None);
        let (mut view_a, mut view_b) = (Vec::new(), Vec::new());
        let apply = |view: &mut Vec<(String, i64, i64, i64)>, out: Vec<(Op, String, i64, i64, i64)>| {
            for (op, k, v, t, s) in out {
                let row = (k, v, t, s);
                if op.is_insert() {
                    view.push(row);
                } else {
                    let at = view.iter().position(|r| *r == row).expect("a retraction of a row in the view");
                    view.swap_remove(at);
                }
            }
        };
        let mut live: Vec<(&str, i64, i64)> = Vec::new();
        let mut seed = 7u64;
        let mut next = |m: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        for _ in 0..60 {
            let mut items = Vec::new();
            for _ in 0..1 + next(4) {
                if !live.is_empty() && next(3) == 0 {
                    let (k, v, t) = live.swap_remove(next(live.len() as u64) as usize);
                    items.push((Op::Delete, k, v, t));
                } else {
                    let row = (["a", "b"][next(2) as usize], next(50) as i64, 10 * next(8) as i64);
                    live.push(row);
                    items.push((Op::Insert, row.0, row.1, row.2));
                }
            }
            apply(&mut view_a, push(&mut reached, &store_a, &items));
            apply(&mut view_b, push(&mut every, &store_b, &items));
            view_a.sort();
            view_b.sort();
            assert_eq!(view_a, view_b, "after {items:?}");
        }
        assert!(view_a.len() > 10, "the run kept rows");
    }
}
