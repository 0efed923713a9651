//! Join: the stream join of two changelogs (SQL.md "Joins"), regular, interval or window, as
//! planned by [`crate::plan::join`]. Flink's StreamingJoinOperator, with the state cleaning of
//! its TimeIntervalJoin and WindowJoinOperator.
//!
//! # Rule
//! The output is the join of every row received so far that was not late, kept up to date:
//! an input row with op `+I`/`+U` adds one copy of the row, `-D`/`-U` removes one, and the
//! operator emits `+I` (or `-D`) for each pair it forms with the stored rows of the other input
//! that have the same join key and pass the residual condition (one pair per stored copy).
//! Changelog: any in → retract out, `+I` and `-D` only (an update of an input row becomes a
//! retraction and an insertion); INNER of append-only inputs is append-only.
//!
//! # Lookup joins
//! A processing-time lookup join (`FOR SYSTEM_TIME AS OF` a `PROCTIME()` column,
//! [`JoinOptions::lookup`]) keeps the right input's rows but never the left's: a left row joins
//! the right rows as they are when it arrives, and a change of the right input finds no left
//! rows to join, so it emits nothing (Flink's lookup join: no retraction when the dimension
//! changes later).
//!
//! # Outer joins
//! Each stored row of a side whose unmatched rows are NULL-padded (left of LEFT, right of
//! RIGHT, both of FULL) carries its degree: the number of rows of the other input it matches
//! (with their copies). A row with no match is emitted padded at once. When a row's degree goes
//! from 0 to 1 its padded row is retracted, before the joined rows; when it goes back to 0 the
//! padded row is emitted again, after the retracted joined rows. So a view keyed by both
//! sides' stream keys always sees a delete before an insert of the same key.
//!
//! # Window joins with EMIT ON WINDOW CLOSE
//! A window join under `EMIT ON WINDOW CLOSE` (and in every `INSERT INTO` job) stores its
//! inputs' rows and emits nothing while a window is open. When the watermark closes a window
//! (its `window_time`, `window_end - 1`, is at or below it), it emits that window's join once,
//! `+I`: every matching pair, then for an outer join each row of a padded side that matched
//! nothing, NULL-padded, never retracted (Flink's WindowJoinOperator). The output is
//! append-only. A row of a padded side whose key is NULL can never match: it is stored all the
//! same and padded when its window closes.
//!
//! An outer interval join under `EMIT ON WINDOW CLOSE` (append-only inputs) emits its pairs at
//! once (they are final) and each NULL-padded row once, when its row leaves state unmatched
//! (SQL.md; Flink's interval join pads at its cleanup timer), never retracted.
//!
//! # SEMI and ANTI joins
//! `IN`/`EXISTS` (SEMI), `NOT EXISTS` (ANTI) and `NOT IN` (a null-aware ANTI join) output left
//! rows only. Each stored left row carries its degree (the right rows it matches, with the
//! residual condition); a SEMI join emits a left row while its degree is above zero, an ANTI
//! join while it is zero, each change of that emitted (`+I`) or retracted (`-D`) as a left row
//! or a right row changes it. NOT IN follows SQL's three-valued logic: a left row passes while
//! the right input is empty, or while its key is not NULL, no right key is NULL and its degree is
//! zero; so left rows with a NULL key are stored too, and when the right input becomes (non-)empty
//! or gains (loses) its NULL keys, every stored left row is looked at again.
//!
//! # NULL keys
//! A row with a NULL in its join key never matches (SQL), unless the keys are compared with
//! `IS NOT DISTINCT FROM`. Such a row is not stored: an outer side emits (or retracts) its
//! padded row, an inner side drops it. A row with a NULL event time in a time-bounded join
//! likewise never matches.
//!
//! # State
//! - `left`, `right`: one table per input, key = join key ++ row (memcomparable codec), value
//!   = count of copies (i64) ++ degree (i64; 0 where the side is not padded); SEMI/ANTI left
//!   rows carry their degree too, and under NOT IN one more byte, 1 for a NULL key. Cached a
//!   join key at a time (a grouped state table). A row leaves when its last copy is retracted.
//!   An append-only input ([`JoinOptions::append_only`]) stores each row it inserts as an entry
//!   of its own, count 1, its key followed by an arrival sequence (u64, big-endian, unique
//!   within the join): a blind write, where counting copies would read the row's entry first
//!   (a RocksDB read for every row whose join key is not cached; a fifth of Nexmark q20's CPU).
//!   A row's bytes are read from a key by decoding its fields, which ignores the sequence.
//! - `watermark`: both inputs' watermarks, the late-row count and the next arrival sequence,
//!   so they survive a restart; for NOT IN also (key `not_in`) the right input's rows and those
//!   with a NULL key.
//!
//! A regular join's state is freed by retractions and, with a state TTL
//! ([`Join::with_state_ttl`]), by expiry: a row not written (inserted, or its degree changed)
//! for that long leaves its input's state and matches nothing after; a retraction of an expired
//! row retracts the pairs it still forms and is otherwise dropped (Flink). An
//! interval or window join frees rows by the watermark, the minimum of both inputs' (see
//! [`TimeBound`] for which rows are late and which are dropped): rows that can no longer match
//! leave the state (their padded rows, already emitted, are final), and rows arriving for an
//! interval or window the watermark closed are late, dropped and counted in `num_late_rows`.
//! The output watermark is the join's watermark minus [`TimeBound::output_delay_ms`].

use std::collections::BTreeSet;
use std::sync::Arc;

use ahash::AHashMap as HashMap;
use arrow::array::{
    new_null_array, Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, RecordBatchOptions, UInt32Array,
};
use arrow::compute::{cast, take};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{Result, WeirError};
use crate::plan::join::{StreamJoinType, TimeBound};
use crate::runtime::changelog::{Op, StreamChunk};
use crate::runtime::operator::{OpContext, Operator};
use crate::state::key_group::key_group;
use crate::state::{EpochWrites, RowCodec, StateTable, Store, TableRef};

/// The stable name of the left input's row table.
pub const LEFT: &str = "left";
/// The stable name of the right input's row table.
pub const RIGHT: &str = "right";
/// The stable name of the table holding the watermarks and the late-row count.
pub const WATERMARK: &str = "watermark";
/// The key, in the `watermark` table, of a NOT IN join's right-row counts.
const NOT_IN_KEY: &[u8] = b"not_in";

/// Everything a join needs, built from a [`crate::plan::join::JoinSpec`].
pub struct JoinOptions {
    pub join_type: StreamJoinType,
    /// Equi-join keys over the left input, pairwise equal to `right_keys`.
    pub left_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Equi-join keys over the right input.
    pub right_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// The residual condition over left columns then right columns.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    /// NULL keys match each other (`IS NOT DISTINCT FROM`).
    pub null_equals_null: bool,
    pub time: Option<TimeBound>,
    /// A processing-time lookup join: left rows probe and are not stored, so right rows
    /// (kept) find nothing to join and emit nothing.
    pub lookup: bool,
    /// A window join that emits each window's join once, when it closes (module docs).
    pub emit_on_window_close: bool,
    /// Whether each input (left, right) is append-only (`ChangelogMode::AppendOnly`: inserts
    /// only): its rows are then stored without reading their copy count (module docs, "State").
    /// A retraction on such an input is an internal error.
    pub append_only: [bool; 2],
    pub left_schema: SchemaRef,
    pub right_schema: SchemaRef,
    /// Output schema: left columns then right columns.
    pub schema: SchemaRef,
}

/// One input's configuration and state.
struct Side {
    /// Join key expressions over this input.
    keys: Vec<Arc<dyn PhysicalExpr>>,
    /// This input's schema.
    schema: SchemaRef,
    /// Codec of a whole row of this input.
    row_codec: RowCodec,
    /// Unmatched rows of this input are emitted NULL-padded.
    outer: bool,
    /// Inserts only: each row is an entry of its own (module docs, "State").
    append_only: bool,
    /// Join key ++ row (++ arrival sequence, if append-only) → count ++ degree.
    rows: StateTable,
    /// Time-bounded joins: the stored rows by event time (ms) and state key.
    by_time: BTreeSet<(i64, Vec<u8>)>,
}

/// A stored row of the other input met while processing one chunk.
struct Entry {
    /// Join key ++ row.
    state_key: Vec<u8>,
    /// Length of the join key prefix of `state_key`, bytes.
    key_len: usize,
    /// Copies of the row.
    count: i64,
    /// Rows of the processing input it matches (padded sides only).
    degree: i64,
    /// The degree changed in this chunk.
    touched: bool,
}

