//! A real Kafka-protocol broker for tests: tansu (installed by `scripts/kafka-broker.sh
//! install`), in-memory storage, on a free port, killed on drop.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running broker.
pub struct Broker {
    child: Child,
    /// `127.0.0.1:PORT`, for `'properties.bootstrap.servers'`.
    pub brokers: String,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tansu_binary() -> Option<PathBuf> {
    let tools = std::env::var("WEIR_TOOLS").unwrap_or_else(|_| "/var/tmp/weir-tools".into());
    let path = PathBuf::from(tools).join("bin/tansu");
    path.exists().then_some(path)
}

/// Starts a broker; `None` (said loudly) when tansu is not installed and `WEIR_REQUIRE_KAFKA`
/// is not `1` (test.sh sets it after installing tansu, so CI never skips).
pub fn start_broker() -> Option<Broker> {
    let Some(binary) = tansu_binary() else {
        assert!(
            std::env::var("WEIR_REQUIRE_KAFKA").as_deref() != Ok("1"),
            "WEIR_REQUIRE_KAFKA=1 but tansu is not installed: run scripts/kafka-broker.sh install"
        );
        eprintln!("\n*** SKIPPED: the Kafka broker tansu is not installed (scripts/kafka-broker.sh install) ***\n");
        return None;
    };
    for _attempt in 0..5 {
        let port = TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("addr").port();
        let url = format!("tcp://127.0.0.1:{port}");
        let child = Command::new(&binary)
            .args(["broker", "--listener-url", &url, "--advertised-listener-url", &url])
            .args(["--storage-engine", "memory://tansu/"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tansu starts");
        let mut broker = Broker { child, brokers: format!("127.0.0.1:{port}") };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(broker);
            }
            if broker.child.try_wait().expect("tansu status").is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("tansu did not start on a free port in 5 attempts");
}
