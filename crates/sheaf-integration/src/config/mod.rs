//! Settings of a [`JitRuntime`](crate::JitRuntime): a builder, and the
//! `SHEAF_JIT_*` environment variables that override it. This module is the
//! one place that knows those variables and the application's defaults.
//!
//! | variable | setting | default |
//! | --- | --- | --- |
//! | `SHEAF_JIT_DRIVER` | IREE driver or device URI | `local-sync` |
//! | `SHEAF_JIT_CAPACITY` | signatures cached per function | 8 |
//! | `SHEAF_JIT_MAX_ENTRIES` | entries cached across functions | 4096 |
//! | `SHEAF_JIT_MAX_BYTES` | artifact bytes cached across functions (`512M` style) | 256M |
//! | `SHEAF_JIT_CACHE_POLICY` | `adaptive` or `lru-cool-down` | `adaptive` |
//! | `SHEAF_JIT_THRASH_WINDOW` | calls in the thrash window (`lru-cool-down` only) | 64 |
//! | `SHEAF_JIT_THRASH_THRESHOLD` | compiles per window before fallback (`lru-cool-down` only) | 16 |
//! | `SHEAF_JIT_THRASH_COOL_DOWN` | fallback calls before a probe (`lru-cool-down` only) | 256 |
//! | `SHEAF_JIT_THRASH_COOL_DOWN_CAP` | longest cool-down after relapses (`lru-cool-down` only) | 16384 |
//! | `SHEAF_JIT_COMPILE_MODE` | `background` (a miss runs in the interpreter while it compiles) or `blocking` (it waits for its compile) | `background` |
//! | `SHEAF_JIT_COMPILE_THREADS` | background compile threads | 2 |
//! | `SHEAF_JIT_FAILED_RETRY` | calls of a failed signature before it compiles again | 1000 |
//! | `SHEAF_JIT_DYNAMIC_DIMS` | `on`: a function whose lowering accepts dynamic dims gets one for a dim that varies; `off`: every shape is its own variant | `on` |
//! | `SHEAF_JIT_DYNAMIC_DIMS_AFTER` | distinct values a dim takes before it is compiled dynamic | 2 |
//! | `SHEAF_JIT_STATIC_SHAPES` | functions (names, separated by `,`) that never get dynamic dims | none |
//! | `SHEAF_JIT_COMPILER` | `auto`, `in-process` or `subprocess` | `auto` |
//! | `SHEAF_JIT_CACHE_DIR` | disk cache folder | `$XDG_CACHE_HOME/sheaf-jit`, else `$HOME/.cache/sheaf-jit` |
//! | `SHEAF_JIT_DISK_CACHE` | `on` or `off` (also `1`/`0`, `true`/`false`, `yes`/`no`) | `on` |
//! | `SHEAF_JIT_CACHE_MAX_BYTES` | disk cache size bound (`512M` style) | 1G |
//! | `SHEAF_JIT_CPU_FALLBACK` | CPU driver used when the device cannot be opened or a GPU compile fails; `off` for none | `local-sync` |
//! | `SHEAF_JIT_UPLOAD_CACHE_MAX_BYTES` | device copies of reused host arrays kept (`0` disables) | 256M |
//! | `SHEAF_JIT_BUNDLES` | artifact bundles to serve calls from, separated by `:` | none |
//! | `SHEAF_JIT_TRACE` | `1`: one line per miss/compile/evict/fallback (see `trace`) | off |
//! | `SHEAF_JIT_REMOTE_CACHE` | remote artifact cache shared by a cluster: `redis://[:password@]host[:port][/db]` (no TLS) | off |
//! | `SHEAF_JIT_REMOTE_SECRET_FILE` | the cluster's shared secret: a file of 32 random bytes, owner-only (required with a remote cache) | none |
//! | `SHEAF_JIT_REMOTE_TIMEOUT` | milliseconds a remote request may wait for each read or write | 500 |
//! | `SHEAF_JIT_REMOTE_CONNECT_TIMEOUT` | milliseconds to connect to the remote cache | 200 |
//! | `SHEAF_JIT_REMOTE_MAX_ENTRY` | largest artifact published or fetched (`512M` style) | 64M |
//! | `SHEAF_JIT_REMOTE_COOL_DOWN` | milliseconds the remote cache is left alone after 3 failures in a row | 30000 |
//!
//! An empty variable is unset. Any other value that does not parse is an
//! error naming the variable, never a silent default. The defaults of the
//! cache policy and their reasons are documented on
//! [`jit_cache::CacheConfig`]. `IREE_COMPILER_LIB` and `IREE_COMPILE` locate
//! the compiler (see `iree_safe::compiler`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::str::FromStr;

use std::time::Duration;

use iree_safe::compiler::{CompileOptions, CompileTarget, CompilerPreference};
use jit_cache::store::{RedisStore, RemoteOptions, RemoteTimeouts, Secret, StoreConfig};
use jit_cache::{ByteSize, CacheConfig, CachePolicy};

