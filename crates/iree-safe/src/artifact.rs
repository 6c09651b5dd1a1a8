//! The `.vmfb` bytes of a loaded module, in storage that IREE frees.
//!
//! IREE's bytecode module borrows its archive for as long as the *IREE*
//! module lives, and constant buffers may alias the archive past the Rust
//! wrapper's life. So the bytes are copied into 64-byte aligned storage
//! (zero-copy constants need 64) and handed to IREE together with an
//! allocator whose only job is to free that storage when IREE destroys the
//! module (`iree_allocator_free(archive_allocator, data)`).

use std::alloc::Layout;
use std::ffi::c_void;
use std::ptr::NonNull;

use crate::error::{Error, Result};
use crate::sys;

/// Alignment of the copy: what IREE recommends for zero-copy constants.
pub(crate) const ARTIFACT_ALIGNMENT: usize = 64;

/// A 64-byte aligned copy of a `.vmfb`, owned until [`into_iree`] hands it
/// to IREE (or freed on drop if that never happens, e.g. when loading fails).
///
/// [`into_iree`]: AlignedArtifact::into_iree
#[derive(Debug)]
pub(crate) struct AlignedArtifact {
    ptr: NonNull<u8>,
    len: usize,
}

impl AlignedArtifact {
    /// Copies `bytes`. An empty slice is an error (nothing to load), and so
    /// is a copy that cannot be allocated.
    pub(crate) fn copy_of(bytes: &[u8]) -> Result<Self> {
        let layout = layout(bytes.len()).ok_or_else(|| {
            Error::InvalidArgument("cannot load an empty (or impossibly large) .vmfb".into())
        })?;
        // SAFETY: `layout` has a non-zero size (checked in `layout`).
        let ptr = NonNull::new(unsafe { std::alloc::alloc(layout) })
            .ok_or(Error::HostAllocation { bytes: bytes.len() })?;
        // SAFETY: the fresh allocation holds `bytes.len()` bytes and cannot
        // overlap `bytes`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.as_ptr(), bytes.len()) };
        Ok(AlignedArtifact {
            ptr,
            len: bytes.len(),
        })
    }

    pub(crate) fn span(&self) -> sys::iree_const_byte_span_t {
        sys::iree_make_const_byte_span(self.ptr.as_ptr(), self.len)
    }

    /// The allocator that frees this storage; pass it with [`span`] to
    /// `iree_vm_bytecode_module_create`, then call [`into_iree`] once IREE
    /// has accepted the archive.
    ///
    /// [`span`]: AlignedArtifact::span
    /// [`into_iree`]: AlignedArtifact::into_iree
    pub(crate) fn deallocator(&self) -> sys::iree_allocator_t {
        // The length travels in `self`, so the callback can rebuild the layout.
        sys::iree_allocator_t {
            self_: std::ptr::without_provenance_mut(self.len),
            ctl: Some(free_artifact),
        }
    }

    /// Gives up ownership: IREE now frees the storage through
    /// [`deallocator`](AlignedArtifact::deallocator).
    pub(crate) fn into_iree(self) {
        std::mem::forget(self);
    }
}

impl Drop for AlignedArtifact {
    fn drop(&mut self) {
        let layout = layout(self.len).expect("the layout was valid at allocation");
        // SAFETY: `ptr` was allocated with this layout and is still owned by us.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) }
    }
}

fn layout(len: usize) -> Option<Layout> {
    if len == 0 {
        return None;
    }
    Layout::from_size_align(len, ARTIFACT_ALIGNMENT).ok()
}

/// `iree_allocator_ctl_fn_t` that frees an [`AlignedArtifact`]'s storage.
/// `self_` carries the length; every command but FREE is refused.
unsafe extern "C" fn free_artifact(
    self_: *mut c_void,
    command: sys::iree_allocator_command_t,
    _params: *const c_void,
    inout_ptr: *mut *mut c_void,
) -> sys::iree_status_t {
    if command != sys::IREE_ALLOCATOR_COMMAND_FREE || inout_ptr.is_null() {
        // A bare status code is a valid (payload-free) IREE status.
        return std::ptr::without_provenance_mut(sys::IREE_STATUS_UNIMPLEMENTED as usize);
    }
    // SAFETY: IREE passes a pointer to the data pointer it was given with
    // this allocator, i.e. the start of an `AlignedArtifact` allocation whose
    // length is `self_`.
    unsafe {
        let ptr = *inout_ptr;
        if let (Some(layout), false) = (layout(self_.addr()), ptr.is_null()) {
            std::alloc::dealloc(ptr.cast(), layout);
        }
        *inout_ptr = std::ptr::null_mut();
    }
    std::ptr::null_mut()
}
