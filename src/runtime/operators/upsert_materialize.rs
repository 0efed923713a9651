//! SinkUpsertMaterializer: the rows of an updating query, keyed by an `upsert-kafka` sink's
//! PRIMARY KEY when that key does not hold the query's stream key.
//!
//! Changelog mode: retract in (any stream key, or none known) → upsert out, keyed by the sink's
//! PRIMARY KEY: `+I`/`+U` the row the message key now holds, `-D` when no row holds it.
//!
//! Without it, two live rows of the query with one message key were one Kafka key: deleting
//! either wrote a tombstone while the other still held the key (a row lost from the topic).
//! Flink adds this operator in front of such a sink (`table.exec.sink.upsert-materialize` =
//! `AUTO`); its rules (`SinkUpsertMaterializer.processElement`), row by row in input order, the
//! state of a key being the list of its live rows in arrival order, rows equal when all their
//! columns are:
//! - `+I` / `+U` of a row: an equal row in the list is replaced by it, else it is appended; the
//!   row is emitted, `+I` when the list holds only it, `+U` otherwise;
//! - `-U` / `-D` of a row: the first equal row is removed from the list. If the list is now
//!   empty, `-D` of the row; if the removed row was the last of the list, `+U` of the new last
//!   row (the key's newest live row); otherwise nothing, the key keeps the row it has. A
//!   retraction of a row not in the list (its state expired) emits nothing.
//!
//! State, one table `rows`: key = the PRIMARY KEY columns, value = the list, each row as its
//! length (u32, little-endian) and its [`RowCodec`] bytes. With a state TTL
//! (`table.exec.state.ttl`) a key's list expires after that long without a change.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;

use crate::error::{Result, WeirError};
use crate::runtime::changelog::{Op, StreamChunk};
use crate::runtime::operator::{OpContext, Operator};
use super::Origin;
use crate::state::{EpochWrites, RowCodec, StateTable, Store, TableRef};

/// The stable name of the rows-per-key table.
pub const ROWS: &str = "rows";

/// See the module docs.
pub struct SinkUpsertMaterializer {
    key: Vec<usize>,
    key_codec: RowCodec,
    row_codec: RowCodec,
    rows: StateTable,
}

impl SinkUpsertMaterializer {
    /// The materializer of rows of `schema` keyed by columns `key` (the sink's PRIMARY KEY, as
    /// positions in `schema`), its state in the table `state_table(ROWS)` names, read from
    /// `store`, a key's list living `ttl_ms` after its last change (`None`: forever).
    ///
    /// # Errors
    /// `Unsupported` for column types the state codec cannot store.
    pub fn try_new(
        schema: SchemaRef,
        key: Vec<usize>,
        ttl_ms: Option<i64>,
        state_table: &mut dyn FnMut(&str) -> TableRef,
        store: &Store,
    ) -> Result<Self> {
        let types: Vec<_> = schema.fields().iter().map(|f| f.data_type().clone()).collect();
        let key_codec = RowCodec::try_new(key.iter().map(|k| types[*k].clone()).collect())?;
        let row_codec = RowCodec::try_new(types)?;
        let rows = StateTable::point(state_table(ROWS), store).with_ttl(ttl_ms);
        Ok(Self { key, key_codec, row_codec, rows })
    }
}

/// The rows of one stored list.
fn decode_list(mut bytes: &[u8]) -> Result<Vec<Vec<u8>>> {
    let mut rows = Vec::new();
    while !bytes.is_empty() {
        let corrupt = || WeirError::storage("a SinkUpsertMaterializer list is cut short");
        let len = u32::from_le_bytes(bytes.get(..4).ok_or_else(corrupt)?.try_into().map_err(|_| corrupt())?) as usize;
        rows.push(bytes.get(4..4 + len).ok_or_else(corrupt)?.to_vec());
        bytes = &bytes[4 + len..];
    }
    Ok(rows)
}

fn encode_list(rows: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(rows.iter().map(|r| r.len() + 4).sum());
    for row in rows {
        out.extend_from_slice(&(row.len() as u32).to_le_bytes());
        out.extend_from_slice(row);
    }
    out
}

