//! Window table functions: TUMBLE, HOP and CUMULATE (Flink's windowing TVFs).
//!
//! Each adds `window_start`, `window_end` and `window_time` (= `window_end - 1 ms`, an event-time
//! attribute) to the rows of its input table. Windows are aligned to the epoch plus `offset`:
//!
//! - `TUMBLE(size)`: the one window `[s, s + size)` with `s = floor((t - offset) / size) * size
//!   + offset`.
//! - `HOP(slide, size)`: the `size / slide` windows of length `size` starting every `slide` that
//!   contain `t` (Flink requires `size` to be a multiple of `slide`).
//! - `CUMULATE(step, size)`: within the tumbling window `[b, b + size)` of `t`, the windows
//!   `[b, b + k * step)` for every `k` with `b + k * step > t`.
//! - `SESSION(gap)` (optionally `PARTITION BY` columns): rows at most `gap` apart form one
//!   session `[first row, last row + gap)`; a row that bridges two sessions merges them. Rows
//!   exactly `gap` apart are one session: their windows `[t, t + gap)` touch, and Flink merges
//!   windows that intersect (`TimeWindow.intersects`: `start <= other.end && end >=
//!   other.start`). Without PARTITION BY, sessions span all rows (SQL.md), even when grouped by
//!   a key.
//!
//! All intervals are whole milliseconds and positive. A window is closed (Flink: it fires) once
//! the watermark reaches its `window_time`.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, TimestampMillisecondArray, UInt32Array};
use arrow::compute::{cast, take};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::error::{Result, WeirError};

/// Which window function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    Tumble,
    Hop,
    Cumulate,
    Session,
}

impl WindowKind {
    /// The SQL name.
    pub fn name(self) -> &'static str {
        match self {
            WindowKind::Tumble => "TUMBLE",
            WindowKind::Hop => "HOP",
            WindowKind::Cumulate => "CUMULATE",
            WindowKind::Session => "SESSION",
        }
    }
}

/// A window function call, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowSpec {
    pub kind: WindowKind,
    /// The input table.
    pub table: String,
    /// The event-time column (`DESCRIPTOR(col)`) and its index in the input.
    pub time_column: String,
    pub time_index: usize,
    /// Window length, ms.
    pub size_ms: i64,
    /// HOP's slide or CUMULATE's step, ms (TUMBLE: the size).
    pub slide_ms: i64,
    /// Alignment offset, ms.
    pub offset_ms: i64,
    /// SESSION's `PARTITION BY` column indexes.
    pub partition_by: Vec<usize>,
    /// How long a fired window stays open for late rows, ms (`table.exec.emit.allow-lateness`).
    pub allowed_lateness_ms: i64,
    /// HOP and CUMULATE under a sliced window aggregate ([`crate::plan::slicing`]): each row
    /// gets only its slice ([`WindowSpec::slice_of`]), whose bounds fill the window columns, and
    /// is late only once every window of that slice has fired. SESSION under a session window
    /// aggregate: each row gets its own lone session `[t, t + gap)` (what
    /// [`WindowSpec::windows`] gives), with no merging, and is late when that session's
    /// `window_time` is at or below the watermark; the aggregate merges the sessions.
    pub slices: bool,
    /// Under a window join: every row gets its windows and none is dropped here; the join,
    /// whose watermark is the minimum of both inputs', drops and counts the late rows (SQL.md:
    /// "an operator with two inputs uses the minimum of their watermarks, for firing and for
    /// lateness"; Flink fuses the window TVF into its WindowJoinOperator, which decides
    /// lateness by the join's watermark).
    pub late_in_join: bool,
}

