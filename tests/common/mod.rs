//! Shared by the integration tests: a real `weir serve` process with its own data directory,
//! reached over the Postgres wire and HTTP. The server binds port 0 for both and the test reads
//! the ports it got from the server's own log lines (`listening on`, `web page and metrics
//! on`), so tests running at once never share a port.
#![allow(dead_code)]

pub mod kafka;
pub mod registry;

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server process; killed on drop.
pub struct Server {
    pub child: Child,
    pub port: u16,
    /// The port of the web page, `/metrics` and `/health`.
    pub http_port: u16,
    pub data_dir: PathBuf,
    pub log: PathBuf,
}

impl Server {
    /// Starts `weir serve` on `data_dir` and waits (up to 60 s) until it listens. Jobs run
    /// with parallelism 2 (`--workers 2`) whatever the machine's cores, so every test runs its
    /// keyed operators behind hash exchanges and EXPLAIN output does not depend on the host.
    pub fn start(data_dir: &Path) -> Server {
        Self::start_with_env(data_dir, &[])
    }

    /// [`Server::start`] with environment variables `env` set (`WEIR_FAILPOINT`, ...).
    pub fn start_with_env(data_dir: &Path, env: &[(&str, &str)]) -> Server {
        Self::start_with(data_dir, &[], env)
    }

    /// [`Server::start`] with more `weir serve` arguments (`--auth-file`, ...) and `env`.
    pub fn start_with(data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
        std::fs::create_dir_all(data_dir).expect("data dir");
        let log = data_dir.with_extension("log");
        let log_file = std::fs::OpenOptions::new().create(true).append(true).open(&log).expect("log file");
        let log_start = log_file.metadata().map(|m| m.len()).unwrap_or(0);
        // `args` may name another --pg-listen address.
        let listen = if args.contains(&"--pg-listen") { &[][..] } else { &["--pg-listen", "127.0.0.1:0"][..] };
        let child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--workers", "2", "--http-listen", "127.0.0.1:0"])
            .args(listen)
            .arg("--data-dir")
            .arg(data_dir)
            .args(args)
            .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()))
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .expect("start weir serve");
        let mut server = Server { child, port: 0, http_port: 0, data_dir: data_dir.to_path_buf(), log };
        (server.port, server.http_port) = server.wait_listening(log_start);
        server
    }

    /// The ports from this process's `listening on 127.0.0.1:PORT` and `web page and metrics
    /// on http://127.0.0.1:PORT` lines (written after `log_start`), polled with a deadline.
    fn wait_listening(&mut self, log_start: u64) -> (u16, u16) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let mut text = String::new();
            if let Ok(mut f) = std::fs::File::open(&self.log) {
                let _ = f.seek(SeekFrom::Start(log_start));
                let _ = f.read_to_string(&mut text);
            }
            let port_after = |marker: &str| -> Option<u16> {
                let addr = text.lines().find_map(|l| l.split(marker).nth(1))?;
                addr.trim().rsplit(':').next()?.parse().ok()
            };
            if let (Some(pg), Some(http)) = (port_after("listening on "), port_after("web page and metrics on ")) {
                return (pg, http);
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("weir serve exited with {status}; log: {}", self.log.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("weir serve did not listen within 60 s; log: {}", self.log.display());
    }

    /// `http://127.0.0.1:PORT/path` of the server's HTTP side.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.http_port)
    }

    /// The connection string for tokio-postgres.
    pub fn conn_str(&self) -> String {
        format!("host=127.0.0.1 port={} user=weir dbname=weir", self.port)
    }

    /// Sends SIGTERM (`kill -TERM`) and waits, up to `within`, for the process to exit.
    ///
    /// # Panics
    /// When it is still running after `within`.
    pub fn terminate(&mut self, within: Duration) -> std::process::ExitStatus {
        let sent = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().expect("run kill");
        assert!(sent.success(), "kill -TERM failed");
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for weir serve") {
                return status;
            }
            assert!(Instant::now() < deadline, "weir serve still runs {within:?} after SIGTERM; log: {}", self.log.display());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process with SIGKILL (a crash) and waits for it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The directory for test files: the target dir's `tmp` (Cargo gives its path to integration
/// tests at compile time), else the system's.
pub fn tmp_dir() -> PathBuf {
    option_env!("CARGO_TARGET_TMPDIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir)
}

/// A scratch directory `weir-NAME-PID` under [`tmp_dir`], emptied first. The directories of
/// earlier runs of the same test (other pids) are removed, so runs do not pile up state on
/// disk; the last run's stays for a look after a failure.
pub fn scratch_dir(name: &str) -> PathBuf {
    let prefix = format!("weir-{name}-");
    if let Ok(entries) = std::fs::read_dir(tmp_dir()) {
        for entry in entries.flatten() {
            let file_name = entry.file_name().to_string_lossy().into_owned();
            let pid = file_name.strip_prefix(&prefix).filter(|p| p.chars().all(|c| c.is_ascii_digit()));
            if pid.is_some_and(|p| p != std::process::id().to_string()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    let base = tmp_dir().join(format!("{prefix}{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).expect("scratch dir");
    base
}

/// Connects with tokio-postgres, spawning the connection task.
pub async fn connect(server: &Server) -> tokio_postgres::Client {
    connect_with(&server.conn_str()).await
}

/// [`connect`] with an `application_name` (what `pg_stat_activity` shows).
pub async fn connect_as(server: &Server, application_name: &str) -> tokio_postgres::Client {
    connect_with(&format!("{} application_name={application_name}", server.conn_str())).await
}

async fn connect_with(conn_str: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(conn_str, tokio_postgres::NoTls)
        .await
        .expect("connect to weir");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// GETs `path` from the server's HTTP side: (status, body).
pub async fn http_get(server: &Server, path: &str) -> (u16, String) {
    let response = reqwest::get(server.url(path)).await.expect("HTTP request");
    let status = response.status().as_u16();
    (status, response.text().await.expect("HTTP body"))
}

/// The value of the series `name{labels}` in a `/metrics` text (labels in the order the server
/// writes them), if present.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let series = if labels.is_empty() {
        name.to_string()
    } else {
        let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        format!("{name}{{{}}}", l.join(","))
    };
    text.lines().find_map(|line| line.strip_prefix(&series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Polls `/metrics` until `ready` holds for its text, or panics after `timeout`.
pub async fn metrics_until(server: &Server, timeout: Duration, what: &str, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let (status, text) = http_get(server, "/metrics").await;
        assert_eq!(status, 200, "/metrics: {text}");
        if ready(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "{what} within {timeout:?}; last /metrics:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
