//! A job: the operators of one stream plan, instantiated and wired, ending in a
//! [`Materialize`] of the view's rows.
//!
//! Push-based: a changelog chunk of a relation enters at every leaf that reads it and flows to
//! the root, one step per chunk or watermark ([`Job::push`], [`Job::on_watermark`]; a
//! pipelined job runs the same steps with each operator on a thread of its own); what the root
//! emits is the view's own changelog, which the caller feeds to the jobs reading this view.
//!
//! A sub-plan that appears more than once in the plan runs once, feeding every place that uses
//! it ([`StreamPlan::reusable`], Flink's sub-plan reuse), so the nodes form a DAG: a node has
//! one parent, or several for a reused sub-plan's top, and sends what it emits to each. Within
//! a step every operator takes its inputs in input order, on one thread or pipelined, so both
//! runs give it the same changes in the same order.
//!
//! Operator state tables are named `<position>/<table>`, positions in a pre-order walk of the
//! plan as written (a reused sub-plan's second copy keeps its positions unused), so the names
//! are stable for a given plan.

use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::DFSchema;
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{Expr, ExprSchemable};
use datafusion::physical_expr::{create_physical_expr, PhysicalExpr};

use crate::error::{Result, WeirError};
use crate::plan::{StreamNode, StreamPlan};
use crate::plan::Exchange;
use crate::runtime::changelog::{fix_update_pairs, Op, StreamChunk};
use crate::runtime::feed::ChangeFeed;
use crate::runtime::operator::{OpContext, Operator};
use crate::runtime::operators::filter::Filter;
use crate::runtime::operators::group_agg::{AggCall, AggKind, GroupAggregate};
use crate::plan::join::TimeBound;
use crate::runtime::operators::join::{Join, JoinOptions};
use crate::runtime::operators::temporal_join::{TemporalJoin, TemporalJoinOptions};
use crate::runtime::operators::materialize::{Materialize, StorageMode};
use crate::runtime::operators::normalize::ChangelogNormalize;
use crate::runtime::operators::upsert_materialize::SinkUpsertMaterializer;
use crate::runtime::operators::over_agg::{OverAggregate, AGG_PREFIX as OVER_AGG_PREFIX};
use crate::runtime::operators::over_window::{OverWindow, OverWindowOptions};
use crate::plan::over::OverFrame;
use crate::runtime::operators::project::Project;
use crate::runtime::operators::rank::{Rank, RankOptions};
use crate::plan::window::WindowKind;
use crate::runtime::operators::session_assign::SessionAssign;
use crate::runtime::operators::sliced_window_agg::session::SessionWindowAggregate;
use crate::runtime::operators::sliced_window_agg::{SlicedWindowAggOptions, SlicedWindowAggregate};
use crate::runtime::operators::union::Union;
use crate::runtime::operators::values::{Values, NAME as VALUES};
use crate::runtime::operators::window_assign::WindowAssign;
use crate::state::key_group::instance_of;
use crate::state::{EpochWrites, KeyGroups, Store, TableRef};

mod pipeline;
pub use pipeline::Feeder;
use pipeline::{emit, leaf_rows, on_data, Msg, Packet};

struct Node {
    /// What EXPLAIN ANALYZE and the web page call the node.
    info: NodeInfo,
    /// What it has done since the job was built.
    counters: Counters,
    /// The operator's instances: one, or the job's parallelism when the plan lets the node run
    /// in parallel ([`Exchange`]); instance `i` owns key groups [`KeyGroups::of_instance`]`(i, n)`.
    lanes: Vec<Box<dyn Operator>>,
    /// How rows from the node's inputs reach its instances.
    exchange: Exchange,
    /// The nodes this one feeds, each with the input it feeds: none for the root, one for
    /// any other node but a reused sub-plan's top ([`StreamPlan::reusable`]), which feeds
    /// every place the plan holds it, in EXPLAIN's order.
    parents: Vec<(usize, usize)>,
}

impl Node {
    /// For an event-time operator, the least watermark of its instances (`None` inside while
    /// one has none yet); `None` for the others.
    fn watermark(&self) -> Option<Option<i64>> {
        let first = self.lanes[0].event_time_watermark()?;
        Some(self.lanes.iter().map(|op| op.event_time_watermark().flatten()).fold(first, |a, b| a.min(b)))
    }

    /// Runs the instances on their chunks arriving on `input` (`lanes[i]` for instance `i`; in
    /// parallel when more than one has rows); returns what each emitted.
    fn process(
        &mut self,
        input: usize,
        lanes: Vec<Option<StreamChunk>>,
        ctx: &OpContext<'_>,
    ) -> Result<Vec<Option<StreamChunk>>> {
        self.counters.rows_in += lanes.iter().flatten().map(|c| c.len() as u64).sum::<u64>();
        let (outs, busy_ns) = each_lane(&mut self.lanes, lanes, |op, chunk| op.process_batch(input, chunk, ctx))?;
        self.counters.busy_ns += busy_ns;
        Ok(outs.into_iter().map(Option::flatten).collect())
    }

    /// Hands the watermark `watermark_ms` arriving on `input` to every instance; returns what
    /// each emitted because of it and the watermark to send on: the least the instances send,
    /// none while one holds it back.
    fn on_watermark(
        &mut self,
        input: usize,
        watermark_ms: i64,
        ctx: &OpContext<'_>,
    ) -> Result<(Vec<Option<StreamChunk>>, Option<i64>)> {
        let n = self.lanes.len();
        let (results, busy_ns) =
            each_lane(&mut self.lanes, vec![Some(watermark_ms); n], |op, w| op.on_watermark(input, w, ctx))?;
        self.counters.busy_ns += busy_ns;
        let mut chunks = Vec::with_capacity(n);
        let mut next = Some(i64::MAX);
        for (chunk, lane_next) in results.into_iter().flatten() {
            chunks.push(chunk);
            next = next.zip(lane_next).map(|(a, b)| a.min(b));
        }
        Ok((chunks, next))
    }

    /// Counts what the instances emitted (`outs`, one entry per instance) as the node's output
    /// rows; false when none emitted anything.
    fn emitted(&mut self, outs: &[Option<StreamChunk>]) -> bool {
        if outs.iter().all(Option::is_none) {
            return false;
        }
        self.counters.rows_out += outs.iter().flatten().map(|c| c.len() as u64).sum::<u64>();
        true
    }

