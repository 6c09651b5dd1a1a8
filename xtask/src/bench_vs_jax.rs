//! `cargo xtask bench-vs-jax [--driver D] [--quick] [--out FILE]`: this
//! workspace's JIT next to JAX on the CPU, as a Markdown table.
//!
//! Ensures IREE is built (as `pingpong` does) and JAX is installed into
//! the project venv, builds the `bench_vs_jax` binary of `sheaf-demos` in
//! release mode, has it write the inputs (raw
//! little-endian f32 and an index, under `target/bench-vs-jax/inputs`),
//! then runs each side three times, each run in a process of its own and
//! the two sides alternating: the binary, and `jax_side.py` beside it with
//! `JAX_PLATFORMS=cpu`. Each prints one JSON object per row: a time and
//! three checksums of the outputs (f64 sums: plain, of absolute values, of
//! squares). The compute rows (the matmuls, softmax, mlp_layer) run again with
//! both sides pinned to one core (`taskset -c 0`, and single-threaded XLA).
//! The table has the median of the three runs of each side, their ratio,
//! and whether every run's checksums agree with JAX's first run within a
//! relative 1e-4; a row whose checksums differ fails the command.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;

use crate::process::{self, step};
use crate::{build_iree, host, tools};

/// The JAX the table is measured against.
const JAX_REQUIREMENT: &str = "jax[cpu]==0.10.2";
/// Runs of each side per setting.
const RUNS: usize = 3;
/// How far apart two runs' checksums may be, relative to the sum of
/// absolute values (sums) or the larger sum of squares.
const TOLERANCE: f64 = 1e-4;
/// XLA on one thread, for the one-core setting.
const ONE_THREAD_XLA_FLAGS: &str =
    "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1";
/// The JAX side, beside the binary it mirrors.
const JAX_SCRIPT: &str = "crates/sheaf-demos/src/bin/bench_vs_jax/jax_side.py";

/// Command-line options.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Options {
    /// The binary's `--driver`; `None`: `JitConfig`'s default device.
    driver: Option<String>,
    /// Fewer calls: a smoke test.
    quick: bool,
    /// Where to write the table too.
    out: Option<PathBuf>,
}

impl Options {
    /// The options `parser` gives; `None` for `--help`.
    pub(crate) fn parse(parser: &mut lexopt::Parser) -> Result<Option<Options>> {
        let mut options = Options::default();
        while let Some(arg) = parser.next()? {
            match arg {
                arg if crate::cli::is_help(&arg) => return Ok(None),
                lexopt::Arg::Long("driver") => {
                    let driver = parser.value().context("--driver needs a driver name")?;
                    let driver = crate::cli::text(driver)?;
                    if !["local-sync", "local-task"].contains(&driver.as_str()) {
                        return Err(anyhow!(
                            "bench-vs-jax compares CPUs: --driver is `local-sync` or \
                             `local-task`, not `{driver}`"
                        ));
                    }
                    options.driver = Some(driver);
                }
                lexopt::Arg::Long("quick") => options.quick = true,
                lexopt::Arg::Long("out") => {
                    options.out = Some(parser.value().context("--out needs a file")?.into())
                }
                arg => return Err(crate::cli::unexpected("bench-vs-jax", arg)),
            }
        }
        Ok(Some(options))
    }
}

/// One row of one run of one side, as the binary and the script print it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Row {
    key: String,
    label: String,
    unit: String,
    value: f64,
    sum: f64,
    abs: f64,
    sq: f64,
    /// Where the code ran; empty when the row does not say.
    device: String,
}

/// Whether the processes may use every core or are pinned to one.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cores {
    All,
    One,
}

/// A row of the table: both sides' medians over their runs.
#[derive(Debug, PartialEq)]
struct Compared {
    label: String,
    cores: Cores,
    unit: String,
    ours: f64,
    jax: f64,
    /// Every run's checksums agree with JAX's first run.
    checksums_agree: bool,
}

