//! [`Folder`]: an [`ArtifactStore`](super::ArtifactStore)'s folder of
//! entries: where an entry lives, who may own it, and the size bound kept
//! by pruning the least recently used entries.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::entry::ENTRY_EXTENSION;
use super::key::ArtifactKey;
use super::listing::{self, Listed};
use super::trust::{Owners, Secret};

/// The folder of an [`ArtifactStore`](super::ArtifactStore), with its
/// secret and bound.
#[derive(Debug)]
pub(super) struct Folder {
    pub(super) entries: PathBuf,
    pub(super) secret: Secret,
    pub(super) max_bytes: u64,
    /// Never written, touched or pruned (an exported bundle).
    pub(super) read_only: bool,
    /// Bytes in `entries`; `None` until the first scan.
    pub(super) bytes_on_disk: Mutex<Option<u64>>,
}

impl Folder {
    /// Who may own the folder's files. Entries are held to their folder's
    /// rule in every folder: in a read-only one (a bundle, perhaps
    /// installed by root) a file others could write would be served
    /// otherwise; in this user's own folder, closed to others (0700), no one
    /// else can reach the files, and the check costs nothing (the opened
    /// file's metadata is read anyway), so one rule holds everywhere and an
    /// entry that breaks it is deleted and built again.
    pub(super) fn owners(&self) -> Owners {
        if self.read_only {
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
            if fs::remove_file(&entry.path).is_ok() {
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
    /// the way.
    pub(super) fn scan(&self) -> Vec<Listed> {
        listing::list(&self.entries, ENTRY_EXTENSION)
    }
}
