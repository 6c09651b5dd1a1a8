//! Runtime benchmark (not a test): warm call latency and memory per loaded
//! module, on local-sync and local-task.
//!
//! ```sh
//! cargo bench -p iree-safe --bench runtime
//! ```
//!
//! For each driver it prints:
//! - p50/p99 of a warm `Function::call` of a tiny sigmoid (`f32[4]`) with a
//!   device tensor argument, the same through IREE's own C runtime API
//!   (`iree_runtime_call_invoke`, measured in a child process because the C
//!   runtime API creates its own VM instance), and a full host round trip;
//! - RSS after loading K = 100 and K = 500 modules (each its own loaded
//!   module and context), the slope per extra module, and that slope minus
//!   the artifact's bytes.

use std::time::Instant;

use iree_safe::compiler::Artifact;
use iree_safe::{Runtime, Tensor};

const WARMUP: usize = 2_000;
const SAMPLES: usize = 20_000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--raw-c-api") {
        raw_c_api::run(&args[i + 1], &args[i + 2]);
        return;
    }
    let vmfb = test_support::iree::program("sigmoid");
    let artifact =
        std::env::temp_dir().join(format!("iree-safe-bench-{}.vmfb", std::process::id()));
    std::fs::write(&artifact, vmfb.as_bytes()).expect("temporary artifact");
    println!("tiny sigmoid artifact: {} bytes", vmfb.len());
    for driver in ["local-sync", "local-task"] {
        println!("\n== {driver} ==");
        let runtime = Runtime::new(driver).expect("runtime");
        warm_call(&runtime, &vmfb);
        let raw = test_support::child::this_executable()
            .args(["--raw-c-api", driver, artifact.to_str().unwrap()])
            .output()
            .expect("raw C API child");
        print!("{}", String::from_utf8_lossy(&raw.stdout));
        memory_per_module(&runtime, &vmfb);
    }
    let _ = std::fs::remove_file(artifact);
}

/// Prints p50/p99 of `samples` (nanoseconds) under `label`.
fn report(label: &str, mut samples: Vec<u64>) {
    samples.sort_unstable();
    let pick = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    println!(
        "{label:<44} p50 {:>7.2} us   p99 {:>7.2} us",
        pick(0.50),
        pick(0.99)
    );
}

fn time(mut f: impl FnMut()) -> Vec<u64> {
    for _ in 0..WARMUP {
        f();
    }
    (0..SAMPLES)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_nanos() as u64
        })
        .collect()
}

fn warm_call(runtime: &Runtime, vmfb: &Artifact) {
    let sigmoid = runtime
        .load(vmfb.vmfb())
        .unwrap()
        .function("sigmoid")
        .unwrap();
    let data = [0.5f32, -1.0, 2.0, 0.0];
    let x: iree_safe::VmValue = Tensor::from_slice(runtime.device(), &[4], &data)
        .unwrap()
        .into();
    let inputs = std::slice::from_ref(&x);
    report(
        "iree-safe Function::call (device tensor)",
        time(|| {
            std::hint::black_box(sigmoid.call(inputs).unwrap());
        }),
    );
    report(
        "iree-safe host -> call -> host round trip",
        time(|| {
            let x = Tensor::from_slice(runtime.device(), &[4], &data).unwrap();
            let y = sigmoid.call(&[x.into()]).unwrap();
            std::hint::black_box(y[0].as_tensor().unwrap().to_vec::<f32>().unwrap());
        }),
    );
}

