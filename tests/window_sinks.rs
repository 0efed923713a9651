//! Windowed operators into an append-only sink: an `INSERT INTO` a `filesystem` table of a LEFT
//! window join and of a window Top-N is accepted (their output is final, as in Flink) and
//! writes each window's rows once, when the watermark closes the window. The expected lines
//! were worked out by hand from the rows inserted. A bare SESSION query is refused, a SESSION
//! aggregation accepted. And how an `INSERT INTO` a sink maps a column list and the query's
//! types onto the sink's columns, and when an `upsert-kafka` sink gets a SinkUpsertMaterializer.

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
            r#"{"id":1,"window_start":"2024-01-01 10:00:00","r_id":1}"#,
            r#"{"id":2,"window_start":"2024-01-01 10:00:00"}"#,
            r#"{"id":3,"window_start":"2024-01-01 10:00:10"}"#,
        ]))
    );
    assert_eq!(
        rows(lines_in(&top)),
        rows(owned(&[
            r#"{"window_start":"2024-01-01 10:00:00","id":2}"#,
            r#"{"window_start":"2024-01-01 10:00:10","id":3}"#,
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
        r#"{"id":1,"window_start":"2024-01-01 10:00:01","window_end":"2024-01-01 10:00:22","cnt":3}"#,
        r#"{"id":2,"window_start":"2024-01-01 10:00:40","window_end":"2024-01-01 10:00:50","cnt":1}"#,
    ]
    .iter()
    .map(|l| serde_json::from_str(l).expect("json"))
    .collect();
    let mut rows = rows;
    rows.sort_by_key(|r| r["id"].as_i64());
    assert_eq!(rows, expected);
}

/// `INSERT INTO` a sink with a column list writes each listed column where it is named and
/// NULL into the others (Postgres's and Flink's partial insert); a query column whose type
/// cannot be assigned to its sink column (a string into an INT) is refused when the job is
/// created, and a number out of the column's range fails the statement, never a silent NULL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_into_a_sink_maps_a_column_list_and_refuses_what_does_not_fit() {
    let dir = common::scratch_dir("sink-columns");
    let out = dir.join("out");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE sc_out (a INT, b STRING, c DOUBLE) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             INSERT INTO sc_out (b, a, c) VALUES ('named', 5, 1.5);
             INSERT INTO sc_out (a) VALUES (6);
             INSERT INTO sc_out (c, b) SELECT k, v FROM (VALUES (1, 'one'), (2, 'two')) AS t(k, v);
             FLUSH;",
            out.display()
        ))
        .await
        .expect("jobs");
    let expected = [
        r#"{"a":5,"b":"named","c":1.5}"#,
        r#"{"a":6}"#,
        r#"{"c":1.0,"b":"one"}"#,
        r#"{"c":2.0,"b":"two"}"#,
    ];
    let mut expected: Vec<String> = expected.iter().map(|l| normalized(l)).collect();
    expected.sort();
    let got: Vec<String> = {
        let mut got: Vec<String> = lines_in(&out).iter().map(|l| normalized(l)).collect();
        got.sort();
        got
    };
    assert_eq!(got, expected);

    for (sql, message) in [
        ("INSERT INTO sc_out VALUES ('x', 'y', 1.0)", "column \"a\" is of type INT, but the query's column 1 is of type STRING"),
        ("INSERT INTO sc_out VALUES (99999999999, 'big', 1.0)", "99999999999"),
        ("INSERT INTO sc_out (a, zz) VALUES (1, 2)", "column \"zz\" of relation \"sc_out\" does not exist"),
        ("INSERT INTO sc_out (a, a) VALUES (1, 2)", "column \"a\" specified more than once"),
        ("INSERT INTO sc_out (a, b) VALUES (1)", "INSERT has more target columns than expressions"),
    ] {
        let err = client.batch_execute(sql).await.expect_err(sql);
        let text = err.as_db_error().map_or_else(|| err.to_string(), |d| d.message().to_string());
        assert!(text.contains(message), "{sql}: {text}");
    }
    client.batch_execute("FLUSH").await.expect("flush");
    assert_eq!(lines_in(&out).len(), 4, "a refused statement writes nothing");
}

