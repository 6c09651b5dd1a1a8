//! `cargo xtask fleet`: a cluster on one machine, to see that it compiles
//! each signature once.
//!
//! Ensures IREE is built (and, for `--backend redis`, `redis-server`
//! installed), builds the `fleet_worker` binary of `sheaf-demos` (see its
//! module docs: six signatures in Blocking mode against the remote cache,
//! each result checked against the interpreter, one JSON line out), then
//! runs N workers (default 6), each with a fresh disk cache, against a fresh
//! store (a `redis-server` on loopback, or a temporary folder) in three
//! scenarios: all at once; one after another (the first compiles, the
//! others fetch); and all at once with the first lease owner killed
//! (SIGKILL) mid-compile. Each runs with compile leases and, for the
//! "before" rows, without (`SHEAF_JIT_REMOTE_LEASE=0`). A last scenario
//! runs in waves, dims dynamic: a first worker runs `mlp_layer` on batch
//! sizes 3, 5, 7 and 9, learning that the batch dim goes dynamic (its
//! policy published beside the artifacts); then a second wave of N workers
//! at once, fresh disk caches, runs new batch sizes 40, 41 and 42. It prints
//! one table row per scenario and checks the targets: at once with leases,
//! one compile per signature and no wrong result, the slowest worker within
//! 1.5 times the lone first worker; with the owner killed, every other
//! worker done within the at-once slowest plus a lease's time to live plus
//! one compile, and at most one compile more; the second wave compiles
//! nothing (it starts from the learned policy, and fetches the dynamic
//! variant).

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use test_support::redis::RedisServer;

use crate::cli;
use crate::process::{self, step};

/// The signatures a worker runs (`fleet_worker`'s).
const SIGNATURES: u64 = 6;

/// The lease's time to live the fleet runs with (the library's default).
const LEASE_TTL: Duration = Duration::from_secs(2);

/// The batch sizes the first wave learns from, and those the second runs.
const FIRST_WAVE_ROWS: &str = "3,5,7,9";
const SECOND_WAVE_ROWS: &str = "40,41,42";

/// How long the killed scenario looks for a first lease before giving up.
const LEASE_PATIENCE: Duration = Duration::from_secs(60);

/// Where the shared store lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Redis,
    Folder,
}

/// Which rows to run: with leases, without, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leases {
    Both,
    On,
    Off,
}

/// `cargo xtask fleet`'s options.
#[derive(Debug)]
pub(crate) struct Options {
    backend: Backend,
    workers: usize,
    leases: Leases,
}

impl Options {
    /// The options; `None` for `--help`.
    pub(crate) fn parse(parser: &mut lexopt::Parser) -> Result<Option<Options>> {
        let mut options = Options {
            backend: Backend::Redis,
            workers: 6,
            leases: Leases::Both,
        };
        while let Some(arg) = parser.next()? {
            match arg {
                arg if cli::is_help(&arg) => return Ok(None),
                lexopt::Arg::Long("backend") => {
                    let value = cli::text(parser.value().context("--backend needs a value")?)?;
                    options.backend = match value.as_str() {
                        "redis" => Backend::Redis,
                        "folder" => Backend::Folder,
                        _ => bail!("fleet: --backend is `redis` or `folder`, not `{value}`"),
                    };
                }
                lexopt::Arg::Long("workers") => {
                    let value = cli::text(parser.value().context("--workers needs a number")?)?;
                    options.workers =
                        value.parse().ok().filter(|&n| n >= 2).with_context(|| {
                            format!(
                                "fleet: --workers is a whole number of at least 2, not `{value}`"
                            )
                        })?;
                }
                lexopt::Arg::Long("leases") => {
                    let value = cli::text(parser.value().context("--leases needs a value")?)?;
                    options.leases = match value.as_str() {
                        "both" => Leases::Both,
                        "on" => Leases::On,
                        "off" => Leases::Off,
                        _ => bail!("fleet: --leases is `both`, `on` or `off`, not `{value}`"),
                    };
                }
                arg => return Err(cli::unexpected("fleet", arg)),
            }
        }
        Ok(Some(options))
    }
}

/// What a worker printed (`fleet_worker`'s JSON line).
#[derive(Debug, Deserialize)]
struct Report {
    compiles: u64,
    remote_hits: u64,
    lease_waits: u64,
    wall_ms: u64,
    wrong: u64,
}

