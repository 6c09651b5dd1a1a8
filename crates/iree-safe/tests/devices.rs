//! `Device::available`: the devices a driver lists, their kinds, and the
//! URIs that open them.
//!
//! The local-driver and unknown-driver tests run against the real runtime
//! and, under miri, against the mock (where `LeakCheck` also proves the
//! driver, the device list and the report storage were freed), as does the
//! test of the mock's software driver; the Vulkan and CUDA tests need the
//! real runtime. Vulkan is optional unless `IREE_SAFE_TEST_DEVICES` names it
//! (CI sets `IREE_SAFE_TEST_DEVICES=vulkan`): then it must load and list its
//! devices.

use iree_safe::{Device, DeviceKind, StatusCode};
use test_support::iree::LeakCheck;

#[test]
fn the_local_drivers_list_one_device_that_opens() {
    let _check = LeakCheck::start();
    for driver in ["local-sync", "local-task"] {
        let devices = Device::available(driver).unwrap();
        assert_eq!(devices.len(), 1, "{devices:?}");
        let info = &devices[0];
        assert_eq!(info.driver, driver);
        // IREE's local drivers have no device paths and write no report.
        assert_eq!(info.path, "");
        assert_eq!(info.uri(), driver);
        assert_eq!(info.kind, DeviceKind::Unknown);
        assert!(!info.kind.is_software());
        let device = Device::open(&info.uri()).unwrap_or_else(|e| panic!("{info}: {e}"));
        assert_eq!(device.uri(), driver);
        assert_eq!(device.query_i64("hal.device.id", driver).unwrap(), 1);
    }
}

#[test]
fn a_driver_not_built_in_is_not_found() {
    let _check = LeakCheck::start();
    let error = Device::available("no-such-driver").unwrap_err();
    assert_eq!(error.code(), StatusCode::NotFound, "{error}");
    assert!(error.to_string().contains("no-such-driver"), "{error}");
}

/// The mock's driver of one software device: its report says `type: cpu`
/// and its URI names the device's path.
#[cfg(iree_mock)]
#[test]
fn the_mock_software_driver_lists_a_cpu_device_that_opens_by_path() {
    use iree_safe::mock::SOFTWARE_DRIVER;

    let _check = LeakCheck::start();
    let devices = Device::available(SOFTWARE_DRIVER).unwrap();
    assert_eq!(devices.len(), 1, "{devices:?}");
    let info = &devices[0];
    assert_eq!(info.kind, DeviceKind::Cpu);
    assert!(info.kind.is_software());
    assert!(info.name.starts_with("llvmpipe"), "{info}");
    assert!(info.path.starts_with("GPU-"), "{info}");
    assert_eq!(info.uri(), format!("{SOFTWARE_DRIVER}://{}", info.path));
    Device::open(&info.uri()).unwrap();
    let error = Device::open(&format!("{SOFTWARE_DRIVER}://GPU-0")).unwrap_err();
    assert_eq!(error.code(), StatusCode::NotFound, "{error}");
}

/// Without `libcuda.so` the CUDA driver cannot be created, and says why;
/// where CUDA loads (a GPU machine), every device it lists opens instead.
#[cfg(not(iree_mock))]
#[test]
fn cuda_lists_devices_that_open_or_says_libcuda_is_missing() {
    match Device::available("cuda") {
        Ok(devices) => {
            for info in &devices {
                eprintln!("cuda: {info}");
                assert!(info.path.starts_with("GPU-"), "{info}");
                Device::open(&info.uri()).unwrap_or_else(|e| panic!("{info}: {e}"));
            }
        }
        Err(error) if libcuda_loads() => {
            // The driver's own error (no device, say), not a missing library.
            eprintln!("libcuda.so loads but CUDA lists no devices: {error}");
        }
        Err(error) => {
            assert_eq!(error.code(), StatusCode::Unavailable, "{error}");
            assert!(error.to_string().contains("libcuda"), "{error}");
        }
    }
}

#[cfg(not(iree_mock))]
fn libcuda_loads() -> bool {
    ["libcuda.so", "libcuda.so.1"].iter().any(|name| {
        // SAFETY: loading NVIDIA's driver library runs its initializers,
        // which IREE's CUDA driver runs too when it loads it.
        unsafe { libloading::Library::new(name) }.is_ok()
    })
}

/// Every Vulkan device opens by its URI (one below IREE's baseline says so
/// instead), a path no device has is not found, and Mesa's lavapipe, where
/// its ICD is installed, is listed as a CPU device.
#[cfg(not(iree_mock))]
#[test]
fn vulkan_devices_open_by_uri_and_lavapipe_is_software() {
    let required = std::env::var("IREE_SAFE_TEST_DEVICES")
        .is_ok_and(|devices| devices.split(',').any(|d| d.trim() == "vulkan"));
    let devices = match Device::available("vulkan") {
        Ok(devices) => devices,
        Err(error) => {
            assert!(
                !required,
                "IREE_SAFE_TEST_DEVICES names vulkan, which cannot list its devices: {error}"
            );
            eprintln!("skipped: Vulkan is not available here ({error})");
            return;
        }
    };
    assert!(
        !(required && devices.is_empty()),
        "IREE_SAFE_TEST_DEVICES names vulkan, which lists no devices"
    );
    for info in &devices {
        eprintln!("vulkan: {info}");
        assert_eq!(info.driver, "vulkan");
        assert!(info.path.starts_with("GPU-"), "{info}");
        match Device::open(&info.uri()) {
            Ok(device) => assert_eq!(device.uri(), info.uri()),
            Err(error) if info.name.ends_with("[below baseline]") => {
                assert_eq!(error.code(), StatusCode::Unavailable, "{info}: {error}");
            }
            Err(error) => panic!("{info}: {error}"),
        }
    }
    if !devices.is_empty() {
        // The path selects the device: one that matches none is not found.
        let error = Device::open("vulkan://GPU-00000000000000000000000000000000").unwrap_err();
        assert_eq!(error.code(), StatusCode::NotFound, "{error}");
    }
    let lavapipe: Vec<_> = devices
        .iter()
        .filter(|info| info.name.starts_with("llvmpipe"))
        .collect();
    for info in &lavapipe {
        assert_eq!(info.kind, DeviceKind::Cpu, "{info}");
        assert!(info.kind.is_software(), "{info}");
    }
    if lavapipe_icd_installed() {
        assert!(
            !lavapipe.is_empty(),
            "Mesa's lavapipe ICD is installed but Vulkan does not list it: {devices:#?}"
        );
    }
}

/// Whether the loader will find Mesa's lavapipe: its ICD manifest is in a
/// standard place and no variable narrows the loader's search.
#[cfg(not(iree_mock))]
fn lavapipe_icd_installed() -> bool {
    let narrowed = [
        "VK_ICD_FILENAMES",
        "VK_DRIVER_FILES",
        "VK_LOADER_DRIVERS_SELECT",
    ]
    .iter()
    .any(|name| std::env::var_os(name).is_some());
    let installed = ["/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d"]
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .flatten()
        .any(|entry| entry.file_name().to_string_lossy().starts_with("lvp_icd"));
    installed && !narrowed
}