    /// The chunks for this node's instances, arriving on `input`, from what the instances of
    /// the node below emitted (one entry per instance): instance to instance (forward), by key
    /// group (hash; the rows of one instance below keep their order, and an update whose two
    /// rows go to different instances becomes a delete and an insert), or all to one. Rows
    /// from several instances below are merged as [`Job::merge_instances`] merges them, per
    /// instance here; a hash exchange of many rows from several instances splits and merges on
    /// the worker pool ([`Node::split_each`]).
    fn receive(&self, input: usize, outs: Vec<Option<StreamChunk>>) -> Result<Vec<Option<StreamChunk>>> {
        let n = self.lanes.len();
        if self.exchange == Exchange::Forward && outs.len() == n {
            return Ok(outs);
        }
        let outs: Vec<StreamChunk> = outs.into_iter().flatten().collect();
        let hash = n > 1 && self.exchange == Exchange::Hash;
        if hash && outs.len() > 1 && outs.iter().map(StreamChunk::len).sum::<usize>() >= MIN_SPLIT_ROWS {
            return self.split_each(input, outs);
        }
        let mut lanes = vec![None; n];
        let Some(chunk) = Job::merge_instances(outs)? else { return Ok(lanes) };
        if !hash {
            lanes[0] = Some(chunk);
            return Ok(lanes);
        }
        self.split(input, chunk)
    }

    /// The rows of `chunk`, arriving on `input`, for each instance by key group (in order; an
    /// update whose two rows go to different instances becomes a delete and an insert).
    fn split(&self, input: usize, chunk: StreamChunk) -> Result<Vec<Option<StreamChunk>>> {
        let n = self.lanes.len();
        let mut lanes = vec![None; n];
        let groups = self.lanes[0].key_groups(input, &chunk)?;
        let mut rows: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (row, g) in groups.iter().enumerate() {
            rows[instance_of(*g, n)].push(row as u32);
        }
        if let Some(only) = rows.iter().position(|r| r.len() == chunk.len()) {
            lanes[only] = Some(chunk);
            return Ok(lanes);
        }
        for (lane, indices) in rows.iter().enumerate() {
            if indices.is_empty() {
                continue;
            }
            let mut kept = vec![false; chunk.len()];
            for i in indices {
                kept[*i as usize] = true;
            }
            lanes[lane] = Some(chunk.take(indices, fix_update_pairs(&chunk.ops, &kept))?);
        }
        Ok(lanes)
    }

    /// A hash exchange of `outs`, the chunks of several instances below: each chunk split by
    /// key group ([`Node::split`]), then each instance's pieces merged in the order of the
    /// instances below ([`Job::merge_instances`]), both on the worker pool. Each instance gets
    /// the rows it would get from merging first and splitting then, those of each instance
    /// below in their order; the merge's rule (retractions first when every piece is its
    /// retractions, then its insertions) applies to each instance's own pieces.
    fn split_each(&self, input: usize, outs: Vec<StreamChunk>) -> Result<Vec<Option<StreamChunk>>> {
        use rayon::prelude::*;
        let n = self.lanes.len();
        let pieces: Vec<Vec<Option<StreamChunk>>> =
            outs.into_par_iter().map(|chunk| self.split(input, chunk)).collect::<Result<_>>()?;
        let mut by_lane: Vec<Vec<StreamChunk>> = (0..n).map(|_| Vec::with_capacity(pieces.len())).collect();
        for split in pieces {
            for (lane, piece) in split.into_iter().enumerate() {
                by_lane[lane].extend(piece);
            }
        }
        by_lane.into_par_iter().map(Job::merge_instances).collect()
    }

    /// What the node has done since the job was built, as node `index`.
    fn operator_stats(&self, index: usize) -> OperatorStats {
        OperatorStats {
            index,
            parent: self.parents.first().map(|(p, _)| *p),
            input: self.parents.first().map_or(0, |(_, i)| *i),
            reused_by: self.parents.iter().skip(1).copied().collect(),
            name: self.info.name.clone(),
            detail: self.info.detail.clone(),
            exchange: self.info.exchange.clone(),
            parallelism: self.lanes.len(),
            rows_in: self.counters.rows_in,
            rows_out: self.counters.rows_out,
            busy_ns: self.counters.busy_ns,
            watermark: self.watermark().flatten(),
            late_rows: self.late_rows(),
        }
    }

    /// The late rows its instances dropped, in all.
    fn late_rows(&self) -> u64 {
        self.lanes.iter().map(|op| op.num_late_rows()).sum()
    }

    /// What the system tables show of the node now, as node `index`.
    fn stats(&self, index: usize) -> NodeStats {
        let mut tables: Vec<TableStats> = Vec::new();
        for op in &self.lanes {
            for (name, table) in op.state() {
                // The instances of a parallel operator share the table; their caches add up.
                let cache = table.cache_stats();
                match tables.iter_mut().find(|t| t.name == name) {
                    Some(t) => {
                        t.cache = match (t.cache, cache) {
                            (Some(a), Some(b)) => Some(a + b),
                            (a, b) => a.or(b),
                        }
                    }
                    None => tables.push(TableStats { name, id: table.id(), cache, ttl_ms: table.ttl_ms() }),
                }
            }
        }
        NodeStats {
            operator: self.operator_stats(index),
            op_name: self.lanes[0].name(),
            event_time: self.watermark().map(|w| (w, self.late_rows())),
            tables,
        }
    }

    /// Estimated bytes of the writes the instances' state tables hold since the last barrier.
    fn pending_bytes(&self) -> u64 {
        self.lanes.iter().flat_map(|op| op.state()).map(|(_, table)| table.pending_bytes()).sum()
    }
}

/// How a node is shown: from its plan node, or the root's operator.
struct NodeInfo {
    name: String,
    detail: String,
    exchange: String,
}

/// Rows through a node and time spent in it.
#[derive(Default)]
struct Counters {
    rows_in: u64,
    rows_out: u64,
    busy_ns: u64,
}