/// The other input's rows met by a chunk's probes, and the candidate pairs.
struct Probe {
    /// The other input's rows with the keys of the chunk, each once.
    entries: Vec<Entry>,
    /// The entry of each candidate pair; row i's pairs are `cand_end[i - 1]..cand_end[i]`.
    cand_entries: Vec<u32>,
    cand_end: Vec<usize>,
    /// The entries' rows, decoded (the other input's columns).
    other_cols: Vec<ArrayRef>,
    /// Whether each candidate pair passes the residual condition.
    passes: Vec<bool>,
}

impl Probe {
    /// The entries row `i` of the chunk matches (the pairs that pass the condition).
    fn matched(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let first = if i == 0 { 0 } else { self.cand_end[i - 1] };
        (first..self.cand_end[i]).filter(|c| self.passes[*c]).map(|c| self.cand_entries[c] as usize)
    }
}

/// What to do with one input row.
enum Class {
    /// Late: dropped and counted.
    Late,
    /// Never matches (NULL key or time): padded or dropped.
    Alone,
    /// Probes the other input with this join key.
    Probe(Vec<u8>),
}

/// The stream join; see the module docs.
pub struct Join {
    join_type: StreamJoinType,
    /// NOT IN only: the right input's rows, and those with a NULL key (copies), persisted in
    /// `meta` under [`NOT_IN_KEY`].
    right_rows: [i64; 2],
    /// Left input then right input.
    sides: [Side; 2],
    /// Codec of the join key (the left keys' types; right keys are cast to them).
    key_codec: RowCodec,
    null_equals_null: bool,
    filter: Option<Arc<dyn PhysicalExpr>>,
    /// The schema the filter is evaluated on: left then right columns, all nullable.
    pair_schema: SchemaRef,
    /// Output schema.
    schema: SchemaRef,
    time: Option<TimeBound>,
    /// Each input's watermark, ms; `None` before its first.
    watermarks: [Option<i64>; 2],
    /// Rows dropped because they were late (time-bounded joins).
    num_late_rows: u64,
    meta: StateTable,
    /// The arrival sequence of the next row an append-only input stores, and the one `meta`
    /// holds.
    next_seq: u64,
    saved_seq: u64,
    /// A processing-time lookup join ([`JoinOptions::lookup`]).
    lookup: bool,
    /// A window join under EMIT ON WINDOW CLOSE ([`JoinOptions::emit_on_window_close`]).
    emit_on_window_close: bool,
    /// An outer interval join under EMIT ON WINDOW CLOSE: a padded row is emitted once, when
    /// its row leaves state unmatched, not at once.
    pad_on_close: bool,
}

impl Join {
    /// A join with its state tables from `state_table(name)`, loaded from `store`.
    ///
    /// # Errors
    /// `Internal` when the key lists differ in length; `Unsupported` for column types the state
    /// codec cannot store; `Storage` for corrupt state.
    pub fn try_new(opts: JoinOptions, state_table: &mut dyn FnMut(&str) -> TableRef, store: &Store) -> Result<Self> {
        if opts.left_keys.len() != opts.right_keys.len() {
            return Err(WeirError::internal("join: left and right key lists differ in length"));
        }
        if matches!(opts.time, Some(TimeBound::Temporal { .. })) {
            return Err(WeirError::internal("a temporal join runs as TemporalJoin, not Join"));
        }
        let key_types =
            opts.left_keys.iter().map(|e| Ok(e.data_type(&opts.left_schema)?)).collect::<Result<Vec<_>>>()?;
        let key_codec = RowCodec::try_new(key_types)?;
        let side = |keys, schema: SchemaRef, outer, append_only, table: TableRef| -> Result<Side> {
            let types = schema.fields().iter().map(|f| f.data_type().clone()).collect();
            Ok(Side {
                keys,
                row_codec: RowCodec::try_new(types)?,
                schema,
                outer,
                append_only,
                // Each input's rows are cached a join key at a time.
                rows: StateTable::grouped(table, store, key_codec.group_len()),
                by_time: BTreeSet::new(),
            })
        };
        let (outer, append_only) = ([opts.join_type.left_outer(), opts.join_type.right_outer()], opts.append_only);
        let left = side(opts.left_keys, Arc::clone(&opts.left_schema), outer[0], append_only[0], state_table(LEFT))?;
        let right = side(opts.right_keys, Arc::clone(&opts.right_schema), outer[1], append_only[1], state_table(RIGHT))?;
        let pair_schema = Arc::new(Schema::new(
            opts.left_schema
                .fields()
                .iter()
                .chain(opts.right_schema.fields().iter())
                .map(|f| Field::new(f.name(), f.data_type().clone(), true))
                .collect::<Vec<_>>(),
        ));
        let mut meta = StateTable::new(state_table(WATERMARK));
        let (watermarks, num_late_rows, next_seq) = load_meta(&mut meta, store)?;
        let right_rows = match meta.get(store, NOT_IN_KEY)? {
            Some(v) if v.len() == 16 => [
                i64::from_le_bytes(v[..8].try_into().expect("8 bytes")),
                i64::from_le_bytes(v[8..].try_into().expect("8 bytes")),
            ],
            Some(_) => return Err(WeirError::storage("corrupt NOT IN join counts")),
            None => [0, 0],
        };
        let mut op = Self {
            join_type: opts.join_type,
            right_rows,
            sides: [left, right],
            key_codec,
            null_equals_null: opts.null_equals_null,
            filter: opts.filter,
            pair_schema,
            schema: opts.schema,
            time: opts.time,
            watermarks,
            num_late_rows,
            meta,
            next_seq,
            saved_seq: next_seq,
            lookup: opts.lookup,
            emit_on_window_close: opts.emit_on_window_close && matches!(opts.time, Some(TimeBound::Window { .. })),
            pad_on_close: opts.emit_on_window_close && matches!(opts.time, Some(TimeBound::Interval { .. })),
        };
        op.index_times(0, store)?;
        op.index_times(1, store)?;
        Ok(op)
    }

    /// Lets the stored rows of each input (left, right) expire that long after their last
    /// write, ms (`None`: never); regular joins only. Set the same TTLs every time the operator
    /// is built: stored values depend on them.
    pub fn with_state_ttl(mut self, ttl_ms: [Option<i64>; 2]) -> Self {
        for (side, ttl) in self.sides.iter_mut().zip(ttl_ms) {
            side.rows.set_ttl(ttl);
        }
        self
    }

    /// The join's watermark: the minimum of its inputs', once both have one.
    fn watermark(&self) -> Option<i64> {
        Some(self.watermarks[0]?.min(self.watermarks[1]?))
    }

    /// Rebuilds the time index of input `s` from its stored rows.
    fn index_times(&mut self, s: usize, store: &Store) -> Result<()> {
        let Some(time) = self.time else { return Ok(()) };
        let side = &mut self.sides[s];
        let mut keys: Vec<Vec<u8>> = Vec::new();
        side.rows.scan(store, |k, _| {
            keys.push(k.to_vec());
            Ok(true)
        })?;
        if keys.is_empty() {
            return Ok(());
        }
        let mut key_decoder = self.key_codec.decoder(keys.len());
        let mut row_decoder = side.row_codec.decoder(keys.len());
        for k in &keys {
            let key_len = key_decoder.append(k)?;
            row_decoder.append(&k[key_len..])?;
        }
        let times = times_ms(&row_decoder.finish()?[time.time_column(s)])?;
        for (k, t) in keys.into_iter().zip(times) {
            if let Some(t) = t {
                side.by_time.insert((t, k));
            }
        }
        Ok(())
    }

    /// The encoded join key of every row of `batch` (input `s`); `None` where it never matches.
    fn keys(&self, s: usize, batch: &RecordBatch) -> Result<Vec<Option<Vec<u8>>>> {
        self.encoded_keys(s, batch, false)
    }

