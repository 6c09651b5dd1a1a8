//! What a call comes back with: compiled results (with the variant's
//! metadata), or "interpret this yourself" with the reason, and how the
//! convenience [`JitRuntime::call`](crate::JitRuntime::call) reports both.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use jit_cache::{CompileFailure, FallbackReason, Refusal};

use crate::error::{JitError, VariantError};
use crate::value::Value;
use crate::variant::Variant;

/// How a call's results were produced.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Provenance {
    /// Compiled code already in the cache.
    CacheHit,
    /// Compiled code that this call compiled (or loaded from disk).
    CompiledNow,
    /// Compiled code that another call was compiling: this call waited for
    /// it.
    CompiledByOtherCall,
    /// The interpreter, for this reason.
    Interpreted(Fallback),
}

impl Provenance {
    /// True when compiled code produced the results.
    pub fn is_compiled(&self) -> bool {
        !matches!(self, Provenance::Interpreted(_))
    }
}

/// Why a call runs in the interpreter.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fallback {
    /// The function's cache is full and this signature was not admitted
    /// ([`CachePolicy::Adaptive`](crate::CachePolicy::Adaptive)): it is rare
    /// next to the cached ones.
    NotAdmitted(Refusal),
    /// The function recompiles too often (thrash fallback): new signatures
    /// run in the interpreter for a while; cached ones stay compiled.
    Thrashing,
    /// Compiling this signature failed, now or earlier. The failure is kept
    /// whole: [`Fallback::variant_error`] gives the lowering's error, the
    /// compiler's diagnostics or the runtime's refusal.
    CompileFailed(Arc<CompileFailure>),
    /// Another call is compiling this signature and the cache is configured
    /// not to wait (or compiles in the background).
    CompileInFlight,
    /// This call queued the signature's compile on the background pool
    /// ([`CompileMode::Background`](crate::CompileMode::Background)); later
    /// calls run compiled once it is done.
    CompilingInBackground,
    /// The background compile queue was full (`CacheConfig::compile_queue`);
    /// a later call queues the compile again.
    CompileQueueFull,
}

impl Fallback {
    pub(crate) fn from_reason(reason: &FallbackReason) -> Fallback {
        match reason {
            FallbackReason::NotAdmitted { refusal, .. } => Fallback::NotAdmitted(*refusal),
            FallbackReason::Thrashing { .. } => Fallback::Thrashing,
            FallbackReason::CompileFailed(failure) => Fallback::CompileFailed(Arc::clone(failure)),
            FallbackReason::CompileInFlight => Fallback::CompileInFlight,
            FallbackReason::CompileQueued => Fallback::CompilingInBackground,
            FallbackReason::CompileQueueFull => Fallback::CompileQueueFull,
            // A reason added to `jit_cache` and not yet known here: the
            // closest one that promises nothing about the signature.
            _ => Fallback::CompileInFlight,
        }
    }

    /// Why the compile failed, when it did and the failure came from this
    /// crate's pipeline (not from a panic).
    pub fn variant_error(&self) -> Option<&VariantError> {
        match self {
            Fallback::CompileFailed(failure) => failure.backend_error()?.downcast_ref(),
            _ => None,
        }
    }
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fallback::NotAdmitted(refusal) => {
                write!(f, "not admitted to the full cache: {refusal}")
            }
            Fallback::Thrashing => {
                f.write_str("the function recompiles too often (thrash fallback)")
            }
            Fallback::CompileFailed(failure) => write!(f, "the compile failed: {failure}"),
            Fallback::CompileInFlight => f.write_str("another call is compiling this signature"),
            Fallback::CompilingInBackground => {
                f.write_str("interpreted while the signature compiles in the background")
            }
            Fallback::CompileQueueFull => f.write_str("the background compile queue is full"),
        }
    }
}

/// Results of compiled code, with the variant that produced them.
#[derive(Debug)]
pub struct Compiled<M = ()> {
    /// The results, in the structure the lowering declared (or side by
    /// side): device tensors, to pass to the next call as they are or read
    /// with [`Value::to_host`].
    pub outputs: Vec<Value>,
    /// Hit, compiled now, or compiled by another call.
    pub provenance: Provenance,
    variant: Arc<Variant>,
    metadata: PhantomData<fn() -> M>,
}

impl<M: Any> Compiled<M> {
    pub(crate) fn new(outputs: Vec<Value>, provenance: Provenance, variant: Arc<Variant>) -> Self {
        Compiled {
            outputs,
            provenance,
            variant,
            metadata: PhantomData,
        }
    }

    /// The lowering's metadata of the variant that ran.
    pub fn metadata(&self) -> &M {
        self.variant
            .metadata
            .downcast_ref()
            .expect("a function's variants carry its metadata type (it is part of its identity)")
    }

    /// The loaded module that ran (shared by the variants of a
    /// [`precompile`](crate::JitRuntime::precompile) batch).
    pub fn module(&self) -> &iree_safe::Module {
        self.variant.entry.module()
    }
}

/// The outcome of [`JitRuntime::dispatch`](crate::JitRuntime::dispatch).
#[derive(Debug)]
#[must_use = "an Interpret outcome means the caller must run its interpreter"]
pub enum Dispatched<M = ()> {
    /// Compiled code ran.
    Compiled(Compiled<M>),
    /// The caller must run the call in its interpreter, for this reason.
    Interpret(Fallback),
}

/// Results of [`JitRuntime::call`](crate::JitRuntime::call): compiled or
/// interpreted, and how.
#[derive(Debug)]
pub struct CallResult<M = ()> {
    /// The results: device tensors from compiled code, whatever the
    /// interpreter returned otherwise.
    pub outputs: Vec<Value>,
    /// How they were produced.
    pub provenance: Provenance,
    variant: Option<Arc<Variant>>,
    metadata: PhantomData<fn() -> M>,
}

impl<M: Any> CallResult<M> {
    pub(crate) fn compiled(compiled: Compiled<M>) -> Self {
        CallResult {
            outputs: compiled.outputs,
            provenance: compiled.provenance,
            variant: Some(compiled.variant),
            metadata: PhantomData,
        }
    }

    pub(crate) fn interpreted(outputs: Vec<Value>, fallback: Fallback) -> Self {
        CallResult {
            outputs,
            provenance: Provenance::Interpreted(fallback),
            variant: None,
            metadata: PhantomData,
        }
    }

    /// The lowering's metadata of the variant that ran, when compiled code
    /// ran.
    pub fn metadata(&self) -> Option<&M> {
        self.variant.as_ref()?.metadata.downcast_ref()
    }

    /// The loaded module that ran, when compiled code ran (shared by the
    /// variants of a [`precompile`](crate::JitRuntime::precompile) batch).
    pub fn module(&self) -> Option<&iree_safe::Module> {
        Some(self.variant.as_ref()?.entry.module())
    }
}

/// Why [`JitRuntime::call`](crate::JitRuntime::call) failed: the runtime, or
/// the caller's interpreter (with the reason it had to run, such as the
/// lowering's refusal).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError<E> {
    /// The runtime failed.
    #[error(transparent)]
    Jit(#[from] JitError),
    /// The interpreter failed.
    #[error("interpreting `{function}` ({fallback}): {source}")]
    Interpreter {
        /// The function.
        function: String,
        /// Why it ran in the interpreter.
        fallback: Fallback,
        /// The interpreter's own error.
        #[source]
        source: E,
    },
}
