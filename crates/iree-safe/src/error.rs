//! Errors: IREE statuses turned into `Result`, and this crate's own checks.

use std::fmt;

use crate::sys;

/// The canonical IREE status codes (`iree_status_code_t`), plus `Unknown`
/// for values this crate does not name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[allow(
    missing_docs,
    reason = "the names are IREE's (and gRPC's) canonical codes"
)]
pub enum StatusCode {
    Cancelled,
    Unknown,
    InvalidArgument,
    DeadlineExceeded,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Aborted,
    OutOfRange,
    Unimplemented,
    Internal,
    Unavailable,
    DataLoss,
    Unauthenticated,
    Deferred,
    Incompatible,
}

impl StatusCode {
    fn from_raw(code: sys::iree_status_code_t) -> Self {
        match code {
            sys::IREE_STATUS_CANCELLED => Self::Cancelled,
            sys::IREE_STATUS_INVALID_ARGUMENT => Self::InvalidArgument,
            sys::IREE_STATUS_DEADLINE_EXCEEDED => Self::DeadlineExceeded,
            sys::IREE_STATUS_NOT_FOUND => Self::NotFound,
            sys::IREE_STATUS_ALREADY_EXISTS => Self::AlreadyExists,
            sys::IREE_STATUS_PERMISSION_DENIED => Self::PermissionDenied,
            sys::IREE_STATUS_RESOURCE_EXHAUSTED => Self::ResourceExhausted,
            sys::IREE_STATUS_FAILED_PRECONDITION => Self::FailedPrecondition,
            sys::IREE_STATUS_ABORTED => Self::Aborted,
            sys::IREE_STATUS_OUT_OF_RANGE => Self::OutOfRange,
            sys::IREE_STATUS_UNIMPLEMENTED => Self::Unimplemented,
            sys::IREE_STATUS_INTERNAL => Self::Internal,
            sys::IREE_STATUS_UNAVAILABLE => Self::Unavailable,
            sys::IREE_STATUS_DATA_LOSS => Self::DataLoss,
            sys::IREE_STATUS_UNAUTHENTICATED => Self::Unauthenticated,
            sys::IREE_STATUS_DEFERRED => Self::Deferred,
            sys::IREE_STATUS_INCOMPATIBLE => Self::Incompatible,
            _ => Self::Unknown,
        }
    }
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// An error from IREE or from this crate's argument checks.
///
/// IREE errors keep the status code and IREE's full message (including the
/// annotations IREE adds on the way up, such as the failing function).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// IREE returned a non-OK status.
    #[error("IREE {code}: {message}")]
    Iree {
        /// The status code.
        code: StatusCode,
        /// IREE's formatted status, with all its annotations.
        message: String,
    },
    /// The arguments of a call or a tensor do not match what was expected;
    /// nothing was passed to IREE.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A result of a kind this crate cannot represent (e.g. a VM list).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A host buffer of this many bytes could not be allocated (e.g. to copy
    /// a device tensor back); nothing was copied.
    #[error("cannot allocate {bytes} bytes of host memory; copy a smaller tensor, or free memory")]
    HostAllocation {
        /// The size asked for.
        bytes: usize,
    },
    /// A module's CPU code is compiled for a CPU whose features this
    /// machine's CPU lacks: running it would die of SIGILL, so it was not
    /// loaded (see `cpu_features.rs`).
    #[error(
        "the module's code is compiled for the CPU `{cpu}`, which has features this machine's \
         CPU lacks ({}): it would die of an illegal instruction, so it is not loaded; compile \
         for this machine (`host`) or for a CPU every machine that loads it has (such as \
         `x86-64-v3`)",
        missing.join(", ")
    )]
    UnsupportedCpu {
        /// The CPU the code is compiled for, as the module names it.
        cpu: String,
        /// The LLVM names of the features it needs that this CPU lacks.
        missing: Vec<String>,
    },
    /// IREE broke one of its own documented contracts (such as returning OK
    /// without an object). A bug in IREE or in this crate: please report it.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// The IREE status code, or `InvalidArgument` / `Unimplemented` for this
    /// crate's own checks.
    pub fn code(&self) -> StatusCode {
        match self {
            Error::Iree { code, .. } => *code,
            Error::InvalidArgument(_) => StatusCode::InvalidArgument,
            Error::Unsupported(_) => StatusCode::Unimplemented,
            Error::HostAllocation { .. } => StatusCode::ResourceExhausted,
            Error::UnsupportedCpu { .. } => StatusCode::FailedPrecondition,
            Error::Internal(_) => StatusCode::Internal,
        }
    }

    pub(crate) fn internal(message: impl Into<String>) -> Error {
        Error::Internal(message.into())
    }
}

/// Says what this crate was doing when IREE failed: the one way errors get
/// context (`device.rs`: "cannot open device `cuda`: ...").
pub(crate) trait Context<T> {
    /// Prefixes an [`Error::Iree`] message with `doing()`; other errors are
    /// this crate's own and already say what they are about.
    fn context(self, doing: impl FnOnce() -> String) -> Result<T>;
}

impl<T> Context<T> for Result<T> {
    fn context(self, doing: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|error| match error {
            Error::Iree { code, message } => Error::Iree {
                code,
                message: format!("{}: {message}", doing()),
            },
            other => other,
        })
    }
}

/// This crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Turns an IREE status into a `Result`, freeing the status.
///
/// # Safety
/// `status` must be a status returned by IREE that nobody else frees.
#[inline]
pub(crate) unsafe fn check(status: sys::iree_status_t) -> Result<()> {
    if sys::iree_status_is_ok(status) {
        Ok(())
    } else {
        // SAFETY: forwarded from this function's contract.
        Err(unsafe { status_to_error(status) })
    }
}

/// Formats, frees and converts a non-OK status. Cold: errors are rare.
///
/// # Safety
/// `status` must be a non-OK status that nobody else frees.
#[cold]
#[inline(never)]
pub(crate) unsafe fn status_to_error(status: sys::iree_status_t) -> Error {
    let code = StatusCode::from_raw(sys::iree_status_code(status));
    let mut length = 0usize;
    // SAFETY: a zero-capacity query writes only the required length; the
    // status stays owned by us.
    unsafe { sys::iree_status_format(status, 0, std::ptr::null_mut(), &mut length) };
    // A status message is small; an allocation failure here would abort
    // like any other small allocation.
    let mut buffer = vec![0u8; length + 1];
    let mut written = 0usize;
    // SAFETY: `buffer` holds `length + 1` bytes, the capacity we pass.
    let complete = unsafe {
        sys::iree_status_format(
            status,
            buffer.len(),
            buffer.as_mut_ptr().cast(),
            &mut written,
        )
    };
    // SAFETY: we own `status` and free it exactly once, after the last use.
    unsafe { sys::iree_status_free(status) };
    buffer.truncate(if complete { written.min(length) } else { 0 });
    let message = String::from_utf8_lossy(&buffer).into_owned();
    Error::Iree { code, message }
}
