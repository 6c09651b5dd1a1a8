//! What the runtime knows about a function: its identity, how to lower it
//! (or that each call brings its lowering), its compile mode, and how its
//! metadata travels in a bundle. Its interpreter stays with the caller (see
//! `JitRuntime::dispatch`).

use std::fmt;
use std::sync::Arc;

use jit_cache::{FunctionId, Signature};

use crate::compile::lowering::{entry_symbol, Lowered, Lowering, LoweringContext, Metadata};
use crate::config::CompileMode;
use crate::error::LoweringError;
use crate::placement::FloatSemantics;

/// A function that may run compiled. Cheap to clone.
///
/// Its identity is its name plus a hash of its definition, so a redefined
/// function never reuses code compiled for the old definition. Sheaf hashes
/// a function together with its callees and without source locations; give
/// that hash to [`JitFunction::with_definition_hash`], or the definition's
/// text to [`JitFunction::new`].
///
/// `M` is the caller's per-variant metadata, produced by the lowering and
/// handed back on every compiled call (`()` when there is none). It is part
/// of the identity: two functions of the same name and definition but
/// different metadata types never share variants.
pub struct JitFunction<M = ()> {
    id: FunctionId,
    entry: Arc<str>,
    /// `None` for a function lowered per call
    /// ([`JitRuntime::dispatch_with`](crate::JitRuntime::dispatch_with)).
    lower: Option<Arc<Lowering<M>>>,
    mode: Option<CompileMode>,
    /// `None`: the runtime's ([`CompileSettings::float_semantics`](crate::settings::CompileSettings::float_semantics)).
    float: Option<FloatSemantics>,
    codec: Option<MetadataCodec<M>>,
}

/// What a function's id is tagged with when it chooses its own float
/// semantics: `(M, StrictFloat)` or `(M, ReassociatedFloat)`, its metadata
/// type with a marker of the choice, so that the in-memory cache never
/// hands one choice's variant to another (the disk cache and bundles tell
/// them apart by the target identity, which holds the flags).
enum StrictFloat {}
/// The marker of [`FloatSemantics::Reassociate`] (see [`StrictFloat`]).
enum ReassociatedFloat {}

/// How a function's metadata is written into an exported bundle and read
/// back from it, so the bundle serves the function without lowering it.
pub(crate) struct MetadataCodec<M> {
    pub(crate) encode: fn(&M) -> Vec<u8>,
    pub(crate) decode: fn(&[u8]) -> Option<M>,
}

impl<M> Clone for MetadataCodec<M> {
    fn clone(&self) -> Self {
        MetadataCodec { ..*self }
    }
}

