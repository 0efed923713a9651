//! Plain tables: their rows in a state table, and the changelog each DML statement produces.
//!
//! A table with a primary key stores `key = primary key columns` → whole row; an `INSERT` of an
//! existing key is an upsert and emits `-U old, +U new` (Flink's upsert semantics for keyed
//! tables). A table without one stores `key = row id` (u64, big-endian, from a per-table
//! sequence) → row. `UPDATE` emits `-U old, +U new`; `DELETE` emits `-D old`.
//!
//! Writes go into the statement's (or transaction block's) [`TableWrites`], read back by the
//! statements after it; they are committed as one epoch.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BinaryArray, RecordBatch};
use arrow::compute::interleave;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::error::Result;
use crate::runtime::changelog::{Op, StreamChunk};
use crate::state::{RowCodec, ScanState, TableWrites};

/// The name of the hidden column that carries a row's storage key in DML scans.
pub const KEY_COLUMN: &str = "_weir_key";

/// Rows per batch when scanning a table.
const SCAN_BATCH_ROWS: usize = 8192;

/// The stored rows of one plain table (or a materialized view, for reading).
pub struct TableStore {
    id: u32,
    schema: SchemaRef,
    row_codec: RowCodec,
    /// Primary key column indexes and their codec.
    pk: Option<(Vec<usize>, RowCodec)>,
}

/// Where an output row comes from when assembling a changelog chunk.
#[derive(Clone, Copy)]
enum From {
    /// Row of the incoming (new) rows.
    New(usize),
    /// Row of the decoded previous versions.
    Old(usize),
}

impl TableStore {
    /// The rows of a table of `schema` in state table `id`, keyed by `primary_key` columns if any.
    ///
    /// # Errors
    /// `Unsupported` for column types the state codec cannot store.
    pub fn try_new(id: u32, schema: SchemaRef, primary_key: &[usize]) -> Result<Self> {
        let types: Vec<DataType> = schema.fields().iter().map(|f| f.data_type().clone()).collect();
        let pk = if primary_key.is_empty() {
            None
        } else {
            let codec = RowCodec::try_new(primary_key.iter().map(|i| types[*i].clone()).collect())?;
            Some((primary_key.to_vec(), codec))
        };
        Ok(Self { id, row_codec: RowCodec::try_new(types)?, schema, pk })
    }

