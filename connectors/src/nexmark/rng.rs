//! The per-event random stream: SplitMix64 (the generator behind `java.util.SplittableRandom`).
//!
//! Event `e` of seed `s` draws from the stream whose state starts at
//! `mix64(s ^ mix64(e + GOLDEN_GAMMA))` (NEXMARK.md §1.7: seed per event from (seed, event id),
//! splitmix-style), so an event's values do not depend on the partitioning or on the run.
//! Bounded draws take the high 32 bits times the bound (bias below bound / 2^32).
//!
//! This is the same stream and the same bounded draws as the shared `nexmark-gen` file generator,
//! so every field drawn per event (not `extra` or `url`, which come from per-seed tables) equals
//! that generator's output run with `--first-event-id 0 --first-event-number 0 --bidder-offset 0`.

const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's finaliser (Stafford variant 13).
#[inline]
pub(super) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A SplitMix64 stream.
#[derive(Debug, Clone)]
pub(super) struct Rng {
    state: u64,
}

impl Rng {
    /// A stream starting at `state`.
    pub(super) fn from_state(state: u64) -> Self {
        Rng { state }
    }

    /// The stream of event `event_id` under `seed`.
    #[inline]
    pub(super) fn for_event(seed: u64, event_id: u64) -> Self {
        Rng { state: mix64(seed ^ mix64(event_id.wrapping_add(GOLDEN_GAMMA))) }
    }

    #[inline]
    pub(super) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix64(self.state)
    }

    /// Uniform in `[0, bound)`; `bound > 0`.
    #[inline]
    pub(super) fn below(&mut self, bound: u32) -> u32 {
        debug_assert!(bound > 0);
        (((self.next_u64() >> 32) * u64::from(bound)) >> 32) as u32
    }

    /// Uniform in `[0, bound)` for a 64-bit `bound > 0` (bounds up to `i32::MAX` draw as [`below`]).
    ///
    /// [`below`]: Rng::below
    #[inline]
    pub(super) fn below_i64(&mut self, bound: i64) -> i64 {
        debug_assert!(bound > 0);
        if bound < i64::from(i32::MAX) {
            i64::from(self.below(bound as u32))
        } else {
            ((u128::from(self.next_u64()) * bound as u128) >> 64) as i64
        }
    }

    /// Uniform in `[0, 1)` with 53 bits.
    #[inline]
    pub(super) fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}
