//! `GROUP BY GROUPING SETS (..)`, `ROLLUP (..)` and `CUBE (..)` in a streaming query: one
//! aggregate per grouping set over the same input, their rows unioned (Flink plans them so too,
//! with its `Expand` node feeding one aggregate keyed by the set's id as well).
//!
//! Each set's rows carry every grouping column of the query, NULL where the set does not group
//! by it, and DataFusion's `__grouping_id` (the column its `GROUPING(..)` reads): bit `n - 1 - i`
//! is set when the set leaves out the `i`-th of the `n` distinct grouping expressions, and a
//! set that repeats an earlier one's columns gets the repeat's ordinal in the bits above `n`
//! ([`Aggregate::INTERNAL_GROUPING_ID`]). The grouping columns and `__grouping_id` are the
//! union's stream key: the id tells apart a set's NULL from a column's own NULL.
//!
//! Over a window TVF, Flink requires `window_start` and `window_end` in every set (they are
//! written beside the sets: `GROUP BY window_start, window_end, ROLLUP (a, b)`), so each set's
//! aggregate is a window aggregate of its own and fires when the window closes.

use std::sync::Arc;

use datafusion::common::ScalarValue;
use datafusion::logical_expr::logical_plan::Aggregate;
use datafusion::logical_expr::{Expr, GroupingSet, LogicalPlan, LogicalPlanBuilder};

use crate::error::{Result, WeirError};

/// The sets of `agg`'s `GROUP BY` when it is a `GROUPING SETS`, `ROLLUP` or `CUBE`, in order
/// (`ROLLUP (a, b)`: `(a, b), (a), ()`; `CUBE (a, b)`: `(a, b), (a), (b), ()`); `None` for a
/// plain `GROUP BY`.
fn grouping_sets(agg: &Aggregate) -> Option<Vec<Vec<Expr>>> {
    let [Expr::GroupingSet(set)] = agg.group_expr.as_slice() else { return None };
    Some(match set {
        GroupingSet::GroupingSets(sets) => sets.clone(),
        GroupingSet::Rollup(exprs) => (0..=exprs.len()).rev().map(|n| exprs[..n].to_vec()).collect(),
        GroupingSet::Cube(exprs) => {
            let n = exprs.len();
            // Every subset, the whole set first: a clear bit of `mask` keeps that column.
            (0..1u64 << n).map(|mask| (0..n).filter(|i| mask & (1 << (n - 1 - i)) == 0).map(|i| exprs[i].clone()).collect()).collect()
        }
    })
}

/// `agg` as a union of one aggregate per grouping set (module docs), with `agg`'s output
/// columns; `None` for an aggregate without grouping sets.
///
/// # Errors
/// `Unsupported` for more than 64 grouping columns; DataFusion's, building the plans.
pub fn expand(agg: &Aggregate) -> Result<Option<LogicalPlan>> {
    let Some(sets) = grouping_sets(agg) else { return Ok(None) };
    let Expr::GroupingSet(set) = &agg.group_expr[0] else { return Ok(None) };
    let columns: Vec<Expr> = set.distinct_expr().into_iter().cloned().collect();
    let n = columns.len();
    if n >= 64 {
        return Err(WeirError::unsupported("GROUPING SETS over 64 or more columns in a streaming query"));
    }
    let id_field = agg.schema.field(n);
    let mut masks: Vec<u64> = Vec::with_capacity(sets.len());
    let mut branches = Vec::with_capacity(sets.len());
    for set in &sets {
        let mask = columns.iter().enumerate().filter(|(_, c)| !set.contains(c)).fold(0u64, |m, (i, _)| m | 1 << (n - 1 - i));
        let ordinal = masks.iter().filter(|m| **m == mask).count() as u64;
        masks.push(mask);
        let id = ScalarValue::UInt64(Some(ordinal << n | mask)).cast_to(id_field.data_type())?;
        let mut distinct: Vec<Expr> = Vec::new();
        for e in set {
            if !distinct.contains(e) {
                distinct.push(e.clone());
            }
        }
        // The empty set of a query without aggregates (`SELECT a .. GROUP BY ROLLUP (a)`) still
        // has its one row: an aggregate needs something to compute, a COUNT(*) left unread.
        let aggregates = if distinct.is_empty() && agg.aggr_expr.is_empty() {
            vec![datafusion::functions_aggregate::count::count_all()]
        } else {
            agg.aggr_expr.clone()
        };
        let branch = LogicalPlanBuilder::from(agg.input.as_ref().clone()).aggregate(distinct.clone(), aggregates)?.build()?;
        let branch_schema = Arc::clone(branch.schema());
        let named = |e: Expr, i: usize| {
            let (qualifier, field) = agg.schema.qualified_field(i);
            e.alias_qualified(qualifier.cloned(), field.name())
        };
        let mut exprs = Vec::with_capacity(agg.schema.fields().len());
        for (i, c) in columns.iter().enumerate() {
            let e = match distinct.iter().position(|d| d == c) {
                Some(at) => Expr::Column(datafusion::common::Column::from(branch_schema.qualified_field(at))),
                None => Expr::Literal(ScalarValue::try_from(agg.schema.field(i).data_type())?, None),
            };
            exprs.push(named(e, i));
        }
        exprs.push(named(Expr::Literal(id, None), n));
        for j in 0..agg.aggr_expr.len() {
            let column = Expr::Column(datafusion::common::Column::from(branch_schema.qualified_field(distinct.len() + j)));
            exprs.push(named(column, n + 1 + j));
        }
        branches.push(LogicalPlanBuilder::from(branch).project(exprs)?.build()?);
    }
    if branches.len() == 1 {
        return Ok(branches.pop());
    }
    let union = datafusion::logical_expr::Union::try_new(branches.into_iter().map(Arc::new).collect())?;
    Ok(Some(LogicalPlan::Union(union)))
}
