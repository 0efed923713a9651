//! The `weir` command line, behind `src/main.rs` (which only sets the global allocator and calls
//! [`main`]): `weir serve` runs the server (also what plain `weir` does).
//!
//! It lives in the library so the binary crate compiles next to nothing: a release build does
//! not share generic instantiations across crates, so a `main.rs` holding the CLI compiled
//! DataFusion's SQL planner, the statement futures and clap's code again, 128 CPU s of every
//! release build (bench/README.md, "Tenth pass").
//!
//! ```text
//! weir [serve] [--pg-listen 127.0.0.1:5488] [--http-listen 127.0.0.1:5489|off] [--data-dir ./weir-data]
//! weir bench insert [--rows 1000000] [--groups 1000] [--data-dir DIR]
//! weir bench window [--kind tumble|hop] [--rows 1000000] [--slide-s 60] [--size-s 3600] [--sink view|blackhole]
//! weir bench nexmark (--query qN | --all) [--events N] [--source generator|files:DIR]
//!                    [--partitions P] [--parallelism 1] [--event-rate R] [--check]
//! weir bench kafka --brokers HOST:PORT [--records 1000000] [--partitions 4]
//! weir bench nexmark-gen --events 100000 --out DIR [--seed N] [--event-rate 100000]
//! ```
//!
//! Logs go to stderr, filtered by `RUST_LOG` (default `info`); once the server accepts
//! connections it logs `listening on <address>`, which scripts can wait for (and, before it,
//! `web page and metrics on http://<address>` unless `--http-listen off`). SIGINT or SIGTERM
//! stops accepting, closes the connections and exits with status 0.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use bytesize::ByteSize;
use clap::{Args, Parser, Subcommand};
use tracing::{error, info};
use tracing_subscriber::EnvFilter;

use crate::frontend;
use crate::frontend::auth::{AuthMethod, Users};
use crate::frontend::ServerOptions;
use crate::sql::database::{Database, OpenOptions};
use crate::state::StoreOptions;

/// glibc's malloc arenas for the C++ side (RocksDB allocates its memtables, blocks and
/// iterators with glibc's malloc, not mimalloc): at most this many, instead of glibc's eight
/// per core. glibc gives each thread that allocates while the others hold their arenas one of
/// its own and keeps what is freed in it, so a job at parallelism 2, with an operator per thread
/// reading state from RocksDB, held 250-400 MB more resident memory than the same allocations
/// in two arenas (Nexmark q9 and q20 at 10 M events: 1215 and 1202 MiB peak against 917 and
/// 853; bench/README.md, "Eighth pass"), with no difference in speed. Capping
/// the arenas is the usual remedy for a RocksDB process's resident memory under glibc (the
/// other is another allocator for the C++ side too). A `MALLOC_ARENA_MAX` in the environment
/// still wins.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MALLOC_ARENAS: i32 = 2;

/// Caps glibc's malloc arenas at [`MALLOC_ARENAS`] unless `MALLOC_ARENA_MAX` is set. Called
/// first thing in `main`, before any other thread starts.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets a parameter of glibc's allocator; no other thread exists
        // yet that could be allocating while it changes.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS);
        }
    }
}

/// Turns transparent huge pages off for this process (`prctl(PR_SET_THP_DISABLE)`, which the
/// kernel honours over any `madvise`), unless `MIMALLOC_ALLOW_THP` is set, in which case
/// mimalloc does what it says. Called in `main` right after [`limit_malloc_arenas`], before any
/// other thread starts.
///
/// mimalloc asks for huge pages on its arenas (`madvise(MADV_HUGEPAGE)`) and hands memory that
/// stayed free for a second back to the kernel; when it uses that memory again, the first touch
/// of each 2 MiB region faults in and zeroes a whole huge page. With a job's epochs building
/// and freeing tens of MiB five times a second, the kernel's page zeroing was 7-14% of
/// Nexmark q7's CPU time in a profile. Without huge pages the same runs take 6-26% less CPU on
/// q5, q9 and q20, a third less on q3, 3-5% less on q7, the same on q4 and q16, and peak
/// within 50 MiB of before (bench/README.md, "Tenth pass"). This is mimalloc's own
/// `allow_thp = 0`, which it reads from the environment only as it starts, before `main`. It
/// also keeps huge pages from RocksDB's memory (glibc's malloc), which changes nothing where THP
/// is in `madvise` mode (glibc does not ask for them); where it is `always`, not measured.
/// Child processes inherit the flag; `weir` starts none but copies of itself (`bench nexmark
/// --all`, `bench restart`).
fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // SAFETY: PR_SET_THP_DISABLE sets one flag of this process's memory map; it takes no
        // pointers. Failure (a kernel without it) leaves huge pages as they were: no harm.
        unsafe {
            // prctl is variadic: the kernel reads arguments 2-5 as unsigned longs, and 3-5
            // must be 0 (a non-zero third would mean "except where madvised").
            let (on, zero): (libc::c_ulong, libc::c_ulong) = (1, 0);
            libc::prctl(libc::PR_SET_THP_DISABLE, on, zero, zero, zero);
        }
    }
}

