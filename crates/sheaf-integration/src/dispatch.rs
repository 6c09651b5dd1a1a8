//! What a call comes back with: compiled results (with the variant's
//! metadata), or "interpret this yourself" with the reason, and how the
//! convenience [`JitRuntime::call`](crate::JitRuntime::call) reports both.
//!
//! How results were produced and why a call is interpreted are the cache's
//! own types, re-exported: [`Provenance`], [`Origin`] and
//! [`FallbackReason`]; a reason the cache adds reaches callers as it is.

use std::any::Any;

use std::marker::PhantomData;
use std::sync::Arc;

use jit_cache::{FallbackReason, Provenance};

use crate::error::JitError;
use crate::value::Value;
use crate::variant::Variant;

/// Results of compiled code, with the variant that produced them.
#[derive(Debug)]
pub struct Compiled<M = ()> {
    /// The results, in the structure the lowering declared (or side by
    /// side): device tensors, to pass to the next call as they are or read
    /// with [`Value::to_host`].
    pub outputs: Vec<Value>,
    /// Hit, compiled now, or compiled by another call
    /// ([`Provenance::Compiled`]).
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
    /// The caller must run the call in its interpreter, for this reason
    /// ([`VariantError::of_fallback`](crate::VariantError::of_fallback) gives
    /// a failed compile's error).
    Interpret(FallbackReason),
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

    pub(crate) fn interpreted(outputs: Vec<Value>, fallback: FallbackReason) -> Self {
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
    #[error("interpreting `{function}` failed ({fallback})")]
    Interpreter {
        /// The function.
        function: String,
        /// Why it ran in the interpreter.
        fallback: FallbackReason,
        /// The interpreter's own error.
        #[source]
        source: E,
    },
}
