//! `weir bench nexmark`: runs Nexmark queries (bench/nexmark/queries/qN.sql, built into the
//! binary) over the `nexmark` generator or over JSON files, to completion, and reports
//! events/s, CPU seconds, peak RSS and output rows.
//!
//! - Benchmark mode: each query runs as `INSERT INTO` a `blackhole` table (Nexmark's
//!   blackhole sink), so no result is stored. The database runs it as `weir serve` does: the
//!   engine reads the sources, a job over connector tables only runs on a thread of its own
//!   (`engine::runner`), committing every [`crate::engine::CHECKPOINT_INTERVAL`] (200 ms), as a
//!   checkpoint interval would, or sooner when an epoch's state writes reach the engine's bound
//!   ([`crate::engine::EPOCH_WRITE_BYTES`]).
//! - Check mode (`--check`): each query runs as a materialized view over the fixed input of
//!   bench/nexmark/expected (100 000 events at 1 000 events/s, seed default); the view's final
//!   rows, formatted and sorted as described in bench/nexmark/expected/README.md, must hash to
//!   the SHA-256 in bench/nexmark/expected/manifest.tsv, which an independent Python program
//!   (compute.py) computed from the same input.
//!
//! Events/s counts all events of the three tables (`--events`), as Nexmark does, over the wall
//! time from the job's start to the commit of its last input.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use arrow::util::display::{ArrayFormatter, FormatOptions};
use sha2::{Digest, Sha256};

use crate::bench::cpu_seconds;
use crate::error::{Result, WeirError};
use crate::sql::{Database, OpenOptions, Session, StatementResult};
use crate::state::StoreOptions;

/// The queries, by name, as stored in bench/nexmark/queries.
pub const QUERIES: &[(&str, &str)] = &[
    ("q0", include_str!("../../bench/nexmark/queries/q0.sql")),
    ("q1", include_str!("../../bench/nexmark/queries/q1.sql")),
    ("q2", include_str!("../../bench/nexmark/queries/q2.sql")),
    ("q3", include_str!("../../bench/nexmark/queries/q3.sql")),
    ("q4", include_str!("../../bench/nexmark/queries/q4.sql")),
    ("q5", include_str!("../../bench/nexmark/queries/q5.sql")),
    ("q6", include_str!("../../bench/nexmark/queries/q6.sql")),
    ("q7", include_str!("../../bench/nexmark/queries/q7.sql")),
    ("q8", include_str!("../../bench/nexmark/queries/q8.sql")),
    ("q9", include_str!("../../bench/nexmark/queries/q9.sql")),
    ("q10", include_str!("../../bench/nexmark/queries/q10.sql")),
    ("q11", include_str!("../../bench/nexmark/queries/q11.sql")),
    ("q12", include_str!("../../bench/nexmark/queries/q12.sql")),
    ("q13", include_str!("../../bench/nexmark/queries/q13.sql")),
    ("q14", include_str!("../../bench/nexmark/queries/q14.sql")),
    ("q15", include_str!("../../bench/nexmark/queries/q15.sql")),
    ("q16", include_str!("../../bench/nexmark/queries/q16.sql")),
    ("q17", include_str!("../../bench/nexmark/queries/q17.sql")),
    ("q18", include_str!("../../bench/nexmark/queries/q18.sql")),
    ("q19", include_str!("../../bench/nexmark/queries/q19.sql")),
    ("q20", include_str!("../../bench/nexmark/queries/q20.sql")),
    ("q21", include_str!("../../bench/nexmark/queries/q21.sql")),
    ("q22", include_str!("../../bench/nexmark/queries/q22.sql")),
];

/// Statements run before q13: its side-input table.
const Q13_SETUP: &str = include_str!("../../bench/nexmark/queries/q13.setup.sql");

/// Expected results of the check mode: query, rows, bytes, sha256.
const MANIFEST: &str = include_str!("../../bench/nexmark/expected/manifest.tsv");

/// The input of the check mode (bench/nexmark/expected/README.md).
pub const CHECK_EVENTS: u64 = 100_000;
/// The event-time rate of the check mode's input, events per second.
pub const CHECK_EVENT_RATE: f64 = 1000.0;

/// Where the events come from.
#[derive(Debug, Clone, PartialEq)]
pub enum NexmarkSource {
    /// The built-in `nexmark` connector.
    Generator,
    /// `person.json`, `auction.json`, `bid.json` in a directory (`weir bench nexmark-gen`, or
    /// the shared nexmark-gen files), read by the `filesystem` connector.
    Files(PathBuf),
}

/// One run's settings.
#[derive(Debug, Clone)]
pub struct NexmarkRun {
    pub events: u64,
    pub event_rate: f64,
    pub source: NexmarkSource,
    pub partitions: usize,
    pub check: bool,
    pub data_dir: PathBuf,
    /// The state cache's size, bytes.
    pub state_cache_bytes: u64,
    /// Leave the database in `data_dir` after the run (for `weir bench restart`).
    pub keep: bool,
    /// The job's parallelism (`parallelism.default`).
    pub parallelism: usize,
}

