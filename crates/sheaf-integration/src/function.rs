//! What the runtime knows about a function: its identity and how to lower
//! it. Its interpreter stays with the caller (see `JitRuntime::dispatch`).

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use jit_cache::{FunctionId, Signature};

use crate::error::LoweringError;
use crate::lowering::{entry_symbol, Lowered, LoweringContext};

/// A lowering: the MLIR for one signature, with the caller's metadata `M`.
pub type LowerFn<M> =
    dyn Fn(&LoweringContext<'_>) -> Result<Lowered<M>, LoweringError> + Send + Sync;

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
    lower: Arc<LowerFn<M>>,
}

impl<M: Send + Sync + 'static> JitFunction<M> {
    /// A function called `name` whose definition (source text, or any
    /// canonical form) is `definition`, lowered by `lower`.
    ///
    /// ```
    /// use sheaf_integration::{mlir, JitFunction, Lowered};
    ///
    /// let double: JitFunction = JitFunction::new("double", "(defn double [x] (* 2 x))", |ctx| {
    ///     let [x] = ctx.args() else { return Err("double takes one tensor".into()) };
    ///     let ty = mlir::arg_type(x)?;
    ///     Ok(Lowered::new(format!(
    ///         "func.func @{}(%x: {ty}) -> {ty} {{
    ///            %y = stablehlo.add %x, %x : {ty}
    ///            return %y : {ty}
    ///          }}",
    ///         ctx.entry_name()
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

    fn with_id(
        id: FunctionId,
        lower: impl Fn(&LoweringContext<'_>) -> Result<Lowered<M>, LoweringError>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        // The metadata type is part of the identity, exactly (a `TypeId`):
        // the cache erases the type of a variant's metadata, and this is
        // what keeps a function's lookups to the variants its own lowering
        // made (see `Compiled::metadata`).
        let id = id.with_type_tag::<M>();
        JitFunction {
            entry: entry_symbol(id.name()).into(),
            id,
            lower: Arc::new(lower),
        }
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

    /// Runs the lowering (what a compile does first), with its metadata
    /// type-erased for the cache.
    pub(crate) fn lower(
        &self,
        context: &LoweringContext<'_>,
    ) -> Result<Lowered<Metadata>, LoweringError> {
        let Lowered {
            mlir,
            outputs,
            metadata,
        } = (self.lower)(context)?;
        Ok(Lowered {
            mlir,
            outputs,
            metadata: Arc::new(metadata) as Metadata,
        })
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
    pub fn module_text(&self, signature: &Signature) -> Result<String, LoweringError> {
        let context = LoweringContext::new(self.name(), signature, None, &self.entry);
        Ok(self.entry_module(&self.lower(&context)?.mlir))
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

    /// The entry symbol its lowering is asked to define, made from the name
    /// as Sheaf names its functions (`mlp-layer` → `mlp_layer`, `empty?` →
    /// `empty_q`).
    pub fn entry_symbol(&self) -> &str {
        &self.entry
    }
}

/// Per-variant metadata, type-erased in the cache.
pub(crate) type Metadata = Arc<dyn Any + Send + Sync>;

impl<M> Clone for JitFunction<M> {
    fn clone(&self) -> Self {
        JitFunction {
            id: self.id.clone(),
            entry: Arc::clone(&self.entry),
            lower: Arc::clone(&self.lower),
        }
    }
}

impl<M> fmt::Debug for JitFunction<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JitFunction")
            .field("id", &self.id)
            .field("metadata", &std::any::type_name::<M>())
            .finish_non_exhaustive()
    }
}
