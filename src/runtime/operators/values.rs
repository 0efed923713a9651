//! Values: the leaf of a constant relation (`VALUES (..), (..)`, or a `SELECT` without `FROM`),
//! as planned by [`crate::plan::StreamNode::Values`]. Flink's StreamExecValues: its rows are
//! inserted once, when the job is created, and never again.
//!
//! Changelog: append-only, `+I` only. Stateless: the rows go out in the job's first epoch and
//! are committed with it, so a restarted job (which is not created again, so
//! [`Operator::on_create`] is not called) does not insert them a second time.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{Schema, SchemaRef};
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{Result, WeirError};
use crate::runtime::changelog::{Op, StreamChunk};
use crate::runtime::operator::{OpContext, Operator};

/// The operator's name.
pub const NAME: &str = "Values";

/// The rows of a constant relation.
pub struct Values {
    /// One expression per column for each row, over no input columns.
    rows: Vec<Vec<Arc<dyn PhysicalExpr>>>,
    /// The output schema; each expression's value is cast to its column's type.
    schema: SchemaRef,
}

impl Values {
    /// A relation of `rows` with `schema`.
    ///
    /// # Errors
    /// `Internal` when a row does not have one expression per column.
    pub fn try_new(rows: Vec<Vec<Arc<dyn PhysicalExpr>>>, schema: SchemaRef) -> Result<Self> {
        if let Some(row) = rows.iter().find(|r| r.len() != schema.fields().len()) {
            return Err(WeirError::internal(format!(
                "a VALUES row of {} expressions for {} columns",
                row.len(),
                schema.fields().len()
            )));
        }
        Ok(Self { rows, schema })
    }

    /// The rows evaluated, as one batch of `schema`.
    fn batch(&self) -> Result<RecordBatch> {
        // One row of no columns: what each expression is evaluated over.
        let one = RecordBatch::try_new_with_options(
            Arc::new(Schema::empty()),
            vec![],
            &RecordBatchOptions::new().with_row_count(Some(1)),
        )?;
        let mut columns: Vec<Vec<ArrayRef>> = vec![Vec::with_capacity(self.rows.len()); self.schema.fields().len()];
        for row in &self.rows {
            for ((expr, field), column) in row.iter().zip(self.schema.fields()).zip(&mut columns) {
                let value = expr.evaluate(&one)?.into_array(1)?;
                let value =
                    if value.data_type() == field.data_type() { value } else { arrow::compute::cast(&value, field.data_type())? };
                column.push(value);
            }
        }
        let columns = columns
            .iter()
            .map(|parts| {
                let parts: Vec<&dyn arrow::array::Array> = parts.iter().map(|a| a.as_ref()).collect();
                Ok(arrow::compute::concat(&parts)?)
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(self.rows.len())),
        )?)
    }
}

impl Operator for Values {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Inserts the rows: called once, when the job is created.
    fn on_create(&mut self, _ctx: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        if self.rows.is_empty() {
            return Ok(None);
        }
        let batch = self.batch()?;
        Ok(Some(StreamChunk::new(vec![Op::Insert; batch.num_rows()], batch)))
    }

    /// A leaf has no input.
    fn process_batch(&mut self, input: usize, _chunk: StreamChunk, _ctx: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        Err(WeirError::internal(format!("a VALUES leaf got rows on input {input}")))
    }
}
