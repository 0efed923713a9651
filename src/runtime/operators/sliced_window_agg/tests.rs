//! Sliced and session window aggregation: hand-written cases (out-of-order rows, rows on
//! slice and window bounds, touching and bridged sessions, late rows, restarts) and a seeded
//! randomized comparison with WindowAssign (SessionAssign for sessions) + GroupAggregate on
//! the same input.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;

use super::*;
use crate::runtime::operators::group_agg::GroupAggregate;
use crate::runtime::operators::session_assign::SessionAssign;
use session::{SessionWindowAggregate, SESSIONS};
use crate::test_rng::Rng;
use crate::runtime::operators::window_assign::WindowAssign;

/// Input rows `(k BIGINT, v BIGINT, ts TIMESTAMP(3))`.
fn input_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
    ]))
}

/// A window over `ts`; SESSION (gap `size_ms`) partitioned by `k`.
fn spec(kind: WindowKind, slide_ms: i64, size_ms: i64, offset_ms: i64, slices: bool) -> WindowSpec {
    let intervals = if kind == WindowKind::Session { vec![size_ms] } else { vec![slide_ms, size_ms, offset_ms] };
    let mut spec = WindowSpec::try_new(kind, "t".into(), "ts".into(), 2, &intervals).expect("valid window");
    if kind == WindowKind::Session {
        spec.partition_by = vec![0];
    }
    spec.slices = slices;
    spec
}

/// `COUNT(*), SUM(v), AVG(v)` and, with `min_max`, `MIN(v), MAX(v)`, all BIGINT.
fn aggs(min_max: bool) -> Vec<AggCall> {
    let v = || Some(Arc::new(Column::new("v", 1)) as Arc<dyn PhysicalExpr>);
    let call = |kind, arg| AggCall {
        kind,
        arg,
        distinct: false,
        filter: None,
        arg_type: DataType::Int64,
        output_type: DataType::Int64,
        separator: None,
    };
    let mut out = vec![
        AggCall { arg_type: DataType::Null, ..call(AggKind::Count, None) },
        call(AggKind::Sum, v()),
        call(AggKind::Avg, v()),
    ];
    if min_max {
        out.extend([call(AggKind::Min, v()), call(AggKind::Max, v())]);
    }
    out
}

/// Output `(window_start, window_end, k, aggregates...)`.
fn output_schema(min_max: bool) -> SchemaRef {
    let t = DataType::Timestamp(TimeUnit::Millisecond, None);
    let mut fields = vec![Field::new("window_start", t.clone(), false), Field::new("window_end", t, false), Field::new("k", DataType::Int64, true)];
    for name in if min_max { &["c", "s", "a", "mn", "mx"][..] } else { &["c", "s", "a"][..] } {
        fields.push(Field::new(*name, DataType::Int64, true));
    }
    Arc::new(Schema::new(fields))
}

/// Group by `window_start, window_end, k` over the window assigner's output.
fn group_exprs() -> Vec<Arc<dyn PhysicalExpr>> {
    vec![Arc::new(Column::new("window_start", 3)), Arc::new(Column::new("window_end", 4)), Arc::new(Column::new("k", 0))]
}

/// A window assigner feeding a window aggregate, sliced (session: lone sessions merged by
/// the session window aggregate) or not (session: the session assigner).
struct Pipeline {
    assign: Box<dyn Operator>,
    agg: Box<dyn Operator>,
    kind: WindowKind,
    window: (i64, i64, i64),
    sliced: bool,
    min_max: bool,
    /// Emit on window close (always for HOP and CUMULATE).
    eowc: bool,
    /// State table ids by name ("a/..." the assigner's, "g/..." the aggregate's).
    tables: HashMap<String, u32>,
}

