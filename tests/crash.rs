//! Crash recovery: kill -9 while rows stream in, restart, and compare every table and view with
//! a result computed here from the statements that were acknowledged.
//!
//! Each INSERT statement is one epoch, committed before it is acknowledged, so after the crash
//! the table holds exactly the acknowledged statements plus, possibly, the one in flight (never
//! part of one), and the view agrees with the table. Jobs then go on after the restart.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const ROWS_PER_STATEMENT: i64 = 50;
const GROUPS: i64 = 7;

fn insert_sql(statement: i64) -> String {
    let rows: Vec<String> = (0..ROWS_PER_STATEMENT)
        .map(|j| {
            let id = statement * ROWS_PER_STATEMENT + j;
            format!("({id}, {}, {id})", id % GROUPS)
        })
        .collect();
    format!("INSERT INTO cr_rows VALUES {}", rows.join(", "))
}

/// (count, sum) per group over the rows of the first `statements` statements.
fn expected_view(statements: i64) -> BTreeMap<i64, (i64, i64)> {
    let mut out = BTreeMap::new();
    for id in 0..statements * ROWS_PER_STATEMENT {
        let e = out.entry(id % GROUPS).or_insert((0, 0));
        e.0 += 1;
        e.1 += id;
    }
    out
}

async fn read_view(client: &tokio_postgres::Client) -> BTreeMap<i64, (i64, i64)> {
    client
        .query("SELECT k, cnt, total FROM cr_by_k", &[])
        .await
        .expect("read view")
        .iter()
        .map(|r| (r.get::<_, i32>(0) as i64, (r.get::<_, i64>(1), r.get::<_, i64>(2))))
        .collect()
}

