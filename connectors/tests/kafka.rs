//! The Kafka reader and writer against a real broker: tansu, which each test starts on a free
//! port of 127.0.0.1 (`scripts/kafka-broker.sh install` builds it). Without the binary a test
//! passes with a loud note, unless `WEIR_REQUIRE_KAFKA=1` (CI), where that is a failure.
//!
//! Every expected value is computed from what the test produced, not read back from Kafka:
//! 1000 JSON records `{"id": i, "user": "u{i % 17}", "amount": i * 1.5}` with key `u{i % 17}`,
//! timestamp `BASE_MS + i s` and a header `n = i`, into 4 partitions.
//!
//! # tansu 0.6 quirks (its memory storage), which the producers here work around
//! - ListOffsets `latest` answers the base offset of the partition's last record batch plus
//!   one, not the offset after its last record: the high watermarks (and so `latest-offset` and
//!   lag) are right only when every batch holds one record, so the test producers set
//!   `batch.num.messages = 1`. Fetch responses carry the right high watermark.
//! - ListOffsets by timestamp compares the time a batch was *written*, not the records'
//!   timestamps: the timestamp test lets the records' timestamps be their send time.
#![cfg(feature = "kafka")]

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema};
use weir_connectors::format;
use weir_connectors::kafka::{
    create_topic, KafkaHeader, KafkaReader, KafkaRecord, KafkaSinkConfig, KafkaSourceConfig, KafkaWriter,
};
use weir_connectors::ConnectorError;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const NUM_RECORDS: i64 = 1000;
const NUM_PARTITIONS: i32 = 4;
const NUM_USERS: i64 = 17;
const BASE_MS: i64 = 1_700_000_000_000;

