//! Why a call missed: differences between signatures, in words.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use crate::byte_size::ByteSize;
use crate::error::{CompileFailure, ErrorChain};
use crate::layout::Layout;
use crate::signature::{ArgSpec, CapturedScalar, ScalarValue, Signature};

/// One way in which a signature differs from another (`before → after`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Difference {
    /// The number of tensor arguments changed.
    ArgCount {
        /// Count before.
        before: usize,
        /// Count after.
        after: usize,
    },
    /// An argument's dtype changed (its dims may have changed too).
    ArgDType {
        /// Argument position.
        index: usize,
        /// The argument before.
        before: ArgSpec,
        /// The argument after.
        after: ArgSpec,
    },
    /// An argument's rank changed, dtype unchanged.
    ArgRank {
        /// Argument position.
        index: usize,
        /// The argument before.
        before: ArgSpec,
        /// The argument after.
        after: ArgSpec,
    },
    /// Some dims of an argument changed, dtype and rank unchanged.
    ArgDims {
        /// Argument position.
        index: usize,
        /// The argument before.
        before: ArgSpec,
        /// The argument after.
        after: ArgSpec,
    },
    /// The structure of the arguments changed (tuples, lists, dicts and
    /// their keys, where static scalars sit); `None` is a flat call.
    Structure {
        /// The structure before.
        before: Option<Layout>,
        /// The structure after.
        after: Option<Layout>,
    },
    /// A scalar baked into the code changed value (same structure).
    StaticValue {
        /// Its position among the static scalars.
        index: usize,
        /// The value before.
        before: ScalarValue,
        /// The value after.
        after: ScalarValue,
    },
    /// A captured scalar kept its name but changed value or kind.
    CapturedValue {
        /// The scalar before.
        before: CapturedScalar,
        /// The scalar after.
        after: CapturedScalar,
    },
    /// A captured scalar appeared.
    CapturedAdded(CapturedScalar),
    /// A captured scalar disappeared.
    CapturedRemoved(CapturedScalar),
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::ArgCount { before, after } => {
                write!(f, "argument count {before} → {after}")
            }
            Difference::ArgDType {
                index,
                before,
                after,
            } => write!(
                f,
                "arg {index}: dtype {} → {} ({before} vs {after})",
                before.dtype(),
                after.dtype()
            ),
            Difference::ArgRank {
                index,
                before,
                after,
            } => write!(
                f,
                "arg {index}: rank {} → {} ({before} vs {after})",
                before.rank(),
                after.rank()
            ),
            Difference::ArgDims {
                index,
                before,
                after,
            } => {
                // A dynamic dim before admits any size: it did not change.
                let changed: Vec<usize> = before
                    .dims()
                    .iter()
                    .zip(after.dims())
                    .enumerate()
                    .filter(|(_, (b, a))| b != a && **b != ArgSpec::DYNAMIC)
                    .map(|(i, _)| i)
                    .collect();
                if let [dim] = changed[..] {
                    write!(
                        f,
                        "arg {index}: dim {dim}: {} → {} ({before} vs {after})",
                        before.dims()[dim],
                        DimText(after.dims()[dim])
                    )
                } else {
                    let list: Vec<String> = changed.iter().map(usize::to_string).collect();
                    write!(
                        f,
                        "arg {index}: dims {} changed ({before} vs {after})",
                        list.join(", ")
                    )
                }
            }
            Difference::Structure { before, after } => {
                let show = |layout: &Option<Layout>| {
                    layout
                        .as_ref()
                        .map_or_else(|| "flat".to_owned(), ToString::to_string)
                };
                write!(f, "argument structure {} → {}", show(before), show(after))
            }
            Difference::StaticValue {
                index,
                before,
                after,
            } => {
                write!(f, "static scalar {index}: ")?;
                write_value_change(f, *before, *after)
            }
            Difference::CapturedValue { before, after } => {
                write!(f, "captured `{}`: ", before.name())?;
                write_value_change(f, before.value(), after.value())
            }

            Difference::CapturedAdded(c) => {
                write!(f, "captured `{}` added (= {})", c.name(), c.value())
            }
            Difference::CapturedRemoved(c) => {
                write!(f, "captured `{}` removed (was {})", c.name(), c.value())
            }
        }
    }
}

