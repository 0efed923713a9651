//! The one error type of the server's stages, and its SQLSTATE.
//!
//! Variants say whose fault an error is: the user's statement (`Syntax`, `UnknownTable`,
//! `UnknownColumn`, `Unsupported`, `InvalidOption`, `Plan`, `Execution`, `DivisionByZero`, `UndefinedFunction`, `InvalidText`, `InvalidDatetime`,
//! `NumericOutOfRange`, `WrongObjectType`, `DuplicateColumn`, `AmbiguousColumn`, `InvalidTableDefinition`, `StatementTimeout`, `Cancelled`, `AdminShutdown`, the
//! transaction-block states, `InsufficientPrivilege`), the environment
//! (`Storage`, `Io`), or ours (`Internal`). The SQLSTATE of each is set in one place,
//! [`WeirError::sqlstate`], an exhaustive match; the frontend turns it into a Postgres
//! `ErrorResponse`.

use std::fmt;

/// Result with the boxed Weir error, so a `Result` stays one word wide.
pub type Result<T, E = WeirError> = std::result::Result<T, E>;

/// An error of any stage, boxed so that `Result<T>` stays small.
#[derive(Debug)]
pub struct WeirError(Box<Inner>);

#[derive(Debug)]
struct Inner {
    kind: ErrorKind,
    /// Where in its statement a non-syntax error points (an unknown column's name), 1-based
    /// characters; a syntax error carries its own.
    position: Option<usize>,
    /// Where the error arose beyond the statement itself (the view whose maintenance a write
    /// failed in), as Postgres's `W` field, which psql shows as `CONTEXT:`.
    context: Option<String>,
}