    /// [`Join::keys`]; with `nulls`, a key with a NULL is encoded too (it still never matches).
    fn encoded_keys(&self, s: usize, batch: &RecordBatch, nulls: bool) -> Result<Vec<Option<Vec<u8>>>> {
        let n = batch.num_rows();
        let cols = self.sides[s]
            .keys
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
                if !nulls && !self.null_equals_null && cols.iter().any(|c| c.is_null(i)) {
                    return None;
                }
                let mut key = Vec::with_capacity(9 * cols.len());
                self.key_codec.encode_row(&prepared, i, &mut key);
                Some(key)
            })
            .collect())
    }

    /// Whether the encoded join key `key` has a NULL in it.
    fn has_null(&self, key: &[u8]) -> Result<bool> {
        let mut decoder = self.key_codec.decoder(1);
        decoder.append(key)?;
        Ok(decoder.finish()?.iter().any(|c| c.null_count() > 0))
    }

    fn save_meta(&mut self) {
        self.meta.put(self.meta.instance_key(), encode_meta(self.watermarks, self.num_late_rows, self.next_seq));
        self.saved_seq = self.next_seq;
    }

    /// Whether a left row is in the output of a SEMI, ANTI or NOT IN join: `null`, its key is
    /// NULL; `degree`, the right rows it matches; `right_rows`, the right input's rows and
    /// those with a NULL key (NOT IN only).
    fn left_passes(join_type: StreamJoinType, right_rows: [i64; 2], null: bool, degree: i64) -> bool {
        match join_type {
            StreamJoinType::Semi => degree > 0,
            StreamJoinType::NotIn => right_rows[0] == 0 || (!null && right_rows[1] == 0 && degree == 0),
            _ => degree == 0,
        }
    }

    /// A chunk of input `s` of a SEMI, ANTI or NOT IN join (module docs): the left rows that
    /// enter or leave the output. Left rows are stored with their degree (the right rows they
    /// match); right rows with their copies.
    fn process_semi(
        &mut self,
        s: usize,
        chunk: &StreamChunk,
        classes: &[Class],
        ctx: &OpContext<'_>,
    ) -> Result<Option<StreamChunk>> {
        let join_type = self.join_type;
        let n = chunk.len();
        let rows = self.sides[s].row_codec.encode_rows(chunk.columns(), n)?;
        let mut probe = self.probe(s, &chunk.batch, classes, ctx)?;
        let mut out: Vec<(Op, Vec<u8>)> = Vec::new();
        let op_of = |sign: i64| if sign > 0 { Op::Insert } else { Op::Delete };
        if s == 0 {
            let null_key = match join_type {
                StreamJoinType::NotIn => Some(self.null_key()),
                _ => None,
            };
            for (i, class) in classes.iter().enumerate() {
                let sign = chunk.ops[i].sign();
                let (key, null) = match (class, &null_key) {
                    (Class::Late, _) => continue,
                    // A NULL key: NOT IN keeps the row (it passes while the right input is
                    // empty); ANTI emits it (it never matches), SEMI drops it.
                    (Class::Alone, Some(k)) => (k.clone(), true),
                    (Class::Alone, None) => {
                        if Self::left_passes(join_type, self.right_rows, true, 0) {
                            out.push((op_of(sign), rows[i].clone()));
                        }
                        continue;
                    }
                    (Class::Probe(k), _) => (k.clone(), false),
                };
                let degree: i64 = if null { 0 } else { probe.matched(i).map(|e| probe.entries[e].count).sum() };
                if Self::left_passes(join_type, self.right_rows, null, degree) {
                    out.push((op_of(sign), rows[i].clone()));
                }
                let mut state_key = key;
                state_key.extend_from_slice(&rows[i]);
                self.sides[0].add_copies(ctx.store, state_key, sign, None, &mut self.next_seq, |count| {
                    let mut value = encode_entry(count, degree);
                    value.push(null as u8);
                    value
                })?;
            }
        } else {
            let before = self.right_rows;
            // The left rows' degrees as the probe read them, before this chunk.
            let old_degrees: Vec<i64> = probe.entries.iter().map(|e| e.degree).collect();
            for (i, class) in classes.iter().enumerate() {
                let sign = chunk.ops[i].sign();
                self.right_rows[0] += sign;
                let key = match class {
                    Class::Late => continue,
                    Class::Alone => {
                        self.right_rows[1] += sign;
                        continue;
                    }
                    Class::Probe(k) => k,
                };
                let matched: Vec<usize> = probe.matched(i).collect();
                for e in matched {
                    let entry = &mut probe.entries[e];
                    entry.degree += sign;
                    entry.touched = true;
                }
                let mut state_key = key.clone();
                state_key.extend_from_slice(&rows[i]);
                self.sides[1].add_copies(ctx.store, state_key, sign, None, &mut self.next_seq, |count| {
                    encode_entry(count, 0)
                })?;
            }
            if join_type == StreamJoinType::NotIn {
                self.meta.put(NOT_IN_KEY.to_vec(), [self.right_rows[0].to_le_bytes(), self.right_rows[1].to_le_bytes()].concat());
            }
            // The left rows whose degree changed, before and after.
            let changed: HashMap<&[u8], i64> =
                probe.entries.iter().filter(|e| e.touched).map(|e| (e.state_key.as_slice(), e.degree)).collect();
            let mode = |r: [i64; 2]| (r[0] == 0, r[1] == 0);
            if join_type == StreamJoinType::NotIn && mode(before) != mode(self.right_rows) {
                // The right input became (non-)empty or gained (lost) its NULL keys: every
                // left row may enter or leave.
                let (after, key_codec) = (self.right_rows, &self.key_codec);
                let mut flips = Vec::new();
                self.sides[0].rows.scan(ctx.store, |k, v| {
                    let (count, old_degree) = decode_entry(v)?;
                    let null = v.get(16) == Some(&1);
                    let new_degree = changed.get(k).copied().unwrap_or(old_degree);
                    let was = Self::left_passes(join_type, before, null, old_degree);
                    let is = Self::left_passes(join_type, after, null, new_degree);
                    if was != is {
                        flips.push((if is { 1 } else { -1 }, count, k[key_codec.encoded_len(k)..].to_vec()));
                    }
                    Ok(true)
                })?;
                for (sign, count, row) in flips {
                    for _ in 0..count {
                        out.push((op_of(sign), row.clone()));
                    }
                }
            } else {
                for (e, old) in probe.entries.iter().zip(&old_degrees).filter(|(e, _)| e.touched) {
                    let was = Self::left_passes(join_type, before, false, *old);
                    let is = Self::left_passes(join_type, self.right_rows, false, e.degree);
                    if was != is {
                        for _ in 0..e.count {
                            out.push((op_of(if is { 1 } else { -1 }), e.state_key[e.key_len..].to_vec()));
                        }
                    }
                }
            }
            for e in probe.entries.iter().filter(|e| e.touched) {
                let mut value = encode_entry(e.count, e.degree);
                value.push(0);
                self.sides[0].rows.put(e.state_key.clone(), value);
            }
        }
        if out.is_empty() {
            return Ok(None);
        }
        let mut decoder = self.sides[0].row_codec.decoder(out.len());
        for (_, row) in &out {
            decoder.append(row)?;
        }
        let cols = conform(decoder.finish()?, &self.schema)?;
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), cols)?;
        Ok(Some(StreamChunk::new(out.into_iter().map(|(op, _)| op).collect(), batch)))
    }

    /// The encoded join key of a row whose key is NULL (every key column NULL), under which
    /// NOT IN keeps its left rows with a NULL key.
    fn null_key(&self) -> Vec<u8> {
        let nulls: Vec<ArrayRef> = self.key_codec.types().iter().map(|t| new_null_array(t, 1)).collect();
        self.key_codec.encode_rows(&nulls, 1).map(|mut k| k.remove(0)).unwrap_or_default()
    }

    /// A window join under EOWC: stores the rows of a chunk of input `s` (their copy counts),
    /// emitting nothing. An outer side's row with a NULL key, which can never match, is stored
    /// too under that key and padded when its window closes (Flink's WindowJoinOperator emits
    /// nothing of a window before it fires); one with a NULL time belongs to no window and is
    /// padded at once.
    fn store_until_close(
        &mut self,
        s: usize,
        chunk: &StreamChunk,
        classes: &[Class],
        times: Option<&[Option<i64>]>,
        ctx: &OpContext<'_>,
    ) -> Result<Option<StreamChunk>> {
        let n = chunk.len();
        let rows = self.sides[s].row_codec.encode_rows(chunk.columns(), n)?;
        let outer = self.sides[s].outer;
        let timed = |i: usize| times.is_some_and(|t| t[i].is_some());
        let null_keys = if outer && classes.iter().enumerate().any(|(i, c)| matches!(c, Class::Alone) && timed(i)) {
            self.encoded_keys(s, &chunk.batch, true)?
        } else {
            Vec::new()
        };
        let mut padded = Vec::new();
        for (i, class) in classes.iter().enumerate() {
            let sign = chunk.ops[i].sign();
            let key = match class {
                Class::Late => continue,
                Class::Alone if outer && timed(i) => null_keys[i].as_ref().expect("every key is encoded"),
                Class::Alone => {
                    if outer {
                        padded.push((if sign > 0 { Op::Insert } else { Op::Delete }, Some(i as u32), None));
                    }
                    continue;
                }
                Class::Probe(key) => key,
            };
            let mut state_key = key.clone();
            state_key.extend_from_slice(&rows[i]);
            let time = times.and_then(|t| t[i]);
            self.sides[s].add_copies(ctx.store, state_key, sign, time, &mut self.next_seq, |count| {
                encode_entry(count, 0)
            })?;
        }
        if padded.is_empty() {
            return Ok(None);
        }
        let other_schema = &self.sides[1 - s].schema;
        let other_cols: Vec<ArrayRef> = other_schema.fields().iter().map(|f| new_null_array(f.data_type(), 0)).collect();
        self.output(s, &chunk.batch, &other_cols, padded).map(Some)
    }

    /// A window join under EOWC: the join of every window the watermark `w` closes, once: each
    /// matching pair (one per pair of copies), then, for an outer join, each row of a padded
    /// side that matched nothing (a key with a NULL matches nothing), NULL-padded. `None` when
    /// no window closes.
    fn close_windows(&mut self, w: i64, store: &Store) -> Result<Option<StreamChunk>> {
        let Some(time) = self.time else { return Ok(None) };
        // The join keys (each one window's: they hold window_end) with rows that close now.
        let mut keys: BTreeSet<Vec<u8>> = BTreeSet::new();
        for (s, side) in self.sides.iter().enumerate() {
            let limit = w.saturating_add(time.keep_offset_ms(s));
            for (_, state_key) in side.by_time.range(..(limit.saturating_add(1), Vec::new())) {
                keys.insert(state_key[..self.key_codec.encoded_len(state_key)].to_vec());
            }
        }
        if keys.is_empty() {
            return Ok(None);
        }
        // Each side's rows of those keys (row bytes, copies), and the candidate pairs.
        let mut rows: [Vec<(Vec<u8>, i64)>; 2] = [Vec::new(), Vec::new()];
        let (mut cand_left, mut cand_right) = (Vec::<u32>::new(), Vec::<u32>::new());
        for key in &keys {
            let mut starts = [0; 2];
            for (s, side) in self.sides.iter_mut().enumerate() {
                starts[s] = rows[s].len();
                for (state_key, value) in side.rows.prefix_iter(store, key)? {
                    rows[s].push((state_key[key.len()..].to_vec(), decode_entry(value)?.0));
                }
            }
            if !self.null_equals_null && self.has_null(key)? {
                continue;
            }
            for l in starts[0]..rows[0].len() {
                for r in starts[1]..rows[1].len() {
                    cand_left.push(l as u32);
                    cand_right.push(r as u32);
                }
            }
        }
        let decode = |codec: &RowCodec, rows: &[(Vec<u8>, i64)]| -> Result<Vec<ArrayRef>> {
            let mut decoder = codec.decoder(rows.len());
            for (row, _) in rows {
                decoder.append(row)?;
            }
            decoder.finish()
        };
        let left_batch = RecordBatch::try_new_with_options(
            Arc::clone(&self.sides[0].schema),
            decode(&self.sides[0].row_codec, &rows[0])?,
            &RecordBatchOptions::new().with_row_count(Some(rows[0].len())),
        )?;
        let right_cols = decode(&self.sides[1].row_codec, &rows[1])?;
        let passes = self.eval_filter(0, &left_batch, &right_cols, &cand_left, &cand_right)?;
        let mut out = Vec::new();
        let mut matched = [vec![false; rows[0].len()], vec![false; rows[1].len()]];
        for (j, pass) in passes.into_iter().enumerate() {
            if pass {
                let (l, r) = (cand_left[j] as usize, cand_right[j] as usize);
                matched[0][l] = true;
                matched[1][r] = true;
                push_copies(&mut out, rows[0][l].1 * rows[1][r].1, (Op::Insert, Some(l as u32), Some(r as u32)));
            }
        }
        for (s, side) in self.sides.iter().enumerate() {
            if !side.outer {
                continue;
            }
            for (i, (_, copies)) in rows[s].iter().enumerate() {
                if !matched[s][i] {
                    let row = if s == 0 { (Op::Insert, Some(i as u32), None) } else { (Op::Insert, None, Some(i as u32)) };
                    push_copies(&mut out, *copies, row);
                }
            }
        }
        if out.is_empty() {
            return Ok(None);
        }
        self.output(0, &left_batch, &right_cols, out).map(Some)
    }

    /// Drops the stored rows that can no longer match, now that the watermark is `w`. An outer
    /// interval join under EOWC emits then, once, the padded row of each dropped row of a
    /// padded side that never matched.
    fn clean(&mut self, w: i64, store: &Store) -> Result<Option<StreamChunk>> {
        let Some(time) = self.time else { return Ok(None) };
        let mut chunks = Vec::new();
        for s in 0..2 {
            let side = &mut self.sides[s];
            let limit = w.saturating_add(time.keep_offset_ms(s));
            let kept = side.by_time.split_off(&(limit.saturating_add(1), Vec::new()));
            let mut unmatched: Vec<(Vec<u8>, i64)> = Vec::new();
            for (_, key) in std::mem::replace(&mut side.by_time, kept) {
                if self.pad_on_close && side.outer {
                    if let Some((count, 0)) = side.rows.get(store, &key)?.map(|v| decode_entry(&v)).transpose()? {
                        let key_len = self.key_codec.encoded_len(&key);
                        unmatched.push((key[key_len..].to_vec(), count));
                    }
                }
                side.rows.delete(key);
            }
            if unmatched.is_empty() {
                continue;
            }
            let mut decoder = side.row_codec.decoder(unmatched.len());
            for (row, _) in &unmatched {
                decoder.append(row)?;
            }
            let rows = RecordBatch::try_new_with_options(
                Arc::clone(&side.schema),
                decoder.finish()?,
                &RecordBatchOptions::new().with_row_count(Some(unmatched.len())),
            )?;
            let mut out = Vec::new();
            for (i, (_, copies)) in unmatched.iter().enumerate() {
                push_copies(&mut out, *copies, (Op::Insert, Some(i as u32), None));
            }
            chunks.push(self.output(s, &rows, &[], out)?);
        }
        match chunks.len() {
            0 => Ok(None),
            1 => Ok(chunks.pop()),
            _ => Ok(Some(StreamChunk::concat(&self.schema, chunks)?)),
        }
    }
}

