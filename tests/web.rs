//! The HTTP side of a real `weir serve`: `/metrics` (names, labels, counts worked out from the
//! statements run here, counters that move while a nexmark source streams), `/health`,
//! EXPLAIN ANALYZE and `pg_stat_activity` over the Postgres wire, and the web page opened in
//! headless Chromium (Debian's `chromium`; `test.sh` installs it and sets
//! `WEIR_REQUIRE_CHROMIUM=1`, without which a machine lacking it skips that test). The page's
//! screenshot is kept as a test artifact (`weir-web-page.png` in the target dir's `tmp`, also
//! copied to `$WEIR_SCREENSHOT` when set: that is how README's picture is made).

mod common;

use std::process::Command;
use std::time::Duration;

use common::{http_get, metric, metrics_until};

/// A nexmark bid table that never ends (`'nexmark.events' = '0'`).
fn unbounded_bids(name: &str) -> String {
    format!(
        "CREATE TABLE {name} (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
             date_time TIMESTAMP(3), extra VARCHAR, WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
         WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'nexmark.events' = '0', 'nexmark.partitions' = '2')"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_analyze_metrics_and_activity_show_what_ran() {
    let dir = common::scratch_dir("web-counts");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect_as(&server, "web_test").await;

    let (status, health) = http_get(&server, "/health").await;
    assert_eq!(status, 200);
    let health: serde_json::Value = serde_json::from_str(&health).expect("health is JSON");
    assert_eq!(health["status"], "up");

    client
        .batch_execute(
            "CREATE TABLE wb_orders (id BIGINT, customer VARCHAR, amount BIGINT, PRIMARY KEY (id) NOT ENFORCED);
             CREATE MATERIALIZED VIEW wb_totals AS SELECT customer, SUM(amount) AS total FROM wb_orders GROUP BY customer;",
        )
        .await
        .expect("create");
    // 3 rows in; +I (a, 15), +I (b, 7) out of the aggregate. Then an update of row 3: a -U/+U
    // pair in, -U (b, 7) / +U (b, 20) out.
    client.batch_execute("INSERT INTO wb_orders VALUES (1, 'a', 10), (2, 'a', 5), (3, 'b', 7)").await.expect("insert");
    client.batch_execute("UPDATE wb_orders SET amount = 20 WHERE id = 3").await.expect("update");
    client.simple_query("SELECT * FROM wb_no_such_table").await.expect_err("an unknown table");

    let plan: Vec<String> = client
        .simple_query("EXPLAIN ANALYZE MATERIALIZED VIEW wb_totals")
        .await
        .expect("explain analyze")
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => Some(r.get(0).unwrap_or_default().to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(plan.len(), 5, "{plan:#?}");
    assert!(plan[0].starts_with("Materialize parallelism=1 (rows_in=4 rows_out=4 busy_ms="), "{plan:#?}");
    assert!(plan[2].starts_with("    StreamGroupAggregate: group=[wb_orders.customer]"), "{plan:#?}");
    assert!(
        plan[2].contains("exchange=hash[wb_orders.customer] parallelism=2 (rows_in=5 rows_out=4 busy_ms="),
        "{plan:#?}"
    );
    assert!(plan[2].contains(" state: 2 cached entries, "), "two groups: {plan:#?}");
    assert!(
        plan[4].starts_with("        StreamSource: relation=wb_orders") && plan[4].contains("(rows_in=5 rows_out=5 "),
        "{plan:#?}"
    );
    // The same by job id.
    let by_id = client.simple_query("EXPLAIN ANALYZE JOB 'job-1'").await.expect("by id");
    assert_eq!(by_id.iter().filter(|m| matches!(m, tokio_postgres::SimpleQueryMessage::Row(_))).count(), 5);

    let op =
        |index: &'static str, name: &'static str| [("job_name", "wb_totals"), ("operator_index", index), ("operator", name)];
    let text = metrics_until(&server, Duration::from_secs(10), "the job's figures", |t| {
        metric(t, "weir_operator_records_in_total", &op("2", "StreamGroupAggregate")).is_some()
    })
    .await;
    assert_eq!(metric(&text, "weir_operator_records_in_total", &op("2", "StreamGroupAggregate")), Some(5.0));
    assert_eq!(metric(&text, "weir_operator_records_out_total", &op("2", "StreamGroupAggregate")), Some(4.0));
    assert_eq!(metric(&text, "weir_operator_records_in_total", &op("0", "Materialize")), Some(4.0));
    assert_eq!(metric(&text, "weir_operator_parallelism", &op("2", "StreamGroupAggregate")), Some(2.0));
    assert!(
        metric(&text, "weir_operator_busy_seconds_total", &op("2", "StreamGroupAggregate")).is_some_and(|s| s > 0.0)
    );
    let info = [("job_name", "wb_totals"), ("job_id", "job-1"), ("kind", "materialized view"), ("status", "RUNNING")];
    assert_eq!(metric(&text, "weir_job_info", &info), Some(1.0));
    let groups =
        [("job_name", "wb_totals"), ("operator_index", "2"), ("operator", "StreamGroupAggregate"), ("table", "groups")];
    assert_eq!(metric(&text, "weir_state_table_cache_entries", &groups), Some(2.0));
    // Statements by kind and outcome: the two CREATEs, one INSERT, one UPDATE, the failed SELECT.
    assert_eq!(metric(&text, "weir_statements_total", &[("kind", "create"), ("outcome", "ok")]), Some(2.0));
    assert_eq!(metric(&text, "weir_statements_total", &[("kind", "insert"), ("outcome", "ok")]), Some(1.0));
    assert_eq!(metric(&text, "weir_statements_total", &[("kind", "update"), ("outcome", "ok")]), Some(1.0));
    assert_eq!(metric(&text, "weir_statements_total", &[("kind", "select"), ("outcome", "error")]), Some(1.0));
    assert_eq!(metric(&text, "weir_connections", &[]), Some(1.0));
    // Every statement and the source thread committed epochs, each timed.
    let epochs = metric(&text, "weir_epochs_committed_total", &[]).expect("epochs");
    assert!(epochs >= 4.0, "{epochs}");
    assert!(metric(&text, "weir_epoch_commit_duration_seconds_count", &[]).is_some_and(|n| n >= epochs));
    assert!(metric(&text, "weir_epoch", &[]).is_some_and(|e| e >= 4.0));

    // pg_stat_activity: this connection runs the query; a second one is idle after its last.
    let (other, connection) =
        tokio_postgres::connect(&server.conn_str(), tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(connection);
    other.simple_query("SELECT 1 AS web_marker").await.expect("select");
    let rows = client
        .query("SELECT application_name, state, query, usename, client_addr FROM pg_stat_activity ORDER BY state", &[])
        .await
        .expect("pg_stat_activity");
    let rows: Vec<(String, String, String, String, Option<String>)> =
        rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4))).collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0].0, "web_test");
    assert_eq!(rows[0].1, "active");
    assert!(rows[0].2.starts_with("SELECT application_name, state, query"), "{rows:?}");
    assert_eq!((rows[1].1.as_str(), rows[1].2.as_str()), ("idle", "SELECT 1 AS web_marker"));
    assert_eq!((rows[1].3.as_str(), rows[1].4.as_deref()), ("weir", Some("127.0.0.1")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_move_while_a_nexmark_source_streams() {
    let dir = common::scratch_dir("web-metrics");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "{}; CREATE MATERIALIZED VIEW wm_counts AS SELECT auction, COUNT(*) AS n FROM wm_bid GROUP BY auction;",
            unbounded_bids("wm_bid")
        ))
        .await
        .expect("create");
    let read = [("job_name", "wm_counts"), ("table", "wm_bid")];
    let first = metrics_until(&server, Duration::from_secs(60), "rows read", |t| {
        metric(t, "weir_source_records_read_total", &read).is_some_and(|n| n > 0.0)
    })
    .await;
    let rows = metric(&first, "weir_source_records_read_total", &read).expect("rows");
    let epochs = metric(&first, "weir_epochs_committed_total", &[]).expect("epochs");
    let second = metrics_until(&server, Duration::from_secs(60), "more rows and epochs", |t| {
        metric(t, "weir_source_records_read_total", &read).is_some_and(|n| n > rows)
            && metric(t, "weir_epochs_committed_total", &[]).is_some_and(|n| n > epochs)
    })
    .await;
    // Both partitions report a position and a watermark; the aggregate has rows in.
    for partition in ["0", "1"] {
        let labels = [("job_name", "wm_counts"), ("table", "wm_bid"), ("partition", partition)];
        assert!(metric(&second, "weir_source_position", &labels).is_some(), "position of {partition}:\n{second}");
        assert!(metric(&second, "weir_source_watermark_ms", &labels).is_some(), "watermark of {partition}:\n{second}");
    }
    let agg = [("job_name", "wm_counts"), ("operator_index", "2"), ("operator", "StreamGroupAggregate")];
    assert!(metric(&second, "weir_operator_records_in_total", &agg).is_some_and(|n| n > 0.0), "{second}");
    // Each series is declared once, with its type.
    for (name, kind) in [
        ("weir_operator_records_in", "counter"),
        ("weir_source_watermark_ms", "gauge"),
        ("weir_epoch_commit_duration_seconds", "histogram"),
    ] {
        assert_eq!(second.matches(&format!("# TYPE {name} {kind}\n")).count(), 1, "{name}:\n{second}");
    }
}

