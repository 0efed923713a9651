//! The options of `kafka` and `upsert-kafka` tables (Flink's names) as source and sink configs.
//!
//! | option | source | sink | meaning |
//! | --- | --- | --- | --- |
//! | `topic` | required | required | one topic (no `;` lists, no `topic-pattern`) |
//! | `properties.bootstrap.servers` | required | required | `host:port[,host:port...]` |
//! | `properties.group.id` | optional | — | the consumer group: `group-offsets` start there; offsets are committed there for lag tools |
//! | `properties.auto.offset.reset` | `earliest` \| `latest` \| `none` | — | where `group-offsets` starts in a partition the group never committed (default `none`: an error, as Flink); also the default of `scan.out-of-range` |
//! | `scan.out-of-range` | `fail` (default) \| `earliest` \| `latest` | — | what a source does when its next offset is no longer in the partition (retention deleted unread records): see [`OutOfRange`] |
//! | `properties.*` | passed on | passed on | any other librdkafka property, prefix removed |
//! | `scan.startup.mode` | `group-offsets` (default) \| `earliest-offset` \| `latest-offset` \| `timestamp` \| `specific-offsets` | — | see [`StartupMode`] |
//! | `scan.startup.timestamp-millis` | with `timestamp` | — | epoch ms |
//! | `scan.startup.specific-offsets` | with `specific-offsets` | — | `partition:0,offset:42;partition:1,offset:300` |
//! | `sink.partitioner` | — | `default` \| `round-robin` | see [`SinkPartitioner`] |
//! | `sink.delivery-guarantee` | — | `at-least-once` (default) \| `exactly-once` \| `none` | see [`DeliveryGuarantee`] |
//! | `sink.transactional-id-prefix` | — | required with `exactly-once` | the prefix of the sink's Kafka `transactional.id` |
//! | `properties.isolation.level` | `read_committed` (default) \| `read_uncommitted` | — | a source sees only committed transactions' messages |
//!
//! The format options (`format`, `key.format`, `value.format`, ...) are read by
//! [`crate::format`]. Options of other groups (`scan.watermark.idle-timeout`, ...) are left to
//! the engine; an unknown `scan.startup.*` or `sink.*` option is refused, naming the valid ones.

use std::collections::BTreeMap;

use crate::ConnectorError;

/// Where a source starts reading a partition that Weir has no committed offset for (Flink
/// `'scan.startup.mode'`). Offsets are resolved once, when the reader opens; from then on Weir's
/// own committed offsets rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartupMode {
    /// `earliest-offset`: the partition's first retained message.
    EarliestOffset,
    /// `latest-offset`: the partition's end when the reader opens (only newer messages).
    LatestOffset,
    /// `group-offsets`: the consumer group's committed offset; in a partition without one,
    /// `'properties.auto.offset.reset'` decides ([`OffsetReset`]).
    GroupOffsets,
    /// `timestamp`: the first message whose timestamp is at or after `millis` (epoch ms), or the
    /// partition's end if none is.
    Timestamp {
        /// `'scan.startup.timestamp-millis'`.
        millis: i64,
    },
    /// `specific-offsets`: the given offset per partition; a partition not listed starts at
    /// the group's committed offset, else at the earliest (Flink's `OffsetsInitializer.offsets`).
    SpecificOffsets {
        /// Partition → offset of the first message to read.
        offsets: BTreeMap<i32, i64>,
    },
}

/// What `group-offsets` does in a partition the group has not committed (Flink and Kafka
/// `'properties.auto.offset.reset'`). Also what librdkafka does when a position falls out of
/// the retained range (`none`: an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OffsetReset {
    /// `earliest`: the first retained message.
    Earliest,
    /// `latest`: the end of the partition.
    Latest,
    /// `none`: refuse to start (Flink's default for `group-offsets`).
    #[default]
    None,
}

/// What a source does when the next offset it is to read is no longer in its partition: the
/// records between were deleted by retention while the job was stopped or behind, or the topic
/// was recreated (`'scan.out-of-range'`; default `fail`, or what `'properties.auto.offset.reset'`
/// says when it is `earliest` or `latest`, as Kafka's consumer reads that property).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutOfRange {
    /// `fail`: the job fails alone (FAILED in SHOW JOBS) with the partition, its position and
    /// the retained range; nothing is skipped silently.
    #[default]
    Fail,
    /// `earliest`: go on from the earliest retained offset; the records skipped are counted
    /// (`weir_sources.skipped`) and logged.
    Earliest,
    /// `latest`: go on from the end of the partition, counted likewise.
    Latest,
}

