//! The lowering contract: a lowering ([`Lowering`], or [`CallerLowering`]
//! passed with a call) is given one signature ([`LoweringContext`]) and
//! gives back MLIR ([`Lowered`]) or refuses ([`LoweringError`]). The
//! signature's parts ([`Signature`], [`ArgSpec`], [`Layout`]) are
//! `jit-cache`'s, re-exported here, as is [`stable_hash`], a hash that is
//! the same in every process, for a function's definition hash
//! ([`JitFunction::with_definition_hash`](crate::JitFunction::with_definition_hash)).
//!
//! Inside the crate, the result is made owned for the thread that compiles
//! it (`LoweredVariant`, with its type-erased `Metadata`).

use std::any::Any;
use std::sync::Arc;

use jit_cache::ScalarValue;

pub use crate::error::{LoweringError, VariantError};
use crate::placement::FloatSemantics;
use crate::value::Value;
pub use jit_cache::{
    stable_hash, ArgSpec, Container, Layout, LayoutBuilder, LayoutVisitor, Leaf, Signature,
};

/// A function's own lowering: the MLIR for one signature, with the
/// caller's metadata `M` ([`JitFunction::new`](crate::JitFunction::new)).
/// It may run on any thread, so it is `Send + Sync`.
pub type Lowering<M> =
    dyn Fn(&LoweringContext<'_>) -> Result<Lowered<M>, LoweringError> + Send + Sync;

/// A lowering the caller passes with a call
/// ([`JitRuntime::dispatch_with`](crate::JitRuntime::dispatch_with)): it
/// runs on the calling thread only, so it may borrow the caller's state,
/// `Send` or not.
pub type CallerLowering<'a, M> =
    dyn Fn(&LoweringContext<'_>) -> Result<Lowered<M>, LoweringError> + 'a;

/// What a lowering sees of one call: the signature it compiles for (dtypes
/// and dims, static scalars, the arguments' structure, captured scalars),
/// the argument values themselves when the call is being made (host arrays,
/// or the shape and dtype of device tensors), and the name its entry
/// function must have.
///
/// Anything the lowering bakes into the code must be in the signature
/// (static scalars, captured scalars): the cache serves the code to every
/// call with the same signature.
#[derive(Debug, Clone, Copy)]
pub struct LoweringContext<'a> {
    function: &'a str,
    signature: &'a Signature,
    values: Option<&'a [Value]>,
    entry: &'a str,
}

impl<'a> LoweringContext<'a> {
    pub(crate) fn new(
        function: &'a str,
        signature: &'a Signature,
        values: Option<&'a [Value]>,
        entry: &'a str,
    ) -> Self {
        LoweringContext {
            function,
            signature,
            values,
            entry,
        }
    }

    /// The name of the function being lowered.
    pub fn function(&self) -> &str {
        self.function
    }

    /// The signature to compile for.
    pub fn signature(&self) -> &Signature {
        self.signature
    }

    /// The tensor arguments (scalars passed at run time included, as rank-0
    /// tensors), in the order the entry function takes them. A dim may be
    /// dynamic ([`ArgSpec::DYNAMIC`], [`ArgSpec::is_dynamic`]) for a function
    /// declared [`with_dynamic_dims`](crate::JitFunction::with_dynamic_dims):
    /// the code must then serve every size of it.
    pub fn args(&self) -> &[ArgSpec] {
        self.signature.args()
    }

    /// Whether any argument has a dynamic dim.
    pub fn has_dynamic_dims(&self) -> bool {
        self.signature.has_dynamic_dims()
    }

    /// The static scalars, in flattening order.
    pub fn statics(&self) -> &[ScalarValue] {
        self.signature.statics()
    }

    /// The arguments' structure, when they are not flat tensors.
    pub fn layout(&self) -> Option<&Layout> {
        self.signature.layout()
    }

    /// The captured scalar called `name`.
    pub fn captured(&self, name: &str) -> Option<ScalarValue> {
        self.signature
            .captured()
            .iter()
            .find(|c| c.name() == name)
            .map(|c| c.value())
    }

    /// The argument values of the call being compiled, as given; `None`
    /// when compiling ahead of a call (`precompile`), from the signature
    /// alone. With dynamic dims they are one call's values among the many
    /// the code will serve: a lowering must not bake them into the code.
    pub fn values(&self) -> Option<&'a [Value]> {
        self.values
    }

    /// The entry symbol: the name the entry function must have
    /// (`func.func @<entry_symbol>`). Several variants may share one
    /// module, so every other symbol of the lowering should be made from it
    /// too (see [`symbol`](Self::symbol)).
    pub fn entry_symbol(&self) -> &str {
        self.entry
    }

    /// Renamed [`entry_symbol`](Self::entry_symbol) in 0.3: one name for
    /// the entry symbol everywhere.
    #[deprecated(since = "0.3.0", note = "renamed `entry_symbol`")]
    pub fn entry_name(&self) -> &str {
        self.entry_symbol()
    }

    /// A module-unique name for a helper symbol of this lowering:
    /// `<entry_symbol>__<suffix>`.
    pub fn symbol(&self, suffix: &str) -> String {
        format!("{}__{suffix}", self.entry)
    }
}

