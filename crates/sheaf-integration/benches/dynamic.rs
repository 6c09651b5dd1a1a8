//! Benchmark (not a test): what a variant with dynamic dims costs per call
//! against the static variant of the same shape, for `mlp_layer` (x
//! f32[b,256] · W f32[256,256] + bias, relu) and `softmax` (f32[b,1024]) at
//! b = 1, 16 and 128, local-sync, device tensors in and out.
//!
//! ```sh
//! cargo bench -p sheaf-integration --bench dynamic
//! ```
//!
//! Rounds alternate between the two runtimes so that the machine's drift
//! hits both alike; the p50 is over all rounds.

use std::time::Instant;

use ndarray::{ArrayD, Dimension, IxDyn};
use sheaf_integration::{
    reference, CapturedScalar, CompileMode, DiskCacheFolder, Dispatched, JitConfig, JitFunction,
    JitRuntime, Origin, Provenance, Tensor, Value,
};

const ROUNDS: usize = 10;
const PER_ROUND: usize = 1_000;

fn runtime(dynamic: bool) -> JitRuntime {
    let config = JitConfig::builder()
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .compile(|compile| compile.mode = CompileMode::Blocking)
        .cache(|cache| cache.dynamic_dims = dynamic)
        .build()
        .expect("valid settings");
    JitRuntime::new(config).expect("the local-sync runtime opens")
}

fn call(
    jit: &JitRuntime,
    f: &JitFunction,
    args: &[Value],
    captured: &[CapturedScalar],
) -> Provenance {
    match jit.dispatch(f, args, captured).expect("the call runs") {
        Dispatched::Compiled(compiled) => std::hint::black_box(compiled).provenance,
        Dispatched::Interpret(why) => panic!("interpreted: {why}"),
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

/// p50 per call in µs of the static and the dynamic variant of `f` at
/// `shapes` (whose dim 0 of arg 0 is the batch).
fn compare(f: &JitFunction, shapes: &[&[usize]], captured: &[CapturedScalar]) -> (f64, f64) {
    let (fixed, general) = (runtime(false), runtime(true));
    let args = (device_args(&fixed, shapes), device_args(&general, shapes));
    // The dynamic runtime sees another batch size first, so that this one
    // is served by the variant with a dynamic batch.
    let mut other: Vec<Vec<usize>> = shapes.iter().map(|s| s.to_vec()).collect();
    other[0][0] += 1;
    let other: Vec<&[usize]> = other.iter().map(Vec::as_slice).collect();
    call(&general, f, &device_args(&general, &other), captured);
    assert!(matches!(
        call(&fixed, f, &args.0, captured),
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    assert!(matches!(
        call(&general, f, &args.1, captured),
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    assert_eq!(
        general.stats().total.generalizations,
        1,
        "{}",
        general.stats()
    );
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        for (jit, args, samples) in [(&fixed, &args.0, &mut a), (&general, &args.1, &mut b)] {
            for _ in 0..PER_ROUND {
                let start = Instant::now();
                call(jit, f, args, captured);
                samples.push(start.elapsed().as_nanos() as u64);
            }
        }
    }
    assert!(general.stats().total.dynamic_hits >= (ROUNDS * PER_ROUND) as u64);
    (p50(a), p50(b))
}

/// One row: a function and its argument shapes (batch first).
struct Case<'a> {
    label: String,
    function: &'a JitFunction,
    shapes: Vec<Vec<usize>>,
    captured: &'a [CapturedScalar],
}

fn main() {
    println!("per-call p50 (µs), static variant vs the variant with a dynamic batch dim");
    println!(
        "{:<34} {:>10} {:>10} {:>8}",
        "call", "static", "dynamic", "ratio"
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
            let (fixed, general) = compare(case.function, &shapes, case.captured);
            println!(
                "{:<34} {fixed:>10.1} {general:>10.1} {:>7.2}x",
                case.label,
                general / fixed
            );
        }
    }
}
