//! `cargo xtask pingpong [ARGS...]`: the project's main job.
//!
//! Ensures IREE is built, then runs the `pingpong` binary of `sheaf-demos`
//! in release mode: Sheaf's original JIT and this
//! project's, side by side on the shape ping-pong workload, with a table and
//! an SVG plot (`target/pingpong/rss.svg` unless `--plot` says otherwise).

use crate::build_iree;
use crate::process;

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let manifest = build_iree::ensure()?;
    eprintln!("[xtask] running the pingpong demo (release build) ...");
    process::run(
        process::cargo_with_iree(&manifest.prefix)
            .args([
                "run",
                "--quiet",
                "--release",
                "-p",
                "sheaf-demos",
                "--bin",
                "pingpong",
                "--",
            ])
            .args(args),
    )
}
