//! Planning stream joins (SQL.md "Joins"): a DataFusion `Join` becomes a [`StreamNode::Join`]
//! whose [`JoinSpec`] says how the operator keeps state.
//!
//! - Regular join (`StreamJoin`): INNER, LEFT, RIGHT and FULL equi-joins with an optional
//!   residual condition (DataFusion's join `filter`). Both inputs may be updating. State is
//!   unbounded: every row of both inputs, by join key.
//! - Interval join (`StreamIntervalJoin`): the condition bounds the difference of an
//!   event-time attribute of each side on both sides, as Flink recognises it
//!   (`l.t BETWEEN r.t - INTERVAL a AND r.t + INTERVAL b`, or `>=`/`>` and `<=`/`<`
//!   comparisons of `col [± INTERVAL]` terms, in any order and on either side). The watermark
//!   (the minimum of both inputs') drops rows that can no longer match; see [`TimeBound`].
//! - Window join (`StreamWindowJoin`): both inputs are window TVFs and the equi-keys equate
//!   their `window_end` columns (Flink also equates `window_start`). State is freed when the
//!   watermark closes the window.
//! - Event-time temporal join (`StreamTemporalJoin`): the right input is `t FOR SYSTEM_TIME AS
//!   OF o.ts` ([`crate::plan::temporal`]), a versioned table (PRIMARY KEY and WATERMARK) joined
//!   on its primary key; INNER or LEFT. Each probe row joins the version valid at `o.ts`, once
//!   the watermark makes that answer final: append-only output. The AS OF column and the
//!   versioned table's key and time columns are kept in the inputs even when the query does
//!   not use them (DataFusion prunes unused columns).
//!
//! Changelog: INNER of append-only inputs is append-only; everything else retracts (outer
//! joins emit a NULL-padded row and retract it when a match arrives). Stream key: the left
//! key followed by the right key when both inputs have one, else none.
//!
//! # Event-time attributes
//! A column is an event-time attribute when it is a table's `WATERMARK FOR` column or
//! `window_time`, projected as a bare column. A bound on other columns is an ordinary
//! residual condition and the join is a regular one: cleaning state by a watermark that does
//! not bound those columns would lose matches. After a regular join the time attributes are
//! gone (Flink materializes them); an interval join keeps both sides'.

use std::fmt;

use datafusion::common::{Column, DFSchema, NullEquality, ScalarValue};
use datafusion::logical_expr::{
    Between, BinaryExpr, Expr, Filter, Join, JoinType, LogicalPlan, Operator, Projection, SubqueryAlias,
    TableScanBuilder,
};

use crate::error::{ErrorKind, Result, WeirError};
use crate::plan::planner::{plan_stream, SourceCatalog};
use crate::plan::stream_plan::{ChangelogMode, StreamNode, StreamPlan};
use crate::plan::temporal::{as_versioned, versioned_input, VersionedTable};
use crate::plan::window::WindowKind;
use crate::plan::unalias;

/// The join types the stream join runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamJoinType {
    Inner,
    Left,
    Right,
    Full,
    /// LEFT SEMI (`IN (subquery)`, `EXISTS`): a left row, once, while it has a match.
    Semi,
    /// LEFT ANTI (`NOT EXISTS`): a left row while it has no match.
    Anti,
    /// Null-aware LEFT ANTI (`NOT IN (subquery)`): a left row while the right input is empty,
    /// or while its key is not NULL, it has no match and no right key is NULL (SQL's three-valued
    /// `NOT IN`).
    NotIn,
}

impl StreamJoinType {
    /// Whether unmatched rows of the left input are emitted NULL-padded.
    pub fn left_outer(self) -> bool {
        matches!(self, StreamJoinType::Left | StreamJoinType::Full)
    }

    /// Whether unmatched rows of the right input are emitted NULL-padded.
    pub fn right_outer(self) -> bool {
        matches!(self, StreamJoinType::Right | StreamJoinType::Full)
    }

    /// Whether the join outputs left rows only (SEMI, ANTI, NOT IN).
    pub fn left_only(self) -> bool {
        matches!(self, StreamJoinType::Semi | StreamJoinType::Anti | StreamJoinType::NotIn)
    }
}

impl fmt::Display for StreamJoinType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StreamJoinType::Inner => "INNER",
            StreamJoinType::Left => "LEFT",
            StreamJoinType::Right => "RIGHT",
            StreamJoinType::Full => "FULL",
            StreamJoinType::Semi => "SEMI",
            StreamJoinType::Anti => "ANTI",
            StreamJoinType::NotIn => "ANTI (NOT IN)",
        })
    }
}

