//! What the reader, the writer and the admin helper share.

use std::time::Duration;

use crate::ConnectorError;

/// One Kafka message header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaHeader {
    /// The header's name.
    pub key: String,
    /// Its value; `None` for a null header value.
    pub value: Option<Vec<u8>>,
}

/// How long one broker request (metadata, watermarks, offsets, commit) may take.
pub(super) const OPERATION_TIMEOUT: Duration = Duration::from_secs(10);

/// A client that librdkafka refuses to create: a bad `properties.*` is the user's
/// (`InvalidValue`), anything else the environment's.
pub(super) fn client_error(e: rdkafka::error::KafkaError, brokers: &str, topic: &str) -> ConnectorError {
    match e {
        rdkafka::error::KafkaError::ClientConfig(_, description, key, value) => ConnectorError::InvalidValue {
            option: format!("properties.{key}"),
            value,
            valid: format!("what librdkafka accepts ({description})"),
        },
        other => ConnectorError::Kafka {
            operation: "creating a client".into(),
            brokers: brokers.into(),
            topic: topic.into(),
            message: other.to_string(),
        },
    }
}
