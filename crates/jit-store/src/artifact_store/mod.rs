//! [`ArtifactStore`]: compiled artifacts kept on disk between runs.
//!
//! Entries are files named by their [`ArtifactKey`] in `<directory>/vmfb/`,
//! each with a header and an authentication tag under the folder's secret
//! (or, in a signed bundle, a builder's signature; see `entry.rs` and
//! `trust.rs`), written atomically. The
//! total size is bounded: after an insert takes the folder over
//! [`max_bytes`](StoreConfig::max_bytes), the least recently used entries
//! (oldest modification time; a hit refreshes it) are deleted until it is
//! under 90 % of the bound. Several processes may share a folder: all of them
//! read, write and evict with plain file operations, so the worst a race can
//! do is delete an entry that is then built again.
//!
//! A [`RemoteTier`] may stand behind the folder ([`ArtifactStore::with_remote`]):
//! a miss on disk asks it before building, a remote hit is written to the
//! folder, and a build is published to it in the background.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

mod beside;

use super::behind::{Behind, Found};
use super::counters::bump;
use super::entry::{self, Rejection, Untrusted, Verdict};
use super::folder::{Access, Folder};
use super::key::ArtifactKey;
use super::policy_files::{self, PolicyFiles};
#[cfg(feature = "remote")]
use super::remote::{RemoteStats, RemoteTier};
use super::stats::{Counters, StoreStats};
use super::trust::{self, Owners, Secret, SigningKey, StoreError, Trust, TrustedKeys};
use super::verified::VerifiedArtifact;
use jit_cache::single_flight::Flight;
use jit_cache::ErrorChain;

/// The largest payload an entry may have, whatever the store's bound: a
/// header claiming more is refused before anything is allocated.
pub const MAX_ENTRY_BYTES: u64 = 1 << 31;

/// Where a [`ArtifactStore`] keeps its entries and how much it may keep.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreConfig {
    /// The store's folder; entries go in its `vmfb/` subfolder.
    pub directory: PathBuf,
    /// Bound on the total size of the entries, in bytes.
    pub max_bytes: u64,
}

impl StoreConfig {
    /// The default bound: 1 GiB.
    pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

    /// A store in `directory` with the default bound.
    pub fn at(directory: impl Into<PathBuf>) -> Self {
        StoreConfig {
            directory: directory.into(),
            max_bytes: Self::DEFAULT_MAX_BYTES,
        }
    }
}

/// Where the value of [`ArtifactStore::fetch_or_build`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[expect(
    clippy::exhaustive_enums,
    reason = "callers account for each source (sheaf-integration maps each to its \
        `ArtifactSource`); a new source must reach them as a compile error, not a silent `_` arm"
)]
pub enum Fetched {
    /// An entry on disk.
    Disk,
    /// An entry of the remote tier (now also on disk, unless it could not
    /// be written).
    Remote,
    /// A fresh build (now stored, unless it could not be written).
    Built,
}

/// Why [`ArtifactStore::fetch_or_build`] produced no value: the error of
/// `build` (`B`) or of `load` (`L`), kept whole. Exhaustive: those two
/// closures are the only things that can fail.
#[derive(Debug, thiserror::Error)]
#[expect(
    clippy::exhaustive_enums,
    reason = "`build` and `load` are the only things that can fail (see the docs): callers unwrap \
        each into their own error"
)]
pub enum BuildError<B, L> {
    /// `build` failed.
    #[error(transparent)]
    Build(B),
    /// `load` refused the freshly built artifact (which was not stored).
    #[error("the freshly built artifact was rejected")]
    Rejected(#[source] L),
}

/// Why a lookup on disk served nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DiskMiss {
    /// No entry for the key.
    Absent,
    /// An entry that was refused (counted and logged where it was).
    Rejected,
}

