//! SHOW, DESCRIBE, SHOW CREATE and session settings: results built from the catalog.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use weir_catalog::{Catalog, RelationKind};

use crate::error::{Result, WeirError};
use crate::sql::database::StatementResult;
use crate::sql::parser::ShowList;
pub use crate::plan::type_names::sql_type_name;

/// Settings with a default, shown by `SHOW name` until a session sets them. Weir's own
/// (Flink's names) first, then the Postgres parameters drivers ask for.
pub const DEFAULT_SETTINGS: &[(&str, &str)] = &[
    ("table.exec.state.ttl", "0 ms"),
    ("table.exec.emit.allow-lateness", "0 ms"),
    ("table.local-time-zone", "UTC"),
    ("server_version", "16.0"),
    ("server_encoding", "UTF8"),
    ("client_encoding", "UTF8"),
    ("datestyle", "ISO, MDY"),
    ("timezone", "UTC"),
    ("search_path", "public"),
    ("standard_conforming_strings", "on"),
    ("transaction_isolation", "read committed"),
    ("integer_datetimes", "on"),
    ("application_name", ""),
    ("extra_float_digits", "1"),
    ("client_min_messages", "notice"),
    ("max_identifier_length", "63"),
    ("statement_timeout", "0"),
    ("execution.savepoint.path", ""),
];

/// A result of text columns.
pub fn text_rows(columns: &[&str], rows: Vec<Vec<Option<String>>>) -> Result<StatementResult> {
    let schema = Arc::new(Schema::new(
        columns.iter().map(|c| Field::new(*c, DataType::Utf8, true)).collect::<Vec<_>>(),
    ));
    let arrays: Vec<ArrayRef> = (0..columns.len())
        .map(|i| Arc::new(StringArray::from(rows.iter().map(|r| r[i].clone()).collect::<Vec<_>>())) as ArrayRef)
        .collect();
    let batch = RecordBatch::try_new(Arc::clone(&schema), arrays)?;
    Ok(StatementResult::Rows { schema, batches: vec![batch] })
}

/// `SHOW TABLES | VIEWS | MATERIALIZED VIEWS | JOBS | [USER] FUNCTIONS`.
///
/// `SHOW FUNCTIONS` lists `functions`, the names a query can call, as Flink does (one column,
/// `function name`); `SHOW USER FUNCTIONS` the user-defined ones: none.
///
/// `SHOW JOBS` lists the jobs of `catalog` with their status (`RUNNING`, `FAILED`,
/// `SUSPENDED`, `RESTARTING`; [`crate::engine::job_status`]), error and late rows (the rows
/// their event-time operators dropped, detailed per operator in `weir_late_rows`) as
/// `jobs`, the system tables' figures, show them (`None` for the other lists). A job of the
/// catalog that the figures do not know yet (they are those of before the statement running
/// now, [`crate::sql::database::STATE_WAIT`]) is `RUNNING`, without late rows.
pub fn show_list(
    catalog: &Catalog,
    functions: &[String],
    list: ShowList,
    like: Option<&crate::sql::parser::ShowLike>,
    jobs: Option<&crate::engine::SystemState>,
) -> Result<StatementResult> {
    let status: std::collections::BTreeMap<&str, &crate::engine::system::JobRow> =
        jobs.map(|j| j.jobs.iter().map(|row| (row.name.as_str(), row)).collect()).unwrap_or_default();
    let mut late_rows: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for (job, _, _, _, n) in jobs.map(|j| j.late_rows.as_slice()).unwrap_or_default() {
        *late_rows.entry(job.as_str()).or_default() += n;
    }
    let of_kind = |kinds: &[RelationKind]| -> Vec<Vec<Option<String>>> {
        catalog
            .relations
            .values()
            .filter(|r| kinds.contains(&r.kind) && crate::sql::temporary_tables::listed(r))
            .filter(|r| like.is_none_or(|l| l.accepts(&r.name)))
            .map(|r| vec![Some(r.name.clone())])
            .collect()
    };
    match list {
        // Flink's column name.
        ShowList::Functions => text_rows(&["function name"], functions.iter().map(|f| vec![Some(f.clone())]).collect()),
        ShowList::UserFunctions => text_rows(&["function name"], Vec::new()),
        // Flink's column names.
        ShowList::Catalogs | ShowList::CurrentCatalog | ShowList::Databases | ShowList::CurrentDatabase => {
            let (column, name) = match list {
                ShowList::Catalogs => ("catalog name", crate::sql::parser::DEFAULT_CATALOG),
                ShowList::CurrentCatalog => ("current catalog name", crate::sql::parser::DEFAULT_CATALOG),
                ShowList::Databases => ("database name", crate::sql::parser::DEFAULT_DATABASE),
                _ => ("current database name", crate::sql::parser::DEFAULT_DATABASE),
            };
            let rows = match like.is_none_or(|l| l.accepts(name)) {
                true => vec![vec![Some(name.to_string())]],
                false => vec![],
            };
            text_rows(&[column], rows)
        }
        // Flink lists views with the tables (Hive's way, FLINK-17111), and a materialized view
        // is a table there (a materialized table).
        ShowList::Tables => {
            text_rows(&["table_name"], of_kind(&[RelationKind::Table, RelationKind::View, RelationKind::MaterializedView]))
        }
        ShowList::Views => text_rows(&["view_name"], of_kind(&[RelationKind::View])),
        ShowList::MaterializedViews => text_rows(&["materialized_view_name"], of_kind(&[RelationKind::MaterializedView])),
        ShowList::Jobs => text_rows(
            &["job_id", "job_name", "kind", "status", "late_rows", "restarts", "definition", "error"],
            jobs_in_creation_order(catalog)
                .into_iter()
                .filter_map(|r| {
                    r.job.as_ref().map(|id| {
                        vec![
                            Some(id.clone()),
                            Some(match r.kind {
                                RelationKind::SinkJob => format!(
                                    "INSERT INTO {}",
                                    r.options.get(crate::engine::SINK_OPTION).map(String::as_str).unwrap_or("?")
                                ),
                                _ => r.name.clone(),
                            }),
                            Some(r.kind.sql_name().to_string()),
                            Some(status.get(r.name.as_str()).map_or("RUNNING", |j| j.status.as_str()).to_string()),
                            Some(late_rows.get(r.name.as_str()).copied().unwrap_or(0).to_string()),
                            Some(status.get(r.name.as_str()).map_or(0, |j| j.restarts).to_string()),
                            Some(r.definition.clone()),
                            status.get(r.name.as_str()).and_then(|j| j.error.as_deref()).map(crate::sql::messages::message_in_sql_terms),
                        ]
                    })
                })
                .collect(),
        ),
    }
}

