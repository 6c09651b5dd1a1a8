//! `cargo xtask test --aarch64`: the runtime on Linux-aarch64, from this
//! x86_64 machine.
//!
//! 1. Debian's aarch64 cross toolchain and qemu-user, and redis-server for
//!    the remote-cache tests (installed when missing), and Rust's standard
//!    library for `aarch64-unknown-linux-gnu` (`rustup target add`);
//! 2. `build-iree --target aarch64-unknown-linux-gnu` (a no-op when
//!    current);
//! 3. the tests of [`PACKAGES`], cross-compiled (linker
//!    `aarch64-linux-gnu-gcc`) and run by qemu-user
//!    (`qemu-aarch64 -L /usr/aarch64-linux-gnu`), linked against the aarch64
//!    runtime. The aarch64 test processes compile with the install's x86_64
//!    `iree-compile`: their in-process compiler library is x86_64 and does
//!    not load, and qemu-user hands the `execve` of an x86_64 executable to
//!    the kernel, which runs it natively. The compiler is told to emit
//!    aarch64 code (`CompileTarget::process_cpu`). Tests that start the test
//!    binary again go through qemu-user too (`SHEAF_JIT_TEST_RUNNER`): the
//!    kernel cannot start an aarch64 executable itself. The test
//!    executables run as many at a time as there are cores, each from its
//!    package's folder as `cargo test` would run it (one long executable,
//!    such as `restart`'s, no longer holds up the rest).
//!
//! What is left out, and why, is listed in [`PACKAGES`] and printed. Each
//! step prints its time, and the run its total.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{anyhow, Context, Result};

use crate::cross::{AARCH64, AARCH64_GNU};
use crate::process::{self, step};
use crate::{build_iree, cross, debian};

/// qemu-user's aarch64 emulator (Debian's `qemu-user`).
const QEMU: &str = "qemu-aarch64";

/// The in-process compiler of the install is an x86_64 library.
const IN_PROCESS: &str = "needs the in-process compiler, whose library is x86_64 (an aarch64 one \
    would run emulated, minutes per compile)";

/// qemu-user does not apply the guest's address-space limit.
const NO_RLIMIT_AS: &str = "limits the address space (RLIMIT_AS) of a child process, which \
    qemu-user accepts but does not apply";

/// Why a test of memory growth is left to the native run.
const QEMU_RSS: &str = "measures the resident set, which under qemu-user is qemu's and grows \
                        with the translated code of each newly loaded module";

/// qemu-user does not pass a guest's memory advice to the host's pages.
const QEMU_PAGES: &str = "counts the kernel's page faults of a copy written on transparent huge \
    pages, which qemu-user's guest memory (the emulator's own mappings) does not get";

/// A cross build carries the CPU drivers only.
const CPU_ONLY: &str = "the aarch64 runtime carries the CPU drivers only, so the CUDA driver is \
    not built in (IREE says NotFound, not that libcuda.so is missing)";

/// One package's tests under qemu-user.
struct Package {
    name: &'static str,
    features: &'static [&'static str],
    /// Test binaries left out, with the reason.
    left_out: &'static [(&'static str, &'static str)],
    /// Tests of the other binaries skipped, with the reason.
    skipped: &'static [(&'static str, &'static str)],
}

