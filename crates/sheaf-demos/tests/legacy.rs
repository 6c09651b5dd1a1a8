//! The legacy session (`sheaf_demos::legacy`): an artifact in its own
//! runtime instance, device and session, on the real runtime.

use iree_safe::compiler::{
    CompileOptions, CompileTarget, Compiler as _, CompilerPreference, SubprocessCompiler,
};
use sheaf_demos::legacy::LegacySession;

const DRIVER: &str = "local-sync";

const SIGMOID: &str = "
module @sigmoid {
  func.func @sigmoid(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = stablehlo.logistic %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}";

/// The sigmoid program, compiled for this process's CPU.
fn sigmoid_vmfb() -> Vec<u8> {
    let mut options = CompileOptions::stablehlo();
    options.target = CompileTarget::process_cpu(&CompilerPreference::Subprocess);
    let compiler =
        SubprocessCompiler::locate().expect("iree-compile (run `cargo xtask build-iree`)");
    let artifact = compiler
        .compile(SIGMOID, &options)
        .expect("sigmoid compiles");
    artifact.into()
}

#[test]
fn legacy_session_runs_an_artifact_in_its_own_runtime() {
    let mut session = LegacySession::new(DRIVER, &sigmoid_vmfb()).unwrap();
    let x = [0.0f32, 1.0, -1.0, 2.0];
    let y = session.call_f32("sigmoid.sigmoid", &[(&[4], &x)]).unwrap();
    for (x, y) in x.iter().zip(y) {
        assert!((y - 1.0 / (1.0 + (-x).exp())).abs() < 1e-6);
    }
    let error = session
        .call_f32("sigmoid.sigmoid", &[(&[5], &[0.0; 5])])
        .unwrap_err();
    assert!(format!("{error:#}").contains("mismatch"), "{error:#}");
    assert!(session
        .call_f32("sigmoid.sigmoid", &[(&[4], &[0.0; 3])])
        .is_err());
}

#[test]
fn legacy_session_refuses_a_bad_artifact_without_freeing_it_twice() {
    let bytes = sigmoid_vmfb();
    for bad in [
        &bytes[..bytes.len() / 2],
        &b"not a vmfb at all"[..],
        &[][..],
    ] {
        let error = LegacySession::new(DRIVER, bad).unwrap_err();
        eprintln!("{error:#}");
    }
}
