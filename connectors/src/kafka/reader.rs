//! The Kafka source reader: every partition of one topic, by manual assignment.
//!
//! Weir owns the positions: a reader opens at the next offset per partition that Weir's own
//! epoch commit stored, and a partition it has none for starts where the startup mode says
//! (Flink `'scan.startup.mode'`, resolved to a concrete offset when the reader opens, so the
//! next commit stores it even if no message came). There is no group membership and no
//! rebalancing (Flink's KafkaSource assigns splits itself likewise); the group, if any, only
//! gets offsets committed for lag tools ([`KafkaReader::commit_to_group`]).
//!
//! Offsets follow Kafka's convention: a committed offset is the next one to read, and a
//! partition's high watermark is the offset after its last message, so `lag = high - next`.
//!
//! A position that is no longer in its partition (retention deleted the records after it, or
//! the topic was recreated) is never skipped silently: librdkafka is told to report it
//! (`auto.offset.reset = error`), and the reader applies `'scan.out-of-range'`
//! ([`OutOfRange`]): it fails, or moves the position to the earliest (latest) retained offset
//! and counts the records skipped ([`KafkaReader::take_resets`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::config::{KafkaSourceConfig, OffsetReset, OutOfRange, StartupMode};
use super::client::{client_error, KafkaHeader, OPERATION_TIMEOUT};
use crate::ConnectorError;

/// One Kafka message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaRecord {
    /// Its partition.
    pub partition: i32,
    /// Its offset in the partition.
    pub offset: i64,
    /// Its timestamp (create or log-append time, as the topic says), epoch ms; `None` if it has
    /// none.
    pub timestamp_ms: Option<i64>,
    /// Its key; `None` for a message without one.
    pub key: Option<Vec<u8>>,
    /// Its value; `None` for a tombstone.
    pub payload: Option<Vec<u8>>,
    /// Its headers, in order (keys may repeat).
    pub headers: Vec<KafkaHeader>,
}

/// Lag of one partition: how far the committed position is behind the partition's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionLag {
    /// The partition.
    pub partition: i32,
    /// The committed offset (the next offset to read); `None` if nothing is committed.
    pub committed: Option<i64>,
    /// The offset after the partition's last message.
    pub high_watermark: i64,
    /// `high_watermark - committed` messages (from the low watermark when nothing is committed).
    pub lag: i64,
}

/// Reads all partitions of one topic. `Send + Sync`; one thread polls it.
pub struct KafkaReader {
    consumer: BaseConsumer,
    config: KafkaSourceConfig,
    /// The topic's partitions, ascending.
    partitions: Vec<i32>,
    /// Per partition, the offset of the next message to read.
    positions: BTreeMap<i32, i64>,
    /// An error that came after some records in one poll, returned by the next poll.
    pending_error: Option<ConnectorError>,
    /// Positions moved by `'scan.out-of-range'` since the last [`KafkaReader::take_resets`].
    resets: Vec<Reset>,
    /// librdkafka reported a position out of range after some records of one poll: the next
    /// poll applies `'scan.out-of-range'` first.
    out_of_range_reported: bool,
    /// Partitions assigned again by `'scan.out-of-range'` that have returned no message since:
    /// librdkafka's position of such a partition may still be the one from before
    /// ([`KafkaReader::skip_unreturned_offsets`] leaves them alone).
    reassigned: BTreeSet<i32>,
}

/// A position that was out of its partition's retained range and moved per
/// `'scan.out-of-range'`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reset {
    /// The partition.
    pub partition: i32,
    /// The position before (the next offset it was to read).
    pub from: i64,
    /// The position now.
    pub to: i64,
    /// Records skipped: `to - from` when moving forward, 0 when the position was beyond the
    /// partition's end (a recreated topic).
    pub skipped: u64,
}

