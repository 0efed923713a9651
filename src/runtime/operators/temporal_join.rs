//! TemporalJoin: the event-time temporal join `o JOIN t FOR SYSTEM_TIME AS OF o.ts` (SQL.md
//! "Joins"; Flink's TemporalRowTimeJoinOperator), planned by [`crate::plan::join`].
//!
//! # Rule
//! The right input is a versioned table: a primary key and an event-time column. Each of its
//! rows is a version of its key, valid from its own time, inclusive, until the next version of
//! that key. A probe row (left input) at time `t` joins the version of its key valid at `t`,
//! if it passes the residual condition; a LEFT join emits it NULL-padded otherwise (no
//! version yet, a deleted version, or a failed condition). The answer is final only once no
//! earlier version can still arrive, so probe rows are held until the watermark `W` (the
//! minimum of both inputs') reaches `t`, then emitted, once, in time order.
//!
//! Changelog: any in → append-only out (`+I` only). Versions: `+I`/`+U` put the version at its
//! time (replacing one at the same time); `-D` marks the key deleted from that time on; `-U`
//! is ignored, the `+U` that follows it is the new version. Versions arriving out of order
//! are placed by their time; they are never late. Probe rows: every row is held, one at `t ≤
//! W` (behind the watermark) too, and emitted at the watermark's next advance with the version
//! valid at `t` that is still kept, as Flink's operator holds every probe row until a
//! watermark passes it; a retraction of a held probe row withdraws it before it is emitted, one
//! of a row emitted already is late (dropped and counted in `num_late_rows`: the output is
//! append-only); a probe row with a NULL time never matches (LEFT emits it padded at once). A
//! NULL join key never matches.
//!
//! # State
//! - `probes`: held probe rows, key = time ++ row, value = count of copies. Freed when the
//!   watermark emits them.
//! - `versions`: key = join key ++ time, value = `1` ++ row, or `0` for a deletion. Once the
//!   watermark passes a key's version, the versions before it can no longer be reached (every
//!   probe row still to come is later) and are dropped; so is a deletion with nothing after it.
//! - `watermark`: both inputs' watermarks and the late-row count.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, BooleanArray, RecordBatch, RecordBatchOptions, UInt32Array};
use arrow::compute::cast;
use arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{Result, WeirError};
use crate::runtime::changelog::{Op, StreamChunk};
use crate::runtime::operator::{OpContext, Operator};
use crate::runtime::operators::join::{conform, encode_meta, load_meta, side_index, take_all, times_ms};
use crate::state::codec::{decode_i64, put_i64};
use crate::state::{EpochWrites, RowCodec, StateTable, Store, TableRef};

/// The stable name of the held probe rows' table.
pub const PROBES: &str = "probes";
/// The stable name of the versions' table.
pub const VERSIONS: &str = "versions";
/// The stable name of the table holding the watermarks and the late-row count.
pub const WATERMARK: &str = "watermark";

/// Length of an encoded time in a state key: a flag byte and 8 bytes.
const TIME_LEN: usize = 9;

/// Everything a temporal join needs, built from a [`crate::plan::join::JoinSpec`].
pub struct TemporalJoinOptions {
    /// LEFT (probe rows without a version are emitted NULL-padded) rather than INNER.
    pub left_outer: bool,
    /// Equi-join keys over the probe (left) input.
    pub left_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Equi-join keys over the versioned (right) input; they cover its primary key.
    pub right_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// The residual condition over the left columns then all right input columns.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    /// NULL keys match each other (`IS NOT DISTINCT FROM`).
    pub null_equals_null: bool,
    /// The AS OF column of the left input.
    pub probe_time: usize,
    /// The event-time column of the right input.
    pub version_time: usize,
    /// The left columns in the output: the first `left_width` of the left input.
    pub left_width: usize,
    /// The right columns in the output: the first `right_width` of the right input.
    pub right_width: usize,
    pub left_schema: SchemaRef,
    pub right_schema: SchemaRef,
    /// Output schema: the first `left_width` left columns, then the first `right_width` right
    /// columns.
    pub schema: SchemaRef,
}

