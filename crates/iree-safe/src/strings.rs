//! IREE string views (`iree_string_view_t`) to and from Rust strings, and
//! string builders (`iree_string_builder_t`) for IREE to write into.

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

/// An `iree_string_builder_t` that IREE appends to (a driver's device
/// report, say), deinitialized (its storage freed) on drop.
pub(crate) struct StringBuilder(sys::iree_string_builder_t);

impl StringBuilder {
    /// An empty builder that grows its storage with `allocator`.
    pub(crate) fn new(allocator: sys::iree_allocator_t) -> StringBuilder {
        let mut raw = sys::iree_string_builder_t::default();
        // SAFETY: `raw` is valid for writes; initializing only zeroes it and
        // stores the allocator (iree/base/string_builder.c).
        unsafe { sys::iree_string_builder_initialize(allocator, &mut raw) };
        StringBuilder(raw)
    }

    /// The builder, for an IREE call that appends to it.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut sys::iree_string_builder_t {
        &mut self.0
    }

    /// A copy of what has been appended.
    pub(crate) fn text(&self) -> String {
        // SAFETY: the builder is initialized; the view it returns covers its
        // `size` bytes of storage (or is empty without storage), valid until
        // the builder is next modified, which cannot happen while `self` is
        // borrowed (iree/base/string_builder.h).
        unsafe { to_string(sys::iree_string_builder_view(&self.0)) }
    }
}

impl Drop for StringBuilder {
    fn drop(&mut self) {
        // SAFETY: the builder is initialized and deinitialized once; this
        // frees its storage with the allocator it was grown with.
        unsafe { sys::iree_string_builder_deinitialize(&mut self.0) };
    }
}
