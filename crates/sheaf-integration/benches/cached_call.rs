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
//! and on (the JIT copies the same array once). A last pair times the
//! device-tensor hit in `CompileMode::Background`, whose misses queue their
//! compiles: a hit there must cost what it costs in `Blocking` mode.

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

fn time(mut f: impl FnMut()) -> Vec<u64> {
    for _ in 0..WARMUP {
        f();
    }
    let mut samples: Vec<u64> = (0..SAMPLES)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_nanos() as u64
        })
        .collect();
    samples.sort_unstable();
    samples
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
    let sigmoid = reference::sigmoid();
    let host = ArrayD::from_shape_vec(IxDyn(&[1, 5]), vec![-2.0f32, -0.5, 0.0, 0.75, 3.0]).unwrap();

    // The same artifact, loaded into the same runtime, called directly.
    let mut builder = Signature::builder();
    builder.arg(DType::F32, &[1, 5]);
    let module = sigmoid.module_text(&builder.build()).unwrap();
    let compiler = iree_safe::compiler::choose_compiler(Default::default()).unwrap();
    let artifact = compiler
        .compiler
        .compile(&module, jit.compile_options())
        .unwrap();
    let raw = jit
        .runtime()
        .load(artifact.vmfb())
        .unwrap()
        .function(sigmoid.entry_symbol())
        .unwrap();

    let device =
        iree_safe::Tensor::from_slice(jit.runtime().device(), &[1, 5], host.as_slice().unwrap())
            .unwrap();
    let jit_args = [Value::Tensor(Tensor::Device(device.clone()))];
    let raw_args = [iree_safe::VmValue::Tensor(device)];
    assert!(matches!(
        dispatch(&jit, &sigmoid, &jit_args),
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));

    // `dispatch` runs in every sample (a `debug_assert!` around it would
    // vanish from the release build).
    let jit_device = time(|| {
        let provenance = dispatch(&jit, &sigmoid, &jit_args);
        debug_assert_eq!(provenance, Provenance::Compiled(Origin::Hit));
    });
    let raw_device = time(|| {
        std::hint::black_box(raw.call(&raw_args).unwrap());
    });
    while let Dispatched::Interpret(_) = background.dispatch(&sigmoid, &jit_args, &[]).unwrap() {
        assert!(background.wait_for_compiles(std::time::Duration::from_secs(600)));
    }
    let background_device = time(|| {
        let provenance = dispatch(&background, &sigmoid, &jit_args);
        debug_assert_eq!(provenance, Provenance::Compiled(Origin::Hit));
    });
    let host_args = [Value::from(host.clone())];
    dispatch(&no_uploads, &sigmoid, &host_args);
    let jit_host = time(|| {
        dispatch(&no_uploads, &sigmoid, &host_args);
    });
    let jit_host_cached = time(|| {
        dispatch(&jit, &sigmoid, &host_args);
    });
    let raw_host = time(|| {
        let x = iree_safe::Tensor::from_slice(
            jit.runtime().device(),
            &[1, 5],
            host.as_slice().unwrap(),
        )
        .unwrap();
        std::hint::black_box(raw.call(&[x.into()]).unwrap());
    });

    println!("sigmoid f32[1,5] on local-sync, {SAMPLES} samples each");
    for (label, jit, raw) in [
        ("device tensor in", &jit_device, &raw_device),
        ("same, Background", &background_device, &raw_device),
        ("host array in", &jit_host, &raw_host),
        ("host array, cached", &jit_host_cached, &raw_host),
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
