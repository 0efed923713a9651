//! OverAggregate: `agg(x) OVER (PARTITION BY .. ORDER BY t [frame])` over an append-only
//! input, on event time (Flink's RowTimeRowsBoundedPrecedingFunction and its siblings; rules in
//! [`crate::plan::over`]).
//!
//! A row waits in state until the watermark reaches its time `t` (ms); rows whose `t` is at
//! or below the watermark when they arrive are late, dropped and counted. When the watermark
//! moves, the waiting rows it reached are taken per partition in time order (equal times in
//! arrival order) and each is emitted `+I` with its aggregates over its frame:
//! - `ROWS n PRECEDING`: the row and the `n` rows before it; `ROWS UNBOUNDED PRECEDING`:
//!   every row of the partition so far.
//! - `RANGE INTERVAL d PRECEDING`: every row whose time is in `[t - d, t]`, so peers (rows with
//!   the same `t`) are all in each other's frame and share one result; `RANGE UNBOUNDED
//!   PRECEDING` (the default): every row up to `t`, peers included.
//!
//! On processing time (`ORDER BY` a `PROCTIME()` column) a chunk's rows are processed as they
//! arrive, as if the watermark were their latest time: none waits and none is late.
//!
//! The aggregates are kept by a [`GroupAggregate`] grouped by the partition: a row entering
//! the frame is inserted into it, one leaving a bounded frame is retracted, and the group's
//! row then holds the frame's aggregates (MIN and MAX keep their values for bounded frames,
//! the extreme only for unbounded ones). The output is append-only.
//!
//! # State
//! - `pending`: partition key ++ time (memcomparable i64) ++ arrival sequence (u64,
//!   big-endian) → the input row: rows waiting for the watermark.
//! - `history` (bounded frames): the same keys → the rows in the partitions' frames.
//! - `watermark`: the watermark, the late-row count and the next arrival sequence.
//! - `agg/...`: the group aggregate's tables.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{Result, WeirError};
use crate::plan::over::OverFrame;
use crate::runtime::changelog::{Op, StreamChunk};
use crate::runtime::operator::{OpContext, Operator};
use crate::runtime::operators::group_agg::GroupAggregate;
use crate::runtime::operators::join::{conform, times_ms};
use crate::state::codec::{decode_i64, encode_i64};
use crate::state::{EpochWrites, RowCodec, StateTable, Store, TableRef};

/// The stable name of the table of rows waiting for the watermark.
pub const PENDING: &str = "pending";
/// The stable name of the table of rows in bounded frames.
pub const HISTORY: &str = "history";
/// The stable name of the table of the watermark, late-row count and arrival sequence.
pub const WATERMARK: &str = "watermark";
/// The prefix of the group aggregate's table names.
pub const AGG_PREFIX: &str = "agg/";

/// The OVER aggregate operator; see the module docs.
pub struct OverAggregate {
    partition_exprs: Vec<Arc<dyn PhysicalExpr>>,
    partition_codec: RowCodec,
    time_column: usize,
    /// Rows are processed on arrival (processing time).
    proctime: bool,
    frame: OverFrame,
    input_schema: SchemaRef,
    /// Codec of an input row.
    row_codec: RowCodec,
    /// Output schema: the input columns, then one per aggregate.
    schema: SchemaRef,
    /// The aggregates' group aggregate, grouped by the partition.
    aggs: GroupAggregate,
    pending: StateTable,
    history: StateTable,
    meta: StateTable,
    /// The times of waiting rows, with their partitions.
    waiting: BTreeMap<i64, BTreeSet<Vec<u8>>>,
    watermark_ms: Option<i64>,
    num_late_rows: u64,
    next_seq: u64,
}

