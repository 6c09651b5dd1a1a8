//! [`RemoteTier`]: a store shared by many machines behind the local disk
//! cache, so that a cluster compiles each artifact once.
//!
//! The backend is a [`RemoteStore`] (a key-value server: [`RedisStore`]
//! today, an object store later). The tier adds what makes a shared store
//! safe to put behind a JIT:
//!
//! - **Trust** ([`Trust`]): values are disk-cache entries
//!   (`entry.rs`), authenticated by an HMAC-SHA256 of key and artifact under
//!   a [`Secret`] shared by the cluster, or signed by a builder's Ed25519
//!   key and accepted only by readers that trust it; a value that does not
//!   verify is counted (by reason), logged and never handed to `load`.
//! - **Read-only readers** ([`RemoteMode::ReadOnly`], and every reader of
//!   signed entries without a key of its own): fetch and verify only; no
//!   publish, no lease, no write of any kind.
//! - **Never fatal, never slower**: every failure becomes a miss (the caller
//!   builds); a [circuit breaker](BreakerState) stops asking a store that
//!   keeps failing; fetches only happen where the caller would otherwise
//!   build; publishing happens on one background thread fed by a bounded
//!   queue (a full queue drops the publish), so it never delays the call
//!   that built.
//! - **A size bound** per artifact: larger artifacts are not published, and
//!   larger values are not downloaded.
//! - **Keys of the deployment's own**: an entry's key is
//!   `<prefix><namespace>:<secret id>:<artifact key>`, e.g.
//!   `sheaf-jit:v1:default:5d1c0e9a7b3f4c21:<64 hex digits>`:
//!   [`key_prefix`](RemoteOptions::key_prefix) (the entry format's
//!   version), the deployment's [`Namespace`], the first 8 bytes (16 hex
//!   digits) of an HMAC-SHA256 of a fixed label under the secret (which
//!   tells secrets apart without revealing anything of them) or `signed`
//!   for signed entries, and the [`ArtifactKey`]'s hex. Two deployments on
//!   one Redis database with different secrets or namespaces never read or
//!   overwrite each other's entries: each misses on the other's artifacts
//!   (a miss, not an authentication failure) and keeps its own.
//! - **One compile per artifact across the cluster**: a miss takes the
//!   artifact's compile lease before it compiles, and a miss that finds
//!   another process's lease waits for its publish, at most as long as
//!   compiling would take (`lease.rs`). Backends without leases compile
//!   every miss.
//!
//! [`RedisStore`]: super::RedisStore

#[cfg(test)]
mod adversary_tests;
mod backend;
mod lease;
mod options;
mod policies;
mod stats;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::breaker::{Breaker, Request};
use super::counters::{bump, load};
use super::entry::{self, Rejection, Untrusted, Verdict};
use super::key::ArtifactKey;
use super::trust::{Secret, Trust};
use super::verified::VerifiedArtifact;
use jit_cache::{ByteSize, ErrorChain};

pub use backend::{LeaseAnswer, RemoteError, RemoteStore, RemoteValue};
pub(crate) use lease::HeldLease;
pub use options::{Namespace, NamespaceError, RemoteMode, RemoteModeError, RemoteOptions};
use stats::Counters;
pub use stats::RemoteStats;

/// A remote store behind the disk cache (see the module docs); given to a
/// [`ArtifactStore`](super::ArtifactStore) with
/// [`with_remote`](super::ArtifactStore::with_remote).
///
/// Dropping it waits for the publishes still queued (each bounded by the
/// backend's timeouts, and skipped while the breaker is open).
#[derive(Debug)]
pub struct RemoteTier {
    shared: Arc<Shared>,
    /// `None` once dropped, which ends the publisher.
    queue: Option<SyncSender<Publish>>,
    publisher: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    backend: Box<dyn RemoteStore>,
    trust: Trust,
    /// Whether this tier never writes (see [`RemoteTier::read_only`]).
    read_only: bool,
    options: RemoteOptions,
    /// What every key of this tier starts with (see the module docs).
    key_prefix: String,
    breaker: Breaker,
    counters: Counters,
    /// The fetches' total time, and the longest.
    fetch_nanos: AtomicU64,
    max_fetch_nanos: AtomicU64,
    /// The longest build this process measured (for the wait bound).
    longest_build_nanos: AtomicU64,
    /// Publishes queued or running (their leases not yet released), and
    /// its signal when it drops to zero.
    pending: Mutex<usize>,
    drained: Condvar,
}

