//! [`SharedFolderStore`]: the remote tier's backend on a folder that the
//! machines of a cluster share (NFS, a cluster file system), for a cluster
//! without a Redis server.
//!
//! Each value is a file named after its key (bytes other than ASCII
//! letters, digits, `-`, `_` and `:` written `%XX`), written whole: a
//! temporary file (`.tmp-*`) in the same folder, renamed over the name,
//! so a reader sees the old value or the new one, never part of one.
//! Concurrent puts of one key each rename a complete file: one of them is
//! kept. A writer that dies leaves its temporary file behind (never read;
//! delete `.tmp-*` files older than a day at leisure).
//!
//! A compile lease is a lock file holding its owner's name and its expiry
//! (wall-clock milliseconds since 1970), made complete in a temporary file
//! then linked to the lease's name (`link` fails when the name exists,
//! also over NFS, so one owner takes it). A lock past its expiry is stale
//! (its owner died): a taker renames it to a name of its own, checks that
//! it moved the stale lock (not one just renewed or taken, which it puts
//! back), deletes it and takes the lease. Renewing rewrites the lock
//! (temporary file, rename) if the owner still holds it; releasing deletes
//! it if so. Between the check and the rename or delete another process
//! may act: the worst outcome is a second compile of the artifact, whose
//! publish is as good as the first. The machines' clocks must agree to
//! well within a lease's time to live (NTP does).
//!
//! Every machine must use the folder as the same user: files are made
//! with mode 0600. The entries are authenticated by the tier, so a file
//! the folder's other writers damage or forge is never loaded. Every file
//! is opened as `file_io.rs` says (no link followed, no FIFO waited on,
//! sizes bounded): a value's name that is not a regular file is a miss
//! (logged; the next publish replaces it), and a lock that is not one is
//! stale (taken over).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::file_io::{self, Bounded, OpenError};
use super::remote::{LeaseAnswer, RemoteError, RemoteStore, RemoteValue};

/// The longest lock file read: an owner name and a number.
const MAX_LOCK_BYTES: u64 = 1024;

/// A [`RemoteStore`] on a folder shared by the machines of a cluster (see
/// the module docs).
///
/// ```
/// use jit_store::{RemoteStore, RemoteValue, SharedFolderStore};
///
/// let folder = tempfile::tempdir()?;
/// let store = SharedFolderStore::new(folder.path())?;
/// store.put("sheaf-jit:v1:0123", b"an entry")?;
/// assert_eq!(
///     store.get("sheaf-jit:v1:0123", 1024)?,
///     RemoteValue::Found(b"an entry".to_vec())
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct SharedFolderStore {
    folder: PathBuf,
    /// `file://` and the folder, for messages.
    shown: String,
}

impl SharedFolderStore {
    /// The start of a shared folder's address: `file:///path/to/folder`.
    pub const SCHEME: &'static str = "file://";

    /// The store in `folder`, which must exist (a shared mount point that
    /// is missing must not become a local folder).
    ///
    /// # Errors
    ///
    /// [`RemoteError::Address`] when `folder` is not an existing folder.
    pub fn new(folder: impl Into<PathBuf>) -> Result<SharedFolderStore, RemoteError> {
        let folder = folder.into();
        let shown = format!("{}{}", Self::SCHEME, folder.display());
        match fs::metadata(&folder) {
            Ok(metadata) if metadata.is_dir() => Ok(SharedFolderStore { folder, shown }),
            Ok(_) => Err(RemoteError::Address {
                url: shown,
                reason: "not a folder: name the folder the cluster shares".to_owned(),
            }),
            Err(error) => Err(RemoteError::Address {
                url: shown,
                reason: format!(
                    "cannot use it as the shared folder ({error}): create it on the shared file \
                     system (or mount it), or fix the address"
                ),
            }),
        }
    }

    /// The store at `url`, `file:///path/to/folder` (see [`new`](Self::new)).
    ///
    /// # Errors
    ///
    /// [`RemoteError::Address`] for another scheme, a relative path, or a
    /// folder that does not exist.
    pub fn from_url(url: &str) -> Result<SharedFolderStore, RemoteError> {
        match url.strip_prefix(Self::SCHEME) {
            Some(path) if path.starts_with('/') => Self::new(path),
            _ => Err(RemoteError::Address {
                url: url.to_owned(),
                reason: "a shared folder's address is `file:///absolute/path`".to_owned(),
            }),
        }
    }

    /// The shared folder.
    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// The file of `key`.
    fn path(&self, key: &str) -> PathBuf {
        self.folder.join(file_name(key))
    }

