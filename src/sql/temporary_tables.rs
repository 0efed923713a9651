//! `CREATE TEMPORARY TABLE`: a table of one session, gone when its connection ends (Flink's
//! temporary table, how most Flink scripts declare their Kafka sources and sinks; Postgres's
//! `CREATE TEMP TABLE`).
//!
//! The table is a catalog table like any other, under a name of its own,
//! `pg_temp_<n>_<name>` ([`PREFIX`]; `n` the session's number, as Postgres keeps a backend's
//! temporary tables in a `pg_temp_<n>` schema), so the engine (sources, sinks, state, epochs)
//! needs nothing of its own for it. The session knows it by the name it was given
//! ([`TemporaryTables`]):
//! - every statement of the session names it by its catalog name: its name alone (or
//!   `pg_temp.name`) is renamed where a relation is read or written, before a permanent
//!   relation of the name, as Postgres's `pg_temp` schema comes first in the search path and
//!   Flink's temporary objects shadow permanent ones ([`TemporaryTables::rename`]; a renamed
//!   `FROM src` keeps `src` as its alias, so `src.col` still reads). `public.name` is the
//!   permanent relation. A temporary view is stored renamed, so it reads what its names meant
//!   when it was created;
//! - `SHOW TABLES` and psql's `\d` list it under its name ([`TemporaryTables::overlay`], where
//!   no relation has the name), `SHOW CREATE TABLE` and `DESCRIBE` show it so
//!   ([`TemporaryTables::shown`]).
//!
//! Other sessions do not see it: listings leave out every name with [`PREFIX`]
//! ([`is_temporary`]), and a statement naming another open session's table by its catalog name
//! gets Postgres's 0A000 ([`TemporaryTables::check_access`]). When the session ends (or
//! `DISCARD TEMP`), its temporary tables are dropped, but those a materialized view or an
//! `INSERT INTO` job reads: as in Flink, a job submitted from a session over its temporary
//! tables runs on after the session, with the definitions it was created with. Such a table
//! goes when the last job reading it is dropped ([`drop_orphans`], also at every start of the
//! server). A permanent (plain) view cannot read a temporary table: it would break when the
//! session ends.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, Ident, ObjectName, Query, TableAlias, TableFactor, Value, VisitMut, VisitorMut,
};
use tokio::sync::RwLock;
use weir_catalog::{Catalog, RelationKind};

use crate::engine::Engine;
use crate::sql::parser::{ident, object_name, CursorQuery, WeirStatement};

/// The name prefix of temporary tables in the catalog: `pg_temp_<n>_<name>`.
pub const PREFIX: &str = "pg_temp_";

/// Whether catalog relation `name` is a session's temporary table (listed by its session
/// only, under the name it was given).
pub fn is_temporary(name: &str) -> bool {
    name.starts_with(PREFIX)
}

/// Whether `rel` is a temporary table (its definition says `CREATE TEMP[ORARY] TABLE` or
/// `CREATE TABLE pg_temp.`), under its catalog name or, in its session's listings, under its
/// own.
pub fn is_temporary_table(rel: &weir_catalog::Relation) -> bool {
    let words: Vec<String> = rel.definition.split_whitespace().take(3).map(str::to_ascii_uppercase).collect();
    let word = |i: usize| words.get(i).map_or("", String::as_str);
    rel.kind == RelationKind::Table
        && word(0) == "CREATE"
        && (matches!(word(1), "TEMP" | "TEMPORARY") || (word(1) == "TABLE" && word(2).starts_with("PG_TEMP.")))
}

/// A session number no table of `catalog` has and none given before in this process.
fn session_number(catalog: &Catalog) -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let taken = catalog.relations.keys().filter_map(|name| number_of(name)).max().unwrap_or(0);
    NEXT.fetch_max(taken + 1, std::sync::atomic::Ordering::SeqCst);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
}

/// The session number in catalog name `name` (`pg_temp_<n>_..`).
fn number_of(name: &str) -> Option<u64> {
    name.strip_prefix(PREFIX)?.split_once('_')?.0.parse().ok()
}

/// The name a session gave its temporary table of catalog name `internal`.
pub fn given_name(internal: &str) -> &str {
    internal.strip_prefix(PREFIX).and_then(|rest| rest.split_once('_')).map_or(internal, |(_, name)| name)
}