impl OverAggregate {
    /// An OVER aggregate over rows of `input_schema` partitioned by `partition_exprs`, ordered by
    /// column `time_column` (processing time with `proctime`), computing with `aggs` (a group aggregate by the partition whose
    /// output is the partition columns then the aggregates) into `schema`. `state_table(name)`
    /// gives the ids of its tables (the group aggregate's are named `agg/...` by the caller).
    ///
    /// # Errors
    /// `Unsupported` for column types the state codec cannot store; `Storage` for corrupt
    /// state.
    #[allow(clippy::too_many_arguments)]
    pub fn try_new(
        partition_exprs: Vec<Arc<dyn PhysicalExpr>>,
        (time_column, proctime): (usize, bool),
        frame: OverFrame,
        input_schema: SchemaRef,
        schema: SchemaRef,
        aggs: GroupAggregate,
        state_table: &mut dyn FnMut(&str) -> TableRef,
        store: &Store,
    ) -> Result<Self> {
        let partition_types =
            partition_exprs.iter().map(|e| Ok(e.data_type(&input_schema)?)).collect::<Result<Vec<_>>>()?;
        let partition_codec = RowCodec::try_new(partition_types)?;
        let row_codec = RowCodec::try_new(input_schema.fields().iter().map(|f| f.data_type().clone()).collect())?;
        let pending = StateTable::grouped(state_table(PENDING), store, partition_codec.group_len());
        let history = StateTable::grouped(state_table(HISTORY), store, partition_codec.group_len());
        let mut meta = StateTable::new(state_table(WATERMARK));
        let (watermark_ms, num_late_rows, next_seq) = match meta.get(store, b"")? {
            Some(v) if v.len() == 25 => (
                (v[0] == 1).then(|| i64::from_le_bytes(v[1..9].try_into().expect("8 bytes"))),
                u64::from_le_bytes(v[9..17].try_into().expect("8 bytes")),
                u64::from_le_bytes(v[17..25].try_into().expect("8 bytes")),
            ),
            Some(_) => return Err(WeirError::storage("corrupt OVER aggregate watermark")),
            None => (None, 0, 0),
        };
        let mut waiting: BTreeMap<i64, BTreeSet<Vec<u8>>> = BTreeMap::new();
        pending.scan(store, |key, _| {
            let len = partition_codec.encoded_len(key);
            let time = time_of(&key[len..])?;
            waiting.entry(time).or_default().insert(key[..len].to_vec());
            Ok(true)
        })?;
        Ok(Self {
            partition_exprs,
            partition_codec,
            time_column,
            proctime,
            frame,
            input_schema,
            row_codec,
            schema,
            aggs,
            pending,
            history,
            meta,
            waiting,
            watermark_ms,
            num_late_rows,
            next_seq,
        })
    }

    fn save_meta(&mut self) {
        let mut v = Vec::with_capacity(25);
        v.push(self.watermark_ms.is_some() as u8);
        v.extend_from_slice(&self.watermark_ms.unwrap_or(0).to_le_bytes());
        v.extend_from_slice(&self.num_late_rows.to_le_bytes());
        v.extend_from_slice(&self.next_seq.to_le_bytes());
        self.meta.put(Vec::new(), v);
    }

    /// Input rows from their encoded bytes.
    fn rows_batch(&self, rows: &[&[u8]]) -> Result<RecordBatch> {
        let mut decoder = self.row_codec.decoder(rows.len());
        for r in rows {
            decoder.append(r)?;
        }
        Ok(RecordBatch::try_new(Arc::clone(&self.input_schema), decoder.finish()?)?)
    }

    /// Feeds `rows` (encoded input rows) into the group aggregate as `op`.
    fn feed(&mut self, rows: &[&[u8]], op: Op, ctx: &OpContext<'_>) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let batch = self.rows_batch(rows)?;
        self.aggs.process_batch(0, StreamChunk::new(vec![op; rows.len()], batch), ctx)?;
        Ok(())
    }

