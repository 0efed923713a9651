//! Stream operators, one per file.
pub mod filter;
pub mod group_agg;
pub mod join;
pub mod materialize;
pub mod normalize;
pub mod over_agg;
pub mod progress;
pub mod project;
pub mod rank;
pub mod session_assign;
pub mod sliced_window_agg;
pub mod sink;
pub mod temporal_join;
pub mod union;
pub mod window_assign;