/// How long background work may take to stop after the server has shut down.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// Weir: a streaming SQL database with a Postgres front door.
#[derive(Debug, Parser)]
#[command(name = "weir", version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no subcommand, `weir` serves with these options.
    #[command(flatten)]
    serve: ServeArgs,
}

/// What `weir` does.
#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server: state under --data-dir, the Postgres wire protocol on --pg-listen.
    Serve(ServeArgs),
    /// Run a benchmark and print its figures.
    #[command(subcommand)]
    Bench(Bench),
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
enum Bench {
    /// Bulk INSERT ... SELECT of --rows rows, in one statement, into a table feeding a
    /// GROUP BY materialized view; prints rows/s and peak RSS. Use a release build.
    Insert {
        /// Rows to insert.
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
        /// Distinct group keys of the view.
        #[arg(long, default_value_t = 1000)]
        groups: u64,
        /// Load the rows with `COPY ... FROM STDIN` (text format) instead of INSERT ... SELECT.
        #[arg(long)]
        copy: bool,
        /// Scratch directory for the database (emptied first).
        #[arg(long, value_name = "DIR", default_value = "/var/tmp/weir-bench-insert")]
        data_dir: PathBuf,
    },
    /// Rows (--rate per second of event time, --batch per INSERT) through a TUMBLE or HOP
    /// window aggregation with EMIT ON WINDOW CLOSE; prints rows/s and peak RSS.
    Window {
        /// `tumble` (size --size-s) or `hop` (slide --slide-s, size --size-s).
        #[arg(long, default_value = "tumble")]
        kind: String,
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
        /// Rows per INSERT statement (one epoch each).
        #[arg(long, default_value_t = 100_000)]
        batch: u64,
        /// Distinct keys grouped by besides the window.
        #[arg(long, default_value_t = 100)]
        keys: u64,
        /// Rows per second of event time, 1 to 1000. HOP emits about keys / (rate * slide)
        /// windows per row.
        #[arg(long, default_value_t = 10)]
        rate: u64,
        #[arg(long, default_value_t = 60)]
        slide_s: u64,
        #[arg(long, default_value_t = 3600)]
        size_s: u64,
        /// Where the windows go: `view` (a materialized view stores them) or `blackhole` (an
        /// INSERT INTO job into a blackhole table: the window operator alone).
        #[arg(long, default_value = "view")]
        sink: String,
        /// Scratch directory for the database (emptied first).
        #[arg(long, value_name = "DIR", default_value = "/var/tmp/weir-bench-window")]
        data_dir: PathBuf,
    },
    /// Runs Nexmark queries (bench/nexmark/queries) to completion into a blackhole sink and
    /// prints events/s, CPU seconds, peak RSS and output rows; --check instead compares each
    /// query's final result with bench/nexmark/expected. Use a release build.
    Nexmark {
        /// The query to run (q0..q22); see --all.
        #[arg(long, required_unless_present = "all")]
        query: Option<String>,
        /// Run every query and print the table (queries Weir cannot run say why).
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        args: NexmarkArgs,
    },
    /// Runs a Nexmark query (as `bench nexmark`, into a blackhole) in a child process and keeps
    /// its database, then opens that database in this process as a restarted server would and
    /// prints the time until it answers its first query and this process's peak RSS.
    Restart {
        #[arg(long, default_value = "q20")]
        query: String,
        #[arg(long, default_value_t = 10_000_000)]
        events: u64,
        /// The state cache's size, as `weir serve --state-cache-size`.
        #[arg(long, value_name = "SIZE", default_value = "256MiB")]
        state_cache_size: ByteSize,
        /// Scratch directory for the database (emptied first).
        #[arg(long, value_name = "DIR", default_value = "/var/tmp/weir-bench-restart")]
        data_dir: PathBuf,
    },
    /// Produces --records JSON records into a new topic on --brokers (not timed), then runs a
    /// Kafka JSON source plus a filter job into a blackhole until every record is read; prints
    /// records/s, CPU seconds and peak RSS. With --sink, measures the Kafka sink instead: the
    /// bids of --records Nexmark events into a JSON topic, at-least-once then exactly-once,
    /// and prints both and their ratio. Without --brokers, on an in-process mock cluster
    /// (librdkafka's, which has transactions); else start a broker first
    /// (scripts/kafka-broker.sh; tansu has no transactions).
    Kafka {
        /// The broker(s), host:port; none: an in-process mock cluster.
        #[arg(long)]
        brokers: Option<String>,
        /// Records (with --sink: Nexmark events).
        #[arg(long, default_value_t = 1_000_000)]
        records: u64,
        /// Measure the sink (at-least-once and exactly-once) instead of the source.
        #[arg(long)]
        sink: bool,
        #[arg(long, default_value_t = 4)]
        partitions: i32,
        /// Scratch directory for the database (emptied first).
        #[arg(long, value_name = "DIR", default_value = "/var/tmp/weir-bench-kafka")]
        data_dir: PathBuf,
    },
    /// Runs one Nexmark --query job over --events events alone, then --jobs identical ones
    /// together (each reading its own source tasks) in a fresh database; prints the wall and
    /// CPU time of each run and the ratio of the wall times (1.0: the jobs ran side by side).
    Jobs {
        #[arg(long, default_value = "q5")]
        query: String,
        #[arg(long, default_value_t = 3_000_000)]
        events: u64,
        #[arg(long, default_value_t = 2)]
        jobs: usize,
        /// Each job's parallelism (`weir serve --workers`; default: the number of cores).
        #[arg(long)]
        parallelism: Option<usize>,
        /// Scratch directory for the database (emptied first).
        #[arg(long, value_name = "DIR", default_value = "/var/tmp/weir-bench-jobs")]
        data_dir: PathBuf,
    },
    /// Times `SELECT count(*)` on a two-row view, one query every 10 ms: --idle-seconds with
    /// nothing else running, then --seconds while Nexmark q20 reads an unbounded generator at
    /// full speed in the same database; prints p50/p99/max latency and the job's rows/s.
    Reads {
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        #[arg(long, default_value_t = 3)]
        idle_seconds: u64,
        /// Scratch directory for the database (emptied first).
        #[arg(long, value_name = "DIR", default_value = "/var/tmp/weir-bench-reads")]
        data_dir: PathBuf,
    },
    /// Writes the built-in Nexmark generator's person, auction and bid rows for events
    /// 0..--events as JSON lines files (person.json, auction.json, bid.json) in --out.
    NexmarkGen {
        #[arg(long, default_value_t = 100_000)]
        events: u64,
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// The generator's seed (default: the connector's default seed).
        #[arg(long)]
        seed: Option<u64>,
        /// Events per second of event time ('nexmark.event-rate'; default 100000).
        #[arg(long)]
        event_rate: Option<f64>,
    },
}

