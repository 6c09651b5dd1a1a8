//! The tests under miri, every test target a job of its own, run by as
//! many workers as there are cores.
//!
//! Miri interprets a test binary on one thread, so `cargo miri test` of a
//! crate runs its targets one after another on one core (`jit-cache`'s
//! took 15 minutes of a 39-minute CI run on 2 cores). Here each crate is
//! built once (`--no-run`, which lists its test targets), then each target
//! (`--lib`, `--test NAME`, `--doc`) is a `cargo miri test` of its own,
//! taken from one queue by the workers; a job's output is printed whole
//! when it ends, so the targets' outputs do not interleave. After a failed
//! job no new one starts.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use crate::process::{self, step};

/// What runs under miri: `jit-cache`'s policy (no I/O), `iree-safe`
/// against its mock of the C API, and the pure parts of
/// `sheaf-integration` (value trees, signatures, configuration parsing,
/// bundle manifests, the batch queue: its unit tests; those that touch the
/// file system or `/proc` are ignored there, and its integration tests
/// need the real compiler). `jit-store` is file and socket I/O, which miri
/// cannot run much of.
const CRATES: &[Crate] = &[
    Crate {
        package: "jit-cache",
        features: &[],
        scope: Scope::Every,
        left_out: &[
            ("admission", SAFE_TRACES),
            ("churn", SAFE_TRACES),
            ("logs", SAFE_TRACES),
            ("model_adaptive", SAFE_TRACES),
        ],
    },
    Crate {
        package: "iree-safe",
        features: &[],
        scope: Scope::Every,
        left_out: &[],
    },
    Crate {
        package: "sheaf-integration",
        // The TLS of the remote cache is ring's C and assembly, which miri
        // cannot run; the rest of the configuration is parsed.
        features: &[
            "--no-default-features",
            "--features",
            "disk-cache,remote-cache,serde",
        ],
        scope: Scope::UnitTests,
        left_out: &[],
    },
];

/// Why a long test of jit-cache's policy is left to the native run:
/// jit-cache forbids unsafe code, and these drive the policy on one thread
/// through long traces (595 of the 1,414 seconds miri's jobs took in
/// `cargo xtask test` at 3fe51af, 2026-12-06), so that miri checks there
/// only what std's collections already show it in the unit tests and the
/// other targets, the threaded ones (`threads`, `background`, `dynamic`,
/// `hot_sizes`) included. The workspace tests run them at full size.
const SAFE_TRACES: &str = "a long single-threaded trace of the policy, which has no unsafe code \
    (the workspace tests run it at full size)";

/// One crate's tests under miri.
struct Crate {
    package: &'static str,
    features: &'static [&'static str],
    scope: Scope,
    /// Integration tests left to the native run, with the reason.
    left_out: &'static [(&'static str, &'static str)],
}

/// Which of a crate's test targets run under miri.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Every one: unit, integration and doc tests.
    Every,
    /// The unit tests alone.
    UnitTests,
}

/// One `cargo miri test` of one test target.
struct Job {
    package: &'static str,
    features: &'static [&'static str],
    /// `--lib`, `--doc` or `--test NAME`.
    target: Vec<String>,
}

impl Job {
    fn name(&self) -> String {
        format!("{} {}", self.package, self.target.join(" "))
    }

    fn command(&self, prefix: &Path) -> Command {
        let mut command = miri_test(prefix, self.package, self.features);
        command.args(&self.target);
        command
    }
}

/// `cargo xtask miri`.
pub(crate) fn run() -> Result<()> {
    let manifest = crate::build_iree::ensure()?;
    test_all(&manifest.prefix)
}

/// The miri step of `cargo xtask test`, with the IREE install at `prefix`.
pub(crate) fn test_all(prefix: &Path) -> Result<()> {
    step(
        "installing the nightly toolchain's miri and rust-src (if missing)",
        || process::ensure_toolchain("nightly", &["miri", "--version"], &["miri", "rust-src"]),
    )?;
    let mut jobs = Vec::new();
    for &Crate {
        package,
        features,
        scope,
        left_out,
    } in CRATES
    {
        let mut targets = step(&format!("building the tests of {package} for miri"), || {
            test_targets(prefix, package, features, scope)
        })?;
        leave_out(&mut targets, package, left_out)?;
        jobs.extend(targets.into_iter().map(|target| Job {
            package,
            features,
            target,
        }));
    }
    step(
        &format!(
            "cargo +nightly miri test: {} test targets on {} workers",
            jobs.len(),
            process::workers_for(jobs.len())
        ),
        || {
            process::on_every_core(&jobs, |job| {
                process::run_and_report(&mut job.command(prefix), &format!("miri {}", job.name()))
            })
            .context("under miri")
        },
    )
}

