//! `weir bench kafka`: the Kafka source ([`run`]) and the Kafka sink by delivery guarantee
//! ([`run_sink`]), measured.
//!
//! [`run`] produces `records` JSON records (`{"id", "customer", "amount", "ts"}`) into a new topic of
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

/// What one run of [`run_sink`] measured.
#[derive(Debug, Clone)]
pub struct SinkReport {
    /// `'sink.delivery-guarantee'`.
    pub guarantee: String,
    /// Messages written (one per bid).
    pub messages: u64,
    /// Wall time from the job's start (the INSERT INTO statement's return) until its source
    /// finished and committed, seconds.
    pub seconds: f64,
    /// CPU seconds of the process in that time (librdkafka's threads, and the mock cluster's
    /// when it runs in this process, included).
    pub cpu_seconds: f64,
}

impl SinkReport {
    /// Messages per second of wall time.
    pub fn per_second(&self) -> f64 {
        self.messages as f64 / self.seconds
    }
}

impl std::fmt::Display for SinkReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "| {} | {} | {:.2} | {:.0} | {:.2} |",
            self.guarantee,
            self.messages,
            self.seconds,
            self.per_second(),
            self.cpu_seconds
        )
    }
}

/// The Kafka sink's throughput with `guarantee` (`at-least-once`, `exactly-once`, `none`):
/// a fresh database under `data_dir` opened as `weir serve` opens it (its own commit interval,
/// the job on a thread of its own) runs `INSERT INTO` a `kafka` JSON sink on a new topic of
/// `partitions` partitions on `brokers` `SELECT auction, bidder, price, date_time FROM bid` over
/// a bounded generator of `events` Nexmark events, until the source has read everything and
/// committed it. `mock`: the in-process cluster `brokers` belong to, if so (it creates topics
/// itself; it has no admin API).
///
/// # Errors
/// Broker failures (`Execution`), statement errors, a run longer than 30 minutes.
pub async fn run_sink(
    data_dir: &std::path::Path,
    brokers: &str,
    mock: Option<&weir_connectors::kafka::MockBrokers>,
    events: u64,
    partitions: i32,
    guarantee: &str,
) -> Result<SinkReport> {
    let topic = format!("weir-bench-sink-{}-{guarantee}", std::process::id());
    match mock {
        Some(mock) => mock.create_topic(&topic, partitions),
        None => create_topic(brokers, &topic, partitions).map(drop),
    }
    .map_err(|e| WeirError::execution(e.to_string()))?;
    let _ = std::fs::remove_dir_all(data_dir);
    let db = crate::sql::Database::open(data_dir)?;
    let mut session = Session::default();
    crate::bench::nexmark::create_generator_tables(&db, &mut session, events).await?;
    db.execute(
        &mut session,
        &format!(
            "CREATE TABLE bids_out (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP(3))
             WITH ('connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{brokers}',
                   'format' = 'json', 'sink.delivery-guarantee' = '{guarantee}', 'sink.transactional-id-prefix' = 'weir-bench-{}')",
            std::process::id()
        ),
    )
    .await?;
    // Timed from the job's start: opening the producer (and initializing its transactions) is
    // a one-off cost, not throughput.
    db.execute(&mut session, "INSERT INTO bids_out SELECT auction, bidder, price, date_time FROM bid").await?;
    let cpu_before = crate::bench::cpu_seconds();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(1800);
    loop {
        let result = db.execute(&mut session, "SELECT CAST(COUNT(*) AS BIGINT) FROM weir_sources WHERE NOT finished").await?;
        if crate::bench::single_i64(&result) == Some(0) {
            break;
        }
        if Instant::now() > deadline {
            return Err(WeirError::execution("the source did not finish within 30 minutes"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = crate::bench::cpu_seconds().zip(cpu_before).map(|(a, b)| a - b).unwrap_or(f64::NAN);
    let result = db.execute(&mut session, "SELECT CAST(SUM(rows_read) AS BIGINT) FROM weir_sources").await?;
    let messages = crate::bench::single_i64(&result).unwrap_or(0).max(0) as u64;
    drop(db);
    let _ = std::fs::remove_dir_all(data_dir);
    Ok(SinkReport { guarantee: guarantee.into(), messages, seconds, cpu_seconds })
}