async fn table_count(client: &tokio_postgres::Client) -> i64 {
    client.query_one("SELECT COUNT(*) FROM cr_rows", &[]).await.expect("count").get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_stream_loses_nothing_committed() {
    let dir = common::scratch_dir("crash");
    let data = dir.join("data");
    let mut server = common::Server::start(&data);
    let client = common::connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE cr_rows (id BIGINT, k INT, v BIGINT, PRIMARY KEY (id) NOT ENFORCED);
             CREATE MATERIALIZED VIEW cr_by_k AS SELECT k, COUNT(*) AS cnt, SUM(v) AS total FROM cr_rows GROUP BY k;
             CREATE TABLE cr_events (ts TIMESTAMP(3), WATERMARK FOR ts AS ts);
             CREATE MATERIALIZED VIEW cr_windows AS
                 SELECT window_start, COUNT(*) AS n
                 FROM TABLE(TUMBLE(TABLE cr_events, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
                 GROUP BY window_start, window_end EMIT ON WINDOW CLOSE;
             INSERT INTO cr_events VALUES (TIMESTAMP '2022-01-01 10:00:10'), (TIMESTAMP '2022-01-01 10:00:20');",
        )
        .await
        .expect("DDL");

    // A writer streams statements; the test kills the server once 20 are acknowledged.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let writer = tokio::spawn(async move {
        for i in 0.. {
            if client.batch_execute(&insert_sql(i)).await.is_err() {
                break;
            }
            if tx.send(i).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut acked = 0;
    while let Some(i) = tokio::time::timeout_at(deadline.into(), rx.recv()).await.expect("writer progress") {
        acked = i + 1;
        if acked >= 20 {
            break;
        }
    }
    server.kill9();
    while let Ok(Some(i)) = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
        acked = acked.max(i + 1);
    }
    let _ = writer.await;

    let server = common::Server::start(&data);
    let client = common::connect(&server).await;
    let rows = table_count(&client).await;
    assert_eq!(rows % ROWS_PER_STATEMENT, 0, "a statement was applied in part: {rows} rows");
    let committed = rows / ROWS_PER_STATEMENT;
    assert!(
        committed == acked || committed == acked + 1,
        "{acked} statements acknowledged, {committed} found after the crash"
    );
    assert_eq!(read_view(&client).await, expected_view(committed), "view after restart");

    // A window view restarts too, and its open window is still there to close.
    client
        .batch_execute("INSERT INTO cr_events VALUES (TIMESTAMP '2022-01-01 10:01:30'); FLUSH;")
        .await
        .expect("close the first window after the restart");
    let n: i64 = client.query_one("SELECT n FROM cr_windows", &[]).await.expect("window view").get(0);
    assert_eq!(n, 2, "the window [10:00, 10:01) held two rows");

    // The job goes on after the restart.
    for i in committed..committed + 3 {
        client.batch_execute(&insert_sql(i)).await.expect("insert after restart");
    }
    client.batch_execute("FLUSH").await.expect("flush");
    assert_eq!(read_view(&client).await, expected_view(committed + 3), "view after more inserts");
    client.batch_execute("DROP TABLE cr_rows CASCADE; DROP TABLE cr_events CASCADE").await.expect("drop");
}

/// A constant relation's rows (VALUES, a SELECT without FROM) are inserted when its view or
/// `INSERT INTO` job is created and committed with that epoch: a restart, even after kill -9,
/// neither loses nor repeats them, and the view goes on with its table's changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn constant_rows_are_inserted_once_across_restarts() {
    let dir = common::scratch_dir("crash_values");
    let data = dir.join("data");
    let sink = dir.join("sink");
    let mut server = common::Server::start(&data);
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE cv_t (k INT, v TEXT);
             CREATE MATERIALIZED VIEW cv_union AS SELECT k, v FROM cv_t UNION ALL SELECT 0, 'default';
             CREATE MATERIALIZED VIEW cv_list AS VALUES (1, 'a'), (2, 'b');
             CREATE TABLE cv_sink (k BIGINT, v TEXT) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             INSERT INTO cv_sink VALUES (7, 'seven');
             INSERT INTO cv_t VALUES (1, 'x');
             FLUSH;",
            sink.display()
        ))
        .await
        .expect("DDL");
    let sink_lines = || sink_lines(&sink);
    assert_eq!(sink_lines(), ["{\"k\":7,\"v\":\"seven\"}"]);
    assert_eq!(pairs(&client, "SELECT CAST(k AS BIGINT), v FROM cv_union ORDER BY 1").await, [(0, "default".to_string()), (1, "x".to_string())]);
    server.kill9();
    drop(client);

    let server = common::Server::start(&data);
    let client = common::connect(&server).await;
    assert_eq!(pairs(&client, "SELECT CAST(k AS BIGINT), v FROM cv_union ORDER BY 1").await, [(0, "default".to_string()), (1, "x".to_string())]);
    assert_eq!(pairs(&client, "SELECT column1, column2 FROM cv_list ORDER BY 1").await, [(1, "a".to_string()), (2, "b".to_string())]);
    client.batch_execute("INSERT INTO cv_t VALUES (2, 'y'); FLUSH;").await.expect("insert after restart");
    assert_eq!(
        pairs(&client, "SELECT CAST(k AS BIGINT), v FROM cv_union ORDER BY 1").await,
        [(0, "default".to_string()), (1, "x".to_string()), (2, "y".to_string())]
    );
    assert_eq!(sink_lines(), ["{\"k\":7,\"v\":\"seven\"}"], "the sink job's row, written once");
    drop(server);
}

/// A materialized view and an `INSERT INTO` job over temporary views restart after a kill -9
/// although the session that had the views is gone: each job keeps its copy of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_over_temporary_views_restart_without_their_session() {
    let dir = common::scratch_dir("crash_temporary_views");
    let data = dir.join("data");
    let sink = dir.join("sink");
    let mut server = common::Server::start(&data);
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE ct_t (k INT, v TEXT);
             CREATE TEMPORARY VIEW ct_upper AS SELECT k, UPPER(v) AS v FROM ct_t WHERE k > 0;
             CREATE TEMPORARY VIEW ct_tagged AS SELECT k, v || '!' AS v FROM ct_upper;
             CREATE MATERIALIZED VIEW ct_view AS SELECT CAST(k AS BIGINT) AS k, v FROM ct_tagged;
             CREATE TABLE ct_seq (k BIGINT)
             WITH ('connector' = 'datagen', 'fields.k.kind' = 'sequence', 'fields.k.start' = '1', 'fields.k.end' = '3');
             CREATE TEMPORARY VIEW ct_seq_big AS SELECT k FROM ct_seq WHERE k > 1;
             CREATE TABLE ct_sink (k BIGINT) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             INSERT INTO ct_sink SELECT k FROM ct_seq_big;
             INSERT INTO ct_t VALUES (1, 'a'), (-1, 'skipped');
             FLUSH;",
            sink.display()
        ))
        .await
        .expect("DDL");
    assert_eq!(pairs(&client, "SELECT k, v FROM ct_view ORDER BY 1").await, [(1, "A!".to_string())]);
    server.kill9();
    drop(client);

    let server = common::Server::start(&data);
    let client = common::connect(&server).await;
    let error = client.batch_execute("SELECT * FROM ct_upper").await.expect_err("a new session has no temporary views");
    assert_eq!(error.as_db_error().expect("a server error").code().code(), "42P01");
    // Both jobs were planned again with their copies of the views (a job that could not plan
    // would be FAILED, its rows left behind).
    client.batch_execute("INSERT INTO ct_t VALUES (2, 'b'), (-2, 'skipped'); FLUSH;").await.expect("insert after restart");
    assert_eq!(pairs(&client, "SELECT k, v FROM ct_view ORDER BY 1").await, [(1, "A!".to_string()), (2, "B!".to_string())]);
    let mut lines = sink_lines(&sink);
    lines.sort();
    assert_eq!(lines, ["{\"k\":2}", "{\"k\":3}"], "the sink job's rows, each once");
    drop(server);
}

