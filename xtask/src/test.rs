//! `cargo xtask test`: everything CI runs.
//!
//! 1. `build-iree` (a no-op when the install is current);
//! 2. the committed bindings match the installed headers;
//! 3. the workspace checks with the declared `rust-version` (`msrv.rs`);
//! 4. a `redis-server` for the remote-cache tests and Mesa's lavapipe for
//!    the Vulkan tests (Debian's packages, installed when missing:
//!    `redis.rs`, `vulkan.rs`);
//! 5. `cargo test --workspace --all-features` against that install (real
//!    runtime, real compiler, the demos and their legacy session included, the
//!    device suite on the CPU and on Vulkan, required by
//!    `SHEAF_JIT_TEST_DEVICES=vulkan` and `IREE_SAFE_TEST_DEVICES=vulkan`; this also runs the tidy test of
//!    `src/tidy.rs`);
//! 6. `sheaf-integration` without its default features (no disk cache, no
//!    remote cache: the build an application that wants neither gets): its
//!    `no_default_features` test, which runs a compile in memory and checks
//!    that asking for a left-out cache or the in-process compiler (the
//!    subprocess one compiles) is an error naming the feature, and clippy
//!    on that build; then sheaf-integration's library test executable
//!    linked for macOS on Apple Silicon with zig (`darwin_link.rs`: `cargo
//!    xtask darwin-link`; never run); and a Tracy
//!    tracing runtime built (CPU drivers) and iree-safe's example run on
//!    it, connected to as Tracy's profiler (`tracing.rs`);
//! 7. the packaged library crates, published `--dry-run`, then used by a
//!    crate outside the workspace that gets them as a registry serves them,
//!    builds offline from them and runs a call on the CPU and on Vulkan
//!    (`package.rs`);
//! 8. the soak for 30 s (`soak.rs`);
//! 9. the Linux-aarch64 tests: the runtime cross-built, the tests
//!    cross-compiled and run under qemu-user (`aarch64.rs`; about a minute
//!    once built, 3-5 minutes the first time);
//! 10. the miri tiers: `jit-cache`'s policy (its long single-threaded
//!     trace tests left to step 5), `iree-safe` (against its mock of the C
//!     API) and `sheaf-integration`'s unit tests, installing the nightly
//!     miri component if needed, each test target a job of its own on as
//!     many workers as there are cores (`miri.rs`);
//! 11. each fuzz target of `fuzz/` for a bounded time (`fuzz.rs`);
//! 12. the library crates' API against `HEAD~1`'s (`cargo-semver-checks`:
//!     `semver.rs`). Last, because on a new machine the tool has to be
//!     compiled: that install starts before step 1 in the background at
//!     the lowest CPU priority (`background.rs`), and by now it has had
//!     every idle moment of the steps before.
//!
//! `cargo xtask test --aarch64` runs step 9 alone.

use anyhow::Result;

use crate::process::{self, step};
use crate::{bindings, build_iree};

/// The arguments of `test`: whether `--aarch64` alone; `None` for `--help`.
pub(crate) fn parse(parser: &mut lexopt::Parser) -> Result<Option<bool>> {
    let mut aarch64 = false;
    while let Some(arg) = parser.next()? {
        match arg {
            arg if crate::cli::is_help(&arg) => return Ok(None),
            lexopt::Arg::Long("aarch64") => aarch64 = true,
            arg => return Err(crate::cli::unexpected("test", arg)),
        }
    }
    Ok(Some(aarch64))
}

pub(crate) fn run(aarch64: bool) -> Result<()> {
    if aarch64 {
        return crate::aarch64::run();
    }
    // The one tool compiled on a new machine, compiled while the steps
    // before the one that uses it leave a core idle.
    let semver_install = crate::semver::install_in_background()?;
    let manifest = build_iree::ensure()?;
    step(
        "checking that the bindings of crates/iree-sys/src (Linux and macOS) are current",
        || bindings::run(true),
    )?;
    crate::msrv::check(&manifest.prefix)?;
    step(
        "redis-server for the remote-cache tests and the soak (installing Debian's package if \
         missing)",
        crate::redis::ensure,
    )?;
    step(
        "Mesa's lavapipe, a software Vulkan device, for the Vulkan tests (installing Debian's \
         package if missing)",
        crate::vulkan::ensure,
    )?;
    step(
        "cargo test --workspace --all-features (real IREE runtime and compiler; CPU and Vulkan)",
        || {
            process::run(
                process::cargo_with_iree(&manifest.prefix)
                    .args(["test", "--workspace", "--all-features"])
                    .envs(crate::vulkan::REQUIRED_ENV.map(|var| (var, "vulkan"))),
            )
        },
    )?;
    step(
        "sheaf-integration with --no-default-features (memory cache, subprocess compiler): its \
         test and clippy",
        || {
            let cargo = |subcommand: &str| {
                let mut cargo = process::cargo_with_iree(&manifest.prefix);
                cargo.args([subcommand, "--package", "sheaf-integration"]);
                cargo.arg("--no-default-features");
                cargo
            };
            process::run(cargo("test").args(["--test", "no_default_features"]))?;
            process::run(cargo("clippy").args(["--all-targets", "--", "-D", "warnings"]))
        },
    )?;
    crate::darwin_link::run()?;
    crate::tracing::check()?;
    crate::package::check(&manifest.prefix)?;
    crate::soak::run_for(&manifest.prefix, crate::soak::TEST_SECONDS)?;
    crate::aarch64::run()?;
    crate::miri::test_all(&manifest.prefix)?;
    crate::fuzz::run_bounded(&manifest.prefix, crate::fuzz::TEST_SECONDS)?;
    crate::semver::check(
        &manifest.prefix,
        crate::semver::DEFAULT_BASELINE,
        semver_install,
    )
}
