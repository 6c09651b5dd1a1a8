//! Settings of a [`JitRuntime`](crate::JitRuntime), by composition: one
//! settings struct per part of the runtime (`compile.rs`, `disk.rs`,
//! `remote.rs`, `trust.rs`, `uploads.rs`; the device's is the placement's own,
//! `placement/settings.rs`; the cache policy is
//! [`jit_cache::CacheConfig`], whose docs give its defaults and their
//! reasons), a builder that edits them, and the `SHEAF_JIT_*` environment
//! variables that override them (`env.rs`: the table [`ENV_VARIABLES`],
//! which drives the parser and which the README's table must match). This
//! module is the one place that knows those variables and the application's
//! defaults. `IREE_COMPILER_LIB` and `IREE_COMPILE` locate the compiler
//! (see `iree_safe::compiler`).

mod compile;
mod disk;
mod env;
mod ranges;
#[cfg(feature = "remote-cache")]
mod remote;
mod trust;
mod uploads;

use std::path::PathBuf;
#[cfg(feature = "remote-cache")]
use std::sync::Arc;

use jit_cache::CacheConfig;

use crate::error::ConfigError;

pub use crate::placement::{DeviceSettings, FloatSemantics};
pub use compile::{CompileMode, CompileSettings};
pub use disk::{DiskCacheFolder, DiskCacheSettings, DEFAULT_CACHE_FOLDER, PROJECT_CACHE_FOLDER};
pub(crate) use env::{log_filter, LOG_ENV};
pub use env::{EnvVariable, ENV_VARIABLES};
#[cfg(feature = "remote-cache")]
pub use remote::{RemoteCacheUrl, RemoteSecret, RemoteSettings};
pub use trust::{SigningKeySource, TrustSettings, TrustedKey};
pub use uploads::UploadSettings;

/// Settings of a [`JitRuntime`](crate::JitRuntime): the settings of each of
/// its parts. Build one with [`JitConfig::builder`], which edits them one
/// part at a time, or take the defaults and the environment with
/// [`JitConfig::from_env`].
///
/// ```
/// use sheaf_integration::{settings::{CompileMode, DiskCacheFolder}, JitConfig};
///
/// let config = JitConfig::builder()
///     .device(|device| device.driver = "local-task".into())
///     .cache(|cache| {
///         cache.function_capacity = 4;
///         cache.function_capacity_overrides.insert("softmax".into(), 2);
///     })
///     .compile(|compile| compile.mode = CompileMode::Blocking)
///     .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
///     .build()?;
/// assert_eq!(config.cache.capacity_for("softmax"), 2);
/// # Ok::<(), sheaf_integration::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct JitConfig {
    /// The device, and the CPU driver to fall back on.
    pub device: DeviceSettings,
    /// The cache policy, and the threads that run background compiles.
    pub cache: CacheConfig,
    /// How signatures are compiled.
    pub compile: CompileSettings,
    /// The artifact disk cache (a folder only with the `disk-cache`
    /// feature: without it the setting must stay
    /// [`DiskCacheFolder::Disabled`], its default then).
    pub disk: DiskCacheSettings,
    /// The remote artifact cache behind the disk cache (off by default;
    /// feature `remote-cache`).
    #[cfg(feature = "remote-cache")]
    pub remote: RemoteSettings,
    /// Signatures on the remote cache's entries and on bundles: the key a
    /// builder signs with, the keys a reader trusts (none by default).
    pub trust: TrustSettings,
    /// The upload cache's bounds.
    pub uploads: UploadSettings,
    /// Exported artifact bundles to serve calls from, before the disk cache
    /// and the compiler (see `JitRuntime::export_artifacts`).
    pub bundles: Vec<PathBuf>,
    /// Prints the `--jit-profile` table ([`JitRuntime::profile`](crate::JitRuntime::profile))
    /// to standard error when the runtime's last handle is dropped, or when
    /// the process exits with the runtime alive (in a `static`, say).
    /// Default off.
    pub profile_at_exit: bool,
    /// How that profile is printed: the table, or one line of JSON (the
    /// `serde` feature; `SHEAF_JIT_PROFILE=json`).
    pub profile_format: ProfileFormat,
    /// Times the phases every compiled call goes through (key + lookup,
    /// input transfer, call) for [`JitRuntime::profile`](crate::JitRuntime::profile),
    /// which counts them either way: three clock reads a call, about a
    /// twentieth of a small call (`cargo bench -p sheaf-integration --bench
    /// cached_call`). Default off; on whenever
    /// [`profile_at_exit`](Self::profile_at_exit) is (`SHEAF_JIT_PROFILE`).
    /// Lowering, compiles and interpreted calls are always timed.
    pub time_calls: bool,
}

/// How the profile at exit is printed ([`JitConfig::profile_format`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProfileFormat {
    /// The `--jit-profile` table.
    #[default]
    Table,
    /// [`ProfileReport`](crate::stats::ProfileReport) as one line of JSON
    /// (`serde_json`), for a script; needs the `serde` feature.
    Json,
}

