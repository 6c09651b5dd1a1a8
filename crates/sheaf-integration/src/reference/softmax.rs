//! `softmax(x / temperature)` over the last axis, with `temperature`
//! captured: baked into the compiled code as a constant, hence part of the
//! cache key.

use jit_cache::{CapturedScalar, DType, ScalarValue};
use ndarray::{Axis, Zip};

use super::{host_tensors, ReferenceError};
use crate::{mlir, HostTensor, JitFunction, Lowered, LoweringContext, LoweringError, Value};

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
    )
}

fn lower(ctx: &LoweringContext<'_>) -> Result<Lowered, LoweringError> {
    let [x] = ctx.args() else {
        return Err(format!("softmax takes 1 argument, got {}", ctx.args().len()).into());
    };
    if x.dtype() != DType::F32 || x.rank() == 0 {
        return Err(format!("softmax needs an f32 tensor of rank >= 1, got {x}").into());
    }
    let t = match ctx.captured("temperature") {
        Some(ScalarValue::F32(t)) => mlir::f32_literal(t),
        Some(other) => return Err(format!("temperature must be an f32, got {other:?}").into()),
        None => return Err("softmax needs the captured scalar `temperature`".into()),
    };
    let ty = mlir::arg_type(x)?;
    let rank = x.rank();
    let reduced = mlir::tensor_type(DType::F32, &x.dims()[..rank - 1])?;
    let keep = mlir::leading_dims(rank - 1);
    let last = rank - 1;
    Ok(Lowered::new(format!(
        "func.func @{entry}(%x: {ty}) -> {ty} {{
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
}}",
        entry = ctx.entry_name()
    )))
}

/// The `ndarray` interpreter of [`softmax`] at `temperature`.
pub fn interpret_softmax(args: &[Value], temperature: f32) -> Result<Vec<Value>, ReferenceError> {
    let [HostTensor::F32(x)] = &host_tensors(args)?[..] else {
        return Err(ReferenceError("softmax takes one f32 tensor".into()));
    };
    if x.ndim() == 0 {
        return Err(ReferenceError("softmax needs a tensor of rank >= 1".into()));
    }
    let mut y = x.mapv(|v| v / temperature);
    for mut lane in y.lanes_mut(Axis(x.ndim() - 1)) {
        let max = lane.fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        lane.mapv_inplace(|v| (v - max).exp());
        let sum = lane.sum();
        Zip::from(&mut lane).for_each(|v| *v /= sum);
    }
    Ok(vec![Value::host(y)])
}
