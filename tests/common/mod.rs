//! Shared by the integration tests: a real `weir serve` process on a free port with its own
//! data directory, reached over the Postgres wire.
#![allow(dead_code)]

use std::net::TcpListener;
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

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

impl Server {
    /// Starts `weir serve` on `data_dir` and waits (up to 60 s) until it accepts connections.
    pub fn start(data_dir: &Path) -> Server {
        Self::start_on(data_dir, free_port())
    }

    /// Starts `weir serve` on `data_dir` and `port`.
    pub fn start_on(data_dir: &Path, port: u16) -> Server {
        std::fs::create_dir_all(data_dir).expect("data dir");
        let log = data_dir.with_extension("log");
        let log_file = std::fs::OpenOptions::new().create(true).append(true).open(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--pg-listen", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(data_dir)
            .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()))
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .expect("start weir serve");
        let server = Server { child, port, data_dir: data_dir.to_path_buf(), log };
        server.wait_ready();
        server
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("weir serve did not listen on {} within 60 s; log: {}", self.port, self.log.display());
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
