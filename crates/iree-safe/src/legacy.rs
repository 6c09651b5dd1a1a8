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
use crate::error::{check, Error, Result};
use crate::handle::Handle;
use crate::sys;

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
        // SAFETY: as in `Module::load`: on success IREE owns the artifact and
        // frees it through its deallocator, on failure we still own it.
        unsafe {
            check(
                sys::iree_runtime_session_append_bytecode_module_from_memory(
                    session.as_ptr(),
                    artifact.span(),
                    artifact.deallocator(),
                ),
            )
        }?;
        artifact.into_iree();
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
        let params = sys::iree_hal_buffer_params_t {
            usage: sys::IREE_HAL_BUFFER_USAGE_DEFAULT,
            type_: sys::IREE_HAL_MEMORY_TYPE_DEVICE_LOCAL,
            ..Default::default()
        };
        let mut input = std::ptr::null_mut();
        // SAFETY: live device and session allocator; `shape`/`data` outlive
        // the copy.
        unsafe {
            check(sys::iree_hal_buffer_view_allocate_buffer_copy(
                self.device.as_ptr(),
                sys::iree_runtime_session_device_allocator(self.session.as_ptr()),
                shape.len(),
                shape.as_ptr(),
                sys::IREE_HAL_ELEMENT_TYPE_FLOAT_32,
                sys::IREE_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
                params,
                sys::iree_make_const_byte_span(data.as_ptr().cast(), std::mem::size_of_val(data)),
                &mut input,
            ))?;
        }
        // SAFETY: `input` is a live view we own; the call retains it on push.
        let input =
            unsafe { Handle::adopt(input) }.expect("buffer view create returned OK and null");
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
        // SAFETY: the view is live.
        let length = unsafe { sys::iree_hal_buffer_view_byte_length(output.as_ptr()) };
        let mut values = vec![0f32; length / std::mem::size_of::<f32>()];
        // SAFETY: the buffer lives on our device; `values` has `length` bytes.
        unsafe {
            check(sys::iree_hal_device_transfer_d2h(
                self.device.as_ptr(),
                sys::iree_hal_buffer_view_buffer(output.as_ptr()),
                0,
                values.as_mut_ptr().cast(),
                length,
                sys::IREE_HAL_TRANSFER_BUFFER_FLAG_DEFAULT,
                sys::iree_infinite_timeout(),
            ))
        }?;
        Ok(values)
    }
}
