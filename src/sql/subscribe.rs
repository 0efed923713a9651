//! `SUBSCRIBE`: a relation's changes as they commit, and cursors (`DECLARE`, `FETCH`, `CLOSE`)
//! over subscriptions and queries.
//!
//! `SUBSCRIBE [TO] name [WITH (SNAPSHOT = bool, PROGRESS [= bool])]` follows a materialized
//! view or a plain table, as Materialize's `SUBSCRIBE` does; `SUBSCRIBE [TO] (query) ...`
//! follows a query, run as a temporary materialized view (`weir_subscribe_...`, listed by
//! `SHOW JOBS` meanwhile) that is dropped when the subscription ends. Its rows are
//!
//! | column | type | |
//! |---|---|---|
//! | `weir_epoch` | bigint | the epoch the change committed in (the snapshot's: the epoch it was read at) |
//! | `weir_progressed` | boolean | only WITH (PROGRESS): true on a progress row |
//! | `weir_diff` | bigint | +1: the row entered the relation; -1: it left (an update is both) |
//! | the relation's columns | | |
//!
//! First, unless `SNAPSHOT = false`, every row of the relation at epoch E with diff +1; then
//! every committed epoch after E that changed it, in epoch order, each change once. Diffs, not
//! ops (RisingWave's `op` column): summing a row's diffs gives the relation at any epoch, and
//! the changes of one epoch are one atomic set, in no order that matters (Materialize's and
//! Differential Dataflow's updates). With `PROGRESS`, a row with `weir_progressed = true`, a
//! NULL diff and NULL columns follows the snapshot and each epoch the relation's job
//! committed: every change up to and including that epoch has been sent.
//!
//! Delivery: over the simple protocol each epoch's rows are flushed as they come (the
//! statement runs until cancelled, the client leaves, or the subscription ends with an error);
//! `COPY (SUBSCRIBE ...) TO STDOUT` streams them as COPY text (psql prints them as they come);
//! `DECLARE c CURSOR FOR SUBSCRIBE ...` then `FETCH n c [WITH (timeout = '1s')]` hands them out
//! in pieces, for drivers that cannot stream (in a transaction block, as in Postgres, unless
//! `WITH HOLD`). A subscriber that falls behind by more than
//! [`crate::runtime::feed::MAX_QUEUED_ROWS`] rows ends with an error instead of holding back
//! the job; so does one whose relation is dropped. A subscription does not survive a restart of
//! the server: subscribe again (with a snapshot) after one.

use std::collections::VecDeque;
use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, BooleanArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::error::{ErrorKind, Result, WeirError};
use crate::runtime::feed::{FeedEnd, FeedReader};

/// The name of a subscription's epoch column.
pub const EPOCH_COLUMN: &str = "weir_epoch";
/// The name of a subscription's progress column (`WITH (PROGRESS)`).
pub const PROGRESSED_COLUMN: &str = "weir_progressed";

/// A running subscription: its snapshot, then its relation's epochs; see the module docs.
pub struct Subscription {
    relation: String,
    /// The rows' schema.
    schema: SchemaRef,
    /// Batches ready to hand out: the snapshot's, or an epoch's.
    ready: VecDeque<RecordBatch>,
    reader: FeedReader,
    /// Epochs up to this one are in the snapshot.
    after: u64,
    progress: bool,
    /// What lives as long as the subscription: a `SUBSCRIBE (query)`'s temporary view.
    owned: Option<Box<dyn Send + Sync>>,
    /// The session time zone its TIMESTAMP_LTZ columns are shown in.
    zone: crate::plan::time_zone::Zone,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Subscription({})", self.relation)
    }
}

