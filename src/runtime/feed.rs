//! Change feeds: each relation's committed changes, handed to its subscribers (`SUBSCRIBE`).
//!
//! A relation's writer (the [`Materialize`](crate::runtime::operators::materialize::Materialize)
//! at the root of a view's job, or the engine for a plain table) publishes, after each epoch it
//! commits, the relation's changes in that epoch as *diff rows*: a `weir_diff` column (+1 for
//! a row that enters the relation, -1 for one that leaves it; an update is a -1 of the old row
//! and a +1 of the new), then the relation's columns. Summing the diffs of a row over all
//! epochs gives the relation (Materialize's `SUBSCRIBE` output; Differential Dataflow's
//! updates).
//!
//! Nothing is buffered while a relation has no subscriber. Each subscriber has a bounded queue
//! ([`MAX_QUEUED_ROWS`] rows, [`MAX_QUEUED_EPOCHS`] epochs): a subscriber that falls that far
//! behind is dropped, and its reader ends with [`FeedEnd::FellBehind`], so a slow client never
//! holds back the job or the memory of the server.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::error::Result;
use crate::runtime::changelog::StreamChunk;

/// The name of the diff column of a change feed's rows.
pub const DIFF_COLUMN: &str = "weir_diff";

/// The most rows a subscriber's queue holds before it is dropped.
pub const MAX_QUEUED_ROWS: usize = 1_000_000;

/// The most epochs a subscriber's queue holds before it is dropped.
pub const MAX_QUEUED_EPOCHS: usize = 4096;

/// One epoch's changes of a relation: diff rows (see the module docs), possibly none (the
/// epoch committed without changing it).
#[derive(Debug, Clone)]
pub struct FeedEpoch {
    pub epoch: u64,
    pub changes: Vec<RecordBatch>,
}

/// Why a feed reader gets no more epochs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedEnd {
    /// More than [`MAX_QUEUED_ROWS`] rows or [`MAX_QUEUED_EPOCHS`] epochs waited for it.
    FellBehind,
    /// The relation was dropped (or its job stopped): the message says which.
    Closed(String),
}

/// The change feeds of a database's relations, by name.
#[derive(Default)]
pub struct Feeds {
    feeds: Mutex<HashMap<String, Arc<ChangeFeed>>>,
}

impl Feeds {
    /// The feed of relation `name`, whose rows are `schema`, made at the first ask.
    pub fn of(&self, name: &str, schema: &SchemaRef) -> Arc<ChangeFeed> {
        let mut feeds = self.feeds.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(feeds.entry(name.to_string()).or_insert_with(|| Arc::new(ChangeFeed::new(schema))))
    }

    /// The feed of `name` if it has one.
    pub fn get(&self, name: &str) -> Option<Arc<ChangeFeed>> {
        self.feeds.lock().unwrap_or_else(PoisonError::into_inner).get(name).cloned()
    }

    /// Ends the feed of `name` (dropped relation): its readers end with `why`.
    pub fn close(&self, name: &str, why: &str) {
        let feed = self.feeds.lock().unwrap_or_else(PoisonError::into_inner).remove(name);
        if let Some(feed) = feed {
            feed.close(why);
        }
    }
}

/// One relation's change feed.
pub struct ChangeFeed {
    /// Diff rows' schema: [`DIFF_COLUMN`], then the relation's columns.
    schema: SchemaRef,
    subscribers: Mutex<Vec<Subscriber>>,
    /// `subscribers.len()`, read without the lock on every chunk the writer sees.
    active: AtomicUsize,
}

/// The sending side of a subscriber's queue.
struct Subscriber {
    sender: tokio::sync::mpsc::Sender<FeedEpoch>,
    queued_rows: Arc<AtomicUsize>,
    end: Arc<Mutex<Option<FeedEnd>>>,
}

/// A subscriber's reading side: epochs in commit order, each once.
pub struct FeedReader {
    receiver: tokio::sync::mpsc::Receiver<FeedEpoch>,
    queued_rows: Arc<AtomicUsize>,
    end: Arc<Mutex<Option<FeedEnd>>>,
    schema: SchemaRef,
}

impl ChangeFeed {
    fn new(relation: &SchemaRef) -> Self {
        Self { schema: diff_schema(relation), subscribers: Mutex::new(Vec::new()), active: AtomicUsize::new(0) }
    }

