//! The hot signatures a function's policy recalled from an earlier process,
//! which of them this process used, and how they rank when its policy is
//! kept again.
//!
//! A recalled record is only a claim: a policy file may be stale, or
//! forged (it is not authenticated). So what this process saw outranks
//! what it was told:
//!
//! 1. **Cached** in this process first, the most called first, each with
//!    its count (at least [`USED`]).
//! 2. **Recalled and called** (a miss of theirs, or a call a variant with
//!    dynamic dims served) next, by their recalled counts (at least
//!    [`USED`]).
//! 3. **Recalled, not called** (yet) after them, every one with the count
//!    [`UNUSED`], below any used one's, whatever count it was recalled
//!    with: it loses its rank the first time it is kept unused.
//! 4. **Dropped**: one recalled with the count [`UNUSED`] — the process
//!    that kept it had not called it either — and still not called.
//!
//! So a signature nobody calls leaves the policy the second time it is
//! kept unused, and the restore bound (the function's capacity, the first
//! records of a policy) goes to what was used. A recalled signature that
//! is called after a policy that ranked it unused (or left it out) was
//! kept makes that policy [stale](Recalled::stale): it is kept again at the
//! next occasion (a compile's completion, a dim that varies).

use std::collections::HashMap;

use crate::hashing::PrecomputedState;
use crate::signature::Signature;

/// The count kept for a signature recalled and not called in this process:
/// the lowest a record has, and the mark of one that went unused.
pub(crate) const UNUSED: u32 = 1;

/// The least count kept for a signature this process used (above
/// [`UNUSED`], so that the two never meet).
pub(crate) const USED: u32 = 2;

/// The recalled signatures of one function not compiled in this process
/// (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Recalled {
    signatures: HashMap<Signature, Record, PrecomputedState>,
    /// A signature that the policy kept last ranked unused, or left out, was
    /// called since.
    stale: bool,
}

#[derive(Clone, Copy, Debug)]
struct Record {
    /// The count it was recalled with.
    count: u32,
    /// Called in this process.
    used: bool,
    /// The policy kept last ranked it unused, or left it out.
    kept_unused: bool,
}

impl Recalled {
    /// Recalls `sig` with its recalled `count`.
    pub(crate) fn insert(&mut self, sig: Signature, count: u32) {
        let record = Record {
            count,
            used: false,
            kept_unused: false,
        };
        self.signatures.insert(sig, record);
    }

    pub(crate) fn contains(&self, sig: &Signature) -> bool {
        self.signatures.contains_key(sig)
    }

    /// Forgets `sig`, being compiled: from now on it counts as cached.
    pub(crate) fn remove(&mut self, sig: &Signature) {
        self.signatures.remove(sig);
    }

    /// Notes a call of `sig` (a miss, or a call a variant with dynamic dims
    /// served).
    #[inline]
    pub(crate) fn called(&mut self, sig: &Signature) {
        if self.signatures.is_empty() {
            return;
        }
        if let Some(record) = self.signatures.get_mut(sig) {
            self.stale |= record.kept_unused && !record.used;
            record.used = true;
        }
    }

    /// The signatures as they were recalled, with their recalled counts.
    pub(crate) fn as_recalled(&self) -> impl Iterator<Item = (&Signature, u32)> {
        self.signatures
            .iter()
            .map(|(sig, record)| (sig, record.count))
    }

