//! A compiled variant as the cache holds it: the loaded entry function, the
//! lowering's metadata and result structure, and the artifact's key.

use iree_safe::Function;
use jit_cache::store::ArtifactKey;
use jit_cache::Layout;

use crate::function::Metadata;

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
}

impl jit_cache::Executable for Variant {
    /// The artifact's bytes: what the byte budget weighs. The module's
    /// context adds about 24 KB more (see the iree-safe README).
    fn size_bytes(&self) -> usize {
        self.bytes
    }
}