/// How a sink picks the partition of a message (Flink `'sink.partitioner'`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SinkPartitioner {
    /// `default`: by the key's murmur2 hash, as Kafka's Java producer (so Flink and Weir put a
    /// key in the same partition); messages without a key go to a random partition.
    #[default]
    Default,
    /// `round-robin`: partitions in turn, whatever the key.
    RoundRobin,
}

/// What a sink guarantees about the messages of a committed epoch (Flink
/// `'sink.delivery-guarantee'`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeliveryGuarantee {
    /// `at-least-once`: a flush returns once every message is acknowledged, or fails; a crash
    /// after the flush and before the epoch's commit writes the epoch's messages again.
    #[default]
    AtLeastOnce,
    /// `exactly-once`: each epoch's messages go in one Kafka transaction, committed after the
    /// epoch; a `read_committed` consumer sees each of them once (two-phase, see
    /// [`crate::kafka::KafkaWriter`]). Needs `'sink.transactional-id-prefix'`.
    ExactlyOnce,
    /// `none`: a flush does not wait, and failed deliveries are only counted.
    None,
}

/// A validated Kafka source configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaSourceConfig {
    /// `'topic'`.
    pub topic: String,
    /// `'properties.bootstrap.servers'`.
    pub brokers: String,
    /// `'properties.group.id'`.
    pub group_id: Option<String>,
    /// `'scan.startup.mode'` and its parameters.
    pub startup: StartupMode,
    /// `'properties.auto.offset.reset'`.
    pub offset_reset: OffsetReset,
    /// `'scan.out-of-range'`.
    pub out_of_range: OutOfRange,
    /// `'scan.topic-partition-discovery.interval'`: how often the reader looks for partitions
    /// added to the topic ([`DEFAULT_DISCOVERY_INTERVAL`] unless set; `None` for `0`: never).
    pub discovery_interval: Option<std::time::Duration>,
    /// The librdkafka properties from `'properties.*'`, prefix removed, less
    /// `auto.offset.reset` (which Weir resolves itself).
    pub properties: BTreeMap<String, String>,
}

/// A validated Kafka sink configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaSinkConfig {
    /// `'topic'`.
    pub topic: String,
    /// `'properties.bootstrap.servers'`.
    pub brokers: String,
    /// `'sink.partitioner'`.
    pub partitioner: SinkPartitioner,
    /// `'sink.delivery-guarantee'`.
    pub delivery: DeliveryGuarantee,
    /// `'sink.transactional-id-prefix'` (set whenever `delivery` is `ExactlyOnce`).
    pub transactional_id_prefix: Option<String>,
    /// The librdkafka properties from `'properties.*'`, prefix removed.
    pub properties: BTreeMap<String, String>,
}

/// The option setting how often a source looks for partitions added to its topic (Flink's).
pub const DISCOVERY_INTERVAL: &str = "scan.topic-partition-discovery.interval";

/// Flink's default of [`DISCOVERY_INTERVAL`] (Kafka connector 3.1 on): 5 minutes.
pub const DEFAULT_DISCOVERY_INTERVAL: std::time::Duration = std::time::Duration::from_secs(300);

const STARTUP_MODES: &str = "earliest-offset, latest-offset, group-offsets, timestamp, specific-offsets";
/// The `scan.startup.*` options.
pub(crate) const STARTUP_OPTIONS: &[&str] =
    &["scan.startup.mode", "scan.startup.timestamp-millis", "scan.startup.specific-offsets"];
/// The `sink.*` options.
pub(crate) const SINK_OPTIONS: &[&str] = &[
    "sink.partitioner",
    "sink.delivery-guarantee",
    "sink.transactional-id-prefix",
    "sink.parallelism",
    "sink.buffer-flush.max-rows",
    "sink.buffer-flush.interval",
];

