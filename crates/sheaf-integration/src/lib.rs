//! The JIT runtime Sheaf calls to run its hot functions compiled by IREE,
//! with memory that stays flat under shape polymorphism.
//!
//! One [`JitRuntime`] per process holds one shared IREE runtime (each
//! compiled artifact is a small module in it, unloaded on eviction), the
//! compiler (by default `iree-compile` in a child process when one is
//! found, so that neither a compiler crash nor an exit during a compile can
//! take the caller down; else, or on request, the in-process library,
//! loaded on the first real compile) behind a persistent disk cache
//! (`jit-store`) and optional artifact bundles, an upload cache for reused
//! host arrays, and the bounded cache policy of `jit-cache` (per-function
//! caches keyed by shapes, dtypes, the arguments' structure and the scalars
//! baked into the code, which admit only recurring signatures at capacity
//! and interpret the rare ones; global budgets).
//!
//! Sheaf supplies, per function, a [`JitFunction`]: its name and definition
//! hash (so a redefinition never reuses stale code) and a lowering to
//! StableHLO for a given signature, which may return per-variant metadata.
//! Each call goes through [`JitRuntime::dispatch`], which runs compiled code
//! or tells the caller to run its own interpreter, with its own state.
//! [`reference`](mod@reference) has three worked examples.
//!
//! ```no_run
//! use ndarray::{ArrayD, IxDyn};
//! use sheaf_integration::{reference, Dispatched, JitConfig, JitRuntime, Value};
//!
//! let jit = JitRuntime::new(JitConfig::from_env()?)?;
//! let softmax = reference::softmax();
//! let x = Value::host(ArrayD::from_shape_vec(IxDyn(&[1, 3]), vec![1.0f32, 2.0, 3.0])?);
//! let t = [reference::temperature(0.5)];
//!
//! // Captured scalars are part of the key: a new temperature compiles anew
//! // (by default in the background, while this call is interpreted).
//! match jit.dispatch(&softmax, &[x.clone()], &t)? {
//!     Dispatched::Compiled(compiled) => {
//!         println!("{:?}", compiled.provenance);
//!         // Device outputs feed the next call without a host copy.
//!         let again = jit.call(&softmax, &compiled.outputs, &t, |args, _, _| {
//!             reference::interpret_softmax(args, 0.5)
//!         })?;
//!         println!("{:?}", again.outputs[0].to_host()?);
//!     }
//!     Dispatched::Interpret(why) => {
//!         println!("interpreting: {why}");
//!         println!("{:?}", reference::interpret_softmax(&[x], 0.5)?);
//!     }
//! }
//! println!("{}", jit.profile());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Crate features
//!
//! - `disk-cache` (default): the persistent artifact cache on disk
//!   (`SHEAF_JIT_CACHE_DIR`): compiled artifacts, what the cache policy
//!   learned and the compiler's `--version`, kept between processes.
//!   Without it the runtime caches in memory only.
//! - `remote-cache` (default): the artifact cache a cluster shares
//!   (`SHEAF_JIT_REMOTE_CACHE`): Redis or a shared folder, compile leases,
//!   a circuit breaker and a publisher thread.
//! - `remote-cache-tls` (default): TLS for the remote cache (`rediss://`,
//!   `SHEAF_JIT_REMOTE_CA`): rustls on ring.
//! - `in-process-compiler` (default): the in-process compiler
//!   (iree-safe's feature of the same name). Without it every compile runs
//!   `iree-compile`.
//! - `platform-gpu` (default), `vulkan`, `cuda`, `metal`: the runtime's HAL
//!   drivers (iree-runtime-sys's features of the same names): the target's
//!   GPU drivers (Vulkan, and CUDA where its headers are found, on Linux;
//!   Metal on macOS), or that driver, required. The CPU drivers are always
//!   built.
//! - `serde`: `serde::Serialize` for what the runtime reports (the profile,
//!   the caches' statistics, `CachedVariant`).
//! - `cli`: the `sheaf-jit-cache` command, which shows, checks and trims
//!   the disk cache and shows and checks bundles (`cargo install
//!   sheaf-integration --features cli`).
//! - `trace-subscriber`: deprecated, does nothing (the stderr log,
//!   `SHEAF_JIT_LOG`, is in every build); kept so that builds naming it
//!   still resolve.
//!
//! A setting that asks for a part a build leaves out is a
//! `ConfigError::FeatureDisabled` naming the feature.

