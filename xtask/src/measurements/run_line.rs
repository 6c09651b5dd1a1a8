//! The run line of a section's record: when, at which commit and on what
//! machine, under what load, the command ran (taken as it starts).

use std::process::Command;

use anyhow::{Context, Result};

use crate::host;
use crate::process::{output, workspace_root};

/// `Run on DATE (UTC) at commit SHA[-dirty], CPU, N cores, load L1 L5 L15
/// (from /proc/loadavg at start).`, for a run starting now.
pub(super) fn now() -> Result<String> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    Ok(format!(
        "Run on {} (UTC) at commit {}, {}, {cores} cores, load {} (from /proc/loadavg at start).",
        host::utc_date()?,
        commit()?,
        host::cpu_model(),
        load()?,
    ))
}

/// `git`, in the workspace root, never taking the index's lock (others may
/// be editing the tree).
fn git(args: &[&str]) -> Result<String> {
    output(
        Command::new("git")
            .current_dir(workspace_root())
            .arg("--no-optional-locks")
            .args(args),
    )
    .context("the run line names the commit: run this in a git checkout, with git installed")
}

/// HEAD's short hash, `-dirty` when the tree differs from it.
fn commit() -> Result<String> {
    let sha = git(&["rev-parse", "--short", "HEAD"])?;
    let dirty = !git(&["status", "--porcelain"])?.trim().is_empty();
    Ok(format!(
        "{}{}",
        sha.trim(),
        if dirty { "-dirty" } else { "" }
    ))
}

/// The 1, 5 and 15 minute load averages, as /proc/loadavg writes them.
fn load() -> Result<String> {
    let loadavg = std::fs::read_to_string("/proc/loadavg")
        .context("cannot read /proc/loadavg: `cargo xtask measurements` runs on Linux")?;
    let averages: Vec<&str> = loadavg.split_whitespace().take(3).collect();
    anyhow::ensure!(
        averages.len() == 3,
        "/proc/loadavg has no three load averages: `{}`",
        loadavg.trim()
    );
    Ok(averages.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_line_is_what_the_document_reads() {
        let line = now().unwrap();
        assert!(super::super::document::is_run_line(&line), "{line}");
        assert!(line.ends_with(" (from /proc/loadavg at start)."), "{line}");
    }
}
