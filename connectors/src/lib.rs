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

pub mod datagen;
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
    /// Options that connector `connector` does not have (Flink: "Unsupported options found
    /// for 'kafka'"): each with the closest supported option when one is near, then the
    /// supported options.
    #[error("unsupported options found for {connector}: {unsupported}; supported options: {supported}")]
    UnsupportedOptions { connector: String, unsupported: String, supported: String },
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
            | ConnectorError::UnknownOption { .. }
            | ConnectorError::UnsupportedOptions { .. } => "22023",
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
/// `table_options(name)` lists the options the server itself reads for a table of connector
/// `name` ([`check_supported`] refuses every option neither lists).
///
/// # Errors
/// [`ConnectorError::UnknownConnector`] for a name not in the list; `UnsupportedOptions` for
/// an option the connector does not read (see [`check_supported`]); `MissingOption` and
/// `InvalidValue` for options a known connector requires (`topic` for Kafka, `format`'s values,
/// the `nexmark.*` options, the Kafka source and sink options); `UnknownOption` for a
/// `nexmark.*`, `scan.startup.*` or `sink.*` option that does not exist; `Unsupported` for a
/// Kafka option value not built yet (`'sink.delivery-guarantee' = 'exactly-once'`).
pub fn validate(
    options: &BTreeMap<String, String>,
    table_options: fn(&str) -> &'static [&'static str],
) -> Result<(String, ConnectorKind), ConnectorError> {
    let name = options.get("connector").map(|s| s.to_lowercase()).unwrap_or_else(|| "table".into());
    let Some((_, kind)) = CONNECTORS.iter().find(|(n, _)| *n == name) else {
        return Err(ConnectorError::UnknownConnector {
            name,
            valid: CONNECTORS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
        });
    };
    check_supported(&name, options, table_options(&name))?;
    if name == "kafka" || name == "upsert-kafka" {
        require(&name, options, "topic")?;
        // Flink requires the formats when the table is declared, as here.
        if name == "kafka" {
            // Flink takes the value format as 'format' or 'value.format', one of them.
            if options.contains_key("format") && options.contains_key("value.format") {
                return Err(ConnectorError::InvalidValue {
                    option: "value.format".into(),
                    value: options["value.format"].clone(),
                    valid: "nothing beside 'format': a 'kafka' table's value format is one or the other".into(),
                });
            }
            if !options.contains_key("value.format") {
                require(&name, options, "format")?;
            }
            // Flink: "A key format 'key.format' requires the declaration of one or more of key
            // fields using 'key.fields'", and the other way round.
            match (options.contains_key("key.format"), format::key_fields(options)) {
                (true, None) => require(&name, options, "key.fields")?,
                (true, Some(fields)) if fields.is_empty() => require(&name, &BTreeMap::new(), "key.fields")?,
                (false, Some(_)) => require(&name, options, "key.format")?,
                _ => {}
            }
            if options.contains_key("key.fields-prefix") {
                require(&name, options, "key.fields")?;
            }
            format::ValueFields::from_options(options)?;
        } else {
            require(&name, options, "key.format")?;
            require(&name, options, "value.format")?;
        }
        // Every option, checked when the table is declared, as Flink checks them when it
        // plans a table: a table is read, written, or both.
        // A consumer group is needed only once a job reads the table (`group-offsets`, the
        // default start): the rest of the source options are checked with a stand-in.
        let mut as_source = options.clone();
        as_source.entry("properties.group.id".into()).or_insert_with(|| "weir-validate".into());
        kafka::KafkaSourceConfig::from_options(&as_source)?;
        kafka::KafkaSinkConfig::from_options(options)?;
        // The formats' own options and values, checked now rather than when a job opens them.
        for prefix in ["", "key.", "value."] {
            if options.contains_key(&format!("{prefix}format")) {
                format::FormatOptions::from_options(options, prefix)?;
            }
        }
        if name == "upsert-kafka" {
            format::ValueFields::from_options(options)?;
        }
    }
    if name == "filesystem" {
        require(&name, options, "path")?;
        // The format's own options and values, as a Kafka table's.
        format::FormatOptions::from_options(&with_file_format(options), "")?;
    }
    if name == "print" {
        if let Some(v) = options.get("standard-error").filter(|v| !matches!(v.to_lowercase().as_str(), "true" | "false")) {
            return Err(ConnectorError::InvalidValue { option: "standard-error".into(), value: v.clone(), valid: "true, false".into() });
        }
        if let Some(v) = options.get("sink.parallelism").filter(|v| v.trim().parse::<u32>().map_or(true, |n| n == 0)) {
            return Err(ConnectorError::InvalidValue { option: "sink.parallelism".into(), value: v.clone(), valid: "an integer >= 1".into() });
        }
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

/// Refuses every option of `options` that connector `name` (as [`validate`] returned it) does
/// not read and `table_options` does not name, as Flink's factories refuse options they do not
/// declare ("Unsupported options found for 'kafka'"): a mistyped option is an error when the
/// table is declared, not a default silently kept.
///
/// `table_options` are the options the server reads for this kind of table (a late-rows side
/// table, a dead-letter table, an idle timeout). A connector reads:
/// - every table: `connector`;
/// - `kafka`: `topic`, `format` (or `value.format`) and the format's own `'<format>.*'`,
///   `properties.*` (handed to librdkafka, which checks them), `scan.startup.*`,
///   `scan.out-of-range`, `scan.topic-partition-discovery.interval`, `sink.*`, and for a
///   message key `key.format` (and its own options behind `key.`), `key.fields`,
///   `key.fields-prefix`, `value.fields-include`;
/// - `upsert-kafka`: as `kafka`, with `key.format`, `value.format` (and their formats' own
///   options behind `key.` / `value.`) and `value.fields-include` instead of `format`;
/// - `filesystem`: `path`, `format` and the format's own options (`json` without one);
/// - `nexmark`: the `nexmark.*` options;
/// - `print`: `print-identifier`, `standard-error`, `sink.parallelism` (its value checked; a
///   job's sink has the job's parallelism);
/// - `datagen`: `rows-per-second`, `number-of-rows` and `fields.<column>.<option>`
///   ([`datagen::FIELD_OPTIONS`]).
///
/// # Errors
/// [`ConnectorError::UnsupportedOptions`] naming every unsupported option, with a "did you
/// mean" for those within a few edits of a supported one, and listing the supported ones.
pub fn check_supported(
    name: &str,
    options: &BTreeMap<String, String>,
    table_options: &[&str],
) -> Result<(), ConnectorError> {
    let mut supported: Vec<String> = vec!["connector".into()];
    supported.extend(table_options.iter().map(|o| o.to_string()));
    let own = |prefix: &str, format_key: &str| -> Vec<String> {
        let Some(format) = options.get(format_key) else { return vec![] };
        let names = format::format_option_names(format).unwrap_or_default();
        names.iter().map(|o| format!("{prefix}{format}.{o}")).collect()
    };
    let kafka = |supported: &mut Vec<String>| {
        supported.push("topic".into());
        supported.extend(kafka::STARTUP_OPTIONS.iter().map(|o| o.to_string()));
        supported.push("scan.out-of-range".into());
        supported.push(kafka::DISCOVERY_INTERVAL.into());
        supported.extend(kafka::SINK_OPTIONS.iter().map(|o| o.to_string()));
    };
    match name {
        "kafka" => {
            kafka(&mut supported);
            supported.extend(["format".into(), "value.format".into()]);
            supported.extend(own("", "format"));
            supported.extend(own("value.", "value.format"));
            // The message key (Flink's 'Key and Value Formats').
            supported.extend(["key.format", "key.fields", "key.fields-prefix", "value.fields-include"].map(String::from));
            supported.extend(own("key.", "key.format"));
        }
        "upsert-kafka" => {
            kafka(&mut supported);
            supported.extend(["key.format".into(), "value.format".into(), "value.fields-include".into()]);
            supported.extend(own("key.", "key.format"));
            supported.extend(own("value.", "value.format"));
        }
        "filesystem" => {
            supported.extend(["path".into(), "format".into()]);
            // The format's own options, as a Kafka table's (`json` when none is named).
            let format = options.get("format").map(String::as_str).unwrap_or("json");
            let names = format::format_option_names(format).unwrap_or_default();
            supported.extend(names.iter().map(|o| format!("{format}.{o}")));
        }
        "nexmark" => supported.extend(nexmark::OPTIONS.iter().map(|o| o.to_string())),
        "print" => supported.extend(["print-identifier".into(), "standard-error".into(), "sink.parallelism".into()]),
        "datagen" => {
            supported.extend(datagen::OPTIONS.iter().map(|o| o.to_string()));
            // `fields.<column>.<option>`: the column is checked against the table's by the
            // generator (`datagen::DatagenGenerator::try_new`).
            supported.extend(options.keys().filter(|k| datagen::is_field_option(k)).cloned());
        }
        _ => {}
    }
    let kafka_like = matches!(name, "kafka" | "upsert-kafka");
    let unsupported: Vec<String> = options
        .keys()
        .filter(|k| !supported.contains(k) && !(kafka_like && k.starts_with("properties.") && k.len() > 11))
        .map(|k| match (connector_hint(name, k, &supported).or_else(|| other_format(k, options)), closest(k, &supported)) {
            (Some(hint), _) => format!("'{k}' ({hint})"),
            (None, Some(near)) => format!("'{k}' (did you mean '{near}'?)"),
            (None, None) => format!("'{k}'"),
        })
        .collect();
    if unsupported.is_empty() {
        return Ok(());
    }
    supported.sort();
    if kafka_like {
        supported.push("properties.* (librdkafka's properties)".into());
    }
    Err(ConnectorError::UnsupportedOptions {
        connector: if name == "table" { "a plain table ('connector' = 'table', or none)".into() } else { format!("connector '{name}'") },
        unsupported: unsupported.join(", "),
        supported: supported.join(", "),
    })
}

/// A `filesystem` table's `options` with its format named: `json` (JSON lines) when `'format'`
/// is not given.
pub fn with_file_format(options: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut options = options.clone();
    options.entry("format".into()).or_insert_with(|| "json".into());
    options
}

/// The way out for an option a Flink user gives to the wrong kind of Kafka table: `'format'`
/// on `upsert-kafka`, a format option without the `value.` prefix on `upsert-kafka`.
fn connector_hint(name: &str, key: &str, supported: &[String]) -> Option<String> {
    match (name, key) {
        ("upsert-kafka", "format") => Some("an 'upsert-kafka' table takes 'key.format' and 'value.format'".into()),
        ("upsert-kafka", _) if supported.iter().any(|s| *s == format!("value.{key}")) => {
            Some(format!("did you mean 'value.{key}'?"))
        }
        _ => None,
    }
}

/// Why `key` is not an option of this table when it is one of another format's:
/// `'json.ignore-parse-errors'` beside `'format' = 'csv'`.
fn other_format(key: &str, options: &BTreeMap<String, String>) -> Option<String> {
    ["", "key.", "value."].into_iter().find_map(|prefix| {
        let rest = key.strip_prefix(prefix)?;
        format::FORMAT_NAMES.iter().find_map(|f| {
            let option = rest.strip_prefix(f)?.strip_prefix('.')?;
            format::format_option_names(f)?.contains(&option).then(|| match options.get(&format!("{prefix}format")) {
                Some(set) => format!("an option of format '{f}', but '{prefix}format' is '{set}'"),
                None => format!("an option of format '{f}', but the table has no '{prefix}format'"),
            })
        })
    })
}

/// The option of `supported` nearest to `key`, if it is within a quarter of its length in
/// edits (at least 2): a typo, not another option.
pub fn closest<'a>(key: &str, supported: &'a [String]) -> Option<&'a str> {
    let limit = (key.len() / 4).max(2);
    supported
        .iter()
        .map(|s| (strsim::levenshtein(key, s), s))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, s)| s.as_str())
}