/// What runs under qemu-user: each package's library tests, integration
/// tests and examples run as tests, but for those listed. Every feature is
/// on but the GPU drivers' (`vulkan`, `cuda`): the cross-built runtime
/// carries the CPU drivers only (`cross.rs`), and a driver feature requires
/// its driver. `jit-cache` and `jit-store` are left out: they are safe
/// Rust without FFI or layouts of their own, and qemu on x86_64 does not
/// reproduce aarch64's weaker memory ordering, so they have nothing to show
/// there that their native runs do not; the store's system calls (rustix)
/// and ring's assembly run under qemu in sheaf-integration's tests, whose
/// disk and remote caches are on.
const PACKAGES: &[Package] = &[
    Package {
        name: "iree-runtime-sys",
        features: &[],
        left_out: &[(
            "build_script",
            "checks the build script's refusals by running the host's cargo, which the native \
             run does: nothing in it is aarch64's",
        )],
        skipped: &[],
    },
    Package {
        name: "iree-safe",
        features: &["--features", "in-process-compiler"],
        left_out: &[
            ("compiler_env", IN_PROCESS),
            ("compiler_exit", IN_PROCESS),
            ("compiler_implementations", IN_PROCESS),
            ("compiler_named", IN_PROCESS),
            ("compiler_threads", IN_PROCESS),
            ("host_memory", NO_RLIMIT_AS),
            ("rss_loop", QEMU_RSS),
            ("host_copy_pages", QEMU_PAGES),
        ],
        skipped: &[(
            "cuda_lists_devices_that_open_or_says_libcuda_is_missing",
            CPU_ONLY,
        )],
    },
    Package {
        name: "sheaf-integration",
        features: &[
            "--features",
            "disk-cache,remote-cache,remote-cache-tls,in-process-compiler,serde,cli",
        ],
        left_out: &[
            (
                "exit_during_compile",
                "128 child processes of the test binary, each started by qemu-user (seconds \
                 apiece); the compiler runs as a subprocess there anyway, so the native run \
                 shows all there is",
            ),
            (
                "ragged",
                "2,000 calls with the resident set measured: 270 s under qemu-user (every other \
                 test together takes about a minute), and the resident set is qemu's; the \
                 dynamic dims it relies on are tested by `dynamic` and `mlp_shapes`",
            ),
        ],
        skipped: &[
            (
                "host_copies_that_cannot_be_allocated_are_errors",
                NO_RLIMIT_AS,
            ),
            (
                "an_in_process_compile_recompiles_to_the_same_artifact",
                IN_PROCESS,
            ),
            ("clearing_again_and_again_unloads_the_modules", QEMU_RSS),
            (
                "a_killed_process_restarts_warm_with_no_compile",
                "runs 500 ragged calls in two processes, about 100 s under qemu-user (half the \
                 step on one core); the policy file and disk cache it restarts from are read \
                 on aarch64 by `a_damaged_or_stale_policy_file_is_ignored_with_one_warning` \
                 and `end_to_end`",
            ),
        ],
    },
    Package {
        name: "sheaf-demos",
        features: &[],
        left_out: &[(
            "pingpong",
            "the pingpong binary runs each mode in a child process of itself, which the \
             kernel cannot start (an aarch64 executable; no binfmt_misc for qemu here)",
        )],
        skipped: &[],
    },
];