impl KafkaSourceConfig {
    /// Reads a source configuration from a table's `WITH` options.
    ///
    /// # Errors
    /// - [`ConnectorError::MissingOption`] without `topic` or `properties.bootstrap.servers`, or
    ///   without the parameter the startup mode needs;
    /// - [`ConnectorError::InvalidValue`] for a bad startup mode, timestamp, offsets list or reset
    ///   policy (naming the valid values);
    /// - [`ConnectorError::UnknownOption`] for an unknown `scan.startup.*` option;
    /// - [`ConnectorError::Unsupported`] for several topics.
    pub fn from_options(options: &BTreeMap<String, String>) -> Result<Self, ConnectorError> {
        let (topic, brokers, mut properties) = common(options)?;
        check_known(options, "scan.startup.", STARTUP_OPTIONS)?;
        let get = |key: &str| options.get(key).map(String::as_str);
        let need = |key: &str| {
            get(key).ok_or_else(|| ConnectorError::MissingOption { connector: connector(options), option: key.into() })
        };
        let startup = match get("scan.startup.mode").unwrap_or("group-offsets") {
            "earliest-offset" => StartupMode::EarliestOffset,
            "latest-offset" => StartupMode::LatestOffset,
            "group-offsets" => StartupMode::GroupOffsets,
            "timestamp" => {
                let key = "scan.startup.timestamp-millis";
                let value = need(key)?;
                let millis = value.trim().parse::<i64>().ok().filter(|m| *m >= 0).ok_or_else(|| {
                    invalid(key, value, "milliseconds since 1970-01-01 00:00:00 UTC, a non-negative integer")
                })?;
                StartupMode::Timestamp { millis }
            }
            "specific-offsets" => {
                let key = "scan.startup.specific-offsets";
                StartupMode::SpecificOffsets { offsets: parse_specific_offsets(key, need(key)?)? }
            }
            other => return Err(invalid("scan.startup.mode", other, STARTUP_MODES)),
        };
        let offset_reset = match properties.remove("auto.offset.reset").as_deref() {
            None | Some("none") => OffsetReset::None,
            Some("earliest") => OffsetReset::Earliest,
            Some("latest") => OffsetReset::Latest,
            Some(other) => return Err(invalid("properties.auto.offset.reset", other, "earliest, latest, none")),
        };
        let out_of_range = match get("scan.out-of-range") {
            None => match offset_reset {
                OffsetReset::Earliest => OutOfRange::Earliest,
                OffsetReset::Latest => OutOfRange::Latest,
                OffsetReset::None => OutOfRange::Fail,
            },
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "fail" => OutOfRange::Fail,
                "earliest" => OutOfRange::Earliest,
                "latest" => OutOfRange::Latest,
                _ => return Err(invalid("scan.out-of-range", v, "fail, earliest, latest")),
            },
        };
        let discovery_interval = match get(DISCOVERY_INTERVAL) {
            None => Some(DEFAULT_DISCOVERY_INTERVAL),
            Some(v) => match crate::duration_ms(v) {
                Some(0) => None,
                Some(ms) if ms > 0 => Some(std::time::Duration::from_millis(ms as u64)),
                _ => return Err(invalid(DISCOVERY_INTERVAL, v, "a duration such as '5 min' or '30 s', or 0 to never look")),
            },
        };
        let group_id = properties.get("group.id").cloned();
        if startup == StartupMode::GroupOffsets && group_id.is_none() {
            return Err(ConnectorError::MissingOption {
                connector: format!("{}' with 'scan.startup.mode' = 'group-offsets", connector(options)),
                option: "properties.group.id".into(),
            });
        }
        Ok(KafkaSourceConfig { topic, brokers, group_id, startup, offset_reset, out_of_range, discovery_interval, properties })
    }
}

