//! The JIT runtime Sheaf calls to run its hot functions compiled by IREE,
//! with memory that stays flat under shape polymorphism.
//!
//! One [`JitRuntime`] per process holds one shared IREE runtime (each
//! compiled artifact is a small module in it, unloaded on eviction), one
//! compiler (in-process preferred, `iree-compile` as fallback) behind a
//! persistent disk cache, and the bounded cache policy of `jit-cache`
//! (per-function LRU keyed by shapes, dtypes and captured scalars; global
//! budgets; thrash fallback to the interpreter).
//!
//! Sheaf supplies, per function, a [`JitFunction`]: its name and definition
//! (hashed, so a redefinition never reuses stale code), a lowering to
//! StableHLO for a given signature, and its interpreter. [`reference`](mod@reference) has
//! three worked examples.
//!
//! ```no_run
//! use ndarray::{ArrayD, IxDyn};
//! use sheaf_integration::{reference, JitConfig, JitRuntime, Provenance, Value};
//!
//! let jit = JitRuntime::new(JitConfig::from_env()?)?;
//! let softmax = reference::softmax();
//! let x = ArrayD::from_shape_vec(IxDyn(&[1, 3]), vec![1.0f32, 2.0, 3.0]).unwrap();
//!
//! // Captured scalars are part of the key: a new temperature compiles anew.
//! let result = jit.call(&softmax, &[Value::from(x)], &[reference::temperature(0.5)])?;
//! assert_eq!(result.provenance, Provenance::CompiledNow);
//!
//! // Device outputs feed the next call without a host copy.
//! let again = jit.call(&softmax, &result.outputs, &[reference::temperature(0.5)])?;
//! println!("{:?}", again.outputs[0].to_host()?);
//! println!("{}", jit.profile());
//! # Ok::<(), sheaf_integration::JitError>(())
//! ```

#![deny(missing_docs)]

mod config;
mod error;
mod executable;
mod function;
pub mod mlir;
mod profile;
pub mod reference;
mod runtime;
mod tensor;
#[cfg(feature = "trace-subscriber")]
pub mod trace;

pub use config::{DiskCacheSetting, JitConfig, JitConfigBuilder, DEFAULT_CACHE_FOLDER};
pub use error::{ConfigError, JitError, VariantError};
pub use executable::LoadedExecutable;
pub use function::{InterpretFn, JitFunction, LowerFn, ENTRY_POINT};
pub use iree_safe::compiler::{
    CompileError, CompilerChoice, CompilerKind, CompilerPreference, Diagnostic, Location, Severity,
};
pub use jit_cache::store::StoreStats;
pub use jit_cache::{
    ArgSpec, ByteSize, CacheConfig, CacheStats, CapturedScalar, CompileFailure, DType,
    FunctionMode, InFlightPolicy, ScalarValue, Signature,
};
pub use profile::{Phase, PhaseTotals, ProfileReport};
pub use runtime::{CallResult, JitRuntime, Provenance};
pub use tensor::{HostTensor, Value};

/// Device tensors, as compiled calls return them.
pub use iree_safe::Tensor as DeviceTensor;

/// `SHEAF_JIT_TRACE`: `1` (or `on`) prints one line per miss, compile,
/// eviction and fallback transition (see `trace`, feature `trace-subscriber`).
pub const TRACE_ENV: &str = "SHEAF_JIT_TRACE";

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod thread_safety {
    use static_assertions::assert_impl_all;

    assert_impl_all!(super::JitRuntime: Send, Sync, Clone);
    assert_impl_all!(super::JitFunction: Send, Sync, Clone);
    assert_impl_all!(super::Value: Send, Sync);
}
