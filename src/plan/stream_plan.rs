//! The stream plan: a tree of stream operators, each annotated with its output schema,
//! changelog mode and stream key. Built from a DataFusion `LogicalPlan` by
//! [`crate::plan::planner`]; instantiated by [`crate::runtime::job`].

use std::fmt;

use datafusion::common::DFSchemaRef;
use datafusion::logical_expr::Expr;

use crate::plan::join::{JoinSpec, TimeBound};
use crate::plan::over::{OverSpec, OverWindowSpec};
use crate::plan::rank::RankSpec;
use crate::plan::slicing::SlicedAggSpec;
use crate::plan::window::WindowSpec;
use crate::plan::unalias;

/// What kind of changes a stream carries (Flink's ChangelogMode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ChangelogMode {
    /// Only `+I`.
    AppendOnly,
    /// `+I`, `+U` and `-D` by the stream key, without update-before images.
    Upsert,
    /// Every kind, with `-U` before images: retractions.
    Retract,
}

impl fmt::Display for ChangelogMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ChangelogMode::AppendOnly => "append-only",
            ChangelogMode::Upsert => "upsert",
            ChangelogMode::Retract => "retract",
        })
    }
}

/// One node of a stream plan.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamNode {
    /// The changelog of a table or materialized view.
    Source { relation: String },
    /// A constant relation (`VALUES (..), (..)`, or a `SELECT` without `FROM`, one row of no
    /// columns): its rows, one expression per column, inserted once when the job is created
    /// (Flink's StreamExecValues), append-only. An expression is evaluated then, so `now()`
    /// is the creation time and stays so across restarts.
    Values { rows: Vec<Vec<Expr>> },
    /// An upsert changelog made a retracting one (Flink's ChangelogNormalize): keeps the last
    /// row of each stream key, turns an upsert of a known key into `-U` old / `+U` new, a
    /// delete into `-D` of the stored row, and drops deletes of unknown keys and upserts that
    /// change nothing. Sits right above an `upsert-kafka` source.
    ChangelogNormalize {
        input: Box<StreamPlan>,
        /// The stream key columns of the input (its PRIMARY KEY).
        key: Vec<usize>,
        /// The time-to-live of a key's last row, ms ([`crate::plan::ttl`]).
        state_ttl_ms: Option<i64>,
    },
    /// The rows of an updating query keyed by an `upsert-kafka` sink's PRIMARY KEY, when that
    /// key does not hold the query's stream key (Flink's SinkUpsertMaterializer; rules in
    /// [`crate::runtime::operators::upsert_materialize`]): retract in, upsert out, keyed by
    /// `key`. Sits right under such a sink.
    SinkUpsertMaterialize {
        input: Box<StreamPlan>,
        /// The sink's PRIMARY KEY columns, as positions in the input.
        key: Vec<usize>,
        /// The time-to-live of a key's rows, ms ([`crate::plan::ttl`]).
        state_ttl_ms: Option<i64>,
    },
    /// One expression per output column.
    Project { input: Box<StreamPlan>, exprs: Vec<Expr> },
    /// Rows whose predicate is true.
    Filter { input: Box<StreamPlan>, predicate: Expr },
    /// UNION ALL.
    Union { inputs: Vec<StreamPlan> },
    /// A window TVF: assigns each row its windows, dropping windows already closed.
    WindowAssign { input: Box<StreamPlan>, spec: WindowSpec },
    /// A join of two streams: regular, interval or window ([`crate::plan::join`]).
    Join { left: Box<StreamPlan>, right: Box<StreamPlan>, join: JoinSpec },
    /// Deduplication and Top-N: a rank function kept to a range of ranks ([`crate::plan::rank`]).
    Rank { input: Box<StreamPlan>, spec: RankSpec },
    /// GROUP BY (or DISTINCT, with no aggregates). With `window_end` (the index of the group
    /// expression that is a window's end) the groups of a window are freed when the watermark
    /// closes it, and with `emit_on_window_close` they are emitted then, once, instead of as
    /// they change.
    GroupAggregate {
        input: Box<StreamPlan>,
        group_exprs: Vec<Expr>,
        aggr_exprs: Vec<Expr>,
        window_end: Option<usize>,
        emit_on_window_close: bool,
        /// The time-to-live of an unwindowed aggregation's groups, ms ([`crate::plan::ttl`]).
        state_ttl_ms: Option<i64>,
        /// A global aggregate (no GROUP BY) has its one row from the start, `COUNT(*) = 0` and
        /// the rest NULL, as Postgres's (a view's); without it, as Flink's (an `INSERT INTO`
        /// job's), the row comes with the first input row and goes (a delete) when its last
        /// row is retracted ([`StreamPlan::set_global_aggregates_flink`]).
        empty_row: bool,
    },
    /// A window aggregation with EMIT ON WINDOW CLOSE over HOP or CUMULATE slices
    /// ([`crate::plan::slicing`]): the output of the GroupAggregate it replaces.
    SlicedWindowAggregate { input: Box<StreamPlan>, spec: SlicedAggSpec },
    /// `agg(x) OVER (PARTITION BY .. ORDER BY time [frame])` over an append-only input
    /// ([`crate::plan::over`]): the input's columns, then one per aggregate.
    OverAggregate { input: Box<StreamPlan>, spec: OverSpec },
    /// Window functions (`OVER`) over an updating input ([`crate::plan::over`]): the input's
    /// columns, then one per function, kept equal to the functions over the input's rows.
    OverWindow { input: Box<StreamPlan>, spec: OverWindowSpec },
    /// One row per element of an array column, the other columns repeated (`SELECT id,
    /// UNNEST(tags)`; Flink's `CROSS JOIN UNNEST`, which `sql/` writes so).
    Unnest { input: Box<StreamPlan>, spec: UnnestSpec },
}