impl Pipeline {
    fn open(
        store: &Store,
        kind: WindowKind,
        window: (i64, i64, i64),
        (sliced, min_max, eowc): (bool, bool, bool),
        tables: &mut HashMap<String, u32>,
    ) -> Result<Self> {
        let mut id = |name: String| {
            let next = tables.len() as u32 + 1;
            *tables.entry(name).or_insert(next)
        };
        let w = spec(kind, window.0, window.1, window.2, sliced);
        let assigned = w.output_schema(&input_schema());
        let assign: Box<dyn Operator> = if kind == WindowKind::Session && !sliced {
            Box::new(SessionAssign::try_new(w.clone(), input_schema(), assigned, &mut |n| id(format!("a/{n}")).into(), store)?)
        } else {
            Box::new(WindowAssign::try_new(w.clone(), assigned, &mut |n| id(format!("a/{n}")).into(), store)?)
        };
        let agg: Box<dyn Operator> = if sliced && kind == WindowKind::Session {
            let opts = SlicedWindowAggOptions {
                group_exprs: group_exprs(),
                window_columns: vec![Some(WindowColumn::Start), Some(WindowColumn::End), None],
                aggs: aggs(min_max),
                window: w,
                schema: output_schema(min_max),
                emit_on_window_close: eowc,
            };
            Box::new(SessionWindowAggregate::try_new(opts, &mut |n| id(format!("g/{n}")).into(), store)?)
        } else if sliced {
            let opts = SlicedWindowAggOptions {
                group_exprs: group_exprs(),
                window_columns: vec![Some(WindowColumn::Start), Some(WindowColumn::End), None],
                aggs: aggs(min_max),
                window: w,
                schema: output_schema(min_max),
                emit_on_window_close: eowc,
            };
            Box::new(SlicedWindowAggregate::try_new(opts, &mut |n| id(format!("g/{n}")).into(), store)?)
        } else {
            Box::new(GroupAggregate::try_new(
                group_exprs(),
                aggs(min_max),
                output_schema(min_max),
                Some((1, eowc, 0)),
                // The session assigner retracts rows whose session changed.
                min_max && kind != WindowKind::Session,
                &mut |n| id(format!("g/{n}")).into(),
                store,
            )?)
        };
        Ok(Self { assign, agg, kind, window, sliced, min_max, eowc, tables: tables.clone() })
    }

    fn push(&mut self, store: &Store, chunk: StreamChunk) -> Result<Vec<String>> {
        let ctx = OpContext { store };
        let Some(assigned) = self.assign.process_batch(0, chunk, &ctx)? else { return Ok(vec![]) };
        Ok(lines(self.agg.process_batch(0, assigned, &ctx)?))
    }

    fn watermark(&mut self, store: &Store, wm: i64) -> Result<Vec<String>> {
        let ctx = OpContext { store };
        let (out, next) = self.assign.on_watermark(0, wm, &ctx)?;
        assert!(out.is_none());
        let (out, next) = self.agg.on_watermark(0, next.expect("forwarded"), &ctx)?;
        assert_eq!(next, Some(wm));
        Ok(lines(out))
    }

    fn barrier(&mut self, store: &Store, writes: &mut EpochWrites) -> Result<()> {
        let ctx = OpContext { store };
        self.assign.on_barrier(writes, &ctx)?;
        self.agg.on_barrier(writes, &ctx)
    }

    /// Late rows dropped by the assigner and the aggregate (a session window aggregate decides
    /// lateness itself).
    fn late_rows(&self) -> u64 {
        self.assign.num_late_rows() + self.agg.num_late_rows()
    }

    fn reopen(&self, store: &Store) -> Result<Self> {
        let mut tables = self.tables.clone();
        Self::open(store, self.kind, self.window, (self.sliced, self.min_max, self.eowc), &mut tables)
    }
}

/// A test database: one store, one pipeline, committed epochs.
struct Harness {
    store: Store,
    pipeline: Pipeline,
    epoch: u64,
    _dir: tempfile::TempDir,
}

impl Harness {
    fn new(kind: WindowKind, window: (i64, i64, i64), sliced: bool, min_max: bool) -> Result<Self> {
        Self::with_eowc(kind, window, sliced, min_max, true)
    }