/// A persistent, size-bounded, multi-process-safe store of built artifacts.
///
/// A hit costs a file read and an HMAC; an entry that is damaged, forged (or
/// that the caller's `load` refuses) is deleted and built again, never
/// trusted. **Trust**: `load` only ever receives bytes that `build` returned
/// in the same call, or an entry whose tag verified under the folder's
/// secret, which only this user can read (see the module docs of `trust`
/// in the repository, and its README's threat model), or, in a folder of
/// signed entries ([`open_read_only_signed`](Self::open_read_only_signed)),
/// whose signature by a trusted key verified; folders another user
/// could write are refused at [`open`](Self::open), and entry files another
/// user could write are never read ([`StoreStats::insecure`]).
/// Failing to write never fails a build. Concurrent misses of one key in one
/// store build once: the others wait, then read the entry (or, if the build
/// failed, build in turn).
///
/// With a `RemoteTier` (`with_remote`, with the `remote` feature) the order is
/// disk, remote, build; `load` also receives entries whose tag verified
/// under the remote tier's shared secret. Concurrent misses of one key in
/// several processes sharing the remote tier build once too: the first
/// takes the key's compile lease, the others wait for its publish, at most
/// as long as building would take them (the remote tier's module docs).
/// The remote tier also works without
/// a folder ([`disabled`](Self::disabled)): then every process fetches from
/// it on each first use, and concurrent misses of one key are not merged.
#[derive(Debug)]
pub struct ArtifactStore {
    folder: Option<Folder>,
    behind: Behind,
    counters: Counters,
    in_flight: Mutex<HashMap<ArtifactKey, Arc<Flight<()>>>>,
    policies: PolicyFiles,
}

impl ArtifactStore {
    /// The store configured by `config`: creates its folder (mode 0700) and
    /// secret if need be, and refuses a folder that is a symbolic link, that
    /// another user owns, or that group or others may write.
    ///
    /// # Errors
    ///
    /// [`StoreError::Insecure`] for a folder (or secret) that is a link, that
    /// another user owns or that others may write (or read, for the
    /// secret), and [`StoreError::Io`] when the folder or the secret cannot
    /// be created or read.
    pub fn open(config: StoreConfig) -> Result<Self, StoreError> {
        Self::writable_with(config, |directory| {
            Ok(Trust::Shared(Secret::load_or_create(directory)?))
        })
    }

    /// A store of `config`'s folders, made and checked, whose entries the
    /// trust that `trust` gives (once the folders are there) seals.
    fn writable_with(
        config: StoreConfig,
        trust: impl FnOnce(&Path) -> Result<Trust, StoreError>,
    ) -> Result<Self, StoreError> {
        let entries = config.directory.join("vmfb");
        trust::create_folder(&config.directory)?;
        trust::create_folder(&entries)?;
        Ok(Self::with_folder(Some(Folder {
            entries,
            trust: Some(trust(&config.directory)?),
            max_bytes: config.max_bytes,
            access: Access::ReadWrite,
            bytes_on_disk: Mutex::new(None),
        })))
    }

    /// The store configured by `config` as a tool that shows, checks and
    /// trims it finds it (`sheaf-jit-cache`), changing nothing: the folder
    /// must exist and is checked as [`open`](Self::open) checks it, and so
    /// are `vmfb/` and `policy/` when they exist, but nothing is created —
    /// a missing `vmfb/` holds no entries, and a missing secret is not
    /// made ([`has_secret`](Self::has_secret) is false, and
    /// [`check_entry`](Self::check_entry) says
    /// [`EntryCheck::NoSecret`](super::EntryCheck::NoSecret)). Lookups
    /// neither refresh, delete nor add entries, nothing is recorded or
    /// kept, and writers' temporary files are left alone: only
    /// [`prune`](Self::prune) and [`clear`](Self::clear) delete, and
    /// only what is provably the cache's own.
    ///
    /// # Errors
    ///
    /// [`StoreError::Insecure`] for a folder (the store's, `vmfb/` or
    /// `policy/`) or secret that is a link, that another user owns or that
    /// others may write (or read, for the secret), and [`StoreError::Io`]
    /// when the folder is missing or one of them cannot be read.
    pub fn open_for_inspection(config: StoreConfig) -> Result<Self, StoreError> {
        let directory = &config.directory;
        trust::check_folder(directory, Owners::User)?;
        let entries = directory.join("vmfb");
        for folder in [entries.clone(), policy_files::folder(directory)] {
            match trust::check_folder(&folder, Owners::User) {
                Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
                checked => checked?,
            }
        }
        let secret = match Secret::load(&Secret::path_in(directory), Owners::User) {
            Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => None,
            loaded => Some(loaded?),
        };
        Ok(Self::with_folder(Some(Folder {
            entries,
            trust: secret.map(Trust::Shared),
            max_bytes: config.max_bytes,
            access: Access::Inspect,
            bytes_on_disk: Mutex::new(None),
        })))
    }

