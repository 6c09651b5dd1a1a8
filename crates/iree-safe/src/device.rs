//! HAL devices, opened by driver name or device URI.

use crate::error::{check, Result};
use crate::handle::Handle;
use crate::instance::Instance;
use crate::sys;

/// A HAL device (`local-sync`, `local-task`, `cuda`, or a full device URI
/// such as `local-task://`). Cheap to clone: clones share the device.
///
/// Corresponds to `iree_hal_create_device` (with an async proactor pool, as
/// IREE's runtime API creates devices) and `iree_hal_device_retain` /
/// `iree_hal_device_release`. Send + Sync: IREE devices are thread-safe.
#[doc(alias = "iree_hal_device_t")]
#[derive(Debug, Clone)]
pub struct Device {
    raw: Handle<sys::iree_hal_device_t>,
    uri: std::sync::Arc<str>,
}

// SAFETY: HAL devices are thread-safe per IREE's maintainers (DESIGN.md
// section 2); the handle holds one reference with atomic refcounting.
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

impl Device {
    /// Opens the default device of a driver (`"local-sync"`,
    /// `"local-task"`, `"cuda"`) or the device a URI names.
    ///
    /// Fails with `NotFound` when no such driver was compiled into the
    /// runtime (see `cargo xtask build-iree --drivers`).
    #[doc(alias = "iree_hal_create_device")]
    pub fn open(uri: &str) -> Result<Device> {
        Instance::global()?;
        let allocator = sys::iree_allocator_system();
        let mut pool = std::ptr::null_mut();
        // SAFETY: `pool` is a valid out-pointer; the options are IREE's
        // defaults; the pool is released below after the device retained it.
        unsafe {
            check(sys::iree_async_proactor_pool_create(
                sys::iree_numa_node_count(),
                std::ptr::null(),
                sys::iree_async_proactor_pool_options_default(),
                allocator,
                &mut pool,
            ))
        }?;
        let params = sys::iree_hal_device_create_params_t {
            proactor_pool: pool,
            ..sys::iree_hal_device_create_params_default()
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: the registry is a process static, `uri` outlives the call,
        // `params` and `raw` are valid pointers. The device retains the pool,
        // so our reference is given back right after.
        let status = unsafe {
            let status = sys::iree_hal_create_device(
                sys::iree_hal_driver_registry_default(),
                sys::iree_make_string_view(uri.as_ptr().cast(), uri.len()),
                &params,
                allocator,
                &mut raw,
            );
            sys::iree_async_proactor_pool_release(pool);
            status
        };
        // SAFETY: `status` came from IREE and is freed by `check`.
        unsafe { check(status) }.map_err(|e| match e {
            crate::Error::Iree { code, message } => crate::Error::Iree {
                code,
                message: format!("cannot open device `{uri}` (drivers built in: see `cargo xtask build-iree --drivers`): {message}"),
            },
            other => other,
        })?;
        // SAFETY: a successful create returned a live device we own.
        let raw =
            unsafe { Handle::adopt(raw) }.expect("iree_hal_create_device returned OK and null");
        Ok(Device {
            raw,
            uri: uri.into(),
        })
    }

    /// The driver name or URI this device was opened with.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::iree_hal_device_t {
        self.raw.as_ptr()
    }

    /// True when both handles refer to the same IREE device.
    pub fn same_device(&self, other: &Device) -> bool {
        self.as_ptr() == other.as_ptr()
    }
}
