//! Arguments and results of a call: tensors and scalars.

use crate::tensor::Tensor;

/// One argument or result of a [`Function`](crate::Function) call.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum VmValue {
    /// A tensor on the runtime's device.
    Tensor(Tensor),
    /// A 32-bit integer scalar.
    I32(i32),
    /// A 64-bit integer scalar.
    I64(i64),
    /// A 32-bit float scalar.
    F32(f32),
    /// A 64-bit float scalar.
    F64(f64),
}

impl VmValue {
    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            VmValue::Tensor(tensor) => Some(tensor),
            _ => None,
        }
    }

    /// The tensor, if this is one.
    pub fn into_tensor(self) -> Option<Tensor> {
        match self {
            VmValue::Tensor(tensor) => Some(tensor),
            _ => None,
        }
    }

    /// A short description for error messages: `f32[1,5]`, `i64 scalar`.
    pub fn describe(&self) -> String {
        match self {
            VmValue::Tensor(tensor) => tensor.describe(),
            VmValue::I32(_) => "i32 scalar".into(),
            VmValue::I64(_) => "i64 scalar".into(),
            VmValue::F32(_) => "f32 scalar".into(),
            VmValue::F64(_) => "f64 scalar".into(),
        }
    }
}

/// One argument as a call pushes it: a tensor it borrows, or a scalar.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Argument<'a> {
    Tensor(&'a Tensor),
    /// Never [`VmValue::Tensor`] (`From` makes that a `Tensor`).
    Scalar(&'a VmValue),
}

impl<'a> From<&'a VmValue> for Argument<'a> {
    fn from(value: &'a VmValue) -> Self {
        match value {
            VmValue::Tensor(tensor) => Argument::Tensor(tensor),
            scalar => Argument::Scalar(scalar),
        }
    }
}

impl Argument<'_> {
    /// As [`VmValue::describe`].
    pub(crate) fn describe(&self) -> String {
        match self {
            Argument::Tensor(tensor) => tensor.describe(),
            Argument::Scalar(scalar) => scalar.describe(),
        }
    }
}

impl From<Tensor> for VmValue {
    fn from(tensor: Tensor) -> Self {
        VmValue::Tensor(tensor)
    }
}

macro_rules! scalar_from {
    ($($ty:ty => $variant:ident),*) => {$(
        impl From<$ty> for VmValue {
            fn from(value: $ty) -> Self {
                VmValue::$variant(value)
            }
        }
    )*};
}

scalar_from!(i32 => I32, i64 => I64, f32 => F32, f64 => F64);
