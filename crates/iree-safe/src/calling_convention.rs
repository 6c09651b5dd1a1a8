//! [`CallingConvention`]: the argument and result kinds of a VM function,
//! from IREE's calling-convention strings. (A JIT *signature*, the cache
//! key, is `jit_cache::Signature`: another thing.)
//!
//! IREE describes each function with a string such as `0rr_r`: a version
//! digit, the argument kinds, `_`, the result kinds. `i`/`I` are i32/i64,
//! `f`/`F` f32/f64, `r` a reference (a tensor here), `v` means none, and
//! `C...D` a variadic span, which this crate does not type-check.

use std::fmt;

/// The kind of one argument or result slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SlotKind {
    /// `i`: a 32-bit integer.
    I32,
    /// `I`: a 64-bit integer.
    I64,
    /// `f`: a 32-bit float.
    F32,
    /// `F`: a 64-bit float.
    F64,
    /// `r`: a reference, i.e. a tensor (HAL buffer view).
    Ref,
}

impl SlotKind {
    fn from_char(c: char) -> Option<Self> {
        Some(match c {
            'i' => SlotKind::I32,
            'I' => SlotKind::I64,
            'f' => SlotKind::F32,
            'F' => SlotKind::F64,
            'r' => SlotKind::Ref,
            _ => return None,
        })
    }
}

impl fmt::Display for SlotKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SlotKind::I32 => "i32",
            SlotKind::I64 => "i64",
            SlotKind::F32 => "f32",
            SlotKind::F64 => "f64",
            SlotKind::Ref => "tensor",
        })
    }
}

/// A function's argument and result kinds, as IREE reflects them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallingConvention {
    calling_convention: String,
    arguments: Option<Vec<SlotKind>>,
    results: Option<Vec<SlotKind>>,
}

impl CallingConvention {
    /// Parses a calling-convention string. Parts IREE may add that this
    /// crate does not model (variadic spans) leave that side unknown.
    pub fn parse(calling_convention: &str) -> CallingConvention {
        let body = calling_convention
            .strip_prefix('0')
            .unwrap_or(calling_convention);
        let (arguments, results) = body.split_once('_').unwrap_or((body, ""));
        CallingConvention {
            calling_convention: calling_convention.to_owned(),
            arguments: parse_slots(arguments),
            results: parse_slots(results),
        }
    }

    /// The raw calling-convention string, e.g. `0rr_r`.
    pub fn as_str(&self) -> &str {
        &self.calling_convention
    }

    /// Argument kinds, when every argument has a fixed kind.
    pub fn arguments(&self) -> Option<&[SlotKind]> {
        self.arguments.as_deref()
    }

    /// Result kinds, when every result has a fixed kind.
    pub fn results(&self) -> Option<&[SlotKind]> {
        self.results.as_deref()
    }
}

fn parse_slots(text: &str) -> Option<Vec<SlotKind>> {
    text.chars()
        .filter(|&c| c != 'v')
        .map(SlotKind::from_char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tensor_and_scalar_slots() {
        let s = CallingConvention::parse("0rf_rI");
        assert_eq!(s.arguments(), Some(&[SlotKind::Ref, SlotKind::F32][..]));
        assert_eq!(s.results(), Some(&[SlotKind::Ref, SlotKind::I64][..]));
        assert_eq!(s.as_str(), "0rf_rI");
    }

    #[test]
    fn void_means_no_slots() {
        let s = CallingConvention::parse("0v_v");
        assert_eq!(s.arguments(), Some(&[][..]));
        assert_eq!(s.results(), Some(&[][..]));
    }

    #[test]
    fn variadic_spans_are_left_unknown() {
        let s = CallingConvention::parse("0CrD_r");
        assert_eq!(s.arguments(), None);
        assert_eq!(s.results(), Some(&[SlotKind::Ref][..]));
    }
}
