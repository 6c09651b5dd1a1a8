//! Call signatures: the cache key.
//!
//! A [`Signature`] holds, per argument, its dtype and dims (rank included), the
//! scalar constants that were baked into the compiled code (compared by exact
//! bit pattern), the arguments' structure and captured scalars. Its hash is
//! computed once at construction so a lookup never hashes again.
//!
//! A dim may be dynamic ([`ArgSpec::DYNAMIC`], displayed `?`): such a
//! signature is the key of code compiled for any size of that dim, and
//! [generalizes](Signature::generalizes) every call signature that agrees
//! with it elsewhere.

mod arg;
mod scalar;
#[cfg(test)]
mod tests;
pub(crate) mod text;

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rustc_hash::FxHasher;
use smallvec::SmallVec;

use crate::dtype::DType;
use crate::hashing::finalize;
use crate::layout::{Container, Layout, LayoutBuilder, Leaf};

pub use arg::ArgSpec;
pub use scalar::{CapturedScalar, ScalarValue};

/// The key of one compiled executable of a function: argument dtypes and
/// dims, the scalars baked into the code, the arguments' structure, captured
/// scalar constants.
///
/// Built once per call (see [`Signature::builder`]); up to 4 tensor
/// arguments of rank up to 4, 2 static scalars and 2 captured scalars are
/// stored inline without allocating, and flat calls (tensors side by side)
/// carry no [`Layout`]. Captured scalars are kept sorted by name, so the order
/// they are given in does not matter. The hash is computed at construction;
/// equality compares the full contents. Displayed like
/// `(f32[1,5], i32[]) {temperature=0.8}`, with the structure written out when
/// there is one (`(f32[2], {b: f32[3], k: 3_i64})`).
#[derive(Clone)]
pub struct Signature {
    args: SmallVec<[ArgSpec; 4]>,
    statics: SmallVec<[ScalarValue; 2]>,
    layout: Option<Layout>,
    captured: SmallVec<[CapturedScalar; 2]>,
    hash: u64,
}

impl Signature {
    /// A flat signature from its parts: tensor arguments side by side.
    pub fn new(
        args: impl IntoIterator<Item = ArgSpec>,
        captured: impl IntoIterator<Item = CapturedScalar>,
    ) -> Self {
        Self::from_parts(
            args.into_iter().collect(),
            SmallVec::new(),
            None,
            captured.into_iter().collect(),
        )
    }

    /// A builder that adds arguments, static scalars, structure and
    /// captured scalars one at a time.
    #[inline]
    pub fn builder() -> SignatureBuilder {
        SignatureBuilder::default()
    }

    #[inline]
    pub(crate) fn from_parts(
        args: SmallVec<[ArgSpec; 4]>,
        statics: SmallVec<[ScalarValue; 2]>,
        layout: Option<Layout>,
        mut captured: SmallVec<[CapturedScalar; 2]>,
    ) -> Self {
        if captured.len() > 1 {
            captured.sort_unstable();
        }
        let mut h = FxHasher::default();
        h.write_usize(args.len());
        for arg in &args {
            h.write_u8(arg.dtype.code());
            h.write_usize(arg.dims.len());
            for &d in &arg.dims {
                h.write_i64(d);
            }
        }
        if let Some(layout) = &layout {
            h.write_u64(layout.precomputed_hash());
            for value in &statics {
                value.hash(&mut h);
            }
        }
        for c in &captured {
            c.name.hash(&mut h);
            c.value.hash(&mut h);
        }
        Signature {
            args,
            statics,
            layout,
            captured,
            hash: finalize(h.finish()),
        }
    }

    /// The tensor arguments (scalars passed at run time included, as rank-0
    /// tensors), in flattening order.
    pub fn args(&self) -> &[ArgSpec] {
        &self.args
    }

    /// The scalars baked into the code (static arguments), in flattening
    /// order. Their exact values are part of the key.
    pub fn statics(&self) -> &[ScalarValue] {
        &self.statics
    }

    /// How the arguments nest (tuples, lists, dicts and their keys), or
    /// `None` for a flat call: tensors side by side, no statics.
    pub fn layout(&self) -> Option<&Layout> {
        self.layout.as_ref()
    }

    /// The captured scalars, sorted by name.
    pub fn captured(&self) -> &[CapturedScalar] {
        &self.captured
    }

