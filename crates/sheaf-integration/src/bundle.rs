//! Artifact bundles: compiled artifacts exported with a manifest, to ship
//! with a program and serve its calls ahead of time, without a compiler.
//!
//! A bundle is a folder holding `vmfb/<key>.sjit` entries (the disk cache's
//! format: a header, a seal and the `.vmfb`) and `manifest.txt`, one line
//! per variant (tab-separated; the variants of a `precompile` batch share
//! one artifact); and either the `secret` that tags its entries, or, for a
//! bundle its builder signed, `manifest.sig` (see "Signed bundles" below):
//!
//! ```text
//! sheaf-jit bundle 4
//! compiler 3.13.0rc20261016 @ 89ece87b...
//! runtime 3.13.0.dev-8b9120823840978e
//! entry <key> <bytes> <function> <definition hash> <entry symbol> <signature> <outputs> <metadata> <target hash>
//! ```
//!
//! The function's name is written with `\` escaping backslashes, tabs and
//! newlines; the signature is its exact text
//! ([`Signature::exact_text`]), which names one signature only (its
//! `Display` can be ambiguous), and tells its dynamic dims.
//!
//! Its keys name the compiler that built it (recorded in the manifest), so
//! it serves a process that has no compiler at all; the runtime build must
//! be the one the process links. A miss whose function (name and
//! definition hash) and signature the bundle lists — or a generalization of
//! it, for a variant with dynamic dims — loads that artifact with no
//! lowering and no compile, when the function's metadata can be had
//! without its lowering (`()`, or a
//! [codec](crate::JitFunction::with_metadata_codec)); else the call lowers
//! and finds the artifact by its key. The loaded entry function must
//! declare what the manifest says it serves (IREE's
//! `iree.abi.declaration`: one argument of the signature's type for each
//! tensor, one result for each tensor of the outputs): a stale or edited
//! manifest's variant is not served (logged at warn level), and the call
//! goes on as a miss (lowered, then loaded from the disk cache or
//! compiled, or interpreted in a process without a compiler).
//!
//! An unsigned bundle is trusted like the program it ships with: its tags
//! are made with its own secret, shipped inside it, so they detect damage,
//! not forgery. What protects it is where it lives: every folder and file of it
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
//!
//! # Signed bundles
//!
//! A runtime with a signing key
//! ([`TrustSettings::signing_key`](crate::settings::TrustSettings::signing_key))
//! exports a signed bundle: each entry signed by its key (entry format 3),
//! no secret, and `manifest.sig`, one line holding the builder's public key
//! and its Ed25519 signature of the manifest's bytes (a
//! [`DocumentSignature`] for [`MANIFEST_PURPOSE`]). A runtime with trusted
//! keys ([`TrustSettings::trusted_keys`](crate::settings::TrustSettings::trusted_keys))
//! serves only signed bundles: the manifest's signature must verify under
//! one of them before a line of it is parsed (else the bundle is refused
//! whole), and each entry must be signed by one of them when it is read
//! (else it is not loaded, and counted as unsigned or of an unknown
//! signer). A reader's keys let it verify, never forge: whoever can change
//! the bundle's files cannot make it run their code. A runtime without keys
//! refuses a signed bundle, naming its signer, since it has no secret to
//! check it with. The folder and file rules above hold for both kinds.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jit_cache::{stable_hash, FunctionId, Layout, Signature};
use jit_store::{
    file_io, open_read_only_file, ArtifactKey, ArtifactStore, DocumentSignature,
    DocumentSignatureError, Escaped, PublicKey, SigningKey, StoreConfig, StoreError, TrustedKeys,
    VerifiedArtifact,
};

