//! Benchmark (not a test) behind `CPU_FLAGS` and `CONTRACTION_FLAGS`, the
//! cost of the strict float semantics (`FloatSemantics`), and the figures
//! for choosing the CPU device: the modules the JIT compiles
//! for sigmoid `f32[1,5]`, softmax `f32[128,1024]` (of `x / 2.0`),
//! `mlp_layer` `f32[128,256]×[256,256]`, `f32[n,n]` matmuls for n = 256,
//! 320, 384, 512 and 1024 and a batched matmul `f32[8,256,256]` (as many
//! multiply-adds as the 512² one; the reference lowerings' own MLIR), compiled with
//! the runtime's flags (`CPU_FLAGS` and the strict float semantics' flag,
//! plus `CONTRACTION_FLAGS` or, for the f32 matmuls of the CPU family's
//! `MatmulSpecReach` on AVX-512, `AVX512_MATMUL_SPEC`, as
//! `LARGE_CONTRACTION` decides) and with each
//! candidate flag added (`FloatSemantics::Reassociate`'s first), then
//! called on device-resident inputs on `local-sync` (single-threaded, the
//! default CPU device), on `local-task` with IREE's default workers (one
//! per physical core, pinned) and with at most 1 and 2 of them
//! (`Device::open_local_task`), and on a `local-task` device with at most
//! 2 workers beside `local-sync`, given `local-sync`'s tensors (as the JIT
//! runs large contractions: `DeviceSettings::parallel_workers`, the
//! last column against the first gives `PARALLEL_CONTRACTION`).
//!
//! Everything is measured in turns (round robin): the compiles of every
//! candidate, then one batch of calls per (device, candidate) per round,
//! each round starting at another candidate, so that the machine's load
//! falls on all alike. For a matmul without the AVX-512 spec, `+ data
//! tiling everywhere` adds nothing to the runtime's own flags: how far it
//! lands from the first row is the noise of the run. With the spec, the
//! candidates are added to data tiling (as the runtime does with a caller's
//! flags), so that row is the data-tiled code the spec replaced. Prints,
//! per function, a
//! table of the compile time (median of [`COMPILE_ROUNDS`]) and the p50 µs
//! per call on each device; a cell marked `≠` computed a result that
//! differs from the runtime's flags on local-sync (relative error over
//! 1e-4), `fails` did not compile.
//!
//! ```sh
//! cargo bench -p sheaf-integration --bench cpu_flags
//! cargo bench -p sheaf-integration --bench cpu_flags -- matmul softmax
//! cargo bench -p sheaf-integration --bench cpu_flags -- --now
//! cargo bench -p sheaf-integration --bench cpu_flags -- --float sigmoid softmax mlp_layer
//! ```
//!
//! Arguments keep only the functions whose name contains one of them;
//! `--now` measures the runtime's own flags only (the first row), `--float`
//! the runtime's flags and `FloatSemantics::Reassociate` (the first two:
//! what the strict default costs, about 15 s for the three small
//! functions). On an x86-64 machine with FMA it first measures one core's
//! f32 FMA peak (AVX-512, else AVX2) and prints, for each function with a
//! contraction, the time its multiply-adds take at that peak: the floor no
//! code on one core can beat, and the measure of each cell's fraction of
//! peak.

use std::io::Write;
use std::num::NonZeroUsize;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use iree_safe::compiler::{choose_compiler, Artifact, CompileOptions, CompilerPreference};
use iree_safe::{Device, Function, Runtime, Tensor, VmValue};
use sheaf_integration::{
    lowering::Signature,
    reference,
    settings::FloatSemantics,
    tuning::{
        matmul_spec_reach, AVX512_MATMUL_SPEC, CONTRACTION_FLAGS, CPU_FLAGS, LARGE_CONTRACTION,
    },
    CapturedScalar, DType, JitConfig, JitFunction,
};