use crate::error::ConfigError;

/// The folder name of the disk cache inside the user's cache directory.
pub const DEFAULT_CACHE_FOLDER: &str = "sheaf-jit";

/// The disk cache's folder inside a project
/// ([`JitConfigBuilder::project_cache`]), next to Sheaf's own `__sheaf__/`
/// files.
pub const PROJECT_CACHE_FOLDER: &str = "__sheaf__/jit-cache";

/// Whether a call that misses waits for its compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CompileMode {
    /// The call compiles (or waits for the compile in flight) and runs
    /// compiled code: deterministic, for tests and benchmarks.
    Blocking,
    /// The call runs in the interpreter at once and queues the compile on
    /// the background pool (`CacheConfig::compile_threads` threads); later
    /// calls run compiled once it is done. Provenance says
    /// [`Fallback::CompilingInBackground`](crate::Fallback::CompilingInBackground).
    /// The default: a new signature costs its caller the interpreter's time
    /// instead of IREE's compile (0.1 ms instead of 390 ms for a small
    /// sigmoid; `cargo bench -p sheaf-integration --bench background`).
    #[default]
    Background,
}

impl FromStr for CompileMode {
    type Err = &'static str;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "blocking" => Ok(CompileMode::Blocking),
            "background" => Ok(CompileMode::Background),
            _ => Err("`blocking` or `background`"),
        }
    }
}

/// `SHEAF_JIT_TRACE` from the environment: `Some(true)` for `1`/`on`/...,
/// `Some(false)` for `0`/`off`/..., `None` when unset or empty; any other
/// value is an error naming the variable.
#[cfg(feature = "trace-subscriber")]
pub(crate) fn trace_switch() -> Result<Option<bool>, ConfigError> {
    Vars(&|name| std::env::var_os(name)).switch(crate::TRACE_ENV)
}

/// Where compiled artifacts are kept between processes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DiskCacheSetting {
    /// The user's cache directory: `$XDG_CACHE_HOME/sheaf-jit`, else
    /// `$HOME/.cache/sheaf-jit`; none when neither is set.
    #[default]
    UserCache,
    /// This folder.
    Dir(PathBuf),
    /// No disk cache.
    Disabled,
}

/// The address of a remote artifact cache (`redis://[:password@]host...`);
/// `Debug` and `Display` hide its password.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteCacheUrl(String);

impl RemoteCacheUrl {
    /// The address, password included.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for RemoteCacheUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", RedisStore::redacted(&self.0))
    }
}

impl std::fmt::Display for RemoteCacheUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&RedisStore::redacted(&self.0))
    }
}

/// Where the shared secret of the remote artifact cache comes from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RemoteSecret {
    /// These bytes.
    Key(Secret),
    /// A file of 32 bytes that only this user can read and write, read
    /// when the runtime starts.
    File(PathBuf),
}

/// Settings of a [`JitRuntime`](crate::JitRuntime).
///
/// ```
/// use sheaf_integration::JitConfig;
///
/// let config = JitConfig::builder()
///     .driver("local-task")
///     .function_capacity(4)
///     .capacity_for("softmax", 2)
///     .no_disk_cache()
///     .build()
///     .unwrap();
/// assert_eq!(config.cache.capacity_for("softmax"), 2);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JitConfig {
    /// IREE driver or device URI (`local-sync`, `local-task`, `cuda`).
    pub driver: String,
    /// The cache policy.
    pub cache: CacheConfig,
    /// Whether a miss waits for its compile.
    pub compile_mode: CompileMode,
    /// Compiler implementation.
    pub compiler: CompilerPreference,
    /// Compiler options (target backend, CPU, extra flags).
    pub compile_options: CompileOptions,
    /// What to compile for; `None`: what the device needs (the CPU for
    /// `local-*`, the device's `sm_XY` for `cuda`, ...).
    pub target: Option<CompileTarget>,
    /// The CPU driver to use when the device cannot be opened, or when a
    /// signature does not compile for the GPU; `None` makes both errors.
    pub cpu_fallback: Option<String>,
    /// Artifact disk cache folder.
    pub disk_cache: DiskCacheSetting,
    /// Bound on the disk cache's size, in bytes.
    pub disk_cache_max_bytes: u64,
    /// Device copies of reused host arrays kept, at most (0 disables the
    /// upload cache).
    pub upload_cache_entries: usize,
    /// Their bytes, at most (0 disables the upload cache).
    pub upload_cache_bytes: usize,
    /// Exported artifact bundles to serve calls from, before the disk cache
    /// and the compiler.
    pub artifact_bundles: Vec<PathBuf>,
    /// The remote artifact cache behind the disk cache
    /// (`redis://host:port`); `None`: none.
    pub remote_cache: Option<RemoteCacheUrl>,
    /// The secret that authenticates the remote cache's entries, shared by
    /// every process that uses it; required with a remote cache.
    pub remote_cache_secret: Option<RemoteSecret>,
    /// How long the remote cache may take.
    pub remote_cache_timeouts: RemoteTimeouts,
    /// Its size bound and circuit breaker.
    pub remote_cache_options: RemoteOptions,
}

