//! `CREATE TABLE .. AS query` (CTAS): a table whose columns are the query's, with its rows.
//!
//! Both meanings a user brings are the one statement's, told apart as `INSERT INTO` tells them:
//! - with a connector (`WITH ('connector' = 'kafka', ..)`), Flink's CTAS: the table is created
//!   and the continuous job `INSERT INTO t query` starts writing into it (`SHOW JOBS` shows the
//!   CTAS as its statement). Flink's primary key and watermark may be declared before `AS`
//!   (`CREATE TABLE t (PRIMARY KEY (id) NOT ENFORCED) WITH (..) AS ..`), as in Flink 2. An
//!   unnamed expression's column is `EXPR$<position>`, as Flink names it.
//! - a plain table, Postgres's CTAS: the table is filled once with the query's rows at the
//!   last committed epoch, tagged `SELECT n`; `CREATE TABLE t (a, b) AS ..` renames the
//!   query's first columns, and `WITH NO DATA` creates it empty.
//!
//! Either way the table is what `CREATE TABLE` of the query's columns makes: its stored
//! definition ([`table_definition`], what `SHOW CREATE TABLE` shows and a restart reads) is
//! that `CREATE TABLE`, the columns named and typed as the query's result (Flink's type names;
//! nullable, but a primary key's columns). If the rows cannot be written or the job cannot
//! start, the table is dropped again, so a failed CTAS leaves nothing (Postgres's: one
//! transaction; Flink's with `table.rtas-ctas.atomicity-enabled`).

use arrow::datatypes::{DataType, Schema};

use crate::error::{ErrorKind, Result, WeirError};
use crate::sql::parser::CreateTableAs;

/// The `CREATE TABLE` text of the table `ctas` creates, given `schema`, the result schema of
/// its query: `CREATE [TEMPORARY] TABLE name (col TYPE, .., PRIMARY KEY (..) NOT ENFORCED,
/// WATERMARK FOR c AS expr) [WITH (..)]`.
///
/// # Errors
/// `Syntax` (42601, Postgres's) for more column names than the query has columns;
/// `DuplicateColumn` (42701) for two columns of one name; `Plan` for a primary key or
/// watermark naming no column.
pub fn table_definition(ctas: &CreateTableAs, schema: &Schema) -> Result<String> {
    let t = &ctas.table;
    if ctas.column_names.len() > schema.fields().len() {
        return Err(WeirError::syntax(
            format!(
                "CREATE TABLE AS specifies too many column names: {} names for the query's {} columns",
                ctas.column_names.len(),
                schema.fields().len()
            ),
            None,
        ));
    }
    // Flink names a connector table's unnamed expressions `EXPR$<position>`; Postgres's
    // `?column?` is kept for a plain table (two of them are refused, as Postgres refuses them).
    let flink = t.options.contains_key("connector");
    let names: Vec<String> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| match ctas.column_names.get(i) {
            Some(name) => name.clone(),
            None if flink && f.name() == "?column?" => format!("EXPR${i}"),
            None => f.name().clone(),
        })
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(WeirError::new(ErrorKind::DuplicateColumn(format!(
                "column \"{name}\" specified more than once: the query of CREATE TABLE {} AS has two columns of that name; \
                 give them distinct aliases",
                t.name
            ))));
        }
    }
    let declared = |column: &str, what: &str| match names.contains(&column) {
        true => Ok(()),
        false => Err(WeirError::plan(format!("{what} column \"{column}\" is not a column of the query of CREATE TABLE {} AS", t.name))),
    };
    for column in &t.primary_key {
        declared(column, "primary key")?;
    }
    if let Some((column, _)) = &t.watermark {
        declared(column, "watermark")?;
    }
    let columns: Vec<String> = names
        .iter()
        .zip(schema.fields())
        .map(|(name, f)| format!("{} {}", identifier(name), column_type(f.data_type())))
        .collect();
    Ok(crate::sql::create_table_like::create_table_text(t, columns))
}

/// The type a column of Arrow type `t` is declared with: Flink's name of it
/// ([`crate::sql::show::sql_type_name`]); a bare `NULL`'s column is a STRING, as Postgres
/// makes a CTAS column of an untyped literal `text`.
fn column_type(t: &DataType) -> String {
    match t {
        DataType::Null => "STRING".into(),
        other => crate::sql::show::sql_type_name(other),
    }
}

