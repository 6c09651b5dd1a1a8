//! [`ScalarValue`] and [`CapturedScalar`]: the scalars in a signature,
//! compared by their exact bits.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The value of a captured scalar constant.
///
/// Equality, hashing and ordering use the exact bit pattern: `0.8` and
/// `0.8000001` differ, `-0.0` and `0.0` differ, and a NaN equals a NaN with the
/// same payload. Values of different kinds (`3_i32`, `3_i64`) differ.
#[derive(Clone, Copy)]
#[expect(
    clippy::exhaustive_enums,
    reason = "callers lower each scalar kind to code (an MLIR literal, a dtype) and must handle \
        every kind; a new kind must show up as a compile error, not a `_` arm"
)]
pub enum ScalarValue {
    /// A 32-bit float.
    F32(f32),
    /// A 64-bit float.
    F64(f64),
    /// A 32-bit signed integer.
    I32(i32),
    /// A 64-bit signed integer.
    I64(i64),
    /// A boolean.
    Bool(bool),
}

impl ScalarValue {
    /// The value's bit pattern, zero-extended to 64 bits.
    pub fn bits(self) -> u64 {
        match self {
            ScalarValue::F32(v) => u64::from(v.to_bits()),
            ScalarValue::F64(v) => v.to_bits(),
            ScalarValue::I32(v) => u64::from(v as u32),
            ScalarValue::I64(v) => v as u64,
            ScalarValue::Bool(v) => u64::from(v),
        }
    }

    /// The value of the kind named `kind` (a [`kind_name`](Self::kind_name))
    /// whose [`bits`](Self::bits) are `bits`; `None` for another name, or
    /// bits that are no value of the kind.
    pub(crate) fn from_bits(kind: &str, bits: u64) -> Option<ScalarValue> {
        let narrow = u32::try_from(bits).ok();
        Some(match kind {
            "f32" => ScalarValue::F32(f32::from_bits(narrow?)),
            "f64" => ScalarValue::F64(f64::from_bits(bits)),
            "i32" => ScalarValue::I32(narrow? as i32),
            "i64" => ScalarValue::I64(bits as i64),
            "bool" => ScalarValue::Bool(match bits {
                0 => false,
                1 => true,
                _ => return None,
            }),
            _ => return None,
        })
    }

    /// The kind's short name: `f32`, `f64`, `i32`, `i64` or `bool`.
    pub fn kind_name(self) -> &'static str {
        match self {
            ScalarValue::F32(_) => "f32",
            ScalarValue::F64(_) => "f64",
            ScalarValue::I32(_) => "i32",
            ScalarValue::I64(_) => "i64",
            ScalarValue::Bool(_) => "bool",
        }
    }

    fn kind_code(self) -> u8 {
        match self {
            ScalarValue::F32(_) => 1,
            ScalarValue::F64(_) => 2,
            ScalarValue::I32(_) => 3,
            ScalarValue::I64(_) => 4,
            ScalarValue::Bool(_) => 5,
        }
    }

    fn key(self) -> (u8, u64) {
        (self.kind_code(), self.bits())
    }
}

impl PartialEq for ScalarValue {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for ScalarValue {}

impl PartialOrd for ScalarValue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ScalarValue {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl Hash for ScalarValue {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u8(self.kind_code());
        state.write_u64(self.bits());
    }
}

impl fmt::Display for ScalarValue {
    /// Shortest text that reads back to the same value (`0.8`, `-0.0`, `1.0`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScalarValue::F32(v) => write!(f, "{v:?}"),
            ScalarValue::F64(v) => write!(f, "{v:?}"),
            ScalarValue::I32(v) => write!(f, "{v}"),
            ScalarValue::I64(v) => write!(f, "{v}"),
            ScalarValue::Bool(v) => write!(f, "{v}"),
        }
    }
}

impl fmt::Debug for ScalarValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}_{}", self.kind_name())
    }
}

/// A scalar that was baked into the compiled code as a constant, such as a
/// `temperature` or a top-k `k`.
///
/// It belongs in the key: otherwise a changed scalar would silently reuse
/// stale code. Keep names as `Arc<str>` and clone them to build signatures
/// without allocating.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CapturedScalar {
    pub(super) name: Arc<str>,
    pub(super) value: ScalarValue,
}

impl CapturedScalar {
    /// A captured scalar called `name` (a name or path) holding `value`.
    #[inline]
    pub fn new(name: impl Into<Arc<str>>, value: ScalarValue) -> Self {
        CapturedScalar {
            name: name.into(),
            value,
        }
    }

    /// Shorthand for a captured `f32`.
    #[inline]
    pub fn f32(name: impl Into<Arc<str>>, value: f32) -> Self {
        Self::new(name, ScalarValue::F32(value))
    }

    /// Shorthand for a captured `f64`.
    pub fn f64(name: impl Into<Arc<str>>, value: f64) -> Self {
        Self::new(name, ScalarValue::F64(value))
    }

    /// Shorthand for a captured `i32`.
    pub fn i32(name: impl Into<Arc<str>>, value: i32) -> Self {
        Self::new(name, ScalarValue::I32(value))
    }

    /// Shorthand for a captured `i64`.
    pub fn i64(name: impl Into<Arc<str>>, value: i64) -> Self {
        Self::new(name, ScalarValue::I64(value))
    }

    /// Shorthand for a captured `bool`.
    pub fn bool(name: impl Into<Arc<str>>, value: bool) -> Self {
        Self::new(name, ScalarValue::Bool(value))
    }

    /// The scalar's name or path.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The scalar's value.
    pub fn value(&self) -> ScalarValue {
        self.value
    }
}

impl fmt::Display for CapturedScalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.name, self.value)
    }
}

impl fmt::Debug for CapturedScalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={:?}", self.name, self.value)
    }
}