/// A tansu broker on a free port, killed on drop.
struct Broker {
    child: Child,
    brokers: String,
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

/// Starts a broker, or `None` (with a loud note) when tansu is not installed and not required.
fn start_broker() -> Result<Option<Broker>, Box<dyn std::error::Error>> {
    let Some(binary) = tansu_binary() else {
        if std::env::var("WEIR_REQUIRE_KAFKA").is_ok_and(|v| v == "1") {
            return Err("WEIR_REQUIRE_KAFKA=1 but tansu is not installed: run scripts/kafka-broker.sh install".into());
        }
        eprintln!("\n*** SKIPPED: the Kafka broker tansu is not installed (scripts/kafka-broker.sh install) ***\n");
        return Ok(None);
    };
    for _attempt in 0..5 {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let url = format!("tcp://127.0.0.1:{port}");
        let child = Command::new(&binary)
            .args(["broker", "--listener-url", &url, "--advertised-listener-url", &url])
            .args(["--storage-engine", "memory://tansu/"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut broker = Broker { child, brokers: format!("127.0.0.1:{port}") };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(Some(broker));
            }
            if broker.child.try_wait()?.is_some() {
                break; // the port was taken meanwhile: try another
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Err("tansu did not start on a free port in 5 attempts".into())
}

fn options(broker: &Broker, topic: &str, pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut map = BTreeMap::from([
        ("connector".to_string(), "kafka".to_string()),
        ("topic".to_string(), topic.to_string()),
        ("properties.bootstrap.servers".to_string(), broker.brokers.clone()),
        ("format".to_string(), "json".to_string()),
    ]);
    map.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    map
}

fn user(i: i64) -> String {
    format!("u{}", i % NUM_USERS)
}

/// Produces records `range` of the test data set, then flushes; with `timestamps` record `i`
/// has timestamp `BASE_MS + i s`, else its send time.
fn produce(writer: &mut KafkaWriter, range: std::ops::Range<i64>, timestamps: bool) -> Result<(), ConnectorError> {
    for i in range {
        let payload = format!(r#"{{"id": {i}, "user": "{}", "amount": {}}}"#, user(i), i as f64 * 1.5);
        let header = KafkaHeader { key: "n".into(), value: Some(i.to_string().into_bytes()) };
        let timestamp = timestamps.then_some(BASE_MS + i * 1000);
        writer.send(Some(user(i).as_bytes()), Some(payload.as_bytes()), &[header], timestamp)?;
    }
    writer.flush(Duration::from_secs(30))
}

/// A writer of one record per batch (see the tansu quirks above).
fn open_writer(broker: &Broker, topic: &str, pairs: &[(&str, &str)]) -> Result<KafkaWriter, ConnectorError> {
    let mut pairs = pairs.to_vec();
    pairs.push(("properties.batch.num.messages", "1"));
    KafkaWriter::open(&KafkaSinkConfig::from_options(&options(broker, topic, &pairs))?)
}

/// A topic holding the 1000 records.
fn topic_with_records(broker: &Broker, topic: &str) -> Result<(), ConnectorError> {
    assert!(create_topic(&broker.brokers, topic, NUM_PARTITIONS)?, "a new topic");
    let mut writer = open_writer(broker, topic, &[])?;
    assert_eq!(writer.num_partitions(), NUM_PARTITIONS);
    produce(&mut writer, 0..NUM_RECORDS, true)
}

fn open_reader(
    broker: &Broker,
    topic: &str,
    pairs: &[(&str, &str)],
    resume: &BTreeMap<i32, i64>,
) -> Result<KafkaReader, ConnectorError> {
    KafkaReader::open(&KafkaSourceConfig::from_options(&options(broker, topic, pairs))?, resume)
}

/// Polls until `expected` records came (failing after 30 s), then checks that nothing more
/// comes within 300 ms.
fn read_exactly(reader: &mut KafkaReader, expected: usize) -> Result<Vec<KafkaRecord>, Box<dyn std::error::Error>> {
    let mut records = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while records.len() < expected {
        if Instant::now() > deadline {
            return Err(format!("read {} of {expected} records in 30 s", records.len()).into());
        }
        records.extend(reader.poll(expected - records.len(), Duration::from_millis(200))?);
    }
    let extra = reader.poll(100, Duration::from_millis(300))?;
    assert!(extra.is_empty(), "{} records more than the {expected} expected", extra.len());
    Ok(records)
}

/// The `id` of each record, from its JSON payload (via the json format).
fn ids(records: &[KafkaRecord]) -> Result<Vec<i64>, Box<dyn std::error::Error>> {
    let batch = decode(records)?;
    Ok(batch.column(0).as_primitive::<Int64Type>().values().to_vec())
}

fn decode(records: &[KafkaRecord]) -> Result<RecordBatch, Box<dyn std::error::Error>> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("user", DataType::Utf8, true),
        Field::new("amount", DataType::Float64, true),
    ]));
    let mut decoder = format::decoder(&BTreeMap::from([("format".into(), "json".into())]), "", schema)?;
    let payloads: Vec<&[u8]> = records.iter().map(|r| r.payload.as_deref().unwrap_or_default()).collect();
    let decoded = decoder.decode(&payloads)?;
    assert!(decoded.errors.is_empty(), "{:?}", decoded.errors);
    Ok(decoded.batch)
}

/// Kafka's Java client's partition of a key: `toPositive(murmur2(key)) % n`.
fn java_partition(key: &[u8], partitions: i32) -> i32 {
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = 0x9747_b28c ^ key.len() as u32;
    let mut chunks = key.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    ((h & 0x7fff_ffff) % partitions as u32) as i32
}

#[test]
fn reader_writer_and_codecs_can_move_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<KafkaReader>();
    send_sync::<KafkaWriter>();
    send_sync::<Box<dyn format::Decoder>>();
    send_sync::<Box<dyn format::Encoder>>();
    send_sync::<format::UpsertDecoder>();
}

#[test]
fn earliest_reads_every_record_once_with_its_metadata() -> TestResult {
    let Some(broker) = start_broker()? else { return Ok(()) };
    topic_with_records(&broker, "orders")?;
    let mut reader = open_reader(&broker, "orders", &[("scan.startup.mode", "earliest-offset")], &BTreeMap::new())?;
    assert_eq!(reader.partitions(), &[0, 1, 2, 3]);
    assert_eq!(reader.positions(), &BTreeMap::from([(0, 0), (1, 0), (2, 0), (3, 0)]));
    let records = read_exactly(&mut reader, NUM_RECORDS as usize)?;

    let batch = decode(&records)?;
    let ids = batch.column(0).as_primitive::<Int64Type>();
    let sorted: BTreeSet<i64> = ids.values().iter().copied().collect();
    assert_eq!(sorted, (0..NUM_RECORDS).collect(), "each record exactly once");
    let total: f64 = batch.column(2).as_primitive::<Float64Type>().values().iter().sum();
    assert_eq!(total, (0..NUM_RECORDS).map(|i| i as f64 * 1.5).sum::<f64>());

    let mut next_offset: BTreeMap<i32, i64> = BTreeMap::new();
    for (row, record) in records.iter().enumerate() {
        let id = ids.value(row);
        let key = user(id);
        assert_eq!(record.key.as_deref(), Some(key.as_bytes()));
        assert_eq!(record.partition, java_partition(key.as_bytes(), NUM_PARTITIONS), "key {key}: Java's partition");
        assert_eq!(record.timestamp_ms, Some(BASE_MS + id * 1000));
        assert_eq!(record.headers, vec![KafkaHeader { key: "n".into(), value: Some(id.to_string().into_bytes()) }]);
        let expected = next_offset.entry(record.partition).or_insert(0);
        assert_eq!(record.offset, *expected, "offsets of partition {} in order, no gap", record.partition);
        *expected += 1;
    }
    // Per partition, the count of records whose key hashes there.
    let mut per_partition: BTreeMap<i32, i64> = BTreeMap::new();
    for i in 0..NUM_RECORDS {
        *per_partition.entry(java_partition(user(i).as_bytes(), NUM_PARTITIONS)).or_default() += 1;
    }
    per_partition.retain(|_, n| *n > 0);
    let high = reader.high_watermarks()?;
    assert_eq!(high.values().filter(|&&h| h > 0).count(), per_partition.len());
    for (p, n) in &per_partition {
        assert_eq!(high[p], *n, "partition {p}'s high watermark");
    }
    assert_eq!(reader.positions(), &high, "positions after reading everything");
    Ok(())
}

