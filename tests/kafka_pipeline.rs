//! The README's Kafka walk-through, automated against a real Kafka-protocol broker (tansu):
//! 100 000 JSON orders with out-of-order timestamps over 4 partitions, 1% of them malformed; a
//! `kafka` table with a WATERMARK and a dead-letter table; a TUMBLE view; an `upsert-kafka`
//! sink fed by the view. Weir is killed with SIGKILL mid-stream and restarted. Then:
//! - the view equals the per-window totals computed here from the produced orders;
//! - the dead-letter table holds exactly the malformed records;
//! - the upsert topic, compacted by key as a consumer reads it, equals the view;
//! - the consumer group holds the committed offsets (what lag tools read).

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use weir_connectors::kafka::{create_topic, KafkaReader, KafkaSinkConfig, KafkaSourceConfig, KafkaWriter};

const ORDERS: i64 = 100_000;
const PARTITIONS: i32 = 4;
const CUSTOMERS: i64 = 37;
/// 2024-03-01 10:00:00 UTC, ms.
const BASE_MS: i64 = 1_709_287_200_000;

/// Order `i`: (customer, amount in cents, event time ms); `None` for a malformed record.
fn order(i: i64) -> Option<(String, i64, i64)> {
    if i % 100 == 37 {
        return None;
    }
    // 10 ms apart, up to 2 s out of order (less than the 5 s watermark delay: none is late).
    let ts = BASE_MS + i * 10 - (i * 7919 % 200) * 10;
    Some((format!("c{}", i % CUSTOMERS), i * 31 % 10_000, ts))
}

fn payload(i: i64) -> Vec<u8> {
    match order(i) {
        None => format!("{{\"order_id\": {i}, \"customer\": \"broken").into_bytes(),
        Some((customer, cents, ts)) => {
            let t = chrono::DateTime::from_timestamp_millis(ts).expect("time").naive_utc();
            format!(
                "{{\"order_id\": {i}, \"customer\": \"{customer}\", \"amount\": {}.{:02}, \"ts\": \"{}\"}}",
                cents / 100,
                cents % 100,
                t.format("%Y-%m-%d %H:%M:%S%.3f")
            )
            .into_bytes()
        }
    }
}

/// (window start as 'YYYY-MM-DD HH:MM:SS', customer) -> (count, total cents).
fn expected_view() -> BTreeMap<(String, String), (i64, i64)> {
    let mut out = BTreeMap::new();
    for i in 0..ORDERS {
        let Some((customer, cents, ts)) = order(i) else { continue };
        let start = ts - ts.rem_euclid(60_000);
        let t = chrono::DateTime::from_timestamp_millis(start).expect("time").naive_utc();
        let e = out.entry((t.format("%Y-%m-%d %H:%M:%S").to_string(), customer)).or_insert((0, 0));
        e.0 += 1;
        e.1 += cents;
    }
    out
}

fn produce(brokers: &str, range: std::ops::Range<i64>) {
    produce_to(brokers, "orders", range, 0);
}

/// Orders `range` into `topic` (keyed by order id), then `tombstones` records without a value
/// (keys `t0`, `t1`, ..): they make no row, and only move their partitions' positions.
fn produce_to(brokers: &str, topic: &str, range: std::ops::Range<i64>, tombstones: usize) {
    let options = BTreeMap::from([
        ("connector".to_string(), "kafka".to_string()),
        ("topic".to_string(), topic.to_string()),
        ("properties.bootstrap.servers".to_string(), brokers.to_string()),
        // tansu 0.6 answers a fetch from an offset inside a record batch with the next batch,
        // skipping the rest of that one (real Kafka returns the batch and the client skips the
        // records before the offset); one record per batch keeps resumed reads exact here.
        ("properties.batch.num.messages".to_string(), "1".to_string()),
    ]);
    let mut writer = KafkaWriter::open(&KafkaSinkConfig::from_options(&options).expect("sink config")).expect("producer");
    for i in range {
        writer.send(Some(i.to_string().as_bytes()), Some(&payload(i)), &[], None).expect("send");
    }
    for t in 0..tombstones {
        writer.send(Some(format!("t{t}").as_bytes()), None, &[], None).expect("send");
    }
    writer.flush(Duration::from_secs(60)).expect("flush");
}

