//! Errors of the JIT runtime. Each says what failed at its own level and
//! keeps what caused it whole, as its `source`, so callers can match on the
//! compiler's diagnostics or IREE's status code instead of parsing text;
//! show one with [`ErrorChain`](crate::ErrorChain) to see every level once.

use std::path::PathBuf;
use std::sync::Arc;

use iree_safe::compiler::{CompileError, CompileTarget};
use jit_cache::FallbackReason;

use crate::bundle::BundleError;
use crate::mlir::MlirError;

/// What can go wrong in a JIT call. Compile failures are not errors: the
/// call runs in the interpreter and says so in its
/// [`Provenance`](crate::Provenance), whose
/// [`FallbackReason::CompileFailed`](crate::FallbackReason::CompileFailed)
/// holds the [`VariantError`] ([`VariantError::of_fallback`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JitError {
    /// The IREE runtime failed, e.g. a compiled artifact rejected an
    /// argument's shape. Never turned into a silent fallback.
    #[error(transparent)]
    Runtime(#[from] iree_safe::Error),
    /// Setting up the compiler failed.
    #[error(transparent)]
    Compiler(#[from] CompileError),
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The disk cache's folder cannot be used: another user could write it
    /// (and plant code), or it cannot be created. Fix the folder as the
    /// source says, choose another (`SHEAF_JIT_CACHE_DIR`), or turn the
    /// disk cache off (`SHEAF_JIT_DISK_CACHE=off`).
    #[error(
        "the disk cache cannot be used; fix its folder, choose another \
         (SHEAF_JIT_CACHE_DIR) or turn it off (SHEAF_JIT_DISK_CACHE=off)"
    )]
    DiskCache(#[from] jit_store::StoreError),
    /// The remote artifact cache cannot be set up: its address is not
    /// usable (`SHEAF_JIT_REMOTE_CACHE`). Nothing is contacted at start: an
    /// unreachable server is not an error (calls compile locally).
    #[error("the remote artifact cache cannot be set up; fix SHEAF_JIT_REMOTE_CACHE or unset it")]
    #[cfg(feature = "remote-cache")]
    RemoteCache(#[from] jit_store::RemoteError),
    /// The remote artifact cache's secret file cannot be used: missing,
    /// not 32 bytes, or readable or writable by others.
    #[error(
        "the remote artifact cache's secret cannot be used; fix it or choose another file \
         (SHEAF_JIT_REMOTE_SECRET_FILE)"
    )]
    RemoteSecret(#[source] jit_store::StoreError),
    /// The signing key or a file of trusted keys
    /// ([`JitConfig::trust`](crate::JitConfig::trust)) cannot be used:
    /// missing, not a key, or open to others.
    #[error(
        "the signing key or trusted keys cannot be used; fix the file or choose another \
         (SHEAF_JIT_SIGNING_KEY_FILE, SHEAF_JIT_TRUSTED_KEYS)"
    )]
    Keys(#[source] jit_store::StoreError),
    /// An artifact bundle cannot serve this program: a folder or file of it
    /// that another user could change, a link, a manifest that is not a
    /// regular file of at most 16 MiB or that this program cannot read, or
    /// a bundle built for another IREE runtime.
    #[error("cannot serve the artifact bundle {}", path.display())]
    Bundle {
        /// The bundle's folder.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: BundleError,
    },
    /// [`JitRuntime::export_artifacts`](crate::JitRuntime::export_artifacts)
    /// could not write the bundle.
    #[error("cannot export an artifact bundle to {}", path.display())]
    Export {
        /// The bundle's folder.
        path: PathBuf,
        /// What failed.
        #[source]
        source: BundleError,
    },
    /// Compiling ahead ([`JitRuntime::precompile`](crate::JitRuntime::precompile))
    /// failed: a lowering, the compiler or the runtime refused the batch.
    #[error(transparent)]
    Precompile(#[from] VariantError),
    /// [`JitRuntime::provide_artifact`](crate::JitRuntime::provide_artifact)
    /// refused a module: nothing of it was cached. (Boxed: the other
    /// variants are smaller.)
    #[error("cannot use the compiled artifact provided")]
    Provide(#[source] Box<ProvideError>),
    /// A value this layer cannot represent.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A broken internal invariant (a bug in this crate).
    #[error("internal error: {0}")]
    Internal(String),
}

/// Why one signature of a function could not be compiled: its lowering, the
/// compiler, or the runtime loading the artifact failed. `signature` is the
/// cache's rendering of the signature (`(f32[1,5]) {temperature=0.5}`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VariantError {
    /// The function's lowering refused the signature.
    #[error("cannot lower `{function}` for {signature}")]
    Lowering {
        /// The function.
        function: String,
        /// The signature.
        signature: String,
        /// The lowering's own error.
        #[source]
        source: LoweringError,
    },
    /// The compiler failed. Its diagnostics (`source.diagnostics()`) name
    /// the source `<function><signature>`, with line and column.
    #[error("cannot compile `{function}` for {signature}")]
    Compile {
        /// The function.
        function: String,
        /// The signature.
        signature: String,
        /// The compiler's error, with its diagnostics.
        #[source]
        source: CompileError,
    },
    /// No compiler could be set up (none found, or the library does not
    /// load); artifacts on disk or in a bundle still serve their signatures.
    #[error("no IREE compiler to compile `{function}` for {signature}")]
    NoCompiler {
        /// The function.
        function: String,
        /// The signature.
        signature: String,
        /// Why the compiler could not be set up (the same error for every
        /// signature of the process). The `source()` is this `Arc`, which
        /// displays as the `CompileError` and has its sources: downcast it to
        /// `Arc<CompileError>`.
        #[source]
        source: Arc<CompileError>,
    },
    /// The runtime refused the compiled artifact.
    #[error("the IREE runtime refused the artifact of `{function}` for {signature}")]
    Load {
        /// The function.
        function: String,
        /// The signature.
        signature: String,
        /// IREE's error.
        #[source]
        source: iree_safe::Error,
    },
}

impl VariantError {
    /// The error of a failed compile behind `reason`, when the call was
    /// interpreted because compiling its signature failed in this crate's
    /// pipeline (not in a panic).
    pub fn of_fallback(reason: &FallbackReason) -> Option<&VariantError> {
        match reason {
            FallbackReason::CompileFailed(failure) => failure.backend_error()?.downcast_ref(),
            _ => None,
        }
    }
}

/// An invalid setting: the environment variable or configuration field
/// (`disk.max_bytes`), its value and what it may be; or a cache policy that
/// cannot work.
///
/// The one configuration error of this crate: what [`JitConfigBuilder::build`](crate::JitConfigBuilder::build),
/// [`JitConfig::from_env`](crate::JitConfig::from_env) and
/// [`JitRuntime::new`](crate::JitRuntime::new) (as [`JitError::Config`])
/// return. The cache policy's own error, `jit_cache::ConfigError`, is
/// wrapped whole in [`ConfigError::Cache`] and re-exported as
/// [`CacheConfigError`](crate::settings::CacheConfigError), so it can be matched
/// without depending on `jit-cache`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A setting or variable with a value it does not take.
    #[error("{setting}={value} is not valid: expected {expected}")]
    Invalid {
        /// The `SHEAF_JIT_*` variable or the configuration field.
        setting: &'static str,
        /// The value given.
        value: String,
        /// What it may be.
        expected: String,
    },
    /// The cache policy cannot work (names the
    /// [`CacheConfig`](crate::settings::CacheConfig) field).
    #[error(transparent)]
    Cache(#[from] jit_cache::ConfigError),
    /// A remote artifact cache is configured without a shared secret or
    /// signatures to authenticate its entries (without them, whoever can
    /// write the server could run code in this process).
    #[error(
        "a remote artifact cache is configured, but nothing authenticates its entries: set \
         SHEAF_JIT_REMOTE_SECRET_FILE to a file of 32 random bytes that only you can read \
         (`(umask 077; head -c 32 /dev/urandom > FILE)`, the same file on every machine), or \
         sign them: SHEAF_JIT_SIGNING_KEY_FILE on builders, SHEAF_JIT_TRUSTED_KEYS on readers \
         (docs/cluster.md, \"CI builds, everyone reads\"); or set them in RemoteSettings \
         (JitConfigBuilder::remote); or unset SHEAF_JIT_REMOTE_CACHE"
    )]
    RemoteSecretMissing,
    /// A setting asks for a part of the crate that this build leaves out:
    /// the disk cache without the `disk-cache` feature, the remote cache
    /// without `remote-cache`, the in-process compiler without
    /// `in-process-compiler`.
    #[error(
        "{setting} asks for the {part}, which this build of sheaf-integration leaves out: \
         enable its `{feature}` cargo feature, or unset {setting}"
    )]
    FeatureDisabled {
        /// The `SHEAF_JIT_*` variable or the configuration field.
        setting: &'static str,
        /// What it asks for, in words ("disk cache").
        part: &'static str,
        /// The cargo feature that builds it.
        feature: &'static str,
    },
}

