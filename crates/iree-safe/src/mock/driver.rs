//! HAL drivers: the mock's three, created by the registry's `try_create`,
//! listing their devices and writing a report about each.
//!
//! `local-sync` and `local-task` answer as IREE's local drivers do
//! (iree/hal/drivers/local_sync/sync_driver.c): one device, id 0, named
//! `default`, without a path, and an empty report. [`SOFTWARE_DRIVER`] is
//! the mock's own: one device described as Vulkan describes Mesa's lavapipe
//! (iree/hal/drivers/vulkan/physical_device.c), a `GPU-<uuid>` path and a
//! report whose `type:` line is `cpu`, so the crate's reading of device
//! kinds and its `driver://path` URIs run under miri too.

use super::allocator;
use super::api::*;
use super::hal;
use super::registry::{self, Kind, Object, Owned};
use super::status::{return_object, to_status, Failure, MockResult};
use super::string_builder;
use super::string_view;

/// The name of the mock's driver of one software device, which reports
/// itself as Vulkan reports lavapipe (`type: cpu`). Only the mock has it.
pub const SOFTWARE_DRIVER: &str = "mock-lavapipe";

/// A driver the mock's runtime is built with.
#[derive(Debug)]
pub(crate) struct DriverSpec {
    pub(crate) name: &'static str,
    devices: &'static [DeviceSpec],
}

/// One device of a driver, as `iree_hal_device_info_t` and its report.
#[derive(Debug)]
struct DeviceSpec {
    id: iree_hal_device_id_t,
    path: &'static str,
    name: &'static str,
    report: &'static str,
}

/// The one device of IREE's local drivers.
const LOCAL_DEVICES: &[DeviceSpec] = &[DeviceSpec {
    id: 0,
    path: "",
    name: "default",
    report: "",
}];

/// The drivers `iree_hal_register_all_available_drivers` registers.
pub(crate) const DRIVERS: [DriverSpec; 3] = [
    DriverSpec {
        name: "local-sync",
        devices: LOCAL_DEVICES,
    },
    DriverSpec {
        name: "local-task",
        devices: LOCAL_DEVICES,
    },
    DriverSpec {
        name: SOFTWARE_DRIVER,
        // Vulkan numbers its devices from 1 (0 is IREE_HAL_DEVICE_ID_DEFAULT).
        devices: &[DeviceSpec {
            id: 1,
            path: "GPU-6d65736132322e332e36000000000000",
            name: "llvmpipe (LLVM 15.0.6, 256 bits) (llvmpipe Mesa 22.3.6 (LLVM 15.0.6))",
            report: include_str!("../../tests/data/lavapipe_report.txt"),
        }],
    },
];

fn spec(name: &str) -> Option<&'static DriverSpec> {
    DRIVERS.iter().find(|driver| driver.name == name)
}

/// Splits a device URI as `iree_uri_split` (iree/base/internal/path.c):
/// the driver name before the first `:`, then the path (after a leading
/// `//`, or `/`) up to a `?`.
pub(crate) fn split_uri(uri: &str) -> (&str, &str) {
    let (driver, rest) = uri.split_once(':').unwrap_or((uri, ""));
    let rest = rest
        .strip_prefix("//")
        .unwrap_or_else(|| rest.strip_prefix('/').unwrap_or(rest));
    let path = rest.split_once('?').map_or(rest, |(path, _)| path);
    (driver, path)
}

/// Checks that `driver` has a device at `path` (the empty path selects its
/// default device), failing as IREE's drivers do otherwise.
pub(crate) fn select_device(driver: &str, path: &str) -> MockResult {
    let spec = spec(driver).expect("a registered driver is one of the mock's");
    if path.is_empty()
        || spec
            .devices
            .iter()
            .any(|d| !d.path.is_empty() && d.path == path)
    {
        Ok(())
    } else if spec.devices.iter().all(|d| d.path.is_empty()) {
        // iree_hal_sync_driver_create_device_by_path.
        Err(Failure::new(
            IREE_STATUS_NOT_FOUND,
            "device paths not yet implemented",
        ))
    } else {
        // iree_hal_vulkan_physical_device_select.
        Err(Failure::new(
            IREE_STATUS_NOT_FOUND,
            format!("Vulkan device path '{path}' not found"),
        ))
    }
}