/// How event time bounds a join's state. Times are ms; `W` is the join's watermark, the
/// minimum of its inputs'.
///
/// # Interval: `left.t - right.t ∈ [lower_ms, upper_ms]`
/// A row is late, dropped and counted, when its interval has been closed by the watermark:
/// a left row when `W ≥ t - lower` (every right time it could match is at or below `W`), a
/// right row when `W ≥ t + upper`; a row is never late while its own time is above `W`. So
/// left rows are late when `t ≤ W + a`, right rows when `t ≤ W + b`, with
/// `a = min(lower, 0)` and `b = min(-upper, 0)`. A stored row is dropped once no row that is
/// not late can match it: left rows when `t ≤ W + b + lower`, right rows when
/// `t ≤ W + a - upper`. Because a dropped row is also late, a retraction of it is counted as
/// late, never applied to missing state.
///
/// # Window: `left.window_end = right.window_end`
/// A window closes (Flink: fires) once `W ≥ window_end - 1`: its rows are dropped from state
/// and rows for it are late (the window assigners upstream already drop them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeBound {
    /// `left_time` and `right_time` index the event-time columns in each input.
    Interval { left_time: usize, right_time: usize, lower_ms: i64, upper_ms: i64 },
    /// `left_end` and `right_end` index the `window_end` columns in each input.
    Window { left_end: usize, right_end: usize },
    /// A temporal join: `probe_time` indexes the AS OF column of the left input,
    /// `version_time` the versioned (right) table's event-time column; `left_width` and
    /// `right_width` are the numbers of each input's columns in the output (an input may carry
    /// its time column after them when the query does not use it). Probe rows are late when
    /// `t ≤ W`; versions never are. Not used by the offset methods below.
    Temporal { probe_time: usize, version_time: usize, left_width: usize, right_width: usize },
}

impl TimeBound {
    /// The time column of input `side` (0 left, 1 right).
    pub fn time_column(&self, side: usize) -> usize {
        match (self, side) {
            (TimeBound::Interval { left_time, .. }, 0) => *left_time,
            (TimeBound::Interval { right_time, .. }, _) => *right_time,
            (TimeBound::Window { left_end, .. }, 0) => *left_end,
            (TimeBound::Window { right_end, .. }, _) => *right_end,
            (TimeBound::Temporal { probe_time, .. }, 0) => *probe_time,
            (TimeBound::Temporal { version_time, .. }, _) => *version_time,
        }
    }

    /// A row of input `side` with time `t` is late when `t ≤ W + late_offset_ms(side)`.
    pub fn late_offset_ms(&self, side: usize) -> i64 {
        match *self {
            TimeBound::Interval { lower_ms, upper_ms, .. } => {
                if side == 0 {
                    lower_ms.min(0)
                } else {
                    upper_ms.saturating_neg().min(0)
                }
            }
            TimeBound::Window { .. } => 1,
            TimeBound::Temporal { .. } => 0,
        }
    }

    /// A stored row of input `side` with time `t` is dropped once `t ≤ W + keep_offset_ms(side)`.
    pub fn keep_offset_ms(&self, side: usize) -> i64 {
        match *self {
            TimeBound::Interval { lower_ms, upper_ms, .. } => {
                if side == 0 {
                    self.late_offset_ms(1).saturating_add(lower_ms)
                } else {
                    self.late_offset_ms(0).saturating_sub(upper_ms)
                }
            }
            TimeBound::Window { .. } | TimeBound::Temporal { .. } => 1,
        }
    }

    /// The join's output watermark is `W - output_delay_ms()`: every row emitted later has
    /// both time columns above it.
    pub fn output_delay_ms(&self) -> i64 {
        match *self {
            TimeBound::Interval { .. } => {
                let earliest =
                    [self.late_offset_ms(0), self.late_offset_ms(1), self.keep_offset_ms(0), self.keep_offset_ms(1)]
                        .into_iter()
                        .min()
                        .unwrap_or(0);
                earliest.saturating_neg().max(0)
            }
            TimeBound::Window { .. } | TimeBound::Temporal { .. } => 0,
        }
    }
}

