//! What the policy learned about a function, kept between processes (as
//! PyTorch's profile-guided dynamism keeps what Dynamo learned): which dims
//! of its calls went dynamic, and which signatures it had cached.
//!
//! A cache with a [`PolicyMemory`] ([`JitCache::remembering`](crate::JitCache::remembering))
//! asks it what earlier processes learned when it first sees a function,
//! and hands it what this process learned each time that changes: a dim
//! goes dynamic, a signature is cached or leaves the cache. That happens on
//! compile completions (and on misses that make a dim vary), never on a
//! hit. What is recalled applies from the function's first call:
//!
//! - **Dynamic dims.** A class whose dims varied has them varying at once:
//!   its first miss compiles (or loads from disk) the variant with those
//!   dims dynamic, with no static compile before it.
//! - **Hot signatures.** Each signature that was cached is admitted at
//!   capacity as a signature called `count` times recently (never refused
//!   as a first sight), and its first miss compiles (or loads) that very
//!   signature rather than its generalization: the static variants come
//!   back beside the dynamic one, as they were.
//!
//! What a process used outranks what it only recalled when its policy is
//! kept again, and what goes uncalled leaves the policy (`recalled.rs`):
//! a stale or forged record cannot keep its place ahead of the signatures
//! actually called.
//!
//! A recalled record only changes which signature a miss looks up or
//! compiles, and which misses compile: a variant with dynamic dims serves
//! only the calls it generalizes, as in any process, so a wrong record
//! costs compiles, never wrong results. The records are bounded
//! ([`LearnedPolicy::MAX_HOT`], [`LearnedPolicy::MAX_DYNAMIC_CLASSES`]);
//! their text ([`LearnedPolicy::to_text`]) is in `file.rs`.

mod file;
mod recalled;

use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::FxHasher;

pub use file::{PolicyFileError, PolicyOwner, PolicyScope};
pub(crate) use recalled::Recalled;

use crate::function_id::FunctionId;
use crate::hashing::finalize;
use crate::signature::Signature;

/// Keeps what a cache's policy learned between processes: the disk cache's
/// policy files (`sheaf-integration` keeps them in its `ArtifactStore`), or
/// anything else that can hold a [`LearnedPolicy`] per function.
///
/// The cache calls it outside its lock: [`recall`](Self::recall) once per
/// function, on the calling thread of its first call;
/// [`keep`](Self::keep) from whichever thread finished the compile (or
/// missed) that changed what was learned.
pub trait PolicyMemory: Send + Sync {
    /// What earlier processes learned about `func`; `None` when nothing
    /// usable is kept (a record that cannot be used is the memory's to
    /// report, once).
    fn recall(&self, func: &FunctionId) -> Option<LearnedPolicy>;

    /// Keeps `learned`, all this process knows of `func` now, in place of
    /// what was kept. Calls may arrive out of order from several threads:
    /// a policy with a lower [`sequence`](LearnedPolicy::sequence) than one
    /// kept already is older, and is dropped.
    fn keep(&self, func: &FunctionId, learned: &LearnedPolicy);
}

/// What the policy learned about one function: the shape classes whose
/// dims vary, and the signatures it had cached, with their recent call
/// counts. Made by the cache ([`PolicyMemory::keep`]) or read back from
/// its text ([`from_text`](Self::from_text)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LearnedPolicy {
    /// Per shape class (the signature with every dim dynamic), the
    /// (argument, dim) positions that vary.
    dynamic: Vec<(Signature, Vec<(usize, usize)>)>,
    /// Signatures that were cached, most called first, with their recent
    /// call count (at least 1; see [`hot`](Self::hot)).
    hot: Vec<(Signature, u32)>,
    sequence: u64,
}

impl LearnedPolicy {
    /// The most hot signatures kept per function: the most called ones stay.
    pub const MAX_HOT: usize = 64;

    /// The most shape classes with dynamic dims kept per function (as many
    /// as the policy remembers).
    pub const MAX_DYNAMIC_CLASSES: usize = crate::generalize::CLASSES_REMEMBERED;

