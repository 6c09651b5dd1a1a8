//! End to end on the real IREE runtime and compiler: compiled results equal
//! the interpreter's, captured scalars and redefinitions are never served
//! stale code, thrash fallback stays correct, device tensors chain, runtime
//! errors are errors, and the disk cache lets a fresh runtime skip the
//! compiler.

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    reference, CapturedScalar, HostTensor, JitConfig, JitError, JitFunction, JitRuntime, Phase,
    Provenance, Severity, Value, VariantError,
};

/// A runtime with no disk cache, so every compile is a real one.
fn jit() -> JitRuntime {
    JitRuntime::new(JitConfig::builder().no_disk_cache().build().unwrap()).unwrap()
}

/// Deterministic pseudo-random f32 values in [-3, 3).
fn array(shape: &[usize], seed: u32) -> ArrayD<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).max(1);
    ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        (state % 6000) as f32 / 1000.0 - 3.0
    })
}

fn assert_close(actual: &HostTensor, expected: &HostTensor, what: &str) {
    let (HostTensor::F32(a), HostTensor::F32(e)) = (actual, expected) else {
        panic!("{what}: expected f32 tensors, got {actual:?} and {expected:?}");
    };
    assert_eq!(a.shape(), e.shape(), "{what}: shapes differ");
    for (x, y) in a.iter().zip(e.iter()) {
        assert!((x - y).abs() <= 1e-5, "{what}: {x} vs {y}");
    }
}

/// Calls `function` through the JIT (compiled) and in its interpreter, and
/// compares the results.
fn check_against_interpreter(
    jit: &JitRuntime,
    function: &JitFunction,
    args: &[ArrayD<f32>],
    captured: &[CapturedScalar],
) {
    let hosts: Vec<HostTensor> = args.iter().cloned().map(HostTensor::F32).collect();
    let values: Vec<Value> = hosts.iter().cloned().map(Value::Host).collect();
    let (compiled, provenance) = jit.call_host(function, &values, captured).unwrap();
    assert!(
        provenance.is_compiled(),
        "{} ran {provenance:?}",
        function.name()
    );
    let expected = function.interpret(&hosts, captured).unwrap();
    let shapes: Vec<_> = args.iter().map(|a| a.shape().to_vec()).collect();
    assert_close(
        &compiled[0],
        &expected[0],
        &format!("{} on {shapes:?}", function.name()),
    );
}

#[test]
fn sigmoid_compiled_equals_interpreter_on_many_shapes() {
    let jit = jit();
    for (i, shape) in [
        &[5][..],
        &[1, 5],
        &[1, 5, 1],
        &[2, 3, 4],
        &[],
        &[1, 1, 1, 7],
    ]
    .iter()
    .enumerate()
    {
        check_against_interpreter(
            &jit,
            &reference::sigmoid(),
            &[array(shape, i as u32 + 1)],
            &[],
        );
    }
    // f64 stays f64 (IREE would demote it by default).
    let x = ArrayD::from_shape_vec(IxDyn(&[3]), vec![0.5f64, -20.0, 1e-3]).unwrap();
    let (y, _) = jit
        .call_host(&reference::sigmoid(), &[Value::from(x.clone())], &[])
        .unwrap();
    let HostTensor::F64(y) = &y[0] else {
        panic!("f64 in, {y:?} out")
    };
    for (x, y) in x.iter().zip(y.iter()) {
        assert!((y - 1.0 / (1.0 + (-x).exp())).abs() < 1e-12);
    }
}

#[test]
fn softmax_compiled_equals_interpreter_on_many_shapes() {
    let jit = jit();
    let t = [reference::temperature(0.7)];
    for (i, shape) in [&[5][..], &[1, 5], &[2, 3], &[2, 3, 4], &[1, 1], &[3, 1, 8]]
        .iter()
        .enumerate()
    {
        check_against_interpreter(
            &jit,
            &reference::softmax(),
            &[array(shape, i as u32 + 10)],
            &t,
        );
    }
}

#[test]
fn mlp_compiled_equals_interpreter_on_many_shapes() {
    let jit = jit();
    for (i, (n, k, m)) in [(1, 3, 4), (2, 3, 4), (5, 2, 3), (3, 7, 1), (4, 4, 4)]
        .into_iter()
        .enumerate()
    {
        let seed = 100 + 3 * i as u32;
        let args = [
            array(&[n, k], seed),
            array(&[k, m], seed + 1),
            array(&[m], seed + 2),
        ];
        check_against_interpreter(&jit, &reference::mlp_layer(), &args, &[]);
    }
}