#![deny(missing_docs)]
#![warn(clippy::missing_errors_doc)]
#![warn(clippy::exhaustive_structs, clippy::exhaustive_enums)]

mod bundle;
mod bundle_inspect;
mod cached;
mod compile;
mod compiler_versions;
mod config;
mod declaration;
mod dump;
mod error;
mod exit;

mod learned_policy;
pub mod log_targets;
#[doc(inline)]
pub use compile::lowering;
pub mod logging;
pub mod mlir;
mod outcome;
mod placement;
mod profile;
mod provided;
pub mod reference;
mod runtime;
mod signing;
mod tensor;
pub mod trace;
mod upload;
mod value;

// The call path: the runtime, a function, the values and tensors it takes
// and gives, what a call reports, the errors, and the configuration's top
// type and builder. Everything else is in a module named by its purpose.
pub use compile::function::JitFunction;
pub use config::{JitConfig, JitConfigBuilder};
pub use error::{ConfigError, JitError};
pub use iree_safe::ElementType;
pub use jit_cache::{
    CapturedScalar, DType, ErrorChain, FallbackReason, MissReason, Provenance, Refusal,
    ScalarConversionError, ScalarValue,
};
#[cfg(feature = "remote-cache")]
pub use jit_store::RemoteError;
pub use jit_store::StoreError;
pub use outcome::{CallError, CallResult, Compiled, Dispatched};
pub use runtime::JitRuntime;
pub use tensor::{DeviceTensor, DeviceTensorExt, HostTensor, Tensor};
pub use value::Value;

/// `half`'s float types, which [`HostTensor`] holds f16 and bf16 data in.
pub use half::{bf16, f16};

pub mod settings {
    //! The settings inside a [`JitConfig`](crate::JitConfig), one struct per
    //! part of the runtime, and the `SHEAF_JIT_*` environment variables
    //! that override them ([`ENV_VARIABLES`]).

    pub use crate::config::{
        CompileMode, CompileSettings, DeviceSettings, DiskCacheFolder, DiskCacheSettings,
        EnvVariable, FloatSemantics, ProfileFormat, SigningKeySource, TrustSettings, TrustedKey,
        UploadSettings, DEFAULT_CACHE_FOLDER, ENV_VARIABLES, PROJECT_CACHE_FOLDER,
    };
    #[cfg(feature = "remote-cache")]
    pub use crate::config::{RemoteCacheUrl, RemoteSecret, RemoteSettings};
    /// `jit-cache`'s error for a [`CacheConfig`] that cannot work, held by
    /// [`ConfigError::Cache`](crate::ConfigError::Cache).
    pub use jit_cache::ConfigError as CacheConfigError;
    pub use jit_cache::{ByteSize, CacheConfig, CachePolicy, InFlightPolicy};
    pub use jit_store::Secret;
    /// What a remote cache backend of your own implements
    /// ([`JitConfigBuilder::remote_store`](crate::JitConfigBuilder::remote_store)),
    /// the two built in, and the read-only mode.
    #[cfg(feature = "remote-cache")]
    pub use jit_store::{
        LeaseAnswer, RedisStore, RemoteMode, RemoteOptions, RemoteStore, RemoteTimeouts,
        RemoteValue, SharedFolderStore,
    };
    /// The keys of signed entries and bundles ([`TrustSettings`]).
    pub use jit_store::{PublicKey, SigningKey, TrustedKeys};

    /// `SHEAF_JIT_TRACE`: deprecated; `1` (or `on`) is
    /// `SHEAF_JIT_LOG=warn,sheaf_jit=debug` (see the README's "Seeing
    /// inside").
    pub const TRACE_ENV: &str = "SHEAF_JIT_TRACE";
}

