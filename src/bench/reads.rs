//! `weir bench reads`: the latency of a small ad-hoc read while a heavy job runs in the same
//! database.
//!
//! The database is opened as `weir serve` opens it (its source thread reads the connector
//! sources and commits every [`crate::engine::driver::CHECKPOINT_INTERVAL`]). A plain table of
//! two rows feeds a `GROUP BY` materialized view; `SELECT count(*)` on that view is timed, one
//! query every 10 ms, first for `idle_seconds` with nothing else running, then for
//! `busy_seconds` while Nexmark q20 (bid joined with auction) reads an unbounded `nexmark`
//! generator at full speed into a blackhole sink. Queries go through [`Database::execute`], the
//! path the Postgres frontend calls for each statement.

use std::time::{Duration, Instant};

use crate::bench::nexmark::{create_generator_tables, query_text};
use crate::bench::single_i64;
use crate::error::{Result, WeirError};
use crate::sql::{Database, Session};

/// Latencies of one phase, milliseconds.
#[derive(Debug, Clone)]
pub struct Latencies {
    pub queries: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latencies {
    fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort();
        let at = |q: f64| {
            let i = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len().max(1)) - 1;
            samples.get(i).map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
        };
        Self { queries: samples.len(), p50_ms: at(0.50), p99_ms: at(0.99), max_ms: at(1.0) }
    }
}

impl std::fmt::Display for Latencies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} queries, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms", self.queries, self.p50_ms, self.p99_ms, self.max_ms)
    }
}

/// What [`run`] measured.
#[derive(Debug, Clone)]
pub struct ReadsReport {
    /// Reads with no job running.
    pub idle: Latencies,
    /// Reads while the q20 job runs.
    pub busy: Latencies,
    /// Rows the q20 job's sources read during the busy phase, per second: the job's speed.
    pub job_rows_per_second: f64,
}

/// Runs the benchmark in a fresh database under `data_dir` (emptied first).
///
/// # Errors
/// Any statement's error; `Internal` when the timed query does not return the view's two
/// groups (the read must be right, not only fast).
pub async fn run(data_dir: &std::path::Path, idle_seconds: u64, busy_seconds: u64) -> Result<ReadsReport> {
    let _ = std::fs::remove_dir_all(data_dir);
    let db = Database::open(data_dir)?;
    let mut session = Session::default();
    for stmt in [
        "CREATE TABLE small (k INT, v INT)",
        "INSERT INTO small VALUES (1, 10), (2, 20)",
        "CREATE MATERIALIZED VIEW small_counts AS SELECT k, COUNT(*) AS n FROM small GROUP BY k",
    ] {
        db.execute(&mut session, stmt).await?;
    }
    let idle = time_reads(&db, Duration::from_secs(idle_seconds)).await?;

    create_generator_tables(&db, &mut session, 0).await?;
    db.execute(&mut session, &format!("INSERT INTO nexmark_sink {}", query_text("q20")?)).await?;
    let rows_before = rows_read(&db).await?;
    let start = Instant::now();
    let busy = time_reads(&db, Duration::from_secs(busy_seconds)).await?;
    let job_rows_per_second = (rows_read(&db).await? - rows_before) as f64 / start.elapsed().as_secs_f64();
    drop(db);
    let _ = std::fs::remove_dir_all(data_dir);
    Ok(ReadsReport { idle, busy, job_rows_per_second })
}

/// Times `SELECT count(*) FROM small_counts` every 10 ms for `phase`.
async fn time_reads(db: &Database, phase: Duration) -> Result<Latencies> {
    let mut session = Session::default();
    let mut samples = Vec::new();
    let end = Instant::now() + phase;
    while Instant::now() < end {
        let start = Instant::now();
        let result = db.execute(&mut session, "SELECT count(*) FROM small_counts").await?;
        samples.push(start.elapsed());
        let n = single_i64(&result);
        if n != Some(2) {
            return Err(WeirError::internal(format!("SELECT count(*) FROM small_counts returned {result:?}, not 2")));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(Latencies::of(samples))
}

/// Rows read so far by every source task (`weir_sources.rows_read`).
async fn rows_read(db: &Database) -> Result<u64> {
    let mut session = Session::default();
    let result = db.execute(&mut session, "SELECT CAST(COALESCE(SUM(rows_read), 0) AS BIGINT) FROM weir_sources").await?;
    single_i64(&result).map(|n| n as u64).ok_or_else(|| WeirError::internal("SELECT from weir_sources returned no number"))
}
