//! A job run as a pipeline: each of its operators (all the operator's instances) works on a
//! thread of its own, fed through bounded channels by the operators below it, so the stages of
//! a job work on successive source batches at once instead of taking turns on one thread.
//!
//! # Steps
//! Every batch or watermark the [`Feeder`] takes is one *step*. Every operator sends the one
//! above it exactly one packet per step, what it emitted for that step (possibly nothing; a
//! reused sub-plan sends the same packet to each operator it feeds, in EXPLAIN's order), and an
//! operator with several inputs takes a step's packets in input order. So each operator sees the
//! same changes in the same order as [`Job::push`] and [`Job::on_watermark`] hand them to it (the
//! leaves reading a relation in plan order, the changes of each going up to the root before the
//! next leaf's): the state and the output are those of the synchronous run, row for row. An
//! operator's instances still run side by side on the worker pool within a step, and the
//! exchange into an operator (merging its input's instances, splitting by key group) runs on
//! that operator's thread.
//!
//! # Backpressure and barriers
//! A channel holds up to [`MAX_PACKETS`] packets and [`MAX_BYTES`] of rows (always at least
//! one packet): a slow stage holds back the stages below it and, in the end, the feeder. Steps
//! that send nothing cost no bytes, so while a stage works through a burst (the rows of a
//! window that fired) the stages below it go on with the next steps instead of waiting.
//!
//! An epoch is cut by a barrier the feeder injects at the leaves ([`Feeder::barrier`], Flink's
//! asynchronous barrier snapshots): it is a step of its own, so an operator with several inputs
//! has it from all of them at once (aligned by the steps), hands its writes for the epoch
//! ([`crate::runtime::Operator::on_barrier`]) and its figures to the barrier and sends the
//! barrier on, then goes on with the next epoch's rows while the stages above are still before
//! the barrier. When the root has passed it, the barrier holds every operator's writes, all of
//! the same input, and the root hands them to the caller's commit. That the epoch committed
//! reaches every operator the same way ([`Feeder::committed`]). [`Job::pipelined`] returns once
//! the feeder is done and every stage has taken every step, so the caller can also checkpoint
//! the whole job between two pipelined runs.
//!
//! # What is dropped
//! The root's output (a materialization's or a sink's changelog) and the late rows the window
//! operators set aside are dropped: a pipelined job is an independent one
//! ([`crate::engine`]'s runners), which no other job reads and whose sources have no late-rows
//! table.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use super::{split_source, Job, Node, NodeStats};
use crate::error::{Result, WeirError};
use crate::runtime::changelog::StreamChunk;
use crate::runtime::operator::OpContext;
use crate::state::{EpochWrites, Store};

/// Packets a channel between two stages holds before its sender waits, however small.
///
/// Measured (release, 2 cores, parallelism 2, 3 M events): with 2 packets Nexmark q5 took
/// 2.4-2.6 s, its window-keyed join (one instance busy) holding back the window aggregate
/// after every window that fired; with 64 packets, 2.1 s.
const MAX_PACKETS: usize = 64;

/// Estimated bytes of rows ([`packet_bytes`]) a channel between two stages holds before its
/// sender waits; a packet is taken whatever its size when the channel holds no rows. Bounds the
/// memory of a job's queues (without it, 64 packets of q20's bids took 1.3 GB of RSS where 2
/// took 0.75 GB).
const MAX_BYTES: u64 = 4 << 20;

/// Something a stage sends the one above it.
#[derive(Clone)]
pub(super) enum Msg {
    /// What its instances emitted, one entry per instance.
    Chunks(Vec<Option<StreamChunk>>),
    /// The watermark it sends on (ms).
    Watermark(i64),
    /// An epoch's barrier (a step of its own).
    Barrier(Arc<Barrier>),
    /// The epoch of the last barrier is committed, as this epoch number (a step of its own).
    Committed(u64),
}

/// What the root does with a barrier that every operator has passed: the epoch's writes and
/// each operator's figures at the barrier, in node order.
pub type Complete = Box<dyn FnOnce(EpochWrites, Vec<NodeStats>) + Send>;

/// An epoch's barrier on its way through a pipelined job.
pub(super) struct Barrier {
    /// The epoch's writes: the caller's, then each operator's as the barrier reaches it.
    writes: Mutex<EpochWrites>,
    /// Each node's figures at the barrier, by node index.
    stats: Mutex<Vec<Option<NodeStats>>>,
    /// Taken and called by the root.
    complete: Mutex<Option<Complete>>,
}

/// A stage's pending write bytes as of its last step, packed with the number of barriers it
/// has passed (high 24 bits), so that the feeder counts only the stages that passed the last
/// barrier it injected.
fn pack_pending(barriers: u64, bytes: u64) -> u64 {
    (barriers << 40) | bytes.min((1 << 40) - 1)
}

