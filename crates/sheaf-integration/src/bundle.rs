//! Artifact bundles: compiled artifacts exported with a manifest, to ship
//! with a program and serve its calls ahead of time, without a compiler.
//!
//! A bundle is a folder holding `vmfb/<key>.sjit` entries (the disk cache's
//! format: a header, an authentication tag and the `.vmfb`), the `secret`
//! that tags them, and `manifest.txt`:
//!
//! ```text
//! sheaf-jit bundle 1
//! compiler 3.13.0rc20261016 @ 89ece87b...
//! runtime 3.13.0.dev-8b9120823840978e
//! entry <key>\t<bytes>\t<function>\t<signature>
//! ```
//!
//! Its keys name the compiler that built it (recorded in the manifest), so
//! it serves a process that has no compiler at all; the runtime build must
//! be the one the process links. A call whose signature the bundle holds
//! lowers (to find the key) and loads the artifact: no compile.
//!
//! A bundle is trusted like the program it ships with: its tags are made
//! with its own secret, shipped inside it, so they detect damage, not
//! forgery. What protects it is where it lives: every folder and file of it
//! (folders, secret, manifest, entries) must belong to this user or to root,
//! be writable by no one else, and be a real folder or regular file, not a
//! symbolic link, or the bundle is refused with an error that says what to
//! run. [`Bundle::open`] checks the folders before it touches the manifest,
//! and each file on the opened file before a byte of it is used; the
//! manifest is read without blocking and within [`MAX_MANIFEST_BYTES`], and
//! every entry is checked again when it is read (one that fails is never
//! loaded: the call compiles instead). Exporting re-tags each entry (the
//! disk cache's secret never leaves its folder) and writes folders 0700 and
//! files 0600, whatever the umask.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read, Write as _};
use std::path::{Path, PathBuf};

use iree_safe::Function;
use jit_cache::store::{
    open_read_only_file, ArtifactKey, ArtifactStore, StoreConfig, StoreError, VerifiedArtifact,
};

const FORMAT: &str = "sheaf-jit bundle 1";
const MANIFEST: &str = "manifest.txt";

/// The largest manifest a bundle may have: 16 MiB, some 100 000 entries. A
/// larger one is refused before it is read.
const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// What is wrong with an artifact bundle ([`JitError::Bundle`](crate::JitError::Bundle)), or what
/// failed while exporting one ([`JitError::Export`](crate::JitError::Export)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    /// A folder or file of the bundle is not safe to use (another user
    /// could change it, or it is a link, a FIFO or a device), or cannot be
    /// created or read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The manifest could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The manifest.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The manifest is over 16 MiB: refused before (or while) it is read.
    #[error(
        "{} has {bytes} bytes or more, over the {} MiB a manifest may have",
        path.display(),
        MAX_MANIFEST_BYTES >> 20
    )]
    ManifestTooLarge {
        /// The manifest.
        path: PathBuf,
        /// Its size, or how much of it was read.
        bytes: u64,
    },
    /// The manifest's first line is not `sheaf-jit bundle 1`.
    #[error("{MANIFEST} does not start with `{FORMAT}`")]
    UnknownFormat,
    /// A line of the manifest that starts as an entry is not
    /// `entry <key> <bytes> ...`, with a key of 64 lowercase hex digits.
    #[error("malformed entry line `{line}` in {MANIFEST}")]
    MalformedEntry {
        /// The line.
        line: String,
    },
    /// The manifest has no `compiler` or no `runtime` line: the field.
    #[error("{MANIFEST} names no {0}")]
    Missing(&'static str),
    /// The bundle was built for another IREE runtime than the one this
    /// program links.
    #[error(
        "it was built for the IREE runtime `{bundle}`, and this program links `{linked}`; \
         export it again from this build"
    )]
    RuntimeMismatch {
        /// The runtime the manifest names.
        bundle: String,
        /// The runtime this program links.
        linked: &'static str,
    },
    /// An entry's file has another size than the manifest records.
    #[error("{} has {bytes} bytes, not the {recorded} the manifest records", path.display())]
    EntrySize {
        /// The entry's file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
        /// The size the manifest records.
        recorded: u64,
    },
    /// Exporting: the compiler cannot be identified, so its artifacts have
    /// no keys.
    #[error("the compiler cannot be identified, so its artifacts have no keys")]
    UnidentifiedCompiler,
    /// Exporting: the manifest could not be written.
    #[error("cannot write {}", path.display())]
    Write {
        /// The manifest.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
}

