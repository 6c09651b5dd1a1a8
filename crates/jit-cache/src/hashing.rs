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

/// A stable 64-bit FNV-1a hash of `bytes`: the same in every process, Rust
/// version and machine (unlike `DefaultHasher` or the Fx hash above). For
/// identities that outlive a process or are compared across processes, such
/// as [`FunctionId::for_definition`](crate::FunctionId::for_definition).
pub fn stable_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_hash_is_fnv1a() {
        // Reference values of 64-bit FNV-1a.
        assert_eq!(stable_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(stable_hash(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
