//! An in-process Kafka cluster: librdkafka's mock cluster (`rdkafka::mocking::MockCluster`),
//! whose brokers listen on 127.0.0.1 ports any Kafka client (another process too) can use as
//! bootstrap servers. It implements the producer's transaction protocol (transactional ids,
//! producer fencing, `EndTxn`), which Weir's exactly-once sink needs; it does not keep
//! aborted transactions from `read_committed` consumers, nor store offsets committed in a
//! transaction (librdkafka 2.12). For `weir bench kafka` and tests; data lives in memory and
//! goes with the value.

use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

use crate::ConnectorError;

/// A running mock cluster; stopped on drop.
pub struct MockBrokers {
    cluster: MockCluster<'static, DefaultProducerContext>,
}

impl MockBrokers {
    /// Starts a cluster of `brokers` brokers.
    ///
    /// # Errors
    /// [`ConnectorError::Kafka`] when librdkafka cannot start it.
    pub fn start(brokers: i32) -> Result<Self, ConnectorError> {
        let cluster = MockCluster::new(brokers).map_err(|e| mock_error("starting a mock cluster", "", e))?;
        Ok(MockBrokers { cluster })
    }

    /// `host:port,...` for `'properties.bootstrap.servers'`.
    pub fn bootstrap_servers(&self) -> String {
        self.cluster.bootstrap_servers()
    }

    /// Creates `topic` with `partitions` partitions (replication factor 1).
    ///
    /// # Errors
    /// [`ConnectorError::Kafka`] when the cluster refuses.
    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), ConnectorError> {
        self.cluster.create_topic(topic, partitions, 1).map_err(|e| mock_error("creating a topic", topic, e))
    }
}

fn mock_error(operation: &str, topic: &str, e: rdkafka::error::KafkaError) -> ConnectorError {
    ConnectorError::Kafka { operation: operation.into(), brokers: "mock cluster".into(), topic: topic.into(), message: e.to_string() }
}
