//! HAL objects: the driver registry, proactor pools, devices (each its own
//! allocator), frontier trackers, device groups, buffers and buffer views.
//!
//! Ownership follows IREE: a device retains its proactor pool, a device
//! group its device and frontier tracker, a buffer view its buffer. A buffer
//! does not retain its device (IREE's buffer placement is unretained); it
//! remembers it so `transfer_d2h` can check the pair, and shares its
//! allocator's statistics, which it updates when it is freed (as IREE's
//! heap buffers do, `iree/hal/buffer_heap.c`).

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};

use super::api::*;
use super::driver::{self, DRIVERS};
use super::registry::{self, Kind, Object, Owned};
use super::status::{return_object, to_status, Failure, MockResult};

/// The process-wide driver registry (`iree_hal_driver_registry_default`).
struct DriverRegistry {
    drivers: Mutex<Vec<&'static str>>,
}

static REGISTRY: DriverRegistry = DriverRegistry {
    drivers: Mutex::new(Vec::new()),
};

fn registry_ptr() -> *mut iree_hal_driver_registry_t {
    std::ptr::from_ref(&REGISTRY).cast_mut().cast()
}

/// Checks that `registry` is the default registry (the only one the mock has).
fn driver_registry(registry: *mut iree_hal_driver_registry_t) -> &'static DriverRegistry {
    assert_eq!(
        registry,
        registry_ptr(),
        "mock IREE: not the default driver registry"
    );
    &REGISTRY
}

/// Whether a driver named `name` is registered in `registry`, which must be
/// the default registry.
pub(crate) fn is_registered(registry: *mut iree_hal_driver_registry_t, name: &str) -> bool {
    driver_registry(registry)
        .drivers
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains(&name)
}

/// `iree_hal_driver_registry_default`: the process-wide registry.
///
/// # Safety
/// None; `unsafe` like the C function it stands for.
pub(crate) unsafe fn iree_hal_driver_registry_default() -> *mut iree_hal_driver_registry_t {
    registry_ptr()
}

/// `iree_hal_register_all_available_drivers`: registers the mock's drivers
/// (`local-sync`, `local-task` and [`driver::SOFTWARE_DRIVER`]);
/// ALREADY_EXISTS when they were registered before, as IREE.
///
/// # Safety
/// `registry` is the default registry.
pub(crate) unsafe fn iree_hal_register_all_available_drivers(
    registry: *mut iree_hal_driver_registry_t,
) -> iree_status_t {
    let mut drivers = driver_registry(registry)
        .drivers
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(existing) = DRIVERS.iter().find(|d| drivers.contains(&d.name)) {
        return Failure::new(
            IREE_STATUS_ALREADY_EXISTS,
            format!(
                "a driver factory named `{}` is already registered",
                existing.name
            ),
        )
        .into_status();
    }
    drivers.extend(DRIVERS.iter().map(|d| d.name));
    std::ptr::null_mut()
}

/// `iree_numa_node_count`: one node.
///
/// # Safety
/// None; `unsafe` like the C function it stands for.
pub(crate) unsafe fn iree_numa_node_count() -> iree_host_size_t {
    1
}

/// An async proactor pool (one proactor per NUMA node in IREE).
#[derive(Debug)]
pub(crate) struct ProactorPool {
    /// Shown by `Debug`; also keeps the object from being zero-sized.
    _node_count: usize,
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
    uri: String,
    /// Retained for the device's life, as IREE's devices do.
    _pool: Owned<ProactorPool>,
    /// The statistics of the device's allocator (the device itself, in
    /// the mock), shared with the buffers allocated on it.
    statistics: Arc<AllocatorStatistics>,
}

impl Device {
    fn new(uri: String, pool: Owned<ProactorPool>) -> Self {
        Device {
            uri,
            _pool: pool,
            statistics: Arc::default(),
        }
    }

    /// Whether the device is one of IREE's local CPU devices, whose
    /// buffers are heap memory of the process.
    fn is_local(&self) -> bool {
        matches!(driver::split_uri(&self.uri).0, "local-sync" | "local-task")
    }
}

/// An allocator's running totals, kept as IREE's heap allocator keeps
/// them: every buffer counts as device memory (the mock allocates only
/// device-local buffers), the peak is updated on each allocation.
#[derive(Debug, Default)]
struct AllocatorStatistics(Mutex<iree_hal_allocator_statistics_t>);

