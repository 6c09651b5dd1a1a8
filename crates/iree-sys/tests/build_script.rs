//! The build script's refusals, end to end: `cargo check` of this crate in
//! a target folder of the test's own, with the environment a dependent
//! would set, and the one `cargo::error` line each refusal prints.
//!
//! - an `IREE_DIR` or `IREE_SOURCE_DIR` of another IREE release than the
//!   bindings' (`build/release.rs`);
//! - an `IREE_DIR` that does not say its release;
//! - the `cuda` feature on a build from source without the CUDA headers
//!   (`build/features.rs`).
//!
//! Each case stops in the build script before anything native is built, so
//! after the first run (which compiles the build script's dependencies into
//! `target/iree-sys-build-script-test`) each takes about a second.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace's root, two folders above this crate.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `cargo check -p iree-runtime-sys` with `env` and `args`; returns the
/// build script's `cargo::error` lines, failing if the check passed.
fn refusal(env: &[(&str, &Path)], args: &[&str]) -> String {
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .current_dir(workspace())
        .args(["check", "--quiet", "--package", "iree-runtime-sys"])
        .args(args)
        .arg("--target-dir")
        .arg(workspace().join("target/iree-sys-build-script-test"));
    for name in [
        "IREE_DIR",
        "IREE_SOURCE_DIR",
        "CUDA_PATH",
        "IREE_CUDA_DEPS_DIR",
    ] {
        cargo.env_remove(name);
    }
    for (name, value) in env {
        cargo.env(name, value);
    }
    let output = cargo.output().expect("cargo runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "the build passed: {stderr}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("error: ") && line.contains(" iree-sys: "))
        .collect();
    assert_eq!(errors.len(), 1, "one error line, in {stderr}");
    errors[0].to_owned()
}

/// A folder holding `version.json` of `version` at `relative`.
fn with_version(relative: &str, version: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(relative);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, format!("{{\"package-version\": \"{version}\"}}")).unwrap();
    dir
}

#[test]
#[cfg_attr(miri, ignore = "runs cargo")]
fn another_release_or_none_is_refused_and_a_missing_cuda_named() {
    let old_install = with_version("version.json", "3.10.0");
    let error = refusal(&[("IREE_DIR", old_install.path())], &[]);
    assert!(
        error.contains("is IREE 3.10.0") && error.contains("links only a 3.13 runtime"),
        "{error}"
    );

    let old_source = with_version("runtime/version.json", "3.12.1.dev");
    let error = refusal(&[("IREE_SOURCE_DIR", old_source.path())], &[]);
    assert!(error.contains("is IREE 3.12.1.dev"), "{error}");

    let unknown = tempfile::tempdir().unwrap();
    let error = refusal(&[("IREE_DIR", unknown.path())], &[]);
    assert!(
        error.contains("neither a manifest.json") && error.contains("version.json"),
        "{error}"
    );

    // A 3.13 checkout passes the release check and stops at the headers.
    let source = with_version("runtime/version.json", "3.13.0.dev");
    let nowhere = source.path().join("no-cuda-here");
    let error = refusal(
        &[("IREE_SOURCE_DIR", source.path()), ("CUDA_PATH", &nowhere)],
        &["--no-default-features", "--features", "cuda"],
    );
    if Path::new("/usr/local/cuda/include/cuda.h").is_file() {
        // This machine has a toolkit: the build went on to CMake.
        return;
    }
    assert!(
        error.contains("the `cuda` feature needs the CUDA headers") && error.contains("CUDA_PATH"),
        "{error}"
    );
}

#[test]
fn the_bindings_release_is_the_one_the_build_script_checks() {
    let version = iree_runtime_sys::build_info::IREE_VERSION;
    let script = std::fs::read_to_string(workspace().join("crates/iree-sys/build/release.rs"))
        .expect("the build script's release module");
    let release = script
        .lines()
        .find_map(|line| line.strip_prefix("pub(crate) const RELEASE: &str = \""))
        .and_then(|rest| rest.strip_suffix("\";"))
        .expect("RELEASE in build/release.rs");
    assert!(
        version.starts_with(&format!("{release}.")),
        "bindings of {version}, build script checks {release}"
    );
}
