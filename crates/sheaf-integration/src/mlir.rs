//! Small helpers to print StableHLO types and constants, for lowerings, and
//! the few ops that code for dynamic dims needs: run-time shapes for
//! `stablehlo.dynamic_broadcast_in_dim`, and checks that dims which must be
//! equal are. They fail with an [`MlirError`], which `?` turns into a
//! [`LoweringError`](crate::compile::lowering::LoweringError).
//!
//! ```
//! use sheaf_integration::{mlir, DType};
//!
//! assert_eq!(mlir::tensor_type(DType::F32, &[1, 5]).unwrap(), "tensor<1x5xf32>");
//! assert_eq!(mlir::tensor_type(DType::F32, &[-1, 5]).unwrap(), "tensor<?x5xf32>");
//! assert_eq!(mlir::f32_literal(1.0), "0x3F800000");
//! ```

use std::fmt::Write as _;

use jit_cache::{ArgSpec, DType};

/// Why a helper of this module cannot write a type or op.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MlirError {
    /// StableHLO has no element type for this dtype.
    #[error("no lowering for element type {0}")]
    ElementType(DType),
    /// A dim that is neither a size (`>= 0`) nor [`ArgSpec::DYNAMIC`].
    #[error("dimension {0} is neither a size nor dynamic")]
    UnknownDim(i64),
    /// A [`DimOf`] names a dim its argument does not have.
    #[error("{arg} has no dim {dim}")]
    NoSuchDim {
        /// The argument.
        arg: ArgSpec,
        /// The dim asked for.
        dim: usize,
    },
    /// A static size too large for the `tensor<i32>` a run-time shape is
    /// made of.
    #[error("dim {dim} of {arg} does not fit in i32")]
    DimTooLarge {
        /// The argument.
        arg: ArgSpec,
        /// The dim.
        dim: usize,
    },
    /// [`assert_equal_dims`] on two dims known at compile time to differ:
    /// the caller's message.
    #[error("{message}")]
    UnequalDims {
        /// What the caller said the dims must be.
        message: String,
    },
    /// The entry a lowering named with [`Lowered::with_entry`](crate::compile::lowering::Lowered::with_entry)
    /// is not a function its MLIR defines.
    #[error(
        "the lowering names `@{entry}` as its entry function (Lowered::with_entry), but its \
         MLIR defines no `func.func @{entry}`: name the function the MLIR defines"
    )]
    NoEntry {
        /// The entry's name, as the lowering gave it.
        entry: String,
    },
    /// The entry a lowering named with [`Lowered::with_entry`](crate::compile::lowering::Lowered::with_entry)
    /// is a private function, which the compiled module would not export.
    #[error(
        "the lowering's entry function `@{entry}` is private: an entry must be public (drop \
         `private` from its `func.func`)"
    )]
    PrivateEntry {
        /// The entry's name.
        entry: String,
    },
    /// The per-signature entry name the runtime gives a lowering's own
    /// entry ([`Lowered::with_entry`](crate::compile::lowering::Lowered::with_entry)) is a
    /// symbol of its MLIR already.
    #[error(
        "cannot rename the entry function `@{entry}` to `@{name}`: the MLIR has a symbol \
         `@{name}` already (name helpers with LoweringContext::symbol)"
    )]
    EntryNameTaken {
        /// The entry's name, as the lowering gave it.
        entry: String,
        /// The runtime's entry name for the signature.
        name: String,
    },
}

/// `tensor<1x5xf32>`, `tensor<?x5xf32>` with a dynamic dim
/// ([`ArgSpec::DYNAMIC`]), or `tensor<f32>` for a scalar.
///
/// # Errors
///
/// [`MlirError::ElementType`] for a dtype StableHLO has no type for, and
/// [`MlirError::UnknownDim`] for a dim that is neither a size nor dynamic.
pub fn tensor_type(dtype: DType, dims: &[i64]) -> Result<String, MlirError> {
    let element = match dtype {
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::I8 => "i8",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::Bool => "i1",
        other => return Err(MlirError::ElementType(other)),
    };
    let mut text = String::from("tensor<");
    for &dim in dims {
        if dim == ArgSpec::DYNAMIC {
            text.push_str("?x");
        } else if dim < 0 {
            return Err(MlirError::UnknownDim(dim));
        } else {
            text.push_str(&format!("{dim}x"));
        }
    }
    text.push_str(element);
    text.push('>');
    Ok(text)
}