    /// The hot signatures to keep: `cached` (this process's, with their
    /// counts), then the recalled ones not cached, ranked as the module
    /// docs say, the first `capacity`.
    pub(crate) fn ranked(
        &self,
        cached: impl Iterator<Item = (Signature, u32)>,
        is_cached: impl Fn(&Signature) -> bool,
        capacity: usize,
    ) -> Vec<(Signature, u32)> {
        let most_called_first = |a: &(Signature, u32), b: &(Signature, u32)| {
            (b.1, b.0.precomputed_hash()).cmp(&(a.1, a.0.precomputed_hash()))
        };
        let mut used: Vec<(Signature, u32)> =
            cached.map(|(sig, count)| (sig, count.max(USED))).collect();
        used.sort_by(most_called_first);
        let recalled = self.signatures.iter().filter(|(sig, _)| !is_cached(sig));
        let mut called: Vec<(Signature, u32)> = recalled
            .clone()
            .filter(|(_, record)| record.used)
            .map(|(sig, record)| (sig.clone(), record.count.max(USED)))
            .collect();
        called.sort_by(most_called_first);
        let mut unused: Vec<(Signature, u32)> = recalled
            .filter(|(_, record)| !record.used && record.count > UNUSED)
            .map(|(sig, record)| (sig.clone(), record.count))
            .collect();
        unused.sort_by(most_called_first);
        used.extend(called);
        used.extend(unused.into_iter().map(|(sig, _)| (sig, UNUSED)));
        used.truncate(capacity);
        used
    }

    /// Whether a signature was called since the policy kept last ranked it
    /// unused or left it out: that policy is to be kept again.
    pub(crate) fn stale(&self) -> bool {
        self.stale
    }

    /// A policy was kept: the recalled signatures not called by now were
    /// ranked unused in it, or left out.
    pub(crate) fn kept(&mut self) {
        for record in self.signatures.values_mut() {
            record.kept_unused = !record.used;
        }
        self.stale = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    fn sig(n: i64) -> Signature {
        Signature::builder().arg(DType::F32, &[n]).build()
    }

    fn names(ranked: &[(Signature, u32)]) -> Vec<(i64, u32)> {
        ranked
            .iter()
            .map(|(sig, count)| (sig.args()[0].dims()[0], *count))
            .collect()
    }

    const NOTHING_CACHED: fn(&Signature) -> bool = |_| false;

    #[test]
    fn used_signatures_outrank_recalled_ones_whatever_their_counts() {
        let mut recalled = Recalled::default();
        recalled.insert(sig(100), u32::MAX);
        recalled.insert(sig(101), 1_000_000);
        recalled.insert(sig(2), 3);
        recalled.insert(sig(3), 1);
        recalled.called(&sig(2));
        let cached = [(sig(1), 1), (sig(4), 7)].into_iter();
        let ranked = recalled.ranked(cached, NOTHING_CACHED, 8);
        assert_eq!(
            names(&ranked),
            [(4, 7), (1, USED), (2, 3), (100, UNUSED), (101, UNUSED)],
            "cached, called, then the unused ones ranked last (3, recalled \
             unused, is dropped)"
        );
        // The restore bound goes to the used ones.
        let cached = [(sig(1), 1), (sig(4), 7)].into_iter();
        assert_eq!(
            names(&recalled.ranked(cached, NOTHING_CACHED, 3)),
            [(4, 7), (1, USED), (2, 3)]
        );
        // A recalled signature cached since counts as cached, once.
        let cached = [(sig(2), 5)].into_iter();
        let ranked = recalled.ranked(cached, |s| *s == sig(2), 8);
        assert_eq!(names(&ranked), [(2, 5), (100, UNUSED), (101, UNUSED)]);
    }

    #[test]
    fn a_signature_kept_unused_and_called_later_makes_the_policy_stale() {
        let mut recalled = Recalled::default();
        recalled.insert(sig(1), 9);
        recalled.insert(sig(2), 8);
        recalled.called(&sig(1));
        assert!(!recalled.stale(), "nothing kept yet");
        recalled.kept();
        // Called before the policy was kept: it was right.
        recalled.called(&sig(1));
        assert!(!recalled.stale());
        // Kept as unused, then called: the policy kept is wrong about it.
        recalled.called(&sig(2));
        assert!(recalled.stale());
        let ranked = recalled.ranked(std::iter::empty(), NOTHING_CACHED, 8);
        assert_eq!(names(&ranked), [(1, 9), (2, 8)]);
        recalled.kept();
        assert!(!recalled.stale());
        recalled.called(&sig(2));
        assert!(!recalled.stale(), "once");
        // Calls of signatures never recalled change nothing.
        recalled.called(&sig(3));
        assert!(!recalled.stale());
    }
}
