//! Casts to a type holding a `ROW`, field by field by position (Flink's rule).
//!
//! Flink assigns and compares rows by position: `ROW(2, 'y')` goes into a `ROW<a INT, b
//! STRING>` column, `WHERE buyer = ROW('ann', 'Oslo')` compares field by field. DataFusion
//! types `ROW(...)` as a struct of fields `c0, c1, ...` and refuses a cast between structs of
//! other field names ("Unsupported CAST"), while Arrow's cast kernel assigns fields by name, or
//! else by position. [`PositionalRowCasts`], an analyzer rule run after DataFusion's type
//! coercion in every statement's context, turns each such cast into [`CastByPosition`], which
//! calls the kernel, strictly: a field that does not convert is an error, never a NULL.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::DFSchema;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule; see the module docs.
#[derive(Debug, Default)]
pub struct PositionalRowCasts;

impl AnalyzerRule for PositionalRowCasts {
    fn name(&self) -> &str {
        "weir_positional_row_casts"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> DfResult<LogicalPlan> {
        rewrite_typed_expressions(plan, |e, schema| match e {
            Expr::Cast(c)
                if holds_row(c.field.data_type())
                    && c.expr.get_type(schema).is_ok_and(|from| from != *c.field.data_type()) =>
            {
                let udf = ScalarUDF::new_from_impl(CastByPosition::new(c.field.data_type().clone()));
                Ok(Transformed::yes(udf.call(vec![*c.expr])))
            }
            e => Ok(Transformed::no(e)),
        })
    }
}

/// `plan` (its subqueries too) with each expression rewritten bottom-up by `rewrite`, which is
/// given the schema the expression is typed against: its node's one input's, none for VALUES,
/// and for a join its own (both inputs' columns). A rewritten expression keeps its name, so
/// the plan's schema does not change (for analyzer rules run after DataFusion's type
/// coercion).
///
/// # Errors
/// `rewrite`'s.
pub fn rewrite_typed_expressions(
    plan: LogicalPlan,
    rewrite: impl Fn(Expr, &DFSchema) -> DfResult<Transformed<Expr>>,
) -> DfResult<LogicalPlan> {
    let plan = plan.transform_up_with_subqueries(|node| {
        let inputs = node.inputs();
        let schema = match inputs.as_slice() {
            [] => Arc::new(DFSchema::empty()),
            [one] => Arc::clone(one.schema()),
            _ => Arc::clone(node.schema()),
        };
        let names = NamePreserver::new(&node);
        node.map_expressions(|e| {
            let name = names.save(&e);
            e.transform_up(|e| rewrite(e, &schema))
                .map(|t| if t.transformed { t.update_data(|e| name.restore(e)) } else { t })
        })
    })?;
    Ok(plan.data)
}

/// Whether values of `t` are or hold a struct (a `ROW`, or a `MAP`, whose entries are structs).
pub fn holds_row(t: &DataType) -> bool {
    match t {
        DataType::Struct(_) => true,
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) | DataType::Map(f, _) => {
            holds_row(f.data_type())
        }
        _ => false,
    }
}

/// `CAST(x AS t)` by Arrow's cast kernel (structs field by field, by name or else by
/// position), strict.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct CastByPosition {
    target: DataType,
    signature: Signature,
}

impl CastByPosition {
    /// The cast to `target`.
    pub fn new(target: DataType) -> Self {
        Self { target, signature: Signature::any(1, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for CastByPosition {
    fn name(&self) -> &str {
        "cast_by_position"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(self.target.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        // Strict, as a top-level value's cast: a field that does not convert is an error.
        let options = arrow::compute::CastOptions { safe: false, ..Default::default() };
        Ok(ColumnarValue::Array(arrow::compute::cast_with_options(&arrays[0], &self.target, &options)?))
    }
}
