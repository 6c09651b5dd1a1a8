//! The older way to turn on the JIT's stderr log, kept for compatibility:
//! [`init_from_env`] is deprecated in favour of `SHEAF_JIT_LOG`, which a
//! runtime reads when it starts, with no call of the program's, or
//! [`logging::apply_env`] reads at once (the README's "Seeing inside").

use tracing_subscriber::EnvFilter;

use crate::error::ConfigError;
use crate::logging::{self, StderrLog};

/// Installs the library's stderr log now: with `SHEAF_JIT_LOG` (or
/// `SHEAF_JIT_TRACE=1`) set, as a runtime would when it starts; otherwise
/// with `RUST_LOG`'s filter, else the warnings of every crate. Does nothing
/// if a `tracing` subscriber is already installed. Returns whether the
/// log shows more than warnings (a filter was asked for).
///
/// # Errors
///
/// [`ConfigError::Invalid`] for a `SHEAF_JIT_LOG` that does not parse or a
/// `SHEAF_JIT_TRACE` value that is not a switch.
#[deprecated(
    since = "0.2.0",
    note = "set SHEAF_JIT_LOG (a RUST_LOG-style filter), which a runtime applies when it starts, or call `logging::apply_env`"
)]
pub fn init_from_env() -> Result<bool, ConfigError> {
    let asked = crate::config::log_filter(|name| std::env::var_os(name))?;
    let verbose = asked.is_some() || std::env::var_os("RUST_LOG").is_some();
    let filter = asked.unwrap_or_else(|| {
        EnvFilter::try_from_default_env()
            .map(|filter| filter.to_string())
            .unwrap_or_else(|_| "warn".to_owned())
    });
    let _: StderrLog = logging::install(Some(filter));
    Ok(verbose)
}
