//! IREE string views (`iree_string_view_t`) to and from Rust strings.

use crate::sys;

/// A view of `text` for a call that does not keep it past its return (IREE
/// copies what it keeps, e.g. names and URIs).
pub(crate) fn view(text: &str) -> sys::iree_string_view_t {
    sys::iree_make_string_view(text.as_ptr().cast(), text.len())
}

/// Copies an IREE string view into a `String` (invalid UTF-8 is replaced).
///
/// # Safety
/// The view is empty or points at `size` readable bytes.
pub(crate) unsafe fn to_string(view: sys::iree_string_view_t) -> String {
    if view.data.is_null() || view.size == 0 {
        return String::new();
    }
    // SAFETY: forwarded from this function's contract.
    let bytes = unsafe { std::slice::from_raw_parts(view.data.cast::<u8>(), view.size) };
    String::from_utf8_lossy(bytes).into_owned()
}
