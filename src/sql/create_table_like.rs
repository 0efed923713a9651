//! `CREATE TABLE .. LIKE source`: a table with another table's columns (and more), in either of
//! the forms users bring.
//!
//! Flink's, after the column list and `WITH` (Flink docs, CREATE TABLE, "LIKE"; the rules of
//! Flink's `MergeTableLikeUtil` and `SqlTableLike`, followed here with their messages):
//!
//! ```sql
//! CREATE TABLE orders_late (WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
//! WITH ('scan.startup.mode' = 'latest-offset') LIKE orders (EXCLUDING CONSTRAINTS);
//! ```
//!
//! - Like options `{INCLUDING | EXCLUDING | OVERWRITING} {ALL | CONSTRAINTS | GENERATED |
//!   METADATA | OPTIONS | WATERMARKS | PARTITIONS}`; without them `INCLUDING ALL OVERWRITING
//!   OPTIONS`. `ALL` sets every feature, the others then one each; a feature given twice, or
//!   `OVERWRITING` of `ALL`, `CONSTRAINTS` or `PARTITIONS`, is refused.
//! - The source's physical columns come first, always; its computed (GENERATED) and metadata
//!   columns unless excluded; then the new columns. A new physical column may not take a
//!   source column's name; a new computed or metadata column replaces one of its kind (in its
//!   place) only with `OVERWRITING` of that feature.
//! - The source's watermark unless `EXCLUDING WATERMARKS`; a new one for the same column only
//!   with `OVERWRITING WATERMARKS` (a table has one watermark).
//! - The source's primary key with `INCLUDING CONSTRAINTS` (the default); a new one beside it
//!   is refused.
//! - The source's options unless `EXCLUDING OPTIONS`; a new option of a key the source has
//!   replaces it with `OVERWRITING OPTIONS` (the default) and is refused with `INCLUDING`.
//!
//! Postgres's, in the column list (`CREATE TABLE staging (LIKE orders INCLUDING ALL, note
//! TEXT)`): the source's columns where the `LIKE` stands, with their types and `NOT NULL` (a
//! primary key's columns are NOT NULL); a metadata column as a column of its type, a computed
//! one as a column of its type too unless `INCLUDING GENERATED` or `ALL` copies it computed; its
//! primary key with `INCLUDING INDEXES` or `ALL` (Postgres keeps a primary key as an index);
//! never its options or watermark. Postgres's other features (`DEFAULTS`, `COMMENTS`, ..) have nothing to
//! copy here.
//!
//! The table created is the `CREATE TABLE` the merge gives ([`definition`]): `SHOW CREATE TABLE`
//! shows it, and a later change of the source does not reach it.

use std::collections::BTreeMap;

use crate::error::{ErrorKind, Result, WeirError};
use crate::sql::create_table_as::identifier;
use crate::sql::parser::{ColumnSpec, CreateTable, TableLike};

/// How a feature of the source is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strategy {
    Including,
    Excluding,
    Overwriting,
}

/// The strategies of Flink's features.
#[derive(Debug, Clone, Copy)]
struct Strategies {
    constraints: Strategy,
    generated: Strategy,
    metadata: Strategy,
    options: Strategy,
    watermarks: Strategy,
}

