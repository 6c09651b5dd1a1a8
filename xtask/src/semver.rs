//! `cargo xtask semver [--baseline-rev REV]`: the library crates' public
//! API against a git revision's, with `cargo-semver-checks` (installed with
//! `cargo install --locked` when missing; `cargo xtask test` starts that
//! install in the background at its beginning, `background.rs`).
//!
//! The baseline is `HEAD~1` unless `--baseline-rev` names another: on
//! main, the first parent of a merge, so everything a merged branch changed.
//! A breaking change fails unless the crate's version says so (before 1.0,
//! a new minor version: 0.1 to 0.2). A package that the baseline does not
//! have under its current name (new, or renamed for crates.io) has nothing
//! to compare with and is skipped, saying so.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use crate::background::{self, Background};
use crate::process::{self, step};

/// The library packages and their folders, in dependency order.
const PACKAGES: &[(&str, &str)] = &[
    ("iree-runtime-sys", "crates/iree-sys"),
    ("iree-safe", "crates/iree-safe"),
    ("jit-cache", "crates/jit-cache"),
    ("jit-store", "crates/jit-store"),
    ("sheaf-integration", "crates/sheaf-integration"),
];

/// The baseline when none is given.
pub(crate) const DEFAULT_BASELINE: &str = "HEAD~1";

/// The arguments of `semver`: the baseline revision; `None` for `--help`.
pub(crate) fn parse(parser: &mut lexopt::Parser) -> Result<Option<String>> {
    let mut baseline = DEFAULT_BASELINE.to_owned();
    while let Some(arg) = parser.next()? {
        match arg {
            arg if crate::cli::is_help(&arg) => return Ok(None),
            lexopt::Arg::Long("baseline-rev") => baseline = crate::cli::text(parser.value()?)?,
            arg => return Err(crate::cli::unexpected("semver", arg)),
        }
    }
    Ok(Some(baseline))
}

pub(crate) fn run(baseline: String) -> Result<()> {
    let install = install_in_background()?;
    check(&crate::package::iree_prefix()?, &baseline, install)
}

/// Starts `cargo install --locked cargo-semver-checks` in the background
/// (`background.rs`) unless the tool runs already; `None` then.
pub(crate) fn install_in_background() -> Result<Option<Background>> {
    let installed = Command::new("cargo")
        .args(["semver-checks", "--version"])
        .output()
        .is_ok_and(|output| output.status.success());
    if installed {
        return Ok(None);
    }
    let mut install = background::at_lowest_priority("cargo");
    // In a temporary target folder (removed after), not the workspace's:
    // the tool's build is larger than the workspace. Built lighter than its
    // own release profile (fat LTO, one codegen unit): 237 s instead of
    // 388 s on 2 cores, and its checks, a fraction of a second of a run
    // whose time is rustdoc's, stay as fast as they need to be.
    install
        .args(["install", "--locked", "cargo-semver-checks"])
        .env_remove("CARGO_TARGET_DIR")
        .env("CARGO_PROFILE_RELEASE_LTO", "false")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "1");
    Background::start(
        "cargo install --locked cargo-semver-checks (it is not installed)",
        install,
        &process::workspace_root().join("target/semver-checks-install.log"),
    )
    .map(Some)
}

/// Checks the library crates against `baseline`, building them against the
/// IREE install at `prefix`, once `install` (from
/// [`install_in_background`]) has installed the tool.
pub(crate) fn check(prefix: &Path, baseline: &str, install: Option<Background>) -> Result<()> {
    if let Some(install) = install {
        install.wait()?;
    }
    let commit = process::output(
        Command::new("git")
            .current_dir(process::workspace_root())
            .args(["rev-parse", "--verify", "--short"])
            .arg(format!("{baseline}^{{commit}}")),
    )
    .with_context(|| format!("{baseline} names no commit"))?;
    let commit = commit.trim();
    let mut compared = Vec::new();
    for (package, folder) in PACKAGES {
        if named_in(commit, folder, package) {
            compared.push(*package);
        } else {
            eprintln!(
                "[xtask] {package}: {baseline} ({commit}) has no package of this name in \
                 {folder}, nothing to compare with; skipped"
            );
        }
    }
    if compared.is_empty() {
        return Ok(());
    }
    step(
        &format!(
            "cargo semver-checks: {} against {baseline} ({commit})",
            compared.join(", ")
        ),
        || {
            let mut checks = process::cargo_with_iree(prefix);
            checks.args(["semver-checks", "check-release", "--baseline-rev", commit]);
            for package in &compared {
                checks.args(["-p", package]);
            }
            process::run(&mut checks)
        },
    )
}

/// Whether `folder/Cargo.toml` at `commit` is the manifest of `package`.
fn named_in(commit: &str, folder: &str, package: &str) -> bool {
    Command::new("git")
        .current_dir(process::workspace_root())
        .arg("show")
        .arg(format!("{commit}:{folder}/Cargo.toml"))
        .output()
        .is_ok_and(|output| {
            output.status.success() && declares(&String::from_utf8_lossy(&output.stdout), package)
        })
}

/// Whether the manifest `text` names its package `package`.
fn declares(text: &str, package: &str) -> bool {
    text.lines()
        .map(str::trim)
        .any(|line| line == format!("name = \"{package}\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_declares_its_package_name() {
        let old = "[package]\nname = \"iree-sys\"\nversion = \"0.1.0\"\n";
        assert!(declares(old, "iree-sys"));
        assert!(!declares(old, "iree-runtime-sys"));
    }
}
