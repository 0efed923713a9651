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
    /// The port the broker listens on (not [`Broker::brokers`]' when it advertises another).
    pub port: u16,
}

impl Broker {
    /// Stops (`SIGSTOP`) or continues (`SIGCONT`) the broker's process: stopped, it keeps its
    /// connections open and answers nothing, as a broker behind a network that drops packets.
    #[allow(dead_code)]
    pub fn freeze(&self, frozen: bool) {
        let signal = if frozen { "-STOP" } else { "-CONT" };
        let status = Command::new("kill").args([signal, &self.child.id().to_string()]).status().expect("kill runs");
        assert!(status.success(), "kill {signal} of the broker failed");
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // A stopped process is continued first, so that it takes the kill (an exited one's
        // `kill -CONT` fails, and is ignored).
        let _ = Command::new("kill").args(["-CONT", &self.child.id().to_string()]).stderr(Stdio::null()).status();
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
    start_broker_advertising(None)
}

/// [`start_broker`], telling clients to connect to 127.0.0.1:`advertised` (a proxy in front of
/// it) rather than to the port it listens on; [`Broker::brokers`] is then that address.
pub fn start_broker_advertising(advertised: Option<u16>) -> Option<Broker> {
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
        let advertised_url = advertised.map_or_else(|| url.clone(), |p| format!("tcp://127.0.0.1:{p}"));
        let child = Command::new(&binary)
            .args(["broker", "--listener-url", &url, "--advertised-listener-url", &advertised_url])
            .args(["--storage-engine", "memory://tansu/"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tansu starts");
        let mut broker = Broker { child, brokers: format!("127.0.0.1:{}", advertised.unwrap_or(port)), port };
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

/// Waits until job `job` has read `n` records of the topics it reads (dead letters and
/// tombstones included: the sum of its Kafka positions in `weir_sources`), or fails after
/// `timeout`.
pub async fn wait_for_job_offsets(client: &tokio_postgres::Client, job: &str, n: i64, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let read: i64 = client
            .query_one(
                &format!("SELECT CAST(COALESCE(SUM(position), 0) AS BIGINT) FROM weir_sources WHERE job = '{job}'"),
                &[],
            )
            .await
            .expect("weir_sources")
            .get(0);
        if read >= n {
            return;
        }
        assert!(Instant::now() < deadline, "{job}: only {read} of {n} records read");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A reader of every partition of `topic` from its earliest offset.
pub fn earliest_reader(brokers: &str, topic: &str) -> weir_connectors::kafka::KafkaReader {
    let options = std::collections::BTreeMap::from([
        ("connector".to_string(), "kafka".to_string()),
        ("topic".to_string(), topic.to_string()),
        ("properties.bootstrap.servers".to_string(), brokers.to_string()),
        ("scan.startup.mode".to_string(), "earliest-offset".to_string()),
    ]);
    let config = weir_connectors::kafka::KafkaSourceConfig::from_options(&options).expect("reader config");
    weir_connectors::kafka::KafkaReader::open(&config, &std::collections::BTreeMap::new()).expect("reader")
}
