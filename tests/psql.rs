//! psql's describe commands (`\d`, `\dt`, `\dv`, `\dm`, `\d NAME`) against a real server, run
//! through the real psql binary (Debian's `postgresql-client`).
//!
//! psql answers these commands with queries on `pg_catalog` that Weir answers from its own
//! catalog (src/sql/pg_catalog.rs). The expected lines are what psql prints for these objects
//! by Postgres's conventions: schema `public`, the owner is the role that connected (`weir`),
//! types in `format_type`'s spelling (`bigint`, `integer`, `text`, `numeric(12,2)`,
//! `timestamp(3) without time zone`), "not null" for a primary key column and a `NOT NULL`
//! one, and never for the columns of views and materialized views (Postgres keeps no
//! nullability for them). Output is unaligned (`-A`, `|` between fields) so each line can be
//! compared exactly, with `LC_ALL=C` so psql's messages are in English.

mod common;

use std::process::{Command, Output};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// psql's output of `command`: stdout, stderr and whether it succeeded.
struct PsqlRun {
    stdout: String,
    stderr: String,
    success: bool,
}

/// Runs `psql -c command` against the server on `port`, unaligned.
fn psql(port: u16, command: &str) -> Result<PsqlRun, Box<dyn std::error::Error>> {
    let output: Output = Command::new("psql")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "weir", "-d", "weir", "-X", "-A"])
        .args(["-v", "ON_ERROR_STOP=1", "-c", command])
        .env("LC_ALL", "C")
        .env_remove("PGPASSWORD")
        .env_remove("PGSERVICE")
        .output()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                format!("psql is not installed: install postgresql-client (apt-get install postgresql-client); {e}")
            } else {
                format!("cannot run psql: {e}")
            }
        })?;
    Ok(PsqlRun {
        stdout: String::from_utf8(output.stdout)?,
        stderr: String::from_utf8(output.stderr)?,
        success: output.status.success(),
    })
}

/// Runs `command`, which must succeed, and returns its stdout.
fn psql_ok(port: u16, command: &str) -> Result<String, Box<dyn std::error::Error>> {
    let run = psql(port, command)?;
    if !run.success || !run.stderr.is_empty() {
        return Err(format!("psql -c {command:?} failed\n--- stdout\n{}--- stderr\n{}", run.stdout, run.stderr).into());
    }
    Ok(run.stdout)
}

/// Asserts that `expected` appears in `output` as consecutive whole lines.
fn assert_lines(command: &str, output: &str, expected: &[&str]) {
    let lines: Vec<&str> = output.lines().collect();
    let found = lines.windows(expected.len()).any(|w| w == expected);
    assert!(found, "psql -c {command:?}: expected these lines\n{}\n--- in its output\n{output}", expected.join("\n"));
}

