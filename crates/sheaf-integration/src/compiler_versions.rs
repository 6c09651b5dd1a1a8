//! The compiler's `--version` answers kept in the disk cache
//! (`<cache>/compiler-versions/`), so that a later process does not run the
//! compiler to learn its version: iree-safe's [`VersionMemory`] on the
//! artifact store's file rules. The folder is made 0700 and checked as the
//! store checks its own (this user's, not a link, closed to others); a
//! record is one file, written whole (a temporary file renamed into
//! place), read without following a link or blocking, only when no other
//! user can write it, and only up to [`MAX_VERSION_RECORD`] bytes. The
//! file's name is a hash of the executable's identity; the record repeats
//! the identity, and iree-safe compares it.

use std::path::{Path, PathBuf};

use iree_safe::compiler::{VersionMemory, MAX_VERSION_RECORD};
use jit_cache::ErrorChain;
use jit_store::file_io::{self, Bounded};
use jit_store::StoreError;

/// The disk cache's folder of version records.
pub(crate) const FOLDER: &str = "compiler-versions";

/// Version records, one file per executable, in a folder of the disk cache.
#[derive(Debug)]
pub(crate) struct VersionFiles {
    folder: PathBuf,
}

impl VersionFiles {
    /// The records in `folder`, made (0700) when missing.
    ///
    /// # Errors
    ///
    /// [`StoreError::Insecure`] for a folder others could write into (a
    /// link, another user's, open to group or others), naming the fix;
    /// [`StoreError::Io`] when it cannot be made.
    pub(crate) fn open(folder: &Path) -> Result<Self, StoreError> {
        jit_store::create_private_folder(folder)?;
        Ok(VersionFiles {
            folder: folder.to_path_buf(),
        })
    }

    /// The file of `executable`'s record.
    fn file(&self, executable: &str) -> PathBuf {
        let hash = jit_cache::stable_hash(executable.as_bytes());
        self.folder.join(format!(
            "{}.version",
            jit_cache::hex::encode(&hash.to_be_bytes())
        ))
    }
}

impl VersionMemory for VersionFiles {
    fn recall(&self, executable: &str) -> Option<String> {
        let path = self.file(executable);
        let (file, metadata) = match jit_store::open_read_only_file(&path) {
            Ok(opened) => opened,
            Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return None
            }
            Err(error) => {
                let error = ErrorChain(&error);
                tracing::warn!(
                    target: jit_store::log_targets::CACHE,
                    %error,
                    "ignoring a compiler version record: {error}"
                );
                return None;
            }
        };
        match file_io::read_bounded(file, &metadata, MAX_VERSION_RECORD) {
            Ok(Bounded::Whole(bytes)) => String::from_utf8(bytes).ok(),
            Ok(Bounded::TooLarge(_)) | Err(_) => None,
        }
    }

    fn keep(&self, executable: &str, record: &str) {
        if let Err(error) = file_io::write_whole(&self.file(executable), record.as_bytes()) {
            tracing::debug!(
                target: jit_store::log_targets::CACHE,
                folder = %self.folder.display(),
                %error,
                "cannot keep the compiler's version on disk ({error}); the next process asks it \
                 again"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn records_are_read_back_only_when_safe() {
        let dir = tempfile::tempdir().unwrap();
        let files = VersionFiles::open(&dir.path().join(FOLDER)).unwrap();
        assert_eq!(files.recall("/bin/iree-compile\n1\n2.0"), None);
        files.keep("/bin/iree-compile\n1\n2.0", "record\n");
        assert_eq!(
            files.recall("/bin/iree-compile\n1\n2.0").as_deref(),
            Some("record\n")
        );
        assert_eq!(files.recall("/bin/iree-compile\n1\n3.0"), None);

        // A record others may write is not read.
        let file = files.file("/bin/iree-compile\n1\n2.0");
        fs::set_permissions(&file, fs::Permissions::from_mode(0o622)).unwrap();
        assert_eq!(files.recall("/bin/iree-compile\n1\n2.0"), None);
        // Nor a link, nor one over the bound.
        fs::remove_file(&file).unwrap();
        let planted = dir.path().join("planted");
        fs::write(&planted, "planted\n").unwrap();
        std::os::unix::fs::symlink(&planted, &file).unwrap();
        assert_eq!(files.recall("/bin/iree-compile\n1\n2.0"), None);
        fs::remove_file(&file).unwrap();
        fs::write(&file, "v".repeat(5000)).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(files.recall("/bin/iree-compile\n1\n2.0"), None);
        // Keeping replaces what is at the name, never writing through it.
        files.keep("/bin/iree-compile\n1\n2.0", "again\n");
        assert_eq!(
            files.recall("/bin/iree-compile\n1\n2.0").as_deref(),
            Some("again\n")
        );

        // A folder others may write is refused, naming what to run.
        let open = dir.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let error = VersionFiles::open(&open).unwrap_err();
        assert!(error.to_string().contains("chmod 700"), "{error}");
    }
}
