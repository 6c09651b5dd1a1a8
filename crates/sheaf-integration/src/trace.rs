//! Turning on the trace: one line per miss, compile, eviction and policy
//! mode change, which together read as the ping-pong trace of
//! docs/architecture.md ("The problem").
//!
//! The events come from `tracing`: the targets `jit_cache` (misses with
//! their explanation and admission decision, compiles, evictions, mode
//! changes, disk-cache entries refused; the remote cache's hits, publishes,
//! rejected entries, failures and circuit breaker) and `sheaf_jit`
//! (compiler choice, the remote cache in use, CPU
//! fallback, the legacy mode of the ping-pong demo), and warnings of every
//! other crate (`iree_safe` among them). Libraries only emit; a program
//! chooses to print them by calling [`init_from_env`] (or installing its own
//! subscriber).

use tracing_subscriber::EnvFilter;

use crate::error::ConfigError;

/// Installs a compact stderr subscriber: with `SHEAF_JIT_TRACE=1` (or `on`)
/// the debug events of `jit_cache` and `sheaf_jit` and the warnings of every
/// crate; with `RUST_LOG` set, its filter; otherwise the warnings of every
/// crate (policy mode changes, failed compiles, refused cache entries).
/// Each line has the event's level, message and fields. Does nothing if a
/// subscriber is already installed. Returns whether the trace is on; an
/// unknown `SHEAF_JIT_TRACE` value is an error naming it.
///
/// # Errors
///
/// [`ConfigError::Invalid`] for a `SHEAF_JIT_TRACE` value that is not a
/// switch.
pub fn init_from_env() -> Result<bool, ConfigError> {
    let trace = crate::config::trace_switch()?.unwrap_or(false);
    let filter = if trace {
        EnvFilter::new("warn,jit_cache=debug,sheaf_jit=debug")
    } else {
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"))
    };
    let verbose = trace || std::env::var_os("RUST_LOG").is_some();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .without_time()
        .with_target(true)
        .try_init();
    Ok(verbose)
}
