//! A secret file as orchestrators mount it: Kubernetes puts a secret's key
//! at `/etc/secret/key -> ..data/key`, `..data -> ..2026_12_02_.../`, all
//! root's, the file mode 0644 (or its `defaultMode`), the volume's folder
//! a tmpfs of mode 1777 (sticky); Docker at `/run/secrets/NAME`. [`open_secret_file`] follows such links
//! and accepts the file when nobody but its owner and root could have
//! placed it or could change it.
//!
//! The path is resolved here, one name at a time, each symbolic link
//! followed by hand (40 at most), so that every folder in which a name is
//! looked up is checked before it is trusted: the folders on the file's
//! real path, and those that hold the links on the way. Each must belong
//! to this process's user or root, and group and others may not write it.
//! One exception, the sticky bit (`/tmp`, mode 1777): others may write such
//! a folder, but the kernel lets nobody else rename or delete an entry
//! there, so it is accepted when the entry looked up in it (a folder, a
//! link or the file) belongs to this user or root; an entry of another
//! user's there is refused, since its owner chose what it is. The file
//! itself must be a regular file of this user's or root's that group and
//! others may not write; it is opened without following a link (its real
//! path has none left) or blocking, and checked on the opened file.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::{self, File, Metadata, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use super::{check_owner_and_mode, Owners, StoreError};

/// Symbolic links followed at most on the way to a secret (Linux's own
/// limit).
const MAX_LINKS: usize = 40;

/// The sticky bit of a mode.
const STICKY: u32 = 0o1000;

/// Opens the secret file `path`, following symbolic links, after checking
/// every folder on the way as the module docs say; the file and its
/// metadata (of the opened file).
pub(crate) fn open_secret_file(path: &Path) -> Result<(File, Metadata), StoreError> {
    let real = real_path(path)?;
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(&real)
        .map_err(StoreError::io(path))?;
    let metadata = file.metadata().map_err(StoreError::io(path))?;
    if !metadata.is_file() {
        return Err(StoreError::insecure(
            path,
            format!("{} is not a regular file", real.display()),
        ));
    }
    check_owner_and_mode(&real, &metadata, Owners::UserOrRoot, "chmod go-w")
        .map_err(|error| through(path, error))?;
    Ok((file, metadata))
}

/// `path` with every symbolic link resolved, each folder in which a name
/// was looked up checked (see the module docs).
fn real_path(path: &Path) -> Result<PathBuf, StoreError> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(StoreError::io(path))?
            .join(path)
    };
    let mut left: VecDeque<OsString> = VecDeque::new();
    push_front(&mut left, &absolute);
    let mut dir = PathBuf::from("/");
    let mut sticky = check_folder(path, &dir)?;
    let mut links = 0;
    while let Some(name) = left.pop_front() {
        match name.to_str() {
            Some("/") => {
                dir = PathBuf::from("/");
                sticky = check_folder(path, &dir)?;
                continue;
            }
            Some(".") => continue,
            Some("..") => {
                // `dir` has no link in it: its parent is the real one,
                // checked on the way down (or `/`).
                dir.pop();
                sticky = check_folder(path, &dir)?;
                continue;
            }
            _ => {}
        }
        let entry = dir.join(&name);
        let metadata = fs::symlink_metadata(&entry).map_err(StoreError::io(path))?;
        if sticky {
            check_placed_by_trusted(path, &dir, &entry, &metadata)?;
        }
        if metadata.file_type().is_symlink() {
            links += 1;
            if links > MAX_LINKS {
                return Err(StoreError::insecure(
                    path,
                    format!("more than {MAX_LINKS} symbolic links on the way to it"),
                ));
            }
            let target = fs::read_link(&entry).map_err(StoreError::io(path))?;
            push_front(&mut left, &target);
        } else if left.is_empty() {
            return Ok(entry);
        } else {
            sticky = check_folder(path, &entry)?;
            dir = entry;
        }
    }
    // The path ended in `.`, `..` or `/`: a folder.
    Err(StoreError::insecure(
        path,
        format!("{} is a folder, not a file", dir.display()),
    ))
}

/// Puts the parts of `path` before those `left`, an absolute one from `/`.
fn push_front(left: &mut VecDeque<OsString>, path: &Path) {
    for component in path.components().rev() {
        let part = match component {
            Component::RootDir | Component::Prefix(_) => OsString::from("/"),
            Component::CurDir => OsString::from("."),
            Component::ParentDir => OsString::from(".."),
            Component::Normal(name) => name.to_owned(),
        };
        left.push_front(part);
    }
}

