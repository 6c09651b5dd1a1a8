//! Policy files: what the cache's policy learned about each function
//! ([`LearnedPolicy`]), kept beside the entries, in `<folder>/policy/`, so
//! that a process restarted on a warm cache starts from it.
//!
//! One file per function, definition, compiler build and target
//! ([`PolicyScope`]), named by the SHA-256 of the four, holding the text
//! of `learned/file.rs` (at most [`LearnedPolicy::MAX_TEXT_BYTES`]). The
//! files follow the entries' rules: the folder is made 0700 and checked
//! like `vmfb/` before every read and write of a file in it (not a
//! symbolic link, this user's, writable by no one else: a folder that is
//! not is neither read nor written, nor followed, and is logged once at
//! warn level with the command that fixes it, every function starting
//! from nothing until then); a file is written whole under a temporary name (mode
//! 0600) and renamed into place, so a reader (or a process killed while
//! writing) never leaves half a file in place; it is read as entries are
//! (no links followed, no special file opened, only a file that no other
//! user can write), its size checked before it is read. A file that cannot
//! be used — not safe to read, over the bound, damaged, or written for
//! another scope (its text names what it was learned for) — is logged at
//! warn level once, deleted, and the function starts from nothing; it is
//! written again when the function's policy changes.
//!
//! The files are not authenticated as entries are: a policy only changes
//! which variant a call looks up or compiles, and each variant still
//! serves only the calls it was compiled for, so a forged file costs
//! compiles, never wrong code (and only this user can write the folder).
//! At most [`MAX_POLICY_FILES`] are kept: making a new one beyond it
//! deletes the least recently used (a recall refreshes a file's
//! modification time).

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use super::file_io;
use super::key::ArtifactKey;
use super::listing;
use super::trust::{self, open_file, Owners, StoreError, CLOSE_FILE};
use jit_cache::ErrorChain;
use jit_cache::{LearnedPolicy, PolicyFileError, PolicyScope};

/// The folder of the policy files, in the store's folder.
const POLICY_FOLDER: &str = "policy";

/// The extension of policy files.
const POLICY_EXTENSION: &str = "policy";

/// Policy files kept at most; beyond, the least recently used go (down to
/// 90 %).
pub const MAX_POLICY_FILES: usize = 1024;

/// Bumped whenever what goes into a policy file's name changes meaning.
const DOMAIN: &str = "sheaf-jit/policy-file-v1";

/// The policy files of one store's folder.
#[derive(Debug, Default)]
pub(crate) struct PolicyFiles {
    written: Mutex<Written>,
    /// Whether a folder that is not safe to use was reported (once).
    warned: AtomicBool,
}

#[derive(Debug, Default)]
struct Written {
    /// The sequence of the policy written last to each file (so that an
    /// older one, kept late by another thread, never replaces a newer one).
    sequences: HashMap<String, u64>,
    /// Files in the folder: counted on the first new file, plus this
    /// store's new files since.
    files: Option<usize>,
}

