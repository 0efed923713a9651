//! Planning deduplication and Top-N (SQL.md "Deduplication and Top-N"): a rank function
//! filtered to a range of ranks becomes a [`StreamNode::Rank`], not a general window function.
//!
//! Recognised shapes (DataFusion's optimized plan):
//!
//! ```text
//! [Projection]                       the outer SELECT list, with or without the rank column
//!   Filter: rn <= N AND ...          rn = N, rn < N, rn <= N, rn > N, rn >= N, BETWEEN (as
//!     [Projection]*                  >= AND <=), either operand order; other conjuncts stay
//!       Window: ROW_NUMBER() | RANK() | DENSE_RANK() OVER (PARTITION BY .. ORDER BY ..)
//! ```
//!
//! and Postgres' `SELECT DISTINCT ON (k) ... ORDER BY k, t`, which DataFusion rewrites into
//! `Aggregate: groupBy=[k], aggr=[first_value(c ORDER BY [k, t]) ...]` (under a `Sort` on `k`):
//! any GROUP BY whose aggregates are all `first_value` (or all `last_value`) with one ordering is
//! keep-first ROW_NUMBER `rn = 1` per group, followed by a projection.
//!
//! The range must have an upper bound (`rn <= N`); a lower bound alone is not Top-N.
//!
//! # Order, processing time and ties
//! An ORDER BY key that is a processing-time attribute (`PROCTIME()`, directly or as a column
//! computed by it) orders by arrival: later rows have later processing times. Keys after it are
//! dropped (arrival has no ties). Rows whose order keys tie are ordered by arrival, so
//! ROW_NUMBER is deterministic; RANK and DENSE_RANK give ties one rank (SQL).
//!
//! Which arrival wins a tie follows Flink. A Top-N keeps the earlier arrival at its boundary
//! (Flink's AppendOnlyTopNFunction and RetractableTopNFunction put a row after the rows with
//! an equal sort key). A deduplication, `ROW_NUMBER() ... ORDER BY t` with rank range `= 1`
//! (or `<= 1`), the rank column not selected and `t` the one order key, an event-time
//! attribute (Flink's `RankUtil.canConvertToDeduplicate`), keeps the first row when `t` is
//! ascending (an equal time does not replace the kept row: the earlier arrival wins) and the
//! last row when `t` is descending: a row whose time is equal or later replaces the kept one
//! (Flink's `DeduplicateFunctionHelper.shouldKeepCurrentRow`), so the later arrival wins.
//!
//! # Changelog and stream key
//! Keep-first by arrival (ORDER BY a processing-time attribute ASC, or no ORDER BY under
//! ROW_NUMBER) over an append-only input is append-only: a first row never changes (Flink's
//! ProcTimeDeduplicateKeepFirstRow). Everything else retracts. Stream key: with ROW_NUMBER and
//! the rank column in the output, the partition columns and the rank (Flink); with one rank kept
//! (`rn = 1`, `rn = 2`) under ROW_NUMBER, the partition columns; else the input's stream key.
//! Partition keys that are expressions rather than columns fall back to the input's key.

use std::fmt;
use std::sync::Arc;

use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::expr::{AggregateFunction, WindowFunction};
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{
    Aggregate, BinaryExpr, Expr, LogicalPlan, Operator, SortExpr, WindowFunctionDefinition,
};

use crate::error::{Result, WeirError};
use crate::plan::planner::{plan_stream, remap_key, SourceCatalog};
use crate::plan::stream_plan::{ChangelogMode, StreamNode, StreamPlan};
use crate::plan::unalias;

/// The EXPLAIN name of a Top-N node.
pub const NAME: &str = "StreamRank";
/// The EXPLAIN name of a node keeping one row per partition (ROW_NUMBER `rn = 1`).
pub const DEDUPLICATE_NAME: &str = "StreamDeduplicate";

/// The rank function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankFunction {
    /// 1, 2, 3, ...: ties broken by arrival.
    RowNumber,
    /// 1, 1, 3, ...: one plus the number of rows ordered strictly before.
    Rank,
    /// 1, 1, 2, ...: the number of distinct order keys up to and including the row's.
    DenseRank,
}

