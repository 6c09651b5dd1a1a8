//! The remote artifact cache shared by a cluster: its address (or a
//! backend of the caller's own), the shared secret that authenticates its
//! entries (unless signatures do, `trust.rs`), the CA that signs a TLS server's certificate, its timeouts, namespace,
//! size bound, mode (read-only or not), compile leases and circuit
//! breaker.

use std::fmt;
use std::panic::RefUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;

use jit_store::{RedisStore, RemoteOptions, RemoteStore, RemoteTimeouts, Secret};

use super::TrustSettings;
use crate::error::ConfigError;

/// The address of a remote artifact cache (`redis://[:password@]host...`,
/// or `file:///path` for a folder the cluster shares); `Debug` and
/// `Display` hide its password.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteCacheUrl(String);

impl RemoteCacheUrl {
    /// The cache at `url` (`redis://[:password@]host[:port][/db]`, or
    /// `rediss://...` over TLS, or `file:///path/to/shared/folder`; checked
    /// when the runtime starts).
    pub fn new(url: impl Into<String>) -> Self {
        RemoteCacheUrl(url.into())
    }

    /// The address, password included.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for RemoteCacheUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", RedisStore::redacted(&self.0))
    }
}

impl fmt::Display for RemoteCacheUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&RedisStore::redacted(&self.0))
    }
}

/// Where the shared secret of the remote artifact cache comes from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RemoteSecret {
    /// These bytes (the same 32 on every machine).
    Key(Secret),
    /// A file of 32 bytes, read when the runtime starts: this user's or
    /// root's, that nobody else may write, in folders nobody else may
    /// write, reached through symbolic links or not (a Kubernetes or
    /// Docker secret mount); see
    /// [`Secret::from_file`](jit_store::Secret::from_file).
    File(PathBuf),
}

/// The remote artifact cache behind the disk cache: a miss on disk asks it
/// before compiling, a compile is published to it, and processes that miss
/// one artifact at once compile it once (compile leases). Off unless `url`
/// or `store` is set; then its entries must be authenticated, either by a
/// `secret` every process shares (a cluster of equals) or by signatures
/// ([`JitConfig::trust`](crate::JitConfig::trust): a signing key on
/// builders, trusted keys on readers, which only read): whoever can write
/// the store could otherwise run code in this process.
///
/// ```
/// use sheaf_integration::{settings::{RemoteCacheUrl, RemoteSecret}, JitConfig};
///
/// let config = JitConfig::builder()
///     .remote(|remote| {
///         remote.url = Some(RemoteCacheUrl::new("redis://cache:6379"));
///         remote.secret = Some(RemoteSecret::File("/etc/sheaf/jit-secret".into()));
///         remote.options.max_entry_bytes = 8 << 20;
///         remote.options.namespace = "staging".parse().expect("a namespace");
///     })
///     .build()?;
/// assert_eq!(config.remote.url.unwrap().to_string(), "redis://cache:6379");
/// # Ok::<(), sheaf_integration::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RemoteSettings {
    /// The Redis server (`redis://[:password@]host[:port][/db]`, or
    /// `rediss://...` over TLS with the `remote-cache-tls` feature), or a
    /// folder the cluster shares (`file:///path`, see
    /// [`SharedFolderStore`](jit_store::SharedFolderStore)); `None`
    /// (the default): no remote cache, unless `store` is set.
    pub url: Option<RemoteCacheUrl>,
    /// A backend of the caller's own instead of `url` (see
    /// [`JitConfigBuilder::remote_store`](crate::JitConfigBuilder::remote_store));
    /// the tier's trust, bounds, breaker and leases apply to it alike.
    /// (`RefUnwindSafe` keeps the configuration unwind-safe, as its other
    /// settings are.)
    pub store: Option<Arc<dyn RemoteStore + RefUnwindSafe>>,
    /// The secret that authenticates the entries, shared by every process
    /// that uses the cache. A remote cache needs it, or signatures
    /// ([`JitConfig::trust`](crate::JitConfig::trust)), not both.
    pub secret: Option<RemoteSecret>,
    /// The PEM file of the CA that signs a `rediss://` server's
    /// certificate (read when the runtime starts); `None`: the system's
    /// root certificates. Needs the `remote-cache-tls` feature.
    pub ca_file: Option<PathBuf>,
    /// How long the server may take to connect, and to answer a whole
    /// request, all its reads and writes together (200 ms and 500 ms by
    /// default).
    pub timeouts: RemoteTimeouts,
    /// The largest artifact published or fetched, the deployment's
    /// `namespace` in the keys (see `docs/cluster.md`), the circuit breaker
    /// (after `failure_threshold` failed requests in a row the cache is left
    /// alone for `cool_down`, then probed once), and the compile leases
    /// (`lease_ttl`, `None` for none; `compile_estimate`, the least a miss
    /// waits for another process's compile), and the `mode` (read-only
    /// processes never publish nor take leases).
    pub options: RemoteOptions,
}

