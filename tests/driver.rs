//! A Postgres driver (tokio-postgres) over the extended protocol: prepared statements with
//! typed parameters inferred by the server, binary results, and an error that leaves the
//! connection usable.

mod common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_parameters_and_binary_results() {
    let dir = common::scratch_dir("driver");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE dr_t (id BIGINT, name STRING, price DECIMAL(10, 2), PRIMARY KEY (id) NOT ENFORCED);
             CREATE MATERIALIZED VIEW dr_v AS SELECT COUNT(*) AS n, MAX(id) AS max_id FROM dr_t;",
        )
        .await
        .expect("DDL");
    // The server infers $1 BIGINT and $2 TEXT from the table's columns.
    let insert = client.prepare("INSERT INTO dr_t (id, name) VALUES ($1, $2)").await.expect("prepare insert");
    for (id, name) in [(1i64, "one"), (2, "two"), (3, "three")] {
        assert_eq!(client.execute(&insert, &[&id, &name]).await.expect("insert"), 1);
    }
    let rows = client.query("SELECT name FROM dr_t WHERE id = $1", &[&2i64]).await.expect("select by id");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, String>(0), "two");
    let rows = client.query("SELECT id FROM dr_t WHERE id > $1 ORDER BY id", &[&1i64]).await.expect("range");
    let ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(ids, vec![2, 3]);
    client.batch_execute("FLUSH").await.expect("flush");
    let row = client.query_one("SELECT n, max_id FROM dr_v", &[]).await.expect("view");
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (3, 3));
    // A bad statement fails with its SQLSTATE and the connection goes on.
    let err = client.query("SELECT * FROM dr_nope", &[]).await.expect_err("unknown table");
    assert_eq!(err.code().map(|c| c.code()), Some("42P01"));
    // Data errors carry Postgres's codes, whether found running or while constants are folded.
    for (sql, code) in [
        ("SELECT 1 / 0", "22012"),
        ("SELECT id / (id - id) FROM dr_t", "22012"),
        ("SELECT CAST('abc' AS INT)", "22P02"),
        ("SELECT CAST(name AS INT) FROM dr_t", "22P02"),
        // Text that is no timestamp: Postgres's invalid_datetime_format.
        ("SELECT id FROM dr_t WHERE CAST(name AS TIMESTAMP) > '2024-01-01'", "22007"),
        ("SELECT TIMESTAMP '2024-01-01' > 'abc'", "22007"),
        ("SELECT CAST('not a time' AS TIMESTAMP)", "22007"),
        // A string compared with a number: Postgres's "operator does not exist: text = integer".
        ("SELECT id FROM dr_t WHERE name = 1", "42883"),
        // An unknown function, and one called with arguments it has no version for.
        ("SELECT nosuchfn(1)", "42883"),
        ("SELECT abs(1, 2)", "42883"),
        // A column neither grouped nor aggregated.
        ("SELECT id, COUNT(*) FROM dr_t GROUP BY name", "42803"),
    ] {
        let err = client.query(sql, &[]).await.expect_err(sql);
        assert_eq!(err.code().map(|c| c.code()), Some(code), "{sql}: {err:?}");
        assert!(!err.to_string().contains("Optimizer rule"), "{sql}: {err}");
    }
    let n: i64 = client.query_one("SELECT COUNT(*) FROM dr_t", &[]).await.expect("still usable").get(0);
    assert_eq!(n, 3);
    client.batch_execute("DROP TABLE dr_t CASCADE").await.expect("drop");
}

/// Garbage on the wire and a client that disconnects mid-statement leave the server healthy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_clients_leave_the_server_healthy() {
    use tokio::io::AsyncWriteExt;
    let dir = common::scratch_dir("driver-bad");
    let server = common::Server::start(&dir.join("data"));
    // Not a startup message at all.
    let mut raw = tokio::net::TcpStream::connect(("127.0.0.1", server.port)).await.expect("connect");
    raw.write_all(b"\x00\x00\x00\x08garbage!GET / HTTP/1.1\r\n\r\n").await.expect("write");
    drop(raw);
    // A client that sends a bulk INSERT and goes away without reading the answer.
    let client = common::connect(&server).await;
    client.batch_execute("CREATE TABLE bad_t (v BIGINT)").await.expect("create");
    let pending = tokio::spawn(async move {
        let _ = client.batch_execute("INSERT INTO bad_t SELECT value FROM generate_series(1, 200000)").await;
    });
    pending.abort();
    // The server still answers, and the table holds all of that INSERT or none of it.
    let client = common::connect(&server).await;
    client.batch_execute("FLUSH").await.expect("flush");
    let n: i64 = client.query_one("SELECT COUNT(*) FROM bad_t", &[]).await.expect("count").get(0);
    assert!(n == 0 || n == 200_000, "a statement was applied in part: {n} rows");
    client.batch_execute("DROP TABLE bad_t").await.expect("drop");
}

