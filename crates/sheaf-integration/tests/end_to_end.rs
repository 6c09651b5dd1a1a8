//! End to end on the real IREE runtime and compiler: compiled results equal
//! the interpreter's, captured scalars and redefinitions are never served
//! stale code, thrash fallback stays correct, device tensors chain, runtime
//! errors are errors, compile failures keep their diagnostics, and the disk
//! cache lets a fresh runtime skip the compiler.

mod support;

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::reference::{self, ReferenceError};
use sheaf_integration::{
    compiler::Severity,
    lowering::{Lowered, VariantError},
    mlir,
    settings::{CachePolicy, DiskCacheFolder},
    stats::{Origin, Phase},
    Dispatched, ErrorChain, FallbackReason, HostTensor, JitError, JitFunction, JitRuntime,
    Provenance, Refusal, Value,
};
use support::{array, assert_close, assert_matmul_close, jit};

/// Calls `function` through the JIT and checks that compiled code ran and
/// matches `interpret` on the same arguments.
fn check_against_interpreter(
    jit: &JitRuntime,
    function: &JitFunction,
    args: &[ArrayD<f32>],
    captured: &[sheaf_integration::CapturedScalar],
    interpret: impl Fn(&[Value]) -> Result<Vec<Value>, ReferenceError>,
) {
    let values: Vec<Value> = args.iter().cloned().map(Value::from).collect();
    let Dispatched::Compiled(compiled) = jit.dispatch(function, &values, captured).unwrap() else {
        panic!("{} did not run compiled", function.name());
    };
    let expected = interpret(&values).unwrap();
    let shapes: Vec<_> = args.iter().map(|a| a.shape().to_vec()).collect();
    assert_close(
        &compiled.outputs[0],
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
            reference::interpret_sigmoid,
        );
    }
    // f64 stays f64 (IREE would demote it by default).
    let x = ArrayD::from_shape_vec(IxDyn(&[3]), vec![0.5f64, -20.0, 1e-3]).unwrap();
    let Dispatched::Compiled(y) = jit
        .dispatch(&reference::sigmoid(), &[Value::host(x.clone())], &[])
        .unwrap()
    else {
        panic!("f64 sigmoid did not run compiled");
    };
    let HostTensor::F64(y) = y.outputs[0].to_host().unwrap() else {
        panic!("f64 in, not f64 out")
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
            |args| reference::interpret_softmax(args, 0.7),
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
        check_against_interpreter(
            &jit,
            &reference::mlp_layer(),
            &args,
            &[],
            reference::interpret_mlp_layer,
        );
    }
}

#[test]
fn matmul_compiled_equals_interpreter_on_small_and_large_shapes() {
    let jit = jit();
    // 512³ reaches LARGE_CONTRACTION: compiled with CONTRACTION_FLAGS.
    for (i, (m, k, n)) in [(1, 3, 4), (5, 2, 3), (3, 7, 1), (512, 512, 512)]
        .into_iter()
        .enumerate()
    {
        let seed = 200 + 2 * i as u32;
        let (a, b) = (array(&[m, k], seed), array(&[k, n], seed + 1));
        let args = [Value::from(a.clone()), Value::from(b.clone())];
        let f = reference::matmul();
        let Dispatched::Compiled(compiled) = jit.dispatch(&f, &args, &[]).unwrap() else {
            panic!("matmul {m}x{k}x{n} did not run compiled");
        };
        assert_matmul_close(&a, &b, &compiled.outputs[0], &format!("{m}x{k}x{n}"));
    }
}

#[test]
fn batched_matmul_compiled_equals_interpreter() {
    let jit = jit();
    for (a, b) in [
        (&[2, 3, 4][..], &[2, 4, 5][..]),
        (&[2, 3, 1, 4], &[2, 3, 4, 2]),
        (&[8, 64, 64], &[8, 64, 64]),
    ] {
        let args = [array(a, 300), array(b, 301)];
        check_against_interpreter(
            &jit,
            &reference::matmul(),
            &args,
            &[],
            reference::interpret_matmul,
        );
    }
}