/// Whether Postgres's catalogs and `SHOW TABLES` list catalog relation `rel`: not a job's, nor
/// a session's temporary table under its catalog name (its session lists it under its own).
pub fn listed(rel: &weir_catalog::Relation) -> bool {
    rel.kind != RelationKind::SinkJob && !is_temporary(&rel.name)
}

/// The temporary tables every open session holds, by catalog name: what [`drop_orphans`]
/// leaves alone.
pub type Live = Arc<Mutex<BTreeSet<String>>>;

/// The temporary tables of one session: the name each was given, and its catalog name.
/// Clones of a session share its [`Owner`]; the tables are dropped when the last goes.
#[derive(Debug, Clone, Default)]
pub struct TemporaryTables {
    names: BTreeMap<String, String>,
    owner: Option<Arc<Owner>>,
    /// The session's number in its tables' catalog names, once it has one.
    session: Option<u64>,
}

impl TemporaryTables {
    /// Whether the session has none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The catalog name of the session's temporary table `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.names.get(name).map(String::as_str)
    }

    /// A catalog name for the session's new temporary table `name`: `pg_temp_<n>_<name>`, `n`
    /// the session's number (Postgres's `pg_temp_<n>` schema per backend). Numbers are never
    /// given twice while the server runs, nor one a table in `catalog` has, so a name never
    /// points at a table of another session, however tables come and go; a session whose name
    /// is still taken (a table it dropped that jobs keep) takes a new number.
    pub fn new_name(&mut self, catalog: &Catalog, name: &str) -> String {
        loop {
            let n = *self.session.get_or_insert_with(|| session_number(catalog));
            let internal = format!("{PREFIX}{n}_{name}");
            if catalog.get(&internal).is_none() {
                return internal;
            }
            self.session = None;
        }
    }

    /// Records temporary table `name`, created as `internal`, for the session: dropped with
    /// it ([`Owner`]) unless a job reads it then.
    pub fn add(&mut self, name: &str, internal: &str, engine: &Arc<RwLock<Engine>>, live: &Live) {
        live.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(internal.to_string());
        let owner = self.owner.get_or_insert_with(|| {
            Arc::new(Owner { engine: Arc::clone(engine), live: Arc::clone(live), tables: Mutex::new(BTreeSet::new()) })
        });
        owner.tables.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(internal.to_string());
        self.names.insert(name.to_string(), internal.to_string());
    }

    /// Forgets temporary table `name` (dropped, or about to be); its catalog name.
    pub fn remove(&mut self, name: &str) -> Option<String> {
        let internal = self.names.remove(name)?;
        if let Some(owner) = &self.owner {
            owner.tables.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&internal);
            owner.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&internal);
        }
        Some(internal)
    }

    /// Forgets them all (`DISCARD TEMP`): their catalog names, for [`drop_orphans`].
    pub fn clear(&mut self) -> Vec<String> {
        let names: Vec<String> = self.names.keys().cloned().collect();
        names.iter().filter_map(|n| self.remove(n)).collect()
    }

    /// `catalog` with the session's temporary tables added under the names they were given,
    /// where no relation has the name: so `SHOW TABLES` and psql's `\d` list them so. Statements
    /// name them by their catalog names ([`Self::rename`]); a permanent relation of the name
    /// stays what `public.t` reads. `catalog` itself when there are none.
    pub fn overlay(&self, catalog: &Arc<Catalog>) -> Arc<Catalog> {
        if self.names.is_empty() {
            return Arc::clone(catalog);
        }
        let mut overlaid = (**catalog).clone();
        for (name, internal) in &self.names {
            if let (Some(rel), None) = (catalog.get(internal), catalog.get(name)) {
                let mut rel = rel.clone();
                rel.name = name.clone();
                overlaid.relations.insert(name.clone(), rel);
            }
        }
        Arc::new(overlaid)
    }

    /// The relation `SHOW CREATE TABLE name` and `DESCRIBE name` show: the session's
    /// temporary table `name` under that name, if it has one.
    pub fn shown(&self, catalog: &Catalog, name: &str) -> Option<weir_catalog::Relation> {
        let mut rel = catalog.get(self.names.get(name)?)?.clone();
        rel.name = name.to_string();
        Some(rel)
    }

    /// Postgres's "cannot access temporary tables of other sessions" (0A000) for a catalog
    /// name of `stmt` that is another open session's temporary table (`live`); one of an ended
    /// session, kept for its jobs, may be named (dropped, read).
    ///
    /// # Errors
    /// `Unsupported` (0A000) naming the table.
    pub fn check_access(&self, stmt: &WeirStatement, live: &Live) -> crate::error::Result<()> {
        let live = live.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if live.len() == self.names.len() {
            // No other session holds one.
            return Ok(());
        }
        let mut names = Vec::new();
        statement_names(stmt, &mut names);
        let own: BTreeSet<&String> = self.names.values().collect();
        match names.iter().find(|n| is_temporary(n) && live.contains(*n) && !own.contains(n)) {
            Some(n) => Err(crate::error::WeirError::unsupported(format!(
                "cannot access temporary tables of other sessions ({n} is another session's temporary table {})",
                given_name(n)
            ))),
            None => Ok(()),
        }
    }

    /// `query` with the session's temporary tables named by their catalog names.
    pub fn rename_query(&self, query: &mut Query) {
        if !self.names.is_empty() {
            let _ = query.visit(&mut Rename { names: &self.names, ctes: BTreeSet::new() });
        }
    }

    /// `stmt` with the session's temporary tables named by their catalog names: every
    /// relation it reads or writes (a `FROM src` becomes `FROM pg_temp_1_src AS src`), the
    /// input of a window TVF, and `COPY`'s table. A name a CTE of the statement takes is left.
    pub fn rename(&self, stmt: &mut sqlparser::ast::Statement) {
        if self.names.is_empty() {
            return;
        }
        let mut rename = Rename { names: &self.names, ctes: BTreeSet::new() };
        let _ = stmt.visit(&mut rename);
        if let sqlparser::ast::Statement::Copy { source: sqlparser::ast::CopySource::Table { table_name, .. }, .. } = stmt {
            if let Some(internal) = rename.internal(table_name) {
                *table_name = catalog_name(internal);
            }
        }
    }

    /// [`Self::rename`] over each statement `stmt` holds: its queries, `ALTER TABLE`'s and
    /// `SUBSCRIBE`'s relation. `DROP` resolves its names itself (it also forgets them), and
    /// `SHOW CREATE` and `DESCRIBE` show the session's table of the name ([`Self::shown`]).
    pub fn rename_statement(&self, stmt: &mut WeirStatement) {
        if self.names.is_empty() {
            return;
        }
        match stmt {
            WeirStatement::Sql(s) => self.rename(s),
            WeirStatement::CreateMaterializedView { query, .. } => self.rename_query(query),
            WeirStatement::CreateTableAs(ctas) => self.rename_query(&mut ctas.query),
            WeirStatement::DeclareCursor { query: CursorQuery::Select(query), .. } => self.rename_query(query),
            WeirStatement::DeclareCursor { query: CursorQuery::Subscribe(sub), .. }
            | WeirStatement::Subscribe(sub)
            | WeirStatement::CopySubscribe(sub) => match &mut sub.query {
                Some(query) => self.rename_query(query),
                None => sub.relation = self.resolve(&sub.relation),
            },
            WeirStatement::AlterTableOptions { name, .. } => *name = self.resolve(name),
            WeirStatement::Explain(inner) => self.rename_statement(inner),
            _ => {}
        }
    }

    /// `error` naming the session's temporary tables as the session does, not by their
    /// catalog names (`column "x" of t`, not `of pg_temp_1_t`).
    pub fn given_names(&self, error: crate::error::WeirError) -> crate::error::WeirError {
        self.names.iter().fold(error, |e, (name, internal)| e.replace_name(internal, name))
    }

    /// `name` as the catalog knows it: the catalog name of the session's temporary table
    /// `name`, else `name`.
    pub fn resolve(&self, name: &str) -> String {
        self.names.get(name).cloned().unwrap_or_else(|| name.to_string())
    }
}

