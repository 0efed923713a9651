//! `avro-confluent` against a real Kafka-protocol broker (tansu) and a test double of the
//! Confluent schema registry (`common::registry`; no real registry runs here).
//!
//! Orders are written the way Confluent's Java serializer writes them (magic byte, schema id,
//! Avro binary), encoded by hand here from the Avro spec, under a schema registered in the test
//! registry. A view over the `avro-confluent` table must equal totals worked out here; three
//! broken records are dead letters; the view written to an `upsert-kafka` sink with an
//! `avro-confluent` value registers `<topic>-value` and reads back (decoded by hand) equal to
//! the view.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use weir_connectors::kafka::{create_topic, KafkaSinkConfig, KafkaWriter};

const ORDERS: i64 = 2_000;

/// Order `i`: (customer, amount in cents, note).
fn order(i: i64) -> (String, i64, Option<String>) {
    let cents = i * 7_919 % 100_000;
    let cents = if i % 13 == 0 { -cents } else { cents };
    (format!("c{}", i % 10), cents, (i % 3 == 0).then(|| format!("note {i}")))
}

/// Avro's zig-zag varint of a `long` (spec: "Binary Encoding").
fn put_long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        if z < 0x80 {
            out.push(z as u8);
            return;
        }
        out.push((z as u8 & 0x7F) | 0x80);
        z >>= 7;
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_long(out, b.len() as i64);
    out.extend_from_slice(b);
}

/// A decimal's unscaled value as the shortest big-endian two's complement.
fn decimal_bytes(v: i64) -> Vec<u8> {
    let full = v.to_be_bytes();
    let mut start = 0;
    while start < 7 {
        let (b, next) = (full[start], full[start + 1]);
        if (b == 0 && next & 0x80 == 0) || (b == 0xFF && next & 0x80 != 0) {
            start += 1;
        } else {
            break;
        }
    }
    full[start..].to_vec()
}

fn get_long(data: &mut &[u8]) -> i64 {
    let (mut z, mut shift) = (0u64, 0);
    loop {
        let b = data[0];
        *data = &data[1..];
        z |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

fn get_bytes<'a>(data: &mut &'a [u8]) -> &'a [u8] {
    let n = get_long(data) as usize;
    let (b, rest) = data.split_at(n);
    *data = rest;
    b
}

const ORDER_SCHEMA: &str = r#"{"type": "record", "name": "Order", "namespace": "shop", "fields": [
  {"name": "order_id", "type": "long"},
  {"name": "customer", "type": "string"},
  {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
  {"name": "note", "type": ["null", "string"], "default": null},
  {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}
]}"#;

