//! A Kafka job whose brokers go away restarts from its last checkpoint once they are back,
//! and a server holding it starts while they are away. The broker (tansu) sits behind a TCP
//! proxy that the test stops and starts again: it advertises the proxy's address, so every
//! connection of Weir's goes through it, while the broker keeps its topics.
//!
//! Two jobs read the topic: a view, and an `INSERT INTO` a Kafka sink on the same broker. While
//! the proxy is down both show `RESTARTING` with the error, FLUSH says it cannot wait for
//! them, and the server, killed and started again, opens (the jobs still `RESTARTING`). Once
//! the proxy is back they run again and, after FLUSH, the view equals the totals of every
//! record produced, computed here (nothing lost or counted twice), and the sink's topic holds
//! every record.
//!
//! A third job, a view over a bounded `datagen` table, does not touch Kafka: it runs on as the
//! others fail (its operators' figures are not reset, as a reload of the whole engine did), so
//! a failed job fails alone.

mod common;

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weir_connectors::kafka::{create_topic, KafkaSinkConfig, KafkaWriter};

/// A TCP proxy from 127.0.0.1:`port` to 127.0.0.1:`to` that can be stopped (its listener
/// closed and every connection cut) and started again on the same port.
struct Proxy {
    port: u16,
    to: u16,
    stop: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<TcpStream>>>,
    accepter: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    fn new(port: u16, to: u16) -> Proxy {
        let mut proxy = Proxy {
            port,
            to,
            stop: Arc::new(AtomicBool::new(false)),
            connections: Arc::default(),
            accepter: None,
        };
        proxy.start();
        proxy
    }

    fn start(&mut self) {
        self.stop.store(false, Ordering::SeqCst);
        let listener = TcpListener::bind(("127.0.0.1", self.port)).expect("proxy port");
        listener.set_nonblocking(true).expect("nonblocking");
        let (stop, connections, to) = (Arc::clone(&self.stop), Arc::clone(&self.connections), self.to);
        self.accepter = Some(std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        client.set_nonblocking(false).expect("blocking");
                        let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else { continue };
                        let mut held = connections.lock().unwrap();
                        for stream in [&client, &server] {
                            held.push(stream.try_clone().expect("clone"));
                        }
                        pipe(client.try_clone().expect("clone"), server.try_clone().expect("clone"));
                        pipe(server, client);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(5)),
                    Err(e) => panic!("proxy accept: {e}"),
                }
            }
        }));
    }

    /// Closes the listener and cuts every connection: the broker is unreachable.
    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(accepter) = self.accepter.take() {
            accepter.join().expect("accepter");
        }
        for stream in self.connections.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Copies `from` into `to` on a thread of its own until either side closes.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(Shutdown::Both);
    });
}