/// A created driver.
#[derive(Debug)]
pub(crate) struct Driver {
    spec: &'static DriverSpec,
}

impl Object for Driver {
    fn kind(&self) -> Kind {
        Kind::Driver
    }
}

/// `iree_hal_driver_registry_try_create`: a new driver of a registered
/// name; NOT_FOUND with IREE's message otherwise.
///
/// # Safety
/// `registry` is the default registry; `driver_name` views readable bytes;
/// `out_driver` is valid for writes.
pub(crate) unsafe fn iree_hal_driver_registry_try_create(
    registry: *mut iree_hal_driver_registry_t,
    driver_name: iree_string_view_t,
    _host_allocator: iree_allocator_t,
    out_driver: *mut *mut iree_hal_driver_t,
) -> iree_status_t {
    // SAFETY: the caller passes a readable view.
    let name = unsafe { string_view::view_str(driver_name) };
    let result = match spec(&name) {
        Some(spec) if hal::is_registered(registry, spec.name) => Ok(Owned::new(Driver { spec })),
        _ => Err(Failure::new(
            IREE_STATUS_NOT_FOUND,
            format!("no driver '{name}' registered"),
        )),
    };
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { return_object(out_driver, result) }
}

/// `iree_hal_driver_query_available_devices`: the driver's devices in one
/// block from `host_allocator`, the infos first and their strings after
/// them, which the caller frees with `iree_allocator_free` (as Vulkan's
/// driver allocates it, iree/hal/drivers/vulkan/physical_device.c).
///
/// # Safety
/// `driver` is live; the out-pointers are valid for writes.
pub(crate) unsafe fn iree_hal_driver_query_available_devices(
    driver: *mut iree_hal_driver_t,
    host_allocator: iree_allocator_t,
    out_device_info_count: *mut iree_host_size_t,
    out_device_infos: *mut *mut iree_hal_device_info_t,
) -> iree_status_t {
    // SAFETY: forwarded from this function's contract; checks liveness.
    let devices = unsafe { registry::get(driver.cast_const().cast::<Driver>()) }
        .spec
        .devices;
    // SAFETY: the caller passes a valid out-pointer (IREE zeroes the count
    // before asking the driver, iree/hal/driver.c).
    unsafe { *out_device_info_count = 0 };
    if host_allocator.ctl.is_none() {
        return Failure::new(
            IREE_STATUS_RESOURCE_EXHAUSTED,
            "the null allocator allocates nothing",
        )
        .into_status();
    }
    let infos_size = devices.len() * size_of::<iree_hal_device_info_t>();
    let strings_size: usize = devices.iter().map(|d| d.path.len() + d.name.len()).sum();
    let block = allocator::malloc(host_allocator, infos_size + strings_size);
    let infos = block.cast::<iree_hal_device_info_t>();
    // SAFETY: the block holds `devices.len()` infos (aligned: blocks are
    // 16-byte aligned, more than an info needs), then `strings_size` bytes.
    unsafe {
        let mut strings = block.add(infos_size);
        for (index, device) in devices.iter().enumerate() {
            let mut copy = |text: &str| {
                strings.copy_from_nonoverlapping(text.as_ptr(), text.len());
                let view = iree_make_string_view(strings.cast(), text.len());
                strings = strings.add(text.len());
                view
            };
            let info = iree_hal_device_info_t {
                device_id: device.id,
                path: copy(device.path),
                name: copy(device.name),
            };
            infos.add(index).write(info);
        }
        *out_device_info_count = devices.len();
        *out_device_infos = infos;
    }
    std::ptr::null_mut()
}

/// `iree_hal_driver_dump_device_info`: appends the device's report to
/// `builder` (nothing for the local drivers, as IREE's); OUT_OF_RANGE for
/// an id the driver did not list, as Vulkan's driver.
///
/// # Safety
/// `driver` is live; `builder` is an initialized string builder.
pub(crate) unsafe fn iree_hal_driver_dump_device_info(
    driver: *mut iree_hal_driver_t,
    device_id: iree_hal_device_id_t,
    builder: *mut iree_string_builder_t,
) -> iree_status_t {
    // SAFETY: forwarded from this function's contract; checks liveness.
    let spec = unsafe { registry::get(driver.cast_const().cast::<Driver>()) }.spec;
    let result = match spec.devices.iter().find(|d| d.id == device_id) {
        None => Err(Failure::new(
            IREE_STATUS_OUT_OF_RANGE,
            format!(
                "device id {device_id} out of range; driver has {} devices",
                spec.devices.len()
            ),
        )),
        Some(device) if device.report.is_empty() => Ok(()),
        // SAFETY: the caller passes an initialized builder.
        Some(device) => unsafe { string_builder::append(builder, device.report) },
    };
    to_status(result)
}

