//! The files of a store folder: one walk for the artifact entries and the
//! policy files, which both live beside writers' temporary files.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::entry::TEMP_PREFIX;
use super::trust::{self, Owners};

/// Keep temporary files of crashed writers at most this long.
const STALE_TEMPORARY: Duration = Duration::from_secs(3600);

/// A regular file of a store folder.
#[derive(Debug)]
pub(crate) struct Listed {
    pub(crate) path: PathBuf,
    pub(crate) len: u64,
    /// Its modification time: when it was last used.
    pub(crate) used: SystemTime,
    /// A writer's file at work (its name starts with [`TEMP_PREFIX`]).
    pub(crate) temporary: bool,
}

/// The regular files of `folder` named `*.{extension}`, and writers'
/// temporary files; when `clean` is set, deletes the temporary files older
/// than an hour (left by crashed writers) on the way. Links and other
/// non-regular files are skipped, never followed. A folder that is not
/// safe to use (a symbolic link, not `owners`', open to others: the check
/// the store makes of its folders, `trust::check_folder`), or that cannot
/// be read, lists nothing and has nothing deleted.
pub(crate) fn list(folder: &Path, extension: &str, owners: Owners, clean: bool) -> Vec<Listed> {
    if trust::check_folder(folder, owners).is_err() {
        return Vec::new();
    }
    let Ok(listing) = fs::read_dir(folder) else {
        return Vec::new();
    };
    let now = SystemTime::now();
    let mut files = Vec::new();
    for item in listing.flatten() {
        // Of the item itself: links are not followed.
        let Ok(metadata) = item.metadata() else {
            continue;
        };
        if !metadata.is_file() {
            continue;
        }
        let used = metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let path = item.path();
        let temporary = item.file_name().to_string_lossy().starts_with(TEMP_PREFIX);
        if clean
            && temporary
            && now
                .duration_since(used)
                .is_ok_and(|age| age > STALE_TEMPORARY)
        {
            trust::remove_file_in(folder, &path, owners);
            continue;
        }
        if temporary || path.extension().is_some_and(|e| e == extension) {
            files.push(Listed {
                path,
                len: metadata.len(),
                used,
                temporary,
            });
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_files_of_the_extension_and_temporaries_and_deletes_stale_ones() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str| fs::write(dir.path().join(name), b"abc").unwrap();
        write("a.entry");
        write("b.other");
        write(&format!("{TEMP_PREFIX}fresh"));
        write(&format!("{TEMP_PREFIX}stale"));
        let stale = fs::File::options()
            .write(true)
            .open(dir.path().join(format!("{TEMP_PREFIX}stale")))
            .unwrap();
        stale
            .set_modified(SystemTime::now() - 2 * STALE_TEMPORARY)
            .unwrap();
        fs::create_dir(dir.path().join("c.entry")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("a.entry"), dir.path().join("d.entry")).unwrap();
        let kept = list(dir.path(), "entry", Owners::User, false);
        assert_eq!(kept.len(), 3, "not cleaning: the stale temporary is listed");
        assert!(dir.path().join(format!("{TEMP_PREFIX}stale")).exists());
        let mut listed: Vec<(String, u64, bool)> = list(dir.path(), "entry", Owners::User, true)
            .into_iter()
            .map(|f| {
                let name = f.path.file_name().unwrap().to_string_lossy().into_owned();
                (name, f.len, f.temporary)
            })
            .collect();
        listed.sort();
        assert_eq!(
            listed,
            [
                (format!("{TEMP_PREFIX}fresh"), 3, true),
                ("a.entry".to_owned(), 3, false)
            ]
        );
        assert!(!dir.path().join(format!("{TEMP_PREFIX}stale")).exists());
        assert!(list(&dir.path().join("missing"), "entry", Owners::User, true).is_empty());
    }
}