impl KafkaSinkConfig {
    /// Reads a sink configuration from a table's `WITH` options.
    ///
    /// # Errors
    /// - [`ConnectorError::MissingOption`] without `topic` or `properties.bootstrap.servers`;
    /// - [`ConnectorError::InvalidValue`] for a bad `sink.partitioner`, `sink.delivery-guarantee`,
    ///   `sink.parallelism`, `sink.buffer-flush.max-rows` or `sink.buffer-flush.interval`;
    ///   [`ConnectorError::UnknownOption`] for an unknown `sink.*`;
    /// - [`ConnectorError::MissingOption`] for `exactly-once` without
    ///   `sink.transactional-id-prefix` (as Flink refuses it);
    /// - [`ConnectorError::Unsupported`] for the `fixed` partitioner, several topics, or a
    ///   `properties.transactional.id` (Weir derives it from the prefix).
    pub fn from_options(options: &BTreeMap<String, String>) -> Result<Self, ConnectorError> {
        let (topic, brokers, properties) = common(options)?;
        check_known(options, "sink.", SINK_OPTIONS)?;
        let partitioner = match options.get("sink.partitioner").map(String::as_str) {
            None | Some("default") => SinkPartitioner::Default,
            Some("round-robin") => SinkPartitioner::RoundRobin,
            Some("fixed") => {
                return Err(ConnectorError::Unsupported {
                    feature: "'sink.partitioner' = 'fixed' (use default or round-robin)".into(),
                })
            }
            Some(other) => return Err(invalid("sink.partitioner", other, "default, round-robin")),
        };
        let delivery = match options.get("sink.delivery-guarantee").map(String::as_str) {
            None | Some("at-least-once") => DeliveryGuarantee::AtLeastOnce,
            Some("none") => DeliveryGuarantee::None,
            Some("exactly-once") => DeliveryGuarantee::ExactlyOnce,
            Some(other) => return Err(invalid("sink.delivery-guarantee", other, "at-least-once, exactly-once, none")),
        };
        // Flink's options, accepted for portability and checked, though Weir's sink does not
        // need them: one sink instance per job, librdkafka batching the writes.
        if let Some(v) = options.get("sink.parallelism") {
            v.trim().parse::<u32>().ok().filter(|p| *p > 0).ok_or_else(|| invalid("sink.parallelism", v, "a whole number from 1"))?;
        }
        if let Some(v) = options.get("sink.buffer-flush.max-rows") {
            v.trim().parse::<u64>().map_err(|_| invalid("sink.buffer-flush.max-rows", v, "a whole number from 0"))?;
        }
        if let Some(v) = options.get("sink.buffer-flush.interval") {
            crate::duration_ms(v).ok_or_else(|| invalid("sink.buffer-flush.interval", v, "a duration such as '1 s' or '500 ms'"))?;
        }
        if properties.contains_key("transactional.id") {
            return Err(ConnectorError::Unsupported {
                feature: "'properties.transactional.id' (Weir makes one per job from 'sink.transactional-id-prefix')".into(),
            });
        }
        let transactional_id_prefix = options.get("sink.transactional-id-prefix").map(|p| p.trim().to_string());
        if let Some(prefix) = &transactional_id_prefix {
            if prefix.is_empty() {
                return Err(invalid("sink.transactional-id-prefix", prefix, "a non-empty prefix"));
            }
        }
        if delivery == DeliveryGuarantee::ExactlyOnce && transactional_id_prefix.is_none() {
            return Err(ConnectorError::MissingOption {
                connector: connector(options),
                option: "sink.transactional-id-prefix' with 'sink.delivery-guarantee' = 'exactly-once".into(),
            });
        }
        Ok(KafkaSinkConfig { topic, brokers, partitioner, delivery, transactional_id_prefix, properties })
    }
}

/// Parses Flink's `'scan.startup.specific-offsets'`: `partition:0,offset:42;partition:1,offset:300`.
///
/// # Errors
/// [`ConnectorError::InvalidValue`] naming `key` and the expected form.
pub fn parse_specific_offsets(key: &str, value: &str) -> Result<BTreeMap<i32, i64>, ConnectorError> {
    let bad = || invalid(key, value, "'partition:<int>,offset:<int>' pairs separated by ';'");
    let mut offsets = BTreeMap::new();
    for pair in value.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let mut partition = None;
        let mut offset = None;
        for part in pair.split(',') {
            let (name, number) = part.split_once(':').ok_or_else(bad)?;
            match name.trim() {
                "partition" => partition = Some(number.trim().parse::<i32>().map_err(|_| bad())?),
                "offset" => offset = Some(number.trim().parse::<i64>().map_err(|_| bad())?),
                _ => return Err(bad()),
            }
        }
        match (partition, offset) {
            (Some(p), Some(o)) if p >= 0 && o >= 0 => {
                offsets.insert(p, o);
            }
            _ => return Err(bad()),
        }
    }
    if offsets.is_empty() {
        return Err(bad());
    }
    Ok(offsets)
}