/// Options of `weir serve`.
#[derive(Debug, Args)]
struct ServeArgs {
    /// Address (host:port) to accept Postgres wire protocol connections on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:5488")]
    pg_listen: String,
    /// Address (host:port) of the web page of the running jobs, Prometheus metrics
    /// (/metrics) and health (/health), all read-only; `off` serves none of them.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:5489")]
    http_listen: String,
    /// Directory holding the database's state; created if missing.
    #[arg(long, value_name = "DIR", default_value = "./weir-data")]
    data_dir: PathBuf,
    /// Memory for the state cache shared by every job's state tables (e.g. 512MiB, 2GiB).
    /// State beyond it stays in RocksDB and is read back on demand.
    #[arg(long, value_name = "SIZE", default_value = "256MiB")]
    state_cache_size: ByteSize,
    /// Parallel instances of each keyed and stateless operator of a job created without
    /// `SET 'parallelism.default'` (default: the number of cores). Such jobs take the new value
    /// at a restart; their state is kept by key group, so nothing is lost.
    #[arg(long, value_name = "N")]
    workers: Option<usize>,
    /// Users who may connect, one per line: name:password[:full|read-only]. Without it (or
    /// --password) every client is trusted, which is only safe on a loopback address.
    #[arg(long, value_name = "FILE", conflicts_with = "password")]
    auth_file: Option<PathBuf>,
    /// The password of one user (--user, full role) instead of an auth file. Also read from
    /// the environment variable WEIR_PASSWORD.
    #[arg(long, value_name = "PASSWORD", env = "WEIR_PASSWORD", hide_env_values = true)]
    password: Option<String>,
    /// The user --password is for.
    #[arg(long, value_name = "NAME", default_value = "weir", requires = "password")]
    user: String,
    /// How passwords are checked: scram-sha-256 (Postgres's default) or md5 (older clients).
    #[arg(long, value_name = "METHOD", default_value = "scram-sha-256", value_parser = ["scram-sha-256", "md5"])]
    auth_method: String,
    /// TLS certificate chain (PEM) for clients connecting with sslmode=require or stronger.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

/// Runs the `weir` command with the process's arguments; what `weir`'s `main` does.
pub fn main() -> ExitCode {
    limit_malloc_arenas();
    disable_transparent_huge_pages();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            error!("cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Some(Command::Serve(args)) => serve(args).await,
            Some(Command::Bench(Bench::Insert { rows, groups, copy, data_dir })) => {
                bench_insert(&data_dir, rows, groups, copy).await
            }
            Some(Command::Bench(Bench::Window { kind, rows, batch, keys, rate, slide_s, size_s, sink, data_dir })) => {
                let input = crate::bench::window::Input { rows, batch, keys, rate };
                bench_window(&data_dir, &kind, &sink, input, slide_s, size_s).await
            }
            Some(Command::Bench(Bench::NexmarkGen { events, out, seed, event_rate })) => {
                let counts = crate::bench::nexmark_gen::write_json(&out, events, seed, event_rate).map_err(|e| e.to_string())?;
                println!(
                    "wrote {} persons, {} auctions, {} bids to {}",
                    counts[0],
                    counts[1],
                    counts[2],
                    out.display()
                );
                Ok(())
            }
            Some(Command::Bench(Bench::Nexmark { query, all, args })) => {
                bench_nexmark(query, all, args).await
            }
            Some(Command::Bench(Bench::Restart { query, events, state_cache_size, data_dir })) => {
                let report = crate::bench::restart::run(&data_dir, &query, events, state_cache_size.as_u64())
                    .await
                    .map_err(|e| e.to_string())?;
                println!("{report}");
                Ok(())
            }
            Some(Command::Bench(Bench::Kafka { brokers, records, sink, partitions, data_dir })) => {
                let mock = match &brokers {
                    Some(_) => None,
                    None => Some(weir_connectors::kafka::MockBrokers::start(1).map_err(|e| e.to_string())?),
                };
                let brokers = brokers.or_else(|| mock.as_ref().map(|m| m.bootstrap_servers())).unwrap_or_default();
                if sink {
                    println!("| delivery guarantee | messages | seconds | messages/s | CPU s |\n| --- | --- | --- | --- | --- |");
                    let mut reports = Vec::new();
                    for guarantee in ["at-least-once", "exactly-once"] {
                        let report = crate::bench::kafka::run_sink(&data_dir, &brokers, mock.as_ref(), records, partitions, guarantee)
                            .await
                            .map_err(|e| e.to_string())?;
                        println!("{report}");
                        reports.push(report);
                    }
                    println!(
                        "exactly-once / at-least-once throughput: {:.2}",
                        reports[1].per_second() / reports[0].per_second()
                    );
                    return Ok(());
                }
                if mock.is_some() {
                    return Err("bench kafka without --sink needs --brokers (the mock cluster has no admin API to create its topic)".into());
                }
                let (report, cpu) =
                    crate::bench::kafka::run(&data_dir, &brokers, records, partitions).await.map_err(|e| e.to_string())?;
                println!(
                    "kafka JSON source + filter into a blackhole ({partitions} partitions): {report}; CPU {cpu:.2} s = {:.0} records per CPU second",
                    records as f64 / cpu
                );
                Ok(())
            }
            Some(Command::Bench(Bench::Jobs { query, events, jobs, parallelism, data_dir })) => {
                let alone = crate::bench::jobs::run(&data_dir, &query, events, 1, parallelism).await.map_err(|e| e.to_string())?;
                println!("{query} over {events} events, {alone}");
                let together =
                    crate::bench::jobs::run(&data_dir, &query, events, jobs, parallelism).await.map_err(|e| e.to_string())?;
                println!(
                    "{query} over {events} events, {together}: {:.2}x the wall time of one job alone{}",
                    together.seconds / alone.seconds,
                    if cfg!(debug_assertions) { " (debug build)" } else { "" }
                );
                Ok(())
            }
            Some(Command::Bench(Bench::Reads { seconds, idle_seconds, data_dir })) => {
                let report =
                    crate::bench::reads::run(&data_dir, idle_seconds, seconds).await.map_err(|e| e.to_string())?;
                println!("SELECT count(*) on a two-row view, idle: {}", report.idle);
                println!(
                    "SELECT count(*) on a two-row view, while q20 reads {:.0} rows/s: {}{}",
                    report.job_rows_per_second,
                    report.busy,
                    if cfg!(debug_assertions) { " (debug build)" } else { "" }
                );
                Ok(())
            }
            None => serve(cli.serve).await,
        }
    });
    runtime.shutdown_timeout(SHUTDOWN_TIMEOUT);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            error!("{err}");
            ExitCode::FAILURE
        }
    }
}

