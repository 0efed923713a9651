//! Window slicing (DESIGN.md "Performance principles"; Flink's slicing window aggregation,
//! `SliceSharedWindowAggProcessor`): a window aggregation that emits on window close over HOP
//! or CUMULATE becomes a [`StreamNode::SlicedWindowAggregate`] over a window assigner in slice
//! mode ([`WindowSpec::slices`]). Each row then updates the accumulator of one (group, slice),
//! and a window is assembled from its slices when it fires, instead of every row being copied
//! into `size / slide` windows.
//!
//! Slices are HOP's slide (Flink: gcd(size, slide), which is the slide since the size is a
//! multiple of it) and CUMULATE's step. Output, lateness and firing are the same as those of
//! WindowAssign + GroupAggregate (SQL.md "Windows").
//!
//! # When the rule applies
//! - a GroupAggregate with a `window_end` group column and EMIT ON WINDOW CLOSE;
//! - between it and a HOP or CUMULATE WindowAssign without allowed lateness, only Projects and
//!   Filters; the input is append-only or retracting (not upsert);
//! - the window columns are only passed through: bare columns in the Projects and group
//!   expressions, never read by a Filter, another expression or an aggregate;
//! - every aggregate is COUNT(*), COUNT(x), SUM, AVG, MIN or MAX without DISTINCT or FILTER;
//!   MIN and MAX only over append-only input (a retraction of the extreme needs every value).
//!
//! Anything else keeps the WindowAssign + GroupAggregate plan. An allowed lateness set after
//! planning ([`StreamPlan::set_allowed_lateness`]) undoes the rewrite ([`unslice`]) where it
//! reaches: below Projects, Filters, GroupAggregates and Unions from the top, not below a join.
//!
//! # Session windows
//! The same rewrite turns a SESSION aggregation into a session window aggregate (the same
//! node, [`SESSION_NAME`] in EXPLAIN; Flink's session window aggregation with its merging
//! window set): the window assigner gives each row its lone session `[t, t + gap)`, and the
//! aggregate merges the sessions of a group that touch, merging their accumulators, so it
//! keeps one accumulator per open session instead of every row of it, and no row is retracted
//! and re-emitted when its session grows. Unlike HOP and CUMULATE, a SESSION aggregation that
//! does not emit on window close (a view without EMIT ON WINDOW CLOSE, [`sessionize`]) is
//! rewritten too: it then keeps each open session's row up to date (a retraction of the
//! sessions a chunk changed or merged, then their new rows). It applies, besides the rules
//! above (SESSION in place of HOP or CUMULATE), when
//! - the window assigner's input is append-only (a retraction could split a session, which
//!   merged accumulators cannot undo);
//! - the group columns other than the window's are the SESSION's `PARTITION BY` columns, each
//!   passed through (without PARTITION BY: none), so sessions and groups are the same thing;
//! - no Filter sits between them: sessions are formed over every row of the window's input,
//!   also those a `WHERE` on the window's output then leaves out of the aggregate.

use std::collections::HashSet;

use datafusion::common::{Column, DFSchema};
use datafusion::logical_expr::Expr;

use crate::plan::stream_plan::{ChangelogMode, StreamNode, StreamPlan};
use crate::plan::window::{WindowKind, WindowSpec};
use crate::plan::unalias;

/// The EXPLAIN name of the sliced window aggregate.
pub const NAME: &str = "StreamSlicedWindowAggregate";
/// The EXPLAIN name of the session window aggregate (module docs, "Session windows").
pub const SESSION_NAME: &str = "StreamSessionWindowAggregate";

/// Which window column a column is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowColumn {
    Start,
    End,
    Time,
}

/// A sliced window aggregation: the GROUP BY it replaces and the window it slices.
#[derive(Debug, Clone, PartialEq)]
pub struct SlicedAggSpec {
    /// Group expressions over the input, as the GroupAggregate had them.
    pub group_exprs: Vec<Expr>,
    /// Aggregate expressions over the input.
    pub aggr_exprs: Vec<Expr>,
    /// The index of the `window_end` group expression.
    pub window_end: usize,
    /// For each group expression, the window column it is, if any (its input value is then
    /// the slice's bound, its output value the window's).
    pub window_columns: Vec<Option<WindowColumn>>,
    /// The window (HOP, CUMULATE or SESSION).
    pub window: WindowSpec,
    /// Emits each window once, when it closes (always, but for a session window aggregate in
    /// a view without EMIT ON WINDOW CLOSE, which keeps each open session's row up to date).
    pub emit_on_window_close: bool,
}

impl SlicedAggSpec {
    /// The EXPLAIN detail.
    pub fn explain(&self) -> String {
        let join = |e: &[Expr]| e.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", ");
        if self.window.kind == WindowKind::Session {
            return format!(
                "SESSION(gap={}ms), group=[{}], aggs=[{}]{}",
                self.window.size_ms,
                join(&self.group_exprs),
                join(&self.aggr_exprs),
                if self.emit_on_window_close { ", emit=on-window-close" } else { "" }
            );
        }
        format!(
            "{}(size={}ms, slide={}ms, offset={}ms), group=[{}], aggs=[{}], emit=on-window-close",
            self.window.kind.name(),
            self.window.size_ms,
            self.window.slide_ms,
            self.window.offset_ms,
            join(&self.group_exprs),
            join(&self.aggr_exprs)
        )
    }
}