impl RankFunction {
    /// The SQL name.
    pub fn name(self) -> &'static str {
        match self {
            RankFunction::RowNumber => "ROW_NUMBER",
            RankFunction::Rank => "RANK",
            RankFunction::DenseRank => "DENSE_RANK",
        }
    }

    fn from_window_function(name: &str) -> Option<Self> {
        match name {
            "row_number" => Some(RankFunction::RowNumber),
            "rank" => Some(RankFunction::Rank),
            "dense_rank" => Some(RankFunction::DenseRank),
            _ => None,
        }
    }
}

/// What a rank operator computes. Expressions are over the node's input schema.
#[derive(Debug, Clone, PartialEq)]
pub struct RankSpec {
    pub function: RankFunction,
    pub partition_by: Vec<Expr>,
    /// The order keys before any processing-time key.
    pub order_by: Vec<SortExpr>,
    /// `Some(asc)` when the order ends with a processing-time key: arrival order, earliest
    /// first when `asc`. `None`: ties are broken by arrival, earliest first.
    pub arrival: Option<bool>,
    /// Input columns holding processing time: a retraction carries a new processing time, so
    /// these columns are ignored when matching it with a kept row.
    pub arrival_columns: Vec<usize>,
    /// The first and last rank kept (1-based, inclusive).
    pub lo: u64,
    pub hi: u64,
    /// Whether the rank column is appended to the input columns in the output.
    pub output_rank: bool,
    /// Emit changes position by position (`-U` old row at rank k, `+U` new row at rank k): the
    /// stream key is (partition columns, rank). Otherwise all retractions precede all inserts.
    pub pair_by_rank: bool,
    /// Append-only input kept first by arrival: state is a row count per partition and the
    /// output is append-only.
    pub keep_first: bool,
    /// The time-to-live of the state of a rank over unwindowed input, ms
    /// ([`crate::plan::ttl`]).
    pub state_ttl_ms: Option<i64>,
    /// Window Top-N and window deduplication only: emit each window's ranked rows once, `+I`,
    /// when the watermark closes the window, and nothing before (`EMIT ON WINDOW CLOSE`, and
    /// every `INSERT INTO` job: Flink's window Top-N and window deduplication are final).
    pub emit_on_window_close: bool,
}

impl RankSpec {
    /// The node's EXPLAIN name.
    pub fn name(&self) -> &'static str {
        if self.function == RankFunction::RowNumber && self.lo == 1 && self.hi == 1 {
            DEDUPLICATE_NAME
        } else {
            NAME
        }
    }

    /// The node's EXPLAIN detail.
    pub fn explain(&self) -> String {
        let mut order: Vec<String> = self.order_by.iter().map(|s| s.to_string()).collect();
        match self.arrival {
            Some(true) => order.push("arrival ASC".into()),
            Some(false) => order.push("arrival DESC".into()),
            None => {}
        }
        format!(
            "{}() partition=[{}] order=[{}] rank={}..={}{}{}",
            self.function.name(),
            self.partition_by.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "),
            order.join(", "),
            self.lo,
            self.hi,
            if self.output_rank { ", output_rank" } else { "" },
            if self.keep_first { ", keep_first" } else { "" },
        ) + if self.emit_on_window_close { " emit=on-window-close" } else { "" }
    }
}

impl fmt::Display for RankSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.explain())
    }
}

