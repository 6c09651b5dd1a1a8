//! [`RemoteOptions`]: the settings of a [`RemoteTier`](super::RemoteTier).

use std::time::Duration;

/// Settings of a [`RemoteTier`](super::RemoteTier).
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
    /// Prepended to the hex of an [`ArtifactKey`](crate::store::ArtifactKey) to name its value.
    pub key_prefix: String,
    /// How long a compile lease lives unless renewed (its owner renews it
    /// every third of this while it compiles): a dead owner's lease ends
    /// this long after its last renewal at most, and a waiter waits at
    /// least this long (plus one poll), so that one waiter takes a dead
    /// owner's lease over before the others give up. Keep it at or under
    /// a compile. `None` (or zero): no leases, every process that misses
    /// compiles (as with a backend without leases).
    pub lease_ttl: Option<Duration>,
    /// The compile time a waiter assumes for another process's compile
    /// before this process measured one of its own: a waiter waits for one
    /// owner at most the longest build this process measured, at least
    /// this (and the lease's time to live), then compiles itself.
    pub compile_estimate: Duration,
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
    /// The default time to live of a compile lease: 2 s (renewed every
    /// 0.67 s while compiling; a loopback or LAN request takes well under a
    /// millisecond).
    pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(2);
    /// The default compile estimate of a waiter: 2 s, an IREE compile of a
    /// small layer on a busy machine.
    pub const DEFAULT_COMPILE_ESTIMATE: Duration = Duration::from_secs(2);
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            max_entry_bytes: Self::DEFAULT_MAX_ENTRY_BYTES,
            failure_threshold: Self::DEFAULT_FAILURE_THRESHOLD,
            cool_down: Self::DEFAULT_COOL_DOWN,
            queue: Self::DEFAULT_QUEUE,
            key_prefix: Self::DEFAULT_KEY_PREFIX.to_owned(),
            lease_ttl: Some(Self::DEFAULT_LEASE_TTL),
            compile_estimate: Self::DEFAULT_COMPILE_ESTIMATE,
        }
    }
}