/// What a lowering returns for one signature: the MLIR functions, how the
/// results are structured, and the caller's own per-variant metadata, which
/// is kept with the compiled code and handed back on every call it serves.
///
/// `mlir` holds top-level operations only — the entry `func.func`, named
/// [`LoweringContext::entry_symbol`] (or a name of its own, declared with
/// [`with_entry`](Self::with_entry)), and any private helpers — without a
/// `module { }` around them: the runtime wraps them in a module (and may put
/// several variants in one module to compile them at once).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Lowered<M = ()> {
    /// The StableHLO (or linalg) functions.
    pub mlir: String,
    /// How the entry function's results nest (built with
    /// [`LayoutBuilder`], tensor leaves only);
    /// `None`: the results side by side.
    pub outputs: Option<Layout>,
    /// The caller's metadata for this variant (a return type, dict keys,
    /// argument layouts).
    pub metadata: M,
    /// The entry function's own name in `mlir`, when it is not
    /// [`LoweringContext::entry_symbol`] (see [`with_entry`](Self::with_entry)).
    pub entry: Option<String>,
}

impl Lowered<()> {
    /// Functions with results side by side and no metadata.
    pub fn new(mlir: impl Into<String>) -> Self {
        Lowered {
            mlir: mlir.into(),
            outputs: None,
            metadata: (),
            entry: None,
        }
    }
}

impl<M> Lowered<M> {
    /// Declares that the entry function of `mlir` is `func.func @entry`, a
    /// name of the lowering's own (MLIR generated before the call, with a
    /// fixed symbol, such as Sheaf's value-and-grad code), instead of
    /// [`LoweringContext::entry_symbol`]: the runtime renames it to the entry
    /// name, where it is defined and wherever the MLIR refers to it
    /// (`func.call @entry`), leaving string literals, comments and other
    /// symbols alone. Other symbols keep their names: make them unique
    /// with [`LoweringContext::symbol`], since variants may be compiled
    /// together in one module (a background batch whose symbols clash is
    /// compiled again one variant at a time; a
    /// [`precompile`](crate::JitRuntime::precompile) batch fails).
    ///
    /// ```
    /// use sheaf_integration::lowering::Lowered;
    ///
    /// let generated = "func.func @value_and_grad(%x: tensor<f32>) -> tensor<f32> {
    ///   return %x : tensor<f32>
    /// }";
    /// let lowered = Lowered::new(generated).with_entry("value_and_grad");
    /// assert_eq!(lowered.entry.as_deref(), Some("value_and_grad"));
    /// ```
    ///
    /// An entry the MLIR does not define as a public `func.func` is a
    /// [`LoweringError`] of the signature ([`MlirError::NoEntry`](crate::mlir::MlirError::NoEntry),
    /// [`PrivateEntry`](crate::mlir::MlirError::PrivateEntry)), as is an
    /// entry name the MLIR already uses for another symbol
    /// ([`EntryNameTaken`](crate::mlir::MlirError::EntryNameTaken)).
    pub fn with_entry(mut self, entry: impl Into<String>) -> Self {
        self.entry = Some(entry.into());
        self
    }

