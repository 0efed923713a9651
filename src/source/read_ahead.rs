//! Reading ahead: a connector's reader polled on a thread of its own, its batches handed to the
//! job through a bounded channel, so that generating or decoding the next batch (the nexmark
//! generator, JSON or Avro decoding of Kafka records) overlaps with the job's operators and
//! commits instead of taking turns with them on the job's thread (Flink runs a source as a task
//! of its own the same way).
//!
//! A job with `parallelism.default` of 2 or more reads so ([`crate::source::SourceTask::open`]);
//! at parallelism 1 a job runs on one thread, its sources included.
//!
//! # Positions stay exact
//! Each batch travels with the reader's positions, finished partitions, dead letters and
//! skipped records as they were right after the poll that produced it, and [`ReadAhead`]
//! answers [`SourceReader::positions`] and the rest from the last batch the job *took*, not
//! from what the thread has read: a commit stores the position after the rows the job
//! processed, and the batches still in the channel are read again after a restart, as any
//! uncommitted rows are. Dropping a `ReadAhead` stops its thread and drops what it read ahead.
//!
//! [`SourceReader::on_committed`] (Kafka: committing the offsets to the consumer group) is
//! passed to the thread, which calls the reader before its next poll.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{DeadLetter, SourcePoll, SourceReader};
use crate::error::{Result, WeirError};

/// Batches read ahead and not yet taken, at most (the thread waits when the job is this far
/// behind: backpressure, no unbounded queue). Four batches of 8192 nexmark bids are about 6 MiB.
const CHANNEL_BATCHES: usize = 4;

/// How long [`ReadAhead::poll`] waits for the thread's next batch while the thread is reading,
/// at most, before it answers `Pending` (the thread found nothing in its last poll: at once).
/// No longer than a slice of reading ([`crate::engine::SOURCE_SLICE`]): the engine's source
/// thread polls holding the engine, which statements wait for; long enough that a reader
/// decoding a batch is seldom taken for a quiet one (which cuts an epoch).
const MAX_WAIT: Duration = Duration::from_millis(50);

/// How long the thread pauses after its reader found nothing (a Kafka poll has already waited
/// a few ms for records before it says so).
const IDLE_PAUSE: Duration = Duration::from_millis(2);

/// How long dropping a [`ReadAhead`] waits for its thread to end before leaving it behind.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// One poll of the reader on the thread, with what the job needs to know after it.
struct Polled {
    poll: Result<SourcePoll>,
    positions: Vec<u64>,
    finished: Vec<bool>,
    dead_letters: Vec<DeadLetter>,
    skipped: Vec<(usize, u64)>,
}

/// What the job's side and the thread share.
#[derive(Default)]
struct Shared {
    /// Set when the `ReadAhead` is dropped.
    stop: AtomicBool,
    /// The reader's last poll found nothing new (and nothing is in flight from it).
    idle: AtomicBool,
    /// Positions committed since the thread last told its reader.
    committed: Mutex<Option<Vec<u64>>>,
    /// The reader's [`SourceReader::high_watermarks`] after its last poll.
    high_watermarks: Mutex<Vec<Option<i64>>>,
}

/// A [`SourceReader`] that reads `inner` on a thread of its own; see the module docs.
pub struct ReadAhead {
    /// The thread's batches (in a mutex only so that the reader is `Sync`; one side takes).
    batches: Mutex<Receiver<Polled>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    bounded: bool,
    /// As of the last batch taken.
    positions: Vec<u64>,
    finished: Vec<bool>,
    dead_letters: Vec<DeadLetter>,
    skipped: Vec<(usize, u64)>,
    /// The thread said `Finished`: every later poll says it again.
    ended: bool,
}

