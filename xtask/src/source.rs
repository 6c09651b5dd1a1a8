//! Where the IREE runtime sources come from.
//!
//! By default, the pinned registry package `eerie-sys` (see
//! `xtask/iree-source/Cargo.toml`), resolved by Cargo with its checksum from
//! the `Cargo.lock` beside it. `--source DIR` or `IREE_SOURCE_DIR` name a
//! user's own IREE checkout instead. IREE sources are never copied into this
//! repository.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::process;

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
pub(crate) fn resolve(explicit: Option<&Path>) -> Result<Source, String> {
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
    let text = std::fs::read_to_string(&version_file).map_err(|e| {
        format!(
            "{} is not an IREE source tree ({}: {e})",
            dir.display(),
            version_file.display()
        )
    })?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", version_file.display()))?;
    let version = json["package-version"]
        .as_str()
        .ok_or_else(|| format!("{} has no package-version", version_file.display()))?
        .to_owned();
    Ok(Source {
        dir,
        version,
        origin,
    })
}

/// Finds the pinned `eerie-sys` package in Cargo's registry (downloading and
/// checksum-verifying it on first use) and returns its `iree/` folder.
fn registry_package() -> Result<(PathBuf, String), String> {
    let manifest = process::workspace_root().join("xtask/iree-source/Cargo.toml");
    let metadata = process::output(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "metadata",
                "--format-version",
                "1",
                "--locked",
                "--manifest-path",
            ])
            .arg(&manifest),
    )?;
    let json: serde_json::Value = serde_json::from_str(&metadata)
        .map_err(|e| format!("cargo metadata printed invalid JSON: {e}"))?;
    let package = json["packages"]
        .as_array()
        .and_then(|packages| packages.iter().find(|p| p["name"] == "eerie-sys"))
        .ok_or("cargo metadata did not list eerie-sys; is xtask/iree-source/Cargo.lock intact?")?;
    let manifest_path = package["manifest_path"]
        .as_str()
        .ok_or("eerie-sys has no manifest_path")?;
    let dir = Path::new(manifest_path)
        .parent()
        .ok_or("eerie-sys manifest_path has no parent")?
        .join("iree");
    let origin = format!(
        "crates.io package eerie-sys {} (checksum pinned in xtask/iree-source/Cargo.lock)",
        package["version"].as_str().unwrap_or("?")
    );
    Ok((dir, origin))
}
