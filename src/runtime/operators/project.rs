//! Project: evaluates one DataFusion physical expression per output column on whole batches.
//!
//! Changelog mode: any in → the same out; ops are carried unchanged. Stateless.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::physical_expr::PhysicalExpr;

use crate::error::Result;
use crate::runtime::changelog::StreamChunk;
use crate::runtime::operator::{with_current_watermark, OpContext, Operator};

/// Computes `exprs` over each input chunk.
pub struct Project {
    /// One expression per output column, over the input schema.
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    /// The output schema.
    schema: SchemaRef,
    /// The input's watermark, for `CURRENT_WATERMARK`.
    watermark: Option<i64>,
}

impl Project {
    /// A projection producing `schema` from `exprs` (same length), every column nullable: a
    /// changelog carries rows that a query's final result never holds, such as the NULL-padded
    /// row a LEFT join emits between retracting a pair and inserting its update, so a column
    /// DataFusion knows to be NOT NULL in the result (a scalar `count(*)` subquery's) may be
    /// NULL on the way.
    pub fn try_new(exprs: Vec<Arc<dyn PhysicalExpr>>, schema: SchemaRef) -> Result<Self> {
        if exprs.len() != schema.fields().len() {
            return Err(crate::error::WeirError::internal(format!(
                "projection of {} expressions into {} columns",
                exprs.len(),
                schema.fields().len()
            )));
        }
        let fields: Vec<arrow::datatypes::Field> =
            schema.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect();
        let schema =
            Arc::new(arrow::datatypes::Schema::new_with_metadata(fields, schema.metadata().clone()));
        Ok(Self { exprs, schema, watermark: None })
    }
}

impl Operator for Project {
    fn name(&self) -> &'static str {
        "Project"
    }

    fn process_batch(
        &mut self,
        _input: usize,
        chunk: StreamChunk,
        _ctx: &OpContext<'_>,
    ) -> Result<Option<StreamChunk>> {
        let n = chunk.len();
        let watermark = self.watermark;
        let columns = self
            .exprs
            .iter()
            .zip(self.schema.fields())
            .map(|(e, f)| {
                let array = with_current_watermark(watermark, || e.evaluate(&chunk.batch))?.into_array(n)?;
                Ok(if array.data_type() == f.data_type() {
                    array
                } else {
                    arrow::compute::cast(&array, f.data_type())?
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let batch = RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(n)),
        )?;
        Ok(Some(StreamChunk::new(chunk.ops, batch)))
    }

    fn on_watermark(&mut self, _input: usize, watermark_ms: i64, _ctx: &OpContext<'_>) -> Result<(Option<StreamChunk>, Option<i64>)> {
        self.watermark = Some(self.watermark.map_or(watermark_ms, |w| w.max(watermark_ms)));
        Ok((None, Some(watermark_ms)))
    }
}