/// Postgres's reserved key words (its `quote_ident` quotes them), and `watermark`, which
/// starts a clause where a column of `CREATE TABLE` would.
const RESERVED: &[&str] = &[
    "all", "analyse", "analyze", "and", "any", "array", "as", "asc", "asymmetric", "both", "case", "cast", "check",
    "collate", "column", "constraint", "create", "current_catalog", "current_date", "current_role", "current_time",
    "current_timestamp", "current_user", "default", "deferrable", "desc", "distinct", "do", "else", "end", "except",
    "false", "fetch", "for", "foreign", "from", "grant", "group", "having", "in", "initially", "intersect", "into",
    "lateral", "leading", "limit", "localtime", "localtimestamp", "not", "null", "offset", "on", "only", "or",
    "order", "placing", "primary", "references", "returning", "select", "session_user", "some", "symmetric", "table",
    "then", "to", "trailing", "true", "union", "unique", "user", "using", "variadic", "watermark", "when", "where",
    "window", "with",
];

/// `name` as it reads back in SQL: bare if it is a lower-case word and not reserved, else in
/// double quotes.
pub(crate) fn identifier(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    match plain && !RESERVED.contains(&name) {
        true => name.to_string(),
        false => format!("\"{}\"", name.replace('"', "\"\"")),
    }
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{Field, TimeUnit};

    use super::*;
    use crate::sql::parser::{parse_statement, WeirStatement};

    fn ctas(sql: &str) -> CreateTableAs {
        match parse_statement(sql).expect("parses") {
            WeirStatement::CreateTableAs(c) => *c,
            other => panic!("not a CTAS: {other:?}"),
        }
    }

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("Total", DataType::Decimal128(12, 2), true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new("count", DataType::Int64, true),
        ])
    }

    #[test]
    fn the_definition_declares_the_query_columns_in_flink_type_names() -> Result<()> {
        let c = ctas(
            "CREATE TABLE out (PRIMARY KEY (id) NOT ENFORCED, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) \
             WITH ('connector' = 'print') AS SELECT 1",
        );
        assert_eq!(
            table_definition(&c, &schema())?,
            "CREATE TABLE out (id BIGINT, \"Total\" DECIMAL(12, 2), ts TIMESTAMP(3), count BIGINT, PRIMARY KEY (id) NOT \
             ENFORCED, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'print')"
        );
        // And it reads back as the CREATE TABLE it is.
        let WeirStatement::CreateTable(t) = parse_statement(&table_definition(&c, &schema())?)? else { panic!("a CREATE TABLE") };
        assert_eq!(t.columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["id", "Total", "ts", "count"]);
        assert_eq!(t.primary_key, ["id"]);
        Ok(())
    }

    #[test]
    fn postgres_column_names_rename_the_first_columns() -> Result<()> {
        let c = ctas("CREATE TEMP TABLE t (a, b) AS SELECT 1 WITH NO DATA");
        assert!(!c.with_data);
        assert_eq!(
            table_definition(&c, &schema())?,
            "CREATE TEMPORARY TABLE t (a BIGINT, b DECIMAL(12, 2), ts TIMESTAMP(3), count BIGINT)"
        );
        let too_many = ctas("CREATE TABLE t (a, b, c, d, e) AS SELECT 1");
        assert!(table_definition(&too_many, &schema()).unwrap_err().to_string().contains("too many column names"));
        let twice = ctas("CREATE TABLE t (ts) AS SELECT 1");
        assert_eq!(table_definition(&twice, &schema()).unwrap_err().sqlstate(), "42701");
        Ok(())
    }

    #[test]
    fn typed_columns_and_names_without_a_query_are_refused() {
        assert!(parse_statement("CREATE TABLE t (a INT) AS SELECT 1").unwrap_err().to_string().contains("from the query"));
        assert!(parse_statement("CREATE TABLE t (a, b)").unwrap_err().to_string().contains("needs a type"));
        assert!(matches!(parse_statement("CREATE TABLE t (a INT)"), Ok(WeirStatement::CreateTable(_))));
    }
}
