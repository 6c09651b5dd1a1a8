//! What one process of a cluster learns reaches the others: the remote
//! tier keeps each function's learned policy (the dims that went dynamic,
//! the hot sizes: `jit_cache::LearnedPolicy`, as text) beside the
//! artifacts, under `<key_prefix>policy:<scope key>`, sealed as an entry is
//! (tagged with the cluster's secret, or signed by a builder), so that a
//! fresh process starts each function as the cluster left it: it compiles,
//! or fetches, the dynamic variant at once, never the static sizes another
//! process already learned to skip.
//!
//! A policy is fetched when a process first calls a function whose policy
//! its disk cache does not hold, and published (in the background, like an
//! artifact) each time the process's policy of the function changes; the
//! last one published wins. Read-only tiers fetch and never publish.

use std::convert::Infallible;

use super::{Kind, Lookup, Publish, RemoteTier};
use crate::key::ArtifactKey;

impl RemoteTier {
    /// The policy text published under `key` (the key of its scope), if a
    /// good one is there: authenticated as an artifact is, and within the
    /// size bound.
    pub(crate) fn fetch_policy(&self, key: &ArtifactKey) -> Option<Vec<u8>> {
        let shared = &self.shared;
        let name = shared.name(Kind::Policy, key);
        let text =
            |verified: crate::VerifiedArtifact<'_>| Ok::<_, Infallible>(verified.bytes().to_vec());
        match shared.lookup_kind(Kind::Policy, &name, key, text) {
            Lookup::Found((text, _)) => Some(text),
            Lookup::Missing | Lookup::Unusable => None,
        }
    }

    /// Queues `text`, a policy of the scope whose key is `key`, to be
    /// published; returns at once (dropped when the queue is full or the
    /// tier is read-only).
    pub(crate) fn publish_policy(&self, key: &ArtifactKey, text: &[u8]) {
        if self.shared.read_only {
            return;
        }
        self.queue(Publish {
            kind: Kind::Policy,
            key: *key,
            payload: text.to_vec(),
            lease: None,
        });
    }
}