/// A JSON line with its fields in name order and its NULL fields left out, so lines that
/// differ only in the order or the presence of NULL fields compare equal.
fn normalized(line: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
    let object = value.as_object().expect("a JSON object");
    let fields: std::collections::BTreeMap<&String, &serde_json::Value> = object.iter().filter(|(_, v)| !v.is_null()).collect();
    serde_json::to_string(&fields).expect("JSON")
}

/// A window aggregation of a job emits each window once, final, whatever its input: over a
/// plain table (a retracting changelog: UPDATE and DELETE) it goes into an append-only sink,
/// and a row deleted before its window closes is not counted (Flink's window TVF aggregation;
/// SQL.md: a job into an append-only sink gets that mode without asking). An updating query
/// into an `upsert-kafka` sink whose PRIMARY KEY does not hold the query's key is planned with
/// a SinkUpsertMaterializer: otherwise deleting one of several rows of a message key would
/// write a tombstone for the key (EXPLAIN, no broker contacted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_aggregation_over_a_plain_table_is_final_and_upsert_keys_are_materialized() {
    let dir = common::scratch_dir("window-plain-sink");
    let out = dir.join("out");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE wp_e (k STRING, item STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts);
             CREATE TABLE wp_out (window_start TIMESTAMP(3), k STRING, n BIGINT)
                 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             INSERT INTO wp_out SELECT window_start, k, COUNT(*)
                 FROM TABLE(TUMBLE(TABLE wp_e, DESCRIPTOR(ts), INTERVAL '10' SECOND))
                 GROUP BY window_start, window_end, k;",
            out.display()
        ))
        .await
        .expect("a window aggregation of a plain table into an append-only sink");
    // Window [00:00, 00:10): a has x (y deleted), b has x. The row at 00:12 moves the
    // watermark to 00:12 and closes it; [00:10, 00:20) stays open, so it is not written.
    client
        .batch_execute(
            "INSERT INTO wp_e VALUES ('a', 'x', TIMESTAMP '2024-01-01 00:00:01'), ('a', 'y', TIMESTAMP '2024-01-01 00:00:02'),
                 ('b', 'x', TIMESTAMP '2024-01-01 00:00:05');
             DELETE FROM wp_e WHERE item = 'y';
             INSERT INTO wp_e VALUES ('a', 'z', TIMESTAMP '2024-01-01 00:00:12');
             FLUSH;",
        )
        .await
        .expect("rows");
    let lines: Vec<String> = lines_in(&out).iter().map(|l| normalized(l)).collect();
    let expected: Vec<String> = [
        r#"{"window_start":"2024-01-01 00:00:00","k":"a","n":1}"#,
        r#"{"window_start":"2024-01-01 00:00:00","k":"b","n":1}"#,
    ]
    .iter()
    .map(|l| normalized(l))
    .collect();
    assert_eq!(lines, expected);

    client
        .batch_execute(
            "CREATE TABLE wp_city (city STRING, name STRING, n BIGINT, PRIMARY KEY (city) NOT ENFORCED)
                 WITH ('connector' = 'upsert-kafka', 'topic' = 'wp_city', 'properties.bootstrap.servers' = '127.0.0.1:1',
                       'key.format' = 'json', 'value.format' = 'json');
             CREATE TABLE wp_people (id INT, name STRING, city STRING, PRIMARY KEY (id) NOT ENFORCED);",
        )
        .await
        .expect("tables");
    // An updating query whose rows the sink's PRIMARY KEY (the message key) does not tell
    // apart gets a SinkUpsertMaterializer keyed by it, as in Flink; one keyed by the PRIMARY
    // KEY does not need it. (tests/kafka_pipeline.rs checks what it writes to a topic.)
    for (query, materialized) in [
        // (city, name) groups, keyed by city alone: two rows of one message key.
        ("SELECT city, name, COUNT(*) FROM wp_people GROUP BY city, name", true),
        // The same groups with `name` left out: the planner knows no stream key.
        ("SELECT city, 'x', COUNT(*) FROM wp_people GROUP BY city, name", true),
        // Every person's row, keyed by id: several rows of one city.
        ("SELECT city, name, id FROM wp_people", true),
        // One row per city.
        ("SELECT city, MAX(name), COUNT(*) FROM wp_people GROUP BY city", false),
    ] {
        let plan: Vec<String> = client
            .query(&format!("EXPLAIN INSERT INTO wp_city {query}"), &[])
            .await
            .expect(query)
            .iter()
            .map(|r| r.get(0))
            .collect();
        // The sink, then what feeds it.
        assert!(plan.first().is_some_and(|l| l.starts_with("StreamSink: table=wp_city connector=upsert-kafka")), "{plan:?}");
        let top = plan.get(1).map(|l| l.trim_start().to_string()).unwrap_or_default();
        assert_eq!(
            top.starts_with("StreamSinkUpsertMaterializer: key=[0]") && top.contains("changelog=upsert stream_key=[0]"),
            materialized,
            "{query}: {plan:?}"
        );
    }
}

