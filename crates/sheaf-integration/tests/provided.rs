//! A module compiled outside the library (by `iree-compile`, run here on an
//! MLIR file) is served by the cache like its own variants once provided:
//! a call with a provided signature hits it, with no lowering and no
//! compile; a module whose declarations, entries or target do not match
//! what it is said to serve is refused whole.

mod support;

use sheaf_integration::{
    artifacts::{ArtifactSource, ProvideError, ProvidedFunction},
    compiler::CompileTarget,
    lowering::Signature,
    reference,
    settings::{CompileMode, DiskCacheFolder},
    stats::{Origin, Phase},
    DType, Dispatched, JitConfig, JitError, JitRuntime, Provenance, Value,
};
use support::{array, assert_close, compiled_outside};

/// Two sigmoids, for `f32[4]` and `f32[2,3]`, with names of their own.
const MODULE: &str = r#"
func.func @sigmoid_4(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = stablehlo.logistic %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @sigmoid_2x3(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = stablehlo.logistic %x : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
"#;

fn runtime() -> JitRuntime {
    let config = JitConfig::builder()
        .compile(|compile| compile.mode = CompileMode::Blocking)
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled);
    JitRuntime::new(config.build().unwrap()).unwrap()
}

fn f32_sig(dims: &[i64]) -> Signature {
    Signature::builder().arg(DType::F32, dims).build()
}

#[test]
fn a_provided_module_serves_its_signatures_without_lowering_or_compiling() {
    let dir = tempfile::tempdir().unwrap();
    let jit = runtime();
    let target = jit.compile_options().target.clone();
    let artifact = compiled_outside(dir.path(), MODULE, &target);
    let sigmoid = reference::sigmoid();
    let summary = jit
        .provide_artifact(
            artifact.vmfb(),
            &target,
            vec![
                ProvidedFunction::new(&sigmoid, "sigmoid_4", f32_sig(&[4])),
                ProvidedFunction::new(&sigmoid, "sigmoid_2x3", f32_sig(&[2, 3])),
            ],
        )
        .unwrap();
    assert_eq!((summary.provided, summary.cached), (2, 2));
    for shape in [&[4][..], &[2, 3]] {
        let x = [Value::from(array(shape, 7))];
        let Dispatched::Compiled(compiled) = jit.dispatch(&sigmoid, &x, &[]).unwrap() else {
            panic!("{shape:?}: served compiled")
        };
        assert_eq!(compiled.provenance, Provenance::Compiled(Origin::Hit));
        assert_eq!(compiled.source(), ArtifactSource::Provided);
        let expected = reference::interpret_sigmoid(&x).unwrap();
        assert_close(&compiled.outputs[0], &expected[0], "provided sigmoid");
    }
    let profile = jit.profile();
    assert_eq!(profile.phase(Phase::Lower).count, 0, "{profile}");
    assert_eq!(
        profile.loaded_from(ArtifactSource::Provided),
        2,
        "{profile}"
    );
    assert_eq!(
        profile.loaded_from(ArtifactSource::Compiler),
        0,
        "{profile}"
    );
    assert!(jit.compiler().is_none(), "the compiler was never loaded");
    // Another signature is the function's own business: lowered, compiled.
    let x = [Value::from(array(&[5], 7))];
    let Dispatched::Compiled(compiled) = jit.dispatch(&sigmoid, &x, &[]).unwrap() else {
        panic!("blocking")
    };
    assert_eq!(compiled.source(), ArtifactSource::Compiler);
}

#[test]
fn a_module_that_cannot_serve_what_it_is_said_to_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let jit = runtime();
    let target = jit.compile_options().target.clone();
    let artifact = compiled_outside(dir.path(), MODULE, &target);
    let sigmoid = reference::sigmoid();
    let refused = |functions: Vec<ProvidedFunction<'_>>, on: &CompileTarget| {
        let error = jit
            .provide_artifact(artifact.vmfb(), on, functions)
            .unwrap_err();
        let JitError::Provide(cause) = error else {
            panic!("{error:?}")
        };
        *cause
    };
    let good = || ProvidedFunction::new(&sigmoid, "sigmoid_4", f32_sig(&[4]));
    // A declaration that takes another signature; the good one beside it
    // is not cached either.
    let cause = refused(
        vec![
            good(),
            ProvidedFunction::new(&sigmoid, "sigmoid_2x3", f32_sig(&[3, 2])),
        ],
        &target,
    );
    assert!(
        matches!(&cause, ProvideError::Declaration { entry, .. } if entry == "sigmoid_2x3"),
        "{cause:?}"
    );
    let message = cause.to_string();
    assert!(
        message.contains("tensor<2x3xf32>") && message.contains("tensor<3x2xf32>"),
        "{message}"
    );
    // An entry the module does not export: the message lists those it does.
    let cause = refused(
        vec![
            good(),
            ProvidedFunction::new(&sigmoid, "sigmoid_5", f32_sig(&[5])),
        ],
        &target,
    );
    let message = cause.to_string();
    assert!(
        message.contains("`sigmoid_5`") && message.contains("sigmoid_4, sigmoid_2x3"),
        "{message}"
    );
    // Code for another device.
    let cuda = CompileTarget::Cuda {
        arch: "sm_80".into(),
    };
    let cause = refused(vec![good()], &cuda);
    assert!(matches!(cause, ProvideError::Target { .. }), "{cause:?}");
    assert!(cause.to_string().contains("cuda:sm_80"), "{cause}");
    assert_eq!(jit.stats().total.live_entries, 0, "nothing was cached");
}