/// FLUSH waits for a slow source without holding the engine: while it waits, the view commits
/// what the source has read so far (another session sees a part of it), and another session's
/// DDL returns at once. A bounded generator of 20 rows at 5 rows/s takes about 4 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_waits_without_holding_the_engine() {
    let dir = common::scratch_dir("driver-flush");
    let server = common::Server::start(&dir.join("data"));
    let other = common::connect(&server).await;
    other
        .batch_execute(
            "CREATE TABLE fl_gen (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '5',
                 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '20');
             CREATE MATERIALIZED VIEW fl_v AS SELECT COUNT(*) AS n, SUM(id) AS s FROM fl_gen;",
        )
        .await
        .expect("DDL");
    let flusher = common::connect_as(&server, "flusher").await;
    let flush = tokio::spawn(async move { flusher.batch_execute("FLUSH").await.map(|()| flusher) });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let active = other
            .query("SELECT 1 FROM pg_stat_activity WHERE application_name = 'flusher' AND state = 'active' AND query = 'FLUSH'", &[])
            .await
            .expect("pg_stat_activity");
        if !active.is_empty() {
            break;
        }
        assert!(!flush.is_finished() && std::time::Instant::now() < deadline, "FLUSH was never seen running");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // DDL in another session does not wait for the FLUSH.
    other.batch_execute("CREATE TABLE fl_plain (v BIGINT)").await.expect("create during FLUSH");
    assert!(!flush.is_finished(), "CREATE TABLE returned only after the FLUSH");
    // The view commits as the generator goes: some but not all of its 20 rows, before FLUSH ends.
    let mut partial = None;
    while !flush.is_finished() && partial.is_none() {
        let n: i64 = other.query_one("SELECT n FROM fl_v", &[]).await.expect("view during FLUSH").get(0);
        if n > 0 && n < 20 {
            partial = Some(n);
        }
        assert!(std::time::Instant::now() < deadline, "FLUSH did not end");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(partial.is_some() && !flush.is_finished(), "the view showed no part of the source while FLUSH waited");
    let flusher = flush.await.expect("FLUSH task").expect("FLUSH");
    // 1 + 2 + ... + 20 = 210, seen by the session that flushed, right after it.
    let row = flusher.query_one("SELECT n, s FROM fl_v", &[]).await.expect("view");
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (20, 210));
    other.batch_execute("DROP MATERIALIZED VIEW fl_v; DROP TABLE fl_gen; DROP TABLE fl_plain").await.expect("drop");
}

