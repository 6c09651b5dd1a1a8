//! [`ArgSpec`]: the dtype and dims of one tensor argument.

use std::fmt;

use smallvec::SmallVec;

use crate::dtype::DType;

/// Dims stored inline up to rank 4 (no allocation for common tensors).
type Dims = SmallVec<[i64; 4]>;

/// Dtype and dims of one tensor argument. Displayed like `f32[1,5]`; a scalar
/// tensor (rank 0) is `f32[]`, a dynamic dim is `?` (`f32[?,256]`).
///
/// The rank is part of the identity: `f32[1,5]` and `f32[1,5,1]` differ.
#[derive(Clone, PartialEq, Eq)]
pub struct ArgSpec {
    pub(super) dtype: DType,
    pub(super) dims: Dims,
}

impl ArgSpec {
    /// A dim of any size: the value of a dynamic dim in [`dims`](Self::dims).
    pub const DYNAMIC: i64 = -1;

    /// A tensor argument of element type `dtype` and shape `dims`; a
    /// negative dim is dynamic (stored as [`ArgSpec::DYNAMIC`]).
    #[inline]
    pub fn new(dtype: DType, dims: &[i64]) -> Self {
        let mut spec = ArgSpec {
            dtype,
            dims: Dims::from_slice(dims),
        };
        if dims.iter().any(|&dim| dim < Self::DYNAMIC) {
            spec.normalize_dynamic();
        }
        spec
    }

    /// Stores every negative dim as [`ArgSpec::DYNAMIC`].
    #[cold]
    fn normalize_dynamic(&mut self) {
        for dim in &mut self.dims {
            *dim = (*dim).max(Self::DYNAMIC);
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The dims, outermost first.
    pub fn dims(&self) -> &[i64] {
        &self.dims
    }

    /// The number of dims.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// Whether dim `index` is dynamic (false when there is no such dim).
    pub fn is_dynamic(&self, index: usize) -> bool {
        self.dims.get(index) == Some(&Self::DYNAMIC)
    }

    /// Whether any dim is dynamic.
    pub fn has_dynamic_dims(&self) -> bool {
        self.dims.contains(&Self::DYNAMIC)
    }

    /// Whether a tensor described by `concrete` fits this spec: same dtype
    /// and rank, and equal dims wherever this spec's are static.
    pub fn admits(&self, concrete: &ArgSpec) -> bool {
        self.dtype == concrete.dtype
            && self.dims.len() == concrete.dims.len()
            && self
                .dims
                .iter()
                .zip(&concrete.dims)
                .all(|(&mine, &theirs)| mine == Self::DYNAMIC || mine == theirs)
    }
}

impl fmt::Display for ArgSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if *d == Self::DYNAMIC {
                f.write_str("?")?;
            } else {
                write!(f, "{d}")?;
            }
        }
        f.write_str("]")
    }
}

impl fmt::Debug for ArgSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
