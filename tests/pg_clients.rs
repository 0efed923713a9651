//! What drivers see of Weir's Postgres side beyond rows: output column names as Postgres
//! names them, counts and ranks typed bigint, and the statements SQLAlchemy's psycopg dialect sends when it connects
//! (`initialize`: the server version, the schema, the isolation level, standard strings, the
//! `hstore` type lookup), sent here with tokio-postgres, as simple and as extended queries.

mod common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_columns_and_a_drivers_connect_queries() {
    let dir = common::scratch_dir("pg-clients");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client.batch_execute("CREATE TABLE pg_c (id INT, name VARCHAR)").await.expect("table");

    // Postgres's names: a column's own, a function's, else ?column? (also for duplicates).
    let names = |stmt: &tokio_postgres::Statement| stmt.columns().iter().map(|c| c.name().to_string()).collect::<Vec<_>>();
    let stmt = client.prepare("SELECT 1, 2, count(*), max(id), id + 1 AS next, name FROM pg_c GROUP BY id, name").await.expect("prepare");
    assert_eq!(names(&stmt), ["?column?", "?column?", "count", "max", "next", "name"]);
    let rows = client.simple_query("SELECT 1, 'a'::text, CAST(2 AS BIGINT)").await.expect("simple");
    let Some(tokio_postgres::SimpleQueryMessage::RowDescription(columns)) = rows.first() else { panic!("no row description: {rows:?}") };
    let simple: Vec<&str> = columns.iter().map(|c| c.name()).collect();
    assert_eq!(simple, ["?column?", "text", "int8"]);
    let stmt = client.prepare("SELECT pg_backend_pid(), current_user, 'pg_c'::regclass").await.expect("prepare");
    assert_eq!(names(&stmt), ["pg_backend_pid", "current_user", "regclass"]);
    // Repeated output columns, which Postgres allows: each keeps its value and its name.
    client.batch_execute("INSERT INTO pg_c VALUES (7, 'r')").await.expect("row");
    let stmt = client.prepare("SELECT 1, 1, id, pg_c.id, current_user, user, count(*), count(*) FROM pg_c GROUP BY id").await.expect("repeated");
    assert_eq!(names(&stmt), ["?column?", "?column?", "id", "id", "current_user", "user", "count", "count"]);
    let row = client.query_one(&stmt, &[]).await.expect("row");
    let values: (i64, i64, i32, i32, String, String, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4), row.get(5), row.get(6), row.get(7));
    assert_eq!(values, (1, 1, 7, 7, "weir".into(), "weir".into(), 1, 1));
    client.batch_execute("DELETE FROM pg_c").await.expect("delete");

    // Counts and ranks are bigint, as in Postgres and Flink (not numeric).
    client
        .batch_execute(
            "INSERT INTO pg_c VALUES (1, 'a'), (2, 'a'), (3, 'b');
             CREATE MATERIALIZED VIEW pg_c_ranked AS
             SELECT id, rn FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY name ORDER BY id DESC) AS rn FROM pg_c) WHERE rn <= 2",
        )
        .await
        .expect("view");
    let stmt = client.prepare("SELECT count(*), rn FROM pg_c_ranked GROUP BY rn ORDER BY rn").await.expect("prepare");
    let types: Vec<&tokio_postgres::types::Type> = stmt.columns().iter().map(|c| c.type_()).collect();
    assert_eq!(types, [&tokio_postgres::types::Type::INT8, &tokio_postgres::types::Type::INT8]);
    let counts: Vec<(i64, i64)> = client.query(&stmt, &[]).await.expect("binary bigint").iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(counts, [(2, 1), (1, 2)]);

    // SQLAlchemy 2's psycopg dialect at connect (dialect.initialize), in order.
    let version: String = client.query_one("select pg_catalog.version()", &[]).await.expect("version").get(0);
    assert!(version.starts_with("PostgreSQL 16.0 "), "{version}");
    let schema: String = client.query_one("select current_schema()", &[]).await.expect("schema").get(0);
    assert_eq!(schema, "public");
    for (sql, want) in [("show transaction isolation level", "read committed"), ("show standard_conforming_strings", "on")] {
        let rows = client.simple_query(sql).await.expect(sql);
        let value = rows.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        });
        assert_eq!(value.as_deref(), Some(want), "{sql}");
    }
    let hstore = client
        .query("SELECT t.oid, typarray FROM pg_type t JOIN pg_namespace ns ON typnamespace = ns.oid WHERE typname = 'hstore'", &[])
        .await
        .expect("hstore lookup");
    assert!(hstore.is_empty(), "no hstore type");
    // SQLAlchemy's has_table / get_table_names.
    let tables: Vec<String> = client
        .query(
            "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relkind = ANY (ARRAY['r', 'p', 'f', 'v', 'm']) AND c.relname = $2",
            &[&"public", &"pg_c"],
        )
        .await
        .expect("has_table")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(tables, ["pg_c"]);
}
