//! Transaction blocks: `BEGIN` (or `START TRANSACTION`) ... `COMMIT` / `ROLLBACK`, with
//! savepoints.
//!
//! What Weir can make atomic is writes to plain tables, so that is what a block holds: its
//! INSERT, UPDATE, DELETE and COPY FROM statements run when sent (their row counts, `RETURNING`
//! rows and errors come back then) over the last commit read through the block's own writes,
//! and are kept as [`WriteStep`]s; COMMIT applies them all again over the latest commit as one
//! epoch, pushed through every view at once (see [`crate::sql::dml`]). ROLLBACK drops them.
//! Until COMMIT nothing of the block is visible to other sessions or to materialized views.
//!
//! Postgres's rules, for what Weir does:
//! - Isolation is READ COMMITTED: each statement reads the last commit (plain tables through
//!   the block's own writes; materialized views show the last commit, as Postgres's show their
//!   last REFRESH).
//! - A statement that fails aborts the block: until ROLLBACK (or `ROLLBACK TO SAVEPOINT`)
//!   every statement fails with 25P02, and COMMIT rolls back.
//! - What cannot be part of an atomic block is refused inside one with 25001 ("CREATE TABLE
//!   cannot run inside a transaction block"): DDL, FLUSH, `INSERT INTO` a connector table
//!   (which starts a job), STOP JOB, suspending and resuming jobs.
//! - `BEGIN READ ONLY` (or `SET TRANSACTION READ ONLY`) refuses writes with 25006.
//! - `SAVEPOINT s`, `ROLLBACK TO [SAVEPOINT] s` (which keeps `s` and ends the abort),
//!   `RELEASE [SAVEPOINT] s`; an unknown name is 3B001.
//! - Settings, as in Postgres: a `SET` in a block that rolls back (to a savepoint set before
//!   it) is undone; `SET LOCAL` lasts until the block ends.

use std::collections::BTreeMap;

use crate::engine::TableChanges;
use crate::error::{ErrorKind, Result, WeirError};
use crate::sql::dml::WriteStep;

/// An open transaction block of a session; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct Transaction {
    /// The block's writes, in order, applied again at COMMIT.
    pub steps: Vec<WriteStep>,
    /// What the steps wrote when they ran: what the block's own statements read through.
    pub preview: TableChanges,
    /// A statement failed: only ROLLBACK (or ROLLBACK TO SAVEPOINT) is accepted.
    pub failed: bool,
    /// `BEGIN READ ONLY`: writes are refused.
    pub read_only: bool,
    /// The savepoints, oldest first.
    savepoints: Vec<Savepoint>,
    /// The session's settings when the block began: a `ROLLBACK` puts them back, as Postgres
    /// undoes a block's `SET`s.
    pub settings_at_begin: BTreeMap<String, String>,
    /// What `SET LOCAL` changed, with the value before (none: unset): `COMMIT` puts it back.
    pub local_settings: BTreeMap<String, Option<String>>,
}

/// A savepoint: the block as it was when it was set.
#[derive(Debug, Clone)]
struct Savepoint {
    name: String,
    steps: usize,
    preview: TableChanges,
    /// The session's settings when it was set, and what `SET LOCAL` had changed then, which
    /// `ROLLBACK TO` puts back.
    settings: BTreeMap<String, String>,
    local_settings: BTreeMap<String, Option<String>>,
}

impl Transaction {
    /// A new block of a session whose settings are `settings`; `read_only` refuses writes.
    pub fn new(read_only: bool, settings: &BTreeMap<String, String>) -> Self {
        Self { read_only, settings_at_begin: settings.clone(), ..Self::default() }
    }

    /// The session's settings after the block ends with `COMMIT`: `settings` with what `SET
    /// LOCAL` changed put back.
    pub fn committed_settings(&self, mut settings: BTreeMap<String, String>) -> BTreeMap<String, String> {
        for (key, before) in &self.local_settings {
            match before {
                Some(v) => settings.insert(key.clone(), v.clone()),
                None => settings.remove(key),
            };
        }
        settings
    }