impl WindowSpec {
    /// Validates the intervals of a call.
    ///
    /// # Errors
    /// `Plan` naming the function and the bad interval: non-positive slide, step or size, or a
    /// size that is not a multiple of the slide or step.
    pub fn try_new(
        kind: WindowKind,
        table: String,
        time_column: String,
        time_index: usize,
        intervals: &[i64],
    ) -> Result<Self> {
        let name = kind.name();
        if kind == WindowKind::Session {
            let [gap] = intervals else {
                return Err(WeirError::plan(format!(
                    "SESSION takes (TABLE t [PARTITION BY cols], DESCRIPTOR(time_column), gap); got {} interval arguments",
                    intervals.len()
                )));
            };
            if *gap <= 0 {
                return Err(WeirError::plan(format!("SESSION gap must be a positive interval, got {gap} ms")));
            }
            return Ok(Self {
                kind,
                table,
                time_column,
                time_index,
                size_ms: *gap,
                slide_ms: *gap,
                offset_ms: 0,
                partition_by: vec![],
                allowed_lateness_ms: 0,
                slices: false,
                late_in_join: false,
            });
        }
        let (slide_ms, size_ms, offset_ms) = match (kind, intervals) {
            (WindowKind::Tumble, [size]) => (*size, *size, 0),
            (WindowKind::Tumble, [size, offset]) => (*size, *size, *offset),
            (WindowKind::Hop | WindowKind::Cumulate, [slide, size]) => (*slide, *size, 0),
            (WindowKind::Hop | WindowKind::Cumulate, [slide, size, offset]) => (*slide, *size, *offset),
            _ => {
                return Err(WeirError::plan(format!(
                    "{name} takes (TABLE t, DESCRIPTOR(time_column), {}[, offset]); got {} interval arguments",
                    if kind == WindowKind::Tumble { "size" } else if kind == WindowKind::Hop { "slide, size" } else { "step, size" },
                    intervals.len()
                )))
            }
        };
        let slide_name = if kind == WindowKind::Cumulate { "step" } else { "slide" };
        if kind != WindowKind::Tumble && slide_ms <= 0 {
            return Err(WeirError::plan(format!("{name} {slide_name} must be a positive interval, got {slide_ms} ms")));
        }
        if size_ms <= 0 {
            return Err(WeirError::plan(format!("{name} size must be a positive interval, got {size_ms} ms")));
        }
        if size_ms % slide_ms != 0 {
            return Err(WeirError::plan(format!(
                "{name} size ({size_ms} ms) must be a whole multiple of the {slide_name} ({slide_ms} ms)"
            )));
        }
        Ok(Self {
            kind,
            table,
            time_column,
            time_index,
            size_ms,
            slide_ms,
            offset_ms,
            partition_by: vec![],
            allowed_lateness_ms: 0,
            slices: false,
            late_in_join: false,
        })
    }

    /// The windows `(start, end)` (ms) that contain time `t` (ms), earliest end first.
    pub fn windows(&self, t: i64, out: &mut Vec<(i64, i64)>) {
        out.clear();
        let align = |t: i64, unit: i64| (t - self.offset_ms).div_euclid(unit) * unit + self.offset_ms;
        match self.kind {
            WindowKind::Tumble => {
                let s = align(t, self.size_ms);
                out.push((s, s + self.size_ms));
            }
            WindowKind::Hop => {
                let last = align(t, self.slide_ms);
                let n = self.size_ms / self.slide_ms;
                for k in (0..n).rev() {
                    let s = last - k * self.slide_ms;
                    out.push((s, s + self.size_ms));
                }
            }
            WindowKind::Session => {
                // A lone row's own session; merging is the session assigner's work.
                out.push((t, t + self.size_ms));
            }
            WindowKind::Cumulate => {
                let base = align(t, self.size_ms);
                let n = self.size_ms / self.slide_ms;
                for k in 1..=n {
                    let end = base + k * self.slide_ms;
                    if end > t {
                        out.push((base, end));
                    }
                }
            }
        }
    }

    /// The slice `(start, end)` (ms) that contains time `t` (ms): HOP's slide or CUMULATE's
    /// step, aligned like the windows. Every window of `t` is a union of whole slices.
    pub fn slice_of(&self, t: i64) -> (i64, i64) {
        let start = (t - self.offset_ms).div_euclid(self.slide_ms) * self.slide_ms + self.offset_ms;
        (start, start + self.slide_ms)
    }

    /// The end (ms) of the last window that contains time `t`: once the watermark reaches it
    /// minus 1 ms, `t` is late for every window (HOP, CUMULATE and TUMBLE).
    pub fn last_window_end(&self, t: i64) -> i64 {
        match self.kind {
            WindowKind::Hop => self.slice_of(t).0 + self.size_ms,
            _ => (t - self.offset_ms).div_euclid(self.size_ms) * self.size_ms + self.offset_ms + self.size_ms,
        }
    }

