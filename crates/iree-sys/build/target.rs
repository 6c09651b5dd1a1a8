//! The target Cargo builds for, against the one an install was built for.
//!
//! Static libraries of another architecture would fail at link time with
//! pages of undefined symbols, or link and crash; so an install whose
//! manifest records another target is refused with one line that says what
//! to build. A build from source never cross-compiles: IREE's cross builds
//! need its host tools built first, which `cargo xtask build-iree --target`
//! does.

use std::path::Path;

/// Cargo's target triple.
fn target() -> String {
    std::env::var("TARGET").expect("cargo sets TARGET")
}

/// The target triple, when it is not the host's (a cross build).
pub(crate) fn cross() -> Option<String> {
    let host = std::env::var("HOST").expect("cargo sets HOST");
    Some(target()).filter(|target| *target != host)
}

/// Fails unless the install of the manifest at `path`, built for `built_for`
/// (`None`: a manifest from before cross builds, so the host), is for
/// Cargo's target.
pub(crate) fn check(built_for: Option<&str>, path: &Path) -> Result<(), String> {
    let target = target();
    let built_for = match (built_for, cross()) {
        (Some(built_for), _) => built_for,
        (None, None) => return Ok(()),
        (None, Some(_)) => "the host (its manifest names no target)",
    };
    if built_for == target {
        return Ok(());
    }
    Err(format!(
        "iree-sys: the IREE runtime of {} was built for {built_for}, but this build is for \
         {target}; run `cargo xtask build-iree{}` and point IREE_DIR at its install",
        path.display(),
        match cross() {
            Some(_) => format!(" --target {target}"),
            None => String::new(),
        }
    ))
}

/// Fails for a cross build, which a build from source cannot do.
pub(crate) fn refuse_cross_build_from_source(origin: &str) -> Result<(), String> {
    match cross() {
        Some(target) => Err(format!(
            "iree-sys: cannot build the IREE runtime from {origin} for {target} (a cross \
             build needs IREE's host tools); run `cargo xtask build-iree --target {target}` in \
             a checkout of this crate's repository and set IREE_DIR to its install"
        )),
        None => Ok(()),
    }
}
