//! Unnest: one row per element of an array column, the other columns repeated
//! (`SELECT id, UNNEST(tags) AS tag`, and Flink's `CROSS JOIN UNNEST(tags) AS t (tag)`, which
//! `sql/` writes that way).
//!
//! A NULL or empty array gives no row (Flink's and SQL's UNNEST); with DataFusion's outer
//! unnest, one row with a NULL element instead.
//!
//! Changelog mode: any in → retracting out. Every row an input row expands to carries its
//! operation; an update pair (`-U` old, `+U` new) becomes `-D` rows and `+I` rows, since the old
//! and the new array need not have as many elements. Stateless and deterministic, so a
//! retraction expands to exactly the rows its insert did.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, GenericListArray, OffsetSizeTrait, RecordBatch, UInt32Array, UInt64Array};
use arrow::compute::take;
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::NullHandling;

use crate::error::{Result, WeirError};
use crate::plan::stream_plan::{UnnestColumn, UnnestSpec};
use crate::runtime::changelog::{Op, StreamChunk};
use crate::runtime::operator::{OpContext, Operator};

/// Expands the array column of each row into one row per element.
pub struct Unnest {
    /// The output columns, in order.
    columns: Vec<UnnestColumn>,
    /// The input column whose elements are taken (every [`UnnestColumn::Elements`] names it).
    list: usize,
    /// What a NULL or empty array gives.
    nulls: NullHandling,
    schema: SchemaRef,
}

impl Unnest {
    /// The unnest `spec` into rows of `schema`.
    ///
    /// # Errors
    /// `Plan` when `spec` takes the elements of a column other than its array's.
    pub fn try_new(spec: &UnnestSpec, schema: SchemaRef) -> Result<Self> {
        if spec.columns.iter().any(|c| matches!(c, UnnestColumn::Elements(i) if *i != spec.list)) {
            return Err(WeirError::plan("UNNEST of more than one array in one step"));
        }
        Ok(Self { columns: spec.columns.clone(), list: spec.list, nulls: spec.nulls.clone(), schema })
    }
}

impl Operator for Unnest {
    fn name(&self) -> &'static str {
        "Unnest"
    }

    fn process_batch(&mut self, _input: usize, chunk: StreamChunk, _ctx: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        let list = chunk.batch.column(self.list);
        let (rows, elements, values) = match list.data_type() {
            DataType::List(_) => expand(list.as_list::<i32>(), self.nulls),
            DataType::LargeList(_) => expand(list.as_list::<i64>(), self.nulls),
            other => return Err(WeirError::plan(format!("UNNEST of {other}: expected an array"))),
        };
        if rows.is_empty() {
            return Ok(None);
        }
        let ops = rows
            .values()
            .iter()
            .map(|&row| match chunk.ops[row as usize] {
                Op::Insert | Op::UpdateAfter => Op::Insert,
                Op::Delete | Op::UpdateBefore => Op::Delete,
            })
            .collect();
        let elements = take(values.as_ref(), &elements, None)?;
        let columns = self
            .columns
            .iter()
            .map(|c| match c {
                UnnestColumn::Elements(_) => Ok(Arc::clone(&elements)),
                UnnestColumn::Repeat(i) => Ok(take(chunk.batch.column(*i).as_ref(), &rows, None)?),
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        Ok(Some(StreamChunk::new(ops, RecordBatch::try_new(Arc::clone(&self.schema), columns)?)))
    }
}

/// For each output row, the input row it comes from and the index of its element in the list's
/// values (NULL: a NULL element, for a NULL or empty array kept by `nulls`), and the values.
fn expand<O: OffsetSizeTrait>(list: &GenericListArray<O>, nulls: NullHandling) -> (UInt32Array, UInt64Array, ArrayRef) {
    let offsets = list.value_offsets();
    let mut rows = Vec::with_capacity(list.values().len());
    let mut elements = Vec::with_capacity(list.values().len());
    for row in 0..list.len() {
        let (start, end) = (offsets[row].as_usize(), offsets[row + 1].as_usize());
        let kept_empty = match nulls {
            NullHandling::Drop => false,
            NullHandling::Preserve => list.is_null(row),
            NullHandling::PreserveAndExpandEmpty => list.is_null(row) || start == end,
        };
        if kept_empty {
            rows.push(row as u32);
            elements.push(None);
        } else if list.is_valid(row) {
            for element in start..end {
                rows.push(row as u32);
                elements.push(Some(element as u64));
            }
        }
    }
    (UInt32Array::from(rows), UInt64Array::from(elements), Arc::clone(list.values()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, ListArray};
    use arrow::datatypes::{Field, Int64Type, Schema};

    fn unnest(nulls: NullHandling, ops: Vec<Op>) -> Option<StreamChunk> {
        let ids = Int64Array::from(vec![1, 2, 3, 4]);
        let lists = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(10), Some(11)]),
            None,
            Some(vec![]),
            Some(vec![Some(40), None]),
        ]);
        let input = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("xs", lists.data_type().clone(), true),
        ]));
        let batch = RecordBatch::try_new(input, vec![Arc::new(ids), Arc::new(lists)]).unwrap();
        let output = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false), Field::new("x", DataType::Int64, true)]));
        let spec = UnnestSpec { columns: vec![UnnestColumn::Repeat(0), UnnestColumn::Elements(1)], list: 1, nulls };
        let mut op = Unnest::try_new(&spec, output).unwrap();
        let dir = tempfile::tempdir().expect("temp dir");
        let store = crate::state::Store::open(dir.path()).expect("store");
        let ctx = OpContext { store: &store };
        op.process_batch(0, StreamChunk::new(ops, batch), &ctx).unwrap()
    }

    fn rows(chunk: &StreamChunk) -> Vec<(Op, i64, Option<i64>)> {
        let ids = chunk.batch.column(0).as_primitive::<Int64Type>();
        let xs = chunk.batch.column(1).as_primitive::<Int64Type>();
        (0..chunk.len()).map(|i| (chunk.ops[i], ids.value(i), xs.is_valid(i).then(|| xs.value(i)))).collect()
    }

    #[test]
    fn one_row_per_element_and_none_for_null_or_empty() {
        let out = unnest(NullHandling::Drop, vec![Op::Insert; 4]).unwrap();
        assert_eq!(rows(&out), vec![(Op::Insert, 1, Some(10)), (Op::Insert, 1, Some(11)), (Op::Insert, 4, Some(40)), (Op::Insert, 4, None)]);
    }

    #[test]
    fn outer_unnest_keeps_null_and_empty_arrays_as_a_null_element() {
        let out = unnest(NullHandling::PreserveAndExpandEmpty, vec![Op::Insert; 4]).unwrap();
        assert_eq!(
            rows(&out),
            vec![(Op::Insert, 1, Some(10)), (Op::Insert, 1, Some(11)), (Op::Insert, 2, None), (Op::Insert, 3, None), (Op::Insert, 4, Some(40)), (Op::Insert, 4, None)]
        );
        let out = unnest(NullHandling::Preserve, vec![Op::Insert; 4]).unwrap();
        assert_eq!(rows(&out).len(), 5, "a NULL array gives a row, an empty one none");
    }

    #[test]
    fn an_update_pair_becomes_deletes_and_inserts() {
        let out = unnest(NullHandling::Drop, vec![Op::UpdateBefore, Op::UpdateAfter, Op::Delete, Op::UpdateAfter]).unwrap();
        assert_eq!(
            rows(&out),
            vec![(Op::Delete, 1, Some(10)), (Op::Delete, 1, Some(11)), (Op::Insert, 4, Some(40)), (Op::Insert, 4, None)]
        );
    }
}
