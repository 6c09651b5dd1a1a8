//! `soak`: many threads calling the JIT at once for a while, with every
//! tier on and bad calls mixed in; prints what happened and fails when
//! anything went wrong.
//!
//! One runtime in [`CompileMode::Background`] (two compile threads) with a
//! disk cache in a temporary folder and a remote cache on a `redis-server`
//! of its own; 8 threads (`--threads`) each call, until the time is up, one
//! of 40 good signatures of the reference functions (sigmoid, softmax with
//! a captured temperature, mlp_layer) picked at random, or, one call in 16,
//! a bad call. Every result is compared with the interpreter's; every bad
//! call must be an error. Every call runs under `catch_unwind`.
//!
//! It prints calls (and how many ran compiled), wrong results, panics,
//! RSS and open-descriptor samples (first and second half), and the
//! caches' counters; it exits non-zero on a wrong result, a panic, or more
//! descriptors open in the second half than in the first.
//!
//! Run it with `cargo xtask soak SECONDS` (which installs `redis-server`
//! when missing); `cargo xtask test` runs it for 30 s.

mod calls;
mod server;

use anyhow::Context as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sheaf_integration::settings::{
    CompileMode, DiskCacheFolder, RemoteCacheUrl, RemoteSecret, Secret,
};
use sheaf_integration::{JitConfig, JitRuntime};

use calls::{Call, Functions, Outcome};
use server::RedisServer;

/// Messages of wrong results printed, at most.
const SHOWN_FAILURES: u64 = 10;

/// How often the sampler reads RSS and descriptors.
const SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// Descriptors the second half may hold over the first half's most: a
/// connection or file that happened to be open at a sample.
const DESCRIPTOR_SLACK: usize = 8;

struct Args {
    seconds: u64,
    threads: usize,
}

/// `soak`'s usage line.
const USAGE: &str = "usage: soak [--seconds N] [--threads N]";

impl Args {
    fn parse() -> Result<Args, lexopt::Error> {
        use lexopt::Arg::Long;
        use lexopt::ValueExt as _;
        let mut args = Args {
            seconds: 30,
            threads: 8,
        };
        let mut parser = lexopt::Parser::from_env();
        while let Some(arg) = parser.next()? {
            match arg {
                Long("seconds") => args.seconds = parser.value()?.parse()?,
                Long("threads") => args.threads = parser.value()?.parse()?,
                _ => return Err(arg.unexpected()),
            }
        }
        if args.seconds == 0 || args.threads == 0 {
            return Err("--seconds and --threads must be at least 1".into());
        }
        Ok(args)
    }
}

/// What the workers counted.
#[derive(Default)]
struct Tally {
    calls: AtomicU64,
    compiled: AtomicU64,
    refused: AtomicU64,
    bad_calls: AtomicU64,
    wrong: AtomicU64,
    panics: AtomicU64,
}

/// One reading of the process.
#[derive(Clone, Copy)]
struct Sample {
    at: Duration,
    rss: u64,
    descriptors: usize,
}