#[test]
fn psql_describe_commands() -> TestResult {
    let dir = common::scratch_dir("psql");
    let server = common::Server::start(&dir.join("data"));
    let port = server.port;

    // An empty database: psql's own message for an empty list.
    let run = psql(port, "\\d")?;
    assert!(
        run.stdout.contains("Did not find any relations.") || run.stderr.contains("Did not find any relations."),
        "\\d on an empty database\n--- stdout\n{}--- stderr\n{}",
        run.stdout,
        run.stderr
    );

    psql_ok(
        port,
        "CREATE TABLE orders (
            order_id  BIGINT,
            seller_id STRING,
            amount    DECIMAL(12, 2),
            placed_at TIMESTAMP(3),
            qty       INT NOT NULL,
            PRIMARY KEY (order_id) NOT ENFORCED
        )",
    )?;
    psql_ok(port, "CREATE VIEW big_orders AS SELECT order_id, amount FROM orders WHERE amount > 100")?;
    psql_ok(
        port,
        "CREATE MATERIALIZED VIEW revenue AS
         SELECT seller_id, COUNT(*) AS num_orders, SUM(qty) AS units FROM orders GROUP BY seller_id",
    )?;

    let out = psql_ok(port, "\\d")?;
    assert_lines(
        "\\d",
        &out,
        &[
            "List of relations",
            "Schema|Name|Type|Owner",
            "public|big_orders|view|weir",
            "public|orders|table|weir",
            "public|revenue|materialized view|weir",
            "(3 rows)",
        ],
    );

    let out = psql_ok(port, "\\dt")?;
    assert_lines("\\dt", &out, &["Schema|Name|Type|Owner", "public|orders|table|weir", "(1 row)"]);
    let out = psql_ok(port, "\\dv")?;
    assert_lines("\\dv", &out, &["Schema|Name|Type|Owner", "public|big_orders|view|weir", "(1 row)"]);
    let out = psql_ok(port, "\\dm")?;
    assert_lines("\\dm", &out, &["Schema|Name|Type|Owner", "public|revenue|materialized view|weir", "(1 row)"]);
    // One database, weir, owned by the one role; UTF8, C collation, libc provider, no ACL.
    let out = psql_ok(port, "\\l")?;
    assert_lines("\\l", &out, &["weir|weir|UTF8|C|C||libc|", "(1 row)"]);
    // No user-defined functions: the list is empty, as in a fresh Postgres database.
    let out = psql_ok(port, "\\df")?;
    assert_lines("\\df", &out, &["List of functions", "Schema|Name|Result data type|Argument data types|Type", "(0 rows)"]);

    let out = psql_ok(port, "\\d orders")?;
    assert_lines(
        "\\d orders",
        &out,
        &[
            "Table \"public.orders\"",
            "Column|Type|Collation|Nullable|Default",
            "order_id|bigint||not null|",
            "seller_id|text|||",
            "amount|numeric(12,2)|||",
            "placed_at|timestamp(3) without time zone|||",
            "qty|integer||not null|",
        ],
    );

    let out = psql_ok(port, "\\d big_orders")?;
    assert_lines(
        "\\d big_orders",
        &out,
        &[
            "View \"public.big_orders\"",
            "Column|Type|Collation|Nullable|Default",
            "order_id|bigint|||",
            "amount|numeric(12,2)|||",
        ],
    );

    let out = psql_ok(port, "\\d revenue")?;
    assert_lines(
        "\\d revenue",
        &out,
        &[
            "Materialized view \"public.revenue\"",
            "Column|Type|Collation|Nullable|Default",
            "seller_id|text|||",
            "num_orders|bigint|||",
            "units|bigint|||",
        ],
    );

    // A schema-qualified name and a wildcard pattern.
    let out = psql_ok(port, "\\d public.orders")?;
    assert_lines("\\d public.orders", &out, &["Table \"public.orders\""]);
    let out = psql_ok(port, "\\dt ord*")?;
    assert_lines("\\dt ord*", &out, &["public|orders|table|weir", "(1 row)"]);

    // A name that matches nothing: psql's message, and a failed command.
    let run = psql(port, "\\d no_such_relation")?;
    assert!(!run.success, "\\d of a missing relation should fail");
    assert!(
        run.stderr.contains("Did not find any relation named \"no_such_relation\"."),
        "\\d no_such_relation\n--- stderr\n{}",
        run.stderr
    );
    Ok(())
}

/// psql shows where a statement went wrong (`LINE 1:` and a caret under the position the
/// server sent, Postgres's `P` field): at a syntax error's token, and at an unknown column's or
/// relation's first mention, as Postgres points `column "nme" does not exist` and `relation
/// "itemz" does not exist`. The caret stands under
/// character `position` of the statement, after the 8 characters of `LINE 1: `.
#[test]
fn psql_points_at_the_error() -> TestResult {
    let dir = common::scratch_dir("psql_position");
    let server = common::Server::start(&dir.join("data"));
    let port = server.port;
    psql_ok(port, "CREATE TABLE items (id INT, name TEXT)")?;

    let cases = [
        // The unknown column `nme` starts at character 12; the string 'nme' before it is no
        // mention.
        ("SELECT id, nme FROM items", 12),
        ("SELECT 'nme' AS s FROM items WHERE NME > 1", 36),
        ("UPDATE items SET name = 'x' WHERE nme = 1", 35),
        // A syntax error: `FRM` is taken for an alias, then `items` is unexpected.
        ("SELECT id FRM items", 15),
        // A select list that ends with a comma: at FROM.
        ("SELECT id, FROM items", 12),
        // An unknown relation, at its name (Postgres: `relation "itemz" does not exist`).
        ("SELECT id FROM itemz", 16),
        ("SELECT i.id FROM items i JOIN public.itemz z ON i.id = z.id", 31),
        ("INSERT INTO itemz VALUES (1)", 13),
    ];
    for (sql, position) in cases {
        let run = psql(port, sql)?;
        assert!(!run.success, "{sql} succeeded");
        let caret = format!("{}^", " ".repeat(8 + position - 1));
        assert_lines(sql, &run.stderr, &[&format!("LINE 1: {sql}"), &caret]);
    }
    Ok(())
}