/// What went wrong. Messages name the table, column, option or value at fault and, where there
/// is a short list of valid choices, list them.
#[derive(Debug, thiserror::Error)]
pub enum ErrorKind {
    /// The statement does not parse. `position` is the 1-based character offset into the
    /// statement text, as Postgres reports it in the `P` field.
    #[error("syntax error: {message}")]
    Syntax { message: String, position: Option<usize> },
    /// A table, view or materialized view that does not exist.
    #[error("relation \"{0}\" does not exist")]
    UnknownTable(String),
    /// A name that is already taken by another relation.
    #[error("relation \"{0}\" already exists")]
    DuplicateTable(String),
    /// A column that does not exist; the message lists the valid ones.
    #[error("{0}")]
    UnknownColumn(String),
    /// A statement or feature that Weir does not support (yet); the message says which.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// A bad value for a `WITH` option or a `SET` parameter.
    #[error("{0}")]
    InvalidOption(String),
    /// A statement that is well formed but wrong: type mismatch, bad watermark, ...
    #[error("{0}")]
    Plan(String),
    /// An object cannot be dropped because others depend on it.
    #[error("{0}")]
    DependentObjects(String),
    /// A runtime failure caused by the data (overflow, a value out of range).
    #[error("{0}")]
    Execution(String),
    /// A division (or modulo) by zero.
    #[error("division by zero")]
    DivisionByZero,
    /// An operator or function with no version for its arguments' types: "operator does not
    /// exist: text = integer", as Postgres says.
    #[error("{0}")]
    UndefinedFunction(String),
    /// Text that is not a value of the type it is read as: a `COPY` stream's, a string CAST
    /// to a number or date (Arrow's cast error), or rows of the wrong shape.
    #[error("{0}")]
    InvalidText(String),
    /// A COPY stream that is not rows of the COPY's shape (missing or extra fields, an
    /// unterminated quote).
    #[error("{0}")]
    BadCopyData(String),
    /// The statement ran longer than the session's `statement_timeout`.
    #[error("canceling statement due to statement timeout")]
    StatementTimeout,
    /// The statement was cancelled (a CancelRequest, psql's Ctrl-C, `pg_cancel_backend`);
    /// Postgres's message.
    #[error("canceling statement due to user request")]
    Cancelled,
    /// The server is shutting down (SIGTERM, SIGINT) while the statement runs; Postgres's
    /// message for its fast shutdown.
    #[error("terminating connection due to administrator command")]
    AdminShutdown,
    /// A statement that cannot run inside a transaction block (DDL, FLUSH, starting a job);
    /// the message names it as Postgres does: "CREATE TABLE cannot run inside a transaction
    /// block".
    #[error("{0}")]
    ActiveTransaction(String),
    /// A statement that needs a transaction block outside one (`DECLARE ... CURSOR`).
    #[error("{0}")]
    NoActiveTransaction(String),
    /// A statement other than ROLLBACK in a transaction block a failed statement aborted.
    #[error("current transaction is aborted, commands ignored until end of transaction block")]
    InFailedTransaction,
    /// A write in a `READ ONLY` transaction block, or by a read-only role.
    #[error("{0}")]
    ReadOnlyTransaction(String),
    /// `ROLLBACK TO` or `RELEASE` of a savepoint the block does not have.
    #[error("{0}")]
    InvalidSavepoint(String),
    /// A cursor name that is not declared (`FETCH`, `CLOSE`), or declared twice.
    #[error("{0}")]
    InvalidCursor(String),
    /// `ON CONFLICT` naming columns that are not the table's primary key, or on a table
    /// without one.
    #[error("{0}")]
    InvalidConflictTarget(String),
    /// `ON CONFLICT DO UPDATE` that would change one row twice.
    #[error("{0}")]
    CardinalityViolation(String),
    /// A statement the role may not run (a read-only role's write).
    #[error("{0}")]
    InsufficientPrivilege(String),
    /// NULL in a NOT NULL or primary-key column.
    #[error("{0}")]
    NotNullViolation(String),
    /// A job (by id or view name) that does not exist: Postgres's undefined_object, as for
    /// an unknown role or extension.
    #[error("{0}")]
    UndefinedObject(String),
    /// An object whose state does not allow the statement: suspending a suspended job,
    /// resuming a running one, EXPLAIN ANALYZE of a FAILED one (Postgres's
    /// object_not_in_prerequisite_state).
    #[error("{0}")]
    ObjectNotInPrerequisiteState(String),
    /// An INSERT whose query gives more (or fewer) columns than it has target columns: "INSERT
    /// has more expressions than target columns", which Postgres reports as a syntax error.
    #[error("{0}")]
    InsertColumnCount(String),
    /// A column of a grouped query that is neither grouped nor inside an aggregate
    /// (Postgres's grouping_error).
    #[error("{0}")]
    Grouping(String),
    /// Text that is no date or time, cast or parsed to a TIMESTAMP or DATE (Postgres's
    /// invalid_datetime_format, `invalid input syntax for type timestamp: "abc"`).
    #[error("{0}")]
    InvalidDatetime(String),
    /// A value outside its type's range: a CAST of 3000000000 to INT (Postgres's
    /// numeric_value_out_of_range, "integer out of range").
    #[error("{0}")]
    NumericOutOfRange(String),
    /// A statement naming an object of another kind than it works on: `DROP MATERIALIZED
    /// VIEW` of a table (Postgres's wrong_object_type, `"t" is not a materialized view`).
    #[error("{0}")]
    WrongObjectType(String),
    /// A column named twice in one CREATE TABLE (Postgres's duplicate_column).
    #[error("{0}")]
    DuplicateColumn(String),
    /// A table's declaration that cannot hold: a second primary key, a key of a computed
    /// column, a watermark of a processing-time attribute (Postgres's invalid_table_definition).
    #[error("{0}")]
    InvalidTableDefinition(String),
    /// An unqualified column name that two of the query's relations have (Postgres's
    /// ambiguous_column, `column reference "a" is ambiguous`).
    #[error("{0}")]
    AmbiguousColumn(String),
    /// A system outside Weir failed or could not be reached: a Kafka cluster a statement
    /// needs to ask (Postgres's system_error, 58000; not a connection error, class 08, which
    /// drivers take for a broken connection to the server).
    #[error("{0}")]
    External(String),
    /// RocksDB or the file system failed.
    #[error("storage error: {0}")]
    Storage(String),
    /// Our bug: an invariant did not hold.
    #[error("internal error: {0}")]
    Internal(String),
}