/// Plans `plan` as Top-N when it is `Filter(rank range) over [Projection]* over Window(rank)`;
/// `above` is the projection over the filter, if any (the rank column is dropped from the
/// operator's output when neither it nor the filter's other conjuncts use it).
///
/// Returns `None` for any other shape.
///
/// # Errors
/// `Unsupported` for an upsert input (the operator needs update-before images); planning errors
/// of the input.
pub fn plan_top_n(
    plan: &LogicalPlan,
    above: Option<&[Expr]>,
    catalog: &dyn SourceCatalog,
) -> Result<Option<StreamPlan>> {
    let LogicalPlan::Filter(filter) = plan else { return Ok(None) };
    // Projections between the filter and the window, top-down.
    let mut between = Vec::new();
    let mut node = filter.input.as_ref();
    let window = loop {
        match node {
            LogicalPlan::Projection(p) => {
                between.push(p);
                node = p.input.as_ref();
            }
            LogicalPlan::Window(w) => break w,
            _ => return Ok(None),
        }
    };
    let [window_expr] = window.window_expr.as_slice() else { return Ok(None) };
    let Expr::WindowFunction(wf) = unalias(window_expr) else { return Ok(None) };
    let WindowFunction { fun: WindowFunctionDefinition::WindowUDF(udf), params } = wf.as_ref() else {
        return Ok(None);
    };
    let Some(function) = RankFunction::from_window_function(udf.name()) else { return Ok(None) };
    if !params.args.is_empty() || params.filter.is_some() {
        return Ok(None);
    }

    // The rank column, followed up through the projections.
    let num_inputs = window.input.schema().fields().len();
    let mut rank_col = Column::from(window.schema.qualified_field(num_inputs));
    let mut needed = false;
    let mut rank_index_in = Vec::with_capacity(between.len());
    for p in between.iter().rev() {
        let mut found = None;
        for (i, e) in p.expr.iter().enumerate() {
            match unalias(e) {
                Expr::Column(c) if *c == rank_col && found.is_none() => found = Some(i),
                other => needed |= references(other, &rank_col),
            }
        }
        let Some(i) = found else { return Ok(None) };
        rank_index_in.push(i);
        rank_col = Column::from(p.schema.qualified_field(i));
    }

    // The rank range, and what else the filter asks.
    let (mut lo, mut hi) = (1u64, None::<u64>);
    let mut residual = Vec::new();
    for conjunct in split_conjunction(&filter.predicate) {
        match rank_bound(conjunct, &rank_col) {
            Some(Bound { lower, upper }) => {
                lo = lo.max(lower);
                if let Some(upper) = upper {
                    hi = Some(hi.map_or(upper, |h| h.min(upper)));
                }
            }
            None => {
                needed |= references(conjunct, &rank_col);
                residual.push(conjunct.clone());
            }
        }
    }
    let Some(hi) = hi else { return Ok(None) };
    needed |= match above {
        Some(exprs) => exprs.iter().any(|e| references(e, &rank_col)),
        None => true,
    };

    let input = plan_stream(&window.input, catalog)?;
    let (order_by, mut arrival) = split_order(&params.order_by, &window.input);
    if arrival.is_none() && keep_last_on_event_time(function, lo, hi, needed, &order_by, &input, catalog)? {
        // Deduplication keeping the last row: the later arrival wins a tie (module docs).
        arrival = Some(false);
    }
    let arrival_columns = arrival_columns(&window.input);
    let spec_input = RankInput { function, partition_by: params.partition_by.clone(), order_by, arrival, lo, hi };
    let schema = if needed {
        Arc::clone(&window.schema)
    } else {
        Arc::clone(window.input.schema())
    };
    let mut out = rank_node(input, spec_input, arrival_columns, needed, schema)?;

    // The projections between, without the rank column when it is not needed.
    for (p, rank_index) in between.iter().rev().zip(rank_index_in) {
        let (exprs, schema) = if needed {
            (p.expr.clone(), Arc::clone(&p.schema))
        } else {
            let exprs: Vec<Expr> =
                p.expr.iter().enumerate().filter(|(i, _)| *i != rank_index).map(|(_, e)| e.clone()).collect();
            let fields = p
                .schema
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != rank_index)
                .map(|(_, (q, f))| (q.cloned(), Arc::clone(f)))
                .collect();
            (exprs, Arc::new(DFSchema::new_with_metadata(fields, p.schema.metadata().clone())?))
        };
        let stream_key = remap_key(&out.stream_key, &exprs, &out.schema);
        out = StreamPlan {
            schema,
            changelog: out.changelog,
            stream_key,
            node: StreamNode::Project { input: Box::new(out), exprs },
        };
    }
    if let Some(predicate) = conjunction(residual) {
        out = StreamPlan {
            schema: Arc::clone(&out.schema),
            changelog: out.changelog,
            stream_key: out.stream_key.clone(),
            node: StreamNode::Filter { input: Box::new(out), predicate },
        };
    }
    Ok(Some(out))
}

