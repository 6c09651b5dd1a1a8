//! A compiled variant as the cache holds it: the loaded entry function, the
//! lowering's metadata and result structure, the artifact's key and where
//! the artifact came from ([`ArtifactSource`]).

use iree_safe::Function;
use jit_cache::Layout;
use jit_store::ArtifactKey;

use std::sync::Arc;

use crate::compile::lowering::{LoweredVariant, Metadata};
use crate::placement::Placement;

/// One compiled signature of a function, loaded into a runtime (the
/// primary one, or the CPU fallback's). Dropping the last reference unloads
/// its module (a module shared by a batch of variants goes with the last of
/// them).
#[derive(Debug, Clone)]
pub(crate) struct Variant {
    pub(crate) entry: Function,
    pub(crate) metadata: Metadata,
    pub(crate) outputs: Option<Layout>,
    /// The disk key of the artifact, when it has one (for export).
    pub(crate) key: Option<ArtifactKey>,
    /// The artifact bytes this variant accounts for (a share of a batch).
    pub(crate) bytes: usize,
    /// Where the artifact came from.
    pub(crate) source: ArtifactSource,
    /// The metadata as a bundle records it, when the function has a codec.
    pub(crate) metadata_bytes: Option<Arc<[u8]>>,
    /// What the artifact was compiled for (its placement's target identity).
    pub(crate) target: Arc<str>,
    /// The device it was loaded on (the driver or URI it was opened with).
    pub(crate) device: Arc<str>,
}

/// Where a variant's compiled artifact came from, when it was loaded: the
/// compiler ran, or it was found in the disk cache, the remote cache or an
/// artifact bundle. A hit reports the source of the variant it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum ArtifactSource {
    /// The compiler built it in this process.
    Compiler,
    /// This user's disk cache had it.
    DiskCache,
    /// The remote artifact cache had it.
    RemoteCache,
    /// An artifact bundle had it.
    Bundle,
    /// The application provided it
    /// ([`JitRuntime::provide_artifact`](crate::JitRuntime::provide_artifact)).
    Provided,
}

impl ArtifactSource {
    /// Every source, in the order the profile reports them.
    pub const ALL: [ArtifactSource; 5] = [
        ArtifactSource::Compiler,
        ArtifactSource::DiskCache,
        ArtifactSource::RemoteCache,
        ArtifactSource::Bundle,
        ArtifactSource::Provided,
    ];
}

impl std::fmt::Display for ArtifactSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ArtifactSource::Compiler => "compiler",
            ArtifactSource::DiskCache => "disk cache",
            ArtifactSource::RemoteCache => "remote cache",
            ArtifactSource::Bundle => "bundle",
            ArtifactSource::Provided => "provided",
        })
    }
}

impl Variant {
    /// `entry`, loaded from the artifact of `lowering` (found under `key`,
    /// from `source`) compiled for `placement`.
    pub(crate) fn new(
        entry: Function,
        lowering: &LoweredVariant,
        key: Option<ArtifactKey>,
        (source, placement): (ArtifactSource, &Placement),
    ) -> Variant {
        Variant {
            bytes: entry.module().artifact_bytes(),
            entry,
            metadata: Arc::clone(&lowering.metadata),
            outputs: lowering.outputs.clone(),
            key,
            source,
            metadata_bytes: lowering.metadata_bytes.clone(),
            target: Arc::from(placement.code(lowering.semantics).target_identity.as_str()),
            device: Arc::from(placement.device().uri()),
        }
    }

    /// The same code under another signature, weighing nothing: its module
    /// is counted once, with the variant it aliases.
    pub(crate) fn alias(&self) -> Variant {
        Variant {
            entry: self.entry.clone(),
            metadata: Arc::clone(&self.metadata),
            outputs: self.outputs.clone(),
            key: self.key,
            bytes: 0,
            source: self.source,
            metadata_bytes: self.metadata_bytes.clone(),
            target: Arc::clone(&self.target),
            device: Arc::clone(&self.device),
        }
    }
}

impl jit_cache::Executable for Variant {
    /// The artifact's bytes: what the byte budget weighs. The module's
    /// context adds about 24 KB more (see the iree-safe README).
    fn size_bytes(&self) -> usize {
        self.bytes
    }

    /// Served by the disk cache, the remote tier, a bundle or the
    /// application: not compiled for this miss.
    fn fetched(&self) -> bool {
        self.source != ArtifactSource::Compiler
    }
}
