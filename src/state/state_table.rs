//! A state table: one operator's (or relation's) keyed state, read through a bounded cache over
//! RocksDB, written once per epoch.
//!
//! Reads see this epoch's writes first (the overlay), then the cache, then the last committed
//! RocksDB state. Writes go to the overlay and update what the cache holds. On a barrier,
//! [`StateTable::flush`] hands the overlay to the epoch's [`EpochWrites`]; nothing is written to
//! RocksDB directly, so the cache only ever holds what overlay and store together say, and
//! dropping any cached entry at any moment loses nothing.
//!
//! # The cache
//! Every table opened with [`StateTable::point`] or [`StateTable::grouped`] caches what it reads,
//! in least-recently-used order, within the [`CacheBudget`] the tables over one store share
//! (`weir serve --state-cache-size`): when the total is over the budget, a table that holds more
//! than its fair share (the budget over the number of open tables) evicts its own least recently
//! used entries. Nothing is loaded when a table opens, so a restart reads state lazily.
//!
//! - A **point** table caches single keys, present or absent (a group aggregate's groups).
//! - A **grouped** table caches whole groups: all entries whose keys share a group prefix (a
//!   join key, a Top-N partition, a MIN/MAX group), loaded by one RocksDB prefix scan, so
//!   ordered range reads within a group ([`StateTable::prefix_iter`]: MIN/MAX, Top-N, join
//!   matches) are served from memory, as RisingWave's join and Top-N caches do. The operator
//!   says where a key's group prefix ends (its key codec's [`RowCodec::encoded_len`]).
//! - A table opened with [`StateTable::new`] has no cache: reads go to the overlay and RocksDB
//!   (metadata, a view's own rows, window slices).
//!
//! Whole-table reads ([`StateTable::scan`]) stream from RocksDB merged with the overlay and
//! cache nothing.
//!
//! # Epochs committed behind the job
//! When the barrier's writes go to an epoch committed on another thread while the job goes on
//! ([`EpochWrites::committed_behind`]), the flushed overlay is kept as a *committing* layer
//! until RocksDB has it ([`Landed`]): reads see this epoch's writes, then the committing
//! layers (newest first), then RocksDB, so a key evicted from the cache (or a table without
//! one) never reads a value older than its last write.
//!
//! A cache is **complete** while it holds every key (or group) the table has: from the moment a
//! table opens empty in RocksDB (a new job) until its first eviction. A complete cache answers
//! a miss itself (the key or group is absent) without reading RocksDB, so a job whose state
//! fits in its share of the cache never reads RocksDB, as before the cache existed; a table
//! reopened with state in RocksDB starts incomplete (nothing is loaded eagerly).
//!
//! # Parallel instances
//! The instances of a keyed operator share its tables ([`crate::state::key_group`]): each opens
//! them with its [`TableRef`]'s key groups, reads and writes only keys of rows routed to it, and
//! sees only its own keys in whole-table reads ([`StateTable::scan`], TTL sweeps). Metadata an
//! instance keeps for itself (a watermark, a late-row count) goes under
//! [`StateTable::instance_key`] and is summed over when the parallelism changes
//! ([`StateTable::instance_entries`], [`StateTable::adopt`]).
//!
//! # State TTL
//! A table with a time-to-live ([`StateTable::with_ttl`], `table.exec.state.ttl`) stores each
//! value behind an 8-byte header, the processing time of its last write (ms since the Unix
//! epoch, big-endian). Flink's default TTL semantics: the clock restarts on create and write, not
//! on read (`OnCreateAndWrite`), and an expired entry is never returned (`NeverReturnExpired`):
//! reads skip it, and [`StateTable::sweep_expired`] deletes expired entries physically, at most
//! once per sweep interval (a quarter of the TTL, between 100 ms and 1 h).
//!
//! [`RowCodec::encoded_len`]: super::RowCodec::encoded_len

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use lru::LruCache;

use crate::error::Result;
use crate::state::key_group::{KeyGroups, TableRef};
use crate::state::store::{prefix_successor, CacheBudget, DeferredWrites, EpochWrites, Landed, Store};

/// Where the group prefix of a key ends: the number of leading bytes of the key that are its
/// group (at most the key's length).
pub type GroupLen = Box<dyn Fn(&[u8]) -> usize + Send + Sync>;

/// Keyed state of one operator or relation.
pub struct StateTable {
    id: u32,
    /// This epoch's writes.
    overlay: BTreeMap<Vec<u8>, Pending>,
    /// Estimated bytes of this epoch's writes ([`StateTable::pending_bytes`]).
    pending_bytes: u64,
    /// This epoch's range delete: every committed key below it is deleted, before the overlay.
    deleted_below: Option<Vec<u8>>,
    /// What the table has read, if it caches.
    cache: Option<Cache>,
    /// The time-to-live of entries, if any.
    ttl: Option<Ttl>,
    /// The key groups of the operator instance that holds the table: whole-table reads skip
    /// other instances' keys.
    key_groups: KeyGroups,
    /// Where a key's partition key ends, if not where its group ends (a grouped table) or at
    /// its end (a point table); see [`StateTable::with_partition_len`].
    partition_len: Option<GroupLen>,
    /// Epochs flushed into writes committed behind the job and not yet in RocksDB, oldest
    /// first (see the module docs).
    committing: Vec<Committing>,
}

/// A flushed epoch's writes, read until its commit lands.
struct Committing {
    overlay: Arc<BTreeMap<Vec<u8>, Pending>>,
    deleted_below: Option<Vec<u8>>,
    landed: Landed,
}

/// An epoch's writes as the batch takes them at the commit ([`EpochWrites::defer`]).
impl DeferredWrites for BTreeMap<Vec<u8>, Pending> {
    fn each(&self, f: &mut dyn FnMut(&[u8], Option<&[u8]>)) {
        for (k, p) in self {
            f(k, p.value.as_deref());
        }
    }

    fn first_key(&self) -> Option<&[u8]> {
        self.first_key_value().map(|(k, _)| k.as_slice())
    }

    fn writes(&self, key: &[u8]) -> bool {
        self.contains_key(key)
    }

    fn len(&self) -> usize {
        BTreeMap::len(self)
    }
}

/// One layer of writes over RocksDB: an epoch's writes and its range delete.
type Layer<'a> = (&'a BTreeMap<Vec<u8>, Pending>, Option<&'a [u8]>);

/// One key's write in this epoch.
struct Pending {
    /// The value put; `None`: deleted.
    value: Option<Vec<u8>>,
    /// The key had no committed value (the cache knew it absent when this epoch first wrote
    /// it): deleting it again removes the write instead of writing a tombstone (a Top-N row
    /// that enters and is pushed out in one epoch).
    fresh: bool,
}

/// A table's cache: single keys or whole groups, least recently used first.
struct Cache {
    budget: Arc<CacheBudget>,
    /// `None`: single keys; `Some`: whole groups.
    group_len: Option<GroupLen>,
    lru: LruCache<Vec<u8>, Cached>,
    /// Whether the cache holds every key or group of the table (see the module docs): a miss
    /// is then an absent key or an empty group.
    complete: bool,
    /// Entries and estimated bytes held.
    entries: u64,
    bytes: u64,
    hits: u64,
    misses: u64,
}