/// What a stage sends the one above it for one step, in order.
pub(super) type Packet = Vec<Msg>;

/// Estimated bytes of the rows in `packet`: the arrow buffers its chunks' rows take (a slice
/// counts its rows only).
fn packet_bytes(packet: &Packet) -> u64 {
    let chunks = packet.iter().filter_map(|m| match m {
        Msg::Chunks(chunks) => Some(chunks.iter().flatten()),
        _ => None,
    });
    chunks
        .flatten()
        .flat_map(|c| c.batch.columns())
        .map(|col| {
            let data = col.to_data();
            data.get_slice_memory_size().unwrap_or_else(|_| col.get_array_memory_size()) as u64
        })
        .sum()
}

/// The sending end of a channel between two stages ([`channel`]).
struct Up {
    tx: SyncSender<(Packet, u64)>,
    held: Arc<Held>,
}

/// The receiving end of a channel between two stages.
struct Down {
    rx: Receiver<(Packet, u64)>,
    held: Arc<Held>,
}

/// What a channel holds, shared by its two ends.
#[derive(Default)]
struct Held {
    state: Mutex<HeldState>,
    /// Notified when the receiver takes a packet or is gone.
    freed: Condvar,
}

#[derive(Default)]
struct HeldState {
    /// Estimated bytes of the packets sent and not yet received ([`packet_bytes`]).
    bytes: u64,
    /// The receiver is gone (its stage stopped).
    closed: bool,
}

impl Held {
    fn lock(&self) -> MutexGuard<'_, HeldState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A channel between two stages: [`MAX_PACKETS`] packets and [`MAX_BYTES`] (module docs).
fn channel() -> (Up, Down) {
    let (tx, rx) = sync_channel(MAX_PACKETS);
    let held = Arc::new(Held::default());
    (Up { tx, held: Arc::clone(&held) }, Down { rx, held })
}

impl Up {
    /// Sends `packet`, waiting while the channel is full; `Err` when the receiver is gone.
    fn send(&self, packet: Packet) -> std::result::Result<(), ()> {
        let bytes = packet_bytes(&packet);
        {
            let mut state = self.held.lock();
            while state.bytes > 0 && state.bytes + bytes > MAX_BYTES && !state.closed {
                state = self.held.freed.wait(state).unwrap_or_else(PoisonError::into_inner);
            }
            if state.closed {
                return Err(());
            }
            state.bytes += bytes;
        }
        self.tx.send((packet, bytes)).map_err(|_| ())
    }
}

impl Down {
    /// The next packet; `None` once every sender is gone.
    fn recv(&self) -> Option<Packet> {
        let (packet, bytes) = self.rx.recv().ok()?;
        self.held.lock().bytes -= bytes;
        self.held.freed.notify_all();
        Some(packet)
    }
}

impl Drop for Down {
    fn drop(&mut self) {
        self.held.lock().closed = true;
        self.held.freed.notify_all();
    }
}

/// Takes a pipelined job's input; see the module docs.
pub struct Feeder<'a> {
    /// The job's leaves, in plan order.
    leaves: Vec<Leaf<'a>>,
    /// Each stage's pending write bytes as of its last step ([`pack_pending`]).
    pending: &'a [AtomicU64],
    /// The barriers injected so far.
    barriers: u64,
    /// The job's nodes.
    nodes: usize,
    store: &'a Store,
    /// Set when a stage's thread has ended (it failed, or panicked): see [`Feeder::stopped`].
    exited: &'a AtomicBool,
}

/// A leaf of a pipelined job: run by the feeder itself (it forwards its input). A constant
/// relation's leaf (VALUES, which emitted its rows when the job was created) reads no relation
/// and sends only each step's empty packet and the barriers.
struct Leaf<'a> {
    index: usize,
    relation: Option<String>,
    node: &'a mut Node,
    /// Whether a long chunk is split over the leaf's instances ([`Job::splits_source`]).
    split: bool,
    /// To the stage above (a bare scan is never a reused sub-plan, so a leaf has one; the
    /// stages of the others may have several).
    ups: Vec<Up>,
}

