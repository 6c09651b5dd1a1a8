//! The consumer of `cargo xtask package-check`: one call of the reference
//! sigmoid through `JitRuntime::call`, which must run compiled code and
//! agree with the reference interpreter.

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    reference,
    settings::{CompileMode, DiskCacheFolder},
    HostTensor, JitConfig, JitRuntime, Value,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // No disk cache: the call compiles, so the compiler is found and runs.
    let config = JitConfig::builder()
        .compile(|compile| compile.mode = CompileMode::Blocking)
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .build()?;
    let jit = JitRuntime::new(config)?;
    let x = [Value::from(ArrayD::from_shape_vec(
        IxDyn(&[1, 5]),
        vec![-3.0f32, -1.0, 0.0, 1.0, 3.0],
    )?)];
    let result = jit.call(&reference::sigmoid(), &x, &[], |args, _, _| {
        reference::interpret_sigmoid(args)
    })?;
    if !result.provenance.is_compiled() {
        return Err(format!(
            "the call did not run compiled code: {:?}",
            result.provenance
        )
        .into());
    }
    let expected = reference::interpret_sigmoid(&x)?;
    let (HostTensor::F32(actual), HostTensor::F32(expected)) =
        (result.outputs[0].to_host()?, expected[0].to_host()?)
    else {
        return Err("sigmoid returned a tensor that is not f32".into());
    };
    if actual.shape() != expected.shape()
        || actual
            .iter()
            .zip(expected.iter())
            .any(|(a, e)| (a - e).abs() > 1e-5)
    {
        return Err(
            format!("compiled sigmoid {actual} differs from the interpreter's {expected}").into(),
        );
    }
    println!(
        "sigmoid{:?} ran compiled ({:?}) and matches the interpreter: {actual}",
        actual.shape(),
        result.provenance
    );
    Ok(())
}