/// Flink's like options read: its defaults, then `ALL`, then each feature given.
fn flink_strategies(options: &[(String, String)]) -> Result<Strategies> {
    let mut features: Vec<&str> = Vec::new();
    let mut parsed = Vec::new();
    for (strategy, feature) in options {
        let strategy = match strategy.as_str() {
            "INCLUDING" => Strategy::Including,
            "EXCLUDING" => Strategy::Excluding,
            "OVERWRITING" => Strategy::Overwriting,
            other => {
                return Err(WeirError::syntax(format!("LIKE option '{other}': INCLUDING, EXCLUDING or OVERWRITING"), None))
            }
        };
        if !matches!(feature.as_str(), "ALL" | "CONSTRAINTS" | "GENERATED" | "METADATA" | "OPTIONS" | "WATERMARKS" | "PARTITIONS") {
            return Err(WeirError::syntax(
                format!(
                    "LIKE option feature '{feature}': ALL, CONSTRAINTS, GENERATED, METADATA, OPTIONS, WATERMARKS or PARTITIONS"
                ),
                None,
            ));
        }
        if features.contains(&feature.as_str()) {
            return Err(WeirError::plan("Each like option feature can be declared only once."));
        }
        if strategy == Strategy::Overwriting && matches!(feature.as_str(), "ALL" | "CONSTRAINTS" | "PARTITIONS") {
            return Err(WeirError::plan(format!("Illegal merging strategy 'OVERWRITING' for '{feature}' option.")));
        }
        features.push(feature);
        parsed.push((strategy, feature.as_str()));
    }
    let mut s = Strategies {
        constraints: Strategy::Including,
        generated: Strategy::Including,
        metadata: Strategy::Including,
        options: Strategy::Overwriting,
        watermarks: Strategy::Including,
    };
    if let Some((all, _)) = parsed.iter().find(|(_, f)| *f == "ALL") {
        s = Strategies { constraints: *all, generated: *all, metadata: *all, options: *all, watermarks: *all };
    }
    for (strategy, feature) in parsed {
        match feature {
            "CONSTRAINTS" => s.constraints = strategy,
            "GENERATED" => s.generated = strategy,
            "METADATA" => s.metadata = strategy,
            "OPTIONS" => s.options = strategy,
            "WATERMARKS" => s.watermarks = strategy,
            // Weir's tables have no partitions; ALL was applied first.
            _ => {}
        }
    }
    Ok(s)
}

/// `t` (a `CREATE TABLE` with a `LIKE`) with `source`'s columns, key, watermark and options
/// merged in as its form's rules say, and no `LIKE`.
///
/// # Errors
/// `Syntax` for a like option that is none; `Plan` with Flink's message for what its rules
/// refuse; `DuplicateColumn` (42701) for two columns of a name in Postgres's form.
///
/// `computed_types` are the types of `source`'s computed columns (as SQL text), which
/// Postgres's form copies as columns of that type without `INCLUDING GENERATED`.
pub fn merged(t: &CreateTable, like: &TableLike, source: &CreateTable, computed_types: &BTreeMap<String, String>) -> Result<CreateTable> {
    match like.at {
        Some(at) => postgres_merged(t, like, at, source, computed_types),
        None => flink_merged(t, like, source),
    }
}

