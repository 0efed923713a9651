//! Savepoints: suspending a job with its state and source positions, resuming it, and starting
//! a new job from a suspended one's source positions.
//!
//! - `STOP JOB 'job-3' WITH SAVEPOINT` / `ALTER MATERIALIZED VIEW v SUSPEND`
//!   ([`Engine::suspend_job`]): the statement has taken the job back from its thread (as every
//!   write statement does), so its in-flight work is in its operators; one epoch commits it
//!   with its source positions, and the job stops: its operators and source tasks are dropped,
//!   its state tables and positions kept, and meta `suspended/<job>` records it across
//!   restarts. `SHOW JOBS` shows it `SUSPENDED`; a view's rows stay readable (as of the
//!   suspension).
//! - `RESUME JOB 'job-3'` / `ALTER MATERIALIZED VIEW v RESUME` ([`Engine::resume_job`]): the job
//!   is built again over its state tables, as at a restart, and its sources continue from the
//!   positions committed at the suspension: nothing is lost or repeated.
//! - `SET 'execution.savepoint.path' = 'job-3'` (Flink's key, naming a suspended job or view
//!   instead of a savepoint directory): the next view or `INSERT INTO` job created in the
//!   session starts each source it shares with job-3 at job-3's positions and watermark,
//!   instead of its `'scan.startup.mode'`; its operators start empty (a query's state is not
//!   carried over to another query). That upgrades a query without reprocessing or gaps:
//!   suspend the old job, create the new one from it, stop the old one.
//!
//! Only a job whose inputs are all connector tables can be suspended: rows written into a
//! plain table, or into a view the job reads, while it is suspended would never reach it.

use weir_catalog::RelationKind;

use super::Engine;
use crate::error::{Result, WeirError};
use crate::runtime::relation::connector_of;
use crate::source::{progress_key, SourceProgress};
use crate::state::EpochWrites;

/// The value of [`suspended_key`] for a job that finished (`FINISHED`), rather than one
/// suspended by a statement.
pub(super) const FINISHED: &[u8] = b"finished";

/// The meta key recording that job `job` is suspended.
pub(super) fn suspended_key(job: &str) -> String {
    format!("suspended/{job}")
}

impl Engine {
    /// The catalog relation of job `name_or_id` (a view's name, or a job id such as `job-3`).
    fn job_relation(&self, name_or_id: &str) -> Result<weir_catalog::Relation> {
        self.catalog
            .relations
            .values()
            .find(|r| r.job.is_some() && (r.name == name_or_id || r.job.as_deref() == Some(name_or_id)))
            .cloned()
            .ok_or_else(|| match self.catalog.get(name_or_id) {
                Some(rel) => WeirError::plan(format!(
                    "{name_or_id} is a {}, which no job maintains; only materialized views and INSERT INTO jobs (SHOW JOBS) can be suspended",
                    rel.kind.sql_name()
                )),
                None => WeirError::undefined_object(format!("no job or materialized view '{name_or_id}'; SHOW JOBS lists them")),
            })
    }

