//! The persistent artifact store: compiled artifacts kept on disk between
//! runs, keyed by everything that determines their bytes.
//!
//! It lives here, next to the in-memory cache policy, because it is policy
//! plus plain file I/O with no unsafe code (this crate forbids it): keys,
//! entry layout and authentication, folder permissions, atomic writes, a
//! size bound with LRU eviction, and one build per key at a time (the same
//! single-flight primitive as the in-memory cache); and, behind the disk, an
//! optional [`RemoteTier`] shared by a cluster ([`RedisStore`] backend,
//! entries authenticated under a shared [`Secret`], a circuit breaker, a
//! background publisher). What an artifact *is*
//! and how it is loaded stays with the caller: [`DiskStore::fetch_or_build`]
//! hands the bytes to the caller's `load` and returns whatever it returns.
//!
//! ```no_run
//! use jit_cache::store::{ArtifactKey, DiskStore, KeyParts, StoreConfig};
//!
//! let store = DiskStore::open(StoreConfig::at("/tmp/artifacts"))?;
//! let key = ArtifactKey::new(&KeyParts {
//!     program: "module { ... }",
//!     compiler: "3.13.0 @ 89ece87b",
//!     runtime: "3.13.0.dev-86e175ca",
//!     target: "--iree-hal-target-device=local\n...",
//! });
//! let (length, fetched) = store.fetch_or_build(
//!     Some(&key),
//!     |bytes| Ok::<_, std::io::Error>(bytes.len()),  // load: use (the bytes are authentic)
//!     || Ok::<_, std::io::Error>(vec![1, 2, 3]),     // build: compile
//! )?;
//! println!("{length} bytes, {fetched:?}; {:?}", store.stats());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod breaker;
mod disk;
mod entry;
mod key;
mod redis;
mod remote;
mod resp;
mod trust;

pub use self::redis::{RedisStore, RemoteTimeouts};
pub use breaker::BreakerState;
pub use disk::{BuildError, DiskStore, Fetched, StoreConfig, StoreStats, MAX_ENTRY_BYTES};
pub use key::{ArtifactKey, KeyParts};
pub use remote::{RemoteError, RemoteOptions, RemoteStats, RemoteStore, RemoteTier, RemoteValue};
pub use trust::{open_read_only_file, Secret, StoreError};

/// Not part of the API: the Redis backend's reply reader, public for the
/// `redis_reply` fuzz target (`fuzz/fuzz_targets/redis_reply.rs`) only.
#[doc(hidden)]
pub mod redis_reply {
    pub use super::resp::{
        read_bulk, read_length, read_ok, ReplyError, MAX_ERROR_LINE, MAX_HEADER_LINE,
    };
}

/// Adds `by` to one of the stores' event counters (statistics only: no
/// ordering with other memory is needed).
fn bump(counter: &std::sync::atomic::AtomicU64, by: u64) {
    counter.fetch_add(by, std::sync::atomic::Ordering::Relaxed);
}
