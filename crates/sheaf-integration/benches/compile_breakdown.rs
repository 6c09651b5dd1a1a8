//! Benchmark (not a test): where a compile's time goes, and what each
//! compiler knob saves, for the functions the JIT compiles most.
//!
//! ```sh
//! cargo bench -p sheaf-integration --bench compile_breakdown
//! ```
//!
//! Three tables, for sigmoid `f32[1,5]`, softmax `f32[128,1024]`,
//! `mlp_layer` `f32[128,256]×[256,256]` and an `f32[512,512]` matmul:
//!
//! 1. the compiler's own phase timing (`iree-compile --mlir-timing`, the
//!    runtime's current flags), the six longest passes and pipelines;
//! 2. one compile as a subprocess (the default) and in-process, median of
//!    [`ROUNDS`];
//! 3. each knob (a set of extra flags, the first row the runtime's flags
//!    before this bench chose them) through the whole JIT path, the time
//!    from a call's miss to its compiled result (lowering, compile, load)
//!    and the compiled code's per-call time, both medians; the knobs are
//!    measured in turns (round robin) so that the machine's load falls on
//!    all alike.
//!
//! `-- --tiling` prints instead the compile and per-call times of square
//! matmuls from 128³ to 512³ without data tiling, with it and IREE's
//! microkernels, and with it and generated code (`CONTRACTION_FLAGS`), the
//! measurement behind `LARGE_CONTRACTION` and `CONTRACTION_FLAGS`.

use std::process::Command;
use std::time::{Duration, Instant};

use iree_safe::compiler::{choose_compiler, CompileOptions, CompilerPreference};
use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    lowering::Signature,
    reference,
    settings::{CompileMode, DiskCacheFolder, FloatSemantics},
    tuning::{CONTRACTION_FLAGS, CPU_FLAGS},
    Dispatched, JitConfig, JitFunction, JitRuntime, Value,
};

const ROUNDS: usize = 5;

fn array(shape: &[usize]) -> ArrayD<f32> {
    let len = shape.iter().product::<usize>();
    let values = (0..len).map(|i| (i % 13) as f32 / 13.0 - 0.5).collect();
    ArrayD::from_shape_vec(IxDyn(shape), values).expect("the length matches the shape")
}

struct Workload {
    name: &'static str,
    function: JitFunction,
    args: Vec<ArrayD<f32>>,
    captured: Vec<sheaf_integration::CapturedScalar>,
    /// Whether the runtime adds `CONTRACTION_FLAGS` (a contraction of at
    /// least `LARGE_CONTRACTION` multiply-adds).
    tiled: bool,
}

fn workloads() -> Vec<Workload> {
    vec![
        Workload {
            name: "sigmoid f32[1,5]",
            function: reference::sigmoid(),
            args: vec![array(&[1, 5])],
            captured: vec![],
            tiled: false,
        },
        Workload {
            name: "softmax f32[128,1024]",
            function: reference::softmax(),
            args: vec![array(&[128, 1024])],
            captured: vec![reference::temperature(0.5)],
            tiled: false,
        },
        Workload {
            name: "mlp_layer f32[128,256]",
            function: reference::mlp_layer(),
            args: vec![array(&[128, 256]), array(&[256, 256]), array(&[256])],
            captured: vec![],
            tiled: false,
        },
        Workload {
            name: "matmul f32[512,512]",
            function: reference::matmul(),
            args: vec![array(&[512, 512]), array(&[512, 512])],
            captured: vec![],
            tiled: true,
        },
    ]
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(duration: Duration) -> String {
    format!("{:.0} ms", duration.as_secs_f64() * 1e3)
}

/// The module the JIT compiles for `workload`.
fn module_text(workload: &Workload) -> String {
    let mut builder = Signature::builder();
    for arg in &workload.args {
        let dims: Vec<i64> = arg.shape().iter().map(|&d| d as i64).collect();
        builder.arg(sheaf_integration::DType::F32, &dims);
    }
    for scalar in &workload.captured {
        builder.captured(scalar.clone());
    }
    workload
        .function
        .module_text(&builder.build())
        .expect("lowers")
}

/// The runtime's compile options for `workload` on the host CPU (strict
/// float semantics, the default).
fn current_options(workload: &Workload) -> CompileOptions {
    let mut options = JitConfig::default().compile.options;
    let mut flags: Vec<&str> = CPU_FLAGS.to_vec();
    flags.extend(FloatSemantics::Strict.cpu_flags());
    if workload.tiled {
        flags.extend(CONTRACTION_FLAGS);
    }
    let mut flags: Vec<String> = flags.into_iter().map(str::to_owned).collect();
    flags.append(&mut options.extra_flags);
    options.extra_flags = flags;
    options
}

/// The `top` longest entries of `iree-compile --mlir-timing`'s list.
fn phases(module: &str, options: &CompileOptions, top: usize) -> Vec<(String, f64)> {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let input = dir.path().join("input.mlir");
    std::fs::write(&input, module).expect("writes");
    let iree_compile = iree_safe::compiler::locate_iree_compile().expect("iree-compile");
    let output = Command::new(iree_compile)
        .arg(&input)
        .args(options.flags())
        .args([
            "--mlir-timing",
            "--mlir-timing-display=list",
            "-o",
            "/dev/null",
        ])
        .output()
        .expect("iree-compile runs");
    let report = String::from_utf8_lossy(&output.stderr);
    let mut lines: Vec<(String, f64)> = report
        .lines()
        .filter_map(|line| {
            // "  0.1000 ( 28.2%)    0.1000 ( 31.6%)  SerializeTargetExecutablesPass"
            let (_, wall) = line.split_once(")")?;
            let wall = wall.trim_start();
            let (seconds, rest) = wall.split_once(' ')?;
            let name = rest.split_once(')')?.1.trim();
            let seconds: f64 = seconds.parse().ok()?;
            let listed = !["", "root", "Total"].contains(&name);
            listed.then(|| (name.to_owned(), seconds))
        })
        .collect();
    let total: f64 = report
        .lines()
        .find_map(|l| l.trim().strip_prefix("Total Execution Time: "))
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN);
    lines.sort_by(|a, b| b.1.total_cmp(&a.1));
    lines.truncate(top);
    lines.insert(0, ("total".to_owned(), total));
    lines
}

