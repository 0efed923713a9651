//! OVER aggregates: `agg(x) OVER (PARTITION BY .. ORDER BY t [frame])` in a view or job
//! (Flink's OverAggregate), planned into a [`StreamNode::OverAggregate`].
//!
//! # What is accepted (Flink's rules)
//! - The input is append-only (Flink refuses an OVER aggregate over updates; Weir runs one
//!   as window functions, below).
//! - One ORDER BY key, ascending: the input's event-time attribute (its `WATERMARK FOR`
//!   column, or a window's `window_time`), or a processing-time attribute (`PROCTIME()`).
//! - The frame ends at `CURRENT ROW` and starts `UNBOUNDED PRECEDING` (the default with an
//!   ORDER BY), `n PRECEDING` in `ROWS`, or `INTERVAL '..' PRECEDING` in `RANGE`.
//! - Aggregates: COUNT, SUM, AVG, MIN, MAX (as in GROUP BY), all with the same window.
//!
//! # Semantics (Flink's event-time OVER)
//! A row waits until the watermark reaches its time, then rows are processed in time order
//! per partition. On processing time a row is processed when it arrives, in arrival order
//! (Flink's ProcTime OVER functions), and none is late. A `ROWS` frame holds the row and the `n` rows before it (rows with equal
//! times in arrival order); a `RANGE` frame holds every row whose time is within the interval
//! before the row's, its peers (equal times) included, so peers get one result. A row whose
//! time is at or below the watermark when it arrives is late: dropped and counted. The output
//! is append-only: each input row once, with one column per aggregate.
//!
//! # Over an updating input (Weir's, where Flink refuses)
//! Over an input that retracts (a regular join, a Top-N, an unwindowed GROUP BY, an
//! `upsert-kafka` table), the window functions are planned into a [`StreamNode::OverWindow`]:
//! any window function DataFusion has (aggregates, `ROW_NUMBER`, `RANK`, `LAG`, `LEAD`, ..),
//! any ORDER BY keys, any frame (`ROWS`, `RANGE`, `GROUPS`, `FOLLOWING` included). Its
//! output always equals the query over the input's current rows, as a batch `SELECT` would
//! compute it (RisingWave's general over window): each input row, with the functions over its
//! partition, ordered by the ORDER BY keys and ties by arrival. When a row comes or goes the
//! rows of its partition whose results change are retracted and emitted again (a retract
//! changelog whose stream key is the input's). Nothing waits for a watermark and nothing is
//! late: the result follows the rows, not time. DataFusion plans one window node per
//! (PARTITION BY, ORDER BY) pair, one over another, so a SELECT may mix windows.

use std::fmt;

use datafusion::common::{DFSchemaRef, ScalarValue};
use datafusion::logical_expr::expr::{AggregateFunction, WindowFunction};
use datafusion::logical_expr::{
    Expr, LogicalPlan, SortExpr, Window, WindowFrameBound, WindowFrameUnits, WindowFunctionDefinition,
};

use crate::error::{Result, WeirError};
use crate::plan::planner::{plan_stream, SourceCatalog};
use crate::plan::stream_plan::{ChangelogMode, StreamNode, StreamPlan};
use crate::plan::unalias;

/// The stable EXPLAIN name.
pub const NAME: &str = "StreamOverAggregate";
/// The stable EXPLAIN name of window functions over an updating input.
pub const WINDOW_NAME: &str = "StreamOverWindow";

/// What an append-only input refuses of a window function that is not an aggregate.
const RANK_ONLY: &str = "this window function (OVER) in a materialized view; supported: ROW_NUMBER(), RANK() or DENSE_RANK() OVER (PARTITION BY .. ORDER BY ..) in a subquery whose outer WHERE bounds it from above (rn = 1, rn <= N, rn < N, rn BETWEEN 1 AND N)";

/// Where an OVER frame starts; it always ends at the current row. `None`: `UNBOUNDED
/// PRECEDING`, every earlier row of the partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverFrame {
    /// `ROWS n PRECEDING`: the row and the `n` rows before it.
    Rows(Option<u64>),
    /// `RANGE INTERVAL .. PRECEDING`: the rows at most this many ms earlier, peers included.
    Range(Option<i64>),
}