    /// Declares how the results nest.
    pub fn with_outputs(mut self, outputs: Layout) -> Self {
        self.outputs = Some(outputs);
        self
    }

    /// Attaches the caller's metadata.
    pub fn with_metadata<N>(self, metadata: N) -> Lowered<N> {
        Lowered {
            mlir: self.mlir,
            outputs: self.outputs,
            metadata,
            entry: self.entry,
        }
    }
}

/// One signature of one function, lowered: what crosses from the calling
/// thread (which lowered it, with the caller's own state) to the thread
/// that compiles it. Everything in it is owned and `Send`.
#[derive(Debug)]
pub(crate) struct LoweredVariant {
    /// The function's name and the signature, for errors and the bundle.
    pub(crate) function: String,
    pub(crate) signature: String,
    /// The entry function's symbol in `functions`.
    pub(crate) entry: String,
    /// The lowering's top-level operations (no `module { }` around them).
    pub(crate) functions: String,
    /// The module around them, for one variant alone.
    pub(crate) module: String,
    pub(crate) outputs: Option<Layout>,
    pub(crate) metadata: Metadata,
    /// The metadata as a bundle records it, when the function has a codec.
    pub(crate) metadata_bytes: Option<Arc<[u8]>>,
    /// The float semantics it compiles with (the function's, else the
    /// runtime's): which of its placement's options and target identity.
    pub(crate) semantics: FloatSemantics,
    /// The target identity for which the bundles were asked by key, and
    /// had nothing (`Pipeline::local`, on the calling thread): the compile
    /// thread does not ask them again.
    pub(crate) bundles_missed_for: Option<Arc<str>>,
}

/// Per-variant metadata, type-erased in the cache.
pub(crate) type Metadata = Arc<dyn Any + Send + Sync>;

/// The entry symbol Sheaf's naming gives a function called `name` (what
/// [`JitFunction::entry_symbol`](crate::JitFunction::entry_symbol) and
/// [`LoweringContext::entry_symbol`] say, known before any lowering): `-` →
/// `_`, `?` → `_q`, `!` → `_b`, any other character that is not a letter,
/// digit, `_` or `.` → `_`, and a leading digit prefixed with `_`.
///
/// ```
/// assert_eq!(sheaf_integration::lowering::entry_symbol("empty?"), "empty_q");
/// ```
pub fn entry_symbol(name: &str) -> String {
    let mut symbol = String::with_capacity(name.len() + 2);
    if name.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        symbol.push('_');
    }
    for c in name.chars() {
        match c {
            '?' => symbol.push_str("_q"),
            '!' => symbol.push_str("_b"),
            c if c.is_ascii_alphanumeric() || c == '_' || c == '.' => symbol.push(c),
            _ => symbol.push('_'),
        }
    }
    symbol
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlir::MlirError;

    #[test]
    fn entry_symbols_follow_sheaf_naming() {
        assert_eq!(entry_symbol("mlp-layer"), "mlp_layer");
        assert_eq!(entry_symbol("empty?"), "empty_q");
        assert_eq!(entry_symbol("set!"), "set_b");
        assert_eq!(entry_symbol("2x"), "_2x");
        assert_eq!(entry_symbol(""), "_");
        assert_eq!(entry_symbol("λ"), "_");
    }

    #[test]
    fn lowering_errors_keep_their_source() {
        let io = std::io::Error::other("disk full");
        let error = LoweringError::with_source("cannot emit", io);
        assert_eq!(error.to_string(), "cannot emit");
        let source = std::error::Error::source(&error).expect("the source");
        assert_eq!(source.to_string(), "disk full");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        assert_eq!(
            crate::ErrorChain(&error).to_string(),
            "cannot emit: disk full"
        );
    }

    #[test]
    fn mlir_errors_are_lowering_errors_as_they_are() {
        let error = LoweringError::from(MlirError::UnknownDim(-2));
        assert_eq!(error.to_string(), MlirError::UnknownDim(-2).to_string());
        assert!(std::error::Error::source(&error).is_none());
        assert!(matches!(
            error,
            LoweringError::Mlir(MlirError::UnknownDim(-2))
        ));
    }
}