impl Default for JitConfig {
    fn default() -> Self {
        JitConfig {
            driver: "local-sync".into(),
            cache: CacheConfig::default(),
            compile_mode: CompileMode::default(),
            compiler: CompilerPreference::Auto,
            compile_options: default_compile_options(),
            target: None,
            cpu_fallback: Some("local-sync".into()),
            disk_cache: DiskCacheSetting::UserCache,
            disk_cache_max_bytes: StoreConfig::DEFAULT_MAX_BYTES,
            upload_cache_entries: 256,
            upload_cache_bytes: 256 << 20,
            artifact_bundles: Vec::new(),
            remote_cache: None,
            remote_cache_secret: None,
            remote_cache_timeouts: RemoteTimeouts::default(),
            remote_cache_options: RemoteOptions::default(),
        }
    }
}

/// StableHLO input, and f64 kept as f64 (IREE demotes it to f32 by default,
/// which would silently change Sheaf's numerics).
fn default_compile_options() -> CompileOptions {
    let mut options = CompileOptions::stablehlo();
    options
        .extra_flags
        .push("--iree-input-demote-f64-to-f32=false".into());
    options
}

impl JitConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> JitConfigBuilder {
        JitConfigBuilder {
            config: JitConfig::default(),
        }
    }

    /// The defaults, overridden by the `SHEAF_JIT_*` environment variables.
    pub fn from_env() -> Result<JitConfig, ConfigError> {
        JitConfig::builder().apply_env()?.build()
    }

    /// Where the disk cache lives under this configuration, if anywhere:
    /// `None` when it is disabled, or when it should be in the user's cache
    /// directory and neither `XDG_CACHE_HOME` nor `HOME` is set.
    pub fn disk_cache_config(&self) -> Option<StoreConfig> {
        self.disk_cache_config_with(|name| std::env::var_os(name))
    }

    fn disk_cache_config_with(
        &self,
        var: impl Fn(&str) -> Option<OsString>,
    ) -> Option<StoreConfig> {
        let set = |name: &str| var(name).filter(|value| !value.is_empty());
        let directory = match &self.disk_cache {
            DiskCacheSetting::Disabled => return None,
            DiskCacheSetting::Dir(dir) => dir.clone(),
            DiskCacheSetting::UserCache => set("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| set("HOME").map(|home| PathBuf::from(home).join(".cache")))?
                .join(DEFAULT_CACHE_FOLDER),
        };
        Some(StoreConfig {
            directory,
            max_bytes: self.disk_cache_max_bytes,
        })
    }
}

/// Builds a [`JitConfig`].
#[derive(Debug, Clone)]
pub struct JitConfigBuilder {
    config: JitConfig,
}

impl JitConfigBuilder {
    /// The IREE driver or device URI.
    pub fn driver(mut self, driver: impl Into<String>) -> Self {
        self.config.driver = driver.into();
        self
    }

    /// Signatures cached per function.
    pub fn function_capacity(mut self, capacity: usize) -> Self {
        self.config.cache.function_capacity = capacity;
        self
    }

    /// Signatures cached for the function called `name`.
    pub fn capacity_for(mut self, name: impl Into<String>, capacity: usize) -> Self {
        self.config
            .cache
            .function_capacity_overrides
            .insert(name.into(), capacity);
        self
    }

    /// Entries cached across all functions.
    pub fn max_total_entries(mut self, entries: usize) -> Self {
        self.config.cache.max_total_entries = entries;
        self
    }

    /// Artifact bytes cached across all functions.
    pub fn max_total_bytes(mut self, bytes: usize) -> Self {
        self.config.cache.max_total_bytes = bytes;
        self
    }

    /// How a full function cache chooses what to compile
    /// ([`CachePolicy::Adaptive`] by default).
    pub fn policy(mut self, policy: CachePolicy) -> Self {
        self.config.cache.policy = policy;
        self
    }

    /// Thrash detection of [`CachePolicy::LruCoolDown`] (set it with
    /// [`policy`](Self::policy)): `threshold` compiles within `window` calls
    /// switch a function to fallback for `cool_down` calls.
    pub fn thrash(mut self, window: u64, threshold: usize, cool_down: u64) -> Self {
        self.config.cache.thrash_window = window;
        self.config.cache.thrash_threshold = threshold;
        self.config.cache.thrash_cool_down = cool_down;
        self
    }

    /// The longest cool-down after repeated relapses.
    pub fn thrash_cool_down_cap(mut self, cap: u64) -> Self {
        self.config.cache.thrash_cool_down_cap = cap;
        self
    }

    /// Calls of a signature whose compile failed that run in the
    /// interpreter before it is compiled again.
    pub fn failed_compile_retry_after(mut self, calls: u64) -> Self {
        self.config.cache.failed_compile_retry_after = calls;
        self
    }