/// Output columns as Postgres names them where two share a name (a wildcard beside a column of
/// it, an alias another column's name takes), and the command tags of `CREATE TABLE .. AS`
/// (`SELECT n`, Postgres's) and `TRUNCATE`, as psql shows them.
#[test]
fn psql_shows_repeated_column_names_and_ctas_tags() -> TestResult {
    let dir = common::scratch_dir("psql-names");
    let server = common::Server::start(&dir.join("data"));
    let port = server.port;
    psql_ok(port, "CREATE TABLE t (id INT, a INT)")?;
    psql_ok(port, "INSERT INTO t VALUES (1, 10), (2, 5)")?;
    let out = psql_ok(port, "SELECT *, id FROM t ORDER BY 1")?;
    assert_lines("SELECT *, id", &out, &["id|a|id", "1|10|1", "2|5|2", "(2 rows)"]);
    let out = psql_ok(port, "SELECT id, a AS id FROM t ORDER BY 1")?;
    assert_lines("SELECT id, a AS id", &out, &["id|id", "1|10", "2|5", "(2 rows)"]);
    // `ORDER BY` the alias: by a * 2, 10 before 20.
    let out = psql_ok(port, "SELECT *, a * 2 AS \"Dbl\" FROM t ORDER BY \"Dbl\"")?;
    assert_lines("SELECT *, a * 2 AS \"Dbl\"", &out, &["id|a|Dbl", "2|5|10", "1|10|20", "(2 rows)"]);
    let out = psql_ok(port, "CREATE TABLE c AS SELECT * FROM t")?;
    assert_lines("CREATE TABLE c AS", &out, &["SELECT 2"]);
    let run = psql(port, "CREATE TABLE IF NOT EXISTS c AS SELECT * FROM t")?;
    assert_lines("CREATE TABLE IF NOT EXISTS c AS", &run.stdout, &["CREATE TABLE AS"]);
    assert_lines("CREATE TABLE IF NOT EXISTS c AS", &run.stderr, &[r#"NOTICE:  relation "c" already exists, skipping"#]);
    let out = psql_ok(port, "TRUNCATE c")?;
    assert_lines("TRUNCATE c", &out, &["TRUNCATE TABLE"]);
    Ok(())
}

/// The notices and warnings Postgres sends beside a statement that skips its work, as psql
/// prints them on stderr (`NOTICE:  table "x" does not exist, skipping`), each worded as
/// Postgres words it (its `DROP TABLE IF EXISTS`, `CREATE TABLE IF NOT EXISTS`, `ALTER TABLE
/// IF EXISTS`, `DROP COLUMN IF EXISTS`, `ADD COLUMN IF NOT EXISTS`, and `COMMIT`, `ROLLBACK`
/// or `BEGIN` where no block or one already is open), and the folding of a record field's
/// name.
#[test]
fn psql_shows_notices_of_skipped_work() -> TestResult {
    let dir = common::scratch_dir("psql_notices");
    let server = common::Server::start(&dir.join("data"));
    let port = server.port;
    psql_ok(port, "CREATE TABLE kept (a INT, b INT) WITH ('connector' = 'datagen')")?;
    psql_ok(port, "CREATE VIEW kept_view AS SELECT 1 AS x")?;
    let cases: [(&str, &[&str]); 18] = [
        ("DROP TABLE IF EXISTS gone, kept_not", &[r#"NOTICE:  table "gone" does not exist, skipping"#, r#"NOTICE:  table "kept_not" does not exist, skipping"#]),
        ("DROP MATERIALIZED VIEW IF EXISTS gone", &[r#"NOTICE:  materialized view "gone" does not exist, skipping"#]),
        ("CREATE TABLE IF NOT EXISTS kept (x INT)", &[r#"NOTICE:  relation "kept" already exists, skipping"#]),
        ("CREATE VIEW IF NOT EXISTS kept_view AS SELECT 2 AS y", &[r#"NOTICE:  relation "kept_view" already exists, skipping"#]),
        ("ALTER TABLE IF EXISTS gone ADD COLUMN x INT", &[r#"NOTICE:  relation "gone" does not exist, skipping"#]),
        ("ALTER TABLE kept ADD COLUMN IF NOT EXISTS a INT", &[r#"NOTICE:  column "a" of relation "kept" already exists, skipping"#]),
        ("ALTER TABLE kept DROP COLUMN IF EXISTS x, DROP COLUMN b", &[r#"NOTICE:  column "x" of relation "kept" does not exist, skipping"#]),
        ("COMMIT", &["WARNING:  there is no transaction in progress"]),
        ("ROLLBACK", &["WARNING:  there is no transaction in progress"]),
        ("BEGIN; BEGIN; COMMIT", &["WARNING:  there is already a transaction in progress"]),
        // Postgres's ABORT is ROLLBACK.
        ("ABORT", &["WARNING:  there is no transaction in progress"]),
        // client_min_messages leaves out what is less severe.
        ("SET client_min_messages = warning; DROP TABLE IF EXISTS gone; COMMIT", &["WARNING:  there is no transaction in progress"]),
        ("SET client_min_messages = error; DROP TABLE IF EXISTS gone; COMMIT", &[]),
        // A JSON table's column declared `UserId` unquoted reads the field "userid".
        (
            "CREATE TABLE camel (UserId STRING, \"Kept\" INT) WITH ('connector' = 'filesystem', 'path' = '/nonexistent', 'format' = 'json')",
            &[r#"NOTICE:  unquoted names fold to lower case, as in Postgres: column userid reads the record field "userid", not "UserId"; quote a name to keep its case ("UserId" or `UserId`, as Flink reads it)"#],
        ),
        // A CSV record's fields are read by position: no notice (and none at all here).
        ("CREATE TABLE camel_csv (UserId STRING) WITH ('connector' = 'filesystem', 'path' = '/nonexistent', 'format' = 'csv')", &[]),
        // A dotted key Weir does not read is kept, with a notice naming the key meant; one it
        // reads, and Postgres's keys, get none.
        (
            "SET 'parallelism.defualt' = '4'",
            &["NOTICE:  Weir does not read 'parallelism.defualt': the setting is kept (SHOW shows it) and changes nothing; did you mean 'parallelism.default'?"],
        ),
        (
            "SET 'table.exec.source.idle-timeout' = '1 s'",
            &["NOTICE:  Weir does not read 'table.exec.source.idle-timeout': the setting is kept (SHOW shows it) and changes nothing: a source's idle timeout is its table's option 'scan.watermark.idle-timeout' (ALTER TABLE t SET ('scan.watermark.idle-timeout' = '10 s'))"],
        ),
        ("SET 'parallelism.default' = '1'; SET extra_float_digits = 3", &[]),
    ];
    for (sql, expected) in cases {
        let run = psql(port, sql)?;
        assert!(run.success, "{sql} failed: {}", run.stderr);
        match expected {
            [] => assert!(run.stderr.is_empty(), "{sql}: {}", run.stderr),
            _ => assert_lines(sql, &run.stderr, expected),
        }
        assert_eq!(run.stderr.lines().count(), expected.len(), "{sql}: {}", run.stderr);
    }
    // The view kept its query.
    assert_lines("SELECT * FROM kept_view", &psql_ok(port, "SELECT * FROM kept_view")?, &["x", "1", "(1 row)"]);
    // The dropped column is gone; the kept one stays.
    assert_lines("DESCRIBE", &psql_ok(port, "SELECT column_name FROM information_schema.columns WHERE table_name = 'kept'")?, &["column_name", "a", "(1 row)"]);
    Ok(())
}

/// A write that fails in a view that reads the table names that view, as Postgres names the
/// trigger a write failed in: psql's `CONTEXT:` line (the ErrorResponse's `W` field).
#[test]
fn psql_names_the_view_a_write_failed_in() -> TestResult {
    let dir = common::scratch_dir("psql_context");
    let server = common::Server::start(&dir.join("data"));
    let port = server.port;
    psql_ok(port, "CREATE TABLE readings (k INT, v BIGINT)")?;
    psql_ok(port, "CREATE MATERIALIZED VIEW ratios AS SELECT k, 10 / v AS r FROM readings")?;
    psql_ok(port, "CREATE MATERIALIZED VIEW totals AS SELECT k, SUM(v) AS total FROM readings GROUP BY k")?;
    let run = psql(port, "INSERT INTO readings VALUES (1, 0)")?;
    assert!(!run.success);
    assert_lines("division", &run.stderr, &["ERROR:  division by zero", "CONTEXT:  while maintaining materialized view ratios"]);
    // 2^62 twice is 2^63, one past BIGINT's largest value.
    let run = psql(port, "INSERT INTO readings VALUES (2, 4611686018427387904), (2, 4611686018427387904)")?;
    assert!(!run.success);
    assert_lines("overflow", &run.stderr, &["ERROR:  aggregate result out of range of BIGINT", "CONTEXT:  while maintaining materialized view totals"]);
    // Neither write was kept.
    assert_lines("count", &psql_ok(port, "SELECT count(*) AS n FROM readings")?, &["n", "0", "(1 row)"]);
    Ok(())
}
