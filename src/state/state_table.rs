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
//!
//! # State TTL
//! A table with a time-to-live ([`StateTable::with_ttl`], `table.exec.state.ttl`) stores each
//! value behind an 8-byte header, the processing time of its last write (ms since the Unix
//! epoch, big-endian). Flink's default TTL semantics: the clock restarts on create and write, not
//! on read (`OnCreateAndWrite`), and an expired entry is never returned (`NeverReturnExpired`):
//! reads skip it, and [`StateTable::sweep_expired`] deletes expired entries physically, at most
//! once per sweep interval (a quarter of the TTL, between 100 ms and 1 h).

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::error::Result;
use crate::state::store::{EpochWrites, Store};

/// Keyed state of one operator or relation.
pub struct StateTable {
    id: u32,
    /// This epoch's writes: `None` is a delete.
    overlay: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// This epoch's range delete: every committed key below it is deleted, before the overlay.
    deleted_below: Option<Vec<u8>>,
    /// The whole table, when fully cached.
    cache: Option<BTreeMap<Vec<u8>, Vec<u8>>>,
    /// The time-to-live of entries, if any.
    ttl: Option<Ttl>,
    /// Entries and bytes (keys plus stored values) of the cache.
    cached_size: (u64, u64),
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

impl StateTable {
    /// A table read from RocksDB on demand.
    pub fn new(id: u32) -> Self {
        Self { id, overlay: BTreeMap::new(), deleted_below: None, cache: None, ttl: None, cached_size: (0, 0) }
    }

    /// A table loaded whole into memory from the last committed state.
    pub fn cached(id: u32, store: &Store) -> Result<Self> {
        let mut cache = BTreeMap::new();
        let mut size = (0, 0);
        store.scan(id, |k, v| {
            size.0 += 1;
            size.1 += (k.len() + v.len()) as u64;
            cache.insert(k.to_vec(), v.to_vec());
            Ok(true)
        })?;
        Ok(Self { id, overlay: BTreeMap::new(), deleted_below: None, cache: Some(cache), ttl: None, cached_size: size })
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

    /// The number of entries and their bytes (keys plus values, as stored), for a cached table;
    /// `None` for one read from RocksDB on demand.
    pub fn size(&self) -> Option<(u64, u64)> {
        self.cache.as_ref().map(|_| self.cached_size)
    }

    /// The time-to-live of the entries, ms, if any.
    pub fn ttl_ms(&self) -> Option<i64> {
        self.ttl.as_ref().map(|t| t.ttl_ms)
    }

    /// Deletes the entries whose TTL has run out, if the sweep interval has passed since the
    /// last sweep, and returns their keys (so an operator can free what belongs to them).
    /// Only cached tables are swept; without a TTL this does nothing.
    pub fn sweep_expired(&mut self) -> Vec<Vec<u8>> {
        let now = now_ms();
        let (Some(ttl), Some(cache)) = (&mut self.ttl, &self.cache) else { return Vec::new() };
        if now < ttl.next_sweep_ms {
            return Vec::new();
        }
        ttl.next_sweep_ms = now + (ttl.ttl_ms / 4).clamp(100, 3_600_000);
        let ttl_ms = ttl.ttl_ms;
        let expired: Vec<Vec<u8>> =
            cache.iter().filter(|(_, v)| live_value(v, ttl_ms, now).is_none()).map(|(k, _)| k.clone()).collect();
        for key in &expired {
            self.delete(key.clone());
        }
        expired
    }

    /// The state table id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The current value of `key`.
    pub fn get(&self, store: &Store, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let stored = match (self.overlay.get(key), &self.cache) {
            (Some(v), _) => v.clone(),
            (None, None) if self.deleted_below.as_deref().is_some_and(|b| key < b) => None,
            (None, Some(cache)) => cache.get(key).cloned(),
            (None, None) => store.get(self.id, key)?,
        };
        Ok(match (&self.ttl, stored) {
            (Some(ttl), Some(v)) => live_value(&v, ttl.ttl_ms, now_ms()).map(<[u8]>::to_vec),
            (_, v) => v,
        })
    }

    /// Puts `key` = `value`.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        let value = match &self.ttl {
            Some(_) => {
                let mut stored = Vec::with_capacity(TTL_HEADER + value.len());
                stored.extend_from_slice(&now_ms().to_be_bytes());
                stored.extend_from_slice(&value);
                stored
            }
            None => value,
        };
        if let Some(cache) = &mut self.cache {
            let (entries, bytes) = &mut self.cached_size;
            if let Some(old) = cache.insert(key.clone(), value.clone()) {
                *entries -= 1;
                *bytes -= (key.len() + old.len()) as u64;
            }
            *entries += 1;
            *bytes += (key.len() + value.len()) as u64;
        }
        self.overlay.insert(key, Some(value));
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: Vec<u8>) {
        if let Some(cache) = &mut self.cache {
            if let Some(old) = cache.remove(&key) {
                self.cached_size.0 -= 1;
                self.cached_size.1 -= (key.len() + old.len()) as u64;
            }
        }
        self.overlay.insert(key, None);
    }

