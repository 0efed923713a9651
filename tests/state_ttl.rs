//! State TTL (`table.exec.state.ttl`, `/*+ STATE_TTL(..) */`): over a long run of fresh keys the
//! state of a group aggregation, a regular join side and a deduplication stays flat, and an
//! expired entry is as if never written. TTL is processing time, so the test polls with a
//! deadline: `FLUSH` commits an epoch (a barrier, where expired entries are swept) and
//! `weir_state_tables` shows the sizes.

mod common;

use std::time::{Duration, Instant};

/// The entries of state table `name` of `job`'s operators, after a barrier.
async fn entries(client: &tokio_postgres::Client, job: &str, name: &str) -> i64 {
    client.batch_execute("FLUSH").await.expect("flush");
    let rows = client
        .query(
            "SELECT CAST(entries AS BIGINT) FROM weir_state_tables WHERE job = $1 AND state_table = $2 AND operator <> 'Materialize'",
            &[&job, &name],
        )
        .await
        .expect("read weir_state_tables");
    assert_eq!(rows.len(), 1, "one {name} table in {job}");
    rows[0].get(0)
}

/// Polls until `job`'s state table `name` holds at most `max` entries; panics after 30 s.
async fn wait_entries_at_most(client: &tokio_postgres::Client, job: &str, name: &str, max: i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = entries(client, job, name).await;
        if n <= max {
            return n;
        }
        assert!(Instant::now() < deadline, "{job}/{name} still holds {n} entries, more than {max}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_stays_flat_over_fresh_keys_and_expired_entries_are_gone() {
    let dir = common::scratch_dir("state_ttl");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(
            "SET 'table.exec.state.ttl' = '300 ms';
             CREATE TABLE ttl_ev (k BIGINT, v BIGINT);
             CREATE MATERIALIZED VIEW ttl_counts AS SELECT k, COUNT(*) AS c, MAX(v) AS m FROM ttl_ev GROUP BY k;",
        )
        .await
        .expect("setup");
    let ttl: Vec<(String, Option<i64>)> = client
        .query("SELECT state_table, ttl_ms FROM weir_state_tables WHERE job = 'ttl_counts' ORDER BY state_table", &[])
        .await
        .expect("ttl")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        ttl,
        vec![("groups".to_string(), Some(300)), ("rows".to_string(), None), ("values/1".to_string(), None)],
        "the groups expire; MAX's values go with their group; the view's rows never expire"
    );

    // 10 rounds of 500 fresh keys: each round waits until the state holds no more than one
    // round's keys, so the rounds before were swept. 5 000 keys in all, at most 500 kept.
    const ROUND: i64 = 500;
    for round in 0..10 {
        let values: Vec<String> = (0..ROUND).map(|i| format!("({}, {i})", round * ROUND + i)).collect();
        client.batch_execute(&format!("INSERT INTO ttl_ev VALUES {}", values.join(", "))).await.expect("insert");
        wait_entries_at_most(&client, "ttl_counts", "groups", ROUND).await;
        let values_left = entries(&client, "ttl_counts", "values/1").await;
        assert!(values_left <= ROUND, "MAX's value multiset holds {values_left} entries after round {round}");
    }
    // Every group of the last round expires too.
    wait_entries_at_most(&client, "ttl_counts", "groups", 0).await;
    assert_eq!(entries(&client, "ttl_counts", "values/1").await, 0);

    // Key 0 (count 1, max 0) expired: its next row starts a new group, count 1 and max 7, where
    // without a TTL it would be count 2.
    client.batch_execute("INSERT INTO ttl_ev VALUES (0, 7)").await.expect("insert");
    let row = client.query_one("SELECT c, m FROM ttl_counts WHERE k = 0", &[]).await.expect("read");
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (1, 7));
    // The view keeps the results of expired groups: it is the output, not operator state.
    let n: i64 = client.query_one("SELECT COUNT(*) FROM ttl_counts", &[]).await.expect("count").get(0);
    assert_eq!(n, 10 * ROUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hint_gives_one_join_input_a_ttl_and_an_expired_row_no_longer_matches() {
    let dir = common::scratch_dir("state_ttl_join");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE ttl_a (k BIGINT, x STRING);
             CREATE TABLE ttl_b (k BIGINT, y STRING);
             CREATE MATERIALIZED VIEW ttl_j AS
                 SELECT /*+ STATE_TTL('a' = '300 ms') */ a.k, a.x, b.y FROM ttl_a a JOIN ttl_b b ON a.k = b.k;
             INSERT INTO ttl_a VALUES (1, 'a1'), (2, 'a2');
             INSERT INTO ttl_b VALUES (2, 'b2');",
        )
        .await
        .expect("setup");
    let ttl: Vec<(String, Option<i64>)> = client
        .query("SELECT state_table, ttl_ms FROM weir_state_tables WHERE job = 'ttl_j' AND operator = 'Join' ORDER BY state_table", &[])
        .await
        .expect("ttl")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(ttl, vec![("left".to_string(), Some(300)), ("right".to_string(), None)]);
    let rows = client.query("SELECT k, x, y FROM ttl_j", &[]).await.expect("read");
    assert_eq!(rows.len(), 1, "(2, a2, b2) joined while both rows were live");

    // The left rows expire; the right row (no TTL) stays.
    wait_entries_at_most(&client, "ttl_j", "left", 0).await;
    assert_eq!(entries(&client, "ttl_j", "right").await, 1);
    client.batch_execute("INSERT INTO ttl_b VALUES (1, 'b1')").await.expect("insert");
    let keys: Vec<i64> = client.query("SELECT k FROM ttl_j ORDER BY k", &[]).await.expect("read").iter().map(|r| r.get(0)).collect();
    assert_eq!(keys, vec![2], "(1, a1) expired before (1, b1) arrived: no match; the emitted pair stays");
    // A fresh left row matches the right row, which never expires.
    client.batch_execute("INSERT INTO ttl_a VALUES (1, 'a1 again')").await.expect("insert");
    let row = client.query_one("SELECT x, y FROM ttl_j WHERE k = 1", &[]).await.expect("read");
    assert_eq!((row.get::<_, String>(0), row.get::<_, String>(1)), ("a1 again".to_string(), "b1".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deduplication_forgets_a_key_after_the_ttl() {
    let dir = common::scratch_dir("state_ttl_dedup");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(
            "SET 'table.exec.state.ttl' = '300 ms';
             CREATE TABLE ttl_d (k BIGINT, v STRING);
             CREATE MATERIALIZED VIEW ttl_first AS
                 SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY PROCTIME()) AS rn FROM ttl_d) WHERE rn = 1;
             INSERT INTO ttl_d VALUES (1, 'first'), (1, 'duplicate');",
        )
        .await
        .expect("setup");
    let values = |rows: Vec<tokio_postgres::Row>| rows.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>();
    assert_eq!(values(client.query("SELECT v FROM ttl_first ORDER BY v", &[]).await.expect("read")), vec!["first"]);
    // The table is updatable, so the operator keeps every row of a key (a delete of the first
    // brings back the next): both rows expire.
    wait_entries_at_most(&client, "ttl_first", "rows", 0).await;
    // Key 1 was forgotten: its next row is the first again (Flink's deduplication with TTL),
    // and replaces the key's row in the view, which is keyed by k.
    client.batch_execute("INSERT INTO ttl_d VALUES (1, 'after ttl')").await.expect("insert");
    assert_eq!(values(client.query("SELECT v FROM ttl_first ORDER BY v", &[]).await.expect("read")), vec!["after ttl"]);
}
