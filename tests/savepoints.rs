//! Savepoints (issue 17, item 3): a job stopped with a savepoint mid-stream keeps its state and
//! source positions, shows SUSPENDED (also after a restart), and resumes where it stopped with
//! nothing lost or repeated; a new view started from a suspended one's positions reads only
//! what came after them.
//!
//! Input: a bounded Nexmark bid table of 400 000 events. Nexmark deals each block of 50 event
//! ids as 1 person, 3 auctions and 46 bids (NEXMARK.md §1.3), so it holds 368 000 bids. The
//! sink is a `filesystem` table (exactly once), whose lines are counted here.

mod common;

use std::time::{Duration, Instant};

const EVENTS: i64 = 400_000;
const BIDS: i64 = EVENTS / 50 * 46;

/// Lines in the files of `dir`.
fn lines_in(dir: &std::path::Path) -> i64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries.map(|e| std::fs::read_to_string(e.expect("entry").path()).expect("sink file").lines().count() as i64).sum()
}

/// The server's message of a failed statement.
fn message(e: &tokio_postgres::Error) -> String {
    e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_string())
}

async fn scalar(client: &tokio_postgres::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

async fn status(client: &tokio_postgres::Client, job: &str) -> String {
    let rows = client.query("SHOW JOBS", &[]).await.expect("SHOW JOBS");
    rows.iter()
        .find(|r| r.get::<_, String>(0) == job || r.get::<_, String>(1) == job)
        .map(|r| r.get::<_, String>(3))
        .unwrap_or_else(|| panic!("no job {job} in SHOW JOBS"))
}

/// Waits (up to 120 s) until every source of `job` has read its input and committed it.
async fn wait_finished(client: &tokio_postgres::Client, job: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let sql = format!("SELECT CAST(COUNT(*) AS BIGINT) FROM weir_sources WHERE job = '{job}' AND NOT finished");
    while scalar(client, &sql).await > 0 {
        assert!(Instant::now() < deadline, "{job} did not finish in 120 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspended_jobs_resume_where_they_stopped() {
    let dir = common::scratch_dir("savepoints");
    let out = dir.join("out");
    let data = dir.join("data");
    let mut server = common::Server::start(&data);
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE sv_bid (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP(3))
                 WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'nexmark.events' = '{EVENTS}');
             CREATE TABLE sv_out (auction BIGINT, price BIGINT)
                 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE MATERIALIZED VIEW sv_count AS SELECT COUNT(*) AS n FROM sv_bid;
             INSERT INTO sv_out SELECT auction, price FROM sv_bid;",
            out.display()
        ))
        .await
        .expect("pipeline");
    let rows = client.query("SHOW JOBS", &[]).await.expect("SHOW JOBS");
    let sink_job: String = rows
        .iter()
        .find(|r| r.get::<_, String>(1).starts_with("INSERT INTO"))
        .map(|r| r.get(0))
        .expect("the INSERT INTO job");

    // Mid-stream (or at the end, on a fast machine: the counts below hold either way).
    client.batch_execute(&format!("STOP JOB '{sink_job}' WITH SAVEPOINT; ALTER MATERIALIZED VIEW sv_count SUSPEND")).await.expect("suspend");
    assert_eq!(status(&client, &sink_job).await, "SUSPENDED");
    assert_eq!(status(&client, "sv_count").await, "SUSPENDED");
    let frozen = scalar(&client, "SELECT n FROM sv_count").await;
    let written = lines_in(&out);
    eprintln!("suspended after {frozen} bids counted and {written} written of {BIDS}");
    // A suspended job reads nothing: FLUSH (which reads bounded sources to their end) leaves it.
    client.batch_execute("FLUSH").await.expect("flush");
    assert_eq!(scalar(&client, "SELECT n FROM sv_count").await, frozen);
    assert_eq!(lines_in(&out), written);
    let err = client.batch_execute("ALTER MATERIALIZED VIEW sv_count SUSPEND").await.expect_err("twice");
    assert!(message(&err).contains("already suspended"), "{err:?}");

    // Suspension survives a restart.
    server.kill9();
    drop(client);
    let server = common::Server::start(&data);
    let client = common::connect(&server).await;
    assert_eq!(status(&client, &sink_job).await, "SUSPENDED");
    assert_eq!(scalar(&client, "SELECT n FROM sv_count").await, frozen);

    // A new view from the suspended view's positions counts only the bids after them.
    client
        .batch_execute(
            "SET 'execution.savepoint.path' = 'sv_count';
             CREATE MATERIALIZED VIEW sv_rest AS SELECT COUNT(*) AS n FROM sv_bid;
             RESET 'execution.savepoint.path';",
        )
        .await
        .expect("view from a savepoint");
    let err = client
        .batch_execute("SET 'execution.savepoint.path' = 'sv_rest'; CREATE MATERIALIZED VIEW sv_x AS SELECT 1 AS one FROM sv_bid")
        .await
        .expect_err("not suspended");
    assert!(message(&err).contains("not suspended"), "{err:?}");
    client.batch_execute("RESET 'execution.savepoint.path'").await.expect("reset");

    client.batch_execute(&format!("RESUME JOB '{sink_job}'; ALTER MATERIALIZED VIEW sv_count RESUME")).await.expect("resume");
    assert_eq!(status(&client, "sv_count").await, "RUNNING");
    for job in [sink_job.as_str(), "sv_count", "sv_rest"] {
        wait_finished(&client, job).await;
    }
    client.batch_execute("FLUSH").await.expect("flush");
    assert_eq!(scalar(&client, "SELECT n FROM sv_count").await, BIDS, "nothing lost or counted twice");
    assert_eq!(scalar(&client, "SELECT n FROM sv_rest").await, BIDS - frozen, "only the bids after the savepoint");
    assert_eq!(lines_in(&out), BIDS, "every bid written once");

    // Stopping a suspended job (no savepoint) removes it.
    client.batch_execute("ALTER MATERIALIZED VIEW sv_rest SUSPEND; DROP MATERIALIZED VIEW sv_rest").await.expect("drop");
    client.batch_execute(&format!("STOP JOB '{sink_job}' WITH SAVEPOINT; STOP JOB '{sink_job}'")).await.expect("stop");
    let jobs = client.query("SHOW JOBS", &[]).await.expect("SHOW JOBS");
    assert_eq!(jobs.len(), 1, "only sv_count is left");
}

