//! What mock functions compute: a handful of ops with IREE-style
//! signatures, so invocation (arguments, results, errors) is testable.

use super::api::*;
use super::status::{Failure, MockResult};

/// The type of one argument or result slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    /// An f32 tensor of any shape (a `!hal.buffer_view` reference).
    TensorF32,
    I32,
    I64,
    F32,
    F64,
}

impl Ty {
    /// The calling-convention character.
    fn code(self) -> char {
        match self {
            Ty::TensorF32 => 'r',
            Ty::I32 => 'i',
            Ty::I64 => 'I',
            Ty::F32 => 'f',
            Ty::F64 => 'F',
        }
    }

    /// The MLIR spelling, for `iree.abi.declaration`.
    fn mlir(self) -> &'static str {
        match self {
            Ty::TensorF32 => "tensor<?xf32>",
            Ty::I32 => "i32",
            Ty::I64 => "i64",
            Ty::F32 => "f32",
            Ty::F64 => "f64",
        }
    }
}

/// The operation a mock function performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Nothing (`__init`).
    Nop,
    /// Elementwise sum of two f32 tensors of one shape.
    Add,
    /// An f32 tensor times an f32 scalar.
    Scale,
    /// Wrapping i32 addition.
    AddI32,
    /// Wrapping i64 multiplication.
    MulI64,
    /// An f64 divided by two.
    HalfF64,
}

const OPS: [Op; 6] = [
    Op::Nop,
    Op::Add,
    Op::Scale,
    Op::AddI32,
    Op::MulI64,
    Op::HalfF64,
];

impl Op {
    /// The op's name in the module format.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Nop => "nop",
            Op::Add => "add",
            Op::Scale => "scale",
            Op::AddI32 => "add_i32",
            Op::MulI64 => "mul_i64",
            Op::HalfF64 => "half_f64",
        }
    }

    /// The op called `name`.
    pub(crate) fn from_name(name: &str) -> Option<Op> {
        OPS.into_iter().find(|op| op.name() == name)
    }

    /// Argument and result types.
    pub(crate) fn signature(self) -> (&'static [Ty], &'static [Ty]) {
        use Ty::*;
        match self {
            Op::Nop => (&[], &[]),
            Op::Add => (&[TensorF32, TensorF32], &[TensorF32]),
            Op::Scale => (&[TensorF32, F32], &[TensorF32]),
            Op::AddI32 => (&[I32, I32], &[I32]),
            Op::MulI64 => (&[I64, I64], &[I64]),
            Op::HalfF64 => (&[F64], &[F64]),
        }
    }

    /// IREE's calling convention: `0`, argument codes, `_`, result codes,
    /// `v` for an empty side (`0rr_r`, `0v_v`).
    pub(crate) fn calling_convention(self) -> String {
        let side = |types: &[Ty]| -> String {
            if types.is_empty() {
                "v".into()
            } else {
                types.iter().map(|t| t.code()).collect()
            }
        };
        let (arguments, results) = self.signature();
        format!("0{}_{}", side(arguments), side(results))
    }

    /// The `iree.abi.declaration` reflection attribute of a function named
    /// `function` running this op; none for `__init`, as in IREE.
    pub(crate) fn declaration(self, function: &str) -> Option<String> {
        if self == Op::Nop {
            return None;
        }
        let slots = |prefix: &str, types: &[Ty]| -> String {
            let slots: Vec<String> = types
                .iter()
                .enumerate()
                .map(|(i, t)| format!("%{prefix}{i}: {}", t.mlir()))
                .collect();
            slots.join(", ")
        };
        let (arguments, results) = self.signature();
        Some(format!(
            "sync func @{function}({}) -> ({})",
            slots("input", arguments),
            slots("output", results)
        ))
    }

    /// Runs the op. `arguments` already match [`Op::signature`] (invoke
    /// checks them against the calling convention); shapes and element
    /// types are checked here, as IREE's generated code does.
    pub(crate) fn run(self, arguments: &[Value<'_>]) -> MockResult<Vec<Value<'static>>> {
        let results = match (self, arguments) {
            (Op::Nop, []) => vec![],
            (Op::Add, [Value::Tensor(a), Value::Tensor(b)]) => {
                let (x, y) = (f32s(0, a)?, f32s(1, b)?);
                if a.shape != b.shape {
                    return Err(Failure::new(
                        IREE_STATUS_INVALID_ARGUMENT,
                        format!(
                            "input shape mismatch; input 1 is f32{:?} but input 0 is f32{:?}",
                            b.shape, a.shape
                        ),
                    ));
                }
                let sum = x.iter().zip(&y).map(|(x, y)| x + y).collect();
                vec![Value::tensor_f32(&a.shape, sum)]
            }
            (Op::Scale, [Value::Tensor(a), Value::F32(s)]) => {
                let scaled = f32s(0, a)?.iter().map(|x| x * s).collect();
                vec![Value::tensor_f32(&a.shape, scaled)]
            }
            (Op::AddI32, [Value::I32(a), Value::I32(b)]) => vec![Value::I32(a.wrapping_add(*b))],
            (Op::MulI64, [Value::I64(a), Value::I64(b)]) => vec![Value::I64(a.wrapping_mul(*b))],
            (Op::HalfF64, [Value::F64(a)]) => vec![Value::F64(a / 2.0)],
            _ => unreachable!("invoke checked the arguments of {self:?}"),
        };
        Ok(results)
    }
}

/// A tensor argument or result: what a buffer view holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tensor<'a> {
    pub(crate) shape: std::borrow::Cow<'a, [usize]>,
    pub(crate) element_type: iree_hal_element_type_t,
    pub(crate) bytes: std::borrow::Cow<'a, [u8]>,
}