async fn read_view(client: &tokio_postgres::Client) -> BTreeMap<(String, String), (i64, i64)> {
    client
        .query(
            "SELECT CAST(window_start AS VARCHAR), customer, n, CAST(total * 100 AS BIGINT) FROM orders_per_minute",
            &[],
        )
        .await
        .expect("read view")
        .iter()
        .map(|r| {
            let start = r.get::<_, String>(0).replace('T', " ");
            ((start.trim_end_matches(".000").to_string(), r.get::<_, String>(1)), (r.get::<_, i64>(2), r.get::<_, i64>(3)))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_in_window_view_upsert_out_through_a_crash() {
    let Some(broker) = common::kafka::start_broker() else { return };
    create_topic(&broker.brokers, "orders", PARTITIONS).expect("orders topic");
    create_topic(&broker.brokers, "orders_per_minute", PARTITIONS).expect("sink topic");
    let dir = common::scratch_dir("kafka-pipeline");
    let data = dir.join("data");
    let mut server = common::Server::start(&data);
    let client = common::connect(&server).await;
    let b = &broker.brokers;
    client
        .batch_execute(&format!(
            "CREATE TABLE orders (order_id BIGINT, customer STRING, amount DECIMAL(10, 2), ts TIMESTAMP(3),
                 kafka_partition INT METADATA FROM 'partition',
                 WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
             WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = '{b}',
                   'properties.group.id' = 'weir-orders', 'scan.startup.mode' = 'earliest-offset',
                   'format' = 'json', 'dead-letter.table' = 'orders_dead');
             CREATE MATERIALIZED VIEW orders_per_minute AS
             SELECT window_start, customer, COUNT(*) AS n, SUM(amount) AS total
             FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
             GROUP BY window_start, window_end, customer;
             CREATE TABLE orders_per_minute_out (window_start TIMESTAMP(3), customer STRING, n BIGINT, total DECIMAL(10, 2),
                 PRIMARY KEY (window_start, customer) NOT ENFORCED)
             WITH ('connector' = 'upsert-kafka', 'topic' = 'orders_per_minute', 'properties.bootstrap.servers' = '{b}',
                   'key.format' = 'json', 'value.format' = 'json');
             INSERT INTO orders_per_minute_out SELECT * FROM orders_per_minute;"
        ))
        .await
        .expect("pipeline");

    // First 60%, killed once part of it is committed.
    produce(b, 0..ORDERS * 6 / 10);
    common::kafka::wait_for_job_offsets(&client, "orders_per_minute", ORDERS / 4, Duration::from_secs(180)).await;
    let (server, client) = if std::env::var("WEIR_TEST_NO_CRASH").is_ok() {
        (server, client)
    } else {
        server.kill9();
        drop(client);
        let server = common::Server::start(&data);
        let client = common::connect(&server).await;
        (server, client)
    };
    produce(b, ORDERS * 6 / 10..ORDERS);
    common::kafka::wait_for_job_offsets(&client, "orders_per_minute", ORDERS, Duration::from_secs(180)).await;
    client.batch_execute("FLUSH").await.expect("flush");

    let expected = expected_view();
    let view = read_view(&client).await;
    assert_eq!(view.len(), expected.len(), "windows x customers");
    let late: Vec<(String, i64)> = client
        .query("SELECT view, CAST(late_rows AS BIGINT) FROM weir_late_rows", &[])
        .await
        .expect("late rows")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let sources: Vec<String> = client
        .query("SELECT CAST(partition AS BIGINT), CAST(position AS BIGINT), CAST(rows_read AS BIGINT), CAST(dead_letters AS BIGINT), job FROM weir_sources", &[])
        .await
        .expect("sources")
        .iter()
        .map(|r| format!("{}:{}:{}:{}:{}", r.get::<_, i64>(0), r.get::<_, i64>(1), r.get::<_, i64>(2), r.get::<_, i64>(3), r.get::<_, String>(4)))
        .collect();
    let total_view: i64 = view.values().map(|v| v.0).sum();
    let total_expected: i64 = expected.values().map(|v| v.0).sum();
    let diff: Vec<_> = expected.iter().filter(|(k, v)| view.get(*k) != Some(*v)).map(|(k, v)| (k, v, view.get(k))).take(5).collect();
    assert!(diff.is_empty(), "the view differs from the orders produced (key, expected, got): {diff:?}; view rows {total_view}, expected {total_expected}; late rows {late:?}; sources (partition:position:rows:dead:job) {sources:?}");

    let dead: Vec<(i64, String)> = client
        .query("SELECT record_offset, error FROM orders_dead", &[])
        .await
        .expect("dead letters")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(dead.len() as i64, ORDERS / 100, "one malformed record in a hundred");
    let counted: i64 = client
        .query_one("SELECT CAST(SUM(dead_letters) AS BIGINT) FROM weir_sources WHERE job = 'orders_per_minute'", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(counted, ORDERS / 100);
    // Each partition's row counts that partition's records: read from offset 0, every one is
    // a row or a dead letter, so together they are its position; summed, every order once.
    let per_partition: Vec<(i64, i64, i64)> = client
        .query(
            "SELECT CAST(position AS BIGINT), CAST(rows_read AS BIGINT), CAST(dead_letters AS BIGINT) FROM weir_sources WHERE job = 'orders_per_minute'",
            &[],
        )
        .await
        .expect("per partition")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(per_partition.len(), PARTITIONS as usize);
    assert!(per_partition.iter().all(|(position, rows, dead)| rows + dead == *position), "{per_partition:?}");
    assert_eq!(per_partition.iter().map(|p| p.1 + p.2).sum::<i64>(), ORDERS, "{per_partition:?}");

    // /metrics shows the source caught up (Kafka's records-lag-max 0, once the high watermarks
    // are refreshed, every second), its dead letters, and its watermark: the largest order
    // time less the 5 s delay (the partition holding that order has it; the others less).
    let source = [("job_name", "orders_per_minute"), ("table", "orders")];
    let metrics = common::metrics_until(&server, Duration::from_secs(30), "the source caught up", |t| {
        common::metric(t, "weir_source_records_lag_max", &source) == Some(0.0)
    })
    .await;
    assert_eq!(common::metric(&metrics, "weir_source_dead_letters_total", &source), Some((ORDERS / 100) as f64));
    let newest = (0..ORDERS).filter_map(order).map(|o| o.2).max().expect("orders");
    let watermarks: Vec<f64> = (0..PARTITIONS)
        .filter_map(|p| {
            let p = p.to_string();
            common::metric(&metrics, "weir_source_watermark_ms", &[source[0], source[1], ("partition", &p)])
        })
        .collect();
    assert_eq!(watermarks.len(), PARTITIONS as usize, "a watermark per partition:\n{metrics}");
    assert_eq!(watermarks.iter().copied().fold(f64::MIN, f64::max), (newest - 5_000) as f64);

    // The consumer group gets the offsets Weir committed: every record. The source's reader
    // commits them to the group after Weir's epoch (on its own thread when it reads ahead), so
    // they are polled for.
    let options = BTreeMap::from([
        ("connector".to_string(), "kafka".to_string()),
        ("topic".to_string(), "orders".to_string()),
        ("properties.bootstrap.servers".to_string(), b.clone()),
        ("properties.group.id".to_string(), "weir-orders".to_string()),
    ]);
    let reader = KafkaReader::open(&KafkaSourceConfig::from_options(&options).expect("config"), &BTreeMap::new())
        .expect("group reader");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let committed: i64 = reader.group_offsets().expect("group offsets").values().sum();
        if committed == ORDERS || Instant::now() > deadline {
            assert_eq!(committed, ORDERS, "offsets committed to the consumer group");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The upsert topic, compacted by key: the last value per key, tombstones deleting.
    let mut reader = common::kafka::earliest_reader(b, "orders_per_minute");
    let mut compacted: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut quiet = 0;
    while quiet < 20 {
        let records = reader.poll(10_000, Duration::from_millis(100)).expect("poll");
        if records.is_empty() {
            quiet += 1;
        } else {
            quiet = 0;
        }
        for r in records {
            compacted.insert(r.key.clone().expect("keyed"), r.payload.clone());
        }
        assert!(Instant::now() < deadline, "reading the upsert topic took too long");
    }
    let mut topic: BTreeMap<(String, String), (i64, i64)> = BTreeMap::new();
    for value in compacted.values().flatten() {
        let v: serde_json::Value = serde_json::from_slice(value).expect("json value");
        let start = v["window_start"].as_str().expect("window_start").to_string();
        let start = start.trim_end_matches(".000").replace('T', " ");
        let total = v["total"].as_f64().expect("total");
        topic.insert(
            (start, v["customer"].as_str().expect("customer").to_string()),
            (v["n"].as_i64().expect("n"), (total * 100.0).round() as i64),
        );
    }
    assert_eq!(topic.len(), expected.len(), "keys in the compacted upsert topic");
    assert!(topic == expected, "the compacted upsert topic differs from the view");
}

/// A `debezium-json` topic is a changelog: creates, updates and deletes of rows keep a view
/// exact. Products 0..50 are created with price 100 + id; even ids are then updated to
/// price 2 x (100 + id); ids divisible by 5 are deleted; one record is not JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debezium_changelog_source_keeps_a_view_exact() {
    let Some(broker) = common::kafka::start_broker() else { return };
    let b = &broker.brokers;
    create_topic(b, "products", 2).expect("topic");
    let options = BTreeMap::from([
        ("connector".to_string(), "kafka".to_string()),
        ("topic".to_string(), "products".to_string()),
        ("properties.bootstrap.servers".to_string(), b.clone()),
    ]);
    let mut writer = KafkaWriter::open(&KafkaSinkConfig::from_options(&options).expect("config")).expect("producer");
    let row = |id: i64, price: i64| format!("{{\"id\": {id}, \"category\": \"k{}\", \"price\": {price}}}", id % 3);
    let mut send = |id: i64, value: String| {
        writer.send(Some(id.to_string().as_bytes()), Some(value.as_bytes()), &[], None).expect("send");
    };
    for id in 0..50 {
        send(id, format!("{{\"before\": null, \"after\": {}, \"op\": \"c\"}}", row(id, 100 + id)));
    }
    for id in (0..50).filter(|i| i % 2 == 0) {
        send(id, format!("{{\"before\": {}, \"after\": {}, \"op\": \"u\"}}", row(id, 100 + id), row(id, 2 * (100 + id))));
    }
    send(0, "{not json".to_string());
    for id in (0..50).filter(|i| i % 5 == 0) {
        let price = if id % 2 == 0 { 2 * (100 + id) } else { 100 + id };
        send(id, format!("{{\"before\": {}, \"after\": null, \"op\": \"d\"}}", row(id, price)));
    }
    writer.flush(Duration::from_secs(30)).expect("flush");

    let dir = common::scratch_dir("kafka-debezium");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE products (id BIGINT, category STRING, price BIGINT)
             WITH ('connector' = 'kafka', 'topic' = 'products', 'properties.bootstrap.servers' = '{b}',
                   'scan.startup.mode' = 'earliest-offset', 'format' = 'debezium-json');
             CREATE MATERIALIZED VIEW by_category AS
             SELECT category, COUNT(*) AS n, SUM(price) AS total FROM products GROUP BY category;"
        ))
        .await
        .expect("pipeline");
    let total_records = 50 + 25 + 1 + 10;
    common::kafka::wait_for_job_offsets(&client, "by_category", total_records, Duration::from_secs(60)).await;
    client.batch_execute("FLUSH").await.expect("flush");
    let mut expected: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for id in (0..50).filter(|i| i % 5 != 0) {
        let price = if id % 2 == 0 { 2 * (100 + id) } else { 100 + id };
        let e = expected.entry(format!("k{}", id % 3)).or_insert((0, 0));
        e.0 += 1;
        e.1 += price;
    }
    let got: BTreeMap<String, (i64, i64)> = client
        .query("SELECT category, n, total FROM by_category", &[])
        .await
        .expect("view")
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    assert_eq!(got, expected);
    let dead: i64 = client
        .query_one("SELECT CAST(SUM(dead_letters) AS BIGINT) FROM weir_sources", &[])
        .await
        .expect("dead letters")
        .get(0);
    assert_eq!(dead, 1, "the one record that is not JSON, counted on its partition's row alone");
}

/// An `upsert-kafka` source: the key is the row's identity, a record replaces the row of its
/// key, a tombstone deletes it. Products 0..60 are upserted with price 100 + id; even ids
/// again with 2 x (100 + id); ids divisible by 7 are re-sent unchanged; ids divisible by 5 get
/// a tombstone, then id 10 comes back with price 1; id 1000 gets a tombstone though it never
/// existed; one record has no key and one a value that is not JSON (dead letters). A view
/// over it equals the totals worked out here from the last value of each key, through a
/// kill -9 and restart, after which more upserts must still retract the rows stored before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upsert_kafka_source_keeps_a_view_exact_through_a_crash() {
    let Some(broker) = common::kafka::start_broker() else { return };
    let b = &broker.brokers;
    create_topic(b, "prices", 2).expect("topic");
    let options = BTreeMap::from([
        ("connector".to_string(), "kafka".to_string()),
        ("topic".to_string(), "prices".to_string()),
        ("properties.bootstrap.servers".to_string(), b.clone()),
        // One record per batch keeps tansu's resumed reads exact (see `produce`).
        ("properties.batch.num.messages".to_string(), "1".to_string()),
    ]);
    let mut writer = KafkaWriter::open(&KafkaSinkConfig::from_options(&options).expect("config")).expect("producer");
    // The last price of each id, kept here as the records are produced.
    let mut latest: BTreeMap<i64, i64> = BTreeMap::new();
    let mut records: i64 = 0;
    fn send(writer: &mut KafkaWriter, latest: &mut BTreeMap<i64, i64>, id: i64, price: Option<i64>) {
        let key = format!("{{\"id\": {id}}}");
        let value = price.map(|p| format!("{{\"id\": {id}, \"category\": \"k{}\", \"price\": {p}}}", id % 3));
        writer.send(Some(key.as_bytes()), value.as_deref().map(str::as_bytes), &[], None).expect("send");
        match price {
            Some(p) => latest.insert(id, p),
            None => latest.remove(&id),
        };
    }
    for id in 0..60 {
        send(&mut writer, &mut latest, id, Some(100 + id));
    }
    for id in (0..60).filter(|i| i % 2 == 0) {
        send(&mut writer, &mut latest, id, Some(2 * (100 + id)));
    }
    for id in (0..60).filter(|i| i % 7 == 0) {
        let same = latest[&id];
        send(&mut writer, &mut latest, id, Some(same));
    }
    for id in (0..60).filter(|i| i % 5 == 0) {
        send(&mut writer, &mut latest, id, None);
    }
    send(&mut writer, &mut latest, 10, Some(1));
    send(&mut writer, &mut latest, 1000, None);
    records += 60 + 30 + 9 + 12 + 2;
    writer.send(None, Some(b"{\"id\": 7, \"category\": \"k1\", \"price\": 5}"), &[], None).expect("send");
    writer.send(Some(b"{\"id\": 8}"), Some(b"{not json"), &[], None).expect("send");
    records += 2;
    writer.flush(Duration::from_secs(30)).expect("flush");

    let expected = |latest: &BTreeMap<i64, i64>| {
        let mut out: BTreeMap<String, (i64, i64)> = BTreeMap::new();
        for (id, price) in latest {
            let e = out.entry(format!("k{}", id % 3)).or_insert((0, 0));
            e.0 += 1;
            e.1 += price;
        }
        out
    };
    let dir = common::scratch_dir("kafka-upsert-source");
    let data = dir.join("data");
    let mut server = common::Server::start(&data);
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE prices (id BIGINT, category STRING, price BIGINT, PRIMARY KEY (id) NOT ENFORCED)
             WITH ('connector' = 'upsert-kafka', 'topic' = 'prices', 'properties.bootstrap.servers' = '{b}',
                   'key.format' = 'json', 'value.format' = 'json', 'dead-letter.table' = 'prices_dead');
             CREATE MATERIALIZED VIEW by_category AS
             SELECT category, COUNT(*) AS n, SUM(price) AS total FROM prices GROUP BY category;"
        ))
        .await
        .expect("pipeline");
    common::kafka::wait_for_job_offsets(&client, "by_category", records, Duration::from_secs(60)).await;
    client.batch_execute("FLUSH").await.expect("flush");
    assert_eq!(by_category(&client).await, expected(&latest), "before the crash");
    let dead: Vec<String> = client
        .query("SELECT error FROM prices_dead ORDER BY record_offset", &[])
        .await
        .expect("dead letters")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(dead.len(), 2, "the keyless record and the bad value: {dead:?}");
    assert!(dead.iter().any(|e| e.contains("no key")), "{dead:?}");
    assert!(dead.iter().any(|e| e.starts_with("value")), "{dead:?}");

    server.kill9();
    drop(client);
    let server = common::Server::start(&data);
    let client = common::connect(&server).await;
    // After the restart, updates of rows stored before it must retract them.
    for id in [1, 2, 3, 10] {
        send(&mut writer, &mut latest, id, Some(7));
    }
    send(&mut writer, &mut latest, 4, None);
    records += 5;
    writer.flush(Duration::from_secs(30)).expect("flush");
    common::kafka::wait_for_job_offsets(&client, "by_category", records, Duration::from_secs(60)).await;
    client.batch_execute("FLUSH").await.expect("flush");
    assert_eq!(by_category(&client).await, expected(&latest), "after the restart");
    drop(server);
}