/// Record `i` into `topic`: key `k{i % 7}`, amount `i`.
fn produce(brokers: &str, topic: &str, range: std::ops::Range<i64>) {
    let options = BTreeMap::from([
        ("connector".to_string(), "kafka".to_string()),
        ("topic".to_string(), topic.to_string()),
        ("properties.bootstrap.servers".to_string(), brokers.to_string()),
        // One record per batch keeps tansu's resumed reads exact (see kafka_pipeline.rs).
        ("properties.batch.num.messages".to_string(), "1".to_string()),
    ]);
    let mut writer = KafkaWriter::open(&KafkaSinkConfig::from_options(&options).expect("sink config")).expect("producer");
    for i in range {
        let value = format!(r#"{{"id": {i}, "k": "k{}", "amount": {i}}}"#, i % 7);
        writer.send(Some(i.to_string().as_bytes()), Some(value.as_bytes()), &[], None).expect("send");
    }
    writer.flush(Duration::from_secs(60)).expect("flush");
}

/// Per key, the count and sum of amounts of records `range`.
fn totals(range: std::ops::Range<i64>) -> BTreeMap<String, (i64, i64)> {
    let mut out = BTreeMap::new();
    for i in range {
        let entry = out.entry(format!("k{}", i % 7)).or_insert((0, 0));
        entry.0 += 1;
        entry.1 += i;
    }
    out
}

async fn view(client: &tokio_postgres::Client) -> BTreeMap<String, (i64, i64)> {
    view_of(client, "restart_totals").await
}

/// The rows of view `name` (k, n, total).
async fn view_of(client: &tokio_postgres::Client, name: &str) -> BTreeMap<String, (i64, i64)> {
    client
        .query(&format!("SELECT k, n, total FROM {name}"), &[])
        .await
        .expect("view")
        .iter()
        .map(|r| (r.get::<_, String>(0), (r.get::<_, i64>(1), r.get::<_, i64>(2))))
        .collect()
}

/// The rows that reached the operators of job `name` since it started in this process.
async fn rows_in(client: &tokio_postgres::Client, name: &str) -> i64 {
    client
        .query_one("SELECT CAST(SUM(rows_in) AS BIGINT) FROM weir_operators WHERE job = $1", &[&name])
        .await
        .expect("weir_operators")
        .get(0)
}

/// Creates Kafka table `table` over topic `table` on `brokers` (records as [`produce`] writes
/// them, read from the earliest offset) and view `view`, its count and total per key.
async fn orders_and_totals(client: &tokio_postgres::Client, brokers: &str, table: &str, view: &str) {
    client
        .batch_execute(&format!(
            "CREATE TABLE {table} (id BIGINT, k STRING, amount BIGINT)
             WITH ('connector' = 'kafka', 'topic' = '{table}', 'properties.bootstrap.servers' = '{brokers}',
                   'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
             CREATE MATERIALIZED VIEW {view} AS SELECT k, COUNT(*) AS n, SUM(amount) AS total FROM {table} GROUP BY k;"
        ))
        .await
        .expect("pipeline");
}

/// The records job `job` has read: the sum of its positions in `weir_sources`.
async fn positions(client: &tokio_postgres::Client, job: &str) -> i64 {
    client
        .query_one("SELECT CAST(SUM(position) AS BIGINT) FROM weir_sources WHERE job = $1", &[&job])
        .await
        .expect("weir_sources")
        .get(0)
}

/// The view's job and the INSERT job's names in SHOW JOBS.
const JOBS: [&str; 2] = ["restart_totals", "INSERT INTO restart_out"];

/// Job `name`'s (status, error) in SHOW JOBS.
async fn job(client: &tokio_postgres::Client, name: &str) -> (String, Option<String>) {
    let rows = client.simple_query("SHOW JOBS").await.expect("SHOW JOBS");
    rows.iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) if r.get("job_name") == Some(name) => {
                Some((r.get("status").unwrap().to_string(), r.get("error").map(str::to_string)))
            }
            _ => None,
        })
        .expect("the job is listed")
}

