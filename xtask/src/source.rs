//! Where the IREE runtime sources come from.
//!
//! By default, the pinned registry package `eerie-sys`, iree-sys's
//! build-dependency, found with the workspace's `cargo metadata` (Cargo
//! downloads it and checks it against the checksum in `Cargo.lock`) and
//! checked by the same code as the iree-sys build script's
//! (`crates/iree-sys/build/iree_source.rs`). `--source DIR` or
//! `IREE_SOURCE_DIR` name a user's own IREE checkout instead. IREE sources are
//! never copied into this repository.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::process;

#[path = "../../crates/iree-sys/build/iree_source.rs"]
mod pinned;

/// A resolved IREE source tree.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    /// The IREE checkout (the folder holding `runtime/` and `compiler/`).
    pub dir: PathBuf,
    /// `package-version` from `runtime/version.json`.
    pub version: String,
    /// How it was found, for the manifest and the logs.
    pub origin: String,
}

/// Resolves the source: `explicit` (from `--source`), else `IREE_SOURCE_DIR`,
/// else the pinned registry package.
pub(crate) fn resolve(explicit: Option<&Path>) -> Result<Source> {
    let from_env = std::env::var_os("IREE_SOURCE_DIR")
        .filter(|v| !v.is_empty() && v != "0")
        .map(PathBuf::from);
    let (dir, origin) = match explicit.map(Path::to_path_buf).or(from_env) {
        Some(dir) => {
            let origin = format!("user checkout {}", dir.display());
            (dir, origin)
        }
        None => registry_package()?,
    };
    let version_file = dir.join("runtime/version.json");
    let text = std::fs::read_to_string(&version_file).with_context(|| {
        format!(
            "{} is not an IREE source tree (cannot read {})",
            dir.display(),
            version_file.display()
        )
    })?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("cannot parse {}", version_file.display()))?;
    let version = json["package-version"]
        .as_str()
        .with_context(|| format!("{} has no package-version", version_file.display()))?
        .to_owned();
    Ok(Source {
        dir,
        version,
        origin,
    })
}

/// The pinned package's `iree/` folder, found (and downloaded and
/// checksum-verified on first use) by Cargo.
fn registry_package() -> Result<(PathBuf, String)> {
    let package_dir = registry_package_dir(pinned::PACKAGE, pinned::VERSION)?;
    let pinned = pinned::at(&package_dir).map_err(anyhow::Error::msg)?;
    let origin = format!(
        "crates.io package {} (iree-sys's build-dependency, checksum in Cargo.lock)",
        pinned.package
    );
    Ok((pinned.dir, origin))
}

/// The folder where Cargo unpacked the registry package `name` `version`, a
/// dependency of a workspace member, from the workspace's `cargo metadata`
/// (which downloads it, and checks it against `Cargo.lock`, on first use).
pub(crate) fn registry_package_dir(name: &str, version: &str) -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let json = process::output(
        std::process::Command::new(cargo)
            .current_dir(process::workspace_root())
            .args(["metadata", "--format-version", "1", "--locked"]),
    )?;
    let json: serde_json::Value =
        serde_json::from_str(&json).context("cargo metadata printed invalid JSON")?;
    let manifest = json["packages"]
        .as_array()
        .and_then(|packages| {
            packages
                .iter()
                .find(|p| p["name"] == name && p["version"] == version)
        })
        .and_then(|package| package["manifest_path"].as_str())
        .with_context(|| format!("cargo metadata lists no {name} {version}"))?;
    Ok(Path::new(manifest)
        .parent()
        .context("a manifest path has no folder")?
        .to_path_buf())
}
