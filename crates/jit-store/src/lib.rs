//! The artifact store of the Sheaf JIT: compiled artifacts kept on disk
//! between runs, keyed by everything that determines their bytes, and what
//! the cache's policy learned; with the `remote` feature, a remote tier
//! shared by a cluster behind them.
//!
//! This is the I/O half of the JIT's caching: `jit-cache` decides (and
//! opens no file), this crate keeps. It holds keys, entry layout and
//! authentication (HMAC-SHA256 under a [`Secret`], or a builder's Ed25519
//! signature checked against [`TrustedKeys`]: [`Trust`], for a remote tier
//! and for signed folders such as bundles), folder permissions, atomic
//! writes, a size bound with LRU eviction, one build per key at a time
//! (jit-cache's single-flight primitive), the policy files that keep
//! [`jit_cache::LearnedPolicy`], and the counters of every process that
//! used a folder ([`RunTotals`]), all without unsafe code (this crate
//! forbids it). With `remote`, an optional `RemoteTier` stands behind the
//! folder (a `RedisStore` or `SharedFolderStore` backend, or your own
//! `RemoteStore`; entries tagged with a shared secret or signed by
//! builders, read-only readers, learned policies shared by the cluster,
//! compile leases, a circuit breaker, a background publisher). What an
//! artifact *is* and how it is loaded stays with the caller:
//! [`ArtifactStore::fetch_or_build`] hands a [`VerifiedArtifact`] to the
//! caller's `load` and returns whatever it returns.
//!
//! ```no_run
//! use jit_store::{ArtifactKey, ArtifactStore, KeyParts, StoreConfig};
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
//!
//! # Crate features
//!
//! - `remote`: a remote tier behind the store (`RemoteTier`,
//!   `RedisStore`, `SharedFolderStore`): a Redis client of its own on
//!   `std::net`, a circuit breaker, a publisher thread, compile leases.
//! - `remote-tls`: TLS for the remote tier (`rediss://`): rustls on ring,
//!   the server's certificate checked against the system's roots or a
//!   configured CA file. Without it a `rediss://` address is refused,
//!   naming this feature.
//! - `serde`: `serde::Serialize` for the statistics (`StoreStats`, and with
//!   `remote` `RemoteStats` and `BreakerState`).

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::missing_errors_doc)]
#![warn(clippy::exhaustive_structs, clippy::exhaustive_enums)]

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
pub mod log_targets;
mod policy_files;
#[cfg(feature = "remote")]
mod redis;
#[cfg(feature = "remote")]
mod remote;
#[cfg(feature = "remote")]
mod resp;
mod run_totals;
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
pub use run_totals::{CallTotals, RunTotals, TierTotals};
pub use stats::StoreStats;
pub use trust::{
    create_private_folder, open_read_only_file, DocumentSignature, DocumentSignatureError,
    PublicKey, PublicKeyError, Secret, SigningKey, StoreError, Trust, TrustedKeys,
};
pub use verified::VerifiedArtifact;
#[cfg(feature = "remote")]
pub use {
    self::redis::{RedisStore, RemoteTimeouts},
    breaker::BreakerState,
    remote::{
        LeaseAnswer, Namespace, NamespaceError, RemoteError, RemoteMode, RemoteModeError,
        RemoteOptions, RemoteStats, RemoteStore, RemoteTier, RemoteValue,
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