/// The temporary tables of a session, dropped when the last clone of the session goes.
pub struct Owner {
    engine: Arc<RwLock<Engine>>,
    live: Live,
    tables: Mutex<BTreeSet<String>>,
}

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owner").field("tables", &self.tables).finish_non_exhaustive()
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let tables = std::mem::take(&mut *self.tables.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        if tables.is_empty() {
            return;
        }
        {
            let mut live = self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for t in &tables {
                live.remove(t);
            }
        }
        let (engine, live) = (Arc::clone(&self.engine), Arc::clone(&self.live));
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime: the server is stopping; the next start drops them.
            return;
        };
        runtime.spawn(async move {
            let mut engine = engine.write().await;
            if let Err(e) = engine.attach_jobs() {
                tracing::warn!("dropping the temporary tables {tables:?} of a session that ended: {e}");
            } else {
                drop_orphans(&mut engine, &live);
            }
            engine.detach_jobs();
        });
    }
}

/// Drops the temporary tables that no open session holds (`live`) and no relation reads:
/// those of sessions that ended, once their last job is dropped.
pub fn drop_orphans(engine: &mut Engine, live: &Live) {
    let live = live.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let read: BTreeSet<&str> = engine.catalog.relations.values().flat_map(|r| r.depends_on.iter().map(String::as_str)).collect();
    let orphans: Vec<String> = engine
        .catalog
        .relations
        .values()
        .filter(|r| r.kind == RelationKind::Table && is_temporary(&r.name))
        .filter(|r| !live.contains(&r.name) && !read.contains(r.name.as_str()))
        .map(|r| r.name.clone())
        .collect();
    if !orphans.is_empty() {
        if let Err(e) = engine.drop_relations(RelationKind::Table, &orphans, true, false) {
            tracing::warn!("dropping the temporary tables {orphans:?} of sessions that ended: {e}");
        }
    }
}

