//! [`RemoteTier`]: a store shared by many machines behind the local disk
//! cache, so that a cluster compiles each artifact once.
//!
//! The backend is a [`RemoteStore`] (a key-value server: [`RedisStore`]
//! today, an object store later). The tier adds what makes a shared store
//! safe to put behind a JIT:
//!
//! - **Trust**: values are disk-cache entries (`entry.rs`), authenticated by
//!   an HMAC-SHA256 of key and artifact under a [`Secret`] shared by the
//!   cluster; a value that does not verify is counted, logged and never
//!   handed to `load`.
//! - **Never fatal, never slower**: every failure becomes a miss (the caller
//!   builds); a [circuit breaker](BreakerState) stops asking a store that
//!   keeps failing; fetches only happen where the caller would otherwise
//!   build; publishing happens on one background thread fed by a bounded
//!   queue (a full queue drops the publish), so it never delays the call
//!   that built.
//! - **A size bound** per artifact: larger artifacts are not published, and
//!   larger values are not downloaded.
//!
//! [`RedisStore`]: super::RedisStore

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::breaker::{Breaker, BreakerState, Request};
use super::bump;
use super::entry::{self, ReadOutcome, HEADER_LEN};
use super::key::ArtifactKey;
use super::trust::Secret;
use super::verified::VerifiedArtifact;
use crate::{ByteSize, ErrorChain};

/// A remote key-value store of artifact entries: what [`RemoteTier`] needs
/// of a backend. Implementations bound every request with timeouts (the
/// whole request, not each read) and never hold more of a reply than the
/// bound asked for; the tier handles failures, authentication and sizes.
pub trait RemoteStore: Send + Sync + fmt::Debug {
    /// The value stored under `key`, unless it is longer than `max_bytes`
    /// (then it is not downloaded).
    ///
    /// # Errors
    ///
    /// A [`RemoteError`] when the store cannot be reached in time, answers
    /// with an error, or breaks its protocol.
    fn get(&self, key: &str, max_bytes: u64) -> Result<RemoteValue, RemoteError>;

    /// Stores `value` under `key`, replacing any value there. Concurrent
    /// puts of one key may race: the store must keep one of the values
    /// whole.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    fn put(&self, key: &str, value: &[u8]) -> Result<(), RemoteError>;
}

/// What [`RemoteStore::get`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteValue {
    /// Nothing under the key.
    Missing,
    /// The value.
    Found(Vec<u8>),
    /// A value of this many bytes, over the bound: not downloaded.
    TooLarge(u64),
}

/// Why a remote store could not be set up or answer. At run time these
/// become misses (and count towards the circuit breaker), never errors of a
/// call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The store's address cannot be used.
    #[error("remote artifact store `{url}`: {reason}")]
    Address {
        /// The address, without its password.
        url: String,
        /// What is wrong, and what to do about it.
        reason: String,
    },
    /// The store cannot be reached, or did not answer in time.
    #[error("cannot reach the remote artifact store `{url}` ({step})")]
    Unavailable {
        /// The address, without its password.
        url: String,
        /// What failed: `resolve` (the host name), `connect` (for Redis,
        /// `AUTH` and `SELECT` too), or the request (for Redis, its
        /// command: `STRLEN`, `GETRANGE`, `SET`, ...).
        step: &'static str,
        /// Why: the operating system's error, a timeout
        /// ([`io::ErrorKind::TimedOut`], saying which), or the connection
        /// closed mid-reply ([`io::ErrorKind::UnexpectedEof`]).
        #[source]
        source: io::Error,
    },
    /// The store answered with an error.
    #[error("the remote artifact store `{url}` answered {step} with the error `{message}`")]
    Server {
        /// The address, without its password.
        url: String,
        /// The request (for Redis, its command).
        step: &'static str,
        /// The store's error, with control characters escaped.
        message: String,
    },
    /// The store answered with something its protocol does not allow there
    /// (a reply of another type, a value longer than asked for, a line
    /// without end): not read further, the connection closed.
    #[error(
        "the remote artifact store `{url}` broke the protocol in its reply to {step}: \
         {violation}; is the address that of a Redis server?"
    )]
    Protocol {
        /// The address, without its password.
        url: String,
        /// The request (for Redis, its command).
        step: &'static str,
        /// What was wrong with the reply.
        violation: String,
    },
}

