//! What Sheaf's call path needs, end to end on the real runtime and
//! compiler: structured arguments and results, static and run-time scalars,
//! per-variant metadata, the interpreter's own state and errors, every
//! element type Sheaf holds, the upload cache, devices and targets, the
//! compiler loaded only when needed, and artifact bundles.

mod support;

use std::sync::Arc;

use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    artifacts::BundleError,
    compiler::CompileTarget,
    lowering::{Lowered, LoweringContext, LoweringError, VariantError},
    mlir,
    settings::DiskCacheFolder,
    stats::Origin,
    CallError, DType, Dispatched, ErrorChain, FallbackReason, HostTensor, JitConfig, JitError,
    JitFunction, JitRuntime, Provenance, ScalarValue, Tensor, Value,
};
use support::structured::{affine, params};
use support::{array, assert_close, jit};

#[test]
fn dict_arguments_and_results_with_metadata_and_a_scalar_result() {
    let jit = jit();
    let (b, w, x) = (array(&[4], 1), array(&[4], 2), array(&[4], 3));
    let args = [
        params(b.clone(), w.clone(), ("b", "w")),
        Value::from(x.clone()),
    ];
    let Dispatched::Compiled(compiled) = jit.dispatch(&affine(), &args, &[]).unwrap() else {
        panic!("affine did not compile");
    };
    assert_eq!(compiled.metadata().return_keys, ["n", "y"]);
    let [result] = &compiled.outputs[..] else {
        panic!("{:?}", compiled.outputs)
    };
    let expected_y = &x * &w + &b;
    assert_close(result.get("y").unwrap(), &Value::from(expected_y), "y");
    let n = result.get("n").unwrap().to_scalar().unwrap();
    let ScalarValue::F32(n) = n else {
        panic!("{n:?}")
    };
    assert!((n - x.sum()).abs() < 1e-4, "{n} vs {}", x.sum());

    // The same leaves under other keys are another signature: compiled code
    // for `{b, w}` is never served, and the miss says why.
    let renamed = [params(b, w, ("bias", "weight")), Value::from(x)];
    let Dispatched::Compiled(again) = jit.dispatch(&affine(), &renamed, &[]).unwrap() else {
        panic!("affine did not compile");
    };
    assert!(matches!(
        again.provenance,
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    let stats = jit.stats();
    assert_eq!(stats.total.compiles, 2);
    assert_eq!(
        stats.functions[0].last_miss.as_ref().unwrap().to_string(),
        "argument structure {b: T, w: T}, T → {bias: T, weight: T}, T"
    );
}

/// `(defn twice [x] (+ x x))`, whose lowering hands back `metadata` with
/// each variant.
fn twice<M: Clone + Send + Sync + 'static>(metadata: M) -> JitFunction<M> {
    JitFunction::new("twice", "(defn twice [x] (+ x x))", move |ctx| {
        Ok(x_plus_x(ctx)?.with_metadata(metadata.clone()))
    })
}

#[test]
fn functions_that_differ_only_in_their_metadata_type_never_share_variants() {
    let jit = jit();
    let (counted, named) = (twice(2_usize), twice("two".to_owned()));
    assert_eq!(counted.name(), named.name());
    assert_eq!(counted.id().definition_hash(), named.id().definition_hash());
    assert_ne!(counted.id(), named.id(), "the metadata type is identity");
    let x = [Value::from(array(&[3], 1))];
    for round in 0..2 {
        let Dispatched::Compiled(a) = jit.dispatch(&counted, &x, &[]).unwrap() else {
            panic!("twice did not compile")
        };
        let Dispatched::Compiled(b) = jit.dispatch(&named, &x, &[]).unwrap() else {
            panic!("twice did not compile")
        };
        assert_eq!((*a.metadata(), b.metadata().as_str()), (2, "two"));
        assert_eq!(a.provenance.is_hit(), round == 1, "{:?}", a.provenance);
        assert_eq!(b.provenance.is_hit(), round == 1, "{:?}", b.provenance);
    }
    assert_eq!(jit.stats().total.compiles, 2, "one variant each");
}

/// `(defn scale [x k])` with `k` static (baked in), and `(defn axpy [a x y])`
/// with `a` a scalar passed at run time.
fn scale() -> JitFunction {
    JitFunction::new("scale", "(defn scale [x k] (* x k))", |ctx| {
        let ([x], [ScalarValue::I64(k)]) = (ctx.args(), ctx.statics()) else {
            return Err("scale takes a tensor and a static i64".into());
        };
        let ty = mlir::arg_type(x)?;
        Ok(Lowered::new(format!(
            "func.func @{}(%x: {ty}) -> {ty} {{
               %k = stablehlo.constant dense<{k}.0> : {ty}
               %y = stablehlo.multiply %x, %k : {ty}
               return %y : {ty}
             }}",
            ctx.entry_symbol()
        )))
    })
}

