//! Turning on the trace: one line per miss, compile, eviction and fallback
//! transition, which together read as the ping-pong trace of
//! docs/architecture.md ("The problem").
//!
//! The events come from `tracing` under the targets `jit_cache` (misses with
//! their explanation, compiles, evictions, fallback transitions) and
//! `sheaf_jit` (the legacy mode of the ping-pong demo). Libraries only emit; a program chooses to print them by
//! calling [`init_from_env`] (or installing its own subscriber).

use tracing_subscriber::fmt::format::debug_fn;
use tracing_subscriber::EnvFilter;

/// Installs a compact stderr subscriber when `SHEAF_JIT_TRACE=1` (debug
/// events of both targets) or `RUST_LOG` is set (its filter); otherwise only
/// warnings (fallback transitions, failed compiles) are printed. Does nothing
/// if a subscriber is already installed. Returns whether the trace is on.
pub fn init_from_env() -> bool {
    let trace = std::env::var(crate::TRACE_ENV).is_ok_and(|v| v == "1");
    let filter = if trace {
        EnvFilter::new("jit_cache=debug,sheaf_jit=debug")
    } else {
        EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new("jit_cache=warn,sheaf_jit=warn"))
    };
    let verbose = trace || std::env::var_os("RUST_LOG").is_some();
    // One line per event: its level and message (the structured fields
    // repeat what the message says).
    let message_only = debug_fn(|writer, field, value| {
        if field.name() == "message" {
            write!(writer, "{value:?}")
        } else {
            Ok(())
        }
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .fmt_fields(message_only)
        .try_init();
    verbose
}
