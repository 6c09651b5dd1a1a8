//! The shared runtime: one device, one device group and one HAL module for
//! the whole process, into which compiled artifacts are loaded as modules.

use std::sync::Arc;

use crate::device::Device;
use crate::error::Result;
use crate::handle::Handle;
use crate::instance::Instance;
use crate::sys;

/// A device plus the device group and HAL module that every loaded
/// [`Module`](crate::Module) shares. Cheap to clone (reference counted).
///
/// This is the layout that can both share and evict (docs/architecture.md,
/// "One runtime per process"): each module gets its own small VM context over
/// this one HAL module, so dropping a module frees it, and no per-module
/// runtime is ever created.
///
/// Corresponds to `iree_async_frontier_tracker_create`,
/// `iree_hal_device_group_create_from_device` and `iree_hal_module_create`.
///
/// ```no_run
/// # fn compiled() -> iree_safe::compiler::Artifact { unimplemented!() }
/// let runtime = iree_safe::Runtime::new("local-sync")?;
/// let module = runtime.load(compiled().vmfb())?;
/// let sigmoid = module.function("sigmoid")?;
/// let x = iree_safe::Tensor::from_slice(runtime.device(), &[4], &[0.0f32, 1.0, 2.0, 3.0])?;
/// let y = sigmoid.call(&[x.into()])?;
/// println!("{:?}", y[0].as_tensor().unwrap().to_vec::<f32>()?);
/// # Ok::<(), iree_safe::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

#[derive(Debug)]
struct RuntimeInner {
    // Field order is drop order: the HAL module references the group, which
    // references the device.
    hal_module: Handle<sys::iree_vm_module_t>,
    _device_group: Handle<sys::iree_hal_device_group_t>,
    device: Device,
    instance: &'static Instance,
}

// SAFETY: the device group is immutable after creation and may be queried
// from any thread (iree/hal/device_group.h); VM modules, the HAL module
// included, must be thread-safe (iree/vm/module.h); both are refcounted
// atomically; the device is Send + Sync.
unsafe impl Send for RuntimeInner {}
// SAFETY: as above; nothing in `RuntimeInner` is mutated after construction.
unsafe impl Sync for RuntimeInner {}

impl Runtime {
    /// Opens `driver` (see [`Device::open`]) and builds the shared runtime
    /// over it.
    ///
    /// # Errors
    ///
    /// The errors of [`Device::open`] and [`with_device`](Self::with_device).
    pub fn new(driver: &str) -> Result<Runtime> {
        Runtime::with_device(Device::open(driver)?)
    }

    /// Builds the shared runtime over an open device.
    ///
    /// # Errors
    ///
    /// [`Error::Iree`](crate::Error::Iree) when IREE cannot create the
    /// instance or the device's HAL module.
    pub fn with_device(device: Device) -> Result<Runtime> {
        let instance = Instance::global()?;
        let allocator = sys::iree_allocator_system();
        // SAFETY: the tracker constructor stores one new reference on
        // success; default options.
        let tracker = unsafe {
            Handle::create(|out| {
                sys::iree_async_frontier_tracker_create(
                    sys::iree_async_frontier_tracker_options_default(),
                    allocator,
                    out,
                )
            })
        }?;
        // SAFETY: `device` and `tracker` are live; the group retains both, so
        // our tracker reference can go when `tracker` drops. On success one
        // group reference is ours.
        let device_group = unsafe {
            Handle::create(|out| {
                sys::iree_hal_device_group_create_from_device(
                    device.as_ptr(),
                    tracker.as_ptr(),
                    allocator,
                    out,
                )
            })
        }?;
        // SAFETY: instance and group are live; the HAL module retains the
        // group. On success one module reference is ours.
        let hal_module = unsafe {
            Handle::create(|out| {
                sys::iree_hal_module_create(
                    instance.as_ptr(),
                    sys::iree_hal_module_device_policy_default(),
                    device_group.as_ptr(),
                    sys::IREE_HAL_MODULE_FLAG_NONE,
                    sys::iree_hal_module_debug_sink_null(),
                    allocator,
                    out,
                )
            })
        }?;
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                hal_module,
                _device_group: device_group,
                device,
                instance,
            }),
        })
    }

    /// The device every module of this runtime runs on.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    pub(crate) fn instance(&self) -> &'static Instance {
        self.inner.instance
    }

    pub(crate) fn hal_module_ptr(&self) -> *mut sys::iree_vm_module_t {
        self.inner.hal_module.as_ptr()
    }
}
