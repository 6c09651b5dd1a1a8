//! Automatic dynamic dims: which dims of a function's calls vary, and the
//! signature to compile once one does.
//!
//! Misses are grouped by *shape class*: the signature with every dim made
//! dynamic (dtypes, ranks, structure, static and captured scalars and device
//! equal). Within a class each dim's distinct values are counted, up to
//! [`CacheConfig::dynamic_dims_after`](crate::CacheConfig::dynamic_dims_after),
//! over the calls that compiled (and those compiling now) and the missed
//! call itself; a dim that reaches it *varies*, and the miss compiles the
//! call's signature with the varying dims dynamic instead of the call's own:
//! with the default of 2, the second size of a batch compiles the dynamic
//! variant (one static variant and one dynamic, two compiles). The call's
//! own dims count only if the call is good: the compile callback lowers the
//! call's own signature first, and a refusal
//! ([`CompileFailure::CallRefused`](crate::CompileFailure::CallRefused))
//! commits nothing and leaves the class as it was. A dim varies for good
//! once a call whose dims counted compiled. A rank change is another class,
//! so it stays another variant.

use std::fmt;

use lru::LruCache;
use smallvec::SmallVec;

use crate::hashing::PrecomputedState;
use crate::signature::Signature;

/// Shape classes remembered per function; beyond it the least recently
/// missed class is forgotten (its dims start counting again).
pub(crate) const CLASSES_REMEMBERED: usize = 64;

/// A miss that compiles a signature with dynamic dims: which dims vary and
/// the signature compiled for them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generalization {
    signature: Signature,
    dims: Vec<(usize, usize)>,
    distinct: usize,
}

impl Generalization {
    /// The signature compiled: the call's, with the varying dims dynamic.
    pub fn signature(&self) -> &Signature {
        &self.signature
    }

    pub(crate) fn into_signature(self) -> Signature {
        self.signature
    }

    /// The dynamic dims, as (argument, dim) positions.
    pub fn dims(&self) -> &[(usize, usize)] {
        &self.dims
    }

    /// The distinct values after which a dim counts as varying
    /// ([`CacheConfig::dynamic_dims_after`](crate::CacheConfig::dynamic_dims_after)).
    pub fn distinct_values(&self) -> usize {
        self.distinct
    }
}

impl fmt::Display for Generalization {
    /// `arg 0 dim 0 took 2 distinct values: compiling (f32[?,256], f32[256])`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (arg, dim)) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "arg {arg} dim {dim}")?;
        }
        let took = if self.dims.len() == 1 {
            "took"
        } else {
            "each took"
        };
        write!(
            f,
            " {took} {} distinct values: compiling {}",
            self.distinct, self.signature
        )
    }
}

/// What is known of one shape class.
#[derive(Debug)]
struct ClassDims {
    /// One per dim, arguments in order.
    dims: Vec<DimValues>,
    /// A compile with dynamic dims failed for this class: its misses compile
    /// their own signatures.
    failed: bool,
}

#[derive(Debug, Default)]
struct DimValues {
    /// Distinct values seen, until the dim varies.
    seen: SmallVec<[i64; 2]>,
    varies: bool,
}

impl DimValues {
    /// Whether the dim varies once `others` (the values of compiles in
    /// flight) are counted too.
    fn varies_with(&self, others: impl Iterator<Item = i64>, after: usize) -> bool {
        if self.varies {
            return true;
        }
        let mut distinct = self.seen.clone();
        for v in others {
            if distinct.len() >= after {
                break;
            }
            if !distinct.contains(&v) {
                distinct.push(v);
            }
        }
        distinct.len() >= after
    }
}

/// The dims of one function's calls that compiled.
#[derive(Debug)]
pub(crate) struct Generalizer {
    classes: LruCache<Signature, ClassDims, PrecomputedState>,
    after: usize,
}

impl Generalizer {
    /// Dims vary after `after` distinct values.
    pub(crate) fn new(after: usize) -> Self {
        Generalizer {
            classes: LruCache::unbounded_with_hasher(PrecomputedState),
            after: after.max(1),
        }
    }