/// Plans a GROUP BY whose aggregates are all `first_value` (or all `last_value`) with one
/// ordering, as DataFusion plans `SELECT DISTINCT ON`: the first (last) row per group, then a
/// projection of the group columns and the aggregates' arguments. `None` for other aggregates.
///
/// # Errors
/// As [`plan_top_n`].
pub fn plan_distinct_on(agg: &Aggregate, catalog: &dyn SourceCatalog) -> Result<Option<StreamPlan>> {
    let Some((order, last, args)) = first_value_shape(agg) else { return Ok(None) };
    let input = plan_stream(&agg.input, catalog)?;
    // Order keys on the group columns are the same for every row of a group.
    let group: Vec<&Expr> = agg.group_expr.iter().map(unalias).collect();
    let order: Vec<SortExpr> = order
        .into_iter()
        .filter(|s| !group.contains(&unalias(&s.expr)))
        .map(|s| if last { SortExpr::new(s.expr, !s.asc, !s.nulls_first) } else { s })
        .collect();
    let (order_by, arrival) = split_order(&order, &agg.input);
    // Ties (and no ORDER BY) go by arrival: the earliest for first_value, the latest for last_value.
    let arrival = arrival.or(Some(!last));
    let spec_input = RankInput {
        function: RankFunction::RowNumber,
        partition_by: agg.group_expr.clone(),
        order_by,
        arrival,
        lo: 1,
        hi: 1,
    };
    let schema = Arc::clone(agg.input.schema());
    let rank = rank_node(input, spec_input, arrival_columns(&agg.input), false, schema)?;
    // The group columns are the key; an aggregate of a group column (DISTINCT ON's select list
    // repeats them) is the same column, and is the one a projection above keeps.
    let num_groups = agg.group_expr.len();
    let stream_key = group
        .iter()
        .enumerate()
        .map(|(i, g)| args.iter().position(|a| unalias(a) == *g).map_or(i, |j| num_groups + j))
        .collect();
    let mut exprs = agg.group_expr.clone();
    exprs.extend(args);
    Ok(Some(StreamPlan {
        schema: Arc::clone(&agg.schema),
        changelog: rank.changelog,
        stream_key: Some(stream_key),
        node: StreamNode::Project { input: Box::new(rank), exprs },
    }))
}

/// Whether `plan` is an aggregate [`plan_distinct_on`] plans (a `Sort` over it is DISTINCT ON's
/// ORDER BY, which a view ignores).
pub fn is_distinct_on(plan: &LogicalPlan) -> bool {
    matches!(plan, LogicalPlan::Aggregate(agg) if first_value_shape(agg).is_some())
}

/// The rank function call and range, before the stream properties are derived.
/// Whether a rank is Flink's keep-last deduplication on event time: ROW_NUMBER, rank range
/// 1..=1, the rank not selected, one order key, descending, that is an event-time attribute of
/// `input` (see the module docs on ties).
fn keep_last_on_event_time(
    function: RankFunction,
    lo: u64,
    hi: u64,
    rank_selected: bool,
    order_by: &[SortExpr],
    input: &StreamPlan,
    catalog: &dyn SourceCatalog,
) -> Result<bool> {
    let [key] = order_by else { return Ok(false) };
    if function != RankFunction::RowNumber || (lo, hi) != (1, 1) || rank_selected || key.asc {
        return Ok(false);
    }
    let Expr::Column(c) = unalias(&key.expr) else { return Ok(false) };
    let Some(index) = input.schema.maybe_index_of_column(c) else { return Ok(false) };
    Ok(crate::plan::join::time_columns(input, catalog)?.event_time.contains(&index))
}

struct RankInput {
    function: RankFunction,
    partition_by: Vec<Expr>,
    order_by: Vec<SortExpr>,
    arrival: Option<bool>,
    lo: u64,
    hi: u64,
}