/// What one of a job's operators has done since the job was built (its creation, or the
/// server's last start or reload: the figures are not kept across restarts): for EXPLAIN
/// ANALYZE, `weir_operators`, `/metrics` and the web page.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct OperatorStats {
    /// The node's index in the job (0: the root, then the plan's nodes in EXPLAIN's order).
    pub index: usize,
    /// The index of the node it feeds (none for the root); for a reused sub-plan, the first
    /// of the nodes it feeds.
    pub parent: Option<usize>,
    /// Which input of `parent` it feeds (0 for the root).
    pub input: usize,
    /// For a reused sub-plan's top, the other nodes it feeds, each with the input it feeds
    /// ([`StreamPlan::reusable`]).
    pub reused_by: Vec<(usize, usize)>,
    /// The plan node's name (`StreamGroupAggregate`, ...), or the root operator's
    /// (`Materialize`, `KafkaSink`, ...).
    pub name: String,
    /// Its EXPLAIN line without the name and indentation (empty for the root).
    pub detail: String,
    /// How rows reach its instances: `forward`, `hash[key]` or `single`.
    pub exchange: String,
    /// Its instances.
    pub parallelism: usize,
    /// Rows (changelog rows: an update is two) that reached it, and that it emitted.
    pub rows_in: u64,
    pub rows_out: u64,
    /// Time its instances spent on rows and watermarks, summed over the instances, ns (Flink's
    /// busy time; the time a pipelined stage waits on a full channel above it, Flink's
    /// backpressured time, is not counted).
    pub busy_ns: u64,
    /// The least watermark of its instances, ms (event-time operators; none before the first).
    pub watermark: Option<i64>,
    /// Rows it dropped as late.
    pub late_rows: u64,
}

/// What the system tables show of one of a job's operators: taken when asked from a job run
/// synchronously, at each barrier from a pipelined one.
#[derive(Debug, Clone)]
pub struct NodeStats {
    /// What it has done since the job was built.
    pub operator: OperatorStats,
    /// Its operator's own name (`GroupAggregate`, ...; the plan node's is in `operator`).
    pub op_name: &'static str,
    /// For an event-time operator: the least watermark of its instances (ms; none before the
    /// first) and the late rows they dropped.
    pub event_time: Option<(Option<i64>, u64)>,
    /// Its state tables.
    pub tables: Vec<TableStats>,
}

/// One state table of an operator, for `weir_state_tables`.
#[derive(Debug, Clone)]
pub struct TableStats {
    /// Its stable name in the operator (`values/0`, ...).
    pub name: String,
    /// Its id in the store.
    pub id: u32,
    /// Its cache's figures, added over the operator's instances (none: read without a cache).
    pub cache: Option<crate::state::state_table::CacheStats>,
    /// State TTL, ms.
    pub ttl_ms: Option<i64>,
}

/// A running job; see the module docs.
pub struct Job {
    nodes: Vec<Node>,
    /// Leaves: (relation, node, input of that node).
    sources: Vec<(String, usize, usize)>,
    /// The instances of each keyed or stateless operator (`parallelism.default`).
    parallelism: usize,
}

/// A source chunk at least this long is split between the instances of the stateless operators
/// above the source; a shorter one goes whole to the first (splitting costs more than it saves).
const MIN_SPLIT_ROWS: usize = 1024;

/// A leaf: forwards a relation's chunks unchanged.
struct Source;

impl Operator for Source {
    fn name(&self) -> &'static str {
        "Source"
    }
    fn process_batch(&mut self, _: usize, chunk: StreamChunk, _: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        Ok(Some(chunk))
    }
}

impl Job {
    /// Instantiates `plan` followed by a materialization (`mode`) into state table `rows_table`, its
    /// parallel operators as `parallelism` instances (1 runs every operator as one).
    ///
    /// `state_table(name)` returns the id of the operator state table `name`, allocating it on
    /// first use; operators load their state from `store`. The view's committed changes go to
    /// `feed` ([`crate::runtime::feed`]).
    pub fn build(
        plan: &StreamPlan,
        (mode, rows_table, feed): (StorageMode, u32, Arc<ChangeFeed>),
        state_table: &mut dyn FnMut(&str) -> u32,
        store: &Store,
        parallelism: usize,
    ) -> Result<Self> {
        let out_schema: SchemaRef = Arc::new(plan.schema.as_arrow().clone());
        let root = Box::new(Materialize::try_new(&out_schema, mode, rows_table)?.with_feed(feed));
        Self::build_with_root(plan, root, state_table, store, parallelism)
    }

    /// Instantiates `plan` followed by `root` (a sink of an `INSERT INTO` job), which runs as
    /// one instance.
    pub fn build_with_root(
        plan: &StreamPlan,
        root: Box<dyn Operator>,
        state_table: &mut dyn FnMut(&str) -> u32,
        store: &Store,
        parallelism: usize,
    ) -> Result<Self> {
        let mut job = Job { nodes: Vec::new(), sources: Vec::new(), parallelism: parallelism.max(1) };
        let info = NodeInfo { name: root.name().to_string(), detail: String::new(), exchange: "single".into() };
        job.nodes.push(Node { info, counters: Counters::default(), lanes: vec![root], exchange: Exchange::Single, parents: vec![] });
        let mut build = Build { ids: 1, built: Vec::new(), state_table, store };
        job.add(plan, (0, 0), &mut build)?;
        Ok(job)
    }

    /// The job's parallelism.
    pub fn parallelism(&self) -> usize {
        self.parallelism
    }

    /// Instantiates `plan` as an input of `parent` (node, input), unless a job node already
    /// runs the same reusable sub-plan ([`StreamPlan::reusable`]), which then feeds `parent`
    /// too. Operator state tables are named by the node's position in a pre-order walk of the
    /// plan as written (`<position>/<table>`): a reused sub-plan's second copy keeps its
    /// positions unused, so the other nodes' state keeps its names whether or not a sub-plan
    /// is reused (a job created before sub-plans were reused restarts on its state).
    fn add<'p>(&mut self, plan: &'p StreamPlan, parent: (usize, usize), build: &mut Build<'p, '_>) -> Result<()> {
        if let Some(&(_, node)) = build.built.iter().find(|(built, _)| *built == plan) {
            self.nodes[node].parents.push(parent);
            build.ids += plan.node_count();
            return Ok(());
        }
        let id = build.ids;
        build.ids += 1;
        let index = self.nodes.len();
        if let StreamNode::Source { relation } = &plan.node {
            self.sources.push((relation.clone(), index, 0));
        }
        let exchange = if self.parallelism > 1 { plan.exchange() } else { Exchange::Single };
        let n = if exchange == Exchange::Single { 1 } else { self.parallelism };
        let mut lanes = Vec::with_capacity(n);
        for lane in 0..n {
            let key_groups = if n == 1 { KeyGroups::all() } else { KeyGroups::of_instance(lane, n) };
            let state_table = &mut *build.state_table;
            let mut table =
                |name: &str| TableRef { id: state_table(&format!("{id}/{name}")), key_groups: key_groups.clone() };
            lanes.push(build_operator(plan, &mut table, build.store)?);
        }
        let line = plan.explain_line();
        let info = NodeInfo {
            name: plan.name().to_string(),
            detail: line.strip_prefix(&format!("{}: ", plan.name())).unwrap_or(&line).to_string(),
            exchange: match exchange {
                Exchange::Single => "single".to_string(),
                Exchange::Forward => "forward".to_string(),
                Exchange::Hash => format!("hash{}", plan.exchange_key()),
            },
        };
        self.nodes.push(Node { info, counters: Counters::default(), lanes, exchange, parents: vec![parent] });
        if plan.reusable() {
            build.built.push((plan, index));
        }
        for (i, input) in plan.inputs().into_iter().enumerate() {
            self.add(input, (index, i), build)?;
        }
        Ok(())
    }
}

