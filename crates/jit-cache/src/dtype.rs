//! Element types of tensor arguments.

use std::fmt;

/// Element type of a tensor argument, as far as compiled code cares.
///
/// Two arguments that differ only in dtype need different executables, so the
/// dtype is part of every [`ArgSpec`](crate::ArgSpec).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum DType {
    /// Boolean (StableHLO `i1`, stored by IREE as `BOOL_8`). Displayed `bool`.
    Bool,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 8-bit integer.
    U8,
    /// IEEE half precision float.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE single precision float.
    F32,
    /// IEEE double precision float.
    F64,
}

impl DType {
    /// Every dtype, in code order.
    const ALL: [DType; 10] = [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// The dtype whose [`name`](Self::name) is `name`.
    pub(crate) fn from_name(name: &str) -> Option<DType> {
        Self::ALL.into_iter().find(|dtype| dtype.name() == name)
    }

    /// The short lowercase name used in signatures, e.g. `f32` in `f32[1,5]`.
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    /// A small stable code used when hashing signatures.
    pub(crate) const fn code(self) -> u8 {
        match self {
            DType::Bool => 1,
            DType::I8 => 2,
            DType::I16 => 3,
            DType::I32 => 4,
            DType::I64 => 5,
            DType::U8 => 6,
            DType::F16 => 7,
            DType::BF16 => 8,
            DType::F32 => 9,
            DType::F64 => 10,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