impl fmt::Display for OverFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OverFrame::Rows(None) => f.write_str("ROWS UNBOUNDED PRECEDING"),
            OverFrame::Range(None) => f.write_str("RANGE UNBOUNDED PRECEDING"),
            OverFrame::Rows(Some(n)) => write!(f, "ROWS {n} PRECEDING"),
            OverFrame::Range(Some(ms)) => write!(f, "RANGE {ms}ms PRECEDING"),
        }
    }
}

/// An OVER aggregate: its input's columns, then one column per aggregate.
#[derive(Debug, Clone, PartialEq)]
pub struct OverSpec {
    /// Partition keys over the input.
    pub partition_by: Vec<Expr>,
    /// The input column of the time ORDER BY key.
    pub time_column: usize,
    /// The ORDER BY key is processing time: rows are aggregated as they arrive.
    pub proctime: bool,
    pub frame: OverFrame,
    /// The aggregates, as aggregate function expressions over the input (no window).
    pub aggs: Vec<Expr>,
}

impl OverSpec {
    /// The EXPLAIN detail.
    pub fn explain(&self) -> String {
        format!(
            "partition=[{}], order=[column {} ASC{}], frame={}, aggs=[{}]",
            self.partition_by.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "),
            self.time_column,
            if self.proctime { ", processing time" } else { "" },
            self.frame,
            self.aggs.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "),
        )
    }
}

/// Window functions over an updating input: the input's columns, then one per function.
#[derive(Debug, Clone, PartialEq)]
pub struct OverWindowSpec {
    /// Partition keys over the input, shared by every function.
    pub partition_by: Vec<Expr>,
    /// ORDER BY keys over the input, shared by every function.
    pub order_by: Vec<SortExpr>,
    /// The window function expressions, as DataFusion planned them (aliases included).
    pub functions: Vec<Expr>,
}

impl OverWindowSpec {
    /// How far a row's result reaches, `(before, after)` in rows, when every function is an
    /// aggregate over a `ROWS` frame with bounded ends: a row's result then depends only on
    /// the rows from `before` rows ahead of it to `after` rows behind it. `None` otherwise
    /// (`RANGE`, `GROUPS`, an `UNBOUNDED` end, or a function such as `ROW_NUMBER` or `LAG` that
    /// depends on the row's position): any change may change every row of its partition.
    pub fn reach(&self) -> Option<(u64, u64)> {
        let mut reach = (0, 0);
        for e in &self.functions {
            let Expr::WindowFunction(f) = unalias(e) else { return None };
            let frame = &f.params.window_frame;
            if !matches!(f.fun, WindowFunctionDefinition::AggregateUDF(_)) || frame.units != WindowFrameUnits::Rows {
                return None;
            }
            let rows = |bound: &WindowFrameBound| -> Option<i64> {
                match bound {
                    WindowFrameBound::CurrentRow => Some(0),
                    WindowFrameBound::Preceding(n) => Some(-i64::try_from(frame_rows(n)?).ok()?),
                    WindowFrameBound::Following(n) => i64::try_from(frame_rows(n)?).ok(),
                }
            };
            let (start, end) = (rows(&frame.start_bound)?, rows(&frame.end_bound)?);
            reach.0 = reach.0.max(start.min(0).unsigned_abs());
            reach.1 = reach.1.max(end.max(0).unsigned_abs());
        }
        Some(reach)
    }

    /// The EXPLAIN detail.
    pub fn explain(&self) -> String {
        let list = |items: Vec<String>| items.join(", ");
        format!(
            "partition=[{}], order=[{}], functions=[{}]",
            list(self.partition_by.iter().map(|e| e.to_string()).collect()),
            list(self.order_by.iter().map(|e| e.to_string()).collect()),
            list(self.functions.iter().map(function_call).collect()),
        )
    }
}

/// `f(args) frame` of a window function expression, without its PARTITION BY and ORDER BY.
fn function_call(e: &Expr) -> String {
    match unalias(e) {
        Expr::WindowFunction(f) => format!(
            "{}({}) {}",
            f.fun,
            f.params.args.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", "),
            f.params.window_frame
        ),
        other => other.to_string(),
    }
}

