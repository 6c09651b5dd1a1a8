//! A compiled variant as the cache holds it: the loaded entry function, the
//! lowering's metadata and result structure, and the artifact's key.

use iree_safe::Function;
use jit_cache::store::ArtifactKey;
use jit_cache::Layout;

use std::sync::Arc;

use crate::compile::Lowering;
use crate::dispatch::ArtifactSource;
use crate::function::Metadata;
use crate::target::Placement;

/// One compiled signature of a function, loaded into a runtime (the
/// primary one, or the CPU fallback's). Dropping the last reference unloads
/// its module (a module shared by a batch of variants goes with the last of
/// them).
#[derive(Debug)]
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

impl Variant {
    /// `entry`, loaded from the artifact of `lowering` (found under `key`,
    /// from `source`) compiled for `placement`.
    pub(crate) fn new(
        entry: Function,
        lowering: &Lowering,
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
}