    /// [`Harness::new`], emitting on window close or not (sessions only).
    fn with_eowc(kind: WindowKind, window: (i64, i64, i64), sliced: bool, min_max: bool, eowc: bool) -> Result<Self> {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path())?;
        let pipeline = Pipeline::open(&store, kind, window, (sliced, min_max, eowc), &mut HashMap::new())?;
        Ok(Self { store, pipeline, epoch: 0, _dir: dir })
    }

    fn push(&mut self, text: &str) -> Result<Vec<String>> {
        self.pipeline.push(&self.store, StreamChunk::from_pretty(&input_schema(), text))
    }

    fn watermark(&mut self, wm: i64) -> Result<Vec<String>> {
        self.pipeline.watermark(&self.store, wm)
    }

    fn commit(&mut self) -> Result<()> {
        let mut writes = EpochWrites::default();
        self.pipeline.barrier(&self.store, &mut writes)?;
        self.epoch += 1;
        self.store.commit(writes, self.epoch)
    }

    /// Commits the epoch and reopens both operators from the store.
    fn restart(&mut self) -> Result<()> {
        self.commit()?;
        self.pipeline = self.pipeline.reopen(&self.store)?;
        Ok(())
    }

    /// State entries of the aggregate's slice (session) table in the committed store.
    fn stored_slices(&self) -> Result<usize> {
        let table = if self.pipeline.kind == WindowKind::Session { SESSIONS } else { SLICES };
        let id = self.pipeline.tables[&format!("g/{table}")];
        let mut n = 0;
        self.store.scan(id, |_, _| {
            n += 1;
            Ok(true)
        })?;
        Ok(n)
    }
}

/// A chunk as lines `+I start end k aggregates...`, times as integers (ms).
fn lines(chunk: Option<StreamChunk>) -> Vec<String> {
    let Some(c) = chunk else { return vec![] };
    let columns: Vec<ArrayRef> = c
        .columns()
        .iter()
        .map(|a| match a.data_type() {
            DataType::Timestamp(..) => cast(a, &DataType::Int64).expect("a time as an integer"),
            _ => Arc::clone(a),
        })
        .collect();
    (0..c.len())
        .map(|i| {
            let mut line = c.ops[i].to_string();
            for a in &columns {
                line.push(' ');
                if a.is_null(i) {
                    line.push_str("NULL");
                } else {
                    line.push_str(&arrow::util::display::array_value_to_string(a, i).expect("displayable"));
                }
            }
            line
        })
        .collect()
}

#[test]
fn hop_fires_windows_from_slices() -> Result<()> {
    // HOP slide 10 ms, size 30 ms: slices of 10 ms, three per window.
    let mut h = Harness::new(WindowKind::Hop, (10, 30, 0), true, true)?;
    // 10 lies on a slice bound (it opens [10, 20)); 5 arrives out of order.
    assert!(h.push("+I 1 1 0\n+I 1 2 10\n+I 2 5 29\n+I 1 3 5")?.is_empty());
    assert!(h.watermark(8)?.is_empty(), "window_time of [-20, 10) is 9");
    assert_eq!(h.watermark(29)?, [
        "+I -20 10 1 2 4 2 1 3",
        "+I -10 20 1 3 6 2 1 3",
        "+I 0 30 1 3 6 2 1 3",
        "+I 0 30 2 1 5 5 5 5",
    ]);
    // 15 is below the watermark, but its window [10, 40) is open; 9's last window [0, 30) fired.
    assert!(h.push("+I 1 10 15\n+I 1 100 9")?.is_empty());
    assert_eq!(h.pipeline.assign.num_late_rows(), 1);
    assert_eq!(h.pipeline.assign.take_late_rows().len(), 1);
    assert_eq!(h.watermark(39)?, ["+I 10 40 1 2 12 6 2 10", "+I 10 40 2 1 5 5 5 5"]);
    assert_eq!(h.watermark(49)?, ["+I 20 50 2 1 5 5 5 5"]);
    assert!(h.watermark(1000)?.is_empty());
    h.commit()?;
    assert_eq!(h.stored_slices()?, 0, "every slice is freed once its last window fired");
    Ok(())
}

#[test]
fn cumulate_counts_rows_in_the_windows_still_open() -> Result<()> {
    // CUMULATE step 10 ms, size 30 ms: windows [0, 10), [0, 20), [0, 30), then [30, 40), ...
    let mut h = Harness::new(WindowKind::Cumulate, (10, 30, 0), true, true)?;
    h.push("+I 1 1 5\n+I 1 2 25\n+I 1 4 12")?;
    assert_eq!(h.watermark(9)?, ["+I 0 10 1 1 1 1 1 1"]);
    assert_eq!(h.watermark(19)?, ["+I 0 20 1 2 5 2 1 4"]);
    // 3 is below the watermark: [0, 10) and [0, 20) have fired, [0, 30) has not.
    h.push("+I 1 8 3\n+I 2 7 30")?;
    assert_eq!(h.pipeline.assign.num_late_rows(), 0);
    assert_eq!(h.watermark(29)?, ["+I 0 30 1 4 15 3 1 8"]);
    // The block [0, 30) is over: a row in it is late.
    h.push("+I 1 9 29")?;
    assert_eq!(h.pipeline.assign.num_late_rows(), 1);
    assert_eq!(h.watermark(40)?, ["+I 30 40 2 1 7 7 7 7"]);
    Ok(())
}