    /// Deletes every key below `bound`: one range delete in the store, whatever the number of
    /// entries (a sliced window aggregate frees all groups' expired slices at once this way).
    pub fn delete_below(&mut self, bound: &[u8]) {
        let kept = self.overlay.split_off(bound);
        self.overlay = kept;
        if let Some(cache) = &mut self.cache {
            let kept = cache.split_off(bound);
            for (k, v) in std::mem::replace(cache, kept) {
                self.cached_size.0 -= 1;
                self.cached_size.1 -= (k.len() + v.len()) as u64;
            }
        }
        if self.deleted_below.as_deref().is_none_or(|b| b < bound) {
            self.deleted_below = Some(bound.to_vec());
        }
    }

    /// The entries whose key starts with `prefix`, in key order, without expired ones; only
    /// for cached tables.
    pub fn prefix_iter(
        &self,
        prefix: &[u8],
    ) -> impl DoubleEndedIterator<Item = (&Vec<u8>, &[u8])> + '_ {
        let cache = self.cache.as_ref().expect("prefix_iter is only used on cached state tables");
        let upper = match prefix_successor(prefix) {
            Some(end) => Bound::Excluded(end),
            None => Bound::Unbounded,
        };
        let ttl = self.ttl.as_ref().map(|t| (t.ttl_ms, now_ms()));
        cache.range::<Vec<u8>, _>((Bound::Included(prefix.to_vec()), upper)).filter_map(move |(k, v)| match ttl {
            Some((ttl_ms, now)) => live_value(v, ttl_ms, now).map(|v| (k, v)),
            None => Some((k, v.as_slice())),
        })
    }

    /// Hands this epoch's writes to `writes` and clears the overlay.
    pub fn flush(&mut self, writes: &mut EpochWrites) {
        if let Some(bound) = self.deleted_below.take() {
            writes.delete_below(self.id, &bound);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path()).expect("store");
        (dir, store)
    }

    #[test]
    fn an_entry_lives_until_its_last_write_plus_the_ttl() {
        let mut stored = 1_000i64.to_be_bytes().to_vec();
        stored.extend_from_slice(b"v");
        assert_eq!(live_value(&stored, 500, 1_499), Some(&b"v"[..]));
        assert_eq!(live_value(&stored, 500, 1_500), None);
        assert_eq!(live_value(b"short", 500, 0), None);
    }

    #[test]
    fn values_with_a_ttl_read_back_without_their_header_and_sizes_follow_writes() -> Result<()> {
        let (_dir, store) = store();
        let mut t = StateTable::cached(7, &store)?.with_ttl(Some(3_600_000));
        t.put(b"a1".to_vec(), b"x".to_vec());
        t.put(b"a2".to_vec(), b"yy".to_vec());
        t.put(b"b1".to_vec(), b"z".to_vec());
        assert_eq!(t.get(&store, b"a2")?, Some(b"yy".to_vec()));
        let a: Vec<(Vec<u8>, Vec<u8>)> = t.prefix_iter(b"a").map(|(k, v)| (k.clone(), v.to_vec())).collect();
        assert_eq!(a, vec![(b"a1".to_vec(), b"x".to_vec()), (b"a2".to_vec(), b"yy".to_vec())]);
        // Three keys of 2 bytes, values of 1, 2 and 1 bytes behind an 8-byte header.
        assert_eq!(t.size(), Some((3, 6 + 4 + 24)));
        t.put(b"a2".to_vec(), b"y".to_vec());
        t.delete(b"b1".to_vec());
        assert_eq!(t.size(), Some((2, 4 + 2 + 16)));
        assert!(t.sweep_expired().is_empty(), "nothing has expired within the hour");
        Ok(())
    }

    #[test]
    fn expired_entries_are_not_read_and_are_swept() -> Result<()> {
        let (_dir, store) = store();
        let mut t = StateTable::cached(7, &store)?.with_ttl(Some(3_600_000));
        t.put(b"old".to_vec(), b"x".to_vec());
        t.put(b"new".to_vec(), b"y".to_vec());
        t.flush(&mut EpochWrites::default());
        // Backdate "old" by two hours, as if it had been written then.
        let mut stored = (now_ms() - 7_200_000).to_be_bytes().to_vec();
        stored.push(b'x');
        t.cache.as_mut().expect("cached").insert(b"old".to_vec(), stored);
        assert_eq!(t.get(&store, b"old")?, None);
        assert_eq!(t.prefix_iter(b"").count(), 1);
        assert_eq!(t.sweep_expired(), vec![b"old".to_vec()]);
        assert_eq!(t.size().map(|s| s.0), Some(1));
        let mut writes = EpochWrites::default();
        t.flush(&mut writes);
        assert_eq!(writes.len(), 1, "the delete of \"old\"");
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
        let mut writes = EpochWrites::default();
        t.flush(&mut writes);
        store.commit(writes, 2)?;
        let mut left = Vec::new();
        store.scan(3, |k, v| {
            left.push((k.to_vec(), v.to_vec()));
            Ok(true)
        })?;
        let expected = [(&b"a1"[..], &b"after"[..]), (b"b2", b"old"), (b"c", b"old")];
        assert_eq!(left, expected.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect::<Vec<_>>());
        Ok(())
    }
}
