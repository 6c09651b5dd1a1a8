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
mod profile;
pub mod reference;
mod runtime;
mod tensor;
pub mod trace;

pub use config::{CompilerPreference, DiskCacheSetting, JitConfig, JitConfigBuilder};
pub use error::JitError;
pub use executable::LoadedExecutable;
pub use function::{definition_hash, InterpretFn, JitFunction, LowerFn, ENTRY_POINT};
pub use jit_cache::{CacheStats, CapturedScalar, DType, ScalarValue, Signature};
pub use profile::{Phase, PhaseTotals, ProfileReport};
pub use runtime::{CallResult, JitRuntime, Provenance};
pub use tensor::{HostTensor, Value};

/// Device tensors, as compiled calls return them.
pub use iree_safe::Tensor as DeviceTensor;

mod thread_safety {
    use static_assertions::assert_impl_all;

    assert_impl_all!(super::JitRuntime: Send, Sync, Clone);
    assert_impl_all!(super::JitFunction: Send, Sync, Clone);
    assert_impl_all!(super::Value: Send, Sync);
}