/// A dim as signatures display it: its size, or `?` when dynamic.
struct DimText(i64);

impl fmt::Display for DimText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == ArgSpec::DYNAMIC {
            f.write_str("?")
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// `before → after` for a scalar, with kinds or bits when the text alone
/// would not show the change.
fn write_value_change(
    f: &mut fmt::Formatter<'_>,
    before: ScalarValue,
    after: ScalarValue,
) -> fmt::Result {
    let (b, a) = (before, after);
    if b.kind_name() != a.kind_name() {
        write!(f, "{b} ({}) → {a} ({})", b.kind_name(), a.kind_name())
    } else if b.to_string() == a.to_string() {
        // Same text, different bits (NaN payloads): show the bits.
        write!(f, "{b} (bits {:#x}) → {a} (bits {:#x})", b.bits(), a.bits())
    } else {
        write!(f, "{b} → {a}")
    }
}

impl Signature {
    /// How `newer` differs from `self`, one [`Difference`] per changed part;
    /// empty when they are equal, or when `self` [generalizes](Self::generalizes)
    /// `newer` (a dim dynamic in `self` matches any size).
    pub fn differences(&self, newer: &Signature) -> Vec<Difference> {
        let mut out = Vec::new();
        let (old_args, new_args) = (self.args(), newer.args());
        if old_args.len() != new_args.len() {
            out.push(Difference::ArgCount {
                before: old_args.len(),
                after: new_args.len(),
            });
        }
        for (index, (before, after)) in old_args.iter().zip(new_args).enumerate() {
            if before.admits(after) {
                continue;
            }
            let (before, after) = (before.clone(), after.clone());
            out.push(if before.dtype() != after.dtype() {
                Difference::ArgDType {
                    index,
                    before,
                    after,
                }
            } else if before.rank() != after.rank() {
                Difference::ArgRank {
                    index,
                    before,
                    after,
                }
            } else {
                Difference::ArgDims {
                    index,
                    before,
                    after,
                }
            });
        }
        if self.layout() != newer.layout() {
            out.push(Difference::Structure {
                before: self.layout().cloned(),
                after: newer.layout().cloned(),
            });
        } else {
            for (index, (before, after)) in self.statics().iter().zip(newer.statics()).enumerate() {
                if before != after {
                    out.push(Difference::StaticValue {
                        index,
                        before: *before,
                        after: *after,
                    });
                }
            }
        }
        diff_captured(self.captured(), newer.captured(), &mut out);
        out
    }

    /// The differences from `self` to `newer` in words, joined by `; `, e.g.
    /// `arg 0: rank 2 → 3 (f32[1,5] vs f32[1,5,1])`; `identical` when equal.
    pub fn explain_difference(&self, newer: &Signature) -> String {
        let diffs = self.differences(newer);
        if diffs.is_empty() {
            "identical".to_owned()
        } else {
            join(&diffs)
        }
    }
}

/// Merge-join of two name-sorted captured lists.
fn diff_captured(old: &[CapturedScalar], new: &[CapturedScalar], out: &mut Vec<Difference>) {
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        let order = match (old.get(i), new.get(j)) {
            (Some(o), Some(n)) => o.name().cmp(n.name()),
            (Some(_), None) => Ordering::Less,
            _ => Ordering::Greater,
        };
        match order {
            Ordering::Less => {
                out.push(Difference::CapturedRemoved(old[i].clone()));
                i += 1;
            }
            Ordering::Greater => {
                out.push(Difference::CapturedAdded(new[j].clone()));
                j += 1;
            }
            Ordering::Equal => {
                if old[i].value() != new[j].value() {
                    out.push(Difference::CapturedValue {
                        before: old[i].clone(),
                        after: new[j].clone(),
                    });
                }
                i += 1;
                j += 1;
            }
        }
    }
}

