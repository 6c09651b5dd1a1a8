//! The process-wide HAL driver registry (`iree_hal_driver_registry_default`),
//! which the mock's drivers (`driver.rs`) are registered in, and the NUMA
//! node count the proactor pools are sized by.

use std::sync::{Mutex, PoisonError};

use crate::mock::api::*;
use crate::mock::driver::DRIVERS;
use crate::mock::status::Failure;

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