/// Checks the folder `dir` on the way to the secret `path`: this user's or
/// root's, and not writable by group or others unless sticky. Whether it
/// is sticky and writable by others (its entries must then be checked).
fn check_folder(path: &Path, dir: &Path) -> Result<bool, StoreError> {
    let metadata = fs::metadata(dir).map_err(StoreError::io(path))?;
    if !metadata.is_dir() {
        return Err(StoreError::insecure(
            path,
            format!("{} is not a folder", dir.display()),
        ));
    }
    let mode = metadata.permissions().mode();
    let sticky = mode & STICKY != 0 && mode & 0o022 != 0;
    if sticky {
        // Its entries are checked instead (`check_placed_by_trusted`);
        // its owner still must be trusted.
        let me = rustix::process::geteuid().as_raw();
        let owner = metadata.uid();
        if owner != me && owner != 0 {
            return Err(StoreError::insecure(
                path,
                format!(
                    "the folder {} on the way to it belongs to user {owner}, not to this \
                     process's user {me} or root",
                    dir.display()
                ),
            ));
        }
        return Ok(true);
    }
    check_owner_and_mode(dir, &metadata, Owners::UserOrRoot, "chmod go-w")
        .map_err(|error| through(path, error))?;
    Ok(false)
}

/// Checks that `entry`, in the sticky folder `dir` that others may write,
/// belongs to this user or root (nobody else can then rename or delete
/// it).
fn check_placed_by_trusted(
    path: &Path,
    dir: &Path,
    entry: &Path,
    metadata: &Metadata,
) -> Result<(), StoreError> {
    let me = rustix::process::geteuid().as_raw();
    let owner = metadata.uid();
    if owner == me || owner == 0 {
        return Ok(());
    }
    Err(StoreError::insecure(
        path,
        format!(
            "{} belongs to user {owner}, in {}, a folder others may write (sticky): whoever \
             owns it chose what it is; move the secret to a folder of this user's or root's",
            entry.display(),
            dir.display()
        ),
    ))
}