/// The temporal join; see the module docs.
pub struct TemporalJoin {
    opts: TemporalJoinOptions,
    /// Codec of the join key (the left keys' types; right keys are cast to them).
    key_codec: RowCodec,
    /// Codecs of a whole left and right row.
    left_codec: RowCodec,
    right_codec: RowCodec,
    /// The schema the filter is evaluated on: left then right columns, all nullable.
    pair_schema: SchemaRef,
    /// Time ++ probe row → count.
    probes: StateTable,
    /// Join key ++ time → version.
    versions: StateTable,
    /// Join keys with a version after the watermark: a later watermark may free older ones.
    dirty: BTreeSet<Vec<u8>>,
    /// Each input's watermark, ms; `None` before its first.
    watermarks: [Option<i64>; 2],
    /// Probe rows dropped because they were late.
    num_late_rows: u64,
    meta: StateTable,
}

impl TemporalJoin {
    /// A temporal join with its state tables from `state_table(name)`, loaded from `store`.
    ///
    /// # Errors
    /// `Internal` when the key lists differ in length; `Unsupported` for column types the state
    /// codec cannot store; `Storage` for corrupt state.
    pub fn try_new(opts: TemporalJoinOptions, state_table: &mut dyn FnMut(&str) -> TableRef, store: &Store) -> Result<Self> {
        if opts.left_keys.len() != opts.right_keys.len() {
            return Err(WeirError::internal("temporal join: left and right key lists differ in length"));
        }
        let key_types =
            opts.left_keys.iter().map(|e| Ok(e.data_type(&opts.left_schema)?)).collect::<Result<Vec<_>>>()?;
        let types = |s: &SchemaRef| s.fields().iter().map(|f| f.data_type().clone()).collect::<Vec<_>>();
        let pair_schema = Arc::new(Schema::new(
            opts.left_schema
                .fields()
                .iter()
                .chain(opts.right_schema.fields().iter())
                .map(|f| Field::new(f.name(), f.data_type().clone(), true))
                .collect::<Vec<_>>(),
        ));
        let key_codec = RowCodec::try_new(key_types)?;
        // Versions are cached a key at a time.
        let versions = StateTable::grouped(state_table(VERSIONS), store, key_codec.group_len());
        let mut dirty = BTreeSet::new();
        versions.scan(store, |k, _| {
            dirty.insert(k[..k.len() - TIME_LEN].to_vec());
            Ok(true)
        })?;
        let mut meta = StateTable::new(state_table(WATERMARK));
        let (watermarks, num_late_rows, _) = load_meta(&mut meta, store)?;
        Ok(Self {
            key_codec,
            left_codec: RowCodec::try_new(types(&opts.left_schema))?,
            right_codec: RowCodec::try_new(types(&opts.right_schema))?,
            pair_schema,
            probes: StateTable::point(state_table(PROBES), store),
            versions,
            dirty,
            watermarks,
            num_late_rows,
            meta,
            opts,
        })
    }

    /// The join's watermark: the minimum of its inputs', once both have one.
    fn watermark(&self) -> Option<i64> {
        Some(self.watermarks[0]?.min(self.watermarks[1]?))
    }

    /// The encoded join key of every row of `batch` (`keys` over it); `None` where it never
    /// matches.
    fn keys(&self, keys: &[Arc<dyn PhysicalExpr>], batch: &RecordBatch) -> Result<Vec<Option<Vec<u8>>>> {
        let n = batch.num_rows();
        let cols = keys
            .iter()
            .zip(self.key_codec.types())
            .map(|(e, t)| {
                let a = e.evaluate(batch)?.into_array(n)?;
                Ok(if a.data_type() == t { a } else { cast(&a, t)? })
            })
            .collect::<Result<Vec<_>>>()?;
        let prepared = self.key_codec.prepare(&cols)?;
        Ok((0..n)
            .map(|i| {
                if !self.opts.null_equals_null && cols.iter().any(|c| c.is_null(i)) {
                    return None;
                }
                let mut key = Vec::new();
                self.key_codec.encode_row(&prepared, i, &mut key);
                Some(key)
            })
            .collect())
    }

