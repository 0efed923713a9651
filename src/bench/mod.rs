//! Benchmarks run by `weir bench ...`: they drive a database in-process through the same
//! statement path the Postgres frontend uses, and report rates.
pub mod insert;
pub mod jobs;
pub mod kafka;
pub mod nexmark;
pub mod nexmark_gen;
pub mod reads;
pub mod restart;
pub mod window;

use std::fmt;

/// What one benchmark run measured.
#[derive(Debug)]
pub struct Report {
    /// Rows processed.
    pub rows: u64,
    /// Wall time of the measured statements, seconds.
    pub seconds: f64,
    /// Peak resident set size of the process, in bytes (Linux `VmHWM`), if known.
    pub peak_rss_bytes: Option<u64>,
    /// The most entries the measured view's operator state tables held after any statement,
    /// if measured (bounded state stays flat however long the run).
    pub peak_state_entries: Option<u64>,
}

impl Report {
    /// A report of `rows` in `seconds`, with the process's peak RSS now.
    pub fn new(rows: u64, seconds: f64) -> Self {
        Self { rows, seconds, peak_rss_bytes: peak_rss_bytes(), peak_state_entries: None }
    }

    /// Rows per second.
    pub fn rows_per_second(&self) -> f64 {
        self.rows as f64 / self.seconds
    }
}

/// `N rows in S s = R rows/s; peak RSS M MiB`, and `(debug build)` when it is one.
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rss = match self.peak_rss_bytes {
            Some(b) => format!("{:.0} MiB", b as f64 / 1_048_576.0),
            None => "unknown".into(),
        };
        write!(
            f,
            "{} rows in {:.2} s = {:.0} rows/s; peak RSS {rss}{}{}",
            self.rows,
            self.seconds,
            self.rows_per_second(),
            match self.peak_state_entries {
                Some(n) => format!("; peak operator state {n} entries"),
                None => String::new(),
            },
            if cfg!(debug_assertions) { " (debug build)" } else { "" }
        )
    }
}

/// The process's peak resident set size (Linux `/proc/self/status` `VmHWM`).
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// CPU seconds (user + system) of this process so far, all threads, from /proc/self/stat
/// (clock ticks of 1/100 s, the Linux default).
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// Waits until every source task of the database has read its (bounded) input and, for a job
/// on a thread of its own, committed it ([`crate::sql::Database::sources_finished`], polled
/// every 10 ms: a read lock, no query, so the polling costs the run nothing measurable).
///
/// # Errors
/// `Execution` when a job failed, or when that takes longer than `limit`.
pub async fn sources_finished(db: &crate::sql::Database, limit: std::time::Duration) -> crate::error::Result<()> {
    let deadline = std::time::Instant::now() + limit;
    while !db.sources_finished().await? {
        if std::time::Instant::now() > deadline {
            return Err(crate::error::WeirError::execution(format!("the sources did not finish within {} s", limit.as_secs())));
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    Ok(())
}

/// The value of a one-row, one-BIGINT result (`SELECT CAST(COUNT(*) AS BIGINT) ...`), if it is
/// one.
pub fn single_i64(result: &crate::sql::StatementResult) -> Option<i64> {
    use arrow::array::{Array, Int64Array};
    match result {
        crate::sql::StatementResult::Rows { batches, .. } => batches
            .iter()
            .find(|b| b.num_rows() > 0)
            .and_then(|b| b.column(0).as_any().downcast_ref::<Int64Array>().filter(|a| a.is_valid(0)).map(|a| a.value(0))),
        _ => None,
    }
}