impl ReadAhead {
    /// Starts reading `inner` ahead on a thread named `name`, `max_rows` rows per batch at most
    /// (the batch size a caller's [`SourceReader::poll`] asks for is not used).
    ///
    /// # Errors
    /// `Internal` when the thread cannot be started.
    pub fn spawn(mut inner: Box<dyn SourceReader>, name: String, max_rows: usize) -> Result<Self> {
        let positions = inner.positions();
        let finished = (0..inner.num_partitions()).map(|p| inner.partition_finished(p)).collect();
        let bounded = inner.bounded();
        let shared = Arc::new(Shared { high_watermarks: Mutex::new(inner.high_watermarks()), ..Shared::default() });
        let (tx, rx) = sync_channel(CHANNEL_BATCHES);
        let on_thread = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || read(inner.as_mut(), &tx, &on_thread, max_rows))
            .map_err(|e| WeirError::internal(format!("cannot start a source's reading thread: {e}")))?;
        Ok(ReadAhead {
            batches: Mutex::new(rx),
            shared,
            thread: Some(thread),
            bounded,
            positions,
            finished,
            dead_letters: Vec::new(),
            skipped: Vec::new(),
            ended: false,
        })
    }
}

/// The thread: polls `inner` and sends each result until the reader ends (finished, failed or
/// erred), then only passes on committed positions, until the `ReadAhead` is dropped; the
/// positions committed last reach the reader before the thread ends.
fn read(inner: &mut dyn SourceReader, tx: &SyncSender<Polled>, shared: &Shared, max_rows: usize) {
    let mut ended = false;
    let mut sent = inner.positions();
    while !shared.stop.load(Ordering::Acquire) {
        pass_committed(inner, shared);
        if ended {
            std::thread::sleep(IDLE_PAUSE * 5);
            continue;
        }
        ended = !poll_once(inner, tx, shared, max_rows, &mut sent);
        if ended {
            // Nothing more comes: the job's side need not wait for a batch.
            shared.idle.store(true, Ordering::Release);
        }
    }
    pass_committed(inner, shared);
}

/// Tells `inner` the positions committed since the last call, if any.
fn pass_committed(inner: &mut dyn SourceReader, shared: &Shared) {
    let committed = shared.committed.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(positions) = committed {
        inner.on_committed(&positions);
    }
}

/// Polls `inner` once and sends what it gave, if anything (a poll without rows only when it
/// moved a position past records that make no rows, from `sent`, the positions sent last);
/// returns whether to poll again (false once the reader has ended or the `ReadAhead` is gone).
fn poll_once(
    inner: &mut dyn SourceReader,
    tx: &SyncSender<Polled>,
    shared: &Shared,
    max_rows: usize,
    sent: &mut Vec<u64>,
) -> bool {
    let poll = inner.poll(max_rows);
    let partitions = inner.num_partitions();
    *shared.high_watermarks.lock().unwrap_or_else(PoisonError::into_inner) = inner.high_watermarks();
    let dead_letters = inner.take_dead_letters();
    let skipped = inner.take_skipped();
    let positions = inner.positions();
    if matches!(poll, Ok(SourcePoll::Pending)) && dead_letters.is_empty() && skipped.is_empty() && positions == *sent {
        shared.idle.store(true, Ordering::Release);
        std::thread::sleep(IDLE_PAUSE);
        return true;
    }
    shared.idle.store(false, Ordering::Release);
    let end = !matches!(poll, Ok(SourcePoll::Batch { .. } | SourcePoll::Pending));
    *sent = positions.clone();
    let polled = Polled {
        poll,
        positions,
        finished: (0..partitions).map(|p| inner.partition_finished(p)).collect(),
        dead_letters,
        skipped,
    };
    // Blocks while the channel is full; fails once the `ReadAhead` is gone.
    tx.send(polled).is_ok() && !end
}

impl SourceReader for ReadAhead {
    /// As of the last batch taken (a Kafka reader's discovered partitions count from the batch
    /// after they were found: positions that differ in length are sent even without rows).
    fn num_partitions(&self) -> usize {
        self.positions.len()
    }