fn payload(id: u32, i: i64) -> Vec<u8> {
    let (customer, cents, note) = order(i);
    let mut out = vec![0];
    out.extend_from_slice(&id.to_be_bytes());
    put_long(&mut out, i);
    put_bytes(&mut out, customer.as_bytes());
    put_bytes(&mut out, &decimal_bytes(cents));
    match note {
        None => put_long(&mut out, 0),
        Some(n) => {
            put_long(&mut out, 1);
            put_bytes(&mut out, n.as_bytes());
        }
    }
    put_long(&mut out, 1_709_287_200_000 + i * 1_000);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_confluent_in_and_out_through_a_schema_registry() {
    let Some(broker) = common::kafka::start_broker() else { return };
    let registry = common::registry::TestRegistry::start();
    let b = &broker.brokers;
    create_topic(b, "orders_avro", 2).expect("topic");
    create_topic(b, "totals", 2).expect("sink topic");
    create_topic(b, "orders_avro_dlq", 1).expect("dead-letter topic");
    let id = registry.register("orders_avro-value", ORDER_SCHEMA);
    let options = BTreeMap::from([
        ("connector".to_string(), "kafka".to_string()),
        ("topic".to_string(), "orders_avro".to_string()),
        ("properties.bootstrap.servers".to_string(), b.clone()),
    ]);
    let mut writer = KafkaWriter::open(&KafkaSinkConfig::from_options(&options).expect("config")).expect("producer");
    for i in 0..ORDERS {
        writer.send(Some(i.to_string().as_bytes()), Some(&payload(id, i)), &[], None).expect("send");
    }
    let mut bad_magic = payload(id, 1);
    let mut bad_records = Vec::new();
    bad_magic[0] = 1;
    let mut unknown_id = payload(id, 2);
    unknown_id[1..5].copy_from_slice(&77u32.to_be_bytes());
    let truncated = payload(id, 3)[..7].to_vec();
    for bad in [bad_magic, unknown_id, truncated] {
        writer.send(Some(b"bad"), Some(&bad), &[], None).expect("send");
        bad_records.push(bad);
    }
    writer.flush(Duration::from_secs(30)).expect("flush");

    let dir = common::scratch_dir("kafka-avro");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    let url = &registry.url;
    client
        .batch_execute(&format!(
            "CREATE TABLE orders_avro (order_id BIGINT, customer STRING, amount DECIMAL(10, 2), ts TIMESTAMP(3), region STRING)
             WITH ('connector' = 'kafka', 'topic' = 'orders_avro', 'properties.bootstrap.servers' = '{b}',
                   'scan.startup.mode' = 'earliest-offset', 'format' = 'avro-confluent',
                   'avro-confluent.url' = '{url}', 'dead-letter.table' = 'orders_avro_dead',
                   'dead-letter.topic' = 'orders_avro_dlq');
             CREATE MATERIALIZED VIEW totals AS
             SELECT customer, COUNT(*) AS n, SUM(amount) AS total, COUNT(region) AS regions, MAX(ts) AS last_ts
             FROM orders_avro GROUP BY customer;
             CREATE TABLE totals_out (customer STRING, n BIGINT, total DECIMAL(20, 2), PRIMARY KEY (customer) NOT ENFORCED)
             WITH ('connector' = 'upsert-kafka', 'topic' = 'totals', 'properties.bootstrap.servers' = '{b}',
                   'key.format' = 'json', 'value.format' = 'avro-confluent', 'value.avro-confluent.url' = '{url}');
             INSERT INTO totals_out SELECT customer, n, total FROM totals;"
        ))
        .await
        .expect("pipeline");
    common::kafka::wait_for_job_offsets(&client, "totals", ORDERS + 3, Duration::from_secs(60)).await;
    client.batch_execute("FLUSH").await.expect("flush");

    // customer -> (count, total cents, last ts as text)
    let mut expected: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for i in 0..ORDERS {
        let (customer, cents, _) = order(i);
        let e = expected.entry(customer).or_insert((0, 0));
        e.0 += 1;
        e.1 += cents;
    }
    let rows = client
        .query("SELECT customer, n, CAST(total * 100 AS BIGINT), regions, CAST(last_ts AS VARCHAR) FROM totals", &[])
        .await
        .expect("view");
    let got: BTreeMap<String, (i64, i64)> = rows.iter().map(|r| (r.get(0), (r.get(1), r.get(2)))).collect();
    assert_eq!(got, expected);
    assert!(rows.iter().all(|r| r.get::<_, i64>(3) == 0), "region is not in the writer schema: NULL");
    let c9 = rows.iter().find(|r| r.get::<_, String>(0) == "c9").expect("c9");
    // The last order of c9 is 1999, 1 999 s after 2024-03-01 10:00:00 UTC.
    assert!(c9.get::<_, String>(4).replace('T', " ").starts_with("2024-03-01 10:33:19"), "{}", c9.get::<_, String>(4));

    let dead: Vec<String> = client
        .query("SELECT error FROM orders_avro_dead ORDER BY record_offset", &[])
        .await
        .expect("dead letters")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(dead.len(), 3, "{dead:?}");
    assert!(dead.iter().any(|e| e.contains("magic byte 1")), "{dead:?}");
    assert!(dead.iter().any(|e| e.contains("schema id 77")), "{dead:?}");

    // The dead-letter topic holds the same three records, untouched, with their context in
    // headers.
    let mut reader = common::kafka::earliest_reader(b, "orders_avro_dlq");
    let mut letters = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while letters.len() < 3 {
        letters.extend(reader.poll(100, Duration::from_millis(100)).expect("poll"));
        assert!(Instant::now() < deadline, "only {} records in the dead-letter topic", letters.len());
    }
    assert_eq!(letters.len(), 3);
    let mut raws: Vec<Vec<u8>> = letters.iter().map(|r| r.payload.clone().expect("raw record")).collect();
    raws.sort();
    bad_records.sort();
    assert_eq!(raws, bad_records, "the raw records");
    for r in &letters {
        let header = |key: &str| {
            r.headers.iter().find(|h| h.key == key).and_then(|h| h.value.clone()).map(|v| String::from_utf8(v).expect("utf8"))
        };
        assert_eq!(header("weir.dlq.topic").as_deref(), Some("orders_avro"));
        assert_eq!(header("weir.dlq.job").as_deref(), Some("totals"));
        assert!(header("weir.dlq.error").is_some_and(|e| e.starts_with("avro-confluent")), "{:?}", header("weir.dlq.error"));
        assert!(header("weir.dlq.offset").is_some_and(|o| o.parse::<i64>().is_ok()));
    }

    // The sink registered its schema under <topic>-value and wrote records decodable by it.
    let versions = registry.versions("totals-value");
    assert_eq!(versions.len(), 1, "one schema registered for the sink");
    let schema: serde_json::Value = serde_json::from_str(&versions[0]).expect("schema json");
    let fields: Vec<(String, serde_json::Value)> = schema["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .map(|f| (f["name"].as_str().expect("name").to_string(), f["type"].clone()))
        .collect();
    assert_eq!(fields.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(), ["customer", "n", "total"]);
    let sink_id = registry.register("totals-value", &versions[0]);
    let mut reader = common::kafka::earliest_reader(b, "totals");
    let mut compacted: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for r in reader.poll(10_000, Duration::from_millis(100)).expect("poll") {
            compacted.insert(r.key.clone().expect("keyed"), r.payload.clone());
        }
        let decoded: BTreeMap<String, (i64, i64)> = compacted.values().flatten().map(|v| decode_total(v, sink_id, &fields)).collect();
        if decoded == expected {
            break;
        }
        assert!(Instant::now() < deadline, "the compacted sink topic never equalled the view: {decoded:?}, expected {expected:?}");
    }
}

/// Decodes one sink record by hand from the registered schema's fields: (customer, (n, cents)).
fn decode_total(payload: &[u8], id: u32, fields: &[(String, serde_json::Value)]) -> (String, (i64, i64)) {
    assert_eq!(payload[0], 0, "magic byte");
    assert_eq!(u32::from_be_bytes(payload[1..5].try_into().expect("id")), id, "schema id");
    let mut data = &payload[5..];
    let (mut customer, mut n, mut cents) = (String::new(), 0, 0);
    for (name, t) in fields {
        let t = match t.as_array() {
            Some(union) => {
                if get_long(&mut data) == 0 {
                    continue; // null
                }
                union[1].clone()
            }
            None => t.clone(),
        };
        match (name.as_str(), t) {
            ("customer", t) if t == "string" => customer = String::from_utf8(get_bytes(&mut data).to_vec()).expect("utf8"),
            ("n", t) if t == "long" => n = get_long(&mut data),
            ("total", t) if t["logicalType"] == "decimal" && t["scale"] == 2 => {
                let b = get_bytes(&mut data);
                let fill = if b[0] & 0x80 != 0 { 0xFF } else { 0 };
                let mut wide = [fill; 8];
                wide[8 - b.len()..].copy_from_slice(b);
                cents = i64::from_be_bytes(wide);
            }
            (name, t) => panic!("unexpected field {name} of type {t}"),
        }
    }
    (customer, (n, cents))
}
