//! `cargo xtask package-check`: the library crates as a dependent gets them
//! from the registry, without `cargo xtask`.
//!
//! 1. each package name is free on crates.io or already ours (`cargo info`
//!    from outside the workspace: a crate found there must carry our
//!    package's description), since a name taken by someone else is what a
//!    registry patch would hide;
//! 2. `cargo publish --dry-run` of iree-runtime-sys, iree-safe, jit-cache
//!    and sheaf-integration, in dependency order, against crates.io itself,
//!    with verification: Cargo packages each and builds it from its
//!    package, resolving the ones before it that crates.io does not have yet
//!    from the packages it just made (its local-registry overlay), as a real
//!    release publishes them one after another; no `[patch]`;
//! 3. `cargo package --no-verify` writes their `.crate` files (seconds: step
//!    2 verified the same packages);
//! 4. a directory source, `target/package-check/registry`: `cargo vendor`'s
//!    copy of the workspace's crates.io dependencies (the pinned IREE
//!    sources, the package `eerie-sys`, among them) and each `.crate`
//!    unpacked beside them with its checksum, as a registry serves it;
//! 5. the crate of `xtask/package-check/`, which depends on
//!    `sheaf-integration` (the version its manifest names) with its default
//!    features, copied to `target/package-check/consumer`, resolved afresh
//!    with crates.io replaced by that folder (`generate-lockfile
//!    --offline`), then vendored (`cargo vendor`, what a project that builds
//!    offline does);
//! 6. the consumer built `--offline --frozen` from its vendored copy alone:
//!    no path into the workspace, no `IREE_DIR`, no `[patch]`, so
//!    iree-runtime-sys builds the IREE runtime from the vendored sources
//!    with its default drivers; the build script's record says which
//!    drivers (Vulkan among them) and where it found the sources (inside
//!    the vendored copy);
//! 7. the consumer runs one compiled sigmoid on `local-sync` and one on
//!    `vulkan` (Mesa's lavapipe), each checked against the interpreter.
//!
//! The consumer gets a target folder of its own,
//! `target/package-check/target`, kept between runs; the tools a dependent
//! installs (CMake, Ninja and `iree-compile`, pip's packages) come from the
//! project venv on `PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use crate::build_iree;
use crate::process::{self, step};

/// The packages a dependent project uses, in dependency order.
pub(crate) const LIBRARY_CRATES: &[&str] = &[
    "iree-runtime-sys",
    "iree-safe",
    "jit-cache",
    "jit-store",
    "sheaf-integration",
];

/// The HAL drivers the consumer runs a call on: the CPU and Vulkan, which
/// the default features build on Linux (lavapipe is the Vulkan device on a
/// machine without a GPU).
const CONSUMER_DRIVERS: &[&str] = &["local-sync", "vulkan"];

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