async fn by_category(client: &tokio_postgres::Client) -> BTreeMap<String, (i64, i64)> {
    client
        .query("SELECT category, n, total FROM by_category", &[])
        .await
        .expect("view")
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect()
}

/// An `upsert-kafka` sink keyed by `city`, fed by `GROUP BY city, name`: a city's message key
/// is shared by the rows of all its names, so the job writes through a SinkUpsertMaterializer
/// (Flink's), and a name leaving a city writes the city's remaining row, not a tombstone.
/// Worked by hand with its rules (one statement per change, so the order is known): ann then
/// bob join oslo (oslo: ann, then bob, the newest), eve joins rome; bob leaves (oslo: ann
/// again, where a tombstone would have lost her); ann moves to rome (oslo: tombstone, no row
/// left; rome: ann, the newest).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upsert_kafka_sink_keyed_by_fewer_columns_than_the_query_keeps_every_key_held() {
    let Some(broker) = common::kafka::start_broker() else { return };
    let b = &broker.brokers;
    create_topic(b, "city_names", 2).expect("sink topic");
    let dir = common::scratch_dir("kafka-upsert-materialize");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE um_people (id INT, name STRING, city STRING, PRIMARY KEY (id) NOT ENFORCED);
             CREATE TABLE um_city (city STRING, name STRING, n BIGINT, PRIMARY KEY (city) NOT ENFORCED)
             WITH ('connector' = 'upsert-kafka', 'topic' = 'city_names', 'properties.bootstrap.servers' = '{b}',
                   'key.format' = 'json', 'value.format' = 'json');
             INSERT INTO um_city SELECT city, name, COUNT(*) FROM um_people GROUP BY city, name;
             INSERT INTO um_people VALUES (1, 'ann', 'oslo');
             INSERT INTO um_people VALUES (2, 'bob', 'oslo');
             INSERT INTO um_people VALUES (3, 'eve', 'rome');
             DELETE FROM um_people WHERE id = 2;
             UPDATE um_people SET city = 'rome' WHERE id = 1;
             FLUSH;"
        ))
        .await
        .expect("pipeline");
    let expected: BTreeMap<String, Vec<Option<String>>> = BTreeMap::from([
        ("oslo".to_string(), vec![Some("ann".to_string()), Some("bob".to_string()), Some("ann".to_string()), None]),
        ("rome".to_string(), vec![Some("eve".to_string()), Some("ann".to_string())]),
    ]);
    let mut reader = common::kafka::earliest_reader(b, "city_names");
    let mut messages: BTreeMap<String, Vec<Option<String>>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while messages.values().map(Vec::len).sum::<usize>() < 6 {
        assert!(Instant::now() < deadline, "the sink wrote {messages:?}, expected {expected:?}");
        for r in reader.poll(100, Duration::from_millis(100)).expect("poll") {
            let key: serde_json::Value = serde_json::from_slice(r.key.as_deref().expect("keyed")).expect("json key");
            let name = r.payload.map(|v| {
                let v: serde_json::Value = serde_json::from_slice(&v).expect("json value");
                assert_eq!(v["n"], 1, "{v}");
                v["name"].as_str().expect("name").to_string()
            });
            messages.entry(key["city"].as_str().expect("city").to_string()).or_default().push(name);
        }
    }
    assert_eq!(messages, expected);
}