impl JitConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> JitConfigBuilder {
        JitConfigBuilder {
            config: JitConfig::default(),
            applied: Vec::new(),
        }
    }

    /// The defaults, overridden by the `SHEAF_JIT_*` environment variables
    /// ([`ENV_VARIABLES`]).
    ///
    /// # Errors
    ///
    /// A variable whose value does not parse, or settings that cannot work
    /// together (see [`JitConfigBuilder::build`]).
    pub fn from_env() -> Result<JitConfig, ConfigError> {
        JitConfig::builder().apply_env()?.build()
    }

    /// Checks every part's settings, as [`JitConfigBuilder::build`] does
    /// (and [`JitRuntime::new`](crate::JitRuntime::new) again, since the
    /// fields are public).
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        ranges::check(self)?;
        self.cache.validate()?;
        self.device.validate()?;
        self.compile.validate()?;
        self.disk.validate()?;
        #[cfg(feature = "remote-cache")]
        self.remote.validate(&self.trust)?;
        if self.profile_format == ProfileFormat::Json && !cfg!(feature = "serde") {
            return Err(ConfigError::FeatureDisabled {
                setting: "profile_format",
                part: "profile as JSON",
                feature: "serde",
            });
        }
        Ok(())
    }
}

/// Builds a [`JitConfig`] by editing the settings of one part at a time;
/// later edits, and [`apply_env`](Self::apply_env), override earlier ones.
#[derive(Debug, Clone)]
pub struct JitConfigBuilder {
    config: JitConfig,
    /// The variables [`apply_vars`](Self::apply_vars) applied: an error of
    /// a setting one of them set names the variable.
    applied: Vec<&'static str>,
}

impl JitConfigBuilder {
    /// Edits the device settings.
    pub fn device(mut self, edit: impl FnOnce(&mut DeviceSettings)) -> Self {
        edit(&mut self.config.device);
        self
    }

    /// Edits the cache policy: capacities, budgets, dynamic dims, thrash
    /// detection, compile threads.
    pub fn cache(mut self, edit: impl FnOnce(&mut CacheConfig)) -> Self {
        edit(&mut self.config.cache);
        self
    }

    /// Edits how signatures are compiled.
    pub fn compile(mut self, edit: impl FnOnce(&mut CompileSettings)) -> Self {
        edit(&mut self.config.compile);
        self
    }

    /// Edits the disk cache settings.
    pub fn disk(mut self, edit: impl FnOnce(&mut DiskCacheSettings)) -> Self {
        edit(&mut self.config.disk);
        self
    }

    /// Edits whose signatures the remote cache and bundles need, and the
    /// key this process signs with.
    pub fn trust(mut self, edit: impl FnOnce(&mut TrustSettings)) -> Self {
        edit(&mut self.config.trust);
        self
    }

    /// Edits the remote cache settings.
    #[cfg(feature = "remote-cache")]
    pub fn remote(mut self, edit: impl FnOnce(&mut RemoteSettings)) -> Self {
        edit(&mut self.config.remote);
        self
    }

    /// Shares compiled artifacts through `store`, a backend of your own,
    /// instead of a Redis server or a shared folder named by
    /// [`RemoteSettings::url`] (which must then be unset). Everything else
    /// is as with the built-in backends: the entries are authenticated
    /// with [`RemoteSettings::secret`] (or signatures, [`JitConfig::trust`]), a store that fails is a
    /// miss, and the leases that make a cluster compile each artifact once
    /// work if the store implements them (its provided lease methods mean
    /// none: every process that misses compiles).
    ///
    /// A backend on a map in memory (one process; a real one talks to a
    /// shared service, bounding each request with a timeout):
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use std::sync::{Arc, Mutex};
    ///
    /// use sheaf_integration::settings::{RemoteSecret, RemoteStore, RemoteValue, Secret};
    /// use sheaf_integration::{JitConfig, RemoteError};
    ///
    /// #[derive(Debug, Default)]
    /// struct InMemory(Mutex<HashMap<String, Vec<u8>>>);
    ///
    /// impl RemoteStore for InMemory {
    ///     fn get(&self, key: &str, max_bytes: u64) -> Result<RemoteValue, RemoteError> {
    ///         Ok(match self.0.lock().unwrap().get(key) {
    ///             None => RemoteValue::Missing,
    ///             Some(value) if value.len() as u64 > max_bytes => {
    ///                 RemoteValue::TooLarge(value.len() as u64)
    ///             }
    ///             Some(value) => RemoteValue::Found(value.clone()),
    ///         })
    ///     }
    ///
    ///     fn put(&self, key: &str, value: &[u8]) -> Result<(), RemoteError> {
    ///         self.0.lock().unwrap().insert(key.to_owned(), value.to_vec());
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let config = JitConfig::builder()
    ///     .remote_store(Arc::new(InMemory::default()))
    ///     .remote(|remote| {
    ///         remote.secret = Some(RemoteSecret::Key(Secret::from_bytes([7; Secret::LEN])));
    ///     })
    ///     .build()?;
    /// assert!(config.remote.store.is_some());
    /// # Ok::<(), sheaf_integration::ConfigError>(())
    /// ```
    #[cfg(feature = "remote-cache")]
    pub fn remote_store(
        mut self,
        store: Arc<dyn jit_store::RemoteStore + std::panic::RefUnwindSafe>,
    ) -> Self {
        self.config.remote.store = Some(store);
        self
    }

