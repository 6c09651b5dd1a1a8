//! The `tracing` targets of the JIT's events: one scheme, `sheaf_jit::*`,
//! shared by `jit-cache` and the crates above it, so that one filter
//! directive (`sheaf_jit=debug`, in `RUST_LOG` or `SHEAF_JIT_LOG` syntax)
//! shows every event and `sheaf_jit::remote=debug` one part of them.
//!
//! | target | what it shows |
//! | --- | --- |
//! | `sheaf_jit::recompiles` | `debug`: each miss of the in-memory cache with why it missed (the cached signature it differs from, and how) and what the call does (compile, queue, wait, interpret, and the admission decision at capacity); each compile's result and time; each eviction. `warn`: a failed compile |
//! | `sheaf_jit::policy` | `warn`: the cache policy's mode changes (a function starts or stops thrashing, its admission budget is spent or restored) |
//! | `sheaf_jit::cache` | the disk cache: `debug` per lookup that missed, with its reason (absent, damaged, unauthenticated, unsafe to read, refused by the runtime), per entry that could not be written; `warn` per entry refused; the learned-policy files |
//! | `sheaf_jit::remote` | the remote cache: `debug` per fetch with its outcome (served, absent, over the size bound, request failed, skipped by the open breaker) and per publish; `warn` per entry refused and when the breaker opens |
//! | `sheaf_jit::compile` | the compiler chosen and why, the compile span (function, signature, artifact key, phases), batched compiles, the dump folder (`SHEAF_JIT_DUMP_DIR`), compile threads |
//! | `sheaf_jit::runtime` | the device opened and its fallbacks, bundles served, the process's exit |
//! | `sheaf_jit::call` | `trace`: a span per call (function, signature, outcome: compiled and where the code came from, or interpreted and why), around the events of its miss; off unless asked for by name or at `trace`, since it is on every cache hit |
//!
//! Before 0.2 the `jit-cache` events used the target `jit_cache`, and the
//! others `sheaf_jit`; a filter on `sheaf_jit` covers them all now.

/// Misses of the in-memory cache explained, compile results, evictions.
pub const RECOMPILES: &str = "sheaf_jit::recompiles";
/// The cache policy's mode changes.
pub const POLICY: &str = "sheaf_jit::policy";
/// The disk cache (artifacts and learned policies).
pub const CACHE: &str = "sheaf_jit::cache";
/// The remote cache shared by a cluster.
pub const REMOTE: &str = "sheaf_jit::remote";
/// Compiles: the compiler, its span, its inputs and outputs.
pub const COMPILE: &str = "sheaf_jit::compile";
/// The runtime: devices, bundles, the process's exit.
pub const RUNTIME: &str = "sheaf_jit::runtime";
/// A span per call, at `trace` level (the hit path's only instrumentation).
pub const CALL: &str = "sheaf_jit::call";

/// Whether a `debug` event of [`RECOMPILES`] is shown: by the `tracing`
/// subscriber, or, with none installed, by the `log` crate's logger (which
/// `tracing`'s `log` feature hands events to). For a miss's explanation,
/// which is worth building only when someone reads it.
pub(crate) fn recompiles_debug_shown() -> bool {
    tracing::enabled!(target: RECOMPILES, tracing::Level::DEBUG)
        || (!tracing::dispatcher::has_been_set()
            && log::log_enabled!(target: RECOMPILES, log::Level::Debug))
}
