//! Benchmark (not a test): a cached call through `JitRuntime` against the
//! raw `iree-safe` call of the same artifact on the same input, local-sync.
//!
//! ```sh
//! cargo bench -p sheaf-integration --bench cached_call
//! ```
//!
//! Both sides take a device tensor and return a device tensor, so the
//! difference is the JIT's own work: building the signature, the cache
//! lookup, and wrapping values. Two more pairs start from a host array: with
//! the upload cache off (both sides copy it to the device on every call),
//! and on (the JIT copies the same array once). Two more pairs time the
//! device-tensor hit in `CompileMode::Background`, whose misses queue their
//! compiles (a hit there must cost what it costs in `Blocking` mode), and
//! on a runtime that times every call for its profile
//! (`JitConfig::time_calls`: the price of three clock reads a call).
//!
//! Each pair times the JIT's call and the raw call in alternation, so a
//! load that comes and goes on a shared machine shifts both sides alike;
//! the ratio of their medians is what to read.

use std::time::Instant;

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    lowering::Signature,
    reference,
    settings::{CompileMode, DiskCacheFolder},
    stats::Origin,
    DType, Dispatched, JitConfig, JitFunction, JitRuntime, Provenance, Tensor, Value,
};

const WARMUP: usize = 5_000;
const SAMPLES: usize = 50_000;

/// Times `jit` and `raw` in alternation, one call of each per round, so
/// that both see the same machine (a load that comes and goes shifts both
/// sides, not their ratio); each side's samples sorted.
fn time_pair(mut jit: impl FnMut(), mut raw: impl FnMut()) -> (Vec<u64>, Vec<u64>) {
    for _ in 0..WARMUP {
        jit();
        raw();
    }
    let timed = |f: &mut dyn FnMut()| {
        let start = Instant::now();
        f();
        start.elapsed().as_nanos() as u64
    };
    let (mut jit_samples, mut raw_samples): (Vec<u64>, Vec<u64>) = (0..SAMPLES)
        .map(|_| (timed(&mut jit), timed(&mut raw)))
        .unzip();
    jit_samples.sort_unstable();
    raw_samples.sort_unstable();
    (jit_samples, raw_samples)
}

fn p(samples: &[u64], q: f64) -> f64 {
    samples[((samples.len() - 1) as f64 * q) as usize] as f64 / 1000.0
}

/// One cached call of `function` through the JIT.
fn dispatch(jit: &JitRuntime, function: &JitFunction, args: &[Value]) -> Provenance {
    match jit.dispatch(function, args, &[]).unwrap() {
        Dispatched::Compiled(compiled) => std::hint::black_box(compiled).provenance,
        Dispatched::Interpret(why) => panic!("the signature is compiled: {why}"),
    }
}

fn main() {
    let config = || {
        JitConfig::builder()
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
            .compile(|compile| compile.mode = CompileMode::Blocking)
    };
    let jit = JitRuntime::new(config().build().unwrap()).unwrap();
    let no_uploads = JitRuntime::new(
        config()
            .uploads(|uploads| uploads.entries = 0)
            .build()
            .unwrap(),
    )
    .unwrap();
    let background = JitRuntime::new(
        config()
            .compile(|compile| compile.mode = CompileMode::Background)
            .build()
            .unwrap(),
    )
    .unwrap();
    let timed = JitRuntime::new(config().time_calls(true).build().unwrap()).unwrap();
    let sigmoid = reference::sigmoid();
    let host = ArrayD::from_shape_vec(IxDyn(&[1, 5]), vec![-2.0f32, -0.5, 0.0, 0.75, 3.0]).unwrap();

    // The same artifact, loaded into each runtime, called directly: each
    // pair compares a runtime with a raw call on its own device.
    let mut builder = Signature::builder();
    builder.arg(DType::F32, &[1, 5]);
    let module = sigmoid.module_text(&builder.build()).unwrap();
    let compiler = iree_safe::compiler::choose_compiler(Default::default()).unwrap();
    let artifact = compiler
        .compiler
        .compile(&module, jit.compile_options())
        .unwrap();
    let raw_function = |jit: &JitRuntime| {
        jit.runtime()
            .load(artifact.vmfb())
            .unwrap()
            .function(sigmoid.entry_symbol())
            .unwrap()
    };
    let on_device = |jit: &JitRuntime| {
        iree_safe::Tensor::from_slice(jit.runtime().device(), &[1, 5], host.as_slice().unwrap())
            .unwrap()
    };

    // `dispatch` runs in every sample (a `debug_assert!` around it would
    // vanish from the release build).
    let hit = |jit: &JitRuntime, args: &[Value]| {
        let provenance = dispatch(jit, &sigmoid, args);
        debug_assert_eq!(provenance, Provenance::Compiled(Origin::Hit));
    };
    // A device tensor in, on `jit` and raw.
    let device_pair = |jit: &JitRuntime| {
        let raw = raw_function(jit);
        let device = on_device(jit);
        let jit_args = [Value::Tensor(Tensor::Device(device.clone()))];
        let raw_args = [iree_safe::VmValue::Tensor(device)];
        while let Dispatched::Interpret(_) = jit.dispatch(&sigmoid, &jit_args, &[]).unwrap() {
            assert!(jit.wait_for_compiles(std::time::Duration::from_secs(600)));
        }
        time_pair(
            || hit(jit, &jit_args),
            || {
                std::hint::black_box(raw.call(&raw_args).unwrap());
            },
        )
    };
    // A host array in, copied to the device by the raw side every call.
    let host_pair = |jit: &JitRuntime| {
        let raw = raw_function(jit);
        let host_args = [Value::from(host.clone())];
        dispatch(jit, &sigmoid, &host_args);
        time_pair(
            || hit(jit, &host_args),
            || {
                let x = on_device(jit);
                std::hint::black_box(raw.call(&[x.into()]).unwrap());
            },
        )
    };
    let device = device_pair(&jit);
    let background = device_pair(&background);
    let timed = device_pair(&timed);
    let host_uncached = host_pair(&no_uploads);
    let host_cached = host_pair(&jit);

    println!(
        "sigmoid f32[1,5] on local-sync, {SAMPLES} samples each, the JIT's and the raw call's \
         in alternation"
    );
    for (label, (jit, raw)) in [
        ("device tensor in", &device),
        ("same, Background", &background),
        ("same, timed", &timed),
        ("host array in", &host_uncached),
        ("host array, cached", &host_cached),
    ] {
        println!(
            "{label:<18} JitRuntime::dispatch p50 {:>6.2} us p99 {:>6.2} us | iree-safe Function::call p50 {:>6.2} us p99 {:>6.2} us | ratio p50 {:.2}",
            p(jit, 0.5),
            p(jit, 0.99),
            p(raw, 0.5),
            p(raw, 0.99),
            p(jit, 0.5) / p(raw, 0.5)
        );
    }
}
