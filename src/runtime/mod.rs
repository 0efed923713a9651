//! The runtime: changelog chunks, operators and jobs.
pub mod changelog;
pub mod feed;
pub mod job;
pub mod operator;
pub mod operators;
pub mod relation;
pub mod table;

pub use changelog::{Op, StreamChunk};
pub use job::Job;
