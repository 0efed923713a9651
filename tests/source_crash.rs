//! Exactly once through a crash: a bounded nexmark source feeding a filesystem sink job and a
//! counting view; the server is killed with SIGKILL while the source is mid-way, restarted, and
//! run to the end. The sink file must then hold every bid exactly once — the same lines, byte
//! for byte, as `weir bench nexmark-gen` writes for the same events (the generator's rows
//! through an independent path, no SQL) — and the view must count every bid once.

mod common;

use std::time::{Duration, Instant};

/// Events of the run: 46 of every 50 are bids.
const EVENTS: u64 = 400_000;
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
         WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'nexmark.events' = '{EVENTS}', 'nexmark.partitions' = '2');
         CREATE TABLE sc_out (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
             date_time TIMESTAMP(3), extra VARCHAR)
         WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
         CREATE MATERIALIZED VIEW sc_count AS SELECT COUNT(*) AS n FROM sc_bid;
         INSERT INTO sc_out SELECT * FROM sc_bid;",
        out.display()
    );
    client.batch_execute(&ddl).await.expect("pipeline");

    // Kill once both jobs have committed some of the input but not all of it.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let row = client
            .query_one("SELECT CAST(MIN(rows_read) AS BIGINT), bool_or(finished) FROM weir_sources", &[])
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
    let (got, want) = (sorted_lines(&written), sorted_lines(&expected));
    assert_eq!(got.len(), BIDS as usize, "bids in the sink file");
    assert!(got == want, "the sink file differs from the generator's bids");
}