    /// Holds (or withdraws) probe rows; emits the padded rows of NULL times at once (LEFT).
    fn probe(&mut self, chunk: &StreamChunk, ctx: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        let times = times_ms(chunk.batch.column(self.opts.probe_time))?;
        let rows = self.left_codec.encode_rows(chunk.columns(), chunk.len())?;
        let watermark = self.watermark();
        let mut padded = Vec::new();
        let mut padded_ops = Vec::new();
        for (i, (t, row)) in times.into_iter().zip(rows).enumerate() {
            let sign = chunk.ops[i].sign();
            let Some(t) = t else {
                if self.opts.left_outer {
                    padded.push(i as u32);
                    padded_ops.push(if sign > 0 { Op::Insert } else { Op::Delete });
                }
                continue;
            };
            let mut key = Vec::with_capacity(TIME_LEN + row.len());
            put_i64(&mut key, t);
            key.extend_from_slice(&row);
            let count = match self.probes.get(ctx.store, &key)? {
                Some(v) => crate::runtime::operators::materialize::decode_count(&v)?,
                None => 0,
            } + sign;
            match count {
                // The retraction of a probe row emitted already: the output is append-only.
                c if c < 0 && watermark.is_some_and(|w| t <= w) => {
                    self.num_late_rows += 1;
                    self.save_meta();
                }
                c if c < 0 => {
                    return Err(WeirError::internal("temporal join: retraction of a probe row it does not hold"))
                }
                0 => self.probes.delete(key),
                c => self.probes.put(key, c.to_le_bytes().to_vec()),
            }
        }
        if padded.is_empty() {
            return Ok(None);
        }
        let idx = UInt32Array::from(padded);
        let left = take_all(chunk.columns(), &idx)?;
        Ok(Some(StreamChunk::new(padded_ops, self.output_batch(left, None, idx.len())?)))
    }

    /// Records the versions of a chunk of the versioned table.
    fn version(&mut self, chunk: &StreamChunk, ctx: &OpContext<'_>) -> Result<()> {
        let keys = self.keys(&self.opts.right_keys, &chunk.batch)?;
        let times = times_ms(chunk.batch.column(self.opts.version_time))?;
        let rows = self.right_codec.encode_rows(chunk.columns(), chunk.len())?;
        for (i, ((key, t), row)) in keys.into_iter().zip(times).zip(rows).enumerate() {
            let (Some(key), Some(t)) = (key, t) else { continue };
            let mut state_key = key.clone();
            put_i64(&mut state_key, t);
            match chunk.ops[i] {
                Op::Insert | Op::UpdateAfter => {
                    let mut value = Vec::with_capacity(1 + row.len());
                    value.push(1);
                    value.extend_from_slice(&row);
                    self.versions.put(state_key, value);
                }
                Op::Delete => {
                    // Only the version this row is: a later change at the same time stays.
                    let current = self.versions.get(ctx.store, &state_key)?;
                    if current.is_none_or(|v| v.first() != Some(&1) || v[1..] == row[..]) {
                        self.versions.put(state_key, vec![0]);
                    }
                }
                Op::UpdateBefore => continue,
            }
            self.dirty.insert(key);
        }
        Ok(())
    }

