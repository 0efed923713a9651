//! State TTL: which operators of a stream plan let their state expire, and after how long.
//!
//! Flink's rules (SQL.md "State"): `SET 'table.exec.state.ttl'` gives every operator whose
//! state grows without bound a time-to-live, fixed when the view or job is created; the query
//! hint `/*+ STATE_TTL('alias' = '1d', ...) */` after a `SELECT` overrides it per input, named
//! by its table name or alias: for a regular join, the rows kept of that input; for a group
//! aggregation or a rank (deduplication, Top-N) reading that input, its state. A hint key that
//! names no such input is an error.
//!
//! The operators concerned are the unbounded ones: group aggregation without a window, regular
//! (not interval, window or temporal) joins, ranks not partitioned by a window, and the
//! ChangelogNormalize of an upsert source (the default TTL only; a key whose last row expired
//! is new again, so its next delete is dropped), and the SinkUpsertMaterializer of an
//! `upsert-kafka` sink (the default TTL only; a key whose rows expired drops their
//! retractions, so the topic keeps the key's last row). Operators
//! that the watermark cleans keep no TTL. TTL is processing time since an entry's last write
//! ([`crate::state::StateTable::with_ttl`]); an expired entry is as if never written: a group
//! whose state expired starts again from its next row, and a join row that expired no longer
//! matches. That is the trade: bounded state for results that may differ from the exact ones.

use datafusion::common::DFSchema;

use crate::error::{Result, WeirError};
use crate::plan::{StreamNode, StreamPlan};

/// The TTLs asked for by a view's or job's settings and hints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateTtl {
    /// `table.exec.state.ttl`, ms (`None` or 0: state never expires).
    pub default_ms: Option<i64>,
    /// `STATE_TTL` hints: (table name or alias, ms).
    pub hints: Vec<(String, i64)>,
}

impl StateTtl {
    /// Whether nothing expires.
    pub fn is_empty(&self) -> bool {
        self.default_ms.filter(|ms| *ms > 0).is_none() && self.hints.is_empty()
    }
}

impl StreamPlan {
    /// Sets the TTL of every unbounded operator of the plan (module docs).
    ///
    /// # Errors
    /// `Plan` when a hint names no input of a join, aggregation or rank of the plan.
    pub fn set_state_ttl(&mut self, ttl: &StateTtl) -> Result<()> {
        if ttl.is_empty() {
            return Ok(());
        }
        let mut used = vec![false; ttl.hints.len()];
        self.apply_ttl(ttl, &mut used);
        if let Some((name, _)) = ttl.hints.iter().zip(&used).find(|(_, u)| !**u).map(|(h, _)| h) {
            return Err(WeirError::plan(format!(
                "the STATE_TTL hint names '{name}', which is not the table name or alias of an input of a regular join, a GROUP BY or a ROW_NUMBER/RANK of this query"
            )));
        }
        Ok(())
    }

    fn apply_ttl(&mut self, ttl: &StateTtl, used: &mut [bool]) {
        let default = ttl.default_ms.filter(|ms| *ms > 0);
        match &mut self.node {
            StreamNode::GroupAggregate { input, window_end: None, state_ttl_ms, .. } => {
                *state_ttl_ms = input_ttl(input, ttl, used).or(default);
            }
            StreamNode::Join { left, right, join } if join.time.is_none() && !join.lookup => {
                join.state_ttl_ms = [input_ttl(left, ttl, used).or(default), input_ttl(right, ttl, used).or(default)];
            }
            StreamNode::Rank { input, spec } if !input.has_window() => {
                spec.state_ttl_ms = input_ttl(input, ttl, used).or(default);
            }
            // The last row per key of an upsert source: the default only (as Flink, hints name
            // joins and aggregations).
            StreamNode::ChangelogNormalize { state_ttl_ms, .. } => *state_ttl_ms = default,
            // The rows per sink key (Flink's SinkUpsertMaterializer keeps them for the default
            // TTL too).
            StreamNode::SinkUpsertMaterialize { state_ttl_ms, .. } => *state_ttl_ms = default,
            _ => {}
        }
        for input in self.inputs_mut() {
            input.apply_ttl(ttl, used);
        }
    }
}

/// The hinted TTL of `input`: the first hint naming a table or alias it reads.
fn input_ttl(input: &StreamPlan, ttl: &StateTtl, used: &mut [bool]) -> Option<i64> {
    let names = input_names(input);
    let found = ttl.hints.iter().position(|(name, _)| names.iter().any(|n| n.eq_ignore_ascii_case(name)))?;
    used[found] = true;
    Some(ttl.hints[found].1).filter(|ms| *ms > 0)
}

/// The names an input answers to: the qualifiers of its columns (aliases, table names) and
/// the relations it reads.
fn input_names(input: &StreamPlan) -> Vec<String> {
    let schema: &DFSchema = &input.schema;
    let mut names: Vec<String> = schema.iter().filter_map(|(q, _)| q.map(|q| q.table().to_string())).collect();
    names.extend(input.sources());
    names.sort();
    names.dedup();
    names
}