impl Join {
    /// Reads the other input's rows for the keys of the rows of `batch` (input `s`) that probe,
    /// and evaluates the residual condition on every candidate pair.
    fn probe(&mut self, s: usize, batch: &RecordBatch, classes: &[Class], ctx: &OpContext<'_>) -> Result<Probe> {
        let o = 1 - s;
        let mut entries: Vec<Entry> = Vec::new();
        let mut ranges: HashMap<&[u8], (usize, usize)> = HashMap::with_capacity(classes.len());
        let (mut cand_rows, mut cand_entries) = (Vec::<u32>::new(), Vec::<u32>::new());
        let mut cand_end = Vec::with_capacity(classes.len());
        for (i, class) in classes.iter().enumerate() {
            if let Class::Probe(key) = class {
                let (start, end) = match ranges.get(key.as_slice()) {
                    Some(r) => *r,
                    None => {
                        let start = entries.len();
                        for (state_key, value) in self.sides[o].rows.prefix_iter(ctx.store, key)? {
                            let (count, degree) = decode_entry(value)?;
                            entries.push(Entry {
                                state_key: state_key.to_vec(),
                                key_len: key.len(),
                                count,
                                degree,
                                touched: false,
                            });
                        }
                        ranges.insert(key, (start, entries.len()));
                        (start, entries.len())
                    }
                };
                for e in start..end {
                    cand_rows.push(i as u32);
                    cand_entries.push(e as u32);
                }
            }
            cand_end.push(cand_rows.len());
        }
        let other_cols = {
            let mut decoder = self.sides[o].row_codec.decoder(entries.len());
            for e in &entries {
                decoder.append(&e.state_key[e.key_len..])?;
            }
            decoder.finish()?
        };
        let passes = self.eval_filter(s, batch, &other_cols, &cand_rows, &cand_entries)?;
        Ok(Probe { entries, cand_entries, cand_end, other_cols, passes })
    }
}