/// Flink's `CREATE TABLE .. WITH (connector) AS query`: the table takes the query's columns and
/// the job `INSERT INTO` it starts writes the query's rows, here a window aggregation's final
/// rows, once per window. A CTAS whose job cannot start (an updating query into the append-only
/// `filesystem` sink) leaves no table behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_table_as_a_connector_table_starts_the_job_writing_into_it() {
    let dir = common::scratch_dir("window-ctas-sink");
    let (out, refused) = (dir.join("out"), dir.join("refused"));
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE wc_e (k STRING, amount INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts);
             CREATE TABLE wc_out WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json') AS
                 SELECT window_start, k, COUNT(*) AS n, SUM(amount) AS total
                 FROM TABLE(TUMBLE(TABLE wc_e, DESCRIPTOR(ts), INTERVAL '10' SECOND))
                 GROUP BY window_start, window_end, k;",
            out.display()
        ))
        .await
        .expect("a CTAS into a filesystem sink");
    let described: Vec<(String, String)> =
        client.query("DESCRIBE wc_out", &[]).await.expect("describe").iter().map(|r| (r.get(0), r.get(1))).collect();
    let expected: Vec<(String, String)> =
        [("window_start", "TIMESTAMP(3)"), ("k", "STRING"), ("n", "BIGINT"), ("total", "BIGINT")]
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect();
    assert_eq!(described, expected);
    // Window [00:00, 00:10): a 1 + 2, b 5; the row at 00:12 closes it, its own stays open.
    client
        .batch_execute(
            "INSERT INTO wc_e VALUES ('a', 1, TIMESTAMP '2024-01-01 00:00:01'), ('a', 2, TIMESTAMP '2024-01-01 00:00:02'),
                 ('b', 5, TIMESTAMP '2024-01-01 00:00:05'), ('a', 7, TIMESTAMP '2024-01-01 00:00:12');
             FLUSH;",
        )
        .await
        .expect("rows");
    let lines: Vec<String> = lines_in(&out).iter().map(|l| normalized(l)).collect();
    let expected: Vec<String> = [
        r#"{"window_start":"2024-01-01 00:00:00","k":"a","n":2,"total":3}"#,
        r#"{"window_start":"2024-01-01 00:00:00","k":"b","n":1,"total":5}"#,
    ]
    .iter()
    .map(|l| normalized(l))
    .collect();
    assert_eq!(lines, expected);
    let jobs: Vec<String> = client.query("SHOW JOBS", &[]).await.expect("jobs").iter().map(|r| r.get("definition")).collect();
    assert!(jobs.len() == 1 && jobs[0].starts_with("CREATE TABLE wc_out WITH"), "{jobs:?}");

    let err = client
        .batch_execute(&format!(
            "CREATE TABLE wc_refused WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json') AS
                 SELECT k, COUNT(*) AS n FROM wc_e GROUP BY k",
            refused.display()
        ))
        .await
        .expect_err("an updating query into an append-only sink");
    assert!(err.as_db_error().is_some_and(|e| e.message().contains("append-only")), "{err:?}");
    let tables: Vec<String> = client.query("SHOW TABLES", &[]).await.expect("tables").iter().map(|r| r.get(0)).collect();
    assert_eq!(tables, ["wc_e", "wc_out"]);
}