/// Temporary tables (Flink's `CREATE TEMPORARY TABLE`): a materialized view and an `INSERT
/// INTO` job over them outlive their session and a kill -9, each with the definitions it was
/// created with; a temporary table no job reads goes when its session ends, and at the next
/// start when the server was killed first; the others go with the last job reading them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_over_temporary_tables_outlive_their_session() {
    let dir = common::scratch_dir("crash_temporary_tables");
    let data = dir.join("data");
    let sink = dir.join("sink");
    let mut server = common::Server::start(&data);
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TEMPORARY TABLE ctt_seq (k BIGINT)
             WITH ('connector' = 'datagen', 'fields.k.kind' = 'sequence', 'fields.k.start' = '1', 'fields.k.end' = '4');
             CREATE TEMPORARY TABLE ctt_sink (k BIGINT) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE TEMPORARY TABLE ctt_rows (k BIGINT, v TEXT);
             CREATE TEMPORARY TABLE ctt_alone (k BIGINT);
             INSERT INTO ctt_rows VALUES (1, 'a'), (2, 'b'), (9, 'unmatched');
             CREATE MATERIALIZED VIEW ctt_view AS SELECT ctt_seq.k, r.v FROM ctt_seq JOIN ctt_rows AS r ON ctt_seq.k = r.k;
             INSERT INTO ctt_sink SELECT k * 10 FROM ctt_seq WHERE k > 2;
             FLUSH;",
            sink.display()
        ))
        .await
        .expect("DDL");
    let joined = [(1, "a".to_string()), (2, "b".to_string())];
    assert_eq!(pairs(&client, "SELECT k, v FROM ctt_view ORDER BY 1").await, joined);
    server.kill9();
    drop(client);

    let server = common::Server::start(&data);
    let client = common::connect(&server).await;
    let missing = |sql: &'static str| {
        let client = &client;
        async move {
            let error = client.batch_execute(sql).await.expect_err(sql);
            assert_eq!(error.as_db_error().expect("a server error").code().code(), "42P01", "{sql}: {error}");
        }
    };
    missing("SELECT * FROM ctt_rows").await;
    // The catalog names (`pg_temp_<n>_<name>`): the tables the jobs read are there, the one no
    // job read went at the start.
    missing("SELECT * FROM pg_temp_1_ctt_alone").await;
    let count = |sql: &'static str| {
        let client = &client;
        async move { client.query_one(sql, &[]).await.expect(sql).get::<_, i64>(0) }
    };
    assert_eq!(count("SELECT count(*) FROM pg_temp_1_ctt_rows").await, 3);
    assert_eq!(pairs(&client, "SELECT k, v FROM ctt_view ORDER BY 1").await, joined);
    let mut lines = sink_lines(&sink);
    lines.sort();
    assert_eq!(lines, ["{\"k\":30}", "{\"k\":40}"], "the sink job's rows, each once");

    // The view's tables go with the view, but the one the sink job still reads.
    client.batch_execute("DROP MATERIALIZED VIEW ctt_view").await.expect("drop the view");
    missing("SELECT * FROM pg_temp_1_ctt_rows").await;
    let jobs = client.query("SHOW JOBS", &[]).await.expect("SHOW JOBS");
    assert_eq!(jobs.len(), 1, "the sink job");
    let seq = "SELECT count(*) FROM pg_class WHERE relname = 'pg_temp_1_ctt_seq'";
    assert_eq!(count(seq).await, 0, "listed by no session");
    client.batch_execute(&format!("STOP JOB '{}'", jobs[0].get::<_, String>(0))).await.expect("stop the sink job");
    missing("INSERT INTO pg_temp_1_ctt_sink VALUES (1)").await;

    // A session's table no job reads goes when the session ends; meanwhile another session
    // cannot reach it by its catalog name (Postgres's 0A000). No table has a session number
    // now, and this server gave none, so the session is number 1.
    let other = common::connect(&server).await;
    other.batch_execute("CREATE TEMP TABLE ctt_gone (k BIGINT); INSERT INTO ctt_gone VALUES (1);").await.expect("temp table");
    let gone = "SELECT * FROM pg_temp_1_ctt_gone";
    let error = client.batch_execute(gone).await.expect_err("another session's temporary table");
    assert_eq!(error.as_db_error().expect("a server error").code().code(), "0A000", "{error}");
    drop(other);
    // Between the session's end and the drop its end starts, the table belongs to no session
    // (so it may be read, as one a job keeps); then it is gone.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let code = match client.batch_execute(gone).await {
            Ok(()) => "ok".to_string(),
            Err(e) => e.as_db_error().expect("a server error").code().code().to_string(),
        };
        if code == "42P01" {
            break;
        }
        assert!(matches!(code.as_str(), "ok" | "0A000"), "{code}");
        assert!(std::time::Instant::now() < deadline, "ctt_gone outlived its session");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    drop(server);
}