    /// The signature to compile for a missed call `sig` instead of its own,
    /// if some of its class's dims vary: a dim varies once its committed
    /// values, those of the `pending` calls (whose compiles are in flight)
    /// and the call's own take `after` distinct values. The call's own
    /// count provisionally: a call whose dims do not fit together must not
    /// make a dim vary, so the compile callback checks the call's own
    /// signature with its lowering before compiling the generalization
    /// (a refusal is a [`CompileFailure::CallRefused`](crate::CompileFailure::CallRefused)).
    /// Nothing is recorded: only a call whose compile succeeds is
    /// [`commit`](Self::commit)ted. A signature that has dynamic dims itself
    /// is not a call's and is left alone.
    pub(crate) fn generalize<'a>(
        &mut self,
        sig: &Signature,
        pending: impl IntoIterator<Item = &'a Signature>,
    ) -> Option<Generalization> {
        if sig.has_dynamic_dims() {
            return None;
        }
        let after = self.after;
        let class = sig.shape_class();
        let record = self.classes.get(&class);
        if record.is_some_and(|r| r.failed) {
            return None;
        }
        let pending: SmallVec<[&Signature; 4]> = pending
            .into_iter()
            .filter(|p| !p.has_dynamic_dims() && class.generalizes(p))
            .collect();
        let unseen = DimValues::default();
        let mut varying = Vec::new();
        for (i, (arg, dim, own)) in positions(sig).enumerate() {
            let values = record.map_or(&unseen, |r| &r.dims[i]);
            let others = pending
                .iter()
                .map(|p| p.args()[arg].dims()[dim])
                .chain([own]);
            if values.varies_with(others, after) {
                varying.push((arg, dim));
            }
        }
        if varying.is_empty() {
            return None;
        }
        Some(Generalization {
            signature: sig.with_dynamic_dims(&varying),
            dims: varying,
            distinct: after,
        })
    }

    /// Records the dims of a call `sig` whose compile succeeded (of its own
    /// signature or of its generalization): their values count towards
    /// their dims varying. Returns whether a dim varies from now on. A
    /// signature with dynamic dims is not a call's and is left alone.
    pub(crate) fn commit(&mut self, sig: &Signature) -> bool {
        if sig.has_dynamic_dims() {
            return false;
        }
        let after = self.after;
        let record = self.record(sig);
        let mut varies = false;
        for (values, (_, _, value)) in record.dims.iter_mut().zip(positions(sig)) {
            if !values.varies && !values.seen.contains(&value) {
                values.seen.push(value);
                if values.seen.len() >= after {
                    values.varies = true;
                    values.seen = SmallVec::new();
                    varies = true;
                }
            }
        }
        varies
    }

    /// Makes the dims at `dims` ((argument, dim) positions) of the shape
    /// class `class` vary, as an earlier process learned
    /// ([`LearnedPolicy`](crate::LearnedPolicy)); positions the class does
    /// not have are ignored.
    pub(crate) fn recall(&mut self, class: &Signature, dims: &[(usize, usize)]) {
        let record = self.record(class);
        for (values, (arg, dim, _)) in record.dims.iter_mut().zip(positions(class)) {
            if dims.contains(&(arg, dim)) {
                values.varies = true;
                values.seen = SmallVec::new();
            }
        }
    }

    /// The shape classes with varying dims (those whose dynamic compile did
    /// not fail), least recently missed last, with the (argument, dim)
    /// positions that vary: what a later process may recall.
    pub(crate) fn varying(&self) -> Vec<(Signature, Vec<(usize, usize)>)> {
        self.classes
            .iter()
            .filter(|(_, record)| !record.failed)
            .filter_map(|(class, record)| {
                let dims: Vec<(usize, usize)> = record
                    .dims
                    .iter()
                    .zip(positions(class))
                    .filter(|(values, _)| values.varies)
                    .map(|(_, (arg, dim, _))| (arg, dim))
                    .collect();
                (!dims.is_empty()).then(|| (class.clone(), dims))
            })
            .collect()
    }

    /// Remembers that compiling `dynamic` (a signature with dynamic dims)
    /// failed: later misses of its class compile their own signatures.
    /// Returns whether that is news (the class compiled dynamic dims until
    /// now).
    pub(crate) fn failed(&mut self, dynamic: &Signature) -> bool {
        let record = self.record(dynamic);
        !std::mem::replace(&mut record.failed, true)
    }

    /// The record of `sig`'s class, made (and the least recently used one
    /// forgotten beyond the bound) if there is none.
    fn record(&mut self, sig: &Signature) -> &mut ClassDims {
        let class = sig.shape_class();
        if !self.classes.contains(&class) && self.classes.len() >= CLASSES_REMEMBERED {
            self.classes.pop_lru();
        }
        let dims = sig.args().iter().map(|a| a.rank()).sum();
        self.classes.get_or_insert_mut(class, || ClassDims {
            dims: (0..dims).map(|_| DimValues::default()).collect(),
            failed: false,
        })
    }
}

