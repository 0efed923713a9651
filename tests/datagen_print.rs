//! Flink's `datagen` source and `print` sink through a running server: a datagen table with a
//! sequence (bounded: ids 1..=40) and a random column in 0..=2, printed by two INSERT jobs to
//! the server's standard error (`'standard-error' = 'true'`), which the test reads from the
//! server's log: an append-only query prints `+I[id, k]` rows, and an updating one (a count per
//! k) prints its changelog, `-U` and `+U` for each update, whose last row per k adds up to the
//! 40 ids.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datagen_rows_reach_print_sinks() {
    let dir = common::scratch_dir("datagen-print");
    let data = dir.join("data");
    let server = common::Server::start(&data);
    let client = common::connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE gen (id BIGINT, k INT) WITH ('connector' = 'datagen', 'rows-per-second' = '400',
                 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '40',
                 'fields.k.min' = '0', 'fields.k.max' = '2');
             CREATE TABLE firsts (id BIGINT, k INT)
                 WITH ('connector' = 'print', 'print-identifier' = 'firsts', 'standard-error' = 'true');
             CREATE TABLE per_k (k INT, n BIGINT)
                 WITH ('connector' = 'print', 'print-identifier' = 'per_k', 'standard-error' = 'true');
             INSERT INTO firsts SELECT id, k FROM gen WHERE id <= 3;
             INSERT INTO per_k SELECT k, COUNT(*) FROM gen GROUP BY k;
             FLUSH;",
        )
        .await
        .expect("pipeline");
    let log = data.with_extension("log");
    let deadline = Instant::now() + Duration::from_secs(60);
    let (firsts, counts) = loop {
        let text = std::fs::read_to_string(&log).expect("server log");
        let firsts: Vec<String> = text.lines().filter_map(|l| l.strip_prefix("firsts> ")).map(str::to_string).collect();
        // The changelog per k, applied: +I and +U set k's count, -U and -D take it away.
        let mut counts: BTreeMap<i64, i64> = BTreeMap::new();
        for line in text.lines().filter_map(|l| l.strip_prefix("per_k> ")) {
            let (op, row) = line.split_at(2);
            let values: Vec<i64> =
                row.trim_matches(|c| c == '[' || c == ']').split(", ").map(|v| v.parse().expect("a number")).collect();
            match op {
                "+I" | "+U" => {
                    counts.insert(values[0], values[1]);
                }
                "-U" | "-D" => {
                    assert_eq!(counts.remove(&values[0]), Some(values[1]), "{line} retracts the row printed before");
                }
                other => panic!("unexpected row kind {other} in {line}"),
            }
        }
        if firsts.len() >= 3 && counts.values().sum::<i64>() == 40 {
            break (firsts, counts);
        }
        assert!(Instant::now() < deadline, "printed so far: {firsts:?}, counts {counts:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Ids 1, 2 and 3, in any order (the job's instances print side by side), each with its k.
    let mut ids: Vec<i64> = firsts
        .iter()
        .map(|row| {
            let values: Vec<i64> = row
                .strip_prefix("+I[")
                .and_then(|r| r.strip_suffix(']'))
                .map(|r| r.split(", ").filter_map(|v| v.parse().ok()).collect())
                .unwrap_or_default();
            assert!(values.len() == 2 && (0..=2).contains(&values[1]), "{row}");
            values[0]
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![1, 2, 3], "{firsts:?}");
    assert!(counts.keys().all(|k| (0..=2).contains(k)), "{counts:?}");
}

/// A global aggregate (no GROUP BY) in an `INSERT INTO` job writes its row only once it has
/// input and deletes it when its last row goes, as Flink's GroupAggFunction: `+I[1, 1.50]` for
/// the one row inserted, `-D[1, 1.50]` when it is deleted; no `COUNT(*) = 0` row before (a view
/// shows that row, as Postgres's, and keeps it at zero).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_aggregate_into_a_sink_has_no_row_without_input() {
    let dir = common::scratch_dir("global-agg-print");
    let data = dir.join("data");
    let server = common::Server::start(&data);
    let client = common::connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE ga_t (id INT PRIMARY KEY, x DECIMAL(10, 2));
             CREATE TABLE ga_out (c BIGINT, s DECIMAL(38, 2))
                 WITH ('connector' = 'print', 'print-identifier' = 'ga', 'standard-error' = 'true');
             INSERT INTO ga_out SELECT COUNT(*), SUM(x) FROM ga_t;
             CREATE MATERIALIZED VIEW ga_view AS SELECT COUNT(*) AS c FROM ga_t;
             INSERT INTO ga_t VALUES (7, 1.50);
             DELETE FROM ga_t WHERE id = 7;",
        )
        .await
        .expect("pipeline");
    let log = data.with_extension("log");
    let deadline = Instant::now() + Duration::from_secs(30);
    let printed = loop {
        let text = std::fs::read_to_string(&log).expect("server log");
        let printed: Vec<String> = text.lines().filter_map(|l| l.strip_prefix("ga> ")).map(str::to_string).collect();
        if printed.iter().any(|l| l.starts_with("-D")) {
            break printed;
        }
        assert!(Instant::now() < deadline, "printed so far: {printed:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(printed, ["+I[1, 1.50]", "-D[1, 1.50]"]);
    let n: i64 = client.query_one("SELECT c FROM ga_view", &[]).await.expect("view").get(0);
    assert_eq!(n, 0, "the view keeps its row at zero");
}
