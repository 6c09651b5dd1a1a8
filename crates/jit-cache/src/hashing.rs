//! Hashing for keys that carry a hash computed once at construction.
//!
//! [`Signature`](crate::Signature) and [`FunctionId`](crate::FunctionId) hash
//! their contents once when they are built and store the result. Their `Hash`
//! impls write only that `u64`, and the maps of this crate use
//! [`PrecomputedState`], whose hasher hands that `u64` back unchanged. A lookup
//! therefore costs no hashing at all; equality still compares full contents.

use std::hash::{BuildHasher, Hasher};

/// `BuildHasher` for maps keyed by types with a precomputed hash.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PrecomputedState;

impl BuildHasher for PrecomputedState {
    type Hasher = PrecomputedHasher;

    #[inline]
    fn build_hasher(&self) -> PrecomputedHasher {
        PrecomputedHasher(0)
    }
}

/// Returns the last `u64` written; other writes are folded in with Fx so the
/// hasher stays correct (if slower) for any key.
#[derive(Debug)]
pub(crate) struct PrecomputedHasher(u64);

impl Hasher for PrecomputedHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut fx = rustc_hash::FxHasher::default();
        fx.write_u64(self.0);
        fx.write(bytes);
        self.0 = finalize(fx.finish());
    }
}

/// Spreads entropy over all 64 bits (MurmurHash3's `fmix64`), so both the low
/// bits (bucket index) and the top bits (hashbrown's tag) are well mixed.
#[inline]
pub(crate) fn finalize(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}