/// A planned stream join.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinSpec {
    pub join_type: StreamJoinType,
    /// Equi-join keys: (expression over the left input, expression over the right input).
    pub on: Vec<(Expr, Expr)>,
    /// The residual condition over the join's output schema (left columns then right).
    pub filter: Option<Expr>,
    /// `IS NOT DISTINCT FROM` keys: NULL keys match each other. Otherwise a NULL key never
    /// matches.
    pub null_equals_null: bool,
    pub time: Option<TimeBound>,
    /// The time-to-live of a regular join's rows of each input (left, right), ms
    /// ([`crate::plan::ttl`]).
    pub state_ttl_ms: [Option<i64>; 2],
    /// A processing-time lookup join (`FOR SYSTEM_TIME AS OF` a `PROCTIME()` column): each left
    /// row joins the right input's rows as they are when it arrives; changes of the right input
    /// emit nothing.
    pub lookup: bool,
    /// A window join: emit the join of each window once, `+I` (with its NULL-padded rows for an
    /// outer join), when the watermark closes the window, and nothing before (`EMIT ON WINDOW
    /// CLOSE`, and every `INSERT INTO` job: Flink's window join is final). An interval join of
    /// append-only inputs (`EMIT ON WINDOW CLOSE` in a view): emit each NULL-padded row once,
    /// when its row leaves state unmatched, instead of at once and retracted later (SQL.md).
    pub emit_on_window_close: bool,
}

impl JoinSpec {
    /// The node's name in EXPLAIN.
    pub fn name(&self) -> &'static str {
        match self.time {
            None if self.lookup => "StreamLookupJoin",
            None => "StreamJoin",
            Some(TimeBound::Interval { .. }) => "StreamIntervalJoin",
            Some(TimeBound::Window { .. }) => "StreamWindowJoin",
            Some(TimeBound::Temporal { .. }) => "StreamTemporalJoin",
        }
    }

    /// The node's EXPLAIN detail.
    pub fn explain(&self) -> String {
        let on: Vec<String> = self.on.iter().map(|(l, r)| format!("{l} = {r}")).collect();
        let mut out = format!("type={}, on=[{}]", self.join_type, on.join(", "));
        if let Some(f) = &self.filter {
            out.push_str(&format!(", filter={f}"));
        }
        match self.time {
            Some(TimeBound::Interval { lower_ms, upper_ms, .. }) => {
                out.push_str(&format!(", interval=[{lower_ms}ms, {upper_ms}ms]"));
                if self.emit_on_window_close {
                    out.push_str(", emit=on-window-close");
                }
            }
            Some(TimeBound::Window { .. }) if self.emit_on_window_close => {
                out.push_str(", window=window_end, emit=on-window-close")
            }
            Some(TimeBound::Window { .. }) => out.push_str(", window=window_end"),
            Some(TimeBound::Temporal { probe_time, .. }) => out.push_str(&format!(", as_of=column {probe_time}")),
            None => {}
        }
        out
    }
}

/// Which columns of a stream carry event time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimeColumns {
    /// Event-time attributes (column indexes).
    pub event_time: Vec<usize>,
    /// `window_end` columns of a window TVF.
    pub window_end: Vec<usize>,
}

/// Plans join `j` and its inputs.
///
/// # Errors
/// `Unsupported` for RIGHT SEMI/ANTI and MARK joins; for temporal joins see [`plan_temporal`];
/// the inputs' planning errors. LEFT SEMI and LEFT ANTI joins (DataFusion's plans of `IN`,
/// `EXISTS`, `NOT EXISTS` and `NOT IN` subqueries) are regular joins that output left rows.
pub fn plan_join(j: &Join, catalog: &dyn SourceCatalog) -> Result<StreamPlan> {
    if let Some(provider) = versioned_input(&j.right) {
        let versioned = as_versioned(provider.as_ref()).expect("versioned_input returns versioned tables");
        return plan_temporal(j, versioned, catalog);
    }
    let left = plan_stream(&j.left, catalog)?;
    let right = plan_stream(&j.right, catalog)?;
    let join_type = match j.join_type {
        JoinType::Inner => StreamJoinType::Inner,
        JoinType::Left => StreamJoinType::Left,
        JoinType::Right => StreamJoinType::Right,
        JoinType::Full => StreamJoinType::Full,
        JoinType::LeftSemi => StreamJoinType::Semi,
        JoinType::LeftAnti if j.null_aware => StreamJoinType::NotIn,
        JoinType::LeftAnti => StreamJoinType::Anti,
        other => {
            return Err(WeirError::unsupported(format!(
                "{other} join in a materialized view; supported: INNER, LEFT, RIGHT, FULL, LEFT SEMI (IN, EXISTS) and LEFT ANTI (NOT EXISTS, NOT IN) joins"
            )))
        }
    };
    let left_times = time_columns(&left, catalog)?;
    let right_times = time_columns(&right, catalog)?;
    // A SEMI or ANTI join outputs the left rows and has no time bound: its state is freed by
    // retractions or a state TTL.
    let time = window_bound(&j.on, &left, &right, &left_times, &right_times)
        .or_else(|| {
            let filter = j.filter.as_ref()?;
            interval_bound(filter, &j.schema, left.schema.fields().len(), &left_times, &right_times)
        })
        .filter(|_| !join_type.left_only());
    let (mut left, mut right) = (left, right);
    if matches!(time, Some(TimeBound::Window { .. })) {
        late_in_join(&mut left);
        late_in_join(&mut right);
    }
    let left_width = left.schema.fields().len();
    let stream_key = match (&left.stream_key, &right.stream_key) {
        _ if join_type.left_only() => left.stream_key.clone(),
        (Some(l), Some(r)) => Some(l.iter().copied().chain(r.iter().map(|k| k + left_width)).collect()),
        _ => None,
    };
    // An INNER or SEMI join of append-only inputs is append-only: a SEMI join emits a left
    // row at its first match, and no match ever goes away.
    let changelog = if matches!(join_type, StreamJoinType::Inner | StreamJoinType::Semi)
        && left.changelog == ChangelogMode::AppendOnly
        && right.changelog == ChangelogMode::AppendOnly
    {
        ChangelogMode::AppendOnly
    } else {
        ChangelogMode::Retract
    };
    let spec = JoinSpec {
        join_type,
        on: j.on.clone(),
        filter: j.filter.clone(),
        null_equals_null: j.null_equality == NullEquality::NullEqualsNull,
        time,
        state_ttl_ms: [None, None],
        lookup: false,
        emit_on_window_close: false,
    };
    Ok(StreamPlan {
        schema: std::sync::Arc::clone(&j.schema),
        changelog,
        stream_key,
        node: StreamNode::Join { left: Box::new(left), right: Box::new(right), join: spec },
    })
}