registry::refcount_functions! {
    iree_hal_driver_t => Driver: iree_hal_driver_release, iree_hal_driver_retain;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_split_as_iree_splits_them() {
        assert_eq!(split_uri("local-sync"), ("local-sync", ""));
        assert_eq!(split_uri("local-task://"), ("local-task", ""));
        assert_eq!(split_uri("vulkan://GPU-00ff"), ("vulkan", "GPU-00ff"));
        assert_eq!(split_uri("vulkan:/GPU-00ff"), ("vulkan", "GPU-00ff"));
        assert_eq!(split_uri("vulkan:GPU-00ff?a=b"), ("vulkan", "GPU-00ff"));
    }

    /// Everything the crate does with a driver, at the C level: the list
    /// is one block, freed with the allocator that made it; the report
    /// grows the builder's storage; the driver is released.
    #[test]
    fn lists_and_reports_devices() {
        let _serial = crate::mock::serial();
        let before = crate::mock::live_objects();
        let software = spec(SOFTWARE_DRIVER).unwrap().devices;
        crate::Instance::global().unwrap();
        let allocator = iree_allocator_system();
        let mut driver = std::ptr::null_mut();
        let mut count = 0;
        let mut infos = std::ptr::null_mut();
        let mut builder = iree_string_builder_t::default();
        // SAFETY: the instance registered the drivers; every out-pointer is
        // valid; the list, the builder and the driver are freed once.
        let (path, report) = unsafe {
            let registry = hal::iree_hal_driver_registry_default();
            let status = iree_hal_driver_registry_try_create(
                registry,
                string_view::view(SOFTWARE_DRIVER),
                allocator,
                &mut driver,
            );
            assert!(status.is_null());
            let status =
                iree_hal_driver_query_available_devices(driver, allocator, &mut count, &mut infos);
            assert!(status.is_null());
            assert_eq!(count, 1);
            let info = *infos;
            let path = string_view::view_str(info.path);
            assert_eq!(string_view::view_str(info.name), software[0].name);
            string_builder::iree_string_builder_initialize(allocator, &mut builder);
            let status = iree_hal_driver_dump_device_info(driver, info.device_id, &mut builder);
            assert!(status.is_null());
            let report = string_view::view_str(string_builder::iree_string_builder_view(&builder));
            let unknown = iree_hal_driver_dump_device_info(driver, 7, &mut builder);
            assert_eq!(iree_status_code(unknown), IREE_STATUS_OUT_OF_RANGE);
            super::super::status::iree_status_free(unknown);
            string_builder::iree_string_builder_deinitialize(&mut builder);
            allocator::iree_allocator_free(allocator, infos.cast());
            iree_hal_driver_release(driver);
            (path, report)
        };
        assert_eq!(path, software[0].path);
        assert!(report.contains("\ntype: cpu\n"), "{report}");
        let after = crate::mock::live_objects();
        assert_eq!(
            after.total_excluding_instance(),
            before.total_excluding_instance()
        );
    }

    #[test]
    fn an_unregistered_driver_is_not_found() {
        let _serial = crate::mock::serial();
        crate::Instance::global().unwrap();
        let mut driver = std::ptr::null_mut();
        // SAFETY: valid view and out-pointer; the status is freed once.
        unsafe {
            let status = iree_hal_driver_registry_try_create(
                hal::iree_hal_driver_registry_default(),
                string_view::view("vulkan"),
                iree_allocator_system(),
                &mut driver,
            );
            assert_eq!(iree_status_code(status), IREE_STATUS_NOT_FOUND);
            super::super::status::iree_status_free(status);
        }
        assert!(driver.is_null());
    }
}