pub(crate) fn run() -> Result<()> {
    let started = Instant::now();
    let target = &AARCH64;
    let gcc = step(
        "the aarch64 cross compilers (installing Debian's packages if missing)",
        || target.ensure_toolchain(),
    )?
    .cc;
    let qemu = step("qemu-user (installing Debian's package if missing)", || {
        debian::ensure(
            &["qemu-user"],
            || cross::on_path(QEMU).is_some(),
            "the aarch64 tests run under qemu-user: install it as root (`apt-get install \
             qemu-user`)",
        )?;
        cross::on_path(QEMU).with_context(|| format!("{QEMU} is not on the PATH"))
    })?;
    step(
        "redis-server for the remote-cache tests (installing Debian's package if missing)",
        crate::redis::ensure,
    )?;
    step(&format!("rustup target add {}", target.triple), || {
        process::run(Command::new("rustup").args(["target", "add", target.triple]))
    })?;
    let iree_started = Instant::now();
    let manifest = build_iree::run(&build_iree::Options::from_args(&[
        "--target",
        target.triple,
    ])?)?;
    let iree_seconds = iree_started.elapsed().as_secs_f64();
    let runner = format!("{} -L {}", qemu.display(), AARCH64_GNU.sysroot().display());
    let metadata = process::workspace_metadata()?;
    let selections = PACKAGES
        .iter()
        .map(|package| package.cargo_args(&metadata))
        .collect::<Result<Vec<_>, _>>()?;
    let build_started = Instant::now();
    let executables = step(
        &format!("cross-compiling the tests for {}", target.triple),
        || {
            let mut executables = Vec::new();
            for (package, (tests, examples)) in PACKAGES.iter().zip(&selections) {
                for args in [tests, examples] {
                    if args.is_empty() {
                        continue;
                    }
                    let messages = process::output(
                        process::cargo_with_iree(&manifest.prefix)
                            .args(["test", "--no-run", "--target", target.triple])
                            .arg("--message-format=json-render-diagnostics")
                            .args(args)
                            .env(target.cargo_env("LINKER"), &gcc)
                            .stderr(Stdio::inherit()),
                    )?;
                    executables.extend(TestExecutable::built(package, &messages));
                }
            }
            Ok(executables)
        },
    )?;
    let build_seconds = build_started.elapsed().as_secs_f64();
    for package in PACKAGES {
        for (name, why) in package.left_out {
            eprintln!(
                "[xtask] not under qemu: {} test `{name}`: {why}",
                package.name
            );
        }
        for (name, why) in package.skipped {
            eprintln!(
                "[xtask] skipped under qemu: {} `{name}`: {why}",
                package.name
            );
        }
    }
    let tests_started = Instant::now();
    step(
        &format!(
            "{} test executables under {runner}, {} at a time",
            executables.len(),
            process::workers_for(executables.len())
        ),
        || {
            process::on_every_core(&executables, |executable| {
                executable.run(&qemu, &manifest.prefix, &runner)
            })
        },
    )?;
    eprintln!(
        "[xtask] aarch64: IREE cross build {iree_seconds:.1}s, cross-compiling the tests \
         {build_seconds:.1}s, the tests under qemu-user {:.1}s; {:.1}s in all",
        tests_started.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// One cross-compiled test executable, run under qemu-user the way
/// `cargo test` would run it: from its package's folder, with the package's
/// skipped tests skipped.
struct TestExecutable {
    package: &'static Package,
    /// The target's name (`--lib` targets are named as the library).
    name: String,
    path: PathBuf,
    /// The package's folder, the working directory `cargo test` gives.
    folder: PathBuf,
    /// Whether it was built with the test harness and takes its arguments
    /// (an example run as a test is not and does not).
    harness: bool,
}

impl TestExecutable {
    /// The executables cargo's JSON `messages` (of `cargo test --no-run`)
    /// say it built for `package`.
    fn built(package: &'static Package, messages: &str) -> Vec<TestExecutable> {
        messages
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|message| message["reason"] == "compiler-artifact")
            .filter_map(|message| {
                let path = PathBuf::from(message["executable"].as_str()?);
                let folder = Path::new(message["manifest_path"].as_str()?)
                    .parent()?
                    .to_path_buf();
                let target = &message["target"];
                // Built with the test harness, or an example run as a test;
                // not the binaries built for the integration tests to start.
                let harness = message["profile"]["test"] == true;
                if !harness && target["kind"][0] != "example" {
                    return None;
                }
                Some(TestExecutable {
                    package,
                    name: target["name"].as_str()?.to_owned(),
                    path,
                    folder,
                    harness,
                })
            })
            .collect()
    }

    /// Runs it under `qemu` to its end, then prints its output and how long
    /// it took (`process::run_and_report`).
    fn run(&self, qemu: &Path, prefix: &Path, runner: &str) -> Result<()> {
        let mut command = Command::new(qemu);
        command
            .arg("-L")
            .arg(AARCH64_GNU.sysroot())
            .arg(&self.path)
            .current_dir(&self.folder)
            .env("CARGO_MANIFEST_DIR", &self.folder)
            .env("IREE_DIR", prefix)
            .env_remove("IREE_SOURCE_DIR")
            .env("SHEAF_JIT_TEST_RUNNER", runner);
        if self.harness {
            for (name, _) in self.package.skipped {
                command.args(["--skip", name]);
            }
        }
        process::run_and_report(
            &mut command,
            &format!("qemu {} {}", self.package.name, self.name),
        )
    }
}

impl Package {
    /// `cargo test` arguments selecting this package's test targets: the
    /// harness tests (library, binaries, integration tests but those left
    /// out), then the examples run as tests (empty when it has none), from
    /// the workspace's `cargo metadata`.
    fn cargo_args(&self, metadata: &serde_json::Value) -> Result<(Vec<String>, Vec<String>)> {
        let targets = metadata["packages"]
            .as_array()
            .and_then(|packages| packages.iter().find(|p| p["name"] == self.name))
            .and_then(|package| package["targets"].as_array())
            .with_context(|| format!("cargo metadata lists no targets of {}", self.name))?;
        let base = || {
            let mut args = vec!["-p".to_owned(), self.name.to_owned()];
            args.extend(self.features.iter().map(|f| (*f).to_owned()));
            args
        };
        let (mut tests, mut examples) = (base(), Vec::new());
        for target in targets.iter().filter(|t| t["test"] == true) {
            let name = target["name"].as_str().unwrap_or_default();
            match target["kind"][0].as_str().unwrap_or_default() {
                "lib" => tests.push("--lib".to_owned()),
                "bin" => tests.extend(["--bin".to_owned(), name.to_owned()]),
                "test" if !self.left_out.iter().any(|(left, _)| *left == name) => {
                    tests.extend(["--test".to_owned(), name.to_owned()])
                }
                "example" => {
                    if examples.is_empty() {
                        examples = base();
                    }
                    examples.extend(["--example".to_owned(), name.to_owned()]);
                }
                _ => {}
            }
        }
        for (left, _) in self.left_out {
            let known = targets.iter().any(|t| t["name"] == *left);
            if !known {
                return Err(anyhow!(
                    "{} has no test `{left}` to leave out; update PACKAGES in {}",
                    self.name,
                    Path::new(file!()).display()
                ));
            }
        }
        Ok((tests, examples))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line of `cargo test --no-run --message-format=json`, trimmed to
    /// the fields read here.
    fn artifact(kind: &str, name: &str, test: bool, executable: Option<&str>) -> String {
        serde_json::json!({
            "reason": "compiler-artifact",
            "manifest_path": "/w/crates/sheaf-integration/Cargo.toml",
            "target": { "kind": [kind], "name": name },
            "profile": { "test": test },
            "executable": executable,
        })
        .to_string()
    }

    #[test]
    fn the_test_executables_and_examples_run_as_tests_are_run() {
        let messages = [
            "Compiling (not JSON)".to_owned(),
            artifact("lib", "sheaf_integration", false, None),
            artifact(
                "lib",
                "sheaf_integration",
                true,
                Some("/t/sheaf_integration-1"),
            ),
            artifact("bin", "sheaf-jit-cache", false, Some("/t/sheaf-jit-cache")),
            artifact("test", "restart", true, Some("/t/restart-2")),
            artifact(
                "example",
                "sheaf_port",
                false,
                Some("/t/examples/sheaf_port"),
            ),
            r#"{"reason":"build-finished","success":true}"#.to_owned(),
        ]
        .join("\n");
        let package = &PACKAGES[2];
        let built = TestExecutable::built(package, &messages);
        let listed: Vec<(&str, &str, bool)> = built
            .iter()
            .map(|e| (e.name.as_str(), e.path.to_str().unwrap(), e.harness))
            .collect();
        assert_eq!(
            listed,
            [
                ("sheaf_integration", "/t/sheaf_integration-1", true),
                ("restart", "/t/restart-2", true),
                ("sheaf_port", "/t/examples/sheaf_port", false),
            ]
        );
        assert!(built
            .iter()
            .all(|e| e.folder == Path::new("/w/crates/sheaf-integration")));
    }
}
