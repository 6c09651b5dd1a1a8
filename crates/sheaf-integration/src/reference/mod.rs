//! Reference functions for tests, examples and benchmarks: each has a
//! StableHLO lowering valid for any input shape and an `ndarray`
//! interpreter, the two halves Sheaf supplies for its own functions.
//!
//! - [`sigmoid`]: `1 / (1 + exp(-x))`, f32 or f64, any rank;
//! - [`softmax`]: softmax over the last axis of `x / temperature`, f32, rank
//!   ≥ 1, with `temperature` captured (baked into the code);
//! - [`mlp_layer`]: `relu(x·W + b)` for `x: f32[N,K]`, `W: f32[K,M]`,
//!   `b: f32[M]`;
//! - [`matmul`]: `a·b` for `a: f32[...,M,K]`, `b: f32[...,K,N]` (batched
//!   over equal leading dims; static shapes);
//! - [`ragged_batch_sizes`]: the batch sizes of the ragged-batch workload.

mod matmul;
mod mlp;
mod sigmoid;
mod softmax;

pub use matmul::{interpret_matmul, matmul};
pub use mlp::{interpret_mlp_layer, mlp_layer};
pub use sigmoid::{interpret_sigmoid, sigmoid};
pub use softmax::{interpret_softmax, softmax, temperature};

use crate::tensor::HostTensor;
use crate::value::Value;

/// The batch sizes of `calls` calls of the ragged-batch workload: uniform in
/// `1..=max`, from a fixed-seed xorshift generator (the same sizes on every
/// run and machine).
///
/// ```
/// let sizes = sheaf_integration::reference::ragged_batch_sizes(2000, 128);
/// assert!(sizes.iter().all(|&b| (1..=128).contains(&b)));
/// assert_eq!(sizes, sheaf_integration::reference::ragged_batch_sizes(2000, 128));
/// ```
pub fn ragged_batch_sizes(calls: usize, max: usize) -> Vec<usize> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let max = max.max(1) as u64;
    (0..calls)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % max) as usize + 1
        })
        .collect()
}

/// Why a reference interpreter failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReferenceError {
    /// The arguments are not what the function takes: why.
    #[error("{0}")]
    Arguments(String),
    /// An argument could not be read: not a tensor, or a device tensor that
    /// could not be copied to the host.
    #[error("cannot read an argument")]
    Read(#[from] crate::JitError),
}

/// The host tensors of `args`, which must all be tensors.
fn host_tensors(args: &[Value]) -> Result<Vec<HostTensor>, ReferenceError> {
    args.iter()
        .map(|arg| arg.to_host().map_err(ReferenceError::from))
        .collect()
}