/// What an [`StreamNode::Unnest`] takes from its input.
#[derive(Debug, Clone, PartialEq)]
pub struct UnnestSpec {
    /// The output columns, in order.
    pub columns: Vec<UnnestColumn>,
    /// The input column of the array.
    pub list: usize,
    /// What a NULL or empty array gives: no row for SQL's `UNNEST` (DataFusion's
    /// `NullHandling::Drop`), a row with a NULL element for its outer unnest.
    pub nulls: datafusion::common::NullHandling,
}

/// Where an output column of an [`StreamNode::Unnest`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnnestColumn {
    /// Input column `i`, repeated for each element of its row's array.
    Repeat(usize),
    /// The elements of input column `i`, the array.
    Elements(usize),
}

/// How the rows of a node's inputs reach its parallel instances (Flink's stream partitioners).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exchange {
    /// One instance sees every row: an operator whose state is not split by a key (a global
    /// aggregate, a join without equi-keys, NOT IN, a sink), or one not yet run in parallel.
    Single,
    /// Each instance takes the rows of the instance below it: a stateless, row-at-a-time
    /// operator (projection, filter, window assignment).
    Forward,
    /// Rows go to the instance that owns their key's key group (a hash exchange on the
    /// partition key: group keys, join keys, the rank's PARTITION BY, the stream key).
    Hash,
}

/// A stream plan node with its properties.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamPlan {
    pub node: StreamNode,
    /// Output schema (qualified names, as DataFusion resolved them).
    pub schema: DFSchemaRef,
    /// The kind of changes the node emits.
    pub changelog: ChangelogMode,
    /// Output column indexes that identify a row, if the node has a stream key.
    pub stream_key: Option<Vec<usize>>,
}

impl StreamPlan {
    /// The plan of a scan of `relation` with `schema`: its changelog, made a retracting one by
    /// a [`StreamNode::ChangelogNormalize`] when the relation emits an upsert changelog
    /// (`upsert-kafka`), as Flink does for an upsert source without update-before rows.
    pub fn source(relation: String, schema: DFSchemaRef, changelog: ChangelogMode, stream_key: Option<Vec<usize>>) -> Self {
        let source = StreamPlan { node: StreamNode::Source { relation }, schema: std::sync::Arc::clone(&schema), changelog, stream_key };
        match (&source.changelog, source.stream_key.clone()) {
            (ChangelogMode::Upsert, Some(key)) => StreamPlan {
                schema,
                changelog: ChangelogMode::Retract,
                stream_key: Some(key.clone()),
                node: StreamNode::ChangelogNormalize { input: Box::new(source), key, state_ttl_ms: None },
            },
            _ => source,
        }
    }

