//! Devices (each its own allocator, with its allocator's statistics),
//! the proactor pools they retain, frontier trackers and device groups.

use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};

use super::driver_registry::is_registered;
use crate::mock::allocator::HostAllocator;
use crate::mock::api::*;
use crate::mock::driver::{self, DRIVERS};
use crate::mock::registry::{self, Kind, Object, Owned};
use crate::mock::status::{return_object, to_status, Failure};
use crate::mock::string_view::view_str;

/// An async proactor pool (one proactor per NUMA node in IREE).
#[derive(Debug)]
pub(crate) struct ProactorPool {
    /// Shown by `Debug`; also keeps the object from being zero-sized.
    pub(super) _node_count: usize,
}

impl Object for ProactorPool {
    fn kind(&self) -> Kind {
        Kind::ProactorPool
    }
}

/// `iree_async_proactor_pool_options_default`: all defaults (zeros).
///
/// # Safety
/// None; `unsafe` like the C function it stands for.
pub(crate) unsafe fn iree_async_proactor_pool_options_default() -> iree_async_proactor_pool_options_t
{
    iree_async_proactor_pool_options_t::default()
}

/// `iree_async_proactor_pool_create`.
///
/// # Safety
/// `out_pool` is valid for writes.
pub(crate) unsafe fn iree_async_proactor_pool_create(
    node_count: iree_host_size_t,
    _node_ids: *const u32,
    _options: iree_async_proactor_pool_options_t,
    _allocator: iree_allocator_t,
    out_pool: *mut *mut iree_async_proactor_pool_t,
) -> iree_status_t {
    let result = if node_count == 0 {
        Err(Failure::new(
            IREE_STATUS_INVALID_ARGUMENT,
            "a proactor pool needs at least one NUMA node",
        ))
    } else {
        Ok(Owned::new(ProactorPool {
            _node_count: node_count,
        }))
    };
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { return_object(out_pool, result) }
}

/// A HAL device of a registered driver.
#[derive(Debug)]
pub(crate) struct Device {
    pub(super) uri: String,
    /// Retained for the device's life, as IREE's devices do.
    _pool: Owned<ProactorPool>,
    /// The statistics of the device's allocator (the device itself, in
    /// the mock), shared with the buffers allocated on it.
    pub(super) statistics: Arc<AllocatorStatistics>,
    /// The host allocator the device was created with: a local device's
    /// buffers take their bytes from it, as IREE's local drivers make it
    /// their heap allocator's data allocator
    /// (`iree/hal/drivers/local_sync/registration/driver_module.c`).
    pub(super) host_allocator: HostAllocator,
}

impl Device {
    pub(super) fn new(
        uri: String,
        pool: Owned<ProactorPool>,
        host_allocator: iree_allocator_t,
    ) -> Self {
        Device {
            uri,
            _pool: pool,
            statistics: Arc::default(),
            host_allocator: HostAllocator::new(host_allocator),
        }
    }

    /// Whether the device is one of IREE's local CPU devices, whose
    /// buffers are heap memory of the process.
    pub(super) fn is_local(&self) -> bool {
        matches!(driver::split_uri(&self.uri).0, "local-sync" | "local-task")
    }
}

/// An allocator's running totals, kept as IREE's heap allocator keeps
/// them: every buffer counts as device memory (the mock allocates only
/// device-local buffers), the peak is updated on each allocation.
#[derive(Debug, Default)]
pub(super) struct AllocatorStatistics(Mutex<iree_hal_allocator_statistics_t>);

impl AllocatorStatistics {
    fn lock(&self) -> std::sync::MutexGuard<'_, iree_hal_allocator_statistics_t> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `iree_hal_allocator_statistics_record_alloc` of a device-local buffer.
    pub(super) fn record_alloc(&self, bytes: usize) {
        let mut totals = self.lock();
        totals.device_bytes_allocated += bytes;
        totals.device_bytes_peak = totals
            .device_bytes_peak
            .max(totals.device_bytes_allocated - totals.device_bytes_freed);
    }

    /// `iree_hal_allocator_statistics_record_free` of a device-local buffer.
    pub(super) fn record_free(&self, bytes: usize) {
        let mut totals = self.lock();
        totals.device_bytes_freed += bytes;
        assert!(
            totals.device_bytes_freed <= totals.device_bytes_allocated,
            "mock IREE: an allocator freed more bytes than it allocated"
        );
    }
}

impl Object for Device {
    fn kind(&self) -> Kind {
        Kind::Device
    }
}

/// `iree_hal_create_device`: a device of a registered driver (the part of
/// the URI before `:`) at the URI's path (the driver's default device when
/// it has none), retaining `create_params.proactor_pool`, which IREE
/// requires.
///
/// # Safety
/// `device_uri` views readable bytes; `create_params` is valid with a live
/// pool; `out_device` is valid for writes.
pub(crate) unsafe fn iree_hal_create_device(
    registry: *mut iree_hal_driver_registry_t,
    device_uri: iree_string_view_t,
    create_params: *const iree_hal_device_create_params_t,
    host_allocator: iree_allocator_t,
    out_device: *mut *mut iree_hal_device_t,
) -> iree_status_t {
    // SAFETY: the caller passes a readable view and valid params.
    let (uri, pool) = unsafe { (view_str(device_uri), (*create_params).proactor_pool) };
    let (driver, path) = driver::split_uri(&uri);
    let result = if !is_registered(registry, driver) {
        let names: Vec<&str> = DRIVERS.iter().map(|d| d.name).collect();
        Err(Failure::new(
            IREE_STATUS_NOT_FOUND,
            format!(
                "no driver '{driver}' registered (mock drivers: {})",
                names.join(", ")
            ),
        ))
    } else if let Err(failure) = driver::select_device(driver, path) {
        Err(failure)
    } else if let Some(pool) = NonNull::new(pool) {
        // SAFETY: the pool came from the mock's
        // `iree_async_proactor_pool_create` (caller's contract).
        let pool = unsafe { Owned::retain(pool.cast::<ProactorPool>()) };
        Ok(Owned::new(Device::new(uri, pool, host_allocator)))
    } else {
        Err(Failure::new(
            IREE_STATUS_INVALID_ARGUMENT,
            "device creation requires a proactor pool in the create params",
        ))
    };
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { return_object(out_device, result) }
}