impl Feeder<'_> {
    /// Pushes a change of `relation` into the job.
    ///
    /// # Errors
    /// `Internal` when a stage has stopped (it failed: [`Job::pipelined`] returns its error).
    pub fn push(&mut self, relation: &str, chunk: &StreamChunk) -> Result<()> {
        let ctx = OpContext { store: self.store };
        for leaf in &mut self.leaves {
            let mut packet = Vec::new();
            if leaf.relation.as_deref() == Some(relation) {
                leaf_rows(leaf.node, chunk, leaf.split, &ctx, &mut packet)?;
            }
            send(&leaf.ups, packet)?;
        }
        Ok(())
    }

    /// Sends the watermark `watermark_ms` of `relation` into the job.
    ///
    /// # Errors
    /// As [`Feeder::push`].
    pub fn watermark(&mut self, relation: &str, watermark_ms: i64) -> Result<()> {
        let ctx = OpContext { store: self.store };
        for leaf in &mut self.leaves {
            let mut packet = Vec::new();
            if leaf.relation.as_deref() == Some(relation) {
                on_data(leaf.node, 0, Msg::Watermark(watermark_ms), &ctx, &mut packet)?;
            }
            send(&leaf.ups, packet)?;
        }
        Ok(())
    }

    /// Injects an epoch's barrier (see the module docs) and goes on at once. `writes` holds
    /// what the caller puts in the epoch besides the operators' writes (its sources' positions
    /// as of the rows pushed so far); the root calls `complete` on its own thread once every
    /// operator has added its own. If the pipeline fails first, `complete` is dropped uncalled.
    ///
    /// # Errors
    /// As [`Feeder::push`].
    pub fn barrier(&mut self, writes: EpochWrites, complete: Complete) -> Result<()> {
        let barrier = Arc::new(Barrier {
            writes: Mutex::new(writes),
            stats: Mutex::new(vec![None; self.nodes]),
            complete: Mutex::new(Some(complete)),
        });
        self.barriers += 1;
        self.control(&Msg::Barrier(barrier))
    }

    /// Tells every operator that the epoch of the last barrier is committed as epoch `epoch`
    /// ([`crate::runtime::Operator::on_committed`]), in order with the rows around it.
    ///
    /// # Errors
    /// As [`Feeder::push`].
    pub fn committed(&mut self, epoch: u64) -> Result<()> {
        self.control(&Msg::Committed(epoch))
    }

    /// Sends a barrier or a commit notice through the leaves.
    fn control(&mut self, msg: &Msg) -> Result<()> {
        let ctx = OpContext { store: self.store };
        for leaf in &mut self.leaves {
            let up = on_control(leaf.node, leaf.index, msg, &ctx)?;
            send(&leaf.ups, up.into_iter().collect())?;
        }
        Ok(())
    }

    /// Whether a stage has stopped, which it does before the feeder is done only when it
    /// failed: the feeder learns it here while it has nothing to send (a send would fail).
    /// [`Job::pipelined`] then returns the stage's error once `feed` returns.
    pub fn stopped(&self) -> bool {
        self.exited.load(Ordering::Acquire)
    }

    /// Estimated bytes of the state writes the job's operators hold since the last barrier
    /// injected, as of each stage's last step ([`Job::pending_bytes`]); a stage that has not
    /// reached that barrier yet counts nothing.
    pub fn pending_bytes(&self) -> u64 {
        let barriers = self.barriers & ((1 << 24) - 1);
        self.pending
            .iter()
            .map(|p| p.load(Ordering::Relaxed))
            .filter(|p| p >> 40 == barriers)
            .map(|p| p & ((1 << 40) - 1))
            .sum()
    }
}

/// Runs a relation's chunk through leaf `node` (split over its instances when `split`,
/// [`Job::splits_source`]), adding what it sends up to `out`.
pub(super) fn leaf_rows(node: &mut Node, chunk: &StreamChunk, split: bool, ctx: &OpContext<'_>, out: &mut Packet) -> Result<()> {
    let lanes = split_source(chunk, node.lanes.len(), split);
    let outs = node.process(0, lanes, ctx)?;
    emit(node, outs, out);
    Ok(())
}

/// Runs rows or a watermark arriving on `input` through `node`, adding what it sends up to
/// `out` (barriers and commit notices go to [`on_control`]).
pub(super) fn on_data(node: &mut Node, input: usize, msg: Msg, ctx: &OpContext<'_>, out: &mut Packet) -> Result<()> {
    match msg {
        Msg::Chunks(below) => {
            let lanes = node.receive(input, below)?;
            let outs = node.process(input, lanes, ctx)?;
            emit(node, outs, out);
        }
        Msg::Watermark(w) => {
            let (outs, next) = node.on_watermark(input, w, ctx)?;
            emit(node, outs, out);
            out.extend(next.map(Msg::Watermark));
        }
        Msg::Barrier(_) | Msg::Committed(_) => {}
    }
    Ok(())
}

/// Adds what `node`'s instances emitted (one entry per instance) to `out`, counted, unless
/// none emitted anything.
pub(super) fn emit(node: &mut Node, outs: Vec<Option<StreamChunk>>, out: &mut Packet) {
    if node.emitted(&outs) {
        out.push(Msg::Chunks(outs));
    }
}

