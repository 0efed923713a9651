//! Weir: a streaming SQL database with a Postgres front door.
//!
//! Stages, each a module, dependencies pointing downstream (DESIGN.md):
//! `frontend` (pgwire) → `sql` (dialect, statements into plans and commands) → `engine` (jobs,
//! scheduling, watermark routing, the epoch commit, source and sink wiring) → `plan` (stream
//! plans), `runtime` (operators, changelogs), `source` (source readers) → `state` (RocksDB
//! state tables, snapshots, epoch commits). Nothing below `sql` imports it. Beside `frontend`,
//! `web` serves the HTTP side (web page, `/metrics`, `/health`) over the same `sql::Database`;
//! `observe` holds the process's counters that any layer updates (statements, epochs). On top,
//! `cli` is the `weir` command line that `src/main.rs` runs.
#![deny(clippy::clone_on_ref_ptr)]

pub mod bench;
pub mod cli;
pub mod engine;
pub mod error;
pub mod failpoint;
pub mod frontend;
pub mod observe;
pub mod plan;
pub mod runtime;
pub mod source;
pub mod sql;
pub mod state;
#[cfg(test)]
mod test_rng;
pub mod web;
