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

pub use mlp::mlp_layer;
pub use sigmoid::sigmoid;
pub use softmax::{softmax, temperature};
