//! The persistent catalog: tables, views, materialized views and the jobs that maintain them.
//!
//! The catalog is one value, serialized as JSON and stored by the server in the same atomic
//! RocksDB write as the state changes of the DDL statement that produced it, so a crash during
//! DDL leaves either the old catalog or the new one. This crate knows nothing of RocksDB or of
//! the server: it is the model, its (de)serialization, and the dependency rules.
//!
//! Column types are kept as the Arrow `DataType` display string (`"Int64"`,
//! `"Timestamp(ms)"`), which the server parses back; the user's own spelling is kept in the
//! stored `CREATE` statement.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The format version of the serialized catalog. Bump it with a migration when the shape changes.
pub const CATALOG_VERSION: u32 = 1;

/// Errors of catalog (de)serialization.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The stored bytes are not a catalog of a version this build reads.
    #[error("catalog cannot be read: {0}")]
    Corrupt(String),
}

/// What kind of relation a name refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RelationKind {
    /// A table: a plain table taking DML, or a connector source/sink.
    Table,
    /// A view: a stored query, inlined where it is used; no job, no state.
    View,
    /// A materialized view: a continuous job whose result is kept in a state table.
    MaterializedView,
    /// An `INSERT INTO <connector table> SELECT ...` job: a continuous query writing into the
    /// sink table named by option `sink`. Its name is its job id; it holds no rows.
    SinkJob,
}

impl RelationKind {
    /// The SQL name of the kind ("table", "view", "materialized view").
    pub fn sql_name(self) -> &'static str {
        match self {
            RelationKind::Table => "table",
            RelationKind::View => "view",
            RelationKind::MaterializedView => "materialized view",
            RelationKind::SinkJob => "job",
        }
    }
}

/// One column of a relation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Column {
    /// Column name, as declared (unquoted identifiers lower-cased).
    pub name: String,
    /// The Arrow data type, as its display string.
    pub arrow_type: String,
    /// The SQL type as declared (for DESCRIBE and SHOW CREATE), e.g. `DECIMAL(12, 2)`.
    pub sql_type: String,
    /// Whether NULL is allowed.
    pub nullable: bool,
    /// For a computed column (`name AS expr`), the expression's SQL text.
    pub computed: Option<String>,
}

/// `WATERMARK FOR column AS expr`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Watermark {
    /// The event-time column.
    pub column: String,
    /// The watermark expression's SQL text.
    pub expr: String,
}

/// A table, view or materialized view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relation {
    /// The relation's name (lower-cased unless quoted).
    pub name: String,
    /// Table, view or materialized view.
    pub kind: RelationKind,
    /// The id of the state table holding its rows (tables and materialized views); views have
    /// none.
    pub state_table: Option<u32>,
    /// Columns in order.
    pub columns: Vec<Column>,
    /// Declared primary key column names (`PRIMARY KEY (..) NOT ENFORCED`).
    pub primary_key: Vec<String>,
    /// For materialized views: the indexes of the output columns that form the stream key, if
    /// the plan has one; `None` stores the rows as a multiset.
    pub stream_key: Option<Vec<usize>>,
    /// The watermark declaration, if any.
    pub watermark: Option<Watermark>,
    /// `WITH (...)` options, keys as written.
    pub options: BTreeMap<String, String>,
    /// The statement that created it, as the user wrote it.
    pub definition: String,
    /// For views and materialized views: the query text.
    pub query: Option<String>,
    /// Relations this one reads.
    pub depends_on: Vec<String>,
    /// For materialized views: the job that maintains it.
    pub job: Option<String>,
    /// Operator state tables of the job, by stable name (`<operator index>/<table>`), with
    /// their ids.
    pub operator_state: BTreeMap<String, u32>,
    /// Whether the view was created with `EMIT ON WINDOW CLOSE`.
    pub emit_on_window_close: bool,
    /// For a materialized view or `INSERT INTO` job: the temporary views of the session that
    /// created it that its query reads (views of kind `View`, each with its query), so that
    /// the job plans the same way after the session ends and after a restart (Flink compiles
    /// a job with the temporary views it reads inlined).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub temporary_views: Vec<Relation>,
}

/// The whole catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    /// Format version ([`CATALOG_VERSION`]).
    pub version: u32,
    /// The next free state table id.
    pub next_state_table: u32,
    /// The next free job number.
    pub next_job: u64,
    /// Relations by name.
    pub relations: BTreeMap<String, Relation>,
}