/// [`tensor_type`] of an argument.
///
/// # Errors
///
/// As [`tensor_type`].
pub fn arg_type(arg: &ArgSpec) -> Result<String, MlirError> {
    tensor_type(arg.dtype(), arg.dims())
}

/// An exact f32 literal: MLIR reads a hexadecimal float as its bit pattern,
/// so `0.8` and `0.8000001` stay distinct and `-0.0` stays negative.
pub fn f32_literal(value: f32) -> String {
    format!("0x{:08X}", value.to_bits())
}

/// Dim `dim` of the argument `value` (its SSA name, like `%x`), described
/// by `arg`: a size known at compile time, or read at run time when it is
/// dynamic.
#[derive(Clone, Copy, Debug)]
#[expect(
    clippy::exhaustive_structs,
    reason = "names exactly one dim of one SSA value (value, its type, which dim): there is \
        nothing more to name, and callers build it in place"
)]
pub struct DimOf<'a> {
    /// The SSA value, like `%x`.
    pub value: &'a str,
    /// Its type and dims.
    pub arg: &'a ArgSpec,
    /// Which dim.
    pub dim: usize,
}

impl<'a> DimOf<'a> {
    /// Dim `dim` of `value`, described by `arg`.
    pub fn new(value: &'a str, arg: &'a ArgSpec, dim: usize) -> Self {
        DimOf { value, arg, dim }
    }

    /// Ops that leave the dim's size in `%<name>` as a `tensor<i32>`.
    fn emit(&self, name: &str) -> Result<String, MlirError> {
        let Some(&size) = self.arg.dims().get(self.dim) else {
            return Err(MlirError::NoSuchDim {
                arg: self.arg.clone(),
                dim: self.dim,
            });
        };
        if size != ArgSpec::DYNAMIC {
            let size = i32::try_from(size).map_err(|_| MlirError::DimTooLarge {
                arg: self.arg.clone(),
                dim: self.dim,
            })?;
            return Ok(format!(
                "  %{name} = stablehlo.constant dense<{size}> : tensor<i32>\n"
            ));
        }
        Ok(format!(
            "  %{name} = stablehlo.get_dimension_size {}, dim = {} : ({}) -> tensor<i32>\n",
            self.value,
            self.dim,
            arg_type(self.arg)?
        ))
    }
}