impl<M: Send + Sync + 'static> JitFunction<M> {
    /// A function called `name` whose definition (source text, or any
    /// canonical form) is `definition`, lowered by `lower`.
    ///
    /// ```
    /// use sheaf_integration::{lowering::Lowered, mlir, JitFunction};
    ///
    /// let double: JitFunction = JitFunction::new("double", "(defn double [x] (* 2 x))", |ctx| {
    ///     let [x] = ctx.args() else { return Err("double takes one tensor".into()) };
    ///     let ty = mlir::arg_type(x)?;
    ///     Ok(Lowered::new(format!(
    ///         "func.func @{}(%x: {ty}) -> {ty} {{
    ///            %y = stablehlo.add %x, %x : {ty}
    ///            return %y : {ty}
    ///          }}",
    ///         ctx.entry_symbol()
    ///     )))
    /// });
    /// assert_eq!(double.name(), "double");
    /// ```
    pub fn new(
        name: &str,
        definition: &str,
        lower: impl Fn(&LoweringContext<'_>) -> Result<Lowered<M>, LoweringError>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        Self::with_id(FunctionId::for_definition(name, definition), lower)
    }

    /// A function called `name` whose definition hashes to
    /// `definition_hash` (the caller's own hash, e.g. over the function and
    /// its callees, ignoring source locations).
    pub fn with_definition_hash(
        name: &str,
        definition_hash: u64,
        lower: impl Fn(&LoweringContext<'_>) -> Result<Lowered<M>, LoweringError>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        Self::with_id(FunctionId::new(name, definition_hash), lower)
    }

    /// A function called `name` whose definition hashes to
    /// `definition_hash`, with no lowering of its own: each call brings it,
    /// through [`JitRuntime::dispatch_with`](crate::JitRuntime::dispatch_with),
    /// run on the caller's thread and free to borrow the caller's state
    /// (its IR, its values, its function registry), `Send` or not.
    ///
    /// ```
    /// use sheaf_integration::JitFunction;
    ///
    /// let f: JitFunction = JitFunction::lowered_per_call("mlp-layer", 0x5eaf);
    /// assert_eq!(f.entry_symbol(), "mlp_layer");
    /// assert!(!f.has_lowering());
    /// ```
    pub fn lowered_per_call(name: &str, definition_hash: u64) -> Self {
        Self::identified(FunctionId::new(name, definition_hash), None)
    }

    fn with_id(
        id: FunctionId,
        lower: impl Fn(&LoweringContext<'_>) -> Result<Lowered<M>, LoweringError>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        Self::identified(id, Some(Arc::new(lower)))
    }

    fn identified(id: FunctionId, lower: Option<Arc<Lowering<M>>>) -> Self {
        // The metadata type is part of the identity, exactly (a `TypeId`):
        // the cache erases the type of a variant's metadata, and this is
        // what keeps a function's lookups to the variants its own lowering
        // made (see `Compiled::metadata`).
        let id = id.with_type_tag::<M>();
        JitFunction {
            entry: entry_symbol(id.name()).into(),
            id,
            lower,
            mode: None,
            float: None,
            codec: None,
        }
    }

    /// Compiles this function's misses in `mode`, whatever the runtime's
    /// ([`CompileSettings::mode`](crate::settings::CompileSettings::mode)): e.g.
    /// [`CompileMode::Blocking`] for a value-and-grad function, or one whose
    /// interpreted form is slow or disagrees with the compiled one.
    pub fn with_compile_mode(mut self, mode: CompileMode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// Compiles this function with `semantics`, whatever the runtime's
    /// ([`CompileSettings::float_semantics`](crate::settings::CompileSettings::float_semantics)):
    /// e.g. [`FloatSemantics::Reassociate`] for a hot reduction whose last
    /// bits do not matter, in a runtime that keeps the compiler's
    /// semantics. The choice is part of the function's identity: its
    /// variants are never served to the same function with another choice
    /// (nor to one without a choice), in memory, on disk or from a bundle.
    ///
    /// ```
    /// use sheaf_integration::{settings::FloatSemantics, reference};
    ///
    /// let fast = reference::softmax().with_float_semantics(FloatSemantics::Reassociate);
    /// assert_eq!(fast.float_semantics(), Some(FloatSemantics::Reassociate));
    /// assert_ne!(fast.id(), reference::softmax().id());
    /// ```
    pub fn with_float_semantics(mut self, semantics: FloatSemantics) -> Self {
        self.id = match semantics {
            FloatSemantics::Strict => self.id.with_type_tag::<(M, StrictFloat)>(),
            FloatSemantics::Reassociate => self.id.with_type_tag::<(M, ReassociatedFloat)>(),
        };
        self.float = Some(semantics);
        self
    }

    /// Lets an exported bundle carry this function's metadata, so a process
    /// serves the function from the bundle without lowering it (functions
    /// with `()` metadata need no codec). `decode` returning `None` makes
    /// the entry unusable: the call lowers and compiles instead.
    ///
    /// ```
    /// use sheaf_integration::{JitFunction};
    ///
    /// // Metadata: the result's dict keys, written one per line.
    /// let f: JitFunction<Vec<String>> = JitFunction::lowered_per_call("step", 7)
    ///     .with_metadata_codec(
    ///         |keys| keys.join("\n").into_bytes(),
    ///         |bytes| Some(std::str::from_utf8(bytes).ok()?.lines().map(String::from).collect()),
    ///     );
    /// # let _ = f;
    /// ```
    pub fn with_metadata_codec(
        mut self,
        encode: fn(&M) -> Vec<u8>,
        decode: fn(&[u8]) -> Option<M>,
    ) -> Self {
        self.codec = Some(MetadataCodec { encode, decode });
        self
    }

    /// Declares that the lowering accepts signatures with dynamic dims: an
    /// argument's dim may be [`ArgSpec::DYNAMIC`](jit_cache::ArgSpec::DYNAMIC)
    /// (`?` in [`mlir::tensor_type`](crate::mlir::tensor_type)), and the code
    /// it returns must then be correct for every size of that dim, 0 and 1
    /// included, and fail with a clear error (not read out of bounds) for
    /// sizes that do not fit together (see [`mlir::assert_equal_dims`](crate::mlir::assert_equal_dims)).
    ///
    /// Once a dim of the function's calls has taken two distinct values
    /// (`SHEAF_JIT_DYNAMIC_DIMS_AFTER`), the next miss compiles it dynamic,
    /// and that one variant serves every later size. A lowering may still
    /// refuse a dynamic signature with an error: that shape class then
    /// compiles static shapes, as without this declaration.
    pub fn with_dynamic_dims(mut self) -> Self {
        self.id = self.id.with_dynamic_dims();
        self
    }

    /// The function's own lowering; `None` for one
    /// [lowered per call](Self::lowered_per_call).
    pub(crate) fn lowering(&self) -> Option<&Lowering<M>> {
        self.lower.as_deref()
    }

    /// The metadata of a variant served without lowering, from the bytes a
    /// bundle recorded: decoded by the function's codec, `()` needs none;
    /// `None` when it cannot be had without the lowering.
    pub(crate) fn metadata_from(&self, bytes: Option<&[u8]>) -> Option<Metadata> {
        match (&self.codec, bytes) {
            (Some(codec), Some(bytes)) => Some(Arc::new((codec.decode)(bytes)?) as Metadata),
            _ => (Arc::new(()) as Metadata)
                .downcast::<M>()
                .ok()
                .map(|m| m as Metadata),
        }
    }

    /// The bytes a bundle records of `metadata` (a variant's, of this
    /// function's type), with the function's codec.
    pub(crate) fn encode_metadata(&self, metadata: &Metadata) -> Option<Vec<u8>> {
        let codec = self.codec.as_ref()?;
        Some((codec.encode)(metadata.downcast_ref::<M>()?))
    }
}

impl<M: Send + Sync + 'static> JitFunction<M> {
    /// The complete MLIR module the runtime compiles for `signature` (the
    /// lowering's functions wrapped in `module @<entry_symbol> { }`),
    /// lowered without argument values: to inspect or save a variant, or to
    /// compile it with a compiler of one's own.
    ///
    /// # Errors
    ///
    /// The lowering's [`LoweringError`] when it refuses `signature`.
    /// [`LoweringError`] too for a function
    /// [lowered per call](Self::lowered_per_call).
    pub fn module_text(&self, signature: &Signature) -> Result<String, LoweringError> {
        let lower = self.lowering().ok_or_else(|| {
            LoweringError::new(format!(
                "`{}` is lowered per call: it has no lowering of its own",
                self.name()
            ))
        })?;
        let context = LoweringContext::new(self.name(), signature, None, &self.entry);
        let lowered = lower(&context)?;
        let functions = crate::compile::entry_symbol::named(
            lowered.mlir,
            lowered.entry.as_deref(),
            &self.entry,
        )?;
        Ok(self.entry_module(&functions))
    }

    /// The module around a lowering's functions.
    pub(crate) fn entry_module(&self, functions: &str) -> String {
        format!("module @{} {{\n{functions}\n}}\n", self.entry)
    }
}

impl<M> JitFunction<M> {
    /// The cache identity (name + definition hash, tagged with the metadata
    /// type `M`).
    pub fn id(&self) -> &FunctionId {
        &self.id
    }

    /// The function's name.
    pub fn name(&self) -> &str {
        self.id.name()
    }

    /// The entry symbol made from the name as Sheaf names its functions
    /// (`mlp-layer` → `mlp_layer`, `empty?` → `empty_q`;
    /// [`entry_symbol`](crate::compile::lowering::entry_symbol) of the name): the entry of
    /// [`module_text`](Self::module_text), and the stem of each variant's
    /// ([`variant_symbol`](Self::variant_symbol)).
    pub fn entry_symbol(&self) -> &str {
        &self.entry
    }

    /// The entry symbol the runtime asks the lowering of `signature` to
    /// define (`LoweringContext::entry_symbol`): the entry symbol and a stable
    /// hash of the signature, `mlp_layer_5f1c…`. Distinct signatures get
    /// distinct symbols, so the variants of one function compile together
    /// in one module exactly as each would alone, and the artifact of such
    /// a batch also serves each member's own key.
    pub fn variant_symbol(&self, signature: &Signature) -> String {
        let hash = jit_cache::stable_hash(signature.exact_text().as_bytes());
        format!("{}_{hash:016x}", self.entry)
    }

    /// The compile mode given with [`with_compile_mode`](Self::with_compile_mode),
    /// if any (else the runtime's applies).
    pub fn compile_mode(&self) -> Option<CompileMode> {
        self.mode
    }

    /// The float semantics given with
    /// [`with_float_semantics`](Self::with_float_semantics), if any (else
    /// the runtime's apply).
    pub fn float_semantics(&self) -> Option<FloatSemantics> {
        self.float
    }

    /// Whether the function has a lowering of its own (else each call
    /// brings one, through
    /// [`dispatch_with`](crate::JitRuntime::dispatch_with)).
    pub fn has_lowering(&self) -> bool {
        self.lower.is_some()
    }
}

impl<M> Clone for JitFunction<M> {
    fn clone(&self) -> Self {
        JitFunction {
            id: self.id.clone(),
            entry: Arc::clone(&self.entry),
            lower: self.lower.clone(),
            mode: self.mode,
            float: self.float,
            codec: self.codec.clone(),
        }
    }
}

impl<M> fmt::Debug for JitFunction<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JitFunction")
            .field("id", &self.id)
            .field("metadata", &std::any::type_name::<M>())
            .field("mode", &self.mode)
            .field("float_semantics", &self.float)
            .field("lowered_per_call", &self.lower.is_none())
            .finish_non_exhaustive()
    }
}
