//! The `tracing` targets of the JIT's events: this crate's (the compiler,
//! the runtime, the calls), and the table of all of them. The crates share
//! one scheme, `sheaf_jit::*`, each owning its targets, so that one filter
//! directive (`sheaf_jit=debug`, in `RUST_LOG` or `SHEAF_JIT_LOG` syntax)
//! shows every event and `sheaf_jit::remote=debug` one part of them.
//!
//! | target | crate | what it shows |
//! | --- | --- | --- |
//! | `sheaf_jit::recompiles` | [`jit_cache::log_targets`] | misses of the in-memory cache explained, compile results, evictions |
//! | `sheaf_jit::policy` | [`jit_cache::log_targets`] | the cache policy's mode changes |
//! | `sheaf_jit::cache` | [`jit_store::log_targets`] | the disk cache: lookups that missed and why, entries refused, policy files |
//! | `sheaf_jit::remote` | [`jit_store::log_targets`] | the remote cache: fetches, publishes, refusals, the breaker |
//! | `sheaf_jit::compile` | this crate | the compiler chosen and why, the compile span (function, signature, artifact key, phases), batched compiles, the dump folder (`SHEAF_JIT_DUMP_DIR`), compile threads |
//! | `sheaf_jit::runtime` | this crate | the device opened and its fallbacks, bundles served, the process's exit |
//! | `sheaf_jit::call` | this crate | `trace`: a span per call (function, signature, outcome: compiled and where the code came from, or interpreted and why), around the events of its miss; off unless asked for by name or at `trace`, since it is on every cache hit |
//!
//! Each crate's module says at which level what is shown. Before 0.2 the
//! `jit-cache` events used the target `jit_cache`, and the others
//! `sheaf_jit`; a filter on `sheaf_jit` covers them all now. Before 0.3
//! all seven constants were `jit_cache::log_targets`'.

/// Compiles: the compiler, its span, its inputs and outputs.
pub const COMPILE: &str = "sheaf_jit::compile";
/// The runtime: devices, bundles, the process's exit.
pub const RUNTIME: &str = "sheaf_jit::runtime";
/// A span per call, at `trace` level (the hit path's only instrumentation).
pub const CALL: &str = "sheaf_jit::call";
