//! Automatic dynamic dims: which dims of a function's calls vary, and the
//! signature to compile once one does.
//!
//! Misses are grouped by *shape class*: the signature with every dim made
//! dynamic (dtypes, ranks, structure, static and captured scalars and device
//! equal). Within a class each dim's distinct values are counted, up to
//! [`CacheConfig::dynamic_dims_after`](crate::CacheConfig::dynamic_dims_after);
//! a dim that reaches it *varies* for good. A miss in a class with varying
//! dims compiles the call's signature with those dims dynamic instead of the
//! call's own. A rank change is another class, so it stays another variant.

use std::fmt;

use lru::LruCache;
use smallvec::SmallVec;

use crate::hashing::PrecomputedState;
use crate::signature::Signature;

/// Shape classes remembered per function; beyond it the least recently
/// missed class is forgotten (its dims start counting again).
const CLASSES_REMEMBERED: usize = 64;

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

/// The dims seen in one function's misses.
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

    /// Records the dims of a missed call `sig`; returns the signature to
    /// compile instead of `sig` if some of its class's dims vary. A
    /// signature that has dynamic dims itself is not a call's and is left
    /// alone.
    pub(crate) fn observe(&mut self, sig: &Signature) -> Option<Generalization> {
        if sig.has_dynamic_dims() {
            return None;
        }
        let class = sig.shape_class();
        let after = self.after;
        let record = match self.classes.get_mut(&class) {
            Some(record) => record,
            None => {
                if self.classes.len() >= CLASSES_REMEMBERED {
                    self.classes.pop_lru();
                }
                let dims = sig.args().iter().map(|a| a.rank()).sum();
                self.classes.get_or_insert_mut(class, || ClassDims {
                    dims: (0..dims).map(|_| DimValues::default()).collect(),
                    failed: false,
                })
            }
        };
        let positions = sig.args().iter().enumerate().flat_map(|(arg, spec)| {
            spec.dims()
                .iter()
                .enumerate()
                .map(move |(d, &v)| (arg, d, v))
        });
        let mut varying = Vec::new();
        for (values, (arg, dim, value)) in record.dims.iter_mut().zip(positions) {
            if !values.varies && !values.seen.contains(&value) {
                values.seen.push(value);
                if values.seen.len() >= after {
                    values.varies = true;
                    values.seen = SmallVec::new();
                }
            }
            if values.varies {
                varying.push((arg, dim));
            }
        }
        if varying.is_empty() || record.failed {
            return None;
        }
        Some(Generalization {
            signature: sig.with_dynamic_dims(&varying),
            dims: varying,
            distinct: after,
        })
    }

    /// Remembers that compiling `dynamic` (a signature with dynamic dims)
    /// failed: later misses of its class compile their own signatures.
    /// Returns whether the class was known.
    pub(crate) fn failed(&mut self, dynamic: &Signature) -> bool {
        match self.classes.get_mut(&dynamic.shape_class()) {
            Some(record) => {
                record.failed = true;
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CapturedScalar, DType};

    fn mlp(batch: i64, k: i64) -> Signature {
        Signature::builder()
            .arg(DType::F32, &[batch, k])
            .arg(DType::F32, &[k, 256])
            .arg(DType::F32, &[256])
            .build()
    }

    #[test]
    fn a_dim_varies_after_its_second_value() {
        let mut g = Generalizer::new(2);
        assert_eq!(g.observe(&mlp(5, 64)), None, "one value");
        assert_eq!(g.observe(&mlp(5, 64)), None, "the same value again");
        let general = g.observe(&mlp(7, 64)).expect("batch varies");
        assert_eq!(general.dims(), [(0, 0)]);
        assert_eq!(general.signature(), &mlp(-1, 64));
        assert_eq!(
            general.to_string(),
            "arg 0 dim 0 took 2 distinct values: compiling (f32[?,64], f32[64,256], f32[256])"
        );
        // It stays varying; a second dim joins it once it varies too.
        assert_eq!(g.observe(&mlp(9, 64)).unwrap().dims(), [(0, 0)]);
        let both = g.observe(&mlp(9, 32)).expect("k varies");
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
        assert!(g.observe(&rank2(2)).is_some());
    }

    #[test]
    fn a_failed_class_compiles_static_and_after_one_is_dynamic_at_once() {
        let mut g = Generalizer::new(2);
        g.observe(&mlp(1, 8));
        let general = g.observe(&mlp(2, 8)).unwrap();
        assert!(g.failed(general.signature()));
        assert_eq!(g.observe(&mlp(3, 8)), None);
        let rank1 = Signature::builder().arg(DType::F32, &[-1]).build();
        assert!(!g.failed(&rank1), "unknown class");

        let mut eager = Generalizer::new(1);
        let all = eager.observe(&mlp(4, 8)).expect("every dim at once");
        assert_eq!(all.signature().dynamic_dim_count(), 5);
        assert_eq!(eager.observe(&mlp(-1, 8)), None, "not a call's signature");
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