    /// Whether functions whose lowering accepts dynamic dims
    /// ([`JitFunction::with_dynamic_dims`](crate::JitFunction::with_dynamic_dims))
    /// get a variant with a dim dynamic once it has taken `after` distinct
    /// values (default: on, after 2).
    pub fn dynamic_dims(mut self, on: bool, after: usize) -> Self {
        self.config.cache.dynamic_dims = on;
        self.config.cache.dynamic_dims_after = after;
        self
    }

    /// Keeps the dims of the function called `name` static, whatever its
    /// lowering accepts.
    pub fn static_shapes_for(mut self, name: impl Into<String>) -> Self {
        self.config.cache.static_shape_functions.insert(name.into());
        self
    }

    /// The whole cache policy at once.
    pub fn cache_config(mut self, cache: CacheConfig) -> Self {
        self.config.cache = cache;
        self
    }

    /// Whether a miss waits for its compile ([`CompileMode::Blocking`]) or
    /// runs in the interpreter while `threads` background threads compile
    /// ([`CompileMode::Background`]).
    pub fn compile_mode(mut self, mode: CompileMode, threads: usize) -> Self {
        self.config.compile_mode = mode;
        self.config.cache.compile_threads = threads;
        self
    }

    /// Compiler implementation.
    pub fn compiler(mut self, choice: CompilerPreference) -> Self {
        self.config.compiler = choice;
        self
    }

    /// Compiler options.
    pub fn compile_options(mut self, options: CompileOptions) -> Self {
        self.config.compile_options = options;
        self
    }

    /// Compile for `target` instead of what the device needs.
    pub fn target(mut self, target: CompileTarget) -> Self {
        self.config.target = Some(target);
        self
    }

    /// The CPU driver to fall back on (`None`: no fallback).
    pub fn cpu_fallback(mut self, driver: Option<&str>) -> Self {
        self.config.cpu_fallback = driver.map(str::to_owned);
        self
    }

    /// Keep compiled artifacts in the project at `root`, in
    /// `root/__sheaf__/jit-cache` ([`PROJECT_CACHE_FOLDER`]).
    pub fn project_cache(self, root: impl AsRef<std::path::Path>) -> Self {
        self.disk_cache_dir(root.as_ref().join(PROJECT_CACHE_FOLDER))
    }

    /// Bounds of the upload cache (0 for either disables it).
    pub fn upload_cache(mut self, entries: usize, bytes: usize) -> Self {
        self.config.upload_cache_entries = entries;
        self.config.upload_cache_bytes = bytes;
        self
    }

    /// Serve calls from the artifact bundle in `dir` (see
    /// `JitRuntime::export_artifacts`); may be given several times.
    pub fn artifact_bundle(mut self, dir: impl Into<PathBuf>) -> Self {
        self.config.artifact_bundles.push(dir.into());
        self
    }