#[test]
fn resumes_from_explicit_offsets_and_specific_offsets() -> TestResult {
    let Some(broker) = start_broker()? else { return Ok(()) };
    topic_with_records(&broker, "orders")?;
    let high = open_reader(&broker, "orders", &[("scan.startup.mode", "earliest-offset")], &BTreeMap::new())?
        .high_watermarks()?;

    // Weir's own committed offsets win over the startup mode.
    let resume: BTreeMap<i32, i64> = high.iter().map(|(&p, &h)| (p, h / 2)).collect();
    let mut reader = open_reader(&broker, "orders", &[("scan.startup.mode", "latest-offset")], &resume)?;
    let expected: i64 = high.values().map(|h| h - h / 2).sum();
    let records = read_exactly(&mut reader, expected as usize)?;
    assert!(records.iter().all(|r| r.offset >= resume[&r.partition]));

    // A partition missing from Weir's offsets starts per the mode (here: earliest).
    let partial = BTreeMap::from([(0, high[&0])]);
    let mut reader = open_reader(&broker, "orders", &[("scan.startup.mode", "earliest-offset")], &partial)?;
    let records = read_exactly(&mut reader, (NUM_RECORDS - high[&0]) as usize)?;
    assert!(records.iter().all(|r| r.partition != 0));

    // Flink's specific offsets; partitions not listed start at the earliest (no group).
    let (p0, p1) = (high[&0].min(5), high[&1].min(10));
    let spec = format!("partition:0,offset:{p0};partition:1,offset:{p1}");
    let mut reader = open_reader(
        &broker,
        "orders",
        &[("scan.startup.mode", "specific-offsets"), ("scan.startup.specific-offsets", &spec)],
        &BTreeMap::new(),
    )?;
    assert_eq!((reader.positions()[&0], reader.positions()[&1]), (p0, p1));
    read_exactly(&mut reader, (NUM_RECORDS - p0 - p1) as usize)?;
    Ok(())
}

#[test]
fn latest_and_timestamp_startup_modes() -> TestResult {
    let Some(broker) = start_broker()? else { return Ok(()) };
    assert!(create_topic(&broker.brokers, "orders", NUM_PARTITIONS)?);
    let mut writer = open_writer(&broker, "orders", &[])?;
    produce(&mut writer, 0..500, false)?;
    let now_ms = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64);
    let split = now_ms()? + 1;
    while now_ms()? <= split {
        std::thread::yield_now();
    }
    produce(&mut writer, 500..NUM_RECORDS, false)?;

    // From the first record at or after the time between records 499 and 500: records 500..1000.
    let millis = split.to_string();
    let mut reader = open_reader(
        &broker,
        "orders",
        &[("scan.startup.mode", "timestamp"), ("scan.startup.timestamp-millis", &millis)],
        &BTreeMap::new(),
    )?;
    let mut got = ids(&read_exactly(&mut reader, 500)?)?;
    got.sort_unstable();
    assert_eq!(got, (500..NUM_RECORDS).collect::<Vec<_>>());

    // Latest: only what is produced after opening.
    let mut latest = open_reader(&broker, "orders", &[("scan.startup.mode", "latest-offset")], &BTreeMap::new())?;
    assert_eq!(latest.positions(), &latest.high_watermarks()?);
    assert!(latest.poll(100, Duration::from_millis(300))?.is_empty());
    produce(&mut writer, NUM_RECORDS..NUM_RECORDS + 10, false)?;
    let mut got = ids(&read_exactly(&mut latest, 10)?)?;
    got.sort_unstable();
    assert_eq!(got, (NUM_RECORDS..NUM_RECORDS + 10).collect::<Vec<_>>());
    Ok(())
}