/// What the cache holds for one key or group.
enum Cached {
    /// A point table's key: its stored value, or absent.
    Value(Option<Vec<u8>>),
    /// A grouped table's group: all its entries (full keys), in key order.
    Group(BTreeMap<Vec<u8>, Vec<u8>>),
}

/// Estimated bytes of one cached entry besides its key and value: the two vectors' headers,
/// their allocations and its share of the map's node.
const ENTRY_OVERHEAD: u64 = 96;

/// Estimated bytes of one cached key or group besides its entries: the LRU node and its hash
/// slot, the cache key, and for a group the map's first node (a B-tree leaf of 11 slots, about
/// 540 bytes, allocated whole even for one entry).
const ITEM_OVERHEAD: u64 = 128;
const GROUP_OVERHEAD: u64 = 640;

/// [`GROUP_OVERHEAD`], or [`ITEM_OVERHEAD`] for an empty group (an empty map allocates nothing;
/// a join caches many: the keys its other side probes in vain).
fn group_overhead(group: &BTreeMap<Vec<u8>, Vec<u8>>) -> u64 {
    if group.is_empty() {
        ITEM_OVERHEAD
    } else {
        GROUP_OVERHEAD
    }
}

fn entry_cost(key: &[u8], value: &[u8]) -> u64 {
    (key.len() + value.len()) as u64 + ENTRY_OVERHEAD
}

/// A state table's cache figures, for `weir_state_tables`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheStats {
    /// Entries cached now (keys of a point table, entries of the cached groups).
    pub entries: u64,
    /// Estimated bytes cached now.
    pub bytes: u64,
    /// Reads served from the cache, and those that went to RocksDB, since the table opened.
    pub hits: u64,
    pub misses: u64,
}

/// The figures of several caches of one table (the instances of a parallel operator), added.
impl std::ops::Add for CacheStats {
    type Output = Self;
    fn add(self, other: Self) -> Self {
        Self {
            entries: self.entries + other.entries,
            bytes: self.bytes + other.bytes,
            hits: self.hits + other.hits,
            misses: self.misses + other.misses,
        }
    }
}

/// A state table's time-to-live.
struct Ttl {
    /// How long an entry lives after its last write, ms.
    ttl_ms: i64,
    /// The processing time of the next physical sweep, ms.
    next_sweep_ms: i64,
}

/// Bytes of the write-time header of a value in a table with a TTL.
const TTL_HEADER: usize = 8;

/// Processing time, ms since the Unix epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The value of a stored entry of a table with a TTL, or `None` when it has expired at `now`.
fn live_value(stored: &[u8], ttl_ms: i64, now: i64) -> Option<&[u8]> {
    let header: [u8; TTL_HEADER] = stored.get(..TTL_HEADER)?.try_into().ok()?;
    let written = i64::from_be_bytes(header);
    (now < written.saturating_add(ttl_ms)).then(|| &stored[TTL_HEADER..])
}

impl Cache {
    fn new(budget: &Arc<CacheBudget>, group_len: Option<GroupLen>, complete: bool) -> Self {
        budget.open_table();
        Self {
            budget: Arc::clone(budget),
            group_len,
            complete,
            lru: LruCache::unbounded(),
            entries: 0,
            bytes: 0,
            hits: 0,
            misses: 0,
        }
    }

    fn grow(&mut self, entries: u64, bytes: u64) {
        self.entries += entries;
        self.bytes += bytes;
        self.budget.add(bytes);
    }

    fn shrink(&mut self, entries: u64, bytes: u64) {
        self.entries -= entries;
        self.bytes -= bytes;
        self.budget.sub(bytes);
    }

    /// The cache key of `key`: the key itself, or its group prefix.
    fn slot<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        match &self.group_len {
            Some(len) => &key[..len(key).min(key.len())],
            None => key,
        }
    }

    /// Entries and bytes of one cached item.
    fn cost(slot: &[u8], item: &Cached) -> (u64, u64) {
        match item {
            Cached::Value(v) => (1, entry_cost(slot, v.as_deref().unwrap_or_default()) + ITEM_OVERHEAD),
            Cached::Group(g) => (
                g.len() as u64,
                g.iter().map(|(k, v)| entry_cost(k, v)).sum::<u64>() + slot.len() as u64 + group_overhead(g),
            ),
        }
    }

    /// Caches `item` under `slot`, most recently used, and evicts others while over budget.
    fn insert(&mut self, slot: Vec<u8>, item: Cached) {
        let (entries, bytes) = Self::cost(&slot, &item);
        self.grow(entries, bytes);
        if let Some((old_slot, old)) = self.lru.push(slot, item) {
            let (entries, bytes) = Self::cost(&old_slot, &old);
            self.shrink(entries, bytes);
        }
        self.evict(1);
    }

    /// Evicts least recently used items, keeping at least `keep`, while this table must.
    fn evict(&mut self, keep: usize) {
        while self.lru.len() > keep && self.budget.must_evict(self.bytes) {
            let Some((slot, item)) = self.lru.pop_lru() else { break };
            let (entries, bytes) = Self::cost(&slot, &item);
            self.shrink(entries, bytes);
            self.complete = false;
        }
    }

    /// Records that `key` now holds `value` (`None`: deleted) where the cache holds its key or
    /// group; a group not cached stays so (it is read whole when next asked for), unless the
    /// cache is complete: the group then holds only this write. Returns whether the key was
    /// known to be absent before this write (`false`: present, or not known).
    fn write(&mut self, key: &[u8], value: Option<&[u8]>) -> bool {
        let slot = self.slot(key);
        let (added, removed, was_absent) = match self.lru.peek_mut(slot) {
            Some(Cached::Value(v)) => {
                let old = std::mem::replace(v, value.map(<[u8]>::to_vec));
                let added = entry_cost(key, value.unwrap_or_default());
                (added, entry_cost(key, old.as_deref().unwrap_or_default()), old.is_none())
            }
            Some(Cached::Group(g)) => {
                let overhead_before = group_overhead(g);
                let old = match value {
                    Some(v) => g.insert(key.to_vec(), v.to_vec()),
                    None => g.remove(key),
                };
                let was_absent = old.is_none();
                let added = value.map_or((0, 0), |v| (1, entry_cost(key, v)));
                let removed = old.map_or((0, 0), |o| (1, entry_cost(key, &o)));
                self.entries = self.entries + added.0 - removed.0;
                (added.1 + group_overhead(g), removed.1 + overhead_before, was_absent)
            }
            None if self.group_len.is_none() => {
                let was_absent = self.complete;
                self.insert(key.to_vec(), Cached::Value(value.map(<[u8]>::to_vec)));
                return was_absent;
            }
            None if self.complete => {
                let group = value.map(|v| (key.to_vec(), v.to_vec())).into_iter().collect();
                self.insert(slot.to_vec(), Cached::Group(group));
                return true;
            }
            None => return false,
        };
        self.bytes = self.bytes + added - removed;
        self.budget.add(added);
        self.budget.sub(removed);
        was_absent
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.budget.sub(self.bytes);
        self.budget.close_table();
    }
}

/// Whether table `id` holds no entry in RocksDB (a table a new job just allocated). A read
/// error counts as not empty: the cache then reads RocksDB on a miss.
fn is_empty(store: &Store, id: u32) -> bool {
    store.is_empty_table(id).unwrap_or(false)
}

