//! What the store trusts: folders only their owner can write, and a secret
//! only that owner can read, which authenticates every entry.
//!
//! An artifact is native code the caller will run, so an entry must come
//! from a build of this user's: each entry carries an HMAC-SHA256 of its key
//! and payload under a per-folder secret (32 random bytes in `<folder>/secret`,
//! mode 0600). Another user can neither read the secret (so cannot forge an
//! entry) nor write the folder (so cannot replace the secret): folders are
//! created 0700 and refused when another user owns them or when group or
//! others may write them, and nothing in them is followed through a
//! symbolic link. Every file the store reads (the secret, each entry, a
//! bundle's manifest) meets the same rule, checked on the opened file before
//! a byte of it is read ([`open_file`]): a regular file, not a link, that
//! only the folder's owners can write. The owner themselves, and root, are
//! trusted: they can run code as this user anyway. One file is read
//! through links: a remote tier's shared secret ([`Secret::from_file`]),
//! which orchestrators mount behind links (`trust/mounted.rs` checks every
//! folder on the way instead).

mod mounted;
mod sealing;
mod signatures;

use std::fs::{self, DirBuilder, File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::escaped::Escaped;
use super::file_io::{self, OpenError};
use super::key::ArtifactKey;

pub use sealing::Trust;
pub use signatures::{
    DocumentSignature, DocumentSignatureError, PublicKey, PublicKeyError, SigningKey, TrustedKeys,
};
pub(crate) use signatures::{SignatureCheck, PUBLIC_KEY_LEN, SIGNATURE_LEN};

/// Length of the secret and of an entry's authentication tag.
pub(crate) const TAG_LEN: usize = 32;

/// The secret's file name in the store's folder.
const SECRET_FILE: &str = "secret";

/// Why a store folder cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The folder (or a file the store relies on) could be changed by
    /// someone else, who could then plant code this process would run.
    #[error("{} is not safe to use: {reason}", Escaped::new(path))]
    Insecure {
        /// The folder or file.
        path: PathBuf,
        /// What is wrong, and what to do about it.
        reason: String,
    },
    /// The folder or its secret cannot be created or read.
    #[error("cannot create or read {}", Escaped::new(path))]
    Io {
        /// The folder or file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// A file the store was given (a list of trusted keys) does not hold
    /// what it should.
    #[error("{} cannot be used: {reason}", Escaped::new(path))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

impl StoreError {
    fn io(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
        move |source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    fn insecure(path: &Path, reason: String) -> StoreError {
        StoreError::Insecure {
            path: path.to_path_buf(),
            reason,
        }
    }
}

/// Who may own a folder the store uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owners {
    /// This process's user: a folder it writes.
    User,
    /// This process's user or root: a folder it only reads (a bundle
    /// installed with the program).
    UserOrRoot,
}

/// Makes `path` (and missing parents) with mode 0700 if it does not exist,
/// then checks it as [`check_folder`] does.
pub(crate) fn create_folder(path: &Path) -> Result<(), StoreError> {
    match DirBuilder::new().recursive(true).mode(0o700).create(path) {
        Ok(()) => check_folder(path, Owners::User),
        Err(source) => Err(StoreError::io(path)(source)),
    }
}

/// Makes the folder `path` (and missing parents) with mode 0700 when it
/// does not exist, then checks it as the store checks its own folders: a
/// folder, not a symbolic link to one, that belongs to this process's user
/// and that group and others may not write (a folder the library writes
/// files into that its user later reads or runs, a dump folder say).
///
/// # Errors
///
/// [`StoreError::Insecure`] naming what is wrong (a link, another user's
/// folder, a mode open to others) and the command that fixes it, and
/// [`StoreError::Io`] when it cannot be made or read.
pub fn create_private_folder(path: &Path) -> Result<(), StoreError> {
    create_folder(path)
}

/// Checks that `path` is a folder (not a symbolic link to one) that only
/// `owners` can change.
pub(crate) fn check_folder(path: &Path, owners: Owners) -> Result<(), StoreError> {
    let metadata = fs::symlink_metadata(path).map_err(StoreError::io(path))?;
    if metadata.file_type().is_symlink() {
        return Err(StoreError::insecure(
            path,
            "it is a symbolic link, which whoever controls its target could redirect; use the \
             target folder itself"
                .to_owned(),
        ));
    }
    if !metadata.is_dir() {
        return Err(StoreError::insecure(path, "it is not a folder".to_owned()));
    }
    check_owner_and_mode(path, &metadata, owners, "chmod 700")
}

/// Deletes the file `path` of `folder` (a link is deleted itself, never
/// what it points to) when `folder` is still safe to use as
/// [`check_folder`] checks it: a folder replaced by a link since it was
/// checked has nothing deleted through it. Whether it was deleted.
pub(crate) fn remove_file_in(folder: &Path, path: &Path, owners: Owners) -> bool {
    check_folder(folder, owners).is_ok() && fs::remove_file(path).is_ok()
}

/// Checks that only `owners` can change what `metadata` describes: it
/// belongs to them and group and others may not write it (`fix` is the
/// command that closes it, run on `path`).
fn check_owner_and_mode(
    path: &Path,
    metadata: &Metadata,
    owners: Owners,
    fix: &str,
) -> Result<(), StoreError> {
    let me = rustix::process::geteuid().as_raw();
    let owner = metadata.uid();
    let (trusted, whom) = match owners {
        Owners::User => (owner == me, format!("this process's user {me}")),
        Owners::UserOrRoot => (
            owner == me || owner == 0,
            format!("this process's user {me} or root"),
        ),
    };
    if !trusted {
        return Err(StoreError::insecure(
            path,
            format!(
                "it belongs to user {owner}, not to {whom}; give it to {whom} (chown) or choose \
                 another folder"
            ),
        ));
    }
    let mode = metadata.permissions().mode() & 0o777;
    if mode & 0o022 != 0 {
        return Err(StoreError::insecure(
            path,
            format!(
                "group or others may write it (mode {mode:o}); run `{fix} {}`",
                Escaped::new(path)
            ),
        ));
    }
    Ok(())
}

/// The key that authenticates entries: HMAC-SHA256 over an entry's key and
/// artifact. A disk cache makes its own (`<folder>/secret`); a
/// `RemoteTier` (the `remote` feature) takes one shared by every machine that
/// uses the remote store, from [`from_bytes`](Self::from_bytes) or
/// [`from_file`](Self::from_file). Whoever holds it can make every process
/// that trusts it run their code: distribute it like a credential. `Debug`
/// does not show it.
#[derive(Clone)]
pub struct Secret([u8; TAG_LEN]);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// Its length: 32 bytes.
    pub const LEN: usize = TAG_LEN;

    /// These 32 bytes (random ones: `head -c 32 /dev/urandom`).
    pub fn from_bytes(bytes: [u8; TAG_LEN]) -> Secret {
        Secret(bytes)
    }

    /// The secret in the file `path`: exactly 32 bytes, in a regular file
    /// that nobody but its owner and root could have placed or could
    /// change, as orchestrators mount secrets (Kubernetes' `..data`
    /// links, Docker's `/run/secrets`):
    ///
    /// - symbolic links on the way are followed, and every folder in which
    ///   a name is looked up (those on the file's real path, and those that
    ///   hold the links) must belong to this process's user or root, with
    ///   no write bit for group or others; a sticky folder that others may
    ///   write (`/tmp`) is accepted when the entry looked up in it belongs
    ///   to this user or root, since nobody else may rename or delete it;
    /// - the file belongs to this user or root, and group and others may
    ///   not write it;
    /// - a file of this user's (not root's) must also be closed to reading
    ///   by others (mode 0600 or 0400), as a disk cache's own secret; a
    ///   file of root's may be readable by others (an orchestrator's mount,
    ///   mode 0644 or 0444, read by the container's own users): on a host
    ///   shared with other users, make it 0400 (Kubernetes:
    ///   `defaultMode: 0400`).
    ///
    /// Make one with `(umask 077; head -c 32 /dev/urandom > FILE)`.
    ///
    /// # Errors
    ///
    /// [`StoreError::Insecure`] naming what is wrong (the folder or link on
    /// the way, the file's owner or mode, a length over 32 bytes) and what
    /// to do, and [`StoreError::Io`] for a file that cannot be opened or is
    /// shorter.
    pub fn from_file(path: &Path) -> Result<Secret, StoreError> {
        read_key_file(path).map(Secret)
    }

    /// The secret of the folder `dir`, made (32 random bytes, mode 0600)
    /// when it has none.
    pub(crate) fn load_or_create(dir: &Path) -> Result<Secret, StoreError> {
        let path = dir.join(SECRET_FILE);
        match Self::load(&path, Owners::User) {
            Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
            loaded => return loaded,
        }
        let mut bytes = [0u8; TAG_LEN];
        getrandom::fill(&mut bytes)
            .map_err(|e| StoreError::io(&path)(io::Error::other(e.to_string())))?;
        // Written whole under a temporary name (mode 0600), then linked in
        // only if no other process made one meanwhile: all agree on one.
        match file_io::write_new(&path, &bytes) {
            Ok(true) => Ok(Secret(bytes)),
            Ok(false) => Self::load(&path, Owners::User),
            Err(e) => Err(StoreError::io(&path)(e)),
        }
    }

    /// The secret in the file `path`, which must be a regular file of 32
    /// bytes that only `owners` can read or write.
    pub(crate) fn load(path: &Path, owners: Owners) -> Result<Secret, StoreError> {
        let (file, metadata) = open_file(path, owners, "chmod 600")?;
        if metadata.permissions().mode() & 0o044 != 0 && owners == Owners::User {
            return Err(readable_by_others(path));
        }
        read_key(path, file).map(Secret)
    }

    /// Where the secret of the folder `dir` lives.
    pub(crate) fn path_in(dir: &Path) -> PathBuf {
        dir.join(SECRET_FILE)
    }

    /// What tells this secret from others without revealing anything of
    /// it: the first 8 bytes of an HMAC-SHA256 of a fixed label under it,
    /// as 16 hex digits (a remote tier's keys carry it, so that deployments
    /// with different secrets do not share entries).
    #[cfg(feature = "remote")]
    pub(crate) fn identity(&self) -> String {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(b"sheaf-jit remote key namespace v1");
        jit_cache::hex::encode(&mac.finalize().into_bytes()[..8])
    }

    /// The tag of an entry: HMAC-SHA256 over its key, its payload's length
    /// and the payload.
    pub(crate) fn tag(&self, key: &ArtifactKey, payload: &[u8]) -> [u8; TAG_LEN] {
        self.mac(key, payload).finalize().into_bytes().into()
    }

    /// Whether `tag` authenticates `payload` under `key` (in constant time).
    pub(crate) fn verify(&self, key: &ArtifactKey, payload: &[u8], tag: &[u8; TAG_LEN]) -> bool {
        self.mac(key, payload).verify_slice(tag).is_ok()
    }

    fn mac(&self, key: &ArtifactKey, payload: &[u8]) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(key.as_bytes());
        mac.update(&(payload.len() as u64).to_le_bytes());
        mac.update(payload);
        mac
    }
}

