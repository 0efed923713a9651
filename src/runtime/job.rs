//! A job: the operators of one stream plan, instantiated and wired, ending in a
//! [`Materialize`] of the view's rows.
//!
//! Push-based: a changelog chunk of a relation enters at every leaf that reads it and flows to
//! the root; what the root emits is the view's own changelog, which the caller feeds to the
//! jobs reading this view.
//!
//! Operator state tables are named `<node index>/<table>`, node indexes in build order (a
//! pre-order walk of the plan), so the names are stable for a given plan.

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
use crate::runtime::changelog::StreamChunk;
use crate::runtime::operator::{OpContext, Operator};
use crate::runtime::operators::filter::Filter;
use crate::runtime::operators::group_agg::{AggCall, AggKind, GroupAggregate};
use crate::plan::join::TimeBound;
use crate::runtime::operators::join::{Join, JoinOptions};
use crate::runtime::operators::temporal_join::{TemporalJoin, TemporalJoinOptions};
use crate::runtime::operators::materialize::{Materialize, StorageMode};
use crate::runtime::operators::normalize::ChangelogNormalize;
use crate::runtime::operators::over_agg::{OverAggregate, AGG_PREFIX as OVER_AGG_PREFIX};
use crate::plan::over::OverFrame;
use crate::runtime::operators::project::Project;
use crate::runtime::operators::rank::{Rank, RankOptions};
use crate::plan::window::WindowKind;
use crate::runtime::operators::session_assign::SessionAssign;
use crate::runtime::operators::sliced_window_agg::{SlicedWindowAggOptions, SlicedWindowAggregate};
use crate::runtime::operators::union::Union;
use crate::runtime::operators::window_assign::WindowAssign;
use crate::state::{EpochWrites, Store};

struct Node {
    op: Box<dyn Operator>,
    /// The node this one feeds, and on which input.
    parent: Option<(usize, usize)>,
}