/// Chromium, if this machine has it; `None` (a skip) without it unless `WEIR_REQUIRE_CHROMIUM`
/// is set.
fn chromium() -> Option<&'static str> {
    for candidate in ["chromium", "chromium-browser", "google-chrome"] {
        if Command::new(candidate).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Some(candidate);
        }
    }
    assert!(
        std::env::var_os("WEIR_REQUIRE_CHROMIUM").is_none(),
        "Chromium is needed for the web page test: apt-get install chromium"
    );
    eprintln!("skipped: no chromium on this machine (apt-get install chromium)");
    None
}

/// Chromium in headless mode on `url`, its scripts given `budget_ms` of virtual time (fetches
/// complete first) before the DOM is dumped or the screenshot taken.
fn headless(browser: &str, url: &str, budget_ms: u32, action: &[&str]) -> std::process::Output {
    let profile = common::scratch_dir("web-chromium-profile");
    Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,900"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .args(action)
        .arg(url)
        .output()
        .expect("run chromium")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_page_shows_the_running_job_and_its_dataflow() {
    let Some(browser) = chromium() else { return };
    let dir = common::scratch_dir("web-page");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(&format!(
            "{};
             CREATE MATERIALIZED VIEW wp_top AS SELECT auction, COUNT(*) AS bids, MAX(price) AS top FROM wp_bid GROUP BY auction;
             CREATE MATERIALIZED VIEW wp_windows AS SELECT window_start, window_end, COUNT(*) AS bids
             FROM TABLE(TUMBLE(TABLE wp_bid, DESCRIPTOR(date_time), INTERVAL '10' SECOND)) GROUP BY window_start, window_end;",
            unbounded_bids("wp_bid")
        ))
        .await
        .expect("create");
    metrics_until(&server, Duration::from_secs(60), "both jobs reading", |t| {
        ["wp_top", "wp_windows"].iter().all(|job| {
            metric(t, "weir_source_records_read_total", &[("job_name", job), ("table", "wp_bid")]).is_some_and(|n| n > 0.0)
        })
    })
    .await;

    let url = server.url("/#job=wp_top");
    // 200 s of the page's time: about 200 refreshes in a few seconds of real time (each waits
    // for its fetch), so the rates, taken over at least a second of the jobs' figures, show.
    let out = headless(browser, &url, 200_000, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("data-loaded=\"true\""),
        "the page loaded its data: {dom}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The job list has both jobs, RUNNING; the graph is wp_top's: its operators as boxes.
    for job in ["wp_top", "wp_windows"] {
        assert!(dom.contains(&format!("data-job=\"{job}\"")), "job {job} listed: {dom}");
    }
    assert!(dom.contains("class=\"status-RUNNING\""), "{dom}");
    assert!(dom.contains("Dataflow of <span id=\"graph-job\">wp_top</span>"), "{dom}");
    for op in ["StreamSource", "StreamProject", "StreamGroupAggregate", "Materialize"] {
        assert!(dom.contains(&format!("data-operator=\"{op}\"")), "operator {op} drawn: {dom}");
    }
    assert!(!dom.contains("StreamWindowAggregate"), "only the selected job's graph: {dom}");
    assert!(dom.contains("hash[wp_bid.auction]"), "the hash exchange on an edge: {dom}");
    // The source's box shows its rate: a number, not the placeholder shown before there is one.
    let source_box = dom.split("data-operator=\"StreamSource\"").nth(1).expect("the source's box");
    let rate = source_box.split(" rows/s").next().and_then(|t| t.rsplit('>').next()).unwrap_or_default();
    assert!(rate.chars().next().is_some_and(|c| c.is_ascii_digit()), "the source's rows/s: {rate:?} in {source_box}");

    let shot = common::tmp_dir().join("weir-web-page.png");
    let out = headless(browser, &url, 200_000, &[&format!("--screenshot={}", shot.display())]);
    assert!(out.status.success(), "screenshot: {}", String::from_utf8_lossy(&out.stderr));
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "a picture of the page: {} bytes", png.len());
    if let Some(copy) = std::env::var_os("WEIR_SCREENSHOT") {
        std::fs::copy(&shot, copy).expect("copy the screenshot");
    }
}

/// A count over 100 billion generated rows: minutes of work, so it is still running when
/// cancelled. (Its rows come from a scan, which yields to the scheduler between batches, so
/// the aborted query stops at once; an operator that computes for long without reading input,
/// a big cross join's output, runs on until it next reads: DataFusion's cooperative yielding.)
const SLOW_QUERY: &str = "SELECT count(*) FROM range(100000000000)";

/// The server's CPU time so far (user + system), s, from /proc.
fn cpu_seconds(server: &common::Server) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", server.child.id())).expect("/proc stat");
    // After the command name in parentheses: utime and stime are fields 14 and 15.
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
    (fields[11].parse::<f64>().expect("utime") + fields[12].parse::<f64>().expect("stime")) / 100.0
}

