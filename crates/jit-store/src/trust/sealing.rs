//! [`Trust`]: how a store that others write or read (a remote tier, an
//! exported bundle) seals the entries it writes, and whose entries it
//! accepts.

use crate::entry::{Checker, Sealer};
use crate::trust::{Secret, SigningKey, TrustedKeys};

/// How a store that others write or read seals the entries it writes and
/// which entries it accepts: a `RemoteTier` (feature `remote`) takes one,
/// and a folder of signed entries is one's [`Trust::Signed`]
/// ([`ArtifactStore::open_signing`](crate::ArtifactStore::open_signing)
/// writes it, [`ArtifactStore::open_read_only_signed`](crate::ArtifactStore::open_read_only_signed)
/// reads it; a disk cache is [`Trust::Shared`] with its folder's secret). The
/// guarantees of each, for the disk cache, bundles, Redis and a shared
/// folder, are tabled in the repository's `docs/cluster.md` ("Who can do
/// what").
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Trust {
    /// One secret that every process holds (a cluster of equals, or a
    /// bundle's own secret shipped inside it): each writes entries tagged
    /// with it (HMAC-SHA256) and accepts any entry so tagged, so every
    /// holder can publish what every other holder runs.
    Shared(Secret),
    /// Signatures (Ed25519): an entry is accepted only when signed by one
    /// of `trusted` (or by `signer`). A process with a `signer` (a
    /// builder: CI, a release job) signs what it writes; one without (a
    /// reader) holds nothing that signs, so it never publishes, never
    /// takes a compile lease, and cannot forge an entry for anyone.
    Signed {
        /// The key this process signs with; `None` for a reader.
        signer: Option<SigningKey>,
        /// The public keys whose signatures are accepted.
        trusted: TrustedKeys,
    },
}

impl Trust {
    /// A builder's trust: signs with `signer`, and accepts what `signer`
    /// or one of `trusted` signed.
    pub fn builder(signer: SigningKey, trusted: TrustedKeys) -> Trust {
        Trust::Signed {
            signer: Some(signer),
            trusted,
        }
        .normalized()
    }

    /// A reader's trust: accepts what one of `trusted` signed; writes
    /// nothing.
    pub fn reader(trusted: TrustedKeys) -> Trust {
        Trust::Signed {
            signer: None,
            trusted,
        }
    }

    /// The same trust with a signer's own key among the trusted ones.
    pub(crate) fn normalized(self) -> Trust {
        match self {
            Trust::Signed {
                signer: Some(signer),
                mut trusted,
            } => {
                trusted.extend([signer.public_key()]);
                Trust::Signed {
                    signer: Some(signer),
                    trusted,
                }
            }
            other => other,
        }
    }

    /// What seals the entries written; `None` when this process cannot
    /// write any.
    pub(crate) fn sealer(&self) -> Option<Sealer<'_>> {
        match self {
            Trust::Shared(secret) => Some(Sealer::Secret(secret)),
            Trust::Signed { signer, .. } => signer.as_ref().map(Sealer::Signer),
        }
    }

    /// What checks the entries read.
    pub(crate) fn checker(&self) -> Checker<'_> {
        match self {
            Trust::Shared(secret) => Checker::Secret(secret),
            Trust::Signed { trusted, .. } => Checker::Signatures(trusted),
        }
    }
}
