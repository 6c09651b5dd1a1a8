//! What a store keeps beside its entries: the builder of the entries (the
//! compiler build their keys name), the policy files of what the cache's
//! policy learned (and, with a remote tier, the policies the cluster
//! shares), and the counters of every process that used the folder.

use std::io;

use super::ArtifactStore;
use crate::file_io;
use crate::policy_files;
use crate::run_totals::{self, RunTotals};
use crate::trust::{self, Owners};
use jit_cache::{LearnedPolicy, PolicyFileError, PolicyScope};

/// The file beside `vmfb/` naming the builder of the entries
/// ([`ArtifactStore::record_builder`]).
const BUILDER_FILE: &str = "builder";

/// The longest builder identity recorded or read.
const MAX_BUILDER_BYTES: u64 = 4096;

impl ArtifactStore {
    /// Records `identity` as the builder of the store's entries (the
    /// compiler build their keys name), so that a later process that cannot
    /// identify its builder itself — no compiler installed — can still find
    /// them ([`recorded_builder`](Self::recorded_builder)). Written whole
    /// (a temporary file renamed into place, mode 0600) when it differs
    /// from the one recorded; a read-only or disabled store, or an identity
    /// over 4 KiB, records nothing. Returns whether `identity` is recorded.
    pub fn record_builder(&self, identity: &str) -> bool {
        let Some(folder) = self.folder.as_ref().filter(|folder| !folder.read_only()) else {
            return false;
        };
        if identity.len() as u64 > MAX_BUILDER_BYTES {
            return false;
        }
        if self.recorded_builder().as_deref() == Some(identity) {
            return true;
        }
        let dir = folder.dir();
        // Checked again, as before every write: it may have been replaced
        // since the store opened it.
        let written = trust::check_folder(dir, Owners::User)
            .map_err(io::Error::other)
            .and_then(|()| file_io::write_whole(&dir.join(BUILDER_FILE), identity.as_bytes()));
        if let Err(error) = &written {
            tracing::debug!(
                target: crate::log_targets::CACHE,
                folder = %dir.display(),
                %error,
                "cannot record the builder of the disk cache's entries"
            );
        }
        written.is_ok()
    }

    /// Adds `totals` (one runtime's, as it ends) to the counters summed
    /// over every process that used the store's folder (`<folder>/stats`,
    /// see [`RunTotals`]); a read-only or disabled store adds nothing.
    /// Concurrent additions by other processes wait for each other (at most
    /// 2 s), and none is lost.
    ///
    /// # Errors
    ///
    /// The operating system's error, or [`io::ErrorKind::WouldBlock`] when
    /// another process held the lock too long: the totals are not added.
    pub fn add_run_totals(&self, totals: &RunTotals) -> io::Result<()> {
        match self.folder.as_ref().filter(|folder| !folder.read_only()) {
            Some(folder) => {
                trust::check_folder(folder.dir(), Owners::User).map_err(io::Error::other)?;
                run_totals::add(folder.dir(), totals)
            }
            None => Ok(()),
        }
    }

    /// The counters summed over every process that used the store's folder
    /// ([`add_run_totals`](Self::add_run_totals)); zero when none added
    /// any, or the store is disabled.
    ///
    /// # Errors
    ///
    /// Why the file cannot be used (not safe to read, over its bound,
    /// damaged); the next addition starts it again from zero.
    pub fn run_totals(&self) -> Result<RunTotals, String> {
        match &self.folder {
            Some(folder) => run_totals::read(folder.dir()),
            None => Ok(RunTotals::default()),
        }
    }

    /// Sets the counters summed over processes to zero (as `ccache -z`).
    /// Allowed on a store opened for inspection (the `sheaf-jit-cache`
    /// command), not on a read-only one.
    ///
    /// # Errors
    ///
    /// The operating system's error, or [`io::ErrorKind::WouldBlock`] as
    /// [`add_run_totals`](Self::add_run_totals); an error naming the store
    /// when it is read-only or disabled.
    pub fn zero_run_totals(&self) -> io::Result<()> {
        match self.folder.as_ref().filter(|folder| folder.trimmed()) {
            Some(folder) => {
                trust::check_folder(folder.dir(), Owners::User).map_err(io::Error::other)?;
                run_totals::zero(folder.dir())
            }
            None => Err(io::Error::other(
                "a read-only or disabled store keeps no statistics to zero",
            )),
        }
    }

