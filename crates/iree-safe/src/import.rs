//! Host memory wrapped as a device buffer without a copy: on IREE's CPU
//! drivers (`local-sync`, `local-task`) device memory is host memory, and the
//! heap allocator imports a host allocation as a buffer
//! (`iree_hal_allocator_import_buffer`, `iree/hal/allocator.h`;
//! `iree_hal_heap_allocator_import_buffer` → `iree_hal_heap_buffer_wrap`,
//! `iree/hal/buffer_heap.c`).
//!
//! Ownership: the allocation's owner (an `Arc`) is moved into the buffer's
//! release callback, which IREE calls exactly once, when the last reference
//! to the buffer is released (`iree_hal_heap_buffer_destroy`): after the call
//! that took it returned, or later if a result aliases it or someone keeps
//! the tensor. The memory therefore outlives every use IREE makes of it, and
//! while the callback holds its `Arc` the owner cannot be mutated
//! (`Arc::get_mut` sees the extra reference).
//!
//! IREE calls the callback only for a buffer it made: when the import fails,
//! `iree_hal_heap_buffer_wrap` has not stored it, so the owner is dropped
//! here instead.

use std::ffi::c_void;
use std::sync::Arc;

use crate::error::Result;
use crate::handle::Handle;
use crate::sys;

/// The alignment IREE's heap allocator requires of imported memory
/// (`IREE_HAL_HEAP_BUFFER_ALIGNMENT`, `iree/base/config.h`): compiled code
/// may assume its bindings are this aligned, so memory that is not is
/// copied, never imported with `IREE_HAL_MEMORY_ACCESS_UNALIGNED`.
pub(crate) const IMPORT_ALIGNMENT: usize = 64;

/// Drops the owner an imported buffer kept alive.
///
/// # Safety
/// `user_data` is the pointer `Arc::into_raw` made of an `Arc<O>` in
/// [`import_host`], and this is the one call that gives it back.
unsafe extern "C" fn release_owner<O: Send + Sync + 'static>(
    user_data: *mut c_void,
    _buffer: *mut sys::iree_hal_buffer_t,
) {
    // SAFETY: the function's contract: one `Arc<O>` turned into a raw
    // pointer, given back once.
    drop(unsafe { Arc::from_raw(user_data.cast_const().cast::<O>()) });
}

/// Wraps `bytes`, which `owner` keeps alive and unchanged, as a read-only
/// buffer of `allocator`; the buffer holds `owner` until IREE releases it.
///
/// # Safety
/// `allocator` is a live CPU (heap) allocator; `bytes` points into memory
/// owned by `owner` that stays valid and unchanged while `owner` lives and
/// no one holds it mutably, and is [`IMPORT_ALIGNMENT`]-aligned.
pub(crate) unsafe fn import_host<O: Send + Sync + 'static>(
    allocator: *mut sys::iree_hal_allocator_t,
    owner: Arc<O>,
    bytes: &[u8],
) -> Result<Handle<sys::iree_hal_buffer_t>> {
    let params = sys::iree_hal_buffer_params_t {
        usage: sys::IREE_HAL_BUFFER_USAGE_DEFAULT,
        // Compiled code reads its arguments only: IREE writes to an argument
        // buffer only when the function declares a result tied to it, which
        // this crate's callers do not lower.
        access: sys::IREE_HAL_MEMORY_ACCESS_READ as sys::iree_hal_memory_access_t,
        type_: sys::IREE_HAL_MEMORY_TYPE_DEVICE_LOCAL,
        ..Default::default()
    };
    let mut external = sys::iree_hal_external_buffer_t {
        type_: sys::IREE_HAL_EXTERNAL_BUFFER_TYPE_HOST_ALLOCATION,
        size: bytes.len() as sys::iree_device_size_t,
        ..Default::default()
    };
    external.handle.host_allocation.ptr = bytes.as_ptr().cast_mut().cast();
    let user_data = Arc::into_raw(owner).cast_mut().cast::<c_void>();
    let release = sys::iree_hal_buffer_release_callback_t {
        fn_: Some(release_owner::<O>),
        user_data,
    };
    // SAFETY: the allocator is live (caller's contract); `external` names
    // memory valid for `size` bytes until the callback runs (the caller's
    // contract, and the callback owns `owner`); IREE never writes to it (read
    // access only). On success one buffer reference is ours and the callback
    // belongs to the buffer.
    let imported = unsafe {
        Handle::create(|out| {
            sys::iree_hal_allocator_import_buffer(
                allocator,
                params,
                &raw mut external,
                release,
                out,
            )
        })
    };
    if imported.is_err() {
        // SAFETY: IREE did not keep the callback (module docs): the `Arc` is
        // still ours to give back, once.
        unsafe { release_owner::<O>(user_data, std::ptr::null_mut()) };
    }
    imported
}