/// A window over a TIMESTAMP_LTZ into a sink's TIMESTAMP columns: `window_start` and
/// `window_end` are written as the wall-clock times of the job's session time zone, as Flink
/// writes them (its window_start and window_end are TIMESTAMP in that zone), and `window_time`
/// into a TIMESTAMP_LTZ column stays the instant (`Z`). 1704103200000 ms is 2024-01-01
/// 10:00:00 UTC, 18:00 in Shanghai (UTC+8 all year).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_casts_ltz_window_bounds_in_the_jobs_time_zone() {
    let dir = common::scratch_dir("sink-zone");
    let (input, out) = (dir.join("in.json"), dir.join("out"));
    std::fs::write(&input, "{\"u\": \"a\", \"e\": 1704103200000}\n{\"u\": \"a\", \"e\": 1704103260000}\n{\"u\": \"b\", \"e\": 1704106800000}\n")
        .expect("input");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE sz_clicks (u STRING, e BIGINT, ts AS TO_TIMESTAMP_LTZ(e, 3), WATERMARK FOR ts AS ts)
                 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE TABLE sz_out (ws TIMESTAMP(3), we TIMESTAMP(3), wt TIMESTAMP_LTZ(3), u STRING, c BIGINT)
                 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             SET 'table.local-time-zone' = 'Asia/Shanghai';
             INSERT INTO sz_out SELECT window_start, window_end, window_time, u, COUNT(*)
             FROM TABLE(TUMBLE(TABLE sz_clicks, DESCRIPTOR(ts), INTERVAL '1' HOUR))
             GROUP BY window_start, window_end, window_time, u;
             FLUSH;",
            input.display(),
            out.display()
        ))
        .await
        .expect("job");
    assert_eq!(
        lines_in(&out),
        [
            r#"{"ws":"2024-01-01 18:00:00","we":"2024-01-01 19:00:00","wt":"2024-01-01 10:59:59.999Z","u":"a","c":2}"#,
            r#"{"ws":"2024-01-01 19:00:00","we":"2024-01-01 20:00:00","wt":"2024-01-01 11:59:59.999Z","u":"b","c":1}"#,
        ]
    );
}

/// A LEFT interval join into an append-only sink: as in Flink, a left row without a partner is
/// written once, padded, when the watermark passes its bound, so the job's output is
/// append-only (it was refused as updating). Lines worked out by hand: left 1 (10:00:01) meets
/// right 1 (10:00:03, within [10:00:01, 10:00:06]); left 2 and 3 have no partner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_left_interval_join_writes_final_rows_into_an_append_only_sink() {
    let dir = common::scratch_dir("interval-sink");
    let (left, right, out) = (dir.join("l.json"), dir.join("r.json"), dir.join("out"));
    std::fs::write(
        &left,
        "{\"id\": 1, \"ts\": \"2024-01-01 10:00:01\"}\n{\"id\": 2, \"ts\": \"2024-01-01 10:00:05\"}\n{\"id\": 3, \"ts\": \"2024-01-01 10:00:12\"}\n",
    )
    .expect("left input");
    std::fs::write(&right, "{\"id\": 1, \"ts\": \"2024-01-01 10:00:03\"}\n{\"id\": 4, \"ts\": \"2024-01-01 10:00:15\"}\n")
        .expect("right input");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE is_l (id INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
                 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE TABLE is_r (id INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
                 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE TABLE is_out (id INT, lts TIMESTAMP(3), rts TIMESTAMP(3))
                 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             INSERT INTO is_out SELECT l.id, l.ts, r.ts FROM is_l l LEFT JOIN is_r r
                 ON l.id = r.id AND r.ts BETWEEN l.ts AND l.ts + INTERVAL '5' SECOND;
             FLUSH;",
            left.display(),
            right.display(),
            out.display()
        ))
        .await
        .expect("job");
    assert_eq!(
        lines_in(&out),
        [
            r#"{"id":1,"lts":"2024-01-01 10:00:01","rts":"2024-01-01 10:00:03"}"#,
            r#"{"id":2,"lts":"2024-01-01 10:00:05","rts":null}"#,
            r#"{"id":3,"lts":"2024-01-01 10:00:12","rts":null}"#,
        ]
    );
}