/// Polls SHOW JOBS until both jobs' status is `status`; returns the view's job's error.
async fn wait_for_status(client: &tokio_postgres::Client, status: &str) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    for name in JOBS {
        loop {
            let (now, error) = job(client, name).await;
            if now == status {
                break;
            }
            assert!(Instant::now() < deadline, "job {name} is {now}, not {status}, after 120 s; error {error:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    job(client, JOBS[0]).await.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_brokers_go_away_restarts_from_its_checkpoint_once_they_are_back() {
    let proxy_port = TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("addr").port();
    let Some(broker) = common::kafka::start_broker_advertising(Some(proxy_port)) else { return };
    let mut proxy = Proxy::new(proxy_port, broker.port);
    let b = broker.brokers.clone();
    create_topic(&b, "restart_orders", 2).expect("topic");
    create_topic(&b, "restart_out", 2).expect("topic");
    let dir = common::scratch_dir("kafka-restart");
    let mut server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    orders_and_totals(&client, &b, "restart_orders", "restart_totals").await;
    client
        .batch_execute(&format!(
            "CREATE TABLE restart_out (id BIGINT, k STRING, amount BIGINT)
             WITH ('connector' = 'kafka', 'topic' = 'restart_out', 'properties.bootstrap.servers' = '{b}', 'format' = 'json');
             INSERT INTO restart_out SELECT id, k, amount FROM restart_orders;
             CREATE TABLE restart_seq (id BIGINT)
             WITH ('connector' = 'datagen', 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '500');
             CREATE MATERIALIZED VIEW restart_healthy AS SELECT COUNT(*) AS n, SUM(id) AS s FROM restart_seq;"
        ))
        .await
        .expect("pipeline");
    produce(&b, "restart_orders", 0..300);
    client.batch_execute("FLUSH").await.expect("FLUSH");
    assert_eq!(view(&client).await, totals(0..300));
    for name in JOBS.into_iter().chain(["restart_healthy"]) {
        assert_eq!(job(&client, name).await, ("RUNNING".to_string(), None), "{name}");
    }
    // 1 + 2 + ... + 500 = 500 * 501 / 2.
    let healthy = client.query_one("SELECT n, s FROM restart_healthy", &[]).await.expect("healthy view");
    assert_eq!((healthy.get::<_, i64>(0), healthy.get::<_, i64>(1)), (500, 125_250));
    let healthy_rows_in = rows_in(&client, "restart_healthy").await;
    assert!(healthy_rows_in >= 500, "{healthy_rows_in} rows reached the healthy view's operators");

    // The brokers go away: the job fails, and waits to restart.
    proxy.stop();
    let error = wait_for_status(&client, "RESTARTING").await.expect("a RESTARTING job shows its error");
    assert!(error.contains(&b) && error.contains("from the last checkpoint"), "{error}");
    let flush = client.batch_execute("FLUSH").await.expect_err("FLUSH cannot wait for a restarting job");
    let db = flush.as_db_error().expect("a server error");
    assert_eq!(db.code().code(), "58000", "{db:?}");
    assert!(db.message().contains("restart_totals") && db.message().contains("RESTARTING"), "{}", db.message());
    // Its committed rows stay readable.
    assert_eq!(view(&client).await, totals(0..300));
    // The job that reads no Kafka ran on: not restarted, its figures not reset.
    assert_eq!(job(&client, "restart_healthy").await, ("RUNNING".to_string(), None));
    assert_eq!(rows_in(&client, "restart_healthy").await, healthy_rows_in);

    // A server holding it starts while they are away.
    drop(client);
    server.kill9();
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    wait_for_status(&client, "RESTARTING").await;
    assert_eq!(view(&client).await, totals(0..300));

    // Back: the job runs again from its checkpoint and reads what was produced since.
    proxy.start();
    produce(&b, "restart_orders", 300..700);
    wait_for_status(&client, "RUNNING").await;
    client.batch_execute("FLUSH").await.expect("FLUSH");
    assert_eq!(view(&client).await, totals(0..700));
    assert_eq!(positions(&client, "restart_totals").await, 700, "records read");
    // The INSERT job wrote every record, at least once (its sink is at-least-once).
    let mut reader = common::kafka::earliest_reader(&b, "restart_out");
    let mut ids = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while ids.len() < 700 {
        assert!(Instant::now() < deadline, "the sink wrote {} of 700 records", ids.len());
        for r in reader.poll(1_000, Duration::from_millis(100)).expect("poll") {
            let value: serde_json::Value = serde_json::from_slice(r.payload.as_deref().expect("value")).expect("json");
            ids.insert(value["id"].as_i64().expect("id"));
        }
    }
    assert_eq!(ids, (0..700).collect());
    let (_, metrics) = common::http_get(&server, "/metrics").await;
    let restarts = common::metric(&metrics, "weir_job_restarts_total", &[("job_name", "restart_totals"), ("job_id", "job-1")]).expect("the metric");
    assert!(restarts >= 1.0, "{restarts} restarts counted");
}

/// A broker that stops answering without closing its connections (its process stopped, as
/// behind a network that drops packets) holds up nothing else: statements on other tables
/// answer at once throughout, the job reading from it shows `RESTARTING` once its requests time
/// out, and when the broker answers again the job goes on from its checkpoint, nothing lost or
/// counted twice. The job reports its offsets to a consumer group, a request the broker never
/// answers while stopped. Suspended while it waits to restart, and resumed, it keeps its
/// restarts counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_broker_holds_up_nothing_else_and_its_job_goes_on_once_it_answers() {
    let Some(broker) = common::kafka::start_broker() else { return };
    let b = broker.brokers.clone();
    create_topic(&b, "frozen_orders", 2).expect("topic");
    let dir = common::scratch_dir("kafka-frozen");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE frozen_orders (id BIGINT, k STRING, amount BIGINT)
             WITH ('connector' = 'kafka', 'topic' = 'frozen_orders', 'properties.bootstrap.servers' = '{b}',
                   'properties.group.id' = 'weir-frozen', 'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
             CREATE MATERIALIZED VIEW frozen_totals AS SELECT k, COUNT(*) AS n, SUM(amount) AS total FROM frozen_orders GROUP BY k;
             CREATE TABLE frozen_plain (a INT);"
        ))
        .await
        .expect("pipeline");
    produce(&b, "frozen_orders", 0..300);
    client.batch_execute("FLUSH").await.expect("FLUSH");
    assert_eq!(view_of(&client, "frozen_totals").await, totals(0..300));

    // Frozen while the job reads and commits: statements on other tables do not wait for it.
    produce(&b, "frozen_orders", 300..2_300);
    broker.freeze(true);
    let frozen_at = Instant::now();
    let mut inserted = 0;
    loop {
        let (now, _) = job(&client, "frozen_totals").await;
        let statement = client.execute("INSERT INTO frozen_plain VALUES (1)", &[]);
        tokio::time::timeout(Duration::from_secs(10), statement)
            .await
            .unwrap_or_else(|_| panic!("an INSERT into a plain table waited 10 s, {} s after the broker froze", frozen_at.elapsed().as_secs()))
            .expect("INSERT");
        inserted += 1;
        if now == "RESTARTING" && frozen_at.elapsed() >= Duration::from_secs(15) {
            break;
        }
        assert!(frozen_at.elapsed() < Duration::from_secs(120), "the job is {now}, not RESTARTING, 120 s after its broker froze");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let count: i64 = client.query_one("SELECT COUNT(*) FROM frozen_plain", &[]).await.expect("count").get(0);
    assert_eq!(count, inserted);

    // Suspended meanwhile, it keeps its restarts counted (a counter, as Flink's numRestarts).
    let restarts = restarts_of(&client, "frozen_totals").await;
    assert!(restarts >= 1, "{restarts} restarts");
    client.batch_execute("ALTER MATERIALIZED VIEW frozen_totals SUSPEND").await.expect("SUSPEND");
    assert_eq!(job(&client, "frozen_totals").await, ("SUSPENDED".to_string(), None));
    let suspended = restarts_of(&client, "frozen_totals").await;
    assert!(suspended >= restarts, "{suspended} restarts once suspended, {restarts} before");

    // Answering again: resumed, the job goes on from its checkpoint.
    broker.freeze(false);
    client.batch_execute("ALTER MATERIALIZED VIEW frozen_totals RESUME").await.expect("RESUME");
    wait_for(&client, "frozen_totals", "RUNNING").await;
    assert!(restarts_of(&client, "frozen_totals").await >= suspended);
    produce(&b, "frozen_orders", 2_300..2_500);
    client.batch_execute("FLUSH").await.expect("FLUSH");
    assert_eq!(view_of(&client, "frozen_totals").await, totals(0..2_500));
}

/// Job `name`'s restarts in SHOW JOBS.
async fn restarts_of(client: &tokio_postgres::Client, name: &str) -> u64 {
    let rows = client.simple_query("SHOW JOBS").await.expect("SHOW JOBS");
    rows.iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) if r.get("job_name") == Some(name) => r.get("restarts")?.parse().ok(),
            _ => None,
        })
        .expect("the job is listed")
}

