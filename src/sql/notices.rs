//! Notices and warnings a statement sends the client beside its result, as Postgres sends a
//! NoticeResponse: `DROP TABLE IF EXISTS t` of a missing `t` answers `NOTICE: table "t" does not
//! exist, skipping` (SQLSTATE 00000), a `COMMIT` outside a block `WARNING: there is no
//! transaction in progress` (25P01). psql prints them; drivers hand them to a notice handler.
//!
//! The statement's planning and DDL code call [`notice`] or [`warning`] where Postgres would
//! raise one; [`Database::execute`](crate::sql::Database::execute) collects them ([`collect`]) into
//! [`Session::notices`](crate::sql::Session::notices), which the connection sends before the
//! statement's CommandComplete.

use std::cell::RefCell;

/// One notice: its severity (`NOTICE`, `WARNING`), SQLSTATE and message, as Postgres words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub severity: &'static str,
    pub code: &'static str,
    pub message: String,
}

tokio::task_local! {
    /// The notices of the statement being executed.
    static NOTICES: RefCell<Vec<Notice>>;
}

/// Raises a `NOTICE` (SQLSTATE 00000) for the running statement; nothing outside one (a job's
/// replanning at a restart).
pub fn notice(message: impl Into<String>) {
    raise(Notice { severity: "NOTICE", code: "00000", message: message.into() });
}

/// Raises a `NOTICE` with SQLSTATE `code` (Postgres sends the skipped statement's error code
/// with the notice of an `IF NOT EXISTS` that skips: 42P07 for a relation, 42701 for a column).
pub fn notice_coded(code: &'static str, message: impl Into<String>) {
    raise(Notice { severity: "NOTICE", code, message: message.into() });
}

/// The NOTICE of a `CREATE .. IF NOT EXISTS` of relation `name`, which exists: Postgres's
/// `relation "t" already exists, skipping` (42P07).
pub fn relation_exists(name: &str) {
    notice_coded("42P07", format!("relation \"{name}\" already exists, skipping"));
}

/// The NOTICE of an `ADD COLUMN IF NOT EXISTS` of `column`, which `relation` has (42701).
pub fn column_exists(column: &str, relation: &str) {
    notice_coded("42701", format!("column \"{column}\" of relation \"{relation}\" already exists, skipping"));
}

/// Raises a `WARNING` with SQLSTATE `code` for the running statement.
pub fn warning(code: &'static str, message: impl Into<String>) {
    raise(Notice { severity: "WARNING", code, message: message.into() });
}

fn raise(notice: Notice) {
    let _ = NOTICES.try_with(|n| n.borrow_mut().push(notice));
}

/// Runs `work`, a statement, and returns its output with the notices it raised, in order.
pub async fn collect<T>(work: impl std::future::Future<Output = T>) -> (T, Vec<Notice>) {
    NOTICES
        .scope(RefCell::new(Vec::new()), async {
            let out = work.await;
            (out, NOTICES.with(|n| n.take()))
        })
        .await
}