impl AllocatorStatistics {
    fn lock(&self) -> std::sync::MutexGuard<'_, iree_hal_allocator_statistics_t> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `iree_hal_allocator_statistics_record_alloc` of a device-local buffer.
    fn record_alloc(&self, bytes: usize) {
        let mut totals = self.lock();
        totals.device_bytes_allocated += bytes;
        totals.device_bytes_peak = totals
            .device_bytes_peak
            .max(totals.device_bytes_allocated - totals.device_bytes_freed);
    }

    /// `iree_hal_allocator_statistics_record_free` of a device-local buffer.
    fn record_free(&self, bytes: usize) {
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
    _host_allocator: iree_allocator_t,
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
        Ok(Owned::new(Device::new(uri, pool)))
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

/// Device memory: immutable bytes, and the device they were allocated on.
#[derive(Debug)]
pub(crate) struct Buffer {
    /// Address of the device (unretained, as in IREE).
    device: usize,
    /// Whether the device is a local one (the buffer is heap memory).
    in_host_memory: bool,
    storage: Storage,
    /// The statistics of the allocator the bytes came from, which the
    /// buffer updates when it is freed (IREE's heap buffers keep a pointer
    /// to theirs, `iree/hal/buffer_heap.c`; imported ones have none).
    statistics: Arc<AllocatorStatistics>,
}

/// Where a buffer's bytes are.
#[derive(Debug)]
enum Storage {
    /// Allocated by the device.
    Allocated(Box<[u8]>),
    /// The caller's memory, imported (`iree_hal_allocator_import_buffer`):
    /// read in place, and `release` called once when the buffer is destroyed
    /// (as `iree_hal_heap_buffer_destroy` does).
    Imported {
        data: *const u8,
        length: usize,
        release: iree_hal_buffer_release_callback_t,
    },
}

// SAFETY: imported memory is only read, and the importer promised it stays
// valid and unchanged until the release callback runs, which may happen on
// any thread (as in IREE, whose buffers are released from any thread).
unsafe impl Send for Storage {}
// SAFETY: as above; nothing mutates a buffer's bytes.
unsafe impl Sync for Storage {}

impl Buffer {
    /// Whether `device` can read the buffer (see
    /// [`BufferView::is_readable_on`]).
    fn is_readable_on(&self, device: &Device) -> bool {
        self.device == std::ptr::from_ref(device).addr()
            || (self.in_host_memory && device.is_local())
    }

    fn bytes(&self) -> &[u8] {
        match &self.storage {
            Storage::Allocated(bytes) => bytes,
            // SAFETY: the importer keeps `length` bytes at `data` valid and
            // unchanged until the release callback, which runs only when the
            // buffer is dropped: after every borrow of `self`. Under miri, a
            // release too early (memory freed while imported) is reported
            // here as a use after free.
            Storage::Imported { data, length, .. } => unsafe {
                std::slice::from_raw_parts(*data, *length)
            },
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        match &self.storage {
            Storage::Allocated(bytes) => self.statistics.record_free(bytes.len()),
            Storage::Imported { release, .. } => {
                if let Some(callback) = release.fn_ {
                    // SAFETY: the importer's callback, called once (the buffer
                    // is dropped once), with its user data and the buffer.
                    unsafe {
                        callback(
                            release.user_data,
                            std::ptr::from_mut(self).cast::<iree_hal_buffer_t>(),
                        )
                    };
                }
            }
        }
    }
}

impl Object for Buffer {
    fn kind(&self) -> Kind {
        Kind::Buffer
    }
}

/// `IREE_HAL_HEAP_BUFFER_ALIGNMENT` (`iree/base/config.h`): what IREE's heap
/// allocator requires of imported memory unless access allows unaligned.
const HEAP_BUFFER_ALIGNMENT: usize = 64;

/// `iree_hal_allocator_import_buffer` as a local device's heap allocator does
/// it (`iree_hal_heap_allocator_import_buffer`, `iree/hal/allocator_heap.c`):
/// wraps a host allocation, no copy; OUT_OF_RANGE for memory not 64-byte
/// aligned (unless the access allows unaligned), UNAVAILABLE for another kind
/// of external buffer or a device that is not local. `release_callback` is
/// kept only on success.
///
/// # Safety
/// `allocator` is a live device's allocator; `external_buffer` is valid and,
/// for a host allocation, names `size` bytes that stay valid and unchanged
/// until the release callback runs; `out_buffer` is valid for writes.
pub(crate) unsafe fn iree_hal_allocator_import_buffer(
    allocator: *mut iree_hal_allocator_t,
    params: iree_hal_buffer_params_t,
    external_buffer: *mut iree_hal_external_buffer_t,
    release_callback: iree_hal_buffer_release_callback_t,
    out_buffer: *mut *mut iree_hal_buffer_t,
) -> iree_status_t {
    // SAFETY: the mock's allocator is its device (caller's contract); `get`
    // checks it is live.
    let device = unsafe { registry::get(allocator.cast_const().cast::<Device>()) };
    // SAFETY: the caller passes a valid external buffer.
    let external = unsafe { *external_buffer };
    let result = if external.type_ != IREE_HAL_EXTERNAL_BUFFER_TYPE_HOST_ALLOCATION
        || !device.is_local()
    {
        Err(Failure::new(
            IREE_STATUS_UNAVAILABLE,
            "external buffer type not supported",
        ))
    } else {
        // SAFETY: a host allocation's handle is the `host_allocation` member.
        let data = unsafe { external.handle.host_allocation.ptr }
            .cast_const()
            .cast::<u8>();
        let unaligned =
            params.access & IREE_HAL_MEMORY_ACCESS_UNALIGNED as iree_hal_memory_access_t != 0;
        if !unaligned && !data.addr().is_multiple_of(HEAP_BUFFER_ALIGNMENT) {
            Err(Failure::new(
                IREE_STATUS_OUT_OF_RANGE,
                format!("imported heap buffer data must be aligned to {HEAP_BUFFER_ALIGNMENT}; got {data:p}"),
            ))
        } else {
            Ok(Owned::new(Buffer {
                device: std::ptr::from_ref(device).addr(),
                in_host_memory: true,
                storage: Storage::Imported {
                    data,
                    length: external.size,
                    release: release_callback,
                },
                statistics: Arc::clone(&device.statistics),
            }))
        }
    };
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { return_object(out_buffer, result) }
}

/// `iree_hal_buffer_view_create`: a view of `buffer` (retained) with a
/// shape and element type; INVALID_ARGUMENT when the buffer is smaller
/// than the dense row-major size of the shape.
///
/// # Safety
/// `buffer` is live, `shape` holds `shape_rank` dims, `out_buffer_view` is
/// valid for writes.
pub(crate) unsafe fn iree_hal_buffer_view_create(
    buffer: *mut iree_hal_buffer_t,
    shape_rank: iree_host_size_t,
    shape: *const iree_hal_dim_t,
    element_type: iree_hal_element_type_t,
    encoding_type: iree_hal_encoding_type_t,
    _host_allocator: iree_allocator_t,
    out_buffer_view: *mut *mut iree_hal_buffer_view_t,
) -> iree_status_t {
    let shape: &[iree_hal_dim_t] = if shape_rank == 0 {
        &[]
    } else {
        // SAFETY: the caller passes `shape_rank` readable dims.
        unsafe { std::slice::from_raw_parts(shape, shape_rank) }
    };
    let result = (|| {
        if encoding_type != IREE_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR {
            return Err(Failure::new(
                IREE_STATUS_UNIMPLEMENTED,
                format!("encoding 0x{encoding_type:08x} is not dense row-major"),
            ));
        }
        let length = dense_byte_length(shape, element_type)?;
        let buffer = NonNull::new(buffer.cast::<Buffer>())
            .ok_or_else(|| Failure::new(IREE_STATUS_INVALID_ARGUMENT, "a null buffer"))?;
        // SAFETY: the caller guarantees the buffer is live; `retain` checks it.
        let buffer = unsafe { Owned::retain(buffer) };
        if buffer_ref(&buffer).bytes().len() < length {
            return Err(Failure::new(
                IREE_STATUS_INVALID_ARGUMENT,
                format!("the buffer is smaller than the {length} bytes of the shape"),
            ));
        }
        Ok(Owned::new(BufferView {
            buffer,
            shape: shape.into(),
            element_type,
        }))
    })();
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { return_object(out_buffer_view, result) }
}

/// The buffer an owned reference holds.
fn buffer_ref(buffer: &Owned<Buffer>) -> &Buffer {
    // SAFETY: the reference keeps the buffer alive while it is borrowed.
    unsafe { registry::get(buffer.as_ptr()) }
}

/// A shaped, typed view of a buffer.
#[derive(Debug)]
pub(crate) struct BufferView {
    buffer: Owned<Buffer>,
    shape: Box<[iree_hal_dim_t]>,
    element_type: iree_hal_element_type_t,
}

impl Object for BufferView {
    fn kind(&self) -> Kind {
        Kind::BufferView
    }
}

impl BufferView {
    /// A buffer view over a new buffer of `device` holding `bytes`.
    pub(crate) fn new(
        device: &Device,
        shape: &[iree_hal_dim_t],
        element_type: iree_hal_element_type_t,
        bytes: Vec<u8>,
    ) -> Owned<BufferView> {
        device.statistics.record_alloc(bytes.len());
        let buffer = Owned::new(Buffer {
            device: std::ptr::from_ref(device).addr(),
            in_host_memory: device.is_local(),
            storage: Storage::Allocated(bytes.into()),
            statistics: Arc::clone(&device.statistics),
        });
        Owned::new(BufferView {
            buffer,
            shape: shape.into(),
            element_type,
        })
    }

    pub(crate) fn shape(&self) -> &[iree_hal_dim_t] {
        &self.shape
    }

    pub(crate) fn element_type(&self) -> iree_hal_element_type_t {
        self.element_type
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        self.buffer.bytes()
    }

    /// Whether a call on `device` can read the buffer: it was allocated
    /// there, or it is heap memory and `device` a local one (IREE's local
    /// devices map any heap buffer, `iree/hal/buffer_heap.c`).
    pub(crate) fn is_readable_on(&self, device: &Device) -> bool {
        self.buffer.is_readable_on(device)
    }
}

/// The ref type of buffer views in VM lists (IREE registers a descriptor
/// per type; the mock knows only this one).
pub(crate) const BUFFER_VIEW_TYPE: iree_vm_ref_type_t = 0x6276_0000;

/// Bytes of a dense tensor, or why it cannot be allocated.
fn dense_byte_length(shape: &[usize], element_type: iree_hal_element_type_t) -> MockResult<usize> {
    let bits = iree_hal_element_bit_count(element_type);
    if bits == 0 || bits % 8 != 0 {
        return Err(Failure::new(
            IREE_STATUS_UNIMPLEMENTED,
            format!("the mock only allocates whole-byte element types, not 0x{element_type:08x}"),
        ));
    }
    shape
        .iter()
        .try_fold(bits / 8, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| Failure::new(IREE_STATUS_OUT_OF_RANGE, "buffer size overflows"))
}

/// `iree_hal_buffer_view_allocate_buffer_copy`: a new buffer view over a
/// new buffer holding a copy of `initial_data`, which must be exactly the
/// dense row-major size of the shape.
///
/// # Safety
/// `device` is live, `allocator` is its allocator, `shape` holds
/// `shape_rank` dims, `initial_data` is readable, `out_buffer_view` valid.
#[allow(clippy::too_many_arguments)] // IREE's signature
pub(crate) unsafe fn iree_hal_buffer_view_allocate_buffer_copy(
    device: *mut iree_hal_device_t,
    allocator: *mut iree_hal_allocator_t,
    shape_rank: iree_host_size_t,
    shape: *const iree_hal_dim_t,
    element_type: iree_hal_element_type_t,
    encoding_type: iree_hal_encoding_type_t,
    _buffer_params: iree_hal_buffer_params_t,
    initial_data: iree_const_byte_span_t,
    out_buffer_view: *mut *mut iree_hal_buffer_view_t,
) -> iree_status_t {
    // SAFETY: forwarded from this function's contract.
    let result = unsafe {
        allocate_buffer_copy(
            device,
            allocator,
            shape_rank,
            shape,
            element_type,
            encoding_type,
            initial_data,
        )
    };
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { return_object(out_buffer_view, result) }
}

/// The checks and the copy of [`iree_hal_buffer_view_allocate_buffer_copy`].
///
/// # Safety
/// As for [`iree_hal_buffer_view_allocate_buffer_copy`].
unsafe fn allocate_buffer_copy(
    device: *mut iree_hal_device_t,
    allocator: *mut iree_hal_allocator_t,
    shape_rank: iree_host_size_t,
    shape: *const iree_hal_dim_t,
    element_type: iree_hal_element_type_t,
    encoding_type: iree_hal_encoding_type_t,
    initial_data: iree_const_byte_span_t,
) -> MockResult<Owned<BufferView>> {
    // SAFETY: the caller guarantees the device is live; `get` checks it.
    let device_ref = unsafe { registry::get(device.cast_const().cast::<Device>()) };
    if allocator.cast() != device {
        return Err(Failure::new(
            IREE_STATUS_INVALID_ARGUMENT,
            "the allocator is not the device's (iree_hal_device_allocator)",
        ));
    }
    if encoding_type != IREE_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR {
        return Err(Failure::new(
            IREE_STATUS_UNIMPLEMENTED,
            format!("encoding 0x{encoding_type:08x} is not dense row-major"),
        ));
    }
    let shape: &[iree_hal_dim_t] = if shape_rank == 0 {
        &[]
    } else {
        // SAFETY: the caller passes `shape_rank` readable dims.
        unsafe { std::slice::from_raw_parts(shape, shape_rank) }
    };
    let length = dense_byte_length(shape, element_type)?;
    if initial_data.data_length != length {
        return Err(Failure::new(
            IREE_STATUS_INVALID_ARGUMENT,
            format!(
                "initial data is {} bytes but the buffer is {length}",
                initial_data.data_length
            ),
        ));
    }
    let bytes = if length == 0 {
        Vec::new()
    } else {
        // SAFETY: the caller passes `data_length` readable bytes.
        unsafe { std::slice::from_raw_parts(initial_data.data, length) }.to_vec()
    };
    Ok(BufferView::new(device_ref, shape, element_type, bytes))
}

/// Borrows a live buffer view.
///
/// # Safety
/// `view` came from the mock and the caller holds a reference for `'a`.
unsafe fn view<'a>(buffer_view: *const iree_hal_buffer_view_t) -> &'a BufferView {
    // SAFETY: forwarded from this function's contract.
    unsafe { registry::get(buffer_view.cast::<BufferView>()) }
}

/// `iree_hal_buffer_view_retain_ref`: a new reference, as a VM ref.
///
/// # Safety
/// `value` is null or a live buffer view.
pub(crate) unsafe fn iree_hal_buffer_view_retain_ref(
    value: *mut iree_hal_buffer_view_t,
) -> iree_vm_ref_t {
    if value.is_null() {
        return iree_vm_ref_t::default();
    }
    registry::retain(value.cast::<BufferView>());
    iree_vm_ref_t {
        ptr: value.cast(),
        type_: BUFFER_VIEW_TYPE,
    }
}

/// `iree_vm_ref_release`: gives back the reference a VM ref owns (the mock
/// only makes buffer view refs) and resets the ref to null.
///
/// # Safety
/// `ref_` is valid, and null or owning a reference to a live buffer view.
pub(crate) unsafe fn iree_vm_ref_release(ref_: *mut iree_vm_ref_t) {
    // SAFETY: the caller passes a valid ref.
    let reference = unsafe { *ref_ };
    if !reference.ptr.is_null() {
        assert_eq!(
            reference.type_, BUFFER_VIEW_TYPE,
            "mock IREE: iree_vm_ref_release of a ref that is not a buffer view"
        );
        // SAFETY: the caller gives back the reference the ref owns.
        unsafe { registry::release(reference.ptr.cast::<BufferView>().cast_const()) };
    }
    // SAFETY: as above.
    unsafe { *ref_ = iree_vm_ref_t::default() };
}

/// `iree_hal_buffer_view_check_deref`: the buffer view a ref holds, not
/// retained; INVALID_ARGUMENT for a ref of another type (or a null ref).
///
/// # Safety
/// `ref_` is a ref from the mock that is still owned by someone; `out_ptr`
/// is valid for writes.
pub(crate) unsafe fn iree_hal_buffer_view_check_deref(
    ref_: iree_vm_ref_t,
    out_ptr: *mut *mut iree_hal_buffer_view_t,
) -> iree_status_t {
    if ref_.type_ != BUFFER_VIEW_TYPE {
        return Failure::new(
            IREE_STATUS_INVALID_ARGUMENT,
            format!(
                "ref type mismatch; expected hal.buffer_view, have type {:#x}",
                ref_.type_
            ),
        )
        .into_status();
    }
    if !ref_.ptr.is_null() {
        // SAFETY: forwarded from this function's contract; checks liveness.
        unsafe { view(ref_.ptr.cast()) };
    }
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { *out_ptr = ref_.ptr.cast() };
    std::ptr::null_mut()
}

/// `iree_hal_buffer_view_buffer`: the view's buffer, borrowed.
///
/// # Safety
/// `buffer_view` is live.
pub(crate) unsafe fn iree_hal_buffer_view_buffer(
    buffer_view: *const iree_hal_buffer_view_t,
) -> *mut iree_hal_buffer_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { view(buffer_view) }.buffer.as_ptr().cast()
}

/// `iree_hal_buffer_view_byte_length`.
///
/// # Safety
/// `buffer_view` is live.
pub(crate) unsafe fn iree_hal_buffer_view_byte_length(
    buffer_view: *const iree_hal_buffer_view_t,
) -> iree_device_size_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { view(buffer_view) }.bytes().len()
}

/// `iree_hal_buffer_view_shape_rank`.
///
/// # Safety
/// `buffer_view` is live.
pub(crate) unsafe fn iree_hal_buffer_view_shape_rank(
    buffer_view: *const iree_hal_buffer_view_t,
) -> iree_host_size_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { view(buffer_view) }.shape.len()
}