pub(crate) fn run(options: Options) -> Result<()> {
    if Command::new("taskset").arg("--version").output().is_err() {
        bail!(
            "the one-core runs need `taskset`: install util-linux (`apt-get install util-linux`)"
        );
    }
    let manifest = build_iree::ensure()?;
    tools::ensure_requirements(&[JAX_REQUIREMENT])?;
    let exe = step("building bench_vs_jax (release)", || {
        build(&manifest.prefix)
    })?;
    let root = process::workspace_root();
    let dir = root.join("target/bench-vs-jax");
    let inputs = dir.join("inputs");
    process::run(Command::new(&exe).arg("write-inputs").arg(&inputs))?;
    let sides = Sides {
        exe: &exe,
        python: &tools::venv_dir().join("bin/python"),
        script: &root.join(JAX_SCRIPT),
        inputs: &inputs,
        options: &options,
    };
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let mut compared = Vec::new();
    let mut device = String::new();
    for setting in [Cores::All, Cores::One] {
        let what = match setting {
            Cores::All => format!("on all {cores} cores"),
            Cores::One => "pinned to core 0, compute rows".to_owned(),
        };
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for run in 1..=RUNS {
            let what = format!("run {run}/{RUNS} {what}");
            ours.push(step(&format!("{what}: this JIT"), || sides.ours(setting))?);
            theirs.push(step(&format!("{what}: JAX"), || sides.jax(setting))?);
        }
        if let Some(row) = ours.iter().flatten().find(|row| !row.device.is_empty()) {
            device.clone_from(&row.device);
        }
        compared.extend(compare(setting, &ours, &theirs)?);
    }

    let table = format!(
        "{}\n{}",
        caption(&device, cores, options.quick),
        markdown(&compared, cores)
    );
    println!("\n{table}");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for path in std::iter::once(dir.join("table.md")).chain(options.out.clone()) {
        std::fs::write(&path, &table)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    eprintln!(
        "[xtask] table written to {}",
        dir.join("table.md").display()
    );
    let differ: Vec<&str> = compared
        .iter()
        .filter(|row| !row.checksums_agree)
        .map(|row| row.label.as_str())
        .collect();
    if differ.is_empty() {
        Ok(())
    } else {
        Err(anyhow!(
            "the two sides' outputs differ (MISMATCH) on: {}; the JSON lines of \
             `bench_vs_jax run` and `jax_side.py` show each run's checksums",
            differ.join("; ")
        ))
    }
}

/// How to run each side.
struct Sides<'a> {
    /// The `bench_vs_jax` binary.
    exe: &'a Path,
    /// The venv's Python, and `jax_side.py`.
    python: &'a Path,
    script: &'a Path,
    inputs: &'a Path,
    options: &'a Options,
}

impl Sides<'_> {
    /// One run of this JIT's side.
    fn ours(&self, setting: Cores) -> Result<Vec<Row>> {
        let mut command = self.command(setting, self.exe);
        command.arg("run").arg("--inputs").arg(self.inputs);
        if let Some(driver) = &self.options.driver {
            command.args(["--driver", driver]);
        }
        rows_of(command.args(self.common_args(setting)))
    }

    /// One run of the JAX side, with XLA on one thread in the one-core
    /// setting (and the caller's `XLA_FLAGS` ignored).
    fn jax(&self, setting: Cores) -> Result<Vec<Row>> {
        let mut command = self.command(setting, self.python);
        command.arg(self.script).arg("--inputs").arg(self.inputs);
        command.env("JAX_PLATFORMS", "cpu").env_remove("XLA_FLAGS");
        if setting == Cores::One {
            command.env("XLA_FLAGS", ONE_THREAD_XLA_FLAGS);
        }
        rows_of(command.args(self.common_args(setting)))
    }

    /// `program`, pinned to core 0 in the one-core setting.
    fn command(&self, setting: Cores, program: &Path) -> Command {
        match setting {
            Cores::All => Command::new(program),
            Cores::One => {
                let mut command = Command::new("taskset");
                command.args(["-c", "0"]).arg(program);
                command
            }
        }
    }

    /// The arguments both sides take after their inputs.
    fn common_args(&self, setting: Cores) -> Vec<&'static str> {
        let mut args = Vec::new();
        if self.options.quick {
            args.push("--quick");
        }
        if setting == Cores::One {
            args.extend(["--rows", "compute"]);
        }
        args
    }
}

/// Builds the binary and returns its path (wherever Cargo's target folder
/// is), from Cargo's JSON messages.
fn build(iree_prefix: &Path) -> Result<PathBuf> {
    let mut cargo = process::cargo_with_iree(iree_prefix);
    cargo
        .args([
            "build",
            "--release",
            "--message-format=json-render-diagnostics",
            "-p",
            "sheaf-demos",
            "--bin",
            "bench_vs_jax",
        ])
        .stderr(Stdio::inherit());
    let stdout = output(&mut cargo)?;
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| {
            message["reason"] == "compiler-artifact" && message["target"]["name"] == "bench_vs_jax"
        })
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .context("Cargo built no `bench_vs_jax` executable")
}