/// What one query's run measured.
#[derive(Debug, Clone)]
pub struct QueryReport {
    pub query: String,
    pub events: u64,
    pub seconds: f64,
    /// CPU seconds of the process (user + system) during the run.
    pub cpu_seconds: f64,
    pub peak_rss_bytes: Option<u64>,
    /// Changelog rows the sink received (benchmark mode) or rows of the final view (check).
    pub output_rows: u64,
    /// Check mode: whether the result matched the manifest.
    pub check: Option<std::result::Result<(), String>>,
}

impl QueryReport {
    /// Events per second of wall time.
    pub fn events_per_second(&self) -> f64 {
        self.events as f64 / self.seconds
    }

    /// The header of [`QueryReport::row`].
    pub const HEADER: &'static str =
        "| query | events | seconds | events/s | CPU s | events/s per CPU s | peak RSS MiB | output rows | check |\n|---|---|---|---|---|---|---|---|---|";

    /// One markdown table row.
    pub fn row(&self) -> String {
        let rss = self.peak_rss_bytes.map(|b| format!("{:.0}", b as f64 / 1_048_576.0)).unwrap_or("?".into());
        let check = match &self.check {
            None => "-".to_string(),
            Some(Ok(())) => "ok".to_string(),
            Some(Err(e)) => format!("FAILED: {e}"),
        };
        format!(
            "| {} | {} | {:.2} | {:.0} | {:.2} | {:.0} | {rss} | {} | {check} |",
            self.query,
            self.events,
            self.seconds,
            self.events_per_second(),
            self.cpu_seconds,
            self.events as f64 / self.cpu_seconds.max(1e-9),
            self.output_rows
        )
    }
}

/// The query text of `name` (`q0`..`q22`).
///
/// # Errors
/// `Plan` for an unknown name, listing the valid ones.
pub fn query_text(name: &str) -> Result<&'static str> {
    QUERIES.iter().find(|(n, _)| *n == name).map(|(_, q)| *q).ok_or_else(|| {
        WeirError::plan(format!(
            "no Nexmark query '{name}'; valid: {}",
            QUERIES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        ))
    })
}

/// The CREATE TABLE statements of person, auction and bid for `run`.
fn source_ddl(run: &NexmarkRun) -> Vec<String> {
    let columns = [
        ("person", "id BIGINT, name VARCHAR, email_address VARCHAR, credit_card VARCHAR, city VARCHAR, state VARCHAR, date_time TIMESTAMP(3), extra VARCHAR"),
        ("auction", "id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra VARCHAR"),
        ("bid", "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP(3), extra VARCHAR"),
    ];
    columns
        .iter()
        .map(|(table, cols)| {
            let with = match &run.source {
                NexmarkSource::Generator => format!(
                    "'connector' = 'nexmark', 'nexmark.table' = '{table}', 'nexmark.events' = '{}', 'nexmark.event-rate' = '{}', 'nexmark.partitions' = '{}'",
                    run.events, run.event_rate, run.partitions
                ),
                NexmarkSource::Files(dir) => format!(
                    "'connector' = 'filesystem', 'path' = '{}', 'format' = 'json'",
                    dir.join(format!("{table}.json")).display()
                ),
            };
            format!(
                "CREATE TABLE {table} ({cols}, WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND) WITH ({with})"
            )
        })
        .collect()
}

/// Creates person, auction and bid over the built-in generator (`events` events over the three
/// tables, 0: unbounded, at 100 000 events/s of event time, one partition) and a blackhole
/// table `nexmark_sink`, for benchmarks that start their own jobs.
///
/// # Errors
/// The statements'.
pub(crate) async fn create_generator_tables(db: &Database, session: &mut Session, events: u64) -> Result<()> {
    let run = NexmarkRun {
        events,
        event_rate: 100_000.0,
        source: NexmarkSource::Generator,
        partitions: 1,
        check: false,
        data_dir: PathBuf::new(),
        state_cache_bytes: crate::state::DEFAULT_STATE_CACHE_BYTES,
        keep: false,
        parallelism: 1,
    };
    for ddl in source_ddl(&run) {
        db.execute(session, &ddl).await?;
    }
    db.execute(session, "CREATE TABLE nexmark_sink (ignored INT) WITH ('connector' = 'blackhole')").await?;
    Ok(())
}