fn axpy() -> JitFunction {
    JitFunction::new("axpy", "(defn axpy [a x y] (+ (* a x) y))", |ctx| {
        let [a, x, _] = ctx.args() else {
            return Err("axpy takes a, x and y".into());
        };
        if a.rank() != 0 {
            return Err(format!("a must be a scalar, got {a}").into());
        }
        let (ta, ty) = (mlir::arg_type(a)?, mlir::arg_type(x)?);
        Ok(Lowered::new(format!(
            "func.func @{}(%a: {ta}, %x: {ty}, %y: {ty}) -> {ty} {{
               %ab = stablehlo.broadcast_in_dim %a, dims = [] : ({ta}) -> {ty}
               %ax = stablehlo.multiply %ab, %x : {ty}
               %r = stablehlo.add %ax, %y : {ty}
               return %r : {ty}
             }}",
            ctx.entry_symbol()
        )))
    })
}

fn compiled(jit: &JitRuntime, function: &JitFunction, args: &[Value]) -> (Vec<Value>, Provenance) {
    match jit.dispatch(function, args, &[]).unwrap() {
        Dispatched::Compiled(compiled) => (compiled.outputs, compiled.provenance),
        Dispatched::Interpret(why) => panic!("{} interpreted: {why}", function.name()),
    }
}

#[test]
fn static_scalars_key_by_value_and_run_time_scalars_by_dtype() {
    let jit = jit();
    let x = array(&[3], 4);
    for (k, expect_hit) in [(2, false), (3, false), (2, true)] {
        let args = [Value::from(x.clone()), Value::Static(ScalarValue::I64(k))];
        let (outputs, provenance) = compiled(&jit, &scale(), &args);
        assert_eq!(provenance.is_hit(), expect_hit, "k = {k}: {provenance:?}");
        assert_close(&outputs[0], &Value::from(x.mapv(|v| v * k as f32)), "x * k");
    }
    let y = array(&[3], 5);
    for (a, expect_hit) in [(2.0f32, false), (-0.5, true)] {
        let args = [
            Value::Scalar(ScalarValue::F32(a)),
            Value::from(x.clone()),
            Value::from(y.clone()),
        ];
        let (outputs, provenance) = compiled(&jit, &axpy(), &args);
        assert_eq!(provenance.is_hit(), expect_hit, "a = {a}: {provenance:?}");
        assert_close(&outputs[0], &Value::from(&x * a + &y), "a * x + y");
    }
}

/// `(defn double [x] (+ x x))` for any element type.
fn double() -> JitFunction {
    JitFunction::new("double", "(defn double [x] (+ x x))", x_plus_x)
}

/// The lowering of `(+ x x)` for any element type and shape.
fn x_plus_x(ctx: &LoweringContext<'_>) -> Result<Lowered, LoweringError> {
    let ty = mlir::arg_type(&ctx.args()[0])?;
    Ok(Lowered::new(format!(
        "func.func @{}(%x: {ty}) -> {ty} {{
           %y = stablehlo.add %x, %x : {ty}
           return %y : {ty}
         }}",
        ctx.entry_symbol()
    )))
}

