//! A plain matrix product, `a·b`: the contraction the CPU flags are chosen
//! on (`CONTRACTION_FLAGS` from `LARGE_CONTRACTION` multiply-adds).

use jit_cache::{ArgSpec, DType};
use ndarray::Ix2;

use super::{host_tensors, ReferenceError};
use crate::{
    lowering::{Lowered, LoweringContext, LoweringError},
    mlir, HostTensor, JitFunction, Value,
};

/// The reference matrix product: `a: f32[M,K]`, `b: f32[K,N]` → `f32[M,N]`,
/// one `stablehlo.dot_general`. Static shapes only (it does not declare
/// dynamic dims): each shape is its own variant.
pub fn matmul() -> JitFunction {
    JitFunction::new("matmul", "(defn matmul [a b] (matmul a b))", lower)
}

fn lower(ctx: &LoweringContext<'_>) -> Result<Lowered, LoweringError> {
    let [a, b] = ctx.args() else {
        return Err(format!("matmul takes 2 arguments, got {}", ctx.args().len()).into());
    };
    let needs = || format!("matmul needs f32 a[M,K] and b[K,N], got {a} and {b}");
    let (&[m, k], &[k2, n]) = (a.dims(), b.dims()) else {
        return Err(needs().into());
    };
    if a.dtype() != DType::F32 || b.dtype() != DType::F32 || k != k2 {
        return Err(needs().into());
    }
    let out = ArgSpec::new(DType::F32, &[m, n]);
    let (ta, tb, ty) = (
        mlir::arg_type(a)?,
        mlir::arg_type(b)?,
        mlir::arg_type(&out)?,
    );
    Ok(Lowered::new(format!(
        "func.func @{entry}(%a: {ta}, %b: {tb}) -> {ty} {{
  %y = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : ({ta}, {tb}) -> {ty}
  return %y : {ty}
}}",
        entry = ctx.entry_symbol()
    )))
}

/// The `ndarray` interpreter of [`matmul`].
///
/// # Errors
///
/// [`ReferenceError::Arguments`] unless `args` are two f32 matrices whose
/// inner dims agree, and [`ReferenceError::Read`] when one cannot be read.
pub fn interpret_matmul(args: &[Value]) -> Result<Vec<Value>, ReferenceError> {
    let [HostTensor::F32(a), HostTensor::F32(b)] = &host_tensors(args)?[..] else {
        return Err(ReferenceError::Arguments(
            "matmul takes two f32 tensors".into(),
        ));
    };
    let (a, b) = (matrix("a", a)?, matrix("b", b)?);
    if a.ncols() != b.nrows() {
        return Err(ReferenceError::Arguments(format!(
            "shapes {:?} and {:?} do not chain",
            a.shape(),
            b.shape()
        )));
    }
    Ok(vec![Value::host(a.dot(&b).into_dyn())])
}

/// `t`, named `name` in the error, as a matrix.
fn matrix<'a>(
    name: &str,
    t: &'a ndarray::ArrayD<f32>,
) -> Result<ndarray::ArrayView2<'a, f32>, ReferenceError> {
    t.view().into_dimensionality::<Ix2>().map_err(|_| {
        ReferenceError::Arguments(format!("{name} must be 2-D, not of shape {:?}", t.shape()))
    })
}