const COMPILE_ROUNDS: usize = 3;
const ROUNDS: usize = 20;

/// Candidate flags, each added after the runtime's own (so they win).
const CANDIDATES: &[(&str, &[&str])] = &[
    (
        "now (CPU_FLAGS, strict, CONTRACTION_FLAGS or the AVX-512 matmul spec ≥ 2²⁵)",
        &[],
    ),
    (
        "+ FloatSemantics::Reassociate",
        FloatSemantics::Reassociate.cpu_flags(),
    ),
    (
        "before: microkernels with data tiling",
        &["--iree-llvmcpu-enable-ukernels=all"],
    ),
    ("+ --iree-opt-level=O3", &["--iree-opt-level=O3"]),
    (
        "+ target-cpu-features=host",
        &["--iree-llvmcpu-target-cpu-features=host"],
    ),
    (
        "+ vector width 32 B",
        &["--iree-llvmcpu-target-vector-width-in-bytes=32"],
    ),
    (
        "+ use-fast-min-max-ops",
        &["--iree-llvmcpu-use-fast-min-max-ops=true"],
    ),
    (
        "+ aggressive fusion",
        &["--iree-dispatch-creation-enable-aggressive-fusion=true"],
    ),
    (
        "+ aggressively-propagate-transposes",
        &["--iree-opt-aggressively-propagate-transposes=true"],
    ),
    ("+ data tiling everywhere", CONTRACTION_FLAGS),
    (
        "+ matmul tile 16 KiB",
        &["--iree-llvmcpu-matmul-tile-bytes=16384"],
    ),
    (
        "+ matmul tile 256 KiB",
        &["--iree-llvmcpu-matmul-tile-bytes=262144"],
    ),
    (
        "+ matmul tile 1 MiB",
        &["--iree-llvmcpu-matmul-tile-bytes=1048576"],
    ),
    ("+ threads 2", &["--iree-llvmcpu-number-of-threads=2"]),
    (
        "+ distribution 16",
        &["--iree-llvmcpu-distribution-size=16"],
    ),
    (
        "+ distribution 64",
        &["--iree-llvmcpu-distribution-size=64"],
    ),
    (
        "+ ukernels mmt4d",
        &["--iree-llvmcpu-enable-ukernels=mmt4d"],
    ),
    ("+ no data tiling", &["--iree-opt-data-tiling=false"]),
    (
        "+ inner-tiled matmuls",
        &["--iree-llvmcpu-enable-inner-tiled"],
    ),
    (
        "+ LLVM loop unrolling",
        &["--iree-llvmcpu-loop-unrolling=true"],
    ),
    (
        "+ no thread distribution",
        &["--iree-llvmcpu-disable-distribution"],
    ),
    (
        "+ tiling from dispatch creation",
        &[
            "--iree-opt-data-tiling=false",
            "--iree-dispatch-creation-data-tiling",
        ],
    ),
];

struct Workload {
    name: String,
    function: JitFunction,
    shapes: Vec<Vec<usize>>,
    captured: Vec<CapturedScalar>,
    /// The multiply-adds of its largest contraction (0 for none).
    multiply_adds: u64,
    /// Those of its largest matrix product (a batch is one per batch
    /// entry), which decide data tiling as in the runtime.
    largest_product: u64,
    /// The longest row (`N`) of its f32 products, when every contraction
    /// is one of a form `AVX512_MATMUL_SPEC` tiles (plain, or batched over
    /// one dim), which with `batched` decides the spec as in the runtime.
    f32_row: Option<u64>,
    /// Whether its product is batched.
    batched: bool,
    /// Calls per (device, candidate) per round.
    calls: usize,
}

impl Workload {
    /// Whether the runtime gives it `AVX512_MATMUL_SPEC` on this host
    /// (`matmul_spec_reach`, from `LARGE_CONTRACTION` multiply-adds).
    fn blocked(&self) -> bool {
        self.multiply_adds >= LARGE_CONTRACTION
            && self
                .f32_row
                .zip(matmul_spec_reach())
                .is_some_and(|(row, reach)| reach.reaches(row, self.batched))
    }