fn flink_merged(t: &CreateTable, like: &TableLike, source: &CreateTable) -> Result<CreateTable> {
    let s = flink_strategies(&like.options)?;
    let kind_of = |c: &ColumnSpec| match (&c.computed, &c.metadata) {
        (Some(_), _) => "computed",
        (None, Some(_)) => "metadata",
        (None, None) => "physical",
    };
    let mut columns: Vec<ColumnSpec> = source
        .columns
        .iter()
        .filter(|c| match kind_of(c) {
            "computed" => s.generated != Strategy::Excluding,
            "metadata" => s.metadata != Strategy::Excluding,
            _ => true,
        })
        .cloned()
        .collect();
    for column in &t.columns {
        let Some(at) = columns.iter().position(|c| c.name == column.name) else {
            columns.push(column.clone());
            continue;
        };
        let name = &column.name;
        let (kind, strategy, feature) = match kind_of(column) {
            "physical" => return Err(WeirError::plan(format!("A column named '{name}' already exists in the base table."))),
            "computed" => ("Computed", s.generated, "GENERATED"),
            _ => ("Metadata", s.metadata, "METADATA"),
        };
        if kind_of(&columns[at]) != kind_of(column) {
            return Err(WeirError::plan(format!(
                "A column named '{name}' already exists in the base table. {kind} columns can only overwrite other {} columns.",
                kind.to_lowercase()
            )));
        }
        if strategy != Strategy::Overwriting {
            let what = if feature == "GENERATED" { "generated" } else { "metadata" };
            return Err(WeirError::plan(format!(
                "A {what} column named '{name}' already exists in the base table. You might want to specify EXCLUDING \
                 {feature} or OVERWRITING {feature}."
            )));
        }
        columns[at] = column.clone();
    }
    let mut watermark = source.watermark.clone().filter(|_| s.watermarks != Strategy::Excluding);
    if let Some((column, expr)) = &t.watermark {
        match &watermark {
            Some((base, _)) if base == column && s.watermarks != Strategy::Overwriting => {
                return Err(WeirError::plan(format!(
                    "There already exists a watermark spec for column '{column}' in the base table. You might want to \
                     specify EXCLUDING WATERMARKS or OVERWRITING WATERMARKS."
                )))
            }
            Some((base, _)) if base != column => {
                return Err(WeirError::plan(format!(
                    "The base table has a watermark for column '{base}', and a table has one: specify EXCLUDING \
                     WATERMARKS to declare one for '{column}'."
                )))
            }
            _ => watermark = Some((column.clone(), expr.clone())),
        }
    }
    let mut primary_key = match s.constraints {
        Strategy::Including => source.primary_key.clone(),
        _ => Vec::new(),
    };
    if !t.primary_key.is_empty() {
        if !primary_key.is_empty() {
            return Err(WeirError::plan(
                "The base table already has a primary key. You might want to specify EXCLUDING CONSTRAINTS.",
            ));
        }
        primary_key = t.primary_key.clone();
    }
    let mut options: BTreeMap<String, String> = match s.options {
        Strategy::Excluding => BTreeMap::new(),
        _ => source.options.clone(),
    };
    for (key, value) in &t.options {
        if let Some(base) = options.get(key).filter(|_| s.options != Strategy::Overwriting) {
            return Err(WeirError::plan(format!(
                "There already exists an option ['{key}' -> '{base}'] in the base table. You might want to specify \
                 EXCLUDING OPTIONS or OVERWRITING OPTIONS."
            )));
        }
        options.insert(key.clone(), value.clone());
    }
    Ok(CreateTable { columns, primary_key, watermark, options, like: None, ..t.clone() })
}

fn postgres_merged(
    t: &CreateTable,
    like: &TableLike,
    at: usize,
    source: &CreateTable,
    computed_types: &BTreeMap<String, String>,
) -> Result<CreateTable> {
    let (mut generated, mut indexes) = (false, false);
    for (strategy, feature) in &like.options {
        let including = strategy == "INCLUDING";
        match feature.as_str() {
            "ALL" => (generated, indexes) = (including, including),
            "GENERATED" => generated = including,
            "INDEXES" => indexes = including,
            "COMMENTS" | "COMPRESSION" | "CONSTRAINTS" | "DEFAULTS" | "IDENTITY" | "STATISTICS" | "STORAGE" => {}
            other => {
                return Err(WeirError::syntax(
                    format!(
                        "LIKE option '{other}': ALL, COMMENTS, COMPRESSION, CONSTRAINTS, DEFAULTS, GENERATED, IDENTITY, \
                         INDEXES, STATISTICS or STORAGE"
                    ),
                    None,
                ))
            }
        }
    }
    let mut copied = Vec::new();
    for c in &source.columns {
        // A primary key's columns are NOT NULL, which Postgres copies.
        let not_null = c.not_null || source.primary_key.contains(&c.name);
        copied.push(match &c.computed {
            // A metadata column's value is data of its type here.
            None => ColumnSpec { metadata: None, is_virtual: false, not_null, ..c.clone() },
            Some(_) if generated => c.clone(),
            // Without GENERATED, Postgres copies a generated column as a column of its type.
            Some(_) => {
                let Some(text) = computed_types.get(&c.name) else {
                    return Err(WeirError::internal(format!("no type of computed column {} of {}", c.name, like.source)));
                };
                let data_type = Some(crate::sql::parser::parse_data_type(text)?);
                ColumnSpec { data_type, computed: None, metadata: None, is_virtual: false, not_null: false, ..c.clone() }
            }
        });
    }
    let at = at.min(t.columns.len());
    let columns: Vec<ColumnSpec> = t.columns[..at].iter().cloned().chain(copied).chain(t.columns[at..].iter().cloned()).collect();
    for (i, c) in columns.iter().enumerate() {
        if columns[..i].iter().any(|d| d.name == c.name) {
            return Err(WeirError::new(ErrorKind::DuplicateColumn(format!("column \"{}\" specified more than once", c.name))));
        }
    }
    let primary_key = match (t.primary_key.is_empty(), indexes && !source.primary_key.is_empty()) {
        (true, true) => source.primary_key.clone(),
        (false, true) => {
            return Err(WeirError::plan(format!(
                "multiple primary keys for table \"{}\" are not allowed (LIKE {} INCLUDING INDEXES copies one)",
                t.name, like.source
            )))
        }
        _ => t.primary_key.clone(),
    };
    Ok(CreateTable { columns, primary_key, like: None, ..t.clone() })
}

