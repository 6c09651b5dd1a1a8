//! The IREE 3.13 runtime sources, resolved through Cargo: the registry
//! package `eerie-sys` 0.5.0 carries them under `iree/` (Apache-2.0).
//! IREE sources are never copied into this repository or into a package.
//!
//! The pin is two files shipped with iree-sys, `iree-source.toml` (a manifest
//! depending on `eerie-sys = "=0.5.0"` without features) and `iree-source.lock`
//! (its `Cargo.lock`, holding the package's checksum). [`resolve`] writes them
//! into a scratch folder as `Cargo.toml` and `Cargo.lock` and asks
//! `cargo metadata --locked` where the package is: Cargo downloads it into its
//! registry cache on first use and refuses it if the checksum differs.
//!
//! Shared by the iree-sys build script (the runtime built from the packaged
//! sources) and `cargo xtask build-iree` (`#[path]`), so both build the same
//! sources.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The pinned manifest, written as `Cargo.toml`.
const MANIFEST: &str = include_str!("iree-source.toml");

/// Its lock file with the package's checksum, written as `Cargo.lock`.
const LOCK: &str = include_str!("iree-source.lock");

/// The package that carries the sources.
const PACKAGE: &str = "eerie-sys";

/// The IREE source tree of the pinned package.
#[derive(Debug, Clone)]
pub(crate) struct PinnedSource {
    /// The IREE checkout (the package's `iree/` folder).
    pub(crate) dir: PathBuf,
    /// The package's name and version, as `eerie-sys 0.5.0`.
    pub(crate) package: String,
}

/// Finds (downloading and checksum-verifying on first use) the pinned
/// package with `cargo`, writing the pin into `scratch` (created if
/// missing).
pub(crate) fn resolve(cargo: &Path, scratch: &Path) -> Result<PinnedSource, String> {
    std::fs::create_dir_all(scratch)
        .map_err(|e| format!("cannot create {}: {e}", scratch.display()))?;
    for (name, text) in [
        ("Cargo.toml", MANIFEST),
        ("Cargo.lock", LOCK),
        ("lib.rs", ""),
    ] {
        let path = scratch.join(name);
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked"])
        .arg("--manifest-path")
        .arg(scratch.join("Cargo.toml"))
        .output()
        .map_err(|e| format!("cannot run `{} metadata`: {e}", cargo.display()))?;
    if !output.status.success() {
        return Err(format!(
            "`{} metadata` could not fetch the IREE sources ({PACKAGE} 0.5.0 from crates.io): {}",
            cargo.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("cargo metadata printed invalid JSON: {e}"))?;
    let package = json["packages"]
        .as_array()
        .and_then(|packages| packages.iter().find(|p| p["name"] == PACKAGE))
        .ok_or_else(|| format!("cargo metadata did not list {PACKAGE}"))?;
    let manifest_path = package["manifest_path"]
        .as_str()
        .ok_or_else(|| format!("{PACKAGE} has no manifest_path"))?;
    let dir = Path::new(manifest_path)
        .parent()
        .ok_or_else(|| format!("{PACKAGE}'s manifest_path has no parent"))?
        .join("iree");
    if !dir.join("runtime/version.json").is_file() {
        return Err(format!(
            "{} holds no IREE source tree (no runtime/version.json)",
            dir.display()
        ));
    }
    Ok(PinnedSource {
        dir,
        package: format!(
            "{PACKAGE} {}",
            package["version"].as_str().unwrap_or("(unknown version)")
        ),
    })
}
