//! **Not an API to build on.** The ping-pong demo's reproduction of the
//! original per-artifact layout, kept only to measure it against the shared
//! runtime: a whole IREE runtime (runtime instance + device + session) per
//! compiled artifact. docs/architecture.md ("One runtime per process")
//! explains why this layout leaks: every recompile built one of these and
//! kept it forever (~117 KB each on local-sync, ~2.2 MB on local-task, ~106 MB
//! observed in Sheaf). Use `iree_safe::Runtime` instead.
//!
//! iree-safe deliberately has no such layout, so this module calls IREE's
//! high-level runtime API (`iree/runtime/api.h`) through `iree-sys`
//! directly, with the same rules as iree-safe: each `unsafe` block says
//! which header promise it relies on, every status is freed once, every
//! reference released once.

use std::ptr::NonNull;

use anyhow::{bail, ensure, Context as _};
use iree_sys as sys;

/// Turns an IREE status into a `Result`, freeing it when it is not OK.
///
/// # Safety
/// `status` was returned by IREE and nobody else frees it.
unsafe fn check(status: sys::iree_status_t) -> anyhow::Result<()> {
    if sys::iree_status_is_ok(status) {
        return Ok(());
    }
    let mut length = 0usize;
    // SAFETY: a zero-capacity query writes only the length the message needs
    // (`iree_status_format`, iree/base/status.h); the status stays ours.
    unsafe { sys::iree_status_format(status, 0, std::ptr::null_mut(), &mut length) };
    let mut buffer = vec![0u8; length + 1];
    let mut written = 0usize;
    // SAFETY: `buffer` holds `buffer.len()` bytes, the capacity passed.
    let complete = unsafe {
        sys::iree_status_format(
            status,
            buffer.len(),
            buffer.as_mut_ptr().cast(),
            &mut written,
        )
    };
    // SAFETY: the status is ours (this function's contract) and freed here
    // once, after its last use.
    unsafe { sys::iree_status_free(status) };
    buffer.truncate(if complete { written.min(length) } else { 0 });
    bail!("IREE: {}", String::from_utf8_lossy(&buffer))
}

/// A view of `text` for a call that does not keep it (IREE copies what it
/// keeps).
fn view(text: &str) -> sys::iree_string_view_t {
    sys::iree_make_string_view(text.as_ptr().cast(), text.len())
}

/// One reference to an IREE object, released on drop.
macro_rules! owned {
    ($(#[$doc:meta])* $name:ident: $c:ty => $release:path) => {
        $(#[$doc])*
        #[derive(Debug)]
        struct $name(NonNull<$c>);

        impl $name {
            /// Adopts the reference a successful `create` wrote.
            ///
            /// # Safety
            /// `create` writes one owned reference into its out-pointer
            /// when it returns OK, as IREE's `*_create` functions do.
            unsafe fn create(
                create: impl FnOnce(*mut *mut $c) -> sys::iree_status_t,
            ) -> anyhow::Result<Self> {
                let mut out = std::ptr::null_mut();
                // SAFETY: the status is IREE's and freed once by `check`.
                unsafe { check(create(&mut out)) }?;
                let out = NonNull::new(out)
                    .context(concat!("IREE returned OK but no ", stringify!($c)))?;
                Ok($name(out))
            }

            fn as_ptr(&self) -> *mut $c {
                self.0.as_ptr()
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: `self` owns one reference, given back once here.
                unsafe { $release(self.0.as_ptr()) }
            }
        }
    };
}

owned!(
    /// `iree_runtime_instance_t` (iree/runtime/instance.h).
    Instance: sys::iree_runtime_instance_t => sys::iree_runtime_instance_release
);
owned!(
    /// `iree_hal_device_t` (iree/hal/device.h).
    Device: sys::iree_hal_device_t => sys::iree_hal_device_release
);
owned!(
    /// `iree_runtime_session_t` (iree/runtime/session.h).
    Session: sys::iree_runtime_session_t => sys::iree_runtime_session_release
);
owned!(
    /// `iree_hal_buffer_view_t` (iree/hal/buffer_view.h).
    BufferView: sys::iree_hal_buffer_view_t => sys::iree_hal_buffer_view_release
);

/// A 64-byte aligned block: the storage unit of [`Artifact`].
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Block([u8; 64]);

/// A `.vmfb` copied into 64-byte aligned storage, as IREE's bytecode
/// loader wants its flatbuffer (iree/vm/bytecode/module.h).
struct Artifact {
    blocks: Vec<Block>,
    len: usize,
}

impl Artifact {
    fn copy_of(bytes: &[u8]) -> Artifact {
        let mut blocks = vec![Block([0; 64]); bytes.len().div_ceil(64)];
        for (block, chunk) in blocks.iter_mut().zip(bytes.chunks(64)) {
            block.0[..chunk.len()].copy_from_slice(chunk);
        }
        Artifact {
            blocks,
            len: bytes.len(),
        }
    }

    fn span(&self) -> sys::iree_const_byte_span_t {
        sys::iree_make_const_byte_span(self.blocks.as_ptr().cast(), self.len)
    }
}

impl std::fmt::Debug for Artifact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Artifact({} bytes)", self.len)
    }
}

