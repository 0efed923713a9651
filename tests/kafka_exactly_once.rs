//! The chaos test of issue 17: a Kafka source feeds a TUMBLE view and two exactly-once
//! `upsert-kafka` sinks (one reading the view, run by the engine's thread; one reading the
//! source, run on a thread of its own), on librdkafka's mock cluster (it answers the
//! transaction protocol; tansu does not). While the test produces the input in rounds, Weir is
//! killed at least 20 times: with SIGKILL at a random moment, or (every third round) by the
//! `after_precommit` failpoint, which aborts the process when an epoch is committed in RocksDB
//! and its Kafka transaction is not yet. Each time it restarts on the same data directory.
//! Then:
//! - the view equals the per-window counts and sums computed here from the produced events;
//! - each sink topic, read from the start and reduced to the last value per key, equals them
//!   (the sink fed by the source directly: the closed windows);
//! - the source's consumer group holds the committed positions: every event.
//!
//! What the mock cluster cannot show: it gives aborted transactions' messages to
//! `read_committed` readers too and does not store a transaction's offsets (see
//! `weir_connectors::kafka::MockBrokers`), so duplicates that a real broker would hide are
//! not counted here; the last value per key is exact either way.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use weir_connectors::kafka::{KafkaReader, KafkaSinkConfig, KafkaSourceConfig, KafkaWriter, MockBrokers};

/// 2024-03-01 10:00:00 UTC, ms.
const BASE_MS: i64 = 1_709_287_200_000;
const EVENTS: i64 = 6_000;
const KEYS: i64 = 5;
const ROUNDS: i64 = 24;
/// The window size (TUMBLE 10 s) and the watermark delay (1 s), ms.
const WINDOW_MS: i64 = 10_000;
const DELAY_MS: i64 = 1_000;

/// Event `i`: (key, value, event time ms), 100 ms apart; the last one a minute after the rest.
fn event(i: i64) -> (i64, i64, i64) {
    if i == EVENTS - 1 {
        return (0, 0, BASE_MS + i * 100 + 60_000);
    }
    (i % KEYS, i * 7 % 1000, BASE_MS + i * 100)
}

fn produce(writer: &mut KafkaWriter, range: std::ops::Range<i64>) {
    for i in range {
        let (k, v, ts) = event(i);
        let t = chrono::DateTime::from_timestamp_millis(ts).expect("time").naive_utc();
        let payload = format!("{{\"k\": {k}, \"v\": {v}, \"ts\": \"{}\"}}", t.format("%Y-%m-%d %H:%M:%S%.3f"));
        writer.send(None, Some(payload.as_bytes()), &[], None).expect("send");
    }
    writer.flush(Duration::from_secs(30)).expect("flush");
}

/// (key, window start 'YYYY-MM-DD HH:MM:SS') -> (count, sum). A view over a window
/// aggregation shows a window's rows as they come (SQL.md), so `closed_only = false` for it
/// and for a sink fed by it; a job writing a window aggregation into a sink writes each window
/// once, final, when the watermark (the largest event time less the 1 s delay) reaches its
/// end less 1 ms (Flink's window_time): `closed_only = true`.
fn expected(closed_only: bool) -> BTreeMap<(i64, String), (i64, i64)> {
    let watermark = (0..EVENTS).map(|i| event(i).2).max().expect("events") - DELAY_MS;
    let mut out = BTreeMap::new();
    for i in 0..EVENTS {
        let (k, v, ts) = event(i);
        let start = ts - ts.rem_euclid(WINDOW_MS);
        if closed_only && start + WINDOW_MS - 1 > watermark {
            continue;
        }
        let t = chrono::DateTime::from_timestamp_millis(start).expect("time").naive_utc();
        let e = out.entry((k, t.format("%Y-%m-%d %H:%M:%S").to_string())).or_insert((0, 0));
        e.0 += 1;
        e.1 += v;
    }
    out
}