/// What `node` (node `index`) does with a barrier or a commit notice: hands its instances'
/// writes and its figures to the barrier, or tells its instances the epoch committed. Returns
/// what to send up: the message itself, or nothing from the root, which completes a barrier.
fn on_control(node: &mut Node, index: usize, msg: &Msg, ctx: &OpContext<'_>) -> Result<Option<Msg>> {
    match msg {
        Msg::Barrier(barrier) => {
            {
                let mut writes = barrier.writes.lock().unwrap_or_else(PoisonError::into_inner);
                for op in &mut node.lanes {
                    op.on_barrier(&mut writes, ctx)?;
                }
            }
            barrier.stats.lock().unwrap_or_else(PoisonError::into_inner)[index] = Some(node.stats(index));
            if !node.parents.is_empty() {
                return Ok(Some(Msg::Barrier(Arc::clone(barrier))));
            }
            let writes = std::mem::take(&mut *barrier.writes.lock().unwrap_or_else(PoisonError::into_inner));
            let stats = std::mem::take(&mut *barrier.stats.lock().unwrap_or_else(PoisonError::into_inner));
            if let Some(complete) = barrier.complete.lock().unwrap_or_else(PoisonError::into_inner).take() {
                complete(writes, stats.into_iter().flatten().collect());
            }
            Ok(None)
        }
        Msg::Committed(epoch) => {
            for op in &mut node.lanes {
                op.on_committed(*epoch);
            }
            Ok((!node.parents.is_empty()).then_some(Msg::Committed(*epoch)))
        }
        Msg::Chunks(_) | Msg::Watermark(_) => Ok(None),
    }
}

/// Sends `packet` to every stage above (a reused sub-plan feeds several); an error when one
/// has stopped.
fn send(ups: &[Up], packet: Packet) -> Result<()> {
    let Some((last, others)) = ups.split_last() else { return Ok(()) };
    let stopped = |()| WeirError::internal("a stage of the job's pipeline stopped");
    for up in others {
        up.send(packet.clone()).map_err(stopped)?;
    }
    last.send(packet).map_err(stopped)
}

