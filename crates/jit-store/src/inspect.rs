//! What a store's folder holds, for a tool that shows, checks and trims it
//! (`sheaf-integration`'s `sheaf-jit-cache` command): the entries listed
//! ([`ArtifactStore::stored_entries`]), each checked as a lookup checks it
//! ([`ArtifactStore::check_entry`]), the policy files read
//! ([`ArtifactStore::stored_policies`]), and the folder pruned by age and
//! size ([`ArtifactStore::prune`]) or cleared ([`ArtifactStore::clear`]).
//!
//! Nothing here trusts more than a lookup does: an entry is read with the
//! same checks (no link followed, no special file opened, only files no
//! other user can write, sizes checked before allocating) and its tag
//! verified under the folder's secret, but it is neither loaded, touched
//! nor deleted when it fails. `prune` and `clear` delete only what is
//! provably the cache's own — authentic entries, and policy files that
//! read as one under the name the store gives them — in folders checked
//! before each deletion; they leave, and count, everything else.

use std::fmt;
use std::fs;
use std::path::PathBuf;
use std::sync::PoisonError;
use std::time::{Duration, SystemTime};

use super::artifact_store::{ArtifactStore, MAX_ENTRY_BYTES};
use super::entry::{self, ReadOutcome, Untrusted};
use super::folder::Folder;
use super::key::ArtifactKey;
use super::policy_files;
use super::trust::PublicKey;
use jit_cache::{LearnedPolicy, PolicyOwner};

/// An entry file of a store's folder ([`ArtifactStore::stored_entries`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredEntry {
    /// Its key, read from its name (the store finds it by that name).
    pub key: ArtifactKey,
    /// The file.
    pub path: PathBuf,
    /// The file's size: header and artifact.
    pub bytes: u64,
    /// When it was last used: written, or served by a lookup (its
    /// modification time, the store's LRU order).
    pub last_used: SystemTime,
}

/// What checking an entry found ([`ArtifactStore::check_entry`]): what a
/// lookup would do with it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EntryCheck {
    /// A well-formed entry whose tag verifies under the folder's secret:
    /// a lookup hands its artifact to the loader.
    Authentic {
        /// The artifact's size.
        artifact_bytes: u64,
    },
    /// In a store read with trusted keys (a signed bundle): a well-formed
    /// entry whose signature by `signer`, one of the trusted keys,
    /// verifies: a lookup hands its artifact to the loader.
    Signed {
        /// The artifact's size.
        artifact_bytes: u64,
        /// The key that signed it.
        signer: PublicKey,
    },
    /// Not a well-formed entry for its key (truncated, another format,
    /// another key's header): why. A lookup deletes it and builds again.
    Corrupt(String),
    /// Well formed, but its tag or signature does not verify: forged,
    /// re-keyed from another entry, tagged under another secret, or
    /// damaged. A lookup deletes it and builds again.
    Unauthenticated,
    /// In a store read with trusted keys: an entry tagged with a secret,
    /// not signed. A lookup never loads it.
    Unsigned,
    /// In a store read with trusted keys: an entry signed by this key,
    /// which is not among them. A lookup never loads it.
    UnknownSigner(PublicKey),
    /// Not safe to read (a link, a special file, a file another user could
    /// have written): why, and what to run. A lookup never reads it.
    Insecure(String),
    /// Gone since it was listed.
    Missing,
    /// The folder has no secret (it was
    /// [opened for inspection](ArtifactStore::open_for_inspection)): no
    /// entry can be authenticated. A runtime that opens the folder makes a
    /// new secret, under which no entry there verifies.
    NoSecret,
}

impl EntryCheck {
    /// Whether a lookup would load it.
    pub fn is_authentic(&self) -> bool {
        matches!(
            self,
            EntryCheck::Authentic { .. } | EntryCheck::Signed { .. }
        )
    }
}