#[test]
fn state_survives_a_restart() -> Result<()> {
    for restart_at in 0..4 {
        let mut h = Harness::new(WindowKind::Hop, (10, 30, 5), true, true)?;
        let mut out = Vec::new();
        type Step<'a> = &'a dyn Fn(&mut Harness) -> Result<Vec<String>>;
        let steps: [Step; 4] = [
            &|h| h.push("+I 1 1 5\n+I 2 2 14\n+I 1 3 26"),
            &|h| h.watermark(24),
            &|h| h.push("+I 1 4 16\n+I 2 5 40"),
            &|h| h.watermark(70),
        ];
        for (i, step) in steps.iter().enumerate() {
            if i == restart_at {
                h.restart()?;
            }
            out.extend(step(&mut h)?);
        }
        assert_eq!(out, [
            "+I -15 15 1 1 1 1 1 1",
            "+I -15 15 2 1 2 2 2 2",
            "+I -5 25 1 1 1 1 1 1",
            "+I -5 25 2 1 2 2 2 2",
            "+I 5 35 1 3 8 2 1 4",
            "+I 5 35 2 1 2 2 2 2",
            "+I 15 45 1 2 7 3 3 4",
            "+I 15 45 2 1 5 5 5 5",
            "+I 25 55 1 1 3 3 3 3",
            "+I 25 55 2 1 5 5 5 5",
            "+I 35 65 2 1 5 5 5 5",
        ], "restart before step {restart_at}");
    }
    Ok(())
}

#[test]
fn retractions_subtract_and_an_emptied_window_is_not_emitted() -> Result<()> {
    let mut h = Harness::new(WindowKind::Hop, (10, 20, 0), true, false)?;
    h.push("+I 1 4 5\n+I 1 6 15\n-D 1 4 5\n+I 2 1 12")?;
    assert_eq!(h.watermark(19)?, ["+I 0 20 1 1 6 6", "+I 0 20 2 1 1 1"]);
    h.push("-D 2 1 12")?;
    assert_eq!(h.watermark(100)?, ["+I 10 30 1 1 6 6"]);
    Ok(())
}

/// A changelog row: op, `k`, `v`, `ts`.
type Row = (Op, Option<i64>, Option<i64>, Option<i64>);

/// A chunk of rows.
fn chunk_of(rows: &[Row]) -> StreamChunk {
    let batch = RecordBatch::try_new(
        input_schema(),
        vec![
            Arc::new(Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())),
            Arc::new(Int64Array::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())),
            Arc::new(TimestampMillisecondArray::from(rows.iter().map(|r| r.3).collect::<Vec<_>>())),
        ],
    )
    .expect("valid batch");
    StreamChunk::new(rows.iter().map(|r| r.0).collect(), batch)
}

/// Runs one random workload through the sliced and the unsliced pipeline: same output rows
/// (as multisets) and late-row counts.
fn compare(seed: u64, kind: WindowKind, retract: bool) -> Result<()> {
    compare_with(seed, kind, retract, true)
}

/// A view's rows after the changes of `lines` (`+I`/`+U` add a row, `-D`/`-U` take one away).
fn apply_lines(view: &mut HashMap<String, i64>, lines: &[String]) {
    for line in lines {
        let (op, row) = line.split_at(2);
        *view.entry(row.to_string()).or_default() += if op.starts_with('+') { 1 } else { -1 };
        view.retain(|_, n| *n != 0);
    }
}