#[test]
fn every_element_type_sheaf_holds_goes_both_ways() {
    let jit = jit();
    let values = [1.5f32, -2.25, 0.0, 3.0];
    let host = |array: HostTensor| Value::from(array);
    let cases: Vec<(Value, DType)> = vec![
        (
            host(
                ArrayD::from_shape_vec(IxDyn(&[4]), values.to_vec())
                    .unwrap()
                    .into(),
            ),
            DType::F32,
        ),
        (
            host(
                ArrayD::from_shape_vec(IxDyn(&[4]), values.map(f64::from).to_vec())
                    .unwrap()
                    .into(),
            ),
            DType::F64,
        ),
        (
            host(
                ArrayD::from_shape_vec(IxDyn(&[4]), values.map(f16::from_f32).to_vec())
                    .unwrap()
                    .into(),
            ),
            DType::F16,
        ),
        (
            host(
                ArrayD::from_shape_vec(IxDyn(&[4]), values.map(bf16::from_f32).to_vec())
                    .unwrap()
                    .into(),
            ),
            DType::BF16,
        ),
        (
            host(
                ArrayD::from_shape_vec(IxDyn(&[4]), vec![1i32, -2, 0, 3])
                    .unwrap()
                    .into(),
            ),
            DType::I32,
        ),
        (
            host(
                ArrayD::from_shape_vec(IxDyn(&[4]), vec![1i64, -2, 0, 3])
                    .unwrap()
                    .into(),
            ),
            DType::I64,
        ),
        // Sheaf's own: f32 storage tagged bf16, converted on the way in.
        (
            host(
                HostTensor::tagged(
                    Arc::new(ArrayD::from_shape_vec(IxDyn(&[4]), values.to_vec()).unwrap()),
                    DType::BF16,
                )
                .unwrap(),
            ),
            DType::BF16,
        ),
    ];
    for (value, dtype) in cases {
        let (outputs, _) = compiled(&jit, &double(), std::slice::from_ref(&value));
        let result = outputs[0].to_host().unwrap();
        assert_eq!(result.dtype(), dtype, "{dtype} in, {dtype} out");
        let doubled: Vec<f64> = match &result {
            HostTensor::F32(a) => a.iter().map(|&v| f64::from(v)).collect(),
            HostTensor::F64(a) => a.iter().copied().collect(),
            HostTensor::F16(a) => a.iter().map(|v| f64::from(v.to_f32())).collect(),
            HostTensor::BF16(a) => a.iter().map(|v| f64::from(v.to_f32())).collect(),
            HostTensor::I32(a) => a.iter().map(|&v| f64::from(v)).collect(),
            HostTensor::I64(a) => a.iter().map(|&v| v as f64).collect(),
            other => panic!("{other:?}"),
        };
        let expected = if matches!(dtype, DType::I32 | DType::I64) {
            [2.0, -4.0, 0.0, 6.0]
        } else {
            values.map(|v| f64::from(2.0 * v))
        };
        assert_eq!(doubled, expected, "{dtype}");
    }
}

#[test]
fn reused_host_arrays_are_uploaded_once() {
    let jit = jit();
    let mlp = sheaf_integration::reference::mlp_layer();
    let w = Value::from(HostTensor::F32(Arc::new(array(&[16, 8], 1))));
    let b = Value::from(HostTensor::F32(Arc::new(array(&[8], 2))));
    for call in 0..10 {
        let x = Value::from(array(&[4, 16], 10 + call));
        let args = [x, w.clone(), b.clone()];
        let (outputs, _) = compiled(&jit, &mlp, &args);
        let expected = sheaf_integration::reference::interpret_mlp_layer(&args).unwrap();
        assert_close(&outputs[0], &expected[0], "mlp_layer");
    }
    let stats = jit.upload_stats();
    // x is new each call (10 uploads); W and b are uploaded on their first
    // and second use, then served from the cache (16 hits).
    assert_eq!((stats.uploads, stats.hits), (14, 16), "{stats:?}");
    assert_eq!(stats.entries, 2);
    // A public upload goes through the same cache.
    let tensor = jit.upload(&w.to_host().unwrap()).unwrap();
    assert_eq!(tensor.shape(), &[16, 8]);
    assert_eq!(jit.upload_stats().hits, 17);
}

#[derive(Debug, thiserror::Error)]
#[error("the interpreter has no rule for `{0}`")]
struct NoRule(String);

