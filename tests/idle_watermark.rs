//! `'watermark.idle-advance'`: a table that stops receiving rows has its watermark advanced with
//! processing time, so the last window of a quiet stream closes. Polls with a deadline.

mod common;

use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_table_closes_its_last_window() {
    let dir = common::scratch_dir("idle");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE iw_t (ts TIMESTAMP(3), v INT, WATERMARK FOR ts AS ts)
                 WITH ('watermark.idle-advance' = '200 ms');
             CREATE MATERIALIZED VIEW iw_eowc AS
                 SELECT window_start, SUM(v) AS s
                 FROM TABLE(TUMBLE(TABLE iw_t, DESCRIPTOR(ts), INTERVAL '1' SECOND))
                 GROUP BY window_start, window_end EMIT ON WINDOW CLOSE;
             INSERT INTO iw_t VALUES (TIMESTAMP '2022-01-01 10:00:00.100', 1), (TIMESTAMP '2022-01-01 10:00:00.200', 2);
             FLUSH;",
        )
        .await
        .expect("setup");
    // Watermark 10:00:00.200: the window [10:00:00, 10:00:01) is open, nothing emitted yet.
    let count = |rows: Vec<tokio_postgres::Row>| rows.len();
    assert_eq!(count(client.query("SELECT * FROM iw_eowc", &[]).await.expect("read")), 0);
    // After 200 ms without rows the watermark follows the wall clock: within about a second
    // more it passes 10:00:00.999 and the window is emitted with sum 3.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let rows = client.query("SELECT CAST(s AS BIGINT) FROM iw_eowc", &[]).await.expect("read");
        if let Some(row) = rows.first() {
            assert_eq!(row.get::<_, i64>(0), 3);
            break;
        }
        assert!(Instant::now() < deadline, "the idle table's window never closed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.batch_execute("DROP TABLE iw_t CASCADE").await.expect("drop");
}