/// A statement that runs long under the engine (here a `CREATE MATERIALIZED VIEW` backfilling
/// 600,000 rows, some seconds in a debug build) holds up no reader: new connections are
/// accepted and their SELECTs, SHOW JOBS, system tables and EXPLAINs answered while it runs.
/// Before, the backfill ran on the async worker thread of its session, and the tasks queued
/// there (a new connection, a read) and the I/O driver waited for it to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_statement_holds_up_no_reader() {
    let dir = common::scratch_dir("driver-long");
    let server = common::Server::start(&dir.join("data"));
    let other = common::connect(&server).await;
    other
        .batch_execute(
            "CREATE TABLE lr_big (k BIGINT, v BIGINT);
             CREATE TABLE lr_small (k BIGINT);
             INSERT INTO lr_small VALUES (1), (2);
             INSERT INTO lr_big SELECT value % 1000, value FROM generate_series(1, 600000);",
        )
        .await
        .expect("setup");
    let creator = common::connect(&server).await;
    let create = tokio::spawn(async move {
        creator.batch_execute("CREATE MATERIALIZED VIEW lr_v AS SELECT k, MAX(v) AS m FROM lr_big GROUP BY k").await
    });
    // Each read on a connection of its own; count those answered while the CREATE runs.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let (mut answered_meanwhile, mut looks_meanwhile) = (0, 0);
    while !create.is_finished() {
        let reader = common::connect(&server).await;
        let n: i64 = reader.query_one("SELECT COUNT(*) FROM lr_small", &[]).await.expect("read").get(0);
        assert_eq!(n, 2);
        if !create.is_finished() {
            answered_meanwhile += 1;
        }
        // Once: the jobs and the system tables, the engine's figures or, while the CREATE
        // holds the engine, those of the last look (after at most half a second); and the
        // plan of a view, planned against the last commit.
        if answered_meanwhile == 3 && looks_meanwhile == 0 {
            reader.simple_query("SHOW JOBS").await.expect("SHOW JOBS");
            reader.query("SELECT * FROM weir_state_tables", &[]).await.expect("weir_state_tables");
            let plan = reader.simple_query("EXPLAIN SELECT k, COUNT(*) FROM lr_small GROUP BY k").await.expect("EXPLAIN");
            let text: Vec<&str> =
                plan.iter().filter_map(|m| if let tokio_postgres::SimpleQueryMessage::Row(r) = m { r.get(0) } else { None }).collect();
            assert!(text.iter().any(|l| l.contains("lr_small")), "EXPLAIN names its source: {text:?}");
            if !create.is_finished() {
                looks_meanwhile += 1;
            }
        }
        assert!(std::time::Instant::now() < deadline, "the CREATE did not end");
    }
    create.await.expect("CREATE task").expect("CREATE");
    // A backfill of some seconds leaves room for dozens of reads of some ms each; before, the
    // first read made after the backfill began was answered only after it ended, and SHOW
    // JOBS and the system tables waited for the engine until the CREATE ended.
    assert!(answered_meanwhile >= 10, "only {answered_meanwhile} reads were answered while the CREATE ran");
    assert_eq!(looks_meanwhile, 1, "SHOW JOBS, weir_state_tables or EXPLAIN waited for the CREATE to end");
    // Once it ended, the view's job is listed.
    let jobs = other.simple_query("SHOW JOBS").await.expect("SHOW JOBS");
    let listed = jobs.iter().any(|m| matches!(m, tokio_postgres::SimpleQueryMessage::Row(r) if r.get(1) == Some("lr_v")));
    assert!(listed, "SHOW JOBS lists lr_v");
    let row = other.query_one("SELECT COUNT(*), MAX(m) FROM lr_v", &[]).await.expect("view");
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (1000, 600000));
}

