//! Weir: a streaming SQL database with a Postgres front door.
//!
//! Stages, each a module, dependencies pointing downstream (DESIGN.md):
//! `frontend` (pgwire) → `sql` (dialect, statements) → `plan` (stream plans) →
//! `runtime` (operators, changelogs) → `state` (RocksDB state tables, epoch commits).
#![deny(clippy::clone_on_ref_ptr)]

pub mod bench;
pub mod error;
pub mod frontend;
pub mod plan;
pub mod runtime;
pub mod source;
pub mod sql;
pub mod state;