impl Subscription {
    /// A subscription to `relation` whose changes `reader` gets from epoch `epoch + 1` on,
    /// starting with `snapshot` (the relation's rows at `epoch`; none without SNAPSHOT).
    pub fn new(relation: &str, reader: FeedReader, epoch: u64, snapshot: Vec<RecordBatch>, progress: bool) -> Result<Self> {
        let schema = output_schema(reader.schema(), progress);
        let mut subscription =
            Self { relation: relation.to_string(), schema, ready: VecDeque::new(), reader, after: epoch, progress, owned: None, zone: Default::default() };
        let types: Vec<DataType> = subscription.reader.schema().fields().iter().skip(1).map(|f| f.data_type().clone()).collect();
        for batch in snapshot {
            let diffs = Int64Array::from(vec![1; batch.num_rows()]);
            let mut columns: Vec<ArrayRef> = vec![Arc::new(diffs)];
            // As the view's job emits them (the stored types are the same but for widths).
            for (column, wanted) in batch.columns().iter().zip(&types) {
                columns.push(if column.data_type() == wanted { Arc::clone(column) } else { arrow::compute::cast(column, wanted)? });
            }
            subscription.push(epoch, &columns)?;
        }
        subscription.push_progress(epoch)?;
        Ok(subscription)
    }

    /// This subscription, keeping `owned` until it is dropped (a temporary view, dropped then).
    pub fn owning(mut self, owned: Box<dyn Send + Sync>) -> Self {
        self.owned = Some(owned);
        self
    }

    /// The rows' schema.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Shows its TIMESTAMP_LTZ columns in `zone` from now on (the schema too).
    pub fn show_in(&mut self, zone: crate::plan::time_zone::Zone) {
        self.zone = zone;
        self.schema = crate::plan::time_zone::schema_shown_in(&self.schema, zone);
    }

    /// The next batch of rows, waiting for one.
    ///
    /// # Errors
    /// `Execution` when the subscription ends: it fell behind, or its relation was dropped.
    pub async fn next(&mut self) -> Result<RecordBatch> {
        loop {
            if let Some(batch) = self.ready.pop_front() {
                return Ok(crate::plan::time_zone::batch_shown_in(&batch, self.zone)?);
            }
            let epoch = self.reader.next().await.map_err(|end| self.ended(end))?;
            if epoch.epoch <= self.after {
                continue;
            }
            for changes in &epoch.changes {
                if changes.num_rows() > 0 {
                    self.push(epoch.epoch, changes.columns())?;
                }
            }
            self.push_progress(epoch.epoch)?;
        }
    }

    /// Up to `limit` rows (all ready ones: `None`), waiting until at least one is ready, or
    /// until `timeout` (then possibly none).
    ///
    /// # Errors
    /// As [`Subscription::next`].
    pub async fn fetch(&mut self, limit: Option<u64>, timeout: Option<std::time::Duration>) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::new();
        let mut rows = 0u64;
        let wanted = limit.unwrap_or(u64::MAX);
        if self.ready.is_empty() && wanted > 0 {
            let first = match timeout {
                Some(t) => match tokio::time::timeout(t, self.next()).await {
                    Ok(batch) => Some(batch?),
                    Err(_) => None,
                },
                None => Some(self.next().await?),
            };
            if let Some(batch) = first {
                self.ready.push_front(batch);
            }
        }
        while rows < wanted {
            let Some(batch) = self.ready.pop_front() else { break };
            let n = batch.num_rows() as u64;
            if rows + n <= wanted {
                rows += n;
                out.push(batch);
            } else {
                let take = (wanted - rows) as usize;
                out.push(batch.slice(0, take));
                self.ready.push_front(batch.slice(take, batch.num_rows() - take));
                rows = wanted;
            }
        }
        Ok(out)
    }

    /// Queues rows of epoch `epoch`: `columns` are the diff, then the relation's columns.
    fn push(&mut self, epoch: u64, columns: &[ArrayRef]) -> Result<()> {
        let n = columns.first().map_or(0, |c| c.len());
        let mut all: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![epoch as i64; n]))];
        if self.progress {
            all.push(Arc::new(BooleanArray::from(vec![false; n])));
        }
        all.extend(columns.iter().cloned());
        self.ready.push_back(RecordBatch::try_new(Arc::clone(&self.schema), all)?);
        Ok(())
    }

    /// Queues the progress row of epoch `epoch`, WITH (PROGRESS).
    fn push_progress(&mut self, epoch: u64) -> Result<()> {
        if !self.progress {
            return Ok(());
        }
        let mut all: Vec<ArrayRef> =
            vec![Arc::new(Int64Array::from(vec![epoch as i64])), Arc::new(BooleanArray::from(vec![true]))];
        for field in self.schema.fields().iter().skip(2) {
            all.push(new_null_array(field.data_type(), 1));
        }
        self.ready.push_back(RecordBatch::try_new(Arc::clone(&self.schema), all)?);
        Ok(())
    }

    fn ended(&self, end: FeedEnd) -> WeirError {
        let why = match end {
            FeedEnd::FellBehind => format!(
                "SUBSCRIBE to {}: the client fell behind by more than {} rows of changes, so the subscription ended; subscribe again",
                self.relation,
                crate::runtime::feed::MAX_QUEUED_ROWS
            ),
            FeedEnd::Closed(why) => format!("SUBSCRIBE to {} ended: {why}", self.relation),
        };
        WeirError::execution(why)
    }
}

