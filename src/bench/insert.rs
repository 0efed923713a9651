//! `weir bench insert`: bulk `INSERT ... SELECT` of N rows into a plain table that feeds a
//! `GROUP BY` materialized view, in one statement (one epoch), then a check of the view. With
//! `--copy`, the same rows as a `COPY bench_rows FROM STDIN` text stream (made before the
//! clock starts; parsed, converted and inserted in the timed part, as a client's COPY is).
//!
//! Rows: `id` 1..=N, `k = id % groups`, `v = id`. The view holds `COUNT(*)` and `SUM(v)` per
//! `k`; the report checks the totals against the closed forms `N` and `N (N + 1) / 2`.

use std::time::Instant;

use arrow::array::{Array, Int64Array};

use crate::bench::Report;
use crate::error::{Result, WeirError};
use crate::sql::{Database, Session, StatementResult};

/// Runs the benchmark in a fresh database under `data_dir`.
///
/// # Errors
/// Any statement error, or `Internal` when the view's totals are not the closed forms.
pub async fn run(data_dir: &std::path::Path, rows: u64, groups: u64, copy: bool) -> Result<Report> {
    let _ = std::fs::remove_dir_all(data_dir);
    let db = Database::open(data_dir)?;
    let mut session = Session::default();
    for sql in [
        "CREATE TABLE bench_rows (id BIGINT, k BIGINT, v BIGINT)",
        "CREATE MATERIALIZED VIEW bench_by_k AS SELECT k, COUNT(*) AS cnt, SUM(v) AS total FROM bench_rows GROUP BY k",
    ] {
        db.execute(&mut session, sql).await?;
    }
    let insert = format!(
        "INSERT INTO bench_rows SELECT value AS id, value % {groups} AS k, value AS v FROM generate_series(1, {rows})"
    );
    let seconds = if copy {
        let mut data = Vec::with_capacity(rows as usize * 24);
        for id in 1..=rows {
            use std::io::Write;
            let _ = writeln!(data, "{id}\t{}\t{id}", id % groups);
        }
        let format = crate::sql::copy::plan(&sqlparser::parser::Parser::parse_sql(
            &sqlparser::dialect::PostgreSqlDialect {},
            "COPY bench_rows FROM STDIN",
        )
        .map_err(|e| WeirError::internal(e.to_string()))?[0])?;
        let crate::sql::copy::CopyPlan::In { format, .. } = format else { return Err(WeirError::internal("not a COPY FROM")) };
        let columns = ["id", "k", "v"].map(String::from);
        let start = Instant::now();
        db.copy_in(&mut session, "bench_rows", &columns, &format, &data).await?;
        start.elapsed().as_secs_f64()
    } else {
        let start = Instant::now();
        db.execute(&mut session, &insert).await?;
        start.elapsed().as_secs_f64()
    };

    let check = "SELECT CAST(SUM(cnt) AS BIGINT), CAST(SUM(total) AS BIGINT), CAST(COUNT(*) AS BIGINT) FROM bench_by_k";
    let StatementResult::Rows { batches, .. } = db.execute(&mut session, check).await? else {
        return Err(WeirError::internal("the check query returned no rows"));
    };
    let value = |col: usize| -> i64 {
        batches
            .first()
            .and_then(|b| b.column(col).as_any().downcast_ref::<Int64Array>().map(|a| a.value(0)))
            .unwrap_or(-1)
    };
    let (n, sum, num_groups) = (rows as i64, rows as i128 * (rows as i128 + 1) / 2, groups.min(rows) as i64);
    if value(0) != n || value(1) as i128 != sum || value(2) != num_groups {
        return Err(WeirError::internal(format!(
            "view totals wrong: count {} (want {n}), sum {} (want {sum}), groups {} (want {num_groups})",
            value(0),
            value(1),
            value(2)
        )));
    }
    Ok(Report::new(rows, seconds))
}

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn small_run_keeps_the_view_right() -> crate::error::Result<()> {
        let dir = std::env::temp_dir().join(format!("weir-bench-insert-{}", std::process::id()));
        let report = super::run(&dir, 20_000, 7, false).await?;
        assert_eq!(report.rows, 20_000);
        let report = super::run(&dir, 20_000, 7, true).await?;
        assert_eq!(report.rows, 20_000, "the same rows by COPY");
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }
}