    /// The output schema: the input's columns then `window_start`, `window_end`, `window_time`
    /// (TIMESTAMP(3), with the time column's time zone).
    pub fn output_schema(&self, input: &Schema) -> SchemaRef {
        let tz = match input.field(self.time_index).data_type() {
            DataType::Timestamp(_, tz) => tz.clone(),
            _ => None,
        };
        let t = DataType::Timestamp(TimeUnit::Millisecond, tz);
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("window_start", t.clone(), false));
        fields.push(Field::new("window_end", t.clone(), false));
        fields.push(Field::new("window_time", t, false));
        Arc::new(Schema::new(fields))
    }

    /// Assigns windows to the rows of `batch`: one output row per (row, window) for which
    /// `keep(window_end)` holds, with the window columns appended. Returns the output and, for
    /// each output row, its input row. Rows with a NULL time belong to no window.
    pub fn assign(
        &self,
        batch: &RecordBatch,
        schema: &SchemaRef,
        mut keep: impl FnMut(usize, i64) -> bool,
    ) -> Result<(RecordBatch, Vec<u32>)> {
        let times = cast(batch.column(self.time_index), &DataType::Timestamp(TimeUnit::Millisecond, None))?;
        let times = times
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .ok_or_else(|| WeirError::internal("window time column did not cast to TIMESTAMP(3)"))?;
        let mut rows = Vec::with_capacity(batch.num_rows());
        let mut kept = Vec::with_capacity(batch.num_rows());
        let mut windows = Vec::new();
        for row in 0..batch.num_rows() {
            if times.is_null(row) {
                continue;
            }
            self.windows(times.value(row), &mut windows);
            for w in &windows {
                if keep(row, w.1) {
                    rows.push(row as u32);
                    kept.push(*w);
                }
            }
        }
        let out = windowed_rows(batch, schema, &rows, &kept)?;
        Ok((out, rows))
    }
}

impl WindowSpec {
    /// Batch SESSION windows over all of `batch`: each row with its session, by partition.
    pub fn assign_sessions(&self, batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
        let times = cast(batch.column(self.time_index), &DataType::Timestamp(TimeUnit::Millisecond, None))?;
        let times = times
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .ok_or_else(|| WeirError::internal("session time column did not cast to TIMESTAMP(3)"))?;
        let keys = if self.partition_by.is_empty() {
            vec![Vec::new(); batch.num_rows()]
        } else {
            let cols: Vec<ArrayRef> = self.partition_by.iter().map(|i| Arc::clone(batch.column(*i))).collect();
            let codec = crate::state::RowCodec::try_new(cols.iter().map(|c| c.data_type().clone()).collect())?;
            codec.encode_rows(&cols, batch.num_rows())?
        };
        let mut by_key: std::collections::BTreeMap<&[u8], Vec<(i64, u32)>> = Default::default();
        for row in 0..batch.num_rows() {
            if times.is_valid(row) {
                by_key.entry(keys[row].as_slice()).or_default().push((times.value(row), row as u32));
            }
        }
        let mut rows = Vec::new();
        let mut windows = Vec::new();
        for (_, mut members) in by_key {
            members.sort();
            let ts: Vec<i64> = members.iter().map(|m| m.0).collect();
            for (m, w) in members.iter().zip(sessions_of(&ts, self.size_ms)) {
                rows.push(m.1);
                windows.push(w);
            }
        }
        windowed_rows(batch, schema, &rows, &windows)
    }
}

/// The session `(start, end)` of each of `times` (sorted ascending) with gap `gap_ms`: rows at
/// most `gap_ms` apart share one (see the module docs on touching sessions).
pub fn sessions_of(times: &[i64], gap_ms: i64) -> Vec<(i64, i64)> {
    let mut out = vec![(0, 0); times.len()];
    let mut i = 0;
    while i < times.len() {
        let mut j = i;
        while j + 1 < times.len() && times[j + 1] <= times[j] + gap_ms {
            j += 1;
        }
        for o in &mut out[i..=j] {
            *o = (times[i], times[j] + gap_ms);
        }
        i = j + 1;
    }
    out
}