/// Settings of a [`RemoteTier`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteOptions {
    /// The largest artifact published or fetched, in bytes (the entry's
    /// 88-byte header comes on top).
    pub max_entry_bytes: u64,
    /// Consecutive failures of one kind of request (fetches, or
    /// publishes) that open the circuit breaker: a publish that succeeds
    /// does not reset the count of fetches that fail, nor the other way
    /// round.
    pub failure_threshold: u32,
    /// How long the breaker stays open before it probes the store again.
    pub cool_down: Duration,
    /// Publishes waiting for the background thread, at most; more are
    /// dropped.
    pub queue: usize,
    /// Prepended to the hex of an [`ArtifactKey`] to name its value.
    pub key_prefix: String,
}

impl RemoteOptions {
    /// The default bound on an artifact: 64 MiB (the artifacts of a JIT
    /// are kilobytes to a few megabytes).
    pub const DEFAULT_MAX_ENTRY_BYTES: u64 = 64 << 20;
    /// The default failures before the breaker opens: 3.
    pub const DEFAULT_FAILURE_THRESHOLD: u32 = 3;
    /// The default cool-down of the breaker: 30 s.
    pub const DEFAULT_COOL_DOWN: Duration = Duration::from_secs(30);
    /// The default queue of publishes: 32.
    pub const DEFAULT_QUEUE: usize = 32;
    /// The default key prefix, which names the entry format's version.
    pub const DEFAULT_KEY_PREFIX: &'static str = "sheaf-jit:v1:";
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            max_entry_bytes: Self::DEFAULT_MAX_ENTRY_BYTES,
            failure_threshold: Self::DEFAULT_FAILURE_THRESHOLD,
            cool_down: Self::DEFAULT_COOL_DOWN,
            queue: Self::DEFAULT_QUEUE,
            key_prefix: Self::DEFAULT_KEY_PREFIX.to_owned(),
        }
    }
}

/// Counters of a [`RemoteTier`], from
/// [`ArtifactStore::remote_stats`](super::ArtifactStore::remote_stats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteStats {
    /// Artifacts served from the remote store (and copied to disk).
    pub hits: u64,
    /// Fetches that found nothing.
    pub misses: u64,
    /// Artifacts published.
    pub publishes: u64,
    /// Values that failed authentication or were malformed, or that the
    /// caller's `load` refused: never used; the artifact was built instead
    /// (and its publish replaces the value).
    pub rejected: u64,
    /// Artifacts over the size bound: not published, or (remote values) not
    /// downloaded.
    pub oversized: u64,
    /// Requests that failed (unreachable, timed out, an error answer, a
    /// reply that broke the protocol).
    pub errors: u64,
    /// Requests not sent because the circuit breaker was open.
    pub skipped: u64,
    /// Publishes dropped because the queue was full.
    pub dropped: u64,
    /// Entry bytes downloaded (headers included).
    pub bytes_fetched: u64,
    /// Entry bytes uploaded (headers included).
    pub bytes_published: u64,
    /// Fetch requests sent (whatever their outcome).
    pub fetches: u64,
    /// Their total time.
    pub fetch_time: Duration,
    /// The longest of them.
    pub max_fetch_time: Duration,
    /// The circuit breaker now.
    pub breaker: BreakerState,
    /// Times the breaker opened.
    pub breaker_opened: u64,
}

