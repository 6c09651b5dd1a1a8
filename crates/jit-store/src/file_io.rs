//! One rule for every file the library opens in a folder that others may
//! write (a remote tier's shared folder, the dump folder, the cache
//! folders), in one place:
//!
//! - **Read**: opened without following a symbolic link and without
//!   blocking (`O_NOFOLLOW | O_NONBLOCK`: a FIFO would otherwise hold the
//!   open, and a read of it, forever), checked on the opened descriptor to
//!   be a regular file before a byte of it is read ([`open_regular`]), and
//!   read with a size bound ([`read_bounded`]).
//! - **Write**: the bytes go to a new temporary file in the same folder
//!   (created with `O_EXCL`, mode 0600 unless asked otherwise, never
//!   following a link), which is then renamed over the name
//!   ([`write_whole`]): a reader sees the old file or the new one, never
//!   part of one, and whatever was at the name (a link, a FIFO, another
//!   user's file) is replaced, never written through.
//!
//! A writer that dies leaves its temporary file (`.tmp-*`) behind, never
//! read; the cache's listings delete them.

use std::fs::{File, Metadata, OpenOptions, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// What every temporary file of the library's folders starts with.
pub(crate) const TEMP_PREFIX: &str = ".tmp-";

/// Why [`open_regular`] did not open a file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The name is a symbolic link, which is not followed (whoever controls
    /// its target could change what is read).
    #[error(
        "it is a symbolic link, which is not followed (whoever controls its target could \
         change it); put the file itself there"
    )]
    Link,
    /// The name is not a regular file (a FIFO, a device, a socket, a
    /// folder), which is not read: it could block, or never end.
    #[error(
        "it is not a regular file (a FIFO, a device, a socket or a folder), which is not read; \
         delete it, and the library writes a file there again"
    )]
    NotRegular,
    /// The operating system's error (`NotFound` when there is nothing).
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl OpenError {
    /// Whether nothing is at the name.
    pub fn is_not_found(&self) -> bool {
        matches!(self, OpenError::Io(error) if error.kind() == io::ErrorKind::NotFound)
    }
}

impl From<OpenError> for io::Error {
    fn from(error: OpenError) -> io::Error {
        match error {
            OpenError::Io(error) => error,
            refused => io::Error::new(io::ErrorKind::InvalidData, refused.to_string()),
        }
    }
}

/// Opens `path` for reading as the rule says (see the module docs):
/// without following a link or blocking, and only when the opened file is
/// a regular file. Returns the file and its metadata (of the descriptor,
/// so that it cannot be swapped between the check and the read).
///
/// # Errors
///
/// [`OpenError::Link`], [`OpenError::NotRegular`], or the operating
/// system's error ([`OpenError::is_not_found`] when there is no file).
pub fn open_regular(path: &Path) -> Result<(File, Metadata), OpenError> {
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(OpenError::Link)
        }
        Err(e) => return Err(OpenError::Io(e)),
    };
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(OpenError::NotRegular);
    }
    Ok((file, metadata))
}

/// What [`read_bounded`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[expect(
    clippy::exhaustive_enums,
    reason = "a bounded read has exactly two outcomes, the bytes or the size over the bound; \
        callers must handle both to get at the bytes"
)]
pub enum Bounded {
    /// The whole file.
    Whole(Vec<u8>),
    /// A file of this many bytes, over the bound: not read.
    TooLarge(u64),
}

/// The bytes of `file` (opened by [`open_regular`], `metadata` its own),
/// unless it holds more than `max`: bounded by its length when opened and
/// again while reading (it may grow meanwhile).
///
/// # Errors
///
/// The operating system's error.
pub fn read_bounded(file: File, metadata: &Metadata, max: u64) -> io::Result<Bounded> {
    if metadata.len() > max {
        return Ok(Bounded::TooLarge(metadata.len()));
    }
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Ok(Bounded::TooLarge(bytes.len() as u64));
    }
    Ok(Bounded::Whole(bytes))
}

/// [`open_regular`] then [`read_bounded`]: the bytes of the file at
/// `path`, `None` when there is none.
///
/// # Errors
///
/// As [`open_regular`] (a link or a special file refused), and the
/// operating system's error while reading.
pub fn read_file(path: &Path, max: u64) -> Result<Option<Bounded>, OpenError> {
    match open_regular(path) {
        Ok((file, metadata)) => Ok(Some(read_bounded(file, &metadata, max)?)),
        Err(error) if error.is_not_found() => Ok(None),
        Err(error) => Err(error),
    }
}

/// A temporary file in `dir` (see the module docs) holding `bytes`, with
/// `mode`: deleted when dropped unless renamed or linked into place.
pub(crate) fn temporary_file(
    dir: &Path,
    parts: &[&[u8]],
    mode: u32,
) -> io::Result<tempfile::NamedTempFile> {
    let mut file = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(dir)?;
    for bytes in parts {
        file.write_all(bytes)?;
    }
    if mode != 0o600 {
        // On the descriptor: the name is never followed.
        file.as_file()
            .set_permissions(Permissions::from_mode(mode))?;
    }
    Ok(file)
}

/// The folder `path` is in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Writes `bytes` to `path` whole, as the rule says (see the module docs):
/// a temporary file of mode 0600 in the same folder, renamed over `path`.
///
/// # Errors
///
/// The operating system's error (the temporary file is then deleted).
pub fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_whole_with_mode(path, bytes, 0o600)
}

/// [`write_whole`] with the file's `mode` (0755 for a script, say), set on
/// the temporary file before it is renamed.
///
/// # Errors
///
/// As [`write_whole`].
pub fn write_whole_with_mode(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_parts(path, &[bytes], mode)
}

/// [`write_whole_with_mode`] of the concatenation of `parts`.
pub(crate) fn write_parts(path: &Path, parts: &[&[u8]], mode: u32) -> io::Result<()> {
    let temporary = temporary_file(folder_of(path), parts, mode)?;
    // `persist` renames over whatever is at `path`; on failure the
    // temporary file is deleted when the error is dropped.
    temporary.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Writes `bytes` to `path` whole (as [`write_whole`]), unless a file is
/// there already: linked in, never renamed over. False when one was there.
pub(crate) fn write_new(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    let temporary = temporary_file(folder_of(path), &[bytes], 0o600)?;
    match temporary.persist_noclobber(path) {
        Ok(_) => Ok(true),
        Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e.error),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    #[cfg_attr(miri, ignore)] // file system
    fn links_and_special_files_are_refused_and_writes_replace_them() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"mine").unwrap();
        let link = dir.path().join("link");
        symlink(&victim, &link).unwrap();
        assert!(matches!(open_regular(&link), Err(OpenError::Link)));
        assert!(matches!(
            open_regular(dir.path()),
            Err(OpenError::NotRegular)
        ));
        assert!(read_file(&dir.path().join("none"), 9).unwrap().is_none());
        let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let victim_mode = mode(&victim);
        write_whole_with_mode(&link, b"new", 0o755).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"mine", "not written through");
        assert_eq!(mode(&victim), victim_mode, "not chmodded through");
        let (file, metadata) = open_regular(&link).unwrap();
        assert_eq!(metadata.permissions().mode() & 0o777, 0o755);
        assert_eq!(
            read_bounded(file, &metadata, 3).unwrap(),
            Bounded::Whole(b"new".to_vec())
        );
        assert_eq!(
            read_file(&link, 2).unwrap(),
            Some(Bounded::TooLarge(3)),
            "bounded"
        );
        assert!(!write_new(&link, b"other").unwrap(), "kept");
        let names = fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(names, 2, "no temporary file left");
    }
}