    /// Retracts from the aggregates the rows of `partition` that leave a bounded frame now that
    /// the frame's last row is at `time` (its newest rows counted in `history`).
    fn expire(&mut self, partition: &[u8], time: i64, ctx: &OpContext<'_>) -> Result<()> {
        let leaving: Vec<(Vec<u8>, Vec<u8>)> = {
            let entries: Vec<(&[u8], &[u8])> = self.history.prefix_iter(ctx.store, partition)?.collect();
            let keep_from = match self.frame {
                OverFrame::Rows(Some(n)) => entries.len().saturating_sub(n as usize + 1),
                OverFrame::Range(Some(ms)) => {
                    let first = time.saturating_sub(ms);
                    entries
                        .iter()
                        .position(|(k, _)| time_of(&k[partition.len()..]).is_ok_and(|t| t >= first))
                        .unwrap_or(entries.len())
                }
                _ => 0,
            };
            entries[..keep_from].iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect()
        };
        let rows: Vec<&[u8]> = leaving.iter().map(|(_, v)| v.as_slice()).collect();
        self.feed(&rows, Op::Delete, ctx)?;
        for (k, _) in leaving {
            self.history.delete(k);
        }
        Ok(())
    }

    /// Emits the waiting rows of `partition` at or below the watermark `w`, in time order:
    /// (input row, the aggregates' group row).
    fn fire(&mut self, partition: &[u8], w: i64, ctx: &OpContext<'_>, out: &mut Vec<(Vec<u8>, Vec<u8>)>) -> Result<()> {
        let ready: Vec<(Vec<u8>, i64, Vec<u8>)> = self
            .pending
            .prefix_iter(ctx.store, partition)?
            .filter_map(|(k, v)| {
                let t = time_of(&k[partition.len()..]).ok()?;
                (t <= w).then(|| (k.to_vec(), t, v.to_vec()))
            })
            .collect();
        let bounded = matches!(self.frame, OverFrame::Rows(Some(_)) | OverFrame::Range(Some(_)));
        let peers_share = matches!(self.frame, OverFrame::Range(_));
        let mut i = 0;
        while i < ready.len() {
            // One step: a row, or for RANGE all rows of one time (peers).
            let end = if peers_share { i + ready[i..].iter().take_while(|r| r.1 == ready[i].1).count() } else { i + 1 };
            let step = &ready[i..end];
            let rows: Vec<&[u8]> = step.iter().map(|(_, _, row)| row.as_slice()).collect();
            self.feed(&rows, Op::Insert, ctx)?;
            if bounded {
                for (key, _, row) in step {
                    self.history.put(key.clone(), row.clone());
                }
                self.expire(partition, step[0].1, ctx)?;
            }
            let aggs = self
                .aggs
                .output_of(ctx.store, partition)?
                .ok_or_else(|| WeirError::internal("OVER aggregate: a partition with rows has no aggregates"))?;
            for (key, _, row) in step {
                out.push((row.clone(), aggs.clone()));
                self.pending.delete(key.clone());
            }
            i = end;
        }
        Ok(())
    }
}

/// The time (ms) at the front of `bytes` (time ++ sequence).
fn time_of(bytes: &[u8]) -> Result<i64> {
    let b: [u8; 8] = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| WeirError::storage("corrupt OVER aggregate state key"))?;
    Ok(decode_i64(b))
}

