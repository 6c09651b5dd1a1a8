//! [`VerifiedArtifact`]: the only form in which the store hands artifact
//! bytes to its caller's `load`.

/// Artifact bytes the store vouches for, as its caller's `load` receives
/// them. Only this crate's store makes one, from exactly two sources:
///
/// - what the caller's own `build` closure returned in the same call
///   ([`ArtifactStore::fetch_or_build`](super::ArtifactStore::fetch_or_build)),
///   which is as trustworthy as that closure (a JIT's compiler);
/// - an entry whose HMAC-SHA256 over its key and payload verified under the
///   secret of a folder that no other user can read or write, or under the
///   remote tier's shared secret (see [`Secret`](super::Secret)), read from
///   a file that no other user could write; or a remote entry signed by a
///   key of the tier's [`TrustedKeys`](super::TrustedKeys) (Ed25519, over
///   its key and payload).
///
/// A caller that runs the bytes as native code (a `.vmfb`) may therefore
/// treat them as it treats its own compiler's output: the threat model in
/// the repository's README says what each secret protects against.
#[derive(Clone, Copy)]
pub struct VerifiedArtifact<'a> {
    bytes: &'a [u8],
}

impl<'a> VerifiedArtifact<'a> {
    /// Bytes the caller's `build` returned.
    pub(crate) fn built(bytes: &'a [u8]) -> Self {
        VerifiedArtifact { bytes }
    }

    /// A payload whose tag or signature verified (`entry::parse` returned
    /// it as found).
    pub(crate) fn authenticated(bytes: &'a [u8]) -> Self {
        VerifiedArtifact { bytes }
    }

    /// The artifact's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

impl std::fmt::Debug for VerifiedArtifact<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VerifiedArtifact({} bytes)", self.bytes.len())
    }
}