/// Plans the temporal join `j`, whose right input is `versioned`.
///
/// # Errors
/// `Unsupported` for RIGHT and FULL joins; `Plan` for an AS OF column that is neither the probe
/// side's event-time attribute nor a processing-time attribute (a lookup join,
/// [`plan_lookup`]), when the versioned table has no WATERMARK or PRIMARY KEY, or when the join
/// does not equate its primary key.
fn plan_temporal(j: &Join, versioned: &VersionedTable, catalog: &dyn SourceCatalog) -> Result<StreamPlan> {
    let table = &versioned.table;
    let join_type = match j.join_type {
        JoinType::Inner => StreamJoinType::Inner,
        JoinType::Left => StreamJoinType::Left,
        other => {
            return Err(WeirError::unsupported(format!(
                "{other} join with {table} FOR SYSTEM_TIME AS OF: a temporal join is INNER or LEFT"
            )))
        }
    };
    let as_of = Column::from_qualified_name(&versioned.as_of);
    let left_width = j.left.schema().fields().len();
    if versioned.processing_time.load(std::sync::atomic::Ordering::Relaxed) {
        return plan_lookup(j, join_type, catalog);
    }
    let left = plan_stream(&with_column(&j.left, &as_of)?, catalog)?;
    let probe_time = left.schema.maybe_index_of_column(&as_of).ok_or_else(|| {
        WeirError::new(ErrorKind::UnknownColumn(format!(
            "FOR SYSTEM_TIME AS OF {}: no such column in the other join input; columns: {}",
            versioned.as_of,
            left.schema.columns().iter().map(|c| c.flat_name()).collect::<Vec<_>>().join(", ")
        )))
    })?;
    if !time_columns(&left, catalog)?.event_time.contains(&probe_time) {
        return Err(WeirError::plan(format!(
            "FOR SYSTEM_TIME AS OF {}: the column is neither an event-time attribute (WATERMARK FOR) of the probe side, \
             for a temporal join, nor a processing-time attribute (PROCTIME()), for a lookup join",
            versioned.as_of
        )));
    }
    let time_index = catalog.event_time_column(table)?.ok_or_else(|| {
        WeirError::plan(format!(
            "{table} FOR SYSTEM_TIME AS OF: a versioned table needs a WATERMARK FOR its event-time column and a PRIMARY KEY"
        ))
    })?;
    let table_schema = versioned.input.schema();
    let time_name = table_schema.field(time_index).name().clone();
    let Some(key) = catalog.source_info(table)?.stream_key else {
        return Err(WeirError::plan(format!(
            "{table} FOR SYSTEM_TIME AS OF: a versioned table needs a PRIMARY KEY (and a WATERMARK)"
        )));
    };
    // The key and time columns, even when the query does not use them.
    let right_width = j.right.schema().fields().len();
    let mut right_plan = j.right.as_ref().clone();
    for k in key.iter().copied().chain([time_index]) {
        right_plan = with_column(&right_plan, &Column::new_unqualified(table_schema.field(k).name()))?;
    }
    let right = plan_stream(&right_plan, catalog)?;
    let version_time = time_columns(&right, catalog)?
        .event_time
        .into_iter()
        .find(|i| *right.schema.field(*i).name() == time_name)
        .ok_or_else(|| WeirError::internal(format!("the versioned table {table} lost its time column {time_name}")))?;
    let Some(primary_key) = right.stream_key.clone() else {
        return Err(WeirError::internal(format!("the versioned table {table} lost its primary key")));
    };
    let joined: Vec<usize> =
        j.on.iter()
            .filter_map(|(_, r)| match unalias(r) {
                Expr::Column(c) => right.schema.maybe_index_of_column(c),
                _ => None,
            })
            .collect();
    if !primary_key.iter().all(|k| joined.contains(k)) {
        return Err(WeirError::plan(format!(
            "a temporal join with {table} must equate its primary key ({}) with columns of the other input",
            primary_key.iter().map(|k| right.schema.field(*k).name().as_str()).collect::<Vec<_>>().join(", ")
        )));
    }
    let spec = JoinSpec {
        join_type,
        on: j.on.clone(),
        filter: j.filter.clone(),
        null_equals_null: j.null_equality == NullEquality::NullEqualsNull,
        time: Some(TimeBound::Temporal { probe_time, version_time, left_width, right_width }),
        state_ttl_ms: [None, None],
        lookup: false,
        emit_on_window_close: false,
    };
    Ok(StreamPlan {
        schema: std::sync::Arc::clone(&j.schema),
        changelog: ChangelogMode::AppendOnly,
        stream_key: None,
        node: StreamNode::Join { left: Box::new(left), right: Box::new(right), join: spec },
    })
}