impl Operator for Join {
    fn name(&self) -> &'static str {
        match self.time {
            None => "Join",
            Some(TimeBound::Interval { .. }) => "IntervalJoin",
            Some(TimeBound::Window { .. }) => "WindowJoin",
            Some(TimeBound::Temporal { .. }) => "TemporalJoin",
        }
    }

    fn state_tables(&self) -> &'static [&'static str] {
        &[LEFT, RIGHT, WATERMARK]
    }

    fn state(&self) -> Vec<(String, &StateTable)> {
        vec![(LEFT.to_string(), &self.sides[0].rows), (RIGHT.to_string(), &self.sides[1].rows)]
    }

    /// Rows whose key never matches (a NULL) are held by no instance: they go to the first.
    fn key_groups(&self, input: usize, chunk: &StreamChunk) -> Result<Vec<u16>> {
        Ok(self.keys(input, &chunk.batch)?.iter().map(|k| k.as_deref().map_or(0, key_group)).collect())
    }

    fn process_batch(&mut self, input: usize, chunk: StreamChunk, ctx: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        let s = side_index(input)?;
        let o = 1 - s;
        let n = chunk.len();
        if n == 0 {
            return Ok(None);
        }
        let keys = self.keys(s, &chunk.batch)?;
        let times = match self.time {
            Some(t) => Some(times_ms(chunk.batch.column(t.time_column(s)))?),
            None => None,
        };
        let late_limit = match (self.time, self.watermark()) {
            (Some(t), Some(w)) => Some(w.saturating_add(t.late_offset_ms(s))),
            _ => None,
        };
        let mut num_late = 0;
        let classes: Vec<Class> = keys
            .into_iter()
            .enumerate()
            .map(|(i, key)| match (key, times.as_ref().map(|t| t[i])) {
                (_, Some(None)) => Class::Alone,
                (_, Some(Some(t))) if late_limit.is_some_and(|l| t <= l) => {
                    num_late += 1;
                    Class::Late
                }
                (None, _) => Class::Alone,
                (Some(k), _) => Class::Probe(k),
            })
            .collect();
        if self.emit_on_window_close {
            if num_late > 0 {
                self.num_late_rows += num_late;
                self.save_meta();
            }
            return self.store_until_close(s, &chunk, &classes, times.as_deref(), ctx);
        }
        if self.join_type.left_only() {
            return self.process_semi(s, &chunk, &classes, ctx);
        }

        let Probe { mut entries, cand_entries, cand_end, other_cols, passes } =
            self.probe(s, &chunk.batch, &classes, ctx)?;

        // Output rows: (op, row of this chunk, entry of the other input); None is NULL-padded.
        let mut out: Vec<(Op, Option<u32>, Option<u32>)> = Vec::new();
        let (this_outer, other_outer) = (self.sides[s].outer, self.sides[o].outer);
        let rows = self.sides[s].row_codec.encode_rows(chunk.columns(), n)?;
        for (i, class) in classes.iter().enumerate() {
            let sign = chunk.ops[i].sign();
            let op = if sign > 0 { Op::Insert } else { Op::Delete };
            let key = match class {
                Class::Late => continue,
                Class::Alone => {
                    if this_outer {
                        out.push((op, Some(i as u32), None));
                    }
                    continue;
                }
                Class::Probe(key) => key,
            };
            let first = if i == 0 { 0 } else { cand_end[i - 1] };
            let matched = || (first..cand_end[i]).filter(|c| passes[*c]).map(|c| cand_entries[c] as usize);
            let total: i64 = matched().map(|e| entries[e].count).sum();
            // Under EOWC an outer interval join's padded rows wait for their row to leave state.
            let pad_now = !self.pad_on_close;
            if other_outer && sign > 0 && pad_now {
                for e in matched() {
                    if entries[e].degree == 0 {
                        push_copies(&mut out, entries[e].count, (Op::Delete, None, Some(e as u32)));
                    }
                }
            }
            for e in matched() {
                push_copies(&mut out, entries[e].count, (op, Some(i as u32), Some(e as u32)));
            }
            if this_outer && total == 0 && pad_now {
                out.push((op, Some(i as u32), None));
            }
            if other_outer {
                for e in matched() {
                    let entry = &mut entries[e];
                    if entry.degree + sign < 0 {
                        if !self.sides[o].rows.has_ttl() {
                            return Err(WeirError::internal("join: a row lost more matches than it had"));
                        }
                        // Its degree counted rows whose state expired; its padded row is out.
                        continue;
                    }
                    entry.degree += sign;
                    entry.touched = true;
                    if sign < 0 && entry.degree == 0 && pad_now {
                        push_copies(&mut out, entry.count, (Op::Insert, None, Some(e as u32)));
                    }
                }
            }
            if self.lookup && s == 0 {
                // A lookup join's probe rows are not kept.
                continue;
            }
            // This row's own copy count.
            let mut state_key = key.clone();
            state_key.extend_from_slice(&rows[i]);
            let time = times.as_ref().and_then(|t| t[i]);
            let degree = if this_outer { total } else { 0 };
            self.sides[s].add_copies(ctx.store, state_key, sign, time, &mut self.next_seq, |count| {
                encode_entry(count, degree)
            })?;
        }
        for e in entries.iter().filter(|e| e.touched) {
            self.sides[o].rows.put(e.state_key.clone(), encode_entry(e.count, e.degree));
        }
        if num_late > 0 {
            self.num_late_rows += num_late;
            self.save_meta();
        }
        if out.is_empty() {
            return Ok(None);
        }
        self.output(s, &chunk.batch, &other_cols, out).map(Some)
    }

    /// Takes the minimum of both inputs' watermarks (none until both have one) and drops the
    /// rows it makes unmatchable.
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
        let mut closed = None;
        if before != Some(w) {
            if self.emit_on_window_close {
                closed = self.close_windows(w, ctx.store)?;
            }
            if let Some(padded) = self.clean(w, ctx.store)? {
                closed = Some(padded);
            }
        }
        let delay = self.time.map_or(0, |t| t.output_delay_ms());
        Ok((closed, Some(w.saturating_sub(delay))))
    }

    fn event_time_watermark(&self) -> Option<Option<i64>> {
        Some(self.watermark())
    }

    fn num_late_rows(&self) -> u64 {
        self.num_late_rows
    }

    fn on_barrier(&mut self, writes: &mut EpochWrites, ctx: &OpContext<'_>) -> Result<()> {
        for side in &mut self.sides {
            side.rows.sweep_expired(ctx.store)?;
            side.rows.flush(writes);
        }
        if self.next_seq != self.saved_seq {
            self.save_meta();
        }
        self.meta.flush(writes);
        Ok(())
    }
}

impl Join {
    /// Whether each candidate pair (row `cand_rows[j]` of this chunk from input `s`, entry
    /// `cand_entries[j]` of the other input) passes the residual condition.
    fn eval_filter(
        &self,
        s: usize,
        batch: &RecordBatch,
        other_cols: &[ArrayRef],
        cand_rows: &[u32],
        cand_entries: &[u32],
    ) -> Result<Vec<bool>> {
        let Some(filter) = &self.filter else { return Ok(vec![true; cand_rows.len()]) };
        if cand_rows.is_empty() {
            return Ok(Vec::new());
        }
        let this = take_all(batch.columns(), &UInt32Array::from(cand_rows.to_vec()))?;
        let other = take_all(other_cols, &UInt32Array::from(cand_entries.to_vec()))?;
        let cols = if s == 0 { [this, other].concat() } else { [other, this].concat() };
        let pairs = RecordBatch::try_new_with_options(
            Arc::clone(&self.pair_schema),
            conform(cols, &self.pair_schema)?,
            &RecordBatchOptions::new().with_row_count(Some(cand_rows.len())),
        )?;
        let mask = filter.evaluate(&pairs)?.into_array(cand_rows.len())?;
        let mask = mask
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| WeirError::internal(format!("join condition returned {}", mask.data_type())))?;
        Ok((0..mask.len()).map(|j| mask.is_valid(j) && mask.value(j)).collect())
    }

    /// Assembles the output chunk of `out` (see `process_batch`), for a chunk of input `s`.
    fn output(
        &self,
        s: usize,
        batch: &RecordBatch,
        other_cols: &[ArrayRef],
        out: Vec<(Op, Option<u32>, Option<u32>)>,
    ) -> Result<StreamChunk> {
        let len = out.len();
        let mut ops = Vec::with_capacity(len);
        let mut this_idx = Vec::with_capacity(len);
        let mut other_idx = Vec::with_capacity(len);
        for (op, this, other) in out {
            ops.push(op);
            this_idx.push(this);
            other_idx.push(other);
        }
        let this = take_all(batch.columns(), &UInt32Array::from(this_idx))?;
        let other_schema = &self.sides[1 - s].schema;
        let other = if other_idx.iter().all(Option::is_none) {
            other_schema.fields().iter().map(|f| new_null_array(f.data_type(), len)).collect()
        } else {
            take_all(other_cols, &UInt32Array::from(other_idx))?
        };
        let cols = if s == 0 { [this, other].concat() } else { [other, this].concat() };
        let batch = RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            conform(cols, &self.schema)?,
            &RecordBatchOptions::new().with_row_count(Some(len)),
        )?;
        Ok(StreamChunk::new(ops, batch))
    }
}

