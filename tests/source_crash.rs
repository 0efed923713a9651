//! Exactly once through a crash: a bounded nexmark source feeding a filesystem sink job and a
//! counting view; the server is killed with SIGKILL while the source is mid-way, restarted, and
//! run to the end. The sink file must then hold every bid exactly once — the same lines, byte
//! for byte, as `weir bench nexmark-gen` writes for the same events (the generator's rows
//! through an independent path, no SQL) — and the view must count every bid once.

mod common;

use std::time::{Duration, Instant};

/// Events of the run: 46 of every 50 are bids. The source is rate limited to
/// [`EVENT_RATE`] events a second (the default rate, which `weir bench nexmark-gen` also uses for
/// the reference), so the run lasts 4 s and the kill comes mid-way on any host.
const EVENTS: u64 = 400_000;
const EVENT_RATE: u64 = 100_000;
const BIDS: i64 = 368_000;

fn sorted_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    lines.sort_unstable();
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_source_writes_every_row_once() {
    let dir = common::scratch_dir("source-crash");
    let data = dir.join("data");
    let out = dir.join("out");
    let mut server = common::Server::start(&data);
    let client = common::connect(&server).await;
    let ddl = format!(
        "CREATE TABLE sc_bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
             date_time TIMESTAMP(3), extra VARCHAR, WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
         WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'nexmark.events' = '{EVENTS}', 'nexmark.partitions' = '2',
               'nexmark.event-rate' = '{EVENT_RATE}', 'nexmark.rate-limited' = 'true');
         CREATE TABLE sc_out (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
             date_time TIMESTAMP(3), extra VARCHAR)
         WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json', 'json.timestamp-format.standard' = 'ISO-8601');
         CREATE MATERIALIZED VIEW sc_count AS SELECT COUNT(*) AS n FROM sc_bid;
         INSERT INTO sc_out SELECT * FROM sc_bid;",
        out.display()
    );
    client.batch_execute(&ddl).await.expect("pipeline");

    // Kill once both jobs have committed some of the input but not all of it.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let row = client
            .query_one(
                "SELECT CAST(MIN(n) AS BIGINT), bool_or(f) FROM \
                 (SELECT job, SUM(rows_read) AS n, bool_or(finished) AS f FROM weir_sources GROUP BY job) AS per_job",
                &[],
            )
            .await
            .expect("weir_sources");
        let (read, finished): (Option<i64>, Option<bool>) = (row.get(0), row.get(1));
        assert!(finished != Some(true), "the source ended before the kill; make EVENTS larger");
        if read.unwrap_or(0) > 20_000 {
            break;
        }
        assert!(Instant::now() < deadline, "the source made no progress");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.kill9();
    drop(client);

    let server = common::Server::start(&data);
    let client = common::connect(&server).await;
    client.batch_execute("FLUSH").await.expect("flush");
    let n: i64 = client.query_one("SELECT n FROM sc_count", &[]).await.expect("count").get(0);
    assert_eq!(n, BIDS, "the view counts every bid once");

    let written = std::fs::read_dir(&out)
        .expect("sink directory")
        .map(|e| std::fs::read_to_string(e.expect("entry").path()).expect("sink file"))
        .collect::<String>();
    let reference = dir.join("reference");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["bench", "nexmark-gen", "--events", &EVENTS.to_string(), "--out"])
        .arg(&reference)
        .status()
        .expect("nexmark-gen runs");
    assert!(status.success());
    let expected = std::fs::read_to_string(reference.join("bid.json")).expect("reference bids");
    // The sink writes a timestamp's fraction as Flink does, without trailing zeros
    // (`..00:00:00.5`); the generator with three digits (`..00:00:00.500`).
    let trailing_zeros = regex::Regex::new(r#"(\.\d*?)0+""#).expect("regex");
    let expected = trailing_zeros.replace_all(&expected, "$1\"").replace(".\"", "\"");
    let (got, want) = (sorted_lines(&written), sorted_lines(&expected));
    assert_eq!(got.len(), BIDS as usize, "bids in the sink file");
    assert!(got == want, "the sink file differs from the generator's bids");
}

