//! The shape ping-pong demo: Sheaf's original JIT next to this project's,
//! on the same workload, in one run.
//!
//! Every iteration calls `sigmoid` on `f32[1,5]` and `f32[1,5,1]`
//! alternately, and `softmax` on `f32[1,5]` with a temperature that
//! alternates between 0.5 and 1.0. Each mode runs in its own child process
//! (so their memory never mixes, and the legacy mode's many VM instances
//! never meet the shared one):
//!
//! - `legacy`: one slot per function; every shape mismatch builds a new
//!   runtime (instance + device + session) that is kept forever, and the key
//!   ignores captured scalars (so a new temperature silently reuses stale
//!   code). It reuses compiled bytes to keep the run short, and stops at a
//!   memory ceiling.
//! - `shared`: `JitRuntime` (one shared runtime, bounded per-function
//!   caches keyed by shapes, dtypes and captured scalars); a miss waits for
//!   its compile.
//! - `background`: the same, but a miss runs in the interpreter while its
//!   compile runs on a background thread.
//!
//! Prints a table at the checkpoints, writes an SVG plot of RSS against
//! iterations, and with `--json` prints one JSON object per checkpoint and
//! mode. Run it with `cargo xtask pingpong` or
//! `cargo run --release -p sheaf-demos --bin pingpong -- --help`.

mod args;
mod legacy;
mod plot;
mod ragged;
mod report;
mod shared;
mod workload;

use std::io::BufRead;
use std::process::{Command, ExitCode, Stdio};

use anyhow::{anyhow, bail, Context as _};
use args::{Args, Mode};
use sheaf_integration::settings::CompileMode;
use workload::Record;

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("pingpong: {error}\n\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    let result = match args.child {
        Some(mode) => run_child(mode, &args),
        None => run_parent(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("pingpong: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one mode in this process, printing records as JSON lines.
fn run_child(mode: Mode, args: &Args) -> anyhow::Result<()> {
    sheaf_integration::logging::apply_env()?;
    let mut emit = |record: &Record| {
        println!(
            "{}",
            serde_json::to_string(record).expect("records serialize")
        )
    };
    match mode {
        _ if args.ragged => ragged::run(mode, args, &mut emit),
        Mode::Legacy => legacy::run(args, &mut emit),
        Mode::Shared => shared::run(args, CompileMode::Blocking, &mut emit),
        Mode::Background => shared::run(args, CompileMode::Background, &mut emit),
        Mode::Static | Mode::Dynamic | Mode::Restart => Err(anyhow!(
            "the `{}` mode belongs to the ragged scenario (--ragged)",
            mode.name()
        )),
    }
}

/// Runs each mode as a child process and reports side by side.
fn run_parent(args: &Args) -> anyhow::Result<()> {
    // The ragged scenario's dynamic run fills a disk cache of its own, on
    // which the restart runs: the one given, or a temporary one.
    let temporary = match (&args.cache_dir, args.ragged) {
        (None, true) => Some(tempfile::tempdir().context("cannot make a disk cache folder")?),
        _ => None,
    };
    let args = &Args {
        cache_dir: temporary
            .as_ref()
            .map(|cache| cache.path().to_path_buf())
            .or_else(|| args.cache_dir.clone()),
        ..args.clone()
    };
    let mut records = Vec::new();
    for &mode in args.modes() {
        eprintln!(
            "[pingpong] running {} mode on {} for {} {} ...",
            mode.name(),
            args.driver,
            args.max_iters(),
            if args.ragged { "calls" } else { "iterations" }
        );
        records.extend(run_mode(mode, args)?);
    }
    if args.json {
        // Checkpoints, summaries, and where the legacy mode hit its ceiling
        // (if it did).
        for record in records.iter().filter(|r| r.kind != "sample") {
            println!(
                "{}",
                serde_json::to_string(record).expect("records serialize")
            );
        }
    } else {
        print!("{}", report::table(&records, args));
    }
    let plot = args.plot_path();
    plot::write(&plot, &records, args)?;
    eprintln!("[pingpong] plot of RSS written to {}", plot.display());
    Ok(())
}

fn run_mode(mode: Mode, args: &Args) -> anyhow::Result<Vec<Record>> {
    let exe = std::env::current_exe().context("cannot find this program")?;
    let mut child = Command::new(exe);
    // The children print the JIT's warnings unless told otherwise.
    if ["SHEAF_JIT_LOG", "SHEAF_JIT_TRACE"]
        .iter()
        .all(|name| std::env::var_os(name).is_none_or(|value| value.is_empty()))
    {
        child.env("SHEAF_JIT_LOG", "warn");
    }
    let mut child = child
        .args(args.child_args(mode))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start the {} child", mode.name()))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut records = Vec::new();
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.with_context(|| format!("reading the {} child", mode.name()))?;
        let record: Record = serde_json::from_str(&line)
            .with_context(|| format!("the {} child printed `{line}`", mode.name()))?;
        records.push(record);
    }
    let status = child
        .wait()
        .with_context(|| format!("waiting for the {} child", mode.name()))?;
    if !status.success() {
        bail!("the {} mode failed ({status})", mode.name());
    }
    Ok(records)
}
