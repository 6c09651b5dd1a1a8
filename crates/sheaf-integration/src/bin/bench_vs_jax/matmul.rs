//! `matmul`: a plain matrix product, which the reference functions do not
//! have on its own (`mlp_layer` adds a bias and a relu). Static shapes
//! only: the benchmark calls it at one shape.

use sheaf_integration::{
    mlir, ArgSpec, DType, JitFunction, Lowered, LoweringContext, LoweringError,
};

/// `a: f32[M,K]` · `b: f32[K,N]` → `f32[M,N]`, one `stablehlo.dot_general`.
pub(crate) fn matmul() -> JitFunction {
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
        entry = ctx.entry_name()
    )))
}
