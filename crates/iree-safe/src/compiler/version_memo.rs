//! `iree-compile --version` answers kept on disk, so that a fresh process
//! (one per command, as a script's interpreter often is) does not start
//! the compiler just to learn its version: [`remember_versions_in`] names
//! a folder, and each answer is kept there under the executable's identity
//! (canonical path, size and modification time: a rebuilt or replaced
//! executable is asked again).
//!
//! The version names the compiler in artifact caches' keys, so a memo
//! someone else could write would let them pick which cached code serves a
//! call. The folder and each memo are trusted by the rules of the
//! artifact store (jit-cache's `store/trust.rs`), kept here minimally: the
//! folder is a real folder (not a link) of this process's user that group
//! and others may not write, created 0700; a memo is a regular file (opened
//! without following links, without blocking) of this user that group and
//! others may not write, of at most [`MAX_MEMO`] bytes, written whole
//! under a temporary name (mode 0600) and renamed into place. A memo that
//! breaks a rule, does not parse, or names another executable is ignored
//! (and the compiler asked).

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::fs::{Mode, OFlags};

use super::error::CompileError;
use super::version::CompilerVersion;

/// The first line of a memo: its format.
const FORMAT: &str = "iree-compile --version memo 1";

/// The most bytes a memo may have.
pub(crate) const MAX_MEMO: u64 = 4096;

