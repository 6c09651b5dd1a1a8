//! A matrix product, `a·b`, batched over leading dims: the contraction the
//! CPU flags are chosen on (`CONTRACTION_FLAGS` from `LARGE_CONTRACTION`
//! multiply-adds).

use jit_cache::{ArgSpec, DType};
use ndarray::{ArrayD, CowArray, Ix3, IxDyn};

use super::{host_tensors, ReferenceError};
use crate::{
    lowering::{Lowered, LoweringContext, LoweringError},
    mlir, HostTensor, JitFunction, Value,
};

/// The reference matrix product: `a: f32[..., M, K]` and `b: f32[..., K, N]`
/// with the same leading dims → `f32[..., M, N]`, one
/// `stablehlo.dot_general` (batched over the leading dims, as NumPy's
/// `a @ b` for operands of equal rank). Static shapes only (it does not
/// declare dynamic dims): each shape is its own variant.
pub fn matmul() -> JitFunction {
    JitFunction::new("matmul", "(defn matmul [a b] (matmul a b))", lower)
}

fn lower(ctx: &LoweringContext<'_>) -> Result<Lowered, LoweringError> {
    let [a, b] = ctx.args() else {
        return Err(format!("matmul takes 2 arguments, got {}", ctx.args().len()).into());
    };
    let needs = || {
        format!(
            "matmul needs f32 a[...,M,K] and b[...,K,N] with the same leading dims, got {a} and {b}"
        )
    };
    let Some(([m, k], batch, [k2, n])) = split_matrices(a.dims(), b.dims()) else {
        return Err(needs().into());
    };
    if a.dtype() != DType::F32 || b.dtype() != DType::F32 || k != k2 {
        return Err(needs().into());
    }
    let out_dims: Vec<i64> = batch.iter().copied().chain([m, n]).collect();
    let out = ArgSpec::new(DType::F32, &out_dims);
    let (ta, tb, ty) = (
        mlir::arg_type(a)?,
        mlir::arg_type(b)?,
        mlir::arg_type(&out)?,
    );
    let batching = if batch.is_empty() {
        String::new()
    } else {
        let dims: Vec<String> = (0..batch.len()).map(|d| d.to_string()).collect();
        let dims = dims.join(", ");
        format!("batching_dims = [{dims}] x [{dims}], ")
    };
    let (contract_a, contract_b) = (batch.len() + 1, batch.len());
    Ok(Lowered::new(format!(
        "func.func @{entry}(%a: {ta}, %b: {tb}) -> {ty} {{
  %y = stablehlo.dot_general %a, %b, {batching}contracting_dims = [{contract_a}] x [{contract_b}] : ({ta}, {tb}) -> {ty}
  return %y : {ty}
}}",
        entry = ctx.entry_symbol()
    )))
}

/// `a`'s last two dims, the leading dims both share, and `b`'s last two;
/// `None` unless both have rank ≥ 2, the same rank and the same leading
/// dims.
fn split_matrices<'a, T: PartialEq + Copy>(
    a: &'a [T],
    b: &'a [T],
) -> Option<([T; 2], &'a [T], [T; 2])> {
    let rank = a.len();
    if rank < 2 || b.len() != rank || a[..rank - 2] != b[..rank - 2] {
        return None;
    }
    Some((
        [a[rank - 2], a[rank - 1]],
        &a[..rank - 2],
        [b[rank - 2], b[rank - 1]],
    ))
}

/// The `ndarray` interpreter of [`matmul`].
///
/// # Errors
///
/// [`ReferenceError::Arguments`] unless `args` are two f32 tensors of the
/// same rank (≥ 2) and leading dims whose inner dims agree, and
/// [`ReferenceError::Read`] when one cannot be read.
pub fn interpret_matmul(args: &[Value]) -> Result<Vec<Value>, ReferenceError> {
    let [HostTensor::F32(a), HostTensor::F32(b)] = &host_tensors(args)?[..] else {
        return Err(ReferenceError::Arguments(
            "matmul takes two f32 tensors".into(),
        ));
    };
    let chains = || {
        ReferenceError::Arguments(format!(
            "shapes {:?} and {:?} do not chain",
            a.shape(),
            b.shape()
        ))
    };
    let Some(([m, k], batch, [k2, n])) = split_matrices(a.shape(), b.shape()) else {
        return Err(chains());
    };
    if k != k2 {
        return Err(chains());
    }
    let count: usize = batch.iter().product();
    let (a, b) = (stack("a", a, [count, m, k])?, stack("b", b, [count, k, n])?);
    let mut y = ndarray::Array3::<f32>::zeros((count, m, n));
    for ((a, b), mut y) in a.outer_iter().zip(b.outer_iter()).zip(y.outer_iter_mut()) {
        y.assign(&a.dot(&b));
    }
    let shape: Vec<usize> = batch.iter().copied().chain([m, n]).collect();
    let y = y
        .into_shape_with_order(IxDyn(&shape))
        .expect("as many elements");
    Ok(vec![Value::host(y)])
}

/// `t`, named `name` in the error, as a stack of `shape[0]` matrices (a
/// view where `t` is in standard layout, else a copy).
fn stack<'a>(
    name: &str,
    t: &'a ArrayD<f32>,
    shape: [usize; 3],
) -> Result<CowArray<'a, f32, Ix3>, ReferenceError> {
    t.as_standard_layout()
        .into_shape_with_order(shape)
        .map_err(|_| {
            ReferenceError::Arguments(format!("{name} of shape {:?} is not {shape:?}", t.shape()))
        })
}

#[cfg(test)]
mod tests {
    use ndarray::{Array, IxDyn};

    use super::*;

    fn tensor(shape: &[usize], seed: f32) -> Value {
        let count: usize = shape.iter().product();
        let values = (0..count)
            .map(|i| ((i as f32 + seed) * 0.37).sin())
            .collect();
        Value::host(Array::from_shape_vec(IxDyn(shape), values).unwrap())
    }

    fn host(value: &Value) -> ArrayD<f32> {
        let HostTensor::F32(array) = value.to_host().unwrap() else {
            panic!("an f32 result")
        };
        (*array).clone()
    }

    #[test]
    fn a_batched_product_is_the_product_of_each_pair() {
        let (a, b) = (tensor(&[2, 3, 4, 5], 1.0), tensor(&[2, 3, 5, 6], 2.0));
        let y = host(&interpret_matmul(&[a.clone(), b.clone()]).unwrap()[0]);
        assert_eq!(y.shape(), [2, 3, 4, 6]);
        let (a, b) = (host(&a), host(&b));
        for i in 0..2 {
            for j in 0..3 {
                let pair = |t: &ArrayD<f32>| {
                    t.index_axis(ndarray::Axis(0), i)
                        .index_axis(ndarray::Axis(0), j)
                        .into_dimensionality::<ndarray::Ix2>()
                        .unwrap()
                        .to_owned()
                };
                let expected = pair(&a).dot(&pair(&b));
                assert_eq!(pair(&y), expected);
            }
        }
    }

    #[test]
    fn operands_that_do_not_chain_are_refused() {
        for (a, b) in [
            (&[2, 3, 4][..], &[3, 4, 5][..]),
            (&[3, 4], &[5, 6]),
            (&[4], &[4]),
            (&[2, 3, 4], &[4, 5]),
        ] {
            let error = interpret_matmul(&[tensor(a, 0.0), tensor(b, 0.0)]).unwrap_err();
            assert!(error.to_string().contains("do not chain"), "{error}");
        }
    }
}
