//! What the demo binaries of `src/bin/` share: [`process_stats`] (what the
//! process holds) and [`legacy`], the ping-pong demo's reproduction of the
//! original per-artifact runtime.
//!
//! The binaries:
//!
//! - `pingpong`: the shape ping-pong demo, the original JIT next to this
//!   project's (`cargo xtask pingpong`);
//! - `soak`: many threads calling the JIT for a while, every tier on
//!   (`cargo xtask soak SECONDS`);
//! - `bench_vs_jax`: this JIT's side of `cargo xtask bench-vs-jax` (the JAX
//!   side is `src/bin/bench_vs_jax/jax_side.py`).
//!
//! Not published: nothing here is an API to build on.

#![deny(missing_docs)]

pub mod legacy;
pub mod process_stats;