/// Per customer, (orders, total cents) of the well-formed orders among `range`.
fn per_customer(range: std::ops::Range<i64>) -> BTreeMap<String, (i64, i64)> {
    let mut out = BTreeMap::new();
    for i in range {
        let Some((customer, cents, _)) = order(i) else { continue };
        let e = out.entry(customer).or_insert((0, 0));
        e.0 += 1;
        e.1 += cents;
    }
    out
}

/// SQL.md: `FLUSH` returns once every change accepted so far shows in every view. For a Kafka
/// source that is every record its topic held when FLUSH began: the view is read right after
/// FLUSH, without polling, and equals the orders produced; the job's committed positions are
/// the number of records produced, malformed ones (dead letters) and trailing tombstones (no
/// row, only a position) included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_reads_kafka_sources_to_where_their_topics_end() {
    let Some(broker) = common::kafka::start_broker() else { return };
    let b = &broker.brokers;
    create_topic(b, "flush_orders", 3).expect("topic");
    let dir = common::scratch_dir("kafka-flush");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE flush_orders (order_id BIGINT, customer STRING, amount DECIMAL(10, 2), ts TIMESTAMP(3))
             WITH ('connector' = 'kafka', 'topic' = 'flush_orders', 'properties.bootstrap.servers' = '{b}',
                   'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
             CREATE MATERIALIZED VIEW flush_totals AS
             SELECT customer, COUNT(*) AS n, SUM(amount) AS total FROM flush_orders GROUP BY customer;"
        ))
        .await
        .expect("pipeline");
    for (range, tombstones) in [(0..2_000, 5), (2_000..3_500, 4)] {
        let end = range.end;
        produce_to(b, "flush_orders", range, tombstones);
        client.batch_execute("FLUSH").await.expect("FLUSH");
        let got: BTreeMap<String, (i64, i64)> = client
            .query("SELECT customer, n, CAST(total * 100 AS BIGINT) FROM flush_totals", &[])
            .await
            .expect("view")
            .iter()
            .map(|r| (r.get::<_, String>(0), (r.get::<_, i64>(1), r.get::<_, i64>(2))))
            .collect();
        assert_eq!(got, per_customer(0..end), "after FLUSH, orders 0..{end}");
        let positions: i64 = client
            .query_one("SELECT CAST(SUM(position) AS BIGINT) FROM weir_sources WHERE job = 'flush_totals'", &[])
            .await
            .expect("weir_sources")
            .get(0);
        let tombstones_so_far = if end == 2_000 { 5 } else { 9 };
        assert_eq!(positions, end + tombstones_so_far, "records read after FLUSH");
    }
}

