//! [`Signatures`]: the keys of [`JitConfig::trust`](crate::JitConfig::trust),
//! read once when a runtime starts, for the remote cache and for bundles
//! (those it serves, and those it exports).

use jit_store::{SigningKey, StoreError, Trust, TrustedKeys};

use crate::config::{SigningKeySource, TrustSettings, TrustedKey};

/// The keys a runtime signs with and trusts.
#[derive(Debug, Clone)]
pub(crate) struct Signatures {
    /// The key this process signs with (a builder); `None` for a reader.
    pub(crate) signer: Option<SigningKey>,
    /// The keys whose signatures are accepted, the signer's own included.
    pub(crate) trusted: TrustedKeys,
}

impl Signatures {
    /// The signatures `trust` asks for, each key file read now; `None`
    /// when it names no key (entries are then tagged with secrets). The
    /// error names the file that cannot be used (callers report it as
    /// [`JitError::Keys`](crate::JitError::Keys)).
    pub(crate) fn read(trust: &TrustSettings) -> Result<Option<Signatures>, StoreError> {
        let mut trusted = TrustedKeys::default();
        for key in &trust.trusted_keys {
            match key {
                TrustedKey::Key(key) => trusted.extend([*key]),
                TrustedKey::File(path) => {
                    trusted.extend(TrustedKeys::from_file(path)?.keys().iter().copied())
                }
            }
        }
        let signer = match &trust.signing_key {
            Some(SigningKeySource::Key(signer)) => Some(signer.clone()),
            Some(SigningKeySource::File(path)) => Some(SigningKey::from_file(path)?),
            None => None,
        };
        if let Some(signer) = &signer {
            trusted.extend([signer.public_key()]);
        }
        Ok((signer.is_some() || !trusted.is_empty()).then_some(Signatures { signer, trusted }))
    }

    /// The same keys as a store's [`Trust`].
    #[cfg_attr(
        not(feature = "remote-cache"),
        expect(dead_code, reason = "only the remote cache takes a Trust")
    )]
    pub(crate) fn trust(&self) -> Trust {
        match &self.signer {
            Some(signer) => Trust::builder(signer.clone(), self.trusted.clone()),
            None => Trust::reader(self.trusted.clone()),
        }
    }
}