    fn error(&self, step: &'static str) -> impl FnOnce(io::Error) -> RemoteError + '_ {
        move |source| RemoteError::Unavailable {
            url: self.shown.clone(),
            step,
            source,
        }
    }

    /// Writes `bytes` to a temporary file in the folder, kept unless
    /// persisted.
    fn temporary(&self, bytes: &[u8]) -> io::Result<tempfile::NamedTempFile> {
        file_io::temporary_file(&self.folder, &[bytes], 0o600)
    }

    /// Moves the stale lock `stale` at `path` aside and deletes it; true
    /// when it did (the caller then tries again), false when the lock
    /// moved was another (put back) or none was there.
    fn break_stale(&self, path: &Path, stale: &Lock) -> io::Result<bool> {
        let aside = self.temporary(b"")?.into_temp_path();
        match fs::rename(path, &aside) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(true),
            Err(error) => return Err(error),
        }
        let moved = read_lock(&aside)?;
        if moved.as_ref() == Some(stale) {
            return Ok(true); // `aside` is deleted when dropped
        }
        // A lock renewed or taken since we read it: put it back, unless a
        // newer one is there already.
        let _ = fs::hard_link(&aside, path);
        Ok(false)
    }
}

impl RemoteStore for SharedFolderStore {
    fn get(&self, key: &str, max_bytes: u64) -> Result<RemoteValue, RemoteError> {
        let path = self.path(key);
        let value = match file_io::read_file(&path, max_bytes) {
            Ok(None) => RemoteValue::Missing,
            Ok(Some(Bounded::Whole(bytes))) if bytes.is_empty() => RemoteValue::Missing,
            Ok(Some(Bounded::Whole(bytes))) => RemoteValue::Found(bytes),
            Ok(Some(Bounded::TooLarge(len))) => RemoteValue::TooLarge(len),
            Err(OpenError::Io(error)) => return Err(self.error("read")(error)),
            Err(refused) => {
                tracing::warn!(
                    target: crate::log_targets::REMOTE,
                    path = %path.display(),
                    reason = %refused,
                    "a remote-cache miss: the shared folder's {} is not read ({refused}); the \
                     artifact is compiled, and its publish replaces the name",
                    path.display()
                );
                RemoteValue::Missing
            }
        };
        Ok(value)
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), RemoteError> {
        file_io::write_whole(&self.path(key), value).map_err(self.error("write"))
    }

    fn take_lease(
        &self,
        lease: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<LeaseAnswer, RemoteError> {
        let path = self.path(lease);
        let take = || -> io::Result<LeaseAnswer> {
            // A stale lock broken once, then taken or found held.
            for _ in 0..2 {
                let lock = Lock::new(owner, ttl, SystemTime::now());
                let file = self.temporary(lock.text().as_bytes())?.into_temp_path();
                match fs::hard_link(&file, &path) {
                    Ok(()) => return Ok(LeaseAnswer::Taken),
                    Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(error) => return Err(error),
                }
                let Some(lock) = read_lock(&path)? else {
                    continue; // released meanwhile
                };
                if !lock.expired(SystemTime::now()) {
                    return Ok(LeaseAnswer::Held { owner: lock.owner });
                }
                if !self.break_stale(&path, &lock)? {
                    return Ok(LeaseAnswer::Held {
                        owner: String::new(),
                    });
                }
            }
            Ok(LeaseAnswer::Held {
                owner: String::new(),
            })
        };
        take().map_err(self.error("take a lease"))
    }

    fn renew_lease(&self, lease: &str, owner: &str, ttl: Duration) -> Result<bool, RemoteError> {
        let path = self.path(lease);
        let renew = || -> io::Result<bool> {
            match read_lock(&path)? {
                Some(lock) if lock.owner == owner => {}
                _ => return Ok(false),
            }
            let lock = Lock::new(owner, ttl, SystemTime::now());
            file_io::write_whole(&path, lock.text().as_bytes())?;
            Ok(true)
        };
        renew().map_err(self.error("renew a lease"))
    }

    fn release_lease(&self, lease: &str, owner: &str) -> Result<(), RemoteError> {
        let path = self.path(lease);
        let release = || -> io::Result<()> {
            if let Some(lock) = read_lock(&path)? {
                if lock.owner == owner {
                    match fs::remove_file(&path) {
                        Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
                        _ => {}
                    }
                }
            }
            Ok(())
        };
        release().map_err(self.error("release a lease"))
    }
}

/// A lease's lock file: its owner and when it expires.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Lock {
    owner: String,
    /// Milliseconds since 1970; 0 for a lock that cannot be read (stale).
    expiry_ms: u64,
}

impl Lock {
    fn new(owner: &str, ttl: Duration, now: SystemTime) -> Lock {
        let expiry = now.checked_add(ttl).unwrap_or(now);
        Lock {
            owner: owner.to_owned(),
            expiry_ms: unix_millis(expiry),
        }
    }

    /// The lock in `bytes` (`owner\nexpiry\n`); one that does not read as
    /// such is stale.
    fn parse(bytes: &[u8]) -> Lock {
        let text = String::from_utf8_lossy(bytes);
        let mut lines = text.lines();
        let owner = lines.next().unwrap_or_default().to_owned();
        let expiry_ms = lines.next().and_then(|l| l.parse().ok()).unwrap_or(0);
        Lock { owner, expiry_ms }
    }

    fn text(&self) -> String {
        format!("{}\n{}\n", self.owner, self.expiry_ms)
    }

    fn expired(&self, now: SystemTime) -> bool {
        self.expiry_ms <= unix_millis(now)
    }
}