const FORMAT: &str = "sheaf-jit bundle 4";
const MANIFEST: &str = "manifest.txt";
/// The signature of a signed bundle's manifest.
const MANIFEST_SIGNATURE: &str = "manifest.sig";
/// What a manifest's signature is made for
/// ([`SigningKey::sign_document`]): a signature of anything else never
/// passes for one.
const MANIFEST_PURPOSE: &str = "sheaf-jit bundle manifest";
/// The largest `manifest.sig` read: one line of some 200 bytes.
const MAX_SIGNATURE_BYTES: u64 = 1 << 10;

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
    /// The manifest (or its signature) could not be read.
    #[error("cannot read {}", Escaped::new(path))]
    Read {
        /// The manifest, or its signature.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The manifest is over 16 MiB: refused before (or while) it is read.
    #[error(
        "{} has {bytes} bytes or more, over the {} MiB a manifest may have",
        Escaped::new(path),
        MAX_MANIFEST_BYTES >> 20
    )]
    ManifestTooLarge {
        /// The manifest.
        path: PathBuf,
        /// Its size, or how much of it was read.
        bytes: u64,
    },
    /// The manifest's first line is not `sheaf-jit bundle 4` (an older
    /// bundle: export it again).
    #[error(
        "{MANIFEST} does not start with `{FORMAT}`; export the bundle again with this version"
    )]
    UnknownFormat,
    /// A line of the manifest that starts as an entry does not have the
    /// fields of the module docs (a key of 64 lowercase hex digits, a size,
    /// a definition hash of 16 hex digits, a signature's exact text,
    /// outputs, metadata).
    #[error("malformed entry line `{}` in {MANIFEST}", Escaped::new(line))]
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
        "it was built for the IREE runtime `{}`, and this program links `{linked}`; export it \
         again from this build",
        Escaped::new(bundle)
    )]
    RuntimeMismatch {
        /// The runtime the manifest names.
        bundle: String,
        /// The runtime this program links.
        linked: &'static str,
    },
    /// An entry's file has another size than the manifest records.
    #[error(
        "{} has {bytes} bytes, not the {recorded} the manifest records",
        Escaped::new(path)
    )]
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
    /// The bundle is signed (it has a `manifest.sig`), and this process
    /// trusts no key: it has no secret to check the bundle with.
    #[error(
        "it is signed by {signer}, and this process trusts no signing key; add that key to \
         SHEAF_JIT_TRUSTED_KEYS (`TrustSettings::trusted_keys`) if its builder is yours"
    )]
    Signed {
        /// The key the signature names (not checked).
        signer: PublicKey,
    },
    /// This process trusts only signed code (it has trusted keys), and the
    /// bundle is not signed.
    #[error(
        "it is not signed, and this process serves only what a trusted key signed \
         (SHEAF_JIT_TRUSTED_KEYS); export it again with the builder's SHEAF_JIT_SIGNING_KEY_FILE"
    )]
    Unsigned,
    /// The manifest's signature is malformed, made by a key not trusted, or
    /// does not verify (the manifest changed since it was signed).
    #[error("the signature of {MANIFEST} is refused")]
    ManifestSignature(#[source] DocumentSignatureError),
    /// Exporting: the manifest (or its signature) could not be written.
    #[error("cannot write {}", Escaped::new(path))]
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
    artifacts: usize,
    /// The variants, by function name and definition hash.
    variants: HashMap<(String, u64), Vec<BundledVariant>>,
    /// The key that signed it; `None` for an unsigned bundle.
    signer: Option<PublicKey>,
}

/// One variant a bundle lists.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BundledVariant {
    pub(crate) key: ArtifactKey,
    pub(crate) entry: String,
    /// The compiled signature.
    pub(crate) signature: Signature,
    /// Its dynamic dims ((argument, dim) positions).
    pub(crate) dynamic: Vec<(usize, usize)>,
    pub(crate) outputs: Option<Layout>,
    pub(crate) metadata: Option<Vec<u8>>,
    /// What it was compiled for: the [`stable_hash`] of the compile
    /// options' target identity.
    pub(crate) target: u64,
}

/// What a manifest says.
#[derive(Debug)]
pub(crate) struct Manifest {
    pub(crate) compiler: String,
    pub(crate) runtime: String,
    /// Each artifact's key, and the size of its file.
    pub(crate) artifacts: Vec<(ArtifactKey, u64)>,
    /// The variants, by function name and definition hash.
    pub(crate) variants: HashMap<(String, u64), Vec<BundledVariant>>,
}

/// What a bundle read by [`read`] holds before its runtime build and
/// entries are checked.
#[derive(Debug)]
pub(crate) struct Opened {
    /// A read-only store over its entries: checked with its secret, or
    /// with the trusted keys.
    pub(crate) store: ArtifactStore,
    pub(crate) manifest: Manifest,
    /// The key whose signature of the manifest verified; `None` for an
    /// unsigned bundle.
    pub(crate) signer: Option<PublicKey>,
}