impl fmt::Display for EntryCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntryCheck::Authentic { artifact_bytes } => {
                write!(
                    f,
                    "authentic ({artifact_bytes}-byte artifact, tag verified)"
                )
            }
            EntryCheck::Signed {
                artifact_bytes,
                signer,
            } => write!(
                f,
                "authentic ({artifact_bytes}-byte artifact, signed by {signer})"
            ),
            EntryCheck::Corrupt(reason) => write!(f, "corrupt: {reason}"),
            EntryCheck::Unauthenticated => f.write_str(
                "unauthenticated: its tag (or signature) does not verify (forged, copied from \
                 another entry, or damaged)",
            ),
            EntryCheck::Unsigned => write!(f, "refused: {}", Untrusted::Unsigned),
            EntryCheck::UnknownSigner(signer) => {
                write!(f, "refused: {}", Untrusted::UnknownSigner(*signer))
            }
            EntryCheck::Insecure(reason) => write!(f, "not safe to read: {reason}"),
            EntryCheck::Missing => f.write_str("gone since it was listed"),
            EntryCheck::NoSecret => f.write_str(
                "cannot be authenticated: no secret in this folder (a runtime that opens it \
                 makes a new one, under which no entry here verifies)",
            ),
        }
    }
}

/// A policy file of a store's folder ([`ArtifactStore::stored_policies`]):
/// what the cache's policy learned about one function.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StoredPolicy {
    /// The file.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// When it was last written or recalled.
    pub last_used: SystemTime,
    /// Whose policy it is and what it holds, or why it cannot be used (a
    /// process that recalls it deletes it then).
    pub policy: Result<(PolicyOwner, LearnedPolicy), String>,
}

/// What [`ArtifactStore::prune`] or [`ArtifactStore::clear`] deleted, and
/// what it left because it is not provably the cache's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Removed {
    /// Entry files deleted.
    pub entries: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Policy files deleted ([`clear`](ArtifactStore::clear) only).
    pub policies: usize,
    /// Files that would have been deleted but were left: entries that are
    /// not authentic, policy files that are not usable or not named as the
    /// store names them ([`check_entry`](ArtifactStore::check_entry) and
    /// [`stored_policies`](ArtifactStore::stored_policies) say why).
    pub left: usize,
}

impl ArtifactStore {
    /// The entry files of the store's folder, most recently used first:
    /// regular files named `<key>.sjit` (links and other files are not
    /// listed, nor are writers' temporary files). Empty for a disabled
    /// store.
    pub fn stored_entries(&self) -> Vec<StoredEntry> {
        let Some(folder) = self.folder() else {
            return Vec::new();
        };
        let mut entries: Vec<StoredEntry> = folder
            .scan()
            .into_iter()
            .filter(|file| !file.temporary)
            .filter_map(|file| {
                let stem = file.path.file_stem()?.to_str()?;
                Some(StoredEntry {
                    key: ArtifactKey::from_hex(stem)?,
                    bytes: file.len,
                    last_used: file.used,
                    path: file.path,
                })
            })
            .collect();
        entries.sort_by(|a, b| {
            b.last_used
                .cmp(&a.last_used)
                .then(a.key.hex().cmp(&b.key.hex()))
        });
        entries
    }

    /// The entry of `key` as [`stored_entries`](Self::stored_entries)
    /// would list it, but whatever is at its path (a link or a special
    /// file too, which [`check_entry`](Self::check_entry) then refuses);
    /// `None` when nothing is, or the store is disabled.
    pub fn stored_entry(&self, key: &ArtifactKey) -> Option<StoredEntry> {
        let path = self.folder()?.entry_path(key);
        // Of the path itself: links are not followed.
        let metadata = fs::symlink_metadata(&path).ok()?;
        Some(StoredEntry {
            key: *key,
            bytes: metadata.len(),
            last_used: metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            path,
        })
    }

