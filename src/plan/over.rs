//! OVER aggregates: `agg(x) OVER (PARTITION BY .. ORDER BY t [frame])` in a view or job
//! (Flink's OverAggregate), planned into a [`StreamNode::OverAggregate`].
//!
//! # What is accepted (Flink's rules)
//! - The input is append-only (Flink refuses an OVER aggregate over updates too).
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

use std::fmt;

use datafusion::common::{DFSchemaRef, ScalarValue};
use datafusion::logical_expr::expr::{AggregateFunction, WindowFunction};
use datafusion::logical_expr::{Expr, LogicalPlan, Window, WindowFrameBound, WindowFrameUnits, WindowFunctionDefinition};

use crate::error::{Result, WeirError};
use crate::plan::planner::{plan_stream, SourceCatalog};
use crate::plan::stream_plan::{ChangelogMode, StreamNode, StreamPlan};

/// The stable EXPLAIN name.
pub const NAME: &str = "StreamOverAggregate";

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

/// Plans the window node `w` of aggregate functions as an OVER aggregate.
///
/// # Errors
/// `Unsupported`, naming the rule, for what Flink's OverAggregate refuses (see the module
/// docs); the input's planning errors.
pub fn plan_over(w: &Window, catalog: &dyn SourceCatalog) -> Result<StreamPlan> {
    let input = plan_stream(&w.input, catalog)?;
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
    if input.changelog != ChangelogMode::AppendOnly {
        return refuse(&format!(
            "its input is an updating ({}) changelog; an OVER aggregate needs an append-only input, as in Flink",
            input.changelog
        ));
    }
    let schema: DFSchemaRef = std::sync::Arc::clone(&w.schema);
    let stream_key = input.stream_key.clone();
    Ok(StreamPlan {
        schema,
        changelog: ChangelogMode::AppendOnly,
        stream_key,
        node: StreamNode::OverAggregate { input: Box::new(input), spec: OverSpec { partition_by, time_column, proctime, frame, aggs } },
    })
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
    let LogicalPlan::Window(w) = plan else { return false };
    w.window_expr.iter().all(|e| {
        matches!(unalias(e), Expr::WindowFunction(f) if matches!(f.fun, WindowFunctionDefinition::AggregateUDF(_)))
    })
}

fn unalias(e: &Expr) -> &Expr {
    match e {
        Expr::Alias(a) => unalias(&a.expr),
        other => other,
    }
}