/// Milliseconds of a duration in Flink's syntax (`TimeUtils.parseDuration`): a whole number and
/// a unit (`'10 s'`, `'500 ms'`, `'2 min'`, `'1 h'`, `'1 d'`, and their long forms), or a bare
/// whole number of milliseconds; `None` for anything else, a fraction (`'1.5 s'`: Flink takes
/// whole numbers only, so write `'1500 ms'`) or more milliseconds than 64 bits hold.
pub fn duration_ms(value: &str) -> Option<i64> {
    let v = value.trim().to_lowercase();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: i64 = num.parse().ok()?;
    let factor = match unit.trim() {
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000,
        "min" | "mins" | "minute" | "minutes" => 60_000,
        "h" | "hour" | "hours" => 3_600_000,
        "d" | "day" | "days" => 86_400_000,
        _ => return None,
    };
    n.checked_mul(factor)
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
            *append_only_sink && format::value_format(options) != Some("debezium-json")
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
        assert_eq!(validate(&opts(&[]), |_| &[]).map(|(n, _)| n), Ok("table".into()));
        assert!(matches!(validate(&opts(&[("connector", "nope")]), |_| &[]), Err(ConnectorError::UnknownConnector { .. })));
        assert!(matches!(
            validate(&opts(&[("connector", "kafka")]), |_| &[]),
            Err(ConnectorError::MissingOption { .. })
        ));
        let kafka = opts(&[("connector", "kafka"), ("topic", "t"), ("format", "json")]);
        assert!(is_append_only_sink(&kafka));
        // Kafka's source and sink options are checked too.
        let mut bad = kafka.clone();
        bad.insert("properties.bootstrap.servers".into(), "127.0.0.1:9092".into());
        assert!(validate(&bad, |_| &[]).is_ok(), "{:?}", validate(&bad, |_| &[]));
        bad.insert("sink.delivery-guarantee".into(), "bogus".into());
        assert!(matches!(validate(&bad, |_| &[]), Err(ConnectorError::InvalidValue { .. })));
        let upsert = opts(&[("connector", "upsert-kafka"), ("topic", "t")]);
        assert!(!is_append_only_sink(&upsert));
    }

    #[test]
    fn refuses_unsupported_options() {
        let kafka = opts(&[
            ("connector", "kafka"),
            ("topic", "t"),
            ("properties.bootstrap.servers", "b:9092"),
            ("format", "csv"),
            ("csv.field-delimiter", ";"),
            ("dead-letter.table", "d"),
        ]);
        let table_options: fn(&str) -> &'static [&'static str] = |_| &["dead-letter.table"];
        assert!(validate(&kafka, table_options).is_ok());
        // Not a server option for this kind of table.
        assert!(validate(&kafka, |_| &[]).is_err());
        let with = |key: &str| {
            let mut o = kafka.clone();
            o.insert(key.into(), "x".into());
            check_supported("kafka", &o, &["dead-letter.table"]).map_err(|e| e.to_string())
        };
        assert!(with("properties.fetch.wait.max.ms").is_ok());
        let typo = with("scan.watermark.idle-timout").expect_err("a typo");
        assert!(typo.starts_with("unsupported options found for connector 'kafka': 'scan.watermark.idle-timout'"), "{typo}");
        // Another format's option, and a format option that is one edit from a real one.
        let other = with("json.ignore-parse-errors").expect_err("json option with csv");
        assert!(
            other.contains("'json.ignore-parse-errors' (an option of format 'json', but 'format' is 'csv'); supported options: connector, csv.allow-comments"),
            "{other}"
        );
        let near = with("csv.field-delimeter").expect_err("typo");
        assert!(near.contains("'csv.field-delimeter' (did you mean 'csv.field-delimiter'?)"), "{near}");
        assert!(with("properties.").is_err());
        let plain = check_supported("table", &opts(&[("conector", "kafka")]), &[]).expect_err("typo").to_string();
        assert_eq!(
            plain,
            "unsupported options found for a plain table ('connector' = 'table', or none): 'conector' (did you mean 'connector'?); supported options: connector"
        );
        let upsert = opts(&[("connector", "upsert-kafka"), ("key.format", "json"), ("value.format", "json"), ("format", "json")]);
        let e = check_supported("upsert-kafka", &upsert, &[]).expect_err("format").to_string();
        assert!(
            e.contains("found for connector 'upsert-kafka': 'format' (an 'upsert-kafka' table takes 'key.format' and 'value.format'); supported"),
            "{e}"
        );
        let mut unprefixed = upsert.clone();
        unprefixed.remove("format");
        unprefixed.insert("json.ignore-parse-errors".into(), "true".into());
        let e = check_supported("upsert-kafka", &unprefixed, &[]).expect_err("prefix").to_string();
        assert!(e.contains("'json.ignore-parse-errors' (did you mean 'value.json.ignore-parse-errors'?)"), "{e}");
    }

    /// A `kafka` table's value format is `'format'` or `'value.format'`, one of them; a message
    /// key needs both `'key.format'` and `'key.fields'` (Flink's rules).
    #[test]
    fn kafka_value_and_key_formats_follow_flink() {
        let table = |pairs: &[(&str, &str)]| {
            let mut o = opts(&[("connector", "kafka"), ("topic", "t"), ("properties.bootstrap.servers", "localhost:9092")]);
            o.extend(opts(pairs));
            validate(&o, |_| &[]).map(drop).map_err(|e| e.to_string())
        };
        assert_eq!(table(&[("value.format", "json")]), Ok(()));
        assert_eq!(table(&[("format", "json"), ("key.format", "json"), ("key.fields", "id;name")]), Ok(()));
        assert_eq!(table(&[("value.format", "csv"), ("value.csv.field-delimiter", ";"), ("key.format", "raw"), ("key.fields", "id")]), Ok(()));
        let both = table(&[("format", "json"), ("value.format", "json")]).expect_err("both");
        assert!(both.contains("value.format"), "{both}");
        let no_fields = table(&[("format", "json"), ("key.format", "json")]).expect_err("no key.fields");
        assert!(no_fields.contains("key.fields"), "{no_fields}");
        let no_key_format = table(&[("format", "json"), ("key.fields", "id")]).expect_err("no key.format");
        assert!(no_key_format.contains("key.format"), "{no_key_format}");
        let bad_include = table(&[("format", "json"), ("key.format", "json"), ("key.fields", "id"), ("value.fields-include", "SOME")]);
        assert!(bad_include.expect_err("bad include").contains("EXCEPT_KEY"));
    }
}