impl WeirError {
    pub fn new(kind: ErrorKind) -> Self {
        Self(Box::new(Inner { kind, position: None, context: None }))
    }
    pub fn kind(&self) -> &ErrorKind {
        &self.0.kind
    }
    pub fn unsupported(msg: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported(msg.into()))
    }
    pub fn plan(msg: impl Into<String>) -> Self {
        Self::new(ErrorKind::Plan(msg.into()))
    }
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal(msg.into()))
    }
    pub fn option(msg: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidOption(msg.into()))
    }
    pub fn invalid_text(msg: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidText(msg.into()))
    }
    pub fn execution(msg: impl Into<String>) -> Self {
        Self::new(ErrorKind::Execution(msg.into()))
    }
    pub fn storage(msg: impl Into<String>) -> Self {
        Self::new(ErrorKind::Storage(msg.into()))
    }
    /// [`ErrorKind::InsertColumnCount`] for a query of `given` columns into `targets` target
    /// columns, worded as Postgres words it.
    pub fn insert_column_count(given: usize, targets: usize) -> Self {
        Self::new(ErrorKind::InsertColumnCount(
            if given > targets {
                "INSERT has more expressions than target columns"
            } else {
                "INSERT has more target columns than expressions"
            }
            .to_string(),
        ))
    }
    /// [`ErrorKind::UndefinedObject`].
    pub fn undefined_object(msg: impl Into<String>) -> Self {
        Self::new(ErrorKind::UndefinedObject(msg.into()))
    }
    /// [`ErrorKind::ObjectNotInPrerequisiteState`].
    pub fn not_in_state(msg: impl Into<String>) -> Self {
        Self::new(ErrorKind::ObjectNotInPrerequisiteState(msg.into()))
    }
    pub fn unknown_table(name: impl Into<String>) -> Self {
        Self::new(ErrorKind::UnknownTable(name.into()))
    }
    pub fn syntax(message: impl Into<String>, position: Option<usize>) -> Self {
        Self::new(ErrorKind::Syntax { message: message.into(), position })
    }

    /// The Postgres SQLSTATE of this error (errcodes-appendix of the Postgres docs).
    pub fn sqlstate(&self) -> &'static str {
        match self.kind() {
            ErrorKind::Syntax { .. } => "42601",
            ErrorKind::UnknownTable(_) => "42P01",
            ErrorKind::DuplicateTable(_) => "42P07",
            ErrorKind::UnknownColumn(_) => "42703",
            ErrorKind::Unsupported(_) => "0A000",
            ErrorKind::InvalidOption(_) => "22023",
            ErrorKind::Plan(_) => "42804",
            ErrorKind::DependentObjects(_) => "2BP01",
            ErrorKind::Execution(_) => "22000",
            ErrorKind::DivisionByZero => "22012",
            ErrorKind::UndefinedFunction(_) => "42883",
            ErrorKind::InvalidText(_) => "22P02",
            ErrorKind::InvalidDatetime(_) => "22007",
            ErrorKind::BadCopyData(_) => "22P04",
            ErrorKind::StatementTimeout | ErrorKind::Cancelled => "57014",
            ErrorKind::AdminShutdown => "57P01",
            ErrorKind::ActiveTransaction(_) => "25001",
            ErrorKind::NoActiveTransaction(_) => "25P01",
            ErrorKind::InFailedTransaction => "25P02",
            ErrorKind::ReadOnlyTransaction(_) => "25006",
            ErrorKind::InvalidSavepoint(_) => "3B001",
            ErrorKind::InvalidCursor(_) => "34000",
            ErrorKind::InvalidConflictTarget(_) => "42P10",
            ErrorKind::CardinalityViolation(_) => "21000",
            ErrorKind::InsufficientPrivilege(_) => "42501",
            ErrorKind::NotNullViolation(_) => "23502",
            ErrorKind::UndefinedObject(_) => "42704",
            ErrorKind::ObjectNotInPrerequisiteState(_) => "55000",
            ErrorKind::Grouping(_) => "42803",
            ErrorKind::InsertColumnCount(_) => "42601",
            ErrorKind::NumericOutOfRange(_) => "22003",
            ErrorKind::WrongObjectType(_) => "42809",
            ErrorKind::DuplicateColumn(_) => "42701",
            ErrorKind::InvalidTableDefinition(_) => "42P16",
            ErrorKind::AmbiguousColumn(_) => "42702",
            ErrorKind::External(_) => "58000",
            ErrorKind::Storage(_) => "58030",
            ErrorKind::Internal(_) => "XX000",
        }
    }

    /// The 1-based character position in its statement that the error points at, if known:
    /// a syntax error's, or an unknown column's name (Postgres's `P` field, which psql shows
    /// as `LINE 1: ...` and a caret).
    pub fn position(&self) -> Option<usize> {
        match self.kind() {
            ErrorKind::Syntax { position, .. } => *position,
            _ => self.0.position,
        }
    }

    /// Where the error arose beyond its statement (Postgres's `CONTEXT`), if said.
    pub fn context(&self) -> Option<&str> {
        self.0.context.as_deref()
    }

    /// This error with `context` as its `CONTEXT` unless it has one already: the innermost
    /// place, where it arose, is the one named.
    pub fn with_context(mut self, context: impl FnOnce() -> String) -> Self {
        if self.0.context.is_none() {
            self.0.context = Some(context());
        }
        self
    }

    /// This error with its message rewritten by `rewrite` (which returns `None` to keep it), for
    /// the kinds whose message is free text (the ones SQL users mostly meet: `Plan`,
    /// `UnknownColumn`, `UndefinedFunction`, `InvalidText`, `InvalidDatetime`, `NumericOutOfRange`, `Execution`); the
    /// kind (so the SQLSTATE) and position stay.
    pub fn map_message(mut self, rewrite: impl FnOnce(&str) -> Option<String>) -> Self {
        let message = match &mut self.0.kind {
            ErrorKind::Plan(m)
            | ErrorKind::UnknownColumn(m)
            | ErrorKind::UndefinedFunction(m)
            | ErrorKind::InvalidText(m)
            | ErrorKind::InvalidDatetime(m)
            | ErrorKind::NumericOutOfRange(m)
            | ErrorKind::Execution(m) => m,
            _ => return self,
        };
        if let Some(new) = rewrite(message) {
            *message = new;
        }
        self
    }

    /// This error with `from` replaced by `to` wherever its text has it, whatever its kind (a
    /// temporary table's catalog name by the name its session gave it); the kind and position
    /// stay.
    pub fn replace_name(mut self, from: &str, to: &str) -> Self {
        use ErrorKind::*;
        let text = match &mut self.0.kind {
            Syntax { message, .. } => message,
            UnknownTable(m) | DuplicateTable(m) | UnknownColumn(m) | Unsupported(m) | InvalidOption(m) | Plan(m)
            | DependentObjects(m) | Execution(m) | UndefinedFunction(m) | InvalidText(m) | BadCopyData(m)
            | ActiveTransaction(m) | NoActiveTransaction(m) | ReadOnlyTransaction(m) | InvalidSavepoint(m)
            | InvalidCursor(m) | InvalidConflictTarget(m) | CardinalityViolation(m) | InsufficientPrivilege(m)
            | NotNullViolation(m) | UndefinedObject(m) | ObjectNotInPrerequisiteState(m) | InsertColumnCount(m)
            | Grouping(m) | NumericOutOfRange(m) | InvalidDatetime(m) | WrongObjectType(m) | DuplicateColumn(m) | AmbiguousColumn(m)
            | InvalidTableDefinition(m) | External(m) | Storage(m) | Internal(m) => m,
            DivisionByZero | StatementTimeout | Cancelled | AdminShutdown | InFailedTransaction => return self,
        };
        if text.contains(from) {
            *text = text.replace(from, to);
        }
        self
    }

    /// An `UnknownColumn`, `UnknownTable` or `UndefinedFunction` error pointed at the name's
    /// first mention in its statement, as Postgres points `column "x" does not exist`,
    /// `relation "t" does not exist` and `function f(integer) does not exist` at the name:
    /// `find` gives the 1-based position of a name's first mention as an identifier (see
    /// `sql::parser::position_of_name`; a relation's last part, unqualified).
    /// Other errors, and names the message does not give or the statement does not hold, are
    /// returned as they are.
    pub fn locate_name(mut self, find: impl FnOnce(&str) -> Option<usize>) -> Self {
        if self.0.position.is_some() {
            return self;
        }
        let name = match self.kind() {
            ErrorKind::UnknownColumn(msg) => missing_column(msg),
            ErrorKind::UnknownTable(name) => name.rsplit('.').next().map(str::to_string),
            // "function nosuch does not exist", "function f(INT) does not exist: ..".
            ErrorKind::UndefinedFunction(msg) => msg
                .strip_prefix("function ")
                .and_then(|rest| rest.split(['(', ' ']).next())
                .map(|name| name.to_ascii_lowercase()),
            _ => None,
        };
        self.0.position = name.and_then(|name| find(&name));
        self
    }
}