impl KafkaReader {
    /// Opens a reader of `config.topic`, at `resume[p]` (the next offset to read, from Weir's
    /// own commit) for each partition `p` listed there, the others from their earliest offset
    /// (added since that commit); with `resume` empty, every partition per `config.startup`.
    ///
    /// Blocks up to about 10 s per broker request.
    ///
    /// # Errors
    /// [`ConnectorError::InvalidValue`] for a `properties.*` librdkafka refuses;
    /// [`ConnectorError::Kafka`] when the brokers cannot be reached, the topic does not exist,
    /// or an offset cannot be resolved (`group-offsets` with a partition the group never
    /// committed and `'properties.auto.offset.reset'` unset or `none`).
    pub fn open(config: &KafkaSourceConfig, resume: &BTreeMap<i32, i64>) -> Result<Self, ConnectorError> {
        let mut reader = Self::unassigned(config)?;
        reader.partitions = reader.fetch_partitions()?;
        reader.positions = reader.start_offsets(resume)?;
        let mut assignment = TopicPartitionList::with_capacity(reader.partitions.len());
        for (&partition, &offset) in &reader.positions {
            assignment
                .add_partition_offset(&config.topic, partition, Offset::Offset(offset))
                .map_err(|e| reader.error("assigning partitions", e))?;
        }
        reader.consumer.assign(&assignment).map_err(|e| reader.error("assigning partitions", e))?;
        Ok(reader)
    }

    /// Per partition of `config.topic` (ascending ids), the offset a reader has to reach to have
    /// read every message readable now: the last stable offset under `read_committed` (the
    /// default: where the first open transaction starts, else the high watermark), the high
    /// watermark under `read_uncommitted`. Asks the brokers with a consumer of its own (the
    /// same client settings as a reader's); what `FLUSH` waits for.
    ///
    /// # Errors
    /// [`ConnectorError::Kafka`] when the brokers cannot be reached or the topic does not exist.
    pub fn end_offsets(config: &KafkaSourceConfig) -> Result<BTreeMap<i32, i64>, ConnectorError> {
        let reader = Self::unassigned(config)?;
        let partitions = reader.fetch_partitions()?;
        partitions.iter().map(|&p| reader.watermarks_of(p).map(|(_, high)| (p, high))).collect()
    }

    /// A reader of `config.topic` with no partition listed or assigned yet.
    fn unassigned(config: &KafkaSourceConfig) -> Result<Self, ConnectorError> {
        let mut client = ClientConfig::new();
        // librdkafka assigns partitions only with a group id; without the user's, one that is
        // never joined nor committed to.
        client.set("group.id", "weir-unused");
        // librdkafka stops fetching a partition whose local queue is full and waits this long
        // before it looks again (default 1 000 ms): a source that drains the queue in less
        // than that then sits idle. 10 ms keeps the queue fed; 'properties.*' may override it.
        client.set("fetch.queue.backoff.ms", "10");
        // Only committed transactions' messages (librdkafka's default too, said here so it
        // stays so): a job reading an exactly-once sink's topic sees no aborted epoch.
        // 'properties.isolation.level' = 'read_uncommitted' may override it.
        client.set("isolation.level", "read_committed");
        for (key, value) in &config.properties {
            client.set(key, value);
        }
        client
            .set("bootstrap.servers", &config.brokers)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false")
            .set("auto.offset.reset", "error");
        let consumer: BaseConsumer = client.create().map_err(|e| client_error(e, &config.brokers, &config.topic))?;
        Ok(KafkaReader {
            consumer,
            config: config.clone(),
            partitions: Vec::new(),
            positions: BTreeMap::new(),
            pending_error: None,
            resets: Vec::new(),
            out_of_range_reported: false,
            reassigned: BTreeSet::new(),
        })
    }

    /// The positions moved by `'scan.out-of-range'` since the last call.
    pub fn take_resets(&mut self) -> Vec<Reset> {
        std::mem::take(&mut self.resets)
    }

