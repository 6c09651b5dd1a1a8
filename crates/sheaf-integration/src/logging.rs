//! The library's own stderr log, `SHEAF_JIT_LOG`, and where the JIT's
//! events go when it is off.
//!
//! The events are `tracing` events under the targets of
//! [`log_targets`](crate::log_targets) (`sheaf_jit::recompiles`, `sheaf_jit::cache`,
//! ...). Where they are shown is the application's choice, in this order:
//!
//! 1. **A `tracing` subscriber the application installed** receives them
//!    (its filter decides); the library never replaces it.
//! 2. **`SHEAF_JIT_LOG`** (a filter in `RUST_LOG` syntax, such as
//!    `sheaf_jit=debug` or `warn,sheaf_jit::remote=debug`): when a runtime
//!    starts ([`JitRuntime::new`](crate::JitRuntime::new)) and no global
//!    `tracing` subscriber is installed, the library installs one that
//!    writes the events it lets through to stderr, one line each, and says
//!    so once (at info level, target `sheaf_jit::runtime`). When the
//!    application has a subscriber already, `SHEAF_JIT_LOG` is not applied,
//!    and one warning through that subscriber says so.
//! 3. **A `log` logger** (env_logger, ...): with no `tracing` subscriber,
//!    each event is handed to the `log` crate's logger, with the same
//!    target and level (`tracing`'s `log` feature), so a `log`-based
//!    application filters them as its own (`RUST_LOG=sheaf_jit=debug` with
//!    env_logger).
//!
//! [`apply_env`] applies `SHEAF_JIT_LOG` at once, for a program that wants
//! the log before its first runtime (or with none).
//!
//! The dump folder (`SHEAF_JIT_DUMP_DIR`) writes each compile's inputs and
//! outputs, at most [`MAX_DUMPS`] per process (the README's "Seeing
//! inside").
//!
//! `SHEAF_JIT_TRACE=1`, the older switch, is `SHEAF_JIT_LOG=warn,sheaf_jit=debug`
//! (deprecated; `SHEAF_JIT_LOG` wins when both are set).

use std::sync::OnceLock;

use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::EnvFilter;

use crate::config::{log_filter, LOG_ENV};
use crate::error::ConfigError;

/// The most compiles one process writes to the dump folder
/// (`SHEAF_JIT_DUMP_DIR`); later ones are skipped, with one warning.
pub use crate::dump::MAX_DUMPS;

/// What became of the library's stderr log in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StderrLog {
    /// Neither `SHEAF_JIT_LOG` nor `SHEAF_JIT_TRACE` asked for it.
    NotAsked,
    /// Installed, with this filter.
    Installed(String),
    /// Asked for, but the application had a `tracing` subscriber already.
    LeftToTheApplication,
}

/// Applies `SHEAF_JIT_LOG` (else the deprecated `SHEAF_JIT_TRACE`) now, as
/// [`JitRuntime::new`](crate::JitRuntime::new) does when a runtime starts:
/// installs the library's stderr log unless the program has a `tracing`
/// subscriber. Once per process: later calls, and the runtimes', change
/// nothing. Returns whether the library's stderr log is installed.
///
/// ```
/// // No SHEAF_JIT_LOG here: nothing is installed.
/// # if std::env::var_os("SHEAF_JIT_LOG").is_none() && std::env::var_os("SHEAF_JIT_TRACE").is_none() {
/// assert!(!sheaf_integration::logging::apply_env()?);
/// # }
/// # Ok::<(), sheaf_integration::ConfigError>(())
/// ```
///
/// # Errors
///
/// [`ConfigError::Invalid`] for a `SHEAF_JIT_LOG` that is not a filter, or
/// a `SHEAF_JIT_TRACE` that is not a switch.
pub fn apply_env() -> Result<bool, ConfigError> {
    Ok(matches!(install_from_env()?, StderrLog::Installed(_)))
}

/// What the first [`install`] of this process did.
static STDERR_LOG: OnceLock<StderrLog> = OnceLock::new();

/// Installs the stderr log the environment asks for, once per process
/// (later calls, and those after [`install`], return the first's answer).
///
/// # Errors
///
/// [`ConfigError::Invalid`] for a `SHEAF_JIT_LOG` that is not a filter, or
/// a `SHEAF_JIT_TRACE` that is not a switch.
pub(crate) fn install_from_env() -> Result<StderrLog, ConfigError> {
    if let Some(done) = STDERR_LOG.get() {
        return Ok(done.clone());
    }
    let filter = log_filter(|name| std::env::var_os(name))?;
    Ok(install(filter))
}

/// Installs a stderr subscriber with `filter` unless the application has a
/// global one; once per process (a later call returns the first's answer).
pub(crate) fn install(filter: Option<String>) -> StderrLog {
    STDERR_LOG.get_or_init(|| install_now(filter)).clone()
}

fn install_now(filter: Option<String>) -> StderrLog {
    let Some(filter) = filter else {
        return StderrLog::NotAsked;
    };
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(&filter))
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .without_time()
        .with_target(true)
        // A span's line when it closes, with its fields: a call's
        // (`sheaf_jit::call=trace`), a compile's (`sheaf_jit::compile=debug`).
        .with_span_events(FmtSpan::CLOSE)
        .finish();
    // Not `try_init`: that would also take the `log` crate's logger, which
    // is the application's to set.
    if tracing::subscriber::set_global_default(subscriber).is_err() {
        tracing::warn!(
            target: crate::log_targets::RUNTIME,
            filter,
            "{LOG_ENV} is not applied: this program installed its own tracing subscriber, \
             whose filter decides what is shown (add `sheaf_jit=debug` to it)"
        );
        return StderrLog::LeftToTheApplication;
    }
    tracing::info!(
        target: crate::log_targets::RUNTIME,
        filter,
        "logging the JIT's events to stderr ({LOG_ENV}={filter})"
    );
    StderrLog::Installed(filter)
}