/// The bundle at `dir` as [`Bundle::open`] reads it before it checks the
/// runtime build and the entries: its folders, then, without trusted keys,
/// its secret (as [`ArtifactStore::open_read_only`] checks them), or, with
/// them, the manifest's signature; then its manifest.
pub(crate) fn read(dir: &Path, trusted: Option<&TrustedKeys>) -> Result<Opened, BundleError> {
    let signature = read_signature(&dir.join(MANIFEST_SIGNATURE))?;
    let Some(trusted) = trusted else {
        if let Some(signature) = signature {
            return Err(BundleError::Signed {
                signer: signature.signer(),
            });
        }
        let store = ArtifactStore::open_read_only(dir)?;
        let text = read_manifest(&dir.join(MANIFEST))?;
        return Ok(Opened {
            store,
            manifest: Manifest::parse(&text)?,
            signer: None,
        });
    };
    let store = ArtifactStore::open_read_only_signed(dir, trusted.clone())?;
    let signature = signature.ok_or(BundleError::Unsigned)?;
    let text = read_manifest(&dir.join(MANIFEST))?;
    let signer = trusted
        .check_document(MANIFEST_PURPOSE, text.as_bytes(), &signature)
        .map_err(BundleError::ManifestSignature)?;
    Ok(Opened {
        store,
        manifest: Manifest::parse(&text)?,
        signer: Some(signer),
    })
}

impl Bundle {
    /// Opens the bundle at `dir`: its folders, then its secret or, with
    /// `trusted` keys, the manifest's signature (see the module docs), then
    /// its manifest, then every entry the manifest lists, each a safe file
    /// of the size it records.
    pub(crate) fn open(dir: &Path, trusted: Option<&TrustedKeys>) -> Result<Bundle, BundleError> {
        let Opened {
            store,
            manifest,
            signer,
        } = read(dir, trusted)?;
        if manifest.runtime != iree_safe::IREE_RUNTIME_BUILD {
            return Err(BundleError::RuntimeMismatch {
                bundle: manifest.runtime,
                linked: iree_safe::IREE_RUNTIME_BUILD,
            });
        }
        for (key, recorded) in &manifest.artifacts {
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
            artifacts: manifest.artifacts.len(),
            variants: manifest.variants,
            signer,
        })
    }

    /// The key that signed the bundle; `None` for an unsigned one.
    pub(crate) fn signer(&self) -> Option<PublicKey> {
        self.signer
    }

    /// The compiler build the bundle's keys name.
    pub(crate) fn compiler(&self) -> &str {
        &self.compiler
    }

    /// The artifact of `key`, loaded by `load`, if the bundle has it.
    pub(crate) fn fetch<V>(
        &self,
        key: &ArtifactKey,
        load: impl Fn(VerifiedArtifact<'_>) -> Result<V, iree_safe::Error>,
    ) -> Option<V> {
        self.store.fetch(key, load)
    }

    /// The variant of the function `name` with `definition_hash` compiled
    /// for `target` and the device `device` (a target identity), else one
    /// whose dynamic dims serve a call with `signature` (with the
    /// generalization it was compiled for).
    pub(crate) fn find(
        &self,
        (name, definition_hash): (&str, u64),
        (target, signature): (&Signature, &Signature),
        device: &str,
    ) -> Option<(&BundledVariant, Option<Signature>)> {
        let variants = self.variants.get(&(name.to_owned(), definition_hash))?;
        let device = stable_hash(device.as_bytes());
        let variants = variants.iter().filter(|v| v.target == device);
        if let Some(exact) = variants.clone().find(|v| v.signature == *target) {
            return Some((exact, None));
        }
        variants.filter(|v| !v.dynamic.is_empty()).find_map(|v| {
            let general = signature.with_dynamic_dims(&v.dynamic);
            (general.generalizes(signature) && general == v.signature).then_some((v, Some(general)))
        })
    }

    /// How many artifacts the bundle holds.
    pub(crate) fn len(&self) -> usize {
        self.artifacts
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
        let mut manifest = Manifest {
            compiler: String::new(),
            runtime: String::new(),
            artifacts: Vec::new(),
            variants: HashMap::new(),
        };
        let (mut compiler, mut runtime) = (None, None);
        for line in lines {
            if let Some(value) = line.strip_prefix("compiler ") {
                compiler = Some(value.to_owned());
            } else if let Some(value) = line.strip_prefix("runtime ") {
                runtime = Some(value.to_owned());
            } else if let Some(entry) = line.strip_prefix("entry\t") {
                let malformed = || BundleError::MalformedEntry {
                    line: line.to_owned(),
                };
                let (key, bytes, function, variant) = parse_entry(entry).ok_or_else(malformed)?;
                match manifest.artifacts.iter().find(|(k, _)| *k == key) {
                    Some((_, recorded)) if *recorded != bytes => return Err(malformed()),
                    Some(_) => {}
                    None => manifest.artifacts.push((key, bytes)),
                }
                manifest.variants.entry(function).or_default().push(variant);
            }
        }
        manifest.compiler = compiler.ok_or(BundleError::Missing("compiler"))?;
        manifest.runtime = runtime.ok_or(BundleError::Missing("runtime"))?;
        Ok(manifest)
    }
}