    /// Whether anyone reads the feed: its writer keeps an epoch's changes only then.
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire) > 0
    }

    /// The diff rows' schema.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// A new reader, getting every epoch published from now on. The caller makes sure no
    /// epoch of the relation is half applied when it subscribes (the engine is held with
    /// nothing uncommitted: see `Database::subscribe`).
    pub fn subscribe(&self) -> FeedReader {
        let (sender, receiver) = tokio::sync::mpsc::channel(MAX_QUEUED_EPOCHS);
        let queued_rows = Arc::new(AtomicUsize::new(0));
        let end = Arc::new(Mutex::new(None));
        let mut subscribers = self.subscribers.lock().unwrap_or_else(PoisonError::into_inner);
        subscribers.push(Subscriber { sender, queued_rows: Arc::clone(&queued_rows), end: Arc::clone(&end) });
        self.active.store(subscribers.len(), Ordering::Release);
        FeedReader { receiver, queued_rows, end, schema: Arc::clone(&self.schema) }
    }

    /// Hands epoch `epoch`'s changes to every reader; drops readers that left or fell behind.
    pub fn publish(&self, epoch: u64, changes: Vec<RecordBatch>) {
        let rows: usize = changes.iter().map(RecordBatch::num_rows).sum();
        let mut subscribers = self.subscribers.lock().unwrap_or_else(PoisonError::into_inner);
        subscribers.retain(|s| {
            if s.sender.is_closed() {
                return false;
            }
            if s.queued_rows.load(Ordering::Acquire) + rows > MAX_QUEUED_ROWS {
                *s.end.lock().unwrap_or_else(PoisonError::into_inner) = Some(FeedEnd::FellBehind);
                return false;
            }
            s.queued_rows.fetch_add(rows, Ordering::AcqRel);
            match s.sender.try_send(FeedEpoch { epoch, changes: changes.clone() }) {
                Ok(()) => true,
                Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {
                    *s.end.lock().unwrap_or_else(PoisonError::into_inner) = Some(FeedEnd::FellBehind);
                    false
                }
                Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
        self.active.store(subscribers.len(), Ordering::Release);
    }

    /// Publishes a changelog chunk's rows as diffs (+1 for `+I`/`+U`, -1 for `-D`/`-U`): the
    /// changes of a relation whose changelog carries whole old rows (a plain table's).
    ///
    /// # Errors
    /// Arrow's, building the batch.
    pub fn diff_rows(&self, chunk: &StreamChunk) -> Result<RecordBatch> {
        let diffs: Int64Array = chunk.ops.iter().map(|op| op.sign()).collect();
        with_diffs(&self.schema, diffs, chunk.batch.columns().to_vec())
    }

    /// Ends every reader with `why`.
    fn close(&self, why: &str) {
        let mut subscribers = self.subscribers.lock().unwrap_or_else(PoisonError::into_inner);
        for s in subscribers.drain(..) {
            *s.end.lock().unwrap_or_else(PoisonError::into_inner) = Some(FeedEnd::Closed(why.to_string()));
        }
        self.active.store(0, Ordering::Release);
    }
}

impl FeedReader {
    /// The next epoch, waiting for it; `Err` once the feed ended for this reader.
    ///
    /// # Errors
    /// Why it ended ([`FeedEnd`]).
    pub async fn next(&mut self) -> std::result::Result<FeedEpoch, FeedEnd> {
        match self.receiver.recv().await {
            Some(epoch) => {
                let rows: usize = epoch.changes.iter().map(RecordBatch::num_rows).sum();
                self.queued_rows.fetch_sub(rows, Ordering::AcqRel);
                Ok(epoch)
            }
            None => Err(self
                .end
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
                .unwrap_or_else(|| FeedEnd::Closed("the relation's job stopped".into()))),
        }
    }

    /// The diff rows' schema.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }
}

/// [`DIFF_COLUMN`] (Int64), then `relation`'s columns.
pub fn diff_schema(relation: &SchemaRef) -> SchemaRef {
    let mut fields = vec![Field::new(DIFF_COLUMN, DataType::Int64, false)];
    fields.extend(relation.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)));
    Arc::new(Schema::new(fields))
}

/// A batch of `schema` ([`diff_schema`]) from diffs and the relation's columns.
///
/// # Errors
/// Arrow's, when the columns do not fit the schema.
pub fn with_diffs(schema: &SchemaRef, diffs: Int64Array, columns: Vec<arrow::array::ArrayRef>) -> Result<RecordBatch> {
    let mut all: Vec<arrow::array::ArrayRef> = Vec::with_capacity(columns.len() + 1);
    all.push(Arc::new(diffs));
    all.extend(columns);
    Ok(RecordBatch::try_new(Arc::clone(schema), all)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Int32Array};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new("x", DataType::Int32, false)]))
    }

    fn rows(feed: &ChangeFeed, diffs: &[i64], xs: &[i32]) -> RecordBatch {
        with_diffs(feed.schema(), Int64Array::from(diffs.to_vec()), vec![Arc::new(Int32Array::from(xs.to_vec()))]).expect("batch")
    }

    /// Readers get the epochs published after they subscribed, in order; a reader that falls
    /// more than the queue behind is dropped and told so; closing ends the others.
    #[tokio::test]
    async fn readers_get_epochs_in_order_and_slow_ones_are_dropped() {
        let feeds = Feeds::default();
        let feed = feeds.of("v", &schema());
        assert!(!feed.is_active());
        feed.publish(1, vec![rows(&feed, &[1], &[10])]);
        let mut reader = feed.subscribe();
        assert!(feed.is_active());
        feed.publish(2, vec![rows(&feed, &[1, -1], &[20, 10])]);
        feed.publish(3, vec![]);
        let first = reader.next().await.expect("epoch 2");
        assert_eq!(first.epoch, 2);
        let x = first.changes[0].column(1).as_any().downcast_ref::<Int32Array>().expect("x").values().to_vec();
        assert_eq!(x, [20, 10]);
        assert_eq!(reader.next().await.expect("epoch 3").epoch, 3);

        let mut slow = feed.subscribe();
        let big: Vec<i64> = vec![1; MAX_QUEUED_ROWS / 2 + 1];
        let xs: Vec<i32> = vec![0; big.len()];
        feed.publish(4, vec![rows(&feed, &big, &xs)]);
        feed.publish(5, vec![rows(&feed, &big, &xs)]);
        assert_eq!(slow.next().await.expect("epoch 4").epoch, 4);
        assert_eq!(slow.next().await.expect_err("dropped"), FeedEnd::FellBehind);
        // The first reader has not read epoch 4 either: it is dropped the same way.
        assert_eq!(reader.next().await.expect("epoch 4").epoch, 4);
        assert_eq!(reader.next().await.expect_err("dropped"), FeedEnd::FellBehind);

        let mut late = feed.subscribe();
        feeds.close("v", "materialized view v was dropped");
        assert_eq!(late.next().await.expect_err("closed"), FeedEnd::Closed("materialized view v was dropped".into()));
        assert!(!feed.is_active());
    }
}
