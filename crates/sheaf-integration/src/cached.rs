//! [`CachedVariant`]: what a runtime holds, one row per compiled signature
//! ([`JitRuntime::entries`](crate::JitRuntime::entries)), and where each
//! artifact came from.

use std::fmt;

use jit_cache::{ByteSize, CachedEntry, FunctionId, Signature};
use jit_store::ArtifactKey;

use crate::compile::variant::{ArtifactSource, Variant};

/// One compiled signature a runtime holds: its function and signature,
/// where its artifact came from, what it weighs and how it has been used.
/// `Display` prints one line:
/// `sigmoid (f32[1,5]) from compiler, 9.9 KiB, 2499 hits, used 0 calls ago, on local-sync`.
///
/// Recency is counted in calls of the function (`calls_since_use`), not
/// read from a clock: a hit never reads the clock.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct CachedVariant {
    /// The function (name and definition hash).
    pub function: FunctionId,
    /// The signature compiled (`?` for a dynamic dim).
    pub signature: Signature,
    /// Where its artifact came from: the compiler, the disk cache, the
    /// remote cache, a bundle, or an import.
    pub source: ArtifactSource,
    /// The artifact's bytes it accounts for (what the byte budget counts;
    /// the variants of a precompiled batch share one module, counted with
    /// the first of them, the others 0).
    pub bytes: usize,
    /// Calls it served (the call that compiled it is not one).
    pub hits: u64,
    /// Calls of its function since it last served one (or was cached).
    pub calls_since_use: u64,
    /// The device it runs on (the driver or URI it was opened with).
    pub device: String,
    /// Its artifact's key in the disk cache (as `sheaf-jit-cache list`
    /// names entries), when it has one.
    #[cfg_attr(feature = "serde", serde(serialize_with = "key_hex"))]
    pub artifact_key: Option<ArtifactKey>,
}

impl CachedVariant {
    pub(crate) fn new(entry: CachedEntry<Variant>) -> Self {
        let variant = &entry.executable;
        CachedVariant {
            source: variant.source,
            device: variant.device.to_string(),
            artifact_key: variant.key,
            function: entry.function,
            signature: entry.signature,
            bytes: entry.bytes,
            hits: entry.hits,
            calls_since_use: entry.calls_since_use,
        }
    }
}

impl fmt::Display for CachedVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} from {}, {}, {} hits, used {} calls ago, on {}",
            self.function,
            self.signature,
            self.source,
            ByteSize(self.bytes as u64),
            self.hits,
            self.calls_since_use,
            self.device
        )
    }
}

#[cfg(feature = "serde")]
fn key_hex<S: serde::Serializer>(
    key: &Option<ArtifactKey>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match key {
        Some(key) => serializer.serialize_str(&key.hex()),
        None => serializer.serialize_none(),
    }
}