/// Plans the processing-time lookup join `j` (`FOR SYSTEM_TIME AS OF` a `PROCTIME()` column of
/// the left input; Flink's lookup join): a left row joins the right input's rows with its key
/// as they are when it arrives, once; later changes of the right input do not change results
/// already emitted. The right input is any table or materialized view, its current rows kept
/// in the operator's state; no primary key or watermark is needed. A retraction of a left row
/// retracts its join with the right rows as they are then (Flink), so an updating left input
/// over a changing right input may leave rows the retraction does not match.
fn plan_lookup(j: &Join, join_type: StreamJoinType, catalog: &dyn SourceCatalog) -> Result<StreamPlan> {
    let left = plan_stream(&j.left, catalog)?;
    let right = plan_stream(&j.right, catalog)?;
    let changelog = if left.changelog == ChangelogMode::AppendOnly { ChangelogMode::AppendOnly } else { ChangelogMode::Retract };
    let spec = JoinSpec {
        join_type,
        on: j.on.clone(),
        filter: j.filter.clone(),
        null_equals_null: j.null_equality == NullEquality::NullEqualsNull,
        time: None,
        state_ttl_ms: [None, None],
        lookup: true,
        emit_on_window_close: false,
    };
    Ok(StreamPlan {
        schema: std::sync::Arc::clone(&j.schema),
        changelog,
        stream_key: None,
        node: StreamNode::Join { left: Box::new(left), right: Box::new(right), join: spec },
    })
}

/// `plan` with column `col` of a table it scans passed up as its last output column, when the
/// optimizer pruned it (through aliases, projections and filters; other plans unchanged).
fn with_column(plan: &LogicalPlan, col: &Column) -> Result<LogicalPlan> {
    if plan.schema().has_column(col) {
        return Ok(plan.clone());
    }
    Ok(match plan {
        LogicalPlan::TableScan(scan) => {
            let named = col.relation.as_ref().is_none_or(|r| r.table() == scan.table_name.table());
            let index = scan.source.schema().index_of(&col.name).ok();
            match (&scan.projection, index) {
                (Some(p), Some(index)) if named && !p.contains(&index) => {
                    let mut projection = p.clone();
                    projection.push(index);
                    LogicalPlan::TableScan(
                        TableScanBuilder::new(scan.table_name.clone(), std::sync::Arc::clone(&scan.source))
                            .with_projection(Some(projection))
                            .with_filters(scan.filters.clone())
                            .with_fetch(scan.fetch)
                            .build()?,
                    )
                }
                _ => plan.clone(),
            }
        }
        LogicalPlan::SubqueryAlias(a) => {
            if col.relation.as_ref().is_some_and(|r| r.table() != a.alias.table()) {
                return Ok(plan.clone());
            }
            let input = with_column(&a.input, &Column::new_unqualified(&col.name))?;
            LogicalPlan::SubqueryAlias(SubqueryAlias::try_new(std::sync::Arc::new(input), a.alias.clone())?)
        }
        LogicalPlan::Filter(f) => {
            LogicalPlan::Filter(Filter::try_new(f.predicate.clone(), std::sync::Arc::new(with_column(&f.input, col)?))?)
        }
        LogicalPlan::Projection(p) => {
            let input = with_column(&p.input, col)?;
            let mut exprs = p.expr.clone();
            if let Ok((qualifier, field)) = input.schema().qualified_field_with_unqualified_name(&col.name) {
                exprs.push(Expr::Column(Column::from((qualifier, field))));
            }
            LogicalPlan::Projection(Projection::try_new(exprs, std::sync::Arc::new(input))?)
        }
        other => other.clone(),
    })
}