/// The column an `UnknownColumn` message names: DataFusion's `No field named [rel.]name` (a
/// part in double quotes when it needs them) or Weir's `column "name"`.
pub(crate) fn missing_column(msg: &str) -> Option<String> {
    if let Some(i) = msg.find("column \"") {
        let rest = &msg[i + "column \"".len()..];
        return rest.find('"').map(|end| rest[..end].to_string());
    }
    let rest = &msg[msg.find("No field named ")? + "No field named ".len()..];
    // Parts separated by dots, each bare or in double quotes ("" inside stands for one);
    // the last is the column. The message goes on after a dot and a space, or ends with a dot.
    let mut chars = rest.chars().peekable();
    let mut last = String::new();
    loop {
        let mut part = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                if c == '"' {
                    if chars.peek() == Some(&'"') {
                        chars.next();
                    } else {
                        break;
                    }
                }
                part.push(c);
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_alphanumeric() || c == '_' || c == '$' {
                    part.push(c);
                    chars.next();
                } else {
                    break;
                }
            }
        }
        if part.is_empty() {
            break;
        }
        last = part;
        if chars.next() != Some('.') || !chars.peek().is_some_and(|c| c.is_alphanumeric() || *c == '_' || *c == '"') {
            break;
        }
    }
    (!last.is_empty()).then_some(last)
}