    /// What the cache learned, as of its `sequence`-th snapshot; `hot` most
    /// called first. Beyond the bounds, the last records are left out.
    pub(crate) fn new(
        mut dynamic: Vec<(Signature, Vec<(usize, usize)>)>,
        mut hot: Vec<(Signature, u32)>,
        sequence: u64,
    ) -> Self {
        dynamic.truncate(Self::MAX_DYNAMIC_CLASSES);
        hot.truncate(Self::MAX_HOT);
        LearnedPolicy {
            dynamic,
            hot,
            sequence,
        }
    }

    /// The shape classes whose dims vary (each the signature with every
    /// dim dynamic) and their varying dims, as (argument, dim) positions.
    pub fn dynamic_dims(&self) -> impl Iterator<Item = (&Signature, &[(usize, usize)])> {
        self.dynamic
            .iter()
            .map(|(class, dims)| (class, dims.as_slice()))
    }

    /// The signatures that were cached, each with its recent call count
    /// when it was kept: those the keeping process used first (cached, the
    /// most called first, then recalled and called; a count of at least
    /// 2), then those it recalled and did not call (the count 1).
    pub fn hot(&self) -> &[(Signature, u32)] {
        &self.hot
    }

    /// Orders the policies one cache hands to [`PolicyMemory::keep`]: a
    /// higher number is more recent. 0 for one read back from text.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// A hash of what was learned, counts and order aside: equal when the
    /// same dims vary and the same signatures are hot.
    pub(crate) fn fingerprint(&self) -> u64 {
        let mut hashes: Vec<u64> = self
            .dynamic
            .iter()
            .map(|(class, dims)| {
                let mut h = FxHasher::default();
                h.write_u64(class.precomputed_hash());
                for &(arg, dim) in dims {
                    h.write_usize(arg);
                    h.write_usize(dim);
                }
                finalize(h.finish())
            })
            .chain(self.hot.iter().map(|(sig, _)| sig.precomputed_hash()))
            .collect();
        hashes.sort_unstable();
        let mut h = FxHasher::default();
        for hash in hashes {
            h.write_u64(hash);
        }
        finalize(h.finish())
    }
}

/// The next [`LearnedPolicy::sequence`]: increasing over the process, so
/// that the policies of every cache are ordered.
pub(crate) fn next_sequence() -> u64 {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    SEQUENCE.fetch_add(1, Ordering::Relaxed) + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    fn sig(dims: &[i64]) -> Signature {
        Signature::builder().arg(DType::F32, dims).build()
    }

    #[test]
    fn the_fingerprint_reads_what_was_learned_not_counts_or_order() {
        let class = (sig(&[-1, -1]), vec![(0, 0)]);
        let learned = LearnedPolicy::new(vec![class.clone()], vec![(sig(&[1, 2]), 3)], 1);
        let recounted = LearnedPolicy::new(vec![class.clone()], vec![(sig(&[1, 2]), 9)], 2);
        assert_eq!(learned.fingerprint(), recounted.fingerprint());
        let two = |a, b| LearnedPolicy::new(vec![], vec![(sig(&[a]), 1), (sig(&[b]), 1)], 1);
        assert_eq!(two(1, 2).fingerprint(), two(2, 1).fingerprint());
        let other_dims = LearnedPolicy::new(
            vec![(sig(&[-1, -1]), vec![(0, 1)])],
            vec![(sig(&[1, 2]), 3)],
            1,
        );
        assert_ne!(learned.fingerprint(), other_dims.fingerprint());
        let fewer = LearnedPolicy::new(vec![class], vec![], 1);
        assert_ne!(learned.fingerprint(), fewer.fingerprint());
    }

    #[test]
    fn records_are_bounded() {
        let hot = (0..100).map(|n| (sig(&[n]), 1)).collect();
        let dynamic = (1..100)
            .map(|rank| (sig(&vec![-1; rank]), vec![(0, 0)]))
            .collect();
        let learned = LearnedPolicy::new(dynamic, hot, 1);
        assert_eq!(learned.hot().len(), LearnedPolicy::MAX_HOT);
        assert_eq!(
            learned.dynamic_dims().count(),
            LearnedPolicy::MAX_DYNAMIC_CLASSES
        );
        assert_eq!(learned.hot()[0].0, sig(&[0]), "the first ones stay");
    }
}