    /// Suspends job `name_or_id` (see the module docs).
    ///
    /// # Errors
    /// `UndefinedObject` for an unknown job; `ObjectNotInPrerequisiteState` for a FAILED or
    /// already suspended one (a FINISHED one becomes SUSPENDED: it is stopped with its state
    /// already); `Plan` for a relation no job maintains; `Unsupported` for a job that
    /// reads a plain table or a view; the commit's.
    pub fn suspend_job(&mut self, name_or_id: &str) -> Result<()> {
        let rel = self.job_relation(name_or_id)?;
        let name = rel.name.clone();
        if self.finished.contains(&name) {
            // Stopped with its state and positions already: it is SUSPENDED from now on, as a
            // savepoint of its end.
            let mut writes = EpochWrites::default();
            writes.put_meta(&suspended_key(&name), b"1");
            self.commit(writes, None)?;
            self.finished.remove(&name);
            return Ok(());
        }
        if self.suspended.contains(&name) {
            return Err(WeirError::not_in_state(format!("{name} is already suspended")));
        }
        if let Some(error) = self.failed.get(&name) {
            return Err(WeirError::not_in_state(format!("{name} is FAILED ({error}); it has no running state to suspend")));
        }
        let Some(job) = self.jobs.get(&name) else {
            // Waiting to restart, not built (its clusters unreachable): its state and positions
            // are the last checkpoint's already.
            if self.waiting_to_restart(&name) {
                let mut writes = EpochWrites::default();
                writes.put_meta(&suspended_key(&name), b"1");
                self.commit(writes, None)?;
                self.suspended.insert(name.clone());
                self.set_aside_failure(&name);
                tracing::info!(job = %name, "suspended while it waited to restart");
                return Ok(());
            }
            return Err(WeirError::internal(format!("{name} is in the catalog but not running")));
        };
        for input in job.reads() {
            let connector = self.catalog.get(input).filter(|r| r.kind == RelationKind::Table).map(connector_of);
            if connector.is_none_or(|c| c == "table") {
                return Err(WeirError::unsupported(format!(
                    "{name} reads {input}, which is not a connector table: rows written into it while {name} is suspended would never reach it, so it cannot be suspended"
                )));
            }
        }
        let mut writes = EpochWrites::default();
        writes.put_meta(&suspended_key(&name), b"1");
        // The final epoch: the job's in-flight state and its source positions, with the others'.
        self.commit(writes, None)?;
        self.unload(&name);
        self.suspended.insert(name.clone());
        self.set_aside_failure(&name);
        tracing::info!(job = %name, "suspended");
        Ok(())
    }

    /// Resumes suspended job `name_or_id` from its state and source positions.
    ///
    /// # Errors
    /// As [`Engine::suspend_job`] for an unknown job; `ObjectNotInPrerequisiteState` for a job
    /// that is not suspended; the rebuild's (as at a restart), the sources'
    /// and the commit's: the job stays suspended then.
    pub fn resume_job(&mut self, name_or_id: &str) -> Result<()> {
        let rel = self.job_relation(name_or_id)?;
        let name = rel.name.clone();
        if self.finished.contains(&name) {
            return Err(WeirError::not_in_state(format!("{name} is FINISHED: it read every source to its end; there is nothing to resume")));
        }
        if !self.suspended.contains(&name) {
            return Err(WeirError::not_in_state(format!("{name} is not suspended")));
        }
        let job = self.restart_job(&rel)?;
        let reads: Vec<String> = job.reads().iter().map(|r| r.to_string()).collect();
        self.jobs.insert(name.clone(), job);
        let mut writes = EpochWrites::default();
        writes.delete_meta(&suspended_key(&name));
        let result = self.open_sources(&name, &reads).and_then(|()| self.commit(writes, None));
        if let Err(e) = result {
            self.unload(&name);
            return Err(e);
        }
        self.suspended.remove(&name);
        tracing::info!(job = %name, "resumed");
        Ok(())
    }

    /// The source progress a new job starts `table` from when created with
    /// `'execution.savepoint.path'` = `from`: suspended job `from`'s committed positions and
    /// watermark for that table (its row counts start at zero), or `None` when `from` does not
    /// read it.
    ///
    /// # Errors
    /// `Plan` when `from` is not a suspended job; `Storage` for unreadable progress.
    pub(super) fn savepoint_progress(&self, from: &str, table: &str) -> Result<Option<SourceProgress>> {
        let rel = self.job_relation(from).map_err(|_| {
            WeirError::plan(format!(
                "'execution.savepoint.path' = '{from}': no such job or materialized view; in Weir the setting names a suspended job (its id, or a materialized view's name, as SHOW JOBS lists them), not a directory"
            ))
        })?;
        if !self.suspended.contains(&rel.name) {
            return Err(WeirError::plan(format!(
                "'execution.savepoint.path' = '{from}': {} is not suspended (STOP JOB ... WITH SAVEPOINT, or ALTER MATERIALIZED VIEW ... SUSPEND, first)",
                rel.name
            )));
        }
        let Some(bytes) = self.store.get_meta(&progress_key(&rel.name, table))? else { return Ok(None) };
        let mut progress: SourceProgress = serde_json::from_slice(&bytes)
            .map_err(|e| WeirError::storage(format!("source progress of {}/{table}: {e}", rel.name)))?;
        progress.rows = 0;
        progress.dead_letters = 0;
        progress.skipped = 0;
        for part in &mut progress.partitions {
            (part.rows, part.dead_letters, part.skipped) = (0, 0, 0);
        }
        Ok(Some(progress))
    }
}
