//! Compile latency of a tiny module (sigmoid over f32[4], StableHLO): the
//! in-process compiler against `iree-compile` run per compilation (median
//! of 15 each, interleaved so both see the same machine load). The disk
//! cache's hit time is measured by `jit-cache`'s `store` bench.
//!
//! `cargo bench -p iree-safe --bench compile_latency`

use std::path::PathBuf;
use std::time::{Duration, Instant};

use iree_safe::compiler::{CompileOptions, Compiler, InProcessCompiler, SubprocessCompiler};

const RUNS: usize = 15;
const MLIR: &str = include_str!("../tests/data/compiler/sigmoid.mlir");

fn main() {
    let options = CompileOptions::stablehlo();
    let started = Instant::now();
    let in_process =
        InProcessCompiler::load().expect("libIREECompiler.so (cargo xtask build-iree)");
    let load = started.elapsed();
    let subprocess = SubprocessCompiler::locate().expect("iree-compile (cargo xtask build-iree)");
    let launcher = pip_launcher().filter(|path| path != subprocess.path());
    let launcher = launcher.map(|path| SubprocessCompiler::new(path).expect("the pip launcher"));

    // One untimed compilation each: page cache, lazy initialization.
    let first_in_process = time(|| in_process.compile(MLIR, &options));
    time(|| subprocess.compile(MLIR, &options));

    let (mut inproc, mut subproc, mut launched) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        inproc.push(time(|| in_process.compile(MLIR, &options)));
        subproc.push(time(|| subprocess.compile(MLIR, &options)));
        if let Some(launcher) = &launcher {
            launched.push(time(|| launcher.compile(MLIR, &options)));
        }
    }
    let (inproc, subproc) = (median(&mut inproc), median(&mut subproc));

    println!("compile latency, tiny sigmoid module (f32[4], StableHLO), median of {RUNS}:");
    println!(
        "  in-process  {:>8.1} ms   (library loaded and initialized once in {:.1} ms, first \
         compile {:.1} ms)",
        ms(inproc),
        ms(load),
        ms(first_in_process)
    );
    println!(
        "  subprocess  {:>8.1} ms   ({})",
        ms(subproc),
        subprocess.path().display()
    );
    println!(
        "  ratio subprocess / in-process: {:.2}x",
        ratio(subproc, inproc)
    );
    if let Some(launcher) = &launcher {
        let launched = median(&mut launched);
        println!(
            "  subprocess through pip's Python launcher {:.1} ms ({}): {:.2}x in-process",
            ms(launched),
            launcher.path().display(),
            ratio(launched, inproc)
        );
    }
}

/// The install's `iree-compile`: pip's Python launcher of the tool.
fn pip_launcher() -> Option<PathBuf> {
    iree_sys::build_info::IREE_COMPILE.map(PathBuf::from)
}

fn time<T, E: std::fmt::Display>(f: impl FnOnce() -> Result<T, E>) -> Duration {
    let started = Instant::now();
    let result = f();
    let elapsed = started.elapsed();
    if let Err(error) = result {
        panic!("{error}");
    }
    elapsed
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}
