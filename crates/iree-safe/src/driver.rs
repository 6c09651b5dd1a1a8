//! HAL drivers, asked which devices they can open and what kind each one is
//! ([`Device::available`](crate::Device::available)).
//!
//! A driver is created for the question and released after it
//! (`iree_hal_driver_registry_try_create`, as `iree_hal_create_device` does
//! for every device it opens): the device ids it hands out are only valid
//! for that driver instance (iree/hal/device.h), so only the stable paths
//! and names leave this module.

use std::fmt;

use crate::error::{check, Context, Result, StatusCode};
use crate::handle::Handle;
use crate::instance::Instance;
use crate::strings::{self, StringBuilder};
use crate::sys;

/// One device a driver can open, as the driver describes it: an entry of
/// [`Device::available`](crate::Device::available).
///
/// ```no_run
/// use iree_safe::{Device, DeviceKind};
///
/// for info in Device::available("vulkan")? {
///     println!("{} ({:?}): {}", info.name, info.kind, info.uri());
///     if info.kind == DeviceKind::DiscreteGpu {
///         let device = Device::open(&info.uri())?;
///         # drop(device);
///     }
/// }
/// # Ok::<(), iree_safe::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceInfo {
    /// The driver name asked for, e.g. `"vulkan"`.
    pub driver: String,
    /// The driver's stable path for the device, e.g. `GPU-<uuid>` for
    /// Vulkan and CUDA; empty when the driver has none (the local drivers,
    /// which have one device each).
    pub path: String,
    /// The human-readable name the driver gives, e.g. `llvmpipe (LLVM
    /// 15.0.6, 256 bits) (llvmpipe Mesa 22.3.6 (LLVM 15.0.6))`. Vulkan
    /// appends ` [below baseline]` to a device that lacks what IREE needs
    /// (Vulkan 1.3 and a few features); opening such a device fails with
    /// `Unavailable`.
    pub name: String,
    /// What kind of device it is, from the driver's device report.
    pub kind: DeviceKind,
}

impl DeviceInfo {
    /// The URI that opens exactly this device with
    /// [`Device::open`](crate::Device::open): `driver://path`, or the driver
    /// name alone when the path is empty (the driver's default device, the
    /// only one of the local drivers).
    ///
    /// IREE splits a device URI at the first `:` into the driver name and
    /// the rest, strips a leading `//`, and gives the driver everything up
    /// to a `?` as the device path (`iree_uri_split`,
    /// iree/base/internal/path.c); the driver then selects the device whose
    /// path equals it (for Vulkan, `iree_hal_vulkan_physical_device_select`).
    pub fn uri(&self) -> String {
        if self.path.is_empty() {
            self.driver.clone()
        } else {
            format!("{}://{}", self.driver, self.path)
        }
    }
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}, {})", self.uri(), self.name, self.kind)
    }
}

/// What kind of device the driver reports: Vulkan's `VkPhysicalDeviceType`,
/// read from the `type:` line of the driver's device report
/// (`iree_hal_driver_dump_device_info`). `Unknown` when the driver does not
/// say: the local drivers and CUDA report no type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeviceKind {
    /// A GPU of its own (`VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU`).
    DiscreteGpu,
    /// A GPU that shares the host's memory
    /// (`VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU`).
    IntegratedGpu,
    /// A GPU of a virtual machine (`VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU`).
    VirtualGpu,
    /// A device that runs on the host CPU, such as Mesa's lavapipe or
    /// SwiftShader (`VK_PHYSICAL_DEVICE_TYPE_CPU`).
    Cpu,
    /// A device of another kind (`VK_PHYSICAL_DEVICE_TYPE_OTHER`).
    Other,
    /// The driver does not say.
    Unknown,
}

impl DeviceKind {
    /// True for a device that runs on the host CPU (a software rasterizer
    /// such as lavapipe or SwiftShader): a driver-reported [`Cpu`](Self::Cpu).
    ///
    /// The local drivers (`local-sync`, `local-task`) also run on the CPU
    /// but report no kind, so their devices are [`Unknown`](Self::Unknown).
    pub fn is_software(self) -> bool {
        self == DeviceKind::Cpu
    }