/// An exported bundle, open for reading.
#[derive(Debug)]
pub(crate) struct Bundle {
    dir: PathBuf,
    store: ArtifactStore,
    compiler: String,
    entries: usize,
}

/// What a manifest says.
#[derive(Debug)]
struct Manifest {
    compiler: String,
    runtime: String,
    /// Each entry's key, and the size of its file.
    entries: Vec<(ArtifactKey, u64)>,
}

impl Bundle {
    /// Opens the bundle at `dir`: its folders and secret (as
    /// [`ArtifactStore::open_read_only`] checks them), then its manifest, then
    /// every entry the manifest lists, each a safe file of the size it
    /// records.
    pub(crate) fn open(dir: &Path) -> Result<Bundle, BundleError> {
        let store = ArtifactStore::open_read_only(dir)?;
        let text = read_manifest(&dir.join(MANIFEST))?;
        let manifest = Manifest::parse(&text)?;
        if manifest.runtime != iree_safe::IREE_RUNTIME_BUILD {
            return Err(BundleError::RuntimeMismatch {
                bundle: manifest.runtime,
                linked: iree_safe::IREE_RUNTIME_BUILD,
            });
        }
        for (key, recorded) in &manifest.entries {
            let path = store
                .entry_path(key)
                .expect("a read-only store has a folder");
            let bytes = open_read_only_file(&path)?.1.len();
            if bytes != *recorded {
                return Err(BundleError::EntrySize {
                    path,
                    bytes,
                    recorded: *recorded,
                });
            }
        }
        Ok(Bundle {
            store,
            dir: dir.to_path_buf(),
            compiler: manifest.compiler,
            entries: manifest.entries.len(),
        })
    }

    /// The compiler build the bundle's keys name.
    pub(crate) fn compiler(&self) -> &str {
        &self.compiler
    }

    /// The entry function of the artifact of `key`, loaded by `load`, if
    /// the bundle has it.
    pub(crate) fn fetch(
        &self,
        key: &ArtifactKey,
        load: impl Fn(VerifiedArtifact<'_>) -> Result<Function, iree_safe::Error>,
    ) -> Option<Function> {
        self.store.fetch(key, load)
    }

    /// How many artifacts the bundle holds.
    pub(crate) fn len(&self) -> usize {
        self.entries
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Manifest {
    /// Parses a manifest's text (see the module docs); lines it does not
    /// know are ignored.
    fn parse(text: &str) -> Result<Manifest, BundleError> {
        let mut lines = text.lines();
        if lines.next() != Some(FORMAT) {
            return Err(BundleError::UnknownFormat);
        }
        let (mut compiler, mut runtime, mut entries) = (None, None, Vec::new());
        for line in lines {
            if let Some(value) = line.strip_prefix("compiler ") {
                compiler = Some(value.to_owned());
            } else if let Some(value) = line.strip_prefix("runtime ") {
                runtime = Some(value.to_owned());
            } else if let Some(entry) = line.strip_prefix("entry\t") {
                let mut fields = entry.split('\t');
                let key = fields.next().and_then(ArtifactKey::from_hex);
                let bytes = fields.next().and_then(|bytes| bytes.parse().ok());
                let (Some(key), Some(bytes)) = (key, bytes) else {
                    return Err(BundleError::MalformedEntry {
                        line: line.to_owned(),
                    });
                };
                entries.push((key, bytes));
            }
        }
        Ok(Manifest {
            compiler: compiler.ok_or(BundleError::Missing("compiler"))?,
            runtime: runtime.ok_or(BundleError::Missing("runtime"))?,
            entries,
        })
    }
}

/// The text of the manifest at `path`, a safe file (see the module docs) of
/// at most [`MAX_MANIFEST_BYTES`]; or what is wrong with it.
fn read_manifest(path: &Path) -> Result<String, BundleError> {
    let too_large = |bytes: u64| BundleError::ManifestTooLarge {
        path: path.to_path_buf(),
        bytes,
    };
    let (file, metadata) = open_read_only_file(path)?;
    if metadata.len() > MAX_MANIFEST_BYTES {
        return Err(too_large(metadata.len()));
    }
    // Bounded again while reading: the file may have grown since.
    let mut text = String::new();
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|source| BundleError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    if text.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(too_large(text.len() as u64));
    }
    Ok(text)
}

/// Opens the bundle at `dir` as [`JitRuntime::new`](crate::JitRuntime::new)
/// does and returns how many artifacts it lists: for the `bundle` fuzz
/// target, not an API.
#[doc(hidden)]
pub fn open_for_fuzzing(dir: &Path) -> Result<usize, BundleError> {
    Bundle::open(dir).map(|bundle| bundle.len())
}

/// One artifact to export.
pub(crate) struct Export<'a> {
    pub(crate) function: &'a str,
    pub(crate) signature: String,
    pub(crate) key: ArtifactKey,
    /// The artifact, read back (and authenticated) from the disk cache.
    pub(crate) artifact: Vec<u8>,
}

/// What [`JitRuntime::export_artifacts`](crate::JitRuntime::export_artifacts)
/// wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportSummary {
    /// Artifacts written.
    pub artifacts: usize,
    /// Their bytes (entries, headers included).
    pub bytes: u64,
    /// Compiled variants with no entry on disk to copy (the disk cache was
    /// disabled, or the entry was evicted meanwhile).
    pub skipped: usize,
}

