//! Benchmark (not a test): the per-call time of cached calls on each device
//! this machine has: `local-sync`, `vulkan` (a GPU, or Mesa's lavapipe, a
//! software device that runs SPIR-V on the CPU: expect it to be slower than
//! the CPU driver, it is there to test the GPU paths) and `cuda`.
//!
//! ```sh
//! cargo bench -p sheaf-integration --bench devices
//! ```
//!
//! Two calls per function: arguments already on the device with the result
//! left there (what chained calls cost), and host arrays in with the result
//! read back to the host (what one isolated call costs, transfers included).

use std::time::Instant;

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    reference,
    settings::{CompileMode, DiskCacheFolder},
    Dispatched, JitConfig, JitFunction, JitRuntime, Value,
};

const SAMPLES: usize = 2_000;

fn p50_micros(mut call: impl FnMut()) -> f64 {
    for _ in 0..SAMPLES / 10 {
        call();
    }
    let mut samples: Vec<u128> = (0..SAMPLES)
        .map(|_| {
            let start = Instant::now();
            call();
            start.elapsed().as_nanos()
        })
        .collect();
    samples.sort_unstable();
    samples[SAMPLES / 2] as f64 / 1000.0
}

fn array(shape: &[usize]) -> ArrayD<f32> {
    let len = shape.iter().product::<usize>();
    let values = (0..len).map(|i| (i % 7) as f32 / 7.0 - 0.5).collect();
    ArrayD::from_shape_vec(IxDyn(shape), values).expect("the length matches the shape")
}

fn compiled(jit: &JitRuntime, function: &JitFunction, args: &[Value]) -> Vec<Value> {
    match jit.dispatch(function, args, &[]).unwrap() {
        Dispatched::Compiled(compiled) => compiled.outputs,
        Dispatched::Interpret(why) => panic!("{} was interpreted: {why}", function.name()),
    }
}

fn main() {
    let mut devices = vec!["local-sync"];
    for gpu in ["vulkan", "cuda"] {
        match iree_safe::Device::open(gpu) {
            Ok(_) => devices.push(gpu),
            Err(error) => println!("no `{gpu}` device: {error}"),
        }
    }
    let workloads: [(&str, JitFunction, Vec<ArrayD<f32>>); 2] = [
        (
            "sigmoid f32[1,5]",
            reference::sigmoid(),
            vec![array(&[1, 5])],
        ),
        (
            "mlp_layer f32[128,256]x[256,256]",
            reference::mlp_layer(),
            vec![array(&[128, 256]), array(&[256, 256]), array(&[256])],
        ),
    ];
    println!("| function | device | p50 device→device | p50 host→host |");
    println!("|---|---|---|---|");
    for (name, function, inputs) in &workloads {
        for device in &devices {
            let config = JitConfig::builder()
                .device(|settings| {
                    settings.driver = (*device).to_owned();
                    settings.cpu_fallback = None;
                })
                .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
                .compile(|compile| compile.mode = CompileMode::Blocking)
                // Host arrays are copied to the device on every call.
                .uploads(|uploads| uploads.entries = 0)
                .build()
                .unwrap();
            let jit = JitRuntime::new(config).unwrap();
            let host: Vec<Value> = inputs.iter().cloned().map(Value::from).collect();
            let on_device: Vec<Value> = inputs
                .iter()
                .map(|a| {
                    let tensor = jit.upload(&a.clone().into()).unwrap();
                    Value::from(tensor)
                })
                .collect();
            compiled(&jit, function, &on_device);
            let chained = p50_micros(|| {
                std::hint::black_box(compiled(&jit, function, &on_device));
            });
            let round_trip = p50_micros(|| {
                let outputs = compiled(&jit, function, &host);
                std::hint::black_box(outputs[0].to_host().unwrap());
            });
            println!("| {name} | {device} | {chained:.1} µs | {round_trip:.1} µs |");
        }
    }
}