/// `iree_hal_buffer_view_shape_dims`: points into the view.
///
/// # Safety
/// `buffer_view` is live.
pub(crate) unsafe fn iree_hal_buffer_view_shape_dims(
    buffer_view: *const iree_hal_buffer_view_t,
) -> *const iree_hal_dim_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { view(buffer_view) }.shape.as_ptr()
}

/// `iree_hal_buffer_view_element_type`.
///
/// # Safety
/// `buffer_view` is live.
pub(crate) unsafe fn iree_hal_buffer_view_element_type(
    buffer_view: *const iree_hal_buffer_view_t,
) -> iree_hal_element_type_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { view(buffer_view) }.element_type
}

/// `iree_hal_device_transfer_d2h`: copies `data_length` bytes of `source`
/// from `source_offset` to `target`. INVALID_ARGUMENT when the buffer was
/// allocated on another device, OUT_OF_RANGE past its end.
///
/// # Safety
/// `device` and `source` are live; `target` has room for `data_length` bytes.
pub(crate) unsafe fn iree_hal_device_transfer_d2h(
    device: *mut iree_hal_device_t,
    source: *mut iree_hal_buffer_t,
    source_offset: iree_device_size_t,
    target: *mut c_void,
    data_length: iree_device_size_t,
    _flags: iree_hal_transfer_buffer_flags_t,
    _timeout: iree_timeout_t,
) -> iree_status_t {
    // SAFETY: the caller guarantees both are live; `get` checks their types.
    let (device, buffer) = unsafe {
        (
            registry::get(device.cast_const().cast::<Device>()),
            registry::get(source.cast_const().cast::<Buffer>()),
        )
    };
    let result = if !buffer.is_readable_on(device) {
        Err(Failure::new(
            IREE_STATUS_INVALID_ARGUMENT,
            format!("the buffer was not allocated on device `{}`", device.uri),
        ))
    } else {
        match source_offset
            .checked_add(data_length)
            .and_then(|end| buffer.bytes().get(source_offset..end))
        {
            Some(bytes) => {
                // SAFETY: `target` has room for `data_length` bytes (caller's
                // contract) and does not overlap the mock's buffer.
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), target.cast::<u8>(), bytes.len())
                };
                Ok(())
            }
            None => Err(Failure::new(
                IREE_STATUS_OUT_OF_RANGE,
                format!(
                    "transfer of {data_length} bytes at offset {source_offset} overruns a buffer of {}",
                    buffer.bytes().len()
                ),
            )),
        }
    };
    to_status(result)
}

