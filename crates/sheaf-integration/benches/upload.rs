//! Benchmark (not a test): the upload cache on `mlp_layer` calls, whose
//! weights `W: f32[256,256]` and `b: f32[256]` are the same arrays on every
//! call while the input `x: f32[8,256]` is new each time. With the cache,
//! the weights cross to the device once; without it, on every call.
//!
//! ```sh
//! cargo bench -p sheaf-integration --bench upload
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    reference,
    settings::{CompileMode, DiskCacheFolder},
    Dispatched, HostTensor, JitConfig, JitRuntime, Value,
};

const CALLS: usize = 400;

fn array(shape: &[usize], seed: usize) -> ArrayD<f32> {
    let n: usize = shape.iter().product();
    ArrayD::from_shape_vec(
        IxDyn(shape),
        (0..n)
            .map(|i| ((i * 7 + seed) % 13) as f32 / 13.0 - 0.5)
            .collect(),
    )
    .unwrap()
}

fn main() {
    let mlp = reference::mlp_layer();
    let w = Value::from(HostTensor::F32(Arc::new(array(&[256, 256], 1))));
    let b = Value::from(HostTensor::F32(Arc::new(array(&[256], 2))));
    let inputs: Vec<Value> = (0..CALLS)
        .map(|i| Value::from(array(&[8, 256], i)))
        .collect();
    println!("mlp_layer x f32[8,256] (new each call), W f32[256,256] and b f32[256] (the same arrays), local-sync, {CALLS} calls:");
    for (label, entries, bytes) in [
        ("upload cache off", 0, 0),
        ("upload cache on", 256, 256 << 20),
    ] {
        let config = JitConfig::builder()
            .compile(|compile| compile.mode = CompileMode::Blocking)
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
            .uploads(|uploads| {
                uploads.entries = entries;
                uploads.bytes = bytes;
            });
        let jit = JitRuntime::new(config.build().unwrap()).unwrap();
        // Compile first: the timed calls are all cache hits.
        let _ = jit
            .dispatch(&mlp, &[inputs[0].clone(), w.clone(), b.clone()], &[])
            .unwrap();
        let mut samples: Vec<Duration> = inputs
            .iter()
            .map(|x| {
                let start = Instant::now();
                match jit
                    .dispatch(&mlp, &[x.clone(), w.clone(), b.clone()], &[])
                    .unwrap()
                {
                    Dispatched::Compiled(compiled) => std::hint::black_box(compiled),
                    Dispatched::Interpret(why) => panic!("interpreted: {why}"),
                };
                start.elapsed()
            })
            .collect();
        samples.sort();
        let stats = jit.upload_stats();
        println!(
            "  {label:<17} p50 {:>7.1} us  p90 {:>7.1} us | uploads {:>5} ({:>6.1} MiB), upload-cache hits {:>4}",
            samples[CALLS / 2].as_secs_f64() * 1e6,
            samples[CALLS * 9 / 10].as_secs_f64() * 1e6,
            stats.uploads,
            stats.bytes_uploaded as f64 / 1048576.0,
            stats.hits
        );
    }
}