/// A value waiting to be published (an artifact, or a learned policy),
/// and the compile lease its build held, released once it is published
/// (or dropped).
struct Publish {
    kind: Kind,
    key: ArtifactKey,
    payload: Vec<u8>,
    lease: Option<HeldLease>,
}

/// What a value of the tier holds: each kind has its names and counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A compiled artifact, named `<key_prefix><key>`.
    Artifact,
    /// A function's learned policy (`policies.rs`), named
    /// `<key_prefix>policy:<key>`.
    Policy,
}

/// What the store answered for a key.
enum Lookup<V> {
    /// A good value.
    Found(V),
    /// Nothing: a miss that may take the compile lease.
    Missing,
    /// A value not used (rejected, oversized), a failure, or the breaker
    /// open: the caller compiles, without a lease.
    Unusable,
}

/// What [`RemoteTier::fetch_or_lease`] found: the artifact, or that the
/// caller compiles (with the compile lease when it took one).
pub(crate) enum Fetch<V> {
    /// The artifact turned into a `V`, and its bytes.
    Found(V, Vec<u8>),
    /// The caller compiles, and hands the lease to
    /// [`publish`](RemoteTier::publish).
    Compile(Option<HeldLease>),
}

impl RemoteTier {
    /// A tier over `backend` whose entries are authenticated with `secret`
    /// (the same 32 bytes on every machine that shares the store):
    /// [`with_trust`](Self::with_trust) with [`Trust::Shared`].
    ///
    /// # Errors
    ///
    /// The operating system's error when the publisher thread cannot be
    /// started.
    pub fn new(
        backend: Box<dyn RemoteStore>,
        secret: Secret,
        options: RemoteOptions,
    ) -> std::io::Result<Self> {
        Self::with_trust(backend, Trust::Shared(secret), options)
    }

