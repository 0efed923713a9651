//! `weir bench window`: rows through a window aggregation with EMIT ON WINDOW CLOSE, so the
//! cost per row of TUMBLE and HOP can be compared on the same input.
//!
//! Rows: `ts` = 2022-01-01 plus `i * 1000 / rate` ms (`--rate` rows per second of event time),
//! `k = i % keys`, `v = i`, inserted `--batch` rows per statement (each statement moves the
//! watermark, so windows close as the run goes and state stays bounded by the open windows).
//!
//! HOP(slide, size) emits a window per key and slide while the key has rows in the last
//! `size`; TUMBLE one per key and size. So HOP's output per input row is about
//! `keys / (rate * slide)` (10 at 100 keys, 10 rows/s and a 1 s slide; 0.1 at 1000 rows/s),
//! and at a low rate the emitted windows, not the rows, are what HOP's cost is made of.
//!
//! TUMBLE runs WindowAssign + GroupAggregate; HOP runs sliced (one accumulator per key and
//! slide, [`crate::plan::slicing`]). A HOP view emits `size / slide` times the windows of a
//! TUMBLE view of the same size, so its output (materialized into the view) grows with that
//! ratio times the keys. [`Sink::Blackhole`] measures the window operator alone: the same
//! query as an `INSERT INTO` job into a `blackhole` table, which drops the windows it gets. After each statement, outside the timed part, the entries of the
//! view's operator state tables are counted: the report gives the largest count, which stays
//! flat for bounded state however long the run.

use std::time::{Duration, Instant};

use crate::bench::Report;
use crate::error::Result;
use crate::sql::{Database, Session};

/// Which window to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowBench {
    /// TUMBLE(size).
    Tumble { size_s: u64 },
    /// HOP(slide, size).
    Hop { slide_s: u64, size_s: u64 },
}

/// Where the windows go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sink {
    /// A materialized view `bench_windows` that stores them.
    View,
    /// An `INSERT INTO` job into a `blackhole` table: emitted, not stored.
    Blackhole,
}

/// The measured view.
const VIEW: &str = "bench_windows";

/// The window TVF of `window` over `bench_events`.
fn tvf(window: WindowBench) -> String {
    match window {
        WindowBench::Tumble { size_s } => {
            format!("TUMBLE(TABLE bench_events, DESCRIPTOR(ts), INTERVAL '{size_s}' SECOND)")
        }
        WindowBench::Hop { slide_s, size_s } => format!(
            "HOP(TABLE bench_events, DESCRIPTOR(ts), INTERVAL '{slide_s}' SECOND, INTERVAL '{size_s}' SECOND)"
        ),
    }
}

/// The statements that create the measured job of `window` into `sink`.
fn job_sql(window: WindowBench, sink: Sink) -> Vec<String> {
    match sink {
        Sink::View => vec![view_sql(window)],
        Sink::Blackhole => vec![
            "CREATE TABLE bench_out (window_start TIMESTAMP(3), window_end TIMESTAMP(3), k BIGINT, n BIGINT, s BIGINT)              WITH ('connector' = 'blackhole')"
                .to_string(),
            format!(
                "INSERT INTO bench_out SELECT window_start, window_end, k, COUNT(*), SUM(v)                  FROM TABLE({}) GROUP BY window_start, window_end, k",
                tvf(window)
            ),
        ],
    }
}

/// `CREATE MATERIALIZED VIEW bench_windows ...` for `window`.
fn view_sql(window: WindowBench) -> String {
    let tvf = tvf(window);
    format!(
        "CREATE MATERIALIZED VIEW {VIEW} AS SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS s \
         FROM TABLE({tvf}) GROUP BY window_start, window_end, k EMIT ON WINDOW CLOSE"
    )
}

const TABLE_SQL: &str = "CREATE TABLE bench_events (ts TIMESTAMP(3), k BIGINT, v BIGINT, WATERMARK FOR ts AS ts)";

/// The input of a run.
#[derive(Debug, Clone, Copy)]
pub struct Input {
    /// Rows in all.
    pub rows: u64,
    /// Rows per INSERT statement (one epoch each).
    pub batch: u64,
    /// Distinct keys, `k = i % keys`.
    pub keys: u64,
    /// Rows per second of event time (at most 1000: one per ms).
    pub rate: u64,
}

/// Runs the benchmark in a fresh database under `data_dir`.
pub async fn run(data_dir: &std::path::Path, window: WindowBench, sink: Sink, input: Input) -> Result<Report> {
    let Input { rows, batch, keys, rate } = input;
    if rate == 0 || rate > 1000 {
        return Err(crate::error::WeirError::plan(format!("--rate {rate}: rows per second of event time must be 1 to 1000")));
    }
    let _ = std::fs::remove_dir_all(data_dir);
    let db = Database::open(data_dir)?;
    let mut session = Session::default();
    for sql in std::iter::once(TABLE_SQL.to_string()).chain(job_sql(window, sink)) {
        db.execute(&mut session, &sql).await?;
    }
    let mut measured = Duration::ZERO;
    let mut peak_state = 0;
    let mut done = 0;
    while done < rows {
        let n = batch.min(rows - done);
        let sql = format!(
            "INSERT INTO bench_events SELECT CAST(to_timestamp_millis(1640995200000 + value * 1000 / {rate}) AS TIMESTAMP(3)), \
             value % {keys}, value FROM generate_series({done}, {}) ",
            done + n - 1
        );
        let start = Instant::now();
        db.execute(&mut session, &sql).await?;
        measured += start.elapsed();
        peak_state = peak_state.max(operator_state_entries(&db).await?);
        done += n;
    }
    let mut report = Report::new(rows, measured.as_secs_f64());
    report.peak_state_entries = Some(peak_state);
    Ok(report)
}

/// Committed entries in the operator state tables of the view or job (not the view's rows).
async fn operator_state_entries(db: &Database) -> Result<u64> {
    let engine = db.engine().await?;
    let mut n = 0;
    let jobs = engine.catalog.relations.values().filter(|r| r.job.is_some() || r.name == VIEW);
    for id in jobs.flat_map(|r| r.operator_state.values()) {
        engine.store.scan(*id, |_, _| {
            n += 1;
            Ok(true)
        })?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn small_runs_finish() -> Result<()> {
        let dir = std::env::temp_dir().join(format!("weir-bench-window-{}", std::process::id()));
        for sink in [Sink::View, Sink::Blackhole] {
            let input = Input { rows: 2_000, batch: 500, keys: 3, rate: 10 };
            let report = run(&dir, WindowBench::Hop { slide_s: 10, size_s: 60 }, sink, input).await?;
            assert_eq!(report.rows, 2_000);
            // 3 keys, a row each 100 ms: slices of 10 s for the 60 s still open, and the watermark.
            let state = report.peak_state_entries.expect("measured");
            assert!(state > 0 && state <= 3 * 7 + 2, "{sink:?}: {state} entries");
        }
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hop_runs_sliced_and_tumble_does_not() -> Result<()> {
        let dir = std::env::temp_dir().join(format!("weir-bench-window-plan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let db = Database::open(&dir)?;
        let mut session = Session::default();
        db.execute(&mut session, TABLE_SQL).await?;
        for (window, sliced) in [
            (WindowBench::Hop { slide_s: 1, size_s: 3600 }, true),
            (WindowBench::Tumble { size_s: 3600 }, false),
        ] {
            let plan = format!("{:?}", db.execute(&mut session, &format!("EXPLAIN {}", view_sql(window))).await?);
            assert_eq!(plan.contains(crate::plan::slicing::NAME), sliced, "{window:?}: {plan}");
        }
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }
}