impl PolicyFiles {
    /// The policy kept in the store's folder `dir` for `scope`, read as
    /// `owners`' file; `None` when there is none, or it cannot be used
    /// (logged and deleted).
    pub(crate) fn recall(
        &self,
        dir: &Path,
        owners: Owners,
        scope: &PolicyScope<'_>,
    ) -> Option<LearnedPolicy> {
        let folder = folder(dir);
        match trust::check_folder(&folder, owners) {
            Ok(()) => {}
            Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                return None
            }
            Err(error) => {
                self.folder_unusable(&error);
                return None;
            }
        }
        let path = folder.join(file_name(scope));
        let read = read(&path, owners, true, |text| {
            LearnedPolicy::from_text(text, scope)
        })?;
        match read {
            Ok(learned) => Some(learned),
            Err(why) => {
                tracing::warn!(
                    target: crate::log_targets::CACHE,
                    function = scope.function,
                    file = %path.display(),
                    reason = %why,
                    "ignoring the learned policy of `{}` in {} ({why}): it was deleted, and the \
                     function starts as in a new cache (its first sizes compile static, its dims \
                     go dynamic again); the file is written again when its policy changes",
                    scope.function,
                    path.display()
                );
                trust::remove_file_in(&folder, &path, owners);
                None
            }
        }
    }

    /// Writes `learned` as the policy of `scope` in the store's folder
    /// `dir`, unless a policy of a later sequence was written there by
    /// this store; returns whether it was written.
    pub(crate) fn keep(
        &self,
        dir: &Path,
        scope: &PolicyScope<'_>,
        learned: &LearnedPolicy,
    ) -> bool {
        let name = file_name(scope);
        // Held while writing: the policies of one function are written in
        // order (they are rare: on compiles, not on calls).
        let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        let last = written.sequences.get(&name);
        if last.is_some_and(|&last| last >= learned.sequence()) {
            return false;
        }
        let folder = folder(dir);
        let path = folder.join(&name);
        // Checked before each write: it may have been replaced since the
        // last one.
        let checked = match trust::create_folder(&folder) {
            Err(error @ StoreError::Insecure { .. }) => {
                self.folder_unusable(&error);
                return false;
            }
            checked => checked.map_err(io::Error::other),
        };
        let new = fs::symlink_metadata(&path).is_err();
        let text = learned.to_text(scope);
        if let Err(error) = checked.and_then(|()| write(&folder, &path, &text)) {
            tracing::debug!(
                target: crate::log_targets::CACHE,
                function = scope.function,
                file = %path.display(),
                error = %ErrorChain(&error),
                "cannot write the learned policy of `{}`",
                scope.function
            );
            return false;
        }
        written.sequences.insert(name, learned.sequence());
        if new {
            let files = match written.files {
                Some(files) => files + 1,
                None => scan(&folder).len(),
            };
            written.files = Some(if files > MAX_POLICY_FILES {
                prune(&folder)
            } else {
                files
            });
        }
        true
    }
}

impl PolicyFiles {
    /// Reports, once per store, that the policy folder cannot be used
    /// (`error` says why and what to do); later failures are debug events.
    fn folder_unusable(&self, error: &StoreError) {
        let error = ErrorChain(error);
        if self.warned.swap(true, Ordering::Relaxed) {
            tracing::debug!(target: crate::log_targets::CACHE, %error, "policy folder not used: {error}");
            return;
        }
        tracing::warn!(
            target: crate::log_targets::CACHE,
            %error,
            "not using the learned policies of this disk cache: {error}; nothing in that folder \
             is read or written, and every function starts as in a new cache until it is fixed"
        );
    }
}

/// The folder of the policy files in the store's folder `dir`.
pub(super) fn folder(dir: &Path) -> PathBuf {
    dir.join(POLICY_FOLDER)
}

/// The key of the policy of `scope`: the SHA-256 of its parts, each
/// length-prefixed. It names the policy's file, and its value in a remote
/// tier (`remote/policies.rs`), whose seal binds the policy to it.
pub(crate) fn key(scope: &PolicyScope<'_>) -> ArtifactKey {
    let mut hasher = Sha256::new();
    let definition = format!("{:016x}", scope.definition_hash);
    for field in [
        DOMAIN,
        scope.function,
        &definition,
        scope.compiler,
        scope.target,
    ] {
        hasher.update((field.len() as u64).to_le_bytes());
        hasher.update(field.as_bytes());
    }
    ArtifactKey::from_bytes(hasher.finalize().into())
}

/// The file name of the policy of `scope`: its [`key`] in hex.
fn file_name(scope: &PolicyScope<'_>) -> String {
    format!("{}.{POLICY_EXTENSION}", key(scope).hex())
}

/// Why a policy file is not used.
#[derive(Debug)]
pub(super) enum Unusable {
    Insecure(String),
    Unreadable(io::Error),
    Text(PolicyFileError),
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unusable::Insecure(reason) => write!(f, "it is not safe to read: {reason}"),
            Unusable::Unreadable(error) => write!(f, "it cannot be read: {error}"),
            Unusable::Text(error) => write!(f, "{error}"),
        }
    }
}

