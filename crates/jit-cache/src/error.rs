//! Errors: failed compiles and invalid configurations.

/// Why compiling a signature failed. Build one with [`CompileError::new`] in
/// the compile callback; the cache builds the other variants itself.
///
/// A compile error is remembered for its signature only: calls with that
/// signature run in the interpreter (with the error available) until
/// `CacheConfig::failed_compile_retry_after` calls have passed or
/// [`JitCache::clear_failures`](crate::JitCache::clear_failures) is called.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// The backend reported an error.
    #[error("compile failed: {message}")]
    Failed {
        /// The backend's message.
        message: String,
    },
    /// The compile callback panicked; the panic was caught and the cache is
    /// unaffected.
    #[error("the compile callback panicked: {message} (the cache caught the panic; fix the backend or report it)")]
    Panicked {
        /// The panic payload, when it was a string.
        message: String,
    },
    /// The compiling call unwound before it could report a result (outside
    /// the compile callback); calls waiting for it were released.
    #[error(
        "the compile was abandoned because the compiling thread unwound; the next call retries it"
    )]
    Abandoned,
}

impl CompileError {
    /// A backend failure with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        CompileError::Failed {
            message: message.into(),
        }
    }

    /// Whether the compile callback panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self, CompileError::Panicked { .. })
    }
}

/// A [`CacheConfig`](crate::CacheConfig) that cannot work.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A setting that must be positive is 0.
    #[error("CacheConfig::{setting} is 0; it must be at least 1 (see its documentation for the default and why)")]
    Zero {
        /// The setting's name (for overrides, `function_capacity_overrides[\"name\"]`).
        setting: String,
    },
    /// The cool-down cap is below the initial cool-down.
    #[error("CacheConfig::thrash_cool_down_cap ({cap}) is below CacheConfig::thrash_cool_down ({cool_down}); raise the cap or lower the cool-down")]
    CoolDownCap {
        /// `thrash_cool_down`.
        cool_down: u64,
        /// `thrash_cool_down_cap`.
        cap: u64,
    },
}