    /// Emits the held probe rows at or before `w`, in time order, joined with their versions.
    fn emit(&mut self, w: i64, store: &Store) -> Result<Option<StreamChunk>> {
        let mut ripe: Vec<(Vec<u8>, i64)> = Vec::new();
        self.probes.scan(store, |k, v| {
            if probe_time_of(k)? > w {
                return Ok(false);
            }
            ripe.push((k.to_vec(), crate::runtime::operators::materialize::decode_count(v)?));
            Ok(true)
        })?;
        if ripe.is_empty() {
            return Ok(None);
        }
        // The probe rows, one per copy.
        let mut decoder = self.left_codec.decoder(ripe.len());
        let mut copies = Vec::new();
        for (j, (k, count)) in ripe.iter().enumerate() {
            decoder.append(&k[TIME_LEN..])?;
            copies.extend(std::iter::repeat_n(j as u32, usize::try_from(*count).unwrap_or(0)));
        }
        let decoded = conform(decoder.finish()?, &self.opts.left_schema)?;
        let n = copies.len();
        let probe_batch = RecordBatch::try_new_with_options(
            Arc::clone(&self.opts.left_schema),
            take_all(&decoded, &UInt32Array::from(copies))?,
            &RecordBatchOptions::new().with_row_count(Some(n)),
        )?;
        let keys = self.keys(&self.opts.left_keys, &probe_batch)?;
        let times = times_ms(probe_batch.column(self.opts.probe_time))?;
        // The version of each probe row, if any.
        let mut version_rows: Vec<Vec<u8>> = Vec::new();
        let mut version_of: Vec<Option<u32>> = vec![None; n];
        for i in 0..n {
            let (Some(key), Some(t)) = (&keys[i], times[i]) else { continue };
            let found =
                self.versions.prefix_iter(store, key)?.rev().find(|(k, _)| version_time_of(k).is_ok_and(|v| v <= t));
            if let Some((_, value)) = found {
                if value.first() == Some(&1) {
                    version_of[i] = Some(version_rows.len() as u32);
                    version_rows.push(value[1..].to_vec());
                }
            }
        }
        let mut decoder = self.right_codec.decoder(version_rows.len());
        for r in &version_rows {
            decoder.append(r)?;
        }
        let right_cols = conform(decoder.finish()?, &self.opts.right_schema)?;
        let right_idx = UInt32Array::from(version_of);
        let right = if right_cols.is_empty() || version_rows.is_empty() {
            self.opts.right_schema.fields().iter().map(|f| new_null_array(f.data_type(), n)).collect()
        } else {
            take_all(&right_cols, &right_idx)?
        };
        // The residual condition on each (probe, version) pair.
        let matched: Vec<bool> = match &self.opts.filter {
            Some(filter) => {
                let cols = [probe_batch.columns().to_vec(), right.clone()].concat();
                let pairs = RecordBatch::try_new_with_options(
                    Arc::clone(&self.pair_schema),
                    conform(cols, &self.pair_schema)?,
                    &RecordBatchOptions::new().with_row_count(Some(n)),
                )?;
                let mask = filter.evaluate(&pairs)?.into_array(n)?;
                let mask = mask.as_any().downcast_ref::<BooleanArray>().ok_or_else(|| {
                    WeirError::internal(format!("temporal join condition returned {}", mask.data_type()))
                })?;
                (0..n).map(|i| right_idx.is_valid(i) && mask.is_valid(i) && mask.value(i)).collect()
            }
            None => (0..n).map(|i| right_idx.is_valid(i)).collect(),
        };
        let keep: Vec<u32> = (0..n).filter(|i| matched[*i] || self.opts.left_outer).map(|i| i as u32).collect();
        for (k, _) in ripe {
            self.probes.delete(k);
        }
        if keep.is_empty() {
            return Ok(None);
        }
        let keep_idx = UInt32Array::from(keep.clone());
        let left = take_all(probe_batch.columns(), &keep_idx)?;
        let right_keep = UInt32Array::from(keep.iter().map(|i| matched[*i as usize].then_some(*i)).collect::<Vec<_>>());
        let right =
            if right_keep.null_count() == right_keep.len() { None } else { Some(take_all(&right, &right_keep)?) };
        Ok(Some(StreamChunk::new(vec![Op::Insert; keep.len()], self.output_batch(left, right, keep.len())?)))
    }

    /// Drops the versions the watermark `w` made unreachable.
    fn clean(&mut self, w: i64, store: &Store) -> Result<()> {
        for key in std::mem::take(&mut self.dirty) {
            let entries: Vec<(i64, Vec<u8>, bool)> = self
                .versions
                .prefix_iter(store, &key)?
                .map(|(k, v)| Ok((version_time_of(k)?, k.to_vec(), v.first() == Some(&1))))
                .collect::<Result<_>>()?;
            let current = entries.iter().rposition(|(t, _, _)| *t <= w);
            if let Some(c) = current {
                for (_, k, _) in &entries[..c] {
                    self.versions.delete(k.clone());
                }
                if !entries[c].2 && c + 1 == entries.len() {
                    self.versions.delete(entries[c].1.clone());
                }
            }
            if entries.last().is_some_and(|(t, _, _)| *t > w) {
                self.dirty.insert(key);
            }
        }
        Ok(())
    }

    /// The output rows: the first `left_width` of `left`, then the first `right_width` of
    /// `right` (NULL when `None`).
    fn output_batch(&self, left: Vec<ArrayRef>, right: Option<Vec<ArrayRef>>, len: usize) -> Result<RecordBatch> {
        let left: Vec<ArrayRef> = left.into_iter().take(self.opts.left_width).collect();
        let right_fields = &self.opts.right_schema.fields()[..self.opts.right_width];
        let right: Vec<ArrayRef> = match right {
            Some(cols) => cols.into_iter().take(self.opts.right_width).collect(),
            None => right_fields.iter().map(|f| new_null_array(f.data_type(), len)).collect(),
        };
        let cols = [left, right].concat();
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.opts.schema),
            conform(cols, &self.opts.schema)?,
            &RecordBatchOptions::new().with_row_count(Some(len)),
        )?)
    }

    fn save_meta(&mut self) {
        self.meta.put(self.meta.instance_key(), encode_meta(self.watermarks, self.num_late_rows, 0));
    }
}