    /// Partition `partition`'s (low, high) watermarks: its earliest retained offset and the
    /// offset after its last message.
    ///
    /// # Errors
    /// [`ConnectorError::Kafka`] when the brokers do not answer.
    pub fn watermarks_of(&self, partition: i32) -> Result<(i64, i64), ConnectorError> {
        self.consumer
            .fetch_watermarks(&self.config.topic, partition, OPERATION_TIMEOUT)
            .map_err(|e| self.error(&format!("reading the watermarks of partition {partition}"), e))
    }

    /// Applies `'scan.out-of-range'` to every partition whose position is outside its retained
    /// range, after librdkafka reported one: moves and counts them, or returns
    /// [`ConnectorError::OutOfRange`] for `fail`. `Ok(false)`: no position was out of range (the
    /// report was about something else).
    fn reset_out_of_range(&mut self) -> Result<bool, ConnectorError> {
        let watermarks = self.watermarks()?;
        let mut moved = Vec::new();
        for (&partition, &from) in &self.positions {
            let Some(&(low, high)) = watermarks.get(&partition) else { continue };
            if (low..=high).contains(&from) {
                continue;
            }
            let to = match self.config.out_of_range {
                OutOfRange::Fail => {
                    let why = if from < low {
                        format!("the earliest retained offset is {low}: retention deleted {} unread records", low - from)
                    } else {
                        format!("the partition ends at offset {high} (was the topic recreated?)")
                    };
                    return Err(ConnectorError::OutOfRange {
                        topic: self.config.topic.clone(),
                        message: format!(
                            "partition {partition}: the next offset to read, offset {from}, is no longer in the partition; {why}. With 'scan.out-of-range' = 'earliest' (or 'latest') the job skips to the earliest (latest) retained offset and counts the records skipped; create the job again after setting it"
                        ),
                    });
                }
                OutOfRange::Earliest => low,
                OutOfRange::Latest => high,
            };
            moved.push(Reset { partition, from, to, skipped: u64::try_from(to - from).unwrap_or(0) });
        }
        if moved.is_empty() {
            return Ok(false);
        }
        for reset in &moved {
            self.positions.insert(reset.partition, reset.to);
        }
        let mut assignment = TopicPartitionList::with_capacity(self.positions.len());
        for (&partition, &offset) in &self.positions {
            assignment
                .add_partition_offset(&self.config.topic, partition, Offset::Offset(offset))
                .map_err(|e| self.error("assigning partitions", e))?;
        }
        self.consumer.assign(&assignment).map_err(|e| self.error("assigning partitions", e))?;
        self.reassigned.extend(self.positions.keys());
        self.resets.extend(moved);
        Ok(true)
    }

    /// Looks for partitions added to the topic since the reader opened or last looked, and
    /// reads each from its earliest offset, as Flink reads the partitions it discovers; returns
    /// the new ones. Kafka only adds partitions, numbered after the existing ones, so they come
    /// after those in [`KafkaReader::partitions`] and the indexes of the others do not change.
    ///
    /// # Errors
    /// [`ConnectorError::Kafka`] when the brokers do not answer; the reader is unchanged.
    pub fn discover(&mut self) -> Result<Vec<i32>, ConnectorError> {
        let last = self.partitions.last().copied().unwrap_or(-1);
        let added: Vec<i32> = self.fetch_partitions()?.into_iter().filter(|p| *p > last).collect();
        if added.is_empty() {
            return Ok(added);
        }
        let mut assignment = TopicPartitionList::with_capacity(added.len());
        let mut starts = Vec::with_capacity(added.len());
        for &partition in &added {
            let (earliest, _) = self.watermarks_of(partition)?;
            assignment
                .add_partition_offset(&self.config.topic, partition, Offset::Offset(earliest))
                .map_err(|e| self.error("assigning partitions", e))?;
            starts.push((partition, earliest));
        }
        self.consumer.incremental_assign(&assignment).map_err(|e| self.error("assigning partitions", e))?;
        self.partitions.extend(&added);
        self.positions.extend(starts);
        Ok(added)
    }

    /// The topic's partitions, ascending: those there when the reader opened, then those
    /// [`KafkaReader::discover`] found.
    pub fn partitions(&self) -> &[i32] {
        &self.partitions
    }

