//! What a call should do: run compiled code or the interpreter.

use std::fmt;
use std::sync::Arc;

use crate::admission::Refusal;
use crate::error::{CompileFailure, ErrorChain};
use crate::explain::MissReason;

/// Where a compiled executable came from.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// It was cached.
    Hit,
    /// This call compiled it.
    CompiledNow {
        /// Why the call missed.
        miss: MissReason,
    },
    /// Another call was compiling it; this one waited for the result.
    CompiledByOtherCall,
}

/// Why a call runs in the interpreter.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FallbackReason {
    /// The function is at capacity and admission refused this signature
    /// ([`CachePolicy::Adaptive`](crate::CachePolicy::Adaptive)).
    NotAdmitted {
        /// Why this call missed.
        miss: MissReason,
        /// Why it does not compile.
        refusal: Refusal,
    },
    /// This call queued the signature's compile on the background pool
    /// ([`JitCache::get_or_queue`](crate::JitCache::get_or_queue)); later
    /// calls run compiled once it is done.
    CompileQueued,
    /// The background queue was full; a later miss queues the compile again.
    CompileQueueFull,
    /// The function recompiles too often; new signatures are interpreted
    /// until the cool-down ends
    /// ([`CachePolicy::LruCoolDown`](crate::CachePolicy::LruCoolDown)).
    Thrashing {
        /// Why this call missed.
        miss: MissReason,
        /// Calls after this one before compiling is probed again.
        remaining_cool_down: u64,
    },
    /// Compiling this signature failed (now or earlier).
    CompileFailed(Arc<CompileFailure>),
    /// Another call is compiling this signature and the cache is configured
    /// with [`InFlightPolicy::Interpret`](crate::InFlightPolicy::Interpret).
    CompileInFlight,
}

impl fmt::Display for FallbackReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FallbackReason::NotAdmitted { miss, refusal } => {
                write!(f, "not admitted to the full cache: {refusal} ({miss})")
            }
            FallbackReason::Thrashing {
                miss,
                remaining_cool_down,
            } => write!(
                f,
                "the function recompiles too often ({miss}); compiling resumes in \
                 {remaining_cool_down} calls"
            ),
            // The failure with its causes: a reason is not an error, so
            // nothing else would show them.
            FallbackReason::CompileFailed(failure) => write!(f, "{}", ErrorChain(&**failure)),
            FallbackReason::CompileInFlight => {
                f.write_str("another call is compiling this signature")
            }
            FallbackReason::CompileQueued => {
                f.write_str("interpreted while the signature compiles in the background")
            }
            FallbackReason::CompileQueueFull => f.write_str(
                "the background compile queue is full (CacheConfig::compile_queue); a later call \
                 queues the compile again",
            ),
        }
    }
}

/// The cache's decision for one call.
#[must_use = "the call must run the executable or the interpreter"]
#[expect(
    clippy::exhaustive_enums,
    reason = "the cache's decision for a call: run the executable or interpret; the caller must \
        handle each, and a third would be a new contract that must not fall into a `_` arm"
)]
pub enum Dispatch<E> {
    /// Run this executable. Holding the `Arc` keeps it alive even if the
    /// cache evicts it meanwhile.
    Compiled {
        /// The executable.
        exe: Arc<E>,
        /// Where it came from.
        origin: Origin,
    },
    /// Run the interpreter.
    Interpret {
        /// Why.
        reason: FallbackReason,
    },
}

impl<E> fmt::Debug for Dispatch<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dispatch::Compiled { origin, .. } => f
                .debug_struct("Compiled")
                .field("origin", origin)
                .finish_non_exhaustive(),
            Dispatch::Interpret { reason } => {
                f.debug_struct("Interpret").field("reason", reason).finish()
            }
        }
    }
}

/// How a call's results were produced: by compiled code (and where that
/// came from), or by the interpreter (and why). What
/// [`JitCache::call`](crate::JitCache::call) reports, and what the layers
/// above report for their calls.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Provenance {
    /// It ran compiled code.
    Compiled(Origin),
    /// It ran in the interpreter.
    Interpreted(FallbackReason),
}

impl Provenance {
    /// True when compiled code produced the results.
    pub fn is_compiled(&self) -> bool {
        matches!(self, Provenance::Compiled(_))
    }

    /// True when the compiled code was already cached.
    pub fn is_hit(&self) -> bool {
        matches!(self, Provenance::Compiled(Origin::Hit))
    }

    /// Why the call was interpreted, if it was.
    pub fn fallback(&self) -> Option<&FallbackReason> {
        match self {
            Provenance::Interpreted(reason) => Some(reason),
            Provenance::Compiled(_) => None,
        }
    }
}

impl fmt::Display for Provenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Provenance::Compiled(Origin::Hit) => f.write_str("compiled (cache hit)"),
            Provenance::Compiled(Origin::CompiledNow { miss }) => {
                write!(f, "compiled by this call ({miss})")
            }
            Provenance::Compiled(Origin::CompiledByOtherCall) => {
                f.write_str("compiled by another call, which this one waited for")
            }
            Provenance::Interpreted(reason) => write!(f, "interpreted: {reason}"),
        }
    }
}
