//! `softmax(x / temperature)` over the last axis, with `temperature`
//! captured: baked into the compiled code as a constant, hence part of the
//! cache key.

use jit_cache::{ArgSpec, CapturedScalar, DType, ScalarValue};
use ndarray::{Axis, Zip};

use super::{host_tensors, ReferenceError};
use crate::mlir::DimOf;
use crate::{
    lowering::{Lowered, LoweringContext, LoweringError},
    mlir, HostTensor, JitFunction, Value,
};

/// The captured scalar `softmax` reads.
pub fn temperature(value: f32) -> CapturedScalar {
    CapturedScalar::f32("temperature", value)
}

/// The reference `softmax`: an f32 tensor of rank ≥ 1, normalized over its
/// last axis, with the captured [`temperature`]. Its lowering accepts
/// dynamic dims: the broadcasts back over the last axis use the input's
/// run-time shape. It multiplies by the inverse of each row's sum rather
/// than dividing by the sum: with a dynamic dim IREE recomputed the sum for
/// every element of the division, many times slower, and the static code
/// is faster this way too.
pub fn softmax() -> JitFunction {
    JitFunction::new(
        "softmax",
        "(defn softmax [x] (let [s (/ x temperature)] (/ (exp s) (sum (exp s) -1))))",
        lower,
    )
    .with_dynamic_dims()
}

fn lower(ctx: &LoweringContext<'_>) -> Result<Lowered, LoweringError> {
    let [x] = ctx.args() else {
        return Err(format!("softmax takes 1 argument, got {}", ctx.args().len()).into());
    };
    if x.dtype() != DType::F32 || x.rank() == 0 {
        return Err(format!("softmax needs an f32 tensor of rank >= 1, got {x}").into());
    }
    let t_literal = match ctx.captured("temperature") {
        Some(ScalarValue::F32(t)) => mlir::f32_literal(t),
        Some(other) => return Err(format!("temperature must be an f32, got {other:?}").into()),
        None => return Err("softmax needs the captured scalar `temperature`".into()),
    };
    let ty = mlir::arg_type(x)?;
    let rank = x.rank();
    let reduced = mlir::tensor_type(DType::F32, &x.dims()[..rank - 1])?;
    let keep: Vec<usize> = (0..rank - 1).collect();
    let last = rank - 1;
    let shape = if x.has_dynamic_dims() {
        let dims: Vec<DimOf<'_>> = (0..rank).map(|d| DimOf::new("%x", x, d)).collect();
        mlir::runtime_shape("shape", &dims)?
    } else {
        String::new()
    };
    let reduced_spec = ArgSpec::new(DType::F32, &x.dims()[..rank - 1]);
    let reduced_shape = if reduced_spec.has_dynamic_dims() {
        let dims: Vec<DimOf<'_>> = (0..rank - 1).map(|d| DimOf::new("%x", x, d)).collect();
        mlir::runtime_shape("reduced_shape", &dims)?
    } else {
        String::new()
    };
    let t = mlir::broadcast("t", ("%tc", "tensor<f32>"), x, &[], "shape")?;
    let max = mlir::broadcast("maxb", ("%max", &reduced), x, &keep, "shape")?;
    let one = mlir::broadcast(
        "ones",
        ("%one", "tensor<f32>"),
        &reduced_spec,
        &[],
        "reduced_shape",
    )?;
    let inverse = mlir::broadcast("inverseb", ("%inverse", &reduced), x, &keep, "shape")?;
    Ok(Lowered::new(format!(
        "func.func @{entry}(%x: {ty}) -> {ty} {{
{shape}{reduced_shape}  %tc = stablehlo.constant dense<{temperature}> : tensor<f32>
{t}  %s = stablehlo.divide %x, %t : {ty}
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %max = stablehlo.reduce(%s init: %ninf) applies stablehlo.maximum across dimensions = [{last}] : ({ty}, tensor<f32>) -> {reduced}
{max}  %d = stablehlo.subtract %s, %maxb : {ty}
  %e = stablehlo.exponential %d : {ty}
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %sum = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [{last}] : ({ty}, tensor<f32>) -> {reduced}
  %one = stablehlo.constant dense<1.000000e+00> : tensor<f32>
{one}  %inverse = stablehlo.divide %ones, %sum : {reduced}
{inverse}  %y = stablehlo.multiply %e, %inverseb : {ty}
  return %y : {ty}
}}",
        entry = ctx.entry_symbol(),
        temperature = t_literal,
    )))
}

/// The `ndarray` interpreter of [`softmax`] at `temperature`.
///
/// # Errors
///
/// [`ReferenceError::Arguments`] unless `args` is one f32 tensor of rank
/// at least 1, and [`ReferenceError::Read`] when it cannot be read.
pub fn interpret_softmax(args: &[Value], temperature: f32) -> Result<Vec<Value>, ReferenceError> {
    let [HostTensor::F32(x)] = &host_tensors(args)?[..] else {
        return Err(ReferenceError::Arguments(
            "softmax takes one f32 tensor".into(),
        ));
    };
    if x.ndim() == 0 {
        return Err(ReferenceError::Arguments(
            "softmax needs a tensor of rank >= 1".into(),
        ));
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