    /// Per partition, the offset of the next message to read: what Weir commits in its epoch.
    pub fn positions(&self) -> &BTreeMap<i32, i64> {
        &self.positions
    }

    /// Up to `max_records` messages, from all partitions, each partition's in offset order.
    /// Waits up to `timeout` for the first, then takes what is already fetched. An empty result
    /// means nothing arrived in time.
    ///
    /// # Errors
    /// [`ConnectorError::Kafka`] when the consumer reports an error (an offset out of range
    /// with reset `none`, a topic deleted); records polled before it are returned first and
    /// the error by the next call. The caller reopens from its committed positions.
    pub fn poll(&mut self, max_records: usize, timeout: Duration) -> Result<Vec<KafkaRecord>, ConnectorError> {
        if let Some(e) = self.pending_error.take() {
            return Err(e);
        }
        if std::mem::take(&mut self.out_of_range_reported) {
            self.reset_out_of_range()?;
        }
        let mut records = Vec::new();
        let deadline = Instant::now() + timeout;
        while records.len() < max_records {
            let wait = if records.is_empty() { deadline.saturating_duration_since(Instant::now()) } else { Duration::ZERO };
            let Some(result) = self.consumer.poll(wait) else {
                if records.is_empty() && Instant::now() < deadline {
                    continue;
                }
                break;
            };
            let message = match result {
                Ok(message) => message,
                Err(e) if is_out_of_range(&e) && records.is_empty() => {
                    if self.reset_out_of_range()? {
                        continue;
                    }
                    return Err(self.error("reading messages", e));
                }
                Err(e) if is_out_of_range(&e) => {
                    // Handled at the next poll, after these records are released.
                    self.out_of_range_reported = true;
                    break;
                }
                Err(e) => {
                    let error = self.error("reading messages", e);
                    if records.is_empty() {
                        return Err(error);
                    }
                    self.pending_error = Some(error);
                    break;
                }
            };
            let headers = message
                .headers()
                .map(|h| {
                    h.iter().map(|h| KafkaHeader { key: h.key.to_string(), value: h.value.map(<[u8]>::to_vec) }).collect()
                })
                .unwrap_or_default();
            self.positions.insert(message.partition(), message.offset() + 1);
            self.reassigned.remove(&message.partition());
            records.push(KafkaRecord {
                partition: message.partition(),
                offset: message.offset(),
                timestamp_ms: message.timestamp().to_millis(),
                key: message.key().map(<[u8]>::to_vec),
                payload: message.payload().map(<[u8]>::to_vec),
                headers,
            });
        }
        if records.len() < max_records {
            // Caught up with what was fetched: the place to look past records never returned.
            self.skip_unreturned_offsets();
        }
        Ok(records)
    }

    /// Moves each position past the offsets librdkafka consumed without returning a message:
    /// transaction markers (control records) and, under `read_committed`, the messages of
    /// aborted transactions. librdkafka's position of a partition is the offset after the last
    /// message or control record polled, so it never passes a message not yet returned.
    /// Without this, a partition that ends with a commit marker (every topic an exactly-once
    /// producer writes) would stay one offset short of its end: a lag of 1 for good, and a
    /// `FLUSH` waiting for that offset.
    fn skip_unreturned_offsets(&mut self) {
        let Ok(list) = self.consumer.position() else { return };
        for e in list.elements() {
            if self.reassigned.contains(&e.partition()) {
                continue;
            }
            if let (Offset::Offset(offset), Some(position)) = (e.offset(), self.positions.get_mut(&e.partition())) {
                if offset > *position {
                    *position = offset;
                }
            }
        }
    }