pub(super) fn side_index(input: usize) -> Result<usize> {
    if input > 1 {
        return Err(WeirError::internal(format!("join has two inputs, got input {input}")));
    }
    Ok(input)
}

impl Side {
    /// Adds `sign` (+1 or -1) copies of the row stored at `state_key` (join key ++ row): the
    /// key deleted when none is left, `value(count)` stored otherwise, and the row with event
    /// time `time` (time-bounded joins) in the time index while it has copies. An append-only
    /// input stores each row as an entry of its own, under `state_key` ++ `next_seq` (then
    /// incremented), with count 1 and no read.
    ///
    /// # Errors
    /// `Internal` when a retraction finds no copy in a table without a state TTL, or comes on
    /// an append-only input; `Storage` when RocksDB fails to read.
    fn add_copies(
        &mut self,
        store: &Store,
        mut state_key: Vec<u8>,
        sign: i64,
        time: Option<i64>,
        next_seq: &mut u64,
        value: impl FnOnce(i64) -> Vec<u8>,
    ) -> Result<()> {
        let count = if self.append_only {
            if sign < 0 {
                return Err(WeirError::internal("join: a retraction on an append-only input"));
            }
            state_key.extend_from_slice(&next_seq.to_be_bytes());
            *next_seq += 1;
            1
        } else {
            let stored = match self.rows.get(store, &state_key)? {
                Some(v) => decode_entry(&v)?.0,
                None => 0,
            };
            stored + sign
        };
        if count < 0 && !self.rows.has_ttl() {
            return Err(WeirError::internal("join: retraction of a row the join does not hold"));
        }
        if let Some(t) = time {
            if count > 0 {
                self.by_time.insert((t, state_key.clone()));
            } else {
                self.by_time.remove(&(t, state_key.clone()));
            }
        }
        if count <= 0 {
            // A retraction of a row whose state expired deletes nothing that is there.
            self.rows.delete(state_key);
        } else {
            self.rows.put(state_key, value(count));
        }
        Ok(())
    }
}

fn push_copies(out: &mut Vec<(Op, Option<u32>, Option<u32>)>, count: i64, row: (Op, Option<u32>, Option<u32>)) {
    for _ in 0..count {
        out.push(row);
    }
}

pub(super) fn take_all(cols: &[ArrayRef], idx: &UInt32Array) -> Result<Vec<ArrayRef>> {
    Ok(cols.iter().map(|c| take(c.as_ref(), idx, None)).collect::<std::result::Result<_, _>>()?)
}

/// Casts columns whose type differs from `schema`'s.
pub(super) fn conform(cols: Vec<ArrayRef>, schema: &Schema) -> Result<Vec<ArrayRef>> {
    cols.into_iter()
        .zip(schema.fields())
        .map(|(c, f)| Ok(if c.data_type() == f.data_type() { c } else { cast(&c, f.data_type())? }))
        .collect()
}

/// Event times of a timestamp column, ms.
pub(super) fn times_ms(col: &ArrayRef) -> Result<Vec<Option<i64>>> {
    let ms = cast(col, &DataType::Timestamp(TimeUnit::Millisecond, None))?;
    let ms = cast(&ms, &DataType::Int64)?;
    let ms = ms
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| WeirError::internal("event time did not cast to BIGINT"))?;
    Ok(ms.iter().collect())
}

fn encode_entry(count: i64, degree: i64) -> Vec<u8> {
    let mut v = Vec::with_capacity(16);
    v.extend_from_slice(&count.to_le_bytes());
    v.extend_from_slice(&degree.to_le_bytes());
    v
}

fn decode_entry(v: &[u8]) -> Result<(i64, i64)> {
    let corrupt = || WeirError::storage("corrupt join state entry");
    let count = i64::from_le_bytes(v.get(..8).ok_or_else(corrupt)?.try_into().map_err(|_| corrupt())?);
    let degree = i64::from_le_bytes(v.get(8..16).ok_or_else(corrupt)?.try_into().map_err(|_| corrupt())?);
    Ok((count, degree))
}

/// The `watermark` table's value of one instance: both watermarks, the late-row count and the
/// next arrival sequence of an append-only input's rows (0 for a temporal join), 34 bytes.
pub(super) fn encode_meta(watermarks: [Option<i64>; 2], num_late_rows: u64, next_seq: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(34);
    for w in watermarks {
        v.push(w.is_some() as u8);
        v.extend_from_slice(&w.unwrap_or(0).to_le_bytes());
    }
    v.extend_from_slice(&num_late_rows.to_le_bytes());
    v.extend_from_slice(&next_seq.to_le_bytes());
    v
}

/// Loads a join instance's watermarks, late-row count and next arrival sequence from its
/// `watermark` table: each side's latest watermark over every instance's entry, the late rows
/// of the entries this instance inherits ([`StateTable::instance_entries`]), which it then keeps
/// under its own key, and the largest sequence of any entry (after a change of parallelism an
/// instance holds rows other instances stored).
///
/// # Errors
/// `Storage` for a corrupt entry or when RocksDB fails to read.
pub(super) fn load_meta(meta: &mut StateTable, store: &Store) -> Result<([Option<i64>; 2], u64, u64)> {
    let entries = meta.instance_entries(store)?;
    let (mut watermarks, mut num_late_rows, mut next_seq) = ([None, None], 0, 0);
    for (_, v, inherited) in &entries {
        let (wms, late, seq) = decode_meta(v)?;
        watermarks = [watermarks[0].max(wms[0]), watermarks[1].max(wms[1])];
        next_seq = next_seq.max(seq);
        if *inherited {
            num_late_rows += late;
        }
    }
    meta.adopt(&entries);
    if entries.iter().any(|(k, _, inherited)| *inherited && *k != meta.instance_key()) {
        meta.put(meta.instance_key(), encode_meta(watermarks, num_late_rows, next_seq));
    }
    Ok((watermarks, num_late_rows, next_seq))
}

