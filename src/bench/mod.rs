//! Benchmarks run by `weir bench ...`: they drive a database in-process through the same
//! statement path the Postgres frontend uses, and report rates.
pub mod insert;
pub mod window;