impl fmt::Display for WeirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.kind.fmt(f)
    }
}

impl std::error::Error for WeirError {}

impl From<ErrorKind> for WeirError {
    fn from(kind: ErrorKind) -> Self {
        Self::new(kind)
    }
}

impl From<rocksdb::Error> for WeirError {
    fn from(e: rocksdb::Error) -> Self {
        Self::storage(e.to_string())
    }
}

impl From<std::io::Error> for WeirError {
    fn from(e: std::io::Error) -> Self {
        Self::storage(e.to_string())
    }
}

impl From<arrow::error::ArrowError> for WeirError {
    /// A division by zero is Postgres's 22012, text that is not a value of the type it is cast
    /// or parsed to 22P02 (`invalid_text_representation`), or 22007 for a date or time
    /// (`invalid_datetime_format`); the rest are data errors (22000).
    fn from(e: arrow::error::ArrowError) -> Self {
        use arrow::error::ArrowError as A;
        match e {
            A::DivideByZero => Self::new(ErrorKind::DivisionByZero),
            A::CastError(msg) if msg.starts_with("Cannot cast string") && (msg.contains("Timestamp") || msg.contains("Date")) => {
                Self::new(ErrorKind::InvalidDatetime(format!("Cast error: {msg}")))
            }
            A::CastError(msg) if msg.starts_with("Cannot cast string") || msg.starts_with("Cannot cast value '") => {
                Self::invalid_text(format!("Cast error: {msg}"))
            }
            // A number that does not fit the type it is cast to ("Can't cast value 3000000000
            // to type Int32").
            A::CastError(msg) if msg.starts_with("Can't cast value") => {
                Self::new(ErrorKind::NumericOutOfRange(format!("value out of range: {msg}")))
            }
            A::ParseError(msg) if msg.contains("timestamp") || msg.contains("date") => {
                Self::new(ErrorKind::InvalidDatetime(format!("Parser error: {msg}")))
            }
            A::ParseError(msg) => Self::invalid_text(format!("Parser error: {msg}")),
            other => Self::execution(other.to_string()),
        }
    }
}

