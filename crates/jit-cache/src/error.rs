//! Errors: failed compiles and invalid configurations, and [`ErrorChain`]
//! to show an error with its causes.
//!
//! Every error of this workspace follows one convention: its `Display`
//! says what failed at its own level only, and the error that caused it is
//! its [`source`](Error::source). Show an error to a user with
//! [`ErrorChain`] (or `anyhow`'s `{:#}`), which prints each level once.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// An error and its [`source`](Error::source)s, displayed on one line
/// outermost first and joined by `: ` (`cannot compile `f` for (f32[2]):
/// IREE compilation failed: ...`), each level's message once. Use it
/// wherever a message is shown to a user: logs, a program's last words,
/// test assertions on a cause's text.
///
/// ```
/// use jit_cache::{CompileFailure, ErrorChain};
///
/// let failure = CompileFailure::message("no lowering for u8");
/// assert_eq!(failure.to_string(), "the compile failed");
/// assert_eq!(
///     ErrorChain(&failure).to_string(),
///     "the compile failed: no lowering for u8"
/// );
/// ```
#[derive(Debug, Clone, Copy)]
#[expect(
    clippy::exhaustive_structs,
    reason = "a transparent wrapper that displays the error it holds: callers build it around an \
        error, and it will never hold more"
)]
pub struct ErrorChain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(error) = source {
            write!(f, ": {error}")?;
            source = error.source();
        }
        Ok(())
    }
}

/// Why compiling a signature failed. Build one with [`CompileFailure::new`]
/// from the backend's own error (kept whole, as the `source`) in the compile
/// callback, or with [`CompileFailure::refused`] when the lowering refuses
/// the signature before any compiler runs; the cache builds the other
/// variants itself.
///
/// A failure is remembered for its signature only: calls with that
/// signature run in the interpreter (with the failure available) until
/// `CacheConfig::failed_compile_retry_after` calls have passed or
/// [`JitCache::clear_failures`](crate::JitCache::clear_failures) is called.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum CompileFailure {
    /// The compile callback returned an error. It displays as "the compile
    /// failed"; the backend's error itself is its
    /// [`source`](Error::source) (and [`backend_error`](Self::backend_error)),
    /// so callers can downcast it back to their type.
    Backend(Arc<dyn Error + Send + Sync>),
    /// The lowering refused this signature: no compiler ran (e.g. the
    /// call's dims do not fit together, or an op has no lowering for its
    /// dtype). It displays as "the lowering refused this signature"; the
    /// lowering's error is its [`source`](Error::source) (and
    /// [`backend_error`](Self::backend_error)). Build it with
    /// [`CompileFailure::refused`]. It is remembered like any failure, but
    /// counted in [`Counters::refusals`](crate::Counters::refusals), not as
    /// a compile.
    Refused(Arc<dyn Error + Send + Sync>),
    /// The lowering refused the signature of the call itself (its dims do
    /// not fit together), checked before compiling the generalization with
    /// dynamic dims that its dims asked for: no compiler ran. Build it with
    /// [`CompileFailure::call_refused`]. The call counts for nothing: its
    /// dims do not make a dim vary, the generalization is not remembered as
    /// failed (its class keeps compiling dynamic dims for good calls), and
    /// the failure is remembered for the call's own signature. Counted in
    /// [`Counters::refusals`](crate::Counters::refusals).
    CallRefused(Arc<dyn Error + Send + Sync>),
    /// The compile callback panicked; the panic was caught and the cache is
    /// unaffected.
    Panicked {
        /// The panic payload, when it was a string.
        message: String,
    },
    /// The compiling call unwound before it could report a result (outside
    /// the compile callback); calls waiting for it were released.
    Abandoned,
}

impl fmt::Display for CompileFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileFailure::Backend(_) => f.write_str("the compile failed"),
            CompileFailure::Refused(_) => f.write_str("the lowering refused this signature"),
            CompileFailure::CallRefused(_) => {
                f.write_str("the lowering refused the call's own signature")
            }
            CompileFailure::Panicked { message } => write!(
                f,
                "the compile callback panicked: {message} (the cache caught the panic; fix the \
                 backend or report it)"
            ),
            CompileFailure::Abandoned => f.write_str(
                "the compile was abandoned because the compiling thread unwound; the next call \
                 retries it",
            ),
        }
    }
}