/// One artifact in its own runtime instance, device and session.
///
/// Corresponds to `iree_runtime_instance_create`,
/// `iree_runtime_instance_try_create_default_device`,
/// `iree_runtime_session_create_with_device` and
/// `iree_runtime_session_append_bytecode_module_from_memory`. Sessions are
/// thread-compatible (iree/runtime/session.h): `Send`, not `Sync`.
#[derive(Debug)]
pub struct LegacySession {
    // Field order is drop order: the session (and the module in it), then
    // the device and the instance, then the bytes the module was loaded
    // from, which the module reads until it is gone.
    session: Session,
    device: Device,
    _instance: Instance,
    _artifact: Artifact,
}

// SAFETY: IREE's sessions are thread-compatible (iree/runtime/session.h):
// one may move between threads as long as one thread uses it at a time,
// which `&mut self` on `call_f32` guarantees (and the type is not `Sync`).
// The device and instance are thread-safe; the artifact is plain bytes.
unsafe impl Send for LegacySession {}

impl LegacySession {
    /// Builds a new runtime instance, device and session on `driver` and
    /// loads `vmfb` into it (the bytes are copied).
    ///
    /// # Errors
    ///
    /// IREE's message when the driver cannot be opened or the artifact
    /// loaded.
    pub fn new(driver: &str, vmfb: &[u8]) -> anyhow::Result<LegacySession> {
        ensure!(!vmfb.is_empty(), "cannot load an empty .vmfb");
        let artifact = Artifact::copy_of(vmfb);
        let mut options = std::mem::MaybeUninit::<sys::iree_runtime_instance_options_t>::zeroed();
        // SAFETY: `iree_runtime_instance_options_initialize` fills the whole
        // struct and `..._use_all_available_drivers` sets its driver
        // registry (iree/runtime/instance.h); on success the instance
        // written to `out` is one reference that is ours.
        let instance = unsafe {
            sys::iree_runtime_instance_options_initialize(options.as_mut_ptr());
            sys::iree_runtime_instance_options_use_all_available_drivers(options.as_mut_ptr());
            let options = options.assume_init();
            Instance::create(|out| {
                sys::iree_runtime_instance_create(&options, sys::iree_allocator_system(), out)
            })
        }
        .context("cannot create an IREE runtime instance")?;
        // SAFETY: the instance is live and `driver` outlives the call (IREE
        // copies what it keeps); on success one device reference is ours.
        let device = unsafe {
            Device::create(|out| {
                sys::iree_runtime_instance_try_create_default_device(
                    instance.as_ptr(),
                    view(driver),
                    out,
                )
            })
        }
        .with_context(|| format!("cannot open a `{driver}` device"))?;
        let mut session_options = sys::iree_runtime_session_options_t::default();
        // SAFETY: initializing the options only writes them
        // (iree/runtime/session.h); the instance and the device are live and
        // the session retains them; on success one session reference is
        // ours.
        let session = unsafe {
            sys::iree_runtime_session_options_initialize(&mut session_options);
            Session::create(|out| {
                sys::iree_runtime_session_create_with_device(
                    instance.as_ptr(),
                    &session_options,
                    device.as_ptr(),
                    sys::iree_runtime_instance_host_allocator(instance.as_ptr()),
                    out,
                )
            })
        }
        .context("cannot create an IREE runtime session")?;
        // SAFETY: the span covers the artifact's bytes, which stay valid and
        // unchanged until after the session is released (field order); with
        // the null deallocator IREE never frees them
        // (`iree_runtime_session_append_bytecode_module_from_memory`,
        // iree/runtime/session.h). The status is freed once by `check`.
        unsafe {
            check(
                sys::iree_runtime_session_append_bytecode_module_from_memory(
                    session.as_ptr(),
                    artifact.span(),
                    sys::iree_allocator_null(),
                ),
            )
        }
        .context("cannot load the artifact into the session")?;
        Ok(LegacySession {
            session,
            device,
            _instance: instance,
            _artifact: artifact,
        })
    }

