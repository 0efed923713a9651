//! Runs every `sql-tests/*.slt` file, and the shared acceptance cases listed in
//! `sql-tests/shared-cases.txt` (from `../shared/cases/`, when that folder is there), against
//! a real `weir serve` over the Postgres wire (tokio-postgres, simple query protocol).
//!
//! `cargo test --test sqllogictest -- NAME` runs only the files whose name contains NAME.
//! Ends with the line `N passed, N failed`; exits non-zero on any failure.

mod common;

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use sqllogictest::{DBOutput, DefaultColumnType};
use tokio_postgres::SimpleQueryMessage;

struct Pg {
    client: tokio_postgres::Client,
}

/// A server error as the runner shows it: SQLSTATE and message, not tokio-postgres's "db error".
#[derive(Debug)]
struct PgError(String);

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PgError {}

impl From<tokio_postgres::Error> for PgError {
    fn from(e: tokio_postgres::Error) -> Self {
        match e.as_db_error() {
            Some(db) => PgError(format!("{}: {}", db.code().code(), db.message())),
            None => PgError(e.to_string()),
        }
    }
}

#[async_trait]
impl sqllogictest::AsyncDB for Pg {
    type Error = PgError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<Self::ColumnType>, Self::Error> {
        let messages = self.client.simple_query(sql).await?;
        let mut rows = Vec::new();
        let mut columns = None;
        let mut affected = 0;
        for m in messages {
            match m {
                SimpleQueryMessage::RowDescription(cols) => columns = Some(cols.len()),
                SimpleQueryMessage::Row(row) => {
                    columns = Some(row.len());
                    rows.push(
                        (0..row.len())
                            .map(|i| match row.get(i) {
                                None => "NULL".to_string(),
                                Some("") => "(empty)".to_string(),
                                Some(v) => v.to_string(),
                            })
                            .collect(),
                    );
                }
                SimpleQueryMessage::CommandComplete(n) => affected = n,
                _ => {}
            }
        }
        Ok(match columns {
            Some(n) => DBOutput::Rows { types: vec![DefaultColumnType::Any; n], rows },
            None => DBOutput::StatementComplete(affected),
        })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "weir"
    }

    async fn sleep(dur: std::time::Duration) {
        tokio::time::sleep(dur).await
    }
}

fn test_files(filter: Option<&str>) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("sql-tests"))
        .expect("sql-tests/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    let shared = root.join("../shared/cases");
    let list = std::fs::read_to_string(root.join("sql-tests/shared-cases.txt")).unwrap_or_default();
    if shared.is_dir() {
        for name in list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            files.push(shared.join(name));
        }
    } else {
        println!("note: ../shared/cases not found; running only sql-tests/");
    }
    files
        .into_iter()
        .filter(|f| filter.is_none_or(|s| f.file_name().is_some_and(|n| n.to_string_lossy().contains(s))))
        .collect()
}

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let files = test_files(filter.as_deref());
    let dir = common::scratch_dir("slt");
    let server = common::Server::start(&dir.join("data"));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let mut passed = 0;
    let mut failed = Vec::new();
    for file in &files {
        let conn = server.conn_str();
        let mut runner = sqllogictest::Runner::new(move || {
            let conn = conn.clone();
            async move {
                let (client, connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls).await.map_err(PgError::from)?;
                tokio::spawn(async move {
                    let _ = connection.await;
                });
                Ok(Pg { client })
            }
        });
        let name = file.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        match rt.block_on(runner.run_file_async(file)) {
            Ok(()) => {
                println!("test {name} ... ok");
                passed += 1;
            }
            Err(e) => {
                println!("test {name} ... FAILED\n{e}\n");
                failed.push(name);
            }
        }
    }
    drop(server);
    if !failed.is_empty() {
        println!("failed files: {}", failed.join(", "));
    }
    println!("{passed} passed, {} failed", failed.len());
    if !failed.is_empty() {
        std::process::exit(1);
    }
}
