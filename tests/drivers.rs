//! The Postgres clients people use, each against a real `weir serve` of its own: psycopg 3,
//! psycopg2 with SQLAlchemy 2 and pandas, asyncpg, pgcli's start-up queries, node-postgres and
//! pgjdbc. Each is a script in `tests/drivers/` (it asserts values worked out by hand and exits
//! non-zero on the first difference), run with the server's address in `WEIR_DSN`.
//!
//! The clients are installed by `scripts/drivers.sh install` (test.sh runs it) outside the
//! clone. Without them a test prints what is missing and passes, unless
//! `WEIR_REQUIRE_DRIVERS=1` (set by test.sh, so CI fails instead).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the installed clients are (`scripts/drivers.sh env`).
struct Tools {
    python: PathBuf,
    node_path: PathBuf,
    jdbc: PathBuf,
}

fn tools() -> Option<Tools> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("bash").arg(root.join("scripts/drivers.sh")).arg("env").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let var = |name: &str| -> Option<PathBuf> {
        text.lines().find_map(|l| l.strip_prefix(&format!("{name}="))).map(PathBuf::from)
    };
    Some(Tools { python: var("WEIR_DRIVERS_PYTHON")?, node_path: var("WEIR_DRIVERS_NODE_PATH")?, jdbc: var("WEIR_DRIVERS_JDBC")? })
}

/// The installed tools if `needed` (a path of them) exists; else, unless they are required,
/// `None` after saying what is missing.
fn installed(needed: impl Fn(&Tools) -> &Path) -> Option<Tools> {
    let tools = tools();
    match tools {
        Some(t) if needed(&t).exists() => Some(t),
        _ => {
            let msg = "the driver clients are not installed: run scripts/drivers.sh install";
            if std::env::var("WEIR_REQUIRE_DRIVERS").is_ok_and(|v| v == "1") {
                panic!("{msg}");
            }
            println!("skipped: {msg}");
            None
        }
    }
}

/// A script of `tests/drivers/`.
fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/drivers").join(name)
}

/// Runs `cmd` against a fresh server (its libpq URL in `WEIR_DSN`) and fails with the
/// client's output unless it exits 0.
fn run_against_server(name: &str, mut cmd: Command) {
    let dir = common::scratch_dir(&format!("driver-{name}"));
    let server = common::Server::start(&dir.join("data"));
    let dsn = format!("postgresql://weir@127.0.0.1:{}/weir", server.port);
    let out = cmd.env("WEIR_DSN", &dsn).env("PGCONNECT_TIMEOUT", "10").output().expect("run the client");
    let log = std::fs::read_to_string(&server.log).unwrap_or_default();
    assert!(
        out.status.success(),
        "{name} failed ({}):\n--- stdout\n{}\n--- stderr\n{}\n--- server log (last 40 lines)\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        log.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n"),
    );
    print!("{}", String::from_utf8_lossy(&out.stdout));
}

fn python(tools: &Tools, file: &str) -> Command {
    let mut cmd = Command::new(&tools.python);
    cmd.arg(script(file));
    cmd
}

#[test]
fn psycopg3_connects_writes_reads_transactions_cursors_and_subscribes() {
    let Some(tools) = installed(|t| &t.python) else { return };
    run_against_server("psycopg3", python(&tools, "psycopg3_test.py"));
}

#[test]
fn sqlalchemy_and_pandas_over_psycopg2_connect_inspect_and_read() {
    let Some(tools) = installed(|t| &t.python) else { return };
    run_against_server("sqlalchemy", python(&tools, "sqlalchemy_test.py"));
}

#[test]
fn asyncpg_reads_arrays_cursors_and_subscribes() {
    let Some(tools) = installed(|t| &t.python) else { return };
    run_against_server("asyncpg", python(&tools, "asyncpg_test.py"));
}

#[test]
fn pgcli_start_up_queries_answer() {
    let Some(tools) = installed(|t| &t.python) else { return };
    run_against_server("pgcli", python(&tools, "pgcli_test.py"));
}

#[test]
fn node_postgres_connects_writes_reads_and_subscribes() {
    let Some(tools) = installed(|t| &t.node_path) else { return };
    let mut cmd = Command::new("node");
    cmd.arg(script("node_pg_test.js")).env("NODE_PATH", &tools.node_path);
    run_against_server("node-postgres", cmd);
}

#[test]
fn pgjdbc_metadata_batches_and_transactions() {
    let Some(tools) = installed(|t| &t.jdbc) else { return };
    // The URL needs the port: a small wrapper script reads it from WEIR_DSN.
    let mut cmd = Command::new("bash");
    cmd.arg("-c").arg(format!(
        "url=\"jdbc:postgresql://${{WEIR_DSN#postgresql://weir@}}?prepareThreshold=1\"; exec java -cp {} {} \"$url\"",
        tools.jdbc.display(),
        script("JdbcTest.java").display()
    ));
    run_against_server("pgjdbc", cmd);
}
