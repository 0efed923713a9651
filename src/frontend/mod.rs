//! The Postgres wire frontend: clients connect with psql, JDBC, tokio-postgres, ... and every
//! statement goes to [`Database::execute`](crate::sql::database::Database::execute) with the
//! connection's session (SQL.md, "Connecting").
//!
//! - `server`: the accept loop, [`serve`] / [`serve_listener`], cancel routing.
//! - `auth`: users, roles and password authentication (SCRAM-SHA-256, md5), TLS.
//! - `connection`: one connection's session and its startup, simple and extended query
//!   handlers.
//! - `params`: extended-protocol parameters, substituted into the SQL as literals.
//! - `encode`: Arrow types and values → Postgres type OIDs, text and binary formats.
//! - `error`: the frontend's errors and the one place a SQLSTATE becomes an `ErrorResponse`.

pub mod auth;
mod connection;
mod encode;
mod error;
mod params;
mod server;

pub use connection::SERVER_VERSION;
pub use encode::{encode_batch, field_infos, pg_type};
pub use error::{error_info, FrontendError};
pub use server::{serve, serve_listener, ServerOptions};