/// The `CREATE TABLE` text of `t` (without `IF NOT EXISTS`, which was decided), as it reads back.
pub fn definition(t: &CreateTable) -> String {
    let columns: Vec<String> = t
        .columns
        .iter()
        .map(|c| {
            let name = identifier(&c.name);
            match (&c.computed, &c.data_type) {
                (Some(expr), _) => format!("{name} AS {expr}"),
                (None, data_type) => {
                    let mut item = format!("{name} {}", data_type.as_ref().map(type_text).unwrap_or_default());
                    if c.not_null {
                        item.push_str(" NOT NULL");
                    }
                    if let Some(key) = &c.metadata {
                        item.push_str(&format!(" METADATA FROM '{}'", key.replace('\'', "''")));
                        if c.is_virtual {
                            item.push_str(" VIRTUAL");
                        }
                    }
                    item
                }
            }
        })
        .collect();
    create_table_text(t, columns)
}

/// `CREATE [TEMPORARY] TABLE name (columns, PRIMARY KEY (..) NOT ENFORCED, WATERMARK FOR c AS
/// expr) [WITH (..)]` of `t`'s name, key, watermark and options, with `columns` already written.
pub(crate) fn create_table_text(t: &CreateTable, mut items: Vec<String>) -> String {
    if !t.primary_key.is_empty() {
        let key: Vec<String> = t.primary_key.iter().map(|c| identifier(c)).collect();
        items.push(format!("PRIMARY KEY ({}) NOT ENFORCED", key.join(", ")));
    }
    if let Some((column, expr)) = &t.watermark {
        items.push(format!("WATERMARK FOR {} AS {expr}", identifier(column)));
    }
    let head = format!(
        "CREATE {}TABLE {} ({})",
        if t.temporary { "TEMPORARY " } else { "" },
        identifier(&t.name),
        items.join(", ")
    );
    match t.options.is_empty() {
        true => head,
        false => crate::sql::ddl::with_options(&head, None, &t.options),
    }
}