/// How the workers are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    AtOnce,
    OneAfterAnother,
    OwnerKilled,
    /// A first worker learns, then a second wave runs new sizes.
    SecondWave,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::AtOnce => "at once",
            Scenario::OneAfterAnother => "one after another",
            Scenario::OwnerKilled => "at once, owner killed",
            Scenario::SecondWave => "second wave, new batch sizes",
        }
    }
}

/// One scenario's outcome.
#[derive(Debug)]
struct Row {
    scenario: Scenario,
    leases: bool,
    /// The workers that finished (the killed one is not among them; the
    /// second wave's only).
    reports: Vec<Report>,
    /// The second wave's first worker, which learned the policy.
    learner: Option<Report>,
}

impl Row {
    fn sum(&self, field: fn(&Report) -> u64) -> u64 {
        self.reports.iter().map(field).sum()
    }

    fn slowest(&self) -> u64 {
        self.reports.iter().map(|r| r.wall_ms).max().unwrap_or(0)
    }
}

/// `cargo xtask fleet`.
pub(crate) fn run(options: Options) -> Result<()> {
    let manifest = crate::build_iree::ensure()?;
    if options.backend == Backend::Redis {
        step(
            "redis-server for the fleet (installing Debian's package if missing)",
            crate::redis::ensure,
        )?;
    }
    step("building the fleet worker (sheaf-demos, debug)", || {
        process::run(process::cargo_with_iree(&manifest.prefix).args([
            "build",
            "--quiet",
            "-p",
            "sheaf-demos",
            "--bin",
            "fleet_worker",
        ]))
    })?;
    let worker = target_dir().join("debug").join("fleet_worker");
    let lease_modes: &[bool] = match options.leases {
        Leases::Both => &[false, true],
        Leases::On => &[true],
        Leases::Off => &[false],
    };
    let mut rows = Vec::new();
    for &leases in lease_modes {
        for scenario in [
            Scenario::AtOnce,
            Scenario::OneAfterAnother,
            Scenario::OwnerKilled,
            Scenario::SecondWave,
        ] {
            if matches!(scenario, Scenario::OwnerKilled | Scenario::SecondWave) && !leases {
                continue; // no owner to kill; the waves show the policy, leases or not
            }
            let what = format!(
                "{} workers {}, {} leases",
                options.workers,
                scenario.name(),
                if leases { "with" } else { "without" }
            );
            let row = step(&what, || run_scenario(&worker, &options, scenario, leases))?;
            rows.push(row);
        }
    }
    print_table(&options, &rows);
    check_targets(&rows)
}

/// The target folder, as Cargo uses it.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| process::workspace_root().join("target"))
}

/// A fresh shared store: a server (kept running while held) or a folder.
enum Store {
    Redis(RedisServer),
    Folder(tempfile::TempDir),
}

impl Store {
    fn new(backend: Backend) -> Result<Store> {
        Ok(match backend {
            Backend::Redis => Store::Redis(RedisServer::start()),
            Backend::Folder => Store::Folder(tempfile::tempdir()?),
        })
    }

    fn url(&self) -> String {
        match self {
            Store::Redis(server) => server.url(),
            Store::Folder(dir) => format!("file://{}", dir.path().display()),
        }
    }

    /// The owner of a lease held now, if any.
    fn lease_owner(&self) -> Result<Option<String>> {
        match self {
            Store::Redis(server) => {
                let mut client = server.connection();
                let Some(lease) = client.keys("*:lease").into_iter().next() else {
                    return Ok(None);
                };
                Ok(Some(
                    String::from_utf8_lossy(&client.get(&lease)).into_owned(),
                ))
            }
            Store::Folder(dir) => {
                for entry in fs::read_dir(dir.path())? {
                    let path = entry?.path();
                    if path.to_string_lossy().ends_with(":lease") {
                        let text = fs::read_to_string(&path).unwrap_or_default();
                        return Ok(text.lines().next().map(str::to_owned));
                    }
                }
                Ok(None)
            }
        }
    }
}

