//! `IF(condition, a, b)`: `a` when `condition` is TRUE, else `b` (FALSE or NULL), of the type
//! both widen to (Flink docs, Conditional Functions). Planned as a stub whose calls are
//! rewritten into `CASE WHEN condition THEN a ELSE b END` before type coercion
//! ([`IfRewrite`], a DataFusion function rewrite), so only the branch a row takes is
//! evaluated: `IF(x = 0, 0, 1 / x)` does not divide by zero, as in Flink.

use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{plan_err, DFSchema};
use datafusion::error::Result;
use datafusion::logical_expr::expr::{Case, ScalarFunction};
use datafusion::logical_expr::expr_rewriter::FunctionRewrite;
use datafusion::logical_expr::type_coercion::binary::type_union_resolution;
use datafusion::logical_expr::{ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

/// The `IF` stub: its type, for planning; its calls never run (see [`IfRewrite`]).
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct If {
    signature: Signature,
}

impl If {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

/// The type `a` and `b` widen to.
fn result_type(arg_types: &[DataType]) -> Result<DataType> {
    let [_, a, b] = arg_types else {
        return plan_err!("IF(condition, value if true, value if false) takes 3 arguments, got {}", arg_types.len());
    };
    match type_union_resolution(&[a.clone(), b.clone()]) {
        Some(t) => Ok(t),
        None => plan_err!("IF: the values if true and if false have no common type: {a} and {b}"),
    }
}

impl ScalarUDFImpl for If {
    fn name(&self) -> &str {
        "if"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let t = result_type(arg_types)?;
        Ok(vec![DataType::Boolean, t.clone(), t])
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        result_type(arg_types)
    }

    fn invoke_with_args(&self, _: ScalarFunctionArgs) -> Result<ColumnarValue> {
        datafusion::common::internal_err!("IF is rewritten into CASE before it runs")
    }
}

/// Rewrites every `IF(c, a, b)` call into `CASE WHEN c THEN a ELSE b END`.
#[derive(Debug)]
pub(super) struct IfRewrite;

impl FunctionRewrite for IfRewrite {
    fn name(&self) -> &str {
        "flink_if"
    }

    fn rewrite(&self, expr: Expr, _: &DFSchema, _: &ConfigOptions) -> Result<Transformed<Expr>> {
        match expr {
            Expr::ScalarFunction(ScalarFunction { func, args }) if func.name() == "if" && args.len() == 3 => {
                let [condition, a, b]: [Expr; 3] = args.try_into().map_err(|_| {
                    datafusion::error::DataFusionError::Internal("IF: three arguments".into())
                })?;
                Ok(Transformed::yes(Expr::Case(Case::new(None, vec![(Box::new(condition), Box::new(a))], Some(Box::new(b))))))
            }
            other => Ok(Transformed::no(other)),
        }
    }
}
