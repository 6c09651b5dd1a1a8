//! The HAL drivers of a runtime build: which exist, which each operating
//! system builds, which are its GPU drivers by default, and the CMake options
//! that select them.
//!
//! This file is the one list: the iree-sys build script includes it as a
//! module and so does `cargo xtask build-iree` (`#[path]`), so a dependent's
//! build from source and the workspace's install cannot drift apart. The
//! driver-independent options are `runtime-options.txt` beside it (which
//! turns `IREE_HAL_DRIVER_DEFAULTS` off, so only the drivers named here are
//! built).

/// The two CPU drivers, built on every system: `local-sync` runs on the
/// caller's thread, `local-task` on a pool of workers.
pub(crate) const CPU: [&str; 2] = ["local-sync", "local-task"];

/// Every driver a build may name.
pub(crate) const ALL: [&str; 5] = ["local-sync", "local-task", "vulkan", "cuda", "metal"];

/// The drivers IREE builds for the system Rust's `target_os` names: on
/// Linux the CPU drivers, Vulkan (which opens `libvulkan.so.1` when a device
/// is created) and CUDA (`libcuda.so`, likewise: neither needs a GPU to
/// build); on macOS the CPU drivers and Metal (IREE builds it for Apple
/// Silicon only). Other systems are the CPU drivers'.
pub(crate) fn buildable(target_os: &str) -> &'static [&'static str] {
    match target_os {
        "linux" => &["local-sync", "local-task", "vulkan", "cuda"],
        "macos" => &["local-sync", "local-task", "metal"],
        _ => &CPU,
    }
}

/// The GPU drivers of `target_os`'s platform (iree-sys's default feature
/// `platform-gpu`, and `cargo xtask build-iree` without `--drivers`):
/// Vulkan and CUDA on Linux, Metal on macOS. CUDA needs its headers at
/// build time; a build from source without them leaves it out (`cuda`, the
/// feature, makes them required).
pub(crate) fn platform_gpu(target_os: &str) -> &'static [&'static str] {
    match target_os {
        "linux" => &["vulkan", "cuda"],
        "macos" => &["metal"],
        _ => &[],
    }
}

/// The CMake definitions (`NAME=VALUE`, without `-D`) that build exactly
/// `drivers` for `target_os`: `IREE_HAL_DRIVER_<NAME>` on or off for every
/// driver the system builds.
pub(crate) fn cmake_defines(target_os: &str, drivers: &[impl AsRef<str>]) -> Vec<String> {
    buildable(target_os)
        .iter()
        .map(|driver| {
            let on = drivers.iter().any(|d| d.as_ref() == *driver);
            format!(
                "IREE_HAL_DRIVER_{}={}",
                driver.replace('-', "_").to_uppercase(),
                if on { "ON" } else { "OFF" }
            )
        })
        .collect()
}

/// The Apple frameworks a runtime with `drivers` links: the `framework
/// <driver> <name>` lines of `runtime-libs.txt` (what IREE's CMake links the
/// Metal driver with, `runtime/src/iree/hal/drivers/metal/CMakeLists.txt`).
pub(crate) fn frameworks(drivers: &[impl AsRef<str>]) -> Vec<String> {
    include_str!("runtime-libs.txt")
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("framework")).then_some(())?;
            let (driver, name) = (words.next()?, words.next()?);
            drivers
                .iter()
                .any(|d| d.as_ref() == driver)
                .then(|| name.to_owned())
        })
        .collect()
}
