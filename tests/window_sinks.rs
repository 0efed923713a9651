//! Windowed operators into an append-only sink: an `INSERT INTO` a `filesystem` table of a LEFT
//! window join and of a window Top-N is accepted (their output is final, as in Flink) and
//! writes each window's rows once, when the watermark closes the window. The expected lines
//! were worked out by hand from the rows inserted. A bare SESSION query is refused, a SESSION
//! aggregation accepted.

mod common;

use std::collections::BTreeMap;

/// The JSON lines of every file in `dir`, sorted.
fn lines_in(dir: &std::path::Path) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).expect("sink directory") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("sink file");
        lines.extend(text.lines().filter(|l| !l.is_empty()).map(str::to_string));
    }
    lines.sort();
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_joins_and_window_top_n_write_final_rows_into_an_append_only_sink() {
    let dir = common::scratch_dir("window-sinks");
    let (joined, top) = (dir.join("joined"), dir.join("top"));
    let (left, right) = (dir.join("l.json"), dir.join("r.json"));
    // Window [10:00:00, 10:00:10): L1 with R1, L2 alone; [10:00:10, 10:00:20): L3 alone, R4
    // alone (not shown by a LEFT join). The end of both files closes every window.
    std::fs::write(
        &left,
        "{\"id\": 1, \"ts\": \"2024-01-01 10:00:01\"}\n{\"id\": 2, \"ts\": \"2024-01-01 10:00:05\"}\n{\"id\": 3, \"ts\": \"2024-01-01 10:00:12\"}\n",
    )
    .expect("left input");
    std::fs::write(&right, "{\"id\": 1, \"ts\": \"2024-01-01 10:00:08\"}\n{\"id\": 4, \"ts\": \"2024-01-01 10:00:15\"}\n")
        .expect("right input");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE ws_l (id INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
                 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE TABLE ws_r (id INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
                 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE TABLE ws_joined (id INT, window_start TIMESTAMP(3), r_id INT)
                 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE TABLE ws_top (window_start TIMESTAMP(3), id INT)
                 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             INSERT INTO ws_joined
             SELECT L.id, L.window_start, R.id AS r_id
             FROM TABLE(TUMBLE(TABLE ws_l, DESCRIPTOR(ts), INTERVAL '10' SECOND)) L
             LEFT JOIN TABLE(TUMBLE(TABLE ws_r, DESCRIPTOR(ts), INTERVAL '10' SECOND)) R
             ON L.id = R.id AND L.window_start = R.window_start AND L.window_end = R.window_end;
             INSERT INTO ws_top
             SELECT window_start, id FROM (
                 SELECT window_start, window_end, id,
                        ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY id DESC) AS rn
                 FROM TABLE(TUMBLE(TABLE ws_l, DESCRIPTOR(ts), INTERVAL '10' SECOND)))
             WHERE rn = 1;
             FLUSH;",
            left.display(),
            right.display(),
            joined.display(),
            top.display()
        ))
        .await
        .expect("the windowed jobs into append-only sinks are accepted");

    // A NULL field may be written as null or left out: both read as absent here.
    let rows = |lines: Vec<String>| -> Vec<BTreeMap<String, serde_json::Value>> {
        let mut rows: Vec<BTreeMap<String, serde_json::Value>> = lines
            .iter()
            .map(|l| {
                let mut row: BTreeMap<String, serde_json::Value> = serde_json::from_str(l).expect("a JSON line");
                row.retain(|_, v| !v.is_null());
                row
            })
            .collect();
        rows.sort_by_key(|r| serde_json::to_string(r).expect("json"));
        rows
    };
    let owned = |lines: &[&str]| lines.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    assert_eq!(
        rows(lines_in(&joined)),
        rows(owned(&[
            r#"{"id":1,"window_start":"2024-01-01T10:00:00","r_id":1}"#,
            r#"{"id":2,"window_start":"2024-01-01T10:00:00"}"#,
            r#"{"id":3,"window_start":"2024-01-01T10:00:10"}"#,
        ]))
    );
    assert_eq!(
        rows(lines_in(&top)),
        rows(owned(&[
            r#"{"window_start":"2024-01-01T10:00:00","id":2}"#,
            r#"{"window_start":"2024-01-01T10:00:10","id":3}"#,
        ]))
    );
}

/// A bare SESSION query retracts a session's rows when a later row extends it, so an append-only
/// sink refuses it, naming the assigner; a SESSION aggregation into the same sink emits each
/// session once, when it closes (Flink), and is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_only_sink_refuses_bare_sessions_and_takes_session_aggregates() {
    let dir = common::scratch_dir("session-sinks");
    let (input, out) = (dir.join("s.json"), dir.join("out"));
    // Gap 10 s, by id: id 1 at :01, :05, :12 is one session [10:00:01, 10:00:22) of 3 rows; id
    // 2 at :40 is [10:00:40, 10:00:50). The end of the file closes both.
    std::fs::write(
        &input,
        "{\"id\": 1, \"ts\": \"2024-01-01 10:00:01\"}\n{\"id\": 1, \"ts\": \"2024-01-01 10:00:05\"}\n\
         {\"id\": 2, \"ts\": \"2024-01-01 10:00:40\"}\n{\"id\": 1, \"ts\": \"2024-01-01 10:00:12\"}\n",
    )
    .expect("input");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE ss_in (id INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '30' SECOND)
                 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE TABLE ss_out (id INT, window_start TIMESTAMP(3), window_end TIMESTAMP(3), cnt BIGINT)
                 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');",
            input.display(),
            out.display()
        ))
        .await
        .expect("tables");
    let err = client
        .batch_execute(
            "INSERT INTO ss_out SELECT id, window_start, window_end, CAST(1 AS BIGINT)
             FROM TABLE(SESSION(TABLE ss_in PARTITION BY id, DESCRIPTOR(ts), INTERVAL '10' SECOND))",
        )
        .await
        .expect_err("a bare SESSION query is retracting");
    let message = err.as_db_error().map(|e| e.message().to_string()).unwrap_or_default();
    assert!(message.contains("append-only sink") && message.contains("WindowAssign (SESSION)"), "{message}");
    client
        .batch_execute(
            "INSERT INTO ss_out SELECT id, window_start, window_end, COUNT(*)
             FROM TABLE(SESSION(TABLE ss_in PARTITION BY id, DESCRIPTOR(ts), INTERVAL '10' SECOND))
             GROUP BY id, window_start, window_end;
             FLUSH;",
        )
        .await
        .expect("a SESSION aggregation into an append-only sink emits final rows");
    let rows: Vec<serde_json::Value> =
        lines_in(&out).iter().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let expected: Vec<serde_json::Value> = [
        r#"{"id":1,"window_start":"2024-01-01T10:00:01","window_end":"2024-01-01T10:00:22","cnt":3}"#,
        r#"{"id":2,"window_start":"2024-01-01T10:00:40","window_end":"2024-01-01T10:00:50","cnt":1}"#,
    ]
    .iter()
    .map(|l| serde_json::from_str(l).expect("json"))
    .collect();
    let mut rows = rows;
    rows.sort_by_key(|r| r["id"].as_i64());
    assert_eq!(rows, expected);
}
