//! Changelog batches: an Arrow `RecordBatch` plus one operation per row.
//!
//! Flink's row kinds: `+I` insert, `-D` delete, `-U` update-before, `+U` update-after. An update
//! is an adjacent `-U`/`+U` pair in one chunk. Downstream of a materialization every operator
//! treats `-U`/`-D` as "remove one copy of this row" and `+U`/`+I` as "add one copy".

use arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::{concat_batches, take_record_batch};
use arrow::datatypes::SchemaRef;

use crate::error::Result;

/// The operation of one changelog row, defined once for the whole project in the connectors
/// crate (the lowest layer: formats decode and encode it too).
pub use weir_connectors::format::Op;

/// A batch of changelog rows: `ops[i]` is the operation of row `i` of `batch`.
#[derive(Debug, Clone)]
pub struct StreamChunk {
    pub ops: Vec<Op>,
    pub batch: RecordBatch,
}

impl StreamChunk {
    /// A chunk; `ops.len()` must equal the batch's row count.
    pub fn new(ops: Vec<Op>, batch: RecordBatch) -> Self {
        debug_assert_eq!(ops.len(), batch.num_rows());
        Self { ops, batch }
    }

    /// Every row an insert.
    pub fn inserts(batch: RecordBatch) -> Self {
        Self { ops: vec![Op::Insert; batch.num_rows()], batch }
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The batch's columns.
    pub fn columns(&self) -> &[ArrayRef] {
        self.batch.columns()
    }

    /// The schema.
    pub fn schema(&self) -> SchemaRef {
        self.batch.schema()
    }

    /// The rows at `indices`, in that order, with ops replaced by `ops`.
    pub fn take(&self, indices: &[u32], ops: Vec<Op>) -> Result<Self> {
        let idx = UInt32Array::from(indices.to_vec());
        Ok(Self::new(ops, take_record_batch(&self.batch, &idx)?))
    }

    /// Several chunks of one schema as one.
    pub fn concat(schema: &SchemaRef, chunks: Vec<StreamChunk>) -> Result<Self> {
        let mut ops = Vec::new();
        let mut batches = Vec::with_capacity(chunks.len());
        for c in chunks {
            ops.extend(c.ops);
            batches.push(c.batch);
        }
        Ok(Self::new(ops, concat_batches(schema, &batches)?))
    }
}

/// Repairs update pairs after rows were dropped from a chunk: a `-U` whose `+U` is gone becomes
/// `-D`, a `+U` whose `-U` is gone becomes `+I`. `kept[i]` tells whether row `i` survived.
pub fn fix_update_pairs(ops: &[Op], kept: &[bool]) -> Vec<Op> {
    let mut out = Vec::with_capacity(ops.len());
    for i in 0..ops.len() {
        if !kept[i] {
            continue;
        }
        out.push(match ops[i] {
            Op::UpdateBefore if !(i + 1 < ops.len() && kept[i + 1] && ops[i + 1] == Op::UpdateAfter) => {
                Op::Delete
            }
            Op::UpdateAfter if !(i > 0 && kept[i - 1] && ops[i - 1] == Op::UpdateBefore) => Op::Insert,
            op => op,
        });
    }
    out
}

#[cfg(test)]
impl StreamChunk {
    /// Parses a hand-written changelog, one row a line: the op (`+I`, `-D`, `-U`, `+U`) then
    /// one whitespace-separated value per column of `schema`, `NULL` for NULL (values are cast
    /// from text to the column types; timestamps are given as integers).
    pub fn from_pretty(schema: &SchemaRef, text: &str) -> Self {
        use arrow::array::StringArray;
        use arrow::datatypes::DataType;
        let mut ops = Vec::new();
        let mut cells: Vec<Vec<Option<String>>> = vec![Vec::new(); schema.fields().len()];
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let mut words = line.split_whitespace();
            ops.push(match words.next() {
                Some("+I") => Op::Insert,
                Some("-D") => Op::Delete,
                Some("-U") => Op::UpdateBefore,
                Some("+U") => Op::UpdateAfter,
                other => panic!("bad op {other:?} in {line:?}"),
            });
            let values: Vec<&str> = words.collect();
            assert_eq!(values.len(), cells.len(), "wrong number of values in {line:?}");
            for (col, v) in cells.iter_mut().zip(values) {
                col.push((v != "NULL").then(|| v.to_string()));
            }
        }
        let columns = cells
            .into_iter()
            .zip(schema.fields())
            .map(|(values, field)| {
                let text: ArrayRef = std::sync::Arc::new(StringArray::from(values));
                let text = match field.data_type() {
                    DataType::Timestamp(..) => arrow::compute::cast(&text, &DataType::Int64).expect("an integer time"),
                    _ => text,
                };
                arrow::compute::cast(&text, field.data_type()).expect("a value of the column type")
            })
            .collect();
        Self::new(ops, RecordBatch::try_new(std::sync::Arc::clone(schema), columns).expect("a valid batch"))
    }

    /// The rows as [`StreamChunk::from_pretty`] reads them (timestamps as text).
    pub fn to_pretty(&self) -> Vec<String> {
        use arrow::array::Array;
        (0..self.len())
            .map(|i| {
                let mut line = self.ops[i].to_string();
                for a in self.columns() {
                    line.push(' ');
                    if a.is_null(i) {
                        line.push_str("NULL");
                    } else {
                        line.push_str(&arrow::util::display::array_value_to_string(a, i).expect("displayable"));
                    }
                }
                line
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_pairs_become_delete_and_insert() {
        use Op::*;
        let ops = [UpdateBefore, UpdateAfter, UpdateBefore, UpdateAfter, Insert];
        let kept = [true, false, false, true, true];
        assert_eq!(fix_update_pairs(&ops, &kept), vec![Delete, Insert, Insert]);
    }
}