    /// Whether the runtime adds `CONTRACTION_FLAGS` (`LARGE_CONTRACTION`)
    /// when the spec does not apply.
    fn tiled(&self) -> bool {
        self.largest_product >= LARGE_CONTRACTION
    }
}

fn workloads() -> Vec<Workload> {
    vec![
        Workload {
            name: "sigmoid f32[1,5]".to_owned(),
            function: reference::sigmoid(),
            shapes: vec![vec![1, 5]],
            captured: vec![],
            multiply_adds: 0,
            largest_product: 0,
            f32_row: None,
            batched: false,
            calls: 200,
        },
        Workload {
            name: "softmax f32[128,1024]".to_owned(),
            function: reference::softmax(),
            shapes: vec![vec![128, 1024]],
            captured: vec![reference::temperature(2.0)],
            multiply_adds: 0,
            largest_product: 0,
            f32_row: None,
            batched: false,
            calls: 20,
        },
        mlp_layer(32, 40),
        mlp_layer(64, 30),
        mlp_layer(128, 20),
        matmul(256, 20),
        matmul(320, 10),
        matmul(384, 6),
        matmul(512, 3),
        matmul(1024, 1),
        Workload {
            name: "batched matmul f32[8,256,256]".to_owned(),
            function: reference::matmul(),
            shapes: vec![vec![8, 256, 256]; 2],
            captured: vec![],
            multiply_adds: 8 * 256u64.pow(3),
            largest_product: 256u64.pow(3),
            f32_row: Some(256),
            batched: true,
            calls: 3,
        },
    ]
}

/// `mlp_layer` on a batch of `rows` rows of 256 (`W: f32[256,256]`),
/// called `calls` times per round.
fn mlp_layer(rows: usize, calls: usize) -> Workload {
    Workload {
        name: format!("mlp_layer f32[{rows},256]"),
        function: reference::mlp_layer(),
        shapes: vec![vec![rows, 256], vec![256, 256], vec![256]],
        captured: vec![],
        multiply_adds: (rows * 256 * 256) as u64,
        largest_product: (rows * 256 * 256) as u64,
        f32_row: Some(256),
        batched: false,
        calls,
    }
}

/// An `f32[n,n]` matmul, called `calls` times per round.
fn matmul(n: usize, calls: usize) -> Workload {
    Workload {
        name: format!("matmul f32[{n},{n}]"),
        function: reference::matmul(),
        shapes: vec![vec![n, n]; 2],
        captured: vec![],
        multiply_adds: (n as u64).pow(3),
        largest_product: (n as u64).pow(3),
        f32_row: Some(n as u64),
        batched: false,
        calls,
    }
}

/// The module the JIT compiles for `workload`.
fn module_text(workload: &Workload) -> String {
    let mut builder = Signature::builder();
    for shape in &workload.shapes {
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        builder.arg(DType::F32, &dims);
    }
    for scalar in &workload.captured {
        builder.captured(scalar.clone());
    }
    workload
        .function
        .module_text(&builder.build())
        .expect("lowers")
}

/// The runtime's options for `workload` on the host CPU (strict float
/// semantics, the default), then `extra`.
fn options(workload: &Workload, extra: &[&str]) -> CompileOptions {
    let mut options = JitConfig::default().compile.options;
    let mut flags: Vec<&str> = CPU_FLAGS.to_vec();
    flags.extend(FloatSemantics::Strict.cpu_flags());
    // As the runtime: flags of the caller's own keep data tiling (a float
    // semantics is the runtime's, not the caller's).
    let callers = !extra.is_empty() && extra != FloatSemantics::Reassociate.cpu_flags();
    match matmul_spec_flag() {
        Some(spec) if workload.blocked() && !callers => {
            flags.extend(["--iree-opt-data-tiling=false", spec]);
        }
        _ if workload.tiled() => flags.extend(CONTRACTION_FLAGS),
        _ => {}
    }
    flags.extend(extra);
    let mut flags: Vec<String> = flags.into_iter().map(str::to_owned).collect();
    flags.append(&mut options.extra_flags);
    options.extra_flags = flags;
    options
}

