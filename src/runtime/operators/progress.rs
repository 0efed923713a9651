//! Event-time progress of a window assigner: its watermark and the late rows it dropped,
//! persisted in a state table so both survive a restart: one entry per parallel instance of
//! the assigner ([`StateTable::instance_key`]), so a restart with another parallelism keeps the
//! count (each instance sums the entries it inherits).

use crate::error::{Result, WeirError};
use crate::state::{EpochWrites, StateTable, Store, TableRef};

/// The stable name of the progress table.
pub const WATERMARK: &str = "watermark";

/// Watermark and late-row count; see the module docs.
pub struct Progress {
    /// The watermark, ms; `None` before the first.
    pub watermark_ms: Option<i64>,
    /// Rows dropped as late.
    pub num_late_rows: u64,
    table: StateTable,
}

impl Progress {
    /// Loads the progress kept in state table `table`: the watermark of any instance (they all
    /// see the same), the late rows of the entries this instance inherits.
    ///
    /// # Errors
    /// `Storage` for an entry that is not 17 bytes.
    pub fn load(table: impl Into<TableRef>, store: &Store) -> Result<Self> {
        let mut table = StateTable::new(table);
        let entries = table.instance_entries(store)?;
        let (mut watermark_ms, mut num_late_rows) = (None, 0);
        for (_, v, inherited) in &entries {
            if v.len() != 17 {
                return Err(WeirError::storage("corrupt window watermark state"));
            }
            let wm = (v[0] == 1).then(|| i64::from_le_bytes(v[1..9].try_into().expect("8 bytes")));
            watermark_ms = watermark_ms.max(wm);
            if *inherited {
                num_late_rows += u64::from_le_bytes(v[9..17].try_into().expect("8 bytes"));
            }
        }
        table.adopt(&entries);
        let mut progress = Self { watermark_ms, num_late_rows, table };
        if entries.iter().any(|(k, _, inherited)| *inherited && *k != progress.table.instance_key()) {
            progress.save();
        }
        Ok(progress)
    }

    /// Moves the watermark forward (never back); returns whether it moved.
    pub fn advance(&mut self, watermark_ms: i64) -> bool {
        if self.watermark_ms.is_some_and(|wm| watermark_ms <= wm) {
            return false;
        }
        self.watermark_ms = Some(watermark_ms);
        self.save();
        true
    }

    /// Counts `n` more late rows.
    pub fn add_late(&mut self, n: u64) {
        if n > 0 {
            self.num_late_rows += n;
            self.save();
        }
    }

    fn save(&mut self) {
        let mut v = Vec::with_capacity(17);
        v.push(self.watermark_ms.is_some() as u8);
        v.extend_from_slice(&self.watermark_ms.unwrap_or(0).to_le_bytes());
        v.extend_from_slice(&self.num_late_rows.to_le_bytes());
        self.table.put(self.table.instance_key(), v);
    }

    /// Hands the epoch's write, if any, to `writes`.
    pub fn flush(&mut self, writes: &mut EpochWrites) {
        self.table.flush(writes);
    }
}