/// Runs `scenario` once against a fresh store.
fn run_scenario(worker: &Path, options: &Options, scenario: Scenario, leases: bool) -> Result<Row> {
    let store = Store::new(options.backend)?;
    let secrets = tempfile::tempdir()?;
    let secret = secrets.path().join("secret");
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&secret)?;
    file.write_all(&random_bytes()?)?;
    let caches = tempfile::tempdir()?;
    // The waves run batch sizes, dims dynamic; the others six signatures,
    // static.
    let rows = |n: usize| match (scenario, n) {
        (Scenario::SecondWave, 0) => Some(FIRST_WAVE_ROWS),
        (Scenario::SecondWave, _) => Some(SECOND_WAVE_ROWS),
        _ => None,
    };
    let spawn = |n: usize| -> Result<Child> {
        let cache = caches.path().join(n.to_string());
        let lease_ms = if leases { LEASE_TTL.as_millis() } else { 0 };
        let mut command = Command::new(worker);
        match rows(n) {
            Some(rows) => command.args(["--rows", rows]),
            None => command.env("SHEAF_JIT_DYNAMIC_DIMS", "off"),
        };
        command
            .env("SHEAF_JIT_REMOTE_CACHE", store.url())
            .env("SHEAF_JIT_REMOTE_SECRET_FILE", &secret)
            .env("SHEAF_JIT_REMOTE_LEASE", lease_ms.to_string())
            .env("SHEAF_JIT_CACHE_DIR", cache)
            .env("SHEAF_JIT_COMPILE_MODE", "blocking")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", worker.display()))
    };
    let mut reports = Vec::new();
    let mut learner = None;
    match scenario {
        Scenario::SecondWave => {
            learner = Some(finish(spawn(0)?)?.context("the first worker was killed")?);
            let children = (1..=options.workers)
                .map(spawn)
                .collect::<Result<Vec<_>>>()?;
            for child in children {
                reports.push(finish(child)?.context("a worker was killed")?);
            }
        }
        Scenario::OneAfterAnother => {
            for n in 0..options.workers {
                reports.push(finish(spawn(n)?)?.context("a worker was killed")?);
            }
        }
        Scenario::AtOnce => {
            let children = (0..options.workers)
                .map(spawn)
                .collect::<Result<Vec<_>>>()?;
            for child in children {
                reports.push(finish(child)?.context("a worker was killed")?);
            }
        }
        Scenario::OwnerKilled => {
            let mut children = (0..options.workers)
                .map(spawn)
                .collect::<Result<Vec<_>>>()?;
            let owner = first_lease_owner(&store)?;
            // Mid-compile: a compile takes hundreds of milliseconds.
            thread::sleep(Duration::from_millis(100));
            let victim = children
                .iter_mut()
                .find(|child| Some(child.id()) == owner_pid(&owner))
                .with_context(|| format!("the lease owner `{owner}` is not a worker"))?;
            victim.kill()?;
            for child in children {
                if let Some(report) = finish(child)? {
                    reports.push(report);
                }
            }
        }
    }
    Ok(Row {
        scenario,
        leases,
        reports,
        learner,
    })
}

/// The owner of the first lease that appears in `store`.
fn first_lease_owner(store: &Store) -> Result<String> {
    let start = Instant::now();
    while start.elapsed() < LEASE_PATIENCE {
        if let Some(owner) = store.lease_owner()? {
            return Ok(owner);
        }
        thread::sleep(Duration::from_millis(5));
    }
    Err(anyhow!("no worker took a lease in {LEASE_PATIENCE:?}"))
}

/// The process id in a lease owner's name (`host:pid:random`).
fn owner_pid(owner: &str) -> Option<u32> {
    owner.rsplit(':').nth(1)?.parse().ok()
}

/// Waits for `child`; its report, or `None` when it was killed.
fn finish(child: Child) -> Result<Option<Report>> {
    let output = child.wait_with_output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if output.status.code().is_none() {
        return Ok(None); // killed by a signal
    }
    let line = stdout.lines().find(|line| line.starts_with('{'));
    let Some(line) = line.filter(|_| output.status.success()) else {
        bail!(
            "a fleet worker failed ({}): {}{}",
            output.status,
            stdout,
            String::from_utf8_lossy(&output.stderr)
        );
    };
    Ok(Some(
        serde_json::from_str(line).with_context(|| format!("a worker printed `{line}`"))?,
    ))
}

/// 32 random bytes for the cluster's secret.
fn random_bytes() -> Result<Vec<u8>> {
    let mut bytes = vec![0; 32];
    fs::File::open("/dev/urandom")
        .and_then(|mut random| std::io::Read::read_exact(&mut random, &mut bytes))
        .context("cannot read /dev/urandom for the fleet's secret")?;
    Ok(bytes)
}

