//! Small helpers to print StableHLO types and constants, for lowerings.
//!
//! ```
//! use sheaf_integration::{mlir, DType};
//!
//! assert_eq!(mlir::tensor_type(DType::F32, &[1, 5]).unwrap(), "tensor<1x5xf32>");
//! assert_eq!(mlir::f32_literal(1.0), "0x3F800000");
//! ```

use jit_cache::{ArgSpec, DType};

/// `tensor<1x5xf32>`, or `tensor<f32>` for a scalar.
pub fn tensor_type(dtype: DType, dims: &[i64]) -> Result<String, String> {
    let element = match dtype {
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::I8 => "i8",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::Bool => "i1",
        other => return Err(format!("no lowering for element type {other}")),
    };
    let mut text = String::from("tensor<");
    for dim in dims {
        if *dim < 0 {
            return Err(format!("dimension {dim} is not static"));
        }
        text.push_str(&format!("{dim}x"));
    }
    text.push_str(element);
    text.push('>');
    Ok(text)
}

/// [`tensor_type`] of an argument.
pub fn arg_type(arg: &ArgSpec) -> Result<String, String> {
    tensor_type(arg.dtype(), arg.dims())
}

/// An exact f32 literal: MLIR reads a hexadecimal float as its bit pattern,
/// so `0.8` and `0.8000001` stay distinct and `-0.0` stays negative.
pub fn f32_literal(value: f32) -> String {
    format!("0x{:08X}", value.to_bits())
}

/// `0, 1, ..., n-1`: broadcast dimensions that keep the leading axes.
pub fn leading_dims(n: usize) -> String {
    (0..n).map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
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
        assert!(tensor_type(DType::U8, &[2]).is_err());
        assert!(tensor_type(DType::F32, &[-1]).is_err());
    }

    #[test]
    fn float_literals_keep_every_bit() {
        assert_eq!(f32_literal(1.0), "0x3F800000");
        assert_ne!(f32_literal(0.8), f32_literal(0.800_000_1));
        assert_eq!(f32_literal(-0.0), "0x80000000");
        assert_eq!(leading_dims(3), "0, 1, 2");
    }
}
