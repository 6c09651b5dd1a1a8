//! HAL objects: the driver registry, proactor pools, devices (each its own
//! allocator), frontier trackers, device groups, buffers and buffer views.
//!
//! Ownership follows IREE: a device retains its proactor pool, a device
//! group its device and frontier tracker, a buffer view its buffer. A buffer
//! does not retain its device (IREE's buffer placement is unretained); it
//! remembers it so `transfer_d2h` can check the pair, and shares its
//! allocator's statistics, which it updates when it is freed (as IREE's
//! heap buffers do, `iree/hal/buffer_heap.c`).
//!
//! One file per responsibility: `driver_registry.rs` (the default
//! registry), `device.rs` (proactor pools, devices and their allocator
//! statistics, frontier trackers, device groups), `buffer.rs` (buffers,
//! imports, device-to-host transfers) and `buffer_view.rs` (buffer views
//! and their VM refs).

mod buffer;
mod buffer_view;
mod device;
mod driver_registry;

pub(crate) use buffer::*;
pub(crate) use buffer_view::*;
pub(crate) use device::*;
pub(crate) use driver_registry::*;

use crate::mock::api::*;
use crate::mock::registry;

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
pub(crate) fn test_device() -> registry::Owned<Device> {
    use registry::Owned;
    Owned::new(Device::new(
        "test".into(),
        Owned::new(ProactorPool { _node_count: 1 }),
        iree_sys::iree_allocator_system(),
    ))
}