/// The relation names `stmt` names (as the catalog knows them, after [`TemporaryTables::rename`]).
fn statement_names(stmt: &WeirStatement, out: &mut Vec<String>) {
    match stmt {
        WeirStatement::Sql(s) => {
            let _ = sqlparser::ast::visit_relations(&**s, |r| {
                out.push(object_name(r));
                ControlFlow::<()>::Continue(())
            });
            if let sqlparser::ast::Statement::Copy { source: sqlparser::ast::CopySource::Table { table_name, .. }, .. } = &**s {
                out.push(object_name(table_name));
            }
        }
        WeirStatement::CreateMaterializedView { query, .. } | WeirStatement::DeclareCursor { query: CursorQuery::Select(query), .. } => {
            out.extend(crate::sql::ddl::relation_names(query));
        }
        WeirStatement::CreateTableAs(ctas) => out.extend(crate::sql::ddl::relation_names(&ctas.query)),
        WeirStatement::CreateTable(t) => out.extend(t.like.iter().map(|like| like.source.clone())),
        WeirStatement::Rename { name, .. } => out.push(name.clone()),
        WeirStatement::DeclareCursor { query: CursorQuery::Subscribe(sub), .. }
        | WeirStatement::Subscribe(sub)
        | WeirStatement::CopySubscribe(sub) => match &sub.query {
            Some(query) => out.extend(crate::sql::ddl::relation_names(query)),
            None => out.push(sub.relation.clone()),
        },
        WeirStatement::AlterTableOptions { name, .. } | WeirStatement::ShowCreate(name) | WeirStatement::Describe(name, _) => {
            out.push(name.clone())
        }
        WeirStatement::Drop { names, .. } => out.extend(names.iter().cloned()),
        WeirStatement::Explain(inner) => statement_names(inner, out),
        _ => {}
    }
}

/// A catalog name as one quoted identifier.
fn catalog_name(internal: &str) -> ObjectName {
    ObjectName::from(vec![Ident::with_quote('"', internal)])
}

/// Renames the session's temporary tables in a statement ([`TemporaryTables::rename`]).
struct Rename<'a> {
    names: &'a BTreeMap<String, String>,
    /// The statement's CTE names, which shadow a table of the name.
    ctes: BTreeSet<String>,
}

