//! A bounded multi-signature JIT cache: the policy, with no I/O.
//!
//! `jit-cache` decides, for each call of a JIT-compiled function, whether to
//! run a cached executable, compile one (on the calling thread, or queued
//! on a background pool while the call interprets), or run the
//! interpreter. The policy is generic over the executable type
//! ([`Executable`]) and does no I/O (it opens no file and no socket), so
//! it is tested with a mock backend and runs under miri. The artifacts on disk, and what the policy learned, are
//! kept between processes by the `jit-store` crate, which builds on this
//! one. The design and the peers it improves on (JAX, PyTorch Dynamo) are
//! in the repository's `docs/architecture.md`.
//!
//! - **Key**: a [`Signature`] holds each argument's dtype and dims (rank
//!   included), the scalars baked into the code (exact bits), how the
//!   arguments nest ([`Layout`]: tuples, lists, dict keys) and captured
//!   scalars.
//!   Its hash is computed once; a miss is explained in words ([`MissReason`],
//!   [`Signature::explain_difference`]).
//! - **Dynamic dims**: a function whose compile accepts them
//!   ([`FunctionId::with_dynamic_dims`]) gets, once a dim of its calls has
//!   taken two distinct values ([`CacheConfig::dynamic_dims_after`]), a
//!   variant with that dim dynamic ([`ArgSpec::DYNAMIC`]), which serves every
//!   size of it; a call prefers its exact signature, then the most specific
//!   dynamic one ([`Generalization`] says which dims and why). The values
//!   counted are those of calls whose compile succeeded (or is in flight,
//!   or that the policy did not compile), with the missing call's own: a
//!   call whose compile fails or is refused counts for nothing.
//! - **What the policy learned, between processes**: a cache made with
//!   [`JitCache::remembering`] asks its [`PolicyMemory`] what earlier
//!   processes learned of a function when it first sees it
//!   ([`LearnedPolicy`]: the dims that went dynamic, the signatures that
//!   were cached), so a restarted process compiles (or loads from disk)
//!   the dynamic variant from the first call and admits the signatures it
//!   had cached; and tells the memory what it learns when that changes
//!   (on compile completions, never on a hit). jit-store keeps it in
//!   policy files beside the artifacts (`ArtifactStore::keep_policy`).
//! - **Per-function capacity**: several signatures of one function coexist
//!   (a new shape is an ordinary miss), up to the function's capacity
//!   (default 8); an evicted executable is dropped at once.
//! - **Admission at capacity** ([`CachePolicy::Adaptive`], the default):
//!   every call counts towards its signature's recent frequency; a miss at
//!   capacity compiles only if its signature recurs and either beats the
//!   least frequent cached one or belongs to a working set that moved and
//!   fits. Compiles that do not pay off spend a budget, restored by those
//!   that do. Refused misses run in the interpreter
//!   ([`FallbackReason::NotAdmitted`], with the [`Refusal`]).
//!   [`CachePolicy::LruCoolDown`] keeps the first version's policy: LRU
//!   eviction and a thrash fallback with a doubling cool-down.
//! - **Global budgets**: total entries and total bytes; beyond either, the
//!   least recently used entry of *any* function is evicted.
//! - **Failed compiles** are remembered per signature for a number of calls; a
//!   panicking compile callback is caught and does not poison the cache. A
//!   signature the lowering refuses ([`CompileFailure::refused`]: no
//!   compiler ran) is remembered the same way but counted apart
//!   ([`Counters::refusals`]), not as a compile.
//! - **Concurrency**: one short lock, never held while compiling; concurrent
//!   misses on one signature compile once; an evicted executable lives on
//!   while a call still holds its `Arc`.
//! - **Background compiles**: [`JitCache::get_or_queue`] prepares a miss's
//!   compile on the calling thread, queues the rest on a bounded pool and
//!   sends the call to the interpreter; later calls hit once it is done.
//!   Background is never meant to be worse than waiting: once the caller
//!   reports how long interpreting a function takes
//!   ([`JitCache::report_interpreted`]), a miss whose compile is queued or
//!   running waits for it instead when interpreting is expected to take
//!   longer than the compile's remaining time (mean compile time × (jobs
//!   ahead / compile threads + 1), less what it has run). A function with
//!   no report interprets. [`JitCache::wait_for_compiles`] waits for the
//!   queue to drain; [`JitCache::insert`] caches executables compiled
//!   ahead.
//! - **Observability**: [`JitCache::stats`] (per function and total, with a
//!   report table as `Display`) and `tracing` events under the targets of
//!   [`log_targets`] (`sheaf_jit::recompiles`: `debug` per miss with its
//!   explanation and admission decision, per eviction and per refused
//!   signature, `warn` per failed compile; `sheaf_jit::policy`: `warn` per
//!   policy mode change).
//!
//! # Example
//!
//! ```
//! use jit_cache::{CompileFailure, DType, Executable, FunctionId, JitCache, Provenance, Signature};
//!
//! /// Stands in for a loaded IREE module.
//! struct Module {
//!     rank: usize,
//! }
//!
//! impl Executable for Module {
//!     fn size_bytes(&self) -> usize {
//!         16 * 1024
//!     }
//! }
//!
//! let cache: JitCache<Module> = JitCache::default();
//! let sigmoid = FunctionId::new("sigmoid", 0x5eed);
//! let compile = |sig: &Signature| -> Result<Module, CompileFailure> {
//!     Ok(Module { rank: sig.args()[0].rank() })
//! };
//!
//! // The shape ping-pong: two shapes alternate, two compiles in all.
//! for i in 0..10 {
//!     let dims: &[i64] = if i % 2 == 0 { &[1, 5] } else { &[1, 5, 1] };
//!     let sig = Signature::builder().arg(DType::F32, dims).build();
//!     let (rank, outcome) = cache.call(
//!         &sigmoid,
//!         &sig,
//!         compile,
//!         |module| module.rank,
//!         |_reason| dims.len(), // the interpreter
//!     );
//!     assert_eq!(rank, dims.len());
//!     if i >= 2 {
//!         assert!(matches!(outcome, Provenance::Compiled(jit_cache::Origin::Hit)));
//!     }
//! }
//! let stats = cache.stats();
//! assert_eq!((stats.total.compiles, stats.total.live_entries), (2, 2));
//! println!("{stats}");
//! ```
//!
//! # Crate features
//!
//! - `serde`: `serde::Serialize` for the statistics (`CacheStats`,
//!   `FunctionStats`, `Counters`, `FunctionMode`).

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::missing_errors_doc)]
#![warn(clippy::exhaustive_structs, clippy::exhaustive_enums)]