    /// A tier over `backend` whose entries are sealed and checked as
    /// `trust` says. Starts the publisher thread, unless the tier is
    /// read-only ([`read_only`](Self::read_only)).
    ///
    /// ```
    /// use jit_store::{RemoteOptions, RemoteTier, Trust, SharedFolderStore, TrustedKeys};
    ///
    /// let folder = tempfile::tempdir()?;
    /// let trusted = TrustedKeys::parse(
    ///     "ed25519:0d4a05b07352a5436e180356da0ae6efa0345ff7fb1572575772e8005ed978e9",
    /// )?;
    /// let tier = RemoteTier::with_trust(
    ///     Box::new(SharedFolderStore::new(folder.path())?),
    ///     Trust::reader(trusted),
    ///     RemoteOptions::default(),
    /// )?;
    /// assert!(tier.read_only(), "a reader of signed entries never writes");
    /// assert!(tier.key_prefix().ends_with(":default:signed:"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The operating system's error when the publisher thread cannot be
    /// started.
    pub fn with_trust(
        backend: Box<dyn RemoteStore>,
        trust: Trust,
        options: RemoteOptions,
    ) -> std::io::Result<Self> {
        let trust = trust.normalized();
        let read_only = options.mode == RemoteMode::ReadOnly || trust.sealer().is_none();
        let (queue, jobs) = mpsc::sync_channel(options.queue);
        let key_prefix = format!(
            "{}{}:{}:",
            options.key_prefix,
            options.namespace,
            identity(&trust)
        );
        let shared = Arc::new(Shared {
            backend,
            key_prefix,
            trust,
            read_only,
            breaker: Breaker::new(options.failure_threshold, options.cool_down),
            options,
            counters: Counters::default(),
            fetch_nanos: AtomicU64::new(0),
            max_fetch_nanos: AtomicU64::new(0),
            longest_build_nanos: AtomicU64::new(0),
            pending: Mutex::new(0),
            drained: Condvar::new(),
        });
        if read_only {
            return Ok(RemoteTier {
                shared,
                queue: None,
                publisher: None,
            });
        }
        let publisher = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("sheaf-jit-publish".to_owned())
                .spawn(move || shared.publish_all(&jobs))?
        };
        Ok(RemoteTier {
            shared,
            queue: Some(queue),
            publisher: Some(publisher),
        })
    }

    /// Whether this tier never writes to its store: no publish, no compile
    /// lease. So when its options say [`RemoteMode::ReadOnly`], and when it
    /// trusts signatures without a key to sign with (a reader).
    pub fn read_only(&self) -> bool {
        self.shared.read_only
    }

    /// How its entries are sealed and checked.
    pub fn trust(&self) -> &Trust {
        &self.shared.trust
    }

    /// The settings.
    pub fn options(&self) -> &RemoteOptions {
        &self.shared.options
    }

    /// What the name of every entry of this tier starts with:
    /// `<key_prefix><namespace>:<secret id>:` (see the module docs), e.g.
    /// for `redis-cli --scan --pattern '<it>*'`.
    pub fn key_prefix(&self) -> &str {
        &self.shared.key_prefix
    }

    /// The name of `key`'s value in the store.
    pub fn remote_key(&self, key: &ArtifactKey) -> String {
        self.shared.remote_key(key)
    }

    /// The name of `key`'s compile lease in the store: its value's name
    /// and `:lease` (held while one process of the cluster compiles the
    /// artifact; deleting it by hand makes the waiters compile too).
    pub fn lease_key(&self, key: &ArtifactKey) -> String {
        Shared::lease_key(&self.shared.remote_key(key))
    }

    /// The counters so far.
    pub fn stats(&self) -> RemoteStats {
        let shared = &*self.shared;
        RemoteStats {
            fetch_time: Duration::from_nanos(load(&shared.fetch_nanos)),
            max_fetch_time: Duration::from_nanos(load(&shared.max_fetch_nanos)),
            breaker: shared.breaker.state(),
            breaker_opened: shared.breaker.opened(),
            ..shared.counters.snapshot()
        }
    }

    /// The artifact of `key` from the store, turned into a `V` by `load`,
    /// with its bytes; else [`Fetch::Compile`]: the store has no good value
    /// that `load` accepts, is over the bound, fails, or is skipped by the
    /// breaker. A miss takes the artifact's compile lease (then the caller
    /// compiles holding it), or, when another process holds it, waits for
    /// that process's artifact (see `lease.rs`): it tries the lease again
    /// after each pause, and looks for the artifact once the lease is
    /// free (its owner publishes before it releases).
    pub(crate) fn fetch_or_lease<V, L: fmt::Display>(
        &self,
        key: &ArtifactKey,
        load: impl Fn(VerifiedArtifact<'_>) -> Result<V, L>,
    ) -> Fetch<V> {
        let shared = &self.shared;
        let name = shared.remote_key(key);
        match shared.lookup(&name, key, &load) {
            Lookup::Found((value, artifact)) => return Fetch::Found(value, artifact),
            Lookup::Unusable => return Fetch::Compile(None),
            Lookup::Missing => {}
        }
        if shared.read_only {
            return Fetch::Compile(None);
        }
        let Some(ttl) = shared.options.lease_ttl.filter(|ttl| !ttl.is_zero()) else {
            return Fetch::Compile(None);
        };
        let c = &shared.counters;
        let lease_name = Shared::lease_key(&name);
        // Set at the first answer `Held`, never again: one bound in all.
        let mut polls: Option<lease::Polls> = None;
        loop {
            let owner = lease::owner_name();
            match shared.take_lease(&lease_name, &owner, ttl) {
                Some(LeaseAnswer::Taken) => {
                    let held = HeldLease::start(shared, lease_name.clone(), owner.clone(), ttl);
                    let Ok(held) = held else {
                        shared.release(&lease_name, &owner);
                        if polls.is_some() {
                            bump(&c.waits_compiled, 1);
                        }
                        return Fetch::Compile(None);
                    };
                    if polls.is_none() {
                        bump(&c.leases_taken, 1);
                        return Fetch::Compile(Some(held));
                    }
                    // The lease we waited on ended: its owner published
                    // before releasing it, unless its build failed or it
                    // died.
                    return match shared.lookup(&name, key, &load) {
                        Lookup::Found((value, artifact)) => {
                            drop(held);
                            bump(&c.waits_found, 1);
                            Fetch::Found(value, artifact)
                        }
                        Lookup::Missing | Lookup::Unusable => {
                            bump(&c.leases_taken, 1);
                            bump(&c.waits_compiled, 1);
                            Fetch::Compile(Some(held))
                        }
                    };
                }
                Some(LeaseAnswer::Held { owner: held_by }) => {
                    if polls.is_none() {
                        let bound = shared.wait_bound(ttl);
                        bump(&c.lease_waits, 1);
                        tracing::debug!(
                            target: crate::log_targets::REMOTE,
                            key = %name,
                            owner = %held_by,
                            bound = ?bound,
                            "another process compiles this artifact: waiting for it, {bound:?} \
                             at most"
                        );
                        polls = Some(lease::Polls::new(Instant::now(), bound));
                    }
                }
                Some(LeaseAnswer::Unsupported) | None => {
                    if polls.is_some() {
                        bump(&c.waits_compiled, 1);
                    }
                    return Fetch::Compile(None);
                }
            }
            let Some(polls) = polls.as_mut() else {
                continue;
            };
            let Some(pause) = polls.next(Instant::now()) else {
                bump(&c.waits_compiled, 1);
                tracing::debug!(
                    target: crate::log_targets::REMOTE,
                    key = %name,
                    "another process's compile took longer than compiling here would (or its lease \
                     changed owner until then): compiling"
                );
                return Fetch::Compile(None);
            };
            std::thread::sleep(pause);
        }
    }

    /// Queues `artifact`, just built in `took`, to be published as the
    /// entry of `key`, then `lease` released; returns at once. Dropped (and
    /// the lease released) when it is over the bound or the queue is full,
    /// and never published by a read-only tier.
    pub(crate) fn publish(
        &self,
        key: &ArtifactKey,
        artifact: &[u8],
        took: Duration,
        lease: Option<HeldLease>,
    ) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.shared
            .longest_build_nanos
            .fetch_max(nanos, Ordering::Relaxed);
        if self.shared.read_only {
            return;
        }
        let c = &self.shared.counters;
        let max = self.shared.options.max_entry_bytes;
        if artifact.len() as u64 > max {
            bump(&c.oversized, 1);
            tracing::debug!(
                target: crate::log_targets::REMOTE,
                key = %self.shared.remote_key(key),
                bytes = artifact.len(),
                "not publishing an artifact of {} (over the remote bound of {})",
                ByteSize(artifact.len() as u64),
                ByteSize(max)
            );
            return;
        }
        self.queue(Publish {
            kind: Kind::Artifact,
            key: *key,
            payload: artifact.to_vec(),
            lease,
        });
    }

    /// Queues `job` for the publisher; dropped (its lease released) when
    /// the queue is full, or the tier is read-only.
    fn queue(&self, job: Publish) {
        let c = &self.shared.counters;
        let Some(queue) = &self.queue else {
            return;
        };
        self.shared.pending_changed(1, 0);
        match queue.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => {
                drop(job); // its lease released
                self.shared.pending_changed(0, 1);
                bump(&c.dropped, 1);
            }
        }
    }

    /// Blocks until every publish queued so far is done (written, failed
    /// or skipped, and its compile lease released), and returns true; or
    /// returns false once `timeout` has passed first. Each publish is
    /// bounded by the backend's timeouts; a process that exits right after
    /// a compile calls this so that its artifact reaches the store.
    pub fn wait_for_publishes(&self, timeout: Duration) -> bool {
        let shared = &*self.shared;
        let pending = shared
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (pending, _) = shared
            .drained
            .wait_timeout_while(pending, timeout, |pending| *pending > 0)
            .unwrap_or_else(PoisonError::into_inner);
        *pending == 0
    }
}

