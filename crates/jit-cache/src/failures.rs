//! Negative cache: compile errors remembered per signature, for a while.

use std::sync::Arc;

use lru::LruCache;

use crate::error::CompileFailure;
use crate::hashing::PrecomputedState;
use crate::signature::Signature;

/// `retry_after` (and `calls_left`) meaning "never retried": the failure
/// stays until it is forgotten ([`Failures::clear`], or evicted from the
/// bound). [`CacheConfig::failed_compile_retry_after`](crate::CacheConfig::failed_compile_retry_after)
/// set to it disables retries.
pub(crate) const NEVER: u64 = u64::MAX;

/// What to do with a signature whose compile may have failed before.
#[derive(Debug)]
pub(crate) enum FailureCheck {
    /// No failure remembered.
    None,
    /// Still failed: interpret, with the stored error; `retry_in_calls` is
    /// [`NEVER`] when it is never retried.
    Blocked {
        error: Arc<CompileFailure>,
        retry_in_calls: u64,
    },
    /// The failure expired (it was forgotten now): compile again.
    Retry,
}

#[derive(Debug)]
struct Failure {
    error: Arc<CompileFailure>,
    /// Calls with this signature left to interpret before retrying;
    /// [`NEVER`] is never decremented.
    calls_left: u64,
}

/// Failed signatures of one function, bounded (least recently used forgotten).
#[derive(Debug)]
pub(crate) struct Failures {
    map: LruCache<Signature, Failure, PrecomputedState>,
    max: usize,
}

impl Failures {
    pub(crate) fn new(max: usize) -> Self {
        Failures {
            map: LruCache::unbounded_with_hasher(PrecomputedState),
            max,
        }
    }

    /// Checks `sig` at a call that missed the cache.
    pub(crate) fn check(&mut self, sig: &Signature) -> FailureCheck {
        if self.map.is_empty() {
            return FailureCheck::None;
        }
        let Some(failure) = self.map.get_mut(sig) else {
            return FailureCheck::None;
        };
        if failure.calls_left == 0 {
            self.map.pop(sig);
            return FailureCheck::Retry;
        }
        if failure.calls_left != NEVER {
            failure.calls_left -= 1;
        }
        FailureCheck::Blocked {
            error: Arc::clone(&failure.error),
            retry_in_calls: failure.calls_left,
        }
    }

    /// Whether a failure of `sig` is remembered (not counting the call).
    pub(crate) fn contains(&self, sig: &Signature) -> bool {
        !self.map.is_empty() && self.map.contains(sig)
    }

    /// Remembers that compiling `sig` failed; the next `retry_after` calls
    /// with it are interpreted ([`NEVER`]: every call, until cleared).
    pub(crate) fn record(&mut self, sig: Signature, error: Arc<CompileFailure>, retry_after: u64) {
        self.map.put(
            sig,
            Failure {
                error,
                calls_left: retry_after,
            },
        );
        while self.map.len() > self.max {
            self.map.pop_lru();
        }
    }

    /// Forgets every failure; returns how many there were.
    pub(crate) fn clear(&mut self) -> usize {
        let n = self.map.len();
        self.map.clear();
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn blocked_for_n_calls_then_retried_and_bounded() {
        let sig = |n| Signature::builder().arg(DType::F32, &[n]).build();
        let mut f = Failures::new(2);
        assert!(matches!(f.check(&sig(1)), FailureCheck::None));
        f.record(sig(1), Arc::new(CompileFailure::message("boom")), 2);
        assert!(matches!(
            f.check(&sig(1)),
            FailureCheck::Blocked {
                retry_in_calls: 1,
                ..
            }
        ));
        assert!(matches!(
            f.check(&sig(1)),
            FailureCheck::Blocked {
                retry_in_calls: 0,
                ..
            }
        ));
        assert!(matches!(f.check(&sig(1)), FailureCheck::Retry));
        assert!(matches!(f.check(&sig(1)), FailureCheck::None));
        for n in 1..=3 {
            f.record(sig(n), Arc::new(CompileFailure::message("boom")), 5);
        }
        assert!(
            matches!(f.check(&sig(1)), FailureCheck::None),
            "oldest forgotten"
        );
        assert_eq!(f.clear(), 2);
    }

    #[test]
    fn never_is_not_counted_down() {
        let sig = Signature::builder().arg(DType::F32, &[3]).build();
        let mut f = Failures::new(2);
        f.record(
            sig.clone(),
            Arc::new(CompileFailure::message("boom")),
            NEVER,
        );
        for _ in 0..3 {
            assert!(matches!(
                f.check(&sig),
                FailureCheck::Blocked {
                    retry_in_calls: NEVER,
                    ..
                }
            ));
        }
        assert_eq!(f.clear(), 1);
        assert!(matches!(f.check(&sig), FailureCheck::None));
    }
}
