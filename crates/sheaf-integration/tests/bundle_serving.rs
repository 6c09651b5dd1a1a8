//! Ahead-of-time artifacts through the one runtime: a bundle serves a
//! process that has no compiler by function name, definition hash and
//! signature (no lowering), dynamic-dim variants and `precompile` batches
//! included; the disk cache serves a process without a compiler too.

mod support;

use std::path::Path;

use sheaf_integration::{
    artifacts::{ArtifactSource, Precompile},
    compiler::CompilerPreference,
    lowering::{Lowered, Signature},
    reference,
    settings::{CompileMode, DiskCacheFolder},
    stats::Phase,
    CapturedScalar, Dispatched, FallbackReason, JitConfig, JitFunction, JitRuntime, ScalarValue,
    Value,
};
use support::{array, assert_close};

/// A runtime with no compiler, serving `bundle` (if any) and the disk cache
/// in `disk` (if any), compiling in the background (the default).
fn without_compiler(bundle: Option<&Path>, disk: Option<&Path>) -> JitRuntime {
    let mut config = JitConfig::builder()
        .compile(|compile| compile.compiler = CompilerPreference::Disabled)
        .disk(|d| {
            d.folder = match disk {
                Some(dir) => DiskCacheFolder::Dir(dir.to_path_buf()),
                None => DiskCacheFolder::Disabled,
            }
        });
    if let Some(bundle) = bundle {
        config = config.artifact_bundle(bundle);
    }
    JitRuntime::new(config.build().unwrap()).unwrap()
}

/// A runtime that compiles (blocking) into the disk cache in `cache`.
fn compiling_into(cache: &Path) -> JitRuntime {
    let config = support::blocking().disk(|d| d.folder = DiskCacheFolder::Dir(cache.to_path_buf()));
    JitRuntime::new(config.build().unwrap()).unwrap()
}

/// `function`'s identity with no lowering: a process that must not lower.
fn unlowered(function: &JitFunction) -> JitFunction {
    JitFunction::lowered_per_call(function.name(), function.id().definition_hash())
        .with_dynamic_dims()
}

fn mlp_args(batch: usize) -> [Value; 3] {
    [
        Value::from(array(&[batch, 8], 1)),
        Value::from(array(&[8, 4], 2)),
        Value::from(array(&[4], 3)),
    ]
}

