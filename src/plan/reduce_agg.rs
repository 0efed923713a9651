//! Aggregates a stream computes from others: the variances and standard deviations from
//! `SUM`, `SUM` of squares and `COUNT`, and `BOOL_AND` / `BOOL_OR` as `MIN` / `MAX`, so that
//! they retract and merge slice by slice as those do (Flink reduces them so too: Calcite's
//! `AggregateReduceFunctionsRule`).
//!
//! With `x` the argument as DOUBLE, `n = COUNT(x)`, `s = SUM(x)` and `q = SUM(x * x)`:
//! - `VAR_POP(x) = (q - s * s / n) / n`;
//! - `VAR_SAMP(x)` (`VARIANCE`, `VAR`) `= (q - s * s / n) / (n - 1)`, NULL when `n = 1`;
//! - `STDDEV_POP(x)` and `STDDEV_SAMP(x)` (`STDDEV`): their square roots.
//!
//! All are DOUBLE, as DataFusion (and so a batch `SELECT`) types them; Flink gives them the
//! argument's type instead (an INT column's `STDDEV_POP` is an INT, computed in integers). They
//! are NULL for a group without a non-NULL `x` (as in Postgres and Flink). The
//! difference `q - s * s / n` is taken as 0 when rounding makes it negative (equal values whose
//! squares do not sum exactly), where the formula alone would give a tiny negative variance and
//! a NaN deviation. A batch `SELECT` computes them with DataFusion's own (Welford's) algorithm;
//! the two agree up to rounding.
//!
//! `DISTINCT` and `FILTER (WHERE ..)` go to each of the aggregates the reduction uses.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::Column;
use datafusion::functions_aggregate::count::count_udaf;
use datafusion::functions_aggregate::min_max::{max_udaf, min_udaf};
use datafusion::functions_aggregate::sum::sum_udaf;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::{cast, lit, when, AggregateUDF, Expr, LogicalPlan, LogicalPlanBuilder};
use datafusion::logical_expr::logical_plan::Aggregate;

use crate::error::Result;

/// What an aggregate reduces to.
enum Reduced {
    /// A variance (`sample`: divided by `n - 1`), or its square root (`root`).
    Variance { sample: bool, root: bool },
    /// Another aggregate over the same argument (`BOOL_AND` → `MIN`).
    Same(Arc<AggregateUDF>),
}

fn reduction(name: &str) -> Option<Reduced> {
    Some(match name {
        "var_pop" => Reduced::Variance { sample: false, root: false },
        "var" => Reduced::Variance { sample: true, root: false },
        "stddev_pop" => Reduced::Variance { sample: false, root: true },
        "stddev" => Reduced::Variance { sample: true, root: true },
        "bool_and" => Reduced::Same(min_udaf()),
        "bool_or" => Reduced::Same(max_udaf()),
        _ => return None,
    })
}

/// `agg` with its reducible aggregates computed from others (see the module docs): an
/// aggregate of the others under a projection that derives each result, named as `agg`'s
/// columns; `None` when `agg` has none to reduce.
///
/// # Errors
/// DataFusion's, building the plan.
pub fn reduce(agg: &Aggregate) -> Result<Option<LogicalPlan>> {
    let calls: Vec<Option<(&AggregateFunction, Reduced)>> = agg
        .aggr_expr
        .iter()
        .map(|e| match unalias(e) {
            Expr::AggregateFunction(f) if f.params.args.len() == 1 => reduction(f.func.name()).map(|r| (f, r)),
            _ => None,
        })
        .collect();
    if calls.iter().all(Option::is_none) {
        return Ok(None);
    }
    let mut aggregates: Vec<Expr> = Vec::new();
    // Adds an aggregate to the inner node; returns its output column.
    let mut add = |e: Expr| -> Expr {
        let name = format!("__weir_reduced_{}", aggregates.len());
        aggregates.push(e.alias(&name));
        Expr::Column(Column::from_name(name))
    };
    let mut results = Vec::with_capacity(calls.len());
    for (expr, call) in agg.aggr_expr.iter().zip(calls) {
        results.push(match call {
            None => add(unalias(expr).clone()),
            Some((f, Reduced::Same(udaf))) => add(like(f, udaf, f.params.args[0].clone())),
            Some((f, Reduced::Variance { sample, root })) => {
                let x = cast(f.params.args[0].clone(), DataType::Float64);
                let n = add(like(f, count_udaf(), x.clone()));
                let s = add(like(f, sum_udaf(), x.clone()));
                let q = add(like(f, sum_udaf(), x.clone() * x));
                variance(n, s, q, sample, root)?
            }
        });
    }
    let inner = LogicalPlanBuilder::from(agg.input.as_ref().clone()).aggregate(agg.group_expr.clone(), aggregates)?.build()?;
    let groups = agg.group_expr.len();
    let mut projection: Vec<Expr> =
        (0..groups).map(|i| Expr::Column(Column::from(inner.schema().qualified_field(i)))).collect();
    for (i, result) in results.into_iter().enumerate() {
        let (qualifier, field) = agg.schema.qualified_field(groups + i);
        projection.push(result.alias_qualified(qualifier.cloned(), field.name()));
    }
    Ok(Some(LogicalPlanBuilder::from(inner).project(projection)?.build()?))
}

/// Aggregate `udaf` over `arg`, with `f`'s DISTINCT and FILTER.
fn like(f: &AggregateFunction, udaf: Arc<AggregateUDF>, arg: Expr) -> Expr {
    Expr::AggregateFunction(AggregateFunction::new_udf(udaf, vec![arg], f.params.distinct, f.params.filter.clone(), vec![], None))
}

/// The variance from `n`, `s` and `q` (see the module docs), or its square root.
fn variance(n: Expr, s: Expr, q: Expr, sample: bool, root: bool) -> Result<Expr> {
    let n = cast(n, DataType::Float64);
    let spread = q - s.clone() * s / n.clone();
    let spread = when(spread.clone().lt(lit(0.0)), lit(0.0)).otherwise(spread)?;
    let v = if sample { when(n.clone().gt(lit(1.0)), spread / (n - lit(1.0))).end()? } else { spread / n };
    Ok(if root { datafusion::functions::math::expr_fn::sqrt(v) } else { v })
}

fn unalias(e: &Expr) -> &Expr {
    match e {
        Expr::Alias(a) => unalias(&a.expr),
        other => other,
    }
}