/// What [`Job::add`] carries down the plan.
struct Build<'p, 'a> {
    /// The next node position in a pre-order walk of the plan as written, which names state
    /// tables.
    ids: usize,
    /// The reusable sub-plans instantiated so far, with their nodes.
    built: Vec<(&'p StreamPlan, usize)>,
    state_table: &'a mut dyn FnMut(&str) -> u32,
    store: &'a Store,
}

/// One instance of `plan`'s operator, its state tables named by `state_table` (the operator's
/// own names: `left`, `groups`, ...).
fn build_operator(
    plan: &StreamPlan,
    state_table: &mut dyn FnMut(&str) -> TableRef,
    store: &Store,
) -> Result<Box<dyn Operator>> {
        let schema: SchemaRef = Arc::new(plan.schema.as_arrow().clone());
        let op: Box<dyn Operator> = match &plan.node {
            StreamNode::Source { .. } => Box::new(Source),
            StreamNode::Values { rows } => {
                let none = DFSchema::empty();
                let rows = rows.iter().map(|row| physical_exprs(row, &none)).collect::<Result<Vec<_>>>()?;
                Box::new(Values::try_new(rows, schema)?)
            }
            StreamNode::Project { input, exprs } => {
                let exprs = physical_exprs(exprs, &input.schema)?;
                Box::new(Project::try_new(exprs, schema)?)
            }
            StreamNode::ChangelogNormalize { key, state_ttl_ms, .. } => {
                Box::new(ChangelogNormalize::try_new(schema, key.clone(), *state_ttl_ms, state_table, store)?)
            }
            StreamNode::SinkUpsertMaterialize { key, state_ttl_ms, .. } => {
                Box::new(SinkUpsertMaterializer::try_new(schema, key.clone(), *state_ttl_ms, state_table, store)?)
            }
            StreamNode::Filter { input, predicate } => {
                Box::new(Filter::try_new(physical_expr(predicate, &input.schema)?)?)
            }
            StreamNode::Union { inputs } => Box::new(Union::try_new(schema, inputs.len())?),
            StreamNode::Unnest { spec, .. } => Box::new(crate::runtime::operators::unnest::Unnest::try_new(spec, schema)?),
            StreamNode::WindowAssign { input, spec } => {
                if spec.kind == WindowKind::Session && !spec.slices {
                    let input_schema: SchemaRef = Arc::new(input.schema.as_arrow().clone());
                    Box::new(SessionAssign::try_new(spec.clone(), input_schema, schema, state_table, store)?)
                } else {
                    Box::new(WindowAssign::try_new(spec.clone(), schema, state_table, store)?)
                }
            }
            StreamNode::Join { left, right, join } => {
                let (left_keys, right_keys): (Vec<Expr>, Vec<Expr>) = join.on.iter().cloned().unzip();
                if let Some(TimeBound::Temporal { probe_time, version_time, left_width, right_width }) = join.time {
                    let pairs = left.schema.join(&right.schema)?;
                    let opts = TemporalJoinOptions {
                        left_outer: join.join_type.left_outer(),
                        left_keys: physical_exprs(&left_keys, &left.schema)?,
                        right_keys: physical_exprs(&right_keys, &right.schema)?,
                        filter: join.filter.as_ref().map(|f| physical_expr(f, &pairs)).transpose()?,
                        null_equals_null: join.null_equals_null,
                        probe_time,
                        version_time,
                        left_width,
                        right_width,
                        left_schema: Arc::new(left.schema.as_arrow().clone()),
                        right_schema: Arc::new(right.schema.as_arrow().clone()),
                        schema,
                    };
                    Box::new(TemporalJoin::try_new(opts, state_table, store)?)
                } else {
                    // A SEMI/ANTI join outputs left columns, but its condition reads both inputs.
                    let pairs;
                    let filter_schema = if join.join_type.left_only() {
                        pairs = left.schema.join(&right.schema)?;
                        &pairs
                    } else {
                        plan.schema.as_ref()
                    };
                    let opts = JoinOptions {
                        join_type: join.join_type,
                        left_keys: physical_exprs(&left_keys, &left.schema)?,
                        right_keys: physical_exprs(&right_keys, &right.schema)?,
                        filter: join.filter.as_ref().map(|f| physical_expr(f, filter_schema)).transpose()?,
                        null_equals_null: join.null_equals_null,
                        time: join.time,
                        lookup: join.lookup,
                        emit_on_window_close: join.emit_on_window_close,
                        append_only: [left, right].map(|i| i.changelog == crate::plan::ChangelogMode::AppendOnly),
                        left_schema: Arc::new(left.schema.as_arrow().clone()),
                        right_schema: Arc::new(right.schema.as_arrow().clone()),
                        schema,
                    };
                    Box::new(Join::try_new(opts, state_table, store)?.with_state_ttl(join.state_ttl_ms))
                }
            }
            StreamNode::Rank { input, spec } => {
                let order: Vec<Expr> = spec.order_by.iter().map(|s| s.expr.clone()).collect();
                let opts = RankOptions {
                    spec: spec.clone(),
                    partition_exprs: physical_exprs(&spec.partition_by, &input.schema)?,
                    order_exprs: physical_exprs(&order, &input.schema)?,
                    input_schema: Arc::new(input.schema.as_arrow().clone()),
                    append_only_input: input.changelog == crate::plan::ChangelogMode::AppendOnly,
                    schema,
                    window_end_partition: if input.has_window() {
                        spec.partition_by.iter().position(|e| matches!(e, Expr::Column(c) if c.name == "window_end"))
                    } else {
                        None
                    },
                    allowed_lateness_ms: input.window_lateness(),
                };
                Box::new(Rank::try_new(opts, state_table, store)?)
            }
            StreamNode::GroupAggregate { input, group_exprs, aggr_exprs, window_end, emit_on_window_close, state_ttl_ms, empty_row } => {
                let group = physical_exprs(group_exprs, &input.schema)?;
                let aggs = aggr_exprs
                    .iter()
                    .enumerate()
                    .map(|(i, e)| {
                        let output_type = plan.schema.field(group_exprs.len() + i).data_type().clone();
                        agg_call(e, &input.schema, output_type)
                    })
                    .collect::<Result<Vec<_>>>()?;
                let window = window_end.map(|k| (k, *emit_on_window_close, input.window_lateness()));
                let append_only = input.changelog == crate::plan::ChangelogMode::AppendOnly;
                Box::new(
                    GroupAggregate::try_new(group, aggs, schema, window, append_only, state_table, store)?
                        .with_state_ttl(*state_ttl_ms)
                        .with_empty_row(*empty_row),
                )
            }
            StreamNode::OverAggregate { input, spec } => {
                let partition = physical_exprs(&spec.partition_by, &input.schema)?;
                let num_inputs = input.schema.fields().len();
                let input_schema: SchemaRef = Arc::new(input.schema.as_arrow().clone());
                // The aggregates' group aggregate: partition columns, then one per aggregate.
                let mut fields = Vec::with_capacity(partition.len() + spec.aggs.len());
                for (i, p) in partition.iter().enumerate() {
                    fields.push(Field::new(format!("p{i}"), p.data_type(&input_schema)?, true));
                }
                let mut aggs = Vec::with_capacity(spec.aggs.len());
                for (i, e) in spec.aggs.iter().enumerate() {
                    let output_type = plan.schema.field(num_inputs + i).data_type().clone();
                    fields.push(Field::new(format!("a{i}"), output_type.clone(), true));
                    aggs.push(agg_call(e, &input.schema, output_type)?);
                }
                let unbounded = matches!(spec.frame, OverFrame::Rows(None) | OverFrame::Range(None));
                let inner = {
                    let mut inner_tables = |name: &str| state_table(&format!("{OVER_AGG_PREFIX}{name}"));
                    let schema = Arc::new(Schema::new(fields));
                    GroupAggregate::try_new(partition.clone(), aggs, schema, None, unbounded, &mut inner_tables, store)?
                };
                Box::new(OverAggregate::try_new(
                    partition,
                    (spec.time_column, spec.proctime),
                    spec.frame,
                    input_schema,
                    schema,
                    inner,
                    state_table,
                    store,
                )?)
            }
            StreamNode::OverWindow { input, spec } => {
                let order: Vec<Expr> = spec.order_by.iter().map(|s| s.expr.clone()).collect();
                let functions = spec
                    .functions
                    .iter()
                    .map(|f| {
                        Ok(datafusion::physical_planner::create_window_expr(
                            f,
                            &input.schema,
                            &ExecutionProps::new(),
                            &PhysicalPlanningContext::default(),
                        )?)
                    })
                    .collect::<Result<Vec<_>>>()?;
                let opts = OverWindowOptions {
                    partition_exprs: physical_exprs(&spec.partition_by, &input.schema)?,
                    order_exprs: physical_exprs(&order, &input.schema)?,
                    order_by: spec.order_by.clone(),
                    functions,
                    reach: spec.reach(),
                    input_schema: Arc::new(input.schema.as_arrow().clone()),
                    schema,
                };
                Box::new(OverWindow::try_new(opts, state_table, store)?)
            }
            StreamNode::SlicedWindowAggregate { input, spec } => {
                let aggs = spec
                    .aggr_exprs
                    .iter()
                    .enumerate()
                    .map(|(i, e)| {
                        let output_type = plan.schema.field(spec.group_exprs.len() + i).data_type().clone();
                        agg_call(e, &input.schema, output_type)
                    })
                    .collect::<Result<Vec<_>>>()?;
                let opts = SlicedWindowAggOptions {
                    group_exprs: physical_exprs(&spec.group_exprs, &input.schema)?,
                    window_columns: spec.window_columns.clone(),
                    aggs,
                    window: spec.window.clone(),
                    schema,
                    emit_on_window_close: spec.emit_on_window_close,
                };
                if spec.window.kind == WindowKind::Session {
                    Box::new(SessionWindowAggregate::try_new(opts, state_table, store)?)
                } else {
                    Box::new(SlicedWindowAggregate::try_new(opts, state_table, store)?)
                }
            }
        };
        Ok(op)
}

impl Job {
    /// Pushes a change of `relation` through the job; returns the view's resulting changes.
    pub fn push(&mut self, relation: &str, chunk: &StreamChunk, store: &Store) -> Result<Option<StreamChunk>> {
        let ctx = OpContext { store };
        let leaves = self.leaves(relation);
        let splits: Vec<bool> = leaves.iter().map(|&(node, _)| self.splits_source(node)).collect();
        let mut outputs = Vec::new();
        self.step(
            &mut |index, node, out| {
                match leaves.iter().position(|&(leaf, _)| leaf == index) {
                    Some(k) => leaf_rows(node, chunk, splits[k], &ctx, out),
                    None => Ok(()),
                }
            },
            &ctx,
            &mut outputs,
        )?;
        Self::combine(outputs)
    }

