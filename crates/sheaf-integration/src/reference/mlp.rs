//! One MLP layer: `relu(x·W + b)`.

use jit_cache::{DType, Signature};
use ndarray::{Ix1, Ix2};

use crate::mlir;
use crate::{HostTensor, JitFunction};

/// The reference MLP layer: `x: f32[N,K]`, `W: f32[K,M]`, `b: f32[M]` →
/// `f32[N,M]`.
pub fn mlp_layer() -> JitFunction {
    JitFunction::new(
        "mlp_layer",
        "(defn mlp-layer [x w b] (relu (+ (matmul x w) b)))",
        lower,
        interpret,
    )
}

fn lower(signature: &Signature) -> Result<String, String> {
    let [x, w, b] = signature.args() else {
        return Err(format!(
            "mlp_layer takes 3 arguments, got {}",
            signature.args().len()
        ));
    };
    let (&[n, k], &[k2, m], &[m2]) = (x.dims(), w.dims(), b.dims()) else {
        return Err(format!(
            "mlp_layer needs x[N,K], W[K,M], b[M], got {x}, {w}, {b}"
        ));
    };
    if k != k2 || m != m2 || [x, w, b].iter().any(|a| a.dtype() != DType::F32) {
        return Err(format!(
            "mlp_layer needs f32 x[N,K], W[K,M], b[M], got {x}, {w}, {b}"
        ));
    }
    let (tx, tw, tb) = (mlir::arg_type(x)?, mlir::arg_type(w)?, mlir::arg_type(b)?);
    let ty = mlir::tensor_type(DType::F32, &[n, m])?;
    Ok(format!(
        "module @mlp_layer {{
  func.func @main(%x: {tx}, %w: {tw}, %b: {tb}) -> {ty} {{
    %xw = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : ({tx}, {tw}) -> {ty}
    %bb = stablehlo.broadcast_in_dim %b, dims = [1] : ({tb}) -> {ty}
    %z = stablehlo.add %xw, %bb : {ty}
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %zb = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> {ty}
    %y = stablehlo.maximum %z, %zb : {ty}
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
    let [HostTensor::F32(x), HostTensor::F32(w), HostTensor::F32(b)] = args else {
        return Err("mlp_layer takes three f32 tensors".into());
    };
    let x = x
        .view()
        .into_dimensionality::<Ix2>()
        .map_err(|e| format!("x must be 2-D: {e}"))?;
    let w = w
        .view()
        .into_dimensionality::<Ix2>()
        .map_err(|e| format!("W must be 2-D: {e}"))?;
    let b = b
        .view()
        .into_dimensionality::<Ix1>()
        .map_err(|e| format!("b must be 1-D: {e}"))?;
    if x.ncols() != w.nrows() || w.ncols() != b.len() {
        return Err(format!(
            "shapes {:?}, {:?}, {:?} do not chain",
            x.shape(),
            w.shape(),
            b.shape()
        ));
    }
    let y = (x.dot(&w) + b).mapv(|v| v.max(0.0));
    Ok(vec![HostTensor::F32(y.into_dyn())])
}