    /// Refuses a write (`what`: "INSERT", ...) in a read-only block.
    ///
    /// # Errors
    /// `ReadOnlyTransaction`.
    pub fn check_writable(&self, what: &str) -> Result<()> {
        if self.read_only {
            return Err(WeirError::new(ErrorKind::ReadOnlyTransaction(format!(
                "cannot execute {what} in a read-only transaction"
            ))));
        }
        Ok(())
    }

    /// `SAVEPOINT name`, in a session whose settings are `settings`.
    pub fn savepoint(&mut self, name: String, settings: &BTreeMap<String, String>) {
        self.savepoints.push(Savepoint {
            name,
            steps: self.steps.len(),
            preview: self.preview.clone(),
            settings: settings.clone(),
            local_settings: self.local_settings.clone(),
        });
    }

    /// `ROLLBACK TO SAVEPOINT name`: drops what came after it (keeping it) and ends an abort;
    /// returns the session's settings as they were when it was set.
    ///
    /// # Errors
    /// `InvalidSavepoint` for a name the block has not set.
    pub fn rollback_to(&mut self, name: &str) -> Result<BTreeMap<String, String>> {
        let at = self.find(name)?;
        self.savepoints.truncate(at + 1);
        let point = &self.savepoints[at];
        self.steps.truncate(point.steps);
        self.preview = point.preview.clone();
        self.local_settings = point.local_settings.clone();
        self.failed = false;
        Ok(point.settings.clone())
    }

    /// `RELEASE SAVEPOINT name`: forgets it and the savepoints set after it.
    ///
    /// # Errors
    /// `InvalidSavepoint` for a name the block has not set.
    pub fn release(&mut self, name: &str) -> Result<()> {
        let at = self.find(name)?;
        self.savepoints.truncate(at);
        Ok(())
    }

    /// The latest savepoint named `name`.
    fn find(&self, name: &str) -> Result<usize> {
        self.savepoints.iter().rposition(|s| s.name == name).ok_or_else(|| {
            WeirError::new(ErrorKind::InvalidSavepoint(format!("savepoint \"{name}\" does not exist")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(table: &str) -> WriteStep {
        WriteStep::Insert { table: table.into(), alias: None, rows: vec![], on_conflict: None }
    }

    fn tables(t: &Transaction) -> Vec<String> {
        t.steps.iter().map(|s| crate::sql::dml::write_table(s).expect("a table")).collect()
    }

    /// Savepoints nest: rolling back to one drops the steps after it and keeps it (a second
    /// rollback to it works), releasing one forgets it and those after it.
    #[test]
    fn savepoints_keep_the_steps_before_them() -> Result<()> {
        let mut t = Transaction::new(false, &BTreeMap::new());
        t.steps.push(step("a"));
        t.savepoint("s1".into(), &BTreeMap::new());
        t.steps.push(step("b"));
        t.savepoint("s2".into(), &BTreeMap::new());
        t.steps.push(step("c"));
        t.failed = true;
        t.rollback_to("s2")?;
        assert!(!t.failed);
        assert_eq!(tables(&t), ["a", "b"]);
        t.steps.push(step("d"));
        t.rollback_to("s1")?;
        assert_eq!(tables(&t), ["a"]);
        t.rollback_to("s1")?;
        assert!(t.rollback_to("s2").is_err(), "s2 was set after s1");
        t.release("s1")?;
        let err = t.rollback_to("s1").expect_err("released");
        assert_eq!(err.sqlstate(), "3B001");
        assert_eq!(err.to_string(), "savepoint \"s1\" does not exist");
        Ok(())
    }

    #[test]
    fn a_read_only_block_refuses_writes() {
        let err = Transaction::new(true, &BTreeMap::new()).check_writable("INSERT").expect_err("read only");
        assert_eq!(err.sqlstate(), "25006");
        assert_eq!(err.to_string(), "cannot execute INSERT in a read-only transaction");
        assert!(Transaction::new(false, &BTreeMap::new()).check_writable("INSERT").is_ok());
    }
}