/// A write statement whose rows go on through the views for minutes: a cancel
/// (`pg_cancel_backend`), `statement_timeout` and SIGTERM each stop it while the engine
/// applies it, and nothing of it remains (Postgres: the statement is rolled back). Before,
/// the changes went through every view to the end whatever came meanwhile, and a SIGTERM
/// waited for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_write_stops_when_cancelled_and_leaves_nothing() {
    // Each row of wc_t joins the 300 rows of wc_fan: the INSERT below is 300 M join rows for
    // the view, minutes in a debug build, while computing its own million rows takes about a
    // second.
    const LONG_INSERT: &str = "INSERT INTO wc_t SELECT 1, value FROM generate_series(1, 1000000)";
    let dir = common::scratch_dir("driver-cancel");
    let mut server = common::Server::start(&dir.join("data"));
    let admin = common::connect(&server).await;
    admin
        .batch_execute(
            "CREATE TABLE wc_t (k BIGINT, v BIGINT);
             CREATE TABLE wc_fan (k BIGINT);
             INSERT INTO wc_fan SELECT 1 FROM generate_series(1, 300);
             CREATE MATERIALIZED VIEW wc_v AS SELECT wc_fan.k, COUNT(*) AS n FROM wc_t JOIN wc_fan ON wc_t.k = wc_fan.k GROUP BY wc_fan.k;
             INSERT INTO wc_t VALUES (1, 0);",
        )
        .await
        .expect("setup");
    // What every stop must leave: the one row of wc_t, joined with the 300 of wc_fan.
    async fn unchanged(client: &tokio_postgres::Client) {
        let n: i64 = client.query_one("SELECT COUNT(*) FROM wc_t", &[]).await.expect("count wc_t").get(0);
        assert_eq!(n, 1, "rows of the stopped INSERT remain in wc_t");
        let row = client.query_one("SELECT k, n FROM wc_v", &[]).await.expect("read wc_v");
        assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (1, 300), "the stopped INSERT reached wc_v");
    }
    // Starts the INSERT on a connection of its own and returns once it has run for 3 s (by
    // then its rows are computed and going through the view).
    async fn start_long_insert(
        server: &common::Server,
        admin: &tokio_postgres::Client,
    ) -> tokio::task::JoinHandle<Result<(), tokio_postgres::Error>> {
        let writer = common::connect(server).await;
        let insert = tokio::spawn(async move { writer.batch_execute(LONG_INSERT).await });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut running_since = None;
        loop {
            let rows = admin
                .query("SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query = $1", &[&LONG_INSERT])
                .await
                .expect("pg_stat_activity");
            if !rows.is_empty() {
                let since = *running_since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() >= std::time::Duration::from_secs(3) {
                    return insert;
                }
            }
            assert!(!insert.is_finished(), "the INSERT ended by itself");
            assert!(std::time::Instant::now() < deadline, "the INSERT did not show as active");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    let sqlstate = |e: &tokio_postgres::Error| e.as_db_error().map(|d| d.code().code().to_string());
    let message = |e: &tokio_postgres::Error| e.as_db_error().map(|d| d.message().to_string()).unwrap_or_default();
    let within = std::time::Duration::from_secs(60);

    // A cancel: pg_cancel_backend, as psql's Ctrl-C sends (both raise the connection's flag).
    let insert = start_long_insert(&server, &admin).await;
    let sent: bool = admin
        .query_one("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query = $1", &[&LONG_INSERT])
        .await
        .expect("pg_cancel_backend")
        .get(0);
    assert!(sent);
    let ended = tokio::time::timeout(within, insert).await.expect("the cancelled INSERT went on").expect("INSERT task");
    let error = ended.expect_err("the cancelled INSERT failed");
    assert_eq!(sqlstate(&error).as_deref(), Some("57014"), "{error:?}");
    assert_eq!(message(&error), "canceling statement due to user request");
    unchanged(&admin).await;

    // statement_timeout.
    let timed = common::connect(&server).await;
    timed.batch_execute("SET statement_timeout = '3s'").await.expect("SET");
    let ended = tokio::time::timeout(within, timed.batch_execute(LONG_INSERT)).await.expect("the INSERT ran past its timeout");
    let error = ended.expect_err("the INSERT past its timeout failed");
    assert_eq!(sqlstate(&error).as_deref(), Some("57014"), "{error:?}");
    assert_eq!(message(&error), "canceling statement due to statement timeout");
    unchanged(&admin).await;

    // In a transaction block the rows go into the block's own writes, seconds of work for
    // millions of rows into a keyed table: the timeout stops that too, and aborts the block.
    timed.batch_execute("CREATE TABLE wc_k (id BIGINT PRIMARY KEY, v BIGINT); SET statement_timeout = '2s'").await.expect("setup");
    timed.batch_execute("BEGIN").await.expect("BEGIN");
    let in_block = timed.batch_execute("INSERT INTO wc_k SELECT value, value FROM generate_series(1, 3000000)");
    let error = tokio::time::timeout(within, in_block).await.expect("the INSERT in the block ran past its timeout").expect_err("timed out");
    assert_eq!(sqlstate(&error).as_deref(), Some("57014"), "{error:?}");
    let aborted = timed.batch_execute("SELECT 1").await.expect_err("the block is aborted");
    assert_eq!(sqlstate(&aborted).as_deref(), Some("25P02"), "{aborted:?}");
    timed.batch_execute("ROLLBACK").await.expect("ROLLBACK");
    let n: i64 = admin.query_one("SELECT COUNT(*) FROM wc_k", &[]).await.expect("count wc_k").get(0);
    assert_eq!(n, 0);

    // SIGTERM: the server stops the INSERT, answers its client and exits.
    let insert = start_long_insert(&server, &admin).await;
    let status = server.terminate(within);
    assert!(status.success(), "weir serve exited with {status}");
    let error = insert.await.expect("INSERT task").expect_err("the INSERT was stopped");
    // The client hears 57P01, or only that the connection closed if the server went first.
    assert!(matches!(sqlstate(&error).as_deref(), Some("57P01") | None), "{error:?}");
    drop(admin);
    let server = common::Server::start(&dir.join("data"));
    unchanged(&common::connect(&server).await).await;
}
