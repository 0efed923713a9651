//! Topic administration, for tests and for tools that set up a pipeline.

use std::time::{Duration, Instant};

use futures_executor::block_on;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;

use super::client::{client_error, OPERATION_TIMEOUT};
use crate::ConnectorError;

/// Creates `topic` with `partitions` partitions (replication factor 1) on `brokers`
/// (`host:port[,...]`) and waits until its metadata shows them. Returns `false` if the topic
/// already existed (it is left as it is).
///
/// # Errors
/// [`ConnectorError::Kafka`] when the brokers cannot be reached or refuse, naming the topic,
/// or when the new topic does not appear within 10 s.
pub fn create_topic(brokers: &str, topic: &str, partitions: i32) -> Result<bool, ConnectorError> {
    let error = |operation: &str, message: String| ConnectorError::Kafka {
        operation: operation.into(),
        brokers: brokers.into(),
        topic: topic.into(),
        message,
    };
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", brokers);
    let admin: AdminClient<DefaultClientContext> = config.create().map_err(|e| client_error(e, brokers, topic))?;
    let new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let options = AdminOptions::new().operation_timeout(Some(OPERATION_TIMEOUT)).request_timeout(Some(OPERATION_TIMEOUT));
    let results = block_on(admin.create_topics([&new_topic], &options))
        .map_err(|e| error("creating the topic", e.to_string()))?;
    let mut created = true;
    for result in results {
        match result {
            Ok(_) => {}
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => created = false,
            Err((_, code)) => return Err(error("creating the topic", code.to_string())),
        }
    }
    // Wait until the metadata shows the topic with its partitions.
    let consumer: BaseConsumer = config.create().map_err(|e| client_error(e, brokers, topic))?;
    let deadline = Instant::now() + OPERATION_TIMEOUT;
    loop {
        let metadata = consumer.fetch_metadata(Some(topic), OPERATION_TIMEOUT);
        let visible = metadata.as_ref().is_ok_and(|m| {
            m.topics().iter().any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
        });
        if visible {
            return Ok(created);
        }
        if Instant::now() >= deadline {
            let detail = match metadata {
                Ok(_) => "the topic is not in the metadata".to_string(),
                Err(e) => e.to_string(),
            };
            return Err(error("waiting for the new topic", detail));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
