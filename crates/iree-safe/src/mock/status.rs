//! Statuses: IREE's tagged pointers, with the mock's errors behind them.
//!
//! As in IREE, an `iree_status_t` is null for OK, and otherwise a pointer to
//! status storage aligned so that its low 5 bits are free to hold the code
//! (which `iree_status_code`, iree-sys' inline helper, masks out). A bare
//! code without storage is a valid status too.

use std::ffi::c_char;

use super::api::*;
use super::registry::{self, Kind, Object, Owned};

/// An error the mock reports, turned into a status at the C boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) code: iree_status_code_t,
    pub(crate) message: String,
}

/// The mock's internal result type.
pub(crate) type MockResult<T = ()> = Result<T, Failure>;

impl Failure {
    /// A failure with a non-OK `code`.
    pub(crate) fn new(code: iree_status_code_t, message: impl Into<String>) -> Failure {
        assert_ne!(code, IREE_STATUS_OK, "a failure needs an error code");
        Failure {
            code,
            message: message.into(),
        }
    }

    /// Allocates status storage holding the failure.
    pub(crate) fn into_status(self) -> iree_status_t {
        let storage = registry::create(StatusStorage {
            code: self.code,
            message: self.message.into(),
        });
        storage
            .as_ptr()
            .cast::<iree_status_handle_t>()
            .map_addr(|addr| addr | self.code as usize)
    }
}

/// `Ok` as the null status, a failure as an allocated one.
pub(crate) fn to_status(result: MockResult) -> iree_status_t {
    match result {
        Ok(()) => std::ptr::null_mut(),
        Err(failure) => failure.into_status(),
    }
}

/// Hands a created object to a C caller: writes it to `out` (null on
/// failure) and returns the status.
///
/// # Safety
/// `out` is valid for writes.
pub(crate) unsafe fn return_object<T: Object, C>(
    out: *mut *mut C,
    result: MockResult<Owned<T>>,
) -> iree_status_t {
    let (object, status) = match result {
        Ok(object) => (object.into_raw().cast(), std::ptr::null_mut()),
        Err(failure) => (std::ptr::null_mut(), failure.into_status()),
    };
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { *out = object };
    status
}

/// What a non-bare status points at.
#[repr(align(32))]
struct StatusStorage {
    code: iree_status_code_t,
    message: Box<str>,
}

const _: () = assert!(align_of::<StatusStorage>() > IREE_STATUS_CODE_MASK as usize);

impl Object for StatusStorage {
    fn kind(&self) -> Kind {
        Kind::Status
    }
}

/// The storage behind `status`, if it has any.
fn storage(status: iree_status_t) -> Option<*const StatusStorage> {
    let base = status.map_addr(|addr| addr & !(IREE_STATUS_CODE_MASK as usize));
    (!base.is_null()).then(|| base.cast_const().cast())
}

/// IREE's name for a status code (`iree_status_code_string`).
fn code_name(code: iree_status_code_t) -> &'static str {
    match code {
        IREE_STATUS_OK => "OK",
        IREE_STATUS_CANCELLED => "CANCELLED",
        IREE_STATUS_UNKNOWN => "UNKNOWN",
        IREE_STATUS_INVALID_ARGUMENT => "INVALID_ARGUMENT",
        IREE_STATUS_DEADLINE_EXCEEDED => "DEADLINE_EXCEEDED",
        IREE_STATUS_NOT_FOUND => "NOT_FOUND",
        IREE_STATUS_ALREADY_EXISTS => "ALREADY_EXISTS",
        IREE_STATUS_PERMISSION_DENIED => "PERMISSION_DENIED",
        IREE_STATUS_RESOURCE_EXHAUSTED => "RESOURCE_EXHAUSTED",
        IREE_STATUS_FAILED_PRECONDITION => "FAILED_PRECONDITION",
        IREE_STATUS_ABORTED => "ABORTED",
        IREE_STATUS_OUT_OF_RANGE => "OUT_OF_RANGE",
        IREE_STATUS_UNIMPLEMENTED => "UNIMPLEMENTED",
        IREE_STATUS_INTERNAL => "INTERNAL",
        IREE_STATUS_UNAVAILABLE => "UNAVAILABLE",
        IREE_STATUS_DATA_LOSS => "DATA_LOSS",
        IREE_STATUS_UNAUTHENTICATED => "UNAUTHENTICATED",
        IREE_STATUS_DEFERRED => "DEFERRED",
        IREE_STATUS_INCOMPATIBLE => "INCOMPATIBLE",
        _ => "UNKNOWN_STATUS",
    }
}

