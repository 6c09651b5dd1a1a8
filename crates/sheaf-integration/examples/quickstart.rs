//! The calls Sheaf makes, runnable: define a function (name, definition,
//! lowering), dispatch calls to compiled code or to your own interpreter,
//! chain device results, read the profile.
//!
//! ```sh
//! SHEAF_JIT_LOG=sheaf_jit=debug cargo run -p sheaf-integration --example quickstart
//! ```

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    lowering::Lowered, mlir, reference, Dispatched, HostTensor, JitConfig, JitFunction, JitRuntime,
    Value,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let jit = JitRuntime::new(JitConfig::from_env()?)?;

    // A function: name, definition (hashed: a redefinition never reuses old
    // code), and a lowering to StableHLO functions whose entry has the name
    // the context gives.
    let double: JitFunction = JitFunction::new("double", "(defn double [x] (* 2 x))", |ctx| {
        let [x] = ctx.args() else {
            return Err("double takes one tensor".into());
        };
        let ty = mlir::arg_type(x)?;
        Ok(Lowered::new(format!(
            "func.func @{}(%x: {ty}) -> {ty} {{
               %y = stablehlo.add %x, %x : {ty}
               return %y : {ty}
             }}",
            ctx.entry_symbol()
        )))
    });
    // The interpreter is yours, with your state: here, a call counter.
    let mut interpreted = 0;
    let mut interpret = |args: &[Value]| -> Result<Vec<Value>, Box<dyn std::error::Error>> {
        interpreted += 1;
        let HostTensor::F32(x) = args[0].to_host()? else {
            return Err("double takes one f32 tensor".into());
        };
        Ok(vec![Value::host(x.mapv(|v| 2.0 * v))])
    };

    for shape in [&[1, 5][..], &[1, 5, 1], &[1, 5]] {
        let x = Value::host(ArrayD::<f32>::ones(IxDyn(shape)));
        let outputs = match jit.dispatch(&double, std::slice::from_ref(&x), &[])? {
            Dispatched::Compiled(compiled) => {
                println!("double{shape:?}: {:?}", compiled.provenance);
                compiled.outputs
            }
            Dispatched::Interpret(why) => {
                println!("double{shape:?}: interpreted ({why})");
                interpret(&[x])?
            }
        };
        println!("  -> {:?}", outputs[0].to_host()?);
    }
    println!("interpreted {interpreted} calls");

    // Device results feed the next call without a host copy; `call` runs a
    // closure when the call must be interpreted.
    let x = Value::host(ArrayD::from_shape_vec(
        IxDyn(&[1, 3]),
        vec![1.0f32, 2.0, 3.0],
    )?);
    let probs = jit.call(
        &reference::softmax(),
        &[x],
        &[reference::temperature(0.5)],
        |args, _, _| reference::interpret_softmax(args, 0.5),
    )?;
    let squashed = jit.call(&reference::sigmoid(), &probs.outputs, &[], |args, _, _| {
        reference::interpret_sigmoid(args)
    })?;
    println!(
        "sigmoid(softmax(x / 0.5)) = {:?}",
        squashed.outputs[0].to_host()?
    );

    println!("{}", jit.profile());
    Ok(())
}
