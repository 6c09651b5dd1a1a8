//! `cargo xtask soak [SECONDS]`: the `soak` binary of `sheaf-demos`
//! (many threads, every cache tier, bad calls mixed in; see its module
//! docs) for SECONDS (default 30), after making sure IREE is built and a
//! `redis-server` is installed. `cargo xtask test` runs it for 30 s.
//!
//! It runs a debug build on purpose: the soak checks behaviour, and debug
//! builds keep overflow checks and debug assertions on.

use std::path::Path;

use anyhow::Result;

use crate::process::{self, step};

/// Seconds of soak in `cargo xtask test`.
pub(crate) const TEST_SECONDS: u64 = 30;

/// `cargo xtask soak [SECONDS]`.
pub(crate) fn run(seconds: u64) -> Result<()> {
    let manifest = crate::build_iree::ensure()?;
    step(
        "redis-server for the soak (installing Debian's package if missing)",
        crate::redis::ensure,
    )?;
    run_for(&manifest.prefix, seconds)
}

/// Runs the soak for `seconds` against the IREE install at `iree_prefix`.
pub(crate) fn run_for(iree_prefix: &Path, seconds: u64) -> Result<()> {
    step(
        &format!("soak for {seconds}s (8 threads, all tiers, bad calls)"),
        || {
            process::run(process::cargo_with_iree(iree_prefix).args([
                "run",
                "--quiet",
                "-p",
                "sheaf-demos",
                "--bin",
                "soak",
                "--",
                "--seconds",
                &seconds.to_string(),
            ]))
        },
    )
}