impl From<datafusion::error::DataFusionError> for WeirError {
    fn from(e: datafusion::error::DataFusionError) -> Self {
        use datafusion::error::DataFusionError as D;
        // A DECIMAL too wide for its precision, found running or while constants are folded
        // (then inside a planning error): Postgres's 22003 "numeric field overflow".
        let text = e.to_string();
        if let Some(at) = text.find("is too large to store in a Decimal") {
            let value = text[..at].rsplit(": ").next().unwrap_or_default().trim();
            let detail = text[at..].split_once(". ").map_or("", |(_, max)| max);
            return Self::new(ErrorKind::NumericOutOfRange(format!(
                "numeric field overflow: {value} does not fit its DECIMAL type ({})",
                detail.trim_end_matches('.')
            )));
        }
        match e {
            D::SchemaError(err, _) => {
                let msg = err.to_string();
                if msg.contains("not found") || msg.contains("No field named") {
                    Self::new(ErrorKind::UnknownColumn(msg))
                } else if let datafusion::common::SchemaError::AmbiguousReference { field } = err.as_ref() {
                    Self::new(ErrorKind::AmbiguousColumn(format!("column reference \"{}\" is ambiguous", field.name)))
                } else {
                    Self::plan(msg)
                }
            }
            D::Plan(msg) => {
                if let Some(rest) = msg.strip_prefix("table '") {
                    let name = rest.split('\'').next().unwrap_or(rest);
                    let name = name.rsplit('.').next().unwrap_or(name);
                    Self::unknown_table(name)
                } else if msg.starts_with("Invalid function ") || msg.contains("No function matches the given name and argument types") {
                    // An unknown function, or one called with arguments it has no version for:
                    // Postgres's 42883 ("function nosuch(integer) does not exist").
                    Self::new(ErrorKind::UndefinedFunction(no_matching_function(&msg).unwrap_or(msg)))
                } else if msg.starts_with("Aggregate function calls cannot be nested") {
                    // Postgres's 42803 too: "aggregate function calls cannot be nested".
                    Self::new(ErrorKind::Grouping(msg))
                } else if msg.contains("must be in GROUP BY or an aggregate function") {
                    // DataFusion's wording of Postgres's 42803 ("column \"t.b\" must appear in
                    // the GROUP BY clause or be used in an aggregate function").
                    Self::new(ErrorKind::Grouping(grouping_message(&msg)))
                } else {
                    Self::plan(msg)
                }
            }
            D::NotImplemented(msg) => Self::unsupported(msg),
            D::SQL(err, _) => Self::syntax(err.to_string(), None),
            D::ArrowError(err, _) => Self::from(*err),
            D::Execution(msg) => Self::execution(msg),
            D::Context(ctx, inner) => {
                let inner = Self::from(*inner);
                let msg = format!("{ctx}: {inner}");
                match inner.kind() {
                    ErrorKind::UnknownColumn(_) => Self::new(ErrorKind::UnknownColumn(msg)),
                    ErrorKind::UnknownTable(t) => Self::unknown_table(t.clone()),
                    // The data's fault, found while the optimizer folded constants (`'abc'::int`,
                    // `1 / 0`): the error as evaluating it would give, without the rule's name.
                    ErrorKind::DivisionByZero | ErrorKind::InvalidText(_) | ErrorKind::InvalidDatetime(_) | ErrorKind::NumericOutOfRange(_) => inner,
                    // An analyzer rule's refusal (`sql::comparisons`), without the rule's name.
                    ErrorKind::UndefinedFunction(_) => inner,
                    _ => Self::plan(msg),
                }
            }
            D::Diagnostic(_, inner) => Self::from(*inner),
            // Several errors of one statement (two unknown functions): the first, as Postgres
            // reports the first it meets.
            D::Collection(mut errors) if !errors.is_empty() => Self::from(errors.swap_remove(0)),
            D::Shared(inner) => Self::execution(inner.to_string()),
            D::External(inner) => match inner.downcast::<WeirError>() {
                Ok(w) => *w,
                Err(other) => Self::execution(other.to_string()),
            },
            other => Self::internal(other.to_string()),
        }
    }
}

