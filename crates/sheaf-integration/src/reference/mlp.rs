//! One MLP layer: `relu(x·W + b)`.

use jit_cache::{ArgSpec, DType};
use ndarray::{Ix1, Ix2};

use super::{host_tensors, ReferenceError};
use crate::mlir::DimOf;
use crate::{mlir, HostTensor, JitFunction, Lowered, LoweringContext, LoweringError, Value};

/// The reference MLP layer: `x: f32[N,K]`, `W: f32[K,M]`, `b: f32[M]` →
/// `f32[N,M]`. Its lowering accepts dynamic dims: a dynamic `N` (a ragged
/// batch) broadcasts the bias at run time, and a dynamic `K` or `M` is
/// checked against its partner at run time.
pub fn mlp_layer() -> JitFunction {
    JitFunction::new(
        "mlp_layer",
        "(defn mlp-layer [x w b] (relu (+ (matmul x w) b)))",
        lower,
    )
    .with_dynamic_dims()
}

fn lower(ctx: &LoweringContext<'_>) -> Result<Lowered, LoweringError> {
    let [x, w, b] = ctx.args() else {
        return Err(format!("mlp_layer takes 3 arguments, got {}", ctx.args().len()).into());
    };
    let needs = format!("mlp_layer needs f32 x[N,K], W[K,M], b[M], got {x}, {w}, {b}");
    let (&[n, _], &[_, m], &[_]) = (x.dims(), w.dims(), b.dims()) else {
        return Err(needs.into());
    };
    if [x, w, b].iter().any(|a| a.dtype() != DType::F32) {
        return Err(needs.into());
    }
    let k_check = mlir::assert_equal_dims(
        "k_ok",
        DimOf::new("%x", x, 1),
        DimOf::new("%w", w, 0),
        &needs,
    )?;
    let m_check = mlir::assert_equal_dims(
        "m_ok",
        DimOf::new("%w", w, 1),
        DimOf::new("%b", b, 0),
        &needs,
    )?;
    let out = ArgSpec::new(DType::F32, &[n, m]);
    let shape = if out.has_dynamic_dims() {
        mlir::runtime_shape("shape", &[DimOf::new("%x", x, 0), DimOf::new("%w", w, 1)])?
    } else {
        String::new()
    };
    let (tx, tw, tb) = (mlir::arg_type(x)?, mlir::arg_type(w)?, mlir::arg_type(b)?);
    let ty = mlir::arg_type(&out)?;
    let bias = mlir::broadcast("bb", ("%b", &tb), &out, &[1], "shape")?;
    let zeros = mlir::broadcast("zb", ("%zero", "tensor<f32>"), &out, &[], "shape")?;
    Ok(Lowered::new(format!(
        "func.func @{entry}(%x: {tx}, %w: {tw}, %b: {tb}) -> {ty} {{
{k_check}{m_check}{shape}  %xw = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : ({tx}, {tw}) -> {ty}
{bias}  %z = stablehlo.add %xw, %bb : {ty}
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
{zeros}  %y = stablehlo.maximum %z, %zb : {ty}
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