/// Ops that leave in `%<name>` the run-time shape made of `dims`, as the
/// `tensor<Rxi32>` that `stablehlo.dynamic_broadcast_in_dim` takes.
///
/// ```
/// use sheaf_integration::mlir::{runtime_shape, DimOf};
/// use sheaf_integration::{lowering::ArgSpec, DType};
///
/// let x = ArgSpec::new(DType::F32, &[ArgSpec::DYNAMIC, 256]);
/// let ops = runtime_shape("shape", &[DimOf::new("%x", &x, 0), DimOf::new("%x", &x, 1)]).unwrap();
/// assert!(ops.contains("stablehlo.get_dimension_size %x, dim = 0 : (tensor<?x256xf32>) -> tensor<i32>"));
/// assert!(ops.ends_with("-> tensor<2xi32>\n"));
/// ```
///
/// # Errors
///
/// [`MlirError::NoSuchDim`] for a [`DimOf`] past its argument's rank,
/// [`MlirError::DimTooLarge`] for a static size over `i32::MAX`, and the
/// errors of [`arg_type`].
pub fn runtime_shape(name: &str, dims: &[DimOf<'_>]) -> Result<String, MlirError> {
    let mut ops = String::new();
    let mut parts = Vec::with_capacity(dims.len());
    for (i, dim) in dims.iter().enumerate() {
        let size = format!("{name}_{i}");
        ops.push_str(&dim.emit(&size)?);
        let _ = writeln!(
            ops,
            "  %{size}_1 = stablehlo.reshape %{size} : (tensor<i32>) -> tensor<1xi32>"
        );
        parts.push(format!("%{size}_1"));
    }
    if parts.is_empty() {
        let _ = writeln!(
            ops,
            "  %{name} = stablehlo.constant dense<> : tensor<0xi32>"
        );
        return Ok(ops);
    }
    let types = vec!["tensor<1xi32>"; parts.len()].join(", ");
    let _ = writeln!(
        ops,
        "  %{name} = stablehlo.concatenate {}, dim = 0 : ({types}) -> tensor<{}xi32>",
        parts.join(", "),
        parts.len()
    );
    Ok(ops)
}

/// `%<result> = broadcast of operand into to`, the operand's dim `i` being
/// the result's dim `dims[i]` with the same size (broadcasting adds dims, it
/// never stretches a dim of size 1): a `stablehlo.broadcast_in_dim` when
/// `to` is static, a `stablehlo.dynamic_broadcast_in_dim` to the run-time
/// shape `%<shape>` (see [`runtime_shape`]) when it has dynamic dims, its
/// operand dims marked non-expanding (which IREE needs to compile it).
///
/// # Errors
///
/// The errors of [`arg_type`] for `to`.
pub fn broadcast(
    result: &str,
    (operand, from): (&str, &str),
    to: &ArgSpec,
    dims: &[usize],
    shape: &str,
) -> Result<String, MlirError> {
    let ty = arg_type(to)?;
    let list = |values: &[usize]| {
        values
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !to.has_dynamic_dims() {
        return Ok(format!(
            "  %{result} = stablehlo.broadcast_in_dim {operand}, dims = [{}] : ({from}) -> {ty}\n",
            list(dims)
        ));
    }
    let array = |values: &[usize]| match values {
        [] => "array<i64>".to_owned(),
        values => format!("array<i64: {}>", list(values)),
    };
    let operand_dims: Vec<usize> = (0..dims.len()).collect();
    Ok(format!(
        "  %{result} = \"stablehlo.dynamic_broadcast_in_dim\"({operand}, %{shape}) \
         <{{broadcast_dimensions = {}, known_nonexpanding_dimensions = {}}}> : \
         ({from}, tensor<{}xi32>) -> {ty}\n",
        array(dims),
        array(&operand_dims),
        to.rank()
    ))
}

/// Ops that stop the call with an error saying `message` unless dims `a`
/// and `b` are equal at run time (say, the contracting dims of a matmul
/// when either is dynamic): code compiled for dynamic dims must refuse
/// sizes that do not fit together rather than read out of bounds. Nothing
/// when both are static and equal; an error when both are static and
/// differ.
///
/// # Errors
///
/// [`MlirError::UnequalDims`] with `message` when both dims are static and
/// differ (or one does not exist), and the errors of [`runtime_shape`] when
/// a dim must be read at run time.
pub fn assert_equal_dims(
    name: &str,
    a: DimOf<'_>,
    b: DimOf<'_>,
    message: &str,
) -> Result<String, MlirError> {
    let (sa, sb) = (a.arg.dims().get(a.dim), b.arg.dims().get(b.dim));
    let dynamic = [sa, sb].contains(&Some(&ArgSpec::DYNAMIC));
    if !dynamic {
        return if sa == sb && sa.is_some() {
            Ok(String::new())
        } else {
            Err(MlirError::UnequalDims {
                message: message.to_owned(),
            })
        };
    }
    let mut ops = a.emit(&format!("{name}_a"))?;
    ops.push_str(&b.emit(&format!("{name}_b"))?);
    let quoted = string_literal(message);
    let _ = write!(
        ops,
        "  %{name}_eq = stablehlo.compare EQ, %{name}_a, %{name}_b : (tensor<i32>, tensor<i32>) -> tensor<i1>
  %{name} = tensor.extract %{name}_eq[] : tensor<i1>
  cf.assert %{name}, {quoted}
"
    );
    Ok(ops)
}

/// `text` as an MLIR string literal: quoted, with `"` and `\` escaped and
/// every byte outside printable ASCII as `\XX`.
fn string_literal(text: &str) -> String {
    let mut literal = String::from("\"");
    for byte in text.bytes() {
        match byte {
            b'"' | b'\\' => {
                literal.push('\\');
                literal.push(char::from(byte));
            }
            b' '..=b'~' => literal.push(char::from(byte)),
            _ => {
                let _ = write!(literal, "\\{byte:02X}");
            }
        }
    }
    literal.push('"');
    literal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_ranked_and_scalar_types() {
        assert_eq!(tensor_type(DType::F32, &[1, 5]).unwrap(), "tensor<1x5xf32>");
        assert_eq!(tensor_type(DType::Bool, &[3]).unwrap(), "tensor<3xi1>");
        assert_eq!(tensor_type(DType::F64, &[]).unwrap(), "tensor<f64>");
        assert_eq!(tensor_type(DType::BF16, &[2]).unwrap(), "tensor<2xbf16>");
        assert_eq!(
            tensor_type(DType::U8, &[2]),
            Err(MlirError::ElementType(DType::U8))
        );
        assert_eq!(
            tensor_type(DType::F32, &[-1, 3]).unwrap(),
            "tensor<?x3xf32>"
        );
        assert_eq!(
            tensor_type(DType::F32, &[-2]),
            Err(MlirError::UnknownDim(-2))
        );
    }

    #[test]
    fn shapes_and_checks_read_dynamic_dims_at_run_time() {
        let x = ArgSpec::new(DType::F32, &[ArgSpec::DYNAMIC, 4]);
        let w = ArgSpec::new(DType::F32, &[4, 8]);
        let shape =
            runtime_shape("s", &[DimOf::new("%x", &x, 0), DimOf::new("%w", &w, 1)]).unwrap();
        assert!(
            shape.contains("%s_1 = stablehlo.constant dense<8> : tensor<i32>"),
            "{shape}"
        );
        assert!(
            shape.contains("stablehlo.concatenate %s_0_1, %s_1_1, dim = 0"),
            "{shape}"
        );
        assert!(runtime_shape("s", &[])
            .unwrap()
            .contains("dense<> : tensor<0xi32>"));
        assert_eq!(
            runtime_shape("s", &[DimOf::new("%x", &x, 2)]),
            Err(MlirError::NoSuchDim {
                arg: x.clone(),
                dim: 2
            })
        );
        let huge = ArgSpec::new(DType::F32, &[1 << 40]);
        let error = runtime_shape("s", &[DimOf::new("%h", &huge, 0)]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "dim 0 of f32[1099511627776] does not fit in i32"
        );
        let static_k =
            assert_equal_dims("k", DimOf::new("%x", &x, 1), DimOf::new("%w", &w, 0), "k");
        assert_eq!(static_k, Ok(String::new()));
        let mismatch =
            assert_equal_dims("k", DimOf::new("%x", &x, 1), DimOf::new("%w", &w, 1), "no");
        assert_eq!(
            mismatch,
            Err(MlirError::UnequalDims {
                message: "no".to_owned()
            })
        );
        let any_k = ArgSpec::new(DType::F32, &[2, ArgSpec::DYNAMIC]);
        let check = assert_equal_dims(
            "k",
            DimOf::new("%x", &any_k, 1),
            DimOf::new("%w", &w, 0),
            "x's \"K\" \\ ≠\n",
        )
        .unwrap();
        assert!(
            check.contains(r#"cf.assert %k, "x's \"K\" \\ \E2\89\A0\0A""#),
            "{check}"
        );
        let to = ArgSpec::new(DType::F32, &[ArgSpec::DYNAMIC, 8]);
        let b = broadcast("bb", ("%b", "tensor<8xf32>"), &to, &[1], "s").unwrap();
        assert!(
            b.contains(
                r#""stablehlo.dynamic_broadcast_in_dim"(%b, %s) <{broadcast_dimensions = array<i64: 1>, known_nonexpanding_dimensions = array<i64: 0>}> : (tensor<8xf32>, tensor<2xi32>) -> tensor<?x8xf32>"#
            ),
            "{b}"
        );
        let b = broadcast("z", ("%z", "tensor<f32>"), &to, &[], "s").unwrap();
        assert!(
            b.contains("array<i64>, known_nonexpanding_dimensions = array<i64>}>"),
            "{b}"
        );
        let b = broadcast("bb", ("%b", "tensor<8xf32>"), &w, &[1], "s").unwrap();
        assert!(
            b.contains(
                "stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>"
            ),
            "{b}"
        );
    }

    #[test]
    fn float_literals_keep_every_bit() {
        assert_eq!(f32_literal(1.0), "0x3F800000");
        assert_ne!(f32_literal(0.8), f32_literal(0.800_000_1));
        assert_eq!(f32_literal(-0.0), "0x80000000");
    }
}