    /// The table's schema (without the hidden key column).
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The schema with the hidden [`KEY_COLUMN`] appended.
    pub fn keyed_schema(&self) -> SchemaRef {
        let mut fields: Vec<Field> = self.schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new(KEY_COLUMN, DataType::Binary, false));
        Arc::new(Schema::new(fields))
    }

    fn check_not_null(&self, batch: &RecordBatch) -> Result<()> {
        for (i, field) in self.schema.fields().iter().enumerate() {
            let is_key = self.pk.as_ref().is_some_and(|(cols, _)| cols.contains(&i));
            if (is_key || !field.is_nullable()) && batch.column(i).null_count() > 0 {
                return Err(crate::error::ErrorKind::NotNullViolation(format!(
                    "null value in column \"{}\" violates not-null constraint{}",
                    field.name(),
                    if is_key { " (it is part of the primary key)" } else { "" }
                ))
                .into());
            }
        }
        Ok(())
    }

    /// Inserts `batch` (the table's schema); returns the changelog. Rows of a keyed table whose
    /// key exists replace it (upsert). `next_row_id` is the sequence of a keyless table. The
    /// table's rows are `state` as changed by `writes`, into which the rows go.
    pub fn insert(
        &self,
        batch: &RecordBatch,
        state: &dyn ScanState,
        writes: &mut TableWrites,
        next_row_id: &mut u64,
    ) -> Result<StreamChunk> {
        self.check_not_null(batch)?;
        let n = batch.num_rows();
        let values = self.row_codec.encode_rows(batch.columns(), n)?;
        writes.reserve(n);
        let Some(keys) = self.primary_keys(batch)? else {
            for v in values {
                writes.put(self.id, next_row_id.to_be_bytes().to_vec(), v);
                *next_row_id += 1;
            }
            return Ok(StreamChunk::inserts(batch.clone()));
        };
        let stored = writes.get_many(state, self.id, &keys)?;
        // Keys an earlier row of this batch wrote: their value now.
        let mut current: HashMap<&[u8], Option<Vec<u8>>> = HashMap::new();
        let mut old_values: Vec<Vec<u8>> = Vec::new();
        let mut plan: Vec<(Op, From)> = Vec::with_capacity(n);
        for i in 0..n {
            let prev = match current.get(keys[i].as_slice()) {
                Some(v) => v.clone(),
                None => stored[i].clone(),
            };
            match prev {
                Some(old) => {
                    plan.push((Op::UpdateBefore, From::Old(old_values.len())));
                    plan.push((Op::UpdateAfter, From::New(i)));
                    old_values.push(old);
                }
                None => plan.push((Op::Insert, From::New(i))),
            }
            writes.put(self.id, keys[i].clone(), values[i].clone());
            current.insert(keys[i].as_slice(), Some(values[i].clone()));
        }
        self.assemble(batch, &old_values, &plan)
    }

    /// The encoded primary keys of `batch`'s rows; `None` for a keyless table.
    ///
    /// # Errors
    /// `Unsupported` for a key type the codec cannot encode.
    pub fn primary_keys(&self, batch: &RecordBatch) -> Result<Option<Vec<Vec<u8>>>> {
        let Some((cols, codec)) = &self.pk else { return Ok(None) };
        let key_cols: Vec<ArrayRef> = cols.iter().map(|c| Arc::clone(batch.column(*c))).collect();
        Ok(Some(codec.encode_rows(&key_cols, batch.num_rows())?))
    }

    /// The primary key column indexes; empty for a keyless table.
    pub fn primary_key_columns(&self) -> &[usize] {
        self.pk.as_ref().map_or(&[], |(cols, _)| cols.as_slice())
    }

    /// Decodes stored rows (values of the table's state table) into a batch of its schema.
    ///
    /// # Errors
    /// `Storage` for a value that does not decode.
    pub fn decode_rows(&self, values: &[Vec<u8>]) -> Result<RecordBatch> {
        let mut decoder = self.row_codec.decoder(values.len());
        for v in values {
            decoder.append_row(v)?;
        }
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            decoder.finish()?,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(values.len())),
        )?)
    }

    /// Deletes the rows with storage keys `keys`, whose current contents are `old_rows`.
    pub fn delete(&self, keys: &BinaryArray, old_rows: &RecordBatch, writes: &mut TableWrites) -> Result<StreamChunk> {
        for k in keys.iter().flatten() {
            writes.delete(self.id, k);
        }
        Ok(StreamChunk::new(vec![Op::Delete; old_rows.num_rows()], old_rows.clone()))
    }

    /// Replaces the rows with storage keys `keys` (contents `old_rows`) by `new_rows`.
    /// In a keyed table a row whose key changes is deleted and the new row upserted.
    pub fn update(
        &self,
        keys: &BinaryArray,
        old_rows: &RecordBatch,
        new_rows: &RecordBatch,
        state: &dyn ScanState,
        writes: &mut TableWrites,
    ) -> Result<StreamChunk> {
        self.check_not_null(new_rows)?;
        let n = new_rows.num_rows();
        let values = self.row_codec.encode_rows(new_rows.columns(), n)?;
        let new_keys: Vec<Vec<u8>> = match &self.pk {
            Some((cols, codec)) => {
                let key_cols: Vec<ArrayRef> = cols.iter().map(|c| Arc::clone(new_rows.column(*c))).collect();
                codec.encode_rows(&key_cols, n)?
            }
            None => keys.iter().map(|k| k.unwrap_or_default().to_vec()).collect(),
        };
        let old_encoded = self.row_codec.encode_rows(old_rows.columns(), n)?;
        // Keys whose row this statement moved away or replaced, by new key: current value.
        let mut current: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
        for i in 0..n {
            let old_key = keys.value(i);
            if old_key != new_keys[i].as_slice() {
                current.insert(old_key.to_vec(), None);
                writes.delete(self.id, old_key);
            }
        }
        let mut old_values: Vec<Vec<u8>> = Vec::new();
        let mut plan: Vec<(Op, From)> = Vec::new();
        for i in 0..n {
            let old_key = keys.value(i);
            if old_key == new_keys[i].as_slice() {
                old_values.push(old_encoded[i].clone());
                plan.push((Op::UpdateBefore, From::Old(old_values.len() - 1)));
                plan.push((Op::UpdateAfter, From::New(i)));
            } else {
                old_values.push(old_encoded[i].clone());
                plan.push((Op::Delete, From::Old(old_values.len() - 1)));
                let prev = match current.get(&new_keys[i]) {
                    Some(v) => v.clone(),
                    None => writes.get_many(state, self.id, std::slice::from_ref(&new_keys[i]))?.pop().flatten(),
                };
                match prev {
                    Some(collided) => {
                        old_values.push(collided);
                        plan.push((Op::UpdateBefore, From::Old(old_values.len() - 1)));
                        plan.push((Op::UpdateAfter, From::New(i)));
                    }
                    None => plan.push((Op::Insert, From::New(i))),
                }
            }
            writes.put(self.id, new_keys[i].clone(), values[i].clone());
            current.insert(new_keys[i].clone(), Some(values[i].clone()));
        }
        self.assemble(new_rows, &old_values, &plan)
    }

    /// Builds the changelog chunk described by `plan` from new rows and encoded old rows.
    fn assemble(&self, new_rows: &RecordBatch, old_values: &[Vec<u8>], plan: &[(Op, From)]) -> Result<StreamChunk> {
        if old_values.is_empty() && plan.iter().all(|(op, _)| *op == Op::Insert) {
            return Ok(StreamChunk::inserts(new_rows.clone()));
        }
        let mut decoder = self.row_codec.decoder(old_values.len());
        for v in old_values {
            decoder.append_row(v)?;
        }
        let old_cols = decoder.finish()?;
        let indices: Vec<(usize, usize)> = plan
            .iter()
            .map(|(_, from)| match from {
                From::New(i) => (0, *i),
                From::Old(i) => (1, *i),
            })
            .collect();
        let columns = new_rows
            .columns()
            .iter()
            .zip(&old_cols)
            .map(|(new, old)| Ok(interleave(&[new.as_ref(), old.as_ref()], &indices)?))
            .collect::<Result<Vec<_>>>()?;
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), columns)?;
        Ok(StreamChunk::new(plan.iter().map(|(op, _)| *op).collect(), batch))
    }
}