/// The 32 bytes of a key file given to the store (a shared secret, a
/// signing key), as [`Secret::from_file`] reads them.
fn read_key_file(path: &Path) -> Result<[u8; TAG_LEN], StoreError> {
    let (file, metadata) = mounted::open_secret_file(path)?;
    let others_read = metadata.permissions().mode() & 0o044 != 0;
    if others_read && metadata.uid() != 0 {
        return Err(readable_by_others(path));
    }
    read_key(path, file)
}

fn readable_by_others(path: &Path) -> StoreError {
    StoreError::insecure(
        path,
        format!(
            "others may read it, and sign or forge entries with it; run `chmod 600 {}`",
            Escaped::new(path)
        ),
    )
}

/// The 32 bytes of the key file `file` (at `path`), which must have no
/// more.
fn read_key(path: &Path, mut file: File) -> Result<[u8; TAG_LEN], StoreError> {
    let mut bytes = [0u8; TAG_LEN];
    let mut extra = [0u8; 1];
    file.read_exact(&mut bytes).map_err(StoreError::io(path))?;
    if file.read(&mut extra).map_err(StoreError::io(path))? != 0 {
        return Err(StoreError::insecure(
            path,
            format!("it is longer than {TAG_LEN} bytes: not a key of this store"),
        ));
    }
    Ok(bytes)
}

