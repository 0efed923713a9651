//! Union (UNION ALL): forwards chunks from every input unchanged.
//!
//! Changelog mode: the union of its inputs' (retracting if any input is). Stateless.

use arrow::datatypes::SchemaRef;

use crate::error::Result;
use crate::runtime::changelog::StreamChunk;
use crate::runtime::operator::{OpContext, Operator};

/// Forwards every input's chunks, relabelled with the union's schema.
pub struct Union {
    schema: SchemaRef,
    /// The last watermark of each input (ms); the union's is their minimum.
    watermarks: Vec<Option<i64>>,
}

impl Union {
    /// A union producing `schema`.
    pub fn try_new(schema: SchemaRef, num_inputs: usize) -> Result<Self> {
        Ok(Self { schema, watermarks: vec![None; num_inputs] })
    }
}

impl Operator for Union {
    fn name(&self) -> &'static str {
        "Union"
    }

    /// The minimum of the inputs' watermarks, once every input has one (DESIGN.md).
    fn on_watermark(
        &mut self,
        input: usize,
        watermark_ms: i64,
        _ctx: &OpContext<'_>,
    ) -> Result<(Option<StreamChunk>, Option<i64>)> {
        if let Some(w) = self.watermarks.get_mut(input) {
            *w = Some(w.map_or(watermark_ms, |old| old.max(watermark_ms)));
        }
        let min = self.watermarks.iter().copied().collect::<Option<Vec<i64>>>().and_then(|w| w.into_iter().min());
        Ok((None, min))
    }

    fn process_batch(
        &mut self,
        _input: usize,
        chunk: StreamChunk,
        _ctx: &OpContext<'_>,
    ) -> Result<Option<StreamChunk>> {
        let columns = chunk
            .batch
            .columns()
            .iter()
            .zip(self.schema.fields())
            .map(|(c, f)| {
                if c.data_type() == f.data_type() {
                    Ok(std::sync::Arc::clone(c))
                } else {
                    Ok(arrow::compute::cast(c, f.data_type())?)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let batch = arrow::array::RecordBatch::try_new_with_options(
            std::sync::Arc::clone(&self.schema),
            columns,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(chunk.len())),
        )?;
        Ok(Some(StreamChunk::new(chunk.ops, batch)))
    }
}
