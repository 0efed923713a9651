//! A small seeded generator (xorshift64*) for the randomized tests of every layer, so failures
//! reproduce.

/// The generator; its state is the seed to start from (not zero).
pub(crate) struct Rng(pub u64);

impl Rng {
    /// A number in `0..n`.
    pub(crate) fn below(&mut self, n: u64) -> i64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n) as i64
    }
}