/// A subscription's row schema from its feed's diff rows' (`weir_diff`, the columns).
pub fn output_schema(diff_rows: &SchemaRef, progress: bool) -> SchemaRef {
    let mut fields = vec![Field::new(EPOCH_COLUMN, DataType::Int64, false)];
    if progress {
        fields.push(Field::new(PROGRESSED_COLUMN, DataType::Boolean, false));
    }
    for (i, f) in diff_rows.fields().iter().enumerate() {
        // The diff is NULL on progress rows.
        fields.push(if i == 0 { f.as_ref().clone().with_nullable(progress) } else { f.as_ref().clone() });
    }
    Arc::new(Schema::new(fields))
}

/// A declared cursor: a query's rows, or a subscription.
#[derive(Debug)]
pub enum Cursor {
    Rows { schema: SchemaRef, ready: VecDeque<RecordBatch> },
    Subscription(Box<Subscription>),
}

impl Cursor {
    /// The rows FETCH returns.
    pub fn schema(&self) -> SchemaRef {
        match self {
            Cursor::Rows { schema, .. } => Arc::clone(schema),
            Cursor::Subscription(s) => Arc::clone(s.schema()),
        }
    }

    /// The next `limit` rows (all: `None`); a subscription waits for one row at least, or for
    /// `timeout`.
    ///
    /// # Errors
    /// A subscription's end.
    pub async fn fetch(&mut self, limit: Option<u64>, timeout: Option<std::time::Duration>) -> Result<Vec<RecordBatch>> {
        match self {
            Cursor::Subscription(s) => s.fetch(limit, timeout).await,
            Cursor::Rows { ready, .. } => {
                let wanted = limit.unwrap_or(u64::MAX);
                let mut rows = 0u64;
                let mut out = Vec::new();
                while rows < wanted {
                    let Some(batch) = ready.pop_front() else { break };
                    let n = batch.num_rows() as u64;
                    if rows + n <= wanted {
                        rows += n;
                        out.push(batch);
                    } else {
                        let take = (wanted - rows) as usize;
                        out.push(batch.slice(0, take));
                        ready.push_front(batch.slice(take, batch.num_rows() - take));
                        rows = wanted;
                    }
                }
                Ok(out)
            }
        }
    }
}

/// A session's declared cursors, by name; shared by the session's clones (they are one
/// connection's).
#[derive(Debug, Default, Clone)]
pub struct Cursors {
    open: Arc<tokio::sync::Mutex<std::collections::BTreeMap<String, (Cursor, bool)>>>,
}

impl Cursors {
    /// Declares `name` (`hold`: it outlives its transaction block).
    ///
    /// # Errors
    /// `InvalidCursor` when `name` is declared already (Postgres's 42P03 is "duplicate cursor";
    /// Weir reports it as 34000 with the name).
    pub async fn declare(&self, name: &str, cursor: Cursor, hold: bool) -> Result<()> {
        let mut open = self.open.lock().await;
        if open.contains_key(name) {
            return Err(WeirError::new(ErrorKind::InvalidCursor(format!("cursor \"{name}\" already exists"))));
        }
        open.insert(name.to_string(), (cursor, hold));
        Ok(())
    }