/// Waits (polling, 10 s at most) until the group's committed offsets are `expected`: a commit
/// to the group is sent without waiting for its answer.
fn committed_within_deadline(reader: &KafkaReader, expected: &BTreeMap<i32, i64>) -> TestResult {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let committed = reader.group_offsets()?;
        if committed == *expected {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("the group's offsets are {committed:?}, not {expected:?}").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn commits_to_the_group_and_reports_lag() -> TestResult {
    let Some(broker) = start_broker()? else { return Ok(()) };
    topic_with_records(&broker, "orders")?;
    let group = [("scan.startup.mode", "earliest-offset"), ("properties.group.id", "weir-test")];
    let reader = open_reader(&broker, "orders", &group, &BTreeMap::new())?;
    assert!(reader.group_offsets()?.is_empty(), "nothing committed yet");
    let high = reader.high_watermarks()?;

    // Half read and committed: lag is the other half.
    let half: BTreeMap<i32, i64> = high.iter().map(|(&p, &h)| (p, h / 2)).collect();
    reader.commit_to_group(&half)?;
    committed_within_deadline(&reader, &half)?;
    let lag = reader.lag(&reader.group_offsets()?)?;
    for l in &lag {
        assert_eq!((l.committed, l.high_watermark, l.lag), (Some(half[&l.partition]), high[&l.partition], high[&l.partition] - half[&l.partition]));
    }
    assert_eq!(lag.iter().map(|l| l.lag).sum::<i64>(), high.values().map(|h| h - h / 2).sum::<i64>());

    // group-offsets starts where the group is.
    let mut from_group = open_reader(&broker, "orders", &[("properties.group.id", "weir-test")], &BTreeMap::new())?;
    assert_eq!(from_group.positions(), &half);
    let expected: i64 = high.values().map(|h| h - h / 2).sum();
    read_exactly(&mut from_group, expected as usize)?;
    from_group.commit_to_group(&from_group.positions().clone())?;
    committed_within_deadline(&from_group, &from_group.positions().clone())?;
    assert!(from_group.lag(&from_group.group_offsets()?)?.iter().all(|l| l.lag == 0));

    // A group that never committed, with no reset policy, is refused (Flink's default).
    let err = open_reader(&broker, "orders", &[("properties.group.id", "fresh")], &BTreeMap::new())
        .err()
        .ok_or("group-offsets without committed offsets must fail")?;
    assert!(err.to_string().contains("auto.offset.reset"), "{err}");
    let reset = [("properties.group.id", "fresh"), ("properties.auto.offset.reset", "latest")];
    let latest = open_reader(&broker, "orders", &reset, &BTreeMap::new())?;
    assert_eq!(latest.positions(), &high);
    Ok(())
}

#[test]
fn writer_tombstones_round_robin_and_missing_topic() -> TestResult {
    let Some(broker) = start_broker()? else { return Ok(()) };
    assert!(create_topic(&broker.brokers, "events", NUM_PARTITIONS)?);
    assert!(!create_topic(&broker.brokers, "events", NUM_PARTITIONS)?, "it exists now");
    let mut writer = open_writer(&broker, "events", &[("sink.partitioner", "round-robin")])?;
    for i in 0..100 {
        let payload = (i % 10 != 0).then(|| format!("v{i}"));
        writer.send(Some(b"same-key"), payload.as_deref().map(str::as_bytes), &[], None)?;
    }
    writer.flush(Duration::from_secs(30))?;
    let mut reader = open_reader(&broker, "events", &[("scan.startup.mode", "earliest-offset")], &BTreeMap::new())?;
    let records = read_exactly(&mut reader, 100)?;
    assert_eq!(reader.high_watermarks()?, BTreeMap::from([(0, 25), (1, 25), (2, 25), (3, 25)]), "round-robin");
    assert_eq!(records.iter().filter(|r| r.payload.is_none()).count(), 10, "tombstones");
    assert!(records.iter().all(|r| r.headers.is_empty() && r.key.as_deref() == Some(b"same-key".as_slice())));

    let missing = options(&broker, "nope", &[("scan.startup.mode", "earliest-offset")]);
    let err = KafkaReader::open(&KafkaSourceConfig::from_options(&missing)?, &BTreeMap::new())
        .err()
        .ok_or("a missing topic must fail")?;
    assert!(matches!(err, ConnectorError::Kafka { .. }) && err.to_string().contains("'nope'"), "{err}");
    let err = open_writer(&broker, "nope", &[]).err().ok_or("a missing topic must fail")?;
    assert!(err.to_string().contains("does not exist"), "{err}");
    Ok(())
}