    /// Whether a long source chunk read by leaf `node` is split over its instances: when the
    /// node above takes them instance to instance (stateless instances, forward).
    fn splits_source(&self, node: usize) -> bool {
        let n = self.nodes[node].lanes.len();
        let parents = &self.nodes[node].parents;
        n > 1
            && !parents.is_empty()
            && parents.iter().all(|&(p, _)| self.nodes[p].exchange == Exchange::Forward && self.nodes[p].lanes.len() == n)
    }

    /// Runs one step on this thread the way [`Job::pipelined`] runs it (its module docs): every
    /// node, children first, takes what its inputs sent it in this step in input order (each
    /// input's messages in the order they were sent), then `own` adds what the node sends of
    /// itself (a leaf's rows or watermark, an operator's first rows); what a node sends goes to
    /// each of its parents, what the root sends to `outputs` (rows) and to the returned
    /// watermark. In a tree this is the order of a walk from each leaf to the root, leaf by
    /// leaf; with a reused sub-plan it keeps each operator's inputs in input order too.
    fn step(
        &mut self,
        own: &mut dyn FnMut(usize, &mut Node, &mut Packet) -> Result<()>,
        ctx: &OpContext<'_>,
        outputs: &mut Vec<StreamChunk>,
    ) -> Result<Option<i64>> {
        let mut pending: Vec<Vec<(usize, Msg)>> = (0..self.nodes.len()).map(|_| Vec::new()).collect();
        let mut out_watermark = None;
        for index in self.children_first() {
            let mut arrived = std::mem::take(&mut pending[index]);
            arrived.sort_by_key(|(input, _)| *input);
            let node = &mut self.nodes[index];
            let mut out = Vec::new();
            for (input, msg) in arrived {
                on_data(node, input, msg, ctx, &mut out)?;
            }
            own(index, node, &mut out)?;
            match node.parents.split_last() {
                None => {
                    for msg in out {
                        match msg {
                            Msg::Chunks(chunks) => outputs.extend(chunks.into_iter().flatten()),
                            Msg::Watermark(w) => out_watermark = Some(w),
                            Msg::Barrier(_) | Msg::Committed(_) => {}
                        }
                    }
                }
                Some((&(last, last_input), others)) => {
                    for &(p, i) in others {
                        pending[p].extend(out.iter().cloned().map(|msg| (i, msg)));
                    }
                    pending[last].extend(out.into_iter().map(|msg| (last_input, msg)));
                }
            }
        }
        Ok(out_watermark)
    }