    /// Calls `qualified_name` (`module.function`) with f32 tensors, each
    /// given as its shape and data, and returns its first result, copied to
    /// the host.
    ///
    /// # Errors
    ///
    /// When a shape does not match its data, or IREE refuses the call or
    /// its result (with IREE's message).
    pub fn call_f32(
        &mut self,
        qualified_name: &str,
        inputs: &[(&[usize], &[f32])],
    ) -> anyhow::Result<Vec<f32>> {
        for (shape, data) in inputs {
            let expected: usize = shape.iter().product();
            ensure!(
                expected == data.len(),
                "shape {shape:?} needs {expected} elements, got {}",
                data.len()
            );
        }
        let mut call = std::mem::MaybeUninit::<sys::iree_runtime_call_t>::zeroed();
        // SAFETY: the session is live; `qualified_name` outlives the call.
        // On success the call is initialized (iree/runtime/call.h) and
        // deinitialized below on every path; on failure it was not
        // initialized and must not be.
        unsafe {
            check(sys::iree_runtime_call_initialize_by_name(
                self.session.as_ptr(),
                view(qualified_name),
                call.as_mut_ptr(),
            ))?;
            let result = self.invoke(call.as_mut_ptr(), inputs);
            sys::iree_runtime_call_deinitialize(call.as_mut_ptr());
            result
        }
    }

    /// # Safety
    /// `call` was initialized on this session and not yet deinitialized.
    unsafe fn invoke(
        &self,
        call: *mut sys::iree_runtime_call_t,
        inputs: &[(&[usize], &[f32])],
    ) -> anyhow::Result<Vec<f32>> {
        for (shape, data) in inputs {
            let input = self.upload(shape, data)?;
            // SAFETY: `call` is initialized (this function's contract); the
            // call's input list retains the buffer view it is given
            // (iree/runtime/call.h), so ours is released on drop.
            unsafe {
                check(sys::iree_runtime_call_inputs_push_back_buffer_view(
                    call,
                    input.as_ptr(),
                ))
            }?;
        }
        // SAFETY: `call` is initialized (this function's contract).
        unsafe { check(sys::iree_runtime_call_invoke(call, 0)) }?;
        // SAFETY: `call` is initialized; on success the popped output is one
        // reference that is ours (iree/runtime/call.h).
        let output = unsafe {
            BufferView::create(|out| {
                sys::iree_runtime_call_outputs_pop_front_buffer_view(call, out)
            })
        }?;
        self.download(&output)
    }

    /// A device-local buffer view holding a copy of `data`.
    fn upload(&self, shape: &[usize], data: &[f32]) -> anyhow::Result<BufferView> {
        let params = sys::iree_hal_buffer_params_t {
            usage: sys::IREE_HAL_BUFFER_USAGE_DEFAULT,
            type_: sys::IREE_HAL_MEMORY_TYPE_DEVICE_LOCAL,
            ..Default::default()
        };
        // SAFETY: the device is live and the session's allocator is the
        // device's; `shape` and `data` outlive the call, which copies the
        // data (`iree_hal_buffer_view_allocate_buffer_copy`,
        // iree/hal/buffer_view_util.h); the byte span covers exactly `data`
        // (f32 has no padding); `iree_hal_dim_t` is `usize` on 64-bit hosts.
        // On success one view reference is ours.
        unsafe {
            BufferView::create(|out| {
                sys::iree_hal_buffer_view_allocate_buffer_copy(
                    self.device.as_ptr(),
                    sys::iree_runtime_session_device_allocator(self.session.as_ptr()),
                    shape.len(),
                    shape.as_ptr(),
                    sys::IREE_HAL_ELEMENT_TYPE_FLOAT_32,
                    sys::IREE_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
                    params,
                    sys::iree_make_const_byte_span(
                        data.as_ptr().cast(),
                        std::mem::size_of_val(data),
                    ),
                    out,
                )
            })
        }
    }

    /// The f32 contents of `view`, a result of a call on this device.
    fn download(&self, view: &BufferView) -> anyhow::Result<Vec<f32>> {
        // SAFETY: the view is live (iree/hal/buffer_view.h).
        let (length, element_type) = unsafe {
            (
                sys::iree_hal_buffer_view_byte_length(view.as_ptr()),
                sys::iree_hal_buffer_view_element_type(view.as_ptr()),
            )
        };
        ensure!(
            element_type == sys::IREE_HAL_ELEMENT_TYPE_FLOAT_32,
            "the result is not f32 (IREE element type 0x{element_type:08x})"
        );
        let count = length / std::mem::size_of::<f32>();
        let mut host = vec![0f32; count];
        if length > 0 {
            // SAFETY: the view's buffer lives on this device (the call's
            // result); `host` has room for `count * 4 == length` bytes
            // (IREE's f32 buffers hold whole elements), which the transfer
            // writes (`iree_hal_device_transfer_d2h`, iree/hal/device.h).
            unsafe {
                check(sys::iree_hal_device_transfer_d2h(
                    self.device.as_ptr(),
                    sys::iree_hal_buffer_view_buffer(view.as_ptr()),
                    0,
                    host.as_mut_ptr().cast(),
                    count * std::mem::size_of::<f32>(),
                    sys::IREE_HAL_TRANSFER_BUFFER_FLAG_DEFAULT,
                    sys::iree_infinite_timeout(),
                ))
            }?;
        }
        Ok(host)
    }
}