    /// Commits `offsets` (partition → next offset to read, as [`KafkaReader::positions`]) to the
    /// consumer group, so that Kafka's lag tools see Weir's progress. Weir's own commit stays
    /// the truth; this is a report, sent without waiting for the coordinator's answer (a broker
    /// that stopped answering must not stop the reader): [`KafkaReader::group_offsets`] shows
    /// it once the coordinator has it. Without `'properties.group.id'` it does nothing.
    ///
    /// # Errors
    /// [`ConnectorError::Kafka`] when librdkafka refuses the request (a commit the coordinator
    /// refuses later is not reported).
    pub fn commit_to_group(&self, offsets: &BTreeMap<i32, i64>) -> Result<(), ConnectorError> {
        if self.config.group_id.is_none() || offsets.is_empty() {
            return Ok(());
        }
        let mut list = TopicPartitionList::with_capacity(offsets.len());
        for (&partition, &offset) in offsets {
            list.add_partition_offset(&self.config.topic, partition, Offset::Offset(offset))
                .map_err(|e| self.error("committing offsets to the group", e))?;
        }
        self.consumer.commit(&list, CommitMode::Async).map_err(|e| self.error("committing offsets to the group", e))
    }

    /// The group's committed offset per partition (partitions without one are left out); empty
    /// without `'properties.group.id'`.
    ///
    /// # Errors
    /// [`ConnectorError::Kafka`] when the brokers cannot be reached.
    pub fn group_offsets(&self) -> Result<BTreeMap<i32, i64>, ConnectorError> {
        if self.config.group_id.is_none() {
            return Ok(BTreeMap::new());
        }
        let mut list = TopicPartitionList::with_capacity(self.partitions.len());
        for &partition in &self.partitions {
            list.add_partition(&self.config.topic, partition);
        }
        let committed = self
            .consumer
            .committed_offsets(list, OPERATION_TIMEOUT)
            .map_err(|e| self.error("reading the group's committed offsets", e))?;
        Ok(committed
            .elements()
            .iter()
            .filter_map(|e| match e.offset() {
                Offset::Offset(o) => Some((e.partition(), o)),
                _ => None,
            })
            .collect())
    }

    /// Per partition, the offset after its last message (Kafka's high watermark).
    ///
    /// # Errors
    /// [`ConnectorError::Kafka`] when the brokers cannot be reached.
    pub fn high_watermarks(&self) -> Result<BTreeMap<i32, i64>, ConnectorError> {
        Ok(self.watermarks()?.into_iter().map(|(p, (_, high))| (p, high)).collect())
    }

    /// Lag per partition, given the committed offsets (Weir's own, or [`Self::group_offsets`]).
    ///
    /// # Errors
    /// [`ConnectorError::Kafka`] when the brokers cannot be reached.
    pub fn lag(&self, committed: &BTreeMap<i32, i64>) -> Result<Vec<PartitionLag>, ConnectorError> {
        Ok(self
            .watermarks()?
            .into_iter()
            .map(|(partition, (low, high))| {
                let committed = committed.get(&partition).copied();
                PartitionLag { partition, committed, high_watermark: high, lag: (high - committed.unwrap_or(low)).max(0) }
            })
            .collect())
    }

    /// Per partition, (low, high) watermarks.
    fn watermarks(&self) -> Result<BTreeMap<i32, (i64, i64)>, ConnectorError> {
        self.partitions.iter().map(|&p| self.watermarks_of(p).map(|w| (p, w))).collect()
    }

    /// The topic's partitions from the cluster's metadata.
    fn fetch_partitions(&self) -> Result<Vec<i32>, ConnectorError> {
        let metadata = self
            .consumer
            .fetch_metadata(Some(&self.config.topic), OPERATION_TIMEOUT)
            .map_err(|e| self.error("reading the topic's metadata", e))?;
        let topic = metadata.topics().iter().find(|t| t.name() == self.config.topic);
        let mut partitions: Vec<i32> = match topic {
            Some(t) if t.error().is_none() => t.partitions().iter().map(|p| p.id()).collect(),
            _ => Vec::new(),
        };
        if partitions.is_empty() {
            return Err(self.message("reading the topic's metadata", "the topic does not exist (create it first)"));
        }
        partitions.sort_unstable();
        Ok(partitions)
    }