/// `weir serve`: opens the database and serves it until SIGINT or SIGTERM.
async fn serve(args: ServeArgs) -> Result<(), String> {
    // Installed before the server listens, so a signal right after "listening on" is ours.
    let shutdown =
        shutdown_signal().map_err(|err| format!("cannot install signal handlers: {err}"))?;
    let max = crate::state::key_group::MAX_PARALLELISM;
    if let Some(w) = args.workers.filter(|w| !(1..=max).contains(w)) {
        return Err(format!("--workers {w}: expected 1 to {max}"));
    }
    // Who may connect, read before anything is opened so a bad file fails the start at once.
    let method = if args.auth_method == "md5" { AuthMethod::Md5 } else { AuthMethod::ScramSha256 };
    let users = match (&args.auth_file, &args.password) {
        (Some(file), _) => Some(Arc::new(Users::from_file(file, method)?)),
        (None, Some(password)) => Some(Arc::new(Users::single(&args.user, password, method))),
        (None, None) => None,
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(frontend::auth::tls_acceptor(cert, key)?),
        _ => None,
    };
    let options = OpenOptions {
        store: StoreOptions { state_cache_bytes: args.state_cache_size.as_u64() },
        workers: args.workers.unwrap_or_else(crate::sql::default_workers),
        ..OpenOptions::default()
    };
    let db = Database::open_with(&args.data_dir, options).map_err(|err| {
        format!(
            "cannot open the database in {}: {err}",
            args.data_dir.display()
        )
    })?;
    // Bound before the Postgres port, so a port already taken fails the start.
    let web = match args.http_listen.as_str() {
        "off" => None,
        addr => {
            let listener = tokio::net::TcpListener::bind(addr).await.map_err(|err| {
                format!("cannot serve HTTP on {addr}: {err} (pass --http-listen with another address, or off)")
            })?;
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let task = tokio::spawn(crate::web::serve(listener, Arc::clone(&db), async {
                let _ = stopped.await;
            }));
            Some((stop, task))
        }
    };
    let served = frontend::serve(args.pg_listen.as_str(), db, ServerOptions { users, tls }, shutdown)
        .await
        .map_err(|err| format!("cannot serve on {}: {err}", args.pg_listen));
    if let Some((stop, task)) = web {
        let _ = stop.send(());
        let _ = task.await;
    }
    served?;
    info!("shut down");
    Ok(())
}

