//! The `kafka` and `upsert-kafka` connectors' Kafka side (librdkafka through `rdkafka`):
//! options ([`KafkaSourceConfig`], [`KafkaSinkConfig`]), a reader of all partitions of a topic
//! ([`KafkaReader`]), a writer ([`KafkaWriter`], transactional for exactly-once), [`create_topic`]
//! and an in-process cluster for tests and benchmarks ([`MockBrokers`]).
//!
//! Payloads are bytes here; [`crate::format`] turns them into rows and back. Calls block (up to
//! about 10 s per broker request): run them on a blocking thread.
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use std::time::Duration;
//! use weir_connectors::kafka::{KafkaReader, KafkaSourceConfig};
//! let options: BTreeMap<String, String> = [
//!     ("connector", "kafka"),
//!     ("topic", "orders"),
//!     ("properties.bootstrap.servers", "localhost:9092"),
//!     ("scan.startup.mode", "earliest-offset"),
//! ]
//! .into_iter()
//! .map(|(k, v)| (k.to_string(), v.to_string()))
//! .collect();
//! let config = KafkaSourceConfig::from_options(&options)?;
//! let mut reader = KafkaReader::open(&config, &BTreeMap::new())?; // no committed offsets yet
//! let records = reader.poll(1000, Duration::from_millis(100))?;
//! reader.commit_to_group(reader.positions())?; // a no-op without 'properties.group.id'
//! # Ok::<(), weir_connectors::ConnectorError>(())
//! ```

mod admin;
mod client;
mod config;
mod mock;
mod reader;
mod writer;

pub use admin::create_topic;
pub use client::KafkaHeader;
pub use config::{
    parse_specific_offsets, DeliveryGuarantee, KafkaSinkConfig, KafkaSourceConfig, OffsetReset, OutOfRange, SinkPartitioner,
    StartupMode, DEFAULT_DISCOVERY_INTERVAL, DISCOVERY_INTERVAL,
};
pub use mock::MockBrokers;
pub(crate) use config::{SINK_OPTIONS, STARTUP_OPTIONS};
pub use reader::{KafkaReader, KafkaRecord, PartitionLag, Reset};
pub use writer::KafkaWriter;