    /// The first offset to read per partition: `resume`, else per the startup mode. When
    /// `resume` is not empty, a partition it does not list was added to the topic after those
    /// positions were taken: it is read from its earliest offset, as one the reader discovers
    /// ([`KafkaReader::discover`]), whatever the startup mode.
    fn start_offsets(&self, resume: &BTreeMap<i32, i64>) -> Result<BTreeMap<i32, i64>, ConnectorError> {
        let fresh: Vec<i32> = self.partitions.iter().copied().filter(|p| !resume.contains_key(p)).collect();
        let mut offsets: BTreeMap<i32, i64> =
            resume.iter().filter(|(p, _)| self.partitions.contains(p)).map(|(&p, &o)| (p, o)).collect();
        if fresh.is_empty() {
            return Ok(offsets);
        }
        let watermarks = self.watermarks()?;
        let low = |p: i32| watermarks.get(&p).map_or(0, |w| w.0);
        let high = |p: i32| watermarks.get(&p).map_or(0, |w| w.1);
        if !resume.is_empty() {
            offsets.extend(fresh.iter().map(|&p| (p, low(p))));
            return Ok(offsets);
        }
        match &self.config.startup {
            StartupMode::EarliestOffset => offsets.extend(fresh.iter().map(|&p| (p, low(p)))),
            StartupMode::LatestOffset => offsets.extend(fresh.iter().map(|&p| (p, high(p)))),
            StartupMode::GroupOffsets => {
                let committed = self.group_offsets()?;
                for &p in &fresh {
                    let offset = match (committed.get(&p), self.config.offset_reset) {
                        (Some(&o), _) => o,
                        (None, OffsetReset::Earliest) => low(p),
                        (None, OffsetReset::Latest) => high(p),
                        (None, OffsetReset::None) => {
                            return Err(self.message(
                                "starting at the group's offsets",
                                &format!(
                                    "group '{}' has no committed offset for partition {p}; set 'properties.auto.offset.reset' to 'earliest' or 'latest', or another 'scan.startup.mode'",
                                    self.config.group_id.as_deref().unwrap_or_default()
                                ),
                            ))
                        }
                    };
                    offsets.insert(p, offset);
                }
            }
            StartupMode::Timestamp { millis } => {
                let mut list = TopicPartitionList::with_capacity(fresh.len());
                for &p in &fresh {
                    list.add_partition_offset(&self.config.topic, p, Offset::Offset(*millis))
                        .map_err(|e| self.error("looking up offsets by timestamp", e))?;
                }
                let found = self
                    .consumer
                    .offsets_for_times(list, OPERATION_TIMEOUT)
                    .map_err(|e| self.error("looking up offsets by timestamp", e))?;
                for element in found.elements() {
                    let p = element.partition();
                    let offset = match element.offset() {
                        Offset::Offset(o) => o,
                        _ => high(p), // no message at or after the timestamp
                    };
                    offsets.insert(p, offset);
                }
            }
            StartupMode::SpecificOffsets { offsets: given } => {
                let committed = self.group_offsets()?;
                for &p in &fresh {
                    let offset = given.get(&p).or_else(|| committed.get(&p)).copied().unwrap_or_else(|| low(p));
                    offsets.insert(p, offset);
                }
            }
        }
        Ok(offsets)
    }

    fn error(&self, operation: &str, e: rdkafka::error::KafkaError) -> ConnectorError {
        self.message(operation, &e.to_string())
    }

    fn message(&self, operation: &str, message: &str) -> ConnectorError {
        ConnectorError::Kafka {
            operation: operation.into(),
            brokers: self.config.brokers.clone(),
            topic: self.config.topic.clone(),
            message: message.into(),
        }
    }
}

/// Whether librdkafka reports a fetch position out of its partition's range (with
/// `auto.offset.reset = error`, `_AUTO_OFFSET_RESET`; a broker's `OFFSET_OUT_OF_RANGE`).
fn is_out_of_range(e: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::error::RDKafkaErrorCode;
    matches!(e.rdkafka_error_code(), Some(RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange))
}
