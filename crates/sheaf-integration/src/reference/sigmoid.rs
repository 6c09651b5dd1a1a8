//! `sigmoid(x) = 1 / (1 + exp(-x))`, elementwise.

use jit_cache::{DType, Signature};

use crate::mlir;
use crate::{HostTensor, JitFunction};

/// The reference `sigmoid`: one f32 or f64 tensor of any shape.
pub fn sigmoid() -> JitFunction {
    JitFunction::new(
        "sigmoid",
        "(defn sigmoid [x] (/ 1 (+ 1 (exp (- x)))))",
        lower,
        interpret,
    )
}

fn lower(signature: &Signature) -> Result<String, String> {
    let [x] = signature.args() else {
        return Err(format!(
            "sigmoid takes 1 argument, got {}",
            signature.args().len()
        ));
    };
    if !matches!(x.dtype(), DType::F32 | DType::F64) {
        return Err(format!("sigmoid needs a float tensor, got {x}"));
    }
    let ty = mlir::arg_type(x)?;
    Ok(format!(
        "module @sigmoid {{
  func.func @main(%x: {ty}) -> {ty} {{
    %y = stablehlo.logistic %x : {ty}
    return %y : {ty}
  }}
}}
"
    ))
}

fn interpret(
    args: &[HostTensor],
    _captured: &[jit_cache::CapturedScalar],
) -> Result<Vec<HostTensor>, String> {
    match args {
        [HostTensor::F32(x)] => Ok(vec![HostTensor::F32(x.mapv(|v| 1.0 / (1.0 + (-v).exp())))]),
        [HostTensor::F64(x)] => Ok(vec![HostTensor::F64(x.mapv(|v| 1.0 / (1.0 + (-v).exp())))]),
        _ => Err("sigmoid takes one f32 or f64 tensor".into()),
    }
}