/// The rows of `SHOW JOBS` for job `name`: (status, error).
async fn job_status(client: &tokio_postgres::Client, name: &str) -> (String, Option<String>) {
    let rows = client.simple_query("SHOW JOBS").await.expect("show jobs");
    rows.iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) if r.get("job_name") == Some(name) => {
                Some((r.get("status").unwrap_or_default().to_string(), r.get("error").map(str::to_string)))
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no job {name} in SHOW JOBS"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decode_on_error_fail_stops_the_job_and_it_stays_failed_after_a_restart() {
    let dir = common::scratch_dir("decode-fail");
    let data = dir.join("data");
    let input = dir.join("orders.json");
    let lines = ["{\"id\": 1, \"amount\": 10}", "{\"id\": 2, \"amount\": 20}", "{\"id\": 3, \"amount\": ", "{\"id\": 4, \"amount\": 40}"];
    std::fs::write(&input, lines.join("\n") + "\n").expect("input file");
    // The third line starts after the first two and their newlines.
    let bad_offset = lines[0].len() + 1 + lines[1].len() + 1;
    let mut server = common::Server::start(&data);
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE df_strict (id BIGINT, amount BIGINT)
                 WITH ('connector' = 'filesystem', 'path' = '{0}', 'format' = 'json', 'decode.on-error' = 'fail');
             CREATE TABLE df_lenient (id BIGINT, amount BIGINT)
                 WITH ('connector' = 'filesystem', 'path' = '{0}', 'format' = 'json');
             CREATE MATERIALIZED VIEW df_strict_total AS SELECT COUNT(*) AS n, SUM(amount) AS total FROM df_strict;
             CREATE MATERIALIZED VIEW df_lenient_total AS SELECT COUNT(*) AS n, SUM(amount) AS total FROM df_lenient;
             FLUSH;",
            input.display()
        ))
        .await
        .expect("pipeline");
    let totals = |rows: Vec<tokio_postgres::Row>| (rows[0].get::<_, i64>(0), rows[0].get::<_, Option<i64>>(1));
    // The lenient table drops the bad line into its dead letters and goes on: 1 + 2 + 4.
    assert_eq!(totals(client.query("SELECT n, CAST(total AS BIGINT) FROM df_lenient_total", &[]).await.expect("read")), (3, Some(70)));
    assert_eq!(job_status(&client, "df_lenient_total").await, ("RUNNING".to_string(), None));
    // The strict one stops before the batch that holds it: nothing of the file is in the view.
    assert_eq!(totals(client.query("SELECT n, CAST(total AS BIGINT) FROM df_strict_total", &[]).await.expect("read")), (0, None));
    let (status, error) = job_status(&client, "df_strict_total").await;
    assert_eq!(status, "FAILED");
    let error = error.expect("the error is shown");
    assert!(
        error.contains(&format!("offset {bad_offset} does not decode")) && error.contains("df_strict"),
        "error names the table and the record's offset {bad_offset}: {error}"
    );

    // It stays failed across a restart, reading nothing.
    server.kill9();
    let server = common::Server::start(&data);
    let client = common::connect(&server).await;
    client.batch_execute("FLUSH").await.expect("flush");
    assert_eq!(job_status(&client, "df_strict_total").await.0, "FAILED");
    assert_eq!(totals(client.query("SELECT n, CAST(total AS BIGINT) FROM df_strict_total", &[]).await.expect("read")), (0, None));
    assert_eq!(totals(client.query("SELECT n, CAST(total AS BIGINT) FROM df_lenient_total", &[]).await.expect("read")), (3, Some(70)));
    // Dropping the view removes the failed job.
    client.batch_execute("DROP MATERIALIZED VIEW df_strict_total").await.expect("drop");
    let rows = client.simple_query("SHOW JOBS").await.expect("show jobs");
    assert!(!rows.iter().any(|m| matches!(m, tokio_postgres::SimpleQueryMessage::Row(r) if r.get("job_name") == Some("df_strict_total"))));
}

/// A file source read to its end is not reopened after a restart, so deleting its file breaks
/// nothing; a file source whose file is gone before it is read fails its own job (FAILED) and
/// nothing else: FLUSH and the other views go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_gone_fails_only_the_job_that_still_has_to_read_it() {
    let dir = common::scratch_dir("file-gone");
    let data = dir.join("data");
    let (read, unread, other) = (dir.join("read.json"), dir.join("unread.json"), dir.join("other.json"));
    std::fs::write(&read, "{\"id\": 1}\n{\"id\": 2}\n{\"id\": 3}\n").expect("input file");
    std::fs::write(&other, "{\"id\": 10}\n{\"id\": 20}\n").expect("input file");
    let mut server = common::Server::start(&data);
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE fg_read (id BIGINT) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE MATERIALIZED VIEW fg_read_total AS SELECT COUNT(*) AS n, SUM(id) AS total FROM fg_read;
             FLUSH;",
            read.display()
        ))
        .await
        .expect("pipeline");
    let totals = |rows: Vec<tokio_postgres::Row>| (rows[0].get::<_, i64>(0), rows[0].get::<_, Option<i64>>(1));
    let read_total = "SELECT n, CAST(total AS BIGINT) FROM fg_read_total";
    assert_eq!(totals(client.query(read_total, &[]).await.expect("read")), (3, Some(6)));

    // Restarted with the file gone: the finished source is not reopened.
    server.kill9();
    std::fs::remove_file(&read).expect("remove the file read");
    let server = common::Server::start(&data);
    let client = common::connect(&server).await;
    client.batch_execute("FLUSH").await.expect("FLUSH after the restart");
    assert_eq!(job_status(&client, "fg_read_total").await, ("RUNNING".to_string(), None));
    assert_eq!(totals(client.query(read_total, &[]).await.expect("read")), (3, Some(6)));

    // A source whose file does not exist fails its job alone.
    client
        .batch_execute(&format!(
            "CREATE TABLE fg_unread (id BIGINT) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE TABLE fg_other (id BIGINT) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE MATERIALIZED VIEW fg_unread_total AS SELECT COUNT(*) AS n, SUM(id) AS total FROM fg_unread;
             CREATE MATERIALIZED VIEW fg_other_total AS SELECT COUNT(*) AS n, SUM(id) AS total FROM fg_other;
             FLUSH;",
            unread.display(),
            other.display()
        ))
        .await
        .expect("a missing file fails its job, not the statements");
    let (status, error) = job_status(&client, "fg_unread_total").await;
    assert_eq!(status, "FAILED");
    let error = error.expect("the error is shown");
    assert!(error.contains("fg_unread") && error.contains("unread.json"), "error names the table and the file: {error}");
    let other_total = "SELECT n, CAST(total AS BIGINT) FROM fg_other_total";
    assert_eq!(totals(client.query(other_total, &[]).await.expect("read")), (2, Some(30)));
    client.batch_execute("FLUSH").await.expect("FLUSH with a failed job");
    assert_eq!(job_status(&client, "fg_other_total").await, ("RUNNING".to_string(), None));
}
