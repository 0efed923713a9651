//! Stream operators, one per file.
pub mod filter;
pub mod group_agg;
pub mod materialize;
pub mod project;
pub mod union;
pub mod window_assign;