    /// This plan under a [`StreamNode::SinkUpsertMaterialize`] keyed by `key` (positions in
    /// this plan's output): an upsert changelog keyed by `key`.
    pub fn materialize_upsert(self, key: Vec<usize>) -> StreamPlan {
        StreamPlan {
            schema: std::sync::Arc::clone(&self.schema),
            changelog: ChangelogMode::Upsert,
            stream_key: Some(key.clone()),
            node: StreamNode::SinkUpsertMaterialize { input: Box::new(self), key, state_ttl_ms: None },
        }
    }

    /// The node's name as shown by EXPLAIN.
    pub fn name(&self) -> &'static str {
        match &self.node {
            StreamNode::Source { .. } => "StreamSource",
            StreamNode::Values { .. } => "StreamValues",
            StreamNode::ChangelogNormalize { .. } => "StreamChangelogNormalize",
            StreamNode::SinkUpsertMaterialize { .. } => "StreamSinkUpsertMaterializer",
            StreamNode::Project { .. } => "StreamProject",
            StreamNode::Filter { .. } => "StreamFilter",
            StreamNode::Union { .. } => "StreamUnion",
            StreamNode::WindowAssign { .. } => "StreamWindowAssign",
            StreamNode::Join { join, .. } => join.name(),
            StreamNode::Rank { spec, .. } => spec.name(),
            StreamNode::GroupAggregate { window_end: Some(_), .. } => "StreamWindowAggregate",
            StreamNode::GroupAggregate { .. } => "StreamGroupAggregate",
            StreamNode::SlicedWindowAggregate { spec, .. } if spec.window.kind == crate::plan::window::WindowKind::Session => {
                crate::plan::slicing::SESSION_NAME
            }
            StreamNode::SlicedWindowAggregate { .. } => crate::plan::slicing::NAME,
            StreamNode::OverAggregate { .. } => crate::plan::over::NAME,
            StreamNode::OverWindow { .. } => crate::plan::over::WINDOW_NAME,
            StreamNode::Unnest { .. } => "StreamUnnest",
        }
    }

    /// The node's inputs.
    pub fn inputs(&self) -> Vec<&StreamPlan> {
        match &self.node {
            StreamNode::Source { .. } | StreamNode::Values { .. } => vec![],
            StreamNode::Project { input, .. }
            | StreamNode::ChangelogNormalize { input, .. }
            | StreamNode::SinkUpsertMaterialize { input, .. }
            | StreamNode::Filter { input, .. }
            | StreamNode::WindowAssign { input, .. }
            | StreamNode::Rank { input, .. }
            | StreamNode::GroupAggregate { input, .. }
            | StreamNode::OverAggregate { input, .. }
            | StreamNode::OverWindow { input, .. }
            | StreamNode::Unnest { input, .. }
            | StreamNode::SlicedWindowAggregate { input, .. } => vec![input],
            StreamNode::Union { inputs } => inputs.iter().collect(),
            StreamNode::Join { left, right, .. } => vec![left, right],
        }
    }

    /// The node's inputs, mutable.
    pub fn inputs_mut(&mut self) -> Vec<&mut StreamPlan> {
        match &mut self.node {
            StreamNode::Source { .. } | StreamNode::Values { .. } => vec![],
            StreamNode::Project { input, .. }
            | StreamNode::ChangelogNormalize { input, .. }
            | StreamNode::SinkUpsertMaterialize { input, .. }
            | StreamNode::Filter { input, .. }
            | StreamNode::WindowAssign { input, .. }
            | StreamNode::Rank { input, .. }
            | StreamNode::GroupAggregate { input, .. }
            | StreamNode::OverAggregate { input, .. }
            | StreamNode::OverWindow { input, .. }
            | StreamNode::Unnest { input, .. }
            | StreamNode::SlicedWindowAggregate { input, .. } => vec![input.as_mut()],
            StreamNode::Union { inputs } => inputs.iter_mut().collect(),
            StreamNode::Join { left, right, .. } => vec![left.as_mut(), right.as_mut()],
        }
    }

    /// The number of nodes in this plan (itself and everything below it).
    pub fn node_count(&self) -> usize {
        1 + self.inputs().iter().map(|i| i.node_count()).sum::<usize>()
    }

    /// Whether a job computes this sub-plan once for every place it appears in a plan (README,
    /// "Sub-plan reuse"; Flink's `table.optimizer.reuse-sub-plan-enabled`): any sub-plan but a
    /// bare scan (each leaf of a relation already gets the same rows) and one with a volatile
    /// expression (`random()`, whose copies would each draw their own values).
    pub fn reusable(&self) -> bool {
        !matches!(self.node, StreamNode::Source { .. }) && !self.has_volatile_expr()
    }

    fn has_volatile_expr(&self) -> bool {
        self.own_exprs().iter().any(|e| e.is_volatile()) || self.inputs().iter().any(|i| i.has_volatile_expr())
    }

    /// The expressions of this node alone (not of its inputs).
    fn own_exprs(&self) -> Vec<&Expr> {
        match &self.node {
            StreamNode::Source { .. }
            | StreamNode::ChangelogNormalize { .. }
            | StreamNode::SinkUpsertMaterialize { .. }
            | StreamNode::Union { .. }
            | StreamNode::Unnest { .. }
            | StreamNode::WindowAssign { .. } => vec![],
            StreamNode::Project { exprs, .. } => exprs.iter().collect(),
            StreamNode::Values { rows } => rows.iter().flatten().collect(),
            StreamNode::Filter { predicate, .. } => vec![predicate],
            StreamNode::Join { join, .. } => {
                join.on.iter().flat_map(|(l, r)| [l, r]).chain(join.filter.as_ref()).collect()
            }
            StreamNode::Rank { spec, .. } => {
                spec.partition_by.iter().chain(spec.order_by.iter().map(|o| &o.expr)).collect()
            }
            StreamNode::GroupAggregate { group_exprs, aggr_exprs, .. } => group_exprs.iter().chain(aggr_exprs).collect(),
            StreamNode::SlicedWindowAggregate { spec, .. } => spec.group_exprs.iter().chain(&spec.aggr_exprs).collect(),
            StreamNode::OverAggregate { spec, .. } => spec.partition_by.iter().chain(&spec.aggs).collect(),
            StreamNode::OverWindow { spec, .. } => spec
                .partition_by
                .iter()
                .chain(spec.order_by.iter().map(|o| &o.expr))
                .chain(&spec.functions)
                .collect(),
        }
    }

    /// The relations this plan reads, each once, in first-use order.
    pub fn sources(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_sources(&mut out);
        out
    }

    /// Whether a window TVF feeds this node.
    pub fn has_window(&self) -> bool {
        match &self.node {
            StreamNode::WindowAssign { .. } => true,
            // Window columns are plain columns after any join but a window join (Flink).
            StreamNode::Join { join, .. } if !matches!(join.time, Some(TimeBound::Window { .. })) => false,
            _ => self.inputs().iter().any(|i| i.has_window()),
        }
    }

    /// Sets the allowed lateness of every window in the plan, ms.
    pub fn set_allowed_lateness(&mut self, ms: i64) {
        if ms > 0 {
            crate::plan::slicing::unslice(self);
        }
        if let StreamNode::WindowAssign { spec, .. } = &mut self.node {
            spec.allowed_lateness_ms = ms;
        }
        match &mut self.node {
            StreamNode::Source { .. } => {}
            StreamNode::Project { input, .. }
            | StreamNode::Filter { input, .. }
            | StreamNode::Unnest { input, .. }
            | StreamNode::WindowAssign { input, .. }
            | StreamNode::Rank { input, .. }
            | StreamNode::GroupAggregate { input, .. } => input.set_allowed_lateness(ms),
            StreamNode::Union { inputs } => inputs.iter_mut().for_each(|i| i.set_allowed_lateness(ms)),
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }

    /// The allowed lateness of the window that feeds this node, ms (0 without one).
    pub fn window_lateness(&self) -> i64 {
        match &self.node {
            StreamNode::WindowAssign { spec, .. } => spec.allowed_lateness_ms,
            _ => self.inputs().iter().map(|i| i.window_lateness()).max().unwrap_or(0),
        }
    }

    /// Makes the topmost window aggregate emit on window close (append-only output).
    ///
    /// # Errors
    /// `Plan` when the query has no window aggregation (GROUP BY window_start, window_end).
    pub fn set_emit_on_window_close(&mut self) -> crate::error::Result<()> {
        if self.try_set_eowc() {
            return Ok(());
        }
        let mut msg = "EMIT ON WINDOW CLOSE needs a windowed operator at the top of the query: a window aggregation (GROUP BY window_start, window_end over TUMBLE, HOP or CUMULATE), a window Top-N or a window deduplication (PARTITION BY window_start, window_end), a window join (ON window_start and window_end), or an interval join of append-only inputs".to_string();
        if self.top_interval_join_has_updating_input() {
            msg.push_str(
                "; this interval join has an updating input: a plain table takes UPDATE and DELETE, and so does a \
                 connector table with a primary key or a changelog format, while one without (kafka with json, \
                 filesystem, nexmark) is append-only",
            );
        }
        Err(crate::error::WeirError::plan(msg))
    }

    /// Whether the query's top (below projections and filters) is an interval join with an
    /// input that is not append-only, which EMIT ON WINDOW CLOSE refuses.
    fn top_interval_join_has_updating_input(&self) -> bool {
        match &self.node {
            StreamNode::Join { left, right, join } if matches!(join.time, Some(TimeBound::Interval { .. })) => {
                left.changelog != ChangelogMode::AppendOnly || right.changelog != ChangelogMode::AppendOnly
            }
            StreamNode::Project { input, .. } | StreamNode::Filter { input, .. } => input.top_interval_join_has_updating_input(),
            _ => false,
        }
    }

    fn try_set_eowc(&mut self) -> bool {
        let set = match &mut self.node {
            StreamNode::GroupAggregate { window_end: Some(_), emit_on_window_close, .. } => {
                *emit_on_window_close = true;
                true
            }
            StreamNode::SlicedWindowAggregate { .. } => true,
            StreamNode::Rank { input, spec } if is_window_rank(input, spec) => {
                spec.emit_on_window_close = true;
                // The rows are kept until the window closes, also for keep-first.
                spec.keep_first = false;
                true
            }
            StreamNode::Join { join, .. } if matches!(join.time, Some(TimeBound::Window { .. })) => {
                join.emit_on_window_close = true;
                true
            }
            // SQL.md: an outer interval join with EMIT ON WINDOW CLOSE emits its padded rows once,
            // final (its pairs already are, over append-only inputs).
            StreamNode::Join { left, right, join }
                if matches!(join.time, Some(TimeBound::Interval { .. }))
                    && left.changelog == ChangelogMode::AppendOnly
                    && right.changelog == ChangelogMode::AppendOnly =>
            {
                join.emit_on_window_close = true;
                true
            }
            StreamNode::Project { input, .. } | StreamNode::Filter { input, .. } | StreamNode::Unnest { input, .. } => {
                input.try_set_eowc()
            }
            // GROUPING SETS over a window TVF (grouping_sets.rs): each set's window aggregate.
            StreamNode::Union { inputs } => inputs.iter_mut().fold(true, |all, input| input.try_set_eowc() && all),
            _ => false,
        };
        if set {
            self.changelog = ChangelogMode::AppendOnly;
            crate::plan::slicing::slice(self);
        }
        set
    }

    /// Makes every window aggregation, window Top-N, window deduplication, window join and
    /// outer interval join of the plan emit each window once, final, when it closes (an outer
    /// interval join its padded rows once their bound has passed), wherever it sits (under joins
    /// too): Flink's window TVF aggregation, Top-N, deduplication and join and its interval
    /// join, used by INSERT INTO jobs. Projections, filters and unions over append-only inputs
    /// become append-only.
    pub fn set_window_aggregations_final(&mut self) {
        for input in self.inputs_mut() {
            input.set_window_aggregations_final();
        }
        let is_window_agg = match &self.node {
            StreamNode::GroupAggregate { window_end: Some(_), .. } => true,
            StreamNode::Rank { input, spec } => is_window_rank(input, spec),
            StreamNode::Join { join, .. } => match join.time {
                Some(TimeBound::Window { .. }) => true,
                // Flink's interval join pads an outer row only when the watermark passes its
                // bound, so its output is append-only.
                Some(TimeBound::Interval { .. }) => {
                    use crate::plan::join::StreamJoinType::{Full, Left, Right};
                    matches!(join.join_type, Left | Right | Full)
                }
                _ => false,
            },
            _ => false,
        };
        if is_window_agg {
            self.try_set_eowc();
        } else if matches!(
            self.node,
            StreamNode::Project { .. } | StreamNode::Filter { .. } | StreamNode::Union { .. } | StreamNode::Unnest { .. }
        )
            && self.inputs().iter().all(|i| i.changelog == ChangelogMode::AppendOnly)
        {
            self.changelog = ChangelogMode::AppendOnly;
        }
    }

    /// Makes every global aggregate (no GROUP BY) of the plan emit its row only once it has
    /// input, and delete it when its last row is retracted, as Flink's `GroupAggFunction` does:
    /// an `INSERT INTO` job writes no `COUNT(*) = 0` row before any input (a view shows it, as
    /// Postgres's).
    pub fn set_global_aggregates_flink(&mut self) {
        for input in self.inputs_mut() {
            input.set_global_aggregates_flink();
        }
        if let StreamNode::GroupAggregate { group_exprs, empty_row, .. } = &mut self.node {
            if group_exprs.is_empty() {
                *empty_row = false;
            }
        }
    }

    fn collect_sources(&self, out: &mut Vec<String>) {
        if let StreamNode::Source { relation } = &self.node {
            if !out.contains(relation) {
                out.push(relation.clone());
            }
        }
        let mut inputs = self.inputs();
        if matches!(&self.node, StreamNode::Join { join, .. } if join.lookup) {
            // A lookup join's dimension first: a backfill then finds it loaded.
            inputs.reverse();
        }
        for input in inputs {
            input.collect_sources(out);
        }
    }

    /// How this node's input rows reach its parallel instances; see [`Exchange`].
    pub fn exchange(&self) -> Exchange {
        use crate::plan::join::StreamJoinType;
        match &self.node {
            StreamNode::Source { .. }
            | StreamNode::Project { .. }
            | StreamNode::Filter { .. }
            | StreamNode::Union { .. }
            | StreamNode::Unnest { .. } => Exchange::Forward,
            StreamNode::WindowAssign { spec, .. } if spec.kind != crate::plan::window::WindowKind::Session || spec.slices => {
                Exchange::Forward
            }
            StreamNode::ChangelogNormalize { key, .. } | StreamNode::SinkUpsertMaterialize { key, .. } if !key.is_empty() => {
                Exchange::Hash
            }
            StreamNode::Join { join, .. }
                if !join.on.is_empty()
                    && !join.lookup
                    && join.join_type != StreamJoinType::NotIn
                    && !matches!(join.time, Some(TimeBound::Temporal { .. })) =>
            {
                Exchange::Hash
            }
            StreamNode::Rank { spec, .. } if !spec.partition_by.is_empty() => Exchange::Hash,
            StreamNode::OverWindow { spec, .. } if !spec.partition_by.is_empty() => Exchange::Hash,
            StreamNode::GroupAggregate { group_exprs, .. } if !group_exprs.is_empty() => Exchange::Hash,
            StreamNode::SlicedWindowAggregate { spec, .. } if spec.window_columns.iter().any(Option::is_none) => {
                Exchange::Hash
            }
            _ => Exchange::Single,
        }
    }

    /// The key a [`Exchange::Hash`] node's rows are distributed by, for EXPLAIN.
    pub(crate) fn exchange_key(&self) -> String {
        match &self.node {
            StreamNode::ChangelogNormalize { key, .. } | StreamNode::SinkUpsertMaterialize { key, .. } => format!("{key:?}"),
            StreamNode::Join { join: spec, .. } => {
                let (l, r): (Vec<Expr>, Vec<Expr>) = spec.on.iter().cloned().unzip();
                format!("[{}] / [{}]", join(&l), join(&r))
            }
            StreamNode::Rank { spec, .. } => format!("[{}]", join(&spec.partition_by)),
            StreamNode::OverWindow { spec, .. } => format!("[{}]", join(&spec.partition_by)),
            StreamNode::GroupAggregate { group_exprs, .. } => format!("[{}]", join(group_exprs)),
            StreamNode::SlicedWindowAggregate { spec, .. } => {
                let keys: Vec<Expr> = spec
                    .group_exprs
                    .iter()
                    .zip(&spec.window_columns)
                    .filter(|(_, w)| w.is_none())
                    .map(|(e, _)| e.clone())
                    .collect();
                format!("[{}]", join(&keys))
            }
            _ => String::new(),
        }
    }

    /// The indented EXPLAIN text of the whole tree as a job of `parallelism` instances runs
    /// it: each line ends with the node's parallelism, and a node behind a hash exchange names
    /// the exchange's key (Flink's `Exchange(distribution=[hash[..]])`). With parallelism 1,
    /// [`StreamPlan::explain`].
    pub fn explain_parallel(&self, parallelism: usize) -> Vec<String> {
        if parallelism <= 1 {
            return self.explain();
        }
        let mut out = Vec::new();
        self.explain_parallel_into(0, parallelism, &mut Vec::new(), &mut out);
        out
    }

    fn explain_parallel_into<'a>(&'a self, depth: usize, parallelism: usize, seen: &mut Vec<&'a StreamPlan>, out: &mut Vec<String>) {
        if self.reused(seen) {
            out.push(format!("{}{}", "  ".repeat(depth), self.reuse_line()));
            return;
        }
        out.push(format!("{}{} {}", "  ".repeat(depth), self.explain_line(), self.parallel_line(parallelism)));
        for input in self.inputs() {
            input.explain_parallel_into(depth + 1, parallelism, seen, out);
        }
    }

    /// Whether EXPLAIN has shown this sub-plan already (`seen`: the reusable sub-plans shown so
    /// far, in EXPLAIN's order); if not and it is reusable, adds it to `seen`. A job runs a
    /// sub-plan once however many times the plan holds it ([`StreamPlan::reusable`]).
    fn reused<'a>(&'a self, seen: &mut Vec<&'a StreamPlan>) -> bool {
        if !self.reusable() {
            return false;
        }
        if seen.iter().any(|s| *s == self) {
            return true;
        }
        seen.push(self);
        false
    }

    /// EXPLAIN's line for a sub-plan shown above: its top node's name and stream key (Flink
    /// shows `Reused(reference_id=[..])`).
    fn reuse_line(&self) -> String {
        let key = match &self.stream_key {
            Some(k) => format!("{k:?}"),
            None => "none".into(),
        };
        format!("Reused: {} above, computed once changelog={} stream_key={key}", self.name(), self.changelog)
    }

    /// How this node runs in a job of `parallelism` (> 1): `parallelism=N`, after
    /// `exchange=hash[key]` when its input is hash-partitioned; the end of its EXPLAIN line.
    pub fn parallel_line(&self, parallelism: usize) -> String {
        match self.exchange() {
            Exchange::Single => "parallelism=1".to_string(),
            Exchange::Forward => format!("parallelism={parallelism}"),
            Exchange::Hash => format!("exchange=hash{} parallelism={parallelism}", self.exchange_key()),
        }
    }

    /// The EXPLAIN line of this node (without children).
    pub fn explain_line(&self) -> String {
        let detail = match &self.node {
            StreamNode::Source { relation } => format!("relation={relation}"),
            StreamNode::Values { rows } => format!("rows={}", rows.len()),
            StreamNode::ChangelogNormalize { key, .. } | StreamNode::SinkUpsertMaterialize { key, .. } => {
                format!("key={key:?}")
            }
            StreamNode::Project { exprs, .. } => format!("exprs=[{}]", join(exprs)),
            StreamNode::Filter { predicate, .. } => format!("predicate={predicate}"),
            // The array as the query wrote it: DataFusion names it `__unnest_placeholder(..)`
            // in a projection right below.
            StreamNode::Unnest { spec, input } => match &input.node {
                StreamNode::Project { exprs, .. } if spec.list < exprs.len() => format!("array={}", unalias(&exprs[spec.list])),
                _ => format!("array={}", input.schema.field(spec.list).name()),
            },
            StreamNode::Union { inputs } => format!("inputs={}", inputs.len()),
            StreamNode::Join { join, .. } => join.explain(),
            StreamNode::Rank { spec, .. } => spec.explain(),
            StreamNode::SlicedWindowAggregate { spec, .. } => spec.explain(),
            StreamNode::OverAggregate { spec, .. } => spec.explain(),
            StreamNode::OverWindow { spec, .. } => spec.explain(),
            StreamNode::WindowAssign { spec, .. } => format!(
                "{}(table={}, time={}, size={}ms, slide={}ms, offset={}ms){}",
                spec.kind.name(),
                spec.table,
                spec.time_column,
                spec.size_ms,
                spec.slide_ms,
                spec.offset_ms,
                if spec.slices { ", slices" } else if spec.late_in_join { ", late rows dropped by the join" } else { "" }
            ),
            StreamNode::GroupAggregate { group_exprs, aggr_exprs, emit_on_window_close, empty_row, .. } => format!(
                "group=[{}], aggs=[{}]{}{}",
                join(group_exprs),
                join(aggr_exprs),
                if *emit_on_window_close { ", emit=on-window-close" } else { "" },
                if group_exprs.is_empty() && !*empty_row { ", no row without input" } else { "" }
            ),
        };
        let key = match &self.stream_key {
            Some(k) => format!("{k:?}"),
            None => "none".into(),
        };
        let ms = |t: &Option<i64>| t.map_or("none".to_string(), |t| format!("{t}ms"));
        let ttl = match &self.node {
            StreamNode::GroupAggregate { state_ttl_ms: t @ Some(_), .. }
            | StreamNode::ChangelogNormalize { state_ttl_ms: t @ Some(_), .. }
            | StreamNode::SinkUpsertMaterialize { state_ttl_ms: t @ Some(_), .. }
            | StreamNode::Rank { spec: crate::plan::rank::RankSpec { state_ttl_ms: t @ Some(_), .. }, .. } => {
                format!(", state_ttl={}", ms(t))
            }
            StreamNode::Join { join, .. } if join.state_ttl_ms.iter().any(Option::is_some) => {
                format!(", state_ttl=[left={}, right={}]", ms(&join.state_ttl_ms[0]), ms(&join.state_ttl_ms[1]))
            }
            _ => String::new(),
        };
        format!("{}: {detail}{ttl} changelog={} stream_key={key}", self.name(), self.changelog)
    }

    /// The indented EXPLAIN text of the whole tree, one node per line; a reusable sub-plan that
    /// appears again is shown once, then as one `Reused:` line ([`StreamPlan::reusable`]).
    pub fn explain(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.explain_into(0, &mut Vec::new(), &mut out);
        out
    }

    fn explain_into<'a>(&'a self, depth: usize, seen: &mut Vec<&'a StreamPlan>, out: &mut Vec<String>) {
        if self.reused(seen) {
            out.push(format!("{}{}", "  ".repeat(depth), self.reuse_line()));
            return;
        }
        out.push(format!("{}{}", "  ".repeat(depth), self.explain_line()));
        for input in self.inputs() {
            input.explain_into(depth + 1, seen, out);
        }
    }
}

fn join(exprs: &[Expr]) -> String {
    exprs.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", ")
}

/// Whether a rank over `input` is a window Top-N or window deduplication: its input carries
/// window columns and it partitions by `window_end` (Flink's WindowRank).
pub fn is_window_rank(input: &StreamPlan, spec: &RankSpec) -> bool {
    input.has_window() && spec.partition_by.iter().any(|e| matches!(e, Expr::Column(c) if c.name == "window_end"))
}