/// A declared type as written, but nested ones in Flink's spelling (`ROW<..>`, `MAP<K, V>`),
/// which the parser's rewrite turned into sqlparser's.
fn type_text(t: &sqlparser::ast::DataType) -> String {
    match crate::sql::types::arrow_type(t) {
        Ok(arrow) => crate::sql::ddl::declared_type_name(t, &arrow),
        Err(_) => t.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::parser::{parse_statement, WeirStatement};

    fn table(sql: &str) -> CreateTable {
        match parse_statement(sql).expect("parses") {
            WeirStatement::CreateTable(t) => *t,
            other => panic!("not a CREATE TABLE: {other:?}"),
        }
    }

    const ORDERS: &str = "CREATE TABLE orders (id BIGINT NOT NULL, amount DECIMAL(10, 2), ts TIMESTAMP(3), \
        part INT METADATA FROM 'partition', day AS CAST(ts AS DATE), PRIMARY KEY (id) NOT ENFORCED, \
        WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json')";

    fn merge(sql: &str) -> Result<String> {
        let t = table(sql);
        let like = t.like.clone().expect("a LIKE");
        let computed_types = BTreeMap::from([("day".to_string(), "DATE".to_string())]);
        merged(&t, &like, &table(ORDERS), &computed_types).map(|m| definition(&m))
    }

    // Flink's documentation example: a watermark added, an option overwritten; every other
    // feature included by default.
    #[test]
    fn flink_like_includes_all_and_overwrites_options_by_default() -> Result<()> {
        assert_eq!(
            merge("CREATE TABLE o2 (note STRING) WITH ('topic' = 'o2') LIKE orders")?,
            "CREATE TABLE o2 (id BIGINT NOT NULL, amount DECIMAL(10,2), ts TIMESTAMP(3), part INT METADATA FROM 'partition', \
             day AS CAST(ts AS DATE), note STRING, PRIMARY KEY (id) NOT ENFORCED, WATERMARK FOR ts AS ts - INTERVAL '1' \
             SECOND) WITH ('connector' = 'kafka', 'format' = 'json', 'topic' = 'o2')"
        );
        assert_eq!(
            merge("CREATE TABLE o3 WITH ('connector' = 'blackhole') LIKE orders (EXCLUDING ALL)")?,
            "CREATE TABLE o3 (id BIGINT NOT NULL, amount DECIMAL(10,2), ts TIMESTAMP(3)) WITH ('connector' = 'blackhole')"
        );
        assert_eq!(
            merge("CREATE TABLE o4 (WATERMARK FOR ts AS ts) LIKE orders (OVERWRITING WATERMARKS EXCLUDING GENERATED)")?,
            "CREATE TABLE o4 (id BIGINT NOT NULL, amount DECIMAL(10,2), ts TIMESTAMP(3), part INT METADATA FROM 'partition', \
             PRIMARY KEY (id) NOT ENFORCED, WATERMARK FOR ts AS ts) WITH ('connector' = 'kafka', 'format' = 'json', \
             'topic' = 'orders')"
        );
        Ok(())
    }

    #[test]
    fn flink_like_refuses_what_its_rules_refuse() {
        let refused = |sql: &str, message: &str| {
            let e = merge(sql).expect_err(sql).to_string();
            assert!(e.contains(message), "{sql}: {e}");
        };
        refused("CREATE TABLE x (amount INT) LIKE orders", "A column named 'amount' already exists in the base table.");
        refused("CREATE TABLE x (day AS ts) LIKE orders", "You might want to specify EXCLUDING GENERATED or OVERWRITING GENERATED.");
        refused("CREATE TABLE x (WATERMARK FOR ts AS ts) LIKE orders", "There already exists a watermark spec for column 'ts'");
        refused("CREATE TABLE x (PRIMARY KEY (amount) NOT ENFORCED) LIKE orders", "The base table already has a primary key.");
        refused("CREATE TABLE x WITH ('topic' = 'y') LIKE orders (INCLUDING OPTIONS)", "There already exists an option ['topic' -> 'orders']");
        refused("CREATE TABLE x LIKE orders (OVERWRITING CONSTRAINTS)", "Illegal merging strategy 'OVERWRITING' for 'CONSTRAINTS' option.");
        refused("CREATE TABLE x LIKE orders (INCLUDING OPTIONS EXCLUDING OPTIONS)", "Each like option feature can be declared only once.");
    }

    #[test]
    fn postgres_like_copies_columns_where_it_stands() -> Result<()> {
        assert_eq!(
            merge("CREATE TEMP TABLE s (note TEXT, LIKE orders, n INT)")?,
            "CREATE TEMPORARY TABLE s (note TEXT, id BIGINT NOT NULL, amount DECIMAL(10,2), ts TIMESTAMP(3), part INT, day DATE, n INT)"
        );
        assert_eq!(
            merge("CREATE TABLE s (LIKE orders INCLUDING ALL EXCLUDING GENERATED)")?,
            "CREATE TABLE s (id BIGINT NOT NULL, amount DECIMAL(10,2), ts TIMESTAMP(3), part INT, day DATE, PRIMARY KEY (id) NOT \
             ENFORCED)"
        );
        assert_eq!(merge("CREATE TABLE s (LIKE orders, id INT)").unwrap_err().sqlstate(), "42701");
        Ok(())
    }
}