    /// The builder identity [recorded](Self::record_builder) in the store's
    /// folder, read as entries are (a regular file that only its owners can
    /// change, not a link, at most 4 KiB); `None` when there is none, or it
    /// is not safe to read.
    pub fn recorded_builder(&self) -> Option<String> {
        let folder = self.folder.as_ref()?;
        let path = folder.dir().join(BUILDER_FILE);
        let (file, metadata) = trust::open_file(&path, folder.owners(), trust::CLOSE_FILE).ok()?;
        if metadata.len() > MAX_BUILDER_BYTES {
            return None;
        }
        let mut identity = String::new();
        io::Read::read_to_string(&mut io::Read::take(file, MAX_BUILDER_BYTES), &mut identity)
            .ok()?;
        Some(identity)
    }

    /// What the cache's policy learned about the function of `scope` in an
    /// earlier process, from its policy file in the store's folder
    /// (`policy/`, see [`keep_policy`](Self::keep_policy)); `None` when
    /// there is none, the store is read-only or disabled, or `policy/` is
    /// not safe to use (a symbolic link, another user's, or writable by
    /// others: logged once at warn level, never followed). A file that
    /// cannot be used (not safe to read, over
    /// [`LearnedPolicy::MAX_TEXT_BYTES`], damaged, or written for another
    /// function, definition, compiler build or target) is logged at warn
    /// level, deleted, and `None` returned. When the folder holds none, a
    /// remote tier behind it is asked for the policy another process of
    /// the cluster published (authenticated as its artifacts are); one
    /// found is kept in the folder and returned.
    pub fn recall_policy(&self, scope: &PolicyScope<'_>) -> Option<LearnedPolicy> {
        let folder = self.folder.as_ref().filter(|folder| !folder.read_only());
        if let Some(folder) = folder {
            if let Some(learned) = self.policies.recall(folder.dir(), folder.owners(), scope) {
                return Some(learned);
            }
        }
        let key = policy_files::key(scope);
        let text = self.behind.fetch_policy(&key)?;
        let learned = std::str::from_utf8(&text)
            .map_err(|_| PolicyFileError::Damaged("not UTF-8 text".to_owned()))
            .and_then(|text| LearnedPolicy::from_text(text, scope));
        match learned {
            Ok(learned) => {
                if let Some(folder) = folder {
                    self.policies.keep(folder.dir(), scope, &learned);
                }
                Some(learned)
            }
            Err(why) => {
                tracing::warn!(
                    target: crate::log_targets::REMOTE,
                    function = scope.function,
                    reason = %why,
                    "ignoring the learned policy of `{}` from the remote store ({why}): the \
                     function starts as in a new cache",
                    scope.function
                );
                None
            }
        }
    }

    /// Keeps `learned`, what the cache's policy learned about the function
    /// of `scope`, in its policy file in the store's folder: written whole
    /// (a temporary file, mode 0600, renamed into place) in `policy/`,
    /// made 0700 and checked like `vmfb/`; at most
    /// [`MAX_POLICY_FILES`](crate::MAX_POLICY_FILES) files are kept (the
    /// least recently used go). A policy whose
    /// [`sequence`](LearnedPolicy::sequence) is not above the one this
    /// store wrote last for `scope` is older, and dropped. Returns whether
    /// it was written; a read-only or disabled store writes nothing. A
    /// remote tier behind the folder publishes it too, in the background,
    /// for the other processes of the cluster (the last one published
    /// wins; a read-only tier publishes nothing).
    pub fn keep_policy(&self, scope: &PolicyScope<'_>, learned: &LearnedPolicy) -> bool {
        let key = policy_files::key(scope);
        self.behind
            .publish_policy(&key, learned.to_text(scope).as_bytes());
        let Some(folder) = self.folder.as_ref().filter(|folder| !folder.read_only()) else {
            return false;
        };
        self.policies.keep(folder.dir(), scope, learned)
    }
}