    /// Keep compiled artifacts in `dir` between processes.
    pub fn disk_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.config.disk_cache = DiskCacheSetting::Dir(dir.into());
        self
    }

    /// Bound on the disk cache's size.
    pub fn disk_cache_max_bytes(mut self, bytes: u64) -> Self {
        self.config.disk_cache_max_bytes = bytes;
        self
    }

    /// No disk cache.
    pub fn no_disk_cache(mut self) -> Self {
        self.config.disk_cache = DiskCacheSetting::Disabled;
        self
    }

    /// Share compiled artifacts with other processes and machines through
    /// the Redis server at `url` (`redis://[:password@]host[:port][/db]`):
    /// a miss on disk asks it before compiling, a compile is published to
    /// it. Requires a shared secret
    /// ([`remote_cache_secret`](Self::remote_cache_secret) or
    /// [`remote_cache_secret_file`](Self::remote_cache_secret_file)): whoever
    /// can write the server could otherwise run code in this process.
    pub fn remote_cache(mut self, url: impl Into<String>) -> Self {
        self.config.remote_cache = Some(RemoteCacheUrl(url.into()));
        self
    }

    /// The remote cache's shared secret (the same 32 bytes on every
    /// machine).
    pub fn remote_cache_secret(mut self, secret: Secret) -> Self {
        self.config.remote_cache_secret = Some(RemoteSecret::Key(secret));
        self
    }

    /// The remote cache's shared secret, from a file of 32 bytes that only
    /// this user can read and write (checked when the runtime starts).
    pub fn remote_cache_secret_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.remote_cache_secret = Some(RemoteSecret::File(path.into()));
        self
    }

    /// How long the remote cache may take to connect, and for each read or
    /// write of a request.
    pub fn remote_cache_timeouts(mut self, connect: Duration, request: Duration) -> Self {
        self.config.remote_cache_timeouts = RemoteTimeouts { connect, request };
        self
    }

    /// The largest artifact published to or fetched from the remote cache.
    pub fn remote_cache_max_entry_bytes(mut self, bytes: u64) -> Self {
        self.config.remote_cache_options.max_entry_bytes = bytes;
        self
    }

    /// The remote cache's circuit breaker: after `failures` failed requests
    /// in a row it is left alone for `cool_down`, then probed once.
    pub fn remote_cache_breaker(mut self, failures: u32, cool_down: Duration) -> Self {
        self.config.remote_cache_options.failure_threshold = failures;
        self.config.remote_cache_options.cool_down = cool_down;
        self
    }

    /// Applies the `SHEAF_JIT_*` environment variables (see the module
    /// docs); fails naming the variable whose value does not parse.
    pub fn apply_env(self) -> Result<Self, ConfigError> {
        self.apply_vars(|name| std::env::var_os(name))
    }

    /// [`apply_env`](Self::apply_env) over any variable lookup: settings
    /// from a file, a test, or another process's environment.
    ///
    /// ```
    /// use sheaf_integration::JitConfig;
    ///
    /// let vars = |name: &str| (name == "SHEAF_JIT_CAPACITY").then(|| "3".into());
    /// let config = JitConfig::builder().apply_vars(vars)?.build()?;
    /// assert_eq!(config.cache.function_capacity, 3);
    /// let bad = |name: &str| (name == "SHEAF_JIT_DISK_CACHE").then(|| "bogus".into());
    /// assert!(JitConfig::builder().apply_vars(bad).is_err());
    /// # Ok::<(), sheaf_integration::ConfigError>(())
    /// ```
    pub fn apply_vars(
        mut self,
        var: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Self, ConfigError> {
        let vars = Vars(&var);
        let cache = &mut self.config.cache;
        if let Some(driver) = vars.text("SHEAF_JIT_DRIVER")? {
            self.config.driver = driver;
        }
        vars.parse("SHEAF_JIT_CAPACITY", &mut cache.function_capacity)?;
        vars.parse("SHEAF_JIT_MAX_ENTRIES", &mut cache.max_total_entries)?;
        if let Some(ByteSize(bytes)) = vars.value("SHEAF_JIT_MAX_BYTES")? {
            cache.max_total_bytes = usize::try_from(bytes).map_err(|_| {
                ConfigError::invalid(
                    "SHEAF_JIT_MAX_BYTES",
                    bytes.to_string(),
                    "a size this machine can address",
                )
            })?;
        }
        vars.parse("SHEAF_JIT_CACHE_POLICY", &mut cache.policy)?;
        vars.parse("SHEAF_JIT_COMPILE_THREADS", &mut cache.compile_threads)?;
        vars.parse("SHEAF_JIT_THRASH_WINDOW", &mut cache.thrash_window)?;
        vars.parse("SHEAF_JIT_THRASH_THRESHOLD", &mut cache.thrash_threshold)?;
        vars.parse("SHEAF_JIT_THRASH_COOL_DOWN", &mut cache.thrash_cool_down)?;
        vars.parse(
            "SHEAF_JIT_THRASH_COOL_DOWN_CAP",
            &mut cache.thrash_cool_down_cap,
        )?;
        vars.parse(
            "SHEAF_JIT_FAILED_RETRY",
            &mut cache.failed_compile_retry_after,
        )?;
        if let Some(on) = vars.switch("SHEAF_JIT_DYNAMIC_DIMS")? {
            cache.dynamic_dims = on;
        }
        vars.parse(
            "SHEAF_JIT_DYNAMIC_DIMS_AFTER",
            &mut cache.dynamic_dims_after,
        )?;
        if let Some(names) = vars.text("SHEAF_JIT_STATIC_SHAPES")? {
            cache.static_shape_functions.extend(
                names
                    .split(',')
                    .map(str::trim)
                    .filter(|name| !name.is_empty())
                    .map(str::to_owned),
            );
        }
        vars.parse("SHEAF_JIT_COMPILE_MODE", &mut self.config.compile_mode)?;
        if let Some(choice) = vars.text("SHEAF_JIT_COMPILER")? {
            self.config.compiler = match choice.as_str() {
                "auto" => CompilerPreference::Auto,
                "in-process" => CompilerPreference::InProcess,
                "subprocess" => CompilerPreference::Subprocess,
                _ => {
                    return Err(ConfigError::invalid(
                        "SHEAF_JIT_COMPILER",
                        choice,
                        "`auto`, `in-process` or `subprocess`",
                    ))
                }
            };
        }
        if let Some(dir) = var("SHEAF_JIT_CACHE_DIR").filter(|dir| !dir.is_empty()) {
            self.config.disk_cache = DiskCacheSetting::Dir(dir.into());
        }
        if let Some(ByteSize(bytes)) = vars.value("SHEAF_JIT_CACHE_MAX_BYTES")? {
            self.config.disk_cache_max_bytes = bytes;
        }
        if vars.switch("SHEAF_JIT_DISK_CACHE")? == Some(false) {
            self.config.disk_cache = DiskCacheSetting::Disabled;
        }
        if let Some(driver) = vars.text("SHEAF_JIT_CPU_FALLBACK")? {
            self.config.cpu_fallback = (driver != "off").then_some(driver);
        }
        if let Some(ByteSize(bytes)) = vars.value("SHEAF_JIT_UPLOAD_CACHE_MAX_BYTES")? {
            self.config.upload_cache_bytes = usize::try_from(bytes).map_err(|_| {
                ConfigError::invalid(
                    "SHEAF_JIT_UPLOAD_CACHE_MAX_BYTES",
                    bytes.to_string(),
                    "a size this machine can address",
                )
            })?;
        }
        if let Some(paths) = var("SHEAF_JIT_BUNDLES").filter(|paths| !paths.is_empty()) {
            self.config
                .artifact_bundles
                .extend(std::env::split_paths(&paths).filter(|p| !p.as_os_str().is_empty()));
        }
        if let Some(url) = vars.text("SHEAF_JIT_REMOTE_CACHE")? {
            self.config.remote_cache = Some(RemoteCacheUrl(url));
        }
        if let Some(path) = var("SHEAF_JIT_REMOTE_SECRET_FILE").filter(|path| !path.is_empty()) {
            self.config.remote_cache_secret = Some(RemoteSecret::File(path.into()));
        }
        let timeouts = &mut self.config.remote_cache_timeouts;
        vars.millis("SHEAF_JIT_REMOTE_TIMEOUT", &mut timeouts.request)?;
        vars.millis("SHEAF_JIT_REMOTE_CONNECT_TIMEOUT", &mut timeouts.connect)?;
        let remote = &mut self.config.remote_cache_options;
        if let Some(ByteSize(bytes)) = vars.value("SHEAF_JIT_REMOTE_MAX_ENTRY")? {
            remote.max_entry_bytes = bytes;
        }
        vars.millis("SHEAF_JIT_REMOTE_COOL_DOWN", &mut remote.cool_down)?;
        // Read by `trace::init_from_env`; checked here so that a typo is an
        // error like any other.
        vars.switch(crate::TRACE_ENV)?;
        Ok(self)
    }

    /// Validates and returns the configuration.
    pub fn build(self) -> Result<JitConfig, ConfigError> {
        self.config.cache.validate()?;
        if self.config.driver.is_empty() {
            return Err(ConfigError::invalid(
                "driver",
                String::new(),
                "`local-sync`, `local-task` or a device URI",
            ));
        }
        if self.config.disk_cache_max_bytes == 0 {
            return Err(ConfigError::invalid(
                "disk_cache_max_bytes",
                "0".to_owned(),
                "a positive size (or no_disk_cache())",
            ));
        }
        if self.config.remote_cache.is_some() {
            if self.config.remote_cache_secret.is_none() {
                return Err(ConfigError::RemoteSecretMissing);
            }
            let timeouts = self.config.remote_cache_timeouts;
            if timeouts.connect.is_zero() || timeouts.request.is_zero() {
                return Err(ConfigError::invalid(
                    "remote_cache_timeouts",
                    format!("{timeouts:?}"),
                    "positive durations",
                ));
            }
        }
        Ok(self.config)
    }
}