/// Checks the names, dry-runs the publication of the library crates
/// (verified against the IREE install at `prefix`), then builds and runs
/// the consumer from the packages alone.
pub(crate) fn check(prefix: &Path) -> Result<()> {
    step(
        "cargo info: the package names are free on crates.io or ours",
        check_names,
    )?;
    step(
        "cargo publish --dry-run, with verification, in dependency order, against crates.io (no \
         patch): iree-runtime-sys, iree-safe, jit-cache, jit-store, sheaf-integration",
        || {
            // Cargo takes a registry package of a version it has seen as
            // unchanged: the last run's builds and unpacked sources of these
            // (same versions, other code) must go.
            let _ = std::fs::remove_dir_all(target_dir().join("package"));
            forget_unpacked_overlay_packages()?;
            let verify_dir = process::workspace_root().join("target/package-check/verify");
            let mut clean = process::cargo_with_iree(prefix);
            clean
                .args(["clean", "--quiet", "--target-dir"])
                .arg(&verify_dir);
            forget_library_builds(clean)?;
            let mut publish = process::cargo_with_iree(prefix);
            publish.args(["publish", "--dry-run", "--allow-dirty", "--target-dir"]);
            publish.arg(&verify_dir);
            for krate in LIBRARY_CRATES {
                publish.args(["-p", krate]);
            }
            process::run(&mut publish)
        },
    )?;
    step(
        "cargo package --no-verify: the .crate files (the dry run built them)",
        || {
            let mut package = process::cargo_with_iree(prefix);
            package.args(["package", "--no-verify", "--allow-dirty", "--quiet"]);
            for krate in LIBRARY_CRATES {
                package.args(["-p", krate]);
            }
            process::run(&mut package)
        },
    )?;
    let root = process::workspace_root().join("target/package-check");
    let registry = root.join("registry");
    step(
        "a directory source: the .crate files and cargo vendor's copy of their crates.io \
         dependencies",
        || directory_source(prefix, &registry),
    )?;
    step(
        "Mesa's lavapipe for the consumer's Vulkan call (installing Debian's package if missing)",
        crate::vulkan::ensure,
    )?;
    let consumer = Consumer::create(&root)?;
    let vendor = consumer.dir.join("vendor");
    step(
        "the consumer resolved afresh against the directory source, then vendored (cargo \
         vendor), as a project that builds offline does",
        || {
            let _ = std::fs::remove_file(consumer.dir.join("Cargo.lock"));
            process::run(&mut consumer.cargo(&registry, &["generate-lockfile", "--offline"]))?;
            let mut vendoring = consumer.cargo(&registry, &["vendor", "--offline", "--locked"]);
            process::run(
                vendoring
                    .args(["--respect-source-config", "--quiet"])
                    .arg(&vendor)
                    .stdout(std::process::Stdio::null()),
            )
        },
    )?;
    step(
        "building the consumer --offline --frozen from its vendored copy alone \
         (sheaf-integration, default features; IREE built from the packaged sources)",
        || {
            // As for the dry run: the last run's builds of the library
            // crates (same versions, other code) would be taken as current.
            forget_library_builds(consumer.cargo(&vendor, &["clean", "--offline", "--quiet"]))?;
            process::run(&mut consumer.cargo(&vendor, &["build", "--offline", "--frozen"]))
        },
    )?;
    let record = BuildRecord::newest(&consumer.target_dir.join("debug/build"))?;
    if !record.pinned_source.starts_with(&vendor) {
        bail!(
            "the consumer's build found the IREE sources at {}, not in its vendored copy {}",
            record.pinned_source.display(),
            vendor.display()
        );
    }
    eprintln!(
        "[xtask] the consumer's runtime: drivers {}, built from {}",
        record.drivers,
        record.pinned_source.display()
    );
    let program = consumer.target_dir.join("debug/package-check");
    for driver in CONSUMER_DRIVERS {
        if !record.drivers.split(',').any(|d| d == *driver) {
            bail!(
                "the default features built no {driver} driver (drivers: {})",
                record.drivers
            );
        }
        step(&format!("the consumer's call on {driver}"), || {
            process::run(
                Command::new(&program)
                    .arg(driver)
                    .env("PATH", crate::tools::path_with_venv()),
            )
        })?;
    }
    Ok(())
}

/// Runs `clean` (a `cargo clean` of some target folder) for the library
/// crates alone: their earlier builds, of the same versions with other
/// code, would be taken as current.
fn forget_library_builds(mut clean: Command) -> Result<()> {
    for krate in LIBRARY_CRATES {
        clean.args(["-p", krate]);
    }
    process::run(&mut clean)
}

/// Removes the library crates' sources that an earlier dry run's
/// local-registry overlay unpacked into Cargo's home
/// (`registry/src/-<hash>/<name>-<version>`, the overlay's folders begin
/// with `-`): Cargo unpacks a package of a version once, so the next dry
/// run would build the old code.
fn forget_unpacked_overlay_packages() -> Result<()> {
    let home = std::env::var_os("CARGO_HOME").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo"),
        PathBuf::from,
    );
    let src = home.join("registry/src");
    let Ok(overlays) = std::fs::read_dir(&src) else {
        return Ok(());
    };
    for overlay in overlays.filter_map(Result::ok) {
        if !overlay.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        for package in std::fs::read_dir(overlay.path())
            .with_context(|| format!("cannot read {}", overlay.path().display()))?
            .filter_map(Result::ok)
        {
            let name = package.file_name().to_string_lossy().into_owned();
            if LIBRARY_CRATES
                .iter()
                .any(|krate| name.starts_with(&format!("{krate}-")))
            {
                std::fs::remove_dir_all(package.path())
                    .with_context(|| format!("cannot remove {}", package.path().display()))?;
            }
        }
    }
    Ok(())
}