/// `CODE_NAME; message`, or the bare code name.
///
/// # Safety
/// `status` is OK, a bare code, or a status from this mock not yet freed.
unsafe fn text(status: iree_status_t) -> String {
    let name = code_name(iree_status_code(status));
    match storage(status) {
        None => name.to_owned(),
        Some(storage) => {
            // SAFETY: the caller guarantees the status is not freed; `get`
            // checks it is live status storage.
            let storage = unsafe { registry::get(storage) };
            debug_assert_eq!(storage.code, iree_status_code(status));
            if storage.message.is_empty() {
                name.to_owned()
            } else {
                format!("{name}; {}", storage.message)
            }
        }
    }
}

/// `iree_status_free`: frees the status storage, if any.
///
/// # Safety
/// `status` is OK, a bare code, or a status from this mock that nobody else
/// frees.
pub(crate) unsafe fn iree_status_free(status: iree_status_t) {
    if let Some(storage) = storage(status) {
        // SAFETY: the storage came from `registry::create` (caller's
        // contract); the registry panics on a double free.
        unsafe { registry::release(storage) }
    }
}

/// `iree_status_format`, with IREE's snprintf semantics: `out_buffer_length`
/// always receives the full length (without the NUL); as much as fits in
/// `buffer_capacity - 1` bytes is written, NUL-terminated. Returns true (IREE
/// only returns false on an encoding error, which the mock cannot have).
///
/// The text is `CODE_NAME; message` (IREE adds `file:line: ` in front).
///
/// # Safety
/// `status` as for [`iree_status_free`] (not freed); `buffer` is null or
/// has room for `buffer_capacity` bytes; `out_buffer_length` is valid.
pub(crate) unsafe fn iree_status_format(
    status: iree_status_t,
    buffer_capacity: iree_host_size_t,
    buffer: *mut c_char,
    out_buffer_length: *mut iree_host_size_t,
) -> bool {
    // SAFETY: forwarded from this function's contract.
    let text = unsafe { text(status) };
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { *out_buffer_length = text.len() };
    if !buffer.is_null() && buffer_capacity > 0 {
        let written = text.len().min(buffer_capacity - 1);
        // SAFETY: `buffer` has room for `buffer_capacity` bytes, and
        // `written + 1 <= buffer_capacity`; the text is a separate allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buffer.cast::<u8>(), written);
            *buffer.add(written) = 0;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(status: iree_status_t, capacity: usize) -> (String, usize) {
        let mut buffer = vec![0x7fu8; capacity];
        let mut length = 0;
        // SAFETY: `buffer` holds `capacity` bytes; the status is live.
        let complete = unsafe {
            iree_status_format(
                status,
                capacity,
                if capacity == 0 {
                    std::ptr::null_mut()
                } else {
                    buffer.as_mut_ptr().cast()
                },
                &mut length,
            )
        };
        assert!(complete);
        let end = buffer.iter().position(|&b| b == 0).unwrap_or(0);
        (String::from_utf8(buffer[..end].to_vec()).unwrap(), length)
    }

    #[test]
    fn formats_code_and_message_with_snprintf_semantics() {
        let _serial = crate::mock::serial();
        let status = Failure::new(IREE_STATUS_NOT_FOUND, "no such thing").into_status();
        assert_eq!(iree_status_code(status), IREE_STATUS_NOT_FOUND);
        let full = "NOT_FOUND; no such thing";
        assert_eq!(format(status, 0), (String::new(), full.len()));
        assert_eq!(
            format(status, full.len() + 1),
            (full.to_owned(), full.len())
        );
        assert_eq!(format(status, 10), ("NOT_FOUND".to_owned(), full.len()));
        assert_eq!(crate::mock::live_objects().statuses, 1);
        // SAFETY: the status is ours and freed once.
        unsafe { iree_status_free(status) };
        assert_eq!(crate::mock::live_objects().statuses, 0);
    }

    #[test]
    fn bare_codes_and_ok_have_no_storage() {
        let bare = std::ptr::without_provenance_mut(IREE_STATUS_UNIMPLEMENTED as usize);
        assert_eq!(format(bare, 64), ("UNIMPLEMENTED".to_owned(), 13));
        assert_eq!(format(std::ptr::null_mut(), 64), ("OK".to_owned(), 2));
        // SAFETY: bare and OK statuses own nothing; freeing them is a no-op.
        unsafe {
            iree_status_free(bare);
            iree_status_free(std::ptr::null_mut());
        }
    }

    #[test]
    fn ok_results_are_null_statuses() {
        assert!(to_status(Ok(())).is_null());
    }
}
