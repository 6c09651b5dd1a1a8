//! [`Behind`]: what stands behind a store's folder. With the `remote`
//! feature, an optional [`RemoteTier`]; without it, nothing. The store asks
//! it the same questions either way, so its lookup order is written once.

use std::fmt;
use std::time::Duration;

use super::key::ArtifactKey;
#[cfg(feature = "remote")]
use super::remote::{Fetch, HeldLease, RemoteStats, RemoteTier};
use super::verified::VerifiedArtifact;

/// A compile lease of the tier behind, held while the caller compiles
/// (see the remote tier's `lease.rs`); nothing without the `remote`
/// feature.
#[cfg(feature = "remote")]
pub(crate) type Lease = Option<HeldLease>;
/// A compile lease of the tier behind: nothing without the `remote`
/// feature.
#[cfg(not(feature = "remote"))]
pub(crate) type Lease = NoLease;

/// The lease of a store with nothing behind its folder.
#[cfg(not(feature = "remote"))]
#[derive(Default)]
pub(crate) struct NoLease;

/// What the tier behind a store's folder found for a key.
pub(crate) enum Found<V> {
    /// The artifact turned into a `V`, with its bytes (to store in the
    /// folder). Only a remote tier finds one.
    #[cfg_attr(
        not(feature = "remote"),
        allow(dead_code, reason = "only a remote tier finds an artifact")
    )]
    Artifact(V, Vec<u8>),
    /// Nothing: the caller builds, holding the lease (if any) until it
    /// hands the artifact to [`Behind::publish`].
    Build(Lease),
}

/// The tier behind a store's folder, if any.
#[derive(Debug, Default)]
pub(crate) struct Behind {
    #[cfg(feature = "remote")]
    remote: Option<RemoteTier>,
}

impl Behind {
    /// `remote` behind the folder.
    #[cfg(feature = "remote")]
    pub(crate) fn remote(remote: RemoteTier) -> Self {
        Behind {
            remote: Some(remote),
        }
    }

    /// The remote tier's counters; `None` without one.
    #[cfg(feature = "remote")]
    pub(crate) fn remote_stats(&self) -> Option<RemoteStats> {
        self.remote.as_ref().map(RemoteTier::stats)
    }

    /// Waits for the publishes queued so far, at most `timeout`; true when
    /// they are done (at once with nothing behind).
    pub(crate) fn wait_for_publishes(&self, timeout: Duration) -> bool {
        #[cfg(feature = "remote")]
        if let Some(remote) = &self.remote {
            return remote.wait_for_publishes(timeout);
        }
        let _ = timeout;
        true
    }

    /// True when nothing stands behind the folder.
    pub(crate) fn is_empty(&self) -> bool {
        #[cfg(feature = "remote")]
        return self.remote.is_none();
        #[cfg(not(feature = "remote"))]
        true
    }

    /// The artifact of `key` from behind the folder, turned into a `V` by
    /// `load`; or that the caller builds it (the remote tier may have made
    /// it wait for another process's build first).
    pub(crate) fn fetch<V, L: fmt::Display>(
        &self,
        key: &ArtifactKey,
        load: &impl Fn(VerifiedArtifact<'_>) -> Result<V, L>,
    ) -> Found<V> {
        #[cfg(feature = "remote")]
        return match &self.remote {
            Some(remote) => match remote.fetch_or_lease(key, load) {
                Fetch::Found(value, artifact) => Found::Artifact(value, artifact),
                Fetch::Compile(lease) => Found::Build(lease),
            },
            None => Found::Build(None),
        };
        #[cfg(not(feature = "remote"))]
        {
            let _ = (key, load);
            Found::Build(NoLease)
        }
    }

    /// The policy text published behind the folder under `key` (see the
    /// remote tier's `policies.rs`); `None` with nothing behind.
    pub(crate) fn fetch_policy(&self, key: &ArtifactKey) -> Option<Vec<u8>> {
        #[cfg(feature = "remote")]
        return self.remote.as_ref()?.fetch_policy(key);
        #[cfg(not(feature = "remote"))]
        {
            let _ = key;
            None
        }
    }

    /// Publishes the policy `text` under `key` behind the folder, in the
    /// background; nothing with nothing behind.
    pub(crate) fn publish_policy(&self, key: &ArtifactKey, text: &[u8]) {
        #[cfg(feature = "remote")]
        if let Some(remote) = &self.remote {
            remote.publish_policy(key, text);
        }
        #[cfg(not(feature = "remote"))]
        let _ = (key, text);
    }

    /// Hands a freshly built artifact (built in `took`, holding `lease`) to
    /// the tier behind, which publishes it in the background and then
    /// releases the lease.
    pub(crate) fn publish(&self, key: &ArtifactKey, artifact: &[u8], took: Duration, lease: Lease) {
        #[cfg(feature = "remote")]
        if let Some(remote) = &self.remote {
            remote.publish(key, artifact, took, lease);
        }
        #[cfg(not(feature = "remote"))]
        let _ = (key, artifact, took, lease);
    }
}
