//! IREE string views (`iree_string_view_t`) read and made by the mock
//! itself (the mock knows nothing of the crate that calls it).

use super::api::*;

/// Reads an IREE string view.
///
/// # Safety
/// `view` points at `size` readable bytes (or is empty).
pub(crate) unsafe fn view_str(view: iree_string_view_t) -> String {
    if view.size == 0 {
        return String::new();
    }
    // SAFETY: forwarded from this function's contract.
    let bytes = unsafe { std::slice::from_raw_parts(view.data.cast::<u8>(), view.size) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// A view of `text` (for the mock's unit tests, whose calls do not keep it).
#[cfg(test)]
pub(crate) fn view(text: &str) -> iree_string_view_t {
    iree_make_string_view(text.as_ptr().cast(), text.len())
}