/// Waits until connection `application_name` runs a statement, and returns its pid.
async fn active_pid(client: &tokio_postgres::Client, application_name: &str) -> i32 {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let rows = client
            .query(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'",
                &[&application_name],
            )
            .await
            .expect("pg_stat_activity");
        if let Some(row) = rows.first() {
            return row.get(0);
        }
        assert!(std::time::Instant::now() < deadline, "{application_name} never ran its query");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_select_is_cancelled_by_pg_cancel_backend_and_by_a_cancel_request() {
    let dir = common::scratch_dir("web-cancel");
    let server = common::Server::start(&dir.join("data"));
    let slow = std::sync::Arc::new(common::connect_as(&server, "slow_client").await);
    let admin = common::connect(&server).await;

    for by_function in [true, false] {
        let running = {
            let slow = std::sync::Arc::clone(&slow);
            tokio::spawn(async move { slow.simple_query(SLOW_QUERY).await })
        };
        let pid = active_pid(&admin, "slow_client").await;
        if by_function {
            let sent: bool =
                admin.query_one(&format!("SELECT pg_cancel_backend({pid})"), &[]).await.expect("cancel").get(0);
            assert!(sent, "pg_cancel_backend({pid})");
        } else {
            slow.cancel_token().cancel_query(tokio_postgres::NoTls).await.expect("cancel request");
        }
        let result = tokio::time::timeout(Duration::from_secs(30), running).await.expect("cancelled in time").expect("task");
        let err = result.expect_err("the query was cancelled");
        assert_eq!(err.code(), Some(&tokio_postgres::error::SqlState::QUERY_CANCELED), "{err:?}");
        // The query itself stopped: the server is nearly idle, where the cross join would keep
        // a core busy.
        let before = cpu_seconds(&server);
        tokio::time::sleep(Duration::from_secs(2)).await;
        let used = cpu_seconds(&server) - before;
        assert!(used < 1.0, "the server used {used:.2} CPU s in 2 s after the cancel");
        // The connection goes on.
        let one = slow.simple_query("SELECT 1").await.expect("the connection after a cancel");
        assert_eq!(one.len(), 3, "row description, one row, command complete: {one:?}");
    }
    // No such connection.
    let sent: bool = admin.query_one("SELECT pg_cancel_backend(-1)", &[]).await.expect("cancel").get(0);
    assert!(!sent);
}