/// `weir bench insert`: prints one line of figures.
async fn bench_insert(data_dir: &std::path::Path, rows: u64, groups: u64, copy: bool) -> Result<(), String> {
    let report = crate::bench::insert::run(data_dir, rows, groups, copy).await.map_err(|e| e.to_string())?;
    let how = if copy { "COPY FROM STDIN" } else { "INSERT ... SELECT" };
    println!("{how} into a table feeding a GROUP BY view ({groups} groups): {report}");
    let _ = std::fs::remove_dir_all(data_dir);
    Ok(())
}

/// `weir bench window`: prints one line of figures.
async fn bench_window(
    data_dir: &std::path::Path,
    kind: &str,
    sink: &str,
    input: crate::bench::window::Input,
    slide_s: u64,
    size_s: u64,
) -> Result<(), String> {
    use crate::bench::window::WindowBench;
    let window = match kind {
        "tumble" => WindowBench::Tumble { size_s },
        "hop" => WindowBench::Hop { slide_s, size_s },
        other => return Err(format!("--kind {other}: valid kinds are tumble, hop")),
    };
    let sink = match sink {
        "view" => crate::bench::window::Sink::View,
        "blackhole" => crate::bench::window::Sink::Blackhole,
        other => return Err(format!("--sink {other}: valid sinks are view, blackhole")),
    };
    let report = crate::bench::window::run(data_dir, window, sink, input).await.map_err(|e| e.to_string())?;
    println!(
        "window {window:?} ({} keys, {} rows/s of event time, EMIT ON WINDOW CLOSE, into {sink:?}): {report}",
        input.keys, input.rate
    );
    let _ = std::fs::remove_dir_all(data_dir);
    Ok(())
}

