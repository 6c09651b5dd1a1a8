//! Benchmark (not a test): what a variant with dynamic dims costs per call
//! against the static variant of the same shape, and what a hot size costs
//! once it is specialized (`CacheConfig::specialize_hot_sizes`: its own
//! static variant compiled in the background beside the dynamic one), for
//! `mlp_layer` (x f32[b,256] · W f32[256,256] + bias, relu) and `softmax`
//! (f32[b,1024]) at b = 1, 16 and 128, local-sync, device tensors in and
//! out.
//!
//! ```sh
//! cargo bench -p sheaf-integration --bench dynamic
//! ```
//!
//! Three runtimes: static shapes only; dynamic dims with specialization
//! off (the batch served by the dynamic variant); and the default, where the
//! batch, called until it is hot, got its own variant. Rounds alternate
//! between them so that the machine's drift hits all alike; the p50 is over
//! all rounds.

use std::time::{Duration, Instant};

use ndarray::{ArrayD, Dimension, IxDyn};
use sheaf_integration::{
    reference,
    settings::{CompileMode, DiskCacheFolder},
    CapturedScalar, Dispatched, JitConfig, JitFunction, JitRuntime, Provenance, Tensor, Value,
};

const ROUNDS: usize = 10;
const PER_ROUND: usize = 1_000;

/// How a runtime treats the batch dim.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shapes {
    /// Every batch size is its own variant.
    Static,
    /// A dim that varies gets one dynamic variant, which serves every size.
    Dynamic,
    /// As `Dynamic`, and a hot size gets its own variant beside it (the
    /// default; its compiles run in the background).
    HotSpecialized,
}

fn runtime(shapes: Shapes) -> JitRuntime {
    let config = JitConfig::builder()
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .compile(|compile| {
            if shapes != Shapes::HotSpecialized {
                compile.mode = CompileMode::Blocking;
            }
        })
        .cache(|cache| {
            cache.dynamic_dims = shapes != Shapes::Static;
            cache.specialize_hot_sizes = shapes == Shapes::HotSpecialized;
        })
        .build()
        .expect("valid settings");
    JitRuntime::new(config).expect("the local-sync runtime opens")
}

/// Calls `f` until it runs compiled (a background miss is interpreted
/// until its compile is done); how it ran.
fn call(
    jit: &JitRuntime,
    f: &JitFunction,
    args: &[Value],
    captured: &[CapturedScalar],
) -> Provenance {
    loop {
        match jit.dispatch(f, args, captured).expect("the call runs") {
            Dispatched::Compiled(compiled) => return std::hint::black_box(compiled).provenance,
            Dispatched::Interpret(_) => {
                assert!(jit.wait_for_compiles(Duration::from_secs(600)));
            }
        }
    }
}

/// Device tensors of `shapes`, uploaded once.
fn device_args(jit: &JitRuntime, shapes: &[&[usize]]) -> Vec<Value> {
    shapes
        .iter()
        .map(|shape| {
            let host = ArrayD::<f32>::from_shape_fn(IxDyn(shape), |i| {
                (i.slice().iter().sum::<usize>() % 7) as f32 * 0.25 - 0.75
            });
            Value::from(Tensor::Device(jit.upload(&host.into()).expect("upload")))
        })
        .collect()
}

fn p50(mut samples: Vec<u64>) -> f64 {
    samples.sort_unstable();
    samples[samples.len() / 2] as f64 / 1000.0
}

/// `shapes` with the batch (dim 0 of arg 0) `more` larger.
fn other_batch(shapes: &[&[usize]], more: usize) -> Vec<Vec<usize>> {
    let mut other: Vec<Vec<usize>> = shapes.iter().map(|s| s.to_vec()).collect();
    other[0][0] += more;
    other
}