/// The fields of one entry line (after `entry\t`).
fn parse_entry(entry: &str) -> Option<(ArtifactKey, u64, (String, u64), BundledVariant)> {
    let fields: Vec<&str> = entry.split('\t').collect();
    let [key, bytes, name, hash, symbol, signature, outputs, metadata, target] = fields[..] else {
        return None;
    };
    let key = ArtifactKey::from_hex(key)?;
    let hex64 = |text: &str| jit_cache::hex::parse_u64(text, 16..=16);
    let (hash, target) = (hex64(hash)?, hex64(target)?);
    let signature = Signature::from_exact_text(signature)?;
    let dynamic = dynamic_dims(&signature);
    let outputs = match outputs {
        "-" => None,
        text => Some(Layout::from_token_text(text)?),
    };
    let metadata = match metadata {
        "-" => None,
        text => Some(jit_cache::hex::decode(text)?),
    };
    let variant = BundledVariant {
        key,
        entry: symbol.to_owned(),
        signature,
        dynamic,
        outputs,
        metadata,
        target,
    };
    Some((key, bytes.parse().ok()?, (unescape(name)?, hash), variant))
}

/// The (argument, dim) positions of `signature`'s dynamic dims.
fn dynamic_dims(signature: &Signature) -> Vec<(usize, usize)> {
    signature
        .args()
        .iter()
        .enumerate()
        .flat_map(|(arg, spec)| {
            (0..spec.rank())
                .filter(move |&dim| spec.is_dynamic(dim))
                .map(move |dim| (arg, dim))
        })
        .collect()
}

/// `text` with backslashes, tabs, carriage returns and newlines written
/// `\\`, `\t`, `\r` and `\n`: one field free of them that reads back
/// exactly ([`unescape`]).
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '\t' => escaped.push_str("\\t"),
            '\r' => escaped.push_str("\\r"),
            '\n' => escaped.push_str("\\n"),
            _ => escaped.push(c),
        }
    }
    escaped
}

/// The text [`escape`] wrote as `field`; `None` for a field it cannot have
/// written.
fn unescape(field: &str) -> Option<String> {
    let mut text = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        text.push(match c {
            '\\' => match chars.next()? {
                '\\' => '\\',
                't' => '\t',
                'r' => '\r',
                'n' => '\n',
                _ => return None,
            },
            '\t' | '\r' | '\n' => return None,
            c => c,
        });
    }
    Some(text)
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
    let text = read_text(file, path, MAX_MANIFEST_BYTES)?;
    if text.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(too_large(text.len() as u64));
    }
    Ok(text)
}

/// The manifest signature at `path`, a safe file (see the module docs) of
/// at most [`MAX_SIGNATURE_BYTES`] holding one; `None` when there is none
/// (an unsigned bundle).
fn read_signature(path: &Path) -> Result<Option<DocumentSignature>, BundleError> {
    let file = match open_read_only_file(path) {
        Ok((file, _)) => file,
        Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            return Ok(None)
        }
        Err(error) => return Err(error.into()),
    };
    let text = read_text(file, path, MAX_SIGNATURE_BYTES)?;
    if text.len() as u64 > MAX_SIGNATURE_BYTES {
        return Err(BundleError::ManifestSignature(
            DocumentSignatureError::Malformed {
                text: text.chars().take(100).collect(),
            },
        ));
    }
    text.trim()
        .parse()
        .map(Some)
        .map_err(BundleError::ManifestSignature)
}