impl fmt::Display for RemoteStats {
    /// One line: `remote: 3 hits, 1 misses, ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mean = self
            .fetch_time
            .checked_div(u32::try_from(self.fetches).unwrap_or(u32::MAX).max(1))
            .unwrap_or_default();
        write!(
            f,
            "remote: {} hits, {} misses, {} publishes, {} rejected, {} oversized, {} errors, \
             {} skipped, {} dropped; {} fetched, {} published; {} fetches, {:.3?} mean, \
             {:.3?} max; breaker {} (opened {} times)",
            self.hits,
            self.misses,
            self.publishes,
            self.rejected,
            self.oversized,
            self.errors,
            self.skipped,
            self.dropped,
            ByteSize(self.bytes_fetched),
            ByteSize(self.bytes_published),
            self.fetches,
            mean,
            self.max_fetch_time,
            self.breaker,
            self.breaker_opened,
        )
    }
}

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
    secret: Secret,
    options: RemoteOptions,
    breaker: Breaker,
    counters: Counters,
}

#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    publishes: AtomicU64,
    rejected: AtomicU64,
    oversized: AtomicU64,
    errors: AtomicU64,
    skipped: AtomicU64,
    dropped: AtomicU64,
    bytes_fetched: AtomicU64,
    bytes_published: AtomicU64,
    fetches: AtomicU64,
    fetch_nanos: AtomicU64,
    max_fetch_nanos: AtomicU64,
}

/// An artifact waiting to be published.
struct Publish {
    key: ArtifactKey,
    artifact: Vec<u8>,
}

impl RemoteTier {
    /// A tier over `backend` whose entries are authenticated with `secret`
    /// (the same 32 bytes on every machine that shares the store). Starts
    /// the publisher thread.
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
        let (queue, jobs) = mpsc::sync_channel(options.queue);
        let shared = Arc::new(Shared {
            backend,
            secret,
            breaker: Breaker::new(options.failure_threshold, options.cool_down),
            options,
            counters: Counters::default(),
        });
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

    /// The settings.
    pub fn options(&self) -> &RemoteOptions {
        &self.shared.options
    }

    /// The name of `key`'s value in the store.
    pub fn remote_key(&self, key: &ArtifactKey) -> String {
        self.shared.remote_key(key)
    }

    /// The counters so far.
    pub fn stats(&self) -> RemoteStats {
        let c = &self.shared.counters;
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        RemoteStats {
            hits: load(&c.hits),
            misses: load(&c.misses),
            publishes: load(&c.publishes),
            rejected: load(&c.rejected),
            oversized: load(&c.oversized),
            errors: load(&c.errors),
            skipped: load(&c.skipped),
            dropped: load(&c.dropped),
            bytes_fetched: load(&c.bytes_fetched),
            bytes_published: load(&c.bytes_published),
            fetches: load(&c.fetches),
            fetch_time: Duration::from_nanos(load(&c.fetch_nanos)),
            max_fetch_time: Duration::from_nanos(load(&c.max_fetch_nanos)),
            breaker: self.shared.breaker.state(),
            breaker_opened: self.shared.breaker.opened(),
        }
    }