impl Job {
    /// Runs the job as a pipeline (see the module docs) while `feed` pushes its input through
    /// the [`Feeder`]; returns what `feed` returns once every stage has processed everything
    /// it pushed.
    ///
    /// # Errors
    /// The first error of a stage (an operator's), else `feed`'s; `Internal` when a stage's
    /// thread cannot start. After an error the job's state is not to be trusted (as after a
    /// failed [`Job::push`]): the caller reloads from the last commit.
    pub fn pipelined<R>(&mut self, store: &Store, feed: impl FnOnce(&mut Feeder<'_>) -> Result<R>) -> Result<R> {
        let count = self.nodes.len();
        let splits: Vec<bool> = (0..count).map(|i| self.splits_source(i)).collect();
        let relation_of: Vec<Option<String>> = (0..count)
            .map(|i| self.sources.iter().find(|(_, leaf, _)| *leaf == i).map(|(r, _, _)| r.clone()))
            .collect();
        // One channel per edge: the child's sender, the parent's receiver for that input.
        let mut ups: Vec<Vec<Up>> = (0..count).map(|_| Vec::new()).collect();
        let mut inputs: Vec<Vec<(usize, Down)>> = (0..count).map(|_| Vec::new()).collect();
        for (child, node) in self.nodes.iter().enumerate() {
            for &(parent, input) in &node.parents {
                let (tx, rx) = channel();
                ups[child].push(tx);
                inputs[parent].push((input, rx));
            }
        }
        for receivers in &mut inputs {
            receivers.sort_by_key(|(input, _)| *input);
        }
        let pending: Vec<AtomicU64> = (0..count).map(|_| AtomicU64::new(0)).collect();
        let exited = AtomicBool::new(false);
        let exited = &exited;
        std::thread::scope(|scope| {
            let mut leaves = Vec::new();
            let mut stages = Vec::new();
            let mut spawn_error = None;
            let parts = self.nodes.iter_mut().zip(ups).zip(inputs).zip(relation_of).zip(splits).zip(&pending);
            for (index, (((((node, ups), receivers), relation), split), pending)) in parts.enumerate() {
                // A node without inputs is a leaf: a relation's scan, or a constant relation's.
                match (relation, ups) {
                    (relation, ups) if !ups.is_empty() && (relation.is_some() || receivers.is_empty()) => {
                        leaves.push(Leaf { index, relation, node, split, ups });
                    }
                    (_, ups) => {
                        let receivers = receivers.into_iter().map(|(_, rx)| rx).collect();
                        let spawned = std::thread::Builder::new()
                            .name(format!("weir-stage-{index}"))
                            .spawn_scoped(scope, move || {
                                let _exit = OnExit(exited);
                                stage((index, node), receivers, ups, pending, store)
                            });
                        match spawned {
                            Ok(handle) => stages.push(handle),
                            Err(e) => spawn_error = Some(WeirError::internal(format!("cannot start a stage's thread: {e}"))),
                        }
                    }
                }
            }
            let result = match spawn_error {
                Some(e) => Err(e),
                None => feed(&mut Feeder { leaves, pending: &pending, barriers: 0, nodes: count, store, exited }),
            };
            // Dropping the feeder closed the leaves' channels: each stage ends after its last step.
            let mut first_error = None;
            for handle in stages {
                match handle.join() {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        first_error.get_or_insert(e);
                    }
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            match first_error {
                Some(e) => Err(e),
                None => result,
            }
        })
    }
}

/// Sets its flag when dropped: a stage's thread holds one, so the flag tells that the thread
/// ended, by returning or by a panic.
struct OnExit<'a>(&'a AtomicBool);

impl Drop for OnExit<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// A stage's loop: takes each step's packets from `inputs` in input order, runs them through
/// the node (node `index`), sends what it emitted up (the root's output is dropped), until the
/// stages below close their channels.
fn stage(
    (index, node): (usize, &mut Node),
    inputs: Vec<Down>,
    ups: Vec<Up>,
    pending: &AtomicU64,
    store: &Store,
) -> Result<()> {
    let ctx = OpContext { store };
    let mut barriers = 0;
    loop {
        let mut out = Vec::new();
        // A barrier or commit notice comes on every input in one step; it is handled once.
        let mut control = None;
        for (input, rx) in inputs.iter().enumerate() {
            // Closed: the feeder is done (every channel closes after the same step), or a
            // stage below failed, which reports its own error.
            let Some(packet) = rx.recv() else { return Ok(()) };
            for msg in packet {
                match msg {
                    Msg::Barrier(_) | Msg::Committed(_) => control = Some(msg),
                    data => on_data(node, input, data, &ctx, &mut out)?,
                }
            }
        }
        if let Some(msg) = control {
            barriers += u64::from(matches!(msg, Msg::Barrier(_)));
            out.extend(on_control(node, index, &msg, &ctx)?);
        }
        for op in &mut node.lanes {
            drop(op.take_late_rows());
        }
        pending.store(pack_pending(barriers & ((1 << 24) - 1), node.pending_bytes()), Ordering::Relaxed);
        // The stage above stopped only when it failed; it reports its own error.
        if send(&ups, out).is_err() {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use arrow::array::{ArrayRef, AsArray, Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};

    use super::super::{Counters, NodeInfo, Source};
    use super::*;
    use crate::plan::Exchange;
    use crate::runtime::operator::Operator;
    use crate::runtime::Op;
    use crate::state::key_group::{instance_of, key_group};
    use crate::test_rng::Rng;

    /// What each recorder instance saw, in its order, by its name.
    type Logs = Arc<Mutex<BTreeMap<String, Vec<String>>>>;

    /// Writes down every chunk, watermark, barrier and commit notice it takes and passes the
    /// rows and watermarks on; keyed by its first column; fails on a row whose value is
    /// `fail_on`; writes one entry at each barrier.
    struct Recorder {
        name: String,
        logs: Logs,
        fail_on: Option<i64>,
    }

    impl Recorder {
        fn log(&self, line: String) {
            self.logs.lock().unwrap().entry(self.name.clone()).or_default().push(line);
        }
    }

    fn values(chunk: &StreamChunk) -> Vec<i64> {
        chunk.batch.column(0).as_primitive::<Int64Type>().values().to_vec()
    }

    impl Operator for Recorder {
        fn name(&self) -> &'static str {
            "Recorder"
        }
        fn process_batch(&mut self, input: usize, chunk: StreamChunk, _: &OpContext<'_>) -> Result<Option<StreamChunk>> {
            let values = values(&chunk);
            if self.fail_on.is_some_and(|bad| values.contains(&bad)) {
                return Err(WeirError::execution(format!("{} met the bad row", self.name)));
            }
            self.log(format!("input {input}: {:?} {values:?}", chunk.ops));
            Ok(Some(chunk))
        }
        fn on_watermark(&mut self, input: usize, watermark_ms: i64, _: &OpContext<'_>) -> Result<(Option<StreamChunk>, Option<i64>)> {
            self.log(format!("input {input}: watermark {watermark_ms}"));
            Ok((None, Some(watermark_ms)))
        }
        fn key_groups(&self, _: usize, chunk: &StreamChunk) -> Result<Vec<u16>> {
            Ok(values(chunk).iter().map(|v| key_group(&v.to_be_bytes())).collect())
        }
        fn on_barrier(&mut self, writes: &mut EpochWrites, _: &OpContext<'_>) -> Result<()> {
            self.log("barrier".into());
            writes.put_meta(&self.name, b"x");
            Ok(())
        }
        fn on_committed(&mut self, epoch: u64) {
            self.log(format!("committed {epoch}"));
        }
    }

    /// `n` recorder instances `name/0`, `name/1`, ...; the second fails on `fail_on`.
    fn recorders(logs: &Logs, name: &str, n: usize, fail_on: Option<i64>) -> Vec<Box<dyn Operator>> {
        (0..n)
            .map(|i| {
                let fail_on = if i == 1 { fail_on } else { None };
                Box::new(Recorder { name: format!("{name}/{i}"), logs: Arc::clone(logs), fail_on }) as Box<dyn Operator>
            })
            .collect()
    }

    /// `n` leaf instances.
    fn sources(n: usize) -> Vec<Box<dyn Operator>> {
        (0..n).map(|_| Box::new(Source) as Box<dyn Operator>).collect()
    }

    fn node(lanes: Vec<Box<dyn Operator>>, exchange: Exchange, parent: Option<(usize, usize)>) -> Node {
        let info = NodeInfo { name: String::new(), detail: String::new(), exchange: String::new() };
        Node { info, counters: Counters::default(), lanes, exchange, parents: parent.into_iter().collect() }
    }

    /// A job reading `a` twice and `b` once: a recorder root over a hash-exchanged recorder of
    /// three inputs (`a` directly; `a` split over two forward recorders; `b`), two instances
    /// each; the second forward recorder fails on `fail_on`.
    fn job(logs: &Logs, fail_on: Option<i64>) -> Job {
        let nodes = vec![
            node(recorders(logs, "root", 1, None), Exchange::Single, None),
            node(recorders(logs, "keyed", 2, None), Exchange::Hash, Some((0, 0))),
            node(sources(1), Exchange::Single, Some((1, 0))),
            node(recorders(logs, "fwd", 2, fail_on), Exchange::Forward, Some((1, 1))),
            node(sources(2), Exchange::Forward, Some((3, 0))),
            node(sources(1), Exchange::Single, Some((1, 2))),
        ];
        let sources = vec![("a".to_string(), 2, 0), ("a".to_string(), 4, 0), ("b".to_string(), 5, 0)];
        Job { nodes, sources, parallelism: 2 }
    }

    /// A job whose forward recorder over `a` is a reused sub-plan: it feeds the root (input 0)
    /// and, on input 1, a hash-exchanged recorder whose input 0 is a second leaf of `a`, built
    /// after the shared one; the root also reads `b`. Both runs must give that recorder its
    /// own leaf's rows before the shared recorder's, as its input order says.
    fn dag_job(logs: &Logs) -> Job {
        let mut shared = node(recorders(logs, "fwd", 2, None), Exchange::Forward, Some((0, 0)));
        shared.parents.push((3, 1));
        let nodes = vec![
            node(recorders(logs, "root", 1, None), Exchange::Single, None),
            shared,
            node(sources(2), Exchange::Forward, Some((1, 0))),
            node(recorders(logs, "keyed", 2, None), Exchange::Hash, Some((0, 1))),
            node(sources(1), Exchange::Single, Some((3, 0))),
            node(sources(1), Exchange::Single, Some((0, 2))),
        ];
        let sources = vec![("a".to_string(), 2, 0), ("a".to_string(), 4, 0), ("b".to_string(), 5, 0)];
        Job { nodes, sources, parallelism: 2 }
    }

    /// One thing pushed into a job.
    enum Step {
        Chunk(&'static str, StreamChunk),
        Watermark(&'static str, i64),
        /// An epoch's barrier, then the notice that it committed.
        Barrier,
    }

    /// `len` random ops: inserts, deletes and update pairs.
    fn random_ops(rng: &mut Rng, len: usize) -> Vec<Op> {
        let mut ops = Vec::with_capacity(len);
        while ops.len() < len {
            match rng.below(4) {
                0 if ops.len() + 2 <= len => ops.extend([Op::UpdateBefore, Op::UpdateAfter]),
                1 => ops.push(Op::Delete),
                _ => ops.push(Op::Insert),
            }
        }
        ops
    }

    /// Random steps: chunks of `a` or `b` (inserts, deletes and update pairs; long enough, at
    /// times, to be split between a leaf's instances), watermarks and barriers.
    fn steps(seed: u64, count: usize) -> Vec<Step> {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let mut rng = Rng(seed);
        (0..count)
            .map(|step| {
                let relation = if rng.below(3) == 0 { "b" } else { "a" };
                match rng.below(10) {
                    0 | 1 => return Step::Watermark(relation, step as i64),
                    2 => return Step::Barrier,
                    _ => {}
                }
                let len = [1, 7, 1500, 3000][rng.below(4) as usize];
                let ops = random_ops(&mut rng, len);
                let values = Int64Array::from_iter_values((0..len).map(|_| rng.below(500)));
                let batch = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(values)]).unwrap();
                Step::Chunk(relation, StreamChunk::new(ops, batch))
            })
            .collect()
    }

    /// Pushes `steps` through the pipelined `job`; returns, for each barrier, the number of
    /// writes and of node figures the root completed it with.
    fn run_pipelined(job: &mut Job, store: &Store, steps: &[Step]) -> Result<Vec<(usize, usize)>> {
        let (done, completed) = std::sync::mpsc::channel();
        job.pipelined(store, |feeder| {
            for (epoch, step) in steps.iter().enumerate() {
                match step {
                    Step::Chunk(relation, chunk) => feeder.push(relation, chunk)?,
                    Step::Watermark(relation, wm) => feeder.watermark(relation, *wm)?,
                    Step::Barrier => {
                        let done = done.clone();
                        feeder.barrier(EpochWrites::default(), Box::new(move |w, stats| done.send((w.len(), stats.len())).unwrap()))?;
                        feeder.committed(epoch as u64)?;
                    }
                }
            }
            Ok(())
        })?;
        drop(done);
        Ok(completed.iter().collect())
    }

    /// A hash exchange of many rows from two instances below (split and merged on the worker
    /// pool) gives each instance exactly the rows whose key group it owns, each still a
    /// retraction or an insertion, and keeps the order of the rows of each instance below.
    #[test]
    fn a_hash_exchange_of_several_instances_gives_each_its_rows_in_their_order() {
        let fields = vec![Field::new("v", DataType::Int64, false), Field::new("seq", DataType::Int64, false)];
        let schema = Arc::new(Schema::new(fields));
        let logs: Logs = Arc::default();
        let keyed = node(recorders(&logs, "keyed", 2, None), Exchange::Hash, None);
        let mut rng = Rng(0x0e5c_4a7e);
        for round in 0..20 {
            // Two instances' outputs: ordered (retractions, then insertions) in some rounds.
            let ordered = round % 2 == 0;
            let mut below = Vec::new();
            let mut sent: Vec<(i64, i64, bool)> = Vec::new();
            for instance in 0..2i64 {
                let len = 600 + rng.below(600) as usize;
                let mut ops = random_ops(&mut rng, len);
                if ordered {
                    let single = |op: &Op| match op {
                        Op::UpdateBefore => Op::Delete,
                        Op::UpdateAfter => Op::Insert,
                        op => *op,
                    };
                    let (retractions, insertions): (Vec<Op>, Vec<Op>) =
                        ops.iter().map(single).partition(|op| *op == Op::Delete);
                    ops = retractions.into_iter().chain(insertions).collect();
                }
                let values: Vec<i64> = (0..len).map(|_| rng.below(300) as i64).collect();
                let seqs: Vec<i64> = (0..len as i64).map(|i| instance * 10_000 + i).collect();
                for i in 0..len {
                    sent.push((values[i], seqs[i], matches!(ops[i], Op::Delete | Op::UpdateBefore)));
                }
                let columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(values)), Arc::new(Int64Array::from(seqs))];
                let batch = RecordBatch::try_new(Arc::clone(&schema), columns).unwrap();
                below.push(Some(StreamChunk::new(ops, batch)));
            }
            let lanes = keyed.receive(0, below).unwrap();
            for (lane, chunk) in lanes.iter().enumerate() {
                let mut got: Vec<(i64, i64, bool)> = match chunk {
                    None => Vec::new(),
                    Some(c) => {
                        let seqs = c.batch.column(1).as_primitive::<Int64Type>().values().to_vec();
                        let retracts = c.ops.iter().map(|op| matches!(op, Op::Delete | Op::UpdateBefore));
                        values(c).into_iter().zip(seqs).zip(retracts).map(|((v, s), r)| (v, s, r)).collect()
                    }
                };
                for instance in 0..2 {
                    let order: Vec<i64> = got.iter().filter(|r| r.1 / 10_000 == instance).map(|r| r.1).collect();
                    let kept = order.windows(2).all(|w| w[0] < w[1]);
                    assert!(kept, "round {round}, lane {lane}: instance {instance}'s rows out of order");
                }
                let mut want: Vec<(i64, i64, bool)> =
                    sent.iter().copied().filter(|(v, _, _)| instance_of(key_group(&v.to_be_bytes()), 2) == lane).collect();
                got.sort_unstable();
                want.sort_unstable();
                assert_eq!(got, want, "round {round}, lane {lane}");
            }
        }
    }

