//! The operator trait: what every stream operator implements.
//!
//! Operators are push-based and batch-at-a-time. The defaults here are the pass-through ones,
//! so an operator implements only what it needs.

use crate::error::Result;
use crate::runtime::changelog::StreamChunk;
use crate::state::{EpochWrites, StateTable, Store};

thread_local! {
    static CURRENT_WATERMARK: std::cell::Cell<Option<i64>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with `watermark_ms` as the value of `CURRENT_WATERMARK(..)` on this thread (the
/// evaluating operator's input watermark).
pub fn with_current_watermark<R>(watermark_ms: Option<i64>, f: impl FnOnce() -> R) -> R {
    let before = CURRENT_WATERMARK.with(|c| c.replace(watermark_ms));
    let out = f();
    CURRENT_WATERMARK.with(|c| c.set(before));
    out
}

/// The watermark published by [`with_current_watermark`] on this thread, if any.
pub fn current_watermark() -> Option<i64> {
    CURRENT_WATERMARK.with(|c| c.get())
}

/// What an operator may read while processing: the committed state store.
pub struct OpContext<'a> {
    pub store: &'a Store,
}

/// A stream operator.
pub trait Operator: Send + Sync {
    /// The operator's name, as in EXPLAIN ("Project", "GroupAggregate", ...).
    fn name(&self) -> &'static str;

    /// The stable names of this operator's state tables (renaming one is a migration).
    fn state_tables(&self) -> &'static [&'static str] {
        &[]
    }

    /// This operator's state tables with their stable names (`values/0`, ...), for
    /// `weir_state_tables`.
    fn state(&self) -> Vec<(String, &StateTable)> {
        Vec::new()
    }

    /// Called once when the job is created (not when it restarts): what the operator emits
    /// before any input, such as a global aggregate's first row.
    fn on_create(&mut self, _ctx: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        Ok(None)
    }

    /// Processes one changelog chunk arriving on input `input`, returning the chunk to send
    /// downstream, if any.
    fn process_batch(
        &mut self,
        input: usize,
        chunk: StreamChunk,
        ctx: &OpContext<'_>,
    ) -> Result<Option<StreamChunk>>;

    /// Handles a watermark (event time, ms since the epoch) arriving on input `input`: returns
    /// what the operator emits because of it (windows it closes) and the watermark to send on,
    /// if any. The default forwards it unchanged.
    fn on_watermark(
        &mut self,
        _input: usize,
        watermark_ms: i64,
        _ctx: &OpContext<'_>,
    ) -> Result<(Option<StreamChunk>, Option<i64>)> {
        Ok((None, Some(watermark_ms)))
    }

    /// Rows this operator dropped because they were late (event-time operators only).
    fn num_late_rows(&self) -> u64 {
        0
    }

    /// For an event-time operator, its current watermark (ms; `None` before the first);
    /// `None` for the others. Shown in `weir_operator_watermarks`.
    fn event_time_watermark(&self) -> Option<Option<i64>> {
        None
    }

    /// The late input rows dropped since the last call, with the watermark that made them
    /// late (ms), for a table's late-row side table.
    fn take_late_rows(&mut self) -> Vec<(arrow::array::RecordBatch, i64)> {
        Vec::new()
    }

    /// For an operator a job runs as parallel instances behind a hash exchange
    /// ([`crate::plan::Exchange::Hash`]): the key group of each row of `chunk` arriving on
    /// `input` ([`key_group`] of the encoded partition key its state keys begin with), so each
    /// row reaches the instance that owns its state.
    ///
    /// # Errors
    /// `Internal` for an operator that is not keyed; evaluation errors of the key expressions.
    ///
    /// [`key_group`]: crate::state::key_group::key_group
    fn key_groups(&self, _input: usize, _chunk: &StreamChunk) -> Result<Vec<u16>> {
        Err(crate::error::WeirError::internal(format!("{} is not keyed: it cannot run behind a hash exchange", self.name())))
    }

    /// Hands this epoch's state writes to `writes` (never to RocksDB directly).
    fn on_barrier(&mut self, _writes: &mut EpochWrites, _ctx: &OpContext<'_>) -> Result<()> {
        Ok(())
    }

    /// Called after the epoch whose writes [`Operator::on_barrier`] gave is committed, as epoch
    /// number `epoch`: the second phase of a two-phase sink (an exactly-once Kafka sink commits
    /// its transaction here), a view's change feed publishing the epoch's changes. It cannot
    /// fail the commit, which is done: a sink that cannot finish keeps the failure and returns
    /// it from its next `process_batch` or `on_barrier`, so the job recovers from the last
    /// commit, whose writes say what to do again.
    fn on_committed(&mut self, _epoch: u64) {}

    /// The failure [`Operator::on_committed`] kept, if any: the job is to recover from the last
    /// commit before it takes part in another epoch (a job that shares its epochs with others
    /// is taken out of them first, so their commits go on without it).
    fn failure(&self) -> Option<String> {
        None
    }

    /// Whether the job may go on with the next epoch's rows while this epoch commits on
    /// another thread ([`crate::state::EpochWrites::committed_behind`]), `on_committed` called
    /// only later. True unless what `on_committed` does covers the operator's work up to the
    /// call rather than up to the barrier: an exactly-once Kafka sink's open transaction
    /// holds every message sent since the last commit.
    fn commits_behind(&self) -> bool {
        true
    }
}