impl Operator for OverAggregate {
    fn name(&self) -> &'static str {
        "OverAggregate"
    }

    fn state_tables(&self) -> &'static [&'static str] {
        &[PENDING, HISTORY, WATERMARK]
    }

    fn state(&self) -> Vec<(String, &StateTable)> {
        let mut out = vec![(PENDING.to_string(), &self.pending), (HISTORY.to_string(), &self.history)];
        out.extend(self.aggs.state().into_iter().map(|(name, t)| (format!("{AGG_PREFIX}{name}"), t)));
        out
    }

    fn process_batch(&mut self, _input: usize, chunk: StreamChunk, ctx: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        let n = chunk.len();
        if chunk.ops.iter().any(|op| !op.is_insert()) {
            return Err(WeirError::internal("OVER aggregate: a retraction in an append-only input"));
        }
        let batch = &chunk.batch;
        let cols = self
            .partition_exprs
            .iter()
            .map(|e| Ok(e.evaluate(batch)?.into_array(n)?))
            .collect::<Result<Vec<ArrayRef>>>()?;
        let partitions = self.partition_codec.encode_rows(&cols, n)?;
        let times = times_ms(batch.column(self.time_column))?;
        let rows = self.row_codec.encode_rows(batch.columns(), n)?;
        let mut late = 0;
        let mut newest = None;
        for ((partition, time), row) in partitions.into_iter().zip(times).zip(rows) {
            // A row without a time, or at or below the watermark, is late (Flink drops it);
            // on processing time nothing is late.
            let Some(t) = time.filter(|t| self.proctime || self.watermark_ms.is_none_or(|w| *t > w)) else {
                late += 1;
                continue;
            };
            let mut key = partition.clone();
            key.extend_from_slice(&encode_i64(t));
            key.extend_from_slice(&self.next_seq.to_be_bytes());
            self.next_seq += 1;
            self.pending.put(key, row);
            self.waiting.entry(t).or_default().insert(partition);
            newest = newest.max(Some(t));
        }
        self.num_late_rows += late;
        self.save_meta();
        match newest {
            // Processing time: the rows go out now, in arrival order.
            Some(t) if self.proctime => self.fire_waiting(t, ctx),
            _ => Ok(None),
        }
    }

    fn on_watermark(
        &mut self,
        _input: usize,
        watermark_ms: i64,
        ctx: &OpContext<'_>,
    ) -> Result<(Option<StreamChunk>, Option<i64>)> {
        if self.proctime || self.watermark_ms.is_some_and(|w| watermark_ms <= w) {
            return Ok((None, Some(watermark_ms)));
        }
        self.watermark_ms = Some(watermark_ms);
        self.save_meta();
        Ok((self.fire_waiting(watermark_ms, ctx)?, Some(watermark_ms)))
    }

    fn event_time_watermark(&self) -> Option<Option<i64>> {
        Some(self.watermark_ms)
    }

    fn num_late_rows(&self) -> u64 {
        self.num_late_rows
    }

    fn on_barrier(&mut self, writes: &mut EpochWrites, ctx: &OpContext<'_>) -> Result<()> {
        self.pending.flush(writes);
        self.history.flush(writes);
        self.meta.flush(writes);
        self.aggs.on_barrier(writes, ctx)
    }
}

