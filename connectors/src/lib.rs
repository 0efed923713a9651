//! Connectors: sources, sinks and formats, by the `'connector'` option of `CREATE TABLE`.
//!
//! This crate validates a table's `WITH` options against the connector it names. Connectors
//! whose runtime is not built yet are known by name, so a table using one is refused with an
//! error that says so rather than "unknown connector".
//!
//! - [`format`]: record payloads to Arrow rows and back (`json`, `csv`, `raw`,
//!   `debezium-json`, and `upsert-kafka`'s key/value pairs), reporting records that do not
//!   decode instead of failing.
//! - [`kafka`] (feature `kafka`, on by default): the Kafka reader, writer and options.
//! - [`nexmark`]: the Nexmark generator.

use std::collections::BTreeMap;

pub mod format;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod nexmark;

/// Errors of connector configuration.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConnectorError {
    /// An unknown connector name; lists the known ones.
    #[error("unknown connector '{name}'; valid connectors: {valid}")]
    UnknownConnector { name: String, valid: String },
    /// A required option is missing.
    #[error("connector '{connector}' needs the option '{option}'")]
    MissingOption { connector: String, option: String },
    /// An option has a value outside its valid set.
    #[error("option '{option}' = '{value}' is not valid; valid values: {valid}")]
    InvalidValue { option: String, value: String, valid: String },
    /// An option the connector does not know; lists the ones it does.
    #[error("connector '{connector}' has no option '{option}'; valid options: {valid}")]
    UnknownOption { connector: String, option: String, valid: String },
    /// A feature or option value Weir knows but does not support (yet); says what to use instead.
    #[error("not supported: {feature}")]
    Unsupported { feature: String },
    /// A row that the sink's format cannot write (the user's data or schema).
    #[error("cannot encode a row: {message}")]
    Encode { message: String },
    /// The Kafka cluster refused or failed an operation (the environment's fault): names the
    /// operation, the brokers and the topic.
    #[error("kafka: {operation} (brokers {brokers}, topic '{topic}'): {message}")]
    Kafka { operation: String, brokers: String, topic: String, message: String },
    /// A source's next offset is no longer in its partition (retention deleted unread records,
    /// or the topic was recreated) and `'scan.out-of-range'` is `fail`: the job fails alone.
    #[error("kafka topic '{topic}': {message}")]
    OutOfRange { topic: String, message: String },
    /// The schema registry could not be reached or refused a call (the environment's fault, or
    /// an incompatible schema): names the registry.
    #[error("schema registry {url}: {message}")]
    Registry { url: String, message: String },
    /// A bug in Weir (a broken invariant), not the user's or the environment's fault.
    #[error("internal error: {message}")]
    Internal { message: String },
}

impl ConnectorError {
    /// The SQLSTATE of this error: 22023 for an option or value the user gave, 0A000 for an
    /// unsupported feature, 22000 for a row the format cannot write, 08000 for the Kafka
    /// cluster, XX000 for a bug of ours.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            ConnectorError::UnknownConnector { .. }
            | ConnectorError::MissingOption { .. }
            | ConnectorError::InvalidValue { .. }
            | ConnectorError::UnknownOption { .. } => "22023",
            ConnectorError::Unsupported { .. } => "0A000",
            ConnectorError::Encode { .. } => "22000",
            ConnectorError::Kafka { .. } | ConnectorError::Registry { .. } => "08000",
            ConnectorError::OutOfRange { .. } => "55000",
            ConnectorError::Internal { .. } => "XX000",
        }
    }
}

/// How a connector can be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectorKind {
    /// `'connector' = 'table'` or no `WITH`: a plain table taking INSERT, UPDATE, DELETE.
    PlainTable,
    /// An external source or sink (Kafka, files, generators).
    External {
        /// Whether a sink of this connector takes only inserts (Flink: append-only sink).
        append_only_sink: bool,
    },
}

/// Known connectors and whether each writes append-only.
const CONNECTORS: &[(&str, ConnectorKind)] = &[
    ("table", ConnectorKind::PlainTable),
    ("kafka", ConnectorKind::External { append_only_sink: true }),
    ("upsert-kafka", ConnectorKind::External { append_only_sink: false }),
    ("filesystem", ConnectorKind::External { append_only_sink: true }),
    ("nexmark", ConnectorKind::External { append_only_sink: true }),
    ("datagen", ConnectorKind::External { append_only_sink: true }),
    ("blackhole", ConnectorKind::External { append_only_sink: false }),
    ("print", ConnectorKind::External { append_only_sink: false }),
];

