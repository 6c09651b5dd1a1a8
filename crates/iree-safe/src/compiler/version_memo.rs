//! `iree-compile --version` answers kept between processes, so that a
//! fresh process (one per command, as a script's interpreter often is)
//! does not start the compiler just to learn its version. Where they are
//! kept is the caller's choice: [`remember_versions_with`] hands over a
//! [`VersionMemory`] (an artifact cache can keep the answers in its
//! folder, under its own file rules). Each answer is a record
//! kept under the executable's identity (canonical path, size and
//! modification time): a rebuilt or replaced executable is asked again.
//!
//! The version names the compiler in artifact caches' keys, so records
//! someone else could write would let them pick which cached code serves
//! a call: a memory must keep them where only this user can write. What a
//! memory returns is checked here all the same: a record that does not
//! parse, or that names another executable, is ignored (and the compiler
//! asked).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use super::version::CompilerVersion;

/// The first line of a record: its format.
const FORMAT: &str = "iree-compile --version memo 1";

/// The most bytes a record has: a memory need not read more.
pub const MAX_VERSION_RECORD: u64 = 4096;

/// Where the answers of `iree-compile --version` are kept between
/// processes (see [`remember_versions_with`]).
///
/// `executable` names an executable's build in a few lines of text (its
/// canonical path, size and modification time); a record is at most
/// [`MAX_VERSION_RECORD`] bytes of text. Both are opaque to the memory.
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::Mutex;
///
/// use iree_safe::compiler::{remember_versions_with, VersionMemory};
///
/// /// Keeps the answers for this process only (a real memory keeps them
/// /// on disk, where only this user can write).
/// #[derive(Default)]
/// struct InMemory(Mutex<HashMap<String, String>>);
///
/// impl VersionMemory for InMemory {
///     fn recall(&self, executable: &str) -> Option<String> {
///         self.0.lock().unwrap().get(executable).cloned()
///     }
///     fn keep(&self, executable: &str, record: &str) {
///         self.0.lock().unwrap().insert(executable.to_owned(), record.to_owned());
///     }
/// }
///
/// remember_versions_with(InMemory::default());
/// ```
pub trait VersionMemory: Send + Sync {
    /// The record last kept for `executable`, if any. Whatever it returns
    /// is checked (a damaged record, or another executable's, is ignored).
    fn recall(&self, executable: &str) -> Option<String>;

    /// Keeps `record` for `executable`, replacing any. A record that cannot
    /// be kept is the memory's to report; the next process asks the
    /// compiler again.
    fn keep(&self, executable: &str, record: &str);
}

/// The memory, once named.
static MEMORY: Mutex<Option<Arc<dyn VersionMemory>>> = Mutex::new(None);

/// Keeps the answers of `iree-compile --version` in `memory`, and reads
/// them from it, for this process and later ones:
/// [`SubprocessCompiler::new`](super::SubprocessCompiler::new) and
/// [`compiler_identity`](super::compiler_identity) then run `--version`
/// only for an executable no process asked before (or that changed since).
/// The latest memory named is used.
///
/// `memory` must keep its records where only this user can write: whoever
/// can write them chooses the compiler version this process names in
/// cache keys.
pub fn remember_versions_with(memory: impl VersionMemory + 'static) {
    *MEMORY.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(memory));
}

/// The memory named last, if any.
fn memory() -> Option<Arc<dyn VersionMemory>> {
    MEMORY
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
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

    /// `path`, `len` and `modified` (seconds.nanoseconds), a line each:
    /// what a [`VersionMemory`] keeps a record under.
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
}

/// The version recorded for `executable`, if the memory has a good record.
pub(crate) fn recall(executable: &Identity) -> Option<CompilerVersion> {
    let identity = executable.text()?;
    let record = memory()?.recall(&identity)?;
    parse(&record, &identity)
}

/// The build a `record` holds for the executable `identity`; `None` when
/// it is not a record of this format for that executable.
fn parse(record: &str, identity: &str) -> Option<CompilerVersion> {
    if record.len() as u64 > MAX_VERSION_RECORD {
        return None;
    }
    let rest = record.strip_prefix(FORMAT)?.strip_prefix('\n')?;
    let build = rest.strip_prefix(identity)?.strip_prefix('\n')?;
    let build = build.strip_suffix('\n')?;
    if build.contains('\n') {
        return None;
    }
    Some(CompilerVersion::new(build, None))
}

/// Records `version` as `executable`'s answer, when a memory is named.
pub(crate) fn keep(executable: &Identity, version: &CompilerVersion) {
    let (Some(memory), Some(identity)) = (memory(), executable.text()) else {
        return;
    };
    if version.build().contains('\n') {
        return;
    }
    let record = format!("{FORMAT}\n{identity}\n{}\n", version.build());
    if record.len() as u64 <= MAX_VERSION_RECORD {
        memory.keep(&identity, &record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(len: u64) -> Identity {
        Identity::of(
            Path::new("/opt/iree/bin/iree-compile"),
            len,
            Some(UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 5)),
        )
        .unwrap()
    }

    #[test]
    fn a_record_is_read_back_only_for_the_same_executable() {
        let executable = identity(100);
        let text = executable.text().unwrap();
        assert_eq!(
            text,
            "/opt/iree/bin/iree-compile\n100\n1700000000.000000005"
        );
        let record = format!("{FORMAT}\n{text}\n3.13.0rc1 @ abc\n");
        assert_eq!(
            parse(&record, &text),
            Some(CompilerVersion::new("3.13.0rc1 @ abc", None))
        );
        // Another size (or time, or path) is another executable.
        assert_eq!(parse(&record, &identity(101).text().unwrap()), None);
        // Damaged records: another format, no end, two builds, too long.
        for bad in [
            format!("other format\n{text}\nv\n"),
            format!("{FORMAT}\n{text}\nv"),
            format!("{FORMAT}\n{text}\nv\nw\n"),
            format!("{FORMAT}\n{text}\n{}\n", "v".repeat(5000)),
        ] {
            assert_eq!(parse(&bad, &text), None, "{bad:?}");
        }
        // A path a record cannot hold on one line has no identity.
        assert!(Identity::of(Path::new("/a\nb"), 1, Some(UNIX_EPOCH)).is_none());
        assert!(Identity::of(Path::new("/a"), 1, None).is_none());
    }
}
