//! A Vulkan device for the tests on a machine without a GPU: Mesa's
//! lavapipe (Debian's `mesa-vulkan-drivers`), a software Vulkan 1.3 device
//! that runs SPIR-V on the CPU, and the Vulkan loader (`libvulkan1`) that
//! IREE's Vulkan driver opens. Installed when the loader or lavapipe's
//! driver manifest is missing; the test run then sets
//! `SHEAF_JIT_TEST_DEVICES=vulkan` (the integration layer's device suite)
//! and `IREE_SAFE_TEST_DEVICES=vulkan` (iree-safe's device tests), so the
//! Vulkan tests fail rather than skip.

use std::path::Path;

use anyhow::Result;

use crate::debian;

/// Where Debian's loader and lavapipe's manifest live.
const LOADER: &str = "/usr/lib/x86_64-linux-gnu/libvulkan.so.1";
const LAVAPIPE_MANIFEST: &str = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json";

/// The variables that name the GPU drivers the device tests must run on:
/// the integration layer's and iree-safe's.
pub(crate) const REQUIRED_ENV: [&str; 2] = ["SHEAF_JIT_TEST_DEVICES", "IREE_SAFE_TEST_DEVICES"];

/// Makes sure lavapipe and the loader are installed.
pub(crate) fn ensure() -> Result<()> {
    debian::ensure(
        &["libvulkan1", "mesa-vulkan-drivers"],
        || Path::new(LOADER).is_file() && Path::new(LAVAPIPE_MANIFEST).is_file(),
        "the Vulkan tests need a Vulkan device: install Mesa's lavapipe as root \
         (`apt-get install libvulkan1 mesa-vulkan-drivers`)",
    )
}
