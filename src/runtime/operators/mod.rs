//! Stream operators, one per file.
pub mod filter;
pub mod group_agg;
pub mod join;
pub mod materialize;
pub mod normalize;
pub mod over_agg;
pub mod over_window;
pub mod progress;
pub mod project;
pub mod rank;
pub mod session_assign;
pub mod sliced_window_agg;
pub mod sink;
pub mod temporal_join;
pub mod union;
pub mod unnest;
pub mod upsert_materialize;
pub mod values;
pub mod window_assign;

use std::sync::Arc;

use ahash::AHashMap as HashMap;
use arrow::array::{ArrayRef, RecordBatch};
use datafusion::physical_expr::PhysicalExpr;

use crate::error::Result;
use crate::state::key_group::key_group;
use crate::state::RowCodec;

/// Where a row a keyed-row operator emits comes from (ChangelogNormalize,
/// SinkUpsertMaterializer): row `i` of the input chunk, or stored row `i`.
pub(crate) enum Origin {
    Input(u32),
    Stored(usize),
}

/// The chunk of `out`'s rows, each taken from `chunk` or decoded from `stored` (rows encoded
/// by `row_codec`, of `chunk`'s schema); `None` when `out` is empty.
///
/// # Errors
/// `row_codec`'s when a stored row does not decode.
pub(crate) fn emit_rows(
    out: Vec<(crate::runtime::changelog::Op, Origin)>,
    stored: &[Vec<u8>],
    row_codec: &RowCodec,
    chunk: &crate::runtime::changelog::StreamChunk,
) -> Result<Option<crate::runtime::changelog::StreamChunk>> {
    if out.is_empty() {
        return Ok(None);
    }
    // One batch of the input rows followed by the stored rows; output rows are taken from it.
    let mut decoder = row_codec.decoder(stored.len());
    for row in stored {
        decoder.append(row)?;
    }
    // The input's own schema: its nullability is the input's (a delete's value columns may be
    // NULL).
    let schema = chunk.batch.schema();
    let stored_batch = RecordBatch::try_new(Arc::clone(&schema), decoder.finish()?)?;
    let input_rows = chunk.len() as u32;
    let indices = arrow::array::UInt32Array::from_iter_values(out.iter().map(|(_, from)| match from {
        Origin::Input(i) => *i,
        Origin::Stored(i) => input_rows + *i as u32,
    }));
    let all = arrow::compute::concat_batches(&schema, [&chunk.batch, &stored_batch])?;
    let batch = arrow::compute::take_record_batch(&all, &indices)?;
    Ok(Some(crate::runtime::changelog::StreamChunk::new(out.into_iter().map(|(op, _)| op).collect(), batch)))
}

/// The key group of each row of `chunk` by its columns `key`, encoded by `codec` (the
/// operator's state keys).
///
/// # Errors
/// `codec`'s when a column does not match its types.
pub(crate) fn key_groups_by_columns(
    key: &[usize],
    codec: &RowCodec,
    chunk: &crate::runtime::changelog::StreamChunk,
) -> Result<Vec<u16>> {
    let columns: Vec<ArrayRef> = key.iter().map(|k| Arc::clone(chunk.batch.column(*k))).collect();
    Ok(codec.encode_rows(&columns, chunk.len())?.iter().map(|k| key_group(k)).collect())
}

/// For [`Operator::key_groups`](crate::runtime::operator::Operator::key_groups): the key group of
/// each row of `batch` whose partition key is `exprs`, encoded by `codec` as the operator's
/// state keys begin with it.
///
/// # Errors
/// Evaluation errors of `exprs`; `codec`'s when a column does not match its types.
pub(crate) fn key_groups_of(exprs: &[Arc<dyn PhysicalExpr>], codec: &RowCodec, batch: &RecordBatch) -> Result<Vec<u16>> {
    Ok(partition_keys(exprs, codec, batch)?.1.iter().map(|k| key_group(k)).collect())
}

/// The partition key of each row of `batch`: `exprs` evaluated (the columns) and encoded by
/// `codec` (one key per row).
///
/// # Errors
/// Evaluation errors of `exprs`; `codec`'s when a column does not match its types.
pub(crate) fn partition_keys(
    exprs: &[Arc<dyn PhysicalExpr>],
    codec: &RowCodec,
    batch: &RecordBatch,
) -> Result<(Vec<ArrayRef>, Vec<Vec<u8>>)> {
    let n = batch.num_rows();
    let cols = exprs.iter().map(|e| Ok(e.evaluate(batch)?.into_array(n)?)).collect::<Result<Vec<ArrayRef>>>()?;
    let keys = codec.encode_rows(&cols, n)?;
    Ok((cols, keys))
}

/// The row indexes of each partition key in `keys`, partitions in first-seen order.
pub(crate) fn rows_by_partition(keys: &[Vec<u8>]) -> Vec<(&[u8], Vec<usize>)> {
    let mut groups: Vec<(&[u8], Vec<usize>)> = Vec::new();
    let mut index: HashMap<&[u8], usize> = HashMap::new();
    for (row, p) in keys.iter().enumerate() {
        let slot = *index.entry(p.as_slice()).or_insert_with(|| {
            groups.push((p.as_slice(), Vec::new()));
            groups.len() - 1
        });
        groups[slot].1.push(row);
    }
    groups
}