#[test]
fn the_interpreter_keeps_its_own_state_error_and_the_lowering_reason() {
    let jit = jit();
    let picky: JitFunction = JitFunction::new("picky", "(defn picky [x] x)", |ctx| {
        Err(LoweringError::new(format!(
            "no lowering for {}",
            ctx.signature()
        )))
    });
    // The caller's own interpreter state, borrowed mutably by the closure.
    let mut environment = [("picky".to_owned(), 0usize)];
    for _ in 0..2 {
        let result = jit
            .call(
                &picky,
                &[Value::from(array(&[2], 1))],
                &[],
                |args, _, why| {
                    environment[0].1 += 1;
                    assert!(matches!(why, FallbackReason::CompileFailed(_)));
                    Ok::<_, NoRule>(args.to_vec())
                },
            )
            .unwrap();
        let Provenance::Interpreted(fallback) = &result.provenance else {
            panic!()
        };
        let Some(VariantError::Lowering { source, .. }) = VariantError::of_fallback(fallback)
        else {
            panic!("{fallback:?}");
        };
        assert_eq!(source.to_string(), "no lowering for (f32[2])");
    }
    assert_eq!(environment[0].1, 2);
    // The interpreter's own error comes back whole, with why it had to run.
    let error = jit
        .call(&picky, &[Value::from(array(&[2], 1))], &[], |_, _, _| {
            Err(NoRule("picky".into()))
        })
        .unwrap_err();
    let CallError::Interpreter {
        source, fallback, ..
    } = &error
    else {
        panic!("{error}")
    };
    assert_eq!(source.0, "picky");
    assert!(
        fallback.to_string().contains("no lowering for (f32[2])"),
        "{fallback}"
    );
    let message = ErrorChain(&error).to_string();
    assert!(message.contains("no rule for `picky`"), "{message}");
}

#[test]
fn code_compiles_for_metal_on_linux_and_a_metal_device_is_a_clear_error() {
    let sigmoid = sheaf_integration::reference::sigmoid();
    let mut builder = sheaf_integration::lowering::Signature::builder();
    builder.arg(DType::F32, &[1, 5]);
    let module = sigmoid.module_text(&builder.build()).unwrap();
    let mut options = JitConfig::default().compile.options;
    options.target = CompileTarget::Metal;
    let compiler = iree_safe::compiler::choose_compiler(Default::default()).unwrap();
    let metal = compiler.compiler.compile(&module, &options).unwrap();
    assert!(
        metal.len() > 1000,
        "a Metal artifact of {} bytes",
        metal.len()
    );

    let error = JitRuntime::new(
        support::blocking()
            .device(|device| {
                device.driver = "metal".into();
                device.cpu_fallback = None;
            })
            .build()
            .unwrap(),
    )
    .unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, JitError::Unsupported(_)), "{message}");
    assert!(message.contains("only on macOS"), "{message}");
}