/// One argument or result of an op.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    Tensor(Tensor<'a>),
    I32(i32),
    I64(i64),
    F32(f32),
    F64(f64),
}

impl Value<'_> {
    /// Whether the value fits a slot of type `ty` (tensors of any element
    /// type fit a tensor slot: the op checks the element type).
    pub(crate) fn fits(&self, ty: Ty) -> bool {
        matches!(
            (self, ty),
            (Value::Tensor(_), Ty::TensorF32)
                | (Value::I32(_), Ty::I32)
                | (Value::I64(_), Ty::I64)
                | (Value::F32(_), Ty::F32)
                | (Value::F64(_), Ty::F64)
        )
    }

    fn tensor_f32(shape: &[usize], elements: Vec<f32>) -> Value<'static> {
        Value::Tensor(Tensor {
            shape: shape.to_vec().into(),
            element_type: IREE_HAL_ELEMENT_TYPE_FLOAT_32,
            bytes: elements
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect::<Vec<u8>>()
                .into(),
        })
    }
}

/// The elements of f32 tensor argument `index`.
fn f32s(index: usize, tensor: &Tensor<'_>) -> MockResult<Vec<f32>> {
    if tensor.element_type != IREE_HAL_ELEMENT_TYPE_FLOAT_32 {
        return Err(Failure::new(
            IREE_STATUS_INVALID_ARGUMENT,
            format!(
                "input {index} element type mismatch; expected f32 (0x{:08x}) but have 0x{:08x}",
                IREE_HAL_ELEMENT_TYPE_FLOAT_32, tensor.element_type
            ),
        ));
    }
    Ok(tensor
        .bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("chunks of 4")))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calling_conventions_and_declarations_follow_the_signature() {
        assert_eq!(Op::Add.calling_convention(), "0rr_r");
        assert_eq!(Op::Scale.calling_convention(), "0rf_r");
        assert_eq!(Op::AddI32.calling_convention(), "0ii_i");
        assert_eq!(Op::MulI64.calling_convention(), "0II_I");
        assert_eq!(Op::HalfF64.calling_convention(), "0F_F");
        assert_eq!(Op::Nop.calling_convention(), "0v_v");
        assert_eq!(
            Op::Scale.declaration("scale").unwrap(),
            "sync func @scale(%input0: tensor<?xf32>, %input1: f32) -> (%output0: tensor<?xf32>)"
        );
        assert_eq!(Op::Nop.declaration("__init"), None);
        for op in OPS {
            assert_eq!(Op::from_name(op.name()), Some(op));
        }
    }

    #[test]
    fn add_checks_shapes_and_element_types() {
        let tensor = |shape: &[usize], element_type| {
            Value::Tensor(Tensor {
                shape: shape.to_vec().into(),
                element_type,
                bytes: [1f32.to_le_bytes(), 1f32.to_le_bytes()].concat().into(),
            })
        };
        let f32_2 = tensor(&[2], IREE_HAL_ELEMENT_TYPE_FLOAT_32);
        let sum = Op::Add.run(&[f32_2.clone(), f32_2.clone()]).unwrap();
        assert_eq!(sum, vec![Value::tensor_f32(&[2], vec![2.0, 2.0])]);
        let f32_1x2 = tensor(&[1, 2], IREE_HAL_ELEMENT_TYPE_FLOAT_32);
        let error = Op::Add.run(&[f32_2.clone(), f32_1x2]).unwrap_err();
        assert!(error.message.contains("input shape mismatch"), "{error:?}");
        let i32_2 = tensor(&[2], IREE_HAL_ELEMENT_TYPE_INT_32);
        let error = Op::Add.run(&[f32_2, i32_2]).unwrap_err();
        assert_eq!(error.code, IREE_STATUS_INVALID_ARGUMENT);
        assert!(error.message.contains("input 1 element type"), "{error:?}");
    }
}