/// One instance's watermarks, late-row count and next arrival sequence, as [`encode_meta`]
/// writes them (26 bytes, without the sequence, as written before it was kept: 0).
fn decode_meta(v: &[u8]) -> Result<([Option<i64>; 2], u64, u64)> {
    if v.len() != 26 && v.len() != 34 {
        return Err(WeirError::storage("corrupt join watermark state"));
    }
    let u64_at = |at: usize| u64::from_le_bytes(v[at..at + 8].try_into().expect("8 bytes"));
    let wm = |at: usize| (v[at] == 1).then(|| u64_at(at + 1) as i64);
    let next_seq = if v.len() == 34 { u64_at(26) } else { 0 };
    Ok(([wm(0), wm(9)], u64_at(18), next_seq))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::DataType;
    use datafusion::logical_expr::Operator as BinaryOp;
    use datafusion::physical_expr::expressions::{binary, Column};

    /// Both inputs: key `k`, a text `s`, a time `t` (ms).
    fn input_schema(prefix: &str) -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new(format!("{prefix}k"), DataType::Int64, true),
            Field::new(format!("{prefix}s"), DataType::Utf8, true),
            Field::new(format!("{prefix}t"), DataType::Int64, true),
        ]))
    }

    struct Harness {
        op: Join,
        store: Store,
        epoch: u64,
        join_type: StreamJoinType,
        with_filter: bool,
        time: Option<TimeBound>,
        append_only: [bool; 2],
        _dir: tempfile::TempDir,
    }

    /// A join on `k`; with `with_filter`, also `left.s < right.s`.
    fn harness(join_type: StreamJoinType, with_filter: bool, time: Option<TimeBound>) -> Harness {
        harness_of(join_type, with_filter, time, [false, false])
    }

    /// [`harness`] whose inputs are append-only where `append_only` says.
    fn harness_of(join_type: StreamJoinType, with_filter: bool, time: Option<TimeBound>, append_only: [bool; 2]) -> Harness {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path()).expect("store");
        let op = open(&store, join_type, with_filter, time, append_only);
        Harness { op, store, epoch: 0, join_type, with_filter, time, append_only, _dir: dir }
    }

    fn open(
        store: &Store,
        join_type: StreamJoinType,
        with_filter: bool,
        time: Option<TimeBound>,
        append_only: [bool; 2],
    ) -> Join {
        let (left, right) = (input_schema("l"), input_schema("r"));
        let schema = Arc::new(Schema::new(
            left.fields().iter().chain(right.fields().iter()).map(|f| f.as_ref().clone()).collect::<Vec<_>>(),
        ));
        let key = |name: &str| vec![Arc::new(Column::new(name, 0)) as Arc<dyn PhysicalExpr>];
        let filter = with_filter.then(|| {
            binary(Arc::new(Column::new("ls", 1)), BinaryOp::Lt, Arc::new(Column::new("rs", 4)), &schema)
                .expect("filter")
        });
        // A SEMI/ANTI join outputs the left columns; its condition reads both.
        let schema = if join_type.left_only() { Arc::clone(&left) } else { schema };
        let opts = JoinOptions {
            join_type,
            left_keys: key("lk"),
            right_keys: key("rk"),
            filter,
            null_equals_null: false,
            time,
            lookup: false,
            emit_on_window_close: false,
            append_only,
            left_schema: left,
            right_schema: right,
            schema,
        };
        let mut tables = |name: &str| -> TableRef {
            match name {
                LEFT => 1,
                RIGHT => 2,
                _ => 3,
            }
            .into()
        };
        Join::try_new(opts, &mut tables, store).expect("join")
    }

    impl Harness {
        fn push(&mut self, input: usize, text: &str) -> Vec<String> {
            let schema = input_schema(if input == 0 { "l" } else { "r" });
            let ctx = OpContext { store: &self.store };
            let out = self.op.process_batch(input, StreamChunk::from_pretty(&schema, text), &ctx).expect("process");
            out.map(|c| c.to_pretty()).unwrap_or_default()
        }

        fn watermark(&mut self, input: usize, watermark_ms: i64) -> Option<i64> {
            let ctx = OpContext { store: &self.store };
            self.op.on_watermark(input, watermark_ms, &ctx).expect("watermark").1
        }

        /// Distinct rows held for input `side`.
        fn held(&self, side: usize) -> usize {
            let mut n = 0;
            self.op.sides[side].rows.scan(&self.store, |_, _| Ok({ n += 1; true })).expect("scan");
            n
        }

        /// Commits the epoch and reopens the operator from the store.
        fn restart(&mut self) {
            let mut writes = EpochWrites::default();
            self.op.on_barrier(&mut writes, &OpContext { store: &self.store }).expect("barrier");
            self.epoch += 1;
            self.store.commit(writes, self.epoch).expect("commit");
            self.op = open(&self.store, self.join_type, self.with_filter, self.time, self.append_only);
        }
    }

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn inner_join_retracts_on_either_side_and_pairs_every_copy() {
        let mut h = harness(StreamJoinType::Inner, false, None);
        assert_eq!(h.push(0, "+I 1 a 0\n+I 1 a 0\n+I 2 b 0"), lines(&[]));
        assert_eq!(h.push(1, "+I 1 x 0"), lines(&["+I 1 a 0 1 x 0", "+I 1 a 0 1 x 0"]));
        // An update of the right row: a retraction and an insertion per copy on the left.
        assert_eq!(
            h.push(1, "-U 1 x 0\n+U 1 y 0"),
            lines(&["-D 1 a 0 1 x 0", "-D 1 a 0 1 x 0", "+I 1 a 0 1 y 0", "+I 1 a 0 1 y 0"])
        );
        assert_eq!(h.push(0, "-D 1 a 0"), lines(&["-D 1 a 0 1 y 0"]));
        assert_eq!((h.held(0), h.held(1)), (2, 1));
        assert_eq!(h.push(0, "-D 1 a 0\n-D 2 b 0"), lines(&["-D 1 a 0 1 y 0"]));
        assert_eq!((h.held(0), h.held(1)), (0, 1));
    }

    #[test]
    fn left_join_pads_until_the_first_match_and_after_the_last() {
        let mut h = harness(StreamJoinType::Left, false, None);
        assert_eq!(h.push(0, "+I 1 a 0"), lines(&["+I 1 a 0 NULL NULL NULL"]));
        assert_eq!(h.push(1, "+I 1 x 0"), lines(&["-D 1 a 0 NULL NULL NULL", "+I 1 a 0 1 x 0"]));
        assert_eq!(h.push(1, "+I 1 y 0"), lines(&["+I 1 a 0 1 y 0"]));
        assert_eq!(h.push(1, "-D 1 x 0"), lines(&["-D 1 a 0 1 x 0"]));
        assert_eq!(h.push(1, "-D 1 y 0"), lines(&["-D 1 a 0 1 y 0", "+I 1 a 0 NULL NULL NULL"]));
        // A right row without a partner is not shown by a LEFT join.
        assert_eq!(h.push(1, "+I 2 z 0"), lines(&[]));
        assert_eq!(h.push(0, "-D 1 a 0"), lines(&["-D 1 a 0 NULL NULL NULL"]));
    }

    #[test]
    fn full_join_null_keys_never_match_and_are_not_held() {
        let mut h = harness(StreamJoinType::Full, false, None);
        assert_eq!(h.push(0, "+I NULL a 0"), lines(&["+I NULL a 0 NULL NULL NULL"]));
        assert_eq!(h.push(1, "+I NULL x 0"), lines(&["+I NULL NULL NULL NULL x 0"]));
        assert_eq!((h.held(0), h.held(1)), (0, 0));
        assert_eq!(h.push(1, "-D NULL x 0"), lines(&["-D NULL NULL NULL NULL x 0"]));
        // Two right copies lose their padding together, one line per copy.
        assert_eq!(h.push(1, "+I 3 y 0\n+I 3 y 0"), lines(&["+I NULL NULL NULL 3 y 0", "+I NULL NULL NULL 3 y 0"]));
        assert_eq!(
            h.push(0, "+I 3 b 0"),
            lines(&["-D NULL NULL NULL 3 y 0", "-D NULL NULL NULL 3 y 0", "+I 3 b 0 3 y 0", "+I 3 b 0 3 y 0"])
        );
    }

    #[test]
    fn residual_condition_decides_matches_and_padding() {
        let mut h = harness(StreamJoinType::Left, true, None);
        assert_eq!(h.push(1, "+I 1 m 0"), lines(&[]));
        // "a" < "m" matches; "z" does not and is padded.
        assert_eq!(h.push(0, "+I 1 a 0\n+I 1 z 0"), lines(&["+I 1 a 0 1 m 0", "+I 1 z 0 NULL NULL NULL"]));
        assert_eq!(
            h.push(1, "-U 1 m 0\n+U 1 zz 0"),
            lines(&[
                "-D 1 a 0 1 m 0",
                "+I 1 a 0 NULL NULL NULL",
                "-D 1 a 0 NULL NULL NULL",
                "-D 1 z 0 NULL NULL NULL",
                "+I 1 a 0 1 zz 0",
                "+I 1 z 0 1 zz 0",
            ])
        );
    }

    #[test]
    fn interval_join_drops_late_rows_and_frees_state_by_the_minimum_watermark() {
        // left.t - right.t in [-3, 2]: left late at t <= W - 3, right at t <= W - 2; rows held
        // while t > W - 5.
        let time = TimeBound::Interval { left_time: 2, right_time: 2, lower_ms: -3, upper_ms: 2 };
        let mut h = harness(StreamJoinType::Left, false, Some(time));
        assert_eq!(h.push(0, "+I 1 a 10\n+I 2 b 20"), lines(&["+I 1 a 10 NULL NULL NULL", "+I 2 b 20 NULL NULL NULL"]));
        // One watermark is not enough: no cleaning, no output watermark.
        assert_eq!(h.watermark(0, 20), None);
        assert_eq!(h.watermark(1, 16), Some(11));
        assert_eq!((h.held(0), h.held(1)), (1, 0), "the left row at 10 <= 16 - 5 is dropped");
        // W = 16: the right row at 14 is late (14 <= 14), the one at 17 joins the left row at 20.
        assert_eq!(h.push(1, "+I 2 x 14\n+I 2 y 17"), lines(&["-D 2 b 20 NULL NULL NULL", "+I 2 b 20 2 y 17"]));
        assert_eq!(h.op.num_late_rows(), 1);
        // A late left row (13 <= W - 3), even a retraction, is dropped.
        assert_eq!(h.push(0, "+I 2 c 13\n-D 1 a 10"), lines(&[]));
        assert_eq!(h.op.num_late_rows(), 3);
        h.restart();
        assert_eq!(h.op.num_late_rows(), 3);
        assert_eq!(h.watermark(0, 30), Some(11), "the join's watermark stays the right's");
        assert_eq!(h.watermark(1, 40), Some(25));
        assert_eq!((h.held(0), h.held(1)), (0, 0));
    }

    /// SQL.md: an outer interval join with EMIT ON WINDOW CLOSE emits its padded rows once,
    /// final: when the row leaves state unmatched, never before a partner could still come.
    #[test]
    fn an_outer_interval_join_under_eowc_pads_a_row_once_when_it_leaves_state() {
        let time = TimeBound::Interval { left_time: 2, right_time: 2, lower_ms: -3, upper_ms: 2 };
        let mut h = harness(StreamJoinType::Left, false, Some(time));
        h.op.pad_on_close = true;
        // Nothing padded on arrival; the pair is emitted at once (it is final).
        assert_eq!(h.push(0, "+I 1 a 10\n+I 2 b 20"), lines(&[]));
        assert_eq!(h.push(1, "+I 2 y 19"), lines(&["+I 2 b 20 2 y 19"]));
        let mut fire = |input: usize, w: i64| {
            let ctx = OpContext { store: &h.store };
            h.op.on_watermark(input, w, &ctx).expect("watermark").0.map(|c| c.to_pretty()).unwrap_or_default()
        };
        // W = 16 drops the left row at 10 (10 <= 16 - 5), unmatched: padded now, once.
        assert_eq!(fire(0, 30), lines(&[]));
        assert_eq!(fire(1, 16), lines(&["+I 1 a 10 NULL NULL NULL"]));
        // W = 40 drops the row at 20, which matched: no padded row.
        assert_eq!(fire(1, 40), lines(&[]));
    }

    #[test]
    fn window_join_frees_a_window_once_its_window_time_passed() {
        let time = TimeBound::Window { left_end: 2, right_end: 2 };
        let mut h = harness(StreamJoinType::Inner, false, Some(time));
        assert_eq!(h.push(0, "+I 1 a 10\n+I 1 b 20"), lines(&[]));
        h.watermark(0, 100);
        assert_eq!(h.watermark(1, 9), Some(9));
        assert_eq!(h.held(0), 1, "window ending at 10 closed at 9");
        assert_eq!(h.push(1, "+I 1 x 10\n+I 1 y 20"), lines(&["+I 1 b 20 1 y 20"]));
        assert_eq!(h.op.num_late_rows(), 1);
    }

    /// An append-only input stores each arrival as an entry of its own, identical rows too and
    /// across a restart (the arrival sequence is kept); the time index an interval join rebuilds
    /// from those keys at the restart still frees them; a retraction on it is an error.
    #[test]
    fn an_append_only_input_stores_each_arrival_and_frees_it_by_time() {
        let time = TimeBound::Interval { left_time: 2, right_time: 2, lower_ms: -3, upper_ms: 2 };
        let mut h = harness_of(StreamJoinType::Inner, false, Some(time), [true, true]);
        assert_eq!(h.push(0, "+I 1 a 10\n+I 1 a 10"), lines(&[]));
        h.restart();
        assert_eq!(h.push(0, "+I 1 a 10"), lines(&[]));
        assert_eq!(h.held(0), 3);
        assert_eq!(h.push(1, "+I 1 x 9"), lines(&["+I 1 a 10 1 x 9"; 3]));
        h.restart();
        // Rows are held while t > W - 5: at W = 15 the left rows at 10 and the right row at 9 go.
        h.watermark(0, 15);
        h.watermark(1, 15);
        assert_eq!((h.held(0), h.held(1)), (0, 0));
        let retraction = StreamChunk::from_pretty(&input_schema("l"), "-D 1 a 20");
        let err = h.op.process_batch(0, retraction, &OpContext { store: &h.store }).err().expect("an error");
        assert!(err.to_string().contains("append-only"), "{err}");
    }

    #[test]
    fn state_survives_a_restart() {
        let mut h = harness(StreamJoinType::Full, false, None);
        h.push(0, "+I 1 a 0\n+I 2 b 0");
        h.push(1, "+I 1 x 0");
        h.restart();
        assert_eq!(
            h.push(1, "+I 2 y 0\n-D 1 x 0"),
            lines(&["-D 2 b 0 NULL NULL NULL", "+I 2 b 0 2 y 0", "-D 1 a 0 1 x 0", "+I 1 a 0 NULL NULL NULL",])
        );
    }

    /// Random changelogs on both inputs, with retractions (except on an append-only input),
    /// NULL keys, duplicates and a residual condition, and restarts: the integrated output equals
    /// a nested-loop join of all rows so far, whichever inputs are append-only (their rows
    /// stored an entry per arrival).
    #[test]
    fn random_changelogs_match_a_nested_loop_join() {
        let mut seed: u64 = 0x5eed_1234;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let types = [
            StreamJoinType::Inner,
            StreamJoinType::Left,
            StreamJoinType::Right,
            StreamJoinType::Full,
            StreamJoinType::Semi,
            StreamJoinType::Anti,
            StreamJoinType::NotIn,
        ];
        for join_type in types {
            // NOT IN (a null-aware anti join) has no residual condition in SQL.
            let filters = [false, true].into_iter().filter(|f| !*f || join_type != StreamJoinType::NotIn);
            for (with_filter, append_only) in filters.flat_map(|f| [[false, false], [true, false], [false, true], [true, true]].map(|a| (f, a))) {
                let mut h = harness_of(join_type, with_filter, None, append_only);
                let mut rows: [Vec<(Option<i64>, String)>; 2] = [vec![], vec![]];
                let mut view: HashMap<String, i64> = HashMap::new();
                for step in 0..120 {
                    let side = next(2) as usize;
                    let mut text = String::new();
                    for _ in 0..=next(3) {
                        let retract = !append_only[side] && !rows[side].is_empty() && next(3) == 0;
                        let (k, s) = if retract {
                            rows[side].swap_remove(next(rows[side].len() as u64) as usize)
                        } else {
                            let k = match next(4) {
                                0 => None,
                                k => Some(k as i64),
                            };
                            let row = (k, ["a", "m", "z"][next(3) as usize].to_string());
                            rows[side].push(row.clone());
                            row
                        };
                        let k = k.map_or("NULL".to_string(), |k| k.to_string());
                        text.push_str(&format!("{} {k} {s} 0\n", if retract { "-D" } else { "+I" }));
                    }
                    for line in h.push(side, &text) {
                        let (op, row) = line.split_at(2);
                        *view.entry(row.trim().to_string()).or_default() += if op == "+I" { 1 } else { -1 };
                    }
                    if step % 40 == 39 {
                        h.restart();
                    }
                    view.retain(|_, c| *c != 0);
                    let expected = nested_loop(join_type, with_filter, &rows);
                    assert_eq!(view, expected, "{join_type} join, filter {with_filter}, {append_only:?}, step {step}");
                }
            }
        }
    }

    fn nested_loop(
        join_type: StreamJoinType,
        with_filter: bool,
        rows: &[Vec<(Option<i64>, String)>; 2],
    ) -> HashMap<String, i64> {
        let text = |r: Option<&(Option<i64>, String)>| match r {
            Some((k, s)) => format!("{} {s} 0", k.map_or("NULL".to_string(), |k| k.to_string())),
            None => "NULL NULL NULL".to_string(),
        };
        let matches = |l: &(Option<i64>, String), r: &(Option<i64>, String)| {
            l.0.is_some() && l.0 == r.0 && (!with_filter || l.1 < r.1)
        };
        let mut out: HashMap<String, i64> = HashMap::new();
        if join_type.left_only() {
            let right_null = rows[1].iter().any(|r| r.0.is_none());
            for l in &rows[0] {
                let matched = rows[1].iter().any(|r| matches(l, r));
                let passes = match join_type {
                    StreamJoinType::Semi => matched,
                    StreamJoinType::Anti => !matched,
                    // SQL: `l NOT IN (rights)` is true for an empty set, else only for a non-NULL
                    // l equal to none of them when none is NULL.
                    _ => rows[1].is_empty() || (l.0.is_some() && !right_null && !matched),
                };
                if passes {
                    *out.entry(text(Some(l))).or_default() += 1;
                }
            }
            return out;
        }
        for l in &rows[0] {
            let mut matched = false;
            for r in rows[1].iter().filter(|r| matches(l, r)) {
                matched = true;
                *out.entry(format!("{} {}", text(Some(l)), text(Some(r)))).or_default() += 1;
            }
            if !matched && join_type.left_outer() {
                *out.entry(format!("{} {}", text(Some(l)), text(None))).or_default() += 1;
            }
        }
        if join_type.right_outer() {
            for r in rows[1].iter().filter(|r| !rows[0].iter().any(|l| matches(l, r))) {
                *out.entry(format!("{} {}", text(None), text(Some(r)))).or_default() += 1;
            }
        }
        out
    }
}