    /// The kind named on the first `type:` line of a device report, as
    /// Vulkan writes it (`iree_hal_vulkan_dump_physical_device_info`,
    /// iree/hal/drivers/vulkan/physical_device.c); `Unknown` without one.
    pub(crate) fn from_report(report: &str) -> DeviceKind {
        let Some(kind) = report.lines().find_map(|line| line.strip_prefix("type:")) else {
            return DeviceKind::Unknown;
        };
        match kind.trim() {
            "discrete-gpu" => DeviceKind::DiscreteGpu,
            "integrated-gpu" => DeviceKind::IntegratedGpu,
            "virtual-gpu" => DeviceKind::VirtualGpu,
            "cpu" => DeviceKind::Cpu,
            "other" => DeviceKind::Other,
            _ => DeviceKind::Unknown,
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceKind::DiscreteGpu => "discrete GPU",
            DeviceKind::IntegratedGpu => "integrated GPU",
            DeviceKind::VirtualGpu => "virtual GPU",
            DeviceKind::Cpu => "CPU",
            DeviceKind::Other => "other",
            DeviceKind::Unknown => "unknown kind",
        })
    }
}

/// The devices `driver_name` can open, in the driver's order (see
/// [`Device::available`](crate::Device::available)).
pub(crate) fn available(driver_name: &str) -> Result<Vec<DeviceInfo>> {
    Instance::global()?;
    let allocator = sys::iree_allocator_system();
    // SAFETY: the registry is a process static (iree/hal/driver_registry.h);
    // `driver_name` outlives the call, which does not keep it; on success
    // the factory's `try_create` stores one driver reference that is ours,
    // on failure `*out_driver` stays null (driver_registry.c sets it first).
    let created = unsafe {
        Handle::create(|out| {
            sys::iree_hal_driver_registry_try_create(
                sys::iree_hal_driver_registry_default(),
                strings::view(driver_name),
                allocator,
                out,
            )
        })
    };
    let hint = missing_driver_hint(&created);
    let driver = created.context(|| format!("cannot create driver `{driver_name}`{hint}"))?;
    let list = DeviceList::query(&driver, allocator)
        .context(|| format!("listing the devices of driver `{driver_name}`"))?;
    Ok(list
        .infos()
        .iter()
        .map(|info| DeviceInfo {
            driver: driver_name.to_owned(),
            // SAFETY: the driver fills `path` and `name` with views of its
            // static strings (the local drivers, local_sync/sync_driver.c)
            // or of the list's own block (vulkan/physical_device.c,
            // cuda/cuda_driver.c), both live while `list` is.
            path: unsafe { strings::to_string(info.path) },
            // SAFETY: as above.
            name: unsafe { strings::to_string(info.name) },
            kind: device_kind(&driver, info.device_id),
        })
        .collect())
}

/// The kind of device `device_id` of `driver` from the driver's report,
/// `Unknown` when it writes none or cannot (the listing never fails for it).
fn device_kind(
    driver: &Handle<sys::iree_hal_driver_t>,
    device_id: sys::iree_hal_device_id_t,
) -> DeviceKind {
    let mut report = StringBuilder::new(sys::iree_allocator_system());
    // SAFETY: the driver is live (we hold a reference); `device_id` came
    // from this driver instance's `iree_hal_driver_query_available_devices`,
    // as driver.h requires; the builder is initialized and only appended to;
    // the status is ours and `check` frees it.
    let dumped = unsafe {
        check(sys::iree_hal_driver_dump_device_info(
            driver.as_ptr(),
            device_id,
            report.as_mut_ptr(),
        ))
    };
    match dumped {
        Ok(()) => DeviceKind::from_report(&report.text()),
        Err(error) => {
            tracing::debug!("no device report for device {device_id}: {error}");
            DeviceKind::Unknown
        }
    }
}

/// The array `iree_hal_driver_query_available_devices` returns: the infos
/// and their strings in one block from the host allocator, which the caller
/// frees with `iree_allocator_free` on the same allocator (iree/hal/driver.h).
struct DeviceList {
    infos: *mut sys::iree_hal_device_info_t,
    count: usize,
    allocator: sys::iree_allocator_t,
}

impl DeviceList {
    fn query(
        driver: &Handle<sys::iree_hal_driver_t>,
        allocator: sys::iree_allocator_t,
    ) -> Result<DeviceList> {
        let mut list = DeviceList {
            infos: std::ptr::null_mut(),
            count: 0,
            allocator,
        };
        // SAFETY: the driver is live; the out-pointers are valid. On success
        // the driver stores `count` infos in one block from `allocator`
        // (or null with a count of 0, Vulkan without devices), which `list`
        // now owns; on failure the drivers free what they allocated and
        // leave the pointer as it was (null), so `Drop` frees nothing.
        unsafe {
            check(sys::iree_hal_driver_query_available_devices(
                driver.as_ptr(),
                allocator,
                &mut list.count,
                &mut list.infos,
            ))
        }?;
        Ok(list)
    }

