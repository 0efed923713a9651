//! `weir bench kafka`: a Kafka JSON source plus a filter job into a blackhole, measured.
//!
//! Produces `records` JSON records (`{"id", "customer", "amount", "ts"}`) into a new topic of
//! `partitions` partitions first (not timed), then runs `INSERT INTO blackhole SELECT ... FROM
//! src WHERE amount > 50` until the job has read every record, and reports records/s of that
//! run, CPU seconds and peak RSS. The broker is the caller's (`scripts/kafka-broker.sh start`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use weir_connectors::kafka::{create_topic, KafkaSinkConfig, KafkaWriter};

use crate::bench::Report;
use crate::error::{Result, WeirError};
use crate::sql::{Database, OpenOptions, Session};
use crate::state::EpochWrites;

/// Runs the benchmark against `brokers` in a fresh database under `data_dir`.
///
/// # Errors
/// Broker failures (`Execution`), statement errors.
/// Returns the report and the process's CPU seconds during the job (all threads, librdkafka's
/// included).
pub async fn run(data_dir: &std::path::Path, brokers: &str, records: u64, partitions: i32) -> Result<(Report, f64)> {
    let topic = format!("weir-bench-{}", std::process::id());
    create_topic(brokers, &topic, partitions).map_err(|e| WeirError::execution(e.to_string()))?;
    let options = BTreeMap::from([
        ("connector".to_string(), "kafka".to_string()),
        ("topic".to_string(), topic.clone()),
        ("properties.bootstrap.servers".to_string(), brokers.to_string()),
        ("properties.linger.ms".to_string(), "20".to_string()),
    ]);
    let config = KafkaSinkConfig::from_options(&options).map_err(|e| WeirError::option(e.to_string()))?;
    let mut writer = KafkaWriter::open(&config).map_err(|e| WeirError::execution(e.to_string()))?;
    let base_ms: i64 = 1_709_287_200_000;
    for i in 0..records as i64 {
        let ts = chrono::DateTime::from_timestamp_millis(base_ms + i).map(|t| t.naive_utc()).unwrap_or_default();
        let payload = format!(
            "{{\"id\": {i}, \"customer\": \"c{}\", \"amount\": {}.{:02}, \"ts\": \"{}\"}}",
            i % 1000,
            i % 100,
            i % 97,
            ts.format("%Y-%m-%d %H:%M:%S%.3f")
        );
        writer.send(Some(i.to_string().as_bytes()), Some(payload.as_bytes()), &[], None).map_err(|e| WeirError::execution(e.to_string()))?;
    }
    writer.flush(Duration::from_secs(120)).map_err(|e| WeirError::execution(e.to_string()))?;

    let _ = std::fs::remove_dir_all(data_dir);
    let db = Database::open_with(data_dir, OpenOptions { read_sources: false, ..OpenOptions::default() })?;
    let mut session = Session::default();
    db.execute(
        &mut session,
        &format!(
            "CREATE TABLE src (id BIGINT, customer STRING, amount DECIMAL(10, 2), ts TIMESTAMP(3),
                 WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
             WITH ('connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{brokers}',
                   'scan.startup.mode' = 'earliest-offset', 'format' = 'json', 'properties.fetch.wait.max.ms' = '5', 'properties.fetch.min.bytes' = '1')"
        ),
    )
    .await?;
    db.execute(&mut session, "CREATE TABLE sink (id BIGINT) WITH ('connector' = 'blackhole')").await?;
    let start = Instant::now();
    let cpu_before = crate::bench::cpu_seconds();
    db.execute(&mut session, "INSERT INTO sink SELECT id, customer, amount FROM src WHERE amount > 50").await?;
    {
        let mut engine = db.engine().await?;
        let mut last_commit = Instant::now();
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            engine.poll_sources(Duration::from_millis(200))?;
            let read: u64 = engine.source_rows().iter().map(|r| r.position).sum();
            let done = read >= records;
            if done || last_commit.elapsed() >= Duration::from_secs(1) {
                engine.commit(EpochWrites::default(), None)?;
                last_commit = Instant::now();
            }
            if done {
                break;
            }
            if Instant::now() > deadline {
                return Err(WeirError::execution(format!("only {read} of {records} records read in 600 s")));
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu = crate::bench::cpu_seconds().zip(cpu_before).map(|(a, b)| a - b).unwrap_or(f64::NAN);
    drop(db);
    let _ = std::fs::remove_dir_all(data_dir);
    Ok((Report::new(records, seconds), cpu))
}