mod admission;
mod budget;
mod byte_size;
mod cache;
mod cached;
mod config;
mod dispatch;
mod dtype;
mod error;
mod explain;
mod failures;
mod function_cache;
mod function_id;
mod generalize;
mod hashing;
pub mod hex;
mod layout;
mod learned;
pub mod log_targets;
mod pool;
mod report;
mod scalar_conversions;
#[cfg(feature = "serde")]
mod serialize;
mod signature;
pub mod single_flight;
mod state;
mod stats;
mod thrash;
mod wait_rule;

pub use admission::Refusal;
pub use byte_size::{ByteSize, ParseByteSizeError};
pub use cache::{Executable, JitCache, Prepared};
pub use cached::CachedEntry;
pub use config::{CacheConfig, CachePolicy, InFlightPolicy};
pub use dispatch::{Dispatch, FallbackReason, Origin, Provenance};
pub use dtype::DType;
pub use error::{CompileFailure, ConfigError, ErrorChain};
pub use explain::{Difference, EvictionCause, MissReason};
pub use function_id::FunctionId;
pub use generalize::Generalization;
pub use hashing::stable_hash;
pub use layout::{Container, Layout, LayoutBuilder, LayoutError, LayoutVisitor, Leaf};
pub use learned::{LearnedPolicy, PolicyFileError, PolicyMemory, PolicyOwner, PolicyScope};
pub use scalar_conversions::ScalarConversionError;
pub use signature::{ArgSpec, CapturedScalar, ScalarValue, Signature, SignatureBuilder};
pub use stats::{CacheStats, Counters, FunctionStats};
pub use thrash::FunctionMode;
pub use wait_rule::PRIOR_COMPILE_TIME;