#[test]
fn a_changed_temperature_is_never_served_stale_code() {
    let jit = jit();
    let softmax = reference::softmax();
    let x = Value::from(array(&[2, 5], 7));
    let mut compiles = 0;
    for round in 0..3 {
        for t in [0.5f32, 1.0, 0.500_000_06] {
            let result = jit
                .call(
                    &softmax,
                    std::slice::from_ref(&x),
                    &[reference::temperature(t)],
                    |args, _, _| reference::interpret_softmax(args, t),
                )
                .unwrap();
            let expected = reference::interpret_softmax(std::slice::from_ref(&x), t).unwrap();
            assert_close(
                &result.outputs[0],
                &expected[0],
                &format!("temperature {t}"),
            );
            if round == 0 {
                assert!(
                    matches!(
                        result.provenance,
                        Provenance::Compiled(Origin::CompiledNow { .. })
                    ),
                    "temperature {t} is a new key"
                );
                compiles += 1;
            } else {
                assert_eq!(result.provenance, Provenance::Compiled(Origin::Hit));
            }
        }
    }
    assert_eq!(jit.stats().total.compiles, compiles);
}

#[test]
fn twenty_shape_churn_engages_fallback_and_stays_correct() {
    let config = support::blocking()
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .cache(|cache| {
            cache.function_capacity = 8;
            cache.policy = CachePolicy::LruCoolDown;
            cache.thrash_window = 32;
            cache.thrash_threshold = 8;
            cache.thrash_cool_down = 40;
            // Twenty shapes, twenty variants: dynamic dims would serve them all.
            cache.static_shape_functions.insert("sigmoid".into());
        })
        .build()
        .unwrap();
    let jit = JitRuntime::new(config).unwrap();
    let sigmoid = reference::sigmoid();
    let shapes: Vec<Vec<usize>> = (1..=20).map(|n| vec![1, n]).collect();
    let mut interpreted = 0;
    for call in 0..120 {
        let x = [Value::from(array(&shapes[call % 20], call as u32))];
        let result = jit
            .call(&sigmoid, &x, &[], |args, _, _| {
                reference::interpret_sigmoid(args)
            })
            .unwrap();
        let expected = reference::interpret_sigmoid(&x).unwrap();
        assert_close(&result.outputs[0], &expected[0], &format!("call {call}"));
        interpreted += usize::from(matches!(
            result.provenance,
            Provenance::Interpreted(FallbackReason::Thrashing { .. })
        ));
        assert!(jit.stats().total.live_entries <= 8);
    }
    let stats = jit.stats();
    assert!(interpreted > 0, "fallback never engaged: {stats}");
    assert_eq!(stats.total.fallback_calls as usize, interpreted);
    assert!(stats.total.compiles < 120, "{stats}");
}