    /// Whether the store can authenticate its folder's entries: it has the
    /// folder's secret, or (a signed bundle) keys to check signatures with
    /// (false only for a folder
    /// [opened for inspection](Self::open_for_inspection) without a
    /// secret, and for a disabled store).
    pub fn has_secret(&self) -> bool {
        self.folder
            .as_ref()
            .is_some_and(|folder| folder.trust.is_some())
    }

    /// A store over the entries in `directory` that it only reads: lookups
    /// neither refresh, delete nor add entries (an exported bundle, a
    /// folder shared read-only). The folder, its `vmfb/` and its secret must
    /// belong to this user or to root and be writable by no one else, and so
    /// must each entry when it is read (one that is not is counted in
    /// [`StoreStats::insecure`] and never loaded).
    ///
    /// # Errors
    ///
    /// [`StoreError::Insecure`] for a folder or secret that is a link, that
    /// belongs to someone else than this user or root, or that others may
    /// write, and [`StoreError::Io`] when one cannot be read (or is missing).
    pub fn open_read_only(directory: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let directory = directory.into();
        trust::check_folder(&directory, Owners::UserOrRoot)?;
        let secret = Secret::load(&Secret::path_in(&directory), Owners::UserOrRoot)?;
        Self::read_only_with(directory, Trust::Shared(secret))
    }

    /// A store over the signed entries in `directory` that it only reads,
    /// as [`open_read_only`](Self::open_read_only) opens a folder (the
    /// same rules for the folders and each entry), with no secret: an
    /// entry is loaded only when one of `trusted` signed it (an exported
    /// bundle signed by its builder,
    /// [`open_signing`](Self::open_signing)). Entries tagged with a secret
    /// are counted in [`StoreStats::unsigned`], entries signed by another
    /// key in [`StoreStats::unknown_signer`]; neither is loaded.
    ///
    /// # Errors
    ///
    /// [`StoreError::Insecure`] for a folder that is a link, that belongs to
    /// someone else than this user or root, or that others may write, and
    /// [`StoreError::Io`] when one cannot be read (or is missing).
    pub fn open_read_only_signed(
        directory: impl Into<PathBuf>,
        trusted: TrustedKeys,
    ) -> Result<Self, StoreError> {
        let directory = directory.into();
        trust::check_folder(&directory, Owners::UserOrRoot)?;
        Self::read_only_with(directory, Trust::reader(trusted))
    }

    fn read_only_with(directory: PathBuf, trust: Trust) -> Result<Self, StoreError> {
        let entries = directory.join("vmfb");
        trust::check_folder(&entries, Owners::UserOrRoot)?;
        Ok(Self::with_folder(Some(Folder {
            entries,
            trust: Some(trust),
            max_bytes: u64::MAX,
            access: Access::ReadOnly,
            bytes_on_disk: Mutex::new(None),
        })))
    }

    /// A store configured by `config` whose entries `signer` signs instead
    /// of a secret tagging them (none is made): what a builder exports as a
    /// signed bundle, for readers that trust `signer`'s public key
    /// ([`open_read_only_signed`](Self::open_read_only_signed)). It reads
    /// back only what `signer` signed. The folders are made and checked as
    /// [`open`](Self::open) makes and checks them.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open), for the folders.
    pub fn open_signing(config: StoreConfig, signer: SigningKey) -> Result<Self, StoreError> {
        Self::writable_with(config, |_| {
            Ok(Trust::builder(signer, TrustedKeys::default()))
        })
    }

    /// A store that keeps nothing: every fetch builds.
    pub fn disabled() -> Self {
        Self::with_folder(None)
    }

    fn with_folder(folder: Option<Folder>) -> Self {
        ArtifactStore {
            folder,
            behind: Behind::default(),
            counters: Counters::default(),
            in_flight: Mutex::new(HashMap::new()),
            policies: PolicyFiles::default(),
        }
    }

    /// This store with `remote` behind it: a miss on disk asks it before
    /// building, a remote hit is stored on disk, and a build is published
    /// to it (in the background).
    #[cfg(feature = "remote")]
    pub fn with_remote(mut self, remote: RemoteTier) -> Self {
        self.behind = Behind::remote(remote);
        self
    }

    /// The remote tier's counters; `None` without one.
    #[cfg(feature = "remote")]
    pub fn remote_stats(&self) -> Option<RemoteStats> {
        self.behind.remote_stats()
    }

