//! Reading a [`ScalarValue`] as a Rust number or boolean: exact
//! conversions only, so that a value read back is the value held.

use std::fmt;

use crate::signature::ScalarValue;

/// 2⁶³, the first `f64` past `i64::MAX`.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

impl ScalarValue {
    /// The value as an `f64`, when it is a number `f64` holds exactly:
    /// every `f32` (widened; NaN stays NaN, `-0.0` stays `-0.0`) and `f64`,
    /// every `i32`, and an `i64` of magnitude up to 2⁵³ (or any other an
    /// `f64` holds exactly). `None` for a `bool` (not a number: see
    /// [`as_bool`](Self::as_bool)) and for an `i64` an `f64` would round.
    ///
    /// ```
    /// use jit_cache::ScalarValue;
    ///
    /// assert_eq!(ScalarValue::F32(0.1).as_f64(), Some(f64::from(0.1f32)));
    /// assert_eq!(ScalarValue::I64(1 << 53).as_f64(), Some(9007199254740992.0));
    /// assert_eq!(ScalarValue::I64((1 << 53) + 1).as_f64(), None); // would round
    /// assert_eq!(ScalarValue::Bool(true).as_f64(), None);
    /// ```
    pub fn as_f64(self) -> Option<f64> {
        match self {
            ScalarValue::F32(v) => Some(f64::from(v)),
            ScalarValue::F64(v) => Some(v),
            ScalarValue::I32(v) => Some(f64::from(v)),
            // Exact when converting back gives the same integer (compared
            // in i128: 2⁶³, what i64::MAX rounds to, is no i64).
            ScalarValue::I64(v) => {
                let wide = v as f64;
                (wide as i128 == i128::from(v)).then_some(wide)
            }
            ScalarValue::Bool(_) => None,
        }
    }

    /// The value as an `i64`, when it is a whole number in `i64`'s range:
    /// every `i32` and `i64`, and an `f32` or `f64` with no fraction
    /// (`3.0` → 3, `-0.0` → 0). `None` for a `bool`, a float with a
    /// fraction, an infinity, a NaN, or one beyond `i64`'s range.
    ///
    /// ```
    /// use jit_cache::ScalarValue;
    ///
    /// assert_eq!(ScalarValue::F64(3.0).as_i64(), Some(3));
    /// assert_eq!(ScalarValue::F32(2.5).as_i64(), None);
    /// assert_eq!(ScalarValue::I32(-7).as_i64(), Some(-7));
    /// assert_eq!(ScalarValue::Bool(false).as_i64(), None);
    /// ```
    pub fn as_i64(self) -> Option<i64> {
        let whole = |v: f64| {
            (v.fract() == 0.0 && (-TWO_POW_63..TWO_POW_63).contains(&v)).then_some(v as i64)
        };
        match self {
            ScalarValue::F32(v) => whole(f64::from(v)),
            ScalarValue::F64(v) => whole(v),
            ScalarValue::I32(v) => Some(i64::from(v)),
            ScalarValue::I64(v) => Some(v),
            ScalarValue::Bool(_) => None,
        }
    }

    /// The value as a `bool`, when it is one. Numbers are not read as
    /// truth values (`0_i32` is `None`, not `false`): a Sheaf boolean
    /// comes back as [`ScalarValue::Bool`].
    ///
    /// ```
    /// use jit_cache::ScalarValue;
    ///
    /// assert_eq!(ScalarValue::Bool(true).as_bool(), Some(true));
    /// assert_eq!(ScalarValue::I32(1).as_bool(), None);
    /// ```
    pub fn as_bool(self) -> Option<bool> {
        match self {
            ScalarValue::Bool(v) => Some(v),
            _ => None,
        }
    }
}

/// A [`ScalarValue`] that does not convert exactly to the type asked for
/// (see [`ScalarValue::as_f64`], [`as_i64`](ScalarValue::as_i64) and
/// [`as_bool`](ScalarValue::as_bool) for what converts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScalarConversionError {
    value: ScalarValue,
    to: &'static str,
}

impl ScalarConversionError {
    /// The value that did not convert.
    pub fn value(&self) -> ScalarValue {
        self.value
    }

    /// The type it was asked for: `f64`, `i64` or `bool`.
    pub fn target(&self) -> &'static str {
        self.to
    }
}

