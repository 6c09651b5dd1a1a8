//! Tracy's client sources for `build-iree --tracing=tracy` on IREE sources
//! without the `third_party/tracy` submodule (the pinned crates.io package
//! eerie-sys 0.5.0 has none).
//!
//! They come from the crates.io package `tracy-client-sys`, pinned in the
//! workspace's `Cargo.toml` (xtask's dependency): Cargo downloads it,
//! checks it against the checksum in `Cargo.lock` and vendors it like any
//! other, and its `tracy/` folder is Tracy's `public/` folder (the C++
//! client, `TracyClient.cpp`, `tracy/TracyC.h`). Nothing is copied into
//! the repository.
//!
//! IREE's CMake adds `third_party/tracy` of its own source tree, a fixed
//! path, so the build configures an overlay instead: a folder under
//! `target/iree/` of links to every entry of the IREE sources, whose
//! `third_party/` also holds `tracy/`, with `public` linked to the
//! package's `tracy/` folder and a `CMakeLists.txt` written here. That file
//! defines Tracy's `TracyClient` target as an interface library (its
//! headers): IREE's `tracy.cc` compiles Tracy's client itself, including
//! `TracyClient.cpp` under its own configuration, into the runtime library.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::source;

/// The package that carries Tracy's client sources.
pub(crate) const PACKAGE: &str = "tracy-client-sys";

/// Its pinned version (the workspace's `=` requirement): it bundles Tracy
/// 0.11.1, the release of the Tracy that IREE 3.13's `tracy.h` and
/// `tracy.cc` build against (IREE pins a 0.11.2 development commit; the
/// protocol is 0.11.1's); a Tracy profiler GUI must be of that release.
pub(crate) const VERSION: &str = "0.24.3";

/// The Tracy release the pinned package bundles.
pub(crate) const TRACY_VERSION: &str = "0.11.1";

/// What the overlay's `third_party/tracy/CMakeLists.txt` says: Tracy's
/// `TracyClient` target, as IREE's `runtime/src/iree/base/tracing`
/// (`Tracy::TracyClient`) and top-level `CMakeLists.txt` (`TracyClient`,
/// installed) use it.
const CMAKE_LISTS: &str = "\
# Written by `cargo xtask build-iree --tracing=tracy` (xtask/src/tracy_client.rs):
# Tracy's client target, in place of IREE's third_party/tracy submodule.
# `public` links to the `tracy/` folder of the crates.io package
# tracy-client-sys, which is Tracy's `public/` folder. IREE's tracy.cc
# compiles TracyClient.cpp itself, so the target carries headers and system
# libraries only.
find_package(Threads REQUIRED)
add_library(TracyClient INTERFACE)
target_include_directories(TracyClient SYSTEM INTERFACE
  $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/public>)
target_link_libraries(TracyClient INTERFACE Threads::Threads ${CMAKE_DL_LIBS})
add_library(Tracy::TracyClient ALIAS TracyClient)
";

/// The IREE source tree at `iree` with Tracy's client added as
/// `third_party/tracy`: an overlay under `overlay_root` (written or brought
/// up to date; a file is rewritten only when it differs, so CMake does not
/// reconfigure), from the pinned tracy-client-sys package.
pub(crate) fn overlay(iree: &Path, overlay_root: &Path) -> Result<PathBuf> {
    let package = source::registry_package_dir(PACKAGE, VERSION)?;
    let public = package.join("tracy");
    if !public.join("TracyClient.cpp").is_file() || !public.join("tracy/TracyC.h").is_file() {
        anyhow::bail!(
            "{} holds no Tracy client sources (no TracyClient.cpp, tracy/TracyC.h); \
             remove it from Cargo's registry cache so that Cargo fetches it again",
            public.display()
        );
    }
    build_overlay(iree, &public, overlay_root)
}

/// Builds the overlay of `iree` at `overlay_root`, with `public` (Tracy's
/// `public/` folder) as `third_party/tracy/public`.
fn build_overlay(iree: &Path, public: &Path, overlay_root: &Path) -> Result<PathBuf> {
    let third_party = overlay_root.join("third_party");
    let tracy = third_party.join("tracy");
    fs::create_dir_all(&tracy).with_context(|| format!("cannot create {}", tracy.display()))?;
    link_entries(iree, overlay_root, "third_party")?;
    link_entries(&iree.join("third_party"), &third_party, "tracy")?;
    link(public, &tracy.join("public"))?;
    let lists = tracy.join("CMakeLists.txt");
    if fs::read_to_string(&lists).ok().as_deref() != Some(CMAKE_LISTS) {
        fs::write(&lists, CMAKE_LISTS)
            .with_context(|| format!("cannot write {}", lists.display()))?;
    }
    Ok(overlay_root.to_path_buf())
}

/// Links every entry of `from` but `except` into `into`.
fn link_entries(from: &Path, into: &Path, except: &str) -> Result<()> {
    let entries = fs::read_dir(from).with_context(|| format!("cannot list {}", from.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", from.display()))?;
        if entry.file_name() != except {
            link(&entry.path(), &into.join(entry.file_name()))?;
        }
    }
    Ok(())
}

/// Makes `link` a symbolic link to `target`, unless it already is one.
fn link(target: &Path, link: &Path) -> Result<()> {
    if fs::read_link(link).is_ok_and(|existing| existing == target) {
        return Ok(());
    }
    if fs::symlink_metadata(link).is_ok() {
        fs::remove_file(link).with_context(|| format!("cannot replace {}", link.display()))?;
    }
    std::os::unix::fs::symlink(target, link)
        .with_context(|| format!("cannot link {} to {}", link.display(), target.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overlay_adds_tracy_beside_the_other_third_party_sources() {
        let dir = tempfile::tempdir().unwrap();
        let iree = dir.path().join("iree");
        fs::create_dir_all(iree.join("third_party/flatcc")).unwrap();
        fs::create_dir_all(iree.join("runtime")).unwrap();
        fs::write(iree.join("CMakeLists.txt"), "project(x)").unwrap();
        let public = dir.path().join("public");
        fs::create_dir_all(&public).unwrap();
        fs::write(public.join("TracyClient.cpp"), "").unwrap();
        let root = dir.path().join("overlay");

        for _ in 0..2 {
            let overlay = build_overlay(&iree, &public, &root).unwrap();
            assert_eq!(
                fs::read_link(overlay.join("runtime")).unwrap(),
                iree.join("runtime")
            );
            assert_eq!(
                fs::read_to_string(overlay.join("CMakeLists.txt")).unwrap(),
                "project(x)"
            );
            assert!(overlay.join("third_party/flatcc").is_dir());
            assert!(overlay
                .join("third_party/tracy/public/TracyClient.cpp")
                .is_file());
            let lists = fs::read_to_string(overlay.join("third_party/tracy/CMakeLists.txt"));
            assert!(lists
                .unwrap()
                .contains("add_library(Tracy::TracyClient ALIAS"));
            // The IREE sources themselves are untouched.
            assert!(!iree.join("third_party/tracy").exists());
        }
    }
}
