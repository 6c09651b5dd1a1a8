//! Building the runtime from an IREE checkout (`IREE_SOURCE_DIR`) with the
//! `cmake` crate, always in Release: the `cmake` crate would otherwise map
//! Cargo's debug profile to a Debug IREE, which every test would then run.

use std::path::Path;

use crate::install::{default_static_libs, default_system_libs, runtime_libs, Install};

/// The driver-independent options, shared with `cargo xtask build-iree`.
const RUNTIME_OPTIONS: &str = include_str!("runtime-options.txt");

pub(crate) fn build(source: &Path) -> Result<Install, String> {
    if !source.join("runtime/version.json").is_file() {
        return Err(format!(
            "iree-sys: IREE_SOURCE_DIR={} is not an IREE checkout (no runtime/version.json)",
            source.display()
        ));
    }
    let mut config = cmake::Config::new(source);
    config
        .profile("Release")
        .build_target("iree_runtime_unified");
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
    install.check(&format!(
        "the build of IREE_SOURCE_DIR={}",
        source.display()
    ))?;
    Ok(install)
}
