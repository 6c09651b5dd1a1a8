//! What a call comes back with: compiled results (with the variant's
//! metadata), or "interpret this yourself" with the reason, and how the
//! convenience [`JitRuntime::call`](crate::JitRuntime::call) reports both.
//!
//! How results were produced and why a call is interpreted are the cache's
//! own types, re-exported: [`Provenance`], [`Origin`] and
//! [`FallbackReason`]; a reason the cache adds reaches callers as it is.

use std::sync::Arc;

use jit_cache::{FallbackReason, Provenance};

use crate::compile::variant::{ArtifactSource, Variant};
use crate::error::JitError;
use crate::value::Value;

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
    metadata: Arc<M>,
}

impl<M: Send + Sync + 'static> Compiled<M> {
    /// The results of `variant`, whose metadata must be an `M` (or this is
    /// [`JitError::Internal`]: see [`metadata`](Self::metadata)).
    pub(crate) fn new(
        outputs: Vec<Value>,
        provenance: Provenance,
        variant: Arc<Variant>,
    ) -> Result<Self, JitError> {
        let metadata = Arc::clone(&variant.metadata).downcast::<M>().map_err(|_| {
            JitError::Internal(format!(
                "a variant's metadata is not the function's `{}`",
                std::any::type_name::<M>()
            ))
        })?;
        Ok(Compiled {
            outputs,
            provenance,
            variant,
            metadata,
        })
    }
}

impl<M> Compiled<M> {
    /// The lowering's metadata of the variant that ran.
    ///
    /// Never fails: the cache erases the metadata's type, but a function's
    /// identity includes `M` exactly (its [`FunctionId`](jit_cache::FunctionId)
    /// is [tagged](jit_cache::FunctionId::with_type_tag) with `M`'s
    /// `TypeId`), so a `JitFunction<M>` only ever reaches variants its own
    /// lowering made, even beside a function of the same name and
    /// definition whose metadata is another type. The metadata was checked
    /// to be an `M` once, when the call returned.
    pub fn metadata(&self) -> &M {
        &self.metadata
    }

    /// The loaded module that ran (shared by the variants of a
    /// [`precompile`](crate::JitRuntime::precompile) batch).
    pub fn module(&self) -> &iree_safe::Module {
        self.variant.entry.module()
    }

    /// Where the artifact of the variant that ran came from.
    pub fn source(&self) -> ArtifactSource {
        self.variant.source
    }

    /// The device the variant ran on, as it was opened: a driver name
    /// (`local-sync`, `vulkan`) or a device URI (`vulkan://GPU-…`, what
    /// `auto` opens). A signature that could not run on the GPU and was
    /// compiled for the CPU fallback says so here.
    pub fn device(&self) -> &str {
        &self.variant.device
    }

    /// The outputs and the variant's metadata, without copying either.
    pub fn into_parts(self) -> (Vec<Value>, Arc<M>) {
        (self.outputs, self.metadata)
    }
}

/// The outcome of [`JitRuntime::dispatch`](crate::JitRuntime::dispatch).
#[derive(Debug)]
#[must_use = "an Interpret outcome means the caller must run its interpreter"]
#[expect(
    clippy::exhaustive_enums,
    reason = "compiled code ran, or the caller must interpret: the caller must handle each \
        (`#[must_use]`), and a third outcome must not fall into a `_` arm"
)]
pub enum Dispatched<M = ()> {
    /// Compiled code ran.
    Compiled(Compiled<M>),
    /// The caller must run the call in its interpreter, for this reason
    /// ([`VariantError::of_fallback`](crate::compile::lowering::VariantError::of_fallback) gives
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
    /// The variant that ran and its metadata, when compiled code ran.
    variant: Option<(Arc<Variant>, Arc<M>)>,
}

impl<M> CallResult<M> {
    pub(crate) fn compiled(compiled: Compiled<M>) -> Self {
        CallResult {
            outputs: compiled.outputs,
            provenance: compiled.provenance,
            variant: Some((compiled.variant, compiled.metadata)),
        }
    }

    pub(crate) fn interpreted(outputs: Vec<Value>, fallback: FallbackReason) -> Self {
        CallResult {
            outputs,
            provenance: Provenance::Interpreted(fallback),
            variant: None,
        }
    }

    /// The lowering's metadata of the variant that ran, when compiled code
    /// ran (see [`Compiled::metadata`]).
    pub fn metadata(&self) -> Option<&M> {
        Some(&self.variant.as_ref()?.1)
    }

    /// The loaded module that ran, when compiled code ran (shared by the
    /// variants of a [`precompile`](crate::JitRuntime::precompile) batch).
    pub fn module(&self) -> Option<&iree_safe::Module> {
        Some(self.variant.as_ref()?.0.entry.module())
    }

    /// Where the artifact of the variant that ran came from, when compiled
    /// code ran.
    pub fn source(&self) -> Option<ArtifactSource> {
        Some(self.variant.as_ref()?.0.source)
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
