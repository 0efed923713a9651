//! `weir bench restart`: how soon a restarted server answers, and what it holds in memory,
//! whatever the size of its state (issue 14: state is read lazily, through the bounded cache).

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Result, WeirError};
use crate::sql::{Database, OpenOptions, Session};
use crate::state::StoreOptions;

/// What a restart measured.
#[derive(Debug)]
pub struct RestartReport {
    /// The query that built the state, and over how many events.
    pub query: String,
    pub events: u64,
    /// Bytes of the database directory after the first run.
    pub state_bytes: u64,
    /// From opening the database to opening it done (jobs restarted, sources resumed).
    pub open: Duration,
    /// From opening the database to the answer of its first query (`SELECT 1`).
    pub first_query: Duration,
    /// Peak RSS of this process, which did nothing before the restart, 5 s after it.
    pub peak_rss_bytes: Option<u64>,
}

impl fmt::Display for RestartReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |b: u64| b as f64 / 1_048_576.0;
        write!(
            f,
            "restart after {} over {} events ({:.0} MiB on disk): opened in {:.0} ms, first query answered after {:.0} ms; peak RSS {}{}",
            self.query,
            self.events,
            mib(self.state_bytes),
            self.open.as_secs_f64() * 1000.0,
            self.first_query.as_secs_f64() * 1000.0,
            self.peak_rss_bytes.map_or("unknown".into(), |b| format!("{:.0} MiB", mib(b))),
            if cfg!(debug_assertions) { " (debug build)" } else { "" }
        )
    }
}

/// Runs Nexmark `query` over `events` events into a blackhole in a child process that keeps
/// its database under `data_dir`, then opens that database here, as `weir serve` would after
/// a restart, and times its first answer.
///
/// # Errors
/// `Execution` when the child run fails; any error opening the database or of the query.
pub async fn run(data_dir: &Path, query: &str, events: u64, state_cache_bytes: u64) -> Result<RestartReport> {
    let exe = std::env::current_exe().map_err(|e| WeirError::execution(format!("cannot find the weir binary: {e}")))?;
    let out = std::process::Command::new(exe)
        .args(["bench", "nexmark", "--keep", "--query", query, "--events", &events.to_string()])
        .args(["--state-cache-size", &state_cache_bytes.to_string(), "--data-dir"])
        .arg(data_dir)
        .output()
        .map_err(|e| WeirError::execution(format!("cannot run the first run: {e}")))?;
    if !out.status.success() {
        return Err(WeirError::execution(format!(
            "the first run failed: {}",
            String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or_default()
        )));
    }
    println!("first run: {}", String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default());
    let state_bytes = dir_bytes(data_dir);
    let start = Instant::now();
    let options = OpenOptions { store: StoreOptions { state_cache_bytes }, ..OpenOptions::default() };
    let db = Database::open_with(data_dir, options)?;
    let open = start.elapsed();
    db.execute(&mut Session::default(), "SELECT 1").await?;
    let first_query = start.elapsed();
    // The restarted job resumes (its sources have ended): what it holds once settled.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let peak_rss_bytes = crate::bench::peak_rss_bytes();
    drop(db);
    let _ = std::fs::remove_dir_all(data_dir);
    Ok(RestartReport { query: query.to_string(), events, state_bytes, open, first_query, peak_rss_bytes })
}

/// The bytes of the files under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