    /// Checks `entry` as a lookup would before loading it (see
    /// [`EntryCheck`]), without loading, touching or deleting it.
    pub fn check_entry(&self, entry: &StoredEntry) -> EntryCheck {
        let Some(folder) = self.folder() else {
            return EntryCheck::Missing;
        };
        let Some(trust) = &folder.trust else {
            return EntryCheck::NoSecret;
        };
        let max_payload = folder.max_bytes.min(MAX_ENTRY_BYTES);
        let read = entry::read(
            &entry.path,
            &entry.key,
            trust.checker(),
            folder.owners(),
            max_payload,
            false,
        );
        match read {
            Err(reason) => EntryCheck::Insecure(reason),
            Ok(ReadOutcome::Found(artifact, None)) => EntryCheck::Authentic {
                artifact_bytes: artifact.len() as u64,
            },
            Ok(ReadOutcome::Found(artifact, Some(signer))) => EntryCheck::Signed {
                artifact_bytes: artifact.len() as u64,
                signer,
            },
            Ok(ReadOutcome::Missing) => EntryCheck::Missing,
            Ok(ReadOutcome::Corrupt(reason)) => EntryCheck::Corrupt(reason),
            Ok(ReadOutcome::Unauthenticated(Untrusted::Unverified)) => EntryCheck::Unauthenticated,
            Ok(ReadOutcome::Unauthenticated(Untrusted::Unsigned)) => EntryCheck::Unsigned,
            Ok(ReadOutcome::Unauthenticated(Untrusted::UnknownSigner(signer))) => {
                EntryCheck::UnknownSigner(signer)
            }
        }
    }

    /// The policy files of the store's folder (`policy/`), most recently
    /// used first, each read as a recall reads it (a safe file, within
    /// [`LearnedPolicy::MAX_TEXT_BYTES`], whole) but for any function, and
    /// neither touched nor deleted. Empty for a disabled store, or one
    /// whose `policy/` is missing or not safe to use (a symbolic link,
    /// another user's, open to others: never followed).
    pub fn stored_policies(&self) -> Vec<StoredPolicy> {
        let Some(folder) = self.folder() else {
            return Vec::new();
        };
        let mut policies: Vec<StoredPolicy> =
            policy_files::list(folder.dir(), folder.owners(), !folder.read_only())
                .into_iter()
                .map(|file| {
                    let policy = policy_files::read(&file.path, folder.owners(), false, |text| {
                        LearnedPolicy::read_text(text)
                    });
                    StoredPolicy {
                        policy: match policy {
                            Some(Ok(read)) => Ok(read),
                            Some(Err(why)) => Err(why.to_string()),
                            None => Err("gone since it was listed".to_owned()),
                        },
                        bytes: file.len,
                        last_used: file.used,
                        path: file.path,
                    }
                })
                .collect();
        policies.sort_by_key(|policy| std::cmp::Reverse(policy.last_used));
        policies
    }

    /// Deletes the entries not used for `unused_for` or longer, then the
    /// least recently used ones until the entries take at most `max_bytes`
    /// (as the store's own bound does, but to exactly that size); returns
    /// what it deleted. Only what is provably the cache's own is deleted:
    /// an entry that checks authentic under the folder's secret
    /// ([`check_entry`](Self::check_entry)), a regular file in a `vmfb/`
    /// that is still safe to use; any other is left in place and counted
    /// in [`Removed::left`]. Policy files stay. A read-only or disabled
    /// store deletes nothing. Processes using the folder meanwhile are
    /// safe: an entry deleted under them is built again.
    pub fn prune(&self, max_bytes: Option<u64>, unused_for: Option<Duration>) -> Removed {
        let Some(folder) = self.folder().filter(|folder| folder.trimmed()) else {
            return Removed::default();
        };
        let mut entries = self.stored_entries();
        // Least recently used first.
        entries.reverse();
        let now = SystemTime::now();
        let stale = |entry: &StoredEntry| {
            unused_for.is_some_and(|age| {
                now.duration_since(entry.last_used)
                    .is_ok_and(|unused| unused >= age)
            })
        };
        let mut remaining: u64 = entries.iter().map(|entry| entry.bytes).sum();
        let mut removed = Removed::default();
        for entry in &entries {
            let over = max_bytes.is_some_and(|max| remaining > max);
            if (over || stale(entry)) && self.delete_entry(folder, entry, &mut removed) {
                remaining -= entry.bytes;
            }
        }
        forget_size(folder);
        removed
    }