impl Error for CompileFailure {
    /// The backend's (or the lowering's) error itself (not its source), for
    /// a [`CompileFailure::Backend`] or [`CompileFailure::Refused`].
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            CompileFailure::Backend(error)
            | CompileFailure::Refused(error)
            | CompileFailure::CallRefused(error) => Some(&**error),
            _ => None,
        }
    }
}

impl CompileFailure {
    /// A backend failure, keeping `error` (and its own sources) whole.
    pub fn new(error: impl Error + Send + Sync + 'static) -> Self {
        CompileFailure::Backend(Arc::new(error))
    }

    /// A backend failure described only by a message.
    pub fn message(message: impl Into<String>) -> Self {
        CompileFailure::new(Message(message.into()))
    }

    /// The lowering refused the signature: no compiler ran. `error` (and
    /// its own sources) is kept whole, as the `source`.
    ///
    /// ```
    /// use jit_cache::{CompileFailure, ErrorChain};
    ///
    /// let refusal = CompileFailure::refused(std::io::Error::other(
    ///     "x is f32[5,32] but W is f32[64,256]",
    /// ));
    /// assert!(refusal.is_refusal());
    /// assert_eq!(
    ///     ErrorChain(&refusal).to_string(),
    ///     "the lowering refused this signature: x is f32[5,32] but W is f32[64,256]"
    /// );
    /// ```
    pub fn refused(error: impl Error + Send + Sync + 'static) -> Self {
        CompileFailure::Refused(Arc::new(error))
    }

    /// The call's own signature was refused by the lowering, checked
    /// before compiling the generalization its dims asked for (see
    /// [`CompileFailure::CallRefused`]): a compile callback that was given
    /// a signature with dynamic dims other than the call's lowers the
    /// call's own signature first, and returns this when that is refused.
    ///
    /// ```
    /// use jit_cache::CompileFailure;
    ///
    /// let refusal = CompileFailure::call_refused(std::io::Error::other("K is 5, not 6"));
    /// assert!(refusal.is_refusal() && refusal.is_call_refusal());
    /// ```
    pub fn call_refused(error: impl Error + Send + Sync + 'static) -> Self {
        CompileFailure::CallRefused(Arc::new(error))
    }

    /// The backend's error, when this is a [`CompileFailure::Backend`], or
    /// the lowering's, when it is a [`CompileFailure::Refused`] or
    /// [`CompileFailure::CallRefused`]: downcast it to its type with
    /// `downcast_ref`.
    pub fn backend_error(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        match self {
            CompileFailure::Backend(error)
            | CompileFailure::Refused(error)
            | CompileFailure::CallRefused(error) => Some(&**error),
            _ => None,
        }
    }

    /// Whether the lowering refused the signature, or the call's own (no
    /// compiler ran).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            CompileFailure::Refused(_) | CompileFailure::CallRefused(_)
        )
    }

    /// Whether the lowering refused the call's own signature
    /// ([`CompileFailure::CallRefused`]).
    pub fn is_call_refusal(&self) -> bool {
        matches!(self, CompileFailure::CallRefused(_))
    }

    /// Whether the compile callback panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self, CompileFailure::Panicked { .. })
    }
}

/// Two failures are equal when they are the same failure (one backend error
/// shared by reference) or say the same thing.
impl PartialEq for CompileFailure {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (CompileFailure::Backend(a), CompileFailure::Backend(b))
            | (CompileFailure::Refused(a), CompileFailure::Refused(b))
            | (CompileFailure::CallRefused(a), CompileFailure::CallRefused(b)) => {
                Arc::ptr_eq(a, b) || ErrorChain(&**a).to_string() == ErrorChain(&**b).to_string()
            }
            (CompileFailure::Panicked { message: a }, CompileFailure::Panicked { message: b }) => {
                a == b
            }
            (CompileFailure::Abandoned, CompileFailure::Abandoned) => true,
            _ => false,
        }
    }
}

impl Eq for CompileFailure {}

/// A failure known only by its message.
#[derive(Debug)]
struct Message(String);

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for Message {}

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