/// Writes a bundle of `exports` to `dir`, whose keys name `compiler`.
pub(crate) fn write(
    dir: &Path,
    compiler: &str,
    exports: Vec<Export<'_>>,
    mut skipped: usize,
) -> Result<ExportSummary, BundleError> {
    let store = ArtifactStore::open(StoreConfig {
        directory: dir.to_path_buf(),
        max_bytes: u64::MAX,
    })?;
    let mut manifest = format!(
        "{FORMAT}\ncompiler {compiler}\nruntime {}\n",
        iree_safe::IREE_RUNTIME_BUILD
    );
    let mut summary = ExportSummary::default();
    for export in exports {
        if !store.insert(&export.key, &export.artifact) {
            skipped += 1;
            continue;
        }
        let bytes = store
            .entry_path(&export.key)
            .and_then(|path| fs::metadata(path).ok())
            .map_or(0, |metadata| metadata.len());
        let field = |text: &str| text.replace(['\t', '\n'], " ");
        let _ = writeln!(
            manifest,
            "entry\t{}\t{bytes}\t{}\t{}",
            export.key.hex(),
            field(export.function),
            field(&export.signature)
        );
        summary.artifacts += 1;
        summary.bytes += bytes;
    }
    summary.skipped = skipped;
    // Written whole under a temporary name (mode 0600, like the entries:
    // never writable by others, which would have it refused), then renamed
    // over the old one.
    let path = dir.join(MANIFEST);
    tempfile::Builder::new()
        .prefix(".tmp-manifest-")
        .tempfile_in(dir)
        .and_then(|mut file| {
            file.write_all(manifest.as_bytes())?;
            file.persist(&path).map_err(|e| e.error)
        })
        .map_err(|source| BundleError::Write { path, source })?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed";

    fn manifest(entries: &str) -> String {
        format!("{FORMAT}\ncompiler c @ 1\nruntime r\n{entries}")
    }

    #[test]
    fn manifests_list_keys_and_sizes_and_nothing_else_passes() {
        let parsed =
            Manifest::parse(&manifest(&format!("entry\t{KEY}\t98\tf\t(f32[2])\n"))).unwrap();
        assert_eq!((&*parsed.compiler, &*parsed.runtime), ("c @ 1", "r"));
        assert_eq!(parsed.entries, [(ArtifactKey::from_hex(KEY).unwrap(), 98)]);
        for line in [
            format!("entry\t../../{}\t98", &KEY[6..]),
            format!("entry\t{}\t98", KEY.to_uppercase()),
            format!("entry\t{KEY}\t-1"),
            format!("entry\t{KEY}"),
        ] {
            let error = Manifest::parse(&manifest(&line)).unwrap_err();
            assert!(
                matches!(&error, BundleError::MalformedEntry { line: l } if *l == line),
                "{line}: {error}"
            );
        }
        assert!(matches!(
            Manifest::parse("sheaf-jit bundle 2\n"),
            Err(BundleError::UnknownFormat)
        ));
        let missing = Manifest::parse(&format!("{FORMAT}\nruntime r\n")).unwrap_err();
        assert!(matches!(missing, BundleError::Missing("compiler")));
        assert_eq!(missing.to_string(), "manifest.txt names no compiler");
    }
}
