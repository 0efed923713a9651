//! SQL: Weir's dialect, the catalog as DataFusion sees it, and statements turned into stream
//! plans and engine commands ([`crate::engine`] runs them).
pub mod comparisons;
pub mod copy;
pub mod create_table_as;
pub mod create_table_like;
pub mod database;
pub mod ddl;
pub mod dml;
pub mod group_windows;
pub mod json_clauses;
pub mod lateral_unnest;
pub mod messages;
pub mod notices;
pub mod parser;
pub mod pg_cancel;
pub mod pg_catalog;
pub mod pg_compat;
pub mod pg_schema;
pub mod planning;
pub mod query_rewrites;
pub mod relations;
pub mod row_cast;
pub mod settings;
pub mod show;
pub mod sink_jobs;
pub mod subscribe;
pub mod temporal;
pub mod temporary_tables;
pub mod temporary_views;
pub mod text_casts;
pub mod time_units;
pub mod token_rewrite;
pub mod transaction;
pub mod types;
pub mod values_subquery;
pub mod window_tvf;

pub use database::{default_workers, Database, OpenOptions, Session, StatementResult};