/// The values of STRING_AGG and ARRAY_AGG live in state of their own: a restart after kill -9
/// keeps them, so the lists go on from where they were (a deleted value taken out, a new one
/// at the end), in a GROUP BY and in a window that was open at the crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_aggregates_keep_their_values_across_restarts() {
    let dir = common::scratch_dir("crash_lists");
    let data = dir.join("data");
    let mut server = common::Server::start(&data);
    let client = common::connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE cl_t (k BIGINT, v TEXT);
             CREATE MATERIALIZED VIEW cl_v AS
                 SELECT k, STRING_AGG(v, ',') AS s, ARRAY_TO_STRING(ARRAY_AGG(v), '|') AS a FROM cl_t GROUP BY k;
             CREATE TABLE cl_e (v TEXT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
             CREATE MATERIALIZED VIEW cl_w AS
                 SELECT CAST(EXTRACT(EPOCH FROM window_start) AS BIGINT) AS k, LISTAGG(v) AS s
                 FROM TABLE(TUMBLE(TABLE cl_e, DESCRIPTOR(ts), INTERVAL '10' SECOND))
                 GROUP BY window_start, window_end;
             INSERT INTO cl_t VALUES (1, 'a'), (1, 'b'), (2, 'c');
             INSERT INTO cl_e VALUES ('x', TIMESTAMP '1970-01-01 00:00:01');",
        )
        .await
        .expect("DDL");
    assert_eq!(pairs(&client, "SELECT k, s FROM cl_v ORDER BY 1").await, [(1, "a,b".to_string()), (2, "c".to_string())]);
    server.kill9();
    drop(client);

    let server = common::Server::start(&data);
    let client = common::connect(&server).await;
    client
        .batch_execute(
            "INSERT INTO cl_t VALUES (1, 'd');
             DELETE FROM cl_t WHERE v = 'a';
             INSERT INTO cl_e VALUES ('y', TIMESTAMP '1970-01-01 00:00:02');",
        )
        .await
        .expect("changes after the restart");
    // Before the fix the lists came back empty: 1 was 'd' alone, and the DELETE failed.
    assert_eq!(pairs(&client, "SELECT k, s FROM cl_v ORDER BY 1").await, [(1, "b,d".to_string()), (2, "c".to_string())]);
    assert_eq!(pairs(&client, "SELECT k, a FROM cl_v ORDER BY 1").await, [(1, "b|d".to_string()), (2, "c".to_string())]);
    assert_eq!(pairs(&client, "SELECT k, s FROM cl_w ORDER BY 1").await, [(0, "x,y".to_string())]);
    drop(server);
}

/// The lines of the files a filesystem sink wrote into directory `sink`.
fn sink_lines(sink: &std::path::Path) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(sink).expect("sink directory") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("sink file");
        lines.extend(text.lines().filter(|l| !l.is_empty()).map(str::to_string));
    }
    lines
}

/// The rows of `sql`, whose two columns are a BIGINT and a TEXT.
async fn pairs(client: &tokio_postgres::Client, sql: &str) -> Vec<(i64, String)> {
    client.query(sql, &[]).await.expect(sql).iter().map(|r| (r.get(0), r.get(1))).collect()
}