fn main() -> ExitCode {
    let args = match Args::parse() {
        Ok(args) => args,
        Err(error) => {
            eprintln!("soak: {error}; {USAGE}");
            return ExitCode::FAILURE;
        }
    };
    match soak(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("soak: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the soak; `Ok(false)` when something went wrong.
fn soak(args: &Args) -> anyhow::Result<bool> {
    let dir = tempfile::tempdir().context("no temporary folder")?;
    let server = RedisServer::start(dir.path())?;
    let config = JitConfig::builder()
        .compile(|compile| compile.mode = CompileMode::Background)
        .cache(|cache| cache.compile_threads = 2)
        .disk(|disk| disk.folder = DiskCacheFolder::Dir(dir.path().join("cache")))
        .remote(|remote| {
            remote.url = Some(RemoteCacheUrl::new(server.url()));
            let secret = Secret::from_bytes(*b"sheaf-jit soak: a test secret!!!");
            remote.secret = Some(RemoteSecret::Key(secret));
        })
        .build()?;
    let jit = JitRuntime::new(config)?;
    let (functions, good, bad) = (Functions::new(), calls::good_calls(), calls::bad_calls());
    println!(
        "soak: {} s, {} threads, {} signatures and {} kinds of bad call; background compiles, \
         disk cache, remote cache at {}",
        args.seconds,
        args.threads,
        good.len(),
        bad.len(),
        server.url()
    );
    let tally = Tally::default();
    let samples = Mutex::new(Vec::new());
    let start = Instant::now();
    let deadline = start + Duration::from_secs(args.seconds);
    std::thread::scope(|scope| {
        for worker in 0..args.threads {
            let (jit, functions, tally) = (&jit, &functions, &tally);
            let (good, bad) = (&good, &bad);
            scope.spawn(move || work(worker, deadline, jit, functions, (good, bad), tally));
        }
        scope.spawn(|| sample(start, deadline, &samples));
    });
    let samples = samples.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(report(&jit, &tally, &samples))
}

/// One worker: calls until `deadline`.
fn work(
    worker: usize,
    deadline: Instant,
    jit: &JitRuntime,
    functions: &Functions,
    (good, bad): (&[Call], &[Call]),
    tally: &Tally,
) {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64 ^ (worker as u64 + 1).wrapping_mul(0x2545_f491);
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as usize
    };
    while Instant::now() < deadline {
        let r = random();
        let call = if r % 16 == 0 {
            tally.bad_calls.fetch_add(1, Ordering::Relaxed);
            &bad[(r / 16) % bad.len()]
        } else {
            &good[(r / 16) % good.len()]
        };
        tally.calls.fetch_add(1, Ordering::Relaxed);
        match catch_unwind(AssertUnwindSafe(|| call.run(jit, functions))) {
            Ok(Outcome::Right { compiled }) => {
                tally
                    .compiled
                    .fetch_add(u64::from(compiled), Ordering::Relaxed);
            }
            Ok(Outcome::Refused) => {
                tally.refused.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Outcome::Wrong(message)) => {
                if tally.wrong.fetch_add(1, Ordering::Relaxed) < SHOWN_FAILURES {
                    eprintln!("soak: WRONG: {message}");
                }
            }
            Err(_) => {
                if tally.panics.fetch_add(1, Ordering::Relaxed) < SHOWN_FAILURES {
                    eprintln!("soak: PANIC in a call of {}", call.what);
                }
            }
        }
    }
}

/// Reads RSS and descriptors every [`SAMPLE_EVERY`] until `deadline`.
fn sample(start: Instant, deadline: Instant, samples: &Mutex<Vec<Sample>>) {
    while Instant::now() < deadline {
        std::thread::sleep(SAMPLE_EVERY);
        let sample = Sample {
            at: start.elapsed(),
            rss: sheaf_demos::process_stats::rss_bytes(),
            descriptors: std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count),
        };
        samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(sample);
    }
}

/// Prints the figures; false when something went wrong.
fn report(jit: &JitRuntime, tally: &Tally, samples: &[Sample]) -> bool {
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    let (calls, wrong, panics) = (load(&tally.calls), load(&tally.wrong), load(&tally.panics));
    let good_calls = calls - load(&tally.bad_calls);
    println!(
        "calls {calls} ({:.1}% of good calls compiled), bad calls refused {} of {}, wrong {wrong}, \
         panics {panics}",
        100.0 * load(&tally.compiled) as f64 / good_calls.max(1) as f64,
        load(&tally.refused),
        load(&tally.bad_calls),
    );
    let stats = jit.stats().total;
    let disk = jit.disk_cache_stats();
    println!(
        "compiles {} ({} failed), lowering refusals {} (the bad calls'), generalizations {}, \
         evictions {}, live entries {}; disk: {} hits, {} misses; {}",
        stats.compiles,
        stats.failed_compiles,
        stats.refusals,
        stats.generalizations,
        stats.evictions,
        stats.live_entries,
        disk.hits,
        disk.misses,
        jit.remote_cache_stats()
            .map_or_else(|| "remote: off".to_owned(), |remote| remote.to_string()),
    );
    let (first, second) = samples.split_at(samples.len() / 2);
    let mib = |bytes: u64| bytes as f64 / 1048576.0;
    let half = |name: &str, half: &[Sample]| {
        let mut rss: Vec<u64> = half.iter().map(|s| s.rss).collect();
        rss.sort_unstable();
        let median = rss.get(rss.len() / 2).copied().unwrap_or(0);
        let descriptors = half.iter().map(|s| s.descriptors);
        println!(
            "{name} half: RSS median {:.1} MiB, max {:.1} MiB; descriptors {}..{}",
            mib(median),
            mib(rss.last().copied().unwrap_or(0)),
            descriptors.clone().min().unwrap_or(0),
            descriptors.max().unwrap_or(0),
        );
    };
    half("first", first);
    half("second", second);
    let shown: Vec<String> = samples
        .iter()
        .step_by(samples.len().div_ceil(12).max(1))
        .map(|s| {
            format!(
                "{:.0}s {:.0} MiB {} fds",
                s.at.as_secs_f64(),
                mib(s.rss),
                s.descriptors
            )
        })
        .collect();
    println!("samples: {}", shown.join(" | "));
    let most = |half: &[Sample]| half.iter().map(|s| s.descriptors).max().unwrap_or(0);
    let leaking = !first.is_empty() && most(second) > most(first) + DESCRIPTOR_SLACK;
    if leaking {
        println!("soak: FAILED: descriptors grew in the second half");
    }
    let ok = wrong == 0 && panics == 0 && !leaking && good_calls > 0;
    println!("soak: {}", if ok { "passed" } else { "FAILED" });
    ok
}
