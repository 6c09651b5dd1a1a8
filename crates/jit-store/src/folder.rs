//! [`Folder`]: an [`ArtifactStore`](super::ArtifactStore)'s folder of
//! entries: where an entry lives, who may own it, and the size bound kept
//! by pruning the least recently used entries.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::entry::ENTRY_EXTENSION;
use super::key::ArtifactKey;
use super::listing::{self, Listed};
use super::trust::{self, Owners, Trust};

/// The folder of an [`ArtifactStore`](super::ArtifactStore), with what
/// authenticates its entries and its bound.
#[derive(Debug)]
pub(super) struct Folder {
    pub(super) entries: PathBuf,
    /// The folder's own secret ([`Trust::Shared`]: this user's disk cache,
    /// an unsigned bundle), or signatures (a signed bundle, written with
    /// its builder's key and read with trusted keys). `None` only for a
    /// folder inspected without a secret ([`Access::Inspect`]): no entry
    /// can be authenticated then.
    pub(super) trust: Option<Trust>,
    pub(super) max_bytes: u64,
    pub(super) access: Access,
    /// Bytes in `entries`; `None` until the first scan.
    pub(super) bytes_on_disk: Mutex<Option<u64>>,
}

/// What a store does to its folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Access {
    /// The runtime's own folder: read, written, refreshed and trimmed.
    ReadWrite,
    /// Only read: never written, touched or trimmed (an exported bundle,
    /// perhaps installed by root).
    ReadOnly,
    /// This user's folder, opened by a tool that shows and trims it: never
    /// written or touched; only `prune` and `clear` delete, and only what
    /// is provably the cache's own.
    Inspect,
}

impl Folder {
    /// Whether nothing is written, touched or deleted on the store's own
    /// account (lookups, inserts, the size bound, cleaning temporaries).
    pub(super) fn read_only(&self) -> bool {
        self.access != Access::ReadWrite
    }

    /// Whether `prune` and `clear` may delete here.
    pub(super) fn trimmed(&self) -> bool {
        self.access != Access::ReadOnly
    }

    /// Who may own the folder's files. Entries are held to their folder's
    /// rule in every folder: in a read-only one (a bundle, perhaps
    /// installed by root) a file others could write would be served
    /// otherwise; in this user's own folder, closed to others (0700), no one
    /// else can reach the files, and the check costs nothing (the opened
    /// file's metadata is read anyway), so one rule holds everywhere and an
    /// entry that breaks it is deleted and built again.
    pub(super) fn owners(&self) -> Owners {
        if self.access == Access::ReadOnly {
            Owners::UserOrRoot
        } else {
            Owners::User
        }
    }

    /// The store's folder (around `vmfb/`).
    pub(super) fn dir(&self) -> &Path {
        self.entries.parent().unwrap_or(&self.entries)
    }

    pub(super) fn entry_path(&self, key: &ArtifactKey) -> PathBuf {
        self.entries
            .join(format!("{}.{ENTRY_EXTENSION}", key.hex()))
    }

    pub(super) fn bytes_on_disk(&self) -> u64 {
        let mut bytes = self
            .bytes_on_disk
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *bytes.get_or_insert_with(|| self.scan().iter().map(|entry| entry.len).sum())
    }

    /// Accounts for `bytes` just written; evicts when over the bound.
    /// Returns how many entries were evicted.
    pub(super) fn added(&self, bytes: u64) -> u64 {
        let mut total = self
            .bytes_on_disk
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let estimate = match *total {
            Some(known) => known + bytes,
            None => self.scan().iter().map(|entry| entry.len).sum(),
        };
        *total = Some(estimate);
        if estimate <= self.max_bytes {
            return 0;
        }
        // Over the bound: learn the true state (other processes write too)
        // and delete the least recently used entries down to 90 %.
        let mut entries = self.scan();
        let mut remaining: u64 = entries.iter().map(|entry| entry.len).sum();
        let low_water = self.max_bytes / 10 * 9;
        entries.sort_by_key(|entry| entry.used);
        let mut evicted = 0;
        for entry in entries.iter().filter(|entry| !entry.temporary) {
            if remaining <= low_water {
                break;
            }
            if self.delete(&entry.path) {
                evicted += 1;
            }
            // Gone either way (another process may have deleted it).
            remaining -= entry.len;
        }
        *total = Some(remaining);
        evicted
    }

    /// Every entry in the folder, and the temporary files of writers at
    /// work (they take space too); deletes those left by crashed writers on
    /// the way, unless the store is read-only.
    /// A `vmfb/` that is not safe to use (a link, another user's, open to
    /// others) lists nothing, and nothing in it is deleted.
    pub(super) fn scan(&self) -> Vec<Listed> {
        listing::list(
            &self.entries,
            ENTRY_EXTENSION,
            self.owners(),
            !self.read_only(),
        )
    }

    /// Deletes the file `path` of `vmfb/` (not what it links to: a link
    /// is deleted itself) when `vmfb/` is still safe to use, the check
    /// the store made when it opened it; whether it was deleted.
    pub(super) fn delete(&self, path: &Path) -> bool {
        trust::remove_file_in(&self.entries, path, self.owners())
    }
}