    /// Sends the watermark of `relation` through the job; returns what the view emits because
    /// of it (closed windows) and the view's own watermark. Every instance of an operator gets
    /// the watermark; the watermark sent on is the least its instances send (none while one
    /// holds it back).
    pub fn on_watermark(
        &mut self,
        relation: &str,
        watermark_ms: i64,
        store: &Store,
    ) -> Result<(Option<StreamChunk>, Option<i64>)> {
        let ctx = OpContext { store };
        let leaves = self.leaves(relation);
        let mut outputs = Vec::new();
        let out_watermark = self.step(
            &mut |index, node, out| match leaves.iter().find(|&&(leaf, _)| leaf == index) {
                Some(&(_, input)) => on_data(node, input, Msg::Watermark(watermark_ms), &ctx, out),
                None => Ok(()),
            },
            &ctx,
            &mut outputs,
        )?;
        Ok((Self::combine(outputs)?, out_watermark))
    }

    /// Late input rows dropped since the last call: (operator, relation the rows are of, rows,
    /// watermark ms). Only window assigners that read a relation directly report them.
    pub fn take_late_rows(&mut self) -> Vec<(&'static str, String, arrow::array::RecordBatch, i64)> {
        // The relation read directly by each node, if one of its inputs is a leaf.
        let fed_by: Vec<(usize, String)> = self
            .sources
            .iter()
            .flat_map(|(relation, leaf, _)| self.nodes[*leaf].parents.iter().map(|&(p, _)| (p, relation.clone())))
            .collect();
        let mut out = Vec::new();
        for (i, node) in self.nodes.iter_mut().enumerate() {
            let Some((_, relation)) = fed_by.iter().find(|(p, _)| *p == i) else { continue };
            for op in &mut node.lanes {
                for (rows, wm) in op.take_late_rows() {
                    out.push((op.name(), relation.clone(), rows, wm));
                }
            }
        }
        out
    }

    /// What each of the job's operators has done, in node order (the root first).
    pub fn operator_stats(&self) -> Vec<OperatorStats> {
        self.nodes.iter().enumerate().map(|(index, n)| n.operator_stats(index)).collect()
    }

    /// What the system tables show of each operator now, in node order (the root first).
    pub fn node_stats(&self) -> Vec<NodeStats> {
        self.nodes.iter().enumerate().map(|(index, n)| n.stats(index)).collect()
    }

    /// Lets every operator emit what it has before any input (a new job only), and returns
    /// what reaches the view. An operator's first rows follow what it made of its inputs' first
    /// rows. Without `constants` the leaves of constant relations emit nothing: a job started
    /// from a savepoint continues one that already wrote them (as Flink restores a finished
    /// source as finished).
    pub fn on_create(&mut self, store: &Store, constants: bool) -> Result<Option<StreamChunk>> {
        let ctx = OpContext { store };
        let mut outputs = Vec::new();
        self.step(
            &mut |_, node, out| {
                let outs = node
                    .lanes
                    .iter_mut()
                    .map(|op| if constants || op.name() != VALUES { op.on_create(&ctx) } else { Ok(None) })
                    .collect::<Result<Vec<_>>>()?;
                emit(node, outs, out);
                Ok(())
            },
            &ctx,
            &mut outputs,
        )?;
        Self::combine(outputs)
    }

    /// The nodes, each after every node that feeds it, the last built first among those ready
    /// (for a plan without reused sub-plans: the reverse of the build order, as a node is built
    /// before its inputs).
    fn children_first(&self) -> Vec<usize> {
        let mut waiting: Vec<usize> = vec![0; self.nodes.len()];
        for node in &self.nodes {
            for &(p, _) in &node.parents {
                waiting[p] += 1;
            }
        }
        let mut ready: std::collections::BinaryHeap<usize> = (0..self.nodes.len()).filter(|&n| waiting[n] == 0).collect();
        let mut order = Vec::with_capacity(self.nodes.len());
        while let Some(node) = ready.pop() {
            order.push(node);
            for &(p, _) in &self.nodes[node].parents {
                waiting[p] -= 1;
                if waiting[p] == 0 {
                    ready.push(p);
                }
            }
        }
        order
    }