/// The relations of `catalog` that have a job, in the order the jobs were created: by the
/// number of their id (`job-2` before `job-10`), as Flink's job list is by submission.
fn jobs_in_creation_order(catalog: &Catalog) -> Vec<&weir_catalog::Relation> {
    let mut jobs: Vec<_> = catalog.relations.values().filter(|r| r.job.is_some()).collect();
    jobs.sort_by_key(|r| job_order(r.job.as_deref().unwrap_or_default()));
    jobs
}

/// The sort key of job id `id`: its number, then the id (an id without one last).
fn job_order(id: &str) -> (u64, String) {
    let number = id.strip_prefix("job-").and_then(|n| n.parse::<u64>().ok()).unwrap_or(u64::MAX);
    (number, id.to_string())
}

/// `EXPLAIN ANALYZE`: the running job's plan as EXPLAIN shows it (the root first, each input
/// indented below the node it feeds), each line ending with what the operator has done since
/// the job started in this process: `(rows_in=N rows_out=N busy_ms=F [watermark=T]
/// [late_rows=N] [state: [N cached entries, N bytes cached, ]N bytes on disk])`. Postgres's
/// EXPLAIN ANALYZE runs a query and reports its actual rows and time; a streaming job never
/// ends, so here they are the running totals.
///
/// # Errors
/// `UndefinedObject` when no job has that name or id; `ObjectNotInPrerequisiteState` when it is
/// FAILED (it runs no more).
pub fn explain_analyze(state: &crate::engine::SystemState, job: &crate::sql::parser::JobRef) -> Result<StatementResult> {
    use crate::sql::parser::JobRef;
    let found = state.jobs.iter().find(|j| match job {
        JobRef::View(name) => &j.name == name,
        JobRef::Id(id) => &j.job_id == id,
    });
    let Some(j) = found else {
        return Err(WeirError::undefined_object(match job {
            JobRef::View(name) => format!("no materialized view '{name}' with a running job"),
            JobRef::Id(id) => format!("no job '{id}'; SHOW JOBS lists them"),
        }));
    };
    if let Some(error) = &j.error {
        return Err(WeirError::not_in_state(format!("job '{}' is FAILED and runs no more: {error}", j.job_id)));
    }
    let ops = &j.operators;
    // Each operator's inputs in input order: (input, operator, whether it is a reused
    // sub-plan shown above, which gets one line naming it, as EXPLAIN shows it).
    let mut inputs: Vec<Vec<(usize, usize, bool)>> = vec![Vec::new(); ops.len()];
    for o in ops {
        if let Some(p) = o.parent {
            inputs[p].push((o.input, o.index, false));
        }
        for &(p, input) in &o.reused_by {
            inputs[p].push((input, o.index, true));
        }
    }
    for list in &mut inputs {
        list.sort();
    }
    let mut lines = Vec::with_capacity(ops.len());
    // Depth-first from the root, as EXPLAIN prints the plan.
    let mut stack: Vec<(usize, usize, bool)> = ops.iter().filter(|o| o.parent.is_none()).map(|o| (o.index, 0, false)).collect();
    while let Some((index, depth, reused)) = stack.pop() {
        let o = &ops[index];
        let indent = "  ".repeat(depth);
        if reused {
            lines.push(vec![Some(format!("{indent}Reused: {} (operator {index}) above, computed once", o.name))]);
            continue;
        }
        lines.push(vec![Some(format!("{indent}{}", analyze_line(state, &j.name, o)))]);
        stack.extend(inputs[index].iter().rev().map(|&(_, child, reused)| (child, depth + 1, reused)));
    }
    text_rows(&["QUERY PLAN"], lines)
}