const FORMATS: &[&str] = &["json", "csv", "avro-confluent", "debezium-json", "maxwell-json", "canal-json", "raw"];

/// The connector a table's options name (`'connector'`, default `table`), validated.
///
/// # Errors
/// [`ConnectorError::UnknownConnector`] for a name not in the list; `MissingOption` and
/// `InvalidValue` for options a known connector requires (`topic` for Kafka, `format`'s values,
/// the `nexmark.*` options, the Kafka source and sink options); `UnknownOption` for a
/// `nexmark.*`, `scan.startup.*` or `sink.*` option that does not exist; `Unsupported` for a
/// Kafka option value not built yet (`'sink.delivery-guarantee' = 'exactly-once'`).
pub fn validate(options: &BTreeMap<String, String>) -> Result<(String, ConnectorKind), ConnectorError> {
    let name = options.get("connector").map(|s| s.to_lowercase()).unwrap_or_else(|| "table".into());
    let Some((_, kind)) = CONNECTORS.iter().find(|(n, _)| *n == name) else {
        return Err(ConnectorError::UnknownConnector {
            name,
            valid: CONNECTORS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
        });
    };
    if name == "kafka" || name == "upsert-kafka" {
        require(&name, options, "topic")?;
        // Every option, checked when the table is declared, as Flink checks them when it
        // plans a table: a table is read, written, or both.
        // A consumer group is needed only once a job reads the table (`group-offsets`, the
        // default start): the rest of the source options are checked with a stand-in.
        let mut as_source = options.clone();
        as_source.entry("properties.group.id".into()).or_insert_with(|| "weir-validate".into());
        kafka::KafkaSourceConfig::from_options(&as_source)?;
        kafka::KafkaSinkConfig::from_options(options)?;
    }
    if name == "filesystem" {
        require(&name, options, "path")?;
    }
    if name == "nexmark" {
        nexmark::NexmarkConfig::from_options(options)?;
    }
    for key in ["format", "value.format", "key.format"] {
        if let Some(format) = options.get(key) {
            if !FORMATS.contains(&format.as_str()) {
                return Err(ConnectorError::InvalidValue {
                    option: key.into(),
                    value: format.clone(),
                    valid: FORMATS.join(", "),
                });
            }
        }
    }
    Ok((name, *kind))
}

/// A boolean option's value: `true` or `false`, in any case.
///
/// # Errors
/// [`ConnectorError::InvalidValue`] naming `key` for anything else.
pub(crate) fn parse_bool(key: &str, value: &str) -> Result<bool, ConnectorError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConnectorError::InvalidValue { option: key.into(), value: value.into(), valid: "true, false".into() }),
    }
}

fn require(connector: &str, options: &BTreeMap<String, String>, option: &str) -> Result<(), ConnectorError> {
    if options.contains_key(option) {
        Ok(())
    } else {
        Err(ConnectorError::MissingOption { connector: connector.into(), option: option.into() })
    }
}

/// Whether a sink with these options takes only inserts: `kafka` with an append-only format.
/// `debezium-json` carries changelogs, so a `kafka` sink with it is not append-only.
pub fn is_append_only_sink(options: &BTreeMap<String, String>) -> bool {
    let name = options.get("connector").map(|s| s.to_lowercase()).unwrap_or_else(|| "table".into());
    match CONNECTORS.iter().find(|(n, _)| *n == name) {
        Some((_, ConnectorKind::External { append_only_sink })) => {
            *append_only_sink && options.get("format").map(String::as_str) != Some("debezium-json")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn validates_connectors() {
        assert_eq!(validate(&opts(&[])).map(|(n, _)| n), Ok("table".into()));
        assert!(matches!(validate(&opts(&[("connector", "nope")])), Err(ConnectorError::UnknownConnector { .. })));
        assert!(matches!(
            validate(&opts(&[("connector", "kafka")])),
            Err(ConnectorError::MissingOption { .. })
        ));
        let kafka = opts(&[("connector", "kafka"), ("topic", "t"), ("format", "json")]);
        assert!(is_append_only_sink(&kafka));
        // Kafka's source and sink options are checked too.
        let mut bad = kafka.clone();
        bad.insert("properties.bootstrap.servers".into(), "127.0.0.1:9092".into());
        assert!(validate(&bad).is_ok(), "{:?}", validate(&bad));
        bad.insert("sink.delivery-guarantee".into(), "bogus".into());
        assert!(matches!(validate(&bad), Err(ConnectorError::InvalidValue { .. })));
        let upsert = opts(&[("connector", "upsert-kafka"), ("topic", "t")]);
        assert!(!is_append_only_sink(&upsert));
    }
}
