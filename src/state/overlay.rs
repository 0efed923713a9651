//! Writes that are not committed yet, readable over the state they were made on.
//!
//! A write statement on a plain table computes its changelog against the table's stored rows;
//! a transaction block (`BEGIN ... COMMIT`) makes several, each of which must see the ones
//! before it. [`TableWrites`] holds such writes by state table and key, and [`Overlaid`] reads
//! a committed state through them: a table scan merges the two in key order, a point read
//! takes the overlay's entry (a put, or a delete) before the state's. What is finally
//! committed goes into the epoch's [`EpochWrites`] with [`TableWrites::write_into`].

use std::collections::BTreeMap;
use std::sync::Arc;

use super::store::{EpochWrites, ScanState};
use crate::error::Result;

/// Uncommitted puts and deletes of state-table entries: readable (by table, by key, the value;
/// `None`: deleted), or a log that is only ever written out ([`TableWrites::log`]).
#[derive(Debug, Default, Clone)]
pub struct TableWrites {
    tables: BTreeMap<u32, BTreeMap<Vec<u8>, Option<Vec<u8>>>>,
    /// The writes in order, for a log.
    log: Option<Vec<(u32, Vec<u8>, Option<Vec<u8>>)>>,
}

impl TableWrites {
    /// Writes nothing reads back: a statement that is its own epoch (outside a transaction
    /// block) reads only the state below its writes, so they are kept in order, unindexed, at
    /// the cost of a `WriteBatch` append each, as if written to the epoch directly.
    pub fn log() -> Self {
        Self { tables: BTreeMap::new(), log: Some(Vec::new()) }
    }

    /// Puts `key` = `value` in state table `table`.
    pub fn put(&mut self, table: u32, key: Vec<u8>, value: Vec<u8>) {
        match &mut self.log {
            Some(log) => log.push((table, key, Some(value))),
            None => {
                self.tables.entry(table).or_default().insert(key, Some(value));
            }
        }
    }

    /// Deletes `key` from state table `table`.
    pub fn delete(&mut self, table: u32, key: &[u8]) {
        match &mut self.log {
            Some(log) => log.push((table, key.to_vec(), None)),
            None => {
                self.tables.entry(table).or_default().insert(key.to_vec(), None);
            }
        }
    }

    /// The entry as written here: `Some(Some(v))` put, `Some(None)` deleted, `None` not
    /// written (the state below has it, or not; always, for a log).
    pub fn get(&self, table: u32, key: &[u8]) -> Option<Option<&[u8]>> {
        self.tables.get(&table)?.get(key).map(Option::as_deref)
    }

    /// Whether reads through these writes see nothing of them (none written, or a log).
    pub fn is_empty(&self) -> bool {
        self.tables.values().all(BTreeMap::is_empty)
    }

    /// Room for `n` more writes (a log's; an index grows as it goes).
    pub fn reserve(&mut self, n: usize) {
        if let Some(log) = &mut self.log {
            log.reserve(n);
        }
    }

    /// The bytes of keys and values in the log (0 for an index), with room for the store's
    /// framing of each: what [`EpochWrites::with_capacity`] wants for them.
    pub fn log_bytes(&self) -> usize {
        self.log.as_ref().map_or(0, |log| {
            log.iter().map(|(_, k, v)| k.len() + v.as_ref().map_or(0, Vec::len) + 16).sum()
        })
    }

    /// Adds every write to an epoch's writes.
    pub fn write_into(&self, writes: &mut EpochWrites) {
        if let Some(log) = &self.log {
            for (table, key, value) in log {
                match value {
                    Some(v) => writes.put(*table, key, v),
                    None => writes.delete(*table, key),
                }
            }
        }
        for (table, entries) in &self.tables {
            for (key, value) in entries {
                match value {
                    Some(v) => writes.put(*table, key, v),
                    None => writes.delete(*table, key),
                }
            }
        }
    }

