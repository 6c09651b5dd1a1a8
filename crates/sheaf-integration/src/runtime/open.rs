//! Opening a runtime: the configuration checked, the device (and CPU
//! fallback) placed, the disk, remote and bundle stores set up.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock, Weak};

use jit_cache::{ErrorChain, JitCache};
use jit_store::ArtifactStore;
#[cfg(feature = "remote-cache")]
use jit_store::{RedisStore, RemoteStore, RemoteTier, Secret, SharedFolderStore, Trust};

use crate::dump::Dumps;

use crate::bundle::Bundle;
use crate::compile::batch_queue::BatchQueue;
use crate::compile::pipeline::Pipeline;
use crate::compiler_versions::{self, VersionFiles};
use crate::config::JitConfig;
#[cfg(feature = "remote-cache")]
use crate::config::{RemoteSecret, RemoteSettings};
use crate::error::{ConfigError, JitError};
use crate::exit;
use crate::learned_policy::DiskPolicy;
use crate::placement::{CpuFallback, ParallelCpu, Placement};
use crate::profile::Profile;
use crate::signing::Signatures;
use crate::upload::UploadCache;

use super::{Inner, JitRuntime};

/// The remote artifact cache of `config`, if it has one. Nothing is
/// contacted yet: a server that is down costs the first fetch its connect
/// timeout, then the circuit breaker keeps later calls off it.
#[cfg(feature = "remote-cache")]
fn remote_tier(
    config: &JitConfig,
    signatures: Option<&Signatures>,
) -> Result<Option<RemoteTier>, JitError> {
    let remote = &config.remote;
    let backend: Box<dyn RemoteStore> = match (&remote.url, &remote.store) {
        (_, Some(store)) => Box::new(CallersStore(store.clone())),
        (Some(url), None) if url.as_str().starts_with(SharedFolderStore::SCHEME) => {
            Box::new(SharedFolderStore::from_url(url.as_str())?)
        }
        (Some(url), None) => Box::new(redis_store(url.as_str(), remote)?),
        (None, None) => return Ok(None),
    };
    let trust = remote_trust(remote, signatures)?;
    let store = format!("{backend:?}");
    let tier = RemoteTier::with_trust(backend, trust, remote.options.clone()).map_err(|error| {
        JitError::Internal(format!(
            "cannot start the remote cache's publisher thread: {error}"
        ))
    })?;
    let mode = if tier.read_only() {
        "reading"
    } else {
        "sharing"
    };
    tracing::info!(
        target: jit_store::log_targets::REMOTE,
        %store,
        keys = %tier.key_prefix(),
        read_only = tier.read_only(),
        "{mode} compiled artifacts through a remote cache (keys `{}*`)",
        tier.key_prefix()
    );
    Ok(Some(tier))
}

/// What authenticates the entries of `remote`: its shared secret (read
/// now), or `signatures`.
#[cfg(feature = "remote-cache")]
fn remote_trust(
    remote: &RemoteSettings,
    signatures: Option<&Signatures>,
) -> Result<Trust, JitError> {
    match (&remote.secret, signatures) {
        (Some(RemoteSecret::Key(secret)), _) => Ok(Trust::Shared(secret.clone())),
        (Some(RemoteSecret::File(path)), _) => Secret::from_file(path)
            .map(Trust::Shared)
            .map_err(JitError::RemoteSecret),
        (None, Some(signatures)) => Ok(signatures.trust()),
        (None, None) => Err(ConfigError::RemoteSecretMissing.into()),
    }
}

/// The Redis store at `url`, trusting `remote`'s CA file for a `rediss://`
/// server when one is set.
#[cfg(feature = "remote-cache")]
fn redis_store(url: &str, remote: &RemoteSettings) -> Result<RedisStore, JitError> {
    #[cfg(feature = "remote-cache-tls")]
    if let Some(ca_file) = &remote.ca_file {
        return Ok(RedisStore::with_ca_file(url, remote.timeouts, ca_file)?);
    }
    // Without TLS, `validate` refused a CA file.
    Ok(RedisStore::new(url, remote.timeouts)?)
}