/// Reads every row of state table `id` holding rows of `schema`, in key order.
///
/// `layout` says how the rows are stored: [`RowLayout::Rows`] (tables, keyed views: the value is
/// the row) or [`RowLayout::Multiset`] (keyless views: the key is the row, the value its count).
/// With `with_key`, the storage key is appended as the binary column [`KEY_COLUMN`].
pub fn scan_rows(
    store: &dyn ScanState,
    id: u32,
    schema: &SchemaRef,
    layout: RowLayout,
    with_key: bool,
) -> Result<Vec<RecordBatch>> {
    let codec = RowCodec::try_new(schema.fields().iter().map(|f| f.data_type().clone()).collect())?;
    let out_schema = if with_key {
        let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new(KEY_COLUMN, DataType::Binary, false));
        Arc::new(Schema::new(fields))
    } else {
        Arc::clone(schema)
    };
    let mut batches = Vec::new();
    let mut decoder = codec.decoder(SCAN_BATCH_ROWS);
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut rows = 0;
    let finish = |decoder: crate::state::codec::RowDecoder<'_>, keys: &mut Vec<Vec<u8>>, rows: usize| -> Result<RecordBatch> {
        let mut cols = decoder.finish()?;
        if with_key {
            cols.push(Arc::new(BinaryArray::from_iter_values(keys.drain(..))));
        }
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&out_schema),
            cols,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)),
        )?)
    };
    store.scan_table(id, &mut |k, v| {
        match layout {
            RowLayout::Rows => {
                decoder.append_row(v)?;
                rows += 1;
                if with_key {
                    keys.push(k.to_vec());
                }
            }
            RowLayout::Multiset => {
                let count = crate::runtime::operators::materialize::decode_count(v)?;
                for _ in 0..count {
                    decoder.append(k)?;
                    rows += 1;
                    if with_key {
                        keys.push(k.to_vec());
                    }
                }
            }
        }
        if rows >= SCAN_BATCH_ROWS {
            let full = std::mem::replace(&mut decoder, codec.decoder(SCAN_BATCH_ROWS));
            batches.push(finish(full, &mut keys, rows)?);
            rows = 0;
        }
        Ok(true)
    })?;
    if rows > 0 || batches.is_empty() {
        batches.push(finish(decoder, &mut keys, rows)?);
    }
    Ok(batches)
}

/// How a state table holds rows; see [`scan_rows`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowLayout {
    Rows,
    Multiset,
}