/// Rewrites `plan`, a GroupAggregate that emits on window close, into a sliced window
/// aggregate when the rule applies (module docs); returns whether it did.
pub fn slice(plan: &mut StreamPlan) -> bool {
    if !matches!(plan.node, StreamNode::GroupAggregate { emit_on_window_close: true, .. }) {
        return false;
    }
    rewrite(plan)
}

/// Rewrites every SESSION aggregation of the plan that does not emit on window close into a
/// session window aggregate that keeps each open session's row up to date, where the rule
/// applies (module docs, "Session windows").
pub fn sessionize(plan: &mut StreamPlan) {
    for input in plan.inputs_mut() {
        sessionize(input);
    }
    let session = match &plan.node {
        StreamNode::GroupAggregate { input, emit_on_window_close: false, .. } => {
            window_columns(input).is_some_and(|(_, w)| w.kind == WindowKind::Session)
        }
        _ => false,
    };
    if session {
        rewrite(plan);
    }
}

/// The rewrite of [`slice`] and [`sessionize`].
fn rewrite(plan: &mut StreamPlan) -> bool {
    let StreamNode::GroupAggregate { input, group_exprs, aggr_exprs, window_end: Some(window_end), emit_on_window_close, .. } =
        &plan.node
    else {
        return false;
    };
    let emit_on_window_close = *emit_on_window_close;
    if input.changelog == ChangelogMode::Upsert {
        return false;
    }
    let Some((inner, window)) = window_columns(input) else { return false };
    let Some(group_roles) = group_exprs.iter().map(|e| role(e, &input.schema, &inner)).collect::<Option<Vec<_>>>() else {
        return false;
    };
    if group_roles.get(*window_end) != Some(&Some(WindowColumn::End)) {
        return false;
    }
    let append_only = if window.kind == WindowKind::Session {
        // A SESSION assigner retracts; what counts is what it reads.
        let append_only = window_input(input).is_some_and(|i| i.changelog == ChangelogMode::AppendOnly);
        if !append_only || filters(input) || !groups_by_partition(input, group_exprs, &group_roles, &window) {
            return false;
        }
        true
    } else {
        input.changelog == ChangelogMode::AppendOnly
    };
    if !aggr_exprs.iter().all(|e| mergeable(e, append_only) && !reads_window(e, &input.schema, &inner)) {
        return false;
    }
    let StreamNode::GroupAggregate { mut input, group_exprs, aggr_exprs, window_end: Some(window_end), .. } =
        std::mem::replace(&mut plan.node, StreamNode::Union { inputs: vec![] })
    else {
        unreachable!("matched above")
    };
    set_slices(&mut input, true);
    plan.node = StreamNode::SlicedWindowAggregate {
        input,
        spec: SlicedAggSpec {
            group_exprs,
            aggr_exprs,
            window_end,
            window_columns: group_roles,
            window,
            emit_on_window_close,
        },
    };
    true
}

/// Turns a sliced window aggregate back into WindowAssign + GroupAggregate (EMIT ON WINDOW
/// CLOSE); other nodes are left as they are.
pub fn unslice(plan: &mut StreamPlan) {
    if !matches!(plan.node, StreamNode::SlicedWindowAggregate { .. }) {
        return;
    }
    let StreamNode::SlicedWindowAggregate { mut input, spec } =
        std::mem::replace(&mut plan.node, StreamNode::Union { inputs: vec![] })
    else {
        unreachable!("matched above")
    };
    set_slices(&mut input, false);
    plan.node = StreamNode::GroupAggregate {
        input,
        group_exprs: spec.group_exprs,
        aggr_exprs: spec.aggr_exprs,
        window_end: Some(spec.window_end),
        emit_on_window_close: spec.emit_on_window_close,
        state_ttl_ms: None,
        empty_row: true,
    };
}

/// Switches slice mode of the window assigner below Projects and Filters. A SESSION assigner
/// in that mode (lone sessions) emits its input's changelog, out of it a retracting one, and
/// the Projects and Filters above it follow.
fn set_slices(plan: &mut StreamPlan, on: bool) {
    let changelog = match &mut plan.node {
        StreamNode::WindowAssign { spec, input } => {
            spec.slices = on;
            (spec.kind == WindowKind::Session).then_some(if on { input.changelog } else { ChangelogMode::Retract })
        }
        StreamNode::Project { input, .. } | StreamNode::Filter { input, .. } => {
            set_slices(input, on);
            Some(input.changelog)
        }
        _ => None,
    };
    if let Some(changelog) = changelog {
        plan.changelog = changelog;
    }
}