/// The options of `weir bench nexmark` besides which queries.
#[derive(Debug, Args)]
struct NexmarkArgs {
    /// Events over the three tables (default 10000000; --check uses 100000).
    #[arg(long)]
    events: Option<u64>,
    /// `generator` (the built-in nexmark connector) or `files:DIR` (person.json,
    /// auction.json, bid.json in DIR, as `weir bench nexmark-gen` writes them).
    #[arg(long, default_value = "generator")]
    source: String,
    /// Source partitions of the generator.
    #[arg(long, default_value_t = 1)]
    partitions: usize,
    /// Instances of each keyed and stateless operator of the job (`parallelism.default`;
    /// 1 runs the job on one core).
    #[arg(long, default_value_t = 1)]
    parallelism: usize,
    /// Events per second of event time (default 100000; --check uses 1000).
    #[arg(long)]
    event_rate: Option<f64>,
    /// Compare each query's final result with bench/nexmark/expected instead of timing it.
    #[arg(long)]
    check: bool,
    /// Scratch directory for the database (emptied first).
    #[arg(long, value_name = "DIR", default_value = "/var/tmp/weir-bench-nexmark")]
    data_dir: PathBuf,
    /// The state cache's size, as `weir serve --state-cache-size`.
    #[arg(long, value_name = "SIZE", default_value = "256MiB")]
    state_cache_size: ByteSize,
    /// Leave the database in --data-dir after the run (one query only).
    #[arg(long)]
    keep: bool,
}