/// The text of `file` (at `path`), read up to one byte past `max`: more
/// than `max` bytes means the file is larger.
fn read_text(file: fs::File, path: &Path, max: u64) -> Result<String, BundleError> {
    let mut text = String::new();
    file.take(max + 1)
        .read_to_string(&mut text)
        .map_err(|source| BundleError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(text)
}

/// Opens the bundle at `dir` as [`JitRuntime::new`](crate::JitRuntime::new)
/// does (trusting no key) and returns how many variants it lists: for the
/// `bundle` fuzz target, not an API.
#[doc(hidden)]
pub fn open_for_fuzzing(dir: &Path) -> Result<usize, BundleError> {
    Bundle::open(dir, None).map(|bundle| bundle.variants.values().map(Vec::len).sum())
}

/// One variant to export.
pub(crate) struct Export<'a> {
    pub(crate) function: &'a FunctionId,
    pub(crate) signature: &'a Signature,
    pub(crate) entry: &'a str,
    pub(crate) key: ArtifactKey,
    pub(crate) outputs: Option<&'a Layout>,
    pub(crate) metadata: Option<&'a [u8]>,
    pub(crate) target: &'a str,
    /// The artifact, read back (and authenticated) from the disk cache
    /// (once per key: the variants of a batch share it).
    pub(crate) artifact: Arc<Vec<u8>>,
}

/// What [`JitRuntime::export_artifacts`](crate::JitRuntime::export_artifacts)
/// wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportSummary {
    /// Artifacts written.
    pub artifacts: usize,
    /// Variants they hold (a `precompile` batch's artifact holds several).
    pub variants: usize,
    /// Their bytes (entries, headers included).
    pub bytes: u64,
    /// Compiled variants with no entry on disk to copy (the disk cache was
    /// disabled, or the entry was evicted meanwhile).
    pub skipped: usize,
    /// The key that signed the bundle; `None` when it is not signed (the
    /// runtime has no signing key).
    pub signer: Option<PublicKey>,
}

