//! `sigmoid(x) = 1 / (1 + exp(-x))`, elementwise.

use jit_cache::DType;

use super::{host_tensors, ReferenceError};
use crate::{
    lowering::{Lowered, LoweringContext, LoweringError},
    mlir, HostTensor, JitFunction, Value,
};

/// The reference `sigmoid`: one f32 or f64 tensor of any shape; its
/// lowering accepts dynamic dims (elementwise code serves any size).
pub fn sigmoid() -> JitFunction {
    JitFunction::new(
        "sigmoid",
        "(defn sigmoid [x] (/ 1 (+ 1 (exp (- x)))))",
        lower,
    )
    .with_dynamic_dims()
}

fn lower(ctx: &LoweringContext<'_>) -> Result<Lowered, LoweringError> {
    let [x] = ctx.args() else {
        return Err(format!("sigmoid takes 1 argument, got {}", ctx.args().len()).into());
    };
    if !matches!(x.dtype(), DType::F32 | DType::F64) {
        return Err(format!("sigmoid needs a float tensor, got {x}").into());
    }
    let ty = mlir::arg_type(x)?;
    Ok(Lowered::new(format!(
        "func.func @{entry}(%x: {ty}) -> {ty} {{
  %y = stablehlo.logistic %x : {ty}
  return %y : {ty}
}}",
        entry = ctx.entry_symbol()
    )))
}

/// The `ndarray` interpreter of [`sigmoid`].
///
/// # Errors
///
/// [`ReferenceError::Arguments`] unless `args` is one f32 or f64 tensor,
/// and [`ReferenceError::Read`] when it cannot be read.
pub fn interpret_sigmoid(args: &[Value]) -> Result<Vec<Value>, ReferenceError> {
    match &host_tensors(args)?[..] {
        [HostTensor::F32(x)] => Ok(vec![Value::host(x.mapv(|v| 1.0 / (1.0 + (-v).exp())))]),
        [HostTensor::F64(x)] => Ok(vec![Value::host(x.mapv(|v| 1.0 / (1.0 + (-v).exp())))]),
        _ => Err(ReferenceError::Arguments(
            "sigmoid takes one f32 or f64 tensor".into(),
        )),
    }
}
