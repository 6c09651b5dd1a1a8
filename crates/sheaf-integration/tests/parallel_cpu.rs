//! Large contractions on a `local-task` device beside `local-sync`
//! (`DeviceSettings::parallel_workers`): a matmul past
//! `parallel_contraction()` runs there, everything else on `local-sync`,
//! device tensors pass between the two without a host copy, and the
//! results agree with the interpreter.

mod support;

use std::num::NonZeroUsize;

use sheaf_integration::{
    artifacts::Precompile,
    reference,
    settings::{CompileMode, DiskCacheFolder},
    tuning::{parallel_contraction, PARALLEL_CONTRACTION, PARALLEL_CONTRACTION_AVX2},
    DeviceTensor, Dispatched, JitRuntime, Value,
};
use support::{array, assert_close, assert_matmul_close, blocking};

/// Beside `local-sync`, code with 512³ = 2²⁷ multiply-adds runs in
/// parallel on every CPU; 64³ = 2¹⁸ stays on every CPU.
const LARGE: usize = 512;
const SMALL: usize = 64;

fn runtime(workers: Option<usize>, mode: CompileMode) -> JitRuntime {
    assert!((LARGE as u64).pow(3) >= PARALLEL_CONTRACTION.max(PARALLEL_CONTRACTION_AVX2));
    assert!((SMALL as u64).pow(3) < PARALLEL_CONTRACTION.min(PARALLEL_CONTRACTION_AVX2));
    assert!([PARALLEL_CONTRACTION, PARALLEL_CONTRACTION_AVX2].contains(&parallel_contraction()));
    let config = blocking()
        .device(|device| {
            device.driver = "local-sync".into();
            device.parallel_workers = workers.and_then(NonZeroUsize::new);
        })
        .compile(|compile| compile.mode = mode)
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled);
    JitRuntime::new(config.build().unwrap()).unwrap()
}

/// Runs `function` compiled on `args`: its outputs and the device it ran on.
fn compiled<M: Send + Sync + 'static>(
    jit: &JitRuntime,
    function: &sheaf_integration::JitFunction<M>,
    args: &[Value],
) -> (Vec<Value>, String) {
    match jit.dispatch(function, args, &[]).unwrap() {
        Dispatched::Compiled(compiled) => {
            let device = compiled.device().to_owned();
            (compiled.outputs, device)
        }
        Dispatched::Interpret(why) => panic!("{} ran interpreted: {why}", function.name()),
    }
}

fn device_tensor(value: &Value) -> &DeviceTensor {
    match value {
        Value::Tensor(sheaf_integration::Tensor::Device(tensor)) => tensor,
        other => panic!("a device tensor, got {other:?}"),
    }
}

#[test]
fn a_large_matmul_runs_beside_local_sync_and_passes_its_tensors_back() {
    let jit = runtime(Some(2), CompileMode::Blocking);
    let (matmul, sigmoid) = (reference::matmul(), reference::sigmoid());
    let (a, b) = (array(&[LARGE, LARGE], 1), array(&[LARGE, LARGE], 2));
    let (y, device) = compiled(&jit, &matmul, &[a.clone().into(), b.clone().into()]);
    assert_eq!(device, "local-task");
    assert_matmul_close(&a, &b, &y[0], "512³ beside local-sync");
    // Small code stays on local-sync, and takes the large one's result as
    // it is; the large one takes local-sync's.
    let c = Value::from(array(&[SMALL, SMALL], 3));
    let (small, device) = compiled(&jit, &matmul, &[c.clone(), c]);
    assert_eq!(device, "local-sync");
    let (s, device) = compiled(&jit, &sigmoid, &y);
    assert_eq!(device, "local-sync");
    assert_eq!(device_tensor(&y[0]).device().uri(), "local-task");
    let expected = reference::interpret_sigmoid(&y).unwrap();
    assert_close(&s[0], &expected[0], "sigmoid of the parallel result");
    let (y2, device) = compiled(&jit, &matmul, &[s[0].clone(), y[0].clone()]);
    assert_eq!(device, "local-task");
    let host = |v: &Value| match v.to_host().unwrap() {
        sheaf_integration::HostTensor::F32(t) => t,
        other => panic!("f32, got {other:?}"),
    };
    assert_matmul_close(
        &host(&s[0]),
        &host(&y[0]),
        &y2[0],
        "local-sync × local-task",
    );
    drop(small);
    // Only the four host arguments were uploaded (copied, or imported when
    // their data happened to be 64-byte aligned): the device tensors passed
    // between the devices as they were.
    let stats = jit.upload_stats();
    assert_eq!(stats.uploads + stats.imports, 4, "{stats:?}");
    let devices: Vec<String> = jit
        .memory_statistics()
        .unwrap()
        .into_iter()
        .map(|(uri, _)| uri)
        .collect();
    assert_eq!(devices, ["local-sync", "local-task"]);
    // The tensors outlive the runtime and both devices' handles in it.
    drop(jit);
    assert_eq!(host(&y2[0]).shape(), [LARGE, LARGE]);
}

#[test]
fn without_parallel_workers_everything_runs_on_local_sync() {
    for workers in [None, Some(1)] {
        let jit = runtime(workers, CompileMode::Blocking);
        let (a, b) = (array(&[LARGE, LARGE], 4), array(&[LARGE, LARGE], 5));
        let (y, device) = compiled(
            &jit,
            &reference::matmul(),
            &[a.clone().into(), b.clone().into()],
        );
        assert_eq!(device, "local-sync", "{workers:?} workers");
        assert_matmul_close(&a, &b, &y[0], "512³ on local-sync");
        assert_eq!(jit.memory_statistics().unwrap().len(), 1);
    }
}

#[test]
fn batched_compiles_split_by_device() {
    let matmul = reference::matmul();
    let large = [
        array(&[LARGE, LARGE], 6).into(),
        array(&[LARGE, LARGE], 7).into(),
    ];
    let small = [
        array(&[SMALL, SMALL], 8).into(),
        array(&[SMALL, SMALL], 9).into(),
    ];
    let expect = |jit: &JitRuntime| {
        for (args, device) in [(&large, "local-task"), (&small, "local-sync")] {
            let before = jit.stats().total.compiles;
            let (_, ran_on) = compiled(jit, &matmul, args);
            assert_eq!(ran_on, device);
            assert_eq!(jit.stats().total.compiles, before, "a hit on {device}");
        }
    };
    // Precompiled together: one module per device.
    let jit = runtime(Some(2), CompileMode::Blocking);
    let calls = [
        Precompile::new(&matmul, &large),
        Precompile::new(&matmul, &small),
    ];
    let summary = jit.precompile(&calls).unwrap();
    assert_eq!((summary.compiled, summary.cached), (2, 2));
    expect(&jit);
    // Queued in the background, compiled in one batch.
    let jit = runtime(Some(2), CompileMode::Background);
    for args in [&large, &small] {
        assert!(matches!(
            jit.dispatch(&matmul, args, &[]).unwrap(),
            Dispatched::Interpret(_)
        ));
    }
    assert!(jit.wait_for_compiles(std::time::Duration::from_secs(120)));
    expect(&jit);
}
