//! `cargo xtask offline-check`: the library crates build from `cargo
//! vendor`'s copy of their dependencies with no network, the pinned IREE
//! sources included.
//!
//! 1. `cargo vendor --locked` copies the workspace's dependencies into
//!    `target/offline-check/vendor` (the pinned IREE sources come along: they
//!    are the package `eerie-sys`, iree-sys's build-dependency);
//! 2. `cargo build --offline --locked` of the four library crates, crates.io
//!    replaced by that folder, in a target folder of its own,
//!    `target/offline-check/target`, kept between runs (a package built
//!    from the vendor folder does not count as the same build as the
//!    registry's, so in the workspace's target folder each would rebuild
//!    the other); iree-sys and `eerie-sys` are cleaned first, so that both
//!    build again;
//! 3. the iree-sys build script's record `cargo:pinned_source=` names the
//!    IREE sources inside the vendor folder.
//!
//! The build links the IREE install (`IREE_DIR`) rather than building the
//! runtime from the vendored sources: that takes minutes and is the same
//! CMake build as `cargo xtask build-iree`'s. What this proves is the part
//! that used to need the network, Cargo delivering the sources to the build
//! script: the build script locates them whichever runtime it links.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::package::LIBRARY_CRATES;
use crate::process::{self, step};

pub(crate) fn run() -> Result<()> {
    check(&crate::package::iree_prefix()?)
}

/// Vendors, builds offline against the IREE install at `prefix`, and checks
/// where the build script found the IREE sources.
pub(crate) fn check(prefix: &Path) -> Result<()> {
    let root = process::workspace_root().join("target/offline-check");
    let vendor = root.join("vendor");
    let target_dir = root.join("target");
    step("cargo vendor: the workspace's dependencies", || {
        process::run(
            process::cargo_with_iree(prefix)
                .args(["vendor", "--locked", "--quiet"])
                .arg(&vendor)
                .stdout(std::process::Stdio::null()),
        )
    })?;
    let vendor_text = vendor
        .to_str()
        .with_context(|| format!("{} is not UTF-8", vendor.display()))?;
    let offline = |args: &[&str]| {
        let mut cargo = process::cargo_with_iree(prefix);
        cargo
            .args(args)
            .args(["--offline", "--locked", "--target-dir"])
            .arg(&target_dir)
            .args([
                "--config",
                "source.crates-io.replace-with=\"vendored-sources\"",
                "--config",
            ])
            .arg(format!("source.vendored-sources.directory={vendor_text:?}"));
        cargo
    };
    step(
        "cargo build --offline of the library crates from the vendored sources",
        || {
            process::run(&mut offline(&[
                "clean",
                "--quiet",
                "-p",
                "iree-runtime-sys",
                "-p",
                "eerie-sys",
            ]))?;
            let mut build = offline(&["build"]);
            for krate in LIBRARY_CRATES {
                build.args(["-p", krate]);
            }
            process::run(&mut build)
        },
    )?;
    let found = pinned_source(&target_dir.join("debug/build"))?;
    if !found.starts_with(&vendor) {
        bail!(
            "the offline build found the IREE sources at {}, not in {}",
            found.display(),
            vendor.display()
        );
    }
    eprintln!(
        "[xtask] offline build: iree-sys found the pinned IREE sources at {}",
        found.display()
    );
    Ok(())
}

/// The `cargo:pinned_source=` record of the iree-sys build script's last
/// run under `build_dir`.
fn pinned_source(build_dir: &Path) -> Result<PathBuf> {
    let newest = std::fs::read_dir(build_dir)
        .with_context(|| format!("cannot read {}", build_dir.display()))?
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("iree-runtime-sys-")
        })
        .map(|entry| entry.path().join("output"))
        .filter_map(|output| Some((output.metadata().ok()?.modified().ok()?, output)))
        .max()
        .map(|(_, output)| output)
        .with_context(|| format!("no iree-sys build script ran in {}", build_dir.display()))?;
    let text = std::fs::read_to_string(&newest)
        .with_context(|| format!("cannot read {}", newest.display()))?;
    text.lines()
        .find_map(|line| line.strip_prefix("cargo:pinned_source="))
        .map(PathBuf::from)
        .with_context(|| {
            format!(
                "{} has no cargo:pinned_source= line: the build script did not find the IREE \
                 sources",
                newest.display()
            )
        })
}