impl Rename<'_> {
    /// The catalog name `name` stands for: a temporary table's, for its name alone or after
    /// `pg_temp.` (Postgres's name for a session's own temporary schema), not after another
    /// schema (`public.t` is the permanent table) nor where a CTE takes the name.
    fn internal(&self, name: &ObjectName) -> Option<&str> {
        let parts: Vec<String> = name.0.iter().map(|p| p.as_ident().map_or_else(|| p.to_string(), ident)).collect();
        let n = match parts.as_slice() {
            [n] if !self.ctes.contains(n) => n,
            [schema, n] if schema == "pg_temp" => n,
            _ => return None,
        };
        self.names.get(n).map(String::as_str)
    }
}

impl VisitorMut for Rename<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            self.ctes.extend(with.cte_tables.iter().map(|c| ident(&c.alias.name)));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table { name, alias, args, .. } = factor else { return ControlFlow::Continue(()) };
        if let Some(args) = args {
            // A window TVF's input: `tumble('src', ...)` after the parser's rewrite, or the
            // short form's `SESSION(src, ...)`.
            if crate::sql::window_tvf::is_window_function(&object_name(name)) {
                if let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))) = args.args.first_mut() {
                    let table = match &*arg {
                        Expr::Value(v) => match &v.value {
                            Value::SingleQuotedString(t) => Some(t.to_lowercase()),
                            _ => None,
                        },
                        Expr::Identifier(t) => Some(ident(t)),
                        _ => None,
                    };
                    let internal = table.filter(|t| !self.ctes.contains(t)).and_then(|t| self.names.get(&t));
                    if let Some(internal) = internal {
                        *arg = Expr::Value(Value::SingleQuotedString(internal.clone()).into());
                    }
                }
            }
            return ControlFlow::Continue(());
        }
        if let Some(internal) = self.internal(name).map(str::to_string) {
            if alias.is_none() {
                let given = name.0.last().and_then(|p| p.as_ident()).cloned().unwrap_or_else(|| Ident::new(object_name(name)));
                *alias = Some(TableAlias { explicit: true, name: given, columns: Vec::new(), at: None });
            }
            *name = catalog_name(&internal);
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, relation: &mut ObjectName) -> ControlFlow<()> {
        if let Some(internal) = self.internal(relation).map(str::to_string) {
            *relation = catalog_name(&internal);
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn renamed(sql: &str) -> String {
        let names = BTreeMap::from([("src".to_string(), "pg_temp_1_src".to_string())]);
        let tables = TemporaryTables { names, owner: None, session: None };
        let mut stmt = crate::sql::parser::parse_statement(sql).unwrap();
        let crate::sql::parser::WeirStatement::Sql(stmt) = &mut stmt else { panic!("not SQL: {sql}") };
        tables.rename(stmt);
        stmt.to_string()
    }

    #[test]
    fn a_temporary_table_is_named_by_its_catalog_name_and_keeps_its_name_as_alias() {
        assert_eq!(renamed("SELECT src.a FROM src"), r#"SELECT src.a FROM "pg_temp_1_src" AS src"#);
        // `public.src` is the permanent table; `pg_temp.src` the session's.
        assert_eq!(renamed("SELECT s.a FROM public.src s"), "SELECT s.a FROM public.src s");
        assert_eq!(renamed("SELECT s.a FROM pg_temp.src s"), r#"SELECT s.a FROM "pg_temp_1_src" s"#);
        assert_eq!(renamed("INSERT INTO src SELECT * FROM t"), r#"INSERT INTO "pg_temp_1_src" SELECT * FROM t"#);
        assert_eq!(renamed("DELETE FROM src WHERE a = 1"), r#"DELETE FROM "pg_temp_1_src" AS src WHERE a = 1"#);
        assert_eq!(renamed("COPY src FROM STDIN"), r#"COPY "pg_temp_1_src" FROM STDIN"#);
        // A CTE of the name shadows the table; other names and quoted ones of other case stay.
        assert_eq!(renamed("WITH src AS (SELECT 1) SELECT * FROM src"), "WITH src AS (SELECT 1) SELECT * FROM src");
        assert_eq!(renamed(r#"SELECT * FROM "SRC", srcs"#), r#"SELECT * FROM "SRC", srcs"#);
        // A window TVF's input.
        assert_eq!(
            renamed("SELECT * FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '1' MINUTE))"),
            "SELECT * FROM tumble('pg_temp_1_src', 'ts', INTERVAL '1' MINUTE)"
        );
    }
}