/// `batch`'s rows `rows`, each with the window columns of `windows`.
pub fn windowed_rows(batch: &RecordBatch, schema: &SchemaRef, rows: &[u32], windows: &[(i64, i64)]) -> Result<RecordBatch> {
    let idx = UInt32Array::from(rows.to_vec());
    let mut columns: Vec<ArrayRef> =
        batch.columns().iter().map(|c| take(c.as_ref(), &idx, None)).collect::<std::result::Result<_, _>>()?;
    let window_type = schema.field(schema.fields().len() - 1).data_type().clone();
    let starts: Vec<i64> = windows.iter().map(|w| w.0).collect();
    let ends: Vec<i64> = windows.iter().map(|w| w.1).collect();
    let times: Vec<i64> = windows.iter().map(|w| w.1 - 1).collect();
    for values in [starts, ends, times] {
        columns.push(cast(&(Arc::new(TimestampMillisecondArray::from(values)) as ArrayRef), &window_type)?);
    }
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        columns,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows.len())),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_merge_within_the_gap() {
        let m = 60_000;
        assert_eq!(
            sessions_of(&[0, 10 * m, 40 * m], 20 * m),
            vec![(0, 30 * m), (0, 30 * m), (40 * m, 60 * m)]
        );
        // Exactly one gap apart: the windows [0, 10) and [10, 20) touch and merge (Flink).
        assert_eq!(sessions_of(&[0, 10 * m, 21 * m], 10 * m), vec![(0, 20 * m), (0, 20 * m), (21 * m, 31 * m)]);
    }

    const MIN: i64 = 60_000;

    fn spec(kind: WindowKind, intervals: &[i64]) -> WindowSpec {
        WindowSpec::try_new(kind, "t".into(), "ts".into(), 0, intervals).expect("valid")
    }

    #[test]
    fn tumble_hop_cumulate_windows() {
        let mut w = Vec::new();
        spec(WindowKind::Tumble, &[30 * MIN]).windows(14 * MIN, &mut w);
        assert_eq!(w, vec![(0, 30 * MIN)]);
        spec(WindowKind::Tumble, &[30 * MIN, 13 * MIN]).windows(0, &mut w);
        assert_eq!(w, vec![(-17 * MIN, 13 * MIN)]);
        spec(WindowKind::Hop, &[15 * MIN, 30 * MIN]).windows(14 * MIN, &mut w);
        assert_eq!(w, vec![(-15 * MIN, 15 * MIN), (0, 30 * MIN)]);
        // A row exactly on a bound belongs to the window that starts there.
        spec(WindowKind::Hop, &[15 * MIN, 30 * MIN]).windows(15 * MIN, &mut w);
        assert_eq!(w, vec![(0, 30 * MIN), (15 * MIN, 45 * MIN)]);
        spec(WindowKind::Cumulate, &[10 * MIN, 30 * MIN]).windows(14 * MIN, &mut w);
        assert_eq!(w, vec![(0, 20 * MIN), (0, 30 * MIN)]);
    }

    #[test]
    fn bad_intervals_are_named() {
        let e = WindowSpec::try_new(WindowKind::Hop, "t".into(), "ts".into(), 0, &[0, 10 * MIN]).expect_err("zero slide");
        assert!(e.to_string().contains("HOP slide"), "{e}");
        let e = WindowSpec::try_new(WindowKind::Hop, "t".into(), "ts".into(), 0, &[MIN, -10 * MIN]).expect_err("negative size");
        assert!(e.to_string().contains("HOP size"), "{e}");
    }
}

/// A window TVF applied to a table, as DataFusion sees it: a table whose scan assigns windows
/// (batch queries), and which the stream planner turns into a [`WindowSpec`] over the input's
/// stream.
#[derive(Debug)]
pub struct WindowTable {
    pub spec: WindowSpec,
    /// The input table's provider.
    pub input: Arc<dyn datafusion::catalog::TableProvider>,
    schema: SchemaRef,
}

impl WindowTable {
    /// The window TVF `spec` over `input`.
    pub fn new(spec: WindowSpec, input: Arc<dyn datafusion::catalog::TableProvider>) -> Self {
        let schema = spec.output_schema(input.schema().as_ref());
        Self { spec, input, schema }
    }
}

#[async_trait::async_trait]
impl datafusion::catalog::TableProvider for WindowTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> datafusion::datasource::TableType {
        datafusion::datasource::TableType::View
    }

    async fn scan(
        &self,
        state: &dyn datafusion::catalog::Session,
        projection: Option<&Vec<usize>>,
        _filters: &[datafusion::logical_expr::Expr],
        _limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        let input = self.input.scan(state, None, &[], None).await?;
        let batches = datafusion::physical_plan::collect(input, state.task_ctx()).await?;
        if self.spec.kind == WindowKind::Session {
            let all = arrow::compute::concat_batches(&self.input.schema(), &batches)?;
            let out = self
                .spec
                .assign_sessions(&all, &self.schema)
                .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
            return Ok(datafusion::datasource::memory::MemorySourceConfig::try_new_exec(
                &[vec![out]],
                Arc::clone(&self.schema),
                projection.cloned(),
            )?);
        }
        let mut out = Vec::with_capacity(batches.len());
        for b in &batches {
            let (windowed, _) = self
                .spec
                .assign(b, &self.schema, |_, _| true)
                .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
            out.push(windowed);
        }
        Ok(datafusion::datasource::memory::MemorySourceConfig::try_new_exec(
            &[out],
            Arc::clone(&self.schema),
            projection.cloned(),
        )?)
    }
}
