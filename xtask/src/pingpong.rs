//! `cargo xtask pingpong [ARGS...]`: the project's main job.
//!
//! Ensures IREE is built, then runs the `pingpong` binary of `sheaf-demos`
//! in release mode: Sheaf's original JIT and this
//! project's, side by side on the shape ping-pong workload, with a table and
//! an SVG plot (`target/pingpong/rss.svg` unless `--plot` says otherwise).

use std::ffi::OsString;

use anyhow::Result;

use crate::build_iree;
use crate::process;

/// The demo's arguments: those before `--` (but `--help`, which asks for
/// this command's) and all after it; `None` for `--help`.
pub(crate) fn parse(parser: &mut lexopt::Parser) -> Result<Option<Vec<OsString>>> {
    let mut forwarded = Vec::new();
    let mut raw = parser.raw_args()?;
    while let Some(arg) = raw.next() {
        if arg == "--" {
            forwarded.extend(raw);
            break;
        }
        if arg == "--help" || arg == "-h" {
            return Ok(None);
        }
        forwarded.push(arg);
    }
    Ok(Some(forwarded))
}

pub(crate) fn run(args: Vec<OsString>) -> Result<()> {
    let manifest = build_iree::ensure()?;
    eprintln!("[xtask] running the pingpong demo (release build) ...");
    process::run(
        process::cargo_with_iree(&manifest.prefix)
            .args([
                "run",
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
