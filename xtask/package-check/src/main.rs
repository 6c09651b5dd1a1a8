//! The consumer of `cargo xtask package-check`: one call of the reference
//! sigmoid through `JitRuntime::dispatch` on the HAL driver named by its one
//! argument (`local-sync`, `vulkan`, ...), which must run compiled code on
//! that driver, with no fallback to the CPU, and agree with the reference
//! interpreter.

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    reference,
    settings::{CompileMode, DiskCacheFolder},
    Dispatched, HostTensor, JitConfig, JitRuntime, Value,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let driver = std::env::args()
        .nth(1)
        .ok_or("name a HAL driver: local-sync, vulkan, ...")?;
    // No disk cache: the call compiles, so the compiler is found and runs.
    let config = JitConfig::builder()
        .device(|device| {
            device.driver = driver.clone();
            device.cpu_fallback = None;
        })
        .compile(|compile| compile.mode = CompileMode::Blocking)
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .build()?;
    let jit = JitRuntime::new(config)?;
    let x = [Value::from(ArrayD::from_shape_vec(
        IxDyn(&[1, 5]),
        vec![-3.0f32, -1.0, 0.0, 1.0, 3.0],
    )?)];
    let compiled = match jit.dispatch(&reference::sigmoid(), &x, &[])? {
        Dispatched::Compiled(compiled) => compiled,
        Dispatched::Interpret(why) => {
            return Err(format!("the call did not run compiled code: {why}").into())
        }
    };
    if !compiled.device().starts_with(driver.as_str()) {
        return Err(format!("asked for {driver}, ran on {}", compiled.device()).into());
    }
    let expected = reference::interpret_sigmoid(&x)?;
    let (HostTensor::F32(actual), HostTensor::F32(expected)) =
        (compiled.outputs[0].to_host()?, expected[0].to_host()?)
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
        "{driver}: sigmoid{:?} ran compiled on {} ({:?}) and matches the interpreter: {actual}",
        actual.shape(),
        compiled.device(),
        compiled.provenance,
    );
    Ok(())
}