/// Fills `dir` with the workspace's crates.io dependencies (`cargo vendor`)
/// and the library crates' `.crate` files, each unpacked with the
/// `.cargo-checksum.json` a directory source needs: the `.crate`'s SHA-256,
/// which the consumer's `Cargo.lock` records, and no per-file sums.
fn directory_source(prefix: &Path, dir: &Path) -> Result<()> {
    process::run(
        process::cargo_with_iree(prefix)
            .args(["vendor", "--locked", "--versioned-dirs", "--quiet"])
            .arg(dir)
            .stdout(std::process::Stdio::null()),
    )?;
    let packages = target_dir().join("package");
    for krate in LIBRARY_CRATES {
        let file = packaged_file(&packages, krate)?;
        let bytes =
            std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
        let stem = file
            .file_stem()
            .and_then(|stem| stem.to_str())
            .with_context(|| format!("{} has no UTF-8 name", file.display()))?;
        let into = dir.join(stem);
        let _ = std::fs::remove_dir_all(&into);
        std::fs::create_dir_all(&into)
            .with_context(|| format!("cannot create {}", into.display()))?;
        process::run(
            Command::new("tar")
                .args(["--extract", "--gzip", "--strip-components=1", "--file"])
                .arg(&file)
                .arg("--directory")
                .arg(&into),
        )?;
        let sum: String = Sha256::digest(&bytes)
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        let checksum = into.join(".cargo-checksum.json");
        std::fs::write(
            &checksum,
            format!("{{\"files\":{{}},\"package\":\"{sum}\"}}"),
        )
        .with_context(|| format!("cannot write {}", checksum.display()))?;
    }
    Ok(())
}

/// The consumer crate, copied out of the workspace.
struct Consumer {
    dir: PathBuf,
    target_dir: PathBuf,
}

impl Consumer {
    /// Copies `xtask/package-check/` to `root/consumer` (its `Cargo.toml` and
    /// `src/main.rs`: a lock file is resolved afresh).
    fn create(root: &Path) -> Result<Self> {
        let source = process::workspace_root().join("xtask/package-check");
        let dir = root.join("consumer");
        std::fs::create_dir_all(dir.join("src"))
            .with_context(|| format!("cannot create {}", dir.display()))?;
        for file in ["Cargo.toml", "src/main.rs"] {
            std::fs::copy(source.join(file), dir.join(file))
                .with_context(|| format!("cannot copy {file} of {}", source.display()))?;
        }
        Ok(Consumer {
            dir,
            target_dir: root.join("target"),
        })
    }

    /// `cargo args` in the consumer's folder with crates.io replaced by the
    /// directory source `source`, none of this workspace's IREE variables,
    /// and the project venv (CMake, Ninja, `iree-compile`) first on `PATH`.
    fn cargo(&self, source: &Path, args: &[&str]) -> Command {
        let mut cargo = Command::new("cargo");
        // The options first: a `run`'s arguments after `--` are the
        // program's.
        cargo
            .current_dir(&self.dir)
            .arg("--config")
            .arg("source.crates-io.replace-with=\"packaged\"")
            .arg("--config")
            .arg(format!(
                "source.packaged.directory={:?}",
                source.display().to_string()
            ))
            .args(args)
            .env("CARGO_TARGET_DIR", &self.target_dir)
            .env("PATH", crate::tools::path_with_venv())
            .env_remove("IREE_DIR")
            .env_remove("IREE_SOURCE_DIR");
        cargo
    }
}

