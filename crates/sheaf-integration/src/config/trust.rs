//! Whose compiled code this process runs from stores that others write or
//! read (the remote cache, exported bundles): the builder's signing key it
//! signs with, and the public keys of the builders it trusts.

use std::path::PathBuf;

use jit_store::{PublicKey, SigningKey};

/// Signatures on what leaves this process's own disk cache (see
/// `docs/cluster.md`, "CI builds, everyone reads"): a builder (CI, a
/// release job) signs with its `signing_key` what it publishes to the
/// remote cache and the bundles it exports; a reader holds only
/// `trusted_keys`, and accepts from the remote cache and from bundles only
/// what one of them signed. With neither (the default), the remote cache's
/// entries are authenticated by its shared secret and a bundle's by the
/// secret it ships with.
///
/// ```
/// use sheaf_integration::{settings::TrustedKey, JitConfig};
///
/// let config = JitConfig::builder()
///     .trust(|trust| {
///         trust.trusted_keys = vec![TrustedKey::Key(
///             "ed25519:0d4a05b07352a5436e180356da0ae6efa0345ff7fb1572575772e8005ed978e9"
///                 .parse()
///                 .expect("a public key"),
///         )];
///     })
///     .build()?;
/// assert!(config.trust.is_signed());
/// # Ok::<(), sheaf_integration::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct TrustSettings {
    /// The key this process signs with (a builder); it also accepts what
    /// it signed.
    pub signing_key: Option<SigningKeySource>,
    /// The public keys whose signatures this process accepts. With them and
    /// no `signing_key`, the process only reads the remote cache (no
    /// publish, no compile lease).
    pub trusted_keys: Vec<TrustedKey>,
}

impl TrustSettings {
    /// Whether entries must be signed: a signing key or trusted keys are
    /// set.
    pub fn is_signed(&self) -> bool {
        self.signing_key.is_some() || !self.trusted_keys.is_empty()
    }
}

/// Where a builder's signing key comes from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum SigningKeySource {
    /// This key.
    Key(SigningKey),
    /// A file of 32 random bytes (`sheaf-jit-cache keygen FILE`), read
    /// when the runtime starts under the rules of a secret's file
    /// ([`SigningKey::from_file`](jit_store::SigningKey::from_file)).
    File(PathBuf),
}

/// A public key a reader trusts, or a file of them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrustedKey {
    /// This key.
    Key(PublicKey),
    /// A file of keys (`ed25519:<64 hex digits>`, separated by white space
    /// or commas, `#` comments), read when the runtime starts: this
    /// user's or root's, that nobody else may write
    /// ([`TrustedKeys::from_file`](jit_store::TrustedKeys::from_file)).
    File(PathBuf),
}
