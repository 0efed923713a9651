//! Aggregates a stream computes from others: the variances and standard deviations from
//! `COUNT`, `SUM` and `SUM` of squares, and `BOOL_AND` / `BOOL_OR` as `MIN` / `MAX`, so that
//! they retract and merge slice by slice as those do (Flink reduces them so too: Calcite's
//! `AggregateReduceFunctionsRule`).
//!
//! With `n = COUNT(x)`, `s = SUM(x)` and `q = SUM(x * x)`:
//! - `VAR_POP(x) = (n * q - s * s) / (n * n)`;
//! - `VAR_SAMP(x)` (`VARIANCE`, `VAR`) `= (n * q - s * s) / (n * (n - 1))`, NULL when `n = 1`;
//! - `STDDEV_POP(x)` and `STDDEV_SAMP(x)` (`STDDEV`): their square roots.
//!
//! For an integer or DECIMAL `x` the sums and `n * q - s * s` are exact (DECIMAL(38, s): a
//! value past 38 digits fails the job with an overflow), so deleting a row undoes it exactly
//! and large values with a small spread lose nothing; only the last division is in DOUBLE.
//! For a floating-point `x` they are DOUBLE sums, as in Flink: a deleted outlier can leave
//! rounding behind, and a negative difference from rounding is taken as 0 (equal values give
//! 0, not NaN).
//!
//! All are DOUBLE, as DataFusion (and so a batch `SELECT`) types them; Flink gives them the
//! argument's type instead (an INT column's `STDDEV_POP` is an INT, computed in integers). They
//! are NULL for a group without a non-NULL `x` (as in Postgres and Flink). A batch `SELECT`
//! computes them with DataFusion's own (Welford's) algorithm; the two agree up to rounding.
//!
//! `FILTER (WHERE ..)` goes to each of the aggregates the reduction uses. `DISTINCT` is refused
//! for the variances (Flink and DataFusion refuse it too) and dropped for `BOOL_AND` /
//! `BOOL_OR`, where it changes nothing.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::Column;
use datafusion::functions_aggregate::count::count_udaf;
use datafusion::functions_aggregate::min_max::{max_udaf, min_udaf};
use datafusion::functions_aggregate::sum::sum_udaf;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::logical_plan::Aggregate;
use datafusion::logical_expr::{cast, lit, when, AggregateUDF, Expr, ExprSchemable, LogicalPlan, LogicalPlanBuilder};

use crate::error::{Result, WeirError};
use crate::plan::unalias;

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
/// `Unsupported` for a variance or deviation of DISTINCT values; DataFusion's, building the
/// plan.
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
    // Columns added to the input projection for exact arguments ([`exact_argument`]).
    let mut extra: Vec<Expr> = Vec::new();
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
            Some((f, Reduced::Variance { .. })) if f.params.distinct => {
                return Err(WeirError::unsupported(format!(
                    "{}(DISTINCT ..) in a streaming GROUP BY (nor in Flink); aggregate the distinct values in a subquery",
                    f.func.name().to_uppercase()
                )))
            }
            Some((f, Reduced::Variance { sample, root })) => {
                let arg = f.params.args[0].clone();
                match exact_argument(&arg, agg, &mut extra)? {
                    Some(x) => {
                        let n = add(like(f, count_udaf(), x.clone()));
                        let s = add(like(f, sum_udaf(), x.clone()));
                        let q = add(like(f, sum_udaf(), x.clone() * x));
                        let spread = cast(cast(n.clone(), DataType::Decimal128(38, 0)) * q - s.clone() * s, DataType::Float64);
                        variance(cast(n, DataType::Float64), spread, sample, root)?
                    }
                    None => {
                        let x = cast(arg, DataType::Float64);
                        let n = cast(add(like(f, count_udaf(), x.clone())), DataType::Float64);
                        let s = add(like(f, sum_udaf(), x.clone()));
                        let q = add(like(f, sum_udaf(), x.clone() * x));
                        let spread = n.clone() * q - s.clone() * s;
                        let spread = when(spread.clone().lt(lit(0.0)), lit(0.0)).otherwise(spread)?;
                        variance(n, spread, sample, root)?
                    }
                }
            }
        });
    }
    let input = match agg.input.as_ref() {
        LogicalPlan::Projection(p) if !extra.is_empty() => {
            LogicalPlanBuilder::from(p.input.as_ref().clone()).project(p.expr.iter().cloned().chain(extra))?.build()?
        }
        other => other.clone(),
    };
    let inner = LogicalPlanBuilder::from(input).aggregate(agg.group_expr.clone(), aggregates)?.build()?;
    let groups = agg.group_expr.len();
    let mut projection: Vec<Expr> =
        (0..groups).map(|i| Expr::Column(Column::from(inner.schema().qualified_field(i)))).collect();
    for (i, result) in results.into_iter().enumerate() {
        let (qualifier, field) = agg.schema.qualified_field(groups + i);
        projection.push(result.alias_qualified(qualifier.cloned(), field.name()));
    }
    Ok(Some(LogicalPlanBuilder::from(inner).project(projection)?.build()?))
}