fn join(diffs: &[Difference]) -> String {
    diffs
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why an entry left the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EvictionCause {
    /// The function's own capacity was full; its least recently used entry went.
    FunctionCapacity {
        /// The function's capacity.
        capacity: usize,
    },
    /// The global entry budget was exceeded; the least recently used entry of
    /// all functions went.
    EntryBudget {
        /// `CacheConfig::max_total_entries`.
        max_entries: usize,
    },
    /// The global byte budget was exceeded; the least recently used entry of
    /// all functions went.
    ByteBudget {
        /// `CacheConfig::max_total_bytes`.
        max_bytes: usize,
    },
    /// `evict_function` or `clear` was called.
    Requested,
}

impl fmt::Display for EvictionCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvictionCause::FunctionCapacity { capacity } => {
                write!(f, "function capacity {capacity} reached")
            }
            EvictionCause::EntryBudget { max_entries } => {
                write!(f, "global entry budget {max_entries} reached")
            }
            EvictionCause::ByteBudget { max_bytes } => {
                write!(
                    f,
                    "global byte budget {} reached",
                    ByteSize::from(*max_bytes)
                )
            }
            EvictionCause::Requested => f.write_str("evicted on request"),
        }
    }
}

/// Why a call's signature was not found in the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MissReason {
    /// The first call of this function (or the first since it was evicted).
    FirstCall,
    /// The signature is new; `differences` compares it with the closest cached
    /// signature of the function (fewest differences, most recent on a tie).
    Changed {
        /// From the closest cached signature to this call's.
        differences: Vec<Difference>,
    },
    /// This signature was compiled before and evicted.
    Evicted {
        /// What evicted it.
        cause: EvictionCause,
        /// From the closest cached signature (as in `Changed`) to this call's;
        /// empty when nothing is cached.
        differences: Vec<Difference>,
    },
    /// Nothing is cached for the function (earlier compiles failed or were
    /// skipped while thrashing, or everything was evicted).
    NothingCached,
    /// Compiling this signature failed earlier; the failure is remembered.
    CompileFailedEarlier {
        /// The stored error.
        error: Arc<CompileFailure>,
        /// Calls with this signature left before the compile is retried;
        /// `u64::MAX` when it is never retried
        /// ([`CacheConfig::failed_compile_retry_after`](crate::CacheConfig::failed_compile_retry_after)
        /// is `u64::MAX`): only
        /// [`JitCache::clear_failures`](crate::JitCache::clear_failures) retries it.
        retry_in_calls: u64,
    },
    /// A failed compile of this signature is retried now.
    RetryAfterFailure,
    /// Another call is compiling this signature right now.
    CompileInFlight,
    /// Not a miss: a signature with dynamic dims serves this one, which is
    /// hot, so its own (static, faster) signature compiles in the
    /// background ([`CacheConfig::specialize_hot_sizes`](crate::CacheConfig::specialize_hot_sizes)).
    HotSize {
        /// The signature with dynamic dims that served it.
        served_by: Box<Signature>,
        /// Its recent calls, as admission counts them.
        calls: u32,
    },
}