impl Operator for TemporalJoin {
    fn name(&self) -> &'static str {
        "TemporalJoin"
    }

    fn state_tables(&self) -> &'static [&'static str] {
        &[PROBES, VERSIONS, WATERMARK]
    }

    fn state(&self) -> Vec<(String, &StateTable)> {
        vec![(PROBES.to_string(), &self.probes), (VERSIONS.to_string(), &self.versions)]
    }

    fn process_batch(&mut self, input: usize, chunk: StreamChunk, ctx: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        if side_index(input)? == 0 {
            self.probe(&chunk, ctx)
        } else {
            self.version(&chunk, ctx)?;
            Ok(None)
        }
    }

    /// Takes the minimum of both inputs' watermarks; emits the probe rows it reaches, then
    /// frees the versions no probe row can reach any more.
    fn on_watermark(
        &mut self,
        input: usize,
        watermark_ms: i64,
        ctx: &OpContext<'_>,
    ) -> Result<(Option<StreamChunk>, Option<i64>)> {
        let s = side_index(input)?;
        let before = self.watermark();
        if self.watermarks[s].is_none_or(|w| watermark_ms > w) {
            self.watermarks[s] = Some(watermark_ms);
            self.save_meta();
        }
        let Some(w) = self.watermark() else { return Ok((None, None)) };
        if before == Some(w) {
            return Ok((None, Some(w)));
        }
        let out = self.emit(w, ctx.store)?;
        self.clean(w, ctx.store)?;
        Ok((out, Some(w)))
    }

    fn event_time_watermark(&self) -> Option<Option<i64>> {
        Some(self.watermark())
    }

    fn num_late_rows(&self) -> u64 {
        self.num_late_rows
    }

    fn on_barrier(&mut self, writes: &mut EpochWrites, _ctx: &OpContext<'_>) -> Result<()> {
        self.probes.flush(writes);
        self.versions.flush(writes);
        self.meta.flush(writes);
        Ok(())
    }
}

/// The time of a held probe row's state key.
fn probe_time_of(key: &[u8]) -> Result<i64> {
    time_at(key.get(..TIME_LEN))
}

/// The time of a version's state key (its last bytes).
fn version_time_of(key: &[u8]) -> Result<i64> {
    time_at(key.len().checked_sub(TIME_LEN).and_then(|at| key.get(at..)))
}