/// A runtime whose compiles get `knob` after the runtime's own flags.
fn runtime(knob: &[&str]) -> JitRuntime {
    let knob: Vec<String> = knob.iter().map(|f| (*f).to_owned()).collect();
    let config = JitConfig::builder()
        .device(|device| device.driver = "local-sync".into())
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .compile(move |compile| {
            compile.mode = CompileMode::Blocking;
            compile.options.extra_flags.extend(knob);
        })
        .build()
        .expect("a valid configuration");
    JitRuntime::new(config).expect("a runtime")
}

/// The time from the miss to the compiled result, and the median of 20
/// calls after it.
fn first_and_cached(jit: &JitRuntime, workload: &Workload) -> (Duration, Duration) {
    let args: Vec<Value> = workload.args.iter().cloned().map(Value::from).collect();
    let call = || {
        let start = Instant::now();
        match jit.dispatch(&workload.function, &args, &workload.captured) {
            Ok(Dispatched::Compiled(compiled)) => std::hint::black_box(compiled),
            Ok(Dispatched::Interpret(why)) => panic!("{}: {why}", workload.name),
            Err(error) => panic!("{}: {error}", workload.name),
        };
        start.elapsed()
    };
    let first = call();
    let cached = median((0..20).map(|_| call()).collect());
    (first, cached)
}

/// The knobs: extra flags after the runtime's own (so they win). The first
/// row is the runtime before `CPU_FLAGS` dropped const-eval and
/// `CONTRACTION_FLAGS` were kept to large contractions.
const KNOBS: &[(&str, &[&str])] = &[
    (
        "before: const-eval, tiling + ukernels everywhere",
        &[
            "--iree-opt-const-eval=true",
            "--iree-llvmcpu-enable-ukernels=all",
            "--iree-opt-data-tiling",
        ],
    ),
    ("now: the runtime's flags", &[]),
    (
        "now + no debug symbols",
        &["--iree-llvmcpu-debug-symbols=false"],
    ),
    ("now + O0", &["--iree-opt-level=O0"]),
    (
        "now + tiling + ukernels everywhere",
        &[
            "--iree-llvmcpu-enable-ukernels=all",
            "--iree-opt-data-tiling",
        ],
    ),
    (
        "now + no tiling or ukernels anywhere",
        &[
            "--iree-llvmcpu-enable-ukernels=none",
            "--iree-opt-data-tiling=false",
        ],
    ),
];