impl fmt::Display for MissReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MissReason::FirstCall => f.write_str("first call"),
            MissReason::Changed { differences } => f.write_str(&join(differences)),
            MissReason::Evicted { cause, differences } if differences.is_empty() => {
                write!(f, "evicted earlier: {cause}")
            }
            MissReason::Evicted { cause, differences } => {
                write!(f, "{}; evicted earlier: {cause}", join(differences))
            }
            MissReason::NothingCached => f.write_str("nothing cached for this function"),
            MissReason::HotSize { served_by, calls } => write!(
                f,
                "hot size: {calls} recent calls served by {served_by}; its own variant is faster"
            ),
            MissReason::CompileFailedEarlier {
                error,
                retry_in_calls: u64::MAX,
            } => write!(
                f,
                "compile failed earlier ({}); not retried: JitCache::clear_failures() retries it",
                ErrorChain(&**error)
            ),
            MissReason::CompileFailedEarlier {
                error,
                retry_in_calls,
            } => write!(
                f,
                "compile failed earlier ({}); retried in {retry_in_calls} calls",
                ErrorChain(&**error)
            ),
            MissReason::RetryAfterFailure => f.write_str("retrying a failed compile"),
            MissReason::CompileInFlight => f.write_str("another call is compiling it"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    fn f32(dims: &[i64]) -> Signature {
        Signature::builder().arg(DType::F32, dims).build()
    }

    #[test]
    fn rank_change_reads_like_the_design() {
        assert_eq!(
            f32(&[1, 5]).explain_difference(&f32(&[1, 5, 1])),
            "arg 0: rank 2 → 3 (f32[1,5] vs f32[1,5,1])"
        );
        assert_eq!(
            f32(&[1, 5, 1]).explain_difference(&f32(&[1, 5])),
            "arg 0: rank 3 → 2 (f32[1,5,1] vs f32[1,5])"
        );
    }

    #[test]
    fn dims_dtype_and_count() {
        assert_eq!(
            f32(&[1, 5]).explain_difference(&f32(&[1, 6])),
            "arg 0: dim 1: 5 → 6 (f32[1,5] vs f32[1,6])"
        );
        assert_eq!(
            f32(&[1, 5]).explain_difference(&f32(&[2, 6])),
            "arg 0: dims 0, 1 changed (f32[1,5] vs f32[2,6])"
        );
        let f16 = Signature::builder().arg(DType::F16, &[1, 5, 1]).build();
        assert_eq!(
            f32(&[1, 5]).explain_difference(&f16),
            "arg 0: dtype f32 → f16 (f32[1,5] vs f16[1,5,1])"
        );
        let two = Signature::builder()
            .arg(DType::F32, &[1, 5])
            .arg(DType::I32, &[])
            .build();
        assert_eq!(
            f32(&[1, 5]).explain_difference(&two),
            "argument count 1 → 2"
        );
        assert_eq!(f32(&[3]).explain_difference(&f32(&[3])), "identical");
    }

    #[test]
    fn structure_and_static_changes() {
        use crate::layout::Container;
        let dict = |key: &str, k: i64| {
            Signature::builder()
                .arg(DType::F32, &[2])
                .open(Container::Dict)
                .key(key)
                .static_scalar(ScalarValue::I64(k))
                .close()
                .build()
        };
        assert_eq!(
            dict("k", 3).explain_difference(&dict("k", 4)),
            "static scalar 0: 3 → 4"
        );
        assert_eq!(
            dict("k", 3).explain_difference(&dict("j", 3)),
            "argument structure T, {k: S} → T, {j: S}"
        );
        assert_eq!(
            f32(&[2]).explain_difference(&dict("k", 3)),
            "argument structure flat → T, {k: S}"
        );
    }

    #[test]
    fn captured_changes() {
        let t = |v: f32| {
            Signature::builder()
                .captured(CapturedScalar::f32("temperature", v))
                .build()
        };
        assert_eq!(
            t(0.8).explain_difference(&t(1.0)),
            "captured `temperature`: 0.8 → 1.0"
        );
        assert_eq!(
            t(0.0).explain_difference(&t(-0.0)),
            "captured `temperature`: 0.0 → -0.0"
        );
        let nan2 = f32::from_bits(f32::NAN.to_bits() + 1);
        assert_eq!(
            t(f32::NAN).explain_difference(&t(nan2)),
            "captured `temperature`: NaN (bits 0x7fc00000) → NaN (bits 0x7fc00001)"
        );
        let k32 = Signature::builder()
            .captured(CapturedScalar::i32("k", 3))
            .build();
        let k64 = Signature::builder()
            .captured(CapturedScalar::i64("k", 3))
            .build();
        assert_eq!(
            k32.explain_difference(&k64),
            "captured `k`: 3 (i32) → 3 (i64)"
        );
        let none = Signature::builder().build();
        assert_eq!(none.explain_difference(&k32), "captured `k` added (= 3)");
        assert_eq!(
            k32.explain_difference(&none),
            "captured `k` removed (was 3)"
        );
    }
}