    /// Queues `artifact` to be published as the entry of `key` to the tier
    /// behind the folder (the remote tier, in the background), as a build
    /// of [`fetch_or_build`](Self::fetch_or_build) is: for an artifact that
    /// also serves another key (a batch's module under each member's key,
    /// say). Nothing without a remote tier; see also
    /// [`insert`](Self::insert) for the folder.
    pub fn publish(&self, key: &ArtifactKey, artifact: &[u8]) {
        self.behind
            .publish(key, artifact, std::time::Duration::ZERO, Default::default());
    }

    /// Blocks until the publishes queued so far are done (see
    /// `RemoteTier::wait_for_publishes`), and returns true (at once without
    /// a remote tier); false once `timeout` has passed first.
    pub fn wait_for_publishes(&self, timeout: std::time::Duration) -> bool {
        self.behind.wait_for_publishes(timeout)
    }

    /// The store's folder, when it has one (for `inspect.rs`).
    pub(super) fn folder(&self) -> Option<&Folder> {
        self.folder.as_ref()
    }

    /// The folder holding the entries; `None` when disabled.
    pub fn directory(&self) -> Option<&Path> {
        self.folder.as_ref().map(|folder| folder.entries.as_path())
    }

    /// The counters so far. The first call on an enabled store scans its
    /// folder to learn `bytes_on_disk`.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            bytes_on_disk: self.folder.as_ref().map_or(0, Folder::bytes_on_disk),
            ..self.counters.snapshot()
        }
    }

    /// The artifact of `key`, turned into a `V` by `load`: from disk when a
    /// good entry exists and `load` accepts it, else from the remote tier
    /// (then stored on disk), else from `build` (then stored, and
    /// published). `load`'s value is returned with where it came from.
    ///
    /// An entry `load` refuses is deleted (a remote one ignored) and built
    /// again; a fresh build it refuses is [`BuildError::Rejected`] and not
    /// stored. With no `key` (the caller cannot identify the artifact), or
    /// no folder and no remote tier, the artifact is built and loaded
    /// without touching either.
    ///
    /// # Errors
    ///
    /// [`BuildError::Build`] with `build`'s error, and
    /// [`BuildError::Rejected`] with `load`'s error for the artifact just built
    /// (an entry `load` refuses is not an error: it is built again).
    pub fn fetch_or_build<V, B, L: fmt::Display>(
        &self,
        key: Option<&ArtifactKey>,
        load: impl Fn(VerifiedArtifact<'_>) -> Result<V, L>,
        build: impl FnOnce() -> Result<Vec<u8>, B>,
    ) -> Result<(V, Fetched), BuildError<B, L>> {
        let key = key.filter(|_| self.folder.is_some() || !self.behind.is_empty());
        let Some(key) = key else {
            bump(&self.counters.bypassed, 1);
            return Self::build_and_load(build, &load).map(|(value, _)| (value, Fetched::Built));
        };
        let folder = self.folder.as_ref();
        let writable = folder.filter(|folder| !folder.read_only());
        let path = folder.map(|folder| folder.entry_path(key));
        let on_disk = || {
            let (folder, path) = folder.zip(path.as_deref())?;
            Some(self.lookup(folder, path, key, &load))
        };
        loop {
            let looked = match on_disk() {
                Some(Ok(value)) => return Ok((value, Fetched::Disk)),
                looked => looked.and_then(Result::err),
            };
            // Held until the entry is written (or the build failed); only
            // a folder this store writes lets the waiters find the result.
            let builder = match writable {
                Some(_) => match self.claim(key) {
                    Some(builder) => Some(builder),
                    // Another build of this key ended: look again (and
                    // build if it failed).
                    None => continue,
                },
                None => None,
            };
            // Another thread (or process) may have stored it since our lookup.
            // (Its miss is not counted again: the first lookup's reason
            // stands, and an entry it refused is gone now.)
            if builder.is_some() {
                if let Some(Ok(value)) = on_disk() {
                    return Ok((value, Fetched::Disk));
                }
            }
            if let (Some(DiskMiss::Absent), Some(path)) = (looked, path.as_deref()) {
                self.absent(path);
            }
            // Held until published (or the build failed): the other
            // processes of a cluster wait for this build meanwhile.
            let lease = match self.behind.fetch(key, &load) {
                Found::Artifact(value, artifact) => {
                    if let Some((folder, path)) = writable.zip(path.as_deref()) {
                        self.store(folder, path, key, &artifact);
                    }
                    return Ok((value, Fetched::Remote));
                }
                Found::Build(lease) => lease,
            };
            bump(&self.counters.misses, 1);
            let start = Instant::now();
            let (value, bytes) = Self::build_and_load(build, &load)?;
            let took = start.elapsed();
            if let Some((folder, path)) = writable.zip(path.as_deref()) {
                self.store(folder, path, key, &bytes);
            }
            self.behind.publish(key, &bytes, took, lease);
            drop(builder);
            return Ok((value, Fetched::Built));
        }
    }

    /// The artifact of `key` from disk, turned into a `V` by `load`, or
    /// `None` when there is no good entry that `load` accepts. Nothing is
    /// built.
    pub fn fetch<V, L: fmt::Display>(
        &self,
        key: &ArtifactKey,
        load: impl Fn(VerifiedArtifact<'_>) -> Result<V, L>,
    ) -> Option<V> {
        let folder = self.folder.as_ref()?;
        let path = folder.entry_path(key);
        match self.lookup(folder, &path, key, &load) {
            Ok(value) => Some(value),
            Err(miss) => {
                if miss == DiskMiss::Absent {
                    self.absent(&path);
                }
                None
            }
        }
    }

    /// Where the entry of `key` lives (whether or not it exists); `None`
    /// when the store is disabled.
    pub fn entry_path(&self, key: &ArtifactKey) -> Option<PathBuf> {
        self.folder.as_ref().map(|folder| folder.entry_path(key))
    }

    /// Stores `artifact` as the entry of `key` (e.g. copying an entry of
    /// another store, read back with [`fetch`](Self::fetch)); true when it
    /// was written. Nothing is written to a read-only or disabled store.
    pub fn insert(&self, key: &ArtifactKey, artifact: &[u8]) -> bool {
        let Some(folder) = self.folder.as_ref().filter(|f| !f.read_only()) else {
            return false;
        };
        let before = self.counters.write_errors.load(Ordering::Relaxed);
        self.store(folder, &folder.entry_path(key), key, artifact);
        self.counters.write_errors.load(Ordering::Relaxed) == before
    }

    /// Deletes the entry of `key`, if any (for instance after the runtime
    /// refused to run it); true when there was one. Nothing is deleted in
    /// a read-only store, nor in a `vmfb/` that is no longer safe to use.
    pub fn invalidate(&self, key: &ArtifactKey) -> bool {
        self.folder
            .as_ref()
            .filter(|folder| !folder.read_only())
            .is_some_and(|folder| folder.delete(&folder.entry_path(key)))
    }

    fn build_and_load<V, B, L>(
        build: impl FnOnce() -> Result<Vec<u8>, B>,
        load: &impl Fn(VerifiedArtifact<'_>) -> Result<V, L>,
    ) -> Result<(V, Vec<u8>), BuildError<B, L>> {
        let bytes = build().map_err(BuildError::Build)?;
        let value = load(VerifiedArtifact::built(&bytes)).map_err(BuildError::Rejected)?;
        Ok((value, bytes))
    }

    fn lookup<V, L: fmt::Display>(
        &self,
        folder: &Folder,
        path: &Path,
        key: &ArtifactKey,
        load: &impl Fn(VerifiedArtifact<'_>) -> Result<V, L>,
    ) -> Result<V, DiskMiss> {
        // Without a secret (a folder inspected) nothing is authentic.
        let Some(trust) = &folder.trust else {
            return Err(DiskMiss::Absent);
        };
        let max_payload = folder.max_bytes.min(MAX_ENTRY_BYTES);
        let read = entry::read(
            path,
            key,
            trust.checker(),
            folder.owners(),
            max_payload,
            !folder.read_only(),
        );
        let outcome = match read {
            Ok(outcome) => outcome,
            Err(reason) => {
                tracing::warn!(
                    target: crate::log_targets::CACHE,
                    entry = %path.display(),
                    %reason,
                    "refusing a disk-cache entry that is not safe to read ({reason}): it was not \
                     loaded"
                );
                self.discard(folder, path, &self.counters.insecure);
                return Err(DiskMiss::Rejected);
            }
        };
        match entry::judge(outcome, load) {
            Verdict::Loaded { value, artifact } => {
                bump(&self.counters.hits, 1);
                bump(&self.counters.bytes_read, artifact.len() as u64);
                Ok(value)
            }
            Verdict::Missing => Err(DiskMiss::Absent),
            Verdict::Rejected(Rejection::Corrupt(reason)) => {
                tracing::warn!(
                    target: crate::log_targets::CACHE,
                    entry = %path.display(),
                    %reason,
                    "ignoring a damaged disk-cache entry ({reason}); it is deleted and built again"
                );
                self.discard(folder, path, &self.counters.corrupt);
                Err(DiskMiss::Rejected)
            }
            Verdict::Rejected(Rejection::Unauthenticated(why)) => {
                tracing::warn!(
                    target: crate::log_targets::CACHE,
                    entry = %path.display(),
                    reason = %why,
                    "refusing a disk-cache entry: {why}; it was not loaded (and is deleted and \
                     built again unless the folder is read-only)"
                );
                let counter = match why {
                    Untrusted::Unverified => &self.counters.unauthenticated,
                    Untrusted::Unsigned => &self.counters.unsigned,
                    Untrusted::UnknownSigner(_) => &self.counters.unknown_signer,
                };
                self.discard(folder, path, counter);
                Err(DiskMiss::Rejected)
            }
            Verdict::Rejected(Rejection::Refused(reason)) => {
                tracing::warn!(
                    target: crate::log_targets::CACHE,
                    entry = %path.display(),
                    %reason,
                    "ignoring a disk-cache entry the runtime refused ({reason})"
                );
                bump(&self.counters.refused, 1);
                self.discard(folder, path, &self.counters.corrupt);
                Err(DiskMiss::Rejected)
            }
        }
    }

    /// Counts and logs a lookup of `path` that found no entry.
    fn absent(&self, path: &Path) {
        bump(&self.counters.absent, 1);
        tracing::debug!(
            target: crate::log_targets::CACHE,
            entry = %path.display(),
            reason = "absent",
            "disk-cache miss: no entry (never written here, evicted, or written by another \
             compiler or configuration)"
        );
    }

    /// Counts a bad entry in `counter`, and deletes it unless the folder is
    /// read-only (or no longer safe to use).
    fn discard(&self, folder: &Folder, path: &Path, counter: &AtomicU64) {
        if !folder.read_only() {
            folder.delete(path);
        }
        bump(counter, 1);
    }

    fn store(&self, folder: &Folder, path: &Path, key: &ArtifactKey, artifact: &[u8]) {
        let Some(sealer) = folder.trust.as_ref().and_then(Trust::sealer) else {
            return; // a folder inspected, or read with trusted keys: never written
        };
        if (sealer.header_len() + artifact.len()) as u64 > folder.max_bytes {
            return; // would evict everything, itself included
        }
        // The folder is checked again: it may have been removed (and made by
        // someone else) since the store opened.
        let written = trust::create_folder(&folder.entries)
            .map_err(io::Error::other)
            .and_then(|()| entry::write(&folder.entries, path, key, sealer, artifact));
        match written {
            Ok(bytes) => {
                bump(&self.counters.bytes_written, bytes);
                let evicted = folder.added(bytes);
                bump(&self.counters.evictions, evicted);
            }
            Err(error) => {
                tracing::debug!(
                    target: crate::log_targets::CACHE,
                    entry = %path.display(),
                    error = %ErrorChain(&error),
                    "cannot write a disk-cache entry"
                );
                bump(&self.counters.write_errors, 1);
            }
        }
    }

    /// Becomes the builder of `key` (`Some`), or waits for the current one
    /// to finish (`None`).
    fn claim(&self, key: &ArtifactKey) -> Option<Builder<'_>> {
        let flight = {
            let mut in_flight = self
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match in_flight.get(key) {
                Some(flight) => Arc::clone(flight),
                None => {
                    in_flight.insert(*key, Flight::new());
                    return Some(Builder {
                        store: self,
                        key: *key,
                    });
                }
            }
        };
        flight.wait();
        None
    }
}

/// Ends the build of a key, however it ends: removes its flight and wakes
/// the waiters.
struct Builder<'a> {
    store: &'a ArtifactStore,
    key: ArtifactKey,
}

impl Drop for Builder<'_> {
    fn drop(&mut self) {
        let flight = self
            .store
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
        if let Some(flight) = flight {
            flight.complete(());
        }
    }
}