    /// The pipelined run gives every operator instance the same changes, watermarks, barriers
    /// and commit notices, in the same order, as the synchronous one, counts the same rows, and
    /// each barrier reaches the root with every operator's writes and figures; also when a node
    /// feeds two (a reused sub-plan).
    #[test]
    fn pipelined_operators_see_what_the_synchronous_run_gives_them() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let store = Store::open(dir.path())?;
        let tree = |logs: &Logs| job(logs, None);
        let builds: [(&dyn Fn(&Logs) -> Job, (usize, usize)); 2] = [(&tree, (5, 6)), (&dag_job, (5, 6))];
        for (seed, (build, expected)) in (1..6u64).flat_map(|seed| builds.map(|b| (seed, b))) {
            let steps = steps(seed, 200);
            let (sync_logs, piped_logs) = (Logs::default(), Logs::default());
            let mut sync = build(&sync_logs);
            let mut barriers = Vec::new();
            for (epoch, step) in steps.iter().enumerate() {
                match step {
                    Step::Chunk(relation, chunk) => drop(sync.push(relation, chunk, &store)?),
                    Step::Watermark(relation, wm) => drop(sync.on_watermark(relation, *wm, &store)?),
                    Step::Barrier => {
                        let mut writes = EpochWrites::default();
                        sync.on_barrier(&store, &mut writes)?;
                        barriers.push((writes.len(), sync.node_stats().len()));
                        sync.on_committed(epoch as u64);
                    }
                }
            }
            assert!(barriers.len() > 5 && barriers.iter().all(|b| *b == expected), "{barriers:?}");
            let mut piped = build(&piped_logs);
            assert_eq!(run_pipelined(&mut piped, &store, &steps)?, barriers, "seed {seed}");
            let sync_logs = sync_logs.lock().unwrap().clone();
            assert_eq!(sync_logs.keys().count(), 5, "every instance took rows");
            assert_eq!(sync_logs, *piped_logs.lock().unwrap(), "seed {seed}");
            let counts = |job: &Job| job.operator_stats().iter().map(|s| (s.rows_in, s.rows_out)).collect::<Vec<_>>();
            assert_eq!(counts(&sync), counts(&piped));
        }
        Ok(())
    }

    /// A stage that fails stops the pipeline: the feeder's next pushes fail instead of waiting
    /// on full channels, the stage's own error is what the run returns, and a barrier it did
    /// not pass is never completed.
    #[test]
    fn a_failing_stage_stops_the_pipeline_with_its_error() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let store = Store::open(dir.path())?;
        let steps = steps(7, 300);
        let logs = Logs::default();
        let mut job = job(&logs, Some(13));
        let error = run_pipelined(&mut job, &store, &steps).unwrap_err();
        assert!(error.to_string().contains("fwd/1 met the bad row"), "{error}");
        let seen = logs.lock().unwrap().get("root/0").map_or(0, Vec::len);
        assert!(seen < steps.len() / 2, "the feeder stopped early: the root saw {seen} of {} steps", steps.len());
        Ok(())
    }

    /// A feeder with nothing more to send (its sources are quiet) learns that a stage failed
    /// on what it sent last from [`Feeder::stopped`], without sending anything: a runner keeps
    /// its pipeline while idle and must not wait on a broken one.
    #[test]
    fn an_idle_feeder_sees_a_stage_that_failed() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let store = Store::open(dir.path())?;
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let rows = |values: Vec<i64>| {
            let batch = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(Int64Array::from(values))]).unwrap();
            StreamChunk::new(vec![Op::Insert; batch.num_rows()], batch)
        };
        let logs = Logs::default();
        let mut job = job(&logs, Some(13));
        let error = job
            .pipelined(&store, |feeder| {
                feeder.push("a", &rows(vec![1, 2]))?;
                assert!(!feeder.stopped(), "no stage failed on good rows");
                // Long enough to be split over the forward recorders, so that the second has 13.
                feeder.push("a", &rows((0..3000).map(|i| if i == 2999 { 13 } else { 1 }).collect()))?;
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while !feeder.stopped() {
                    assert!(std::time::Instant::now() < deadline, "the failed stage was never seen");
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Ok(())
            })
            .unwrap_err();
        assert!(error.to_string().contains("fwd/1 met the bad row"), "{error}");
        Ok(())
    }
}
