//! The end-to-end paths that matter, on every device this machine has: the
//! CPU (`local-sync`), Vulkan (a real GPU, or Mesa's lavapipe, the software
//! Vulkan device `cargo xtask test` installs) and CUDA. Every runtime here
//! has no CPU fallback, so nothing can run on the CPU in a GPU test without
//! failing it, and every compiled result says which device it ran on
//! ([`Compiled::device`]) and is compared with the interpreter.
//!
//! A GPU driver that cannot open a device is skipped with a note, unless
//! `SHEAF_JIT_TEST_DEVICES` names it (`vulkan`, `cuda`, comma-separated):
//! then its absence fails the suite. CI sets `SHEAF_JIT_TEST_DEVICES=vulkan`;
//! on a machine with an NVIDIA GPU, `SHEAF_JIT_TEST_DEVICES=cuda cargo test
//! -p sheaf-integration --test devices` runs the suite on it.

mod support;

use std::path::Path;
use std::time::Duration;

use sheaf_integration::{
    compiler::{CompileTarget, CompilerPreference},
    reference,
    settings::{CompileMode, DiskCacheFolder},
    stats::{Origin, Phase},
    Compiled, Dispatched, JitConfigBuilder, JitFunction, JitRuntime, Provenance, Tensor, Value,
};
use support::structured::{affine, params, AffineMeta};
use support::{array, assert_close};

/// The devices to run on: the CPU, and each GPU driver that opens a device.
fn devices() -> Vec<&'static str> {
    let required = std::env::var("SHEAF_JIT_TEST_DEVICES").unwrap_or_default();
    let mut devices = vec!["local-sync"];
    for gpu in ["vulkan", "cuda"] {
        match iree_safe::Device::open(gpu) {
            Ok(_) => devices.push(gpu),
            Err(error) if required.split(',').any(|d| d.trim() == gpu) => {
                panic!("SHEAF_JIT_TEST_DEVICES names `{gpu}`, which cannot be opened: {error}")
            }
            Err(error) => eprintln!("not testing `{gpu}`: {error}"),
        }
    }
    devices
}

/// Blocking settings on `device` with no CPU fallback and no disk cache.
fn settings(device: &str) -> JitConfigBuilder {
    let device = device.to_owned();
    support::blocking()
        .device(move |settings| {
            settings.driver = device;
            settings.cpu_fallback = None;
        })
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
}

fn runtime(device: &str) -> JitRuntime {
    JitRuntime::new(settings(device).build().unwrap()).unwrap()
}

/// The compiled result of a call, checked to have run on `device`.
fn compiled_on<M: Send + Sync + 'static>(
    jit: &JitRuntime,
    device: &str,
    function: &JitFunction<M>,
    args: &[Value],
) -> Compiled<M> {
    match jit.dispatch(function, args, &[]).unwrap() {
        Dispatched::Compiled(compiled) => {
            assert_eq!(compiled.device(), device, "{}", function.name());
            compiled
        }
        Dispatched::Interpret(why) => {
            panic!("{} on {device} was interpreted: {why}", function.name())
        }
    }
}

fn check_sigmoid(jit: &JitRuntime, device: &str, shape: &[usize], seed: u32) -> Provenance {
    let x = [Value::from(array(shape, seed))];
    let compiled = compiled_on(jit, device, &reference::sigmoid(), &x);
    let expected = reference::interpret_sigmoid(&x).unwrap();
    assert_close(&compiled.outputs[0], &expected[0], device);
    compiled.provenance
}

#[test]
fn the_ping_pong_compiles_each_signature_once_on_every_device() {
    for device in devices() {
        let jit = runtime(device);
        let softmax = reference::softmax();
        let t = reference::temperature(0.5);
        for step in 0..20u32 {
            let shape: &[usize] = if step % 2 == 0 { &[2, 3] } else { &[3, 2] };
            check_sigmoid(&jit, device, shape, step);
            let x = [Value::from(array(shape, 100 + step))];
            let Dispatched::Compiled(result) = jit
                .dispatch(&softmax, &x, std::slice::from_ref(&t))
                .unwrap()
            else {
                panic!("softmax on {device} was interpreted");
            };
            assert_eq!(result.device(), device);
            let expected = reference::interpret_softmax(&x, 0.5).unwrap();
            assert_close(&result.outputs[0], &expected[0], device);
        }
        let stats = jit.stats().total;
        assert_eq!((stats.compiles, stats.hits), (4, 36), "{device}: {stats:?}");
    }
}