fn memory_per_module(runtime: &Runtime, vmfb: &Artifact) {
    let x: iree_safe::VmValue = Tensor::from_slice(runtime.device(), &[4], &[1.0f32; 4])
        .unwrap()
        .into();
    let mut modules = Vec::new();
    let load_until = |k: usize, modules: &mut Vec<_>| {
        while modules.len() < k {
            let module = runtime.load(vmfb.vmfb()).unwrap();
            // Call once so each context's state is fully materialized.
            module
                .function("sigmoid")
                .unwrap()
                .call(std::slice::from_ref(&x))
                .unwrap();
            modules.push(module);
        }
        test_support::proc_status::rss_bytes()
    };
    let at_100 = load_until(100, &mut modules);
    let at_500 = load_until(500, &mut modules);
    let slope = (at_500 as f64 - at_100 as f64) / 400.0;
    println!(
        "RSS with K=100 modules {:.1} MiB, K=500 {:.1} MiB: {:.1} KB per extra module, {:.1} KB beyond the {:.1} KB artifact",
        at_100 as f64 / 1048576.0,
        at_500 as f64 / 1048576.0,
        slope / 1000.0,
        (slope - vmfb.len() as f64) / 1000.0,
        vmfb.len() as f64 / 1000.0
    );
}

/// The baseline: the same call through IREE's C runtime API (instance +
/// device + session, `iree_runtime_call_invoke`), the baseline IREE itself offers.
mod raw_c_api {
    use std::ptr;

    use iree_sys::*;

    fn ok(status: iree_status_t) {
        assert!(
            iree_status_is_ok(status),
            "IREE call failed (code {})",
            iree_status_code(status)
        );
    }

    fn view(text: &str) -> iree_string_view_t {
        iree_make_string_view(text.as_ptr().cast(), text.len())
    }

    pub(crate) fn run(driver: &str, artifact: &str) {
        let vmfb = std::fs::read(artifact).unwrap();
        let data = [0.5f32, -1.0, 2.0, 0.0];
        // SAFETY: the same sequence as the iree-sys smoke test: every object
        // is used only while alive; nothing is released (the process exits).
        unsafe {
            let mut options = std::mem::zeroed();
            iree_runtime_instance_options_initialize(&mut options);
            iree_runtime_instance_options_use_all_available_drivers(&mut options);
            let mut instance = ptr::null_mut();
            ok(iree_runtime_instance_create(
                &options,
                iree_allocator_system(),
                &mut instance,
            ));
            let mut device = ptr::null_mut();
            ok(iree_runtime_instance_try_create_default_device(
                instance,
                view(driver),
                &mut device,
            ));
            let mut session_options = std::mem::zeroed();
            iree_runtime_session_options_initialize(&mut session_options);
            let mut session = ptr::null_mut();
            ok(iree_runtime_session_create_with_device(
                instance,
                &session_options,
                device,
                iree_runtime_instance_host_allocator(instance),
                &mut session,
            ));
            ok(iree_runtime_session_append_bytecode_module_from_memory(
                session,
                iree_make_const_byte_span(vmfb.as_ptr(), vmfb.len()),
                iree_allocator_null(),
            ));
            let mut call = std::mem::zeroed();
            ok(iree_runtime_call_initialize_by_name(
                session,
                view("sigmoid.sigmoid"),
                &mut call,
            ));
            let shape = [4usize];
            let params = iree_hal_buffer_params_t {
                usage: IREE_HAL_BUFFER_USAGE_DEFAULT,
                type_: IREE_HAL_MEMORY_TYPE_DEVICE_LOCAL,
                ..Default::default()
            };
            let mut input = ptr::null_mut();
            ok(iree_hal_buffer_view_allocate_buffer_copy(
                device,
                iree_runtime_session_device_allocator(session),
                1,
                shape.as_ptr(),
                IREE_HAL_ELEMENT_TYPE_FLOAT_32,
                IREE_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
                params,
                iree_make_const_byte_span(data.as_ptr().cast(), 16),
                &mut input,
            ));
            let samples = super::time(|| {
                ok(iree_runtime_call_inputs_push_back_buffer_view(
                    &mut call, input,
                ));
                ok(iree_runtime_call_invoke(&mut call, 0));
                let mut output = ptr::null_mut();
                ok(iree_runtime_call_outputs_pop_front_buffer_view(
                    &mut call,
                    &mut output,
                ));
                iree_hal_buffer_view_release(output);
                iree_runtime_call_reset(&mut call);
            });
            super::report("C runtime API iree_runtime_call_invoke", samples);
        }
    }
}
