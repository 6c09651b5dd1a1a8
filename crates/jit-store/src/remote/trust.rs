//! [`RemoteTrust`]: who may publish into a remote tier, and whose entries
//! it accepts.

use crate::entry::{Checker, Sealer};
use crate::trust::{Secret, SigningKey, TrustedKeys};

/// How a [`RemoteTier`](super::RemoteTier) seals the entries it publishes
/// and which entries it accepts. The guarantees of each, for the disk
/// cache, bundles, Redis and a shared folder, are tabled in the
/// repository's `docs/cluster.md` ("Who can do what").
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RemoteTrust {
    /// One secret that every process of the cluster holds (a cluster of
    /// equals): each publishes entries tagged with it (HMAC-SHA256) and
    /// accepts any entry so tagged, so every holder can publish what every
    /// other holder runs.
    Shared(Secret),
    /// Signatures (Ed25519): an entry is accepted only when signed by one
    /// of `trusted` (or by `signer`). A process with a `signer` (a
    /// builder: CI, a release job) signs what it publishes; one without
    /// (a reader) holds nothing that signs, so it never publishes, never
    /// takes a compile lease, and cannot forge an entry for anyone.
    Signed {
        /// The key this process signs with; `None` for a reader.
        signer: Option<SigningKey>,
        /// The public keys whose signatures are accepted.
        trusted: TrustedKeys,
    },
}

impl RemoteTrust {
    /// A builder's trust: signs with `signer`, and accepts what `signer`
    /// or one of `trusted` signed.
    pub fn builder(signer: SigningKey, trusted: TrustedKeys) -> RemoteTrust {
        RemoteTrust::Signed {
            signer: Some(signer),
            trusted,
        }
    }

    /// A reader's trust: accepts what one of `trusted` signed; publishes
    /// nothing.
    pub fn reader(trusted: TrustedKeys) -> RemoteTrust {
        RemoteTrust::Signed {
            signer: None,
            trusted,
        }
    }

    /// The same trust with a signer's own key among the trusted ones.
    pub(super) fn normalized(self) -> RemoteTrust {
        match self {
            RemoteTrust::Signed {
                signer: Some(signer),
                mut trusted,
            } => {
                trusted.extend([signer.public_key()]);
                RemoteTrust::Signed {
                    signer: Some(signer),
                    trusted,
                }
            }
            other => other,
        }
    }

    /// What stands for the trust in the keys: the secret's identity (which
    /// tells secrets apart without revealing anything of them), or
    /// `signed` (readers and builders, whatever their keys, look in one
    /// place; a signature says who published).
    pub(super) fn identity(&self) -> String {
        match self {
            RemoteTrust::Shared(secret) => secret.identity(),
            RemoteTrust::Signed { .. } => "signed".to_owned(),
        }
    }

    /// What seals the entries published; `None` when this process cannot
    /// publish.
    pub(super) fn sealer(&self) -> Option<Sealer<'_>> {
        match self {
            RemoteTrust::Shared(secret) => Some(Sealer::Secret(secret)),
            RemoteTrust::Signed { signer, .. } => signer.as_ref().map(Sealer::Signer),
        }
    }

    /// What checks the entries fetched.
    pub(super) fn checker(&self) -> Checker<'_> {
        match self {
            RemoteTrust::Shared(secret) => Checker::Secret(secret),
            RemoteTrust::Signed { trusted, .. } => Checker::Signatures(trusted),
        }
    }
}
