//! Benchmark (not a test): the in-process compiler against `iree-compile`
//! run per compile, on a compile-heavy workload like a test suite's:
//! `sigmoid`, `softmax` and `mlp_layer` at 6 shapes each, every shape
//! called 3 times, with blocking compiles, no disk cache and no dynamic
//! dims (so every shape compiles). Each mode runs in a child process of its
//! own, so that its memory figures are its own; the table shows the wall
//! time of the workload, the time to its first result (the process's first
//! compile: the compiler's load or its `--version`, and the compile), the
//! child's peak and final RSS (`VmHWM` and
//! `VmRSS` of `/proc/self/status`; the final one split into anonymous
//! memory and file-backed pages, `RssAnon` and `RssFile`) and its compiles.
//!
//! ```sh
//! cargo bench -p sheaf-integration --bench compiler_choice
//! ```
//!
//! The RSS is the process's own: the subprocess compiler's memory lives in
//! its short-lived `iree-compile` children, and in both modes IREE links
//! each CPU executable in an `iree-lld` child.

use std::time::Instant;

use iree_safe::compiler::CompilerPreference;
use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    reference,
    settings::{CompileMode, DiskCacheFolder},
    Dispatched, JitConfig, JitRuntime, Value,
};

/// The modes, as the child's argument and the table's first column.
const MODES: [&str; 2] = ["in-process", "subprocess"];
/// Calls of each shape.
const CALLS_PER_SHAPE: usize = 3;
/// The shapes of `sigmoid` and `softmax`.
const SHAPES: [&[usize]; 6] = [&[16], &[1, 5], &[2, 5], &[4, 8], &[8, 32], &[3, 3, 3]];
/// `(N, K, M)` of `mlp_layer`: `x: f32[N,K]`, `W: f32[K,M]`, `b: f32[M]`.
const MLP_SHAPES: [(usize, usize, usize); 6] = [
    (1, 3, 4),
    (2, 3, 4),
    (5, 2, 3),
    (3, 7, 1),
    (4, 4, 4),
    (8, 16, 8),
];

/// A tensor of `shape` with values in [-2, 2), different for each `seed`.
fn array(shape: &[usize], seed: usize) -> Value {
    let mut i = seed;
    Value::host(ArrayD::from_shape_fn(IxDyn(shape), |_| {
        i += 7;
        (i % 16) as f32 / 4.0 - 2.0
    }))
}

/// The child: runs the workload with `mode`'s compiler and prints one line
/// of `key=value` figures for the parent.
fn child(mode: &str) {
    let compiler = match mode {
        "in-process" => CompilerPreference::InProcess,
        "subprocess" => CompilerPreference::Subprocess,
        _ => panic!("unknown mode `{mode}`"),
    };
    let jit = JitRuntime::new(
        JitConfig::builder()
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
            .compile(|compile| {
                compile.mode = CompileMode::Blocking;
                compile.compiler = compiler;
            })
            .cache(|cache| cache.dynamic_dims = false)
            .build()
            .unwrap(),
    )
    .unwrap();
    let (sigmoid, softmax, mlp) = (
        reference::sigmoid(),
        reference::softmax(),
        reference::mlp_layer(),
    );
    let temperature = [reference::temperature(0.7)];
    let compiled = |dispatched: Dispatched| {
        assert!(
            matches!(dispatched, Dispatched::Compiled(_)),
            "a call was interpreted"
        );
    };
    let start = Instant::now();
    let mut first = None;
    for (i, (shape, (n, k, m))) in SHAPES.iter().zip(MLP_SHAPES).enumerate() {
        for call in 0..CALLS_PER_SHAPE {
            let seed = 10 * i + call;
            let x = [array(shape, seed)];
            compiled(jit.dispatch(&sigmoid, &x, &[]).unwrap());
            first.get_or_insert_with(|| start.elapsed());
            compiled(jit.dispatch(&softmax, &x, &temperature).unwrap());
            let args = [
                array(&[n, k], seed),
                array(&[k, m], seed + 1),
                array(&[m], seed + 2),
            ];
            compiled(jit.dispatch(&mlp, &args, &[]).unwrap());
        }
    }
    let wall = start.elapsed();
    let stats = jit.stats().total;
    println!(
        "wall_s={:.3} first_s={:.3} compiles={} compile_s={:.3} calls={} peak_kib={} final_kib={} anon_kib={} file_kib={}",
        wall.as_secs_f64(),
        first.unwrap_or_default().as_secs_f64(),
        stats.compiles,
        stats.compile_time.as_secs_f64(),
        stats.calls,
        test_support::proc_status::kib("VmHWM"),
        test_support::proc_status::kib("VmRSS"),
        test_support::proc_status::kib("RssAnon"),
        test_support::proc_status::kib("RssFile"),
    );
}

/// The value of `key` in the child's line.
fn field(line: &str, key: &str) -> f64 {
    line.split_whitespace()
        .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in `{line}`"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|arg| arg == "--child") {
        return child(&args[at + 1]);
    }
    println!(
        "compile-heavy workload: sigmoid, softmax, mlp_layer x {} shapes x {CALLS_PER_SHAPE} \
         calls, blocking compiles, no disk cache, no dynamic dims (local-sync); one child \
         process per mode",
        SHAPES.len()
    );
    println!(
        "| compiler | wall | first result | compiles | per compile | peak RSS (VmHWM) | final RSS (VmRSS) | of which anonymous / file-backed |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for mode in MODES {
        let output = test_support::child::this_executable()
            .args(["--child", mode])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "the {mode} child failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        let line = stdout.lines().last().unwrap_or_default();
        let compiles = field(line, "compiles");
        let mib = |key| field(line, key) / 1024.0;
        println!(
            "| {mode} | {:.2} s | {:.0} ms | {compiles} | {:.0} ms | {:.1} MiB | {:.1} MiB | {:.1} / {:.1} MiB |",
            field(line, "wall_s"),
            1000.0 * field(line, "first_s"),
            1000.0 * field(line, "compile_s") / compiles.max(1.0),
            mib("peak_kib"),
            mib("final_kib"),
            mib("anon_kib"),
            mib("file_kib"),
        );
    }
}
