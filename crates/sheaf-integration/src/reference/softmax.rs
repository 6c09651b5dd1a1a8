//! `softmax(x / temperature)` over the last axis, with `temperature`
//! captured: baked into the compiled code as a constant, hence part of the
//! cache key.

use jit_cache::{CapturedScalar, DType, ScalarValue, Signature};
use ndarray::{Axis, Zip};

use crate::mlir;
use crate::{HostTensor, JitFunction};

/// The captured scalar `softmax` reads.
pub fn temperature(value: f32) -> CapturedScalar {
    CapturedScalar::f32("temperature", value)
}

/// The reference `softmax`: an f32 tensor of rank ≥ 1, normalized over its
/// last axis, with the captured [`temperature`].
pub fn softmax() -> JitFunction {
    JitFunction::new(
        "softmax",
        "(defn softmax [x] (let [s (/ x temperature)] (/ (exp s) (sum (exp s) -1))))",
        lower,
        interpret,
    )
}

fn captured_temperature(captured: &[CapturedScalar]) -> Result<f32, String> {
    match captured
        .iter()
        .find(|c| c.name() == "temperature")
        .map(CapturedScalar::value)
    {
        Some(ScalarValue::F32(t)) => Ok(t),
        Some(other) => Err(format!("temperature must be an f32, got {other:?}")),
        None => Err("softmax needs the captured scalar `temperature`".into()),
    }
}

fn lower(signature: &Signature) -> Result<String, String> {
    let [x] = signature.args() else {
        return Err(format!(
            "softmax takes 1 argument, got {}",
            signature.args().len()
        ));
    };
    if x.dtype() != DType::F32 || x.rank() == 0 {
        return Err(format!("softmax needs an f32 tensor of rank >= 1, got {x}"));
    }
    let t = mlir::f32_literal(captured_temperature(signature.captured())?);
    let ty = mlir::arg_type(x)?;
    let rank = x.rank();
    let reduced = mlir::tensor_type(DType::F32, &x.dims()[..rank - 1])?;
    let keep = mlir::leading_dims(rank - 1);
    let last = rank - 1;
    Ok(format!(
        "module @softmax {{
  func.func @main(%x: {ty}) -> {ty} {{
    %tc = stablehlo.constant dense<{t}> : tensor<f32>
    %t = stablehlo.broadcast_in_dim %tc, dims = [] : (tensor<f32>) -> {ty}
    %s = stablehlo.divide %x, %t : {ty}
    %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %max = stablehlo.reduce(%s init: %ninf) applies stablehlo.maximum across dimensions = [{last}] : ({ty}, tensor<f32>) -> {reduced}
    %maxb = stablehlo.broadcast_in_dim %max, dims = [{keep}] : ({reduced}) -> {ty}
    %d = stablehlo.subtract %s, %maxb : {ty}
    %e = stablehlo.exponential %d : {ty}
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %sum = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [{last}] : ({ty}, tensor<f32>) -> {reduced}
    %sumb = stablehlo.broadcast_in_dim %sum, dims = [{keep}] : ({reduced}) -> {ty}
    %y = stablehlo.divide %e, %sumb : {ty}
    return %y : {ty}
  }}
}}
"
    ))
}

fn interpret(args: &[HostTensor], captured: &[CapturedScalar]) -> Result<Vec<HostTensor>, String> {
    let [HostTensor::F32(x)] = args else {
        return Err("softmax takes one f32 tensor".into());
    };
    if x.ndim() == 0 {
        return Err("softmax needs a tensor of rank >= 1".into());
    }
    let t = captured_temperature(captured)?;
    let mut y = x.mapv(|v| v / t);
    for mut lane in y.lanes_mut(Axis(x.ndim() - 1)) {
        let max = lane.fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        lane.mapv_inplace(|v| (v - max).exp());
        let sum = lane.sum();
        Zip::from(&mut lane).for_each(|v| *v /= sum);
    }
    Ok(vec![HostTensor::F32(y)])
}
