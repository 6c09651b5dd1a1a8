//! One MLP layer: `relu(x·W + b)`.

use jit_cache::DType;
use ndarray::{Ix1, Ix2};

use super::{host_tensors, ReferenceError};
use crate::{mlir, HostTensor, JitFunction, Lowered, LoweringContext, LoweringError, Value};

/// The reference MLP layer: `x: f32[N,K]`, `W: f32[K,M]`, `b: f32[M]` →
/// `f32[N,M]`.
pub fn mlp_layer() -> JitFunction {
    JitFunction::new(
        "mlp_layer",
        "(defn mlp-layer [x w b] (relu (+ (matmul x w) b)))",
        lower,
    )
}

fn lower(ctx: &LoweringContext<'_>) -> Result<Lowered, LoweringError> {
    let [x, w, b] = ctx.args() else {
        return Err(format!("mlp_layer takes 3 arguments, got {}", ctx.args().len()).into());
    };
    let (&[n, k], &[k2, m], &[m2]) = (x.dims(), w.dims(), b.dims()) else {
        return Err(format!("mlp_layer needs x[N,K], W[K,M], b[M], got {x}, {w}, {b}").into());
    };
    if k != k2 || m != m2 || [x, w, b].iter().any(|a| a.dtype() != DType::F32) {
        return Err(format!("mlp_layer needs f32 x[N,K], W[K,M], b[M], got {x}, {w}, {b}").into());
    }
    let (tx, tw, tb) = (mlir::arg_type(x)?, mlir::arg_type(w)?, mlir::arg_type(b)?);
    let ty = mlir::tensor_type(DType::F32, &[n, m])?;
    Ok(Lowered::new(format!(
        "func.func @{entry}(%x: {tx}, %w: {tw}, %b: {tb}) -> {ty} {{
  %xw = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : ({tx}, {tw}) -> {ty}
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : ({tb}) -> {ty}
  %z = stablehlo.add %xw, %bb : {ty}
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %zb = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> {ty}
  %y = stablehlo.maximum %z, %zb : {ty}
  return %y : {ty}
}}",
        entry = ctx.entry_name()
    )))
}

/// The `ndarray` interpreter of [`mlp_layer`].
pub fn interpret_mlp_layer(args: &[Value]) -> Result<Vec<Value>, ReferenceError> {
    let [HostTensor::F32(x), HostTensor::F32(w), HostTensor::F32(b)] = &host_tensors(args)?[..]
    else {
        return Err(ReferenceError("mlp_layer takes three f32 tensors".into()));
    };
    let x = x
        .view()
        .into_dimensionality::<Ix2>()
        .map_err(|e| ReferenceError(format!("x must be 2-D: {e}")))?;
    let w = w
        .view()
        .into_dimensionality::<Ix2>()
        .map_err(|e| ReferenceError(format!("W must be 2-D: {e}")))?;
    let b = b
        .view()
        .into_dimensionality::<Ix1>()
        .map_err(|e| ReferenceError(format!("b must be 1-D: {e}")))?;
    if x.ncols() != w.nrows() || w.ncols() != b.len() {
        return Err(ReferenceError(format!(
            "shapes {:?}, {:?}, {:?} do not chain",
            x.shape(),
            w.shape(),
            b.shape()
        )));
    }
    let y = (x.dot(&w) + b).mapv(|v| v.max(0.0));
    Ok(vec![Value::host(y.into_dyn())])
}