/// A backend of the caller's own ([`JitConfigBuilder::remote_store`]),
/// shared with the configuration that holds it.
///
/// [`JitConfigBuilder::remote_store`]: crate::JitConfigBuilder::remote_store
#[cfg(feature = "remote-cache")]
#[derive(Debug)]
struct CallersStore(Arc<dyn RemoteStore>);

#[cfg(feature = "remote-cache")]
impl RemoteStore for CallersStore {
    fn get(
        &self,
        key: &str,
        max_bytes: u64,
    ) -> Result<jit_store::RemoteValue, jit_store::RemoteError> {
        self.0.get(key, max_bytes)
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), jit_store::RemoteError> {
        self.0.put(key, value)
    }

    fn take_lease(
        &self,
        lease: &str,
        owner: &str,
        ttl: std::time::Duration,
    ) -> Result<jit_store::LeaseAnswer, jit_store::RemoteError> {
        self.0.take_lease(lease, owner, ttl)
    }

    fn renew_lease(
        &self,
        lease: &str,
        owner: &str,
        ttl: std::time::Duration,
    ) -> Result<bool, jit_store::RemoteError> {
        self.0.renew_lease(lease, owner, ttl)
    }

    fn release_lease(&self, lease: &str, owner: &str) -> Result<(), jit_store::RemoteError> {
        self.0.release_lease(lease, owner)
    }
}