/// On an x86-64 CPU with AVX-512, the flag that gives the compiler
/// `AVX512_MATMUL_SPEC`, from a file kept for the bench's run.
fn matmul_spec_flag() -> Option<&'static str> {
    static SPEC: OnceLock<Option<(tempfile::TempPath, String)>> = OnceLock::new();
    let spec = SPEC.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            let mut file = tempfile::NamedTempFile::new().expect("a temporary file");
            file.write_all(AVX512_MATMUL_SPEC.as_bytes())
                .expect("the spec written");
            let path = file.into_temp_path();
            let flag = format!("--iree-codegen-tuning-spec-path={}", path.display());
            return Some((path, flag));
        }
        None
    });
    spec.as_ref().map(|(_, flag)| flag.as_str())
}

fn input(shape: &[usize]) -> Vec<f32> {
    let len = shape.iter().product::<usize>();
    (0..len).map(|i| (i % 13) as f32 / 13.0 - 0.5).collect()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The largest difference from `reference`, relative to its largest value.
fn relative_error(result: &[f32], reference: &[f32]) -> f32 {
    let scale = reference
        .iter()
        .fold(f32::MIN_POSITIVE, |m, v| m.max(v.abs()));
    let diff = result
        .iter()
        .zip(reference)
        .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
    diff / scale
}

fn first_output(function: &Function, args: &[VmValue]) -> Vec<f32> {
    let outputs = function.call(args).expect("calls");
    outputs[0]
        .as_tensor()
        .expect("a tensor")
        .to_vec::<f32>()
        .expect("f32")
}

/// This core's f32 multiply-add peak, in multiply-adds (FMA lanes) per
/// second, and the instructions it was measured with: independent chains
/// of FMAs, enough to fill two pipes of their latency (16 chains of
/// AVX-512, or 12 of AVX2 where the CPU has no AVX-512F, whose 16
/// registers hold 12 chains and their operands), the best of 5 runs;
/// `None` without FMA.
#[cfg(target_arch = "x86_64")]
fn fma_peak() -> Option<(f64, &'static str)> {
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (checked above), all it needs.
        return Some((unsafe { fma_chains_avx512() }, "AVX-512 FMA"));
    }
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA (checked above), all it needs.
        return Some((unsafe { fma_chains_avx2() }, "AVX2 FMA"));
    }
    None
}

#[cfg(not(target_arch = "x86_64"))]
fn fma_peak() -> Option<(f64, &'static str)> {
    None
}

