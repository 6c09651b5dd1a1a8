//! The IREE 3.13 runtime sources, resolved through Cargo: the registry
//! package `eerie-sys` 0.5.0 carries them under `iree/` (Apache-2.0).
//! IREE sources are never copied into this repository or into a package.
//!
//! The package is a build-dependency of iree-sys, pinned to `=0.5.0` without
//! features (nothing of it is compiled but an empty library), so Cargo
//! downloads it with the other dependencies, checks it against the checksum
//! in the dependent project's `Cargo.lock`, and `cargo vendor` copies it
//! like any other: an offline or vendored build finds it where Cargo put it.
//! The build script finds that folder from Cargo's record of the compiled
//! build-dependency (`from_source.rs`), `cargo xtask build-iree` from the
//! workspace's `cargo metadata` (`xtask/src/source.rs`); both check it here.
//!
//! Shared by the iree-sys build script and xtask (`#[path]`), so both build
//! the same sources.

use std::path::Path;
use std::path::PathBuf;

/// The package that carries the sources.
pub(crate) const PACKAGE: &str = "eerie-sys";

/// Its pinned version (the build-dependency's `=` requirement).
pub(crate) const VERSION: &str = "0.5.0";

/// The IREE source tree of the pinned package.
#[derive(Debug, Clone)]
pub(crate) struct PinnedSource {
    /// The IREE checkout (the package's `iree/` folder).
    pub(crate) dir: PathBuf,
    /// The package's name and version, as `eerie-sys 0.5.0`.
    pub(crate) package: String,
}

/// The sources in the pinned package unpacked at `package_dir`, checked to
/// hold an IREE source tree.
pub(crate) fn at(package_dir: &Path) -> Result<PinnedSource, String> {
    let dir = package_dir.join("iree");
    if !dir.join("runtime/version.json").is_file() {
        return Err(format!(
            "{} holds no IREE source tree (no runtime/version.json)",
            dir.display()
        ));
    }
    Ok(PinnedSource {
        dir,
        package: format!("{PACKAGE} {VERSION}"),
    })
}