    fn infos(&self) -> &[sys::iree_hal_device_info_t] {
        if self.infos.is_null() || self.count == 0 {
            return &[];
        }
        // SAFETY: the driver returned `count` initialized infos at `infos`,
        // which live until `self` frees them.
        unsafe { std::slice::from_raw_parts(self.infos, self.count) }
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: the block came from `self.allocator` and is freed once,
        // with the allocator that made it (driver.h); `iree_allocator_free`
        // of null does nothing (iree/base/allocator.h).
        unsafe { sys::iree_allocator_free(self.allocator, self.infos.cast()) };
    }
}

/// What to say after a failure to create a driver or open a device: which
/// drivers are built in and how to build one in, when the failure is that
/// it is not.
pub(crate) fn missing_driver_hint<T>(result: &Result<T>) -> String {
    match result {
        Err(error) if error.code() == StatusCode::NotFound => format!(
            " ({}a GPU driver is built in by the `vulkan`, `cuda` or `metal` cargo feature of \
             iree-safe (and the crates that forward it), or, for an install, by `cargo xtask \
             build-iree --drivers`)",
            crate::IREE_RUNTIME_DRIVERS
                .map(|drivers| format!("this runtime has the drivers {drivers}; "))
                .unwrap_or_default()
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report of Mesa's lavapipe from IREE's Vulkan driver
    /// (`iree_hal_vulkan_dump_physical_device_info`), on the machine the
    /// tests were written on.
    const LAVAPIPE_REPORT: &str = include_str!("../tests/data/lavapipe_report.txt");

    #[test]
    fn reads_the_type_line_of_a_vulkan_report() {
        assert_eq!(DeviceKind::from_report(LAVAPIPE_REPORT), DeviceKind::Cpu);
        for (line, kind) in [
            ("discrete-gpu", DeviceKind::DiscreteGpu),
            ("integrated-gpu", DeviceKind::IntegratedGpu),
            ("virtual-gpu", DeviceKind::VirtualGpu),
            ("cpu", DeviceKind::Cpu),
            ("other", DeviceKind::Other),
            ("unknown", DeviceKind::Unknown),
            ("quantum", DeviceKind::Unknown),
        ] {
            let report = LAVAPIPE_REPORT.replace("type: cpu", &format!("type: {line}"));
            assert_eq!(DeviceKind::from_report(&report), kind, "{line}");
        }
    }

    #[test]
    fn a_report_without_a_type_line_is_unknown() {
        assert_eq!(DeviceKind::from_report(""), DeviceKind::Unknown);
        // CUDA's report (iree/hal/drivers/cuda/cuda_driver.c).
        let cuda = "\n- gpu-compute-capability: 9.0\n- driver-max-cuda-version: 12.8\n";
        assert_eq!(DeviceKind::from_report(cuda), DeviceKind::Unknown);
        // Only a line that starts with `type:` counts.
        assert_eq!(
            DeviceKind::from_report("name: x\n  type: cpu\n"),
            DeviceKind::Unknown
        );
    }

    #[test]
    fn only_the_cpu_kind_is_software() {
        assert!(DeviceKind::Cpu.is_software());
        for kind in [
            DeviceKind::DiscreteGpu,
            DeviceKind::IntegratedGpu,
            DeviceKind::VirtualGpu,
            DeviceKind::Other,
            DeviceKind::Unknown,
        ] {
            assert!(!kind.is_software(), "{kind:?}");
        }
    }

    #[test]
    fn the_uri_names_the_path_when_there_is_one() {
        let mut info = DeviceInfo {
            driver: "vulkan".into(),
            path: "GPU-6d65736132322e332e36000000000000".into(),
            name: "llvmpipe".into(),
            kind: DeviceKind::Cpu,
        };
        assert_eq!(info.uri(), "vulkan://GPU-6d65736132322e332e36000000000000");
        info.driver = "local-sync".into();
        info.path.clear();
        assert_eq!(info.uri(), "local-sync");
    }
}