/// Removes the `--test NAME` targets named in `left_out`, printing each
/// with its reason; fails when one of them was not built (renamed?), so
/// that the list never silently leaves out nothing.
fn leave_out(
    targets: &mut Vec<Vec<String>>,
    package: &str,
    left_out: &[(&str, &str)],
) -> Result<()> {
    for &(name, why) in left_out {
        let before = targets.len();
        targets.retain(|target| target[..] != ["--test", name]);
        anyhow::ensure!(
            targets.len() < before,
            "{package}'s test `{name}`, left out of miri, was not built: update `CRATES` in \
             xtask/src/miri.rs"
        );
        eprintln!("[xtask] not under miri: {package} test `{name}`: {why}");
    }
    Ok(())
}

/// `cargo +nightly miri test -p package` with `features`.
fn miri_test(prefix: &Path, package: &str, features: &[&str]) -> Command {
    let mut command = process::cargo_with_iree(prefix);
    command
        .args(["+nightly", "miri", "test", "-p", package])
        .args(features);
    command
}

/// Builds `package`'s tests in `scope` for miri and returns the target
/// arguments that run each: `--lib`, and for [`Scope::Every`] `--test NAME`
/// for each integration test and `--doc`.
fn test_targets(
    prefix: &Path,
    package: &str,
    features: &[&str],
    scope: Scope,
) -> Result<Vec<Vec<String>>> {
    let mut build = miri_test(prefix, package, features);
    if scope == Scope::UnitTests {
        build.arg("--lib");
    }
    let messages = process::output(build.args(["--no-run", "--message-format=json"]))?;
    let manifest = process::workspace_root()
        .join("crates")
        .join(package)
        .join("Cargo.toml");
    let mut targets = targets_built(&messages, &manifest).with_context(|| {
        format!(
            "`cargo miri test -p {package} --no-run` built no unit tests: did its output change?"
        )
    })?;
    if scope == Scope::UnitTests {
        targets.retain(|target| target[0] == "--lib");
    }
    Ok(targets)
}

/// The test targets of the package at `manifest` that cargo's JSON
/// `messages` say were built, as the arguments that run each (`--doc`
/// last); `None` when its unit tests are not among them.
fn targets_built(messages: &str, manifest: &Path) -> Option<Vec<Vec<String>>> {
    let mut targets = Vec::new();
    let mut has_lib = false;
    for line in messages.lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let built_test = message["reason"] == "compiler-artifact"
            && message["profile"]["test"] == true
            && message["manifest_path"].as_str().map(Path::new) == Some(manifest);
        if !built_test {
            continue;
        }
        let target = &message["target"];
        let is = |kind: &str| {
            target["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k == kind))
        };
        if is("lib") {
            has_lib = true;
            targets.push(vec!["--lib".to_owned()]);
        } else if let (true, Some(name)) = (is("test"), target["name"].as_str()) {
            targets.push(vec!["--test".to_owned(), name.to_owned()]);
        }
    }
    targets.push(vec!["--doc".to_owned()]);
    has_lib.then_some(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line of `cargo test --no-run --message-format=json`, trimmed to
    /// the fields read here.
    fn artifact(manifest: &str, kind: &str, name: &str, test: bool) -> String {
        serde_json::json!({
            "reason": "compiler-artifact",
            "manifest_path": manifest,
            "target": { "kind": [kind], "name": name },
            "profile": { "test": test },
        })
        .to_string()
    }

    #[test]
    fn each_built_test_target_of_the_package_is_a_job() {
        let ours = "/w/crates/jit-cache/Cargo.toml";
        let messages = [
            "Preparing a sysroot for Miri (not JSON)".to_owned(),
            artifact("/registry/lru/Cargo.toml", "lib", "lru", false),
            artifact(ours, "lib", "jit_cache", false),
            artifact(ours, "lib", "jit_cache", true),
            artifact(ours, "test", "admission", true),
            artifact("/w/crates/iree-safe/Cargo.toml", "test", "raii", true),
            artifact(ours, "test", "hot_sizes", true),
            r#"{"reason":"build-finished","success":true}"#.to_owned(),
        ]
        .join("\n");
        let targets = targets_built(&messages, Path::new(ours)).unwrap();
        assert_eq!(
            targets,
            [
                vec!["--lib"],
                vec!["--test", "admission"],
                vec!["--test", "hot_sizes"],
                vec!["--doc"],
            ]
        );
    }

    #[test]
    fn a_left_out_test_is_removed_and_one_not_built_is_an_error() {
        let mut targets = vec![
            vec!["--lib".to_owned()],
            vec!["--test".to_owned(), "admission".to_owned()],
            vec!["--test".to_owned(), "threads".to_owned()],
        ];
        leave_out(&mut targets, "jit-cache", &[("admission", "why")]).unwrap();
        assert_eq!(targets, [vec!["--lib"], vec!["--test", "threads"]]);
        let error = leave_out(&mut targets, "jit-cache", &[("admission", "why")]).unwrap_err();
        assert!(error.to_string().contains("`admission`"), "{error}");
    }

    #[test]
    fn without_the_unit_tests_the_listing_is_refused() {
        let ours = "/w/crates/jit-cache/Cargo.toml";
        let messages = artifact(ours, "test", "admission", true);
        assert_eq!(targets_built(&messages, Path::new(ours)), None);
        assert_eq!(targets_built("", Path::new(ours)), None);
    }
}