fn time_at(bytes: Option<&[u8]>) -> Result<i64> {
    let corrupt = || WeirError::storage("corrupt temporal join state key");
    let bytes = bytes.ok_or_else(corrupt)?;
    Ok(decode_i64(bytes[1..].try_into().map_err(|_| corrupt())?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::DataType;
    use datafusion::physical_expr::expressions::Column;

    /// Both inputs: key `k`, a text `s`, a time `t` (ms).
    fn input_schema(prefix: &str) -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new(format!("{prefix}k"), DataType::Int64, true),
            Field::new(format!("{prefix}s"), DataType::Utf8, true),
            Field::new(format!("{prefix}t"), DataType::Int64, true),
        ]))
    }

    struct Harness {
        op: TemporalJoin,
        store: Store,
        epoch: u64,
        _dir: tempfile::TempDir,
    }

    fn open(store: &Store) -> TemporalJoin {
        let (left, right) = (input_schema("l"), input_schema("r"));
        let schema = Arc::new(Schema::new(
            left.fields().iter().chain(right.fields().iter()).map(|f| f.as_ref().clone()).collect::<Vec<_>>(),
        ));
        let key = |name: &str| vec![Arc::new(Column::new(name, 0)) as Arc<dyn PhysicalExpr>];
        let opts = TemporalJoinOptions {
            left_outer: true,
            left_keys: key("lk"),
            right_keys: key("rk"),
            filter: None,
            null_equals_null: false,
            probe_time: 2,
            version_time: 2,
            left_width: 3,
            right_width: 3,
            left_schema: left,
            right_schema: right,
            schema,
        };
        let mut tables = |name: &str| -> TableRef {
            match name {
                PROBES => 1,
                VERSIONS => 2,
                _ => 3,
            }
            .into()
        };
        TemporalJoin::try_new(opts, &mut tables, store).expect("temporal join")
    }

    /// A LEFT temporal join on `k`, AS OF the left `t`, versions by the right `t`.
    fn harness() -> Harness {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path()).expect("store");
        Harness { op: open(&store), store, epoch: 0, _dir: dir }
    }

    impl Harness {
        fn push(&mut self, input: usize, text: &str) -> Vec<String> {
            let schema = input_schema(if input == 0 { "l" } else { "r" });
            let ctx = OpContext { store: &self.store };
            let out = self.op.process_batch(input, StreamChunk::from_pretty(&schema, text), &ctx).expect("process");
            out.map(|c| c.to_pretty()).unwrap_or_default()
        }

        fn watermark(&mut self, input: usize, watermark_ms: i64) -> Vec<String> {
            let ctx = OpContext { store: &self.store };
            let (out, _) = self.op.on_watermark(input, watermark_ms, &ctx).expect("watermark");
            out.map(|c| c.to_pretty()).unwrap_or_default()
        }

        fn restart(&mut self) {
            let mut writes = EpochWrites::default();
            self.op.on_barrier(&mut writes, &OpContext { store: &self.store }).expect("barrier");
            self.epoch += 1;
            self.store.commit(writes, self.epoch).expect("commit");
            self.op = open(&self.store);
        }
    }

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn probes_wait_for_the_watermark_and_take_the_version_valid_then() {
        let mut h = harness();
        // The version of 5 arrives after the one of 10: it is placed by its time.
        assert_eq!(h.push(1, "+I 1 a 0\n+I 1 c 10"), lines(&[]));
        assert_eq!(h.push(1, "-U 1 c 10\n+U 1 b 5"), lines(&[]));
        // A NULL time never matches: padded at once. A NULL key waits like any probe row.
        assert_eq!(
            h.push(0, "+I 1 x 3\n+I 1 y 7\n+I 1 z 12\n+I 2 w 4\n+I NULL n 1\n+I 1 m NULL"),
            lines(&["+I 1 m NULL NULL NULL NULL"])
        );
        assert_eq!(h.watermark(0, 12), lines(&[]), "one input's watermark is not enough");
        assert_eq!(
            h.watermark(1, 10),
            lines(&["+I NULL n 1 NULL NULL NULL", "+I 1 x 3 1 a 0", "+I 2 w 4 NULL NULL NULL", "+I 1 y 7 1 b 5"]),
            "in time order, each with the version valid at its time"
        );
        // At or below the watermark: held as any probe row (Flink's); the retraction of a row
        // emitted already is late.
        assert_eq!(h.push(0, "+I 1 q 9\n-D 1 x 3"), lines(&[]));
        assert_eq!(h.op.num_late_rows(), 1);
        // A held row can still be withdrawn.
        assert_eq!(h.push(0, "-D 1 z 12"), lines(&[]));
        h.restart();
        assert_eq!(h.op.num_late_rows(), 1);
        // q at 9 comes at the next watermark; of key 1 only the version valid at 10 was kept.
        assert_eq!(h.watermark(1, 20), lines(&["+I 1 q 9 NULL NULL NULL"]));
        let count = |t: &StateTable| {
            let mut n = 0;
            t.scan(&h.store, |_, _| Ok({ n += 1; true })).expect("scan");
            n
        };
        assert_eq!(count(&h.op.probes), 0);
        // Only the version valid at the watermark (10) is left of key 1.
        assert_eq!(count(&h.op.versions), 1);
    }

    #[test]
    fn a_deleted_version_leaves_no_match_until_the_next() {
        let mut h = harness();
        h.push(1, "+I 1 a 0\n+I 1 b 10");
        h.push(1, "-D 1 b 10");
        h.push(0, "+I 1 x 5\n+I 1 y 12");
        h.push(1, "+I 1 c 20");
        assert_eq!(h.watermark(0, 30), lines(&[]));
        assert_eq!(h.watermark(1, 30), lines(&["+I 1 x 5 1 a 0", "+I 1 y 12 NULL NULL NULL"]));
    }
}