/// Each dim of `sig` as (argument, dim, value), arguments in order.
fn positions(sig: &Signature) -> impl Iterator<Item = (usize, usize, i64)> + '_ {
    sig.args().iter().enumerate().flat_map(|(arg, spec)| {
        spec.dims()
            .iter()
            .enumerate()
            .map(move |(d, &v)| (arg, d, v))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CapturedScalar, DType};

    impl Generalizer {
        /// A miss of `sig` whose compile succeeds: what it compiles.
        fn observe(&mut self, sig: &Signature) -> Option<Generalization> {
            let general = self.generalize(sig, []);
            self.commit(sig);
            general
        }
    }

    fn mlp(batch: i64, k: i64) -> Signature {
        Signature::builder()
            .arg(DType::F32, &[batch, k])
            .arg(DType::F32, &[k, 256])
            .arg(DType::F32, &[256])
            .build()
    }

    fn f32_row(n: i64) -> Signature {
        Signature::builder().arg(DType::F32, &[n]).build()
    }

    #[test]
    fn a_second_value_generalizes_at_once() {
        let mut g = Generalizer::new(2);
        assert_eq!(g.observe(&mlp(5, 64)), None, "one value");
        assert_eq!(g.observe(&mlp(5, 64)), None, "the same value again");
        let general = g.observe(&mlp(7, 64)).expect("a second batch size");
        assert_eq!(general.dims(), [(0, 0)]);
        assert_eq!(general.signature(), &mlp(-1, 64));
        assert_eq!(
            general.to_string(),
            "arg 0 dim 0 took 2 distinct values: compiling (f32[?,64], f32[64,256], f32[256])"
        );
        // It stays varying; a second dim joins it with its second value.
        assert_eq!(g.observe(&mlp(9, 64)).unwrap().dims(), [(0, 0)]);
        let both = g.observe(&mlp(11, 32)).expect("k varies");
        assert_eq!(both.dims(), [(0, 0), (0, 1), (1, 0)]);
        assert_eq!(
            both.signature(),
            &Signature::builder()
                .arg(DType::F32, &[-1, -1])
                .arg(DType::F32, &[-1, 256])
                .arg(DType::F32, &[256])
                .build()
        );
    }

    #[test]
    fn only_values_of_calls_that_compiled_count() {
        let mut g = Generalizer::new(2);
        g.observe(&mlp(5, 64));
        // Calls that never compile (their own signature refused), each with
        // another inner dim: each asks for a generalization of its own
        // dims, but none of them is committed.
        for k in [32, 33, 34] {
            let asked = g.generalize(&mlp(5, k), []).expect("its own k counts");
            assert_eq!(asked.dims(), [(0, 1), (1, 0)], "k = {k}");
        }
        // So a good call's second batch size widens the batch only.
        let general = g.generalize(&mlp(7, 64), []).expect("two batch sizes");
        assert_eq!(general.dims(), [(0, 0)]);
        g.commit(&mlp(7, 64));
        assert_eq!(g.generalize(&mlp(11, 64), []).unwrap().dims(), [(0, 0)]);
    }

    #[test]
    fn the_dims_of_compiles_in_flight_count_until_they_end() {
        let mut g = Generalizer::new(2);
        let (first, second) = (mlp(1, 64), mlp(2, 64));
        assert_eq!(g.generalize(&first, []), None);
        assert_eq!(g.generalize(&first, [&first]), None, "the size in flight");
        // With one size in flight, a second generalizes: it does not queue
        // its own static compile.
        let general = g.generalize(&second, [&first]).expect("two sizes");
        assert_eq!(general.dims(), [(0, 0)]);
        let other_class = f32_row(3);
        assert_eq!(g.generalize(&first, [&other_class]), None);
        // Had that compile failed, nothing of it is left.
        assert_eq!(g.generalize(&first, []), None);
    }

    #[test]
    fn classes_are_separate_by_rank_dtype_and_scalars() {
        let mut g = Generalizer::new(2);
        let rank3 = Signature::builder().arg(DType::F32, &[7, 5, 1]).build();
        let rank2 = |n| Signature::builder().arg(DType::F32, &[n, 5]).build();
        let f64_rows = Signature::builder().arg(DType::F64, &[9, 5]).build();
        let scaled = |n, t| {
            Signature::builder()
                .arg(DType::F32, &[n, 5])
                .captured(CapturedScalar::f32("t", t))
                .build()
        };
        assert_eq!(g.observe(&rank2(1)), None);
        assert_eq!(g.observe(&rank3), None, "a rank change is another class");
        assert_eq!(g.observe(&f64_rows), None, "so is a dtype");
        assert_eq!(g.observe(&scaled(3, 0.5)), None, "and a captured scalar");
        assert_eq!(g.observe(&scaled(4, 1.0)), None);
        assert!(
            g.observe(&rank2(2)).is_some(),
            "a second value of its class"
        );
    }

    #[test]
    fn a_failed_class_compiles_static_and_after_one_is_dynamic_at_once() {
        let mut g = Generalizer::new(2);
        g.observe(&mlp(1, 8));
        let general = g.observe(&mlp(2, 8)).unwrap();
        assert!(g.failed(general.signature()));
        assert_eq!(g.observe(&mlp(3, 8)), None);
        assert!(!g.failed(general.signature()), "known already");

        let mut eager = Generalizer::new(1);
        let all = eager.observe(&mlp(4, 8)).expect("every dim at once");
        assert_eq!(all.signature().dynamic_dim_count(), 5);
        assert_eq!(eager.observe(&mlp(-1, 8)), None, "not a call's signature");
        assert!(eager.failed(&f32_row(-1)), "a class with nothing committed");
        assert_eq!(eager.generalize(&f32_row(4), []), None, "compiles static");
    }

    #[test]
    fn recalled_dims_vary_at_once_and_varying_dims_are_listed() {
        let mut g = Generalizer::new(2);
        let class = mlp(1, 1).shape_class();
        g.recall(&class, &[(0, 0), (7, 0), (0, 9)]);
        let general = g.generalize(&mlp(5, 64), []).expect("the batch varies");
        assert_eq!(general.dims(), [(0, 0)]);
        assert_eq!(g.varying(), [(class.clone(), vec![(0, 0)])]);
        assert!(!g.commit(&mlp(5, 64)), "one value of k");
        assert!(g.commit(&mlp(5, 32)), "k varies now");
        assert!(!g.commit(&mlp(6, 16)));
        assert_eq!(g.varying(), [(class.clone(), vec![(0, 0), (0, 1), (1, 0)])]);
        g.observe(&f32_row(1));
        assert_eq!(g.varying().len(), 1, "a class with no varying dim");
        assert!(g.failed(&class));
        assert_eq!(g.varying(), [], "a failed class compiles static");
    }

    #[test]
    fn classes_are_bounded() {
        let mut g = Generalizer::new(2);
        for k in 0..(CLASSES_REMEMBERED as i64 + 10) {
            let class = Signature::builder()
                .arg(DType::F32, &[1])
                .captured(CapturedScalar::i64("k", k))
                .build();
            g.observe(&class);
        }
        assert_eq!(g.classes.len(), CLASSES_REMEMBERED);
    }
}