#[test]
fn a_changed_temperature_is_never_served_stale_code() {
    let jit = jit();
    let softmax = reference::softmax();
    let x = array(&[2, 5], 7);
    let mut compiles = 0;
    for round in 0..3 {
        for t in [0.5f32, 1.0, 0.500_000_06] {
            let captured = [reference::temperature(t)];
            let (y, provenance) = jit
                .call_host(&softmax, &[Value::from(x.clone())], &captured)
                .unwrap();
            let expected = softmax
                .interpret(&[HostTensor::F32(x.clone())], &captured)
                .unwrap();
            assert_close(&y[0], &expected[0], &format!("temperature {t}"));
            if round == 0 {
                assert_eq!(
                    provenance,
                    Provenance::CompiledNow,
                    "temperature {t} is a new key"
                );
                compiles += 1;
            } else {
                assert_eq!(provenance, Provenance::CacheHit);
            }
        }
    }
    assert_eq!(jit.stats().total.compiles, compiles);
}

#[test]
fn twenty_shape_churn_engages_fallback_and_stays_correct() {
    let config = JitConfig::builder()
        .no_disk_cache()
        .function_capacity(8)
        .thrash(32, 8, 40)
        .build()
        .unwrap();
    let jit = JitRuntime::new(config).unwrap();
    let sigmoid = reference::sigmoid();
    let shapes: Vec<Vec<usize>> = (1..=20).map(|n| vec![1, n]).collect();
    let mut interpreted = 0;
    for call in 0..120 {
        let x = array(&shapes[call % 20], call as u32);
        let (y, provenance) = jit
            .call_host(&sigmoid, &[Value::from(x.clone())], &[])
            .unwrap();
        let expected = sigmoid.interpret(&[HostTensor::F32(x)], &[]).unwrap();
        assert_close(&y[0], &expected[0], &format!("call {call}"));
        interpreted += usize::from(provenance == Provenance::InterpretedThrashing);
        assert!(jit.stats().total.live_entries <= 8);
    }
    let stats = jit.stats();
    assert!(interpreted > 0, "fallback never engaged: {stats}");
    assert_eq!(stats.total.fallback_calls as usize, interpreted);
    assert!(stats.total.compiles < 120, "{stats}");
}

#[test]
fn a_redefined_function_recompiles() {
    let jit = jit();
    let x = Value::from(array(&[1, 5], 3));
    let v1 = reference::sigmoid();
    assert_eq!(
        jit.call(&v1, std::slice::from_ref(&x), &[])
            .unwrap()
            .provenance,
        Provenance::CompiledNow
    );
    assert_eq!(
        jit.call(&v1, std::slice::from_ref(&x), &[])
            .unwrap()
            .provenance,
        Provenance::CacheHit
    );
    // Same name, new definition: `(* 2 (sigmoid x))`.
    let v2 = JitFunction::new(
        "sigmoid",
        "(defn sigmoid [x] (* 2 (/ 1 (+ 1 (exp (- x))))))",
        |sig| {
            let ty = format!(
                "tensor<{}xf32>",
                sig.args()[0]
                    .dims()
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join("x")
            );
            Ok(format!(
                "module @sigmoid2 {{ func.func @main(%x: {ty}) -> {ty} {{
                   %s = stablehlo.logistic %x : {ty}
                   %y = stablehlo.add %s, %s : {ty}
                   return %y : {ty} }} }}"
            ))
        },
        |args, _| match args {
            [HostTensor::F32(x)] => Ok(vec![HostTensor::F32(x.mapv(|v| 2.0 / (1.0 + (-v).exp())))]),
            _ => Err("one f32 tensor".into()),
        },
    );
    assert_ne!(v1.id(), v2.id());
    let result = jit.call(&v2, std::slice::from_ref(&x), &[]).unwrap();
    assert_eq!(result.provenance, Provenance::CompiledNow);
    let y = result.outputs[0].to_host().unwrap();
    let expected = v2.interpret(&[x.to_host().unwrap()], &[]).unwrap();
    assert_close(&y, &expected[0], "redefined sigmoid");
}

