//! [`Behind`]: what stands behind a store's folder. With the `remote`
//! feature, an optional [`RemoteTier`]; without it, nothing. The store asks
//! it the same questions either way, so its lookup order is written once.

use std::fmt;

use super::key::ArtifactKey;
#[cfg(feature = "remote")]
use super::remote::{RemoteStats, RemoteTier};
use super::verified::VerifiedArtifact;

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

    /// True when nothing stands behind the folder.
    pub(crate) fn is_empty(&self) -> bool {
        #[cfg(feature = "remote")]
        return self.remote.is_none();
        #[cfg(not(feature = "remote"))]
        true
    }

    /// The artifact of `key` from behind the folder, turned into a `V` by
    /// `load`, with its bytes (to store in the folder).
    pub(crate) fn fetch<V, L: fmt::Display>(
        &self,
        key: &ArtifactKey,
        load: &impl Fn(VerifiedArtifact<'_>) -> Result<V, L>,
    ) -> Option<(V, Vec<u8>)> {
        #[cfg(feature = "remote")]
        return self.remote.as_ref()?.fetch(key, load);
        #[cfg(not(feature = "remote"))]
        {
            let _ = (key, load);
            None
        }
    }

    /// Hands a freshly built artifact to the tier behind (in the
    /// background).
    pub(crate) fn publish(&self, key: &ArtifactKey, artifact: &[u8]) {
        #[cfg(feature = "remote")]
        if let Some(remote) = &self.remote {
            remote.publish(key, artifact);
        }
        #[cfg(not(feature = "remote"))]
        let _ = (key, artifact);
    }
}