#[test]
fn a_bundle_serves_a_process_with_no_compiler_and_no_lowering() {
    let (cache, bundle) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = compiling_into(cache.path());
    let (sigmoid, mlp, softmax) = (
        reference::sigmoid(),
        reference::mlp_layer(),
        reference::softmax(),
    );
    let x = [Value::from(array(&[2, 5], 4))];
    assert!(matches!(
        first.dispatch(&sigmoid, &x, &[]).unwrap(),
        Dispatched::Compiled(_)
    ));
    // Batch 1 compiles static, batch 2 the dynamic variant (3 hits it).
    for batch in [1, 2, 3] {
        assert!(matches!(
            first.dispatch(&mlp, &mlp_args(batch), &[]).unwrap(),
            Dispatched::Compiled(_)
        ));
    }
    // Two temperatures in one precompiled module.
    let temperatures = [[reference::temperature(0.5)], [reference::temperature(2.0)]];
    let batch: Vec<_> = temperatures
        .iter()
        .map(|t| Precompile::new(&softmax, &x).captured(t))
        .collect();
    first.precompile(&batch).unwrap();
    let summary = first.export_artifacts(bundle.path()).unwrap();
    assert_eq!(
        (summary.artifacts, summary.variants, summary.skipped),
        (4, 5, 0),
        "sigmoid, mlp at 1 and dynamic, and one module for both softmaxes: {summary:?}"
    );

    let second = without_compiler(Some(bundle.path()), None);
    assert_eq!(second.compile_mode(), CompileMode::Background);
    let never = |_: &sheaf_integration::lowering::LoweringContext<'_>| -> Result<Lowered, _> {
        panic!("a bundle serves without lowering")
    };
    let served = |function: &JitFunction, args: &[Value], captured| {
        let outcome = second
            .dispatch_with(&unlowered(function), args, captured, never)
            .unwrap();
        let Dispatched::Compiled(compiled) = outcome else {
            panic!(
                "{} is served compiled from its first call: {outcome:?}",
                function.name()
            )
        };
        assert_eq!(compiled.source(), ArtifactSource::Bundle);
        compiled.outputs
    };
    let outputs = served(&sigmoid, &x, &[]);
    assert_close(
        &outputs[0],
        &reference::interpret_sigmoid(&x).unwrap()[0],
        "sigmoid",
    );
    // A batch size the first process never saw: its dynamic variant.
    for batch in [7, 1, 7] {
        let args = mlp_args(batch);
        let outputs = served(&mlp, &args, &[]);
        let expected = reference::interpret_mlp_layer(&args).unwrap();
        assert_close(&outputs[0], &expected[0], "mlp_layer");
    }
    for (t, value) in temperatures.iter().zip([0.5, 2.0]) {
        let outputs = served(&softmax, &x, t);
        let expected = reference::interpret_softmax(&x, value).unwrap();
        assert_close(&outputs[0], &expected[0], "softmax from the batch");
    }
    let profile = second.profile();
    assert_eq!(profile.phase(Phase::Lower).count, 0, "{profile}");
    assert_eq!(
        profile.loaded_from(ArtifactSource::Compiler),
        0,
        "{profile}"
    );
    assert!(second.compiler().is_none());

    // A signature the bundle lacks lowers, and without a compiler is
    // interpreted, saying why.
    let y = [Value::from(array(&[3, 3, 3], 5))];
    assert!(matches!(
        second.dispatch(&sigmoid, &y, &[]).unwrap(),
        Dispatched::Interpret(_)
    ));
    assert!(second.wait_for_compiles(std::time::Duration::from_secs(60)));
    let outcome = second.dispatch(&sigmoid, &y, &[]).unwrap();
    let Dispatched::Interpret(FallbackReason::CompileFailed(failure)) = outcome else {
        panic!("no compiler: {outcome:?}")
    };
    let chain = sheaf_integration::ErrorChain(&*failure).to_string();
    assert!(chain.contains("without a compiler"), "{chain}");

    // What the second process served, it exports again.
    let again = tempfile::tempdir().unwrap();
    let summary = second.export_artifacts(again.path()).unwrap();
    assert_eq!(summary.skipped, 0, "{summary:?}");
    assert!(summary.variants >= 4, "{summary:?}");
}

#[test]
fn the_disk_cache_serves_a_process_with_no_compiler() {
    let cache = tempfile::tempdir().unwrap();
    let first = compiling_into(cache.path());
    let x = [Value::from(array(&[4, 4], 6))];
    let Dispatched::Compiled(compiled) = first.dispatch(&reference::sigmoid(), &x, &[]).unwrap()
    else {
        panic!("blocking")
    };
    assert_eq!(compiled.source(), ArtifactSource::Compiler);
    drop(first);

    // In the background (the default): a disk hit is loaded on the calling
    // thread, and the call runs it.
    let second = without_compiler(None, Some(cache.path()));
    assert_eq!(second.compile_mode(), CompileMode::Background);
    let outcome = second.dispatch(&reference::sigmoid(), &x, &[]).unwrap();
    let Dispatched::Compiled(compiled) = outcome else {
        panic!("the disk cache has it, under the compiler it recorded: {outcome:?}")
    };
    assert_eq!(compiled.source(), ArtifactSource::DiskCache);
    assert_close(
        &compiled.outputs[0],
        &reference::interpret_sigmoid(&x).unwrap()[0],
        "sigmoid from disk",
    );
    let profile = second.profile();
    assert_eq!(profile.phase(Phase::Lower).count, 1, "found by its key");
    assert_eq!(profile.loaded_from(ArtifactSource::DiskCache), 1);
    assert!(second.compiler().is_none());
}

/// `x` times the product of its captured scalars (f32), baked into the
/// code: two signatures that differ in them compute different results.
fn scaled() -> JitFunction {
    JitFunction::new("scaled", "(defn scaled [x] (* x a t))", |ctx| {
        let factor: f32 = ctx
            .signature()
            .captured()
            .iter()
            .map(|c| match c.value() {
                ScalarValue::F32(v) => v,
                other => panic!("scaled takes f32 scalars, got {other:?}"),
            })
            .product();
        let ty = sheaf_integration::mlir::arg_type(&ctx.args()[0])?;
        Ok(Lowered::new(format!(
            "func.func @{entry}(%x: {ty}) -> {ty} {{
               %c = stablehlo.constant dense<{factor}> : {ty}
               %y = stablehlo.multiply %x, %c : {ty}
               return %y : {ty}
             }}",
            entry = ctx.entry_symbol(),
            factor = sheaf_integration::mlir::f32_literal(factor),
        )))
    })
}