/// A running job; see the module docs.
pub struct Job {
    nodes: Vec<Node>,
    /// Leaves: (relation, node, input of that node).
    sources: Vec<(String, usize, usize)>,
}

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
    /// Instantiates `plan` followed by a materialization into state table `rows_table`.
    ///
    /// `state_table(name)` returns the id of the operator state table `name`, allocating it on
    /// first use; operators load their state from `store`.
    pub fn build(
        plan: &StreamPlan,
        mode: StorageMode,
        rows_table: u32,
        state_table: &mut dyn FnMut(&str) -> u32,
        store: &Store,
    ) -> Result<Self> {
        let out_schema: SchemaRef = Arc::new(plan.schema.as_arrow().clone());
        let root = Box::new(Materialize::try_new(&out_schema, mode, rows_table)?);
        Self::build_with_root(plan, root, state_table, store)
    }

    /// Instantiates `plan` followed by `root` (a sink of an `INSERT INTO` job).
    pub fn build_with_root(
        plan: &StreamPlan,
        root: Box<dyn Operator>,
        state_table: &mut dyn FnMut(&str) -> u32,
        store: &Store,
    ) -> Result<Self> {
        let mut job = Job { nodes: Vec::new(), sources: Vec::new() };
        job.nodes.push(Node { op: root, parent: None });
        job.add(plan, Some((0, 0)), state_table, store)?;
        Ok(job)
    }

    fn add(
        &mut self,
        plan: &StreamPlan,
        parent: Option<(usize, usize)>,
        state_table: &mut dyn FnMut(&str) -> u32,
        store: &Store,
    ) -> Result<usize> {
        let index = self.nodes.len();
        let schema: SchemaRef = Arc::new(plan.schema.as_arrow().clone());
        let op: Box<dyn Operator> = match &plan.node {
            StreamNode::Source { relation } => {
                self.sources.push((relation.clone(), index, 0));
                Box::new(Source)
            }
            StreamNode::Project { input, exprs } => {
                let exprs = physical_exprs(exprs, &input.schema)?;
                Box::new(Project::try_new(exprs, schema)?)
            }
            StreamNode::ChangelogNormalize { key, state_ttl_ms, .. } => {
                let mut prefixed = |name: &str| state_table(&format!("{index}/{name}"));
                Box::new(ChangelogNormalize::try_new(schema, key.clone(), *state_ttl_ms, &mut prefixed, store)?)
            }
            StreamNode::Filter { input, predicate } => {
                Box::new(Filter::try_new(physical_expr(predicate, &input.schema)?)?)
            }
            StreamNode::Union { inputs } => Box::new(Union::try_new(schema, inputs.len())?),
            StreamNode::WindowAssign { input, spec } => {
                let mut prefixed = |name: &str| state_table(&format!("{index}/{name}"));
                if spec.kind == WindowKind::Session {
                    let input_schema: SchemaRef = Arc::new(input.schema.as_arrow().clone());
                    Box::new(SessionAssign::try_new(spec.clone(), input_schema, schema, &mut prefixed, store)?)
                } else {
                    Box::new(WindowAssign::try_new(spec.clone(), schema, &mut prefixed, store)?)
                }
            }
            StreamNode::Join { left, right, join } => {
                let (left_keys, right_keys): (Vec<Expr>, Vec<Expr>) = join.on.iter().cloned().unzip();
                let mut prefixed = |name: &str| state_table(&format!("{index}/{name}"));
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
                    Box::new(TemporalJoin::try_new(opts, &mut prefixed, store)?)
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
                        left_schema: Arc::new(left.schema.as_arrow().clone()),
                        right_schema: Arc::new(right.schema.as_arrow().clone()),
                        schema,
                    };
                    Box::new(Join::try_new(opts, &mut prefixed, store)?.with_state_ttl(join.state_ttl_ms))
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
                };
                let mut prefixed = |name: &str| state_table(&format!("{index}/{name}"));
                Box::new(Rank::try_new(opts, &mut prefixed, store)?)
            }
            StreamNode::GroupAggregate { input, group_exprs, aggr_exprs, window_end, emit_on_window_close, state_ttl_ms } => {
                let group = physical_exprs(group_exprs, &input.schema)?;
                let aggs = aggr_exprs
                    .iter()
                    .enumerate()
                    .map(|(i, e)| {
                        let output_type = plan.schema.field(group_exprs.len() + i).data_type().clone();
                        agg_call(e, &input.schema, output_type)
                    })
                    .collect::<Result<Vec<_>>>()?;
                let mut prefixed = |name: &str| state_table(&format!("{index}/{name}"));
                let window = window_end.map(|k| (k, *emit_on_window_close, input.window_lateness()));
                let append_only = input.changelog == crate::plan::ChangelogMode::AppendOnly;
                Box::new(
                    GroupAggregate::try_new(group, aggs, schema, window, append_only, &mut prefixed, store)?
                        .with_state_ttl(*state_ttl_ms),
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
                    let mut prefixed = |name: &str| state_table(&format!("{index}/{OVER_AGG_PREFIX}{name}"));
                    let schema = Arc::new(Schema::new(fields));
                    GroupAggregate::try_new(partition.clone(), aggs, schema, None, unbounded, &mut prefixed, store)?
                };
                let mut prefixed = |name: &str| state_table(&format!("{index}/{name}"));
                Box::new(OverAggregate::try_new(
                    partition,
                    (spec.time_column, spec.proctime),
                    spec.frame,
                    input_schema,
                    schema,
                    inner,
                    &mut prefixed,
                    store,
                )?)
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
                };
                let mut prefixed = |name: &str| state_table(&format!("{index}/{name}"));
                Box::new(SlicedWindowAggregate::try_new(opts, &mut prefixed, store)?)
            }
        };
        self.nodes.push(Node { op, parent });
        for (i, input) in plan.inputs().into_iter().enumerate() {
            self.add(input, Some((index, i)), state_table, store)?;
        }
        Ok(index)
    }

    /// Pushes a change of `relation` through the job; returns the view's resulting changes.
    pub fn push(&mut self, relation: &str, chunk: &StreamChunk, store: &Store) -> Result<Option<StreamChunk>> {
        let ctx = OpContext { store };
        let mut outputs = Vec::new();
        let leaves = self.leaves(relation);
        for (node, input) in leaves {
            let out = self.nodes[node].op.process_batch(input, chunk.clone(), &ctx)?;
            self.forward(node, out, &ctx, &mut outputs)?;
        }
        Self::combine(outputs)
    }

    /// Sends the watermark of `relation` through the job; returns what the view emits because
    /// of it (closed windows) and the view's own watermark.
    pub fn on_watermark(
        &mut self,
        relation: &str,
        watermark_ms: i64,
        store: &Store,
    ) -> Result<(Option<StreamChunk>, Option<i64>)> {
        let ctx = OpContext { store };
        let mut outputs = Vec::new();
        let mut out_watermark = None;
        let leaves = self.leaves(relation);
        for (leaf, input) in leaves {
            let (mut node, mut input, mut wm) = (leaf, input, Some(watermark_ms));
            while let Some(w) = wm.take() {
                let (chunk, next) = self.nodes[node].op.on_watermark(input, w, &ctx)?;
                self.forward(node, chunk, &ctx, &mut outputs)?;
                match (next, self.nodes[node].parent) {
                    (Some(n), Some((p, i))) => {
                        node = p;
                        input = i;
                        wm = Some(n);
                    }
                    (Some(n), None) => out_watermark = Some(n),
                    (None, _) => {}
                }
            }
        }
        Ok((Self::combine(outputs)?, out_watermark))
    }

    /// Late input rows dropped since the last call: (operator, relation the rows are of, rows,
    /// watermark ms). Only window assigners that read a relation directly report them.
    pub fn take_late_rows(&mut self) -> Vec<(&'static str, String, arrow::array::RecordBatch, i64)> {
        // The relation read directly by each node, if one of its inputs is a leaf.
        let fed_by: Vec<(usize, String)> = self
            .sources
            .iter()
            .filter_map(|(relation, leaf, _)| self.nodes[*leaf].parent.map(|(p, _)| (p, relation.clone())))
            .collect();
        let mut out = Vec::new();
        for (i, node) in self.nodes.iter_mut().enumerate() {
            let Some((_, relation)) = fed_by.iter().find(|(p, _)| *p == i) else { continue };
            for (rows, wm) in node.op.take_late_rows() {
                out.push((node.op.name(), relation.clone(), rows, wm));
            }
        }
        out
    }

    /// Late rows dropped by the job's event-time operators: (node index, operator, count).
    pub fn late_rows(&self) -> Vec<(usize, &'static str, u64)> {
        self.event_time_operators().into_iter().map(|(i, op, _, late)| (i, op, late)).collect()
    }

    /// The job's event-time operators: (node index, operator, watermark ms, late rows).
    pub fn event_time_operators(&self) -> Vec<(usize, &'static str, Option<i64>, u64)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.op.event_time_watermark().map(|wm| (i, n.op.name(), wm, n.op.num_late_rows())))
            .collect()
    }

    /// Lets every operator emit what it has before any input (a new job only), and returns
    /// what reaches the view.
    pub fn on_create(&mut self, store: &Store) -> Result<Option<StreamChunk>> {
        let ctx = OpContext { store };
        let mut outputs = Vec::new();
        // Children before parents: a parent is always built before its inputs.
        for node in (0..self.nodes.len()).rev() {
            let out = self.nodes[node].op.on_create(&ctx)?;
            self.forward(node, out, &ctx, &mut outputs)?;
        }
        Self::combine(outputs)
    }

    /// Sends `out`, emitted by `node`, on to the root, collecting what the root emits.
    fn forward(
        &mut self,
        mut node: usize,
        mut out: Option<StreamChunk>,
        ctx: &OpContext<'_>,
        outputs: &mut Vec<StreamChunk>,
    ) -> Result<()> {
        while let Some(c) = out.take() {
            match self.nodes[node].parent {
                Some((p, i)) => {
                    out = self.nodes[p].op.process_batch(i, c, ctx)?;
                    node = p;
                }
                None => outputs.push(c),
            }
        }
        Ok(())
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

    /// Every operator's state tables: (node index, operator, table name, table).
    pub fn state_tables(&self) -> Vec<(usize, &'static str, String, &crate::state::StateTable)> {
        self.nodes
            .iter()
            .enumerate()
            .flat_map(|(i, n)| n.op.state().into_iter().map(move |(name, t)| (i, n.op.name(), name, t)))
            .collect()
    }

    /// Hands every operator's epoch writes to `writes`; operators read `store` for what a
    /// barrier does besides (a state TTL sweep).
    pub fn on_barrier(&mut self, store: &Store, writes: &mut EpochWrites) -> Result<()> {
        let ctx = OpContext { store };
        for node in &mut self.nodes {
            node.op.on_barrier(writes, &ctx)?;
        }
        Ok(())
    }
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
        other => {
            return Err(WeirError::unsupported(format!(
                "aggregate function {other} in a streaming GROUP BY; supported: COUNT, SUM, AVG, MIN, MAX"
            )))
        }
    };
    let params = &f.params;
    if params.args.len() > 1 {
        return Err(WeirError::unsupported(format!("{name} with {} arguments", params.args.len())));
    }
    let (arg, arg_type) = match params.args.first() {
        Some(a) => (Some(physical_expr(a, input)?), a.get_type(input)?),
        None => (None, arrow::datatypes::DataType::Null),
    };
    let filter = params.filter.as_ref().map(|f| physical_expr(f, input)).transpose()?;
    Ok(AggCall { kind, arg, distinct: params.distinct, filter, arg_type, output_type })
}