impl RemoteSettings {
    /// Checks that a remote cache has a secret (or signatures, `trust`) and
    /// timeouts that can work, and that a CA file comes with the feature
    /// that reads it.
    pub(super) fn validate(&self, trust: &TrustSettings) -> Result<(), ConfigError> {
        if self.ca_file.is_some() && !cfg!(feature = "remote-cache-tls") {
            return Err(ConfigError::FeatureDisabled {
                setting: "remote.ca_file",
                part: "remote cache TLS",
                feature: "remote-cache-tls",
            });
        }
        if self.url.is_none() && self.store.is_none() {
            return Ok(());
        }
        if let (Some(url), Some(store)) = (&self.url, &self.store) {
            return Err(ConfigError::invalid(
                "remote.url",
                format!("{url} and the store {store:?}"),
                "either an address or a store of your own, not both",
            ));
        }
        match (&self.secret, trust.is_signed()) {
            (None, false) => return Err(ConfigError::RemoteSecretMissing),
            (Some(_), true) => {
                return Err(ConfigError::invalid(
                    "remote.secret",
                    "a shared secret, and a signing key or trusted keys".to_owned(),
                    "either a shared secret (a cluster of equals) or signatures (builders' \
                     signing keys, readers' trusted keys: `trust`, which also apply to bundles), \
                     not both",
                ))
            }
            _ => {}
        }
        let RemoteTimeouts {
            connect, request, ..
        } = self.timeouts;
        if connect.is_zero() || request.is_zero() {
            return Err(ConfigError::invalid(
                "remote.timeouts",
                format!("{:?}", self.timeouts),
                "positive durations",
            ));
        }
        if self.options.lease_ttl.is_some_and(|ttl| ttl.is_zero()) {
            return Err(ConfigError::invalid(
                "remote.options.lease_ttl",
                "0 ms".to_owned(),
                "a positive duration, or none (no compile leases)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::settings::{SigningKeySource, TrustedKey};

    fn with_secret() -> RemoteSettings {
        RemoteSettings {
            url: Some(RemoteCacheUrl::new("redis://:hunter2@cache:6379")),
            secret: Some(RemoteSecret::Key(Secret::from_bytes([1; Secret::LEN]))),
            ..RemoteSettings::default()
        }
    }

    #[test]
    fn the_password_is_never_shown() {
        let shown = format!("{:?} {}", with_secret(), with_secret().url.unwrap());
        assert!(
            !shown.contains("hunter2") && shown.contains("cache:6379"),
            "{shown}"
        );
    }

    #[test]
    fn a_remote_cache_needs_a_secret_and_positive_timeouts() {
        assert_eq!(
            RemoteSettings::default().validate(&TrustSettings::default()),
            Ok(())
        );
        assert_eq!(with_secret().validate(&TrustSettings::default()), Ok(()));
        let no_secret = RemoteSettings {
            secret: None,
            ..with_secret()
        };
        assert_eq!(
            no_secret.validate(&TrustSettings::default()),
            Err(ConfigError::RemoteSecretMissing)
        );
        let reader = TrustSettings {
            trusted_keys: vec![TrustedKey::File("/etc/sheaf/trusted".into())],
            ..TrustSettings::default()
        };
        assert_eq!(no_secret.validate(&reader), Ok(()));
        let error = with_secret().validate(&reader).unwrap_err().to_string();
        assert!(error.contains("not both"), "{error}");
        let builder = TrustSettings {
            signing_key: Some(SigningKeySource::File("/etc/sheaf/key".into())),
            ..TrustSettings::default()
        };
        assert_eq!(no_secret.validate(&builder), Ok(()));
        let zero = RemoteSettings {
            timeouts: {
                let mut timeouts = RemoteTimeouts::default();
                timeouts.connect = Duration::ZERO;
                timeouts.request = Duration::from_millis(1);
                timeouts
            },
            ..with_secret()
        };
        let error = zero
            .validate(&TrustSettings::default())
            .unwrap_err()
            .to_string();
        assert!(error.contains("remote.timeouts"), "{error}");
        let with_ca = RemoteSettings {
            ca_file: Some("/etc/sheaf/ca.pem".into()),
            ..with_secret()
        };
        if cfg!(feature = "remote-cache-tls") {
            assert_eq!(with_ca.validate(&TrustSettings::default()), Ok(()));
        } else {
            let error = with_ca
                .validate(&TrustSettings::default())
                .unwrap_err()
                .to_string();
            assert!(error.contains("remote-cache-tls"), "{error}");
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn a_store_of_ones_own_excludes_an_address_and_leases_live_a_while() {
        let store: Arc<dyn RemoteStore + RefUnwindSafe> =
            Arc::new(jit_store::SharedFolderStore::new(std::env::temp_dir()).unwrap());
        let own = RemoteSettings {
            url: None,
            store: Some(store),
            ..with_secret()
        };
        assert_eq!(own.validate(&TrustSettings::default()), Ok(()));
        let both = RemoteSettings {
            url: with_secret().url,
            ..own.clone()
        };
        let error = both
            .validate(&TrustSettings::default())
            .unwrap_err()
            .to_string();
        assert!(error.contains("not both"), "{error}");
        let mut zero = with_secret();
        zero.options.lease_ttl = Some(Duration::ZERO);
        let error = zero
            .validate(&TrustSettings::default())
            .unwrap_err()
            .to_string();
        assert!(error.contains("lease_ttl"), "{error}");
        zero.options.lease_ttl = None;
        assert_eq!(zero.validate(&TrustSettings::default()), Ok(()));
    }
}