/// Runs query `name` once in a fresh database under `run.data_dir`.
///
/// # Errors
/// Any statement's error (a query Weir cannot plan says why).
pub async fn run_query(name: &str, run: &NexmarkRun) -> Result<QueryReport> {
    let query = query_text(name)?;
    let _ = std::fs::remove_dir_all(&run.data_dir);
    let options = OpenOptions {
        read_sources: true,
        store: StoreOptions { state_cache_bytes: run.state_cache_bytes },
        workers: run.parallelism,
    };
    let db = Database::open_with(&run.data_dir, options)?;
    let mut session = Session::default();
    for ddl in source_ddl(run) {
        db.execute(&mut session, &ddl).await?;
    }
    if name == "q13" {
        for stmt in Database::split_statements(Q13_SETUP)? {
            db.execute(&mut session, &stmt).await?;
        }
    }
    let view = format!("nexmark_{name}");
    let cpu_before = cpu_seconds();
    let start = Instant::now();
    if run.check {
        db.execute(&mut session, &format!("CREATE MATERIALIZED VIEW {view} AS {query}")).await?;
    } else {
        db.execute(&mut session, "CREATE TABLE nexmark_sink (ignored INT) WITH ('connector' = 'blackhole')").await?;
        db.execute(&mut session, &format!("INSERT INTO nexmark_sink {query}")).await?;
    }
    // The database reads the sources to their end (see the module docs).
    crate::bench::sources_finished(&db, Duration::from_secs(24 * 3600)).await?;
    let sink_rows = {
        let engine = db.engine().await?;
        for row in &engine.system_state().state_tables {
            if let Some(c) = row.cache {
                let rate = c.hits as f64 / (c.hits + c.misses).max(1) as f64;
                tracing::info!(
                    "state table {} {}: cache hit rate {rate:.3} ({} hits, {} misses), {} entries / {} MiB cached, {} MiB on disk",
                    row.operator, row.name, c.hits, c.misses, c.entries, c.bytes >> 20, row.disk_bytes >> 20
                );
            }
        }
        let counters = engine.sink_rows.lock().expect("sink counters");
        counters.values().map(|c| c.load(std::sync::atomic::Ordering::Relaxed)).sum::<u64>()
    };
    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds().zip(cpu_before).map(|(a, b)| a - b).unwrap_or(f64::NAN);
    let mut report = QueryReport {
        query: name.to_string(),
        events: run.events,
        seconds,
        cpu_seconds: cpu,
        peak_rss_bytes: crate::bench::peak_rss_bytes(),
        output_rows: sink_rows,
        check: None,
    };
    if run.check {
        let StatementResult::Rows { schema, batches } = db.execute(&mut session, &format!("SELECT * FROM {view}")).await? else {
            return Err(WeirError::internal("SELECT returned no rows"));
        };
        let text = sorted_tsv(&schema, &batches)?;
        report.output_rows = text.lines().count().saturating_sub(1) as u64;
        report.check = Some(compare_with_manifest(name, &text, &run.data_dir));
    }
    drop(db);
    if !run.keep {
        let _ = std::fs::remove_dir_all(&run.data_dir);
    }
    Ok(report)
}

/// The rows as bench/nexmark/expected/README.md writes them: a header of column names, then
/// one tab-separated line per row, sorted; NULL as `\N`, timestamps as
/// `YYYY-MM-DDTHH:MM:SS[.fff]`, decimals with their scale.
pub fn sorted_tsv(schema: &arrow::datatypes::SchemaRef, batches: &[arrow::array::RecordBatch]) -> Result<String> {
    let options = FormatOptions::default().with_null("\\N");
    let mut lines = Vec::new();
    for batch in batches {
        let formatters = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        for row in 0..batch.num_rows() {
            let mut line = String::new();
            for (i, f) in formatters.iter().enumerate() {
                if i > 0 {
                    line.push('\t');
                }
                write!(line, "{}", f.value(row)).map_err(|e| WeirError::internal(e.to_string()))?;
            }
            lines.push(line);
        }
    }
    lines.sort();
    let mut text = schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join("\t");
    text.push('\n');
    for line in lines {
        text.push_str(&line);
        text.push('\n');
    }
    Ok(text)
}

/// Compares `text` with the manifest's row count and hash for `query`; on a mismatch writes
/// `text` next to the data directory for a diff against compute.py's output.
fn compare_with_manifest(query: &str, text: &str, data_dir: &Path) -> std::result::Result<(), String> {
    let Some(line) = MANIFEST.lines().find(|l| l.split('\t').next() == Some(query)) else {
        return Err(format!("no expected result for {query} in bench/nexmark/expected/manifest.tsv"));
    };
    let fields: Vec<&str> = line.split('\t').collect();
    let (rows, hash) = (fields.get(1).copied().unwrap_or(""), fields.get(3).copied().unwrap_or(""));
    let got_hash = format!("{:x}", Sha256::digest(text.as_bytes()));
    if got_hash == hash {
        return Ok(());
    }
    let got_rows = text.lines().count().saturating_sub(1);
    let out = data_dir.with_extension(format!("{query}.weir.tsv"));
    let saved = std::fs::write(&out, text).is_ok();
    Err(format!(
        "{got_rows} rows (expected {rows}), hash differs{}",
        if saved { format!("; Weir's rows are in {}, diff them with compute.py's {query}.tsv", out.display()) } else { String::new() }
    ))
}
