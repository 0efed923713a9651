//! Errors of the frontend, and the one place a SQLSTATE becomes a Postgres `ErrorResponse`.
//!
//! A statement's own errors are [`WeirError`]s and keep their SQLSTATE
//! ([`WeirError::sqlstate`]); the frontend adds its protocol errors (bad parameters, format
//! codes) in [`FrontendError`], whose [`FrontendError::sqlstate`] is an exhaustive match.
//! [`error_info`] turns either into an `ErrorInfo`: severity `ERROR`, the code, the message,
//! and for a syntax error its 1-based character position in the query string.

use pgwire::error::{ErrorInfo, PgWireError, SEVERITY_ERROR};

use crate::error::WeirError;

/// Result of the frontend's own steps.
pub type Result<T, E = FrontendError> = std::result::Result<T, E>;

/// What went wrong while serving a statement.
#[derive(Debug, thiserror::Error)]
pub enum FrontendError {
    /// The database refused or failed the statement.
    #[error(transparent)]
    Database(#[from] WeirError),
    /// The client's Bind supplied a parameter value that does not read as its type.
    #[error("invalid input syntax for type {type_name}: \"{value}\" (parameter ${index})")]
    InvalidParameter {
        /// 1-based parameter number.
        index: usize,
        /// Postgres type name the value was read as.
        type_name: String,
        /// The value as received (lossy UTF-8).
        value: String,
    },
    /// The statement mentions `$n` with `n` outside `1..=` the number of parameters.
    #[error("there is no parameter ${0}")]
    NoSuchParameter(usize),
    /// The client's Bind supplied a different number of values than the statement takes.
    #[error(
        "bind message supplies {given} parameters, but prepared statement requires {required}"
    )]
    ParameterCount { given: usize, required: usize },
    /// A binary-format parameter of a type whose binary form we do not read.
    #[error(
        "binary format for parameter ${index} of type {type_name} is not supported; send it in \
         text format"
    )]
    UnsupportedBinaryParameter { index: usize, type_name: String },
    /// The client sent a number of format codes that is neither 0, 1, nor one per value.
    #[error("bind message has {given} {what} formats but there are {expected} {what}s")]
    FormatCount {
        what: &'static str,
        given: usize,
        expected: usize,
    },
    /// A Parse message with more than one statement.
    #[error("cannot insert multiple commands into a prepared statement")]
    MultipleStatements,
    /// A date or time outside what Postgres can represent.
    #[error("{0}")]
    DatetimeOutOfRange(String),
    /// A row or value too large for the wire protocol (more than 32767 columns, 2 GiB values).
    #[error("{0}")]
    ProgramLimit(String),
    /// The statement panicked: our bug. The connection stays usable.
    #[error("internal error: {0}")]
    Panic(String),
}

impl FrontendError {
    /// The Postgres SQLSTATE of this error (errcodes-appendix of the Postgres docs).
    pub fn sqlstate(&self) -> &'static str {
        match self {
            FrontendError::Database(err) => err.sqlstate(),
            FrontendError::InvalidParameter { .. } => "22P02",
            FrontendError::NoSuchParameter(_) => "42P02",
            FrontendError::ParameterCount { .. } => "08P01",
            FrontendError::UnsupportedBinaryParameter { .. } => "0A000",
            FrontendError::FormatCount { .. } => "08P01",
            FrontendError::MultipleStatements => "42601",
            FrontendError::DatetimeOutOfRange(_) => "22008",
            FrontendError::ProgramLimit(_) => "54000",
            FrontendError::Panic(_) => "XX000",
        }
    }

    /// Where the error arose beyond the statement ([`WeirError::context`]), if said.
    pub fn context(&self) -> Option<&str> {
        match self {
            FrontendError::Database(err) => err.context(),
            _ => None,
        }
    }

    /// The 1-based character position of a syntax error within its statement, if known.
    pub fn position(&self) -> Option<usize> {
        match self {
            FrontendError::Database(err) => err.position(),
            _ => None,
        }
    }
}

/// The `ErrorResponse` fields of `err`. `offset` is the number of characters of the query
/// string before the failing statement, added to a syntax error's position so that it points
/// into the whole string, as psql expects.
pub fn error_info(err: &FrontendError, offset: usize) -> ErrorInfo {
    let code = err.sqlstate();
    if code.starts_with("XX") || code.starts_with("58") {
        tracing::warn!(code, "statement failed: {err}");
    } else {
        tracing::debug!(code, "statement failed: {err}");
    }
    let mut info = ErrorInfo::new(SEVERITY_ERROR.to_owned(), code.to_owned(), err.to_string());
    info.position = err
        .position()
        .map(|position| (position + offset).to_string());
    info.where_context = err.context().map(str::to_owned);
    info
}

impl From<FrontendError> for PgWireError {
    fn from(err: FrontendError) -> Self {
        PgWireError::UserError(Box::new(error_info(&err, 0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_carry_their_position_shifted_by_the_offset() {
        let err = FrontendError::from(WeirError::syntax("unexpected token", Some(8)));
        let info = error_info(&err, 10);
        assert_eq!(info.severity, "ERROR");
        assert_eq!(info.code, "42601");
        assert_eq!(info.position.as_deref(), Some("18"));
        assert!(
            info.message.contains("unexpected token"),
            "{}",
            info.message
        );
    }

    #[test]
    fn database_errors_keep_their_sqlstate() {
        let info = error_info(&WeirError::unknown_table("t").into(), 0);
        assert_eq!(info.code, "42P01");
        assert_eq!(info.message, "relation \"t\" does not exist");
        assert_eq!(info.position, None);
    }
}