/// [`compare`], emitting on window close or not (sessions only). Without it the output is
/// an updating changelog whose steps differ between the plans: the views they make are
/// compared after every step instead.
fn compare_with(seed: u64, kind: WindowKind, retract: bool, eowc: bool) -> Result<()> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let (slide, n, window) = if kind == WindowKind::Session {
        let gap = 1 + rng.below(12);
        (gap, 1, (gap, gap, 0))
    } else {
        let slide = 1 + rng.below(6);
        let n = 1 + rng.below(if kind == WindowKind::Hop { 7 } else { 5 });
        let offset = rng.below((slide * n) as u64) - slide;
        (slide, n, (slide, slide * n, offset))
    };
    let min_max = !retract;
    let mut sliced = Harness::with_eowc(kind, window, true, min_max, eowc)?;
    let mut plain = Harness::with_eowc(kind, window, false, min_max, eowc)?;
    let (mut view_sliced, mut view_plain) = (HashMap::new(), HashMap::new());
    let (mut out_sliced, mut out_plain) = (Vec::new(), Vec::new());
    let mut clock = rng.below(20) - 10;
    let mut inserted: Vec<(Option<i64>, Option<i64>, Option<i64>)> = Vec::new();
    let disorder = 1 + rng.below(3 * slide as u64 * n as u64);
    for step in 0..60 {
        let mut rows = Vec::new();
        for _ in 0..rng.below(12) {
            clock += rng.below(3);
            if retract && !inserted.is_empty() && rng.below(4) == 0 {
                let r = inserted.swap_remove(rng.below(inserted.len() as u64) as usize);
                rows.push((Op::Delete, r.0, r.1, r.2));
                continue;
            }
            let k = (rng.below(5) > 0).then(|| rng.below(4));
            let v = (rng.below(8) > 0).then(|| rng.below(100) - 50);
            let ts = (rng.below(30) > 0).then(|| clock - rng.below(disorder as u64));
            rows.push((Op::Insert, k, v, ts));
            inserted.push((k, v, ts));
        }
        let chunk = chunk_of(&rows);
        out_sliced.extend(sliced.pipeline.push(&sliced.store, chunk.clone())?);
        out_plain.extend(plain.pipeline.push(&plain.store, chunk)?);
        if rng.below(3) == 0 {
            let wm = clock - rng.below(disorder as u64);
            out_sliced.extend(sliced.watermark(wm)?);
            out_plain.extend(plain.watermark(wm)?);
        }
        if !eowc {
            apply_lines(&mut view_sliced, &std::mem::take(&mut out_sliced));
            apply_lines(&mut view_plain, &std::mem::take(&mut out_plain));
            assert_eq!(view_sliced, view_plain, "view after step {step}, seed {seed}, window {window:?}");
        }
        if rng.below(10) == 0 {
            sliced.restart()?;
            plain.restart()?;
        } else if rng.below(5) == 0 {
            sliced.commit()?;
            plain.commit()?;
        }
        assert_eq!(sliced.pipeline.late_rows(), plain.pipeline.late_rows(), "late rows, seed {seed}, step {step}");
    }
    out_sliced.extend(sliced.watermark(clock + 1000)?);
    out_plain.extend(plain.watermark(clock + 1000)?);
    out_sliced.sort();
    out_plain.sort();
    assert_eq!(out_sliced, out_plain, "seed {seed}, {kind:?} window {window:?}, retract {retract}");
    sliced.commit()?;
    assert_eq!(sliced.stored_slices()?, 0, "seed {seed}: slices left after every window fired");
    Ok(())
}

#[test]
fn randomized_hop_matches_window_assign_and_group_aggregate() -> Result<()> {
    for seed in 0..40 {
        compare(seed, WindowKind::Hop, false)?;
    }
    Ok(())
}

#[test]
fn randomized_cumulate_matches_window_assign_and_group_aggregate() -> Result<()> {
    for seed in 0..40 {
        compare(seed, WindowKind::Cumulate, false)?;
    }
    Ok(())
}

#[test]
fn randomized_retractions_match_window_assign_and_group_aggregate() -> Result<()> {
    for seed in 0..30 {
        compare(seed, WindowKind::Hop, true)?;
        compare(seed, WindowKind::Cumulate, true)?;
    }
    Ok(())
}

#[test]
fn randomized_sessions_match_session_assign_and_group_aggregate() -> Result<()> {
    for seed in 0..60 {
        compare(seed, WindowKind::Session, false)?;
    }
    Ok(())
}