/// One operator's EXPLAIN ANALYZE line (without indentation): its plan line, parallelism and
/// figures since the job started.
fn analyze_line(state: &crate::engine::SystemState, job: &str, o: &crate::runtime::job::OperatorStats) -> String {
    let mut figures = format!("rows_in={} rows_out={} busy_ms={:.3}", o.rows_in, o.rows_out, o.busy_ns as f64 / 1e6);
    if let Some(w) = o.watermark {
        let at = chrono::DateTime::from_timestamp_millis(w).map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string());
        figures.push_str(&format!(" watermark={}", at.unwrap_or_else(|| w.to_string())));
    }
    if o.late_rows > 0 {
        figures.push_str(&format!(" late_rows={}", o.late_rows));
    }
    let tables: Vec<_> = state.state_tables.iter().filter(|t| t.job == job && t.operator_index == o.index as u64).collect();
    if !tables.is_empty() {
        let disk: u64 = tables.iter().map(|t| t.disk_bytes).sum();
        match tables.iter().filter_map(|t| t.cache).reduce(|a, b| a + b) {
            Some(c) => figures.push_str(&format!(
                " state: {} cached entries, {} bytes cached, {disk} bytes on disk",
                c.entries, c.bytes
            )),
            None => figures.push_str(&format!(" state: {disk} bytes on disk")),
        }
    }
    let plan = if o.detail.is_empty() { o.name.clone() } else { format!("{}: {}", o.name, o.detail) };
    let parallel = match o.exchange.as_str() {
        "single" | "forward" => format!("parallelism={}", o.parallelism),
        hash => format!("exchange={hash} parallelism={}", o.parallelism),
    };
    format!("{plan} {parallel} ({figures})")
}

/// `DESCRIBE name`: one row per column (Flink's columns: name, type, null, key, extras,
/// watermark); `SHOW COLUMNS FROM name LIKE ..` those whose name `like` accepts.
pub fn describe(catalog: &Catalog, name: &str, like: Option<&crate::sql::parser::ShowLike>) -> Result<StatementResult> {
    let rel = catalog.get(name).ok_or_else(|| WeirError::unknown_table(name))?;
    let schema = Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("type", DataType::Utf8, false),
        Field::new("null", DataType::Boolean, false),
        Field::new("key", DataType::Utf8, true),
        Field::new("extras", DataType::Utf8, true),
        Field::new("watermark", DataType::Utf8, true),
    ]));
    let mut names = Vec::new();
    let mut types = Vec::new();
    let mut nulls = Vec::new();
    let mut keys = Vec::new();
    let mut extras = Vec::new();
    let mut watermarks = Vec::new();
    for c in rel.columns.iter().filter(|c| like.is_none_or(|l| l.accepts(&c.name))) {
        names.push(c.name.clone());
        types.push(if c.computed.is_some() { sql_type_name(&parse_type(&c.arrow_type)) } else { c.sql_type.clone() });
        nulls.push(c.nullable);
        keys.push(rel.primary_key.contains(&c.name).then(|| format!("PRI({})", rel.primary_key.join(", "))));
        // Flink's: `AS expr` of a computed column, `METADATA FROM 'key'` of a metadata one.
        extras.push(c.computed.as_ref().map(|e| match crate::source::metadata_key(e) {
            Some(_) => e.clone(),
            None => format!("AS {e}"),
        }));
        watermarks.push(
            rel.watermark.as_ref().filter(|w| w.column == c.name).map(|w| w.expr.clone()),
        );
    }
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(StringArray::from(names)),
            Arc::new(StringArray::from(types)),
            Arc::new(BooleanArray::from(nulls)),
            Arc::new(StringArray::from(keys)),
            Arc::new(StringArray::from(extras)),
            Arc::new(StringArray::from(watermarks)),
        ],
    )?;
    Ok(StatementResult::Rows { schema, batches: vec![batch] })
}

fn parse_type(s: &str) -> DataType {
    use std::str::FromStr;
    DataType::from_str(s).unwrap_or(DataType::Utf8)
}

/// `SHOW CREATE TABLE | VIEW | MATERIALIZED VIEW name`.
pub fn show_create(catalog: &Catalog, name: &str) -> Result<StatementResult> {
    let rel = catalog.get(name).ok_or_else(|| WeirError::unknown_table(name))?;
    text_rows(&["name", "create_statement"], vec![vec![Some(rel.name.clone()), Some(rel.definition.clone())]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_sort_by_their_number() {
        let mut ids = vec!["job-10", "job-2", "job-1", "other"];
        ids.sort_by_key(|id| job_order(id));
        assert_eq!(ids, vec!["job-1", "job-2", "job-10", "other"]);
    }
}
