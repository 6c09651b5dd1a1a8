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
//! forgery. What protects it is where it lives: its folders and secret must
//! belong to this user or to root and be writable by no one else (checked at
//! open, as for the disk cache). Exporting re-tags each entry: the disk
//! cache's secret never leaves its folder.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use iree_safe::Function;
use jit_cache::store::{ArtifactKey, DiskStore, StoreConfig};

use crate::error::JitError;

const FORMAT: &str = "sheaf-jit bundle 1";
const MANIFEST: &str = "manifest.txt";

/// An exported bundle, open for reading.
#[derive(Debug)]
pub(crate) struct Bundle {
    dir: PathBuf,
    store: DiskStore,
    compiler: String,
    entries: usize,
}

impl Bundle {
    /// Opens the bundle at `dir`, checking its manifest and that every
    /// entry it lists is there with the size it records.
    pub(crate) fn open(dir: &Path) -> Result<Bundle, JitError> {
        let invalid = |why: String| JitError::Bundle {
            path: dir.to_path_buf(),
            message: why,
        };
        let manifest = fs::read_to_string(dir.join(MANIFEST))
            .map_err(|e| invalid(format!("cannot read {MANIFEST}: {e}")))?;
        let mut lines = manifest.lines();
        if lines.next() != Some(FORMAT) {
            return Err(invalid(format!(
                "{MANIFEST} does not start with `{FORMAT}`"
            )));
        }
        let (mut compiler, mut runtime, mut entries) = (None, None, 0);
        for line in lines {
            if let Some(value) = line.strip_prefix("compiler ") {
                compiler = Some(value.to_owned());
            } else if let Some(value) = line.strip_prefix("runtime ") {
                runtime = Some(value.to_owned());
            } else if let Some(entry) = line.strip_prefix("entry\t") {
                let mut fields = entry.split('\t');
                let (Some(key), Some(bytes)) = (fields.next(), fields.next()) else {
                    return Err(invalid(format!("malformed entry line `{line}`")));
                };
                let path = dir.join("vmfb").join(format!("{key}.sjit"));
                let size = fs::metadata(&path).map(|m| m.len()).ok();
                if size.map(|s| s.to_string()).as_deref() != Some(bytes) {
                    return Err(invalid(format!(
                        "{} is missing or does not have the {bytes} bytes the manifest records",
                        path.display()
                    )));
                }
                entries += 1;
            }
        }
        let compiler = compiler.ok_or_else(|| invalid("the manifest names no compiler".into()))?;
        let runtime = runtime.ok_or_else(|| invalid("the manifest names no runtime".into()))?;
        if runtime != iree_safe::IREE_RUNTIME_BUILD {
            return Err(invalid(format!(
                "it was built for the IREE runtime `{runtime}`, and this program links `{}`; \
                 export it again from this build",
                iree_safe::IREE_RUNTIME_BUILD
            )));
        }
        let store = DiskStore::open_read_only(dir).map_err(|e| invalid(e.to_string()))?;
        Ok(Bundle {
            store,
            dir: dir.to_path_buf(),
            compiler,
            entries,
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
        load: impl Fn(&[u8]) -> Result<Function, iree_safe::Error>,
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
) -> Result<ExportSummary, JitError> {
    let failed = |what: String| JitError::Bundle {
        path: dir.to_path_buf(),
        message: what,
    };
    let store = DiskStore::open(StoreConfig {
        directory: dir.to_path_buf(),
        max_bytes: u64::MAX,
    })
    .map_err(|e| failed(e.to_string()))?;
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
    let path = dir.join(MANIFEST);
    fs::write(&path, manifest)
        .map_err(|e| failed(format!("cannot write {}: {e}", path.display())))?;
    Ok(summary)
}