    fn poll(&mut self, _max_rows: usize) -> Result<SourcePoll> {
        if self.ended {
            return Ok(SourcePoll::Finished);
        }
        let batches = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        let start = Instant::now();
        let polled = loop {
            match batches.recv_timeout(Duration::from_millis(1)) {
                Ok(polled) => break polled,
                Err(RecvTimeoutError::Timeout) => {
                    if self.shared.idle.load(Ordering::Acquire) || start.elapsed() >= MAX_WAIT {
                        return Ok(SourcePoll::Pending);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(WeirError::internal("a source's reading thread ended; resuming from the last commit"))
                }
            }
        };
        drop(batches);
        self.positions = polled.positions;
        self.finished = polled.finished;
        self.dead_letters.extend(polled.dead_letters);
        self.skipped.extend(polled.skipped);
        self.ended = matches!(polled.poll, Ok(SourcePoll::Finished));
        polled.poll
    }

    fn positions(&self) -> Vec<u64> {
        self.positions.clone()
    }

    fn partition_finished(&self, p: usize) -> bool {
        self.finished.get(p).copied().unwrap_or(false)
    }

    fn bounded(&self) -> bool {
        self.bounded
    }

    fn take_dead_letters(&mut self) -> Vec<DeadLetter> {
        std::mem::take(&mut self.dead_letters)
    }

    fn take_skipped(&mut self) -> Vec<(usize, u64)> {
        std::mem::take(&mut self.skipped)
    }

    fn on_committed(&mut self, positions: &[u64]) {
        *self.shared.committed.lock().unwrap_or_else(PoisonError::into_inner) = Some(positions.to_vec());
    }

    fn high_watermarks(&self) -> Vec<Option<i64>> {
        self.shared.high_watermarks.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl Drop for ReadAhead {
    /// Stops the thread: the channel is closed first, so that a thread waiting to send wakes.
    /// Waits up to [`STOP_WAIT`] for it to end (it passes the last committed positions on
    /// first); a thread stuck in its reader longer (a broker that stopped answering) is left to
    /// end on its own, so that whoever drops the reader (a job restarting, the engine's source
    /// thread) goes on.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        let (_, closed) = sync_channel(0);
        drop(std::mem::replace(self.batches.get_mut().unwrap_or_else(PoisonError::into_inner), closed));
        let Some(thread) = self.thread.take() else { return };
        let start = Instant::now();
        while !thread.is_finished() {
            if start.elapsed() >= STOP_WAIT {
                tracing::warn!(
                    thread = thread.thread().name().unwrap_or("?"),
                    "a source's reading thread did not stop within {} s (its reader is waiting, maybe on a broker); left to end on its own",
                    STOP_WAIT.as_secs()
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // A panic in a reader is a bug, not input; its job resumes from the last commit.
        let _ = thread.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};

    /// A bounded reader of `rows` rows in one partition, `batch` rows per poll, whose value is
    /// the row's position; its position is the rows read.
    struct Counting {
        next: u64,
        rows: u64,
        committed: Arc<Mutex<Vec<Vec<u64>>>>,
    }

    impl SourceReader for Counting {
        fn num_partitions(&self) -> usize {
            1
        }
        fn poll(&mut self, max_rows: usize) -> Result<SourcePoll> {
            if self.next == self.rows {
                return Ok(SourcePoll::Finished);
            }
            let end = (self.next + max_rows as u64).min(self.rows);
            let values: Int64Array = (self.next as i64..end as i64).collect();
            self.next = end;
            let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, true)]));
            let batch = RecordBatch::try_new(schema, vec![Arc::new(values)])?;
            Ok(SourcePoll::Batch { partition: 0, batch, ops: None })
        }
        fn positions(&self) -> Vec<u64> {
            vec![self.next]
        }
        fn partition_finished(&self, _: usize) -> bool {
            self.next == self.rows
        }
        fn bounded(&self) -> bool {
            true
        }
        fn on_committed(&mut self, positions: &[u64]) {
            self.committed.lock().unwrap().push(positions.to_vec());
        }
    }

    #[test]
    fn positions_are_those_after_the_last_batch_taken_not_the_last_read() -> Result<()> {
        let committed = Arc::new(Mutex::new(Vec::new()));
        let inner = Counting { next: 0, rows: 100, committed: Arc::clone(&committed) };
        let mut reader = ReadAhead::spawn(Box::new(inner), "test-read-ahead".into(), 10)?;
        assert_eq!(reader.positions(), vec![0]);
        let mut seen = Vec::new();
        loop {
            match reader.poll(10)? {
                SourcePoll::Batch { batch, .. } => {
                    let values = batch.column(0).as_any().downcast_ref::<Int64Array>().expect("BIGINT");
                    seen.extend(values.values().iter().copied());
                    // The thread may be batches ahead; the position is after what was taken.
                    assert_eq!(reader.positions(), vec![seen.len() as u64]);
                    assert_eq!(reader.partition_finished(0), seen.len() == 100);
                }
                SourcePoll::Pending => {}
                SourcePoll::Finished => break,
                SourcePoll::Failed(e) => panic!("{e}"),
            }
        }
        assert_eq!(seen, (0..100).collect::<Vec<i64>>());
        assert!(matches!(reader.poll(10)?, SourcePoll::Finished));
        Ok(())
    }

    #[test]
    fn positions_committed_after_the_input_ended_reach_the_reader_by_the_drop_at_the_latest() -> Result<()> {
        let committed = Arc::new(Mutex::new(Vec::new()));
        let inner = Counting { next: 0, rows: 5, committed: Arc::clone(&committed) };
        let mut reader = ReadAhead::spawn(Box::new(inner), "test-read-ahead".into(), 10)?;
        while !matches!(reader.poll(10)?, SourcePoll::Finished) {}
        reader.on_committed(&[5]);
        drop(reader);
        assert_eq!(committed.lock().unwrap().last(), Some(&vec![5]));
        Ok(())
    }

    #[test]
    fn committed_positions_reach_the_reader_and_dropping_stops_its_thread_waiting_on_a_full_channel() -> Result<()> {
        let committed = Arc::new(Mutex::new(Vec::new()));
        let inner = Counting { next: 0, rows: u64::MAX, committed: Arc::clone(&committed) };
        let mut reader = ReadAhead::spawn(Box::new(inner), "test-read-ahead".into(), 1)?;
        assert!(matches!(reader.poll(1)?, SourcePoll::Batch { .. }));
        reader.on_committed(&[1]);
        // Until the thread has polled again it holds the positions; a full channel stops it
        // after at most one more poll.
        let deadline = Instant::now() + Duration::from_secs(10);
        while committed.lock().unwrap().is_empty() {
            assert!(Instant::now() < deadline, "the committed positions never reached the reader");
            assert!(matches!(reader.poll(1)?, SourcePoll::Batch { .. }));
        }
        assert_eq!(committed.lock().unwrap()[0], vec![1]);
        drop(reader);
        Ok(())
    }

    /// A reader that finds a second partition after its first poll and has nothing to read:
    /// every poll is `Pending`.
    struct Growing {
        polls: usize,
    }

    impl SourceReader for Growing {
        fn num_partitions(&self) -> usize {
            if self.polls > 0 { 2 } else { 1 }
        }
        fn poll(&mut self, _: usize) -> Result<SourcePoll> {
            self.polls += 1;
            Ok(SourcePoll::Pending)
        }
        fn positions(&self) -> Vec<u64> {
            vec![7; self.num_partitions()]
        }
        fn partition_finished(&self, _: usize) -> bool {
            false
        }
        fn bounded(&self) -> bool {
            false
        }
    }

    #[test]
    fn partitions_the_reader_finds_count_once_a_poll_brings_them_without_rows() -> Result<()> {
        let mut reader = ReadAhead::spawn(Box::new(Growing { polls: 0 }), "test-read-ahead".into(), 10)?;
        assert_eq!((reader.num_partitions(), reader.positions()), (1, vec![7]));
        let deadline = Instant::now() + Duration::from_secs(10);
        while reader.num_partitions() == 1 {
            assert!(Instant::now() < deadline, "the second partition never showed");
            assert!(matches!(reader.poll(10)?, SourcePoll::Pending));
        }
        assert_eq!(reader.positions(), vec![7, 7]);
        assert!(!reader.partition_finished(1));
        Ok(())
    }
}