/// Plans the window node `w`: an OVER aggregate over an append-only input (Flink's), window
/// functions over an updating one (module docs).
///
/// # Errors
/// As [`plan_over_aggregate`] over an append-only input, which also refuses a function that is
/// not an aggregate; `Unsupported` for functions of different PARTITION BY or ORDER BY over an
/// updating input, and for an upsert input (it has no retractions to match); the input's
/// planning errors.
pub fn plan_over(w: &Window, catalog: &dyn SourceCatalog) -> Result<StreamPlan> {
    let input = plan_stream(&w.input, catalog)?;
    match input.changelog {
        ChangelogMode::AppendOnly if aggregates_only(w) => plan_over_aggregate(w, input, catalog),
        ChangelogMode::AppendOnly => Err(WeirError::unsupported(RANK_ONLY)),
        ChangelogMode::Upsert => Err(WeirError::unsupported(
            "a window function (OVER) over an upsert changelog, which has no retractions",
        )),
        ChangelogMode::Retract => plan_over_window(w, input),
    }
}

/// Plans window functions over the updating `input` of `w` (module docs).
fn plan_over_window(w: &Window, input: StreamPlan) -> Result<StreamPlan> {
    let mut shared: Option<(&[Expr], &[SortExpr])> = None;
    for e in &w.window_expr {
        let Expr::WindowFunction(f) = unalias(e) else {
            return Err(WeirError::unsupported(format!("window functions: {e} is not a window function")));
        };
        let this = (f.params.partition_by.as_slice(), f.params.order_by.as_slice());
        match shared {
            Some(s) if s != this => {
                return Err(WeirError::unsupported(
                    "window functions over an updating input: every function of one SELECT must use the same PARTITION BY and ORDER BY",
                ))
            }
            _ => shared = Some(this),
        }
    }
    let Some((partition_by, order_by)) = shared else {
        return Err(WeirError::internal("a window node without window functions"));
    };
    let spec =
        OverWindowSpec { partition_by: partition_by.to_vec(), order_by: order_by.to_vec(), functions: w.window_expr.clone() };
    Ok(StreamPlan {
        schema: std::sync::Arc::clone(&w.schema),
        changelog: ChangelogMode::Retract,
        // The input's columns come first, so its stream key still names the row.
        stream_key: input.stream_key.clone(),
        node: StreamNode::OverWindow { input: Box::new(input), spec },
    })
}

/// Plans the window node `w` of aggregate functions over the append-only `input` as an OVER
/// aggregate.
///
/// # Errors
/// `Unsupported`, naming the rule, for what Flink's OverAggregate refuses (see the module
/// docs); the input's planning errors.
fn plan_over_aggregate(w: &Window, input: StreamPlan, catalog: &dyn SourceCatalog) -> Result<StreamPlan> {
    let refuse = |what: &str| Err(WeirError::unsupported(format!("OVER aggregate: {what}")));
    let mut spec: Option<(Vec<Expr>, usize, bool, OverFrame)> = None;
    let mut aggs = Vec::with_capacity(w.window_expr.len());
    for e in &w.window_expr {
        let Expr::WindowFunction(f) = unalias(e) else { return refuse(&format!("{e} is not a window function")) };
        let WindowFunction { fun: WindowFunctionDefinition::AggregateUDF(udf), params } = f.as_ref() else {
            return refuse(&format!("{} over an unbounded input needs a rank filter (rn <= N) or is not supported", f.fun));
        };
        if params.filter.is_some() || params.distinct {
            return refuse("FILTER and DISTINCT in an OVER aggregate are not supported");
        }
        let [order] = params.order_by.as_slice() else {
            return refuse("it needs exactly one ORDER BY key, the input's event-time attribute (as in Flink)");
        };
        let time_column = match unalias(&order.expr) {
            Expr::Column(c) if order.asc => input.schema.maybe_index_of_column(c),
            _ => None,
        };
        let times = crate::plan::join::time_columns(&input, catalog)?.event_time;
        let proctime = time_column.is_some_and(|t| crate::plan::rank::defines_proctime(&w.input, t));
        let Some(time_column) = time_column.filter(|t| proctime || times.contains(t)) else {
            return refuse(&format!(
                "ORDER BY {order} must be the input's event-time or processing-time attribute, ascending (as in Flink)"
            ));
        };
        let frame = frame_of(&params.window_frame)?;
        let this = (params.partition_by.clone(), time_column, proctime, frame);
        match &spec {
            Some(s) if *s != this => return refuse("every aggregate of one SELECT must use the same window"),
            _ => spec = Some(this),
        }
        aggs.push(Expr::AggregateFunction(AggregateFunction::new_udf(
            std::sync::Arc::clone(udf),
            params.args.clone(),
            false,
            None,
            vec![],
            None,
        )));
    }
    let Some((partition_by, time_column, proctime, frame)) = spec else { return refuse("no aggregate") };
    let schema: DFSchemaRef = std::sync::Arc::clone(&w.schema);
    let stream_key = input.stream_key.clone();
    Ok(StreamPlan {
        schema,
        changelog: ChangelogMode::AppendOnly,
        stream_key,
        node: StreamNode::OverAggregate { input: Box::new(input), spec: OverSpec { partition_by, time_column, proctime, frame, aggs } },
    })
}