impl JitRuntime {
    /// Opens the device (falling back to the CPU driver when it cannot be
    /// opened, if the configuration allows) and sets up the caches. The
    /// compiler is loaded later, on the first artifact that must really be
    /// compiled.
    ///
    /// # Errors
    ///
    /// [`JitError::Runtime`] when the device (and the CPU fallback) cannot be
    /// opened, [`JitError::Unsupported`] when no target is configured for a
    /// driver whose code this crate cannot tell, [`JitError::DiskCache`]
    /// when the disk cache's folder is not safe or cannot be created,
    /// [`JitError::RemoteCache`], [`JitError::RemoteSecret`] or
    /// [`JitError::Config`] for a remote cache that cannot be set up,
    /// [`JitError::Keys`] for a signing key or trusted keys file that
    /// cannot be used, [`JitError::Bundle`] for an artifact bundle that
    /// cannot serve this program (or is not signed by a trusted key, when
    /// there are trusted keys), [`JitError::Compiler`] with
    /// [`CompileError::ReleaseMismatch`](crate::compiler::CompileError::ReleaseMismatch)
    /// for a compiler of another IREE release than the linked runtime (its
    /// `--version` is asked here, once per executable), and
    /// [`JitError::Config`] for any setting that cannot work:
    /// `new` checks the whole configuration again as
    /// [`JitConfigBuilder::build`](crate::JitConfigBuilder::build) does,
    /// since its fields are public and may have changed since, or for a
    /// `SHEAF_JIT_LOG` (or `SHEAF_JIT_TRACE`) that does not parse: `new`
    /// applies it, installing the library's stderr log (once per process;
    /// the README's "Seeing inside").
    pub fn new(config: JitConfig) -> Result<JitRuntime, JitError> {
        // The configuration's fields are public: what `build` checked may
        // have been changed since.
        config.validate()?;
        crate::logging::install_from_env()?;
        iree_safe::BufferPool::global().set_capacity(config.device.buffer_pool_bytes as u64);
        let devices = config.device.specs()?;
        let options = &config.compile.options;
        let target = config.compile.target.as_ref();
        let compiler = &config.compile.compiler;
        let workers = config.device.cpu_workers;
        let primary = Placement::primary(&devices, workers, target, options, compiler)?;
        primary.check_flags(options)?;
        let cpu = CpuFallback::for_primary(
            &primary,
            devices.cpu_fallback.as_ref(),
            workers,
            options,
            compiler,
        );
        #[cfg(feature = "disk-cache")]
        let (store, folder) = match config.disk.store_config() {
            Some(store) => {
                let folder = store.directory.clone();
                (ArtifactStore::open(store)?, Some(folder))
            }
            None => (ArtifactStore::disabled(), None),
        };
        // `validate` refused a folder: memory only (and bundles).
        #[cfg(not(feature = "disk-cache"))]
        let (store, folder) = (ArtifactStore::disabled(), None::<std::path::PathBuf>);
        if let Some(folder) = folder {
            // The compiler's `--version`, kept beside the artifacts (a
            // folder the store checked is this user's alone): a later
            // process does not run the compiler to learn it.
            match VersionFiles::open(&folder.join(compiler_versions::FOLDER)) {
                Ok(files) => iree_safe::compiler::remember_versions_with(files),
                Err(error) => {
                    let error = ErrorChain(&error);
                    tracing::warn!(
                        target: jit_store::log_targets::CACHE,
                        %error,
                        "cannot keep the compiler's version in the disk cache ({error}); each \
                         process asks the compiler"
                    );
                }
            }
        }
        let signatures = Signatures::read(&config.trust).map_err(JitError::Keys)?;
        #[cfg(feature = "remote-cache")]
        let store = match remote_tier(&config, signatures.as_ref())? {
            Some(remote) => store.with_remote(remote),
            None => store,
        };
        let bundles = config
            .bundles
            .iter()
            .map(|dir| {
                let bundle = Bundle::open(
                    dir,
                    signatures.as_ref().map(|signatures| &signatures.trusted),
                )
                .map_err(|source| JitError::Bundle {
                    path: dir.clone(),
                    source,
                })?;
                tracing::info!(
                    target: crate::log_targets::RUNTIME,
                    bundle = %bundle.dir().display(),
                    artifacts = bundle.len(),
                    signer = bundle.signer().map(tracing::field::display),
                    "serving compiled artifacts from a bundle"
                );
                Ok(bundle)
            })
            .collect::<Result<Vec<_>, JitError>>()?;
        let with_disk = store.directory().is_some();
        let dumps = config
            .compile
            .dump_dir
            .clone()
            .map(|dir| Dumps::new(dir, &config.compile.compiler));
        let pipeline = Arc::new(Pipeline::new(
            config.compile.compiler,
            (store, bundles),
            dumps,
        ));
        pipeline.refuse_another_release()?;
        // With a disk cache, what the policy learns is kept in it, and a
        // function starts from what earlier processes learned.
        let float_semantics = config.compile.float_semantics;
        let cache = if with_disk {
            let target = primary.code(float_semantics).target_identity.clone();
            let memory = DiskPolicy::new(Arc::clone(&pipeline), target);
            JitCache::remembering(config.cache.clone(), Arc::new(memory))
        } else {
            JitCache::new(config.cache.clone())
        }
        .map_err(ConfigError::from)?;
        let inner = Arc::new(Inner {
            cache,
            compile_mode: config.compile.mode,
            float_semantics,
            pipeline,
            queued: BatchQueue::new(config.compile.batch_limit, config.cache.compile_threads),
            primary_uploads: UploadCache::new(primary.device().clone(), config.uploads),
            parallel: ParallelCpu::for_primary(&primary, config.device.parallel_workers),
            primary,
            cpu,
            cpu_uploads: OnceLock::new(),
            upload_settings: config.uploads,
            profile: Profile::new(config.time_calls || config.profile_at_exit),
            profile_at_exit: config.profile_at_exit,
            profile_format: config.profile_format,
            exit_wait: config.compile.exit_wait,
            signatures,
            finished: AtomicBool::new(false),
        });
        exit::finish_at_exit(Arc::downgrade(&inner) as Weak<dyn exit::Finish>);
        if config.compile.exit_on_signals {
            exit::finish_on_signals();
        }
        Ok(JitRuntime { inner })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_checks_the_whole_configuration_as_build_does() {
        let error = |edit: fn(&mut JitConfig)| {
            let mut config = JitConfig::builder().build().unwrap();
            edit(&mut config);
            let error = JitRuntime::new(config).expect_err("refused");
            assert!(matches!(error, JitError::Config(_)), "{error}");
            error.to_string()
        };
        let disk = error(|config| config.disk.max_bytes = 0);
        assert!(disk.contains("disk.max_bytes"), "{disk}");
        let driver = error(|config| config.device.driver.clear());
        assert!(driver.contains("device.driver"), "{driver}");
        let capacity = error(|config| config.cache.function_capacity = 0);
        assert!(capacity.contains("function_capacity"), "{capacity}");
    }
}
