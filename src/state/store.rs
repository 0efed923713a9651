//! The RocksDB store: state tables by id, metadata, and the atomic epoch commit.
//!
//! Key layout in the default column family:
//!
//! | key | value |
//! |---|---|
//! | `m` + name | metadata: `catalog` (the serialized catalog), `epoch` (u64 BE), `seq/<id>` |
//! | `d` + state table id (u32 BE) + key | a state table entry |
//!
//! Every change of an epoch (all operators' state writes, table rows, catalog, epoch number)
//! goes into one [`EpochWrites`] and is written by [`Store::commit`] as one atomic,
//! synced RocksDB write batch: that write is the exactly-once point (DESIGN.md).

use std::path::Path;

use std::sync::Arc;

use rocksdb::{DBIterator, Direction, IteratorMode, Options, ReadOptions, WriteBatch, WriteOptions, DB};

use crate::error::{Result, WeirError};

const META: u8 = b'm';
const DATA: u8 = b'd';

/// The RocksDB database of one Weir server.
pub struct Store {
    db: DB,
}

/// The writes of one epoch, committed atomically by [`Store::commit`].
#[derive(Default)]
pub struct EpochWrites {
    batch: WriteBatch,
}

fn data_prefix(table: u32) -> [u8; 5] {
    let mut p = [DATA, 0, 0, 0, 0];
    p[1..].copy_from_slice(&table.to_be_bytes());
    p
}

fn data_key(table: u32, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(5 + key.len());
    k.extend_from_slice(&data_prefix(table));
    k.extend_from_slice(key);
    k
}

fn meta_key(name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + name.len());
    k.push(META);
    k.extend_from_slice(name.as_bytes());
    k
}

impl EpochWrites {
    /// Puts `key` = `value` in state table `table`.
    pub fn put(&mut self, table: u32, key: &[u8], value: &[u8]) {
        self.batch.put(data_key(table, key), value);
    }

    /// Deletes `key` from state table `table`.
    pub fn delete(&mut self, table: u32, key: &[u8]) {
        self.batch.delete(data_key(table, key));
    }

    /// Deletes every entry of state table `table` whose key is below `bound` (one RocksDB range
    /// tombstone, however many entries it covers).
    pub fn delete_below(&mut self, table: u32, bound: &[u8]) {
        self.batch.delete_range(data_prefix(table).to_vec(), data_key(table, bound));
    }

    /// Deletes every entry of state table `table` (DROP).
    pub fn delete_table(&mut self, table: u32) {
        self.batch.delete_range(data_prefix(table), data_prefix(table + 1));
    }

    /// Puts a metadata entry.
    pub fn put_meta(&mut self, name: &str, value: &[u8]) {
        self.batch.put(meta_key(name), value);
    }

    /// Deletes a metadata entry.
    pub fn delete_meta(&mut self, name: &str) {
        self.batch.delete(meta_key(name));
    }

    /// The number of writes so far.
    pub fn len(&self) -> usize {
        self.batch.len()
    }

    /// Whether there are no writes.
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }
}

impl Store {
    /// Opens or creates the store under `dir`.
    ///
    /// # Errors
    /// `Storage` when RocksDB cannot open the directory (permissions, another process holds
    /// its lock).
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        opts.increase_parallelism(2);
        let db = DB::open(&opts, dir.join("state")).map_err(|e| {
            WeirError::storage(format!("cannot open state in {}: {e}", dir.display()))
        })?;
        Ok(Self { db })
    }

    /// A metadata entry.
    pub fn get_meta(&self, name: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(meta_key(name))?)
    }

    /// One entry of a state table, as last committed.
    pub fn get(&self, table: u32, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(data_key(table, key))?)
    }

    /// Several entries of a state table at once, in the order of `keys`.
    pub fn multi_get(&self, table: u32, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        self.db
            .multi_get(keys.iter().map(|k| data_key(table, k)))
            .into_iter()
            .map(|r| r.map_err(WeirError::from))
            .collect()
    }

    /// Calls `f(key, value)` for every entry of a state table in key order, as last committed.
    /// Stops early when `f` returns `Ok(false)`.
    pub fn scan(
        &self,
        table: u32,
        f: impl FnMut(&[u8], &[u8]) -> Result<bool>,
    ) -> Result<()> {
        let prefix = data_prefix(table);
        scan_entries(self.db.iterator_opt(IteratorMode::From(&prefix, Direction::Forward), table_read_options(table)), f)
    }

    /// Writes an epoch's changes and its number atomically, synced to disk.
    pub fn commit(&self, mut writes: EpochWrites, epoch: u64) -> Result<()> {
        writes.put_meta("epoch", &epoch.to_be_bytes());
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.write_opt(writes.batch, &wo)?;
        Ok(())
    }

    /// The last committed epoch (0 for a new store).
    pub fn committed_epoch(&self) -> Result<u64> {
        Ok(match self.get_meta("epoch")? {
            Some(b) => u64::from_be_bytes(
                b.as_slice()
                    .try_into()
                    .map_err(|_| WeirError::storage("epoch number is not 8 bytes"))?,
            ),
            None => 0,
        })
    }
}