#[test]
fn a_full_cache_interprets_one_off_shapes_and_keeps_the_hot_ones() {
    let config = support::blocking()
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .cache(|cache| {
            cache.function_capacity = 2;
            // Every shape its own variant: dynamic dims would serve them all.
            cache.dynamic_dims = false;
        })
        .build()
        .unwrap();
    let jit = JitRuntime::new(config).unwrap();
    let sigmoid = reference::sigmoid();
    let call = |n: usize| {
        let x = [Value::from(array(&[1, n], n as u32))];
        let result = jit
            .call(&sigmoid, &x, &[], |args, _, _| {
                reference::interpret_sigmoid(args)
            })
            .unwrap();
        let expected = reference::interpret_sigmoid(&x).unwrap();
        assert_close(&result.outputs[0], &expected[0], &format!("[1, {n}]"));
        result.provenance
    };
    assert!(matches!(
        call(1),
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    assert!(matches!(
        call(2),
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    for n in 3..6 {
        let provenance = call(n);
        assert!(
            matches!(
                provenance,
                Provenance::Interpreted(FallbackReason::NotAdmitted {
                    refusal: Refusal::FirstSeen,
                    ..
                })
            ),
            "{provenance:?}"
        );
        assert_eq!(call(1), Provenance::Compiled(Origin::Hit));
        assert_eq!(call(2), Provenance::Compiled(Origin::Hit));
    }
    let stats = jit.stats();
    assert_eq!(
        (stats.total.compiles, stats.total.admissions_refused),
        (2, 3)
    );
}

/// `2 * sigmoid(x)`, a redefinition of `sigmoid`.
fn doubled_sigmoid() -> JitFunction {
    JitFunction::new(
        "sigmoid",
        "(defn sigmoid [x] (* 2 (/ 1 (+ 1 (exp (- x))))))",
        |ctx| {
            let ty = mlir::arg_type(&ctx.args()[0])?;
            Ok(Lowered::new(format!(
                "func.func @{}(%x: {ty}) -> {ty} {{
               %s = stablehlo.logistic %x : {ty}
               %y = stablehlo.add %s, %s : {ty}
               return %y : {ty}
             }}",
                ctx.entry_symbol()
            )))
        },
    )
}

#[test]
fn a_redefined_function_recompiles() {
    let jit = jit();
    let x = [Value::from(array(&[1, 5], 3))];
    let v1 = reference::sigmoid();
    let provenance = |function: &JitFunction| match jit.dispatch(function, &x, &[]).unwrap() {
        Dispatched::Compiled(compiled) => compiled.provenance,
        Dispatched::Interpret(why) => panic!("interpreted: {why}"),
    };
    assert!(matches!(
        provenance(&v1),
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    assert_eq!(provenance(&v1), Provenance::Compiled(Origin::Hit));
    let v2 = doubled_sigmoid();
    assert_ne!(v1.id(), v2.id());
    let Dispatched::Compiled(result) = jit.dispatch(&v2, &x, &[]).unwrap() else {
        panic!("the redefinition did not run compiled");
    };
    assert!(matches!(
        result.provenance,
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    let expected = ArrayD::from_shape_vec(
        IxDyn(&[1, 5]),
        array(&[1, 5], 3)
            .iter()
            .map(|v| 2.0 / (1.0 + (-v).exp()))
            .collect(),
    )
    .unwrap();
    assert_close(
        &result.outputs[0],
        &Value::host(expected),
        "redefined sigmoid",
    );
}

#[test]
fn device_tensors_chain_through_calls_without_a_host_copy() {
    let jit = jit();
    let sigmoid = reference::sigmoid();
    let x = array(&[2, 3], 11);
    let Dispatched::Compiled(first) = jit
        .dispatch(&sigmoid, &[Value::from(x.clone())], &[])
        .unwrap()
    else {
        panic!("interpreted");
    };
    assert!(first.outputs[0].as_tensor().unwrap().is_device());
    let transfers = jit.profile().phase(Phase::InputTransfer).count;
    let Dispatched::Compiled(second) = jit.dispatch(&sigmoid, &first.outputs, &[]).unwrap() else {
        panic!("interpreted");
    };
    assert_eq!(
        second.provenance,
        Provenance::Compiled(Origin::Hit),
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
        &second.outputs[0],
        &Value::host(expected),
        "sigmoid(sigmoid(x))",
    );
}

#[test]
#[cfg(feature = "disk-cache")]
fn the_disk_cache_lets_a_fresh_runtime_skip_the_compiler() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = || {
        JitRuntime::new(
            support::blocking()
                .disk(|disk| disk.folder = DiskCacheFolder::Dir(dir.path().into()))
                .build()
                .unwrap(),
        )
        .unwrap()
    };
    let x = [Value::from(array(&[4, 2], 5))];
    let run = |jit: &JitRuntime| match jit.dispatch(&reference::sigmoid(), &x, &[]).unwrap() {
        Dispatched::Compiled(compiled) => compiled.provenance,
        Dispatched::Interpret(why) => panic!("interpreted: {why}"),
    };
    let first = fresh();
    assert!(matches!(
        run(&first),
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    let stats = first.disk_cache_stats();
    assert_eq!((stats.hits, stats.misses), (0, 1));
    assert!(first.compiler().is_some(), "the first runtime compiled");
    drop(first);
    let second = fresh();
    assert!(
        matches!(
            run(&second),
            Provenance::Compiled(Origin::CompiledNow { .. })
        ),
        "new to this runtime's cache"
    );
    let stats = second.disk_cache_stats();
    assert_eq!((stats.hits, stats.misses), (1, 0), "served from disk");
    assert!(
        second.compiler().is_none(),
        "a fully cached program never loads the compiler"
    );
}

#[test]
fn runtime_errors_are_returned_not_hidden() {
    let jit = jit();
    // A lowering that ignores the signature: the artifact expects f32[4].
    let fixed: JitFunction = JitFunction::new("fixed", "fixed-shape", |ctx| {
        Ok(Lowered::new(format!(
            "func.func @{}(%x: tensor<4xf32>) -> tensor<4xf32> {{
               %y = stablehlo.negate %x : tensor<4xf32>
               return %y : tensor<4xf32>
             }}",
            ctx.entry_symbol()
        )))
    });
    let error = jit
        .dispatch(&fixed, &[Value::from(array(&[5], 1))], &[])
        .unwrap_err();
    let message = ErrorChain(&error).to_string();
    assert!(matches!(error, JitError::Runtime(_)), "{message}");
    assert!(message.contains("mismatch"), "{message}");
}

#[test]
fn a_failed_compile_runs_the_interpreter_with_the_diagnostic() {
    let jit = jit();
    let broken: JitFunction = JitFunction::new("broken", "type error", |ctx| {
        Ok(Lowered::new(format!(
            "func.func @{}(%x: tensor<4xf32>) -> tensor<4xi32> {{ return %x : tensor<4xf32> }}",
            ctx.entry_symbol()
        )))
    });
    let x = [Value::from(array(&[4], 2))];
    for _ in 0..3 {
        let result = jit
            .call(&broken, &x, &[], |args, _, _| {
                Ok::<_, ReferenceError>(args.to_vec())
            })
            .unwrap();
        let Provenance::Interpreted(fallback) = &result.provenance else {
            panic!("expected a failed compile, got {:?}", result.provenance);
        };
        // The compiler's diagnostics arrive whole, not as text, and name the
        // function and signature instead of `<stdin>`.
        let Some(VariantError::Compile {
            function, source, ..
        }) = VariantError::of_fallback(fallback)
        else {
            panic!("expected the compiler's error, got {fallback:?}");
        };
        assert_eq!(function, "broken");
        let diagnostic = &source.diagnostics()[0];
        assert_eq!(diagnostic.severity, Severity::Error);
        let location = diagnostic.location.as_ref().expect("a located diagnostic");
        assert_eq!(location.file, "broken(f32[4])");
        assert!(location.line >= 1, "{diagnostic}");
        assert_close(&result.outputs[0], &x[0], "the interpreter's result");
    }
    let stats = jit.stats();
    assert_eq!(
        (stats.total.compiles, stats.total.failed_compiles),
        (1, 1),
        "one attempt, remembered: {stats}"
    );
}

#[test]
fn a_call_that_waited_for_another_calls_compile_says_so() {
    let jit = jit();
    let sigmoid = reference::sigmoid();
    let barrier = std::sync::Barrier::new(2);
    let provenances: Vec<Provenance> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let (jit, sigmoid, barrier) = (&jit, &sigmoid, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    // The second caller arrives while the first compiles
                    // (a compile takes hundreds of milliseconds).
                    std::thread::sleep(std::time::Duration::from_millis(50 * i));
                    match jit
                        .dispatch(sigmoid, &[Value::from(array(&[3, 3], 1))], &[])
                        .unwrap()
                    {
                        Dispatched::Compiled(compiled) => compiled.provenance,
                        Dispatched::Interpret(why) => panic!("interpreted: {why}"),
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        matches!(
            provenances[..],
            [
                Provenance::Compiled(Origin::CompiledNow { .. }),
                Provenance::Compiled(Origin::CompiledByOtherCall)
            ]
        ),
        "{provenances:?}"
    );
    assert_eq!(jit.stats().total.compiles, 1);
}