/// The f32 values of a result, in order.
fn values(value: &Value) -> Vec<f32> {
    value.to_f32().unwrap().iter().copied().collect()
}

fn captured(name: &str, value: f32) -> CapturedScalar {
    CapturedScalar::new(name, ScalarValue::F32(value))
}

/// Two captured scalars `{a=2, t=3}` and one named `"a=2.0, t"` display
/// alike; a bundle exported with the first never serves the second, whose
/// code scales by 3, not 6 (it did, when the manifest matched signatures by
/// their display), even with a compiler at hand.
#[test]
fn a_bundle_never_serves_one_signature_for_another_that_displays_alike() {
    let (cache, bundle) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let x = [Value::host(
        ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[1, 5]), vec![1.0f32, 2.0, 3.0, 4.0, 5.0])
            .unwrap(),
    )];
    let two = [captured("a", 2.0), captured("t", 3.0)];
    let one = [captured("a=2.0, t", 3.0)];
    let function = scaled();
    let first = compiling_into(cache.path());
    let outcome = first.dispatch(&function, &x, &two).unwrap();
    let Dispatched::Compiled(compiled) = outcome else {
        panic!("blocking: {outcome:?}")
    };
    assert_eq!(values(&compiled.outputs[0]), [6.0, 12.0, 18.0, 24.0, 30.0]);
    first.export_artifacts(bundle.path()).unwrap();
    drop(first);

    let second = JitRuntime::new(
        support::blocking()
            .disk(|d| d.folder = DiskCacheFolder::Disabled)
            .artifact_bundle(bundle.path())
            .build()
            .unwrap(),
    )
    .unwrap();
    let signature = |captured: &[CapturedScalar]| {
        let mut b = Signature::builder();
        b.arg(sheaf_integration::DType::F32, &[1, 5]);
        for c in captured {
            b.captured(c.clone());
        }
        b.build()
    };
    assert_eq!(signature(&two).to_string(), signature(&one).to_string());
    assert_ne!(
        function.variant_symbol(&signature(&two)),
        function.variant_symbol(&signature(&one))
    );
    let Dispatched::Compiled(compiled) = second.dispatch(&function, &x, &one).unwrap() else {
        panic!("blocking")
    };
    assert_eq!(compiled.source(), ArtifactSource::Compiler);
    assert_eq!(values(&compiled.outputs[0]), [3.0, 6.0, 9.0, 12.0, 15.0]);
    // The signature it was exported for is still served from it.
    let Dispatched::Compiled(compiled) = second.dispatch(&function, &x, &two).unwrap() else {
        panic!("blocking")
    };
    assert_eq!(compiled.source(), ArtifactSource::Bundle);
}

/// A manifest edited to list an artifact for a signature its code does not
/// take is not served from: the call is interpreted (no compiler here),
/// never an IREE shape error on every call.
#[test]
fn a_stale_manifest_entry_is_not_served() {
    let (cache, bundle) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = compiling_into(cache.path());
    let sigmoid = reference::sigmoid();
    let x = [Value::from(array(&[2, 5], 4))];
    let _ = first.dispatch(&sigmoid, &x, &[]).unwrap();
    first.export_artifacts(bundle.path()).unwrap();
    drop(first);
    let manifest = bundle.path().join("manifest.txt");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let edited = text.replace("f32[2,5]", "f32[3,5]");
    assert_ne!(text, edited, "{text}");
    std::fs::write(&manifest, edited).unwrap();

    let second = without_compiler(Some(bundle.path()), None);
    let y = [Value::from(array(&[3, 5], 4))];
    let never = |_: &sheaf_integration::lowering::LoweringContext<'_>| -> Result<Lowered, _> {
        Err("no lowering in this process".into())
    };
    for _ in 0..3 {
        let outcome = second
            .dispatch_with(&unlowered(&sigmoid), &y, &[], never)
            .unwrap();
        assert!(
            matches!(outcome, Dispatched::Interpret(_)),
            "not served from the edited entry: {outcome:?}"
        );
    }
}
