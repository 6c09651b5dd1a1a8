//! The `tracing` targets of this crate's events. The JIT's crates share one
//! scheme, `sheaf_jit::*`, each owning its own targets (this crate the
//! policy's; `jit-store` the disk and remote caches'; `sheaf-integration`
//! the compiler's, the runtime's and the calls'), so that one filter
//! directive (`sheaf_jit=debug`, in `RUST_LOG` or `SHEAF_JIT_LOG` syntax)
//! shows every event and `sheaf_jit::policy=warn` one part of them.
//!
//! | target | what it shows |
//! | --- | --- |
//! | `sheaf_jit::recompiles` | `debug`: each miss of the in-memory cache with why it missed (the cached signature it differs from, and how) and what the call does (compile, queue, wait, interpret, and the admission decision at capacity); each compile's result and time; each eviction. `warn`: a failed compile, a background compile thread that could not start |
//! | `sheaf_jit::policy` | `warn`: the cache policy's mode changes (a function starts or stops thrashing, its admission budget is spent or restored) |
//!
//! Before 0.2 these events used the target `jit_cache`; a filter on
//! `sheaf_jit` covers them now.

/// Misses of the in-memory cache explained, compile results, evictions.
pub const RECOMPILES: &str = "sheaf_jit::recompiles";
/// The cache policy's mode changes.
pub const POLICY: &str = "sheaf_jit::policy";

/// Whether a `debug` event of [`RECOMPILES`] is shown: by the `tracing`
/// subscriber, or, with none installed, by the `log` crate's logger (which
/// `tracing`'s `log` feature hands events to). For a miss's explanation,
/// which is worth building only when someone reads it.
pub(crate) fn recompiles_debug_shown() -> bool {
    tracing::enabled!(target: RECOMPILES, tracing::Level::DEBUG)
        || (!tracing::dispatcher::has_been_set()
            && log::log_enabled!(target: RECOMPILES, log::Level::Debug))
}