/// Brings `jit` to where the call at `shapes` is measured: for dynamic
/// dims, other batch sizes came first, so that this one is served by the
/// variant with a dynamic batch; when hot sizes are specialized, it is then
/// called until it is hot and its own variant is compiled.
fn warm(
    jit: &JitRuntime,
    shapes: (Shapes, &[&[usize]]),
    f: &JitFunction,
    args: &[Value],
    captured: &[CapturedScalar],
) {
    let (kind, shapes) = shapes;
    if kind != Shapes::Static {
        for more in 1..=2 {
            let other = other_batch(shapes, more);
            let other: Vec<&[usize]> = other.iter().map(Vec::as_slice).collect();
            call(jit, f, &device_args(jit, &other), captured);
        }
    }
    call(jit, f, args, captured);
    if kind != Shapes::Static {
        assert_eq!(jit.stats().total.generalizations, 1, "{}", jit.stats());
    }
    if kind == Shapes::HotSpecialized {
        while jit.stats().total.specializations == 0 {
            call(jit, f, args, captured);
        }
        assert!(jit.wait_for_compiles(Duration::from_secs(600)));
        let dynamic_hits = jit.stats().total.dynamic_hits;
        call(jit, f, args, captured);
        assert_eq!(jit.stats().total.dynamic_hits, dynamic_hits, "specialized");
    }
}

/// p50 per call in µs of `f` at `shapes` (whose dim 0 of arg 0 is the
/// batch) with static shapes, the dynamic variant, and the hot size
/// specialized.
fn compare(f: &JitFunction, shapes: &[&[usize]], captured: &[CapturedScalar]) -> [f64; 3] {
    let kinds = [Shapes::Static, Shapes::Dynamic, Shapes::HotSpecialized];
    let runtimes = kinds.map(runtime);
    let args: Vec<Vec<Value>> = runtimes
        .iter()
        .map(|jit| device_args(jit, shapes))
        .collect();
    for ((jit, kind), args) in runtimes.iter().zip(kinds).zip(&args) {
        warm(jit, (kind, shapes), f, args, captured);
    }
    let mut samples: [Vec<u64>; 3] = Default::default();
    for _ in 0..ROUNDS {
        for ((jit, args), samples) in runtimes.iter().zip(&args).zip(&mut samples) {
            for _ in 0..PER_ROUND {
                let start = Instant::now();
                call(jit, f, args, captured);
                samples.push(start.elapsed().as_nanos() as u64);
            }
        }
    }
    assert!(runtimes[1].stats().total.dynamic_hits >= (ROUNDS * PER_ROUND) as u64);
    samples.map(p50)
}

/// One row: a function and its argument shapes (batch first).
struct Case<'a> {
    label: String,
    function: &'a JitFunction,
    shapes: Vec<Vec<usize>>,
    captured: &'a [CapturedScalar],
}

fn main() {
    println!(
        "per-call p50 (µs): static shapes only, the variant with a dynamic batch dim, and the \
         hot batch specialized beside it"
    );
    println!(
        "{:<34} {:>10} {:>10} {:>10} {:>14} {:>10}",
        "call", "static", "dynamic", "hot", "dynamic/static", "hot/static"
    );
    let (mlp, softmax) = (reference::mlp_layer(), reference::softmax());
    let t = [reference::temperature(1.0)];
    for b in [1, 16, 128] {
        let cases = [
            Case {
                label: format!("mlp_layer x f32[{b},256]"),
                function: &mlp,
                shapes: vec![vec![b, 256], vec![256, 256], vec![256]],
                captured: &[],
            },
            Case {
                label: format!("softmax f32[{b},1024]"),
                function: &softmax,
                shapes: vec![vec![b, 1024]],
                captured: &t,
            },
        ];
        for case in cases {
            let shapes: Vec<&[usize]> = case.shapes.iter().map(Vec::as_slice).collect();
            let [fixed, general, hot] = compare(case.function, &shapes, case.captured);
            println!(
                "{:<34} {fixed:>10.1} {general:>10.1} {hot:>10.1} {:>13.2}x {:>9.2}x",
                case.label,
                general / fixed,
                hot / fixed
            );
        }
    }
}