    /// Entries of `keys` in `table`: the overlay's where it has them, else `base`'s, read in
    /// one batch.
    ///
    /// # Errors
    /// `Storage` when `base` fails to read.
    pub fn get_many(&self, base: &dyn ScanState, table: u32, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out: Vec<Option<Option<Vec<u8>>>> =
            keys.iter().map(|k| self.get(table, k).map(|v| v.map(<[u8]>::to_vec))).collect();
        let missing: Vec<Vec<u8>> = keys.iter().zip(&out).filter(|(_, o)| o.is_none()).map(|(k, _)| k.clone()).collect();
        if !missing.is_empty() {
            let mut read = base.get_many(table, &missing)?.into_iter();
            for slot in out.iter_mut().filter(|o| o.is_none()) {
                *slot = Some(read.next().flatten());
            }
        }
        Ok(out.into_iter().map(Option::flatten).collect())
    }
}

/// A committed state read through uncommitted [`TableWrites`]; see the module docs.
pub struct Overlaid {
    base: Arc<dyn ScanState>,
    writes: Arc<TableWrites>,
}

impl Overlaid {
    /// `base` as `writes` change it.
    pub fn new(base: Arc<dyn ScanState>, writes: Arc<TableWrites>) -> Self {
        Self { base, writes }
    }
}

impl ScanState for Overlaid {
    fn scan_table(&self, table: u32, f: &mut dyn FnMut(&[u8], &[u8]) -> Result<bool>) -> Result<()> {
        let Some(entries) = self.writes.tables.get(&table).filter(|t| !t.is_empty()) else {
            return self.base.scan_table(table, f);
        };
        let mut pending = entries.iter().peekable();
        let mut go_on = true;
        self.base.scan_table(table, &mut |key, value| {
            // The overlay's entries before this key, then this key from the overlay if it has it.
            while let Some((k, v)) = pending.peek() {
                if k.as_slice() > key {
                    break;
                }
                let same = k.as_slice() == key;
                if let Some(v) = v {
                    go_on = f(k, v)?;
                    if !go_on {
                        return Ok(false);
                    }
                }
                pending.next();
                if same {
                    return Ok(true);
                }
            }
            go_on = f(key, value)?;
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

    fn get_many(&self, table: u32, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        self.writes.get_many(&*self.base, table, keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Store;

    fn entries(state: &dyn ScanState, table: u32) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        state.scan_table(table, &mut |k, v| {
            out.push((String::from_utf8_lossy(k).into_owned(), String::from_utf8_lossy(v).into_owned()));
            Ok(true)
        })?;
        Ok(out)
    }

    /// A scan merges the overlay's puts and deletes into the committed entries in key order;
    /// point reads take the overlay first; other tables read through unchanged.
    #[test]
    fn reads_merge_the_overlay_into_the_state() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let store = Arc::new(Store::open(dir.path())?);
        let mut writes = EpochWrites::default();
        for (k, v) in [("b", "1"), ("d", "2"), ("f", "3")] {
            writes.put(7, k.as_bytes(), v.as_bytes());
        }
        writes.put(8, b"x", b"9");
        store.commit(writes, 1)?;
        let mut overlay = TableWrites::default();
        overlay.put(7, b"a".to_vec(), b"new-a".to_vec());
        overlay.put(7, b"d".to_vec(), b"new-d".to_vec());
        overlay.delete(7, b"f");
        overlay.put(7, b"g".to_vec(), b"new-g".to_vec());
        overlay.delete(7, b"zz");
        let read = Overlaid::new(Arc::clone(&store) as Arc<dyn ScanState>, Arc::new(overlay));
        let pairs = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
        assert_eq!(entries(&read, 7)?, pairs(&[("a", "new-a"), ("b", "1"), ("d", "new-d"), ("g", "new-g")]));
        assert_eq!(entries(&read, 8)?, pairs(&[("x", "9")]));
        let keys: Vec<Vec<u8>> = ["a", "b", "f", "q"].iter().map(|k| k.as_bytes().to_vec()).collect();
        assert_eq!(read.get_many(7, &keys)?, vec![Some(b"new-a".to_vec()), Some(b"1".to_vec()), None, None]);
        // A log is written out, never read back.
        let mut log = TableWrites::log();
        log.put(7, b"a".to_vec(), b"x".to_vec());
        assert!(log.is_empty() && log.get(7, b"a").is_none());
        // Stopping early stops the merge too.
        let mut seen = 0;
        read.scan_table(7, &mut |_, _| {
            seen += 1;
            Ok(seen < 2)
        })?;
        assert_eq!(seen, 2);
        Ok(())
    }
}