impl fmt::Display for ScalarConversionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match (self.value, self.to) {
            (ScalarValue::Bool(_), _) => "a bool is not a number",
            (_, "bool") => "only a bool is a bool (numbers are not truth values)",
            (ScalarValue::I64(_), _) => "an f64 would round it",
            (_, _) => "it is not a whole number in i64's range",
        };
        write!(
            f,
            "the scalar {:?} is not exactly an {}: {why}",
            self.value, self.to
        )
    }
}

impl std::error::Error for ScalarConversionError {}

macro_rules! try_from_scalar {
    ($($target:ty => $read:ident),*) => {$(
        impl TryFrom<ScalarValue> for $target {
            type Error = ScalarConversionError;

            #[doc = concat!(
                "[`ScalarValue::", stringify!($read), "`](ScalarValue::", stringify!($read),
                "), or an error naming the value."
            )]
            fn try_from(value: ScalarValue) -> Result<Self, Self::Error> {
                value.$read().ok_or(ScalarConversionError {
                    value,
                    to: stringify!($target),
                })
            }
        }
    )*};
}

try_from_scalar!(f64 => as_f64, i64 => as_i64, bool => as_bool);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_widen_exactly_and_integers_only_when_an_f64_holds_them() {
        assert_eq!(ScalarValue::F32(0.1).as_f64(), Some(f64::from(0.1f32)));
        assert!(ScalarValue::F32(f32::NAN).as_f64().unwrap().is_nan());
        let negative_zero = ScalarValue::F32(-0.0).as_f64().unwrap();
        assert!(negative_zero == 0.0 && negative_zero.is_sign_negative());
        assert_eq!(ScalarValue::I32(i32::MIN).as_f64(), Some(-2147483648.0));
        assert_eq!(
            ScalarValue::I64(-(1 << 53)).as_f64(),
            Some(-9007199254740992.0)
        );
        assert_eq!(ScalarValue::I64(i64::MIN).as_f64(), Some(-TWO_POW_63));
        assert_eq!(ScalarValue::I64(i64::MAX).as_f64(), None, "2⁶³ - 1 rounds");
        assert_eq!(ScalarValue::I64((1 << 53) + 1).as_f64(), None);
        assert_eq!(ScalarValue::Bool(true).as_f64(), None);
    }

    #[test]
    fn whole_floats_in_range_are_integers_and_nothing_else_is() {
        assert_eq!(ScalarValue::F64(-0.0).as_i64(), Some(0));
        assert_eq!(ScalarValue::F32(-16_777_216.0).as_i64(), Some(-16_777_216));
        assert_eq!(ScalarValue::F64(-TWO_POW_63).as_i64(), Some(i64::MIN));
        for v in [TWO_POW_63, 0.5, f64::INFINITY, f64::NAN, 1e300] {
            assert_eq!(ScalarValue::F64(v).as_i64(), None, "{v}");
        }
        assert_eq!(ScalarValue::I64(i64::MAX).as_i64(), Some(i64::MAX));
        assert_eq!(ScalarValue::Bool(true).as_i64(), None);
        assert_eq!(ScalarValue::I32(0).as_bool(), None);
        assert_eq!(ScalarValue::Bool(false).as_bool(), Some(false));
    }

    #[test]
    fn try_from_gives_the_value_or_an_error_naming_it() {
        assert_eq!(f64::try_from(ScalarValue::I32(3)), Ok(3.0));
        assert_eq!(i64::try_from(ScalarValue::F64(4.0)), Ok(4));
        assert_eq!(bool::try_from(ScalarValue::Bool(true)), Ok(true));
        let error = i64::try_from(ScalarValue::F32(2.5)).unwrap_err();
        assert_eq!(
            (error.value(), error.target()),
            (ScalarValue::F32(2.5), "i64")
        );
        assert_eq!(
            error.to_string(),
            "the scalar 2.5_f32 is not exactly an i64: it is not a whole number in i64's range"
        );
        let error = f64::try_from(ScalarValue::Bool(true)).unwrap_err();
        assert!(
            error.to_string().contains("a bool is not a number"),
            "{error}"
        );
        let error = bool::try_from(ScalarValue::I32(1)).unwrap_err();
        assert!(
            error.to_string().contains("numbers are not truth values"),
            "{error}"
        );
        let error = f64::try_from(ScalarValue::I64(i64::MAX)).unwrap_err();
        assert!(error.to_string().contains("would round"), "{error}");
    }
}