/// Matmuls `n×n×n`: the compile and per-call times without data tiling,
/// with it and microkernels, and with it and generated code (the rows
/// behind `LARGE_CONTRACTION` and `CONTRACTION_FLAGS`).
fn tiling_by_size() {
    println!("\n## Data tiling by matmul size (compile / per call), median of {ROUNDS}\n");
    println!("| n×n×n | multiply-adds | without | tiling + ukernels | tiling, no ukernels |");
    println!("|---|---|---|---|---|");
    let without: &[&str] = &[
        "--iree-llvmcpu-enable-ukernels=none",
        "--iree-opt-data-tiling=false",
    ];
    let with: &[&str] = &[
        "--iree-llvmcpu-enable-ukernels=all",
        "--iree-opt-data-tiling",
    ];
    let generated: &[&str] = &[
        "--iree-llvmcpu-enable-ukernels=none",
        "--iree-opt-data-tiling",
    ];
    for n in [128, 192, 256, 320, 384, 512] {
        let workload = Workload {
            name: "matmul",
            function: reference::matmul(),
            args: vec![array(&[n, n]), array(&[n, n])],
            captured: vec![],
            tiled: false,
        };
        // samples[flags] = (firsts, calls), the flag sets measured in turns.
        let flag_sets = [without, with, generated];
        let mut samples = vec![(Vec::new(), Vec::new()); flag_sets.len()];
        for _ in 0..ROUNDS {
            for (flags, (firsts, calls)) in flag_sets.iter().zip(samples.iter_mut()) {
                let (first, cached) = first_and_cached(&runtime(flags), &workload);
                firsts.push(first);
                calls.push(cached);
            }
        }
        let cells: Vec<String> = samples
            .into_iter()
            .map(|(firsts, calls)| {
                format!(
                    "{} / {:.0} µs",
                    ms(median(firsts)),
                    median(calls).as_secs_f64() * 1e6
                )
            })
            .collect();
        println!(
            "| {n} | {:.1} M | {} | {} | {} |",
            (n * n * n) as f64 / 1e6,
            cells[0],
            cells[1],
            cells[2]
        );
    }
}

fn main() {
    if std::env::args().any(|arg| arg == "--tiling") {
        tiling_by_size();
        return;
    }
    let workloads = workloads();

    println!("## Phases (iree-compile --mlir-timing, the current flags)\n");
    for workload in &workloads {
        println!("{}:", workload.name);
        for (name, seconds) in phases(&module_text(workload), &current_options(workload), 6) {
            println!("  {:>7.1} ms  {name}", seconds * 1e3);
        }
    }

    println!("\n## One compile, in-process vs subprocess (median of {ROUNDS})\n");
    println!("| function | in-process | subprocess |");
    println!("|---|---|---|");
    let in_process = choose_compiler(CompilerPreference::InProcess)
        .expect("the compiler library")
        .compiler;
    let subprocess = choose_compiler(CompilerPreference::Subprocess)
        .expect("iree-compile")
        .compiler;
    for workload in &workloads {
        let module = module_text(workload);
        let options = current_options(workload);
        let time = |compiler: &dyn iree_safe::compiler::Compiler| {
            median(
                (0..ROUNDS)
                    .map(|_| {
                        let start = Instant::now();
                        compiler.compile(&module, &options).expect("compiles");
                        start.elapsed()
                    })
                    .collect(),
            )
        };
        let (inside, outside) = (time(&*in_process), time(&*subprocess));
        println!("| {} | {} | {} |", workload.name, ms(inside), ms(outside));
    }

    println!(
        "\n## Knobs, through the JIT (miss → compiled result; then per call), median of {ROUNDS}\n"
    );
    // samples[knob][workload] = (first, cached) per round.
    let mut samples = vec![vec![(Vec::new(), Vec::new()); workloads.len()]; KNOBS.len()];
    for _ in 0..ROUNDS {
        for (k, (_, flags)) in KNOBS.iter().enumerate() {
            let jit = runtime(flags);
            for (w, workload) in workloads.iter().enumerate() {
                let (first, cached) = first_and_cached(&jit, workload);
                samples[k][w].0.push(first);
                samples[k][w].1.push(cached);
            }
        }
    }
    print!("| knob |");
    for workload in &workloads {
        print!(" {} |", workload.name);
    }
    println!();
    println!("|---|{}", "---|".repeat(workloads.len()));
    for ((label, _), per_workload) in KNOBS.iter().zip(samples) {
        print!("| {label} |");
        for (first, cached) in per_workload {
            let cached = median(cached);
            print!(
                " {} / {:.1} µs |",
                ms(median(first)),
                cached.as_secs_f64() * 1e6
            );
        }
        println!();
    }
}