impl Operator for SinkUpsertMaterializer {
    fn name(&self) -> &'static str {
        "SinkUpsertMaterializer"
    }

    fn state_tables(&self) -> &'static [&'static str] {
        &[ROWS]
    }

    fn state(&self) -> Vec<(String, &StateTable)> {
        vec![(ROWS.to_string(), &self.rows)]
    }

    fn key_groups(&self, _input: usize, chunk: &StreamChunk) -> Result<Vec<u16>> {
        super::key_groups_by_columns(&self.key, &self.key_codec, chunk)
    }

    fn process_batch(&mut self, _input: usize, chunk: StreamChunk, ctx: &OpContext<'_>) -> Result<Option<StreamChunk>> {
        let key_columns: Vec<_> = self.key.iter().map(|k| Arc::clone(chunk.batch.column(*k))).collect();
        let keys = self.key_codec.encode_rows(&key_columns, chunk.len())?;
        let rows = self.row_codec.encode_rows(chunk.batch.columns(), chunk.len())?;
        let mut out: Vec<(Op, Origin)> = Vec::new();
        let mut stored: Vec<Vec<u8>> = Vec::new();
        for (i, ((op, key), row)) in chunk.ops.iter().zip(keys).zip(rows).enumerate() {
            let mut list = match self.rows.get(ctx.store, &key)? {
                Some(bytes) => decode_list(&bytes)?,
                None => Vec::new(),
            };
            let found = list.iter().position(|r| *r == row);
            if op.is_insert() {
                match found {
                    Some(j) => list[j] = row,
                    None => list.push(row),
                }
                out.push((if list.len() == 1 { Op::Insert } else { Op::UpdateAfter }, Origin::Input(i as u32)));
                self.rows.put(key, encode_list(&list));
                continue;
            }
            let Some(j) = found else { continue };
            list.remove(j);
            if list.is_empty() {
                out.push((Op::Delete, Origin::Input(i as u32)));
                self.rows.delete(key);
                continue;
            }
            if j == list.len() {
                out.push((Op::UpdateAfter, Origin::Stored(stored.len())));
                stored.push(list[j - 1].clone());
            }
            self.rows.put(key, encode_list(&list));
        }
        super::emit_rows(out, &stored, &self.row_codec, &chunk)
    }

    fn on_barrier(&mut self, writes: &mut EpochWrites, ctx: &OpContext<'_>) -> Result<()> {
        self.rows.sweep_expired(ctx.store)?;
        self.rows.flush(writes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    /// Rows `city name n`, keyed by city (an upsert-kafka table keyed by city fed by
    /// `GROUP BY city, name`).
    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("city", DataType::Utf8, false),
            Field::new("name", DataType::Utf8, false),
            Field::new("n", DataType::Int64, false),
        ]))
    }

    /// A chunk from lines `op city name n`.
    fn chunk(text: &str) -> StreamChunk {
        let mut ops = Vec::new();
        let (mut city, mut name, mut n) = (Vec::new(), Vec::new(), Vec::new());
        for line in text.lines() {
            let parts: Vec<&str> = line.split_whitespace().collect();
            ops.push(match parts[0] {
                "+I" => Op::Insert,
                "-U" => Op::UpdateBefore,
                "+U" => Op::UpdateAfter,
                _ => Op::Delete,
            });
            city.push(parts[1].to_string());
            name.push(parts[2].to_string());
            n.push(parts[3].parse::<i64>().expect("a number"));
        }
        let batch = RecordBatch::try_new(
            schema(),
            vec![Arc::new(StringArray::from(city)), Arc::new(StringArray::from(name)), Arc::new(Int64Array::from(n))],
        )
        .expect("valid batch");
        StreamChunk::new(ops, batch)
    }

    fn lines(out: Option<StreamChunk>) -> Vec<String> {
        let Some(c) = out else { return vec![] };
        let text = |i: usize, row: usize| arrow::util::display::array_value_to_string(c.batch.column(i), row).expect("text");
        (0..c.len()).map(|r| format!("{} {} {} {}", c.ops[r], text(0, r), text(1, r), text(2, r))).collect()
    }

    struct Harness {
        op: SinkUpsertMaterializer,
        store: Store,
        _dir: tempfile::TempDir,
    }

    impl Harness {
        fn open(dir: tempfile::TempDir, store: Store) -> Self {
            let mut table = |_: &str| TableRef::from(7);
            let op = SinkUpsertMaterializer::try_new(schema(), vec![0], None, &mut table, &store).expect("operator");
            Harness { op, store, _dir: dir }
        }

        fn push(&mut self, text: &str) -> Vec<String> {
            lines(self.op.process_batch(0, chunk(text), &OpContext { store: &self.store }).expect("process"))
        }
    }

    /// The rows a key holds in the topic follow Flink's rules (module docs), worked by hand:
    /// the list of oslo's live rows is in the comments.
    #[test]
    fn keeps_the_key_while_a_row_holds_it() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let store = Store::open(dir.path())?;
        let mut h = Harness::open(dir, store);
        // [ann 1]
        assert_eq!(h.push("+I oslo ann 1"), ["+I oslo ann 1"]);
        // [ann 1, bob 1]
        assert_eq!(h.push("+I oslo bob 1"), ["+U oslo bob 1"]);
        // ann 1 was not the last: [bob 1]; then [bob 1, ann 2].
        assert_eq!(h.push("-U oslo ann 1\n+U oslo ann 2"), ["+U oslo ann 2"]);
        // bob leaves; ann 2 still holds oslo, so no tombstone: [ann 2].
        assert_eq!(h.push("-D oslo bob 1"), Vec::<String>::new());
        // Another key is its own list.
        assert_eq!(h.push("+I rome eve 3"), ["+I rome eve 3"]);
        let mut writes = EpochWrites::default();
        h.op.on_barrier(&mut writes, &OpContext { store: &h.store })?;
        h.store.commit(writes, 1)?;
        let Harness { store, _dir, .. } = h;
        let mut h = Harness::open(_dir, store);
        // After a restart: [ann 2, cat 1], then dropping the last shows the row before it.
        assert_eq!(h.push("+I oslo cat 1"), ["+U oslo cat 1"]);
        assert_eq!(h.push("-D oslo cat 1"), ["+U oslo ann 2"]);
        // A retraction of a row the key does not hold changes nothing.
        assert_eq!(h.push("-D oslo zed 9"), Vec::<String>::new());
        // The last row leaves: a delete, so the topic gets oslo's tombstone.
        assert_eq!(h.push("-D oslo ann 2"), ["-D oslo ann 2"]);
        assert_eq!(h.push("-D rome eve 3"), ["-D rome eve 3"]);
        Ok(())
    }

    #[test]
    fn lists_round_trip() -> Result<()> {
        let rows = vec![b"abc".to_vec(), vec![], vec![0xFF; 300]];
        assert_eq!(decode_list(&encode_list(&rows))?, rows);
        assert!(decode_list(&[3, 0, 0, 0, 1]).is_err());
        Ok(())
    }
}
