//! Environment variables read by the build script. Each is announced with
//! `rerun-if-env-changed`; empty or `"0"` means unset, except for the raw
//! values of [`os`] (`PATH`).

use std::ffi::OsString;
use std::path::PathBuf;

/// The value of `name`, unless it is unset, empty or `"0"`.
pub(crate) fn var(name: &str) -> Option<String> {
    println!("cargo:rerun-if-env-changed={name}");
    std::env::var(name)
        .ok()
        .filter(|value| !value.is_empty() && value != "0")
}

/// The raw value of `name` (such as `PATH`), empty included.
pub(crate) fn os(name: &str) -> Option<OsString> {
    println!("cargo:rerun-if-env-changed={name}");
    std::env::var_os(name)
}

/// `var` as a path.
pub(crate) fn path(name: &str) -> Option<PathBuf> {
    var(name).map(PathBuf::from)
}

/// True when Cargo sets the cfg variable `name`, whatever its value: a
/// name-only cfg such as `miri` arrives as an empty `CARGO_CFG_MIRI`.
pub(crate) fn cfg_is_set(name: &str) -> bool {
    println!("cargo:rerun-if-env-changed={name}");
    std::env::var_os(name).is_some()
}

/// True when `name` is set (to anything but empty or `"0"`).
pub(crate) fn is_set(name: &str) -> bool {
    var(name).is_some()
}
