//! `weir bench jobs`: identical jobs started together in one database, against one such job
//! alone.
//!
//! Each run opens a fresh database as `weir serve` does (the engine reads the sources itself,
//! independent jobs on threads of their own), creates the Nexmark tables over a bounded
//! generator, starts `jobs` copies of `INSERT INTO` a blackhole `SELECT` the query (each reads
//! its own source tasks, as jobs do), and measures the wall time until every source task has
//! read its input and committed it (`weir_sources.finished`, polled every 20 ms). The figure to
//! look at is the ratio of the two runs' wall times: 1.0 when the jobs run side by side on
//! cores of their own, `jobs` when they take turns on one.

use std::time::{Duration, Instant};

use crate::bench::{cpu_seconds, sources_finished};
use crate::bench::nexmark::{create_generator_tables, query_text};
use crate::error::{Result, WeirError};
use crate::sql::{Database, OpenOptions, Session};

/// What one run measured.
#[derive(Debug, Clone)]
pub struct JobsReport {
    /// Jobs run together.
    pub jobs: usize,
    /// Wall time from the first job's start to the last source's commit, seconds.
    pub seconds: f64,
    /// CPU seconds of the process (user + system) in that time.
    pub cpu_seconds: f64,
}

impl std::fmt::Display for JobsReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} job(s): {:.2} s wall, {:.2} CPU s", self.jobs, self.seconds, self.cpu_seconds)
    }
}

/// Runs `jobs` copies of Nexmark `query` over `events` events in a fresh database under
/// `data_dir` (emptied first, and removed after), each job at `parallelism` (`weir serve
/// --workers`; the default: the number of cores).
///
/// # Errors
/// Any statement's error; `Execution` when the sources have not finished within 30 minutes.
pub async fn run(data_dir: &std::path::Path, query: &str, events: u64, jobs: usize, parallelism: Option<usize>) -> Result<JobsReport> {
    let sql = query_text(query)?;
    let _ = std::fs::remove_dir_all(data_dir);
    let mut options = OpenOptions::default();
    if let Some(p) = parallelism {
        options.workers = p;
    }
    let db = Database::open_with(data_dir, options)?;
    let mut session = Session::default();
    create_generator_tables(&db, &mut session, events).await?;
    let cpu_before = cpu_seconds();
    let start = Instant::now();
    for _ in 0..jobs {
        db.execute(&mut session, &format!("INSERT INTO nexmark_sink {sql}")).await?;
    }
    sources_finished(&db, Duration::from_secs(1800))
        .await
        .map_err(|e| WeirError::execution(format!("{jobs} x {query}: {e}")))?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds().zip(cpu_before).map(|(a, b)| a - b).unwrap_or(f64::NAN);
    drop(db);
    let _ = std::fs::remove_dir_all(data_dir);
    Ok(JobsReport { jobs, seconds, cpu_seconds: cpu })
}