/// The command that closes an entry, or a bundle's manifest, to others.
pub(crate) const CLOSE_FILE: &str = "chmod go-w";

/// Opens the file `path` of a store's folder for reading, and checks it
/// before a byte of it is read: a regular file (not a symbolic link, which
/// is not followed, nor a FIFO or device, which would block or never end)
/// that only `owners` can change (`fix` is the command that closes it to
/// others). The checks are of the opened file, so it cannot be swapped
/// between check and use. Returns the file and that metadata.
pub(crate) fn open_file(
    path: &Path,
    owners: Owners,
    fix: &str,
) -> Result<(File, Metadata), StoreError> {
    let (file, metadata) = match file_io::open_regular(path) {
        Ok(opened) => opened,
        Err(OpenError::Io(e)) => return Err(StoreError::io(path)(e)),
        Err(refused) => return Err(StoreError::insecure(path, refused.to_string())),
    };
    check_owner_and_mode(path, &metadata, owners, fix)?;
    Ok((file, metadata))
}

/// Opens the file `path` of a folder this process only reads (a bundle's
/// manifest, say) as the store opens its own files there: without following
/// a symbolic link or blocking on a FIFO or device, and refusing, before a
/// byte is read, anything but a regular file that belongs to this user or
/// root and that group and others may not write
/// ([`StoreError::Insecure`], with the command that fixes it). The checks
/// are of the opened file, so it cannot be swapped between check and use.
/// Returns the file and the metadata checked.
///
/// # Errors
///
/// [`StoreError::Insecure`] as above, and [`StoreError::Io`] when the file
/// cannot be opened.
pub fn open_read_only_file(path: &Path) -> Result<(File, Metadata), StoreError> {
    open_file(path, Owners::UserOrRoot, CLOSE_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::tests::key;

    #[test]
    fn tags_bind_the_key_and_the_payload() {
        let secret = Secret([7; TAG_LEN]);
        let tag = secret.tag(&key("a"), b"payload");
        assert!(secret.verify(&key("a"), b"payload", &tag));
        assert!(!secret.verify(&key("b"), b"payload", &tag), "re-keyed");
        assert!(!secret.verify(&key("a"), b"payloae", &tag), "changed");
        assert!(
            !Secret([8; TAG_LEN]).verify(&key("a"), b"payload", &tag),
            "another secret"
        );
        assert_eq!(format!("{secret:?}"), "Secret(..)");
    }

    #[test]
    #[cfg(feature = "remote")]
    fn identities_tell_secrets_apart_and_show_nothing_of_them() {
        let (one, other) = (Secret([7; TAG_LEN]), Secret([8; TAG_LEN]));
        assert_eq!(one.identity(), Secret([7; TAG_LEN]).identity(), "stable");
        assert_ne!(one.identity(), other.identity());
        assert_eq!(one.identity().len(), 16);
        assert!(one.identity().bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(!one.identity().contains("0707"), "{}", one.identity());
    }
}