/// The policy in the file `path`, as `parse` reads its text; `None` when
/// there is no file. A file read whole is marked used when `touch` is set.
pub(super) fn read<T>(
    path: &Path,
    owners: Owners,
    touch: bool,
    parse: impl FnOnce(&str) -> Result<T, PolicyFileError>,
) -> Option<Result<T, Unusable>> {
    let (mut file, metadata) = match open_file(path, owners, CLOSE_FILE) {
        Ok(opened) => opened,
        Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            return None
        }
        Err(StoreError::Io { source, .. }) => return Some(Err(Unusable::Unreadable(source))),
        Err(StoreError::Insecure { reason, .. } | StoreError::Invalid { reason, .. }) => {
            return Some(Err(Unusable::Insecure(reason)))
        }
    };
    let max = LearnedPolicy::MAX_TEXT_BYTES as u64;
    if metadata.len() > max {
        let too_large = PolicyFileError::TooLarge {
            bytes: metadata.len(),
        };
        return Some(Err(Unusable::Text(too_large)));
    }
    // Bounded again while reading: the file may have grown since.
    let mut bytes = Vec::new();
    if let Err(error) = (&mut file).take(max + 1).read_to_end(&mut bytes) {
        return Some(Err(Unusable::Unreadable(error)));
    }
    let learned = match String::from_utf8(bytes) {
        Ok(text) => parse(&text),
        Err(_) => Err(PolicyFileError::Damaged("it is not UTF-8 text".to_owned())),
    };
    if touch && learned.is_ok() {
        // Best effort: a file we cannot touch just ages sooner.
        let _ = file.set_modified(SystemTime::now());
    }
    Some(learned.map_err(Unusable::Text))
}

/// The policy files of the store's folder `dir` (temporary files not
/// included), as `owners`' folder; stale temporaries are deleted on the
/// way when `clean` is set. A `policy/` that is not safe to use lists
/// nothing (see `listing::list`).
pub(super) fn list(dir: &Path, owners: Owners, clean: bool) -> Vec<listing::Listed> {
    listing::list(&folder(dir), POLICY_EXTENSION, owners, clean)
        .into_iter()
        .filter(|file| !file.temporary)
        .collect()
}

/// Deletes the policy file `path` of the store's folder `dir` while
/// `policy/` is safe to use (`trust::remove_file_in`); whether it was.
pub(super) fn delete(dir: &Path, path: &Path, owners: Owners) -> bool {
    trust::remove_file_in(&folder(dir), path, owners)
}

/// Whether `path` has the name this store gives a policy file (see
/// [`file_name`]): 64 lowercase hex digits and `.policy`.
pub(super) fn is_policy_file_name(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|name| name.to_str()) else {
        return false;
    };
    name.strip_suffix(POLICY_EXTENSION)
        .and_then(|stem| stem.strip_suffix('.'))
        .is_some_and(|digits| {
            digits.len() == 64
                && digits
                    .bytes()
                    .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
}

/// Writes `text` to `path` (inside `folder`) whole: a temporary file, mode
/// 0600, renamed over it.
fn write(folder: &Path, path: &Path, text: &str) -> io::Result<()> {
    debug_assert_eq!(path.parent(), Some(folder));
    file_io::write_whole(path, text.as_bytes())
}

/// The policy files in `folder`, with when each was last used; deletes
/// the temporary files of killed writers on the way.
fn scan(folder: &Path) -> Vec<(SystemTime, PathBuf)> {
    listing::list(folder, POLICY_EXTENSION, Owners::User, true)
        .into_iter()
        .filter(|file| !file.temporary)
        .map(|file| (file.used, file.path))
        .collect()
}

/// Deletes the least recently used policy files of `folder` down to 90 %
/// of [`MAX_POLICY_FILES`]; returns how many are left.
fn prune(folder: &Path) -> usize {
    let mut files = scan(folder);
    let keep = MAX_POLICY_FILES / 10 * 9;
    if files.len() <= keep {
        return files.len();
    }
    files.sort();
    let excess = files.len() - keep;
    for (_, path) in files.drain(..excess) {
        trust::remove_file_in(folder, &path, Owners::User);
    }
    files.len()
}
