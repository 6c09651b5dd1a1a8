//! Compiled modules the application provides
//! ([`JitRuntime::provide_artifact`](crate::JitRuntime::provide_artifact)):
//! a `.vmfb` it built itself (with its own `iree-compile`, its
//! own flags, ahead of time), served by the cache like the runtime's own
//! variants, each exported function under the signature it serves.
//!
//! A `.vmfb` is native code, so only bytes someone vouched for load: the
//! artifact comes as a [`TrustedVmfb`](iree_safe::TrustedVmfb), which safe
//! code gets only from the compiler (`iree_safe::compiler::Artifact::vmfb`)
//! or from the `unsafe` constructors (`TrustedVmfb::new_unchecked`,
//! `Artifact::from_trusted_bytes`). What it claims to serve is checked
//! against each function's declaration (`declaration.rs`, as for bundles)
//! before anything is cached.

use jit_cache::{Layout, Signature};

use crate::compile::function::JitFunction;

/// One function a module exports, and the calls it serves: those of
/// `function` with `signature` (its dynamic dims, if any, serve every size),
/// with results in the structure `outputs` (side by side without one) and
/// `metadata` handed back on every call, as a lowering's would be.
///
/// ```
/// use sheaf_integration::{artifacts::ProvidedFunction, lowering::Signature, reference, DType};
///
/// let sigmoid = reference::sigmoid();
/// let signature = Signature::builder().arg(DType::F32, &[4]).build();
/// let provided = ProvidedFunction::new(&sigmoid, "sigmoid_f32_4", signature);
/// assert_eq!(provided.entry(), "sigmoid_f32_4");
/// ```
#[derive(Debug)]
pub struct ProvidedFunction<'a, M = ()> {
    pub(crate) function: &'a JitFunction<M>,
    pub(crate) entry: String,
    pub(crate) signature: Signature,
    pub(crate) outputs: Option<Layout>,
    pub(crate) metadata: M,
}

impl<'a> ProvidedFunction<'a> {
    /// The module's function `entry` serves `function`'s calls with
    /// `signature`; results side by side, no metadata.
    pub fn new(function: &'a JitFunction, entry: impl Into<String>, signature: Signature) -> Self {
        ProvidedFunction::with_metadata(function, entry, signature, ())
    }
}

impl<'a, M> ProvidedFunction<'a, M> {
    /// The module's function `entry` serves `function`'s calls with
    /// `signature`, and each such call hands back `metadata` (what the
    /// function's lowering would have returned).
    pub fn with_metadata(
        function: &'a JitFunction<M>,
        entry: impl Into<String>,
        signature: Signature,
        metadata: M,
    ) -> Self {
        ProvidedFunction {
            function,
            entry: entry.into(),
            signature,
            outputs: None,
            metadata,
        }
    }

    /// The results nest as `outputs` (tensor leaves only; checked against
    /// the entry's declared result count).
    pub fn with_outputs(mut self, outputs: Layout) -> Self {
        self.outputs = Some(outputs);
        self
    }

    /// The exported function's name.
    pub fn entry(&self) -> &str {
        &self.entry
    }
}

/// What [`JitRuntime::provide_artifact`](crate::JitRuntime::provide_artifact)
/// did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProvidedSummary {
    /// Functions of the module checked and handed to the cache.
    pub provided: usize,
    /// Of those, the ones cached (the others found their function's cache
    /// full of entries used more, or the signature cached already).
    pub cached: usize,
}
