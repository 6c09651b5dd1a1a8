//! One generic owning handle for IREE's reference-counted objects, and the
//! one way to make one.
//!
//! `Handle<T>` owns one reference: `Drop` calls `T`'s release function and
//! `Clone` calls its retain function. The pairs are listed in one place, the
//! [`refcounted!`] invocation at the bottom of this file. Every IREE
//! constructor of the `status = iree_*_create(..., &out)` shape goes through
//! [`Handle::create`], which checks the status and adopts the reference (in
//! the spirit of git2's `try_call!` + `Binding::from_raw`).

use std::fmt;
use std::ptr::NonNull;

use crate::error::{check, Error, Result};
use crate::sys;

/// An IREE object type with retain/release functions.
///
/// # Safety
/// `retain` and `release` must be the object's matching C functions: each
/// `retain` adds one reference that one `release` gives back, and the object
/// is destroyed when the last reference is released.
pub(crate) unsafe trait Refcounted {
    /// Adds a reference. Safety: `ptr` is live.
    unsafe fn retain(ptr: *mut Self);
    /// Drops a reference. Safety: `ptr` is live and the caller owns the
    /// reference it gives back.
    unsafe fn release(ptr: *mut Self);
}

/// An owned reference to an IREE object.
pub(crate) struct Handle<T: Refcounted>(NonNull<T>);

impl<T: Refcounted> Handle<T> {
    /// Runs an IREE constructor and adopts the reference it returns:
    /// `create` receives the out-parameter and returns the constructor's
    /// status. A failed status becomes the `Err` (the status is freed); a
    /// success that stored null, which IREE never does, is an internal error
    /// rather than a panic.
    ///
    /// # Safety
    /// `create` calls an IREE constructor that, on success, stores in `*out`
    /// one reference to a live `T` that the caller owns, and on failure
    /// stores nothing (or null) and returns a status nobody else frees.
    pub(crate) unsafe fn create(
        create: impl FnOnce(*mut *mut T) -> sys::iree_status_t,
    ) -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer for the call; the status is
        // IREE's and `check` frees it (this function's contract).
        unsafe { check(create(&mut raw)) }?;
        // SAFETY: the constructor succeeded, so `raw` is null or a live
        // object whose one reference is ours (this function's contract).
        unsafe { Handle::adopt(raw) }.ok_or_else(|| {
            Error::internal(format!(
                "an IREE constructor of {} returned OK without an object",
                std::any::type_name::<T>()
            ))
        })
    }

    /// Adopts a reference the caller owns (e.g. from a `*_create` out
    /// parameter). Returns `None` for null.
    ///
    /// # Safety
    /// `ptr` is null or a live object whose one reference the caller gives to
    /// the handle.
    pub(crate) unsafe fn adopt(ptr: *mut T) -> Option<Self> {
        NonNull::new(ptr).map(Handle)
    }

    /// Takes a new reference on an object the caller only borrows.
    ///
    /// # Safety
    /// `ptr` is a live object.
    pub(crate) unsafe fn retain_borrowed(ptr: NonNull<T>) -> Self {
        // SAFETY: the caller guarantees `ptr` is live.
        unsafe { T::retain(ptr.as_ptr()) };
        Handle(ptr)
    }

    /// The raw pointer, still owned by the handle.
    pub(crate) fn as_ptr(&self) -> *mut T {
        self.0.as_ptr()
    }
}

impl<T: Refcounted> Clone for Handle<T> {
    fn clone(&self) -> Self {
        // SAFETY: `self` owns a reference, so the object is live.
        unsafe { Handle::retain_borrowed(self.0) }
    }
}

impl<T: Refcounted> Drop for Handle<T> {
    fn drop(&mut self) {
        // SAFETY: the handle owns exactly one reference and gives it back once.
        unsafe { T::release(self.0.as_ptr()) }
    }
}

impl<T: Refcounted> fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Handle({:p})", self.0)
    }
}

/// Implements [`Refcounted`] for each `type => retain, release` line.
macro_rules! refcounted {
    ($($ty:ident => $retain:ident, $release:ident;)*) => {$(
        // SAFETY: these are the type's own retain/release functions.
        unsafe impl Refcounted for sys::$ty {
            unsafe fn retain(ptr: *mut Self) {
                // SAFETY: forwarded from the trait method's contract.
                unsafe { sys::$retain(ptr) }
            }
            unsafe fn release(ptr: *mut Self) {
                // SAFETY: forwarded from the trait method's contract.
                unsafe { sys::$release(ptr) }
            }
        }
    )*};
}

refcounted! {
    iree_vm_instance_t => iree_vm_instance_retain, iree_vm_instance_release;
    iree_async_proactor_pool_t => iree_async_proactor_pool_retain, iree_async_proactor_pool_release;
    iree_async_frontier_tracker_t => iree_async_frontier_tracker_retain, iree_async_frontier_tracker_release;
    iree_hal_driver_t => iree_hal_driver_retain, iree_hal_driver_release;
    iree_hal_device_t => iree_hal_device_retain, iree_hal_device_release;
    iree_hal_device_group_t => iree_hal_device_group_retain, iree_hal_device_group_release;
    iree_vm_module_t => iree_vm_module_retain, iree_vm_module_release;
    iree_vm_context_t => iree_vm_context_retain, iree_vm_context_release;
    iree_vm_list_t => iree_vm_list_retain, iree_vm_list_release;
    iree_hal_buffer_view_t => iree_hal_buffer_view_retain, iree_hal_buffer_view_release;
    iree_hal_buffer_t => iree_hal_buffer_retain, iree_hal_buffer_release;
}