    /// The outputs of the instances of one operator as one chunk for the operator above.
    ///
    /// The instances ran side by side, so the order between their outputs is not the input's:
    /// when a change moves a row from one instance's key to another's (an UPDATE of a Top-N's
    /// partition column, of a join key), one instance retracts the old row while another
    /// inserts the new one, and a view upserting by a key the instances do not share (the
    /// row's id) must see the retraction first, or it deletes the new row. So when every
    /// instance's output is its retractions, then its insertions (`-D`/`-U` rows before any
    /// `+I`/`+U`: the rank operator always emits so, and an instance that only retracts or
    /// only inserts does), all the retractions go first, each instance's in its order, then
    /// all the insertions; an update pair split by this becomes a delete and an insert.
    /// Otherwise the outputs are concatenated in instance order.
    fn merge_instances(outputs: Vec<StreamChunk>) -> Result<Option<StreamChunk>> {
        let retracts = |op: &Op| matches!(op, Op::Delete | Op::UpdateBefore);
        let ordered = |c: &StreamChunk| c.ops.iter().skip_while(|op| retracts(op)).all(|op| !retracts(op));
        if outputs.len() < 2 || !outputs.iter().all(ordered) {
            return Self::combine(outputs);
        }
        // Nothing to reorder when, concatenated, no insertion comes before a retraction.
        let mut inserted = false;
        let mut misordered = false;
        for op in outputs.iter().flat_map(|c| c.ops.iter()) {
            if !retracts(op) {
                inserted = true;
            } else if inserted {
                misordered = true;
                break;
            }
        }
        if !misordered {
            return Self::combine(outputs);
        }
        let mut parts = Vec::with_capacity(2 * outputs.len());
        let mut inserts = Vec::with_capacity(outputs.len());
        for chunk in outputs {
            let split = chunk.ops.iter().take_while(|op| retracts(op)).count();
            let as_single = |op: &Op| match op {
                Op::UpdateBefore => Op::Delete,
                Op::UpdateAfter => Op::Insert,
                other => *other,
            };
            if split > 0 {
                let indices: Vec<u32> = (0..split as u32).collect();
                parts.push(chunk.take(&indices, chunk.ops[..split].iter().map(as_single).collect())?);
            }
            if split < chunk.len() {
                let indices: Vec<u32> = (split as u32..chunk.len() as u32).collect();
                inserts.push(chunk.take(&indices, chunk.ops[split..].iter().map(as_single).collect())?);
            }
        }
        parts.extend(inserts);
        Self::combine(parts)
    }

    fn combine(mut outputs: Vec<StreamChunk>) -> Result<Option<StreamChunk>> {
        match outputs.len() {
            0 => Ok(None),
            1 => Ok(outputs.pop()),
            _ => {
                let schema = outputs[0].schema();
                Ok(Some(StreamChunk::concat(&schema, outputs)?))
            }
        }
    }

    /// The leaves that read `relation`: (node, input of that node).
    fn leaves(&self, relation: &str) -> Vec<(usize, usize)> {
        self.sources.iter().filter(|(r, _, _)| r == relation).map(|(_, n, i)| (*n, *i)).collect()
    }

    /// The relations the job reads.
    pub fn reads(&self) -> Vec<&str> {
        self.sources.iter().map(|(r, _, _)| r.as_str()).collect()
    }

    /// Estimated bytes of the writes the operators' state tables hold since the last
    /// [`Job::on_barrier`] ([`crate::state::StateTable::pending_bytes`], over every instance).
    pub fn pending_bytes(&self) -> u64 {
        self.nodes.iter().map(Node::pending_bytes).sum()
    }

    /// Whether the job may go on while its epoch commits behind it: at parallelism 2 or more
    /// (at 1 a job runs on one thread, its commits included), when every operator lets it
    /// ([`Operator::commits_behind`]).
    pub fn commits_behind(&self) -> bool {
        self.parallelism > 1 && self.nodes.iter().flat_map(|n| &n.lanes).all(|op| op.commits_behind())
    }

    /// Tells every operator that the epoch of the last [`Job::on_barrier`] is committed, as
    /// epoch `epoch` ([`Operator::on_committed`]).
    pub fn on_committed(&mut self, epoch: u64) {
        for node in &mut self.nodes {
            for op in &mut node.lanes {
                op.on_committed(epoch);
            }
        }
    }

    /// The first failure an operator kept from [`Job::on_committed`] ([`Operator::failure`]).
    pub fn failure(&self) -> Option<String> {
        self.nodes.iter().flat_map(|n| &n.lanes).find_map(|op| op.failure())
    }

