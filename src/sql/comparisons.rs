//! A string compared with a number is refused when the statement is planned, as Postgres and
//! Flink refuse it, instead of being cast row by row.
//!
//! DataFusion coerces `cat = 1` (cat a STRING column) to `CAST(cat AS BIGINT) = 1`, so the
//! statement fails, or not, depending on the rows it meets ("Cannot cast string 'b' to value
//! of Int64 type"), and a view built on it fails when such a row arrives. Postgres refuses it
//! while planning (`42883 operator does not exist: text = integer`; a string literal is of
//! unknown type there and takes the other side's, so `id = '1'` is fine); Flink refuses an
//! implicit conversion between character strings and numbers in comparisons
//! (FLINK-24492). [`StringNumberComparisons`], an analyzer rule run before DataFusion's type
//! coercion, does what Postgres does for `=`, `<>`, `<`, `<=`, `>`, `>=`, `IS [NOT] DISTINCT
//! FROM`, `IN (..)`, `IN (SELECT ..)`, `BETWEEN` and join keys: a string that is not a literal
//! (a column, a function's result, a cast to text) against a number is refused; a string
//! literal or a parameter is still coerced to the other side's type.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, ExprSchema, ScalarValue};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::expr::{Between, InList, InSubquery};
use datafusion::logical_expr::{BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator};
use datafusion::optimizer::AnalyzerRule;

use crate::error::{ErrorKind, WeirError};
use crate::sql::pg_catalog::format_type;

/// The analyzer rule; see the module docs.
#[derive(Debug, Default)]
pub struct StringNumberComparisons;

impl AnalyzerRule for StringNumberComparisons {
    fn name(&self) -> &str {
        "weir_string_number_comparisons"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> DfResult<LogicalPlan> {
        plan.apply_with_subqueries(|node| {
            let mut schema = DFSchema::empty();
            for input in node.inputs() {
                schema.merge(input.schema());
            }
            // A join's equi-keys, if the planner already took them out of its condition.
            if let LogicalPlan::Join(join) = node {
                for (l, r) in &join.on {
                    pair(Side::of(l, &schema), "=", Side::of(r, &schema))?;
                }
            }
            node.apply_expressions(|e| {
                e.apply(|e| {
                    check(e, &schema)?;
                    Ok(TreeNodeRecursion::Continue)
                })
            })
        })?;
        Ok(plan)
    }
}

/// Refuses `e` if it compares a string that is not a literal with a number.
fn check(e: &Expr, schema: &dyn ExprSchema) -> DfResult<()> {
    let side = |e: &Expr| Side::of(e, schema);
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if is_comparison(op) => {
            pair(side(left), &op.to_string(), side(right))
        }
        Expr::InList(InList { expr, list, .. }) => list.iter().try_for_each(|item| pair(side(expr), "=", side(item))),
        Expr::Between(Between { expr, low, high, .. }) => {
            pair(side(expr), ">=", side(low))?;
            pair(side(expr), "<=", side(high))
        }
        Expr::InSubquery(InSubquery { expr, subquery, .. }) => {
            let column = subquery.subquery.schema().fields().first().map(|f| f.data_type().clone());
            pair(side(expr), "=", Side { data_type: column, untyped: false })
        }
        _ => Ok(()),
    }
}

/// One operand of a comparison: its type, if it can be read here (not a name resolved later),
/// and whether it is untyped ([`is_untyped`]).
struct Side {
    data_type: Option<DataType>,
    untyped: bool,
}

impl Side {
    fn of(e: &Expr, schema: &dyn ExprSchema) -> Self {
        Side { data_type: e.get_type(schema).ok(), untyped: is_untyped(e) }
    }

    /// A string that is not a literal or a parameter.
    fn typed_string(&self) -> bool {
        !self.untyped && self.data_type.as_ref().is_some_and(is_string)
    }

    /// A number that is not a parameter.
    fn typed_number(&self) -> bool {
        !self.untyped && self.data_type.as_ref().is_some_and(DataType::is_numeric)
    }
}

/// Whether `op` compares its operands.
fn is_comparison(op: &Operator) -> bool {
    matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
            | Operator::IsDistinctFrom
            | Operator::IsNotDistinctFrom
    )
}

/// Refuses `left op right` if one side is a string that is not a literal and the other a
/// number. Operands whose type cannot be read here pass.
fn pair(left: Side, op: &str, right: Side) -> DfResult<()> {
    let (Some(lt), Some(rt)) = (&left.data_type, &right.data_type) else { return Ok(()) };
    if (left.typed_string() && right.typed_number()) || (left.typed_number() && right.typed_string()) {
        let (lt, rt) = (format_type(lt), format_type(rt));
        return Err(DataFusionError::External(Box::new(WeirError::new(ErrorKind::UndefinedFunction(format!(
            "operator does not exist: {lt} {op} {rt}: a string is not compared with a number; cast one side \
             (CAST(x AS INT), CAST(n AS STRING)) or write the number as a string literal ('1')"
        ))))));
    }
    Ok(())
}

/// Whether `t` is a character string.
fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// A string literal or a parameter: of unknown type in Postgres, taking the other side's.
fn is_untyped(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Literal(ScalarValue::Utf8(_) | ScalarValue::LargeUtf8(_) | ScalarValue::Utf8View(_), _) | Expr::Placeholder(_)
    )
}
