//! The persistent artifact store: compiled artifacts kept on disk between
//! runs, keyed by everything that determines their bytes.
//!
//! Behind the `store` cargo feature (on by default); the policy core of
//! this crate builds without it, with no I/O dependency. It holds keys,
//! entry layout and authentication, folder permissions, atomic writes, a
//! size bound with LRU eviction, one build per key at a time (the same
//! single-flight primitive as the in-memory cache), and the policy files
//! that keep what the cache's policy learned, all without unsafe code
//! (this crate forbids it). With the `remote` feature, an optional
//! `RemoteTier` stands behind the folder, shared by a cluster (a
//! `RedisStore` or `SharedFolderStore` backend, or your own `RemoteStore`;
//! entries authenticated under a shared [`Secret`], compile leases, a
//! circuit breaker, a background publisher). What an artifact *is* and how it is
//! loaded stays with the caller: [`ArtifactStore::fetch_or_build`] hands a
//! [`VerifiedArtifact`] to the caller's `load` and returns whatever it
//! returns.
//!
//! ```no_run
//! use jit_cache::store::{ArtifactKey, ArtifactStore, KeyParts, StoreConfig};
//!
//! let store = ArtifactStore::open(StoreConfig::at("/tmp/artifacts"))?;
//! let key = ArtifactKey::new(&KeyParts {
//!     program: "module { ... }",
//!     compiler: "3.13.0 @ 89ece87b",
//!     runtime: "3.13.0.dev-86e175ca",
//!     target: "--iree-hal-target-device=local\n...",
//! });
//! let (length, fetched) = store.fetch_or_build(
//!     Some(&key),
//!     |artifact| Ok::<_, std::io::Error>(artifact.bytes().len()), // load: use (verified bytes)
//!     || Ok::<_, std::io::Error>(vec![1, 2, 3]),     // build: compile
//! )?;
//! println!("{length} bytes, {fetched:?}; {:?}", store.stats());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[macro_use]
mod counters;

mod artifact_store;
mod behind;
#[cfg(feature = "remote")]
mod breaker;
mod entry;
mod escaped;
pub mod file_io;
mod folder;
mod inspect;
mod key;
mod listing;
mod policy_files;
#[cfg(feature = "remote")]
mod redis;
#[cfg(feature = "remote")]
mod remote;
#[cfg(feature = "remote")]
mod resp;
#[cfg(feature = "remote")]
mod shared_folder;
mod stats;
mod trust;
mod verified;

pub use artifact_store::{ArtifactStore, BuildError, Fetched, StoreConfig, MAX_ENTRY_BYTES};
pub use escaped::Escaped;
pub use inspect::{EntryCheck, Removed, StoredEntry, StoredPolicy};
pub use key::{ArtifactKey, KeyParts};
pub use policy_files::MAX_POLICY_FILES;
pub use stats::StoreStats;
pub use trust::{create_private_folder, open_read_only_file, Secret, StoreError};
pub use verified::VerifiedArtifact;
#[cfg(feature = "remote")]
pub use {
    self::redis::{RedisStore, RemoteTimeouts},
    breaker::BreakerState,
    remote::{
        LeaseAnswer, Namespace, NamespaceError, RemoteError, RemoteOptions, RemoteStats,
        RemoteStore, RemoteTier, RemoteValue,
    },
    shared_folder::SharedFolderStore,
};

/// Not part of the API: the Redis backend's reply reader, public for the
/// `redis_reply` fuzz target (`fuzz/fuzz_targets/redis_reply.rs`) only.
#[cfg(feature = "remote")]
#[doc(hidden)]
pub mod redis_reply {
    pub use super::resp::{
        read_bulk, read_length, read_ok, read_ok_or_nil, ReplyError, MAX_ERROR_LINE,
        MAX_HEADER_LINE,
    };
}