/// A `kafka` table with a message key (Flink's `'key.format'` / `'key.fields'`): read, the key
/// columns come from the key and the others from the value (`EXCEPT_KEY`); written, each row's
/// key columns are the message key, so every message of one user lands in one partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_key_fields_read_and_write_the_message_key() {
    let Some(broker) = common::kafka::start_broker() else { return };
    let b = &broker.brokers;
    create_topic(b, "keyed_in", 2).expect("topic");
    create_topic(b, "keyed_out", 3).expect("topic");
    let dir = common::scratch_dir("kafka-key-fields");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE keyed_in (user_id BIGINT, amount BIGINT)
             WITH ('connector' = 'kafka', 'topic' = 'keyed_in', 'properties.bootstrap.servers' = '{b}',
                   'scan.startup.mode' = 'earliest-offset', 'key.format' = 'json', 'key.fields' = 'user_id',
                   'value.format' = 'json', 'value.fields-include' = 'EXCEPT_KEY');
             CREATE TABLE keyed_out (user_id BIGINT, amount BIGINT, doubled BIGINT)
             WITH ('connector' = 'kafka', 'topic' = 'keyed_out', 'properties.bootstrap.servers' = '{b}',
                   'key.format' = 'json', 'key.fields' = 'user_id', 'format' = 'json');
             CREATE MATERIALIZED VIEW keyed_totals AS
             SELECT user_id, SUM(amount) AS total FROM keyed_in GROUP BY user_id;
             INSERT INTO keyed_out SELECT user_id, amount, amount * 2 FROM keyed_in;"
        ))
        .await
        .expect("pipeline");
    // Record i: user i % 5, amount i; the value holds the amount only.
    let options = BTreeMap::from([
        ("connector".to_string(), "kafka".to_string()),
        ("topic".to_string(), "keyed_in".to_string()),
        ("properties.bootstrap.servers".to_string(), b.to_string()),
        ("properties.batch.num.messages".to_string(), "1".to_string()),
    ]);
    let mut writer = KafkaWriter::open(&KafkaSinkConfig::from_options(&options).expect("config")).expect("producer");
    const RECORDS: i64 = 200;
    for i in 0..RECORDS {
        let key = format!(r#"{{"user_id": {}}}"#, i % 5);
        let value = format!(r#"{{"amount": {i}}}"#);
        writer.send(Some(key.as_bytes()), Some(value.as_bytes()), &[], None).expect("send");
    }
    writer.flush(Duration::from_secs(60)).expect("flush");
    client.batch_execute("FLUSH").await.expect("FLUSH");
    let mut expected = BTreeMap::new();
    for i in 0..RECORDS {
        *expected.entry(i % 5).or_insert(0i64) += i;
    }
    let totals: BTreeMap<i64, i64> = client
        .query("SELECT user_id, CAST(total AS BIGINT) FROM keyed_totals", &[])
        .await
        .expect("view")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(totals, expected);

    // The sink: a JSON key per message, every column in the value, one partition per user.
    let mut reader = common::kafka::earliest_reader(b, "keyed_out");
    let mut partitions: BTreeMap<i64, std::collections::BTreeSet<i32>> = BTreeMap::new();
    let mut sums: BTreeMap<i64, i64> = BTreeMap::new();
    let mut read = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while read < RECORDS {
        assert!(Instant::now() < deadline, "the sink wrote {read} of {RECORDS} messages");
        for r in reader.poll(1_000, Duration::from_millis(100)).expect("poll") {
            let key: serde_json::Value = serde_json::from_slice(r.key.as_deref().expect("keyed")).expect("json key");
            let value: serde_json::Value = serde_json::from_slice(r.payload.as_deref().expect("value")).expect("json value");
            let user = key["user_id"].as_i64().expect("user_id");
            assert_eq!(key.as_object().map(|o| o.len()), Some(1), "{key}");
            assert_eq!(value["user_id"].as_i64(), Some(user), "{value}");
            let amount = value["amount"].as_i64().expect("amount");
            assert_eq!(value["doubled"].as_i64(), Some(amount * 2), "{value}");
            partitions.entry(user).or_default().insert(r.partition);
            *sums.entry(user).or_insert(0) += amount;
            read += 1;
        }
    }
    assert_eq!(sums, expected);
    assert!(partitions.values().all(|p| p.len() == 1), "a user's messages spread over partitions: {partitions:?}");
}

/// An exactly-once sink whose transaction cannot commit (tansu has no transactions: its
/// EndTxn fails) fails its own job, which restarts from its last checkpoint; it is not the
/// failure of another client's statement. The job has a dead-letter table, so it shares its
/// epochs with the engine's statements: the failure, kept from the commit, was returned by the
/// next statement's commit (an unrelated INSERT failed with the sink's error) while the job
/// showed RUNNING.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exactly_once_sink_that_cannot_commit_fails_its_own_job() {
    let Some(broker) = common::kafka::start_broker() else { return };
    let b = &broker.brokers;
    create_topic(b, "eo_fail_in", 1).expect("topic");
    create_topic(b, "eo_fail_out", 1).expect("topic");
    produce_to(b, "eo_fail_in", 0..50, 0);
    let dir = common::scratch_dir("kafka-eo-fail");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE eo_fail_in (order_id BIGINT, customer STRING, amount DECIMAL(10, 2), ts TIMESTAMP(3))
             WITH ('connector' = 'kafka', 'topic' = 'eo_fail_in', 'properties.bootstrap.servers' = '{b}',
                   'scan.startup.mode' = 'earliest-offset', 'format' = 'json', 'dead-letter.table' = 'eo_fail_dead');
             CREATE TABLE eo_fail_out (customer STRING, n BIGINT, PRIMARY KEY (customer) NOT ENFORCED)
             WITH ('connector' = 'upsert-kafka', 'topic' = 'eo_fail_out', 'properties.bootstrap.servers' = '{b}',
                   'key.format' = 'json', 'value.format' = 'json',
                   'sink.delivery-guarantee' = 'exactly-once', 'sink.transactional-id-prefix' = 'eo-fail');
             CREATE TABLE eo_fail_plain (a INT);
             INSERT INTO eo_fail_out SELECT customer, COUNT(*) FROM eo_fail_in GROUP BY customer;"
        ))
        .await
        .expect("pipeline");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut inserted = 0;
    let error = loop {
        client.batch_execute(&format!("INSERT INTO eo_fail_plain VALUES ({inserted})")).await.expect("an unrelated INSERT");
        inserted += 1;
        let rows = client.simple_query("SHOW JOBS").await.expect("SHOW JOBS");
        let job = rows.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) if r.get("kind") == Some("job") => {
                Some((r.get("status").unwrap_or("").to_string(), r.get("error").map(str::to_string), r.get("restarts").map(str::to_string)))
            }
            _ => None,
        });
        let (status, error, restarts) = job.expect("the INSERT INTO job");
        if status == "RESTARTING" {
            let restarts: u64 = restarts.as_deref().and_then(|n| n.parse().ok()).expect("restarts");
            assert!(restarts >= 1, "SHOW JOBS counts the restart");
            break error.unwrap_or_default();
        }
        assert!(Instant::now() < deadline, "the job did not fail: {status} {error:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(error.contains("kafka sink"), "{error}");
    let n: i64 = client.query_one("SELECT count(*) FROM eo_fail_plain", &[]).await.expect("count").get(0);
    assert_eq!(n, inserted);
}
