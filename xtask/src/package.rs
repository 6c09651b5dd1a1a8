//! `cargo xtask package-check`: the library crates as another project gets
//! them, without `cargo xtask`.
//!
//! 1. each package name is free on crates.io or already ours (`cargo info`
//!    from outside the workspace: a crate found there must name this
//!    workspace's `repository`), since a name taken by someone else is what
//!    a registry patch hides;
//! 2. `cargo publish --dry-run` of iree-runtime-sys, iree-safe, jit-cache
//!    and sheaf-integration, in dependency order, against crates.io itself:
//!    Cargo packages each and builds it from its package, resolving the
//!    ones before it that crates.io does not have yet from the packages it
//!    just made (its local-registry overlay), as a real release publishes
//!    them one after another; no `[patch]`;
//! 3. `cargo package --no-verify` writes their `.crate` files (seconds: step
//!    2 verified the same packages), each unpacked into
//!    `target/package-check/crates/<name>`;
//! 4. the crate of `xtask/package-check/`, which depends on
//!    `sheaf-integration = "0.2"`, is copied to
//!    `target/package-check/consumer` and run against the IREE install
//!    (`IREE_DIR`): one sigmoid call through `JitRuntime::call`, compiled and
//!    checked against the interpreter. Until a release is on crates.io this
//!    step needs crates.io's copies patched with the unpacked packages: it
//!    checks what the packages do, step 2 that they resolve.
//!
//! The consumer keeps the workspace's dependency versions (its `Cargo.lock`
//! starts as a copy of the workspace's) and builds in the workspace's target
//! folder, so that the dependencies' builds are shared.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::build_iree;
use crate::process::{self, step};

/// The packages a dependent project uses, in dependency order.
pub(crate) const LIBRARY_CRATES: &[&str] = &[
    "iree-runtime-sys",
    "iree-safe",
    "jit-cache",
    "sheaf-integration",
];

/// The `repository` of `[workspace.package]`, which a crate of ours on
/// crates.io names.
const REPOSITORY: &str = "https://example.invalid/sheaf/sheaf-jit";

pub(crate) fn run() -> Result<()> {
    check(&iree_prefix()?)
}

/// The IREE install to use: `IREE_DIR` when set (another checkout's, say),
/// else this workspace's, built by `build-iree` if needed.
pub(crate) fn iree_prefix() -> Result<PathBuf> {
    match std::env::var_os("IREE_DIR").filter(|dir| !dir.is_empty() && dir != "0") {
        Some(dir) => {
            eprintln!(
                "[xtask] using the IREE install IREE_DIR={}",
                Path::new(&dir).display()
            );
            Ok(dir.into())
        }
        None => Ok(build_iree::ensure()?.prefix),
    }
}

/// Checks the names, dry-runs the publication of the library crates and
/// builds and runs the consumer against the IREE install at `prefix`.
pub(crate) fn check(prefix: &Path) -> Result<()> {
    step(
        "cargo info: the package names are free on crates.io or ours",
        check_names,
    )?;
    let root = process::workspace_root().join("target/package-check");
    let target_dir = target_dir();
    step(
        "cargo publish --dry-run, in dependency order, against crates.io (no patch): \
         iree-runtime-sys, iree-safe, jit-cache, sheaf-integration",
        || {
            let mut publish = process::cargo_with_iree(prefix);
            publish.args(["publish", "--dry-run", "--allow-dirty"]);
            for krate in LIBRARY_CRATES {
                publish.args(["-p", krate]);
            }
            process::run(&mut publish)
        },
    )?;
    step(
        "cargo package --no-verify: the .crate files (step 2 built them)",
        || {
            let mut package = process::cargo_with_iree(prefix);
            package.args(["package", "--no-verify", "--allow-dirty", "--quiet"]);
            for krate in LIBRARY_CRATES {
                package.args(["-p", krate]);
            }
            process::run(&mut package)
        },
    )?;
    let package_dir = target_dir.join("package");
    let crates = root.join("crates");
    let mut patches = Vec::new();
    for krate in LIBRARY_CRATES {
        let dir = crates.join(krate);
        unpack(&packaged_file(&package_dir, krate)?, &dir)?;
        patches.push(format!(
            "patch.crates-io.{krate}.path={:?}",
            dir.to_str()
                .with_context(|| format!("{} is not UTF-8", dir.display()))?
        ));
    }
    let consumer = root.join("consumer");
    copy_consumer(&consumer)?;
    step(
        "building and running a crate outside the workspace on the packaged sheaf-integration \
         (crates.io patched with the packages until they are published)",
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

/// Cargo's target folder for the workspace: `CARGO_TARGET_DIR`, else
/// `target/`.
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| process::workspace_root().join("target"), PathBuf::from)
}

/// Fails for a package name that crates.io holds for another project.
fn check_names() -> Result<()> {
    let outside = std::env::temp_dir();
    for krate in LIBRARY_CRATES {
        let output = Command::new("cargo")
            .current_dir(&outside)
            .args(["info", krate])
            .output()
            .with_context(|| format!("cannot run `cargo info {krate}`"))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        match name_status(output.status.success().then_some(&*stdout), &stderr) {
            NameStatus::Free => eprintln!("[xtask] {krate}: free on crates.io"),
            NameStatus::Ours => eprintln!("[xtask] {krate}: on crates.io, ours ({REPOSITORY})"),
            NameStatus::Theirs(repository) => bail!(
                "{krate} on crates.io is another project's (repository: {repository}); rename \
                 the package"
            ),
            NameStatus::Unknown => bail!("`cargo info {krate}` failed: {}", stderr.trim()),
        }
    }
    Ok(())
}

/// What crates.io says of a package name.
#[derive(Debug, PartialEq, Eq)]
enum NameStatus {
    /// No crate has it.
    Free,
    /// A crate naming this workspace's repository has it.
    Ours,
    /// A crate of another repository (or of none) has it.
    Theirs(String),
    /// `cargo info` failed otherwise (no network).
    Unknown,
}

/// Reads `cargo info`'s answer: its output when it succeeded, and its
/// error output.
fn name_status(found: Option<&str>, stderr: &str) -> NameStatus {
    match found {
        None if stderr.contains("could not find") => NameStatus::Free,
        None => NameStatus::Unknown,
        Some(info) => {
            let repository = info
                .lines()
                .find_map(|line| line.strip_prefix("repository: "))
                .map(str::trim);
            match repository {
                Some(REPOSITORY) => NameStatus::Ours,
                other => NameStatus::Theirs(other.unwrap_or("none given").to_owned()),
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_free_when_crates_io_has_no_such_crate() {
        let stderr = "error: could not find `x` in registry `crates-io`";
        assert_eq!(name_status(None, stderr), NameStatus::Free);
        assert_eq!(name_status(None, "network down"), NameStatus::Unknown);
    }

    #[test]
    fn a_crate_found_is_ours_only_if_it_names_our_repository() {
        let ours = format!("x\nversion: 0.2.0\nrepository: {REPOSITORY}\n");
        assert_eq!(name_status(Some(&ours), ""), NameStatus::Ours);
        let theirs = "iree-sys\nRust FFI bindings for IREE\nversion: 0.1.0\nlicense: MIT\n";
        assert_eq!(
            name_status(Some(theirs), ""),
            NameStatus::Theirs("none given".to_owned())
        );
    }
}