fn print_table(options: &Options, rows: &[Row]) {
    let backend = match options.backend {
        Backend::Redis => "redis",
        Backend::Folder => "folder",
    };
    println!(
        "\nfleet: {} workers x {SIGNATURES} signatures, backend {backend}, Blocking mode, \
         fresh disk caches\n",
        options.workers
    );
    println!(
        "| leases | workers | compiles in all | slowest worker | each worker (ms) | remote hits | lease waits | wrong |"
    );
    println!("| --- | --- | ---: | ---: | --- | ---: | ---: | ---: |");
    for row in rows {
        let walls: Vec<String> = row.reports.iter().map(|r| r.wall_ms.to_string()).collect();
        let finished = match (&row.learner, row.scenario) {
            (Some(learner), _) => format!(
                " ({} workers; the first, sizes {FIRST_WAVE_ROWS}, compiled {})",
                row.reports.len(),
                learner.compiles
            ),
            (None, Scenario::OwnerKilled) => format!(" ({} finished)", row.reports.len()),
            (None, _) => String::new(),
        };
        println!(
            "| {} | {}{finished} | {} | {:.1} s | {} | {} | {} | {} |",
            if row.leases { "on" } else { "off" },
            row.scenario.name(),
            row.sum(|r| r.compiles),
            row.slowest() as f64 / 1000.0,
            walls.join(", "),
            row.sum(|r| r.remote_hits),
            row.sum(|r| r.lease_waits),
            row.sum(|r| r.wrong),
        );
    }
    println!();
}

/// Prints each target met or missed; fails on a wrong result or a missed
/// target.
fn check_targets(rows: &[Row]) -> Result<()> {
    let find = |scenario, leases| {
        rows.iter()
            .find(|r| r.scenario == scenario && r.leases == leases)
    };
    let mut missed = Vec::new();
    let mut check = |met: bool, what: String| {
        println!("[{}] {what}", if met { "met" } else { "MISSED" });
        if !met {
            missed.push(what);
        }
    };
    for row in rows {
        let learner_wrong = row.learner.as_ref().map_or(0, |learner| learner.wrong);
        check(
            row.sum(|r| r.wrong) + learner_wrong == 0,
            format!(
                "no wrong result ({}, leases {})",
                row.scenario.name(),
                row.leases
            ),
        );
    }
    let (Some(at_once), Some(staggered)) = (
        find(Scenario::AtOnce, true),
        find(Scenario::OneAfterAnother, true),
    ) else {
        return finish_checks(missed);
    };
    let compiles = at_once.sum(|r| r.compiles);
    check(
        compiles == SIGNATURES,
        format!("at once: {compiles} compiles in all (target {SIGNATURES})"),
    );
    let lone = staggered.reports.first().map_or(0, |r| r.wall_ms);
    let slowest = at_once.slowest();
    check(
        slowest as f64 <= 1.5 * lone as f64,
        format!("at once: slowest worker {slowest} ms <= 1.5 x the lone first worker's {lone} ms"),
    );
    if let Some(wave) = find(Scenario::SecondWave, true) {
        let compiles = wave.sum(|r| r.compiles);
        check(
            compiles == 0,
            format!(
                "second wave: {compiles} compiles in all (target 0: the first worker's learned \
                 policy and dynamic variant reach it)"
            ),
        );
    }
    if let Some(killed) = find(Scenario::OwnerKilled, true) {
        let one_compile = lone / SIGNATURES.max(1);
        let bound = slowest + LEASE_TTL.as_millis() as u64 + one_compile;
        let worst = killed.slowest();
        check(
            worst <= bound,
            format!(
                "owner killed: slowest survivor {worst} ms <= at-once slowest {slowest} ms + lease \
                 {} ms + one compile {one_compile} ms",
                LEASE_TTL.as_millis()
            ),
        );
        let compiles = killed.sum(|r| r.compiles);
        check(
            compiles <= SIGNATURES + 1,
            format!(
                "owner killed: {compiles} compiles by the survivors (at most {SIGNATURES} + 1)"
            ),
        );
    }
    finish_checks(missed)
}

fn finish_checks(missed: Vec<String>) -> Result<()> {
    if missed.is_empty() {
        Ok(())
    } else {
        Err(anyhow!(
            "fleet: {} target(s) missed: {}",
            missed.len(),
            missed.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_names_its_process() {
        assert_eq!(owner_pid("host:4242:00ff00ff00ff00ff"), Some(4242));
        assert_eq!(owner_pid("garbage"), None);
    }
}