/// Runs `command` (its stderr shown as it comes) and returns its stdout.
fn output(command: &mut Command) -> Result<String> {
    let out = command
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot start {}", process::describe(command)))?;
    if !out.status.success() {
        return Err(anyhow!(
            "{} failed with {}",
            process::describe(command),
            out.status
        ));
    }
    String::from_utf8(out.stdout)
        .with_context(|| format!("{} printed non-UTF-8", process::describe(command)))
}

/// The rows a side's run prints, one JSON object per line.
fn rows_of(command: &mut Command) -> Result<Vec<Row>> {
    output(command)?
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line).with_context(|| {
                format!("{} printed `{line}`, not a row", process::describe(command))
            })
        })
        .collect()
}

/// The median of `values` (the mean of the middle two of an even count).
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal));
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Whether `a` and `b` summed the same outputs, within [`TOLERANCE`].
fn checksums_agree(a: &Row, b: &Row) -> bool {
    let scale = a.abs.max(b.abs).max(f64::MIN_POSITIVE);
    let squares = a.sq.max(b.sq).max(f64::MIN_POSITIVE);
    (a.sum - b.sum).abs() <= TOLERANCE * scale
        && (a.abs - b.abs).abs() <= TOLERANCE * scale
        && (a.sq - b.sq).abs() <= TOLERANCE * squares
}

/// Each of our rows (in the order of our first run) against JAX's, over
/// every run of both sides.
fn compare(setting: Cores, ours: &[Vec<Row>], theirs: &[Vec<Row>]) -> Result<Vec<Compared>> {
    let find = |runs: &[Vec<Row>], key: &str, side: &str| -> Result<Vec<Row>> {
        runs.iter()
            .enumerate()
            .map(|(i, rows)| {
                rows.iter()
                    .find(|row| row.key == key)
                    .cloned()
                    .with_context(|| format!("run {} of {side} printed no row `{key}`", i + 1))
            })
            .collect()
    };
    let first = ours.first().context("no run of this JIT")?;
    first
        .iter()
        .map(|row| {
            let (ours, theirs) = (
                find(ours, &row.key, "this JIT")?,
                find(theirs, &row.key, "the JAX side")?,
            );
            let reference = &theirs[0];
            let values = |rows: &[Row]| median(&rows.iter().map(|r| r.value).collect::<Vec<_>>());
            Ok(Compared {
                label: row.label.clone(),
                cores: setting,
                unit: row.unit.clone(),
                ours: values(&ours),
                jax: values(&theirs),
                checksums_agree: ours
                    .iter()
                    .chain(&theirs)
                    .all(|r| checksums_agree(r, reference)),
            })
        })
        .collect()
}

/// `value` with three significant digits or so (no exponent).
fn figure(value: f64) -> String {
    match value.abs() {
        v if v >= 100.0 => format!("{value:.0}"),
        v if v >= 10.0 => format!("{value:.1}"),
        v if v >= 1.0 => format!("{value:.2}"),
        _ => format!("{value:.3}"),
    }
}

/// What the table measured, where and when.
fn caption(device: &str, cores: usize, quick: bool) -> String {
    let cpu = host::cpu_model();
    let date = host::utc_date().unwrap_or_default();
    let device = match device {
        "local-sync" => "`local-sync` (large contractions on a `local-task` device beside it, \
                         `SHEAF_JIT_PARALLEL_WORKERS`)"
            .to_owned(),
        other => format!("`{other}`"),
    };
    format!(
        "`cargo xtask bench-vs-jax{}`, {date}, {cores} cores, {cpu}: this JIT on {device}, \
         {JAX_REQUIREMENT} (`JAX_PLATFORMS=cpu`); float32, no persistent compile cache on \
         either side; medians of {RUNS} runs per side; ours/JAX < 1: this JIT is faster. \
         Cores 1: both pinned to core 0 (`taskset -c 0`; XLA_FLAGS=\"{ONE_THREAD_XLA_FLAGS}\").\n",
        if quick { " --quick" } else { "" }
    )
}

