//! [`StoreStats`]: the counters of an
//! [`ArtifactStore`](super::ArtifactStore), defined once with their atomic
//! counterparts.

counters! {
    /// Counters of a [`ArtifactStore`](super::ArtifactStore), from [`ArtifactStore::stats`](super::ArtifactStore::stats).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[non_exhaustive]
    pub struct StoreStats counted in Counters {
        /// Artifacts served from disk.
        pub hits: u64,
        /// Artifacts that had to be built (successfully or not).
        pub misses: u64,
        /// Entries found damaged, or refused by the caller's `load`, and
        /// deleted (unless the folder is read-only).
        pub corrupt: u64,
        /// Well-formed entries whose authentication tag or signature did not
        /// verify (forged, re-keyed from another entry, or damaged), deleted
        /// (unless the folder is read-only) and rebuilt.
        pub unauthenticated: u64,
        /// In a folder read with trusted keys (a signed bundle): entries
        /// tagged with a secret, not signed; never loaded.
        pub unsigned: u64,
        /// In a folder read with trusted keys: entries signed by a key not
        /// among them; never loaded.
        pub unknown_signer: u64,
        /// Entries refused unread because they are not safe files: a symbolic
        /// link, a FIFO or device, or a file that group or others may write or
        /// that belongs to another user (or, in a read-only folder, to neither
        /// this user nor root). Deleted unless the folder is read-only, like a
        /// bundle's; logged at warn level.
        pub insecure: u64,
        /// Builds that bypassed the store: it is disabled, or the caller had no
        /// key for them.
        pub bypassed: u64,
        /// Entries deleted to stay under the size bound (by this instance).
        pub evictions: u64,
        /// Entries that could not be written (the artifact was still used).
        pub write_errors: u64,
        /// Payload bytes served from disk.
        pub bytes_read: u64,
        /// Entry bytes written (headers included).
        pub bytes_written: u64,
        /// Lookups that found no entry for their key (never written, evicted,
        /// deleted, or written by another compiler or configuration, whose
        /// artifacts have other keys). Together with `corrupt`,
        /// `unauthenticated`, `unsigned`, `unknown_signer` and `insecure`,
        /// each lookup that did not hit has
        /// its reason counted once; `misses` counts the builds they led to.
        pub absent: u64,
        /// Of `corrupt`: authentic entries the caller's `load` refused (the
        /// runtime could not load the artifact).
        pub refused: u64,
        other {
            /// Size of all entries in the folder: exact after the last scan, plus
            /// this instance's writes since.
            pub bytes_on_disk: u64,
        }
    }
}