fn unix_millis(time: SystemTime) -> u64 {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// The file name of `key`: ASCII letters, digits, `-`, `_` and `:` kept,
/// every other byte `%XX` (so no name is `.`-led, has a `/`, or is another
/// key's).
fn file_name(key: &str) -> String {
    let mut name = String::with_capacity(key.len());
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b':') {
            name.push(char::from(byte));
        } else {
            name.push_str(&format!("%{byte:02X}"));
        }
    }
    name
}

/// The lock file at `path`; `None` when there is none. One that is not a
/// regular file of at most [`MAX_LOCK_BYTES`] (a link, a FIFO, a device,
/// anything longer) is not read: it is a stale lock (see [`Lock::parse`]).
fn read_lock(path: &Path) -> io::Result<Option<Lock>> {
    match file_io::read_file(path, MAX_LOCK_BYTES) {
        Ok(None) => Ok(None),
        Ok(Some(Bounded::Whole(bytes))) => Ok(Some(Lock::parse(&bytes))),
        Ok(Some(Bounded::TooLarge(_))) | Err(OpenError::Link | OpenError::NotRegular) => {
            Ok(Some(Lock::parse(b"")))
        }
        Err(OpenError::Io(error)) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(60);

    fn held(owner: &str) -> LeaseAnswer {
        LeaseAnswer::Held {
            owner: owner.to_owned(),
        }
    }

    fn store() -> (tempfile::TempDir, SharedFolderStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SharedFolderStore::new(dir.path()).unwrap();
        (dir, store)
    }

    #[test]
    fn names_are_escaped_one_to_one() {
        assert_eq!(file_name("sheaf-jit:v1:ab_9"), "sheaf-jit:v1:ab_9");
        assert_eq!(file_name("../x y"), "%2E%2E%2Fx%20y");
        assert_ne!(file_name("a%2E"), file_name("a."));
    }

    #[test]
    fn a_lock_is_stale_at_its_expiry_and_when_unreadable() {
        let now = UNIX_EPOCH + Duration::from_secs(1000);
        let lock = Lock::new("me", Duration::from_secs(5), now);
        assert_eq!(Lock::parse(lock.text().as_bytes()), lock);
        assert!(!lock.expired(now + Duration::from_millis(4999)));
        assert!(lock.expired(now + Duration::from_secs(5)));
        assert!(Lock::parse(b"half a lo").expired(now));
    }

    #[test]
    #[cfg_attr(miri, ignore)] // file system
    fn values_are_written_whole_and_bounded() {
        let (dir, store) = store();
        assert_eq!(store.get("k", 10).unwrap(), RemoteValue::Missing);
        store.put("k", b"value").unwrap();
        store.put("k", b"values").unwrap();
        assert_eq!(
            store.get("k", 10).unwrap(),
            RemoteValue::Found(b"values".to_vec())
        );
        assert_eq!(store.get("k", 3).unwrap(), RemoteValue::TooLarge(6));
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["k"], "no temporary file is left");
    }

    #[test]
    #[cfg_attr(miri, ignore)] // file system
    fn a_lease_has_one_owner_who_alone_renews_and_releases_it() {
        let (_dir, store) = store();
        assert_eq!(store.take_lease("l", "a", TTL).unwrap(), LeaseAnswer::Taken);
        assert_eq!(store.take_lease("l", "b", TTL).unwrap(), held("a"));
        assert!(!store.renew_lease("l", "b", TTL).unwrap());
        assert!(store.renew_lease("l", "a", TTL).unwrap());
        store.release_lease("l", "b").unwrap();
        assert_eq!(store.take_lease("l", "b", TTL).unwrap(), held("a"));
        store.release_lease("l", "a").unwrap();
        assert_eq!(store.take_lease("l", "b", TTL).unwrap(), LeaseAnswer::Taken);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // file system
    fn a_stale_lock_is_taken_over_and_its_owner_can_no_longer_renew() {
        let (dir, store) = store();
        let stale = Lock::new("dead", TTL, UNIX_EPOCH + Duration::from_secs(1));
        fs::write(store.path("l"), stale.text()).unwrap();
        assert_eq!(store.take_lease("l", "b", TTL).unwrap(), LeaseAnswer::Taken);
        assert!(!store.renew_lease("l", "dead", TTL).unwrap());
        assert_eq!(store.take_lease("l", "c", TTL).unwrap(), held("b"));
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "only the lock"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)] // file system
    fn a_missing_folder_or_another_scheme_is_refused() {
        let (dir, _) = store();
        let missing = dir.path().join("not-mounted");
        let error = SharedFolderStore::new(&missing).unwrap_err().to_string();
        assert!(error.contains("create it"), "{error}");
        assert!(SharedFolderStore::from_url("redis://host").is_err());
        assert!(SharedFolderStore::from_url("file://relative").is_err());
        let url = format!("file://{}", dir.path().display());
        assert_eq!(
            SharedFolderStore::from_url(&url).unwrap().folder(),
            dir.path()
        );
    }
}