/// The event-time and `window_end` columns of `plan`'s output.
pub fn time_columns(plan: &StreamPlan, catalog: &dyn SourceCatalog) -> Result<TimeColumns> {
    Ok(match &plan.node {
        StreamNode::Source { relation } => {
            TimeColumns { event_time: catalog.event_time_column(relation)?.into_iter().collect(), window_end: vec![] }
        }
        StreamNode::Filter { input, .. } | StreamNode::ChangelogNormalize { input, .. } => time_columns(input, catalog)?,
        StreamNode::Project { input, exprs } => {
            let inner = time_columns(input, catalog)?;
            let mut out = TimeColumns::default();
            for (i, e) in exprs.iter().enumerate() {
                let Expr::Column(c) = unalias(e) else { continue };
                let Some(k) = input.schema.maybe_index_of_column(c) else { continue };
                if inner.event_time.contains(&k) {
                    out.event_time.push(i);
                }
                if inner.window_end.contains(&k) {
                    out.window_end.push(i);
                }
            }
            out
        }
        StreamNode::WindowAssign { input, spec } => {
            let n = plan.schema.fields().len();
            let mut event_time = time_columns(input, catalog)?.event_time;
            event_time.push(n - 1);
            // A session's end moves as rows arrive: no window join on sessions (as in Flink).
            let window_end = if spec.kind == WindowKind::Session { vec![] } else { vec![n - 2] };
            TimeColumns { event_time, window_end }
        }
        StreamNode::Join { left, right, join: JoinSpec { time: Some(TimeBound::Interval { .. }), .. } } => {
            let width = left.schema.fields().len();
            let mut event_time = time_columns(left, catalog)?.event_time;
            event_time.extend(time_columns(right, catalog)?.event_time.into_iter().map(|k| k + width));
            TimeColumns { event_time, window_end: vec![] }
        }
        _ => TimeColumns::default(),
    })
}

/// Leaves the lateness of the window TVFs under a window join's input `plan` (through
/// projections and filters, as [`time_columns`] finds their `window_end`) to the join
/// ([`crate::plan::window::WindowSpec::late_in_join`]).
fn late_in_join(plan: &mut StreamPlan) {
    match &mut plan.node {
        StreamNode::WindowAssign { spec, .. } => spec.late_in_join = true,
        StreamNode::Project { input, .. } | StreamNode::Filter { input, .. } => late_in_join(input),
        _ => {}
    }
}

/// A window join: an equi-key pair of bare `window_end` columns of window TVFs.
fn window_bound(
    on: &[(Expr, Expr)],
    left: &StreamPlan,
    right: &StreamPlan,
    left_times: &TimeColumns,
    right_times: &TimeColumns,
) -> Option<TimeBound> {
    on.iter().find_map(|(l, r)| {
        let (Expr::Column(l), Expr::Column(r)) = (unalias(l), unalias(r)) else { return None };
        let l = left.schema.maybe_index_of_column(l)?;
        let r = right.schema.maybe_index_of_column(r)?;
        (left_times.window_end.contains(&l) && right_times.window_end.contains(&r))
            .then_some(TimeBound::Window { left_end: l, right_end: r })
    })
}

