//! Stream operators, one per file.
pub mod filter;
pub mod group_agg;
pub mod join;
pub mod materialize;
pub mod normalize;
pub mod over_agg;
pub mod progress;
pub mod project;
pub mod rank;
pub mod session_assign;
pub mod sliced_window_agg;
pub mod sink;
pub mod temporal_join;
pub mod union;
pub mod window_assign;

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use datafusion::physical_expr::PhysicalExpr;

use crate::error::Result;
use crate::state::key_group::key_group;
use crate::state::RowCodec;

/// For [`Operator::key_groups`](crate::runtime::operator::Operator::key_groups): the key group of
/// each row of `batch` whose partition key is `exprs`, encoded by `codec` as the operator's
/// state keys begin with it.
///
/// # Errors
/// Evaluation errors of `exprs`; `codec`'s when a column does not match its types.
pub(crate) fn key_groups_of(exprs: &[Arc<dyn PhysicalExpr>], codec: &RowCodec, batch: &RecordBatch) -> Result<Vec<u16>> {
    let n = batch.num_rows();
    let cols = exprs.iter().map(|e| Ok(e.evaluate(batch)?.into_array(n)?)).collect::<Result<Vec<ArrayRef>>>()?;
    Ok(codec.encode_rows(&cols, n)?.iter().map(|k| key_group(k)).collect())
}
