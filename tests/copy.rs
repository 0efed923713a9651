//! `COPY` over the wire: psql's `\copy` both ways (text and CSV) and tokio-postgres's copy
//! API, into a plain table feeding a GROUP BY view. Expected values are computed here from the
//! rows sent: rows i = 1..=N with id i, name `n{i % 7}` (a tab, a backslash, a quote or a
//! comma in some), amount i * 10 cents, and a NULL name every 11th row.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use futures::{SinkExt, StreamExt};

const N: i64 = 5_000;

fn name(i: i64) -> Option<String> {
    if i % 11 == 0 {
        return None;
    }
    Some(match i % 7 {
        0 => "tab\there".to_string(),
        1 => "back\\slash".to_string(),
        2 => "say \"hi\"".to_string(),
        3 => "a, b".to_string(),
        k => format!("n{k}"),
    })
}

/// The rows as COPY text lines.
fn text_lines() -> String {
    let mut out = String::new();
    for i in 1..=N {
        let n = match name(i) {
            None => "\\N".to_string(),
            Some(n) => n.replace('\\', "\\\\").replace('\t', "\\t"),
        };
        out.push_str(&format!("{i}\t{n}\t{}.{:02}\n", i * 10 / 100, i * 10 % 100));
    }
    out
}

/// Runs psql with `-c command` (or, without one, the script on stdin), feeding `stdin`;
/// returns stdout (fails the test on an error).
fn psql(port: u16, command: Option<&str>, stdin: &str) -> String {
    let mut psql = Command::new("psql");
    psql.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "weir", "-d", "weir", "-X", "-A", "-t"])
        .args(["-v", "ON_ERROR_STOP=1"]);
    if let Some(command) = command {
        psql.args(["-c", command]);
    }
    let mut child = psql
        .env("LC_ALL", "C")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("psql runs");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
    let out = child.wait_with_output().expect("psql output");
    assert!(out.status.success(), "psql {command:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_in_and_out_through_psql_and_a_driver() {
    let dir = common::scratch_dir("copy");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE cp (id BIGINT, name VARCHAR, amount DECIMAL(10, 2), PRIMARY KEY (id) NOT ENFORCED);
             CREATE MATERIALIZED VIEW cp_by_name AS SELECT name, COUNT(*) AS n, SUM(amount) AS total FROM cp GROUP BY name;",
        )
        .await
        .expect("schema");

    // psql \copy from stdin, text format: one COPY, one epoch.
    let out = psql(server.port, Some("\\copy cp FROM STDIN"), &text_lines());
    assert_eq!(out.trim(), format!("COPY {N}"));
    let count: i64 = client.query_one("SELECT COUNT(*) FROM cp", &[]).await.expect("count").get(0);
    assert_eq!(count, N);
    let nulls: i64 = client.query_one("SELECT n FROM cp_by_name WHERE name IS NULL", &[]).await.expect("nulls").get(0);
    assert_eq!(nulls, N / 11);
    let tabs: i64 = client.query_one("SELECT n FROM cp_by_name WHERE name = E'tab\\there'", &[]).await.expect("tabs").get(0);
    assert_eq!(tabs, (1..=N).filter(|i| i % 7 == 0 && i % 11 != 0).count() as i64);

    // A psql script: COPY ... FROM stdin, rows inline, ended by `\.`, then more SQL.
    let script = "COPY cp (id, name) FROM stdin;\n300001\tfrom a script\n300002\t\\101\\x42\n\\.\nSELECT name FROM cp WHERE id > 300000 ORDER BY id;\n";
    assert_eq!(psql(server.port, None, script), "COPY 2\nfrom a script\nAB\n");
    client.batch_execute("DELETE FROM cp WHERE id > 300000").await.expect("delete");

    // Out again, CSV with a header: the same rows, Postgres's quoting.
    let csv = psql(server.port, Some("\\copy (SELECT id, name, amount FROM cp ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER)"), "");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("id,name,amount"));
    assert_eq!(lines.next(), Some("1,back\\slash,0.10"));
    assert_eq!(lines.next(), Some("2,\"say \"\"hi\"\"\",0.20"));
    assert_eq!(lines.next(), Some("3,\"a, b\",0.30"));
    assert_eq!(csv.lines().count() as i64, N + 1);
    assert!(csv.contains("\n11,,1.10\n"), "NULL is an unquoted empty field");

    // A driver's copy API: CSV in, text out; a bad value fails the whole COPY.
    let sink = client.copy_in("COPY cp (id, name) FROM STDIN WITH (FORMAT csv)").await.expect("copy in");
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"100001,\"x, y\"\n100002,\n")).await.expect("send");
    assert_eq!(sink.finish().await.expect("finish"), 2);
    let stream = client.copy_out("COPY (SELECT id, name, amount FROM cp WHERE id > 100000 ORDER BY id) TO STDOUT").await.expect("copy out");
    let chunks: Vec<_> = stream.collect().await;
    let text: Vec<u8> = chunks.into_iter().flat_map(|c| c.expect("chunk").to_vec()).collect();
    assert_eq!(String::from_utf8(text).expect("utf-8"), "100001\tx, y\t\\N\n100002\t\\N\t\\N\n");
    let sink = client.copy_in("COPY cp FROM STDIN").await.expect("copy in");
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"200001\tok\t1.00\nnot-a-number\tbad\t2.00\n")).await.expect("send");
    let err = sink.finish().await.expect_err("a bad value");
    let db = err.as_db_error().expect("a server error");
    assert_eq!(db.code().code(), "22P02");
    assert_eq!(db.message(), "invalid input for type bigint: \"not-a-number\" (COPY line 2, column id)");
    let count: i64 = client.query_one("SELECT COUNT(*) FROM cp", &[]).await.expect("count").get(0);
    assert_eq!(count, N + 2, "the failed COPY inserted nothing");
}