impl OverAggregate {
    /// Emits every waiting row whose time is at or below `watermark_ms` (module docs).
    fn fire_waiting(&mut self, watermark_ms: i64, ctx: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        let later = self.waiting.split_off(&watermark_ms.saturating_add(1));
        let reached = std::mem::replace(&mut self.waiting, later);
        let partitions: BTreeSet<Vec<u8>> = reached.into_values().flatten().collect();
        let mut out = Vec::new();
        for partition in &partitions {
            self.fire(partition, watermark_ms, ctx, &mut out)?;
        }
        if out.is_empty() {
            return Ok(None);
        }
        let rows: Vec<&[u8]> = out.iter().map(|(row, _)| row.as_slice()).collect();
        let inputs = self.rows_batch(&rows)?;
        let mut decoder = self.aggs.out_codec().decoder(out.len());
        for (_, aggs) in &out {
            decoder.append(aggs)?;
        }
        let agg_cols = decoder.finish()?;
        let num_keys = self.partition_exprs.len();
        let mut cols: Vec<ArrayRef> = inputs.columns().to_vec();
        cols.extend(agg_cols.into_iter().skip(num_keys));
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), conform(cols, &self.schema)?)?;
        Ok(Some(StreamChunk::new(vec![Op::Insert; out.len()], batch)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::operators::group_agg::{AggCall, AggKind};
    use arrow::array::{Int64Array, StringArray, TimestampMillisecondArray};
    use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
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
    fn open(store: &Store) -> OverAggregate {
        let input = input_schema();
        let key = || vec![Arc::new(Column::new("k", 0)) as Arc<dyn PhysicalExpr>];
        let sum = AggCall {
            kind: AggKind::Sum,
            arg: Some(Arc::new(Column::new("v", 1))),
            distinct: false,
            filter: None,
            arg_type: DataType::Int64,
            output_type: DataType::Int64,
            separator: None,
        };
        let agg_schema =
            Arc::new(Schema::new(vec![Field::new("p0", DataType::Utf8, true), Field::new("a0", DataType::Int64, true)]));
        let mut tables = |name: &str| -> TableRef {
            match name {
                PENDING => 1,
                HISTORY => 2,
                WATERMARK => 3,
                "groups" => 4,
                _ => 5,
            }
            .into()
        };
        let aggs = GroupAggregate::try_new(key(), vec![sum], agg_schema, None, false, &mut tables, store).expect("aggs");
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("s", DataType::Int64, true));
        let schema = Arc::new(Schema::new(fields));
        OverAggregate::try_new(key(), (2, false), OverFrame::Rows(Some(1)), input, schema, aggs, &mut tables, store).expect("op")
    }

    fn rows(items: &[(&str, i64, i64)]) -> StreamChunk {
        let batch = RecordBatch::try_new(
            input_schema(),
            vec![
                Arc::new(StringArray::from(items.iter().map(|r| r.0).collect::<Vec<_>>())),
                Arc::new(Int64Array::from(items.iter().map(|r| r.1).collect::<Vec<_>>())),
                Arc::new(TimestampMillisecondArray::from(items.iter().map(|r| r.2).collect::<Vec<_>>())),
            ],
        )
        .expect("batch");
        StreamChunk::inserts(batch)
    }

    /// (k, v, t, s) of the rows a watermark emits.
    fn fired(op: &mut OverAggregate, store: &Store, w: i64) -> Vec<(String, i64, i64, i64)> {
        let (out, wm) = op.on_watermark(0, w, &OpContext { store }).expect("watermark");
        assert_eq!(wm, Some(w));
        let Some(c) = out else { return vec![] };
        let col = |i: usize| Arc::clone(c.batch.column(i));
        let (k, v, t, s) = (col(0), col(1), col(2), col(3));
        let k = k.as_any().downcast_ref::<StringArray>().expect("k");
        let v = v.as_any().downcast_ref::<Int64Array>().expect("v");
        let t = t.as_any().downcast_ref::<TimestampMillisecondArray>().expect("t");
        let s = s.as_any().downcast_ref::<Int64Array>().expect("s");
        (0..c.len()).map(|i| (k.value(i).to_string(), v.value(i), t.value(i), s.value(i))).collect()
    }

    fn commit(op: &mut OverAggregate, store: &Store, epoch: u64) {
        let mut writes = EpochWrites::default();
        op.on_barrier(&mut writes, &OpContext { store }).expect("barrier");
        store.commit(writes, epoch).expect("commit");
    }

    /// Rows wait for the watermark and come out in time order with the sum of themselves and
    /// the row before; the waiting rows, the frames and the watermark survive a restart; a row
    /// at or below the watermark is late.
    #[test]
    fn rows_frames_fire_on_the_watermark_in_time_order_and_survive_a_restart() {
        let dir = tempfile::tempdir().expect("dir");
        let store = Store::open(dir.path()).expect("store");
        let mut op = open(&store);
        let ctx = OpContext { store: &store };
        assert!(op.process_batch(0, rows(&[("a", 1, 30), ("a", 2, 10), ("b", 5, 20), ("a", 4, 20)]), &ctx).expect("rows").is_none());
        // Watermark 20: a@10 (2), a@20 (4: 2 + 4), b@20 (5); a@30 waits.
        let mut got = fired(&mut op, &store, 20);
        got.sort();
        assert_eq!(got, vec![("a".into(), 2, 10, 2), ("a".into(), 4, 20, 6), ("b".into(), 5, 20, 5)]);
        commit(&mut op, &store, 1);

        let mut op = open(&store);
        let ctx = OpContext { store: &store };
        // Late: at or below the watermark 20.
        op.process_batch(0, rows(&[("a", 100, 20), ("a", 8, 40)]), &ctx).expect("rows");
        assert_eq!(op.num_late_rows(), 1);
        // a@30 (1: 4 + 1), a@40 (8: 1 + 8).
        assert_eq!(fired(&mut op, &store, 50), vec![("a".into(), 1, 30, 5), ("a".into(), 8, 40, 9)]);
    }
}
