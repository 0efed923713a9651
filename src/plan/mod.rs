//! Planning: DataFusion logical plans rewritten into stream plans, and the scalar functions
//! every DataFusion context of Weir registers.
pub mod duration;
pub mod functions;
pub mod grouping_sets;
pub mod join;
pub mod over;
pub mod planner;
pub mod rank;
pub mod reduce_agg;
pub mod slicing;
pub mod stream_plan;
pub mod temporal;
pub mod time_zone;
pub mod ttl;
pub mod type_names;
pub mod window;

pub use planner::{plan_stream, updating_operator, SourceCatalog, SourceInfo};
pub use stream_plan::{ChangelogMode, Exchange, StreamNode, StreamPlan};

/// `expr` without its aliases (`a AS x AS y` is `a`).
pub(crate) fn unalias(expr: &datafusion::logical_expr::Expr) -> &datafusion::logical_expr::Expr {
    match expr {
        datafusion::logical_expr::Expr::Alias(a) => unalias(&a.expr),
        other => other,
    }
}