    /// The artifact of `key` from the store, turned into a `V` by `load`,
    /// with its bytes; `None` when the store has no good value that `load`
    /// accepts, is over the bound, fails, or is skipped by the breaker.
    pub(crate) fn fetch<V, L: fmt::Display>(
        &self,
        key: &ArtifactKey,
        load: impl Fn(VerifiedArtifact<'_>) -> Result<V, L>,
    ) -> Option<(V, Vec<u8>)> {
        let shared = &*self.shared;
        let c = &shared.counters;
        let name = shared.remote_key(key);
        let bytes = shared.fetch_value(&name)?;
        let max = shared.options.max_entry_bytes;
        let reason = match entry::parse(
            &mut &bytes[..],
            bytes.len() as u64,
            key,
            &shared.secret,
            max,
        ) {
            ReadOutcome::Found(artifact) => {
                match load(VerifiedArtifact::authenticated(&artifact)) {
                    Ok(value) => {
                        bump(&c.hits, 1);
                        bump(&c.bytes_fetched, bytes.len() as u64);
                        tracing::debug!(
                            target: "jit_cache",
                            key = %name,
                            bytes = bytes.len(),
                            "served an artifact from the remote store"
                        );
                        return Some((value, artifact));
                    }
                    Err(reason) => format!("the caller refused it: {reason}"),
                }
            }
            // Only for lack of memory.
            ReadOutcome::Missing => {
                bump(&c.misses, 1);
                return None;
            }
            ReadOutcome::Corrupt(reason) => format!("malformed: {reason}"),
            ReadOutcome::Unauthenticated => "it failed authentication (forged, written with \
                 another secret, copied from another key, or damaged)"
                .to_owned(),
        };
        bump(&c.rejected, 1);
        tracing::warn!(
            target: "jit_cache",
            key = %name,
            %reason,
            "ignoring a remote artifact-store entry: {reason}; it was not loaded, the artifact \
             is built and published again"
        );
        None
    }

    /// Queues `artifact`, just built, to be published as the entry of
    /// `key`; returns at once. Dropped when it is over the bound or the
    /// queue is full.
    pub(crate) fn publish(&self, key: &ArtifactKey, artifact: &[u8]) {
        let c = &self.shared.counters;
        let max = self.shared.options.max_entry_bytes;
        if artifact.len() as u64 > max {
            bump(&c.oversized, 1);
            tracing::debug!(
                target: "jit_cache",
                key = %self.shared.remote_key(key),
                bytes = artifact.len(),
                "not publishing an artifact of {} (over the remote bound of {})",
                ByteSize(artifact.len() as u64),
                ByteSize(max)
            );
            return;
        }
        let Some(queue) = &self.queue else {
            return;
        };
        let job = Publish {
            key: *key,
            artifact: artifact.to_vec(),
        };
        match queue.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                bump(&c.dropped, 1);
            }
        }
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
        format!("{}{}", self.options.key_prefix, key.hex())
    }

    /// The value under `name`, through the breaker, timed and counted.
    fn fetch_value(&self, name: &str) -> Option<Vec<u8>> {
        let c = &self.counters;
        let start = Instant::now();
        if !self.breaker.admit(start) {
            bump(&c.skipped, 1);
            return None;
        }
        let max_value = self.options.max_entry_bytes + HEADER_LEN as u64;
        let answer = self.backend.get(name, max_value);
        let elapsed = start.elapsed();
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        bump(&c.fetches, 1);
        bump(&c.fetch_nanos, nanos);
        c.max_fetch_nanos.fetch_max(nanos, Ordering::Relaxed);
        match answer {
            Ok(value) => {
                self.breaker.succeeded(Request::Fetch);
                match value {
                    RemoteValue::Found(bytes) => return Some(bytes),
                    RemoteValue::Missing => bump(&c.misses, 1),
                    RemoteValue::TooLarge(len) => {
                        bump(&c.oversized, 1);
                        tracing::debug!(
                            target: "jit_cache",
                            key = %name,
                            bytes = len,
                            "not downloading a remote entry of {} (over the bound of {})",
                            ByteSize(len),
                            ByteSize(max_value)
                        );
                    }
                }
            }
            Err(error) => self.failed(Request::Fetch, name, &error),
        }
        None
    }

    /// Counts and logs a `request` of `name` that failed with `error`, for
    /// the breaker.
    fn failed(&self, request: Request, name: &str, error: &RemoteError) {
        bump(&self.counters.errors, 1);
        let error = ErrorChain(error);
        tracing::debug!(target: "jit_cache", key = %name, %error, "remote artifact store: {error}");
        self.breaker.failed(request, Instant::now(), &error);
    }

    /// The publisher thread: publishes each queued artifact until the tier
    /// is dropped and the queue drained.
    fn publish_all(&self, jobs: &Receiver<Publish>) {
        for Publish { key, artifact } in jobs {
            let c = &self.counters;
            if !self.breaker.admit(Instant::now()) {
                bump(&c.skipped, 1);
                continue;
            }
            let name = self.remote_key(&key);
            let value = entry::encode(&key, &self.secret, &artifact);
            match self.backend.put(&name, &value) {
                Ok(()) => {
                    self.breaker.succeeded(Request::Publish);
                    bump(&c.publishes, 1);
                    bump(&c.bytes_published, value.len() as u64);
                    tracing::debug!(
                        target: "jit_cache",
                        key = %name,
                        bytes = value.len(),
                        "published an artifact to the remote store"
                    );
                }
                Err(error) => self.failed(Request::Publish, &name, &error),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Condvar, Mutex};

    use super::*;
    use crate::store::entry::tests::{key, secret};
    use crate::store::{ArtifactStore, Fetched, StoreConfig};

    /// An in-memory [`RemoteStore`] shared by the tiers of a test, that can
    /// be made to fail, and to hold its puts until released.
    #[derive(Debug, Default)]
    struct Memory {
        values: Mutex<HashMap<String, Vec<u8>>>,
        down: std::sync::atomic::AtomicBool,
        requests: AtomicU64,
        /// While set, puts wait; `entered` counts the puts that started.
        hold: Mutex<(bool, u64)>,
        changed: Condvar,
    }

    #[derive(Debug, Clone, Default)]
    struct Shared(Arc<Memory>);

    /// What a [`Shared`] that is down answers.
    fn down() -> RemoteError {
        RemoteError::Unavailable {
            url: "memory".to_owned(),
            step: "request",
            source: io::ErrorKind::ConnectionRefused.into(),
        }
    }

    impl RemoteStore for Shared {
        fn get(&self, key: &str, max_bytes: u64) -> Result<RemoteValue, RemoteError> {
            let memory = &self.0;
            memory.requests.fetch_add(1, Ordering::Relaxed);
            if memory.down.load(Ordering::Relaxed) {
                return Err(down());
            }
            Ok(match memory.values.lock().unwrap().get(key) {
                None => RemoteValue::Missing,
                Some(value) if value.len() as u64 > max_bytes => {
                    RemoteValue::TooLarge(value.len() as u64)
                }
                Some(value) => RemoteValue::Found(value.clone()),
            })
        }

        fn put(&self, key: &str, value: &[u8]) -> Result<(), RemoteError> {
            let memory = &self.0;
            memory.requests.fetch_add(1, Ordering::Relaxed);
            let mut hold = memory.hold.lock().unwrap();
            hold.1 += 1;
            memory.changed.notify_all();
            while hold.0 {
                hold = memory.changed.wait(hold).unwrap();
            }
            drop(hold);
            if memory.down.load(Ordering::Relaxed) {
                return Err(down());
            }
            memory
                .values
                .lock()
                .unwrap()
                .insert(key.to_owned(), value.to_vec());
            Ok(())
        }
    }

    impl Shared {
        fn set_down(&self, down: bool) {
            self.0.down.store(down, Ordering::Relaxed);
        }

        fn requests(&self) -> u64 {
            self.0.requests.load(Ordering::Relaxed)
        }

        fn value(&self, program: &str) -> Option<Vec<u8>> {
            let name = format!(
                "{}{}",
                RemoteOptions::DEFAULT_KEY_PREFIX,
                key(program).hex()
            );
            self.0.values.lock().unwrap().get(&name).cloned()
        }

        fn set_value(&self, program: &str, value: Vec<u8>) {
            let name = format!(
                "{}{}",
                RemoteOptions::DEFAULT_KEY_PREFIX,
                key(program).hex()
            );
            self.0.values.lock().unwrap().insert(name, value);
        }

        fn hold_puts(&self, hold: bool) {
            self.0.hold.lock().unwrap().0 = hold;
            self.0.changed.notify_all();
        }

        fn wait_for_puts(&self, count: u64) {
            let mut hold = self.0.hold.lock().unwrap();
            while hold.1 < count {
                hold = self.0.changed.wait(hold).unwrap();
            }
        }
    }

    fn tier(backend: &Shared, options: RemoteOptions) -> RemoteTier {
        RemoteTier::new(Box::new(backend.clone()), secret(), options).unwrap()
    }

    /// A store with no folder over `backend`.
    fn store(backend: &Shared, options: RemoteOptions) -> ArtifactStore {
        ArtifactStore::disabled().with_remote(tier(backend, options))
    }

    fn artifact(program: &str) -> Vec<u8> {
        format!("native code of {program}").into_bytes()
    }

    /// Fetches `program`, building it if need be; what the loader got.
    fn fetch(store: &ArtifactStore, program: &str) -> (Vec<u8>, Fetched) {
        store
            .fetch_or_build(
                Some(&key(program)),
                |artifact| Ok::<_, String>(artifact.bytes().to_vec()),
                || Ok::<_, String>(artifact(program)),
            )
            .unwrap()
    }

    #[test]
    fn a_build_is_published_and_served_to_the_next_process() {
        let backend = Shared::default();
        let first = store(&backend, RemoteOptions::default());
        assert_eq!(fetch(&first, "a"), (artifact("a"), Fetched::Built));
        drop(first); // waits for the publish
        let value = backend.value("a").unwrap();
        assert_eq!(value.len(), HEADER_LEN + artifact("a").len());

        let second = store(&backend, RemoteOptions::default());
        assert_eq!(fetch(&second, "a"), (artifact("a"), Fetched::Remote));
        let stats = second.remote_stats().unwrap();
        assert_eq!((stats.hits, stats.misses, stats.fetches), (1, 0, 1));
        assert_eq!(stats.bytes_fetched, value.len() as u64);
        assert_eq!(second.stats().misses, 0, "nothing was built");
        assert!(stats.to_string().starts_with("remote: 1 hits, 0 misses"));
    }

    #[test]
    fn values_that_do_not_verify_are_counted_and_never_loaded() {
        let backend = Shared::default();
        drop(fetch(&store(&backend, RemoteOptions::default()), "a"));
        let good = backend.value("a").unwrap();
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        let foreign = entry::encode(&key("a"), &Secret::from_bytes([9; Secret::LEN]), b"evil");
        for (what, value) in [
            ("a flipped bit", flipped),
            ("garbage", b"garbage".to_vec()),
            ("another secret's entry", foreign),
        ] {
            backend.set_value("a", value);
            let store = store(&backend, RemoteOptions::default());
            assert_eq!(
                fetch(&store, "a"),
                (artifact("a"), Fetched::Built),
                "{what}"
            );
            assert_eq!(store.remote_stats().unwrap().rejected, 1, "{what}");
            drop(store);
            assert_eq!(backend.value("a").unwrap(), good, "{what}: republished");
        }
        // An entry the caller's `load` refuses is rejected too.
        let store = store(&backend, RemoteOptions::default());
        let refused = store.fetch_or_build(
            Some(&key("a")),
            |loaded| match loaded.bytes() == artifact("a") {
                true => Err("the runtime refused it"),
                false => Ok(Fetched::Built),
            },
            || Ok::<_, String>(b"rebuilt".to_vec()),
        );
        assert!(matches!(refused, Ok((_, Fetched::Built))));
        assert_eq!(store.remote_stats().unwrap().rejected, 1);
    }

    #[test]
    fn artifacts_over_the_bound_are_neither_published_nor_downloaded() {
        let backend = Shared::default();
        let small = RemoteOptions {
            max_entry_bytes: 4,
            ..RemoteOptions::default()
        };
        let store = store(&backend, small.clone());
        fetch(&store, "a");
        drop(store);
        assert_eq!(backend.value("a"), None, "not published");

        drop(fetch(&self::store(&backend, RemoteOptions::default()), "a"));
        let store = self::store(&backend, small);
        assert_eq!(fetch(&store, "a").1, Fetched::Built);
        let stats = store.remote_stats().unwrap();
        assert_eq!(
            (stats.oversized, stats.hits, stats.bytes_fetched),
            (2, 0, 0)
        );
    }

    #[test]
    fn failures_open_the_breaker_and_calls_keep_working() {
        let backend = Shared::default();
        backend.set_down(true);
        let options = RemoteOptions {
            failure_threshold: 2,
            cool_down: Duration::from_secs(3600),
            ..RemoteOptions::default()
        };
        let tier = tier(&backend, options.clone());
        let load = |artifact: VerifiedArtifact<'_>| Ok::<_, String>(artifact.bytes().to_vec());
        for program in ["a", "b", "c", "d"] {
            assert!(tier.fetch(&key(program), load).is_none());
        }
        let stats = tier.stats();
        assert_eq!(stats.breaker, BreakerState::Open);
        assert_eq!(
            (stats.errors, stats.skipped, stats.breaker_opened),
            (2, 2, 1)
        );
        tier.publish(&key("a"), b"a");
        drop(tier);
        assert_eq!(backend.requests(), 2, "nothing is sent while it is open");

        let store = store(&backend, options);
        for program in ["a", "b", "c"] {
            assert_eq!(fetch(&store, program), (artifact(program), Fetched::Built));
        }
    }

    /// A store that fails every `get` and takes every `put`: one that
    /// cannot be read from (a value type it does not have, an ACL that
    /// denies reads) but takes writes.
    #[derive(Debug, Default)]
    struct WriteOnly {
        puts: AtomicU64,
    }

    impl RemoteStore for Arc<WriteOnly> {
        fn get(&self, _: &str, _: u64) -> Result<RemoteValue, RemoteError> {
            Err(down())
        }

        fn put(&self, _: &str, _: &[u8]) -> Result<(), RemoteError> {
            self.puts.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    #[test]
    fn fetches_that_all_fail_open_the_breaker_whatever_publishes_succeed() {
        let backend = Arc::new(WriteOnly::default());
        let options = RemoteOptions {
            failure_threshold: 3,
            cool_down: Duration::from_secs(3600),
            ..RemoteOptions::default()
        };
        let tier = RemoteTier::new(Box::new(Arc::clone(&backend)), secret(), options).unwrap();
        let load = |artifact: VerifiedArtifact<'_>| Ok::<_, String>(artifact.bytes().to_vec());
        // A publish that succeeds between each two fetches that fail.
        for n in 0..3 {
            if n > 0 {
                tier.publish(&key("built"), b"built");
                // Counted once the breaker heard of it.
                while tier.stats().publishes < n {
                    std::thread::yield_now();
                }
            }
            assert!(tier.fetch(&key("a"), load).is_none());
        }
        let stats = tier.stats();
        assert_eq!(
            (stats.fetches, stats.errors, stats.publishes),
            (3, 3, 2),
            "{stats}"
        );
        assert_eq!(stats.breaker, BreakerState::Open, "{stats}");
        assert_eq!(stats.breaker_opened, 1);
        // Skipped from now on, both kinds.
        assert!(tier.fetch(&key("a"), load).is_none());
        tier.publish(&key("built"), b"built");
        drop(tier);
        assert_eq!(backend.puts.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_full_queue_drops_publishes_instead_of_waiting() {
        let backend = Shared::default();
        let options = RemoteOptions {
            queue: 1,
            ..RemoteOptions::default()
        };
        let tier = tier(&backend, options);
        backend.hold_puts(true);
        tier.publish(&key("a"), b"a");
        backend.wait_for_puts(1); // the publisher holds "a"
        tier.publish(&key("b"), b"b"); // queued
        tier.publish(&key("c"), b"c"); // dropped
        assert_eq!(tier.stats().dropped, 1);
        backend.hold_puts(false);
        drop(tier); // waits for "a" and "b"
        assert!(backend.value("a").is_some() && backend.value("b").is_some());
        assert_eq!(backend.value("c"), None);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // file system
    fn the_order_is_disk_then_remote_then_build() {
        let backend = Shared::default();
        drop(fetch(&store(&backend, RemoteOptions::default()), "a"));
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            ArtifactStore::open(StoreConfig::at(dir.path()))
                .unwrap()
                .with_remote(tier(&backend, RemoteOptions::default()))
        };
        let store = open();
        assert_eq!(fetch(&store, "a").1, Fetched::Remote);
        assert!(
            store.entry_path(&key("a")).unwrap().exists(),
            "copied to disk"
        );
        let requests = backend.requests();
        assert_eq!(fetch(&store, "a").1, Fetched::Disk);
        assert_eq!(
            backend.requests(),
            requests,
            "a disk hit never asks the remote"
        );
        drop(store);
        // A fresh process reads it from its disk without asking either.
        let store = open();
        assert_eq!(fetch(&store, "a").1, Fetched::Disk);
        assert_eq!(store.remote_stats().unwrap().fetches, 0);
    }
}