fn rank_node(
    input: StreamPlan,
    r: RankInput,
    arrival_columns: Vec<usize>,
    output_rank: bool,
    schema: datafusion::common::DFSchemaRef,
) -> Result<StreamPlan> {
    if input.changelog == ChangelogMode::Upsert {
        return Err(WeirError::unsupported(format!(
            "{}() OVER (...) over an upsert changelog: Top-N and deduplication need the update-before rows of their input",
            r.function.name()
        )));
    }
    let num_inputs = input.schema.fields().len();
    let partition_cols: Option<Vec<usize>> = r
        .partition_by
        .iter()
        .map(|e| match unalias(e) {
            Expr::Column(c) => input.schema.index_of_column(c).ok(),
            _ => None,
        })
        .collect();
    let keep_first = input.changelog == ChangelogMode::AppendOnly
        && r.order_by.is_empty()
        && (r.arrival == Some(true) || (r.arrival.is_none() && r.function == RankFunction::RowNumber));
    let unique_ranks = r.function == RankFunction::RowNumber || keep_first;
    let (stream_key, pair_by_rank) = match partition_cols {
        Some(mut cols) if unique_ranks && output_rank => {
            cols.push(num_inputs);
            (Some(cols), true)
        }
        Some(cols) if unique_ranks && r.lo == r.hi => (Some(cols), false),
        _ => (input.stream_key.clone(), false),
    };
    let changelog = if keep_first { ChangelogMode::AppendOnly } else { ChangelogMode::Retract };
    let spec = RankSpec {
        function: r.function,
        partition_by: r.partition_by,
        order_by: r.order_by,
        arrival: r.arrival,
        arrival_columns,
        lo: r.lo,
        hi: r.hi,
        output_rank,
        pair_by_rank,
        keep_first,
        state_ttl_ms: None,
        emit_on_window_close: false,
    };
    Ok(StreamPlan { schema, changelog, stream_key, node: StreamNode::Rank { input: Box::new(input), spec } })
}

/// `first_value`/`last_value` aggregates sharing one ordering: (ordering, whether last_value,
/// the arguments).
fn first_value_shape(agg: &Aggregate) -> Option<(Vec<SortExpr>, bool, Vec<Expr>)> {
    if agg.aggr_expr.is_empty() || agg.group_expr.iter().any(|e| matches!(e, Expr::GroupingSet(_))) {
        return None;
    }
    let mut shape: Option<(Vec<SortExpr>, bool)> = None;
    let mut args = Vec::with_capacity(agg.aggr_expr.len());
    for e in &agg.aggr_expr {
        let Expr::AggregateFunction(AggregateFunction { func, params }) = unalias(e) else { return None };
        let last = match func.name() {
            "first_value" => false,
            "last_value" => true,
            _ => return None,
        };
        let respects_nulls = params
            .null_treatment
            .is_none_or(|t| t == datafusion::logical_expr::expr::NullTreatment::RespectNulls);
        if params.args.len() != 1 || params.distinct || params.filter.is_some() || !respects_nulls {
            return None;
        }
        match &shape {
            None => shape = Some((params.order_by.clone(), last)),
            Some((order, l)) if *order == params.order_by && *l == last => {}
            Some(_) => return None,
        }
        args.push(params.args[0].clone());
    }
    let (order, last) = shape?;
    Some((order, last, args))
}

/// Splits an ORDER BY at its first processing-time key: the keys before it, and the direction
/// of arrival order if there is one.
fn split_order(order: &[SortExpr], input: &LogicalPlan) -> (Vec<SortExpr>, Option<bool>) {
    let mut keys = Vec::new();
    for s in order {
        let is_proctime = match unalias(&s.expr) {
            Expr::ScalarFunction(f) => f.name() == "proctime",
            Expr::Column(c) => input.schema().index_of_column(c).is_ok_and(|i| defines_proctime(input, i)),
            _ => false,
        };
        if is_proctime {
            return (keys, Some(s.asc));
        }
        keys.push(s.clone());
    }
    (keys, None)
}

