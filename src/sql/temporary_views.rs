//! `CREATE TEMPORARY VIEW`: a view of one session, gone when its connection ends (Flink's
//! temporary view; Postgres's `CREATE TEMP VIEW`).
//!
//! The session keeps its temporary views ([`TemporaryViews`]); every statement of the session
//! plans against the catalog with them added ([`TemporaryViews::overlay`]), so a `SELECT`, an
//! `EXPLAIN`, a window TVF (`TABLE(TUMBLE(TABLE v, ...))`) and a cursor read them as they read
//! a view. Unlike Flink and Postgres, a temporary view cannot take the name of a permanent
//! relation (shadow it): views read relations by name, and a permanent view reading a
//! shadowed name would read the temporary view instead.
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
use weir_catalog::{Catalog, Relation, RelationKind};

use crate::error::{ErrorKind, Result, WeirError};
use crate::sql::relations::{session_context, Snapshot};

/// The temporary views of one session, in the order they were created.
#[derive(Debug, Clone, Default)]
pub struct TemporaryViews(Vec<Relation>);

impl TemporaryViews {
    /// The temporary view `name`.
    pub fn get(&self, name: &str) -> Option<&Relation> {
        self.0.iter().find(|v| v.name == name)
    }

    /// Their names, in creation order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|v| v.name.as_str())
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
    /// A temporary view does not shadow a permanent relation: its name is refused, as is a
    /// query that reads the view being replaced (through other temporary views, too), so that
    /// no view ever reads itself.
    ///
    /// # Errors
    /// `DuplicateTable` when the session has a temporary view `name` (without OR REPLACE or IF
    /// NOT EXISTS) or the catalog a relation `name`; `Plan` for a query that reads `name`; the
    /// planner's.
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
                true => Ok(()),
                false => Err(ErrorKind::DuplicateTable(format!("temporary view {name}")).into()),
            };
        }
        let catalog = Arc::clone(&snapshot.catalog);
        if self.get(name).is_none() && catalog.get(name).is_some() {
            return Err(ErrorKind::DuplicateTable(format!(
                "{name}: a relation of that name exists; a temporary view does not shadow it, give the view another name"
            ))
            .into());
        }
        if self.reached_by(query).contains(name) {
            return Err(WeirError::plan(format!("temporary view {name} would read itself")));
        }
        let query_text = query.to_string();
        let plan = session_context(snapshot).state().create_logical_plan(&query_text).await?;
        let columns = crate::sql::ddl::output_columns_of_schema(plan.schema().as_arrow(), name)?;
        let mut depends_on: Vec<String> = Vec::new();
        for read in crate::sql::ddl::relation_names(query) {
            if catalog.get(&read).is_some() && !depends_on.contains(&read) {
                depends_on.push(read);
            }
        }
        let view = Relation {
            name: name.to_string(),
            kind: RelationKind::View,
            state_table: None,
            columns,
            primary_key: vec![],
            stream_key: None,
            watermark: None,
            options: Default::default(),
            definition: definition.trim().trim_end_matches(';').trim_end().to_string(),
            query: Some(query_text),
            depends_on,
            job: None,
            operator_state: Default::default(),
            emit_on_window_close: false,
            temporary_views: Vec::new(),
        };
        match self.0.iter_mut().find(|v| v.name == name) {
            Some(existing) => *existing = view,
            None => self.0.push(view),
        }
        Ok(())
    }

    /// Drops temporary view `name`; whether there was one.
    pub fn drop_view(&mut self, name: &str) -> bool {
        let before = self.0.len();
        self.0.retain(|v| v.name != name);
        self.0.len() != before
    }
}

/// `catalog` with the temporary views `views` added; `catalog` itself when there are none. A
/// view whose name a permanent relation took since it was created is left out: the permanent
/// relation is not shadowed (so a permanent view, which reads relations by name, never reads a
/// temporary one).
pub fn overlay(catalog: &Arc<Catalog>, views: &[Relation]) -> Arc<Catalog> {
    if views.is_empty() {
        return Arc::clone(catalog);
    }
    let mut overlaid = (**catalog).clone();
    for view in views {
        overlaid.relations.entry(view.name.clone()).or_insert_with(|| view.clone());
    }
    Arc::new(overlaid)
}

/// The permanent relations of `catalog` that a job reading `views` (temporary views) depends on
/// through them: what its `depends_on` gets beside the relations its query names.
pub fn permanent_dependencies(catalog: &Catalog, views: &[Relation]) -> Vec<String> {
    let temporary: BTreeSet<&str> = views.iter().map(|v| v.name.as_str()).collect();
    let mut out: Vec<String> = Vec::new();
    for name in views.iter().flat_map(|v| &v.depends_on) {
        if !temporary.contains(name.as_str()) && catalog.get(name).is_some() && !out.contains(name) {
            out.push(name.clone());
        }
    }
    out
}