    /// FETCH from `name`: its rows' schema and the rows.
    ///
    /// # Errors
    /// `InvalidCursor` for a name not declared; the cursor's.
    pub async fn fetch(&self, name: &str, limit: Option<u64>, timeout: Option<std::time::Duration>) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let mut open = self.open.lock().await;
        let (cursor, _) = open
            .get_mut(name)
            .ok_or_else(|| WeirError::new(ErrorKind::InvalidCursor(format!("cursor \"{name}\" does not exist"))))?;
        let rows = cursor.fetch(limit, timeout).await?;
        Ok((cursor.schema(), rows))
    }

    /// The rows' schema of cursor `name`, for Describe of a FETCH.
    ///
    /// # Errors
    /// `InvalidCursor` for a name not declared.
    pub async fn schema(&self, name: &str) -> Result<SchemaRef> {
        let open = self.open.lock().await;
        let (cursor, _) = open
            .get(name)
            .ok_or_else(|| WeirError::new(ErrorKind::InvalidCursor(format!("cursor \"{name}\" does not exist"))))?;
        Ok(cursor.schema())
    }

    /// CLOSE `name` (all: `None`).
    ///
    /// # Errors
    /// `InvalidCursor` for a name not declared.
    pub async fn close(&self, name: Option<&str>) -> Result<()> {
        let mut open = self.open.lock().await;
        match name {
            None => open.clear(),
            Some(name) => {
                if open.remove(name).is_none() {
                    return Err(WeirError::new(ErrorKind::InvalidCursor(format!("cursor \"{name}\" does not exist"))));
                }
            }
        }
        Ok(())
    }

    /// Closes the cursors declared without `WITH HOLD` (their transaction block ended).
    pub async fn end_block(&self) {
        self.open.lock().await.retain(|_, (_, hold)| *hold);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::feed::{with_diffs, Feeds};
    use arrow::array::Int32Array;

    fn ints(batches: &[RecordBatch], col: usize) -> Vec<Option<i64>> {
        batches
            .iter()
            .flat_map(|b| {
                let c = arrow::compute::cast(b.column(col), &DataType::Int64).expect("cast");
                let a = c.as_any().downcast_ref::<Int64Array>().expect("ints").clone();
                (0..a.len()).map(move |i| a.is_valid(i).then(|| a.value(i))).collect::<Vec<_>>()
            })
            .collect()
    }

    /// A subscription hands out its snapshot at epoch E, then the epochs after E (not E
    /// itself, which the snapshot holds), with progress rows; FETCH takes rows in pieces and
    /// times out with none when nothing comes.
    #[tokio::test]
    async fn a_subscription_is_its_snapshot_then_the_later_epochs() -> Result<()> {
        let relation = Arc::new(Schema::new(vec![Field::new("x", DataType::Int32, false)]));
        let feeds = Feeds::default();
        let feed = feeds.of("v", &relation);
        let reader = feed.subscribe();
        let snapshot = RecordBatch::try_new(Arc::clone(&relation), vec![Arc::new(Int32Array::from(vec![1, 2]))])?;
        let mut sub = Subscription::new("v", reader, 7, vec![snapshot], true)?;
        let diff = |d: Vec<i64>, x: Vec<i32>| with_diffs(feed.schema(), Int64Array::from(d), vec![Arc::new(Int32Array::from(x))]);
        feed.publish(7, vec![diff(vec![1], vec![99])?]);
        feed.publish(8, vec![diff(vec![-1, 1], vec![1, 3])?]);
        feed.publish(9, vec![]);
        let mut rows = Vec::new();
        for _ in 0..5 {
            rows.push(sub.next().await?);
        }
        // Snapshot, its progress row, epoch 8's changes and progress, epoch 9's progress.
        assert_eq!(ints(&rows, 0), [Some(7), Some(7), Some(7), Some(8), Some(8), Some(8), Some(9)]);
        assert_eq!(ints(&rows, 2), [Some(1), Some(1), None, Some(-1), Some(1), None, None]);
        assert_eq!(ints(&rows, 3), [Some(1), Some(2), None, Some(1), Some(3), None, None]);

        let reader = feed.subscribe();
        let mut cursor = Cursor::Subscription(Box::new(Subscription::new("v", reader, 9, vec![], false)?));
        feed.publish(10, vec![diff(vec![1, 1, 1], vec![4, 5, 6])?]);
        let first = cursor.fetch(Some(2), None).await?;
        assert_eq!(ints(&first, 2), [Some(4), Some(5)]);
        let rest = cursor.fetch(None, Some(std::time::Duration::from_millis(10))).await?;
        assert_eq!(ints(&rest, 2), [Some(6)]);
        let none = cursor.fetch(Some(1), Some(std::time::Duration::from_millis(10))).await?;
        assert!(none.is_empty());
        Ok(())
    }
}