/// `error` about a folder or file on the way to the secret `path`, as an
/// error about `path` that names it.
fn through(path: &Path, error: StoreError) -> StoreError {
    match error {
        StoreError::Insecure {
            path: found,
            reason,
        } if found != path => StoreError::insecure(
            path,
            format!("{} on the way to it: {reason}", found.display()),
        ),
        error => error,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{chown, symlink};

    use super::super::{Secret, TAG_LEN};
    use super::*;

    /// A user that is neither this process's nor root.
    const STRANGER: u32 = 54_321;

    fn is_root() -> bool {
        rustix::process::geteuid().is_root()
    }

    fn chmod(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn folder(path: &Path, mode: u32) -> PathBuf {
        fs::create_dir_all(path).unwrap();
        chmod(path, mode);
        path.to_path_buf()
    }

    /// A secret file of 32 bytes `byte` at `path`, mode `mode`.
    fn secret_file(path: &Path, byte: u8, mode: u32) {
        fs::write(path, [byte; TAG_LEN]).unwrap();
        chmod(path, mode);
    }

    /// As Kubernetes mounts a secret's key `key` at `<dir>/key`: the file
    /// in a timestamped folder, `..data` linked to it, `key` to
    /// `..data/key`; the file's mode `mode` (its `defaultMode`).
    fn kubernetes_mount(dir: &Path, mode: u32) -> PathBuf {
        let timestamped = folder(&dir.join("..2026_12_02_10_00_00.123456789"), 0o755);
        secret_file(&timestamped.join("key"), 7, mode);
        symlink("..2026_12_02_10_00_00.123456789", dir.join("..data")).unwrap();
        symlink("..data/key", dir.join("key")).unwrap();
        dir.join("key")
    }

    fn refused(path: &Path) -> String {
        match Secret::from_file(path) {
            Err(error @ StoreError::Insecure { .. }) => error.to_string(),
            Err(other) => panic!("{}: expected a refusal, got {other}", path.display()),
            Ok(_) => panic!("{}: accepted", path.display()),
        }
    }

    /// A file of root's may be readable by others (an orchestrator's
    /// mount); one of another user's must be 0600. The tests run as root.
    fn readable_mode() -> u32 {
        if is_root() {
            0o644
        } else {
            0o600
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)] // file system
    fn a_kubernetes_shaped_mount_is_read_through_its_links() {
        let root = tempfile::tempdir().unwrap();
        // The kubelet's volume folder is a tmpfs of mode 1777; the links
        // in it are root's.
        let mount = folder(&root.path().join("etc/secret"), 0o1777);
        let key = kubernetes_mount(&mount, readable_mode());
        assert_eq!(Secret::from_file(&key).unwrap().0, [7; TAG_LEN]);
        // `defaultMode: 0444`, and a relative path with `..` in it.
        chmod(&mount.join("..data/key"), 0o444);
        let relative = mount.join("../secret/./key");
        assert_eq!(Secret::from_file(&relative).unwrap().0, [7; TAG_LEN]);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // file system
    fn a_docker_secret_is_read() {
        let root = tempfile::tempdir().unwrap();
        let secrets = folder(&root.path().join("run/secrets"), 0o755);
        secret_file(
            &secrets.join("jit"),
            3,
            if is_root() { 0o444 } else { 0o400 },
        );
        assert_eq!(
            Secret::from_file(&secrets.join("jit")).unwrap().0,
            [3; TAG_LEN]
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)] // file system
    fn a_folder_others_may_write_on_the_way_is_refused() {
        let root = tempfile::tempdir().unwrap();
        for mode in [0o775, 0o757] {
            let mount = folder(&root.path().join(format!("m{mode:o}/secret")), 0o755);
            let key = kubernetes_mount(&mount, 0o600);
            let writable = folder(&root.path().join(format!("m{mode:o}")), mode);
            let error = refused(&key);
            assert!(
                error.contains(&format!(
                    "{} on the way to it: group or others may write it (mode {mode:o})",
                    writable.display()
                )) && error.contains("chmod go-w"),
                "{error}"
            );
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)] // file system
    fn a_file_others_may_write_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let mount = folder(&root.path().join("secret"), 0o755);
        let key = kubernetes_mount(&mount, 0o646);
        let error = refused(&key);
        assert!(
            error.contains("group or others may write it (mode 646)"),
            "{error}"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)] // file system
    fn a_link_into_a_folder_others_may_write_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let open = folder(&root.path().join("open"), 0o777);
        secret_file(&open.join("key"), 1, 0o600);
        let mount = folder(&root.path().join("secret"), 0o755);
        symlink("../open/key", mount.join("key")).unwrap();
        let error = refused(&mount.join("key"));
        assert!(
            error.contains(&format!("{} on the way to it", open.display()))
                && error.contains("mode 777"),
            "{error}"
        );
        // A link held in such a folder, to a safe file: refused too.
        let safe = folder(&root.path().join("safe"), 0o755);
        secret_file(&safe.join("key"), 1, 0o600);
        symlink("../safe/key", open.join("link")).unwrap();
        let error = refused(&open.join("link"));
        assert!(error.contains("mode 777"), "{error}");
    }

    #[test]
    #[cfg_attr(miri, ignore)] // file system
    fn in_a_sticky_folder_only_entries_of_this_user_or_root_are_trusted() {
        let root = tempfile::tempdir().unwrap();
        let sticky = folder(&root.path().join("tmp"), 0o1777);
        secret_file(&sticky.join("mine"), 2, 0o600);
        assert_eq!(
            Secret::from_file(&sticky.join("mine")).unwrap().0,
            [2; TAG_LEN]
        );
        if !is_root() {
            return; // giving a file away needs root
        }
        // A link of another user's, to a file of ours: refused.
        symlink("mine", sticky.join("planted")).unwrap();
        rustix::fs::chownat(
            rustix::fs::CWD,
            sticky.join("planted"),
            Some(rustix::process::Uid::from_raw(STRANGER)),
            None,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .unwrap();
        let error = refused(&sticky.join("planted"));
        assert!(
            error.contains(&format!("belongs to user {STRANGER}"))
                && error.contains("a folder others may write (sticky)"),
            "{error}"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)] // file system
    fn a_file_or_folder_of_another_user_is_refused() {
        if !is_root() {
            return; // giving a file away needs root
        }
        let root = tempfile::tempdir().unwrap();
        let mount = folder(&root.path().join("secret"), 0o755);
        let key = kubernetes_mount(&mount, 0o600);
        chown(mount.join("..data/key"), Some(STRANGER), None).unwrap();
        let error = refused(&key);
        assert!(
            error.contains(&format!("belongs to user {STRANGER}")),
            "{error}"
        );
        chown(mount.join("..data/key"), Some(0), None).unwrap();
        assert!(Secret::from_file(&key).is_ok());
        chown(&mount, Some(STRANGER), None).unwrap();
        let error = refused(&key);
        assert!(
            error.contains(&format!(
                "{} on the way to it: it belongs to user",
                mount.display()
            )),
            "{error}"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)] // file system
    fn a_loop_of_links_and_a_folder_are_refused() {
        let root = tempfile::tempdir().unwrap();
        symlink("b", root.path().join("a")).unwrap();
        symlink("a", root.path().join("b")).unwrap();
        let error = refused(&root.path().join("a"));
        assert!(error.contains("more than 40 symbolic links"), "{error}");
        let error = refused(root.path());
        assert!(error.contains("is not a regular file"), "{error}");
        let error = refused(Path::new("/"));
        assert!(error.contains("/ is a folder, not a file"), "{error}");
        let missing = Secret::from_file(&root.path().join("missing"));
        assert!(
            matches!(&missing, Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound),
            "{missing:?}"
        );
    }
}
