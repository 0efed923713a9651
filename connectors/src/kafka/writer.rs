//! The Kafka sink writer: messages to one topic, acknowledged at each flush.
//!
//! [`KafkaWriter::send`] queues a message in librdkafka (which batches and retries);
//! [`KafkaWriter::flush`] waits until every queued message is acknowledged and reports the
//! ones that failed. At-least-once (Flink's default `'sink.delivery-guarantee'`): Weir flushes
//! before it commits an epoch, so a failed flush fails the commit and the epoch is replayed.
//!
//! Exactly-once (`'sink.delivery-guarantee' = 'exactly-once'`): a writer opened with
//! [`KafkaWriter::open_transactional`] has a `transactional.id` (fencing any older instance
//! with the same id and aborting its open transaction), begins a transaction with the first
//! message after a commit (an epoch without messages opens none, FLINK-31363), pre-commits it
//! with [`KafkaWriter::flush`], and commits it with [`KafkaWriter::commit_transaction`], which
//! also commits a *marker* in the same transaction: the transaction's sequence number as the
//! offset of partition 0 of the topic for the consumer group named like the transactional id
//! (Kafka's `sendOffsetsToTransaction`, atomic with the messages). After a crash,
//! [`KafkaWriter::committed_marker`] tells the sequence number of the last transaction that
//! committed, which is how the sink knows whether to send an epoch again; see
//! `crate::runtime::operators::sink` in Weir.
//!
//! Partitioning (Flink `'sink.partitioner'`): `default` hashes the key with murmur2 as Kafka's
//! Java producer does (librdkafka `partitioner=murmur2_random`, unless
//! `'properties.partitioner'` says otherwise), so a key lands where Flink and Java clients put
//! it; a message without a key goes to a random partition. `round-robin` cycles the partitions.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::config::{DeliveryGuarantee, KafkaSinkConfig, SinkPartitioner};
use super::client::{client_error, KafkaHeader, OPERATION_TIMEOUT};
use crate::ConnectorError;

/// How long initializing, adding offsets to and committing a transaction may take.
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(30);

fn not_transactional() -> ConnectorError {
    ConnectorError::Unsupported { feature: "transactions on a writer opened without a transactional.id".into() }
}

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
    /// With a `transactional.id`: the consumer whose group holds the commit markers.
    transactions: Option<Transactions>,
}

/// A transactional writer's marker group and whether a transaction is open.
struct Transactions {
    /// The `transactional.id`, also the marker group's id.
    id: String,
    /// A consumer of the marker group (never subscribed): reads the last marker and gives the
    /// group's metadata for `send_offsets_to_transaction`.
    markers: BaseConsumer,
    /// Whether a transaction is open (begun by a `send` since the last commit or abort).
    open: bool,
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
        let mut writer =
            KafkaWriter { producer, config: config.clone(), num_partitions: 0, next_partition: 0, num_sent: 0, transactions: None };
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

    /// Opens a transactional writer to `config.topic` with `transactional.id` = `id`, for
    /// `'sink.delivery-guarantee' = 'exactly-once'`. Initializing the transactions fences any
    /// other producer with the same id and aborts its open transaction (what it sent and did
    /// not commit is never seen by `read_committed` consumers).
    ///
    /// # Errors
    /// As [`Self::open`]; also [`ConnectorError::Kafka`] when the brokers refuse transactions
    /// (no transaction coordinator, or the id is not authorized).
    pub fn open_transactional(config: &KafkaSinkConfig, id: &str) -> Result<Self, ConnectorError> {
        let mut config = config.clone();
        config.properties.insert("transactional.id".into(), id.into());
        let mut writer = Self::open(&config)?;
        let mut client = ClientConfig::new();
        client
            .set("bootstrap.servers", &config.brokers)
            .set("group.id", id)
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed");
        for key in ["security.protocol", "sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location"] {
            if let Some(value) = config.properties.get(key) {
                client.set(key, value);
            }
        }
        let markers: BaseConsumer = client.create().map_err(|e| client_error(e, &config.brokers, &config.topic))?;
        writer
            .producer
            .init_transactions(TRANSACTION_TIMEOUT)
            .map_err(|e| writer.error("initializing transactions", e.to_string()))?;
        writer.transactions = Some(Transactions { id: id.into(), markers, open: false });
        Ok(writer)
    }

    /// Whether the writer is transactional ([`Self::open_transactional`]).
    pub fn is_transactional(&self) -> bool {
        self.transactions.is_some()
    }

    /// The sequence number of the last transaction this `transactional.id` committed (its
    /// marker, see the module docs); `None` when none is on record.
    ///
    /// # Errors
    /// [`ConnectorError::Kafka`] when the group coordinator cannot be asked; `Unsupported`
    /// for a writer that is not transactional.
    pub fn committed_marker(&self) -> Result<Option<u64>, ConnectorError> {
        let t = self.transactions.as_ref().ok_or_else(not_transactional)?;
        let mut list = TopicPartitionList::new();
        list.add_partition(&self.config.topic, 0);
        let committed =
            t.markers.committed_offsets(list, OPERATION_TIMEOUT).map_err(|e| self.error("reading the commit marker", e.to_string()))?;
        Ok(committed.elements().first().and_then(|e| match e.offset() {
            Offset::Offset(n) if n >= 0 => Some(n as u64),
            _ => None,
        }))
    }

    /// Commits the open transaction with marker `sequence` (see the module docs); a no-op
    /// when no message was sent since the last commit. Flushes first.
    ///
    /// # Errors
    /// [`ConnectorError::Kafka`] when the commit fails (fenced by a newer instance, timed
    /// out, or a message failed); the transaction is then not committed, and the caller
    /// recovers as after a crash.
    pub fn commit_transaction(&mut self, sequence: u64) -> Result<(), ConnectorError> {
        let t = self.transactions.as_ref().ok_or_else(not_transactional)?;
        if !t.open {
            return Ok(());
        }
        let metadata = t.markers.group_metadata().ok_or_else(|| self.error("committing", "no consumer group metadata".into()))?;
        let mut marker = TopicPartitionList::new();
        marker
            .add_partition_offset(&self.config.topic, 0, Offset::Offset(sequence as i64))
            .map_err(|e| self.error("committing", e.to_string()))?;
        self.producer
            .send_offsets_to_transaction(&marker, &metadata, TRANSACTION_TIMEOUT)
            .map_err(|e| self.error("adding the commit marker to the transaction", e.to_string()))?;
        self.producer.commit_transaction(TRANSACTION_TIMEOUT).map_err(|e| self.error("committing the transaction", e.to_string()))?;
        if let Some(t) = &mut self.transactions {
            t.open = false;
        }
        Ok(())
    }

    /// The `transactional.id` of a transactional writer.
    pub fn transactional_id(&self) -> Option<&str> {
        self.transactions.as_ref().map(|t| t.id.as_str())
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
        if let Some(t) = &mut self.transactions {
            if !t.open {
                self.producer.begin_transaction().map_err(|e| ConnectorError::Kafka {
                    operation: "beginning a transaction".into(),
                    brokers: self.config.brokers.clone(),
                    topic: self.config.topic.clone(),
                    message: e.to_string(),
                })?;
                t.open = true;
            }
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

    /// Waits up to `timeout` until every queued message is acknowledged by the brokers (in a
    /// transactional writer: the pre-commit of the open transaction). With
    /// `'sink.delivery-guarantee' = 'none'` it only serves delivery reports and returns.
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