#[test]
fn device_tensors_chain_through_calls_without_a_host_copy() {
    let jit = jit();
    let sigmoid = reference::sigmoid();
    let x = array(&[2, 3], 11);
    let first = jit.call(&sigmoid, &[Value::from(x.clone())], &[]).unwrap();
    assert!(first.outputs[0].is_device());
    let transfers = jit.profile().phase(Phase::InputTransfer).count;
    let second = jit.call(&sigmoid, &first.outputs, &[]).unwrap();
    assert_eq!(
        second.provenance,
        Provenance::CacheHit,
        "same shape and dtype as the first call"
    );
    assert_eq!(
        jit.profile().phase(Phase::InputTransfer).count,
        transfers,
        "the device tensor was copied"
    );
    let expected = x
        .mapv(|v| 1.0 / (1.0 + (-v).exp()))
        .mapv(|v| 1.0 / (1.0 + (-v).exp()));
    assert_close(
        &second.outputs[0].to_host().unwrap(),
        &HostTensor::F32(expected),
        "sigmoid(sigmoid(x))",
    );
}

#[test]
fn the_disk_cache_lets_a_fresh_runtime_skip_the_compiler() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = || {
        JitRuntime::new(
            JitConfig::builder()
                .disk_cache_dir(dir.path())
                .build()
                .unwrap(),
        )
        .unwrap()
    };
    let x = Value::from(array(&[4, 2], 5));
    let first = fresh();
    assert_eq!(
        first
            .call(&reference::sigmoid(), std::slice::from_ref(&x), &[])
            .unwrap()
            .provenance,
        Provenance::CompiledNow
    );
    assert_eq!(
        (
            first.disk_cache_stats().hits,
            first.disk_cache_stats().misses
        ),
        (0, 1)
    );
    drop(first);
    let second = fresh();
    let result = second
        .call(&reference::sigmoid(), std::slice::from_ref(&x), &[])
        .unwrap();
    assert_eq!(
        result.provenance,
        Provenance::CompiledNow,
        "new to this runtime's cache"
    );
    assert_eq!(
        (
            second.disk_cache_stats().hits,
            second.disk_cache_stats().misses
        ),
        (1, 0),
        "served from disk"
    );
}

#[test]
fn runtime_errors_are_returned_not_hidden() {
    let jit = jit();
    // A lowering that ignores the signature: the artifact expects f32[4].
    let fixed = JitFunction::new(
        "fixed",
        "fixed-shape",
        |_| {
            Ok(
                "module @fixed { func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
                  %y = stablehlo.negate %x : tensor<4xf32>
                  return %y : tensor<4xf32> } }"
                    .into(),
            )
        },
        |args, _| Ok(args.to_vec()),
    );
    let error = jit
        .call(&fixed, &[Value::from(array(&[5], 1))], &[])
        .unwrap_err();
    assert!(matches!(error, JitError::Runtime(_)), "{error}");
    assert!(error.to_string().contains("mismatch"), "{error}");
}

#[test]
fn a_failed_compile_runs_the_interpreter_with_the_diagnostic() {
    let jit = jit();
    let broken = JitFunction::new(
        "broken",
        "type error",
        |_| {
            Ok("module @broken { func.func @main(%x: tensor<4xf32>) -> tensor<4xi32> { return %x : tensor<4xf32> } }".into())
        },
        |args, _| Ok(args.to_vec()),
    );
    let x = array(&[4], 2);
    for _ in 0..3 {
        let (y, provenance) = jit
            .call_host(&broken, &[Value::from(x.clone())], &[])
            .unwrap();
        let Provenance::InterpretedCompileFailed(failure) = provenance else {
            panic!("expected a failed compile, got {provenance:?}");
        };
        // The compiler's diagnostics arrive whole, not as text.
        let variant = failure
            .backend_error()
            .and_then(|error| error.downcast_ref::<VariantError>());
        let Some(VariantError::Compile {
            function, source, ..
        }) = variant
        else {
            panic!("expected the compiler's error, got {failure:?}");
        };
        assert_eq!(function, "broken");
        let diagnostic = &source.diagnostics()[0];
        assert_eq!(diagnostic.severity, Severity::Error);
        assert!(diagnostic.location.is_some(), "{diagnostic}");
        assert!(failure.to_string().contains("broken"), "{failure}");
        assert_eq!(y[0], HostTensor::F32(x.clone()));
    }
    let stats = jit.stats();
    assert_eq!(
        (stats.total.compiles, stats.total.failed_compiles),
        (1, 1),
        "one attempt, remembered: {stats}"
    );
}