impl Drop for RemoteTier {
    fn drop(&mut self) {
        // Closing the queue ends the publisher once it has drained it.
        self.queue = None;
        if let Some(publisher) = self.publisher.take() {
            let _ = publisher.join();
        }
    }
}

impl Shared {
    fn remote_key(&self, key: &ArtifactKey) -> String {
        self.name(Kind::Artifact, key)
    }

    /// The name of the value of `kind` under `key`.
    fn name(&self, kind: Kind, key: &ArtifactKey) -> String {
        match kind {
            Kind::Artifact => format!("{}{}", self.key_prefix, key.hex()),
            Kind::Policy => format!("{}policy:{}", self.key_prefix, key.hex()),
        }
    }

    /// The lease of the value named `name`.
    fn lease_key(name: &str) -> String {
        format!("{name}:lease")
    }

    /// The artifact of `key` (named `name`) from the store, turned into a
    /// `V` by `load`, with its bytes.
    fn lookup<V, L: fmt::Display>(
        &self,
        name: &str,
        key: &ArtifactKey,
        load: impl Fn(VerifiedArtifact<'_>) -> Result<V, L>,
    ) -> Lookup<(V, Vec<u8>)> {
        self.lookup_kind(Kind::Artifact, name, key, load)
    }

    /// The value of `kind` under `key` (named `name`), authenticated and
    /// turned into a `V` by `load`, with its bytes; counted and logged by
    /// its kind.
    fn lookup_kind<V, L: fmt::Display>(
        &self,
        kind: Kind,
        name: &str,
        key: &ArtifactKey,
        load: impl Fn(VerifiedArtifact<'_>) -> Result<V, L>,
    ) -> Lookup<(V, Vec<u8>)> {
        let c = &self.counters;
        let bytes = match self.fetch_value(kind, name) {
            Lookup::Found(bytes) => bytes,
            Lookup::Missing => return Lookup::Missing,
            Lookup::Unusable => return Lookup::Unusable,
        };
        let max = self.options.max_entry_bytes;
        let checker = self.trust.checker();
        let outcome = entry::parse(&mut &bytes[..], bytes.len() as u64, key, checker, max);
        let (reason, counter) = match entry::judge(outcome, load) {
            Verdict::Loaded { value, artifact } => {
                let (counter, what) = match kind {
                    Kind::Artifact => (&c.hits, "an artifact"),
                    Kind::Policy => (&c.policies_fetched, "a learned policy"),
                };
                bump(counter, 1);
                bump(&c.bytes_fetched, bytes.len() as u64);
                tracing::debug!(
                    target: crate::log_targets::REMOTE,
                    key = %name,
                    bytes = bytes.len(),
                    "served {what} from the remote store"
                );
                return Lookup::Found((value, artifact));
            }
            // Only for lack of memory.
            Verdict::Missing => {
                bump(&c.misses, 1);
                return Lookup::Unusable;
            }
            Verdict::Rejected(Rejection::Refused(reason)) => {
                (format!("the caller refused it: {reason}"), &c.refused)
            }
            Verdict::Rejected(Rejection::Corrupt(reason)) => {
                (format!("malformed: {reason}"), &c.malformed)
            }
            Verdict::Rejected(Rejection::Unauthenticated(why)) => {
                let counter = match why {
                    Untrusted::Unverified => &c.unauthenticated,
                    Untrusted::Unsigned => &c.unsigned,
                    Untrusted::UnknownSigner(_) => &c.unknown_signer,
                };
                (why.to_string(), counter)
            }
        };
        bump(&c.rejected, 1);
        bump(counter, 1);
        tracing::warn!(
            target: crate::log_targets::REMOTE,
            key = %name,
            %reason,
            "ignoring a remote artifact-store entry: {reason}; it was not loaded, the artifact \
             is built and published again"
        );
        Lookup::Unusable
    }

    /// Asks the backend for `lease` for `owner`, through the breaker;
    /// `None` when skipped or failed (counted and logged: the caller
    /// compiles).
    fn take_lease(&self, lease: &str, owner: &str, ttl: Duration) -> Option<LeaseAnswer> {
        if !self.breaker.admit(Instant::now()) {
            bump(&self.counters.skipped, 1);
            return None;
        }
        match self.backend.take_lease(lease, owner, ttl) {
            Ok(answer) => {
                self.breaker.succeeded(Request::Fetch);
                Some(answer)
            }
            Err(error) => {
                self.failed(Request::Fetch, lease, &error);
                None
            }
        }
    }

    /// The longest a miss waits for one owner's compile, with leases that
    /// live `ttl`.
    fn wait_bound(&self, ttl: Duration) -> Duration {
        let longest = load(&self.longest_build_nanos);
        let longest = (longest > 0).then(|| Duration::from_nanos(longest));
        lease::wait_bound(longest, self.options.compile_estimate, ttl)
    }

    /// The value of `kind` under `name`, through the breaker, timed and
    /// counted (`misses` counts artifacts only: a function without a
    /// published policy is no miss of the cache).
    fn fetch_value(&self, kind: Kind, name: &str) -> Lookup<Vec<u8>> {
        let c = &self.counters;
        let start = Instant::now();
        if !self.breaker.admit(start) {
            bump(&c.skipped, 1);
            tracing::debug!(
                target: crate::log_targets::REMOTE,
                key = %name,
                reason = "unavailable",
                "remote-cache miss: not asked, the circuit breaker is open after failures in a row"
            );
            return Lookup::Unusable;
        }
        let header_len = self.trust.checker().header_len();
        let max_value = self.options.max_entry_bytes + header_len as u64;
        let answer = self.backend.get(name, max_value);
        let elapsed = start.elapsed();
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        bump(&c.fetches, 1);
        bump(&self.fetch_nanos, nanos);
        self.max_fetch_nanos.fetch_max(nanos, Ordering::Relaxed);
        match answer {
            Ok(value) => {
                self.breaker.succeeded(Request::Fetch);
                match value {
                    RemoteValue::Found(bytes) => return Lookup::Found(bytes),
                    RemoteValue::Missing => {
                        if kind == Kind::Artifact {
                            bump(&c.misses, 1);
                        }
                        tracing::debug!(
                            target: crate::log_targets::REMOTE,
                            key = %name,
                            reason = "absent",
                            "remote-cache miss: no value under this key"
                        );
                        return Lookup::Missing;
                    }
                    RemoteValue::TooLarge(len) => {
                        bump(&c.oversized, 1);
                        tracing::debug!(
                            target: crate::log_targets::REMOTE,
                            key = %name,
                            bytes = len,
                            reason = "too large",
                            "remote-cache miss: not downloading an entry of {} (over the bound of {})",
                            ByteSize(len),
                            ByteSize(max_value)
                        );
                    }
                }
            }
            Err(error) => self.failed(Request::Fetch, name, &error),
        }
        Lookup::Unusable
    }

    /// Counts and logs a `request` of `name` that failed with `error`, for
    /// the breaker.
    fn failed(&self, request: Request, name: &str, error: &RemoteError) {
        bump(&self.counters.errors, 1);
        let error = ErrorChain(error);
        tracing::debug!(
            target: crate::log_targets::REMOTE,
            key = %name,
            %error,
            reason = "unavailable",
            "remote artifact store: {error}"
        );
        self.breaker.failed(request, Instant::now(), &error);
    }

    /// The publisher thread: publishes each queued artifact until the tier
    /// is dropped and the queue drained.
    fn publish_all(&self, jobs: &Receiver<Publish>) {
        for Publish {
            kind,
            key,
            payload,
            lease,
        } in jobs
        {
            self.put(kind, &key, &payload);
            // Released after the put, then counted done.
            drop(lease);
            self.pending_changed(0, 1);
        }
    }

    /// Adds `queued` to the publishes pending and takes `done` from them,
    /// waking the waiters of [`RemoteTier::wait_for_publishes`] at zero.
    fn pending_changed(&self, queued: usize, done: usize) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        *pending = (*pending + queued).saturating_sub(done);
        if *pending == 0 {
            self.drained.notify_all();
        }
    }

    /// Publishes `payload` as the value of `kind` under `key`, sealed as
    /// an entry, through the breaker.
    fn put(&self, kind: Kind, key: &ArtifactKey, payload: &[u8]) {
        let c = &self.counters;
        if !self.breaker.admit(Instant::now()) {
            bump(&c.skipped, 1);
            return;
        }
        let Some(sealer) = self.trust.sealer() else {
            return; // a reader: never queued (`read_only`)
        };
        let name = self.name(kind, key);
        let value = entry::encode(key, sealer, payload);
        match self.backend.put(&name, &value) {
            Ok(()) => {
                self.breaker.succeeded(Request::Publish);
                let (counter, what) = match kind {
                    Kind::Artifact => (&c.publishes, "an artifact"),
                    Kind::Policy => (&c.policies_published, "a learned policy"),
                };
                bump(counter, 1);
                bump(&c.bytes_published, value.len() as u64);
                tracing::debug!(
                    target: crate::log_targets::REMOTE,
                    key = %name,
                    bytes = value.len(),
                    "published {what} to the remote store"
                );
            }
            Err(error) => self.failed(Request::Publish, &name, &error),
        }
    }
}

/// What stands for `trust` in a tier's keys: the secret's identity (which
/// tells secrets apart without revealing anything of them), or `signed`
/// (readers and builders, whatever their keys, look in one place; a
/// signature says who published).
fn identity(trust: &Trust) -> String {
    match trust {
        Trust::Shared(secret) => secret.identity(),
        Trust::Signed { .. } => "signed".to_owned(),
    }
}