    /// An exact text of the signature: every part of the key (arguments,
    /// static scalars, layout with its dict keys, captured scalars with
    /// their names and bit patterns), one line with no tab,
    /// from which [`from_exact_text`](Self::from_exact_text)
    /// makes it again. Two signatures have the same exact text exactly when
    /// they are equal, so anything keyed, matched or named by a signature
    /// uses it; `Display` is for people, and can be ambiguous (a captured
    /// scalar named `"a=2.0, t"` displays like two).
    ///
    /// ```
    /// use jit_cache::{ArgSpec, CapturedScalar, DType, ScalarValue, Signature};
    ///
    /// let captured = |name: &str| CapturedScalar::new(name, ScalarValue::F32(3.0));
    /// let x = || [ArgSpec::new(DType::F32, &[1, 5])];
    /// let a = CapturedScalar::new("a", ScalarValue::F32(2.0));
    /// let two = Signature::new(x(), [a, captured("t")]);
    /// let one = Signature::new(x(), [captured("a=2.0, t")]);
    /// assert_eq!(two.to_string(), one.to_string());
    /// assert_ne!(two.exact_text(), one.exact_text());
    /// assert_eq!(Signature::from_exact_text(&one.exact_text()), Some(one));
    /// ```
    pub fn exact_text(&self) -> String {
        text::exact_text(self)
    }

    /// The signature whose [`exact_text`](Self::exact_text) is `text`;
    /// `None` for text no signature has.
    pub fn from_exact_text(text: &str) -> Option<Signature> {
        text::from_exact_text(text)
    }

    /// The hash computed at construction.
    pub fn precomputed_hash(&self) -> u64 {
        self.hash
    }

    /// Whether any argument has a dynamic dim.
    pub fn has_dynamic_dims(&self) -> bool {
        self.args.iter().any(ArgSpec::has_dynamic_dims)
    }

    /// The number of dynamic dims, over all arguments.
    pub fn dynamic_dim_count(&self) -> usize {
        self.args
            .iter()
            .map(|arg| arg.dims.iter().filter(|&&d| d == ArgSpec::DYNAMIC).count())
            .sum()
    }

    /// Whether code compiled for `self` serves a call with signature
    /// `other`: everything equal except dims that are dynamic in `self`
    /// (any size there). Every signature generalizes itself.
    ///
    /// ```
    /// use jit_cache::{DType, Signature};
    ///
    /// let any_batch = Signature::builder().arg(DType::F32, &[-1, 256]).build();
    /// let call = Signature::builder().arg(DType::F32, &[7, 256]).build();
    /// assert_eq!(any_batch.to_string(), "(f32[?,256])");
    /// assert!(any_batch.generalizes(&call));
    /// assert!(!call.generalizes(&any_batch));
    /// let other_rank = Signature::builder().arg(DType::F32, &[7, 256, 1]).build();
    /// assert!(!any_batch.generalizes(&other_rank));
    /// ```
    pub fn generalizes(&self, other: &Signature) -> bool {
        self.args.len() == other.args.len()
            && self
                .args
                .iter()
                .zip(&other.args)
                .all(|(mine, theirs)| mine.admits(theirs))
            && self.statics == other.statics
            && self.layout == other.layout
            && self.captured == other.captured
    }

    /// This signature with the dims at `dims` ((argument, dim) positions)
    /// made dynamic; positions that do not exist are ignored.
    pub fn with_dynamic_dims(&self, dims: &[(usize, usize)]) -> Signature {
        let mut args = self.args.clone();
        for &(arg, dim) in dims {
            if let Some(d) = args.get_mut(arg).and_then(|a| a.dims.get_mut(dim)) {
                *d = ArgSpec::DYNAMIC;
            }
        }
        Self::from_parts(
            args,
            self.statics.clone(),
            self.layout.clone(),
            self.captured.clone(),
        )
    }

    /// This signature with every dim dynamic: what all signatures that
    /// differ from it in dims alone (not in rank) have in common.
    pub(crate) fn shape_class(&self) -> Signature {
        let every: Vec<(usize, usize)> = self
            .args
            .iter()
            .enumerate()
            .flat_map(|(i, arg)| (0..arg.rank()).map(move |d| (i, d)))
            .collect();
        self.with_dynamic_dims(&every)
    }
}

impl PartialEq for Signature {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash
            && self.args == other.args
            && self.statics == other.statics
            && self.layout == other.layout
            && self.captured == other.captured
    }
}

impl Eq for Signature {}