pub mod artifacts {
    //! Compiled code made ahead of time or elsewhere: artifact bundles
    //! (exported with [`JitRuntime::export_artifacts`](crate::JitRuntime::export_artifacts),
    //! served with [`JitConfigBuilder::artifact_bundle`](crate::JitConfigBuilder::artifact_bundle)),
    //! `.vmfb`s the application provides, precompiled signatures, and where
    //! a loaded artifact came from.

    #[doc(hidden)]
    pub use crate::bundle::open_for_fuzzing;
    pub use crate::bundle::{BundleError, ExportSummary};
    pub use crate::bundle_inspect::{
        inspect_bundle, verify_bundle, BundleContents, BundleVerdict, BundledSignature,
    };
    pub use crate::error::ProvideError;
    pub use crate::provided::{ProvidedFunction, ProvidedSummary};

    /// Renamed [`ProvidedFunction`] in 0.3: "import" is host memory handed
    /// to a device without a copy.
    #[deprecated(since = "0.3.0", note = "renamed `ProvidedFunction`")]
    pub type Import<'a, M = ()> = ProvidedFunction<'a, M>;
    /// Renamed [`ProvidedSummary`] in 0.3.
    #[deprecated(since = "0.3.0", note = "renamed `ProvidedSummary`")]
    pub type ImportSummary = ProvidedSummary;
    /// Renamed [`ProvideError`] in 0.3.
    #[deprecated(since = "0.3.0", note = "renamed `ProvideError`")]
    pub type ImportError = ProvideError;
    pub use crate::compile::variant::ArtifactSource;
    pub use crate::runtime::{Precompile, PrecompileSummary};
    pub use iree_safe::TrustedVmfb;
    pub use jit_store::ArtifactKey;
}

pub mod compiler {
    //! The compiler behind the runtime: which one runs
    //! ([`CompilerPreference`], [`CompilerChoice`]), what it is given and
    //! makes, and how it fails.

    pub use iree_safe::compiler::{
        Artifact, CompileError, CompileOptions, CompileTarget, CompilerChoice, CompilerKind,
        CompilerPreference, Diagnostic, Location, Severity,
    };
    pub use jit_cache::CompileFailure;
}

pub mod stats {
    //! What the runtime reports about itself: the counters of each part,
    //! and the profile by phase.

    pub use crate::cached::CachedVariant;
    pub use crate::profile::{Phase, PhaseTotals, ProfileReport};
    pub use crate::upload::UploadStats;
    pub use iree_safe::{BufferPoolStatistics, MemoryStatistics};
    pub use jit_cache::{CacheStats, Counters, FunctionId, FunctionMode, FunctionStats, Origin};
    pub use jit_store::StoreStats;
    #[cfg(feature = "remote-cache")]
    pub use jit_store::{BreakerState, RemoteStats};
}

pub mod tuning {
    //! The constants the runtime tunes itself with, for benchmarks and for
    //! callers that lay out their own data: the CPU code generation flags
    //! and contraction thresholds, the zero-copy import rules, and the dict
    //! key interner. Not needed to call a function.

    pub use crate::placement::{
        matmul_spec_reach, parallel_contraction, MatmulSpecReach, AMD_MATMUL_SPEC_REACH,
        AVX512_MATMUL_SPEC, CONTRACTION_FLAGS, CPU_FLAGS, INTEL_MATMUL_SPEC_REACH,
        LARGE_CONTRACTION, PARALLEL_CONTRACTION, PARALLEL_CONTRACTION_AVX2,
    };
    pub use crate::tensor::{aligned_copy, IMPORT_ALIGNMENT};
    pub use crate::upload::IMPORT_MIN_BYTES;
    pub use crate::value::{intern_key, INTERNED_KEYS};
}

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod thread_safety {
    use static_assertions::assert_impl_all;

    assert_impl_all!(super::JitRuntime: Send, Sync, Clone);
    assert_impl_all!(super::JitFunction: Send, Sync, Clone);
    assert_impl_all!(super::Value: Send, Sync, Clone);
    assert_impl_all!(super::CallResult: Send, Sync);
}
