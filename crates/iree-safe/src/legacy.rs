//! Sheaf's original layout, kept only to measure it: a whole IREE runtime
//! (runtime instance + device + session) per compiled artifact.
//!
//! DESIGN.md section 1 explains why this leaks: every recompile built one of
//! these and kept it forever (~117 KB each on local-sync, ~2.2 MB on
//! local-task, ~106 MB observed in Sheaf). The `pingpong` demo of
//! `sheaf-integration` uses [`LegacySession`] to reproduce that growth side
//! by side with the shared [`Runtime`](crate::Runtime). New code should not
//! use it.

use crate::artifact::AlignedArtifact;
use crate::element::Element;
use crate::error::{check, Error, Result};
use crate::handle::Handle;
use crate::sys;
use crate::tensor::{copy_to_device, copy_to_host};

/// One artifact in its own runtime instance, device and session.
///
/// Corresponds to `iree_runtime_instance_create`,
/// `iree_runtime_instance_try_create_default_device`,
/// `iree_runtime_session_create_with_device` and
/// `iree_runtime_session_append_bytecode_module_from_memory`. Sessions are
/// thread-compatible: `Send`, not `Sync`.
#[derive(Debug)]
pub struct LegacySession {
    // Field order is drop order: session, then device, then instance.
    session: Handle<sys::iree_runtime_session_t>,
    device: Handle<sys::iree_hal_device_t>,
    _instance: Handle<sys::iree_runtime_instance_t>,
}

// SAFETY: the session is thread-compatible: it may move between threads as
// long as one thread uses it at a time, which `&mut self` on `call_f32`
// guarantees (and the type is not `Sync`).
unsafe impl Send for LegacySession {}

impl LegacySession {
    /// Builds a new runtime instance, device and session on `driver` and
    /// loads `vmfb` into it (the bytes are copied).
    pub fn new(driver: &str, vmfb: &[u8]) -> Result<LegacySession> {
        let artifact = AlignedArtifact::copy_of(vmfb)
            .ok_or_else(|| Error::InvalidArgument("cannot load an empty .vmfb artifact".into()))?;
        let allocator = sys::iree_allocator_system();
        // SAFETY: the options struct is plain data initialized by IREE.
        let mut options = unsafe { std::mem::zeroed() };
        let mut instance = std::ptr::null_mut();
        // SAFETY: valid pointers; on success we own one instance reference.
        unsafe {
            sys::iree_runtime_instance_options_initialize(&mut options);
            sys::iree_runtime_instance_options_use_all_available_drivers(&mut options);
            check(sys::iree_runtime_instance_create(
                &options,
                allocator,
                &mut instance,
            ))?;
        }
        // SAFETY: a successful create returned a live instance we own.
        let instance =
            unsafe { Handle::adopt(instance) }.expect("instance create returned OK and null");
        let mut device = std::ptr::null_mut();
        // SAFETY: live instance; `driver` outlives the call.
        unsafe {
            check(sys::iree_runtime_instance_try_create_default_device(
                instance.as_ptr(),
                sys::iree_make_string_view(driver.as_ptr().cast(), driver.len()),
                &mut device,
            ))
        }?;
        // SAFETY: a successful create returned a live device we own.
        let device = unsafe { Handle::adopt(device) }.expect("device create returned OK and null");
        // SAFETY: plain data initialized by IREE.
        let mut session_options = unsafe { std::mem::zeroed() };
        let mut session = std::ptr::null_mut();
        // SAFETY: live instance and device; the session retains both.
        unsafe {
            sys::iree_runtime_session_options_initialize(&mut session_options);
            check(sys::iree_runtime_session_create_with_device(
                instance.as_ptr(),
                &session_options,
                device.as_ptr(),
                sys::iree_runtime_instance_host_allocator(instance.as_ptr()),
                &mut session,
            ))?;
        }
        // SAFETY: a successful create returned a live session we own.
        let session =
            unsafe { Handle::adopt(session) }.expect("session create returned OK and null");
        // Unlike `iree_vm_bytecode_module_create`, this call always consumes
        // the archive, freeing it through the deallocator even when it fails
        // (runtime/session.c), so ownership passes to IREE before the check.
        let (span, deallocator) = (artifact.span(), artifact.deallocator());
        artifact.into_iree();
        // SAFETY: the span points at the live artifact storage, which IREE
        // now owns and frees through `deallocator` on every path.
        unsafe {
            check(
                sys::iree_runtime_session_append_bytecode_module_from_memory(
                    session.as_ptr(),
                    span,
                    deallocator,
                ),
            )
        }?;
        Ok(LegacySession {
            session,
            device,
            _instance: instance,
        })
    }

    /// Calls `qualified_name` (`module.function`) with one f32 tensor and
    /// returns its first result, copied to the host.
    pub fn call_f32(
        &mut self,
        qualified_name: &str,
        shape: &[usize],
        data: &[f32],
    ) -> Result<Vec<f32>> {
        let expected: usize = shape.iter().product();
        if expected != data.len() {
            return Err(Error::InvalidArgument(format!(
                "shape {shape:?} needs {expected} elements, got {}",
                data.len()
            )));
        }
        // SAFETY: `call` is initialized by IREE before use and deinitialized
        // on every path below; the session and device are live.
        unsafe {
            let mut call = std::mem::zeroed();
            check(sys::iree_runtime_call_initialize_by_name(
                self.session.as_ptr(),
                sys::iree_make_string_view(qualified_name.as_ptr().cast(), qualified_name.len()),
                &mut call,
            ))?;
            let result = self.invoke(&mut call, shape, data);
            sys::iree_runtime_call_deinitialize(&mut call);
            result
        }
    }

    /// # Safety
    /// `call` was initialized on this session.
    unsafe fn invoke(
        &self,
        call: &mut sys::iree_runtime_call_t,
        shape: &[usize],
        data: &[f32],
    ) -> Result<Vec<f32>> {
        // SAFETY: the device is live and the session's allocator is its; the
        // byte view covers exactly `data` (f32 has no padding).
        let input = unsafe {
            copy_to_device(
                self.device.as_ptr(),
                sys::iree_runtime_session_device_allocator(self.session.as_ptr()),
                shape,
                sys::IREE_HAL_ELEMENT_TYPE_FLOAT_32,
                std::slice::from_raw_parts(data.as_ptr().cast(), std::mem::size_of_val(data)),
            )
        }?;
        // SAFETY: `call` is initialized (caller's contract) and live.
        unsafe {
            check(sys::iree_runtime_call_inputs_push_back_buffer_view(
                call,
                input.as_ptr(),
            ))?;
            check(sys::iree_runtime_call_invoke(call, 0))?;
        }
        let mut output = std::ptr::null_mut();
        // SAFETY: on success the caller owns one reference to `output`.
        unsafe {
            check(sys::iree_runtime_call_outputs_pop_front_buffer_view(
                call,
                &mut output,
            ))
        }?;
        // SAFETY: as above.
        let output = unsafe { Handle::adopt(output) }.expect("output pop returned OK and null");
        // SAFETY: the output was produced on our device and is owned here.
        let bytes = unsafe { copy_to_host(self.device.as_ptr(), output.as_ptr()) }?;
        Ok(bytes.chunks_exact(4).map(<f32 as Element>::read).collect())
    }
}