    /// Edits the upload cache's bounds.
    pub fn uploads(mut self, edit: impl FnOnce(&mut UploadSettings)) -> Self {
        edit(&mut self.config.uploads);
        self
    }

    /// Serves calls from the artifact bundle in `dir` (see
    /// `JitRuntime::export_artifacts`); may be given several times. Its
    /// folders and files must belong to this user or root and be writable
    /// by no one else, or `JitRuntime::new` fails saying what to run.
    pub fn artifact_bundle(mut self, dir: impl Into<PathBuf>) -> Self {
        self.config.bundles.push(dir.into());
        self
    }

    /// Prints the profile to standard error when the runtime is dropped or
    /// the process exits ([`JitConfig::profile_at_exit`]; Sheaf's
    /// `--jit-profile`).
    pub fn profile_at_exit(mut self, on: bool) -> Self {
        self.config.profile_at_exit = on;
        self
    }

    /// Times the phases of every call for the profile
    /// ([`JitConfig::time_calls`]).
    pub fn time_calls(mut self, on: bool) -> Self {
        self.config.time_calls = on;
        self
    }

    /// Prints the profile at exit as `format` says
    /// ([`JitConfig::profile_format`]).
    pub fn profile_format(mut self, format: ProfileFormat) -> Self {
        self.config.profile_format = format;
        self
    }

    /// Validates and returns the configuration.
    ///
    /// # Errors
    ///
    /// A setting that cannot work, named: a cache policy setting of 0
    /// ([`ConfigError::Cache`]), no driver, a disk cache bound of 0, a
    /// remote cache without a secret ([`ConfigError::RemoteSecretMissing`])
    /// or with a timeout of 0, a disk cache folder in a build without the
    /// `disk-cache` feature ([`ConfigError::FeatureDisabled`]).
    ///
    /// A setting out of its range (each numeric one has one: the README's
    /// Configuration table states it) is [`ConfigError::Invalid`] naming
    /// the field; an error of a setting that a variable set names the
    /// variable.
    pub fn build(self) -> Result<JitConfig, ConfigError> {
        self.config
            .validate()
            .map_err(|error| ranges::name_variables(error, &self.applied))?;
        Ok(self.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_keep_f64() {
        let config = JitConfig::builder().build().unwrap();
        assert_eq!(config.device.driver, "auto");
        #[cfg(feature = "disk-cache")]
        assert_eq!(config.disk.folder, DiskCacheFolder::UserCache);
        #[cfg(not(feature = "disk-cache"))]
        assert_eq!(config.disk.folder, DiskCacheFolder::Disabled);
        #[cfg(feature = "remote-cache")]
        assert!(config.remote.url.is_none());
        assert!(config.bundles.is_empty());
        assert!(config
            .compile
            .options
            .extra_flags
            .iter()
            .any(|f| f == "--iree-input-demote-f64-to-f32=false"));
    }

    #[test]
    fn build_names_the_setting_that_cannot_work() {
        let error = |builder: JitConfigBuilder| builder.build().unwrap_err().to_string();
        let capacity = error(JitConfig::builder().cache(|cache| cache.function_capacity = 0));
        assert!(capacity.contains("function_capacity"), "{capacity}");
        let driver = error(JitConfig::builder().device(|device| device.driver.clear()));
        assert!(driver.contains("device.driver"), "{driver}");
        let fallback =
            error(JitConfig::builder().device(|device| device.cpu_fallback = Some("auto".into())));
        assert!(fallback.contains("device.cpu_fallback"), "{fallback}");
        let disk = error(JitConfig::builder().disk(|disk| disk.max_bytes = 0));
        assert!(disk.contains("disk.max_bytes"), "{disk}");
        #[cfg(feature = "remote-cache")]
        {
            let remote = error(
                JitConfig::builder()
                    .remote(|remote| remote.url = Some(RemoteCacheUrl::new("redis://c"))),
            );
            assert!(remote.contains("SHEAF_JIT_REMOTE_SECRET_FILE"), "{remote}");
        }
        #[cfg(not(feature = "disk-cache"))]
        {
            let disk =
                error(JitConfig::builder().disk(|disk| disk.folder = DiskCacheFolder::UserCache));
            assert!(disk.contains("`disk-cache`"), "{disk}");
        }
    }
}
