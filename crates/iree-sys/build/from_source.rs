//! Building the runtime from IREE sources with the `cmake` crate into
//! Cargo's `OUT_DIR`, always in Release (the `cmake` crate would otherwise
//! map Cargo's debug profile to a Debug IREE, which every test would then
//! run): a checkout of the user's (`IREE_SOURCE_DIR`), or the sources of the
//! pinned registry package (`iree_source.rs`) when nothing else is found.

use std::path::{Path, PathBuf};

use crate::cmake_tools::{self, CmakeTools};
use crate::install::{default_static_libs, default_system_libs, runtime_libs, Install};
use crate::{iree_source, target};

/// The driver-independent options, shared with `cargo xtask build-iree`.
const RUNTIME_OPTIONS: &str = include_str!("runtime-options.txt");

/// Builds the IREE checkout named by `IREE_SOURCE_DIR`.
pub(crate) fn build_checkout(source: &Path) -> Result<Install, String> {
    let origin = format!("IREE_SOURCE_DIR={}", source.display());
    target::refuse_cross_build_from_source(&origin)?;
    if !source.join("runtime/version.json").is_file() {
        return Err(format!(
            "iree-sys: {origin} is not an IREE checkout (no runtime/version.json)"
        ));
    }
    let tools = cmake_tools::find().map_err(|e| format!("iree-sys: building {origin}: {e}"))?;
    build(source, &tools, &origin)
}

/// Builds the sources of the pinned registry package, which Cargo downloads
/// on first use (`$CARGO metadata`). The last resort: no install was found.
pub(crate) fn build_pinned() -> Result<Install, String> {
    let what = "no IREE runtime found (IREE_DIR and IREE_SOURCE_DIR are unset, and no \
        `cargo xtask build-iree` install), so iree-sys builds one from the IREE sources of the \
        crates.io package eerie-sys 0.5.0";
    target::refuse_cross_build_from_source("the pinned IREE sources")?;
    let tools =
        cmake_tools::find().map_err(|e| format!("iree-sys: {what}, which needs CMake: {e}"))?;
    let cargo = PathBuf::from(std::env::var_os("CARGO").expect("cargo sets CARGO"));
    let scratch =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("iree-source");
    let source = iree_source::resolve(&cargo, &scratch).map_err(|e| {
        format!(
            "iree-sys: {what}: {e}; fetch it once with network access, or set IREE_DIR to an \
             IREE runtime install"
        )
    })?;
    build(
        &source.dir,
        &tools,
        &format!("the sources of {}", source.package),
    )
}

/// Configures and builds `iree_runtime_unified` from `source`; `origin`
/// names the sources in errors and in `build_info::RUNTIME_BUILD`.
fn build(source: &Path, tools: &CmakeTools, origin: &str) -> Result<Install, String> {
    // The `cmake` crate runs `$CMAKE`: make it the CMake that was checked.
    std::env::set_var("CMAKE", &tools.cmake);
    let mut config = cmake::Config::new(source);
    config
        .profile("Release")
        .build_target("iree_runtime_unified");
    if let Some(ninja) = &tools.ninja {
        config
            .generator("Ninja")
            .define("CMAKE_MAKE_PROGRAM", ninja);
    }
    for option in RUNTIME_OPTIONS
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (key, value) = option.split_once('=').unwrap_or((option, ""));
        if key != "CMAKE_BUILD_TYPE" {
            config.define(key, value);
        }
    }
    config
        .define("IREE_HAL_DRIVER_LOCAL_SYNC", "ON")
        .define("IREE_HAL_DRIVER_LOCAL_TASK", "ON");
    let out = config.build();
    let build = out.join("build");
    let install = Install {
        prefix: out.clone(),
        lib_dirs: runtime_libs("static")
            .filter_map(|(_, path)| build.join(path).parent().map(Path::to_path_buf))
            .collect(),
        static_libs: default_static_libs(),
        system_libs: default_system_libs(),
        manifest: None,
        build_id: format!("source {}", source.display()),
    };
    install.check(&format!("the build of {origin}"))?;
    Ok(install)
}
