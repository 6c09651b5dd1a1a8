//! Reference functions for tests, examples and benchmarks: each has a
//! StableHLO lowering valid for any input shape and an `ndarray`
//! interpreter, the two halves Sheaf supplies for its own functions.
//!
//! - [`sigmoid`]: `1 / (1 + exp(-x))`, f32 or f64, any rank;
//! - [`softmax`]: softmax over the last axis of `x / temperature`, f32, rank
//!   ≥ 1, with `temperature` captured (baked into the code);
//! - [`mlp_layer`]: `relu(x·W + b)` for `x: f32[N,K]`, `W: f32[K,M]`,
//!   `b: f32[M]`.

mod mlp;
mod sigmoid;
mod softmax;

pub use mlp::{interpret_mlp_layer, mlp_layer};
pub use sigmoid::{interpret_sigmoid, sigmoid};
pub use softmax::{interpret_softmax, softmax, temperature};

use crate::tensor::HostTensor;
use crate::value::Value;

/// Why a reference interpreter refused its arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ReferenceError(pub String);

impl From<String> for ReferenceError {
    fn from(message: String) -> Self {
        ReferenceError(message)
    }
}

impl From<crate::JitError> for ReferenceError {
    fn from(error: crate::JitError) -> Self {
        ReferenceError(error.to_string())
    }
}

/// The host tensors of `args`, which must all be tensors.
fn host_tensors(args: &[Value]) -> Result<Vec<HostTensor>, ReferenceError> {
    args.iter()
        .map(|arg| arg.to_host().map_err(ReferenceError::from))
        .collect()
}