/// Typed reads of environment variables, each failing with the variable's
/// name and what it may be.
struct Vars<'a>(&'a dyn Fn(&str) -> Option<OsString>);

impl Vars<'_> {
    /// The variable's text; `None` when unset or empty.
    fn text(&self, name: &'static str) -> Result<Option<String>, ConfigError> {
        match (self.0)(name).filter(|value| !value.is_empty()) {
            None => Ok(None),
            Some(value) => value
                .into_string()
                .map(|text| Some(text.trim().to_owned()))
                .map_err(|value| {
                    ConfigError::invalid(name, value.to_string_lossy().into_owned(), "UTF-8 text")
                }),
        }
    }

    /// The variable parsed as a `T`.
    fn value<T: FromStr>(&self, name: &'static str) -> Result<Option<T>, ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        let Some(text) = self.text(name)? else {
            return Ok(None);
        };
        text.parse()
            .map(Some)
            .map_err(|error: T::Err| ConfigError::invalid(name, text, error.to_string()))
    }

    /// A number of milliseconds into `target` when the variable is set.
    fn millis(&self, name: &'static str, target: &mut Duration) -> Result<(), ConfigError> {
        if let Some(millis) = self.value::<u64>(name)? {
            *target = Duration::from_millis(millis);
        }
        Ok(())
    }

    /// Parses the variable into `target` when it is set.
    fn parse<T: FromStr>(&self, name: &'static str, target: &mut T) -> Result<(), ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        if let Some(value) = self.value(name)? {
            *target = value;
        }
        Ok(())
    }

    /// An on/off variable.
    fn switch(&self, name: &'static str) -> Result<Option<bool>, ConfigError> {
        let Some(text) = self.text(name)? else {
            return Ok(None);
        };
        match text.to_ascii_lowercase().as_str() {
            "1" | "on" | "true" | "yes" => Ok(Some(true)),
            "0" | "off" | "false" | "no" => Ok(Some(false)),
            _ => Err(ConfigError::invalid(
                name,
                text,
                "`on` or `off` (or 1/0, true/false, yes/no)",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn from(vars: &[(&str, &str)]) -> Result<JitConfig, ConfigError> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        JitConfig::builder()
            .apply_vars(|name| vars.get(name).cloned())?
            .build()
    }

    #[test]
    fn variables_override_the_defaults() {
        let config = from(&[
            ("SHEAF_JIT_DRIVER", "local-task"),
            ("SHEAF_JIT_CAPACITY", "3"),
            ("SHEAF_JIT_MAX_ENTRIES", "100"),
            ("SHEAF_JIT_MAX_BYTES", "512M"),
            ("SHEAF_JIT_CACHE_POLICY", "lru-cool-down"),
            ("SHEAF_JIT_COMPILE_MODE", "blocking"),
            ("SHEAF_JIT_COMPILE_THREADS", "3"),
            ("SHEAF_JIT_THRASH_WINDOW", "50"),
            ("SHEAF_JIT_THRASH_THRESHOLD", "6"),
            ("SHEAF_JIT_THRASH_COOL_DOWN", "9"),
            ("SHEAF_JIT_THRASH_COOL_DOWN_CAP", "90"),
            ("SHEAF_JIT_FAILED_RETRY", "7"),
            ("SHEAF_JIT_DYNAMIC_DIMS", "off"),
            ("SHEAF_JIT_DYNAMIC_DIMS_AFTER", "3"),
            ("SHEAF_JIT_STATIC_SHAPES", "softmax, mlp_layer,"),
            ("SHEAF_JIT_COMPILER", "subprocess"),
            ("SHEAF_JIT_CACHE_DIR", "/c"),
            ("SHEAF_JIT_CACHE_MAX_BYTES", "64M"),
            ("SHEAF_JIT_TRACE", "1"),
            ("SHEAF_JIT_CPU_FALLBACK", "off"),
            ("SHEAF_JIT_UPLOAD_CACHE_MAX_BYTES", "1M"),
            ("SHEAF_JIT_BUNDLES", "/a:/b"),
        ])
        .unwrap();
        assert_eq!(config.cpu_fallback, None);
        assert_eq!(config.upload_cache_bytes, 1 << 20);
        assert_eq!(
            config.artifact_bundles,
            [PathBuf::from("/a"), PathBuf::from("/b")]
        );
        assert_eq!(config.driver, "local-task");
        let cache = &config.cache;
        assert_eq!(
            (
                cache.function_capacity,
                cache.max_total_entries,
                cache.max_total_bytes
            ),
            (3, 100, 512 << 20)
        );
        assert_eq!(
            (
                cache.thrash_window,
                cache.thrash_threshold,
                cache.thrash_cool_down
            ),
            (50, 6, 9)
        );
        assert_eq!(
            (cache.thrash_cool_down_cap, cache.failed_compile_retry_after),
            (90, 7)
        );
        assert_eq!(cache.policy, CachePolicy::LruCoolDown);
        assert_eq!((cache.dynamic_dims, cache.dynamic_dims_after), (false, 3));
        let mut static_shapes: Vec<_> = cache.static_shape_functions.iter().collect();
        static_shapes.sort();
        assert_eq!(static_shapes, ["mlp_layer", "softmax"]);
        assert_eq!(
            (config.compile_mode, cache.compile_threads),
            (CompileMode::Blocking, 3)
        );
        assert_eq!(config.compiler, CompilerPreference::Subprocess);
        assert_eq!(config.disk_cache, DiskCacheSetting::Dir("/c".into()));
        assert_eq!(config.disk_cache_max_bytes, 64 << 20);
    }

    #[test]
    fn the_remote_cache_needs_a_secret_and_takes_its_settings_from_variables() {
        let error = from(&[("SHEAF_JIT_REMOTE_CACHE", "redis://cache:6379")]).unwrap_err();
        assert_eq!(error, ConfigError::RemoteSecretMissing);
        assert!(error.to_string().contains("SHEAF_JIT_REMOTE_SECRET_FILE"));
        let config = from(&[
            ("SHEAF_JIT_REMOTE_CACHE", "redis://cache:6379"),
            ("SHEAF_JIT_REMOTE_SECRET_FILE", "/etc/sheaf/secret"),
            ("SHEAF_JIT_REMOTE_TIMEOUT", "50"),
            ("SHEAF_JIT_REMOTE_CONNECT_TIMEOUT", "20"),
            ("SHEAF_JIT_REMOTE_MAX_ENTRY", "8M"),
            ("SHEAF_JIT_REMOTE_COOL_DOWN", "1500"),
        ])
        .unwrap();
        let url = config.remote_cache.as_ref().map(RemoteCacheUrl::as_str);
        assert_eq!(url, Some("redis://cache:6379"));
        assert!(matches!(
            &config.remote_cache_secret,
            Some(RemoteSecret::File(path)) if path == std::path::Path::new("/etc/sheaf/secret")
        ));
        let timeouts = config.remote_cache_timeouts;
        assert_eq!(
            (timeouts.request, timeouts.connect),
            (Duration::from_millis(50), Duration::from_millis(20))
        );
        let options = &config.remote_cache_options;
        assert_eq!(options.max_entry_bytes, 8 << 20);
        assert_eq!(options.cool_down, Duration::from_millis(1500));
        // Off by default; the password is never shown.
        assert_eq!(from(&[]).unwrap().remote_cache, None);
        let with_password = JitConfig::builder()
            .remote_cache("redis://:hunter2@cache:6379")
            .remote_cache_secret(Secret::from_bytes([1; Secret::LEN]));
        let shown = format!("{with_password:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains("cache:6379"),
            "{shown}"
        );
        let zero = JitConfig::builder()
            .remote_cache("redis://cache")
            .remote_cache_secret(Secret::from_bytes([1; Secret::LEN]))
            .remote_cache_timeouts(Duration::ZERO, Duration::from_millis(1))
            .build()
            .unwrap_err();
        assert!(zero.to_string().contains("remote_cache_timeouts"), "{zero}");
    }

    #[test]
    fn unset_and_empty_variables_keep_the_defaults() {
        let config = from(&[("SHEAF_JIT_CAPACITY", ""), ("SHEAF_JIT_DISK_CACHE", "")]).unwrap();
        assert_eq!(config.driver, "local-sync");
        assert_eq!(
            config.cache.function_capacity,
            CacheConfig::default().function_capacity
        );
        assert_eq!(config.disk_cache, DiskCacheSetting::UserCache);
        assert!(config
            .compile_options
            .extra_flags
            .iter()
            .any(|f| f == "--iree-input-demote-f64-to-f32=false"));
    }

    #[test]
    fn the_disk_cache_folder_follows_the_setting_and_the_user_directories() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| OsString::from(value))
            }
        };
        let default = JitConfig::default();
        let xdg = default.disk_cache_config_with(vars(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]));
        assert_eq!(xdg.unwrap().directory, PathBuf::from("/x/sheaf-jit"));
        let home = default.disk_cache_config_with(vars(&[("XDG_CACHE_HOME", ""), ("HOME", "/h")]));
        assert_eq!(
            home.unwrap().directory,
            PathBuf::from("/h/.cache/sheaf-jit")
        );
        assert_eq!(default.disk_cache_config_with(vars(&[])), None);
        for off in ["0", "off", "OFF", "false", "no"] {
            let config =
                from(&[("SHEAF_JIT_DISK_CACHE", off), ("SHEAF_JIT_CACHE_DIR", "/c")]).unwrap();
            assert_eq!(config.disk_cache_config(), None, "{off}");
        }
        let on = from(&[
            ("SHEAF_JIT_DISK_CACHE", "on"),
            ("SHEAF_JIT_CACHE_DIR", "/c"),
        ])
        .unwrap();
        let store = on.disk_cache_config().unwrap();
        assert_eq!(
            (store.directory, store.max_bytes),
            (PathBuf::from("/c"), 1 << 30)
        );
    }

    #[test]
    fn a_bad_value_names_the_variable_and_what_it_may_be() {
        for (name, value, expected) in [
            ("SHEAF_JIT_CAPACITY", "eight", "invalid digit"),
            ("SHEAF_JIT_MAX_BYTES", "lots", "binary units"),
            ("SHEAF_JIT_CACHE_MAX_BYTES", "1.5G", "binary units"),
            ("SHEAF_JIT_DISK_CACHE", "bogus", "`on` or `off`"),
            ("SHEAF_JIT_REMOTE_TIMEOUT", "1s", "invalid digit"),
            ("SHEAF_JIT_REMOTE_MAX_ENTRY", "big", "binary units"),
            ("SHEAF_JIT_TRACE", "verbose", "`on` or `off`"),
            (
                "SHEAF_JIT_COMPILE_MODE",
                "async",
                "`blocking` or `background`",
            ),
            (
                "SHEAF_JIT_CACHE_POLICY",
                "lru",
                "`adaptive` or `lru-cool-down`",
            ),
            (
                "SHEAF_JIT_COMPILER",
                "gpu",
                "`auto`, `in-process` or `subprocess`",
            ),
        ] {
            let error = from(&[(name, value)]).unwrap_err().to_string();
            assert!(error.contains(&format!("{name}={value}")), "{error}");
            assert!(error.contains(expected), "{error}");
        }
        let error = from(&[("SHEAF_JIT_CAPACITY", "0")]).unwrap_err();
        assert!(error.to_string().contains("function_capacity"), "{error}");
    }
}
