//! One MLP layer: `relu(x·W + b)`.

use jit_cache::{ArgSpec, DType};
use ndarray::{Ix1, Ix2};

use super::{host_tensors, ReferenceError};
use crate::mlir::DimOf;
use crate::{
    lowering::{Lowered, LoweringContext, LoweringError},
    mlir, HostTensor, JitFunction, Value,
};

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
    let product = matmul("xw", x, w, &out)?;
    let bias = mlir::broadcast("bb", ("%b", &tb), &out, &[1], "shape")?;
    let zeros = mlir::broadcast("zb", ("%zero", "tensor<f32>"), &out, &[], "shape")?;
    Ok(Lowered::new(format!(
        "func.func @{entry}(%x: {tx}, %w: {tw}, %b: {tb}) -> {ty} {{
{k_check}{m_check}{shape}{product}{bias}  %z = stablehlo.add %xw, %bb : {ty}
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
{zeros}  %y = stablehlo.maximum %z, %zb : {ty}
  return %y : {ty}
}}",
        entry = ctx.entry_symbol()
    )))
}

/// Ops that leave `%x·%w` in `%<result>` (of type `out`).
///
/// A `stablehlo.dot_general`, except when the operands have dynamic dims
/// and one of N, K or M is a static 1: IREE rewrites such a product into a
/// matrix-vector or outer product through a `stablehlo.dynamic_reshape`,
/// which it then cannot compile ("must be statically shaped"). That product
/// is written as a broadcast multiply reduced over K instead: with a 1
/// among N, K and M, the `N×K×M` intermediate is no larger than an operand
/// or the result.
fn matmul(result: &str, x: &ArgSpec, w: &ArgSpec, out: &ArgSpec) -> Result<String, LoweringError> {
    let (tx, tw, ty) = (mlir::arg_type(x)?, mlir::arg_type(w)?, mlir::arg_type(out)?);
    let dynamic = x.has_dynamic_dims() || w.has_dynamic_dims();
    let unit = x.dims().iter().chain(w.dims()).any(|&dim| dim == 1);
    if !(dynamic && unit) {
        return Ok(format!(
            "  %{result} = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : \
             ({tx}, {tw}) -> {ty}\n"
        ));
    }
    let (&[n, k], &[_, m]) = (x.dims(), w.dims()) else {
        return Err(format!("a matmul takes two matrices, got {x} and {w}").into());
    };
    let cube = ArgSpec::new(DType::F32, &[n, k, m]);
    let tc = mlir::arg_type(&cube)?;
    let shape = format!("{result}_nkm");
    let mut ops = mlir::runtime_shape(
        &shape,
        &[
            DimOf::new("%x", x, 0),
            DimOf::new("%x", x, 1),
            DimOf::new("%w", w, 1),
        ],
    )?;
    let (xe, we) = (format!("{result}_x"), format!("{result}_w"));
    ops.push_str(&mlir::broadcast(&xe, ("%x", &tx), &cube, &[0, 1], &shape)?);
    ops.push_str(&mlir::broadcast(&we, ("%w", &tw), &cube, &[1, 2], &shape)?);
    ops.push_str(&format!(
        "  %{result}_p = stablehlo.multiply %{xe}, %{we} : {tc}
  %{result}_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %{result} = stablehlo.reduce(%{result}_p init: %{result}_0) applies stablehlo.add across dimensions = [1] : ({tc}, tensor<f32>) -> {ty}
"
    ));
    Ok(ops)
}

/// The `ndarray` interpreter of [`mlp_layer`].
///
/// # Errors
///
/// [`ReferenceError::Arguments`] unless `args` are three f32 tensors of
/// chaining shapes, and [`ReferenceError::Read`] when one cannot be read.
pub fn interpret_mlp_layer(args: &[Value]) -> Result<Vec<Value>, ReferenceError> {
    let [HostTensor::F32(x), HostTensor::F32(w), HostTensor::F32(b)] = &host_tensors(args)?[..]
    else {
        return Err(ReferenceError::Arguments(
            "mlp_layer takes three f32 tensors".into(),
        ));
    };
    let rank = |name: &str, shape: &[usize], rank: usize| {
        ReferenceError::Arguments(format!("{name} must be {rank}-D, not of shape {shape:?}"))
    };
    let x = x
        .view()
        .into_dimensionality::<Ix2>()
        .map_err(|_| rank("x", x.shape(), 2))?;
    let w = w
        .view()
        .into_dimensionality::<Ix2>()
        .map_err(|_| rank("W", w.shape(), 2))?;
    let b = b
        .view()
        .into_dimensionality::<Ix1>()
        .map_err(|_| rank("b", b.shape(), 1))?;
    if x.ncols() != w.nrows() || w.ncols() != b.len() {
        return Err(ReferenceError::Arguments(format!(
            "shapes {:?}, {:?}, {:?} do not chain",
            x.shape(),
            w.shape(),
            b.shape()
        )));
    }
    let y = (x.dot(&w) + b).mapv(|v| v.max(0.0));
    Ok(vec![Value::host(y.into_dyn())])
}
