//! The Kafka sink writer: messages to one topic, acknowledged at each flush.
//!
//! [`KafkaWriter::send`] queues a message in librdkafka (which batches and retries);
//! [`KafkaWriter::flush`] waits until every queued message is acknowledged and reports the
//! ones that failed. At-least-once (Flink's default `'sink.delivery-guarantee'`): Weir flushes
//! before it commits an epoch, so a failed flush fails the commit and the epoch is replayed.
//!
//! Partitioning (Flink `'sink.partitioner'`): `default` hashes the key with murmur2 as Kafka's
//! Java producer does (librdkafka `partitioner=murmur2_random`, unless
//! `'properties.partitioner'` says otherwise), so a key lands where Flink and Java clients put
//! it; a message without a key goes to a random partition. `round-robin` cycles the partitions.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;

use super::config::{DeliveryGuarantee, KafkaSinkConfig, SinkPartitioner};
use super::client::{client_error, KafkaHeader, OPERATION_TIMEOUT};
use crate::ConnectorError;

/// How long [`KafkaWriter::send`] waits for room when librdkafka's queue is full
/// (`queue.buffering.max.messages` / `.kbytes`) before failing.
const QUEUE_FULL_WAIT: Duration = Duration::from_secs(30);

/// Delivery failures since the last flush: their count and the first one's reason.
#[derive(Default)]
struct Failures {
    count: u64,
    first: Option<String>,
}

/// Counts failed deliveries (librdkafka calls it from `poll` and `flush`).
#[derive(Default, Clone)]
struct DeliveryCounter {
    failures: Arc<Mutex<Failures>>,
}

impl ClientContext for DeliveryCounter {}

impl ProducerContext for DeliveryCounter {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((error, _)) = result {
            let mut failures = self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            failures.count += 1;
            failures.first.get_or_insert_with(|| error.to_string());
        }
    }
}

/// Writes messages to one topic. `Send + Sync`.
pub struct KafkaWriter {
    producer: BaseProducer<DeliveryCounter>,
    config: KafkaSinkConfig,
    /// The topic's partitions when the writer opened (for round-robin).
    num_partitions: i32,
    /// The next round-robin partition.
    next_partition: i32,
    /// Messages given to `send` since the writer opened.
    pub num_sent: u64,
}

impl KafkaWriter {
    /// Opens a writer to `config.topic`, which must exist.
    ///
    /// # Errors
    /// [`ConnectorError::InvalidValue`] for a `properties.*` librdkafka refuses;
    /// [`ConnectorError::Kafka`] when the brokers cannot be reached or the topic does not exist.
    pub fn open(config: &KafkaSinkConfig) -> Result<Self, ConnectorError> {
        let mut client = ClientConfig::new();
        client.set("partitioner", "murmur2_random");
        for (key, value) in &config.properties {
            client.set(key, value);
        }
        client.set("bootstrap.servers", &config.brokers);
        let producer: BaseProducer<DeliveryCounter> = client
            .create_with_context(DeliveryCounter::default())
            .map_err(|e| client_error(e, &config.brokers, &config.topic))?;
        let mut writer = KafkaWriter { producer, config: config.clone(), num_partitions: 0, next_partition: 0, num_sent: 0 };
        let metadata = writer
            .producer
            .client()
            .fetch_metadata(Some(&config.topic), OPERATION_TIMEOUT)
            .map_err(|e| writer.error("reading the topic's metadata", e.to_string()))?;
        writer.num_partitions = metadata
            .topics()
            .iter()
            .find(|t| t.name() == config.topic && t.error().is_none())
            .map_or(0, |t| t.partitions().len() as i32);
        if writer.num_partitions == 0 {
            return Err(writer.error("reading the topic's metadata", "the topic does not exist (create it first)".into()));
        }
        Ok(writer)
    }

    /// Queues one message: `key` (`None`: no key), `payload` (`None`: a tombstone), `headers`,
    /// and `timestamp_ms` (epoch ms, Flink's writable `timestamp` metadata; `None`: the time of
    /// sending). Returns once librdkafka holds it; delivery is confirmed by [`Self::flush`].
    ///
    /// # Errors
    /// [`ConnectorError::Kafka`] when the message is refused (too large, or the queue stayed
    /// full for 30 s).
    pub fn send(
        &mut self,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
        headers: &[KafkaHeader],
        timestamp_ms: Option<i64>,
    ) -> Result<(), ConnectorError> {
        let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(&self.config.topic);
        record.key = key;
        record.payload = payload;
        record.timestamp = timestamp_ms;
        if !headers.is_empty() {
            let mut owned = OwnedHeaders::new_with_capacity(headers.len());
            for h in headers {
                owned = owned.insert(Header { key: &h.key, value: h.value.as_deref() });
            }
            record = record.headers(owned);
        }
        if self.config.partitioner == SinkPartitioner::RoundRobin {
            record = record.partition(self.next_partition);
            self.next_partition = (self.next_partition + 1) % self.num_partitions;
        }
        let deadline = Instant::now() + QUEUE_FULL_WAIT;
        loop {
            match self.producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), returned)) if Instant::now() < deadline => {
                    record = returned;
                    self.producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => {
                    return Err(ConnectorError::Kafka {
                        operation: "sending a message".into(),
                        brokers: self.config.brokers.clone(),
                        topic: self.config.topic.clone(),
                        message: e.to_string(),
                    })
                }
            }
        }
        self.num_sent += 1;
        self.producer.poll(Duration::ZERO);
        Ok(())
    }

    /// Waits up to `timeout` until every queued message is acknowledged by the brokers.
    /// With `'sink.delivery-guarantee' = 'none'` it only serves delivery reports and returns.
    ///
    /// # Errors
    /// [`ConnectorError::Kafka`] when messages are still unacknowledged at `timeout`, or when
    /// some failed since the last flush (their count and the first reason); the caller must
    /// not commit the epoch.
    pub fn flush(&mut self, timeout: Duration) -> Result<(), ConnectorError> {
        if self.config.delivery == DeliveryGuarantee::None {
            self.producer.poll(Duration::ZERO);
            return Ok(());
        }
        let flushed = self.producer.flush(timeout);
        let failures = {
            let mut failures = self.producer.context().failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            std::mem::take(&mut *failures)
        };
        if let Err(e) = flushed {
            let message = format!("{} messages unacknowledged after {timeout:?}: {e}", self.producer.in_flight_count());
            return Err(self.error("flushing", message));
        }
        if failures.count > 0 {
            let message = format!("{} messages failed, the first with: {}", failures.count, failures.first.unwrap_or_default());
            return Err(self.error("flushing", message));
        }
        Ok(())
    }

    /// The topic's partition count when the writer opened.
    pub fn num_partitions(&self) -> i32 {
        self.num_partitions
    }

    fn error(&self, operation: &str, message: String) -> ConnectorError {
        ConnectorError::Kafka {
            operation: operation.into(),
            brokers: self.config.brokers.clone(),
            topic: self.config.topic.clone(),
            message,
        }
    }
}