/// An interval join: conjuncts of `filter` bounding `left.t - right.t` from both sides for one
/// pair of event-time attributes.
fn interval_bound(
    filter: &Expr,
    schema: &DFSchema,
    left_width: usize,
    left_times: &TimeColumns,
    right_times: &TimeColumns,
) -> Option<TimeBound> {
    let mut bounds: Vec<Bounds> = Vec::new();
    let mut add = |lhs: &Expr, op: Operator, rhs: &Expr| {
        let (Some((a, a_ns)), Some((b, b_ns))) = (linear(lhs, schema), linear(rhs, schema)) else { return };
        // Normalise to `left + x op right + y`, i.e. `left - right op y - x`.
        let (pair, op, k) = match (a < left_width, b < left_width) {
            (true, false) => ((a, b - left_width), op, b_ns - a_ns),
            (false, true) => ((b, a - left_width), flip(op), a_ns - b_ns),
            _ => return,
        };
        if !left_times.event_time.contains(&pair.0) || !right_times.event_time.contains(&pair.1) {
            return;
        }
        let slot = match bounds.iter().position(|b| b.pair == pair) {
            Some(i) => i,
            None => {
                bounds.push(Bounds { pair, lower_ns: None, upper_ns: None });
                bounds.len() - 1
            }
        };
        let Bounds { lower_ns: lower, upper_ns: upper, .. } = &mut bounds[slot];
        match op {
            Operator::GtEq => *lower = Some(lower.map_or(k, |l| l.max(k))),
            Operator::Gt => *lower = Some(lower.map_or(k + 1, |l| l.max(k + 1))),
            Operator::LtEq => *upper = Some(upper.map_or(k, |u| u.min(k))),
            Operator::Lt => *upper = Some(upper.map_or(k - 1, |u| u.min(k - 1))),
            _ => {}
        }
    };
    for conjunct in datafusion::logical_expr::utils::split_conjunction(filter) {
        match conjunct {
            Expr::BinaryExpr(BinaryExpr { left, op, right })
                if matches!(op, Operator::Gt | Operator::GtEq | Operator::Lt | Operator::LtEq) =>
            {
                add(left, *op, right)
            }
            Expr::Between(Between { expr, negated: false, low, high }) => {
                add(expr, Operator::GtEq, low);
                add(expr, Operator::LtEq, high);
            }
            _ => {}
        }
    }
    bounds.into_iter().find_map(|b| {
        let (lower, upper) = (b.lower_ns?, b.upper_ns?);
        // Times are whole ms: a lower bound rounds up, an upper bound down.
        let lower_ms =
            i64::try_from(lower.div_euclid(1_000_000) + i128::from(lower.rem_euclid(1_000_000) != 0)).ok()?;
        let upper_ms = i64::try_from(upper.div_euclid(1_000_000)).ok()?;
        Some(TimeBound::Interval { left_time: b.pair.0, right_time: b.pair.1, lower_ms, upper_ms })
    })
}

/// The bounds found on `left.t - right.t` for one pair of time columns, in ns.
struct Bounds {
    /// (left column, right column), indexes in each input.
    pair: (usize, usize),
    lower_ns: Option<i128>,
    upper_ns: Option<i128>,
}

/// `a op b` as `b flip(op) a`.
fn flip(op: Operator) -> Operator {
    match op {
        Operator::Gt => Operator::Lt,
        Operator::GtEq => Operator::LtEq,
        Operator::Lt => Operator::Gt,
        Operator::LtEq => Operator::GtEq,
        other => other,
    }
}

/// `e` as `column + offset` (column index in `schema`, offset in ns) when it is a bare column
/// plus or minus constant intervals.
fn linear(e: &Expr, schema: &DFSchema) -> Option<(usize, i128)> {
    match unalias(e) {
        Expr::Column(c) => Some((schema.maybe_index_of_column(c)?, 0)),
        Expr::Cast(c) if matches!(c.field.data_type(), arrow::datatypes::DataType::Timestamp(..)) => {
            linear(&c.expr, schema)
        }
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::Plus, right }) => {
            match (linear(left, schema), right.as_ref()) {
                (Some((c, ns)), Expr::Literal(v, _)) => Some((c, ns + interval_ns(v)?)),
                (None, _) => {
                    let Expr::Literal(v, _) = left.as_ref() else { return None };
                    let (c, ns) = linear(right, schema)?;
                    Some((c, ns + interval_ns(v)?))
                }
                _ => None,
            }
        }
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::Minus, right }) => {
            let (c, ns) = linear(left, schema)?;
            let Expr::Literal(v, _) = right.as_ref() else { return None };
            Some((c, ns - interval_ns(v)?))
        }
        _ => None,
    }
}

/// A constant interval of fixed length, in ns (months have no fixed length).
fn interval_ns(v: &ScalarValue) -> Option<i128> {
    const DAY_NS: i128 = 86_400_000_000_000;
    Some(match v {
        ScalarValue::IntervalMonthDayNano(Some(x)) if x.months == 0 => {
            i128::from(x.days) * DAY_NS + i128::from(x.nanoseconds)
        }
        ScalarValue::IntervalDayTime(Some(x)) => i128::from(x.days) * DAY_NS + i128::from(x.milliseconds) * 1_000_000,
        ScalarValue::IntervalYearMonth(Some(0)) => 0,
        ScalarValue::DurationSecond(Some(x)) => i128::from(*x) * 1_000_000_000,
        ScalarValue::DurationMillisecond(Some(x)) => i128::from(*x) * 1_000_000,
        ScalarValue::DurationMicrosecond(Some(x)) => i128::from(*x) * 1_000,
        ScalarValue::DurationNanosecond(Some(x)) => i128::from(*x),
        _ => return None,
    })
}


