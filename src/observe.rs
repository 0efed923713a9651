//! Process-wide instruments for `/metrics`: what is counted as it happens (connections,
//! statements, epoch commits). What the jobs, sources and state tables show is read from the
//! engine at each scrape instead (`web::metrics`), so the hot paths of the jobs count nothing
//! for it beyond their operators' own figures.
//!
//! The instruments are `prometheus-client` metrics, cheap to update from any thread; the
//! scrape registers them under their names (`weir_connections`, ...).
//!
//! Also here: [`Activities`], the client connections and their statements, which
//! `pg_stat_activity` and the web page show and `pg_cancel_backend` cancels.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

/// The labels of a statement's metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatementLabels {
    /// The statement's first keyword, lower case ([`statement_kind`]).
    pub kind: &'static str,
    /// `ok` or `error`.
    pub outcome: &'static str,
}

/// The process's instruments; see the module docs.
#[derive(Debug)]
pub struct Instruments {
    /// Client connections open now.
    pub connections: Gauge,
    /// Client connections accepted since the process started.
    pub connections_total: Counter,
    /// Statements run, by kind and outcome.
    pub statements: Family<StatementLabels, Counter>,
    /// Statement latency, s, by kind and outcome (from receipt to the complete result).
    pub statement_seconds: Family<StatementLabels, Histogram, fn() -> Histogram>,
    /// Epochs committed (by statements, the source thread and the jobs' own threads).
    pub epochs: Counter,
    /// The atomic RocksDB write of one epoch (its state writes and source positions), s.
    pub epoch_commit_seconds: Histogram,
}

/// 0.1 ms to about 3 s, doubling.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

/// The process's instruments, created at first use.
pub fn instruments() -> &'static Instruments {
    static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();
    INSTRUMENTS.get_or_init(|| Instruments {
        connections: Gauge::default(),
        connections_total: Counter::default(),
        statements: Family::default(),
        statement_seconds: Family::new_with_constructor(latency_histogram),
        epochs: Counter::default(),
        epoch_commit_seconds: latency_histogram(),
    })
}

impl Instruments {
    /// Counts a committed epoch whose write took `took`.
    pub fn epoch_committed(&self, took: Duration) {
        self.epochs.inc();
        self.epoch_commit_seconds.observe(took.as_secs_f64());
    }

    /// Counts a statement of `sql` that took `took` and failed or not.
    pub fn statement(&self, sql: &str, ok: bool, took: Duration) {
        let labels = StatementLabels { kind: statement_kind(sql), outcome: if ok { "ok" } else { "error" } };
        self.statements.get_or_create(&labels).inc();
        self.statement_seconds.get_or_create(&labels).observe(took.as_secs_f64());
    }
}

/// The kind of statement `sql` is, for metric labels: its first keyword in lower case if it is
/// one of the statements Weir runs, else `other` (so the label has few values).
pub fn statement_kind(sql: &str) -> &'static str {
    const KINDS: &[&str] = &[
        "select", "insert", "update", "delete", "create", "drop", "alter", "set", "show", "explain", "flush", "stop",
        "describe", "with", "values", "reset", "begin", "commit", "rollback",
    ];
    let first = sql
        .trim_start_matches(|c: char| c.is_whitespace() || c == '(')
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    KINDS.iter().find(|k| **k == first).copied().unwrap_or("other")
}

/// Now, ms since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// One client connection, as `pg_stat_activity` shows it (Postgres's columns of the same
/// names; times in ms since the Unix epoch).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Activity {
    /// The process id the connection got at startup (BackendKeyData; the key of a
    /// CancelRequest).
    pub pid: i32,
    pub usename: String,
    pub datname: String,
    pub application_name: String,
    /// The client's address, without the port.
    pub client_addr: Option<String>,
    pub backend_start: i64,
    /// `active` while a statement runs, else `idle`.
    pub state: &'static str,
    /// The running statement, or the last one (empty before the first).
    pub query: String,
    pub query_start: Option<i64>,
    pub state_change: i64,
}

/// Cancels the statement a connection is running (as its client's CancelRequest does); does
/// nothing while it runs none. `true`: because the server is shutting down.
pub type Canceller = Arc<dyn Fn(bool) + Send + Sync>;

/// The open client connections of one server, by pid, with a way to cancel each one's running
/// statement (`pg_cancel_backend`).
#[derive(Default)]
pub struct Activities(Mutex<BTreeMap<i32, (Activity, Canceller)>>);

impl std::fmt::Debug for Activities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.all()).finish()
    }
}

impl Activities {
    fn with(&self, f: impl FnOnce(&mut BTreeMap<i32, (Activity, Canceller)>)) {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// A connection has started (its startup message was accepted); `cancel` cancels its
    /// running statement.
    pub fn open(&self, activity: Activity, cancel: Canceller) {
        self.with(|all| {
            all.insert(activity.pid, (activity, cancel));
        });
    }

    /// Connection `pid` has ended.
    pub fn close(&self, pid: i32) {
        self.with(|all| {
            all.remove(&pid);
        });
    }

    /// Cancels the running statement of connection `pid` (Postgres's `pg_cancel_backend`):
    /// whether there is such a connection.
    pub fn cancel(&self, pid: i32) -> bool {
        let cancel = self.0.lock().unwrap_or_else(PoisonError::into_inner).get(&pid).map(|(_, c)| Arc::clone(c));
        cancel.map(|c| c(false)).is_some()
    }

    /// Cancels the running statement of every connection: the server is shutting down.
    pub fn shut_down(&self) {
        let all: Vec<Canceller> = self.0.lock().unwrap_or_else(PoisonError::into_inner).values().map(|(_, c)| Arc::clone(c)).collect();
        for cancel in all {
            cancel(true);
        }
    }

    /// Connection `pid` runs `sql`.
    pub fn started(&self, pid: i32, sql: &str) {
        self.with(|all| {
            if let Some((a, _)) = all.get_mut(&pid) {
                let now = now_ms();
                a.state = "active";
                a.query = sql.to_string();
                a.query_start = Some(now);
                a.state_change = now;
            }
        });
    }

    /// Connection `pid`'s statement has ended.
    pub fn finished(&self, pid: i32) {
        self.with(|all| {
            if let Some((a, _)) = all.get_mut(&pid) {
                a.state = "idle";
                a.state_change = now_ms();
            }
        });
    }

    /// Every open connection, by pid.
    pub fn all(&self) -> Vec<Activity> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).values().map(|(a, _)| a.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::statement_kind;

    #[test]
    fn statement_kinds_are_first_keywords() {
        assert_eq!(statement_kind("  SELECT 1"), "select");
        assert_eq!(statement_kind("(select 1)"), "select");
        assert_eq!(statement_kind("Create materialized view v as select 1"), "create");
        assert_eq!(statement_kind("FLUSH;"), "flush");
        assert_eq!(statement_kind("vacuum"), "other");
        assert_eq!(statement_kind(""), "other");
    }
}