/// What the iree-sys build script's last run under a build folder recorded.
struct BuildRecord {
    /// `cargo:pinned_source=`: where it found the pinned IREE sources.
    pinned_source: PathBuf,
    /// `cargo:drivers=`: the HAL drivers of the runtime it linked.
    drivers: String,
}

impl BuildRecord {
    /// The record of the newest iree-sys build script run in `build_dir`.
    fn newest(build_dir: &Path) -> Result<Self> {
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
        let line = |key: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(key))
                .with_context(|| format!("{} has no {key} line", newest.display()))
        };
        Ok(BuildRecord {
            pinned_source: PathBuf::from(line("cargo:pinned_source=")?),
            drivers: line("cargo:drivers=")?.to_owned(),
        })
    }
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
    let ours = descriptions()?;
    for krate in LIBRARY_CRATES {
        let output = Command::new("cargo")
            .current_dir(&outside)
            .args(["info", krate])
            .output()
            .with_context(|| format!("cannot run `cargo info {krate}`"))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let description = ours
            .iter()
            .find_map(|(name, description)| (name == krate).then_some(description.as_str()))
            .with_context(|| format!("the workspace has no package {krate}"))?;
        match name_status(
            output.status.success().then_some(&*stdout),
            &stderr,
            description,
        ) {
            NameStatus::Free => eprintln!("[xtask] {krate}: free on crates.io"),
            NameStatus::Ours => eprintln!("[xtask] {krate}: on crates.io, ours ({description})"),
            NameStatus::Theirs(theirs) => bail!(
                "{krate} on crates.io is another project's (\"{theirs}\"); rename the package"
            ),
            NameStatus::Unknown => bail!("`cargo info {krate}` failed: {}", stderr.trim()),
        }
    }
    Ok(())
}

/// Each workspace package's name and `description` (`cargo metadata`).
fn descriptions() -> Result<Vec<(String, String)>> {
    let metadata = process::workspace_metadata()?;
    Ok(metadata["packages"]
        .as_array()
        .context("cargo metadata lists no packages")?
        .iter()
        .filter_map(|package| {
            Some((
                package["name"].as_str()?.to_owned(),
                package["description"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            ))
        })
        .collect())
}

/// What crates.io says of a package name.
#[derive(Debug, PartialEq, Eq)]
enum NameStatus {
    /// No crate has it.
    Free,
    /// A crate with our package's description has it: a release of ours.
    Ours,
    /// A crate of another project has it (its description).
    Theirs(String),
    /// `cargo info` failed otherwise (no network).
    Unknown,
}

/// Reads `cargo info`'s answer (its output when it succeeded, whose second
/// line is the crate's description, and its error output) for a package
/// of ours described as `ours`.
fn name_status(found: Option<&str>, stderr: &str, ours: &str) -> NameStatus {
    match found {
        None if stderr.contains("could not find") => NameStatus::Free,
        None => NameStatus::Unknown,
        Some(info) => match info.lines().nth(1).map(str::trim) {
            Some(description) if description == ours => NameStatus::Ours,
            other => NameStatus::Theirs(other.unwrap_or("no description").to_owned()),
        },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_free_when_crates_io_has_no_such_crate() {
        let stderr = "error: could not find `x` in registry `crates-io`";
        assert_eq!(name_status(None, stderr, "ours"), NameStatus::Free);
        assert_eq!(
            name_status(None, "network down", "ours"),
            NameStatus::Unknown
        );
    }

    #[test]
    fn a_crate_found_is_ours_only_if_it_has_our_description() {
        let ours = "Raw FFI bindings to the IREE 3.13 runtime";
        let released = format!("iree-runtime-sys\n{ours}\nversion: 0.2.0\n");
        assert_eq!(name_status(Some(&released), "", ours), NameStatus::Ours);
        let theirs = "iree-sys\nRust FFI bindings for IREE\nversion: 0.1.0\nlicense: MIT\n";
        assert_eq!(
            name_status(Some(theirs), "", ours),
            NameStatus::Theirs("Rust FFI bindings for IREE".to_owned())
        );
    }
}
