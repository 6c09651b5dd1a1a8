//! Element types of tensors and their Rust counterparts.

use std::fmt;

use crate::sys;

/// A tensor element type (`iree_hal_element_type_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ElementType {
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision.
    F64,
    /// Signed 8-bit integer.
    I8,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// `i1` in MLIR, stored by IREE as one byte per element (`BOOL_8`).
    Bool,
}

impl ElementType {
    /// Every element type, for iteration in tests and tools.
    pub const ALL: [ElementType; 8] = [
        ElementType::F16,
        ElementType::BF16,
        ElementType::F32,
        ElementType::F64,
        ElementType::I8,
        ElementType::I32,
        ElementType::I64,
        ElementType::Bool,
    ];

    /// IREE's encoding of this type.
    pub fn to_raw(self) -> sys::iree_hal_element_type_t {
        match self {
            ElementType::F16 => sys::IREE_HAL_ELEMENT_TYPE_FLOAT_16,
            ElementType::BF16 => sys::IREE_HAL_ELEMENT_TYPE_BFLOAT_16,
            ElementType::F32 => sys::IREE_HAL_ELEMENT_TYPE_FLOAT_32,
            ElementType::F64 => sys::IREE_HAL_ELEMENT_TYPE_FLOAT_64,
            ElementType::I8 => sys::IREE_HAL_ELEMENT_TYPE_INT_8,
            ElementType::I32 => sys::IREE_HAL_ELEMENT_TYPE_INT_32,
            ElementType::I64 => sys::IREE_HAL_ELEMENT_TYPE_INT_64,
            ElementType::Bool => sys::IREE_HAL_ELEMENT_TYPE_BOOL_8,
        }
    }

    /// The type IREE's encoding `raw` stands for, if this crate models it.
    /// Signless and signed integers of one width map to the same type.
    pub fn from_raw(raw: sys::iree_hal_element_type_t) -> Option<ElementType> {
        ElementType::ALL
            .into_iter()
            .find(|t| t.to_raw() == raw)
            .or(match raw {
                sys::IREE_HAL_ELEMENT_TYPE_SINT_8 => Some(ElementType::I8),
                sys::IREE_HAL_ELEMENT_TYPE_SINT_32 => Some(ElementType::I32),
                sys::IREE_HAL_ELEMENT_TYPE_SINT_64 => Some(ElementType::I64),
                _ => None,
            })
    }

    /// Bytes per element.
    pub fn byte_size(self) -> usize {
        sys::iree_hal_element_dense_byte_count(self.to_raw())
    }

    /// The MLIR spelling: `f32`, `bf16`, `i1`, ...
    pub fn mlir_name(self) -> &'static str {
        match self {
            ElementType::F16 => "f16",
            ElementType::BF16 => "bf16",
            ElementType::F32 => "f32",
            ElementType::F64 => "f64",
            ElementType::I8 => "i8",
            ElementType::I32 => "i32",
            ElementType::I64 => "i64",
            ElementType::Bool => "i1",
        }
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mlir_name())
    }
}

#[cfg(not(target_endian = "little"))]
compile_error!("iree-safe copies tensor elements as little-endian bytes");

pub(crate) mod sealed {
    /// Plain data: no padding, and every bit pattern of its size is a valid
    /// value, so device bytes can be copied straight into it.
    ///
    /// # Safety
    /// Implementors must be `Copy` types with no padding and no invalid bit
    /// patterns.
    pub unsafe trait Pod: Copy + 'static {}

    // SAFETY: primitive numbers have no padding and no invalid bit patterns;
    // `half`'s types are `repr(transparent)` over `u16`.
    unsafe impl Pod for u8 {}
    // SAFETY: as above.
    unsafe impl Pod for i8 {}
    // SAFETY: as above.
    unsafe impl Pod for i32 {}
    // SAFETY: as above.
    unsafe impl Pod for i64 {}
    // SAFETY: as above.
    unsafe impl Pod for f32 {}
    // SAFETY: as above.
    unsafe impl Pod for f64 {}
    // SAFETY: as above.
    unsafe impl Pod for half::f16 {}
    // SAFETY: as above.
    unsafe impl Pod for half::bf16 {}

    /// How an [`Element`](super::Element) is stored in a buffer.
    pub trait Sealed: Sized {
        /// The plain-data type of one stored element (the type itself, or
        /// `u8` for `bool`, whose other bit patterns are invalid in Rust).
        type Storage: Pod;
        /// Turns stored elements into values, reusing the allocation.
        fn from_storage(stored: Vec<Self::Storage>) -> Vec<Self>;
    }
}

/// A Rust type that can be copied to and from tensor elements.
///
/// Implemented for `f32`, `f64`, [`half::f16`], [`half::bf16`], `i8`, `i32`,
/// `i64` and `bool`. Only little-endian hosts are supported: IREE's buffers
/// hold elements in host order, and slices are copied as bytes directly.
pub trait Element: Copy + sealed::Sealed + 'static {
    /// The tensor element type.
    const TYPE: ElementType;
}

macro_rules! plain_elements {
    ($($ty:ty => $variant:ident),*) => {$(
        impl sealed::Sealed for $ty {
            type Storage = $ty;
            fn from_storage(stored: Vec<$ty>) -> Vec<$ty> {
                stored
            }
        }
        impl Element for $ty {
            const TYPE: ElementType = ElementType::$variant;
        }
    )*};
}

plain_elements!(
    f32 => F32,
    f64 => F64,
    half::f16 => F16,
    half::bf16 => BF16,
    i8 => I8,
    i32 => I32,
    i64 => I64
);

impl sealed::Sealed for bool {
    type Storage = u8;
    fn from_storage(stored: Vec<u8>) -> Vec<bool> {
        // Same size and alignment: the standard library maps in place.
        stored.into_iter().map(|byte| byte != 0).collect()
    }
}

impl Element for bool {
    const TYPE: ElementType = ElementType::Bool;
}
