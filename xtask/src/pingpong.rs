//! `cargo xtask pingpong [ARGS...]`: the project's main job.
//!
//! Ensures IREE is built, then runs the `pingpong` binary of
//! `sheaf-integration` in release mode: Sheaf's original JIT and this
//! project's, side by side on the shape ping-pong workload, with a table and
//! an SVG plot (`target/pingpong/rss.svg` unless `--plot` says otherwise).

use std::process::Command;

use crate::build_iree;
use crate::process::{self, step};

pub fn run(args: &[String]) -> Result<(), String> {
    let manifest = build_iree::run(&build_iree::Options::parse(&[])?)?;
    step("building the pingpong demo (release)", || {
        process::run(
            Command::new("cargo")
                .current_dir(process::workspace_root())
                .env("IREE_DIR", &manifest.prefix)
                .env_remove("IREE_SOURCE_DIR")
                .args([
                    "build",
                    "--quiet",
                    "--release",
                    "-p",
                    "sheaf-integration",
                    "--bin",
                    "pingpong",
                ]),
        )
    })?;
    let binary = process::workspace_root().join("target/release/pingpong");
    process::run(
        Command::new(binary)
            .current_dir(process::workspace_root())
            .args(args),
    )
}
