//! `CREATE TEMPORARY VIEW`: a view of one session, gone when its connection ends (Flink's
//! temporary view; Postgres's `CREATE TEMP VIEW`).
//!
//! The session keeps its temporary views ([`TemporaryViews`]); every statement of the session
//! plans against the catalog with them added ([`TemporaryViews::overlay`]), so a `SELECT`, an
//! `EXPLAIN`, a window TVF (`TABLE(TUMBLE(TABLE v, ...))`) and a cursor read them as they read
//! a view. As in Postgres (whose `pg_temp` schema comes first in the search path) and Flink, a
//! temporary view takes the place of a permanent relation of its name in the session, also
//! one created later; a permanent view still reads the permanent relations
//! ([`crate::sql::relations::Snapshot::permanent`]).
//!
//! A materialized view or an `INSERT INTO` job over a temporary view outlives the session: it
//! keeps a copy of each temporary view its query reads ([`TemporaryViews::read_by`], stored in
//! its relation's `temporary_views`), and plans with them at every restart, as Flink compiles
//! a job with the temporary views it reads inlined. Dropping the temporary view later does not
//! change the job. Its dependencies are the permanent relations those views read, so they
//! cannot be dropped under it. A permanent (plain) view cannot read a temporary one: it would
//! break when the session ends (Postgres makes such a view temporary; Weir asks for `CREATE
//! TEMPORARY VIEW`).

use std::collections::BTreeSet;
use std::sync::Arc;

use sqlparser::ast::Query;
use weir_catalog::{Catalog, Relation};

use crate::error::{ErrorKind, Result, WeirError};
use crate::sql::relations::Snapshot;

/// The temporary views of one session, in the order they were created.
#[derive(Debug, Clone, Default)]
pub struct TemporaryViews(Vec<Relation>);

impl TemporaryViews {
    /// The temporary view `name`.
    pub fn get(&self, name: &str) -> Option<&Relation> {
        self.0.iter().find(|v| v.name == name)
    }

    /// Whether the session has none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// [`Self::read_by`] the query of an `INSERT` (none for `INSERT ... VALUES` without one).
    pub fn read_by_insert(&self, insert: &sqlparser::ast::Insert) -> Vec<Relation> {
        insert.source.as_deref().map(|q| self.read_by(q)).unwrap_or_default()
    }

    /// `catalog` as the session's statements see it: with its temporary views.
    pub fn overlay(&self, catalog: &Arc<Catalog>) -> Arc<Catalog> {
        overlay(catalog, &self.0)
    }

    /// The temporary views `query` reads, directly or through other temporary views, in
    /// creation order: what a job over `query` keeps.
    pub fn read_by(&self, query: &Query) -> Vec<Relation> {
        let reached = self.reached_by(query);
        self.0.iter().filter(|v| reached.contains(&v.name)).cloned().collect()
    }

    /// Every name `query` reads, and those the temporary views among them read, and so on
    /// (names of views dropped since included).
    fn reached_by(&self, query: &Query) -> BTreeSet<String> {
        let mut reached = BTreeSet::new();
        let mut pending = crate::sql::ddl::relation_names(query);
        while let Some(name) = pending.pop() {
            if let Some(view) = self.get(&name) {
                pending.extend(view.depends_on.iter().filter(|d| !reached.contains(*d)).cloned());
            }
            reached.insert(name);
        }
        reached
    }

    /// `CREATE [OR REPLACE] TEMPORARY VIEW [IF NOT EXISTS] name AS query`, planned against
    /// `snapshot` (the session's: its temporary views included) for its columns.
    ///
    /// A query that reads `name` (directly or through other temporary views) is refused, so
    /// that no view ever reads itself.
    ///
    /// # Errors
    /// `DuplicateTable` when the session has a temporary view `name` (without OR REPLACE or IF
    /// NOT EXISTS); `Plan` for a query that reads `name`; the planner's.
    pub async fn create(
        &mut self,
        snapshot: Arc<Snapshot>,
        name: &str,
        query: &Query,
        (or_replace, if_not_exists): (bool, bool),
        definition: &str,
    ) -> Result<()> {
        if self.get(name).is_some() && !or_replace {
            return match if_not_exists {
                true => {
                    crate::sql::notices::relation_exists(&name);
                    Ok(())
                }
                false => Err(ErrorKind::DuplicateTable(name.to_string()).into()),
            };
        }
        if self.reached_by(query).contains(name) {
            return Err(WeirError::plan(format!(
                "temporary view {name} would read itself: a relation named {name} in its query is the view (a temporary \
                 view takes the place of a permanent relation of its name in the session); give the view another name"
            )));
        }
        let definition = definition.trim().trim_end_matches(';').trim_end();
        let view = crate::sql::ddl::view_relation(snapshot, name, query, definition).await?;
        match self.0.iter_mut().find(|v| v.name == name) {
            Some(existing) => *existing = view,
            None => self.0.push(view),
        }
        Ok(())
    }

    /// The session's temporary views, other than `views`, that read one of `views` (the
    /// session's temporary views) or `relations` (catalog names), directly or through other
    /// temporary views, in creation order. A view reads the temporary view of a name if one was
    /// created before it (it took the name's place), else the catalog's relation.
    pub fn readers_of(&self, views: &[String], relations: &[String]) -> Vec<String> {
        let mut going: BTreeSet<&str> = views.iter().map(String::as_str).collect();
        let mut readers = Vec::new();
        for (i, view) in self.0.iter().enumerate() {
            if going.contains(view.name.as_str()) {
                continue;
            }
            let reads_going = view.depends_on.iter().any(|d| match self.0[..i].iter().any(|w| &w.name == d) {
                true => going.contains(d.as_str()),
                false => relations.contains(d),
            });
            if reads_going {
                going.insert(&view.name);
                readers.push(view.name.clone());
            }
        }
        readers
    }

    /// Drops temporary view `name`; whether there was one.
    pub fn drop_view(&mut self, name: &str) -> bool {
        let before = self.0.len();
        self.0.retain(|v| v.name != name);
        self.0.len() != before
    }
}

/// `catalog` with the temporary views `views` added, each in place of a permanent relation of
/// its name (Postgres's search path and Flink both let a temporary object shadow a permanent
/// one); `catalog` itself when there are none. Permanent views still read permanent relations
/// ([`crate::sql::relations::Snapshot::permanent`]).
pub fn overlay(catalog: &Arc<Catalog>, views: &[Relation]) -> Arc<Catalog> {
    if views.is_empty() {
        return Arc::clone(catalog);
    }
    let mut overlaid = (**catalog).clone();
    for view in views {
        overlaid.relations.insert(view.name.clone(), view.clone());
    }
    Arc::new(overlaid)
}

/// The relations a job over `query` depends on: those its query names
/// ([`crate::sql::ddl::named_relations`]), and the permanent relations that the temporary views
/// `views` it reads read (so they cannot be dropped under it).
pub fn job_dependencies(engine: &crate::engine::Engine, query: &Query, views: &[Relation]) -> Vec<String> {
    let temporary: BTreeSet<&str> = views.iter().map(|v| v.name.as_str()).collect();
    let mut out = crate::sql::ddl::named_relations(engine, query);
    for name in views.iter().flat_map(|v| &v.depends_on) {
        if !temporary.contains(name.as_str()) && engine.catalog.get(name).is_some() && !out.contains(name) {
            out.push(name.clone());
        }
    }
    out
}
