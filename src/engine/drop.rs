//! Dropping relations: their jobs, source tasks and state tables go in the epoch that commits
//! the catalog without them.

use weir_catalog::RelationKind;

use super::Engine;
use crate::error::{ErrorKind, Result, WeirError};
use crate::state::EpochWrites;

impl Engine {
    /// `DROP TABLE | VIEW | MATERIALIZED VIEW [IF EXISTS] names [CASCADE]`: drops the relations
    /// `names` of `kind`, with `cascade` everything that depends on them, their jobs, source
    /// tasks and state tables, in one epoch.
    ///
    /// # Errors
    /// `UnknownTable` (unless `if_exists`); `WrongObjectType` (42809) when a name is a
    /// relation of another kind (naming the right statement); `DependentObjects` without
    /// `cascade` when others depend on one; the commit's.
    pub fn drop_relations(&mut self, kind: RelationKind, names: &[String], if_exists: bool, cascade: bool) -> Result<()> {
        super::blocking(|| {
            let mut catalog = (*self.catalog).clone();
            let mut writes = EpochWrites::default();
            let mut dropped_jobs = Vec::new();
            let mut dropped = Vec::new();
            for name in names {
                let Some(rel) = catalog.get(name) else {
                    if if_exists {
                        continue;
                    }
                    return Err(WeirError::unknown_table(name));
                };
                if rel.kind != kind {
                    let right = match rel.kind {
                        RelationKind::Table => "DROP TABLE",
                        RelationKind::View => "DROP VIEW",
                        RelationKind::MaterializedView => "DROP MATERIALIZED VIEW",
                        RelationKind::SinkJob => "STOP JOB",
                    };
                    // Postgres's wrong_object_type: `"t" is not a materialized view`, with the hint.
                    return Err(WeirError::new(ErrorKind::WrongObjectType(format!(
                        "\"{name}\" is not a {}: it is a {}; use {right}",
                        kind.sql_name(),
                        rel.kind.sql_name()
                    ))));
                }
                let order = catalog.cascade_order(name);
                if !cascade && order.len() > 1 {
                    let dependents: Vec<String> = order[..order.len() - 1]
                        .iter()
                        .map(|d| format!("{} {d}", catalog.get(d).map(|r| r.kind.sql_name()).unwrap_or("relation")))
                        .collect();
                    return Err(ErrorKind::DependentObjects(format!(
                        "cannot drop {} {name} because other objects depend on it: {}; use DROP ... CASCADE to drop them too",
                        rel.kind.sql_name(),
                        dependents.join(", ")
                    ))
                    .into());
                }
                for victim in order {
                    if let Some(r) = catalog.relations.remove(&victim) {
                        dropped.push((victim.clone(), format!("{} {victim} was dropped", r.kind.sql_name())));
                        if self.watermarks.remove(&victim).is_some() {
                            writes.delete_meta(&super::jobs::watermark_key(&victim));
                        }
                        if let Some(id) = r.state_table {
                            writes.delete_table(id);
                            self.row_ids.remove(&id);
                        }
                        for id in r.operator_state.values() {
                            writes.delete_table(*id);
                        }
                        if r.kind == RelationKind::MaterializedView {
                            // Its sources' positions (of its tasks, or kept while it is suspended).
                            for (job, table) in self.sources.keys().filter(|(job, _)| *job == victim) {
                                writes.delete_meta(&crate::source::progress_key(job, table));
                            }
                            for table in &r.depends_on {
                                writes.delete_meta(&crate::source::progress_key(&victim, table));
                            }
                            writes.delete_meta(&super::suspend::suspended_key(&victim));
                            dropped_jobs.push(victim);
                        }
                    }
                }
            }
            let removed: Vec<_> = dropped_jobs.iter().filter_map(|n| self.jobs.remove(n).map(|j| (n.clone(), j))).collect();
            let tasks: Vec<_> = self.sources.keys().filter(|(job, _)| dropped_jobs.contains(job)).cloned().collect();
            let tasks: Vec<_> = tasks.into_iter().filter_map(|k| self.sources.remove(&k).map(|t| (k, t))).collect();
            match self.commit(writes, Some(catalog)) {
                Ok(()) => {
                    for name in &dropped_jobs {
                        self.suspended.remove(name);
                        self.finished.remove(name);
                        self.restarting.remove(name);
                    }
                    // Its subscribers end, told why.
                    for (name, why) in &dropped {
                        self.feeds().close(name, why);
                    }
                    Ok(())
                }
                Err(e) => {
                    self.jobs.extend(removed);
                    self.sources.extend(tasks);
                    Err(e)
                }
            }
        })
    }
}
