//! One IREE release: the committed bindings are generated from IREE 3.13's
//! headers, whose structs and functions change between releases, so a
//! runtime of another release would link and then corrupt memory. The build
//! script refuses one with a line saying what it found and what is needed:
//! for a build from sources (`IREE_SOURCE_DIR`, the pinned package) the
//! release in the sources' `runtime/version.json`; for an install
//! (`IREE_DIR`) the one its `manifest.json` records, or, without a
//! manifest, its `version.json` (a copy of the sources'
//! `runtime/version.json`).

use std::path::Path;

/// The release of the committed bindings, `major.minor`
/// (`iree_runtime_sys::build_info::IREE_VERSION`, checked equal by
/// `tests/release.rs`).
pub(crate) const RELEASE: &str = "3.13";

/// Fails unless `version` (`3.13.0.dev`, `3.13.1`) is of [`RELEASE`];
/// `origin` names where it was found.
pub(crate) fn check(version: &str, origin: &str) -> Result<(), String> {
    if is_release(version) {
        return Ok(());
    }
    Err(format!(
        "iree-sys: {origin} is IREE {version}, but this iree-runtime-sys is generated from IREE \
         {RELEASE}'s headers and links only a {RELEASE} runtime; use IREE {RELEASE}.x sources or \
         install, or unset it to build the pinned {RELEASE} sources"
    ))
}

/// True when `version`'s `major.minor` is [`RELEASE`].
pub(crate) fn is_release(version: &str) -> bool {
    version
        .strip_prefix(RELEASE)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// The `package-version` of the `version.json` at `path` (IREE's
/// `runtime/version.json` format).
pub(crate) fn read_version_json(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("iree-sys: cannot read {}: {e}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("iree-sys: {} is not JSON: {e}", path.display()))?;
    value
        .get("package-version")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            format!(
                "iree-sys: {} has no \"package-version\" string",
                path.display()
            )
        })
}