/// DataFusion's refusal of a call whose argument types no version of the function takes, in
/// Postgres's words ("function sum(text) does not exist", with the hint to cast), the candidate
/// signatures after it. DataFusion words it as an internal error ("This issue was likely caused
/// by a bug in DataFusion's code"), which it is not. `None` when `msg` is not that refusal.
fn no_matching_function(msg: &str) -> Option<String> {
    // DataFusion's unknown name: "Invalid function 'nosuch'.\nDid you mean 'position'?"
    if let Some(rest) = msg.strip_prefix("Invalid function '") {
        let (name, after) = rest.split_once('\'')?;
        let suggestion = after.split("Did you mean '").nth(1).and_then(|s| s.split('\'').next());
        return Some(match suggestion {
            Some(other) => format!("function {name} does not exist; did you mean {other}?"),
            None => format!("function {name} does not exist"),
        });
    }
    const MARK: &str = "No function matches the given name and argument types '";
    let call = msg.split(MARK).nth(1)?.split('\'').next()?;
    let candidates: Vec<&str> = msg
        .split("Candidate functions:")
        .nth(1)
        .map(|list| list.lines().map(str::trim).filter(|l| !l.is_empty()).collect())
        .unwrap_or_default();
    // A function with a signature of its own (Weir's HOUR) says why in its coercion error;
    // DataFusion's signature matching lists every version's mismatch, which the candidates say.
    let before = msg.split(MARK).next().unwrap_or_default();
    let reason = match before.split("user-defined coercion failed with: ").nth(1) {
        Some(why) => why.rsplit("Error during planning: ").next().unwrap_or(why).trim().trim_end_matches('.').to_string(),
        None => "no version of it takes these argument types".to_string(),
    };
    let mut out = format!("function {call} does not exist: {reason}; you might need to add explicit type casts");
    if !candidates.is_empty() {
        out.push_str(&format!(" (candidates: {})", candidates.join(", ")));
    }
    Some(out)
}

/// DataFusion's grouping error in Postgres's words when it names the column ("Column in SELECT
/// must be in GROUP BY ...: While expanding wildcard, column \"t.b\" must appear in the GROUP
/// BY clause or must be part of an aggregate function, ..." names a wildcard the query may not
/// have); else as DataFusion gave it.
fn grouping_message(msg: &str) -> String {
    let column = msg.split("column \"").nth(1).and_then(|rest| rest.split('"').next());
    match column {
        Some(c) if msg.contains("must appear in the GROUP BY clause") => {
            format!("column \"{c}\" must appear in the GROUP BY clause or be used in an aggregate function")
        }
        _ => msg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grouping_error_names_its_column_as_postgres_does() {
        let df = "Error during planning: Column in SELECT must be in GROUP BY or an aggregate function: While expanding wildcard, column \"p.name\" must appear in the GROUP BY clause or must be part of an aggregate function, currently only \"p.city\" appears in the SELECT clause satisfies this requirement";
        assert_eq!(grouping_message(df), "column \"p.name\" must appear in the GROUP BY clause or be used in an aggregate function");
        assert_eq!(grouping_message("Column in HAVING must be in GROUP BY"), "Column in HAVING must be in GROUP BY");
    }

    #[test]
    fn an_unknown_columns_name_is_read_from_either_message() {
        let names = |msg: &str| missing_column(msg);
        assert_eq!(names("Schema error: No field named nme. Valid fields are t.id, t.name."), Some("nme".into()));
        assert_eq!(names("Schema error: No field named t.nme. Did you mean 't.name'?"), Some("nme".into()));
        assert_eq!(names(r#"Schema error: No field named "Odd"" Name". Valid fields are t.a."#), Some(r#"Odd" Name"#.into()));
        assert_eq!(names(r#"No field named "T".x."#), Some("x".into()));
        assert_eq!(names(r#"column "qty" of relation "orders" does not exist"#), Some("qty".into()));
        assert_eq!(names("FOR SYSTEM_TIME AS OF t: no such column in the other join input"), None);
    }

    #[test]
    fn only_an_unknown_column_or_relation_is_located() {
        let e = WeirError::new(ErrorKind::UnknownColumn("No field named nme.".into())).locate_name(|n| {
            assert_eq!(n, "nme");
            Some(8)
        });
        assert_eq!(e.position(), Some(8));
        assert_eq!(e.to_string(), "No field named nme.");
        let e = WeirError::plan("column \"x\" is wrong").locate_name(|_| Some(3));
        assert_eq!(e.position(), None);
        let e = WeirError::syntax("bad", Some(2)).locate_name(|_| Some(3));
        assert_eq!(e.position(), Some(2));
        let e = WeirError::unknown_table("public.scoress").locate_name(|n| (n == "scoress").then_some(15));
        assert_eq!(e.position(), Some(15));
        assert_eq!(e.to_string(), "relation \"public.scoress\" does not exist");
    }
}