/// The columns of `plan` computed by `PROCTIME()`.
fn arrival_columns(plan: &LogicalPlan) -> Vec<usize> {
    (0..plan.schema().fields().len()).filter(|i| defines_proctime(plan, *i)).collect()
}

/// Whether output column `index` of `plan` is `PROCTIME()`, passed up through projections,
/// filters, aliases and views, or a connector table's computed column `c AS PROCTIME()`.
pub(crate) fn defines_proctime(plan: &LogicalPlan, index: usize) -> bool {
    match plan {
        LogicalPlan::Projection(p) => match p.expr.get(index).map(unalias) {
            Some(Expr::ScalarFunction(f)) => f.name() == "proctime",
            Some(Expr::Column(c)) => {
                p.input.schema().index_of_column(c).is_ok_and(|i| defines_proctime(&p.input, i))
            }
            _ => false,
        },
        LogicalPlan::Filter(f) => defines_proctime(&f.input, index),
        LogicalPlan::SubqueryAlias(a) => defines_proctime(&a.input, index),
        LogicalPlan::Window(w) => index < w.input.schema().fields().len() && defines_proctime(&w.input, index),
        LogicalPlan::TableScan(scan) => {
            let source_index = scan.projection.as_ref().map_or(Some(index), |p| p.get(index).copied());
            let Ok(provider) = source_as_provider(&scan.source) else { return false };
            let Some(i) = source_index else { return false };
            if let Some(view) = provider.get_logical_plan() {
                return defines_proctime(&view, i);
            }
            // A connector table's computed column `c AS PROCTIME()` reports it as its default.
            let schema = provider.schema();
            let Some(field) = schema.fields().get(i) else { return false };
            matches!(provider.get_column_default(field.name()), Some(Expr::ScalarFunction(f)) if f.name() == "proctime")
        }
        _ => false,
    }
}

/// A range of ranks, 1-based and inclusive; `upper: None` is unbounded.
struct Bound {
    lower: u64,
    upper: Option<u64>,
}

/// The range `e` allows for `rank` when it compares `rank` with an integer literal.
fn rank_bound(e: &Expr, rank: &Column) -> Option<Bound> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = e else { return None };
    let (op, value) = match (is_column(left, rank), is_column(right, rank)) {
        (true, false) => (*op, literal(right)?),
        (false, true) => (op.swap()?, literal(left)?),
        _ => return None,
    };
    let clamp = |v: i128| u64::try_from(v.max(0)).unwrap_or(u64::MAX);
    Some(match op {
        Operator::Eq => Bound { lower: clamp(value), upper: Some(clamp(value)) },
        Operator::Lt => Bound { lower: 1, upper: Some(clamp(value - 1)) },
        Operator::LtEq => Bound { lower: 1, upper: Some(clamp(value)) },
        Operator::Gt => Bound { lower: clamp(value + 1), upper: None },
        Operator::GtEq => Bound { lower: clamp(value), upper: None },
        _ => return None,
    })
}

fn is_column(e: &Expr, c: &Column) -> bool {
    match e {
        Expr::Column(col) => col == c,
        Expr::Cast(cast) => is_column(&cast.expr, c),
        Expr::TryCast(cast) => is_column(&cast.expr, c),
        _ => false,
    }
}

fn literal(e: &Expr) -> Option<i128> {
    match e {
        Expr::Literal(v, _) => match v {
            ScalarValue::Int8(Some(v)) => Some(*v as i128),
            ScalarValue::Int16(Some(v)) => Some(*v as i128),
            ScalarValue::Int32(Some(v)) => Some(*v as i128),
            ScalarValue::Int64(Some(v)) => Some(*v as i128),
            ScalarValue::UInt8(Some(v)) => Some(*v as i128),
            ScalarValue::UInt16(Some(v)) => Some(*v as i128),
            ScalarValue::UInt32(Some(v)) => Some(*v as i128),
            ScalarValue::UInt64(Some(v)) => Some(*v as i128),
            _ => None,
        },
        Expr::Cast(cast) => literal(&cast.expr),
        _ => None,
    }
}

/// Whether `e` mentions column `c`.
fn references(e: &Expr, c: &Column) -> bool {
    e.column_refs().contains(c)
}