/// Whether a chain of Projects and Filters has a Filter.
fn filters(plan: &StreamPlan) -> bool {
    match &plan.node {
        StreamNode::Filter { .. } => true,
        StreamNode::Project { input, .. } => filters(input),
        _ => false,
    }
}

/// The input of the window assigner below a chain of Projects and Filters.
fn window_input(plan: &StreamPlan) -> Option<&StreamPlan> {
    match &plan.node {
        StreamNode::WindowAssign { input, .. } => Some(input),
        StreamNode::Project { input, .. } | StreamNode::Filter { input, .. } => window_input(input),
        _ => None,
    }
}

/// For each output column of a chain of Projects and Filters over a window assigner, the
/// column of the assigner's input it passes through unchanged, if any.
fn origins(plan: &StreamPlan) -> Vec<Option<usize>> {
    let n = plan.schema.fields().len();
    match &plan.node {
        StreamNode::WindowAssign { .. } => (0..n).map(|j| (j + 3 < n).then_some(j)).collect(),
        StreamNode::Filter { input, .. } => origins(input),
        StreamNode::Project { input, exprs } => {
            let inner = origins(input);
            exprs
                .iter()
                .map(|e| match unalias(e) {
                    Expr::Column(c) => input.schema.maybe_index_of_column(c).and_then(|i| inner[i]),
                    _ => None,
                })
                .collect()
        }
        _ => vec![None; n],
    }
}

/// Whether the group expressions that are not window columns (`roles`) are exactly the
/// SESSION's `PARTITION BY` columns, each passed through from the window's input.
fn groups_by_partition(input: &StreamPlan, group_exprs: &[Expr], roles: &[Option<WindowColumn>], window: &WindowSpec) -> bool {
    let origins = origins(input);
    let mut keys = HashSet::new();
    for (e, role) in group_exprs.iter().zip(roles) {
        if role.is_some() {
            continue;
        }
        let Expr::Column(c) = unalias(e) else { return false };
        let Some(origin) = input.schema.maybe_index_of_column(c).and_then(|i| origins[i]) else { return false };
        keys.insert(origin);
    }
    keys == window.partition_by.iter().copied().collect::<HashSet<_>>()
}

/// For a chain of Projects and Filters over a HOP, CUMULATE or SESSION window assigner without allowed
/// lateness: which output columns are window columns, and the window. `None` when the chain
/// has another node or uses a window column other than by passing it through.
fn window_columns(plan: &StreamPlan) -> Option<(Vec<Option<WindowColumn>>, WindowSpec)> {
    match &plan.node {
        StreamNode::WindowAssign { spec, .. }
            if matches!(spec.kind, WindowKind::Hop | WindowKind::Cumulate | WindowKind::Session)
                && spec.allowed_lateness_ms == 0 =>
        {
            let n = plan.schema.fields().len();
            let mut roles = vec![None; n];
            roles[n - 3] = Some(WindowColumn::Start);
            roles[n - 2] = Some(WindowColumn::End);
            roles[n - 1] = Some(WindowColumn::Time);
            Some((roles, spec.clone()))
        }
        StreamNode::Filter { input, predicate } => {
            let (roles, spec) = window_columns(input)?;
            (!reads_window(predicate, &input.schema, &roles)).then_some((roles, spec))
        }
        StreamNode::Project { input, exprs } => {
            let (inner, spec) = window_columns(input)?;
            let roles = exprs.iter().map(|e| role(e, &input.schema, &inner)).collect::<Option<Vec<_>>>()?;
            Some((roles, spec))
        }
        _ => None,
    }
}

/// The window column `e` passes through, `Some(None)` for an expression that reads none, and
/// `None` for one that reads a window column in any other way (or a column not found).
fn role(e: &Expr, schema: &DFSchema, roles: &[Option<WindowColumn>]) -> Option<Option<WindowColumn>> {
    if let Expr::Column(c) = unalias(e) {
        return Some(roles[schema.maybe_index_of_column(c)?]);
    }
    (!reads_window(e, schema, roles)).then_some(None)
}

/// Whether `e` reads a window column (or a column it cannot resolve).
fn reads_window(e: &Expr, schema: &DFSchema, roles: &[Option<WindowColumn>]) -> bool {
    let columns: HashSet<&Column> = e.column_refs();
    columns.into_iter().any(|c| schema.maybe_index_of_column(c).is_none_or(|i| roles[i].is_some()))
}

/// Whether aggregate `e` merges slice by slice: COUNT, SUM, AVG (any input), MIN, MAX
/// (append-only input), without DISTINCT or FILTER.
fn mergeable(e: &Expr, append_only: bool) -> bool {
    let Expr::AggregateFunction(f) = unalias(e) else { return false };
    let name = f.func.name().to_lowercase();
    let kind_ok = match name.as_str() {
        "count" | "sum" | "avg" | "mean" => true,
        "min" | "max" => append_only,
        _ => false,
    };
    kind_ok && !f.params.distinct && f.params.filter.is_none() && f.params.args.len() <= 1
}
