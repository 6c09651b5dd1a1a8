//! What an artifact bundle holds and whether this program would serve it,
//! for a tool (`sheaf-jit-cache bundle inspect|verify`) or a deployment
//! check: [`inspect_bundle`] lists its manifest, [`verify_bundle`] runs
//! every check the runtime runs on it (folders, secret or manifest
//! signature, manifest, runtime build, entry sizes) and then each entry's
//! own (a safe file whose tag or signature verifies), with the reason for
//! each refusal. Both read the bundle with the keys of a
//! [`TrustSettings`], as a runtime configured with them would. Both use the runtime's own
//! reader (`bundle.rs`) and the store's checks, nothing of their own.

use std::path::Path;

use jit_cache::{FunctionId, Signature};
use jit_store::{ArtifactKey, EntryCheck, PublicKey};

use crate::bundle::{self, Bundle, BundleError, Opened};
use crate::config::TrustSettings;
use crate::error::JitError;
use crate::signing::Signatures;

/// A bundle's manifest ([`inspect_bundle`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BundleContents {
    /// The compiler build its keys name.
    pub compiler: String,
    /// The IREE runtime build it was exported from (a program that links
    /// another refuses it).
    pub runtime: String,
    /// Its artifacts: key and file size (the variants of a precompiled
    /// batch share one).
    pub artifacts: Vec<(ArtifactKey, u64)>,
    /// Its variants, by function name and definition hash, then
    /// signature text.
    pub variants: Vec<BundledSignature>,
    /// The trusted key whose signature of the manifest verified; `None`
    /// for an unsigned bundle.
    pub signer: Option<PublicKey>,
}

/// One variant a bundle lists.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BundledSignature {
    /// Its function (name and definition hash).
    pub function: FunctionId,
    /// The signature compiled (`?` for a dynamic dim).
    pub signature: Signature,
    /// The entry function's symbol in the module.
    pub entry: String,
    /// Its artifact's key.
    pub key: ArtifactKey,
    /// The [`stable_hash`](crate::compile::lowering::stable_hash) of the target
    /// identity it was compiled for (a process serves the variants of its
    /// own device's target).
    pub target_hash: u64,
}

/// What [`verify_bundle`] found: the runtime's verdict on the bundle, and
/// each entry's.
#[derive(Debug)]
#[non_exhaustive]
pub struct BundleVerdict {
    /// `Ok` when this program opens the bundle
    /// ([`JitConfigBuilder::artifact_bundle`](crate::JitConfigBuilder::artifact_bundle)
    /// takes it); else why it refuses it whole.
    pub opens: Result<(), BundleError>,
    /// Each artifact the manifest lists, checked as a call that loads it
    /// checks it (a safe file, of the size the manifest records, whose tag
    /// verifies under the bundle's secret, or whose signature by a trusted
    /// key verifies).
    pub entries: Vec<(ArtifactKey, EntryCheck)>,
    /// The trusted key whose signature of the manifest verified; `None`
    /// for an unsigned bundle.
    pub signer: Option<PublicKey>,
}

impl BundleVerdict {
    /// Whether the bundle opens and every entry is authentic.
    pub fn is_ok(&self) -> bool {
        self.opens.is_ok() && self.entries.iter().all(|(_, check)| check.is_authentic())
    }
}

/// The manifest of the bundle at `dir`, read as a runtime with `trust`
/// reads it (its folders, and its secret or the manifest's signature,
/// checked first), whichever runtime build it was made for.
///
/// # Errors
///
/// [`JitError::Keys`] for key files of `trust` that cannot be used, and
/// [`JitError::Bundle`] with the [`BundleError`] the runtime would refuse
/// the bundle with for its folders, secret, signature or manifest.
pub fn inspect_bundle(dir: &Path, trust: &TrustSettings) -> Result<BundleContents, JitError> {
    let signatures = Signatures::read(trust).map_err(JitError::Keys)?;
    let trusted = signatures.as_ref().map(|signatures| &signatures.trusted);
    let Opened {
        manifest, signer, ..
    } = bundle::read(dir, trusted).map_err(|source| bundle_error(dir, source))?;
    let mut variants: Vec<BundledSignature> = manifest
        .variants
        .into_iter()
        .flat_map(|((name, hash), variants)| {
            let function = FunctionId::new(name, hash);
            variants.into_iter().map(move |variant| BundledSignature {
                function: function.clone(),
                signature: variant.signature,
                entry: variant.entry,
                key: variant.key,
                target_hash: variant.target,
            })
        })
        .collect();
    variants.sort_by(|a, b| {
        (
            a.function.name(),
            a.function.definition_hash(),
            a.signature.to_string(),
        )
            .cmp(&(
                b.function.name(),
                b.function.definition_hash(),
                b.signature.to_string(),
            ))
    });
    Ok(BundleContents {
        compiler: manifest.compiler,
        runtime: manifest.runtime,
        artifacts: manifest.artifacts,
        variants,
        signer,
    })
}

/// Checks the bundle at `dir` as this program, configured with `trust`,
/// would before serving it ([`BundleVerdict::opens`]), then every entry
/// its manifest lists ([`BundleVerdict::entries`]), whatever the first
/// found.
///
/// # Errors
///
/// [`JitError::Keys`] for key files of `trust` that cannot be used, and
/// [`JitError::Bundle`] for a bundle whose folders, secret, signature or
/// manifest cannot be read or are refused (then no entry can be checked).
pub fn verify_bundle(dir: &Path, trust: &TrustSettings) -> Result<BundleVerdict, JitError> {
    let signatures = Signatures::read(trust).map_err(JitError::Keys)?;
    let trusted = signatures.as_ref().map(|signatures| &signatures.trusted);
    let Opened {
        store,
        manifest,
        signer,
    } = bundle::read(dir, trusted).map_err(|source| bundle_error(dir, source))?;
    let opens = Bundle::open(dir, trusted).map(drop);
    let entries = manifest
        .artifacts
        .iter()
        .map(|&(key, recorded)| {
            let check = match store.stored_entry(&key) {
                None => EntryCheck::Missing,
                Some(entry) if entry.bytes != recorded => EntryCheck::Corrupt(format!(
                    "{} bytes, not the {recorded} the manifest records",
                    entry.bytes
                )),
                Some(entry) => store.check_entry(&entry),
            };
            (key, check)
        })
        .collect();
    Ok(BundleVerdict {
        opens,
        entries,
        signer,
    })
}

fn bundle_error(dir: &Path, source: BundleError) -> JitError {
    JitError::Bundle {
        path: dir.to_path_buf(),
        source,
    }
}
