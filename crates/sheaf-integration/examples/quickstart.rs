//! The calls Sheaf makes, end to end:
//!
//! ```sh
//! cargo run -p sheaf-integration --example quickstart
//! SHEAF_JIT_TRACE=1 cargo run -p sheaf-integration --example quickstart   # with the trace
//! ```

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    reference, trace, HostTensor, JitConfig, JitError, JitFunction, JitRuntime, Value,
};

fn main() -> Result<(), JitError> {
    trace::init_from_env();
    // Once per process: the shared IREE runtime, the compiler, the caches.
    let jit = JitRuntime::new(JitConfig::from_env()?)?;

    // A function Sheaf defines: name + definition (hashed), lowering,
    // interpreter. `reference` has sigmoid, softmax and an MLP layer.
    let double = JitFunction::new(
        "double",
        "(defn double [x] (* 2 x))",
        |signature| {
            let x = &signature.args()[0];
            let dims: Vec<String> = x.dims().iter().map(i64::to_string).collect();
            let ty = format!(
                "tensor<{}f32>",
                dims.iter().map(|d| format!("{d}x")).collect::<String>()
            );
            Ok(format!(
                "module @double {{ func.func @main(%x: {ty}) -> {ty} {{
                   %y = stablehlo.add %x, %x : {ty}
                   return %y : {ty} }} }}"
            ))
        },
        |args, _captured| match args {
            [HostTensor::F32(x)] => Ok(vec![HostTensor::F32(x.mapv(|v| 2.0 * v))]),
            _ => Err("double takes one f32 tensor".into()),
        },
    );

    // Shapes change freely: each new signature compiles once, then hits.
    for shape in [&[1, 5][..], &[1, 5, 1], &[1, 5], &[1, 5, 1]] {
        let x = ArrayD::from_elem(IxDyn(shape), 1.5f32);
        let result = jit.call(&double, &[Value::from(x)], &[])?;
        println!(
            "double{shape:?} -> {:?} via {:?}",
            result.outputs[0].to_host()?.shape(),
            result.provenance
        );
    }

    // Captured scalars are part of the key; outputs stay on the device and
    // chain into the next call without a copy.
    let x = ArrayD::from_shape_vec(IxDyn(&[1, 3]), vec![1.0f32, 2.0, 3.0]).expect("3 elements");
    let probs = jit.call(
        &reference::softmax(),
        &[Value::from(x)],
        &[reference::temperature(0.5)],
    )?;
    let squashed = jit.call(&reference::sigmoid(), &probs.outputs, &[])?;
    println!(
        "sigmoid(softmax(x / 0.5)) = {:?}",
        squashed.outputs[0].to_host()?
    );

    // What Sheaf's `--jit-profile` prints.
    println!("{}", jit.profile());
    Ok(())
}