/// A job upgraded through a savepoint continues the one it replaces, so a constant relation's
/// rows, which that one wrote when it was created, are not written again (as Flink restores a
/// finished source as finished).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_from_a_savepoint_does_not_write_its_constant_rows_again() {
    const EVENTS: i64 = 5_000;
    let dir = common::scratch_dir("savepoints-values");
    let out = dir.join("out");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    let query = "INSERT INTO svv_out SELECT auction, price FROM svv_bid UNION ALL SELECT 0, 0";
    client
        .batch_execute(&format!(
            "CREATE TABLE svv_bid (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP(3))
                 WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'nexmark.events' = '{EVENTS}');
             CREATE TABLE svv_out (auction BIGINT, price BIGINT)
                 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             {query};",
            out.display()
        ))
        .await
        .expect("pipeline");
    let job_of = |rows: Vec<tokio_postgres::Row>| -> Vec<String> { rows.iter().map(|r| r.get(0)).collect() };
    let first = job_of(client.query("SHOW JOBS", &[]).await.expect("SHOW JOBS")).pop().expect("the job");
    wait_finished(&client, &first).await;
    client.batch_execute(&format!("FLUSH; STOP JOB '{first}' WITH SAVEPOINT")).await.expect("suspend");
    // 46 bids in every 50 events, and the constant row.
    assert_eq!(lines_in(&out), EVENTS / 50 * 46 + 1);

    client
        .batch_execute(&format!(
            "SET 'execution.savepoint.path' = '{first}'; {query}; RESET 'execution.savepoint.path'; STOP JOB '{first}';"
        ))
        .await
        .expect("upgrade");
    let second = job_of(client.query("SHOW JOBS", &[]).await.expect("SHOW JOBS")).pop().expect("the new job");
    wait_finished(&client, &second).await;
    client.batch_execute("FLUSH").await.expect("flush");
    assert_eq!(lines_in(&out), EVENTS / 50 * 46 + 1, "nothing written twice");
}

/// Job `job`'s status once it is `want` (polled, 60 s at most).
async fn wait_status(client: &tokio_postgres::Client, job: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = status(client, job).await;
        if now == want {
            return;
        }
        assert!(Instant::now() < deadline, "{job} is {now}, not {want}, after 60 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An `INSERT INTO` job whose sources are all bounded (or that has none: `INSERT INTO ..
/// VALUES`) is FINISHED once it has read them to their end and committed, as in Flink: it no
/// longer runs (its thread and its sink's producer go), it stays FINISHED after a restart
/// without writing anything again, `RESUME JOB` refuses it, `STOP JOB` removes it. A job over
/// an unbounded source keeps running. Lines counted by hand: 2 values, 10 datagen rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_into_jobs_finish_when_their_sources_end() {
    let dir = common::scratch_dir("finished-jobs");
    let out = dir.join("out");
    let data = dir.join("data");
    let mut server = common::Server::start(&data);
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE fj_out (a BIGINT, s STRING) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE TABLE fj_bounded (a BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '10');
             CREATE TABLE fj_unbounded (a BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '1');
             INSERT INTO fj_out VALUES (1, 'x'), (2, 'y');
             INSERT INTO fj_out SELECT a, 'bounded' FROM fj_bounded;
             INSERT INTO fj_out SELECT a, 'unbounded' FROM fj_unbounded WHERE a IS NULL;",
            out.display()
        ))
        .await
        .expect("jobs");
    wait_status(&client, "job-1", "FINISHED").await;
    wait_status(&client, "job-2", "FINISHED").await;
    assert_eq!(status(&client, "job-3").await, "RUNNING");
    assert_eq!(lines_in(&out), 12);
    let err = client.batch_execute("RESUME JOB 'job-1'").await.expect_err("nothing to resume");
    assert!(message(&err).contains("job-1 is FINISHED"), "{err:?}");

    server.kill9();
    let server = common::Server::start(&data);
    let client = common::connect(&server).await;
    // (Committed with the reap that found it finished; were the server killed before that
    // commit, the job would finish again from its last checkpoint, writing nothing.)
    wait_status(&client, "job-1", "FINISHED").await;
    wait_status(&client, "job-2", "FINISHED").await;
    client.batch_execute("FLUSH").await.expect("flush");
    assert_eq!(lines_in(&out), 12, "nothing written again");
    client.batch_execute("STOP JOB 'job-1'; STOP JOB 'job-3'").await.expect("stop");
    let jobs = client.query("SHOW JOBS", &[]).await.expect("SHOW JOBS");
    assert_eq!(jobs.len(), 1, "job-2 is left");
}
