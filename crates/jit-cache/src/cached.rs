//! [`CachedEntry`]: what the cache holds, one row per compiled signature,
//! for a caller that wants to see inside ([`JitCache::cached`]).
//!
//! [`JitCache::cached`]: crate::JitCache::cached

use std::sync::Arc;

use crate::function_id::FunctionId;
use crate::signature::Signature;

/// One cached executable, as [`JitCache::cached`](crate::JitCache::cached)
/// lists it: its function and signature, the executable (kept alive while
/// the caller holds it), what it weighs against the byte budget, and how
/// it has been used.
///
/// How recently it was used is counted in calls of its function
/// (`calls_since_use`), not read from a clock: a hit never reads the
/// clock (it costs nanoseconds), so no time of last use exists.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CachedEntry<E> {
    /// The function.
    pub function: FunctionId,
    /// The signature it was compiled for (with `?` for dynamic dims).
    pub signature: Signature,
    /// The executable.
    pub executable: Arc<E>,
    /// Its [`size_bytes`](crate::Executable::size_bytes) when it was
    /// cached: what the byte budget counts.
    pub bytes: usize,
    /// Calls it served (a signature with dynamic dims counts every call
    /// it served); the call that compiled it is not one.
    pub hits: u64,
    /// Calls of its function since it last served one (or was cached): 0
    /// for the entry that served the function's last call.
    pub calls_since_use: u64,
}