/// Job `name`'s status in SHOW JOBS once it is `status` (polled, 120 s at most), and its error.
async fn wait_for(client: &tokio_postgres::Client, name: &str, status: &str) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (now, error) = job(client, name).await;
        if now == status {
            return error;
        }
        assert!(Instant::now() < deadline, "job {name} is {now}, not {status}, after 120 s; error {error:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `ALTER TABLE .. SET ('properties.bootstrap.servers' = ..)` moves a running job to other
/// brokers: it starts again from the statement's checkpoint with them. Pointed at an address
/// where nothing answers it waits to restart; pointed back, it reads on from where it was,
/// nothing lost or read twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_table_moves_a_job_to_other_brokers_and_it_goes_on_from_its_checkpoint() {
    let Some(broker) = common::kafka::start_broker() else { return };
    let b = broker.brokers.clone();
    create_topic(&b, "alter_orders", 2).expect("topic");
    let dir = common::scratch_dir("kafka-alter");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    orders_and_totals(&client, &b, "alter_orders", "alter_totals").await;
    produce(&b, "alter_orders", 0..100);
    client.batch_execute("FLUSH").await.expect("FLUSH");
    assert_eq!(view_of(&client, "alter_totals").await, totals(0..100));

    // Nothing listens on a port just given back.
    let dead = TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("addr").port();
    client
        .batch_execute(&format!("ALTER TABLE alter_orders SET ('properties.bootstrap.servers' = '127.0.0.1:{dead}')"))
        .await
        .expect("ALTER TABLE");
    let error = wait_for(&client, "alter_totals", "RESTARTING").await.expect("its error");
    assert!(error.contains(&format!("127.0.0.1:{dead}")), "{error}");
    let create: String = client.query_one("SHOW CREATE TABLE alter_orders", &[]).await.expect("SHOW CREATE").get(1);
    assert!(create.contains(&format!("'properties.bootstrap.servers' = '127.0.0.1:{dead}'")), "{create}");
    assert_eq!(view_of(&client, "alter_totals").await, totals(0..100));

    produce(&b, "alter_orders", 100..250);
    client
        .batch_execute(&format!("ALTER TABLE alter_orders SET ('properties.bootstrap.servers' = '{b}')"))
        .await
        .expect("ALTER TABLE back");
    // It restarted within the statement: a FLUSH right after waits for it.
    assert_eq!(job(&client, "alter_totals").await, ("RUNNING".to_string(), None));
    client.batch_execute("FLUSH").await.expect("FLUSH");
    assert_eq!(view_of(&client, "alter_totals").await, totals(0..250));
    assert_eq!(positions(&client, "alter_totals").await, 250, "records read");

    // What it reads cannot change under it.
    let refused = client.batch_execute("ALTER TABLE alter_orders SET ('topic' = 'other')").await.expect_err("topic");
    assert_eq!(refused.as_db_error().expect("a server error").code().code(), "22023");
}