/// The row count of a bounded `ROWS` frame bound; `None` for `UNBOUNDED` (a NULL).
fn frame_rows(n: &ScalarValue) -> Option<u64> {
    match n.cast_to(&arrow::datatypes::DataType::UInt64) {
        Ok(ScalarValue::UInt64(Some(n))) => Some(n),
        _ => None,
    }
}

/// The frame of an OVER window, if Weir runs it.
fn frame_of(frame: &datafusion::logical_expr::WindowFrame) -> Result<OverFrame> {
    let refuse = |what: String| Err(WeirError::unsupported(format!("OVER aggregate: {what}")));
    if frame.end_bound != WindowFrameBound::CurrentRow {
        return refuse(format!("the frame must end at CURRENT ROW, not {}", frame.end_bound));
    }
    let WindowFrameBound::Preceding(start) = &frame.start_bound else {
        return refuse(format!("the frame must start PRECEDING, not {}", frame.start_bound));
    };
    match frame.units {
        WindowFrameUnits::Rows if start.is_null() => Ok(OverFrame::Rows(None)),
        WindowFrameUnits::Range if start.is_null() => Ok(OverFrame::Range(None)),
        WindowFrameUnits::Rows => match start {
            ScalarValue::UInt64(Some(n)) => Ok(OverFrame::Rows(Some(*n))),
            other => match other.cast_to(&arrow::datatypes::DataType::UInt64) {
                Ok(ScalarValue::UInt64(Some(n))) => Ok(OverFrame::Rows(Some(n))),
                _ => refuse(format!("ROWS {other} PRECEDING: the count must be a whole number")),
            },
        },
        WindowFrameUnits::Range => match start {
            ScalarValue::IntervalMonthDayNano(Some(v)) if v.months == 0 => {
                Ok(OverFrame::Range(Some(v.days as i64 * 86_400_000 + v.nanoseconds / 1_000_000)))
            }
            ScalarValue::IntervalDayTime(Some(v)) => {
                Ok(OverFrame::Range(Some(v.days as i64 * 86_400_000 + v.milliseconds as i64)))
            }
            other => refuse(format!("RANGE {other} PRECEDING: the range must be an INTERVAL of days or less")),
        },
        WindowFrameUnits::Groups => refuse("GROUPS frames are not supported (Flink has none)".into()),
    }
}

/// Whether `plan` is a window node of aggregate functions only (an OVER aggregate), not a rank.
pub fn is_over_aggregate(plan: &LogicalPlan) -> bool {
    matches!(plan, LogicalPlan::Window(w) if aggregates_only(w))
}

/// Whether every function of `w` is an aggregate function.
fn aggregates_only(w: &Window) -> bool {
    w.window_expr.iter().all(|e| {
        matches!(unalias(e), Expr::WindowFunction(f) if matches!(f.fun, WindowFunctionDefinition::AggregateUDF(_)))
    })
}