fn options(brokers: &str, topic: &str, pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut map = BTreeMap::from([
        ("connector".to_string(), "kafka".to_string()),
        ("topic".to_string(), topic.to_string()),
        ("properties.bootstrap.servers".to_string(), brokers.to_string()),
    ]);
    map.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    map
}

/// A tiny xorshift generator: the kill moments, reproducible from the printed seed.
struct Chaos(u64);

impl Chaos {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// Reads `topic` from the start until, reduced to the last value per key, it equals `want`
/// (or fails after 60 s with what it has).
fn wait_for_topic(brokers: &str, topic: &str, want: &BTreeMap<(i64, String), (i64, i64)>) {
    let config = KafkaSourceConfig::from_options(&options(
        brokers,
        topic,
        &[("scan.startup.mode", "earliest-offset"), ("properties.isolation.level", "read_committed")],
    ))
    .expect("reader config");
    let mut reader = KafkaReader::open(&config, &BTreeMap::new()).expect("reader");
    let mut last: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for r in reader.poll(10_000, Duration::from_millis(100)).expect("poll") {
            last.insert(r.key.clone().expect("keyed"), r.payload.clone());
        }
        let mut got = BTreeMap::new();
        for value in last.values().flatten() {
            let v: serde_json::Value = serde_json::from_slice(value).expect("json value");
            let start = v["window_start"].as_str().expect("window_start").replace('T', " ");
            let start = start.trim_end_matches(".000").to_string();
            got.insert((v["k"].as_i64().expect("k"), start), (v["n"].as_i64().expect("n"), v["s"].as_i64().expect("s")));
        }
        if &got == want {
            return;
        }
        if Instant::now() > deadline {
            let diff: Vec<_> = want.iter().filter(|(k, v)| got.get(*k) != Some(*v)).map(|(k, v)| (k, v, got.get(k))).take(5).collect();
            panic!("topic {topic}: {} keys, {} expected; first differences (key, expected, got): {diff:?}", got.len(), want.len());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_sinks_survive_twenty_kills() {
    let brokers = MockBrokers::start(1).expect("mock cluster");
    let b = brokers.bootstrap_servers();
    brokers.create_topic("events", 1).expect("events topic");
    brokers.create_topic("totals", 3).expect("sink topic");
    brokers.create_topic("totals_direct", 3).expect("sink topic");
    let mut producer = KafkaWriter::open(&KafkaSinkConfig::from_options(&options(&b, "events", &[])).expect("config"))
        .expect("producer");
    let dir = common::scratch_dir("kafka-exactly-once");
    let data = dir.join("data");
    let seed = std::env::var("WEIR_CHAOS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_nanos() as u64 | 1
    });
    eprintln!("chaos seed {seed} (WEIR_CHAOS_SEED={seed} repeats these kill moments)");
    let mut chaos = Chaos(seed);
    let sink = |name: &str, topic: &str| {
        format!(
            "CREATE TABLE {name} (k BIGINT, window_start TIMESTAMP(3), n BIGINT, s BIGINT, PRIMARY KEY (k, window_start) NOT ENFORCED)
             WITH ('connector' = 'upsert-kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{b}',
                   'key.format' = 'json', 'value.format' = 'json',
                   'sink.delivery-guarantee' = 'exactly-once', 'sink.transactional-id-prefix' = 'chaos');"
        )
    };
    let window = "SELECT k, window_start, COUNT(*) AS n, SUM(v) AS s
                  FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
                  GROUP BY k, window_start, window_end";
    let pipeline = format!(
        "CREATE TABLE events (k BIGINT, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
         WITH ('connector' = 'kafka', 'topic' = 'events', 'properties.bootstrap.servers' = '{b}',
               'properties.group.id' = 'weir-chaos', 'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
         CREATE MATERIALIZED VIEW totals AS {window};
         {}
         {}
         INSERT INTO totals_out SELECT * FROM totals;
         INSERT INTO totals_direct_out {window};",
        sink("totals_out", "totals"),
        sink("totals_direct_out", "totals_direct"),
    );

    let per_round = EVENTS / (ROUNDS + 1);
    let (mut kills, mut failpoints) = (0, 0);
    for round in 0..ROUNDS {
        produce(&mut producer, round * per_round..(round + 1) * per_round);
        let failpoint = round % 3 == 2;
        let env: &[(&str, &str)] = if failpoint { &[("WEIR_FAILPOINT", "after_precommit")] } else { &[] };
        let mut server = common::Server::start_with_env(&data, env);
        if round == 0 {
            let client = common::connect(&server).await;
            client.batch_execute(&pipeline).await.expect("pipeline");
        }
        if failpoint {
            // The failpoint aborts the process at its first exactly-once commit with output.
            let deadline = Instant::now() + Duration::from_secs(30);
            while server.child.try_wait().expect("status").is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if server.child.try_wait().expect("status").is_some() {
                failpoints += 1;
            }
        } else {
            std::thread::sleep(Duration::from_millis(100 + chaos.next(1400)));
        }
        server.kill9();
        kills += 1;
    }
    assert!(kills >= 20, "{kills} kills");
    let log = std::fs::read_to_string(data.with_extension("log")).expect("log");
    let aborted = log.matches("failpoint after_precommit reached").count();
    // Each abort is in the log; the two sinks, on threads of their own, can both reach the
    // failpoint in the moment before the process ends, so a round may log it twice.
    assert!(failpoints >= 4 && aborted >= failpoints, "{failpoints} failpoint aborts seen, {aborted} in the log");

    produce(&mut producer, ROUNDS * per_round..EVENTS);
    let server = common::Server::start(&data);
    let client = common::connect(&server).await;
    common::kafka::wait_for_job_offsets(&client, "totals", EVENTS, Duration::from_secs(120)).await;
    client.batch_execute("FLUSH").await.expect("flush");

    let want = expected(false);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let view: BTreeMap<(i64, String), (i64, i64)> = client
            .query("SELECT k, CAST(window_start AS VARCHAR), n, s FROM totals", &[])
            .await
            .expect("read view")
            .iter()
            .map(|r| {
                let start = r.get::<_, String>(1).replace('T', " ");
                ((r.get(0), start.trim_end_matches(".000").to_string()), (r.get(2), r.get(3)))
            })
            .collect();
        if view == want {
            break;
        }
        if Instant::now() > deadline {
            let missing: Vec<_> = want.iter().filter(|(k, v)| view.get(*k) != Some(*v)).map(|(k, v)| (k, v, view.get(k))).take(5).collect();
            let extra: Vec<_> = view.iter().filter(|(k, _)| !want.contains_key(*k)).take(5).collect();
            panic!("the view has {} windows, {} expected; differences (key, expected, got): {missing:?}; extra: {extra:?}", view.len(), want.len());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_for_topic(&b, "totals", &want);
    let closed = expected(true);
    assert_eq!(closed.len() + 1, want.len(), "all windows but the last event's are closed");
    wait_for_topic(&b, "totals_direct", &closed);

    // The consumer group holds every event as committed.
    let group = options(&b, "events", &[("properties.group.id", "weir-chaos")]);
    let reader = KafkaReader::open(&KafkaSourceConfig::from_options(&group).expect("config"), &BTreeMap::new())
        .expect("group reader");
    // The group's offsets are committed after the epoch that holds them lands, so they may
    // trail the sinks' topics a little: poll them with a deadline.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let committed: i64 = reader.group_offsets().expect("group offsets").values().sum();
        if committed == EVENTS {
            break;
        }
        assert!(Instant::now() < deadline, "offsets committed to the consumer group: {committed}, {EVENTS} expected");
        std::thread::sleep(Duration::from_millis(100));
    }
}