/// Iterations of each chain per run.
#[cfg(target_arch = "x86_64")]
const PEAK_STEPS: usize = 20_000_000;

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn fma_chains_avx512() -> f64 {
    use std::arch::x86_64::{_mm512_fmadd_ps, _mm512_set1_ps};
    let (b, c) = (_mm512_set1_ps(1.0 - 1e-7), _mm512_set1_ps(1e-7));
    let mut best = f64::MAX;
    for _ in 0..5 {
        let mut chains = [_mm512_set1_ps(1.0); 16];
        let start = Instant::now();
        for _ in 0..PEAK_STEPS {
            for chain in &mut chains {
                *chain = _mm512_fmadd_ps(*chain, b, c);
            }
        }
        best = best.min(start.elapsed().as_secs_f64());
        std::hint::black_box(&chains);
    }
    (PEAK_STEPS * 16 * 16) as f64 / best
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn fma_chains_avx2() -> f64 {
    use std::arch::x86_64::{_mm256_fmadd_ps, _mm256_set1_ps};
    let (b, c) = (_mm256_set1_ps(1.0 - 1e-7), _mm256_set1_ps(1e-7));
    let mut best = f64::MAX;
    for _ in 0..5 {
        let mut chains = [_mm256_set1_ps(1.0); 12];
        let start = Instant::now();
        for _ in 0..PEAK_STEPS {
            for chain in &mut chains {
                *chain = _mm256_fmadd_ps(*chain, b, c);
            }
        }
        best = best.min(start.elapsed().as_secs_f64());
        std::hint::black_box(&chains);
    }
    (PEAK_STEPS * 12 * 8) as f64 / best
}

fn main() {
    let peak = fma_peak().map(|(peak, how)| {
        println!(
            "one core's f32 peak ({how}): {:.2} G multiply-adds/s ({:.1} GFLOP/s)",
            peak / 1e9,
            peak * 2.0 / 1e9
        );
        peak
    });
    let compiler = choose_compiler(CompilerPreference::Auto)
        .expect("a compiler")
        .compiler;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let only: Vec<&String> = args.iter().filter(|arg| !arg.starts_with('-')).collect();
    let candidates = if args.iter().any(|arg| arg == "--now") {
        &CANDIDATES[..1]
    } else if args.iter().any(|arg| arg == "--float") {
        &CANDIDATES[..2]
    } else {
        CANDIDATES
    };
    let workloads: Vec<Workload> = workloads()
        .into_iter()
        .filter(|w| only.is_empty() || only.iter().any(|name| w.name.contains(name.as_str())))
        .collect();
    println!("CPU_FLAGS = {CPU_FLAGS:?}, CONTRACTION_FLAGS = {CONTRACTION_FLAGS:?}");

    // compiled[workload][candidate]: the artifact and its compile times.
    let modules: Vec<String> = workloads.iter().map(module_text).collect();
    let mut compiled: Vec<Vec<(Option<Artifact>, Vec<Duration>)>> = workloads
        .iter()
        .map(|_| candidates.iter().map(|_| (None, Vec::new())).collect())
        .collect();
    for round in 0..COMPILE_ROUNDS {
        for (w, workload) in workloads.iter().enumerate() {
            for (c, (label, extra)) in candidates.iter().enumerate() {
                let cell = &mut compiled[w][c];
                if round > 0 && cell.0.is_none() {
                    continue;
                }
                let start = Instant::now();
                match compiler.compile(&modules[w], &options(workload, extra)) {
                    Ok(artifact) => {
                        cell.1.push(start.elapsed());
                        cell.0 = Some(artifact);
                    }
                    Err(error) => {
                        let error = error.to_string();
                        let first = error.lines().next().unwrap_or_default();
                        eprintln!("{}, {label}: does not compile: {first}", workload.name);
                    }
                }
            }
        }
    }

    let two = NonZeroUsize::new(2).expect("2 > 0");
    let local_sync = Device::open("local-sync").expect("local-sync");
    // Each device's runtime, and the device its arguments live on: its
    // own, or local-sync's for the device beside it (as the JIT runs
    // large contractions, `DeviceSettings::parallel_workers`).
    let own = |name, device: Device| {
        let runtime = Runtime::with_device(device.clone()).expect("a runtime");
        (name, runtime, device)
    };
    let beside = local_sync.open_beside(two).expect("2 workers");
    let devices: Vec<(&str, Runtime, Device)> = vec![
        own("local-sync", local_sync.clone()),
        own(
            "local-task (default)",
            Device::open("local-task").expect("local-task"),
        ),
        own(
            "local-task ≤ 1 worker",
            Device::open_local_task(NonZeroUsize::MIN).expect("1 worker"),
        ),
        own(
            "local-task ≤ 2 workers",
            Device::open_local_task(two).expect("2 workers"),
        ),
        (
            "≤ 2 workers beside local-sync",
            Runtime::with_device(beside).expect("a runtime"),
            local_sync,
        ),
    ];

    // slots[device][workload][candidate]: the loaded function, its
    // arguments, whether its result matches, and its samples.
    struct Slot {
        function: Function,
        args: Vec<VmValue>,
        matches: bool,
        samples: Vec<Duration>,
    }
    let mut references: Vec<Option<Vec<f32>>> = vec![None; workloads.len()];
    let mut slots: Vec<Vec<Vec<Option<Slot>>>> = Vec::new();
    for (_, runtime, arguments_on) in &devices {
        let mut per_workload = Vec::new();
        for (w, workload) in workloads.iter().enumerate() {
            let mut per_candidate = Vec::new();
            for (artifact, _) in &compiled[w] {
                let Some(artifact) = artifact else {
                    per_candidate.push(None);
                    continue;
                };
                let function = runtime
                    .load(artifact.vmfb())
                    .expect("loads")
                    .function(workload.function.entry_symbol())
                    .expect("the entry");
                let args: Vec<VmValue> = workload
                    .shapes
                    .iter()
                    .map(|shape| {
                        Tensor::from_slice(arguments_on, shape, &input(shape))
                            .expect("uploads")
                            .into()
                    })
                    .collect();
                let result = first_output(&function, &args);
                let reference = references[w].get_or_insert_with(|| result.clone());
                let matches = relative_error(&result, reference) <= 1e-4;
                per_candidate.push(Some(Slot {
                    function,
                    args,
                    matches,
                    samples: Vec::new(),
                }));
            }
            per_workload.push(per_candidate);
        }
        slots.push(per_workload);
    }

    for round in 0..ROUNDS {
        for per_workload in &mut slots {
            for (workload, per_candidate) in workloads.iter().zip(per_workload.iter_mut()) {
                // Each round starts at another candidate, so that none is
                // always the first after a switch of function or device.
                let start = round % per_candidate.len();
                let (before, from) = per_candidate.split_at_mut(start);
                for slot in from.iter_mut().chain(before).flatten() {
                    for _ in 0..workload.calls {
                        let start = Instant::now();
                        std::hint::black_box(slot.function.call(&slot.args).expect("calls"));
                        slot.samples.push(start.elapsed());
                    }
                }
            }
        }
    }

    for (w, workload) in workloads.iter().enumerate() {
        println!("\n## {} (p50 µs per call; compile ms)\n", workload.name);
        if let Some(peak) = peak.filter(|_| workload.multiply_adds > 0) {
            let at_peak = workload.multiply_adds as f64 / peak * 1e6;
            println!(
                "Its multiply-adds at one core's FMA peak: {at_peak:.0} µs (two cores: {:.0} µs); \
                 a cell's fraction of peak is that over its time (and its workers).\n",
                at_peak / 2.0
            );
        }
        print!("| flags | compile |");
        for (device, _, _) in &devices {
            print!(" {device} |");
        }
        println!();
        println!("|---|---|{}", "---|".repeat(devices.len()));
        for (c, (label, _)) in candidates.iter().enumerate() {
            let (_, compile_times) = &compiled[w][c];
            if compile_times.is_empty() {
                println!("| {label} | fails |{}", " |".repeat(devices.len()));
                continue;
            }
            let compile = median(compile_times.clone()).as_secs_f64() * 1e3;
            print!("| {label} | {compile:.0} ms |");
            for per_workload in &mut slots {
                let slot = per_workload[w][c].as_mut().expect("compiled");
                let p50 = median(std::mem::take(&mut slot.samples)).as_secs_f64() * 1e6;
                let mark = if slot.matches { "" } else { " ≠" };
                if p50 >= 100.0 {
                    print!(" {p50:.0}{mark} |");
                } else {
                    print!(" {p50:.1}{mark} |");
                }
            }
            println!();
        }
    }
}