#[cfg(test)]
mod tests {
    use super::*;

    fn interval(lower_ms: i64, upper_ms: i64) -> TimeBound {
        TimeBound::Interval { left_time: 0, right_time: 0, lower_ms, upper_ms }
    }

    #[test]
    fn symmetric_interval_offsets() {
        // |l - r| <= 5 s: late 5 s behind W, kept until 10 s behind, output delayed 10 s.
        let b = interval(-5_000, 5_000);
        assert_eq!((b.late_offset_ms(0), b.late_offset_ms(1)), (-5_000, -5_000));
        assert_eq!((b.keep_offset_ms(0), b.keep_offset_ms(1)), (-10_000, -10_000));
        assert_eq!(b.output_delay_ms(), 10_000);
    }

    #[test]
    fn one_sided_interval_never_calls_rows_ahead_of_the_watermark_late() {
        // r.t + 1 s <= l.t <= r.t + 5 s.
        let b = interval(1_000, 5_000);
        assert_eq!((b.late_offset_ms(0), b.late_offset_ms(1)), (0, -5_000));
        // Left rows stay while a right row 5 s behind W may come: t > W - 4 s.
        assert_eq!(b.keep_offset_ms(0), -4_000);
        assert_eq!(b.keep_offset_ms(1), -5_000);
        // A dropped row is always late, so its retraction never meets missing state.
        for side in 0..2 {
            assert!(b.keep_offset_ms(side) <= b.late_offset_ms(side));
        }
    }

    /// `l.t` and `r.t` (event time) and `r.u` (not), as a join's output schema.
    fn join_schema() -> DFSchema {
        use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
        let ts = || DataType::Timestamp(TimeUnit::Millisecond, None);
        let l = DFSchema::try_from_qualified_schema("l", &Schema::new(vec![Field::new("t", ts(), true)]))
            .expect("left schema");
        let r = DFSchema::try_from_qualified_schema(
            "r",
            &Schema::new(vec![Field::new("t", ts(), true), Field::new("u", ts(), true)]),
        )
        .expect("right schema");
        l.join(&r).expect("join schema")
    }

    fn bound_of(filter: &Expr) -> Option<TimeBound> {
        let left = TimeColumns { event_time: vec![0], window_end: vec![] };
        let right = TimeColumns { event_time: vec![0], window_end: vec![] };
        interval_bound(filter, &join_schema(), 1, &left, &right)
    }

    fn secs(n: i64) -> Expr {
        datafusion::logical_expr::lit(ScalarValue::new_interval_mdn(0, 0, n * 1_000_000_000))
    }

    #[test]
    fn recognises_between_and_comparisons_in_any_order() {
        use datafusion::logical_expr::col;
        // r.t BETWEEN l.t - 2 s AND l.t + 3 s: l.t - r.t in [-3 s, 2 s].
        let between = col("r.t").between(col("l.t") - secs(2), col("l.t") + secs(3));
        assert_eq!(bound_of(&between), Some(interval(-3_000, 2_000)));
        // Exclusive bounds, the left column on either side: l.t > r.t AND r.t + 5 s > l.t.
        let strict = col("l.t").gt(col("r.t")).and((col("r.t") + secs(5)).gt(col("l.t")));
        assert_eq!(bound_of(&strict), Some(interval(1, 4_999)));
        // The tighter of two bounds on one side wins.
        let both = between.and(col("l.t").lt_eq(col("r.t")));
        assert_eq!(bound_of(&both), Some(interval(-3_000, 0)));
    }

    #[test]
    fn needs_two_bounds_on_event_time_attributes() {
        use datafusion::logical_expr::col;
        assert_eq!(bound_of(&col("l.t").gt_eq(col("r.t"))), None, "one bound: a regular join");
        let other_column = col("r.u").between(col("l.t") - secs(2), col("l.t") + secs(3));
        assert_eq!(bound_of(&other_column), None, "r.u is not an event-time attribute");
    }

    #[test]
    fn window_closes_at_window_time() {
        let b = TimeBound::Window { left_end: 0, right_end: 0 };
        assert_eq!((b.late_offset_ms(0), b.keep_offset_ms(1), b.output_delay_ms()), (1, 1, 0));
    }
}
