//! Building the runtime from IREE sources with the `cmake` crate into
//! Cargo's `OUT_DIR`, always in Release (the `cmake` crate would otherwise
//! map Cargo's debug profile to a Debug IREE, which every test would then
//! run): a checkout of the user's (`IREE_SOURCE_DIR`), or the sources of the
//! pinned registry package (`iree_source.rs`) when nothing else is found.

use std::path::{Path, PathBuf};

use crate::cmake_tools::{self, CmakeTools};
use crate::features::{SourceDrivers, Wanted};
use crate::install::{default_static_libs, default_system_libs, runtime_libs, Install};
use crate::{drivers, iree_source, release, target};

/// The driver-independent options, shared with `cargo xtask build-iree`.
const RUNTIME_OPTIONS: &str = include_str!("runtime-options.txt");

/// Builds the IREE checkout named by `IREE_SOURCE_DIR` with the drivers
/// `wanted`.
pub(crate) fn build_checkout(source: &Path, wanted: &Wanted) -> Result<Install, String> {
    let origin = format!("IREE_SOURCE_DIR={}", source.display());
    target::refuse_cross_build_from_source(&origin)?;
    let version_json = source.join("runtime/version.json");
    if !version_json.is_file() {
        return Err(format!(
            "iree-sys: {origin} is not an IREE checkout (no runtime/version.json)"
        ));
    }
    println!("cargo:rerun-if-changed={}", version_json.display());
    release::check(&release::read_version_json(&version_json)?, &origin)?;
    let drivers = wanted.for_source()?;
    let tools = cmake_tools::find().map_err(|e| format!("iree-sys: building {origin}: {e}"))?;
    build(source, &tools, &origin, &drivers)
}

/// Builds the sources of the pinned registry package, the build-dependency
/// `eerie-sys`, with the drivers `wanted`. The last resort: no install was
/// found.
pub(crate) fn build_pinned(wanted: &Wanted) -> Result<Install, String> {
    let what = "no IREE runtime found (IREE_DIR and IREE_SOURCE_DIR are unset, and no \
        `cargo xtask build-iree` install), so iree-sys builds one from the IREE sources of the \
        crates.io package eerie-sys 0.5.0";
    target::refuse_cross_build_from_source("the pinned IREE sources")?;
    let drivers = wanted.for_source()?;
    let tools =
        cmake_tools::find().map_err(|e| format!("iree-sys: {what}, which needs CMake: {e}"))?;
    let source = locate_pinned().map_err(|e| format!("iree-sys: {what}: {e}"))?;
    build(
        &source.dir,
        &tools,
        &format!("the sources of {}", source.package),
        &drivers,
    )
}

/// The sources of the build-dependency `eerie-sys`, wherever Cargo took it
/// from (its registry cache, a vendor folder, a local registry).
///
/// Cargo tells a build script nothing of its build-dependencies' folders
/// (`DEP_*` needs a `links` key, which eerie-sys has not). It records them
/// though: compiling `eerie_sys` writes `deps/eerie_sys-<hash>.d`, beside
/// this script's `build/<package>-<hash>/`, listing the package's
/// `src/lib.rs`. The newest such record wins: Cargo compiled this script's
/// build-dependency just before the script.
pub(crate) fn locate_pinned() -> Result<iree_source::PinnedSource, String> {
    let script =
        std::env::current_exe().map_err(|e| format!("cannot locate the build script: {e}"))?;
    let deps = script
        .ancestors()
        .nth(3)
        .map(|profile| profile.join("deps"))
        .ok_or_else(|| format!("{} is not under Cargo's build folder", script.display()))?;
    let prefix = format!("{}-", iree_source::PACKAGE.replace('-', "_"));
    let newest = std::fs::read_dir(&deps)
        .map_err(|e| format!("cannot read {}: {e}", deps.display()))?
        .filter_map(Result::ok)
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name.starts_with(&prefix) && name.ends_with(".d")
        })
        .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
        .max()
        .map(|(_, path)| path)
        .ok_or_else(|| {
            format!(
                "Cargo compiled no {} {} into {}",
                iree_source::PACKAGE,
                iree_source::VERSION,
                deps.display()
            )
        })?;
    let record = std::fs::read_to_string(&newest)
        .map_err(|e| format!("cannot read {}: {e}", newest.display()))?;
    let lib = dep_info_paths(&record)
        .into_iter()
        .find(|path| path.ends_with("src/lib.rs"))
        .ok_or_else(|| format!("{} names no src/lib.rs", newest.display()))?;
    let package_dir = lib
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("{} has no package folder", lib.display()))?;
    iree_source::at(package_dir)
}

/// The paths a Makefile-style dep-info record lists (spaces in a path are
/// escaped as `\ `).
fn dep_info_paths(record: &str) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for line in record.lines() {
        let Some((_, inputs)) = line.split_once(": ") else {
            continue;
        };
        let mut current = String::new();
        let mut chars = inputs.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&' ') => current.push(chars.next().unwrap_or(' ')),
                ' ' if !current.is_empty() => {
                    paths.push(PathBuf::from(std::mem::take(&mut current)))
                }
                ' ' => {}
                c => current.push(c),
            }
        }
        if !current.is_empty() {
            paths.push(PathBuf::from(current));
        }
    }
    paths
}

/// Configures and builds `iree_runtime_unified` with `drivers` from
/// `source`; `origin` names the sources in errors.
fn build(
    source: &Path,
    tools: &CmakeTools,
    origin: &str,
    drivers: &SourceDrivers,
) -> Result<Install, String> {
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
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    for define in drivers::cmake_defines(&target_os, &drivers.drivers) {
        let (key, value) = define.split_once('=').unwrap_or((&define, ""));
        config.define(key, value);
    }
    if let Some(cuda) = &drivers.cuda {
        if let Some(define) = cuda.cmake_define() {
            let (key, value) = define.split_once('=').unwrap_or((&define, ""));
            config.define(key, value);
        }
        if let Some((name, value)) = cuda.configure_env() {
            config.env(name, value);
        }
    }
    let out = config.build();
    let build = out.join("build");
    let install = Install {
        prefix: out.clone(),
        lib_dirs: runtime_libs("static")
            .filter_map(|(_, path)| build.join(path).parent().map(Path::to_path_buf))
            .collect(),
        static_libs: default_static_libs(),
        system_libs: default_system_libs(),
        frameworks: drivers::frameworks(&drivers.drivers),
        manifest: None,
        build_id: format!(
            "source {} ({}{})",
            source.display(),
            drivers.drivers.join(","),
            match &drivers.cuda {
                Some(cuda) => format!("; CUDA headers {}", cuda.root().display()),
                None => String::new(),
            }
        ),
        drivers: Some(drivers.drivers.iter().map(|d| d.to_string()).collect()),
        origin: format!("the build of {origin}"),
    };
    install.check(&install.origin)?;
    Ok(install)
}
