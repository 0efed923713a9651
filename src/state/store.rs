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
    /// The memory budget the state tables of every job opened over this store share.
    cache: Arc<CacheBudget>,
}

/// How a [`Store`] is opened.
#[derive(Debug, Clone, Copy)]
pub struct StoreOptions {
    /// Bytes of the state cache shared by all state tables (`weir serve --state-cache-size`).
    pub state_cache_bytes: u64,
}

/// The default state cache: 256 MiB. With RocksDB's memtables and block cache beside it, every
/// Nexmark query measured peaked at 0.5-0.9 GB of RSS, also over 50 M events (issue 14's target
/// is 1 GB; bench/README.md).
pub const DEFAULT_STATE_CACHE_BYTES: u64 = 256 << 20;

/// RocksDB's block cache (data blocks), bytes; the OS page cache holds the files besides.
const BLOCK_CACHE_BYTES: usize = 32 << 20;

/// RocksDB's memtable size, bytes (at most two per column family: one filling, one flushing).
const WRITE_BUFFER_BYTES: usize = 32 << 20;

impl Default for StoreOptions {
    fn default() -> Self {
        Self { state_cache_bytes: DEFAULT_STATE_CACHE_BYTES }
    }
}

/// The memory budget of the state cache, shared by every [`StateTable`](super::StateTable)
/// opened over one store; each table evicts its own least recently used entries when the
/// total is over the budget and its share is above its fair share (the budget divided by the
/// number of open tables).
#[derive(Debug)]
pub struct CacheBudget {
    /// The budget, bytes.
    capacity: u64,
    /// Bytes cached by all tables now (estimated: keys, values and per-entry overhead).
    used: std::sync::atomic::AtomicU64,
    /// Open tables with a cache.
    tables: std::sync::atomic::AtomicU64,
}