impl Default for Catalog {
    fn default() -> Self {
        Self {
            version: CATALOG_VERSION,
            next_state_table: 1,
            next_job: 1,
            relations: BTreeMap::new(),
        }
    }
}

impl Catalog {
    /// Reads a catalog from its stored bytes.
    ///
    /// # Errors
    /// [`CatalogError::Corrupt`] when the bytes are not JSON of this shape or of another version.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, CatalogError> {
        let catalog: Catalog =
            serde_json::from_slice(bytes).map_err(|e| CatalogError::Corrupt(e.to_string()))?;
        if catalog.version != CATALOG_VERSION {
            return Err(CatalogError::Corrupt(format!(
                "version {} (this build reads {CATALOG_VERSION})",
                catalog.version
            )));
        }
        Ok(catalog)
    }

    /// The bytes to store.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a catalog always serializes")
    }

    /// Allocates a new state table id.
    pub fn allocate_state_table(&mut self) -> u32 {
        let id = self.next_state_table;
        self.next_state_table += 1;
        id
    }

    /// Allocates a new job id, `job-<n>`.
    pub fn allocate_job(&mut self) -> String {
        let id = format!("job-{}", self.next_job);
        self.next_job += 1;
        id
    }

    /// The relation called `name`.
    pub fn get(&self, name: &str) -> Option<&Relation> {
        self.relations.get(name)
    }

    /// The names of the relations that read `name` directly, in name order.
    pub fn dependents(&self, name: &str) -> Vec<&str> {
        self.relations
            .values()
            .filter(|r| r.depends_on.iter().any(|d| d == name))
            .map(|r| r.name.as_str())
            .collect()
    }

    /// `name` and everything that depends on it transitively, dependents first (the order in
    /// which `DROP ... CASCADE` removes them).
    pub fn cascade_order(&self, name: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        self.visit_dependents(name, &mut out);
        out
    }

    fn visit_dependents(&self, name: &str, out: &mut Vec<String>) {
        if out.iter().any(|n| n == name) {
            return;
        }
        for dependent in self.dependents(name) {
            self.visit_dependents(dependent, out);
        }
        out.push(name.to_string());
    }

    /// Materialized views and sink jobs, in the order they must be processed: a view after
    /// everything it reads.
    pub fn jobs_in_dependency_order(&self) -> Vec<&Relation> {
        let mut done: Vec<&str> = Vec::new();
        let mut out = Vec::new();
        let mut pending: Vec<&Relation> = self
            .relations
            .values()
            .filter(|r| matches!(r.kind, RelationKind::MaterializedView | RelationKind::SinkJob))
            .collect();
        while !pending.is_empty() {
            let before = pending.len();
            pending.retain(|r| {
                let ready = r.depends_on.iter().all(|d| {
                    self.get(d).is_none_or(|dep| dep.kind != RelationKind::MaterializedView)
                        || done.contains(&d.as_str())
                });
                if ready {
                    done.push(r.name.as_str());
                    out.push(*r);
                }
                !ready
            });
            if pending.len() == before {
                // A cycle cannot be created through DDL; keep the rest in name order.
                out.append(&mut pending);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(name: &str, kind: RelationKind, deps: &[&str]) -> Relation {
        Relation {
            name: name.into(),
            kind,
            state_table: None,
            columns: vec![],
            primary_key: vec![],
            stream_key: None,
            watermark: None,
            options: BTreeMap::new(),
            definition: String::new(),
            query: None,
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
            job: None,
            operator_state: BTreeMap::new(),
            emit_on_window_close: false,
            temporary_views: Vec::new(),
        }
    }

    #[test]
    fn cascade_drops_dependents_first() {
        let mut c = Catalog::default();
        for r in [
            rel("t", RelationKind::Table, &[]),
            rel("a", RelationKind::MaterializedView, &["t"]),
            rel("b", RelationKind::MaterializedView, &["a"]),
            rel("v", RelationKind::View, &["t"]),
        ] {
            c.relations.insert(r.name.clone(), r);
        }
        assert_eq!(c.cascade_order("t"), vec!["b", "a", "v", "t"]);
        let order: Vec<_> = c.jobs_in_dependency_order().iter().map(|r| r.name.clone()).collect();
        assert_eq!(order, vec!["a", "b"]);
        let bytes = c.to_bytes();
        assert_eq!(Catalog::from_bytes(&bytes).expect("round trip"), c);
    }
}