    /// Deletes every entry and every policy file of the store's folder
    /// that is provably the cache's own (the secret, the recorded builder
    /// and the folders stay); returns what it deleted. An entry goes when
    /// it checks authentic under the folder's secret, a policy file when
    /// it reads as one ([`stored_policies`](Self::stored_policies)) and
    /// has the name the store gives it; both must be regular files (a link
    /// is never followed) in a `vmfb/` or `policy/` that is safe to use
    /// (not a link, this user's, closed to others). Anything else is left
    /// in place and counted in [`Removed::left`]. A read-only or disabled
    /// store deletes nothing.
    pub fn clear(&self) -> Removed {
        let Some(folder) = self.folder().filter(|folder| folder.trimmed()) else {
            return Removed::default();
        };
        let mut removed = Removed::default();
        for entry in self.stored_entries() {
            self.delete_entry(folder, &entry, &mut removed);
        }
        for file in self.stored_policies() {
            let own = file.policy.is_ok() && policy_files::is_policy_file_name(&file.path);
            if own && policy_files::delete(folder.dir(), &file.path, folder.owners()) {
                removed.policies += 1;
            } else if !own {
                removed.left += 1;
            }
        }
        forget_size(folder);
        removed
    }

    /// Deletes `entry` when it is authentic, else counts it as left;
    /// whether it was deleted.
    fn delete_entry(&self, folder: &Folder, entry: &StoredEntry, removed: &mut Removed) -> bool {
        if !self.check_entry(entry).is_authentic() {
            removed.left += 1;
            return false;
        }
        let deleted = folder.delete(&entry.path);
        if deleted {
            removed.entries += 1;
            removed.bytes += entry.bytes;
        }
        deleted
    }
}

/// Makes the store scan its folder again for its size.
fn forget_size(folder: &Folder) {
    *folder
        .bytes_on_disk
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::tests::key;
    use crate::entry::ENTRY_EXTENSION;
    use crate::StoreConfig;

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn entries_are_listed_checked_pruned_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let store = ArtifactStore::open(StoreConfig::at(dir.path())).unwrap();
        for (program, bytes) in [("a", 100), ("b", 200), ("c", 300)] {
            assert!(store.insert(&key(program), &vec![1; bytes]));
        }
        let old = SystemTime::now() - Duration::from_secs(7200);
        let a = store.entry_path(&key("a")).unwrap();
        fs::File::options()
            .write(true)
            .open(&a)
            .unwrap()
            .set_modified(old)
            .unwrap();
        // Not entries: a stray file and a link.
        let entries_dir = a.parent().unwrap().to_path_buf();
        fs::write(entries_dir.join(format!("stray.{ENTRY_EXTENSION}")), b"x").unwrap();
        let listed = store.stored_entries();
        assert_eq!(listed.len(), 3);
        assert_eq!(listed[2].key, key("a"), "least recently used last");
        assert!(listed
            .iter()
            .all(|entry| store.check_entry(entry).is_authentic()));

        // A flipped byte fails the tag; a cut file is corrupt.
        let mut bytes = fs::read(&listed[0].path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(&listed[0].path, &bytes).unwrap();
        assert_eq!(store.check_entry(&listed[0]), EntryCheck::Unauthenticated);
        fs::write(&listed[1].path, &bytes[..10]).unwrap();
        assert!(
            matches!(store.check_entry(&listed[1]), EntryCheck::Corrupt(r) if r.contains("shorter"))
        );
        assert!(listed[0].path.exists(), "checking deletes nothing");

        // Unused for an hour: `a` goes; then down to 0 bytes: the two
        // damaged entries are not provably the cache's own, and stay.
        let pruned = store.prune(None, Some(Duration::from_secs(3600)));
        assert_eq!((pruned.entries, pruned.bytes), (1, 188));
        assert!(!a.exists());
        let pruned = store.prune(Some(0), None);
        assert_eq!((pruned.entries, pruned.left), (0, 2));
        for entry in store.stored_entries() {
            fs::remove_file(entry.path).unwrap();
        }
        // Rescanned: the stray file alone is left.
        assert_eq!(store.stats().bytes_on_disk, 1);

        assert!(store.insert(&key("d"), &[1; 10]));
        let cleared = store.clear();
        assert_eq!((cleared.entries, cleared.left), (1, 0));
        assert!(store.stored_entries().is_empty());
        assert!(dir.path().join("secret").exists(), "the secret stays");
    }
}