impl CacheBudget {
    /// A budget of `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        Self { capacity, used: 0.into(), tables: 0.into() }
    }

    /// The budget, bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes cached by all tables now.
    pub fn used(&self) -> u64 {
        self.used.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether a table holding `own` bytes must evict: the total is over the budget and the
    /// table holds more than its fair share.
    pub(super) fn must_evict(&self, own: u64) -> bool {
        let tables = self.tables.load(std::sync::atomic::Ordering::Relaxed).max(1);
        self.used() > self.capacity && own > self.capacity / tables
    }

    pub(super) fn add(&self, bytes: u64) {
        self.used.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    pub(super) fn sub(&self, bytes: u64) {
        self.used.fetch_sub(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    pub(super) fn open_table(&self) {
        self.tables.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub(super) fn close_table(&self) {
        self.tables.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The writes of one epoch, committed atomically by [`Store::commit`].
#[derive(Default)]
pub struct EpochWrites {
    batch: WriteBatch,
    /// The last key written, reused for the next (RocksDB copies it into the batch).
    key: Vec<u8>,
    /// Set for writes committed behind the job ([`EpochWrites::committed_behind`]).
    behind: Option<Landed>,
    /// State tables' writes handed over whole ([`EpochWrites::defer`]), by table, in the order
    /// they came; added to the batch by [`Store::commit`].
    deferred: Vec<(u32, Arc<dyn DeferredWrites>)>,
}

/// One state table's writes of an epoch, handed to [`EpochWrites::defer`] whole instead of
/// put one by one: the batch copies them when the epoch is written ([`Store::commit`], on the
/// thread that commits; for a job committing behind, not the job's), not when the table
/// flushes. (Copying them at the barrier took two thirds of the join's stage thread in Nexmark
/// q7 at parallelism 2, 0.9 of its 1.4 CPU s at 3 M events, while the join's instances waited.)
pub trait DeferredWrites: Send + Sync {
    /// Calls `f(key, value)` for each write in key order, `None` for a delete.
    fn each(&self, f: &mut dyn FnMut(&[u8], Option<&[u8]>));
    /// The least key written, if any.
    fn first_key(&self) -> Option<&[u8]>;
    /// Whether `key` is written.
    fn writes(&self, key: &[u8]) -> bool;
    /// The number of writes.
    fn len(&self) -> usize;
}

/// Set once an epoch's writes are in RocksDB ([`Store::commit`]). A state table whose writes
/// went to an epoch committed behind its job ([`EpochWrites::committed_behind`]) reads them
/// from memory until then.
#[derive(Clone, Default)]
pub struct Landed(Arc<std::sync::atomic::AtomicBool>);

impl Landed {
    /// Whether the epoch's writes are in RocksDB.
    pub fn is_set(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }

    fn set(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Release);
    }
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

/// The first RocksDB key of state table `table`'s entries starting with `prefix`, and read
/// options bounded above by the end of that range.
fn prefix_bounds(table: u32, prefix: &[u8]) -> (Vec<u8>, ReadOptions) {
    let start = data_key(table, prefix);
    let mut ro = ReadOptions::default();
    match prefix_successor(&start) {
        Some(end) => ro.set_iterate_upper_bound(end),
        None => ro.set_iterate_upper_bound(data_prefix(table + 1).to_vec()),
    }
    (start, ro)
}

fn meta_key(name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + name.len());
    k.push(META);
    k.extend_from_slice(name.as_bytes());
    k
}

impl EpochWrites {
    /// Writes with room for about `bytes` of keys and values, so that a bulk write does not
    /// grow (and copy) the batch as it goes.
    pub fn with_capacity(bytes: usize) -> Self {
        Self { batch: WriteBatch::with_capacity_bytes(bytes), ..Self::default() }
    }

    /// Writes of an epoch that is committed *behind* its job: on another thread, while the job
    /// goes on with the next epoch's rows. A state table flushed into them
    /// ([`crate::state::StateTable::flush`]) keeps its writes readable in memory until
    /// [`EpochWrites::landed`] is set, instead of dropping them at once.
    pub fn committed_behind() -> Self {
        Self { behind: Some(Landed::default()), ..Self::default() }
    }

    /// For writes committed behind the job, what [`Store::commit`] sets once they are in
    /// RocksDB.
    pub fn landed(&self) -> Option<&Landed> {
        self.behind.as_ref()
    }

    /// Adds state table `table`'s writes `writes` whole; the batch copies them when the epoch
    /// is written. A later write to the same table that one of them would shadow or that
    /// covers one of them (the same key, a range delete over one) adds them to the batch first,
    /// so the writes keep their order.
    pub fn defer(&mut self, table: u32, writes: Arc<dyn DeferredWrites>) {
        if writes.len() > 0 {
            self.deferred.push((table, writes));
        }
    }

    /// Adds the deferred writes of `table` to the batch now when `conflicts` holds for one of
    /// them.
    fn write_deferred_of(&mut self, table: u32, conflicts: impl Fn(&dyn DeferredWrites) -> bool) {
        if self.deferred.iter().any(|(t, d)| *t == table && conflicts(d.as_ref())) {
            let all = std::mem::take(&mut self.deferred);
            let (now, later): (Vec<_>, Vec<_>) = all.into_iter().partition(|(t, _)| *t == table);
            self.deferred = later;
            self.write_deferred(now);
        }
    }

    /// Adds `deferred` to the batch, in order.
    fn write_deferred(&mut self, deferred: Vec<(u32, Arc<dyn DeferredWrites>)>) {
        for (table, writes) in deferred {
            writes.each(&mut |key, value| match value {
                Some(v) => self.put_now(table, key, v),
                None => self.batch.delete(data_key(table, key)),
            });
        }
    }

    /// Puts `key` = `value` in state table `table`.
    pub fn put(&mut self, table: u32, key: &[u8], value: &[u8]) {
        if !self.deferred.is_empty() {
            self.write_deferred_of(table, |d| d.writes(key));
        }
        self.put_now(table, key, value);
    }

    fn put_now(&mut self, table: u32, key: &[u8], value: &[u8]) {
        self.key.clear();
        self.key.extend_from_slice(&data_prefix(table));
        self.key.extend_from_slice(key);
        self.batch.put(&self.key, value);
    }

    /// Deletes `key` from state table `table`.
    pub fn delete(&mut self, table: u32, key: &[u8]) {
        if !self.deferred.is_empty() {
            self.write_deferred_of(table, |d| d.writes(key));
        }
        self.batch.delete(data_key(table, key));
    }

    /// Deletes every entry of state table `table` whose key is below `bound` (one RocksDB range
    /// tombstone, however many entries it covers).
    pub fn delete_below(&mut self, table: u32, bound: &[u8]) {
        if !self.deferred.is_empty() {
            self.write_deferred_of(table, |d| d.first_key().is_some_and(|k| k < bound));
        }
        self.batch.delete_range(data_prefix(table).to_vec(), data_key(table, bound));
    }

    /// Deletes every entry of state table `table` (DROP).
    pub fn delete_table(&mut self, table: u32) {
        if !self.deferred.is_empty() {
            self.write_deferred_of(table, |_| true);
        }
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
        self.batch.len() + self.deferred.iter().map(|(_, d)| d.len()).sum::<usize>()
    }

    /// Whether there are no writes.
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty() && self.deferred.is_empty()
    }
}

impl Store {
    /// Opens or creates the store under `dir`.
    ///
    /// # Errors
    /// `Storage` when RocksDB cannot open the directory (permissions, another process holds
    /// its lock).
    pub fn open(dir: &Path) -> Result<Self> {
        Self::open_with(dir, StoreOptions::default())
    }

    /// [`Store::open`] with `options`.
    ///
    /// RocksDB is set up for state reads that miss the state cache, as Flink's RocksDB backend
    /// and RisingWave do: a bounded block cache for data blocks, and bloom filters (10 bits,
    /// about 1.25 bytes, per key) so a point read of an absent key seldom touches a file. Index
    /// and filter blocks stay outside the block cache, held by the open files (a whole-file
    /// filter evicted from the cache would be read back, megabytes, on every lookup).
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open_with(dir: &Path, options: StoreOptions) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut opts = Options::default();
        opts.create_if_missing(true);
        // The first two levels, rewritten most often by compaction, stay uncompressed (RocksDB's
        // tuning guide); the rest, most of the data, is LZ4.
        let lz4 = rocksdb::DBCompressionType::Lz4;
        let none = rocksdb::DBCompressionType::None;
        opts.set_compression_per_level(&[none, none, lz4, lz4, lz4, lz4, lz4]);
        opts.increase_parallelism(2);
        opts.set_write_buffer_size(WRITE_BUFFER_BYTES);
        let mut table = rocksdb::BlockBasedOptions::default();
        table.set_block_cache(&rocksdb::Cache::new_lru_cache(BLOCK_CACHE_BYTES));
        table.set_bloom_filter(10.0, false);
        opts.set_block_based_table_factory(&table);
        let db = DB::open(&opts, dir.join("state")).map_err(|e| {
            WeirError::storage(format!("cannot open state in {}: {e}", dir.display()))
        })?;
        Ok(Self { db, cache: Arc::new(CacheBudget::new(options.state_cache_bytes)) })
    }

    /// The state cache budget the state tables over this store share.
    pub fn cache_budget(&self) -> &Arc<CacheBudget> {
        &self.cache
    }

    /// The approximate bytes state table `table` takes in RocksDB's files (compressed; what is
    /// still only in the memtable is not counted).
    pub fn approximate_bytes(&self, table: u32) -> u64 {
        let (start, end) = (data_prefix(table), data_prefix(table + 1));
        self.db.get_approximate_sizes(&[rocksdb::Range::new(&start, &end)]).first().copied().unwrap_or(0)
    }

    /// Whether state table `table` holds no entry, as last committed (a table a new job just
    /// allocated).
    ///
    /// # Errors
    /// `Storage` when RocksDB fails to read.
    pub fn is_empty_table(&self, table: u32) -> Result<bool> {
        let mut empty = true;
        self.scan_prefix(table, &[], |_, _| {
            empty = false;
            Ok(false)
        })?;
        Ok(empty)
    }

    /// Calls `f(key, value)` for every entry of state table `table` whose key starts with
    /// `prefix`, in key order, as last committed; stops early when `f` returns `Ok(false)`.
    pub fn scan_prefix(
        &self,
        table: u32,
        prefix: &[u8],
        f: impl FnMut(&[u8], &[u8]) -> Result<bool>,
    ) -> Result<()> {
        let (start, ro) = prefix_bounds(table, prefix);
        scan_entries(self.db.iterator_opt(IteratorMode::From(&start, Direction::Forward), ro), f)
    }

    /// [`Store::scan_prefix`] from the last entry back to the first.
    pub fn scan_prefix_rev(
        &self,
        table: u32,
        prefix: &[u8],
        f: impl FnMut(&[u8], &[u8]) -> Result<bool>,
    ) -> Result<()> {
        let (start, mut ro) = prefix_bounds(table, prefix);
        ro.set_iterate_lower_bound(start);
        // The last key below the upper bound (RocksDB's SeekToLast honours it).
        scan_entries(self.db.iterator_opt(IteratorMode::End, ro), f)
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
        let deferred = std::mem::take(&mut writes.deferred);
        writes.write_deferred(deferred);
        writes.put_meta("epoch", &epoch.to_be_bytes());
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.write_opt(writes.batch, &wo)?;
        if let Some(landed) = &writes.behind {
            landed.set();
        }
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

/// The smallest byte string greater than every string starting with `prefix`, if any.
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
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

    /// The entries of `keys` in state table `table`, in the order of `keys`.
    ///
    /// # Errors
    /// `Storage` when RocksDB fails to read.
    fn get_many(&self, table: u32, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>>;
}

impl ScanState for Store {
    fn scan_table(&self, table: u32, f: &mut dyn FnMut(&[u8], &[u8]) -> Result<bool>) -> Result<()> {
        self.scan(table, f)
    }

    fn get_many(&self, table: u32, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        self.multi_get(table, keys)
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

    fn get_many(&self, table: u32, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        let snapshot = self.borrow_snapshot();
        keys.iter().map(|k| Ok(snapshot.get(data_key(table, k))?)).collect()
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

    /// Deferred writes of a test: key -> value (`None`: delete).
    impl DeferredWrites for std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>> {
        fn each(&self, f: &mut dyn FnMut(&[u8], Option<&[u8]>)) {
            for (k, v) in self {
                f(k, v.as_deref());
            }
        }
        fn first_key(&self) -> Option<&[u8]> {
            self.keys().next().map(Vec::as_slice)
        }
        fn writes(&self, key: &[u8]) -> bool {
            self.contains_key(key)
        }
        fn len(&self) -> usize {
            std::collections::BTreeMap::len(self)
        }
    }

    fn deferred(writes: &[(&str, Option<&str>)]) -> Arc<dyn DeferredWrites> {
        let map: std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>> =
            writes.iter().map(|(k, v)| (k.as_bytes().to_vec(), v.map(|v| v.as_bytes().to_vec()))).collect();
        Arc::new(map)
    }

    /// Deferred writes land as if they had been written when they were deferred: a later
    /// write of the same table to one of their keys, or a range delete or table delete over
    /// them, comes after them; what does not touch them leaves them deferred until the commit.
    #[test]
    fn deferred_writes_keep_their_order_with_later_writes() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let store = Store::open(dir.path())?;
        let mut seed = EpochWrites::default();
        seed.put(1, b"z", b"old");
        seed.put(4, b"k", b"old");
        store.commit(seed, 1)?;

        let mut writes = EpochWrites::default();
        writes.defer(1, deferred(&[("a", Some("1")), ("b", Some("2")), ("z", None)]));
        writes.defer(2, deferred(&[("c", Some("3")), ("d", Some("4"))]));
        writes.defer(3, deferred(&[("m", Some("5"))]));
        writes.defer(4, deferred(&[("k", Some("new"))]));
        assert_eq!(writes.len(), 7);
        // Table 1: a later put of a deferred key wins; a put of another table stays apart.
        writes.put(1, b"a", b"later");
        writes.put(5, b"a", b"other table");
        // Table 2: a range delete over a deferred key deletes it, the rest stays.
        writes.delete_below(2, b"d");
        // Table 3: a range delete below every deferred key leaves them.
        writes.delete_below(3, b"m");
        assert_eq!(writes.deferred.len(), 2, "tables 3 and 4 are still deferred");
        // Table 4: the table deleted after its deferred write.
        writes.delete_table(4);
        store.commit(writes, 2)?;

        let pairs = |items: &[(&str, &str)]| -> Vec<(Vec<u8>, Vec<u8>)> {
            items.iter().map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec())).collect()
        };
        assert_eq!(entries(&store, 1)?, pairs(&[("a", "later"), ("b", "2")]));
        assert_eq!(entries(&store, 2)?, pairs(&[("d", "4")]));
        assert_eq!(entries(&store, 3)?, pairs(&[("m", "5")]));
        assert_eq!(entries(&store, 4)?, []);
        assert_eq!(entries(&store, 5)?, pairs(&[("a", "other table")]));
        Ok(())
    }
}
