//! Authentication and TLS against a real server: SCRAM-SHA-256 users from `--auth-file` (right
//! password in, wrong password or unknown user out with 28P01), a read-only role (writes 42501),
//! md5 with `--password`, psql with `sslmode=require` over `--tls-cert/--tls-key`, and the
//! warning when a server without users listens beyond loopback.

mod common;

use std::path::Path;
use std::process::Command;

async fn connect(server: &common::Server, user: &str, password: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let conn = format!("host=127.0.0.1 port={} user={user} password={password} dbname=weir", server.port);
    let (client, connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

fn code(err: &tokio_postgres::Error) -> Option<&str> {
    err.as_db_error().map(|e| e.code().code())
}

/// A self-signed certificate and key for localhost, made with the openssl command.
fn certificate(dir: &Path) -> (String, String) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("run openssl");
    assert!(status.status.success(), "openssl: {}", String::from_utf8_lossy(&status.stderr));
    (cert.display().to_string(), key.display().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_users_roles_and_tls() {
    let dir = common::scratch_dir("auth");
    let users = dir.join("users");
    std::fs::write(&users, "# users of the test\nalice:s3cret\nreader:r3ad:read-only\n").expect("auth file");
    let (cert, key) = certificate(&dir);
    let auth_file = users.display().to_string();
    let server = common::Server::start_with(
        &dir.join("data"),
        &["--auth-file", &auth_file, "--tls-cert", &cert, "--tls-key", &key],
        &[],
    );

    let alice = connect(&server, "alice", "s3cret").await.expect("alice's password");
    alice.batch_execute("CREATE TABLE au (id BIGINT); INSERT INTO au VALUES (1)").await.expect("alice writes");
    for (user, password) in [("alice", "wrong"), ("mallory", "s3cret")] {
        let err = connect(&server, user, password).await.err().expect("refused");
        assert_eq!(code(&err), Some("28P01"), "{user}: {err}");
        let message = err.as_db_error().map(|e| e.message().to_string()).unwrap_or_default();
        assert_eq!(message, format!("password authentication failed for user \"{user}\""));
    }

    let reader = connect(&server, "reader", "r3ad").await.expect("reader's password");
    let rows = reader.query("SELECT count(*) FROM au", &[]).await.expect("reader reads");
    assert_eq!(rows[0].get::<_, i64>(0), 1);
    // Each connection is its own user, in every spelling Postgres has.
    let row = reader.query_one("SELECT current_user AS a, session_user AS b, user AS c, current_role AS d", &[]).await.expect("current_user");
    assert_eq!((0..4).map(|i| row.get::<_, String>(i)).collect::<Vec<_>>(), ["reader"; 4]);
    let row = alice.query_one("SELECT current_user", &[]).await.expect("current_user");
    assert_eq!(row.get::<_, String>(0), "alice");
    let err = reader.batch_execute("INSERT INTO au VALUES (2)").await.expect_err("reader writes");
    assert_eq!(code(&err), Some("42501"), "{err}");
    let err = reader.batch_execute("CREATE TABLE au2 (x BIGINT)").await.expect_err("reader creates");
    assert_eq!(code(&err), Some("42501"), "{err}");

    // psql with sslmode=require: TLS, and the SCRAM password over it.
    let psql = |mode: &str, password: &str| {
        Command::new("psql")
            .arg(format!("host=127.0.0.1 port={} user=alice dbname=weir sslmode={mode}", server.port))
            .args(["-X", "-A", "-t", "-c", "SELECT count(*) FROM au", "-c", "\\conninfo"])
            .env("PGPASSWORD", password)
            .output()
            .expect("run psql")
    };
    let out = psql("require", "s3cret");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "psql: {}{}", stdout, String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("1\n"), "{stdout}");
    assert!(stdout.contains("SSL connection (protocol: TLSv1.3"), "{stdout}");
    let out = psql("require", "nope");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("password authentication failed for user \"alice\""), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn md5_password_and_no_tls() {
    let dir = common::scratch_dir("auth-md5");
    let server = common::Server::start_with(&dir.join("data"), &["--password", "pw", "--auth-method", "md5"], &[]);
    let weir = connect(&server, "weir", "pw").await.expect("md5 password");
    weir.batch_execute("SELECT 1").await.expect("query");
    let err = connect(&server, "weir", "pW").await.err().expect("refused");
    assert_eq!(code(&err), Some("28P01"), "{err}");
    // Without --tls-cert, sslmode=require is refused by psql: the server answers N.
    let out = Command::new("psql")
        .arg(format!("host=127.0.0.1 port={} user=weir dbname=weir sslmode=require", server.port))
        .args(["-X", "-c", "SELECT 1"])
        .env("PGPASSWORD", "pw")
        .output()
        .expect("run psql");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("server does not support SSL"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusting_everyone_beyond_loopback_warns() {
    let dir = common::scratch_dir("auth-warn");
    let server = common::Server::start_with(&dir.join("data"), &["--pg-listen", "0.0.0.0:0"], &[]);
    // Logged right after "listening on": polled with a deadline.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(&server.log).expect("log");
        if log.contains("WITHOUT AUTHENTICATION") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no warning in: {log}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let dir = common::scratch_dir("auth-quiet");
    let server = common::Server::start(&dir.join("data"));
    let log = std::fs::read_to_string(&server.log).expect("log");
    assert!(!log.contains("WITHOUT AUTHENTICATION"), "{log}");
}