/// The Markdown table of `rows`.
fn markdown(rows: &[Compared], cores: usize) -> String {
    let mut table = "| row | cores | unit | this JIT | JAX | ours/JAX | checksums |\n\
                     |---|---:|---|---:|---:|---:|---|\n"
        .to_owned();
    for row in rows {
        let cores = match row.cores {
            Cores::All => cores,
            Cores::One => 1,
        };
        let unit = if row.unit == "us" { "µs" } else { &row.unit };
        table += &format!(
            "| {} | {cores} | {unit} | {} | {} | {}× | {} |\n",
            row.label,
            figure(row.ours),
            figure(row.jax),
            figure(row.ours / row.jax),
            if row.checksums_agree {
                "OK"
            } else {
                "MISMATCH"
            }
        );
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, value: f64, sum: f64) -> Row {
        Row {
            key: key.to_owned(),
            label: format!("{key} label"),
            unit: "us".to_owned(),
            value,
            sum,
            abs: sum.abs(),
            sq: sum * sum,
            device: String::new(),
        }
    }

    #[test]
    fn options_parse() {
        let args = |list: &[&str]| {
            let list: Vec<String> = list.iter().map(|s| s.to_string()).collect();
            Options::parse(&mut lexopt::Parser::from_args(list))
        };
        assert_eq!(args(&[]).unwrap(), Some(Options::default()));
        assert_eq!(args(&["--quick", "--help"]).unwrap(), None);
        let options = args(&["--quick", "--driver", "local-task", "--out", "t.md"])
            .unwrap()
            .unwrap();
        assert_eq!(
            options,
            Options {
                driver: Some("local-task".to_owned()),
                quick: true,
                out: Some("t.md".into()),
            }
        );
        assert!(args(&["--driver", "cuda"])
            .unwrap_err()
            .to_string()
            .contains("local-sync"));
        assert!(args(&["--out"]).is_err());
        assert!(args(&["--fast"]).is_err());
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[7.0]), 7.0);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn checksums_agree_within_the_tolerance_only() {
        let a = row("r", 1.0, 1000.0);
        assert!(checksums_agree(&a, &row("r", 1.0, 1000.05)));
        assert!(!checksums_agree(&a, &row("r", 1.0, 1000.5)));
        // A sum near zero is compared to the sum of absolute values.
        let cancelling = Row {
            abs: 5000.0,
            ..row("r", 1.0, 0.01)
        };
        let other = Row {
            sum: 0.2,
            ..cancelling.clone()
        };
        assert!(checksums_agree(&cancelling, &other));
        // Same sums, other squares: a softmax at another temperature.
        let squares = Row {
            sq: a.sq * 1.01,
            ..a.clone()
        };
        assert!(!checksums_agree(&a, &squares));
        // Zeros agree with zeros.
        assert!(checksums_agree(&row("r", 1.0, 0.0), &row("r", 2.0, 0.0)));
    }

    #[test]
    fn compare_takes_medians_and_checks_every_run() {
        let ours = vec![
            vec![row("a", 10.0, 5.0), row("b", 1.0, 7.0)],
            vec![row("a", 30.0, 5.0), row("b", 2.0, 7.0)],
            vec![row("a", 20.0, 5.0), row("b", 3.0, 7.1)],
        ];
        let theirs = vec![
            vec![row("b", 4.0, 7.0), row("a", 40.0, 5.0)],
            vec![row("b", 4.0, 7.0), row("a", 40.0, 5.0)],
            vec![row("b", 8.0, 7.0), row("a", 10.0, 5.0)],
        ];
        let compared = compare(Cores::All, &ours, &theirs).unwrap();
        assert_eq!(compared.len(), 2);
        assert_eq!(compared[0].label, "a label");
        assert_eq!((compared[0].ours, compared[0].jax), (20.0, 40.0));
        assert!(compared[0].checksums_agree);
        assert_eq!((compared[1].ours, compared[1].jax), (2.0, 4.0));
        assert!(!compared[1].checksums_agree, "our third run of b is off");

        let table = markdown(&compared, 2);
        assert!(
            table.contains("| a label | 2 | µs | 20.0 | 40.0 | 0.500× | OK |"),
            "{table}"
        );
        assert!(table.contains("| b label | 2 | µs | 2.00 | 4.00 | 0.500× | MISMATCH |"));

        let missing = vec![vec![row("a", 1.0, 5.0)]; 3];
        let error = compare(Cores::One, &ours, &missing).unwrap_err();
        assert_eq!(
            error.to_string(),
            "run 1 of the JAX side printed no row `b`"
        );
    }

    #[test]
    fn figures_keep_about_three_digits() {
        assert_eq!(figure(1234.6), "1235");
        assert_eq!(figure(12.345), "12.3");
        assert_eq!(figure(1.2345), "1.23");
        assert_eq!(figure(0.0123), "0.012");
    }
}