/// The session time zone over the wire: COPY FROM reads a TIMESTAMP_LTZ's text without an
/// offset as a wall-clock time in it, COPY TO and text results write it there with its offset
/// (Postgres's `timestamptz`), a binary result is the instant. Worked out by hand: 10:00 in
/// Asia/Shanghai (+08) is 02:00 UTC, 1704074400 s since 1970.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_time_zone_reads_and_writes_wall_clock_times() {
    let dir = common::scratch_dir("copy-tz");
    let server = common::Server::start(&dir.join("data"));
    let client = common::connect(&server).await;
    client
        .batch_execute("CREATE TABLE tz (id BIGINT, ts TIMESTAMP_LTZ(3)); SET TIME ZONE 'Asia/Shanghai';")
        .await
        .expect("schema");
    let sink = client.copy_in("COPY tz FROM STDIN").await.expect("copy in");
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"1\t2024-01-01 10:00:00\n2\t2024-01-01 10:00:00+00\n")).await.expect("send");
    assert_eq!(sink.finish().await.expect("finish"), 2);
    let stream = client.copy_out("COPY (SELECT id, ts FROM tz ORDER BY id) TO STDOUT").await.expect("copy out");
    let chunks: Vec<_> = stream.collect().await;
    let text: Vec<u8> = chunks.into_iter().flat_map(|c| c.expect("chunk").to_vec()).collect();
    assert_eq!(String::from_utf8(text).expect("utf-8"), "1\t2024-01-01 10:00:00+08\n2\t2024-01-01 18:00:00+08\n");
    // Binary results carry the instant: microseconds since 2000-01-01 UTC.
    let row = client.query_one("SELECT ts FROM tz WHERE id = 1", &[]).await.expect("binary");
    let at: std::time::SystemTime = row.get(0);
    let seconds = at.duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_secs();
    assert_eq!(seconds, 1_704_074_400);
    // psql shows the session's zone, and another session's is UTC.
    let script = "SET TIME ZONE 'Asia/Kolkata';\nSELECT ts FROM tz WHERE id = 1;\n";
    assert_eq!(psql(server.port, None, script), "SET\n2024-01-01 07:30:00+05:30\n");
    assert_eq!(psql(server.port, Some("SELECT ts FROM tz WHERE id = 1"), ""), "2024-01-01 02:00:00+00\n");
    // A zone asked for at startup (libpq's PGTZ, PGOPTIONS) is the session's.
    let run = |env: (&str, &str), sql: &str| {
        Command::new("psql")
            .args(["-h", "127.0.0.1", "-p", &server.port.to_string(), "-U", "weir", "-d", "weir", "-X", "-A", "-t", "-c", sql])
            .env(env.0, env.1)
            .output()
            .expect("psql runs")
    };
    for (var, value, shown) in [("PGTZ", "Asia/Shanghai", "2024-01-01 10:00:00+08"), ("PGOPTIONS", "-c TimeZone=Asia/Kolkata", "2024-01-01 07:30:00+05:30")] {
        let out = run((var, value), "SELECT ts FROM tz WHERE id = 1");
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{shown}\n"), "{var}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // At startup a fixed offset reads as Postgres and libpq read it (POSIX: GMT-8 is 8 hours
    // east), RESET returns to it, and a zone that is none refuses the connection (FATAL).
    let out = run(("PGTZ", "GMT-8"), "SET TIME ZONE 'UTC'; RESET timezone; SHOW timezone");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "SET\nRESET\nGMT+08:00\n", "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(("PGOPTIONS", "-c TimeZone=Bad/Zone"), "SELECT 1");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("FATAL:  invalid value for parameter \"TimeZone\": \"Bad/Zone\""));
}