#[test]
fn randomized_session_views_match_session_assign_and_group_aggregate() -> Result<()> {
    for seed in 0..60 {
        compare_with(seed, WindowKind::Session, false, false)?;
    }
    Ok(())
}

#[test]
fn a_session_view_retracts_the_rows_of_sessions_that_grow_or_merge() -> Result<()> {
    // Gap 10 ms, no EMIT ON WINDOW CLOSE: output `start end k count sum avg min max`.
    let mut h = Harness::with_eowc(WindowKind::Session, (10, 10, 0), true, true, false)?;
    assert_eq!(h.push("+I 1 1 0\n+I 1 2 25")?, ["+I 0 10 1 1 1 1 1 1", "+I 25 35 1 1 2 2 2 2"]);
    // 5 grows [0, 10) to [0, 15); 15 then bridges it and [25, 35) (touching both). The chunk
    // retracts the rows emitted before it, then emits the one session they became.
    assert_eq!(h.push("+I 1 3 5\n+I 1 4 15")?, ["-D 0 10 1 1 1 1 1 1", "-D 25 35 1 1 2 2 2 2", "+I 0 35 1 4 10 2 1 4"]);
    // A row inside the session changes its aggregates only.
    assert_eq!(h.push("+I 1 7 20")?, ["-D 0 35 1 4 10 2 1 4", "+I 0 35 1 5 17 3 1 7"]);
    // Closing a session emits nothing: its row is final.
    assert!(h.watermark(34)?.is_empty());
    assert_eq!(h.push("+I 1 8 30")?, ["+I 30 40 1 1 8 8 8 8"]);
    h.restart()?;
    assert_eq!(h.push("+I 1 9 39")?, ["-D 30 40 1 1 8 8 8 8", "+I 30 49 1 2 17 8 8 9"]);
    Ok(())
}

#[test]
fn sessions_merge_when_they_touch_and_fire_at_their_window_time() -> Result<()> {
    // Gap 10 ms, partitioned by k; output `start end k count sum avg min max` (AVG of BIGINT
    // truncates).
    let mut h = Harness::new(WindowKind::Session, (10, 10, 0), true, true)?;
    // 0 and 10 are a gap apart: [0, 10) and [10, 20) touch, one session. 25 is apart.
    assert!(h.push("+I 1 1 0\n+I 1 2 10\n+I 2 7 4\n+I 1 3 25")?.is_empty());
    // 16 touches [0, 20) and [25, 35): the three are one session [0, 35).
    assert!(h.push("+I 1 4 16")?.is_empty());
    assert!(h.watermark(12)?.is_empty(), "window_time of [4, 14) is 13");
    assert_eq!(h.watermark(13)?, ["+I 4 14 2 1 7 7 7 7"]);
    // 5's own session [5, 15) is open at 13 (window_time 14): it joins [0, 35). 2's own, [2,
    // 12), has closed, but it touches the open [0, 35) and joins it too (Flink: a row is late
    // only when its merged session is closed). k 2's row at 2 touches no open session (k 2's
    // [4, 14) has fired): late, dropped and counted by the aggregate.
    assert!(h.push("+I 1 9 5\n+I 1 100 2\n+I 2 50 2")?.is_empty());
    assert_eq!(h.pipeline.late_rows(), 1);
    assert_eq!(h.watermark(34)?, ["+I 0 35 1 6 119 19 1 100"]);
    // 30 would touch [0, 35), which has fired: a new session (Flink), kept across a restart.
    assert!(h.push("+I 1 6 30")?.is_empty());
    h.restart()?;
    assert!(h.watermark(38)?.is_empty());
    assert_eq!(h.watermark(39)?, ["+I 30 40 1 1 6 6 6 6"]);
    h.commit()?;
    assert_eq!(h.stored_slices()?, 0, "no session is left once every session fired");
    Ok(())
}

#[test]
fn window_order_is_stable_by_window_with_either_sort() {
    let windows = [5, 3, 5, 4, 3];
    // Counting sort (a narrow range) and comparison sort (a range far wider than the rows).
    assert_eq!(window_order(&windows, 3, 6), vec![1, 4, 3, 0, 2]);
    assert_eq!(window_order(&windows, 3, 1_000_000_000), vec![1, 4, 3, 0, 2]);
}
