//! Issue 15, item 5's Kafka part: a Kafka source whose next offset was deleted by retention
//! while Weir was down. librdkafka's mock cluster keeps at most 5 MiB per partition and drops
//! the oldest message sets beyond it (as a topic's `retention.bytes` does), so the test
//! produces five small records, lets two views read them, stops the server, and produces
//! twelve records of 600 KB: the small ones and the first big ones are deleted. At the
//! restart:
//! - the view over the table with the default `'scan.out-of-range'` (`fail`) fails alone
//!   (FAILED in SHOW JOBS, naming the partition, its position and the earliest retained offset),
//!   keeping its five rows readable;
//! - the view over the table with `'scan.out-of-range' = 'earliest'` skips to the earliest
//!   retained offset and reads every retained record after the five it had; `weir_sources.skipped`
//!   counts the records it skipped: the earliest retained offset less 5.
//! The retained range is read from the broker by the test's own client, not from Weir.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use weir_connectors::kafka::{KafkaReader, KafkaSinkConfig, KafkaSourceConfig, KafkaWriter, MockBrokers};

fn options(brokers: &str, pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut map = BTreeMap::from([
        ("connector".to_string(), "kafka".to_string()),
        ("topic".to_string(), "events".to_string()),
        ("properties.bootstrap.servers".to_string(), brokers.to_string()),
    ]);
    map.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    map
}

/// Sends records `ids` (each its own message set: flushed one by one), `pad` bytes of padding.
fn produce(writer: &mut KafkaWriter, ids: std::ops::RangeInclusive<i64>, pad: usize) {
    for id in ids {
        let payload = format!("{{\"id\": {id}, \"pad\": \"{}\"}}", "x".repeat(pad));
        writer.send(None, Some(payload.as_bytes()), &[], None).expect("send");
        writer.flush(Duration::from_secs(30)).expect("flush");
    }
}

/// Rows of `sql`, each column read as text, polled until `done` holds or 60 s pass.
async fn poll_rows(client: &tokio_postgres::Client, sql: &str, done: impl Fn(&[Vec<String>]) -> bool) -> Vec<Vec<String>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rows: Vec<Vec<String>> = client
            .simple_query(sql)
            .await
            .expect(sql)
            .into_iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => {
                    Some((0..r.len()).map(|i| r.get(i).unwrap_or("NULL").to_string()).collect())
                }
                _ => None,
            })
            .collect();
        if done(&rows) || Instant::now() > deadline {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_past_the_position_fails_the_job_or_skips_counted() {
    let brokers = MockBrokers::start(1).expect("mock cluster");
    let b = brokers.bootstrap_servers();
    brokers.create_topic("events", 1).expect("topic");
    let mut producer = KafkaWriter::open(&KafkaSinkConfig::from_options(&options(&b, &[])).expect("config")).expect("producer");
    produce(&mut producer, 1..=5, 10);

    let dir = common::scratch_dir("kafka-out-of-range");
    let data = dir.join("data");
    let table = |name: &str, extra: &str| {
        format!(
            "CREATE TABLE {name} (id BIGINT, pad STRING)
             WITH ('connector' = 'kafka', 'topic' = 'events', 'properties.bootstrap.servers' = '{b}',
                   'scan.startup.mode' = 'earliest-offset', 'format' = 'json'{extra});"
        )
    };
    let mut server = common::Server::start(&data);
    {
        let client = common::connect(&server).await;
        client
            .batch_execute(&format!(
                "{}{}
                 CREATE MATERIALIZED VIEW strict_view AS SELECT count(*) AS n, max(id) AS last FROM strict_events;
                 CREATE MATERIALIZED VIEW lenient_view AS SELECT count(*) AS n, sum(id) AS total, max(id) AS last FROM lenient_events;",
                table("strict_events", ""),
                table("lenient_events", ", 'scan.out-of-range' = 'earliest'"),
            ))
            .await
            .expect("pipeline");
        for view in ["strict_view", "lenient_view"] {
            let rows = poll_rows(&client, &format!("SELECT n FROM {view}"), |r| r == [vec!["5".to_string()]]).await;
            assert_eq!(rows, vec![vec!["5".to_string()]], "{view} before the restart");
        }
        // Both sources have committed position 5.
        let positions = poll_rows(&client, "SELECT job, position FROM weir_sources ORDER BY job", |r| {
            r.len() == 2 && r.iter().all(|row| row[1] == "5")
        })
        .await;
        assert_eq!(positions, vec![vec!["lenient_view".to_string(), "5".into()], vec!["strict_view".to_string(), "5".into()]]);
    }
    server.kill9();

    produce(&mut producer, 6..=17, 600_000);
    let reader = KafkaReader::open(&KafkaSourceConfig::from_options(&options(&b, &[("scan.startup.mode", "earliest-offset")])).expect("config"), &BTreeMap::new())
        .expect("reader");
    let (low, high) = reader.watermarks_of(0).expect("watermarks");
    assert_eq!(high, 17, "17 records produced");
    assert!(low > 5, "retention deleted the unread records: the earliest retained offset is {low}");

    let server = common::Server::start(&data);
    let client = common::connect(&server).await;
    // The lenient view adds every retained record to the five it had: ids low+1 ..= 17 (offset
    // o holds id o+1); ids 6 ..= low are gone.
    let total: i64 = 15 + (low + 1..=17).sum::<i64>();
    let want = vec![vec![(5 + high - low).to_string(), total.to_string(), "17".to_string()]];
    let rows = poll_rows(&client, "SELECT n, total, last FROM lenient_view", |r| r == want).await;
    assert_eq!(rows, want, "the lenient view after the restart (retained offsets {low}..{high})");
    let skipped = poll_rows(&client, "SELECT position, skipped FROM weir_sources WHERE job = 'lenient_view'", |r| {
        r == [vec!["17".to_string(), (low - 5).to_string()]]
    })
    .await;
    assert_eq!(skipped, vec![vec!["17".to_string(), (low - 5).to_string()]], "records skipped, counted");
    // The strict view fails alone, its rows kept.
    let jobs = poll_rows(&client, "SHOW JOBS", |r| r.iter().any(|row| row.iter().any(|c| c == "FAILED"))).await;
    let failed: Vec<&Vec<String>> = jobs.iter().filter(|row| row.iter().any(|c| c == "FAILED")).collect();
    assert_eq!(failed.len(), 1, "{jobs:?}");
    let line = failed[0].join(" ");
    assert!(line.contains("strict_view"), "{line}");
    assert!(line.contains(&format!("offset 5")) && line.contains(&format!("earliest retained offset is {low}")), "{line}");
    assert!(line.contains("'scan.out-of-range' = 'earliest'"), "the error says how to go on: {line}");
    let rows = poll_rows(&client, "SELECT n, last FROM strict_view", |_| true).await;
    assert_eq!(rows, vec![vec!["5".to_string(), "5".to_string()]]);
}