/// `topic`, `properties.bootstrap.servers` and the `properties.*` map.
fn common(options: &BTreeMap<String, String>) -> Result<(String, String, BTreeMap<String, String>), ConnectorError> {
    let missing = |option: &str| ConnectorError::MissingOption { connector: connector(options), option: option.into() };
    let topic = options.get("topic").ok_or_else(|| missing("topic"))?.trim().to_string();
    if topic.contains(';') || options.contains_key("topic-pattern") {
        return Err(ConnectorError::Unsupported {
            feature: format!("reading several topics ('topic' = '{topic}' or 'topic-pattern'); give one topic"),
        });
    }
    if topic.is_empty() {
        return Err(invalid("topic", &topic, "a topic name"));
    }
    let brokers = options.get("properties.bootstrap.servers").ok_or_else(|| missing("properties.bootstrap.servers"))?;
    if brokers.trim().is_empty() {
        return Err(invalid("properties.bootstrap.servers", brokers, "host:port[,host:port...]"));
    }
    let properties: BTreeMap<String, String> = options
        .iter()
        .filter_map(|(k, v)| k.strip_prefix("properties.").map(|k| (k.to_string(), v.clone())))
        .collect();
    Ok((topic, brokers.clone(), properties))
}

fn check_known(options: &BTreeMap<String, String>, prefix: &str, known: &[&str]) -> Result<(), ConnectorError> {
    match options.keys().find(|k| k.starts_with(prefix) && !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(key) => {
            Err(ConnectorError::UnknownOption { connector: connector(options), option: key.clone(), valid: known.join(", ") })
        }
    }
}

fn connector(options: &BTreeMap<String, String>) -> String {
    options.get("connector").cloned().unwrap_or_else(|| "kafka".into())
}

