//! The transactional writer (`'sink.delivery-guarantee' = 'exactly-once'`) against librdkafka's
//! mock cluster, which answers the transaction protocol (InitProducerId, AddPartitionsToTxn,
//! AddOffsetsToTxn, TxnOffsetCommit, EndTxn): transactions begin with the first message and
//! commit with their marker; a writer restarted with the same `transactional.id` goes on.
//!
//! What the mock cluster (librdkafka 2.12) does not do, and so is not checked here: fence an
//! older producer of the same id (it gives each a new producer id), keep aborted transactions
//! from `read_committed` readers, or store offsets committed in a transaction (so
//! `committed_marker` finds none; a real broker gives the last committed sequence number).
#![cfg(feature = "kafka")]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use weir_connectors::kafka::{KafkaReader, KafkaSinkConfig, KafkaSourceConfig, KafkaWriter, MockBrokers};
use weir_connectors::ConnectorError;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn options(brokers: &MockBrokers, topic: &str, pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut map: BTreeMap<String, String> = [
        ("connector", "kafka"),
        ("topic", topic),
        ("format", "raw"),
        ("sink.delivery-guarantee", "exactly-once"),
        ("sink.transactional-id-prefix", "test"),
        ("scan.startup.mode", "earliest-offset"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    map.insert("properties.bootstrap.servers".into(), brokers.bootstrap_servers());
    map.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    map
}

fn writer(brokers: &MockBrokers, topic: &str, id: &str) -> Result<KafkaWriter, ConnectorError> {
    KafkaWriter::open_transactional(&KafkaSinkConfig::from_options(&options(brokers, topic, &[]))?, id)
}

/// Reads until `n` records came (30 s at most); returns their values.
fn read(brokers: &MockBrokers, topic: &str, n: usize) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut reader = KafkaReader::open(&KafkaSourceConfig::from_options(&options(brokers, topic, &[]))?, &BTreeMap::new())?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut values = Vec::new();
    while values.len() < n && Instant::now() < deadline {
        for record in reader.poll(n - values.len(), Duration::from_millis(100))? {
            values.push(String::from_utf8(record.payload.unwrap_or_default())?);
        }
    }
    Ok(values)
}

#[test]
fn commits_transactions_with_their_marker() -> TestResult {
    let brokers = MockBrokers::start(1)?;
    brokers.create_topic("out", 2)?;
    let mut first = writer(&brokers, "out", "test-job-1")?;
    assert!(first.is_transactional());
    assert_eq!(first.transactional_id(), Some("test-job-1"));
    // No message, no transaction: the commit is a no-op.
    first.commit_transaction(1)?;
    for i in 0..10 {
        first.send(Some(format!("k{}", i % 3).as_bytes()), Some(format!("v{i}").as_bytes()), &[], None)?;
    }
    first.flush(Duration::from_secs(30))?;
    first.commit_transaction(1)?;
    let mut values = read(&brokers, "out", 10)?;
    values.sort();
    let mut expected: Vec<String> = (0..10).map(|i| format!("v{i}")).collect();
    expected.sort();
    assert_eq!(values, expected);

    assert!(matches!(first.committed_marker()?, None | Some(1)));
    // A restarted instance with the same id.
    drop(first);
    let mut second = writer(&brokers, "out", "test-job-1")?;
    second.send(Some(b"k"), Some(b"v10"), &[], None)?;
    second.flush(Duration::from_secs(30))?;
    second.commit_transaction(2)?;
    assert!(read(&brokers, "out", 11)?.contains(&"v10".to_string()));
    Ok(())
}
