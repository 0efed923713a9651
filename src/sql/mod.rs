//! SQL: Weir's dialect, the catalog as DataFusion sees it, and statement execution.
pub mod database;
pub mod ddl;
pub mod dml;
pub mod engine;
pub mod functions;
pub mod parser;
pub mod pg_catalog;
pub mod relations;
pub mod settings;
pub mod show;
pub mod sink_jobs;
pub mod sources;
pub mod temporal;
pub mod types;
pub mod window_tvf;

pub use database::{Database, Session, StatementResult};