fn invalid(option: &str, value: &str, valid: &str) -> ConnectorError {
    ConnectorError::InvalidValue { option: option.into(), value: value.into(), valid: valid.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut map: BTreeMap<String, String> = [("connector", "kafka"), ("topic", "t"), ("properties.bootstrap.servers", "b:9092")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        map.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        map
    }

    #[test]
    fn refuses_empty_brokers() {
        let empty = KafkaSourceConfig::from_options(&opts(&[("properties.bootstrap.servers", " ")]));
        assert!(matches!(empty, Err(ConnectorError::InvalidValue { ref option, .. }) if option == "properties.bootstrap.servers"));
    }

    #[test]
    fn parses_startup_modes() -> Result<(), ConnectorError> {
        let earliest = KafkaSourceConfig::from_options(&opts(&[("scan.startup.mode", "earliest-offset")]))?;
        assert_eq!(earliest.startup, StartupMode::EarliestOffset);
        assert_eq!(earliest.properties.get("bootstrap.servers").map(String::as_str), Some("b:9092"));
        let ts = opts(&[("scan.startup.mode", "timestamp"), ("scan.startup.timestamp-millis", "1700000000000")]);
        assert_eq!(KafkaSourceConfig::from_options(&ts)?.startup, StartupMode::Timestamp { millis: 1_700_000_000_000 });
        let specific = opts(&[
            ("scan.startup.mode", "specific-offsets"),
            ("scan.startup.specific-offsets", "partition:0,offset:42;partition:1,offset:300"),
        ]);
        assert_eq!(
            KafkaSourceConfig::from_options(&specific)?.startup,
            StartupMode::SpecificOffsets { offsets: BTreeMap::from([(0, 42), (1, 300)]) }
        );
        let group = opts(&[("properties.group.id", "g"), ("properties.auto.offset.reset", "earliest")]);
        let group = KafkaSourceConfig::from_options(&group)?;
        assert_eq!((group.startup, group.offset_reset), (StartupMode::GroupOffsets, OffsetReset::Earliest));
        assert!(!group.properties.contains_key("auto.offset.reset"));
        Ok(())
    }

    #[test]
    fn refuses_bad_source_options() {
        let err = |pairs: &[(&str, &str)]| KafkaSourceConfig::from_options(&opts(pairs)).expect_err("refused");
        assert!(err(&[]).to_string().contains("properties.group.id"), "group-offsets needs a group");
        assert!(err(&[("scan.startup.mode", "newest")]).to_string().contains("earliest-offset, latest-offset"));
        assert!(matches!(err(&[("scan.startup.mode", "timestamp")]), ConnectorError::MissingOption { .. }));
        let bad_offsets = err(&[("scan.startup.mode", "specific-offsets"), ("scan.startup.specific-offsets", "0:42")]);
        assert!(bad_offsets.to_string().contains("partition:<int>,offset:<int>"), "{bad_offsets}");
        assert!(matches!(err(&[("scan.startup.modes", "x")]), ConnectorError::UnknownOption { .. }));
        assert!(matches!(err(&[("topic", "a;b")]), ConnectorError::Unsupported { .. }));
    }

    #[test]
    fn parses_sink_options() -> Result<(), ConnectorError> {
        let sink = KafkaSinkConfig::from_options(&opts(&[("sink.partitioner", "round-robin")]))?;
        assert_eq!((sink.partitioner, sink.delivery), (SinkPartitioner::RoundRobin, DeliveryGuarantee::AtLeastOnce));
        let no_prefix = KafkaSinkConfig::from_options(&opts(&[("sink.delivery-guarantee", "exactly-once")]));
        assert!(matches!(&no_prefix, Err(ConnectorError::MissingOption { option, .. }) if option.contains("transactional-id-prefix")));
        let eo = opts(&[("sink.delivery-guarantee", "exactly-once"), ("sink.transactional-id-prefix", "weir-a")]);
        let eo = KafkaSinkConfig::from_options(&eo)?;
        assert_eq!((eo.delivery, eo.transactional_id_prefix.as_deref()), (DeliveryGuarantee::ExactlyOnce, Some("weir-a")));
        let own_id = opts(&[("properties.transactional.id", "x")]);
        assert!(matches!(KafkaSinkConfig::from_options(&own_id), Err(ConnectorError::Unsupported { .. })));
        Ok(())
    }

    #[test]
    fn out_of_range_policy_defaults_to_fail_or_follows_auto_offset_reset() -> Result<(), ConnectorError> {
        let policy = |pairs: &[(&str, &str)]| KafkaSourceConfig::from_options(&opts(pairs)).map(|c| c.out_of_range);
        let earliest = ("scan.startup.mode", "earliest-offset");
        assert_eq!(policy(&[earliest])?, OutOfRange::Fail);
        assert_eq!(policy(&[earliest, ("scan.out-of-range", "EARLIEST")])?, OutOfRange::Earliest);
        assert_eq!(policy(&[earliest, ("scan.out-of-range", "latest")])?, OutOfRange::Latest);
        assert_eq!(policy(&[earliest, ("properties.auto.offset.reset", "earliest")])?, OutOfRange::Earliest);
        assert_eq!(
            policy(&[earliest, ("properties.auto.offset.reset", "earliest"), ("scan.out-of-range", "fail")])?,
            OutOfRange::Fail
        );
        assert!(matches!(policy(&[earliest, ("scan.out-of-range", "skip")]), Err(ConnectorError::InvalidValue { .. })));
        Ok(())
    }

    #[test]
    fn partition_discovery_every_five_minutes_unless_set_and_never_at_zero() -> Result<(), ConnectorError> {
        let interval = |pairs: &[(&str, &str)]| KafkaSourceConfig::from_options(&opts(pairs)).map(|c| c.discovery_interval);
        let earliest = ("scan.startup.mode", "earliest-offset");
        assert_eq!(interval(&[earliest])?, Some(std::time::Duration::from_secs(300)));
        assert_eq!(interval(&[earliest, (DISCOVERY_INTERVAL, "30 s")])?, Some(std::time::Duration::from_secs(30)));
        assert_eq!(interval(&[earliest, (DISCOVERY_INTERVAL, "1500")])?, Some(std::time::Duration::from_millis(1500)));
        assert_eq!(interval(&[earliest, (DISCOVERY_INTERVAL, "0")])?, None);
        assert_eq!(interval(&[earliest, (DISCOVERY_INTERVAL, "0 s")])?, None);
        let bad = interval(&[earliest, (DISCOVERY_INTERVAL, "often")]).expect_err("refused");
        assert!(bad.to_string().contains("0 to never look"), "{bad}");
        Ok(())
    }
}