impl Hash for Signature {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        match &self.layout {
            None => {
                for (i, arg) in self.args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{arg}")?;
                }
            }
            Some(layout) => {
                let (mut args, mut statics) = (self.args.iter(), self.statics.iter());
                layout.render(f, |f, leaf| match leaf {
                    Leaf::Tensor => match args.next() {
                        Some(arg) => write!(f, "{arg}"),
                        None => f.write_str("?"),
                    },
                    Leaf::Static => match statics.next() {
                        Some(value) => write!(f, "{value:?}"),
                        None => f.write_str("?"),
                    },
                })?;
            }
        }
        f.write_str(")")?;
        if !self.captured.is_empty() {
            f.write_str(" {")?;
            for (i, c) in self.captured.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{c}")?;
            }
            f.write_str("}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signature{self}")
    }
}

/// Builds a [`Signature`] argument by argument, in place (the methods take
/// `&mut self`, so a builder is never copied around).
///
/// ```
/// use jit_cache::{CapturedScalar, Container, DType, ScalarValue, Signature};
///
/// let sig = Signature::builder()
///     .arg(DType::F32, &[1, 5])
///     .captured(CapturedScalar::f32("temperature", 0.8))
///     .build();
/// assert_eq!(sig.to_string(), "(f32[1,5]) {temperature=0.8}");
///
/// // Or step by step, e.g. from a list of tensors:
/// let mut builder = Signature::builder();
/// for dims in [&[2, 3][..], &[3]] {
///     builder.arg(DType::F64, dims);
/// }
/// assert_eq!(builder.build().to_string(), "(f64[2,3], f64[3])");
///
/// // Structured arguments: a tensor, then a dict holding a tensor and a
/// // scalar baked into the code.
/// let sig = Signature::builder()
///     .arg(DType::F32, &[2])
///     .open(Container::Dict)
///     .key("b")
///     .arg(DType::F32, &[3])
///     .key("k")
///     .static_scalar(ScalarValue::I64(3))
///     .close()
///     .build();
/// assert_eq!(sig.to_string(), "(f32[2], {b: f32[3], k: 3_i64})");
/// ```
///
/// A structure that does not describe a tree (an unbalanced `close`, a key
/// outside a dict) is kept as given: it still keys exactly and displays as
/// best it can.
#[derive(Debug, Default, Clone)]
pub struct SignatureBuilder {
    args: SmallVec<[ArgSpec; 4]>,
    statics: SmallVec<[ScalarValue; 2]>,
    /// Recorded from the first structural element on; flat calls never
    /// allocate one.
    layout: Option<LayoutBuilder>,
    captured: SmallVec<[CapturedScalar; 2]>,
}

impl SignatureBuilder {
    /// Appends a tensor argument (a scalar passed at run time is a tensor of
    /// rank 0: `arg(DType::F32, &[])`).
    #[inline]
    pub fn arg(&mut self, dtype: DType, dims: &[i64]) -> &mut Self {
        self.arg_spec(ArgSpec::new(dtype, dims))
    }

    /// Appends a tensor argument given as an [`ArgSpec`].
    #[inline]
    pub fn arg_spec(&mut self, arg: ArgSpec) -> &mut Self {
        if let Some(layout) = &mut self.layout {
            layout.leaf(Leaf::Tensor);
        }
        self.args.push(arg);
        self
    }

    /// Appends a scalar argument baked into the compiled code: its exact
    /// value is part of the key.
    pub fn static_scalar(&mut self, value: ScalarValue) -> &mut Self {
        self.structured().leaf(Leaf::Static);
        self.statics.push(value);
        self
    }

    /// Opens a tuple, list or dict argument.
    pub fn open(&mut self, container: Container) -> &mut Self {
        self.structured().open(container);
        self
    }

    /// The key of the next entry of the innermost dict.
    pub fn key(&mut self, key: impl Into<Arc<str>>) -> &mut Self {
        self.structured().key(key);
        self
    }

    /// Closes the innermost tuple, list or dict.
    pub fn close(&mut self) -> &mut Self {
        self.structured().close();
        self
    }

    /// Adds a captured scalar constant.
    #[inline]
    pub fn captured(&mut self, scalar: CapturedScalar) -> &mut Self {
        self.captured.push(scalar);
        self
    }

    /// Finishes the signature, computing its hash. The builder is left empty
    /// and can build another signature.
    #[inline]
    pub fn build(&mut self) -> Signature {
        let layout = self.layout.take().map(LayoutBuilder::build_unchecked);
        Signature::from_parts(
            std::mem::take(&mut self.args),
            std::mem::take(&mut self.statics),
            layout,
            std::mem::take(&mut self.captured),
        )
    }

    /// The layout being recorded, started with the tensors added so far.
    fn structured(&mut self) -> &mut LayoutBuilder {
        let flat = self.args.len();
        self.layout
            .get_or_insert_with(|| LayoutBuilder::tensors(flat))
    }
}