/// The folder of the memos, once named.
static FOLDER: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Keeps the answers of `iree-compile --version` in `dir` (created 0700
/// when missing) and reads them from it, for this process and later ones:
/// [`SubprocessCompiler::new`](super::SubprocessCompiler::new) and
/// [`compiler_identity`](super::compiler_identity) then run `--version` only
/// for an executable no process asked before (or that changed since). The
/// latest folder named is used.
///
/// `dir` must be a folder only this user can write (the rules of
/// jit-cache's artifact store; a caller with a disk cache can pass a
/// `compiler-versions` folder inside it): whoever can write the memos
/// chooses the compiler version this process names in cache keys.
///
/// # Errors
///
/// [`CompileError::Io`] when `dir` cannot be created, or is not safe: a
/// symbolic link, not a folder, another user's, or writable by group or
/// others (the message says what to run). Nothing is remembered then.
pub fn remember_versions_in(dir: &Path) -> Result<(), CompileError> {
    let io = |error: io::Error| {
        CompileError::io(
            format!("cannot keep compiler versions in {}", dir.display()),
            error,
        )
    };
    match DirBuilder::new().recursive(true).mode(0o700).create(dir) {
        Ok(()) => {}
        Err(error) => return Err(io(error)),
    }
    check_folder(dir).map_err(io)?;
    *FOLDER.lock().unwrap_or_else(PoisonError::into_inner) = Some(dir.to_path_buf());
    Ok(())
}

/// The folder named last, if any.
fn folder() -> Option<PathBuf> {
    FOLDER
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// Checks that `dir` is a folder (not a link) of this user that group and
/// others may not write.
fn check_folder(dir: &Path) -> io::Result<()> {
    let metadata = fs::symlink_metadata(dir)?;
    if metadata.file_type().is_symlink() || !metadata.is_dir() {
        return Err(insecure(
            dir,
            "it is a symbolic link or not a folder; name a real folder",
        ));
    }
    check_owner_and_mode(dir, &metadata, "chmod 700")
}

fn check_owner_and_mode(path: &Path, metadata: &fs::Metadata, fix: &str) -> io::Result<()> {
    let me = rustix::process::geteuid().as_raw();
    if metadata.uid() != me {
        return Err(insecure(
            path,
            &format!(
                "it belongs to user {}, not to this process's user {me}; choose a folder of \
                 your own",
                metadata.uid()
            ),
        ));
    }
    if metadata.mode() & 0o022 != 0 {
        return Err(insecure(
            path,
            &format!(
                "group or others may write it (mode {:o}); run `{fix} {}`",
                metadata.mode() & 0o777,
                path.display()
            ),
        ));
    }
    Ok(())
}

fn insecure(path: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{} is not safe to use: {why}", path.display()),
    )
}

/// What identifies an executable's build: its canonical path, size and
/// modification time (the text a memo records, one per line).
pub(crate) struct Identity {
    path: PathBuf,
    len: u64,
    modified: SystemTime,
}

impl Identity {
    /// The identity of the file at `path` (canonical); `None` when it has
    /// no modification time to tell a rebuild by, or a path a memo cannot
    /// hold on one line.
    pub(crate) fn of(path: &Path, len: u64, modified: Option<SystemTime>) -> Option<Self> {
        let text = path.to_str()?;
        if text.contains('\n') {
            return None;
        }
        Some(Identity {
            path: path.to_path_buf(),
            len,
            modified: modified?,
        })
    }

    /// `path`, `len` and `modified` (seconds.nanoseconds), a line each.
    fn text(&self) -> Option<String> {
        let since = self.modified.duration_since(UNIX_EPOCH).ok()?;
        Some(format!(
            "{}\n{}\n{}.{:09}",
            self.path.display(),
            self.len,
            since.as_secs(),
            since.subsec_nanos()
        ))
    }

    /// The memo's file name: a hash of the identity (the memo repeats the
    /// identity, which is what is compared).
    fn file_name(text: &str) -> String {
        // FNV-1a, 64 bits: a name, not a check.
        let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        format!("{hash:016x}.version")
    }
}

/// The version a memo recorded for `executable`, if the folder has a good
/// one.
pub(crate) fn recall(executable: &Identity) -> Option<CompilerVersion> {
    let dir = folder()?;
    let identity = executable.text()?;
    let path = dir.join(Identity::file_name(&identity));
    let text = read_trusted(&path)?;
    let rest = text.strip_prefix(FORMAT)?.strip_prefix('\n')?;
    let build = rest.strip_prefix(&identity)?.strip_prefix('\n')?;
    let build = build.strip_suffix('\n')?;
    if build.contains('\n') {
        return None;
    }
    Some(CompilerVersion::new(build, None))
}

/// Records `version` as `executable`'s answer, when a folder is named; a
/// failure to write is logged at debug level (the next process asks the
/// compiler again).
pub(crate) fn keep(executable: &Identity, version: &CompilerVersion) {
    let (Some(dir), Some(identity)) = (folder(), executable.text()) else {
        return;
    };
    if version.build().contains('\n') {
        return;
    }
    let name = Identity::file_name(&identity);
    let text = format!("{FORMAT}\n{identity}\n{}\n", version.build());
    if let Err(error) = write_whole(&dir, &name, text.as_bytes()) {
        tracing::debug!(
            folder = %dir.display(),
            %error,
            "cannot keep the compiler's version on disk ({error}); the next process asks it again"
        );
    }
}

/// The text of the memo at `path`, when it is a regular file of this user
/// that group and others may not write, of at most [`MAX_MEMO`] bytes.
fn read_trusted(path: &Path) -> Option<String> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = File::from(rustix::fs::open(path, flags, Mode::empty()).ok()?);
    let metadata = file.metadata().ok()?;
    if !metadata.is_file() || metadata.len() > MAX_MEMO {
        return None;
    }
    if let Err(error) = check_owner_and_mode(path, &metadata, "chmod 600") {
        tracing::warn!(%error, "ignoring a compiler version memo: {error}");
        return None;
    }
    let mut text = String::new();
    file.take(MAX_MEMO).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Writes `bytes` to `dir/name` whole: under a temporary name (mode 0600),
/// then renamed into place.
fn write_whole(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let temporary = dir.join(format!(".tmp-{name}-{}", std::process::id()));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(OFlags::NOFOLLOW.bits() as i32)
        .open(&temporary)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    let renamed = written.and_then(|()| fs::rename(&temporary, dir.join(name)));
    if renamed.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    renamed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(dir: &Path) -> Identity {
        let file = dir.join("iree-compile");
        fs::write(&file, b"#!/bin/sh\n").unwrap();
        let metadata = fs::metadata(&file).unwrap();
        Identity::of(&file, metadata.len(), metadata.modified().ok()).unwrap()
    }

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn a_memo_is_read_back_only_for_the_same_executable_and_when_safe() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let memos = dir.path().join("memos");
        remember_versions_in(&memos).unwrap();
        let executable = identity(dir.path());
        assert!(recall(&executable).is_none());
        let version = CompilerVersion::new("3.13.0rc1 @ abc", None);
        keep(&executable, &version);
        assert_eq!(recall(&executable), Some(version.clone()));

        // Another size or time is another executable.
        let other = Identity {
            len: executable.len + 1,
            ..identity(dir.path())
        };
        assert!(recall(&other).is_none());

        // A memo others may write is not read.
        let text = executable.text().unwrap();
        let memo = memos.join(Identity::file_name(&text));
        fs::set_permissions(&memo, fs::Permissions::from_mode(0o622)).unwrap();
        assert!(recall(&executable).is_none());
        fs::set_permissions(&memo, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(recall(&executable), Some(version));
        // Nor one whose identity lines differ (a hash collision, a damaged file).
        fs::write(&memo, format!("{FORMAT}\n/elsewhere\n1\n2.0\nv\n")).unwrap();
        assert!(recall(&executable).is_none());
        // Nor a link.
        fs::remove_file(&memo).unwrap();
        let target = dir.path().join("planted");
        fs::write(&target, format!("{FORMAT}\n{text}\nplanted\n")).unwrap();
        std::os::unix::fs::symlink(&target, &memo).unwrap();
        assert!(recall(&executable).is_none());

        // A folder others may write is refused, naming what to run.
        let open = dir.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let error = remember_versions_in(&open).unwrap_err();
        let why = std::error::Error::source(&error).unwrap().to_string();
        assert!(why.contains("chmod 700"), "{error}: {why}");
    }
}
