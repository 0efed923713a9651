//! Key groups: how a keyed operator's state is split between its parallel instances.
//!
//! Flink's scheme (`KeyGroupRangeAssignment`): every key belongs to one of
//! [`MAX_PARALLELISM`] key groups, the hash of its encoded partition key (the bytes its state
//! keys begin with) modulo that number; an operator running as `p` instances gives instance `i`
//! the contiguous range of key groups `[ceil(i * G / p), ceil((i + 1) * G / p))`. A key's group
//! never changes, so a job restarted from a checkpoint with another parallelism finds every
//! key's state where the new owner of its group reads it: the state tables are shared by the
//! instances, each reads and writes only keys of its own groups.
//!
//! The hash is XXH64 (seed 0) of the key's memcomparable encoding ([`super::RowCodec`]): stable
//! across versions and platforms, since it decides where stored state belongs.

use std::ops::Range;

/// The number of key groups, the most instances a keyed operator can run as (Flink's default
/// `pipeline.max-parallelism`, 128). Fixed: changing it would move every stored key.
pub const MAX_PARALLELISM: usize = 128;

/// The key group of a key whose encoded partition key is `encoded` (in `0..MAX_PARALLELISM`).
pub fn key_group(encoded: &[u8]) -> u16 {
    (twox_hash::XxHash64::oneshot(0, encoded) % MAX_PARALLELISM as u64) as u16
}

/// The instance (of `parallelism`) that owns key group `group` (Flink's
/// `computeOperatorIndexForKeyGroup`: `group * parallelism / MAX_PARALLELISM`).
pub fn instance_of(group: u16, parallelism: usize) -> usize {
    group as usize * parallelism / MAX_PARALLELISM
}

/// A contiguous range of key groups: what one instance of a keyed operator owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyGroups(Range<u16>);

impl KeyGroups {
    /// Every key group: a single instance.
    pub fn all() -> Self {
        Self(0..MAX_PARALLELISM as u16)
    }

    /// The key groups of instance `instance` of `parallelism` (`1..=MAX_PARALLELISM`), the
    /// inverse of [`instance_of`].
    pub fn of_instance(instance: usize, parallelism: usize) -> Self {
        let start = (instance * MAX_PARALLELISM).div_ceil(parallelism);
        let end = ((instance + 1) * MAX_PARALLELISM).div_ceil(parallelism);
        Self(start as u16..end as u16)
    }

    /// Whether this is every key group.
    pub fn is_all(&self) -> bool {
        self.0.start == 0 && self.0.end as usize == MAX_PARALLELISM
    }

    /// The first key group of the range.
    pub fn first(&self) -> u16 {
        self.0.start
    }

    /// Whether key group `group` is in the range.
    pub fn contains(&self, group: u16) -> bool {
        self.0.contains(&group)
    }

    /// Whether the key whose encoded partition key is `encoded` belongs here.
    pub fn owns(&self, encoded: &[u8]) -> bool {
        self.is_all() || self.0.contains(&key_group(encoded))
    }
}

impl Default for KeyGroups {
    fn default() -> Self {
        Self::all()
    }
}

/// A state table as an operator opens it: its id, and the key groups of the operator instance
/// that opens it (whole-table reads see only keys of those groups).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRef {
    pub id: u32,
    pub key_groups: KeyGroups,
}

impl From<u32> for TableRef {
    /// Table `id` read whole (a single instance).
    fn from(id: u32) -> Self {
        Self { id, key_groups: KeyGroups::all() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_own_disjoint_ranges_that_cover_every_group() {
        for p in 1..=MAX_PARALLELISM {
            let mut owner = vec![None; MAX_PARALLELISM];
            for i in 0..p {
                let KeyGroups(range) = KeyGroups::of_instance(i, p);
                assert!(!range.is_empty(), "instance {i} of {p} owns nothing");
                for g in range {
                    assert_eq!(owner[g as usize], None, "group {g} owned twice at p = {p}");
                    owner[g as usize] = Some(i);
                    assert_eq!(instance_of(g, p), i, "group {g} at p = {p}");
                }
            }
            assert!(owner.iter().all(Option::is_some), "p = {p} leaves a group unowned");
        }
    }

    #[test]
    fn the_hash_is_stable() {
        // XXH64 of the empty input with seed 0 is ef46db3751d8e999 (the reference value);
        // stored state depends on it never changing.
        assert_eq!(twox_hash::XxHash64::oneshot(0, b""), 0xef46_db37_51d8_e999);
        assert_eq!(key_group(b""), (0xef46_db37_51d8_e999u64 % 128) as u16);
    }
}
