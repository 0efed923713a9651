//! `weir bench window`: rows through a window aggregation with EMIT ON WINDOW CLOSE, so the
//! cost per row of TUMBLE and HOP can be compared on the same input.
//!
//! Rows: `ts` = 2022-01-01 plus `i * 100 ms` (10 rows per second of event time), `k = i %
//! keys`, `v = i`, inserted `--batch` rows per statement (each statement moves the watermark,
//! so windows close as the run goes and state stays bounded by the open windows).

use std::time::Instant;

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

/// Runs the benchmark in a fresh database under `data_dir`.
pub async fn run(data_dir: &std::path::Path, window: WindowBench, rows: u64, batch: u64, keys: u64) -> Result<Report> {
    let _ = std::fs::remove_dir_all(data_dir);
    let db = Database::open(data_dir)?;
    let mut session = Session::default();
    let tvf = match window {
        WindowBench::Tumble { size_s } => {
            format!("TUMBLE(TABLE bench_events, DESCRIPTOR(ts), INTERVAL '{size_s}' SECOND)")
        }
        WindowBench::Hop { slide_s, size_s } => format!(
            "HOP(TABLE bench_events, DESCRIPTOR(ts), INTERVAL '{slide_s}' SECOND, INTERVAL '{size_s}' SECOND)"
        ),
    };
    for sql in [
        "CREATE TABLE bench_events (ts TIMESTAMP(3), k BIGINT, v BIGINT, WATERMARK FOR ts AS ts)".to_string(),
        format!(
            "CREATE MATERIALIZED VIEW bench_windows AS SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS s \
             FROM TABLE({tvf}) GROUP BY window_start, window_end, k EMIT ON WINDOW CLOSE"
        ),
    ] {
        db.execute(&mut session, &sql).await?;
    }
    let start = Instant::now();
    let mut done = 0;
    while done < rows {
        let n = batch.min(rows - done);
        let sql = format!(
            "INSERT INTO bench_events SELECT CAST(to_timestamp_millis(1640995200000 + value * 100) AS TIMESTAMP(3)), \
             value % {keys}, value FROM generate_series({done}, {}) ",
            done + n - 1
        );
        db.execute(&mut session, &sql).await?;
        done += n;
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(Report::new(rows, seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn small_runs_finish() -> Result<()> {
        let dir = std::env::temp_dir().join(format!("weir-bench-window-{}", std::process::id()));
        let report = run(&dir, WindowBench::Hop { slide_s: 10, size_s: 60 }, 2_000, 500, 3).await?;
        assert_eq!(report.rows, 2_000);
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }
}