impl ConfigError {
    pub(crate) fn invalid(
        setting: &'static str,
        value: String,
        expected: impl Into<String>,
    ) -> Self {
        ConfigError::Invalid {
            setting,
            value,
            expected: expected.into(),
        }
    }
}

/// Why a lowering refused a signature. The call then runs in the
/// interpreter, with this reason in its provenance.
///
/// Make one from a message (`"softmax needs rank >= 1".into()`,
/// [`LoweringError::new`]), from a message and the error behind it
/// ([`LoweringError::with_source`]), or with `?` from an [`mlir`](crate::mlir)
/// helper's [`MlirError`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoweringError {
    /// The lowering refused the signature, saying why.
    #[error("{message}")]
    Refused {
        /// Why, in the lowering's words.
        message: String,
        /// The lowering's own error behind the refusal, if any.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// An [`mlir`](crate::mlir) helper cannot write a type or op for the
    /// signature (an element type StableHLO lacks, a dim out of range).
    #[error(transparent)]
    Mlir(#[from] MlirError),
}

impl LoweringError {
    /// A refusal described by `message` ("`softmax` needs rank >= 1").
    pub fn new(message: impl Into<String>) -> Self {
        LoweringError::Refused {
            message: message.into(),
            source: None,
        }
    }

    /// A refusal caused by the lowering's own error, kept as the source.
    pub fn with_source(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        LoweringError::Refused {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }
}

impl From<String> for LoweringError {
    fn from(message: String) -> Self {
        LoweringError::new(message)
    }
}

impl From<&str> for LoweringError {
    fn from(message: &str) -> Self {
        LoweringError::new(message)
    }
}

/// Why a provided module could not be used. Nothing of it is cached then.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProvideError {
    /// The module was compiled for another target than the code this
    /// runtime's device runs.
    #[error(
        "the artifact was compiled for {artifact}, but this runtime's device `{device}` runs \
         {runtime} code: compile it for {runtime}, or provide it to a runtime on a device \
         that runs {artifact} code"
    )]
    Target {
        /// What the caller says it was compiled for.
        artifact: CompileTarget,
        /// What this runtime's code is compiled for.
        runtime: CompileTarget,
        /// The device (its driver or URI).
        device: String,
    },
    /// The IREE runtime refused the module.
    #[error("the IREE runtime refused the artifact")]
    Load(#[source] iree_safe::Error),
    /// The module exports no function of that name.
    #[error("the artifact exports no function `{entry}` (it exports: {})", exports.join(", "))]
    NoEntry {
        /// The name asked for.
        entry: String,
        /// What it exports.
        exports: Vec<String>,
    },
    /// The function's declaration does not take the signature (or return
    /// the structure) it is said to serve.
    #[error("`{entry}` cannot serve `{function}{signature}`: {why}")]
    Declaration {
        /// The exported function.
        entry: String,
        /// The function it was to serve.
        function: String,
        /// The signature it was to serve.
        signature: String,
        /// What its declaration says instead.
        why: String,
    },
}