#[test]
fn structured_values_go_in_and_out_on_every_device() {
    for device in devices() {
        let jit = runtime(device);
        let (b, w, x) = (array(&[5], 1), array(&[5], 2), array(&[5], 3));
        let args = [
            params(b.clone(), w.clone(), ("b", "w")),
            Value::from(x.clone()),
        ];
        let compiled = compiled_on(&jit, device, &affine(), &args);
        assert_eq!(
            compiled.metadata(),
            &AffineMeta {
                return_keys: vec!["n".into(), "y".into()]
            }
        );
        let y = compiled.outputs[0].get("y").unwrap();
        assert_close(y, &Value::from(&x * &w + &b), device);
        let n = compiled.outputs[0].get("n").unwrap().to_f32().unwrap();
        assert!(
            (n.sum() - x.sum()).abs() < 1e-4,
            "{device}: {n} vs {}",
            x.sum()
        );
    }
}

#[test]
fn a_ragged_batch_goes_dynamic_on_every_device() {
    for device in devices() {
        let jit = runtime(device);
        let mlp = reference::mlp_layer();
        let (w, b) = (
            Value::from(array(&[32, 16], 1)),
            Value::from(array(&[16], 2)),
        );
        for (call, batch) in reference::ragged_batch_sizes(12, 64)
            .into_iter()
            .enumerate()
        {
            let args = [
                Value::from(array(&[batch, 32], call as u32)),
                w.clone(),
                b.clone(),
            ];
            let compiled = compiled_on(&jit, device, &mlp, &args);
            let expected = reference::interpret_mlp_layer(&args).unwrap();
            assert_close(&compiled.outputs[0], &expected[0], device);
        }
        let stats = jit.stats().total;
        assert!(stats.compiles <= 3, "{device}: {stats:?}");
    }
}

#[test]
fn device_tensors_chain_on_their_device_without_a_host_copy() {
    for device in devices() {
        let jit = runtime(device);
        let sigmoid = reference::sigmoid();
        let x = array(&[4, 3], 7);
        let first = compiled_on(&jit, device, &sigmoid, &[Value::from(x.clone())]);
        let Some(Tensor::Device(tensor)) = first.outputs[0].as_tensor() else {
            panic!("{device}: a compiled result is a device tensor");
        };
        assert_eq!(tensor.device().uri(), device);
        let transfers = jit.profile().phase(Phase::InputTransfer).count;
        let second = compiled_on(&jit, device, &sigmoid, &first.outputs);
        assert_eq!(second.provenance, Provenance::Compiled(Origin::Hit));
        assert_eq!(
            jit.profile().phase(Phase::InputTransfer).count,
            transfers,
            "{device}: the device tensor was copied"
        );
        let once = reference::interpret_sigmoid(&[Value::from(x)]).unwrap();
        let twice = reference::interpret_sigmoid(&once).unwrap();
        assert_close(&second.outputs[0], &twice[0], device);
    }
}

#[test]
fn reused_arrays_are_uploaded_once_to_every_device() {
    for device in devices() {
        let jit = runtime(device);
        let mlp = reference::mlp_layer();
        let w = jit.upload(&array(&[16, 8], 1).into()).unwrap();
        assert_eq!(w.device().uri(), device);
        let (w, b) = (Value::from(w), Value::from(array(&[8], 2)));
        for call in 0..6 {
            let args = [
                Value::from(array(&[4, 16], 10 + call)),
                w.clone(),
                b.clone(),
            ];
            let compiled = compiled_on(&jit, device, &mlp, &args);
            let expected = reference::interpret_mlp_layer(&args).unwrap();
            assert_close(&compiled.outputs[0], &expected[0], device);
        }
        // x is new each call (6 uploads) and W already on the device; b is
        // uploaded on its first and second use, then served (4 hits).
        let stats = jit.upload_stats();
        assert_eq!((stats.uploads, stats.hits), (9, 4), "{device}: {stats:?}");
    }
}

#[test]
fn background_compiles_land_on_every_device() {
    for device in devices() {
        let jit = JitRuntime::new(
            settings(device)
                .compile(|compile| compile.mode = CompileMode::Background)
                .build()
                .unwrap(),
        )
        .unwrap();
        let x = [Value::from(array(&[3, 5], 4))];
        let sigmoid = reference::sigmoid();
        let first = jit.dispatch(&sigmoid, &x, &[]).unwrap();
        assert!(matches!(first, Dispatched::Interpret(_)), "{device}");
        assert!(jit.wait_for_compiles(Duration::from_secs(120)), "{device}");
        let compiled = compiled_on(&jit, device, &sigmoid, &x);
        assert_eq!(compiled.provenance, Provenance::Compiled(Origin::Hit));
        let expected = reference::interpret_sigmoid(&x).unwrap();
        assert_close(&compiled.outputs[0], &expected[0], device);
    }
}