/// `weir bench nexmark`: one query's figures, or the table of all of them.
async fn bench_nexmark(query: Option<String>, all: bool, args: NexmarkArgs) -> Result<(), String> {
    use crate::bench::nexmark::{self, NexmarkRun, NexmarkSource, QueryReport};
    let NexmarkArgs { events, source, partitions, event_rate, check, data_dir, state_cache_size, keep, parallelism } =
        args;
    let source_arg = source.clone();
    let source = match source.split_once(':') {
        None if source == "generator" => NexmarkSource::Generator,
        Some(("files", dir)) => NexmarkSource::Files(PathBuf::from(dir)),
        _ => return Err(format!("--source {source}: valid sources are generator, files:DIR")),
    };
    if check && (events.is_some_and(|e| e != nexmark::CHECK_EVENTS) || event_rate.is_some_and(|r| r != nexmark::CHECK_EVENT_RATE)) {
        return Err(format!(
            "--check compares with results for {} events at {} events/s; leave out --events and --event-rate",
            nexmark::CHECK_EVENTS,
            nexmark::CHECK_EVENT_RATE
        ));
    }
    let run = NexmarkRun {
        events: events.unwrap_or(if check { nexmark::CHECK_EVENTS } else { 10_000_000 }),
        event_rate: event_rate.unwrap_or(if check { nexmark::CHECK_EVENT_RATE } else { 100_000.0 }),
        source,
        partitions,
        check,
        data_dir,
        state_cache_bytes: state_cache_size.as_u64(),
        keep,
        parallelism,
    };
    let names: Vec<String> = match query {
        Some(q) if !all => vec![q],
        _ => nexmark::QUERIES.iter().map(|(n, _)| n.to_string()).collect(),
    };
    if keep && names.len() > 1 {
        return Err("--keep keeps one query's database: give --query, not --all".into());
    }
    println!("{}", QueryReport::HEADER);
    let mut failed = Vec::new();
    if names.len() > 1 {
        // One process per query, so each query's peak RSS is its own.
        let exe = std::env::current_exe().map_err(|e| format!("cannot find the weir binary: {e}"))?;
        for name in &names {
            let mut cmd = std::process::Command::new(&exe);
            cmd.args(["bench", "nexmark", "--query", name, "--source", &source_arg, "--partitions"])
                .arg(run.partitions.to_string())
                .arg("--parallelism")
                .arg(run.parallelism.to_string())
                .arg("--data-dir")
                .arg(&run.data_dir)
                .args(["--state-cache-size", &state_cache_size.as_u64().to_string()]);
            if run.check {
                cmd.arg("--check");
            } else {
                cmd.args(["--events", &run.events.to_string(), "--event-rate", &run.event_rate.to_string()]);
            }
            let out = cmd.output().map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
            let text = String::from_utf8_lossy(&out.stdout);
            let row = text.lines().last().unwrap_or_default().to_string();
            if !out.status.success() {
                failed.push(name.clone());
                // Its row may still say ok (it failed after printing it): say why on stderr.
                let err = String::from_utf8_lossy(&out.stderr);
                let lines: Vec<&str> = err.lines().collect();
                let tail = &lines[lines.len().saturating_sub(20)..];
                error!("{name}: the query's process ended with {}; its last log lines:\n{}", out.status, tail.join("\n"));
            }
            if row.starts_with(&format!("| {name} |")) {
                println!("{row}");
            } else {
                let err = String::from_utf8_lossy(&out.stderr);
                println!("| {name} | FAILED: {} |", err.lines().last().unwrap_or("no output"));
            }
        }
        return if failed.is_empty() { Ok(()) } else { Err(format!("not run or wrong: {}", failed.join(", "))) };
    }
    for name in &names {
        match nexmark::run_query(name, &run).await {
            Ok(report) => {
                if matches!(report.check, Some(Err(_))) {
                    failed.push(name.clone());
                }
                println!("{}", report.row());
            }
            // A query the landed operators cannot run is listed, not failed.
            Err(e) if matches!(e.kind(), crate::error::ErrorKind::Unsupported(_)) => {
                println!("| {name} | {} |", e.to_string().replace('\n', " "));
            }
            Err(e) => {
                failed.push(name.clone());
                println!("| {name} | FAILED: {} |", e.to_string().replace('\n', " "));
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("not run or wrong: {}", failed.join(", ")))
    }
}

/// A future that completes (and logs) at the first SIGINT or SIGTERM.
#[cfg(unix)]
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => info!("received SIGINT, shutting down"),
            _ = terminate.recv() => info!("received SIGTERM, shutting down"),
        }
    })
}

/// A future that completes (and logs) at the first Ctrl-C.
#[cfg(not(unix))]
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    Ok(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            info!("received Ctrl-C, shutting down");
        }
    })
}
