//! A state table: one operator's (or relation's) keyed state, read through a cache, written
//! once per epoch.
//!
//! Reads see this epoch's writes first, then the cache (when the table is fully cached), then
//! the last committed RocksDB state. Writes go to the epoch overlay and, for a cached table,
//! the cache. On a barrier, [`StateTable::flush`] hands the overlay to the epoch's
//! [`EpochWrites`]; nothing is written to RocksDB directly.
//!
//! # Cached tables
//! A fully cached table is loaded once (a prefix scan) when its operator opens, and then
//! serves ordered range reads (MIN/MAX, Top-N) from memory. Its memory is the size of its state;
//! eviction is future work.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::error::Result;
use crate::state::store::{EpochWrites, Store};

/// Keyed state of one operator or relation.
pub struct StateTable {
    id: u32,
    /// This epoch's writes: `None` is a delete.
    overlay: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// The whole table, when fully cached.
    cache: Option<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl StateTable {
    /// A table read from RocksDB on demand.
    pub fn new(id: u32) -> Self {
        Self { id, overlay: BTreeMap::new(), cache: None }
    }

    /// A table loaded whole into memory from the last committed state.
    pub fn cached(id: u32, store: &Store) -> Result<Self> {
        let mut cache = BTreeMap::new();
        store.scan(id, |k, v| {
            cache.insert(k.to_vec(), v.to_vec());
            Ok(true)
        })?;
        Ok(Self { id, overlay: BTreeMap::new(), cache: Some(cache) })
    }

    /// The state table id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The current value of `key`.
    pub fn get(&self, store: &Store, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.overlay.get(key) {
            return Ok(v.clone());
        }
        match &self.cache {
            Some(cache) => Ok(cache.get(key).cloned()),
            None => store.get(self.id, key),
        }
    }

    /// Puts `key` = `value`.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        if let Some(cache) = &mut self.cache {
            cache.insert(key.clone(), value.clone());
        }
        self.overlay.insert(key, Some(value));
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: Vec<u8>) {
        if let Some(cache) = &mut self.cache {
            cache.remove(&key);
        }
        self.overlay.insert(key, None);
    }

    /// The entries whose key starts with `prefix`, in key order; only for cached tables.
    pub fn prefix_iter(
        &self,
        prefix: &[u8],
    ) -> impl DoubleEndedIterator<Item = (&Vec<u8>, &Vec<u8>)> + '_ {
        let cache = self.cache.as_ref().expect("prefix_iter is only used on cached state tables");
        let upper = match prefix_successor(prefix) {
            Some(end) => Bound::Excluded(end),
            None => Bound::Unbounded,
        };
        cache.range::<Vec<u8>, _>((Bound::Included(prefix.to_vec()), upper))
    }

    /// Hands this epoch's writes to `writes` and clears the overlay.
    pub fn flush(&mut self, writes: &mut EpochWrites) {
        for (k, v) in std::mem::take(&mut self.overlay) {
            match v {
                Some(v) => writes.put(self.id, &k, &v),
                None => writes.delete(self.id, &k),
            }
        }
    }
}

/// The smallest byte string greater than every string starting with `prefix`, if any.
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}