/// A variance's argument `arg` as an exact DECIMAL when it was written as an integer or a
/// DECIMAL, `None` when it is a floating-point number. DataFusion's type coercion has cast it
/// to DOUBLE (`CAST(x AS Float64)`), and its common-subexpression pass may have moved that
/// cast into the projection under `agg` (`__common_expr_1`): then the uncast value is added to
/// that projection (`extra`, one column each) and read from there.
///
/// # Errors
/// DataFusion's, typing the argument.
fn exact_argument(arg: &Expr, agg: &Aggregate, extra: &mut Vec<Expr>) -> Result<Option<Expr>> {
    let uncast = |e: &Expr| match unalias(e) {
        Expr::Cast(c) if c.field.data_type() == &DataType::Float64 => Some(c.expr.as_ref().clone()),
        _ => None,
    };
    let exact = |e: Expr, t: DataType| match t {
        t if t.is_integer() => Some(cast(e, DataType::Decimal128(38, 0))),
        DataType::Decimal128(..) => Some(e),
        _ => None,
    };
    if let Some(written) = uncast(arg) {
        let t = written.get_type(agg.input.schema())?;
        return Ok(exact(written, t));
    }
    let (Expr::Column(column), LogicalPlan::Projection(p)) = (unalias(arg), agg.input.as_ref()) else { return Ok(None) };
    let Some(i) = p.schema.maybe_index_of_column(column) else { return Ok(None) };
    let Some(written) = uncast(&p.expr[i]) else { return Ok(None) };
    let t = written.get_type(p.input.schema())?;
    if exact(written.clone(), t.clone()).is_none() {
        return Ok(None);
    }
    let name = format!("__weir_exact_{}", extra.len());
    extra.push(written.alias(&name));
    Ok(exact(Expr::Column(Column::from_name(name)), t))
}

/// Aggregate `udaf` over `arg`, with `f`'s DISTINCT and FILTER.
fn like(f: &AggregateFunction, udaf: Arc<AggregateUDF>, arg: Expr) -> Expr {
    Expr::AggregateFunction(AggregateFunction::new_udf(udaf, vec![arg], f.params.distinct, f.params.filter.clone(), vec![], None))
}

/// The variance from `n` and `spread = n * q - s * s` (DOUBLE both; see the module docs), or
/// its square root.
fn variance(n: Expr, spread: Expr, sample: bool, root: bool) -> Result<Expr> {
    let v = if sample {
        when(n.clone().gt(lit(1.0)), spread / (n.clone() * (n - lit(1.0)))).end()?
    } else {
        spread / (n.clone() * n)
    };
    Ok(if root { datafusion::functions::math::expr_fn::sqrt(v) } else { v })
}