impl StateTable {
    /// A table with no cache: reads go to this epoch's writes and RocksDB.
    pub fn new(table: impl Into<TableRef>) -> Self {
        let TableRef { id, key_groups } = table.into();
        Self {
            id,
            overlay: BTreeMap::new(),
            pending_bytes: 0,
            deleted_below: None,
            cache: None,
            ttl: None,
            key_groups,
            partition_len: None,
            committing: Vec::new(),
        }
    }

    /// Drops the committing layers RocksDB now has.
    fn prune(&mut self) {
        if self.committing.first().is_some_and(|c| c.landed.is_set()) {
            self.committing.retain(|c| !c.landed.is_set());
        }
    }

    /// The committing epochs not yet landed, oldest first.
    fn committing_layers(&self) -> impl DoubleEndedIterator<Item = Layer<'_>> {
        self.committing.iter().filter(|c| !c.landed.is_set()).map(|c| (&*c.overlay, c.deleted_below.as_deref()))
    }

    /// This epoch's writes as a layer.
    fn current_layer(&self) -> Layer<'_> {
        (&self.overlay, self.deleted_below.as_deref())
    }

    /// The layers of writes over RocksDB, oldest first: the committing epochs not yet landed,
    /// then this epoch's.
    fn layers(&self) -> Vec<Layer<'_>> {
        self.committing_layers().chain(std::iter::once(self.current_layer())).collect()
    }

    /// A table that caches the single keys it reads and writes, within `store`'s state cache
    /// budget. Reads one key at a time ([`StateTable::get`]); whole-table reads with
    /// [`StateTable::scan`].
    pub fn point(table: impl Into<TableRef>, store: &Store) -> Self {
        let table = Self::new(table);
        Self { cache: Some(Cache::new(store.cache_budget(), None, is_empty(store, table.id))), ..table }
    }

    /// A table whose keys are grouped by a prefix (`group_len(key)` leading bytes: a join key,
    /// a partition), read and cached a whole group at a time, within `store`'s state cache
    /// budget: [`StateTable::prefix_iter`] over a group or a prefix within one.
    pub fn grouped(table: impl Into<TableRef>, store: &Store, group_len: GroupLen) -> Self {
        let table = Self::new(table);
        Self { cache: Some(Cache::new(store.cache_budget(), Some(group_len), is_empty(store, table.id))), ..table }
    }

    /// Says where the partition key of a key ends (`partition_len(key)` leading bytes), for a
    /// point table whose keys are longer than their partition key (a group and a value): the
    /// bytes [`key_group`](crate::state::key_group::key_group) hashes to decide which operator instance owns the key. Without it, a
    /// grouped table's partition key is its group, a point table's its whole key.
    pub fn with_partition_len(mut self, partition_len: GroupLen) -> Self {
        self.partition_len = Some(partition_len);
        self
    }

    /// The key under which this operator instance keeps its own entry in a metadata table its
    /// instances share (its watermark, its late-row count): empty for a single instance, else
    /// the first key group of its range (2 bytes, big-endian).
    pub fn instance_key(&self) -> Vec<u8> {
        match self.key_groups.first() {
            0 => Vec::new(),
            g => g.to_be_bytes().to_vec(),
        }
    }

    /// The metadata entries of every instance (keys as [`StateTable::instance_key`] makes
    /// them; other keys are not returned), each with whether this instance inherits it: its key
    /// group lies in this instance's range. After a restart with another parallelism, an
    /// operator takes watermarks from all entries and sums counters over the inherited ones,
    /// then [`StateTable::adopt`]s them.
    ///
    /// # Errors
    /// `Storage` when RocksDB fails to read.
    pub fn instance_entries(&self, store: &Store) -> Result<Vec<(Vec<u8>, Vec<u8>, bool)>> {
        let mut out = Vec::new();
        self.scan_every_instance(store, |k, v| {
            let group = match k {
                [] => 0,
                [hi, lo] => u16::from_be_bytes([*hi, *lo]),
                _ => return Ok(true),
            };
            out.push((k.to_vec(), v.to_vec(), self.key_groups.contains(group)));
            Ok(true)
        })?;
        Ok(out)
    }

    /// Deletes the inherited entries of `entries` (from [`StateTable::instance_entries`]) other
    /// than this instance's own, whose counts the instance now carries under its own key.
    pub fn adopt(&mut self, entries: &[(Vec<u8>, Vec<u8>, bool)]) {
        let own = self.instance_key();
        for (k, _, inherited) in entries {
            if *inherited && *k != own {
                self.delete(k.clone());
            }
        }
    }

    /// Whether `key` belongs to this table's key groups.
    fn owns(&self, key: &[u8]) -> bool {
        if self.key_groups.is_all() {
            return true;
        }
        let len = match (&self.partition_len, self.cache.as_ref().and_then(|c| c.group_len.as_ref())) {
            (Some(f), _) | (None, Some(f)) => f(key).min(key.len()),
            (None, None) => key.len(),
        };
        self.key_groups.owns(&key[..len])
    }

    /// Gives the table's entries a time-to-live of `ttl_ms` (`None` or 0: none); see the module
    /// docs. The TTL must be the same every time the table is opened: it decides how stored
    /// values are laid out.
    pub fn with_ttl(mut self, ttl_ms: Option<i64>) -> Self {
        self.set_ttl(ttl_ms);
        self
    }

    /// [`StateTable::with_ttl`] on a table an operator already holds.
    pub fn set_ttl(&mut self, ttl_ms: Option<i64>) {
        self.ttl = ttl_ms.filter(|ms| *ms > 0).map(|ttl_ms| Ttl { ttl_ms, next_sweep_ms: 0 });
    }

    /// Whether the table has a time-to-live.
    pub fn has_ttl(&self) -> bool {
        self.ttl.is_some()
    }

    /// The cache's figures now; `None` for a table without a cache.
    pub fn cache_stats(&self) -> Option<CacheStats> {
        self.cache.as_ref().map(|c| CacheStats { entries: c.entries, bytes: c.bytes, hits: c.hits, misses: c.misses })
    }

    /// The time-to-live of the entries, ms, if any.
    pub fn ttl_ms(&self) -> Option<i64> {
        self.ttl.as_ref().map(|t| t.ttl_ms)
    }

    /// Deletes the entries whose TTL has run out, if the sweep interval has passed since the
    /// last sweep, and returns their keys (so an operator can free what belongs to them).
    /// Without a TTL this does nothing. A sweep reads the whole table from RocksDB.
    ///
    /// # Errors
    /// `Storage` when RocksDB fails to read.
    pub fn sweep_expired(&mut self, store: &Store) -> Result<Vec<Vec<u8>>> {
        let now = now_ms();
        let Some(ttl) = &mut self.ttl else { return Ok(Vec::new()) };
        if now < ttl.next_sweep_ms {
            return Ok(Vec::new());
        }
        ttl.next_sweep_ms = now + (ttl.ttl_ms / 4).clamp(100, 3_600_000);
        let ttl_ms = ttl.ttl_ms;
        let mut expired = Vec::new();
        self.scan_stored(store, |k, v| {
            if live_value(v, ttl_ms, now).is_none() {
                expired.push(k.to_vec());
            }
            Ok(true)
        })?;
        for key in &expired {
            self.delete(key.clone());
        }
        Ok(expired)
    }

    /// The state table id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The stored value of `key` as of now (with its TTL header), without the cache: from
    /// the newest layer of writes that has it or deletes it, else from RocksDB.
    fn stored(&self, store: &Store, key: &[u8]) -> Result<Option<Vec<u8>>> {
        for (overlay, below) in std::iter::once(self.current_layer()).chain(self.committing_layers().rev()) {
            if let Some(p) = overlay.get(key) {
                return Ok(p.value.clone());
            }
            if below.is_some_and(|b| key < b) {
                return Ok(None);
            }
        }
        store.get(self.id, key)
    }

    /// The current value of `key`.
    ///
    /// # Errors
    /// `Storage` when RocksDB fails to read.
    pub fn get(&mut self, store: &Store, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.prune();
        let stored = match &mut self.cache {
            Some(cache) => {
                let slot = cache.slot(key);
                match cache.lru.get(slot) {
                    Some(Cached::Value(v)) => {
                        cache.hits += 1;
                        v.clone()
                    }
                    Some(Cached::Group(g)) => {
                        cache.hits += 1;
                        g.get(key).cloned()
                    }
                    None if cache.complete => {
                        cache.hits += 1;
                        None
                    }
                    None if cache.group_len.is_none() => {
                        cache.misses += 1;
                        let stored = self.stored(store, key)?;
                        let cache = self.cache.as_mut().expect("cached table");
                        cache.insert(key.to_vec(), Cached::Value(stored.clone()));
                        stored
                    }
                    None => {
                        // One key of a group not cached: a point read (with RocksDB's bloom
                        // filter), not the whole group. Reading the group instead raised the
                        // join's hit rate from 0.06 to 0.88 on Nexmark q9 and made q4, q17 and
                        // q20 faster, but q7 many times slower: a window's MAX group of about a
                        // million values read back whole after each eviction (bench/README.md).
                        cache.misses += 1;
                        self.stored(store, key)?
                    }
                }
            }
            None => self.stored(store, key)?,
        };
        Ok(match (&self.ttl, stored) {
            (Some(ttl), Some(v)) => live_value(&v, ttl.ttl_ms, now_ms()).map(<[u8]>::to_vec),
            (_, v) => v,
        })
    }

    /// Puts `key` = `value`.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.prune();
        let value = match &self.ttl {
            Some(_) => {
                let mut stored = Vec::with_capacity(TTL_HEADER + value.len());
                stored.extend_from_slice(&now_ms().to_be_bytes());
                stored.extend_from_slice(&value);
                stored
            }
            None => value,
        };
        let was_absent = self.cache.as_mut().is_some_and(|c| c.write(&key, Some(&value)));
        self.pending_bytes += entry_cost(&key, &value);
        match self.overlay.entry(key) {
            Entry::Vacant(e) => {
                e.insert(Pending { value: Some(value), fresh: was_absent });
            }
            // Fresh while this epoch's first write found no committed value.
            Entry::Occupied(mut e) => e.get_mut().value = Some(value),
        }
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: Vec<u8>) {
        if let Some(cache) = &mut self.cache {
            cache.write(&key, None);
        }
        self.pending_bytes += entry_cost(&key, &[]);
        match self.overlay.entry(key) {
            Entry::Vacant(e) => {
                e.insert(Pending { value: None, fresh: false });
            }
            // Put in this epoch with nothing committed under it: nothing to delete.
            Entry::Occupied(e) if e.get().fresh => {
                e.remove();
            }
            Entry::Occupied(mut e) => e.get_mut().value = None,
        }
    }

    /// Estimated bytes of the writes since the last [`StateTable::flush`]: keys and values with
    /// the overhead of each entry, every write counted (a key written twice twice), so an upper
    /// bound of what the epoch holds in memory for this table, by which a caller can cut an
    /// epoch early (the engine does, at a bound of its own).
    pub fn pending_bytes(&self) -> u64 {
        self.pending_bytes
    }

    /// Deletes every key below `bound`: one range delete in the store, whatever the number of
    /// entries (a sliced window aggregate frees all groups' expired slices at once this way).
    pub fn delete_below(&mut self, bound: &[u8]) {
        let kept = self.overlay.split_off(bound);
        self.overlay = kept;
        if let Some(cache) = &mut self.cache {
            // Drop every cached key or group that starts below the bound; they are read again
            // from the store, which the range delete covers, when next asked for.
            let below: Vec<Vec<u8>> =
                cache.lru.iter().filter(|(slot, _)| slot.as_slice() < bound).map(|(slot, _)| slot.clone()).collect();
            if cache.group_len.is_some() && !below.is_empty() {
                // A dropped group may hold keys at or above the bound, which stay.
                cache.complete = false;
            }
            for slot in below {
                if let Some(item) = cache.lru.pop(&slot) {
                    let (entries, bytes) = Cache::cost(&slot, &item);
                    cache.shrink(entries, bytes);
                }
            }
        }
        if self.deleted_below.as_deref().is_none_or(|b| b < bound) {
            self.deleted_below = Some(bound.to_vec());
        }
    }

    /// Deletes every entry whose key starts with `prefix` (a group's values when the group
    /// goes), reading their keys from RocksDB and this epoch's writes; any table.
    ///
    /// # Errors
    /// `Storage` when RocksDB fails to read.
    pub fn delete_prefix(&mut self, store: &Store, prefix: &[u8]) -> Result<()> {
        let keys: Vec<Vec<u8>> = match &self.cache {
            // A whole group of a complete cache: its entries are the cached ones, if any.
            Some(cache) if cache.complete && cache.group_len.is_some() && cache.slot(prefix) == prefix => {
                match cache.lru.peek(prefix) {
                    Some(Cached::Group(group)) => group.keys().cloned().collect(),
                    _ => Vec::new(),
                }
            }
            _ => self.read_group(store, prefix)?.into_keys().collect(),
        };
        for key in keys {
            self.delete(key);
        }
        Ok(())
    }

    /// The entries whose key starts with `prefix`, in key order, without expired ones. Only
    /// for grouped tables, and `prefix` must hold a whole group prefix (a group, or a prefix
    /// within one): the group is read whole into the cache if it is not there.
    ///
    /// # Errors
    /// `Storage` when RocksDB fails to read.
    pub fn prefix_iter(
        &mut self,
        store: &Store,
        prefix: &[u8],
    ) -> Result<impl DoubleEndedIterator<Item = (&[u8], &[u8])> + '_> {
        let cache = self.cache.as_mut().expect("prefix_iter is only used on grouped state tables");
        let slot = cache.slot(prefix);
        if cache.lru.get(slot).is_some() {
            cache.hits += 1;
        } else if cache.complete {
            // Nothing stored: the group is empty (a write would have cached it).
            cache.hits += 1;
        } else {
            cache.misses += 1;
            let group = self.read_group(store, slot)?;
            let cache = self.cache.as_mut().expect("cached table");
            cache.insert(slot.to_vec(), Cached::Group(group));
        }
        /// The group of a complete cache's miss.
        static EMPTY: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let cache = self.cache.as_mut().expect("cached table");
        let group = match cache.lru.peek(slot) {
            Some(Cached::Group(group)) => group,
            Some(Cached::Value(_)) => unreachable!("a grouped table caches groups"),
            None => &EMPTY,
        };
        let end = prefix_successor(prefix);
        let upper = match &end {
            Some(end) => Bound::Excluded(end.as_slice()),
            None => Bound::Unbounded,
        };
        let ttl = self.ttl.as_ref().map(|t| (t.ttl_ms, now_ms()));
        Ok(group.range::<[u8], _>((Bound::Included(prefix), upper)).filter_map(move |(k, v)| match ttl {
            Some((ttl_ms, now)) => live_value(v, ttl_ms, now).map(|v| (k.as_slice(), v)),
            None => Some((k.as_slice(), v.as_slice())),
        }))
    }

    /// The first entry whose key starts with `prefix` (with `last`, the last one), without an
    /// expired one: what [`StateTable::prefix_iter`] would give first or last, for a grouped
    /// table. A group the cache holds (or a complete cache) answers from memory; otherwise one
    /// RocksDB seek from that end, merged with the writes not yet in RocksDB, finds it without
    /// reading the group whole (a MIN/MAX group over a retracting input can hold millions of
    /// values, and reading it back after each eviction made a job many times slower).
    ///
    /// # Errors
    /// `Storage` when RocksDB fails to read.
    pub fn prefix_extreme(&mut self, store: &Store, prefix: &[u8], last: bool) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.prune();
        let in_memory = match &mut self.cache {
            Some(cache) if cache.complete || cache.lru.peek(cache.slot(prefix)).is_some() => true,
            Some(cache) => {
                cache.misses += 1;
                false
            }
            None => false,
        };
        if in_memory {
            let mut entries = self.prefix_iter(store, prefix)?;
            let entry = if last { entries.next_back() } else { entries.next() };
            return Ok(entry.map(|(k, v)| (k.to_vec(), v.to_vec())));
        }
        let layers = self.layers();
        // The writes of the layers within the prefix, oldest layer first (`None`: deleted), as
        // `read_group` applies them; every layer's range delete covers RocksDB's entries.
        let below = layers.iter().filter_map(|l| l.1).max();
        let upper = match prefix_successor(prefix) {
            Some(end) => Bound::Excluded(end),
            None => Bound::Unbounded,
        };
        let mut written: BTreeMap<&[u8], Option<&[u8]>> = BTreeMap::new();
        for (i, (overlay, layer_below)) in layers.iter().enumerate() {
            if let (true, Some(b)) = (i > 0, layer_below) {
                written.retain(|k, _| *k >= *b);
            }
            for (k, p) in overlay.range::<Vec<u8>, _>((Bound::Included(prefix.to_vec()), upper.clone())) {
                written.insert(k.as_slice(), p.value.as_deref());
            }
        }
        let ttl = self.ttl.as_ref().map(|t| (t.ttl_ms, now_ms()));
        let live = |v: &[u8]| -> Option<Vec<u8>> {
            match ttl {
                Some((ttl_ms, now)) => live_value(v, ttl_ms, now).map(<[u8]>::to_vec),
                None => Some(v.to_vec()),
            }
        };
        // The layers' own candidate, from that end.
        let mut from_layers = written.iter().filter_map(|(k, v)| Some((k.to_vec(), live((*v)?)?)));
        let layered = if last { from_layers.next_back() } else { from_layers.next() };
        // RocksDB's: the first entry from that end the layers neither write nor delete.
        let mut stored = None;
        let mut visit = |k: &[u8], v: &[u8]| -> Result<bool> {
            if below.is_some_and(|b| k < b) {
                // Range-deleted; from the last end, so is everything before it.
                return Ok(!last);
            }
            if written.contains_key(k) {
                return Ok(true);
            }
            match live(v) {
                Some(v) => {
                    stored = Some((k.to_vec(), v));
                    Ok(false)
                }
                None => Ok(true),
            }
        };
        if last {
            store.scan_prefix_rev(self.id, prefix, &mut visit)?;
        } else {
            store.scan_prefix(self.id, prefix, &mut visit)?;
        }
        Ok(match (layered, stored) {
            (Some(a), Some(b)) => Some(if (a.0 > b.0) == last { a } else { b }),
            (a, b) => a.or(b),
        })
    }

    /// Every entry whose key starts with `slot` as of now: the committed ones (minus the range
    /// deletes) with the layers of writes over them, oldest first.
    fn read_group(&self, store: &Store, slot: &[u8]) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        let layers = self.layers();
        let mut group = BTreeMap::new();
        // Every layer's range delete covers RocksDB's entries.
        let below = layers.iter().filter_map(|l| l.1).max();
        store.scan_prefix(self.id, slot, |k, v| {
            if below.is_none_or(|b| k >= b) {
                group.insert(k.to_vec(), v.to_vec());
            }
            Ok(true)
        })?;
        let upper = match prefix_successor(slot) {
            Some(end) => Bound::Excluded(end),
            None => Bound::Unbounded,
        };
        for (i, (overlay, below)) in layers.into_iter().enumerate() {
            // A later layer's range delete also covers the earlier layers' entries.
            if let (true, Some(b)) = (i > 0, below) {
                group.retain(|k, _| k.as_slice() >= b);
            }
            for (k, p) in overlay.range::<Vec<u8>, _>((Bound::Included(slot.to_vec()), upper.clone())) {
                match &p.value {
                    Some(v) => group.insert(k.clone(), v.clone()),
                    None => group.remove(k),
                };
            }
        }
        Ok(group)
    }

    /// Calls `f(key, value)` for every entry of the table as of now, in key order, without
    /// expired ones, streaming from RocksDB (nothing is cached); stops early when `f` returns
    /// `Ok(false)`.
    ///
    /// # Errors
    /// `Storage` when RocksDB fails to read; `f`'s errors.
    pub fn scan(&self, store: &Store, mut f: impl FnMut(&[u8], &[u8]) -> Result<bool>) -> Result<()> {
        let ttl = self.ttl.as_ref().map(|t| (t.ttl_ms, now_ms()));
        self.scan_stored(store, |k, v| match ttl {
            Some((ttl_ms, now)) => match live_value(v, ttl_ms, now) {
                Some(v) => f(k, v),
                None => Ok(true),
            },
            None => f(k, v),
        })
    }

    /// [`StateTable::scan`] of the values as stored (with their TTL header, expired or not),
    /// only the keys of this table's key groups.
    fn scan_stored(&self, store: &Store, mut f: impl FnMut(&[u8], &[u8]) -> Result<bool>) -> Result<()> {
        if self.key_groups.is_all() {
            return self.scan_every_instance(store, f);
        }
        self.scan_every_instance(store, |k, v| if self.owns(k) { f(k, v) } else { Ok(true) })
    }

    /// [`StateTable::scan_stored`] of every key, whichever instance owns it.
    fn scan_every_instance(&self, store: &Store, mut f: impl FnMut(&[u8], &[u8]) -> Result<bool>) -> Result<()> {
        let layers = self.layers();
        let below = layers.iter().filter_map(|l| l.1).max();
        // The layers' writes as one, when epochs are still committing: each layer's range
        // delete drops the earlier layers' entries below it, then its writes go over them.
        let merged: BTreeMap<&[u8], Option<&[u8]>>;
        let pending: Box<dyn Iterator<Item = (&[u8], Option<&[u8]>)> + '_> = if layers.len() == 1 {
            Box::new(self.overlay.iter().map(|(k, p)| (k.as_slice(), p.value.as_deref())))
        } else {
            let mut all = BTreeMap::new();
            for (overlay, below) in layers {
                if let Some(b) = below {
                    all.retain(|k: &&[u8], _| *k >= b);
                }
                all.extend(overlay.iter().map(|(k, p)| (k.as_slice(), p.value.as_deref())));
            }
            merged = all;
            Box::new(merged.iter().map(|(k, v)| (*k, *v)))
        };
        let mut pending = pending.peekable();
        let mut go_on = true;
        store.scan(self.id, |k, v| {
            // The layers' writes before `k`, then `k` itself from them if written.
            while let Some((ok, ov)) = pending.next_if(|(ok, _)| *ok <= k) {
                if ok == k {
                    if let Some(ov) = ov {
                        go_on = f(ok, ov)?;
                    }
                    return Ok(go_on);
                }
                if let Some(ov) = ov {
                    go_on = f(ok, ov)?;
                    if !go_on {
                        return Ok(false);
                    }
                }
            }
            if below.is_some_and(|b| k < b) {
                return Ok(true);
            }
            go_on = f(k, v)?;
            Ok(go_on)
        })?;
        if go_on {
            for (k, v) in pending {
                if let Some(v) = v {
                    if !f(k, v)? {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// Hands this epoch's writes to `writes`, whole (the batch copies them at the commit,
    /// [`EpochWrites::defer`]), and clears the overlay; then, if the cache is
    /// over its budget, evicts down to this table's share, but keeps the most recently used
    /// key or group (a window's MIN/MAX group can alone be bigger than a share: evicting it at
    /// every barrier would read it back whole at the next row).
    ///
    /// Writes committed behind the job ([`EpochWrites::committed_behind`]) keep the overlay
    /// readable as a committing layer until they land (see the module docs).
    pub fn flush(&mut self, writes: &mut EpochWrites) {
        self.prune();
        let deleted_below = self.deleted_below.take();
        if let Some(bound) = &deleted_below {
            writes.delete_below(self.id, bound);
        }
        let overlay = Arc::new(std::mem::take(&mut self.overlay));
        writes.defer(self.id, Arc::clone(&overlay) as Arc<dyn DeferredWrites>);
        if let Some(landed) = writes.landed().filter(|_| !overlay.is_empty() || deleted_below.is_some()) {
            self.committing.push(Committing { overlay, deleted_below, landed: landed.clone() });
        }
        self.pending_bytes = 0;
        if let Some(cache) = &mut self.cache {
            cache.evict(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::store::StoreOptions;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path()).expect("store");
        (dir, store)
    }

    /// Groups are the first byte of the key.
    fn by_first_byte() -> GroupLen {
        Box::new(|k: &[u8]| k.len().min(1))
    }

    fn entries(t: &mut StateTable, store: &Store, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(t.prefix_iter(store, prefix)?.map(|(k, v)| (k.to_vec(), v.to_vec())).collect())
    }

    fn pairs(items: &[(&[u8], &[u8])]) -> Vec<(Vec<u8>, Vec<u8>)> {
        items.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect()
    }

    #[test]
    fn an_entry_lives_until_its_last_write_plus_the_ttl() {
        let mut stored = 1_000i64.to_be_bytes().to_vec();
        stored.extend_from_slice(b"v");
        assert_eq!(live_value(&stored, 500, 1_499), Some(&b"v"[..]));
        assert_eq!(live_value(&stored, 500, 1_500), None);
        assert_eq!(live_value(b"short", 500, 0), None);
    }

    /// Every put and delete since the last flush counts its key, value and entry overhead; a
    /// flush starts again from zero.
    #[test]
    fn pending_bytes_count_the_writes_since_the_last_flush() {
        let mut t = StateTable::new(7);
        assert_eq!(t.pending_bytes(), 0);
        t.put(b"ab".to_vec(), b"xyz".to_vec());
        t.put(b"ab".to_vec(), b"x".to_vec());
        t.delete(b"c".to_vec());
        assert_eq!(t.pending_bytes(), (2 + 3 + ENTRY_OVERHEAD) + (2 + 1 + ENTRY_OVERHEAD) + (1 + ENTRY_OVERHEAD));
        t.flush(&mut EpochWrites::default());
        assert_eq!(t.pending_bytes(), 0);
    }

    /// A key put and deleted in one epoch leaves no write when the cache knew it had no
    /// committed value; a committed key (or one the cache cannot vouch for) gets its tombstone.
    #[test]
    fn a_key_put_and_deleted_in_one_epoch_writes_nothing_when_it_was_never_committed() -> Result<()> {
        let (_dir, store) = store();
        let mut t = StateTable::grouped(7, &store, by_first_byte());
        t.put(b"a1".to_vec(), b"x".to_vec());
        t.put(b"a2".to_vec(), b"y".to_vec());
        let mut writes = EpochWrites::default();
        t.flush(&mut writes);
        store.commit(writes, 1)?;
        // The group is cached: a2 was committed, a3 was not; b is a group the complete cache
        // knows empty.
        for key in [&b"a2"[..], b"a3", b"b1"] {
            t.put(key.to_vec(), b"z".to_vec());
            t.delete(key.to_vec());
        }
        let mut writes = EpochWrites::default();
        t.flush(&mut writes);
        assert_eq!(writes.len(), 1, "only a2's tombstone");
        store.commit(writes, 2)?;
        assert_eq!(entries(&mut t, &store, b"a")?, pairs(&[(b"a1", b"x")]));
        // Without a cache nothing is known: the tombstone is written.
        let mut plain = StateTable::new(8);
        plain.put(b"k".to_vec(), b"v".to_vec());
        plain.delete(b"k".to_vec());
        let mut writes = EpochWrites::default();
        plain.flush(&mut writes);
        assert_eq!(writes.len(), 1);
        Ok(())
    }

    #[test]
    fn values_with_a_ttl_read_back_without_their_header() -> Result<()> {
        let (_dir, store) = store();
        let mut t = StateTable::grouped(7, &store, by_first_byte()).with_ttl(Some(3_600_000));
        t.put(b"a1".to_vec(), b"x".to_vec());
        t.put(b"a2".to_vec(), b"yy".to_vec());
        t.put(b"b1".to_vec(), b"z".to_vec());
        assert_eq!(t.get(&store, b"a2")?, Some(b"yy".to_vec()));
        assert_eq!(entries(&mut t, &store, b"a")?, pairs(&[(b"a1", b"x"), (b"a2", b"yy")]));
        assert!(t.sweep_expired(&store)?.is_empty(), "nothing has expired within the hour");
        Ok(())
    }

    #[test]
    fn expired_entries_are_not_read_and_are_swept() -> Result<()> {
        let (_dir, store) = store();
        let mut t = StateTable::grouped(7, &store, by_first_byte()).with_ttl(Some(3_600_000));
        // "o1" was written two hours ago, as stored; "n1" now.
        let mut writes = EpochWrites::default();
        let mut old = (now_ms() - 7_200_000).to_be_bytes().to_vec();
        old.push(b'x');
        writes.put(7, b"o1", &old);
        store.commit(writes, 1)?;
        t.put(b"n1".to_vec(), b"y".to_vec());
        assert_eq!(t.get(&store, b"o1")?, None);
        assert_eq!(entries(&mut t, &store, b"o")?, []);
        let mut all = Vec::new();
        t.scan(&store, |k, v| {
            all.push((k.to_vec(), v.to_vec()));
            Ok(true)
        })?;
        assert_eq!(all, pairs(&[(b"n1", b"y")]));
        assert_eq!(t.sweep_expired(&store)?, vec![b"o1".to_vec()]);
        let mut writes = EpochWrites::default();
        t.flush(&mut writes);
        assert_eq!(writes.len(), 2, "the put of \"n1\" and the delete of \"o1\"");
        Ok(())
    }

    /// Two instances of a keyed operator share one table: each scans only the keys of its key
    /// groups (a grouped table's group, a point table's partition-length prefix), and after a
    /// restart with one instance its metadata entries are summed into one.
    #[test]
    fn instances_scan_their_own_key_groups_and_one_instance_adopts_their_entries() -> Result<()> {
        use crate::state::key_group::{instance_of, key_group};
        let (_dir, store) = store();
        let of = |i: usize| TableRef { id: 5, key_groups: KeyGroups::of_instance(i, 2) };
        let keys: Vec<Vec<u8>> = (0u8..40).map(|i| vec![i, b'/', i]).collect();
        let owner = |k: &[u8]| instance_of(key_group(&k[..1]), 2);
        assert!((0..2).all(|i| keys.iter().any(|k| owner(k) == i)), "both instances own keys");
        let mut tables: Vec<StateTable> = (0..2).map(|i| StateTable::grouped(of(i), &store, by_first_byte())).collect();
        let mut meta: Vec<StateTable> = (0..2).map(|i| StateTable::new(TableRef { id: 6, ..of(i) })).collect();
        let mut writes = EpochWrites::default();
        for k in &keys {
            tables[owner(k)].put(k.clone(), b"v".to_vec());
        }
        for (i, m) in meta.iter_mut().enumerate() {
            m.put(m.instance_key(), vec![i as u8 + 1]);
        }
        for t in tables.iter_mut().chain(meta.iter_mut()) {
            t.flush(&mut writes);
        }
        store.commit(writes, 1)?;
        for (i, t) in tables.iter().enumerate() {
            let mut seen = Vec::new();
            t.scan(&store, |k, _| Ok({ seen.push(k.to_vec()); true }))?;
            let want: Vec<Vec<u8>> = keys.iter().filter(|k| owner(k) == i).cloned().collect();
            assert_eq!(seen, want, "instance {i}");
        }
        // Point keys longer than their partition key: the prefix decides.
        let point = StateTable::point(of(1), &store).with_partition_len(by_first_byte());
        let mut seen = 0;
        point.scan(&store, |k, _| Ok({ assert_eq!(owner(k), 1); seen += 1; true }))?;
        assert_eq!(seen, keys.iter().filter(|k| owner(k) == 1).count());
        // One instance now: it inherits both entries and keeps one.
        let mut single = StateTable::new(6);
        let entries = single.instance_entries(&store)?;
        assert_eq!(entries.iter().map(|e| (e.1[0], e.2)).collect::<Vec<_>>(), [(1, true), (2, true)]);
        single.adopt(&entries);
        single.put(single.instance_key(), vec![3]);
        let mut writes = EpochWrites::default();
        single.flush(&mut writes);
        store.commit(writes, 2)?;
        assert_eq!(single.instance_entries(&store)?, [(Vec::new(), vec![3], true)]);
        Ok(())
    }

    /// Random puts, deletes and range deletes over epochs committed behind the table (up to
    /// two in flight, landing in order), read back by point reads, group reads and scans
    /// against a map of what the table holds, worked out from the operations alone; at the end
    /// RocksDB holds the map.
    #[test]
    fn writes_of_epochs_committing_behind_read_back_until_and_after_they_land() -> Result<()> {
        let (_dir, store) = store();
        let mut rng = crate::test_rng::Rng(0x5eed_cafe);
        // A table without a cache, and a grouped one (by first byte) whose cache is tiny, so
        // reads go through the layers to RocksDB; a third, grouped, is read only by its first
        // and last entries, so its groups are never cached and those reads seek RocksDB.
        let mut plain = StateTable::new(1);
        let small = Arc::new(CacheBudget::new(64));
        let mut grouped = StateTable::new(2);
        grouped.cache = Some(Cache::new(&small, Some(by_first_byte()), false));
        let mut extremes = StateTable::new(3);
        extremes.cache = Some(Cache::new(&small, Some(by_first_byte()), false));
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut in_flight: std::collections::VecDeque<EpochWrites> = Default::default();
        let mut epoch = 0;
        let key = |rng: &mut crate::test_rng::Rng| vec![b'a' + rng.below(4) as u8, b'0' + rng.below(5) as u8];
        for step in 0..3000 {
            match rng.below(20) {
                0..=9 => {
                    let (k, v) = (key(&mut rng), format!("v{step}").into_bytes());
                    plain.put(k.clone(), v.clone());
                    grouped.put(k.clone(), v.clone());
                    extremes.put(k.clone(), v.clone());
                    model.insert(k, v);
                }
                10..=13 => {
                    let k = key(&mut rng);
                    plain.delete(k.clone());
                    grouped.delete(k.clone());
                    extremes.delete(k.clone());
                    model.remove(&k);
                }
                14 => {
                    let bound = key(&mut rng);
                    plain.delete_below(&bound);
                    grouped.delete_below(&bound);
                    extremes.delete_below(&bound);
                    model.retain(|k, _| *k >= bound);
                }
                15 => {
                    let prefix = vec![b'a' + rng.below(4) as u8];
                    grouped.delete_prefix(&store, &prefix)?;
                    plain.delete_prefix(&store, &prefix)?;
                    extremes.delete_prefix(&store, &prefix)?;
                    model.retain(|k, _| !k.starts_with(&prefix));
                }
                16 | 17 if in_flight.len() < 2 => {
                    let mut writes = EpochWrites::committed_behind();
                    plain.flush(&mut writes);
                    grouped.flush(&mut writes);
                    extremes.flush(&mut writes);
                    in_flight.push_back(writes);
                }
                _ => {
                    if let Some(writes) = in_flight.pop_front() {
                        epoch += 1;
                        store.commit(writes, epoch)?;
                    }
                }
            }
            let k = key(&mut rng);
            assert_eq!(plain.get(&store, &k)?, model.get(&k).cloned(), "point read of {k:?} at step {step}");
            let prefix = [k[0]];
            let group: Vec<(Vec<u8>, Vec<u8>)> = model.range(prefix.to_vec()..).take_while(|(k, _)| k.starts_with(&prefix)).map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(entries(&mut grouped, &store, &prefix)?, group, "group {prefix:?} at step {step}");
            assert_eq!(extremes.prefix_extreme(&store, &prefix, false)?, group.first().cloned(), "first of {prefix:?} at step {step}");
            assert_eq!(extremes.prefix_extreme(&store, &prefix, true)?, group.last().cloned(), "last of {prefix:?} at step {step}");
            if step % 50 == 0 {
                let mut seen = Vec::new();
                plain.scan(&store, |k, v| {
                    seen.push((k.to_vec(), v.to_vec()));
                    Ok(true)
                })?;
                assert_eq!(seen, model.clone().into_iter().collect::<Vec<_>>(), "scan at step {step}");
            }
        }
        let mut writes = EpochWrites::committed_behind();
        plain.flush(&mut writes);
        in_flight.push_back(writes);
        for writes in in_flight {
            epoch += 1;
            store.commit(writes, epoch)?;
        }
        let mut stored = Vec::new();
        store.scan(1, |k, v| {
            stored.push((k.to_vec(), v.to_vec()));
            Ok(true)
        })?;
        assert_eq!(stored, model.into_iter().collect::<Vec<_>>());
        plain.prune();
        assert!(plain.committing.is_empty(), "every committing layer landed and was dropped");
        Ok(())
    }

    #[test]
    fn delete_below_drops_committed_and_pending_keys_below_the_bound_but_not_later_puts() -> Result<()> {
        let (_dir, store) = store();
        let mut t = StateTable::new(3);
        for k in [&b"a"[..], b"b1", b"b2", b"c"] {
            t.put(k.to_vec(), b"old".to_vec());
        }
        let mut writes = EpochWrites::default();
        t.flush(&mut writes);
        store.commit(writes, 1)?;
        t.put(b"b0".to_vec(), b"pending".to_vec());
        t.delete_below(b"b2");
        t.put(b"a1".to_vec(), b"after".to_vec());
        assert_eq!(t.get(&store, b"b1")?, None, "committed, below the bound");
        assert_eq!(t.get(&store, b"b0")?, None, "pending, below the bound");
        assert_eq!(t.get(&store, b"b2")?, Some(b"old".to_vec()), "the bound itself stays");
        let mut seen = Vec::new();
        t.scan(&store, |k, _| {
            seen.push(k.to_vec());
            Ok(true)
        })?;
        assert_eq!(seen, [b"a1".to_vec(), b"b2".to_vec(), b"c".to_vec()]);
        let mut writes = EpochWrites::default();
        t.flush(&mut writes);
        store.commit(writes, 2)?;
        let mut left = Vec::new();
        store.scan(3, |k, v| {
            left.push((k.to_vec(), v.to_vec()));
            Ok(true)
        })?;
        assert_eq!(left, pairs(&[(b"a1", b"after"), (b"b2", b"old"), (b"c", b"old")]));
        Ok(())
    }

    #[test]
    fn delete_prefix_deletes_committed_and_pending_entries_of_the_prefix_only() -> Result<()> {
        let (_dir, store) = store();
        let mut t = StateTable::point(4, &store);
        for k in [&b"a1"[..], b"b1", b"b2", b"c1"] {
            t.put(k.to_vec(), b"old".to_vec());
        }
        let mut writes = EpochWrites::default();
        t.flush(&mut writes);
        store.commit(writes, 1)?;
        t.put(b"b3".to_vec(), b"pending".to_vec());
        t.delete_prefix(&store, b"b")?;
        for (key, want) in [(&b"a1"[..], Some(b"old".to_vec())), (b"b1", None), (b"b2", None), (b"b3", None), (b"c1", Some(b"old".to_vec()))] {
            assert_eq!(t.get(&store, key)?, want, "{}", String::from_utf8_lossy(key));
        }
        Ok(())
    }

    /// A table opened empty answers misses from its cache (no RocksDB read) until it evicts;
    /// the same table reopened over its committed entries reads them from RocksDB.
    #[test]
    fn a_table_opened_empty_reads_nothing_from_rocksdb_until_it_evicts() -> Result<()> {
        let (_dir, store) = store();
        let mut groups = StateTable::grouped(1, &store, by_first_byte());
        let mut points = StateTable::point(2, &store);
        groups.put(b"a1".to_vec(), b"x".to_vec());
        points.put(b"k".to_vec(), b"v".to_vec());
        let mut writes = EpochWrites::default();
        groups.flush(&mut writes);
        points.flush(&mut writes);
        store.commit(writes, 1)?;
        groups.delete(b"a1".to_vec());
        groups.put(b"b1".to_vec(), b"y".to_vec());
        assert_eq!(entries(&mut groups, &store, b"a")?, pairs(&[]));
        assert_eq!(entries(&mut groups, &store, b"b")?, pairs(&[(b"b1", b"y")]));
        assert_eq!(entries(&mut groups, &store, b"c")?, pairs(&[]));
        assert_eq!(groups.get(&store, b"c1")?, None);
        assert_eq!(points.get(&store, b"k")?, Some(b"v".to_vec()));
        assert_eq!(points.get(&store, b"absent")?, None);
        for t in [&groups, &points] {
            assert_eq!(t.cache_stats().map(|s| s.misses), Some(0));
        }

        let mut writes = EpochWrites::default();
        groups.flush(&mut writes);
        store.commit(writes, 2)?;
        let mut reopened = StateTable::grouped(1, &store, by_first_byte());
        assert_eq!(entries(&mut reopened, &store, b"b")?, pairs(&[(b"b1", b"y")]));
        assert_eq!(entries(&mut reopened, &store, b"a")?, pairs(&[]));
        assert_eq!(reopened.cache_stats().map(|s| s.misses), Some(2));
        Ok(())
    }

    /// A table far bigger than its cache reads every entry right, from the cache or RocksDB,
    /// before and after commits, while the cache stays within its budget.
    #[test]
    fn a_table_bigger_than_its_cache_reads_right_and_stays_within_the_budget() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let budget = 64 << 10;
        let store = Store::open_with(dir.path(), StoreOptions { state_cache_bytes: budget })?;
        let mut groups = StateTable::grouped(1, &store, Box::new(|k: &[u8]| k.len().min(4)));
        let mut points = StateTable::point(2, &store);
        // 2 000 groups of 5 entries each, about 1.3 MB with overheads: 20 times the budget.
        for epoch in 1..=4u64 {
            for g in 0..2_000u32 {
                for i in 0..5u8 {
                    let mut key = g.to_be_bytes().to_vec();
                    key.push(i);
                    if epoch == 4 && i == 2 {
                        groups.delete(key);
                    } else {
                        groups.put(key, vec![epoch as u8, i]);
                    }
                }
                let seen = points.get(&store, &g.to_be_bytes())?;
                let want = (epoch > 1).then(|| vec![epoch as u8 - 1]);
                assert_eq!(seen, want, "point {g} in epoch {epoch}");
                points.put(g.to_be_bytes().to_vec(), vec![epoch as u8]);
            }
            let mut writes = EpochWrites::default();
            groups.flush(&mut writes);
            points.flush(&mut writes);
            store.commit(writes, epoch)?;
            assert!(store.cache_budget().used() <= budget, "{} bytes cached", store.cache_budget().used());
        }
        for g in (0..2_000u32).rev() {
            let got = entries(&mut groups, &store, &g.to_be_bytes())?;
            let want: Vec<(Vec<u8>, Vec<u8>)> = [0u8, 1, 3, 4]
                .iter()
                .map(|i| {
                    let mut key = g.to_be_bytes().to_vec();
                    key.push(*i);
                    (key, vec![4, *i])
                })
                .collect();
            assert_eq!(got, want, "group {g}");
            let mut one = g.to_be_bytes().to_vec();
            one.push(3);
            assert_eq!(entries(&mut groups, &store, &one)?, want[2..3], "a prefix within group {g}");
        }
        let stats = groups.cache_stats().expect("cached");
        assert!(stats.misses > 0 && stats.hits > 0, "{stats:?}");
        assert!(stats.bytes <= budget, "{stats:?}");
        Ok(())
    }
}