#[test]
fn code_compiles_for_cuda_without_a_gpu_and_the_cpu_takes_over() {
    // The compile step for CUDA runs anywhere: the artifact is real.
    let sigmoid = sheaf_integration::reference::sigmoid();
    let mut builder = sheaf_integration::lowering::Signature::builder();
    builder.arg(DType::F32, &[1, 5]);
    let module = sigmoid.module_text(&builder.build()).unwrap();
    let mut options = JitConfig::default().compile.options;
    options.target = CompileTarget::Cuda {
        arch: "sm_80".into(),
    };
    let compiler = iree_safe::compiler::choose_compiler(Default::default()).unwrap();
    let cuda = compiler.compiler.compile(&module, &options).unwrap();
    assert!(cuda.len() > 1000, "a CUDA artifact of {} bytes", cuda.len());

    // A runtime asked to produce CUDA code on a machine without a CUDA
    // device: loading it fails, and the signature runs on the CPU instead.
    let jit = JitRuntime::new(
        support::blocking()
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
            .compile(|compile| {
                compile.target = Some(CompileTarget::Cuda {
                    arch: "sm_80".into(),
                })
            })
            .build()
            .unwrap(),
    )
    .unwrap();
    let x = Value::from(array(&[1, 5], 1));
    let (outputs, provenance) = compiled(&jit, &sigmoid, std::slice::from_ref(&x));
    assert!(matches!(
        provenance,
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    let expected = sheaf_integration::reference::interpret_sigmoid(&[x]).unwrap();
    assert_close(&outputs[0], &expected[0], "sigmoid on the CPU fallback");

    // Without the fallback, the failure is the call's: it is interpreted.
    let strict = JitRuntime::new(
        support::blocking()
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
            .compile(|compile| {
                compile.target = Some(CompileTarget::Cuda {
                    arch: "sm_80".into(),
                })
            })
            .device(|device| device.cpu_fallback = None)
            .build()
            .unwrap(),
    )
    .unwrap();
    let result = strict
        .dispatch(&sigmoid, &[Value::from(array(&[1, 5], 1))], &[])
        .unwrap();
    let Dispatched::Interpret(fallback) = result else {
        panic!("a CUDA artifact ran on the CPU")
    };
    assert!(
        matches!(
            VariantError::of_fallback(&fallback),
            Some(VariantError::Load { .. })
        ),
        "{fallback:?}"
    );
}

#[test]
fn a_device_that_cannot_be_opened_falls_back_to_the_cpu_or_fails_clearly() {
    // No CUDA device here: the driver finds no libcuda (or no GPU).
    let jit = JitRuntime::new(
        support::blocking()
            .device(|device| device.driver = "cuda".into())
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
            .build()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(jit.runtime().device().uri(), "local-sync");
    let (outputs, _) = compiled(&jit, &double(), &[Value::from(array(&[2], 1))]);
    assert_close(
        &outputs[0],
        &Value::from(array(&[2], 1).mapv(|v| 2.0 * v)),
        "double",
    );
    let error = JitRuntime::new(
        support::blocking()
            .device(|device| device.driver = "cuda".into())
            .device(|device| device.cpu_fallback = None)
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
            .build()
            .unwrap(),
    )
    .unwrap_err();
    let message = ErrorChain(&error).to_string();
    assert!(matches!(error, JitError::Runtime(_)), "{message}");
    assert!(message.contains("cuda"), "{message}");
}

#[test]
fn exported_artifacts_serve_a_runtime_without_compiling() {
    let (cache, bundle) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let x = || Value::from(array(&[2, 3], 1));
    let first = JitRuntime::new(
        support::blocking()
            .disk(|disk| disk.folder = DiskCacheFolder::project(cache.path()))
            .build()
            .unwrap(),
    )
    .unwrap();
    compiled(&first, &double(), &[x()]);
    compiled(&first, &sheaf_integration::reference::sigmoid(), &[x()]);
    let summary = first.export_artifacts(bundle.path()).unwrap();
    assert_eq!((summary.artifacts, summary.skipped), (2, 0), "{summary:?}");
    assert!(
        cache.path().join("__sheaf__/jit-cache/vmfb").is_dir(),
        "the project-local cache"
    );
    let manifest = std::fs::read_to_string(bundle.path().join("manifest.txt")).unwrap();
    assert!(
        manifest.starts_with("sheaf-jit bundle 4\ncompiler "),
        "{manifest}"
    );
    assert_eq!(
        manifest
            .lines()
            .filter(|l| l.starts_with("entry\t"))
            .count(),
        2
    );

    // A fresh runtime with no disk cache: the bundle serves both, and the
    // compiler is never loaded.
    let second = JitRuntime::new(
        support::blocking()
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
            .artifact_bundle(bundle.path())
            .build()
            .unwrap(),
    )
    .unwrap();
    let (outputs, provenance) = compiled(&second, &double(), &[x()]);
    assert!(matches!(
        provenance,
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    assert_close(
        &outputs[0],
        &Value::from(array(&[2, 3], 1).mapv(|v| 2.0 * v)),
        "double from the bundle",
    );
    compiled(&second, &sheaf_integration::reference::sigmoid(), &[x()]);
    assert!(
        second.compiler().is_none(),
        "the bundle served every signature"
    );
    // A signature the bundle lacks is compiled as usual.
    compiled(&second, &double(), &[Value::from(array(&[7], 1))]);
    assert!(second.compiler().is_some());

    // A bundle for another runtime build, or a damaged one, is refused at start.
    let manifest_path = bundle.path().join("manifest.txt");
    std::fs::write(
        &manifest_path,
        manifest.replace("\nruntime ", "\nruntime other-"),
    )
    .unwrap();
    let error = JitRuntime::new(
        support::blocking()
            .artifact_bundle(bundle.path())
            .build()
            .unwrap(),
    )
    .unwrap_err();
    let message = ErrorChain(&error).to_string();
    assert!(
        matches!(
            &error,
            JitError::Bundle {
                source: BundleError::RuntimeMismatch { .. },
                ..
            }
        ),
        "{message}"
    );
    assert!(message.contains("export it again"), "{message}");
    let tensor = Tensor::Host(array(&[1], 1).into());
    assert!(tensor.arg_spec().is_ok());
}