/// `iree_hal_device_query_i64`: `hal.device.id` (1 when the key is `*` or
/// the driver name the device was made with) and `hal.device`
/// `concurrency` (1), as IREE's local devices answer; NOT_FOUND otherwise.
///
/// # Safety
/// `device` is a live device; the views are readable; `out_value` is valid
/// for writes.
pub(crate) unsafe fn iree_hal_device_query_i64(
    device: *mut iree_hal_device_t,
    category: iree_string_view_t,
    key: iree_string_view_t,
    out_value: *mut i64,
) -> iree_status_t {
    // SAFETY: forwarded from this function's contract; checks liveness.
    let (device, category, key) = unsafe {
        (
            registry::get(device.cast_const().cast::<Device>()),
            view_str(category),
            view_str(key),
        )
    };
    let (driver, _) = driver::split_uri(&device.uri);
    let value = match (category.as_str(), key.as_str()) {
        ("hal.device.id", key) => Ok(i64::from(key == "*" || key == driver)),
        ("hal.device", "concurrency") => Ok(1),
        (category, key) => Err(Failure::new(
            IREE_STATUS_NOT_FOUND,
            format!("unknown device configuration key value '{category} :: {key}'"),
        )),
    };
    to_status(value.map(|value| {
        // SAFETY: the caller passes a valid out-pointer.
        unsafe { *out_value = value }
    }))
}

/// `iree_hal_device_allocator`: the device's allocator, borrowed. The mock
/// device is its own allocator (the pointer is the device's).
///
/// # Safety
/// `device` is a live device.
pub(crate) unsafe fn iree_hal_device_allocator(
    device: *mut iree_hal_device_t,
) -> *mut iree_hal_allocator_t {
    // SAFETY: forwarded from this function's contract; checks liveness.
    unsafe { registry::get(device.cast_const().cast::<Device>()) };
    device.cast()
}

/// `iree_hal_allocator_query_statistics`: the totals of the bytes of every
/// buffer allocated on the device and freed since it was created.
///
/// # Safety
/// `allocator` is the allocator of a live device (the device's own
/// pointer, see [`iree_hal_device_allocator`]); `out_statistics` is valid
/// for writes.
pub(crate) unsafe fn iree_hal_allocator_query_statistics(
    allocator: *mut iree_hal_allocator_t,
    out_statistics: *mut iree_hal_allocator_statistics_t,
) {
    // SAFETY: the mock's allocators are its devices (caller's contract);
    // `get` checks that this one is live.
    let device = unsafe { registry::get(allocator.cast_const().cast::<Device>()) };
    let totals = *device.statistics.lock();
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { *out_statistics = totals };
}

/// `iree_async_frontier_tracker_t`.
#[derive(Debug)]
pub(crate) struct FrontierTracker {
    /// Shown by `Debug`; also keeps the object from being zero-sized.
    _axis_table_capacity: u32,
}

impl Object for FrontierTracker {
    fn kind(&self) -> Kind {
        Kind::FrontierTracker
    }
}

/// `iree_async_frontier_tracker_create`.
///
/// # Safety
/// `out_tracker` is valid for writes.
pub(crate) unsafe fn iree_async_frontier_tracker_create(
    options: iree_async_frontier_tracker_options_t,
    _allocator: iree_allocator_t,
    out_tracker: *mut *mut iree_async_frontier_tracker_t,
) -> iree_status_t {
    let tracker = Owned::new(FrontierTracker {
        _axis_table_capacity: options.axis_table_capacity,
    });
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { return_object(out_tracker, Ok(tracker)) }
}

/// A device group of one device, sharing a frontier tracker.
#[derive(Debug)]
pub(crate) struct DeviceGroup {
    device: Owned<Device>,
    /// Retained for the group's life, as IREE's groups do.
    _tracker: Owned<FrontierTracker>,
}

impl DeviceGroup {
    /// The group's (only) device.
    pub(crate) fn device(&self) -> &Device {
        &self.device
    }
}

impl Object for DeviceGroup {
    fn kind(&self) -> Kind {
        Kind::DeviceGroup
    }
}

/// `iree_hal_device_group_create_from_device`: retains the device and the
/// tracker.
///
/// # Safety
/// `device` and `frontier_tracker` are live; `out_group` is valid for writes.
pub(crate) unsafe fn iree_hal_device_group_create_from_device(
    device: *mut iree_hal_device_t,
    frontier_tracker: *mut iree_async_frontier_tracker_t,
    _host_allocator: iree_allocator_t,
    out_group: *mut *mut iree_hal_device_group_t,
) -> iree_status_t {
    let result = match (NonNull::new(device), NonNull::new(frontier_tracker)) {
        // SAFETY: both came from the mock (caller's contract); the registry
        // checks they are live objects of these types.
        (Some(device), Some(tracker)) => Ok(Owned::new(unsafe {
            DeviceGroup {
                device: Owned::retain(device.cast()),
                _tracker: Owned::retain(tracker.cast()),
            }
        })),
        _ => Err(Failure::new(
            IREE_STATUS_INVALID_ARGUMENT,
            "a device group needs a device and a frontier tracker",
        )),
    };
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { return_object(out_group, result) }
}
