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
//! - **Keys of the deployment's own**: an entry's key is
//!   `<prefix><namespace>:<secret id>:<artifact key>`, e.g.
//!   `sheaf-jit:v1:default:5d1c0e9a7b3f4c21:<64 hex digits>`:
//!   [`key_prefix`](RemoteOptions::key_prefix) (the entry format's
//!   version), the deployment's [`Namespace`], the first 8 bytes (16 hex
//!   digits) of an HMAC-SHA256 of a fixed label under the secret (which
//!   tells secrets apart without revealing anything of them), and the
//!   [`ArtifactKey`]'s hex. Two deployments on one Redis database with
//!   different secrets or namespaces never read or overwrite each other's
//!   entries: each misses on the other's artifacts (a miss, not an
//!   authentication failure) and keeps its own.
//!
//! [`RedisStore`]: super::RedisStore

mod backend;
mod options;
mod stats;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::breaker::{Breaker, Request};
use super::counters::{bump, load};
use super::entry::{self, Rejection, Verdict, HEADER_LEN};
use super::key::ArtifactKey;
use super::trust::Secret;
use super::verified::VerifiedArtifact;
use crate::{ByteSize, ErrorChain};

pub use backend::{RemoteError, RemoteStore, RemoteValue};
pub use options::{Namespace, NamespaceError, RemoteOptions};
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
    secret: Secret,
    options: RemoteOptions,
    /// What every key of this tier starts with (see the module docs).
    key_prefix: String,
    breaker: Breaker,
    counters: Counters,
    /// The fetches' total time, and the longest.
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
        let key_prefix = format!(
            "{}{}:{}:",
            options.key_prefix,
            options.namespace,
            secret.identity()
        );
        let shared = Arc::new(Shared {
            backend,
            key_prefix,
            secret,
            breaker: Breaker::new(options.failure_threshold, options.cool_down),
            options,
            counters: Counters::default(),
            fetch_nanos: AtomicU64::new(0),
            max_fetch_nanos: AtomicU64::new(0),
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
        let outcome = entry::parse(
            &mut &bytes[..],
            bytes.len() as u64,
            key,
            &shared.secret,
            max,
        );
        let (reason, counter) = match entry::judge(outcome, load) {
            Verdict::Loaded { value, artifact } => {
                bump(&c.hits, 1);
                bump(&c.bytes_fetched, bytes.len() as u64);
                tracing::debug!(
                    target: crate::log_targets::REMOTE,
                    key = %name,
                    bytes = bytes.len(),
                    "served an artifact from the remote store"
                );
                return Some((value, artifact));
            }
            // Only for lack of memory.
            Verdict::Missing => {
                bump(&c.misses, 1);
                return None;
            }
            Verdict::Rejected(Rejection::Refused(reason)) => {
                (format!("the caller refused it: {reason}"), &c.refused)
            }
            Verdict::Rejected(Rejection::Corrupt(reason)) => {
                (format!("malformed: {reason}"), &c.malformed)
            }
            Verdict::Rejected(Rejection::Unauthenticated) => (
                "it failed authentication (forged, written with another secret, copied from \
                 another key, or damaged)"
                    .to_owned(),
                &c.unauthenticated,
            ),
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
                target: crate::log_targets::REMOTE,
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
        format!("{}{}", self.key_prefix, key.hex())
    }

    /// The value under `name`, through the breaker, timed and counted.
    fn fetch_value(&self, name: &str) -> Option<Vec<u8>> {
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
            return None;
        }
        let max_value = self.options.max_entry_bytes + HEADER_LEN as u64;
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
                    RemoteValue::Found(bytes) => return Some(bytes),
                    RemoteValue::Missing => {
                        bump(&c.misses, 1);
                        tracing::debug!(
                            target: crate::log_targets::REMOTE,
                            key = %name,
                            reason = "absent",
                            "remote-cache miss: no value under this key"
                        );
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
        None
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
                        target: crate::log_targets::REMOTE,
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
