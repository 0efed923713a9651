//! Shared by the integration tests: a real `weir serve` process with its own data directory,
//! reached over the Postgres wire. The server binds port 0 and the test reads the port it got
//! from the server's own `listening on` log line, so tests running at once never share a port.
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
    pub data_dir: PathBuf,
    pub log: PathBuf,
}

impl Server {
    /// Starts `weir serve` on `data_dir` and waits (up to 60 s) until it listens. Jobs run
    /// with parallelism 2 (`--workers 2`) whatever the machine's cores, so every test runs its
    /// keyed operators behind hash exchanges and EXPLAIN output does not depend on the host.
    pub fn start(data_dir: &Path) -> Server {
        std::fs::create_dir_all(data_dir).expect("data dir");
        let log = data_dir.with_extension("log");
        let log_file = std::fs::OpenOptions::new().create(true).append(true).open(&log).expect("log file");
        let log_start = log_file.metadata().map(|m| m.len()).unwrap_or(0);
        let child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--workers", "2", "--pg-listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()))
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .expect("start weir serve");
        let mut server = Server { child, port: 0, data_dir: data_dir.to_path_buf(), log };
        server.port = server.wait_listening(log_start);
        server
    }

    /// The port from this process's `listening on 127.0.0.1:PORT` line (written after
    /// `log_start`), polled with a deadline.
    fn wait_listening(&mut self, log_start: u64) -> u16 {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let mut text = String::new();
            if let Ok(mut f) = std::fs::File::open(&self.log) {
                let _ = f.seek(SeekFrom::Start(log_start));
                let _ = f.read_to_string(&mut text);
            }
            let port = text
                .lines()
                .find_map(|l| l.split("listening on ").nth(1))
                .and_then(|addr| addr.trim().rsplit(':').next()?.parse().ok());
            if let Some(port) = port {
                return port;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("weir serve exited with {status}; log: {}", self.log.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("weir serve did not listen within 60 s; log: {}", self.log.display());
    }

    /// The connection string for tokio-postgres.
    pub fn conn_str(&self) -> String {
        format!("host=127.0.0.1 port={} user=weir dbname=weir", self.port)
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

/// A scratch directory under the target dir, emptied first.
pub fn scratch_dir(name: &str) -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("weir-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).expect("scratch dir");
    base
}

/// Connects with tokio-postgres, spawning the connection task.
pub async fn connect(server: &Server) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(&server.conn_str(), tokio_postgres::NoTls)
        .await
        .expect("connect to weir");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}