/// Records `{"id": i}` into `topic`, each `(partition, i)` into its partition.
fn produce_to_partitions(brokers: &str, topic: &str, records: &[(i32, i64)]) {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let producer: BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("batch.num.messages", "1")
        .create()
        .expect("producer");
    for (partition, id) in records {
        let payload = format!(r#"{{"id": {id}}}"#);
        producer.send(BaseRecord::<(), str>::to(topic).partition(*partition).payload(&payload)).map_err(|(e, _)| e).expect("send");
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
}

/// View `name`'s one row: (count, sum of ids, greatest partition).
async fn count_sum_partition(client: &tokio_postgres::Client, name: &str) -> (i64, i64, i32) {
    let row = client.query_one(&format!("SELECT n, s, max_p FROM {name}"), &[]).await.expect("view");
    (row.get(0), row.get(1), row.get(2))
}

/// Partitions added to a topic are read from their earliest offset, as Flink reads the
/// partitions it discovers, though the table starts at `'latest-offset'`.
///
/// Neither test broker can add partitions to a topic (tansu and librdkafka's mock cluster do
/// not implement CreatePartitions), so the topic grows behind the proxy: broker A holds it with
/// 2 partitions, broker B with 4, the first 2 holding the same records as A's, and the proxy
/// moves from A to B, as a cluster's metadata would show 2 more partitions.
/// A job stopped while the topic grew (the server killed) reads the new partitions from their
/// earliest offset when it starts again, and the others on from its positions, with
/// `'scan.topic-partition-discovery.interval'` on or `'0'`; FLUSH waits for them.
///
/// A running job's discovery (`KafkaReader::discover`) is not tested here: to a client that
/// stays connected, the move from A to B also changes the topic's id (as if it had been
/// recreated), and librdkafka 2.12's metadata cache then crashes the process now and then
/// (in `rd_kafka_metadata_cache_find`), which a real partition increase does not provoke.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_added_to_the_topic_are_read_from_their_earliest_offset() {
    let proxy_port = TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("addr").port();
    let Some(a) = common::kafka::start_broker_advertising(Some(proxy_port)) else { return };
    let b = common::kafka::start_broker_advertising(Some(proxy_port)).expect("second broker");
    let brokers = a.brokers.clone();
    let mut proxy = Proxy::new(proxy_port, b.port);
    create_topic(&brokers, "grow", 4).expect("topic on B");
    produce_to_partitions(&brokers, "grow", &[(0, 1), (1, 2), (0, 3), (1, 4), (2, 5), (3, 6), (2, 7), (3, 8)]);
    let mut switch_to = |port: u16| {
        proxy.stop();
        proxy.to = port;
        proxy.start();
    };
    switch_to(a.port);
    create_topic(&brokers, "grow", 2).expect("topic on A");

    let dir = common::scratch_dir("kafka-grow");
    let mut server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    for (table, interval) in [("grow_found", "1 h"), ("grow_fixed", "0")] {
        client
            .batch_execute(&format!(
                "CREATE TABLE {table} (id BIGINT, p INT METADATA FROM 'partition') WITH ('connector' = 'kafka',
                     'topic' = 'grow', 'properties.bootstrap.servers' = '{brokers}', 'format' = 'json',
                     'scan.startup.mode' = 'latest-offset', 'scan.topic-partition-discovery.interval' = '{interval}');
                 CREATE MATERIALIZED VIEW {table}_v AS SELECT COUNT(*) AS n, SUM(id) AS s, MAX(p) AS max_p FROM {table};"
            ))
            .await
            .expect("DDL");
    }
    produce_to_partitions(&brokers, "grow", &[(0, 1), (1, 2), (0, 3), (1, 4)]);
    client.batch_execute("FLUSH").await.expect("FLUSH");
    for view in ["grow_found_v", "grow_fixed_v"] {
        assert_eq!(count_sum_partition(&client, view).await, (4, 10, 1), "{view}");
    }

    server.kill9();
    switch_to(b.port);
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client.batch_execute("FLUSH").await.expect("FLUSH after the restart");
    // Partitions 0 and 1 from offset 2 (nothing read twice), 2 and 3 from offset 0: 1 + .. + 8.
    for view in ["grow_found_v", "grow_fixed_v"] {
        assert_eq!(count_sum_partition(&client, view).await, (8, 36, 3), "{view}");
    }
    let partitions: i64 = client
        .query_one("SELECT COUNT(*) FROM weir_sources WHERE job = 'grow_found_v'", &[])
        .await
        .expect("weir_sources")
        .get(0);
    assert_eq!(partitions, 4);
}