/// Writes a bundle of `exports` to `dir`, whose keys name `compiler`,
/// signed by `signer` when there is one (see the module docs).
pub(crate) fn write(
    dir: &Path,
    compiler: &str,
    exports: Vec<Export<'_>>,
    mut skipped: usize,
    signer: Option<&SigningKey>,
) -> Result<ExportSummary, BundleError> {
    let config = {
        let mut config = StoreConfig::at(dir.to_path_buf());
        config.max_bytes = u64::MAX;
        config
    };
    let store = match signer {
        Some(signer) => ArtifactStore::open_signing(config, signer.clone())?,
        None => ArtifactStore::open(config)?,
    };
    let mut manifest = format!(
        "{FORMAT}\ncompiler {compiler}\nruntime {}\n",
        iree_safe::IREE_RUNTIME_BUILD
    );
    let mut summary = ExportSummary::default();
    let mut written: HashMap<ArtifactKey, u64> = HashMap::new();
    for export in exports {
        let bytes = match written.get(&export.key) {
            Some(&bytes) => bytes,
            None => {
                if !store.insert(&export.key, &export.artifact) {
                    skipped += 1;
                    continue;
                }
                let bytes = store
                    .entry_path(&export.key)
                    .and_then(|path| fs::metadata(path).ok())
                    .map_or(0, |metadata| metadata.len());
                written.insert(export.key, bytes);
                summary.artifacts += 1;
                summary.bytes += bytes;
                bytes
            }
        };
        let _ = writeln!(
            manifest,
            "entry\t{}\t{bytes}\t{}\t{:016x}\t{}\t{}\t{}\t{}\t{:016x}",
            export.key.hex(),
            escape(export.function.name()),
            export.function.definition_hash(),
            export.entry,
            export.signature.exact_text(),
            export.outputs.map_or("-".to_owned(), Layout::token_text),
            export
                .metadata
                .map_or("-".to_owned(), jit_cache::hex::encode),
            stable_hash(export.target.as_bytes()),
        );
        summary.variants += 1;
    }
    summary.skipped = skipped;
    summary.signer = signer.map(SigningKey::public_key);
    // Each file written whole under a temporary name (mode 0600, like the
    // entries: never writable by others, which would have it refused),
    // then renamed over the old one; the signature first, so that a
    // manifest is never paired with a signature of another export for
    // longer than the export runs.
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        file_io::write_whole(&path, bytes).map_err(|source| BundleError::Write { path, source })
    };
    match signer {
        Some(signer) => {
            let signature = signer.sign_document(MANIFEST_PURPOSE, manifest.as_bytes());
            write(MANIFEST_SIGNATURE, format!("{signature}\n").as_bytes())?;
        }
        None => match fs::remove_file(dir.join(MANIFEST_SIGNATURE)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(BundleError::Write {
                    path: dir.join(MANIFEST_SIGNATURE),
                    source: e,
                })
            }
            _ => {}
        },
    }
    write(MANIFEST, manifest.as_bytes())?;
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
        let line = |key: &str, bytes: &str, hash: &str, sig: &str, outputs: &str, meta: &str| {
            format!("entry\t{key}\t{bytes}\tf\\tg\t{hash}\tf__b0\t{sig}\t{outputs}\t{meta}\t{hash}")
        };
        let hash = "00000000000000ff";
        let (dynamic, fixed) = ("f32[?]|-|-|-", "f32[4]|-|-|-");
        let keyed = "{ k6b T k77 ( T S ) )";
        let text = format!(
            "{}\n{}\n",
            line(KEY, "98", hash, dynamic, keyed, "0aff"),
            line(KEY, "98", hash, fixed, "-", "-")
        );
        let parsed = Manifest::parse(&manifest(&text)).unwrap();
        assert_eq!((&*parsed.compiler, &*parsed.runtime), ("c @ 1", "r"));
        let key = ArtifactKey::from_hex(KEY).unwrap();
        assert_eq!(parsed.artifacts, [(key, 98)], "one artifact, two variants");
        let variants = &parsed.variants[&("f\tg".to_owned(), 0xff)];
        assert_eq!(variants.len(), 2);
        assert_eq!(variants[0].signature.exact_text(), dynamic);
        assert_eq!(variants[0].dynamic, [(0, 0)]);
        assert_eq!(variants[0].metadata.as_deref(), Some(&[0x0a, 0xff][..]));
        let outputs = variants[0].outputs.as_ref().expect("a layout");
        assert_eq!(outputs.to_string(), "{k: T, w: (T, S)}");
        assert_eq!(Layout::token_text(outputs), keyed);
        assert_eq!((variants[1].dynamic.len(), variants[1].target), (0, 0xff));
        for line in [
            line(&format!("../../{}", &KEY[6..]), "98", hash, fixed, "-", "-"),
            line(&KEY.to_uppercase(), "98", hash, fixed, "-", "-"),
            line(KEY, "-1", hash, fixed, "-", "-"),
            line(KEY, "98", "ff", fixed, "-", "-"),
            line(KEY, "98", hash, "(f32[4])", "-", "-"),
            line(KEY, "98", hash, "f32[4]|-|-", "-", "-"),
            line(KEY, "98", hash, fixed, "( T", "-"),
            line(KEY, "98", hash, fixed, "k", "-"),
            line(KEY, "98", hash, fixed, "-", "abc"),
            line(KEY, "98", hash, fixed, "-", "-").replace("f\\tg", "f\\xg"),
            format!("entry\t{KEY}\t98"),
            format!(
                "{}\n{}",
                line(KEY, "98", hash, fixed, "-", "-"),
                line(KEY, "99", hash, fixed, "-", "-")
            ),
        ] {
            let error = Manifest::parse(&manifest(&line)).unwrap_err();
            assert!(
                matches!(&error, BundleError::MalformedEntry { line: l } if line.ends_with(l.as_str())),
                "{line}: {error}"
            );
        }
        assert!(matches!(
            Manifest::parse("sheaf-jit bundle 1\n"),
            Err(BundleError::UnknownFormat)
        ));
        let missing = Manifest::parse(&format!("{FORMAT}\nruntime r\n")).unwrap_err();
        assert!(matches!(missing, BundleError::Missing("compiler")));
        assert_eq!(missing.to_string(), "manifest.txt names no compiler");
    }

    #[test]
    fn names_are_escaped_into_one_field_and_read_back_exactly() {
        for name in [
            "f",
            "a\tb",
            "a b",
            "back\\slash",
            "line\nbreak\r",
            "\\t",
            "温度",
        ] {
            let field = escape(name);
            assert!(!field.contains(['\t', '\n', '\r']), "{field:?}");
            assert_eq!(unescape(&field).as_deref(), Some(name));
        }
        assert_ne!(escape("a\tb"), escape("a b"));
        for bad in ["\\", "\\x", "a\tb"] {
            assert_eq!(unescape(bad), None, "{bad:?}");
        }
    }
}