/// Read options that end an iteration at the end of state table `table`.
fn table_read_options(table: u32) -> ReadOptions {
    let mut ro = ReadOptions::default();
    ro.set_iterate_upper_bound(data_prefix(table + 1).to_vec());
    ro
}

/// Calls `f(key within its table, value)` for each entry of `iter` until it returns false.
fn scan_entries(iter: DBIterator<'_>, mut f: impl FnMut(&[u8], &[u8]) -> Result<bool>) -> Result<()> {
    for item in iter {
        let (k, v) = item?;
        if !f(&k[5..], &v)? {
            break;
        }
    }
    Ok(())
}

/// A consistent read view of the store as of one commit: a RocksDB snapshot, so later commits
/// do not change what it reads, and holding it blocks no writer (RocksDB keeps the versions it
/// needs until the snapshot is dropped). Readers of the last committed epoch (`SELECT`) scan
/// through one without any lock (DESIGN.md, "State and progress").
#[ouroboros::self_referencing]
pub struct StoreSnapshot {
    store: Arc<Store>,
    #[borrows(store)]
    #[covariant]
    snapshot: rocksdb::Snapshot<'this>,
}

impl StoreSnapshot {
    /// A snapshot of everything `store` has committed so far.
    pub fn of(store: &Arc<Store>) -> Self {
        StoreSnapshotBuilder { store: Arc::clone(store), snapshot_builder: |store: &Arc<Store>| store.db.snapshot() }
            .build()
    }
}

/// Reads the entries of a state table in key order: the latest commit ([`Store`]) or one
/// commit held still ([`StoreSnapshot`]).
pub trait ScanState: Send + Sync {
    /// Calls `f(key, value)` for every entry of state table `table` in key order; stops early
    /// when `f` returns `Ok(false)`.
    ///
    /// # Errors
    /// `Storage` when RocksDB fails to read; `f`'s errors.
    fn scan_table(&self, table: u32, f: &mut dyn FnMut(&[u8], &[u8]) -> Result<bool>) -> Result<()>;
}

impl ScanState for Store {
    fn scan_table(&self, table: u32, f: &mut dyn FnMut(&[u8], &[u8]) -> Result<bool>) -> Result<()> {
        self.scan(table, f)
    }
}

impl ScanState for StoreSnapshot {
    fn scan_table(&self, table: u32, f: &mut dyn FnMut(&[u8], &[u8]) -> Result<bool>) -> Result<()> {
        let prefix = data_prefix(table);
        let iter = self
            .borrow_snapshot()
            .iterator_opt(IteratorMode::From(&prefix, Direction::Forward), table_read_options(table));
        scan_entries(iter, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(state: &dyn ScanState, table: u32) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        state.scan_table(table, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            Ok(true)
        })?;
        Ok(out)
    }

    /// A snapshot keeps reading the commit it was taken after, whatever is committed later;
    /// the store reads the latest.
    #[test]
    fn a_snapshot_reads_the_commit_it_was_taken_at() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let store = Arc::new(Store::open(dir.path())?);
        let mut writes = EpochWrites::default();
        writes.put(1, b"a", b"1");
        writes.put(2, b"x", b"9");
        store.commit(writes, 1)?;
        let snapshot = StoreSnapshot::of(&store);
        let mut writes = EpochWrites::default();
        writes.delete(1, b"a");
        writes.put(1, b"b", b"2");
        writes.delete_table(2);
        store.commit(writes, 2)?;
        assert_eq!(entries(&snapshot, 1)?, [(b"a".to_vec(), b"1".to_vec())]);
        assert_eq!(entries(&snapshot, 2)?, [(b"x".to_vec(), b"9".to_vec())]);
        assert_eq!(entries(&*store, 1)?, [(b"b".to_vec(), b"2".to_vec())]);
        assert_eq!(entries(&*store, 2)?, []);
        Ok(())
    }
}
