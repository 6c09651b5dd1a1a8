//! `cargo xtask package-check`: the library crates as another project gets
//! them, without `cargo xtask`.
//!
//! 1. `cargo package` writes the `.crate` files of iree-sys, iree-safe,
//!    jit-cache and sheaf-integration (`--no-verify`: step 3 builds them);
//! 2. each is unpacked into `target/package-check/crates/<name>`;
//! 3. the crate of `xtask/package-check/`, which depends on
//!    `sheaf-integration = "0.1"` from crates.io, is copied to
//!    `target/package-check/consumer` and run with crates.io's copies of the
//!    four crates patched to the unpacked packages, against the IREE install
//!    (`IREE_DIR`): one sigmoid call through `JitRuntime::call`, compiled and
//!    checked against the interpreter.
//!
//! The consumer keeps the workspace's dependency versions (its `Cargo.lock`
//! starts as a copy of the workspace's) and builds in its own target folder,
//! `target/package-check/target`, kept between runs.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::build_iree;
use crate::process::{self, step};

/// The crates a dependent project uses, in dependency order.
const LIBRARY_CRATES: &[&str] = &["iree-sys", "iree-safe", "jit-cache", "sheaf-integration"];

pub(crate) fn run() -> Result<()> {
    let manifest = build_iree::ensure()?;
    check(&manifest.prefix)
}

/// Packages the library crates and builds and runs the consumer against the
/// IREE install at `prefix`.
pub(crate) fn check(prefix: &Path) -> Result<()> {
    let root = process::workspace_root().join("target/package-check");
    let target_dir = root.join("target");
    step(
        "cargo package: iree-sys, iree-safe, jit-cache, sheaf-integration",
        || {
            let mut package = Command::new("cargo");
            package
                .current_dir(process::workspace_root())
                .args(["package", "--no-verify", "--allow-dirty", "--target-dir"])
                .arg(&target_dir);
            for krate in LIBRARY_CRATES {
                package.args(["-p", krate]);
            }
            process::run(&mut package)
        },
    )?;
    let crates = root.join("crates");
    let mut patches = Vec::new();
    for krate in LIBRARY_CRATES {
        let dir = crates.join(krate);
        unpack(&packaged_file(&target_dir.join("package"), krate)?, &dir)?;
        patches.push(format!(
            "patch.crates-io.{krate}.path={:?}",
            dir.to_str()
                .with_context(|| format!("{} is not UTF-8", dir.display()))?
        ));
    }
    let consumer = root.join("consumer");
    copy_consumer(&consumer)?;
    step(
        "building and running a crate outside the workspace on the packaged sheaf-integration",
        || {
            let mut run = process::cargo_with_iree(prefix);
            run.args(["run", "--manifest-path"])
                .arg(consumer.join("Cargo.toml"))
                .arg("--target-dir")
                .arg(&target_dir);
            for patch in &patches {
                run.args(["--config", patch]);
            }
            process::run(&mut run)
        },
    )
}

/// `<name>-<version>.crate` in `dir`.
fn packaged_file(dir: &Path, name: &str) -> Result<PathBuf> {
    let prefix = format!("{name}-");
    std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| {
            path.extension().is_some_and(|ext| ext == "crate")
                && path
                    .file_name()
                    .and_then(|file| file.to_str()?.strip_prefix(&prefix))
                    .is_some_and(|version| version.starts_with(|c: char| c.is_ascii_digit()))
        })
        .with_context(|| {
            format!(
                "cargo package wrote no {name}-<version>.crate into {}",
                dir.display()
            )
        })
}

/// Unpacks the `.crate` (a gzipped tar holding one folder) into `into`,
/// replacing what was there, unless `into` holds this very package already
/// (a copy of the `.crate` is kept beside it).
///
/// The files get the time of unpacking, not the fixed one the archive
/// records: Cargo decides that a path dependency is stale by its files'
/// times, so a changed package must look newer than the last build.
fn unpack(file: &Path, into: &Path) -> Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let kept = into.with_extension("crate");
    if into.is_dir() && std::fs::read(&kept).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(into);
    std::fs::create_dir_all(into).with_context(|| format!("cannot create {}", into.display()))?;
    process::run(
        Command::new("tar")
            .args([
                "--extract",
                "--gzip",
                "--touch",
                "--strip-components=1",
                "--file",
            ])
            .arg(file)
            .arg("--directory")
            .arg(into),
    )?;
    std::fs::write(&kept, bytes).with_context(|| format!("cannot write {}", kept.display()))
}

/// Copies `xtask/package-check/` and the workspace's `Cargo.lock` into
/// `into`.
fn copy_consumer(into: &Path) -> Result<()> {
    let workspace = process::workspace_root();
    let source = workspace.join("xtask/package-check");
    std::fs::create_dir_all(into.join("src"))
        .with_context(|| format!("cannot create {}", into.display()))?;
    for (from, to) in [
        (source.join("Cargo.toml"), "Cargo.toml"),
        (source.join("src/main.rs"), "src/main.rs"),
        (workspace.join("Cargo.lock"), "Cargo.lock"),
    ] {
        std::fs::copy(&from, into.join(to))
            .with_context(|| format!("cannot copy {}", from.display()))?;
    }
    Ok(())
}
