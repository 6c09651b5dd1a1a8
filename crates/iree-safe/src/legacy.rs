//! **Not an API to build on.** The ping-pong demo's reproduction of the
//! original per-artifact layout, kept only to measure it against the shared runtime: a
//! whole IREE runtime (runtime instance + device + session) per compiled
//! artifact.
//!
//! Compiled only with the `legacy-demo` feature, which the `pingpong` demo
//! binary turns on. docs/architecture.md ("Why one runtime")
//! explains why this layout leaks: every recompile built one of these and
//! kept it forever (~117 KB each on local-sync, ~2.2 MB on local-task,
//! ~106 MB observed in the original application). Use [`Runtime`](crate::Runtime) instead.

use crate::artifact::AlignedArtifact;
use crate::error::{check, Error, Result};
use crate::handle::Handle;
use crate::{strings, sys, transfer};

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
    ///
    /// # Errors
    ///
    /// [`Error::Iree`] when the driver cannot be opened
    /// or the artifact loaded.
    pub fn new(driver: &str, vmfb: &[u8]) -> Result<LegacySession> {
        let artifact = AlignedArtifact::copy_of(vmfb)?;
        let allocator = sys::iree_allocator_system();
        // SAFETY: the options struct is plain data initialized by IREE.
        let mut options = unsafe { std::mem::zeroed() };
        // SAFETY: `options` is initialized by IREE before use; on success the
        // constructor stores one instance reference that is ours.
        let instance = unsafe {
            sys::iree_runtime_instance_options_initialize(&mut options);
            sys::iree_runtime_instance_options_use_all_available_drivers(&mut options);
            Handle::create(|out| sys::iree_runtime_instance_create(&options, allocator, out))
        }?;
        // SAFETY: live instance; `driver` outlives the call; on success one
        // device reference is ours.
        let device = unsafe {
            Handle::create(|out| {
                sys::iree_runtime_instance_try_create_default_device(
                    instance.as_ptr(),
                    strings::view(driver),
                    out,
                )
            })
        }?;
        // SAFETY: plain data initialized by IREE.
        let mut session_options = unsafe { std::mem::zeroed() };
        // SAFETY: live instance and device, which the session retains; on
        // success one session reference is ours.
        let session = unsafe {
            sys::iree_runtime_session_options_initialize(&mut session_options);
            Handle::create(|out| {
                sys::iree_runtime_session_create_with_device(
                    instance.as_ptr(),
                    &session_options,
                    device.as_ptr(),
                    sys::iree_runtime_instance_host_allocator(instance.as_ptr()),
                    out,
                )
            })
        }?;
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

    /// Calls `qualified_name` (`module.function`) with f32 tensors, each
    /// given as its shape and data, and returns its first result, copied to
    /// the host.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when a
    /// shape does not match its data, and [`Error::Iree`]
    /// when IREE refuses the call or its result.
    pub fn call_f32(
        &mut self,
        qualified_name: &str,
        inputs: &[(&[usize], &[f32])],
    ) -> Result<Vec<f32>> {
        for (shape, data) in inputs {
            let expected: usize = shape.iter().product();
            if expected != data.len() {
                return Err(Error::InvalidArgument(format!(
                    "shape {shape:?} needs {expected} elements, got {}",
                    data.len()
                )));
            }
        }
        // SAFETY: `call` is initialized by IREE before use and deinitialized
        // on every path below; the session and device are live.
        unsafe {
            let mut call = std::mem::zeroed();
            check(sys::iree_runtime_call_initialize_by_name(
                self.session.as_ptr(),
                strings::view(qualified_name),
                &mut call,
            ))?;
            let result = self.invoke(&mut call, inputs);
            sys::iree_runtime_call_deinitialize(&mut call);
            result
        }
    }

    /// # Safety
    /// `call` was initialized on this session.
    unsafe fn invoke(
        &self,
        call: &mut sys::iree_runtime_call_t,
        inputs: &[(&[usize], &[f32])],
    ) -> Result<Vec<f32>> {
        for (shape, data) in inputs {
            // SAFETY: the device is live and the session's allocator is its;
            // the byte view covers exactly `data` (f32 has no padding).
            let input = unsafe {
                transfer::to_device(
                    self.device.as_ptr(),
                    sys::iree_runtime_session_device_allocator(self.session.as_ptr()),
                    shape,
                    sys::IREE_HAL_ELEMENT_TYPE_FLOAT_32,
                    std::slice::from_raw_parts(data.as_ptr().cast(), std::mem::size_of_val(*data)),
                )
            }?;
            // SAFETY: `call` is initialized (caller's contract) and live; the
            // call retains the buffer view it is given.
            unsafe {
                check(sys::iree_runtime_call_inputs_push_back_buffer_view(
                    call,
                    input.as_ptr(),
                ))?;
            }
        }
        // SAFETY: `call` is initialized (caller's contract) and live.
        unsafe { check(sys::iree_runtime_call_invoke(call, 0))? };
        // SAFETY: `call` is live; on success the caller owns one reference to
        // the popped output.
        let output = unsafe {
            Handle::create(|out| sys::iree_runtime_call_outputs_pop_front_buffer_view(call, out))
        }?;
        // SAFETY: the output was produced on our device and is owned here.
        unsafe { transfer::to_host::<f32>(self.device.as_ptr(), output.as_ptr()) }
    }
}
