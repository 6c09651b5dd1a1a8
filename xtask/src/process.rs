//! Running child processes and timing long steps.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};

/// The workspace root (the parent of this crate's folder).
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// rustup's `cargo` proxy (so that `+nightly` works) in the workspace root,
/// pinned to the IREE install at `prefix` whatever the caller's environment
/// says.
pub(crate) fn cargo_with_iree(prefix: &Path) -> Command {
    let mut command = Command::new("cargo");
    command
        .current_dir(workspace_root())
        .env("IREE_DIR", prefix)
        .env_remove("IREE_SOURCE_DIR");
    command
}

/// Runs `command` to completion, failing with its command line if it exits
/// non-zero or cannot start.
pub(crate) fn run(command: &mut Command) -> Result<()> {
    let status = command
        .status()
        .with_context(|| format!("cannot start {}", describe(command)))?;
    if status.success() {
        Ok(())
    } else {
        Err(anyhow!("{} failed with {status}", describe(command)))
    }
}

/// `cargo metadata --no-deps` of the workspace, parsed.
pub(crate) fn workspace_metadata() -> Result<serde_json::Value> {
    let metadata = output(Command::new("cargo").current_dir(workspace_root()).args([
        "metadata",
        "--no-deps",
        "--format-version",
        "1",
    ]))?;
    serde_json::from_str(&metadata).context("cargo metadata printed no JSON")
}

/// The host's target triple, as `rustc -vV` names it.
pub(crate) fn host_triple() -> Result<String> {
    output(Command::new("rustc").arg("-vV"))?
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_owned)
        .context("`rustc -vV` names no host triple")
}

/// Runs `command` and returns its standard output as text.
pub(crate) fn output(command: &mut Command) -> Result<String> {
    let out = command
        .output()
        .with_context(|| format!("cannot start {}", describe(command)))?;
    if !out.status.success() {
        return Err(anyhow!(
            "{} failed with {}: {}",
            describe(command),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8(out.stdout)
        .with_context(|| format!("{} printed non-UTF-8", describe(command)))
}

/// The command line of `command`, in backticks.
pub(crate) fn describe(command: &Command) -> String {
    let mut text = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    format!("`{text}`")
}

/// Prints `what`, runs `step`, then prints how long it took.
pub(crate) fn step<T>(what: &str, step: impl FnOnce() -> Result<T>) -> Result<T> {
    eprintln!("[xtask] {what} ...");
    let start = Instant::now();
    let value = step()?;
    eprintln!(
        "[xtask] {what}: done in {:.1}s",
        start.elapsed().as_secs_f64()
    );
    Ok(value)
}

/// Runs `run` on each of `jobs`, taken from one queue by as many worker
/// threads as there are cores; after a failed job no new one starts. Fails
/// naming every job that failed. For jobs that each keep one core busy
/// (miri, a fuzzer): a job should print its output in one write when it
/// ends, so that the workers' outputs do not interleave.
pub(crate) fn on_every_core<T: Sync>(
    jobs: &[T],
    run: impl Fn(&T) -> Result<()> + Sync,
) -> Result<()> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let failures: Vec<String> = thread::scope(|scope| {
        let workers: Vec<_> = (0..workers_for(jobs.len()))
            .map(|_| {
                scope.spawn(|| {
                    let mut failures = Vec::new();
                    while !failed.load(Ordering::Relaxed) {
                        let Some(job) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) else {
                            break;
                        };
                        if let Err(why) = run(job) {
                            failed.store(true, Ordering::Relaxed);
                            failures.push(format!("{why:#}"));
                        }
                    }
                    failures
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().expect("a worker panicked"))
            .collect()
    });
    if failures.is_empty() {
        Ok(())
    } else {
        Err(anyhow!("{}", failures.join("; ")))
    }
}

/// Runs `command` to its end with its output captured, then prints that
/// output and `[xtask]   LABEL: ok in Ns` (or `FAILED`) in one write, so
/// that jobs running beside it (`on_every_core`) do not interleave.
pub(crate) fn run_and_report(command: &mut Command, label: &str) -> Result<()> {
    let start = Instant::now();
    let out = command
        .output()
        .with_context(|| format!("cannot start {}", describe(command)))?;
    let status = if out.status.success() { "ok" } else { "FAILED" };
    eprintln!(
        "{}{}[xtask]   {label}: {status} in {:.1}s",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        start.elapsed().as_secs_f64()
    );
    if out.status.success() {
        Ok(())
    } else {
        Err(anyhow!("{} failed with {}", describe(command), out.status))
    }
}

/// The number of workers `on_every_core` runs `jobs` jobs on.
pub(crate) fn workers_for(jobs: usize) -> usize {
    thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, jobs.max(1))
}

/// The first 16 hex digits of the SHA-256 of `parts` (each followed by a
/// 0xff separator): a short name that changes whenever any part does.
pub(crate) fn short_hash(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0xff]);
    }
    hasher.finalize()[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Installs the rustup `toolchain` with `components` (minimal profile)
/// unless `cargo +<toolchain> <probe>` already runs.
pub(crate) fn ensure_toolchain(toolchain: &str, probe: &[&str], components: &[&str]) -> Result<()> {
    let installed = Command::new("cargo")
        .arg(format!("+{toolchain}"))
        .args(probe)
        .output()
        .is_ok_and(|o| o.status.success());
    if installed {
        return Ok(());
    }
    let mut install = Command::new("rustup");
    install.args(["toolchain", "install", toolchain, "--profile", "minimal"]);
    for component in components {
        install.args(["--component", component]);
    }
    run(&mut install)
}
