//! A subquery that is a bare `VALUES` list after IN: `x IN (VALUES (1), (3))`. (Postgres also
//! takes `x = ANY (VALUES ...)` and `(VALUES (5))` as a scalar; sqlparser takes a query there
//! only after SELECT or WITH, so neither parses.)
//!
//! Postgres and Flink take these as they take `(SELECT ...)`. DataFusion plans the subquery as
//! a `Values` node, whose output expression its subquery rewrites look for only under a
//! projection, so it refused them ("single expression required"). [`ValuesSubqueries`], an
//! analyzer rule run in every statement's context, puts a projection of the list's columns over
//! such a subquery, which is what `(SELECT * FROM (VALUES ...))` would plan to.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr::InSubquery;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{Expr, LogicalPlan, Projection, Subquery};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule; see the module docs.
#[derive(Debug, Default)]
pub struct ValuesSubqueries;

impl AnalyzerRule for ValuesSubqueries {
    fn name(&self) -> &str {
        "weir_values_subqueries"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> DfResult<LogicalPlan> {
        let plan = plan.transform_up_with_subqueries(|node| {
            // A rewritten expression keeps its name (the plan's schema must not change).
            let names = NamePreserver::new(&node);
            node.map_expressions(|e| {
                let name = names.save(&e);
                e.transform_up(|e| {
                    Ok(match e {
                        Expr::InSubquery(InSubquery { expr, subquery, negated }) if is_values(&subquery) => {
                            let subquery = projected(subquery)?;
                            Transformed::yes(Expr::InSubquery(InSubquery { expr, subquery, negated }))
                        }
                        e => Transformed::no(e),
                    })
                })
                .map(|t| if t.transformed { t.update_data(|e| name.restore(e)) } else { t })
            })
        })?;
        Ok(plan.data)
    }
}

/// Whether `subquery` is a bare `VALUES` list.
fn is_values(subquery: &Subquery) -> bool {
    matches!(subquery.subquery.as_ref(), LogicalPlan::Values(_))
}

/// `subquery` with a projection of all its columns on top.
fn projected(subquery: Subquery) -> DfResult<Subquery> {
    let values = Arc::clone(&subquery.subquery);
    let columns = values.schema().columns().into_iter().map(Expr::Column).collect();
    let plan = LogicalPlan::Projection(Projection::try_new(columns, values)?);
    Ok(Subquery { subquery: Arc::new(plan), ..subquery })
}
