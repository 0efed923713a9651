//! Filter: keeps the rows whose predicate is true (NULL counts as false), on whole batches.
//!
//! Changelog mode: any in → the same out. A deterministic predicate applied to every changelog
//! row keeps the output consistent: a retraction passes exactly when its insert passed. Update
//! pairs split by the predicate become `-D` / `+I`. Stateless.

use std::sync::Arc;

use arrow::array::{Array, BooleanArray};
use arrow::compute::filter_record_batch;
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{Result, WeirError};
use crate::runtime::changelog::{fix_update_pairs, StreamChunk};
use crate::runtime::operator::{with_current_watermark, OpContext, Operator};

/// Keeps rows matching `predicate`.
pub struct Filter {
    /// A boolean expression over the input schema.
    predicate: Arc<dyn PhysicalExpr>,
    /// The input's watermark, for `CURRENT_WATERMARK`.
    watermark: Option<i64>,
}

impl Filter {
    /// A filter on `predicate`.
    pub fn try_new(predicate: Arc<dyn PhysicalExpr>) -> Result<Self> {
        Ok(Self { predicate, watermark: None })
    }
}

impl Operator for Filter {
    fn name(&self) -> &'static str {
        "Filter"
    }

    fn process_batch(
        &mut self,
        _input: usize,
        chunk: StreamChunk,
        _ctx: &OpContext<'_>,
    ) -> Result<Option<StreamChunk>> {
        let n = chunk.len();
        let mask = with_current_watermark(self.watermark, || self.predicate.evaluate(&chunk.batch))?.into_array(n)?;
        let mask = mask
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| WeirError::plan(format!("filter predicate is {}, not boolean", mask.data_type())))?;
        let kept: Vec<bool> = (0..n).map(|i| mask.is_valid(i) && mask.value(i)).collect();
        if kept.iter().all(|k| *k) {
            return Ok(Some(chunk));
        }
        let mask = BooleanArray::from(kept.clone());
        let batch = filter_record_batch(&chunk.batch, &mask)?;
        if batch.num_rows() == 0 {
            return Ok(None);
        }
        Ok(Some(StreamChunk::new(fix_update_pairs(&chunk.ops, &kept), batch)))
    }

    fn on_watermark(&mut self, _input: usize, watermark_ms: i64, _ctx: &OpContext<'_>) -> Result<(Option<StreamChunk>, Option<i64>)> {
        self.watermark = Some(self.watermark.map_or(watermark_ms, |w| w.max(watermark_ms)));
        Ok((None, Some(watermark_ms)))
    }
}