    /// Hands every operator's epoch writes to `writes`; operators read `store` for what a
    /// barrier does besides (a state TTL sweep).
    pub fn on_barrier(&mut self, store: &Store, writes: &mut EpochWrites) -> Result<()> {
        let ctx = OpContext { store };
        for node in &mut self.nodes {
            for op in &mut node.lanes {
                op.on_barrier(writes, &ctx)?;
            }
        }
        Ok(())
    }
}

/// A source chunk for the `n` instances of its leaf: in contiguous parts (never between the two
/// rows of an update) when `split` (the leaf feeds stateless instances) and the chunk is long
/// enough, else whole to the first instance.
fn split_source(chunk: &StreamChunk, n: usize, split: bool) -> Vec<Option<StreamChunk>> {
    let mut lanes = vec![None; n];
    if !split || chunk.len() < MIN_SPLIT_ROWS {
        lanes[0] = Some(chunk.clone());
        return lanes;
    }
    let mut start = 0;
    for (lane, slot) in lanes.iter_mut().enumerate() {
        let mut end = (chunk.len() * (lane + 1) / n).max(start);
        if end < chunk.len() && end > 0 && chunk.ops[end - 1] == Op::UpdateBefore {
            end += 1;
        }
        if end > start {
            let ops = chunk.ops[start..end].to_vec();
            *slot = Some(StreamChunk::new(ops, chunk.batch.slice(start, end - start)));
        }
        start = end;
    }
    lanes
}

/// Calls `f` on each instance that has an input (`inputs[i]` for `lanes[i]`), on the worker
/// pool when more than one has; `None` for an instance without input. Returns the results and
/// the time the calls took, summed (ns). Fails with the first error.
fn each_lane<T: Send, R: Send>(
    lanes: &mut [Box<dyn Operator>],
    inputs: Vec<Option<T>>,
    f: impl Fn(&mut dyn Operator, T) -> Result<R> + Sync,
) -> Result<(Vec<Option<R>>, u64)> {
    let timed = |op: &mut Box<dyn Operator>, i: Option<T>| -> Result<(Option<R>, u64)> {
        let Some(i) = i else { return Ok((None, 0)) };
        let start = std::time::Instant::now();
        let r = f(op.as_mut(), i)?;
        Ok((Some(r), start.elapsed().as_nanos() as u64))
    };
    let busy = inputs.iter().filter(|i| i.is_some()).count();
    let results: Vec<(Option<R>, u64)> = if busy <= 1 {
        lanes.iter_mut().zip(inputs).map(|(op, i)| timed(op, i)).collect::<Result<_>>()?
    } else {
        use rayon::prelude::*;
        lanes.par_iter_mut().zip(inputs.into_par_iter()).map(|(op, i)| timed(op, i)).collect::<Result<_>>()?
    };
    let busy_ns = results.iter().map(|r| r.1).sum();
    Ok((results.into_iter().map(|r| r.0).collect(), busy_ns))
}

/// `e` as a physical expression over `schema`.
///
/// # Errors
/// `Unsupported` for a subquery left in an expression (one DataFusion did not turn into a
/// join), named as SQL names it; DataFusion's planning errors.
fn physical_expr(e: &Expr, schema: &DFSchema) -> Result<Arc<dyn PhysicalExpr>> {
    let mut subquery = None;
    e.apply(|e| {
        subquery = match e {
            Expr::ScalarSubquery(_) => Some("a scalar subquery"),
            Expr::Exists(_) => Some("EXISTS (subquery)"),
            Expr::InSubquery(_) => Some("IN (subquery)"),
            _ => None,
        };
        Ok(if subquery.is_some() { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    })?;
    if let Some(kind) = subquery {
        return Err(WeirError::unsupported(format!(
            "{kind} in a materialized view or job is not supported yet (an ad-hoc SELECT runs it)"
        )));
    }
    Ok(create_physical_expr(e, schema, &ExecutionProps::new(), &PhysicalPlanningContext::default())?)
}

fn physical_exprs(exprs: &[Expr], schema: &DFSchema) -> Result<Vec<Arc<dyn PhysicalExpr>>> {
    exprs.iter().map(|e| physical_expr(e, schema)).collect()
}

fn agg_call(e: &Expr, input: &DFSchema, output_type: arrow::datatypes::DataType) -> Result<AggCall> {
    let e = match e {
        Expr::Alias(a) => a.expr.as_ref(),
        other => other,
    };
    let Expr::AggregateFunction(f) = e else {
        return Err(WeirError::unsupported(format!("aggregate expression {e}")));
    };
    let name = f.func.name().to_lowercase();
    let kind = match name.as_str() {
        "count" => AggKind::Count,
        "sum" => AggKind::Sum,
        "avg" | "mean" => AggKind::Avg,
        "min" => AggKind::Min,
        "max" => AggKind::Max,
        "string_agg" => AggKind::StringAgg,
        "array_agg" => AggKind::ArrayAgg,
        "first_value" => AggKind::FirstValue,
        "last_value" => AggKind::LastValue,
        other => {
            return Err(WeirError::unsupported(format!(
                "aggregate function {other} in a streaming GROUP BY; supported: COUNT, SUM, AVG, MIN, MAX, STDDEV_POP, \
                 STDDEV_SAMP, VAR_POP, VAR_SAMP, BOOL_AND, BOOL_OR, STRING_AGG, LISTAGG, ARRAY_AGG, FIRST_VALUE, LAST_VALUE"
            )))
        }
    };
    let params = &f.params;
    let mut separator = None;
    if kind.by_arrival() {
        let upper = name.to_uppercase();
        let respects_nulls = params.null_treatment == Some(datafusion::logical_expr::expr::NullTreatment::RespectNulls);
        if respects_nulls && matches!(kind, AggKind::FirstValue | AggKind::LastValue) {
            return Err(WeirError::unsupported(format!(
                "{upper}(..) RESPECT NULLS beside other aggregates in a streaming GROUP BY: Flink's {upper} skips NULLs; \
                 leave out RESPECT NULLS"
            )));
        }
        if params.distinct {
            return Err(WeirError::unsupported(format!(
                "{upper}(DISTINCT ..) in a streaming GROUP BY; aggregate the distinct values of a subquery"
            )));
        }
        if !params.order_by.is_empty() {
            return Err(WeirError::unsupported(format!(
                "{upper}(.. ORDER BY ..) in a streaming GROUP BY: the values are {} in arrival order, as Flink's {} \
                 them; leave out the ORDER BY",
                if kind.is_list() { "joined" } else { "taken" },
                if kind.is_list() { "LISTAGG and ARRAY_AGG join" } else { "FIRST_VALUE and LAST_VALUE take" }
            )));
        }
        if kind == AggKind::StringAgg {
            separator = Some(match params.args.get(1).map(without_casts) {
                Some(Expr::Literal(v, _)) if v.is_null() => String::new(),
                Some(Expr::Literal(v, _)) => match v.try_as_str() {
                    Some(Some(s)) => s.to_string(),
                    _ => return Err(WeirError::unsupported(format!("{upper} with a separator that is not a string: {v}"))),
                },
                Some(other) => {
                    return Err(WeirError::unsupported(format!(
                        "{upper} with a separator that is not a constant string: {other}"
                    )))
                }
                None => return Err(WeirError::unsupported(format!("{upper} without a separator"))),
            });
        }
    }
    if params.args.len() > 1 + usize::from(kind == AggKind::StringAgg) {
        return Err(WeirError::unsupported(format!("{name} with {} arguments", params.args.len())));
    }
    let (arg, arg_type) = match params.args.first() {
        Some(a) => (Some(physical_expr(a, input)?), a.get_type(input)?),
        None => (None, arrow::datatypes::DataType::Null),
    };
    let filter = params.filter.as_ref().map(|f| physical_expr(f, input)).transpose()?;
    // MIN and MAX of the distinct values are those of all values: DISTINCT changes nothing.
    let distinct = params.distinct && !matches!(kind, AggKind::Min | AggKind::Max);
    Ok(AggCall { kind, arg, distinct, filter, arg_type, output_type, separator })
}

/// `e` without the casts type coercion put around a constant (`CAST(',' AS Utf8)`).
fn without_casts(e: &Expr) -> &Expr {
    match e {
        Expr::Cast(c) => without_casts(&c.expr),
        Expr::TryCast(c) => without_casts(&c.expr),
        other => other,
    }
}
