//! How a signature the cache has not seen becomes a loaded variant: the
//! steps of one miss, top to bottom, in this folder.
//!
//! 1. **Lower** ([`function`], [`lowering`]): the function's lowering runs
//!    on the calling thread, with the caller's state, and gives MLIR; its own
//!    entry symbol is renamed to the signature's ([`entry_symbol`]). The
//!    result is made owned (`LoweredVariant`) so that it can cross to a
//!    compile thread.
//! 2. **Key** ([`pipeline`]): the artifact's key is the module text, the
//!    compiler's build, the target and the flags (`jit_store::ArtifactKey`).
//! 3. **Tiers** ([`pipeline`]): the artifact bundles by key (asked once per
//!    miss and placement), then the disk cache, then the remote tier, all
//!    through `jit_store::ArtifactStore::fetch_or_build`, which also makes
//!    one build of a key at a time, in the process and (with a remote tier)
//!    across processes.
//! 4. **Compile** ([`pipeline`], [`batch_queue`]): the compiler runs when no
//!    tier has the artifact. Misses queued in background mode compile
//!    together as one module.
//! 5. **Load and publish** ([`pipeline`], [`variant`]): the artifact is
//!    loaded into the placement's runtime, written to the disk cache and
//!    the remote tier, and handed to the cache as a [`variant::Variant`].
//!
//! The runtime drives these steps (`runtime/dispatch.rs` for a call,
//! `runtime/variants.rs` for which placement compiles, the vetting of a
//! generalization against the call's own signature and the CPU fallback,
//! `runtime/precompile.rs` for compiling ahead): those are the runtime's
//! methods, over its placements, cache and profile, so they stay in
//! `runtime/`, and nothing here names the runtime.
//!
//! Where control returns up (five closures): `jit_cache::JitCache` calls
//! the runtime's closures for a blocking miss's compile and for a
//! background miss's preparation and its queued job (`runtime/dispatch.rs`),
//! and
//! `jit_store::ArtifactStore::fetch_or_build` calls back to load an
//! artifact and to build one ([`pipeline`]): the policy (when to compile)
//! and the store (where an artifact is) do not know IREE, so the step that
//! does is passed down to them.

pub(crate) mod batch_queue;
pub(crate) mod entry_symbol;
pub(crate) mod function;
pub mod lowering;
pub(crate) mod pipeline;
pub(crate) mod variant;
