//! Errors of the JIT runtime.

/// What can go wrong in a JIT call. Compile failures are not errors: the
/// call runs in the interpreter and says so in its
/// [`Provenance`](crate::Provenance).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JitError {
    /// The IREE runtime failed, e.g. a compiled artifact rejected an
    /// argument's shape. Never turned into a silent fallback.
    #[error("IREE runtime: {0}")]
    Runtime(#[from] iree_safe::Error),
    /// Setting up the compiler failed.
    #[error("IREE compiler: {0}")]
    Compiler(#[from] iree_safe::compiler::CompileError),
    /// The interpreter callback failed.
    #[error("interpreter, in `{function}`: {message}")]
    Interpreter {
        /// The function being interpreted.
        function: String,
        /// The callback's message.
        message: String,
    },
    /// A setting is invalid (names the setting or environment variable).
    #[error("configuration: {0}")]
    Config(String),
    /// A value this layer cannot represent.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A broken internal invariant (a bug in this crate).
    #[error("internal error: {0}")]
    Internal(String),
}