#[test]
fn the_target_follows_the_opened_device() {
    for device in devices() {
        let jit = runtime(device);
        let target = &jit.compile_options().target;
        match (device, target) {
            ("local-sync", CompileTarget::Cpu { .. }) | ("cuda", CompileTarget::Cuda { .. }) => {}
            ("vulkan", CompileTarget::Vulkan { features, .. }) => {
                // The SPIR-V version of the device's Vulkan version (1.3 on
                // lavapipe: SPIR-V 1.6) and its capabilities.
                let version = features[0].strip_prefix("spirv:v1.").unwrap();
                assert!(version.parse::<u32>().unwrap() >= 3, "{features:?}");
                assert_eq!(features[1], "cap:Shader");
            }
            _ => panic!("{device} compiles for {target}"),
        }
    }
}

#[test]
fn auto_opens_the_first_hardware_gpu_else_the_cpu() {
    let hardware: Vec<String> = ["cuda", "vulkan"]
        .into_iter()
        .flat_map(|driver| iree_safe::Device::available(driver).unwrap_or_default())
        .filter(|device| !device.kind.is_software())
        .map(|device| device.uri())
        .collect();
    let jit = JitRuntime::new(support::blocking().build().unwrap()).unwrap();
    let device = jit.runtime().device().uri().to_owned();
    match hardware.first() {
        Some(gpu) => assert_eq!(&device, gpu),
        // Mesa's lavapipe, where installed, is passed over.
        None => assert_eq!(device, "local-sync"),
    }
    check_sigmoid(&jit, &device, &[3, 3], 9);
}

/// A runtime on `device` with its disk cache in `dir` (and optionally a
/// bundle and no compiler).
fn with_disk(device: &str, dir: &Path) -> JitConfigBuilder {
    let dir = dir.to_owned();
    settings(device).disk(move |disk| disk.folder = DiskCacheFolder::Dir(dir))
}

#[test]
fn the_disk_cache_keeps_each_devices_code_apart() {
    let devices = devices();
    let dir = tempfile::tempdir().unwrap();
    for device in &devices {
        let first = JitRuntime::new(with_disk(device, dir.path()).build().unwrap()).unwrap();
        check_sigmoid(&first, device, &[6, 2], 1);
        let stats = first.disk_cache_stats();
        assert_eq!(
            (stats.hits, stats.misses),
            (0, 1),
            "{device}: another device's artifact is never this one's"
        );
        drop(first);
        let second = JitRuntime::new(with_disk(device, dir.path()).build().unwrap()).unwrap();
        let x = [Value::from(array(&[6, 2], 1))];
        let compiled = compiled_on(&second, device, &reference::sigmoid(), &x);
        assert_eq!(
            compiled.source(),
            sheaf_integration::artifacts::ArtifactSource::DiskCache
        );
        let expected = reference::interpret_sigmoid(&x).unwrap();
        assert_close(&compiled.outputs[0], &expected[0], device);
        assert!(second.compiler().is_none(), "{device}: served from disk");
    }
}

#[test]
fn an_exported_bundle_serves_a_process_without_a_compiler_on_every_device() {
    for device in devices() {
        let bundle = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let first = JitRuntime::new(with_disk(device, cache.path()).build().unwrap()).unwrap();
        check_sigmoid(&first, device, &[2, 7], 3);
        let summary = first.export_artifacts(bundle.path()).unwrap();
        assert_eq!(summary.artifacts, 1, "{device}: {summary:?}");
        let served = JitRuntime::new(
            settings(device)
                .compile(|compile| compile.compiler = CompilerPreference::Disabled)
                .artifact_bundle(bundle.path())
                .build()
                .unwrap(),
        )
        .unwrap();
        let x = [Value::from(array(&[2, 7], 3))];
        let compiled = compiled_on(&served, device, &reference::sigmoid(), &x);
        assert_eq!(
            compiled.source(),
            sheaf_integration::artifacts::ArtifactSource::Bundle
        );
        let expected = reference::interpret_sigmoid(&x).unwrap();
        assert_close(&compiled.outputs[0], &expected[0], device);
    }
}