/// Reads an IREE string view.
///
/// # Safety
/// `view` points at `size` readable bytes (or is empty).
pub(crate) unsafe fn view_str(view: iree_string_view_t) -> String {
    if view.size == 0 {
        return String::new();
    }
    // SAFETY: forwarded from this function's contract.
    let bytes = unsafe { std::slice::from_raw_parts(view.data.cast::<u8>(), view.size) };
    String::from_utf8_lossy(bytes).into_owned()
}

registry::refcount_functions! {
    iree_async_proactor_pool_t => ProactorPool: iree_async_proactor_pool_release, iree_async_proactor_pool_retain;
    iree_hal_device_t => Device: iree_hal_device_release, iree_hal_device_retain;
    iree_async_frontier_tracker_t => FrontierTracker: iree_async_frontier_tracker_release, iree_async_frontier_tracker_retain;
    iree_hal_device_group_t => DeviceGroup: iree_hal_device_group_release, iree_hal_device_group_retain;
    iree_hal_buffer_view_t => BufferView: iree_hal_buffer_view_release, iree_hal_buffer_view_retain;
    iree_hal_buffer_t => Buffer: iree_hal_buffer_release, iree_hal_buffer_retain;
}

/// A device outside any driver registry, for the mock's unit tests.
#[cfg(test)]
pub(crate) fn test_device() -> Owned<Device> {
    Owned::new(Device::new(
        "test".into(),
        Owned::new(ProactorPool { _node_count: 1 }),
    ))
}
