//! What Sheaf knows about a function: its identity, how to lower it, and how
//! to interpret it.

use std::fmt;
use std::sync::Arc;

use jit_cache::{CapturedScalar, FunctionId, Signature};

use crate::tensor::HostTensor;

/// The name of the entry function every lowering must define
/// (`func.func @main(...)`).
pub const ENTRY_POINT: &str = "main";

/// Lowers a function for one signature to MLIR text (StableHLO), whose
/// entry function is [`ENTRY_POINT`]. The signature carries the argument
/// dtypes and shapes and the captured scalars to bake in.
pub type LowerFn = dyn Fn(&Signature) -> Result<String, String> + Send + Sync;

/// Runs a function in Sheaf's interpreter on host arrays.
pub type InterpretFn =
    dyn Fn(&[HostTensor], &[CapturedScalar]) -> Result<Vec<HostTensor>, String> + Send + Sync;

/// A function Sheaf may run compiled. Cheap to clone.
///
/// Its identity is its name plus a hash of its definition, so a redefined
/// function never reuses code compiled for the old definition.
#[derive(Clone)]
pub struct JitFunction {
    id: FunctionId,
    lower: Arc<LowerFn>,
    interpret: Arc<InterpretFn>,
}

impl JitFunction {
    /// A function called `name` whose definition (source text, or any
    /// canonical form) is `definition`.
    pub fn new(
        name: &str,
        definition: &str,
        lower: impl Fn(&Signature) -> Result<String, String> + Send + Sync + 'static,
        interpret: impl Fn(&[HostTensor], &[CapturedScalar]) -> Result<Vec<HostTensor>, String>
            + Send
            + Sync
            + 'static,
    ) -> JitFunction {
        JitFunction {
            id: FunctionId::for_definition(name, definition),
            lower: Arc::new(lower),
            interpret: Arc::new(interpret),
        }
    }

    /// The cache identity (name + definition hash).
    pub fn id(&self) -> &FunctionId {
        &self.id
    }

    /// The function's name.
    pub fn name(&self) -> &str {
        self.id.name()
    }

    /// The MLIR this function lowers to for `signature`.
    pub fn lower(&self, signature: &Signature) -> Result<String, String> {
        (self.lower)(signature)
    }

    /// Runs the function in the interpreter, bypassing the JIT (what a
    /// fallback call does).
    pub fn interpret(
        &self,
        args: &[HostTensor],
        captured: &[CapturedScalar],
    ) -> Result<Vec<HostTensor>, String> {
        (self.interpret)(args, captured)
    }
}

impl fmt::Debug for JitFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JitFunction")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
