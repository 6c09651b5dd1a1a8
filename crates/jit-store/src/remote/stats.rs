//! [`RemoteStats`]: the counters of a [`RemoteTier`](super::RemoteTier),
//! defined once with their atomic counterparts, and their one-line report.

use std::fmt;
use std::time::Duration;

use crate::breaker::BreakerState;
use jit_cache::ByteSize;

counters! {
    /// Counters of a [`RemoteTier`](super::RemoteTier), from
    /// [`ArtifactStore::remote_stats`](crate::ArtifactStore::remote_stats).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[non_exhaustive]
    pub struct RemoteStats counted in Counters {
        /// Artifacts served from the remote store (and copied to disk).
        pub hits: u64,
        /// Artifact fetches that found nothing.
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
        /// Fetch requests sent (whatever their outcome; learned policies'
        /// included).
        pub fetches: u64,
        /// Of `rejected`: values whose tag or signature did not verify
        /// (forged, sealed with another secret or key, copied from another
        /// key, tampered with, or damaged).
        pub unauthenticated: u64,
        /// Of `rejected`: unsigned values (tagged with a shared secret) where
        /// signatures are required.
        pub unsigned: u64,
        /// Of `rejected`: values signed by a key that is not trusted.
        pub unknown_signer: u64,
        /// Of `rejected`: values that are not well-formed entries for their key.
        pub malformed: u64,
        /// Of `rejected`: authentic values the caller's `load` refused.
        pub refused: u64,
        /// Learned policies fetched (a function's dynamic dims and hot
        /// sizes, learned by another process of the cluster).
        pub policies_fetched: u64,
        /// Learned policies published.
        pub policies_published: u64,
        /// Compile leases taken: this process compiled a missing artifact
        /// while the others of the cluster waited for it.
        pub leases_taken: u64,
        /// Leases lost before their compile ended (not renewed in time, or
        /// the store failed): another process may have compiled too.
        pub leases_lost: u64,
        /// Misses that found another process's lease, and waited.
        pub lease_waits: u64,
        /// Waits that ended with the artifact from the store.
        pub waits_found: u64,
        /// Waits that ended compiling here: the wait bound passed, the
        /// lease was released without an artifact, or the store failed.
        pub waits_compiled: u64,
        other {
            /// Their total time.
            pub fetch_time: Duration,
            /// The longest of them.
            pub max_fetch_time: Duration,
            /// The circuit breaker now.
            pub breaker: BreakerState,
            /// Times the breaker opened.
            pub breaker_opened: u64,
        }
    }
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
             {:.3?} max; leases {} taken, {} lost; {} waits ({} found, {} compiled); \
             breaker {} (opened {} times)",
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
            self.leases_taken,
            self.leases_lost,
            self.lease_waits,
            self.waits_found,
            self.waits_compiled,
            self.breaker,
            self.breaker_opened,
        )
    }
}
