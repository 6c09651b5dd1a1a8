//! The `SHEAF_JIT_*` environment variables: one table, [`ENV_VARIABLES`],
//! of their names, meanings, defaults and how each applies to a
//! [`JitConfig`], and the parser it drives.
//!
//! The same table is the source of the README's (`cargo test -p xtask`
//! checks that they agree, in `xtask/src/tidy.rs`) and of the variables the
//! `config` fuzz target sets.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use iree_safe::compiler::CompilerPreference;
use jit_cache::ByteSize;

use super::{
    ranges, DeviceSettings, DiskCacheFolder, JitConfig, JitConfigBuilder, ProfileFormat,
    SigningKeySource,
};
#[cfg(feature = "remote-cache")]
use super::{RemoteCacheUrl, RemoteSecret};
use crate::error::ConfigError;

/// How a variable applies to a [`JitConfig`].
type Apply = fn(&mut JitConfig, &Var<'_>) -> Result<(), ConfigError>;

/// `$apply` in a build with the `disk-cache` feature; without it, the
/// variable is an error saying to enable the feature, never ignored.
macro_rules! disk_cache {
    ($apply:expr) => {{
        #[cfg(feature = "disk-cache")]
        let apply: Apply = $apply;
        #[cfg(not(feature = "disk-cache"))]
        let apply: Apply = |_, var| Err(var.left_out("disk cache", "disk-cache"));
        apply
    }};
}

/// `$apply` in a build with the `remote-cache` feature; without it, the
/// variable is an error saying to enable the feature, never ignored.
macro_rules! remote_cache {
    ($apply:expr) => {{
        #[cfg(feature = "remote-cache")]
        let apply: Apply = $apply;
        #[cfg(not(feature = "remote-cache"))]
        let apply: Apply = |_, var| Err(var.left_out("remote cache", "remote-cache"));
        apply
    }};
}

/// `$apply` in a build with the `remote-cache-tls` feature; without it, the
/// variable is an error saying which feature to enable, never ignored.
macro_rules! remote_cache_tls {
    ($apply:expr) => {{
        #[cfg(feature = "remote-cache-tls")]
        let apply: Apply = $apply;
        #[cfg(all(feature = "remote-cache", not(feature = "remote-cache-tls")))]
        let apply: Apply = |_, var| Err(var.left_out("remote cache TLS", "remote-cache-tls"));
        #[cfg(not(feature = "remote-cache"))]
        let apply: Apply = |_, var| Err(var.left_out("remote cache", "remote-cache"));
        apply
    }};
}

/// One `SHEAF_JIT_*` variable of [`ENV_VARIABLES`]: its name, what it sets
/// and its default (Markdown, as in the README's table), and how its value
/// applies to a [`JitConfig`].
#[derive(Clone, Copy)]
pub struct EnvVariable {
    /// The variable's name, `SHEAF_JIT_...`.
    pub name: &'static str,
    /// What it sets, and the values it takes.
    pub meaning: &'static str,
    /// Its default.
    pub default: &'static str,
    apply: Apply,
}

impl fmt::Debug for EnvVariable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvVariable")
            .field("name", &self.name)
            .field("meaning", &self.meaning)
            .field("default", &self.default)
            .finish_non_exhaustive()
    }
}

/// Every `SHEAF_JIT_*` variable that
/// [`JitConfigBuilder::apply_env`] reads, in the order it applies them (a
/// later one wins: `SHEAF_JIT_DISK_CACHE=off` over `SHEAF_JIT_CACHE_DIR`).
/// An empty variable is unset; any other value that does not parse is an
/// error naming the variable and what it may be, never a silent default.
///
/// ```
/// use sheaf_integration::settings::ENV_VARIABLES;
///
/// for variable in ENV_VARIABLES {
///     println!("{}: {} (default {})", variable.name, variable.meaning, variable.default);
/// }
/// assert!(ENV_VARIABLES.iter().any(|v| v.name == "SHEAF_JIT_CAPACITY"));
/// ```
pub static ENV_VARIABLES: &[EnvVariable] = &[
    EnvVariable {
        name: "SHEAF_JIT_DRIVER",
        meaning: "`auto` (the first GPU: CUDA, then a hardware Vulkan device, else the CPU), an IREE driver or a device URI",
        default: "`auto`",
        apply: |config, var| set(&mut config.device.driver, var.text()),
    },
    EnvVariable {
        name: "SHEAF_JIT_CAPACITY",
        meaning: "signatures cached per function, 1 to 65536",
        default: "8",
        apply: |config, var| set(&mut config.cache.function_capacity, var.number_in(&ranges::CAPACITY)),
    },
    EnvVariable {
        name: "SHEAF_JIT_MAX_ENTRIES",
        meaning: "entries cached across functions, 1 to 1048576",
        default: "4096",
        apply: |config, var| set(&mut config.cache.max_total_entries, var.number_in(&ranges::MAX_ENTRIES)),
    },
    EnvVariable {
        name: "SHEAF_JIT_MAX_BYTES",
        meaning: "artifact bytes cached across functions (`512M` style), 1 B to 1 TiB",
        default: "256M",
        apply: |config, var| set(&mut config.cache.max_total_bytes, var.size_in(&ranges::MAX_BYTES)),
    },
    EnvVariable {
        name: "SHEAF_JIT_CACHE_POLICY",
        meaning: "`adaptive` (frequency-aware admission) or `lru-cool-down` (the first version's); see `jit-cache`'s README",
        default: "`adaptive`",
        apply: |config, var| set(&mut config.cache.policy, var.parse()),
    },
    EnvVariable {
        name: "SHEAF_JIT_THRASH_WINDOW",
        meaning: "calls in the thrash window, 1 to 1048576 (`lru-cool-down` only)",
        default: "64",
        apply: |config, var| set(&mut config.cache.thrash_window, var.number_in(&ranges::THRASH_WINDOW)),
    },
    EnvVariable {
        name: "SHEAF_JIT_THRASH_THRESHOLD",
        meaning: "compiles per window before fallback, 1 to 1048576 (`lru-cool-down` only)",
        default: "16",
        apply: |config, var| set(&mut config.cache.thrash_threshold, var.number_in(&ranges::THRASH_THRESHOLD)),
    },
    EnvVariable {
        name: "SHEAF_JIT_THRASH_COOL_DOWN",
        meaning: "fallback calls before compiling is probed again, 1 to 1073741824 (`lru-cool-down` only)",
        default: "256",
        apply: |config, var| set(&mut config.cache.thrash_cool_down, var.number_in(&ranges::THRASH_COOL_DOWN)),
    },
    EnvVariable {
        name: "SHEAF_JIT_THRASH_COOL_DOWN_CAP",
        meaning: "the cool-down doubles on each relapse, up to this (at least the cool-down), 1 to 1073741824 (`lru-cool-down` only)",
        default: "16384",
        apply: |config, var| set(&mut config.cache.thrash_cool_down_cap, var.number_in(&ranges::THRASH_COOL_DOWN_CAP)),
    },
    EnvVariable {
        name: "SHEAF_JIT_COMPILE_MODE",
        meaning: "`background` (a miss runs in the interpreter while it compiles) or `blocking` (a miss waits for its compile)",
        default: "`background`",
        apply: |config, var| set(&mut config.compile.mode, var.parse()),
    },
    EnvVariable {
        name: "SHEAF_JIT_COMPILE_THREADS",
        meaning: "background compile threads, 1 to 256",
        default: "2",
        apply: |config, var| set(&mut config.cache.compile_threads, var.number_in(&ranges::COMPILE_THREADS)),
    },
    EnvVariable {
        name: "SHEAF_JIT_FAILED_RETRY",
        meaning: "calls of a failed signature before it compiles again, 1 to 1073741824",
        default: "1000",
        apply: |config, var| set(&mut config.cache.failed_compile_retry_after, var.number_in(&ranges::FAILED_RETRY)),
    },
    EnvVariable {
        name: "SHEAF_JIT_DYNAMIC_DIMS",
        meaning: "`on`: a function whose lowering accepts dynamic dims gets one variant for a dim that varies; `off`: every shape is its own variant",
        default: "`on`",
        apply: |config, var| set(&mut config.cache.dynamic_dims, var.switch()),
    },
    EnvVariable {
        name: "SHEAF_JIT_DYNAMIC_DIMS_AFTER",
        meaning: "distinct values of a dim (the missing call's included) at which it is compiled dynamic, 1 to 1024",
        default: "2",
        apply: |config, var| set(&mut config.cache.dynamic_dims_after, var.number_in(&ranges::DYNAMIC_DIMS_AFTER)),
    },
    EnvVariable {
        name: "SHEAF_JIT_SPECIALIZE_HOT_SIZES",
        meaning: "`on`: a size of a dynamic dim called more than once every capacity + 1 calls gets its own static variant, compiled in the background beside the dynamic one (never evicting); `off`: the dynamic variant serves every size",
        default: "`on`",
        apply: |config, var| set(&mut config.cache.specialize_hot_sizes, var.switch()),
    },
    EnvVariable {
        name: "SHEAF_JIT_STATIC_SHAPES",
        meaning: "functions (names, `,`-separated) that never get dynamic dims",
        default: "none",
        apply: |config, var| {
            config.cache.static_shape_functions.extend(var.names()?);
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_EXIT_WAIT",
        meaning: "milliseconds the process's exit waits for queued background compiles to reach the disk or remote cache (`0`: never waits), 0 to 600000",
        default: "10000",
        apply: |config, var| set(&mut config.compile.exit_wait, var.millis_in(&ranges::EXIT_WAIT)),
    },
    EnvVariable {
        name: "SHEAF_JIT_EXIT_ON_SIGNALS",
        meaning: "`on`: SIGTERM and SIGINT (when their action is the default) first finish the runtime as an exit does (the exit wait, the profile), then end the process by the same signal (Linux); `off`: they end it at once",
        default: "`on`",
        apply: |config, var| set(&mut config.compile.exit_on_signals, var.switch()),
    },
    EnvVariable {
        name: "SHEAF_JIT_COMPILER",
        meaning: "`auto`, `in-process` (feature `in-process-compiler`), `subprocess`, or `none` (serve bundles and the disk cache only)",
        default: "`auto`",
        apply: |config, var| set(&mut config.compile.compiler, var.compiler()),
    },
    EnvVariable {
        name: "SHEAF_JIT_FLOAT_SEMANTICS",
        meaning: "`strict` (the compiler's floating-point semantics: results equal `iree-compile`'s with its default flags) or `reassociate` (CPU reductions may add in another order: faster, last bits may differ), for functions that do not choose their own",
        default: "`strict`",
        apply: |config, var| set(&mut config.compile.float_semantics, var.parse()),
    },
    EnvVariable {
        name: "SHEAF_JIT_TARGET",
        meaning: "what to compile for instead of the device's own target: `cpu:<llvm cpu>[:<triple>]` (`cpu:x86-64-v3` for a fleet of mixed x86-64 machines, `cpu:generic`), `cuda:<sm_XY>`, `vulkan:<target>`, `hip:<gfx...>` or `metal`",
        default: "none",
        apply: |config, var| {
            config.compile.target = Some(var.with(values::target)?);
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_COMPILER_FLAGS",
        meaning: "extra compiler flags, after the code's own (a later flag wins; the target's cannot be changed): separated by blanks, single or double quotes around a flag with blanks (no escapes)",
        default: "none",
        apply: |config, var| {
            let flags = var.with(values::flags)?;
            config.compile.options.extra_flags.extend(flags);
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_FUNCTION_CAPACITY",
        meaning: "signatures cached per function, for the functions named (`softmax=2,mlp_layer=16`), each 1 to 65536 and named once, over `SHEAF_JIT_CAPACITY`",
        default: "none",
        apply: |config, var| {
            let capacities = var.with(values::capacities)?;
            config.cache.function_capacity_overrides.extend(capacities);
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_CACHE_DIR",
        meaning: "artifact disk cache folder (feature `disk-cache`)",
        default: "`$XDG_CACHE_HOME/sheaf-jit`, else `$HOME/.cache/sheaf-jit`; on macOS `$HOME/Library/Caches/sheaf-jit`",
        apply: disk_cache!(|config, var| {
                config.disk.folder = DiskCacheFolder::Dir(var.path());
                Ok(())
            }),
    },
    EnvVariable {
        name: "SHEAF_JIT_DISK_CACHE",
        meaning: "`on` or `off` (also `1`/`0`, `true`/`false`, `yes`/`no`); `on` needs the feature `disk-cache`",
        default: "`on`",
        apply: |config, var| {
            if !var.switch()? {
                config.disk.folder = DiskCacheFolder::Disabled;
            } else if !cfg!(feature = "disk-cache") {
                return Err(var.left_out("disk cache", "disk-cache"));
            }
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_CACHE_MAX_BYTES",
        meaning: "disk cache size bound (`512M` style), 1 B to 64 TiB (feature `disk-cache`)",
        default: "1G",
        apply: disk_cache!(|config, var| set(&mut config.disk.max_bytes, var.size_in(&ranges::CACHE_MAX_BYTES))),
    },
    EnvVariable {
        name: "SHEAF_JIT_CPU_FALLBACK",
        meaning: "CPU driver when the device cannot be opened or a GPU compile fails; `off` for none",
        default: "`local-sync`",
        apply: |config, var| {
            let driver = var.text()?;
            config.device.cpu_fallback = (driver != "off").then_some(driver);
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_CPU_WORKERS",
        meaning: "the most worker threads of a `local-task` device (one per physical core, each pinned); 1 to 64, or `all` for IREE's cap of 64",
        default: "`all`",
        apply: |config, var| {
            config.device.cpu_workers = match var.text()?.as_str() {
                "all" => None,
                _ => std::num::NonZeroUsize::new(var.number_in(&ranges::CPU_WORKERS)?),
            };
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_PARALLEL_WORKERS",
        meaning: "the most workers of the `local-task` device that runs large contractions beside `local-sync`, 1 to 64; `cores` for as many as this process may use (`off` on one core); `off` runs them on `local-sync`",
        default: "`cores`",
        apply: |config, var| {
            config.device.parallel_workers = match var.text()?.as_str() {
                "cores" => DeviceSettings::default().parallel_workers,
                "off" => None,
                _ => std::num::NonZeroUsize::new(var.number_in(&ranges::PARALLEL_WORKERS)?),
            };
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_BUFFER_POOL_MAX_BYTES",
        meaning: "bytes of freed buffer memory kept for the next calls' results on CPU devices, 0 B to 64 TiB (`0` keeps nothing)",
        default: "1G",
        apply: |config, var| {
            set(
                &mut config.device.buffer_pool_bytes,
                var.size_in(&ranges::BUFFER_POOL_MAX_BYTES),
            )
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_UPLOAD_CACHE_MAX_BYTES",
        meaning: "bytes of device copies of reused host arrays, 0 B to 64 TiB (`0` disables; `auto`: 1/4 of RAM on CPU devices, else 256M)",
        default: "`auto`",
        apply: |config, var| {
            if var.text()? == "auto" {
                config.uploads.bytes = crate::config::UploadSettings::DEVICE_SIZED;
                Ok(())
            } else {
                set(&mut config.uploads.bytes, var.size_in(&ranges::UPLOAD_CACHE_MAX_BYTES))
            }
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_BUNDLES",
        meaning: "artifact bundles to serve calls from (`:`-separated)",
        default: "none",
        apply: |config, var| {
            config.bundles.extend(var.paths());
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_LOG",
        meaning: "the library's own log on stderr: a filter in `RUST_LOG` syntax (`sheaf_jit=debug`, `warn,sheaf_jit::remote=debug`), installed when a runtime starts unless the program has a `tracing` subscriber (then its filter decides)",
        default: "none",
        // Read when a runtime starts (`logging::install_from_env`); checked
        // here so that a typo is an error like any other.
        apply: |_, var| {
            let lookup = |name: &str| (name == var.name).then(|| var.value.to_owned());
            log_filter(lookup).map(drop)
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_DUMP_DIR",
        meaning: "a folder where each compile writes its MLIR, exact flags and target, a runnable `iree-compile` command, and its artifact or diagnostics (at most 256 compiles per process; later ones are skipped)",
        default: "none",
        apply: |config, var| {
            config.compile.dump_dir = Some(var.path());
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_TRACE",
        meaning: "deprecated: `1` is `SHEAF_JIT_LOG=warn,sheaf_jit=debug` (`SHEAF_JIT_LOG` wins)",
        default: "off",
        // Read when a runtime starts; checked here so that a typo is an
        // error like any other.
        apply: |_, var| var.switch().map(drop),
    },
    EnvVariable {
        name: "SHEAF_JIT_PROFILE",
        meaning: "`1`: print the JIT profile to stderr when the runtime is dropped or the process exits, timing every call's phases; `json`: print it as one line of JSON (feature `serde`)",
        default: "off",
        apply: |config, var| {
            if var.text()?.eq_ignore_ascii_case("json") {
                if !cfg!(feature = "serde") {
                    return Err(var.left_out("profile as JSON", "serde"));
                }
                config.profile_at_exit = true;
                config.profile_format = ProfileFormat::Json;
                return Ok(());
            }
            set(&mut config.profile_at_exit, var.switch())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_REMOTE_CACHE",
        meaning: "remote artifact cache shared by a cluster, `redis://[:password@]host[:port][/db]`, `rediss://...` over TLS (feature `remote-cache-tls`), or `file:///shared/folder` (feature `remote-cache`); see `docs/cluster.md`",
        default: "none",
        apply: remote_cache!(|config, var| {
                config.remote.url = Some(RemoteCacheUrl::new(var.text()?));
                Ok(())
            }),
    },
    EnvVariable {
        name: "SHEAF_JIT_REMOTE_SECRET_FILE",
        meaning: "the cluster's shared secret: a file of 32 random bytes, this user's or root's, that nobody else may write, in folders nobody else may write (symbolic links followed: Kubernetes and Docker secret mounts); required with a remote cache",
        default: "none",
        apply: remote_cache!(|config, var| {
                config.remote.secret = Some(RemoteSecret::File(var.path()));
                Ok(())
            }),
    },
    EnvVariable {
        name: "SHEAF_JIT_SIGNING_KEY_FILE",
        meaning: "a builder's Ed25519 signing key (`sheaf-jit-cache keygen FILE`), read as the secret's file is: the entries this process publishes to the remote cache, and the bundles it exports, are signed with it instead of tagged with a secret; see `docs/cluster.md` (CI builds, everyone reads)",
        default: "none",
        apply: |config, var| {
            config.trust.signing_key = Some(SigningKeySource::File(var.path()));
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_TRUSTED_KEYS",
        meaning: "the public keys whose signatures this process accepts, separated by blanks or commas: each `ed25519:<64 hex digits>`, or the path of a file of them (this user's or root's, that nobody else may write); the remote cache's entries and bundles must then be signed by one of them, and without a signing key the process only reads the remote cache",
        default: "none",
        apply: |config, var| set(&mut config.trust.trusted_keys, var.with(values::trusted_keys)),
    },
    EnvVariable {
        name: "SHEAF_JIT_REMOTE_MODE",
        meaning: "`read-only`: fetch and verify only, never publish nor take a compile lease (a miss compiles here and stays in the disk cache); `read-write`: also publish (a reader of signed entries, with trusted keys and no signing key, is read-only whatever this says)",
        default: "`read-write`",
        apply: remote_cache!(|config, var| {
                config.remote.options.mode = var.with(|text| text.parse().map_err(|_| "`read-write` or `read-only`".to_owned()))?;
                Ok(())
            }),
    },
    EnvVariable {
        name: "SHEAF_JIT_REMOTE_NAMESPACE",
        meaning: "the deployment's namespace in the remote keys (1 to 64 of `A-Z a-z 0-9 . _ -`): deployments sharing a Redis database but not their artifacts choose different ones",
        default: "`default`",
        apply: remote_cache!(|config, var| set(&mut config.remote.options.namespace, var.namespace())),
    },
    EnvVariable {
        name: "SHEAF_JIT_REMOTE_CA",
        meaning: "PEM file of the CA that signs a `rediss://` server's certificate; unset: the system's root certificates (feature `remote-cache-tls`)",
        default: "none",
        apply: remote_cache_tls!(|config, var| {
                config.remote.ca_file = Some(var.path());
                Ok(())
            }),
    },
    EnvVariable {
        name: "SHEAF_JIT_REMOTE_TIMEOUT",
        meaning: "milliseconds a remote request may take, all its reads and writes together, 1 to 600000",
        default: "500",
        apply: remote_cache!(|config, var| set(&mut config.remote.timeouts.request, var.millis_in(&ranges::REMOTE_TIMEOUT))),
    },
    EnvVariable {
        name: "SHEAF_JIT_REMOTE_CONNECT_TIMEOUT",
        meaning: "milliseconds to connect to the remote cache, 1 to 600000",
        default: "200",
        apply: remote_cache!(|config, var| set(&mut config.remote.timeouts.connect, var.millis_in(&ranges::REMOTE_CONNECT_TIMEOUT))),
    },
    EnvVariable {
        name: "SHEAF_JIT_REMOTE_MAX_ENTRY",
        meaning: "largest artifact published or fetched (`512M` style), 1 KiB to 4 GiB (a Redis server takes at most 512 MiB)",
        default: "64M",
        apply: remote_cache!(|config, var| set(&mut config.remote.options.max_entry_bytes, var.size_in(&ranges::REMOTE_MAX_ENTRY))),
    },
    EnvVariable {
        name: "SHEAF_JIT_REMOTE_COOL_DOWN",
        meaning: "milliseconds the remote cache is left alone after 3 failures in a row, 0 to 3600000",
        default: "30000",
        apply: remote_cache!(|config, var| set(&mut config.remote.options.cool_down, var.millis_in(&ranges::REMOTE_COOL_DOWN))),
    },
    EnvVariable {
        name: "SHEAF_JIT_REMOTE_LEASE",
        meaning: "milliseconds a compile lease lives unless renewed (one process compiles what several miss at once), 0 to 60000 (`0`: no leases)",
        default: "2000",
        apply: remote_cache!(|config, var| {
                let ttl = var.millis_in(&ranges::REMOTE_LEASE)?;
                config.remote.options.lease_ttl = (!ttl.is_zero()).then_some(ttl);
                Ok(())
            }),
    },
];

/// Stores a parsed value.
fn set<T>(setting: &mut T, value: Result<T, ConfigError>) -> Result<(), ConfigError> {
    *setting = value?;
    Ok(())
}

impl JitConfigBuilder {
    /// Applies the `SHEAF_JIT_*` environment variables of
    /// [`ENV_VARIABLES`] (the README lists them too).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] naming the first variable whose value does
    /// not parse, and what it may be.
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
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] naming the first variable whose value does
    /// not parse, and what it may be.
    pub fn apply_vars(
        mut self,
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Self, ConfigError> {
        for variable in ENV_VARIABLES {
            if let Some(value) = lookup(variable.name).filter(|value| !value.is_empty()) {
                let var = Var {
                    name: variable.name,
                    value: &value,
                };
                (variable.apply)(&mut self.config, &var)?;
                self.applied.push(variable.name);
            }
        }
        Ok(self)
    }
}

/// `SHEAF_JIT_LOG`: a filter in `RUST_LOG` syntax for the library's stderr
/// log.
pub(crate) const LOG_ENV: &str = "SHEAF_JIT_LOG";

/// The filter `SHEAF_JIT_TRACE=1` stands for.
const TRACE_FILTER: &str = "warn,sheaf_jit=debug";

/// The filter `SHEAF_JIT_LOG` (else the deprecated `SHEAF_JIT_TRACE`) from
/// `lookup` asks for, checked; `None` when neither is set.
///
/// # Errors
///
/// [`ConfigError::Invalid`] for a filter that does not parse, or a
/// `SHEAF_JIT_TRACE` that is not a switch.
pub(crate) fn log_filter(
    lookup: impl Fn(&str) -> Option<OsString>,
) -> Result<Option<String>, ConfigError> {
    if let Some(value) = lookup(LOG_ENV).filter(|value| !value.is_empty()) {
        let var = Var {
            name: LOG_ENV,
            value: &value,
        };
        let filter = var.text()?;
        // tracing-subscriber 0.3 panics on some non-ASCII whitespace (it
        // slices inside a `\u{85}`); a filter names ASCII targets anyway.
        if let Some(bad) = filter
            .chars()
            .find(|c| !c.is_ascii() || c.is_ascii_control())
        {
            return Err(var.invalid(format!(
                "a filter in RUST_LOG syntax, such as `sheaf_jit=debug`, of printable ASCII \
                 ({bad:?} is not)"
            )));
        }
        tracing_subscriber::EnvFilter::builder()
            .parse(&filter)
            .map_err(|error| {
                var.invalid(format!(
                    "a filter in RUST_LOG syntax, such as `sheaf_jit=debug` ({error})"
                ))
            })?;
        return Ok(Some(filter));
    }
    let trace = trace_switch(&lookup)?;
    Ok(trace.unwrap_or(false).then(|| TRACE_FILTER.to_owned()))
}

/// `SHEAF_JIT_TRACE` from `lookup`: `Some(true)` for `1`/`on`/...,
/// `Some(false)` for `0`/`off`/..., `None` when unset or empty; any other
/// value is an error naming the variable.
fn trace_switch(lookup: impl Fn(&str) -> Option<OsString>) -> Result<Option<bool>, ConfigError> {
    let name = crate::settings::TRACE_ENV;
    let Some(value) = lookup(name).filter(|value| !value.is_empty()) else {
        return Ok(None);
    };
    Var {
        name,
        value: &value,
    }
    .switch()
    .map(Some)
}

/// A variable's value (set, not empty), with typed reads that fail naming
/// the variable and what it may be.
struct Var<'a> {
    name: &'static str,
    value: &'a OsStr,
}

impl Var<'_> {
    /// The error for a variable that asks for a `part` of the crate this
    /// build leaves out (its cargo `feature` is off).
    fn left_out(&self, part: &'static str, feature: &'static str) -> ConfigError {
        ConfigError::FeatureDisabled {
            setting: self.name,
            part,
            feature,
        }
    }

    fn invalid(&self, expected: impl Into<String>) -> ConfigError {
        let value = self.value.to_string_lossy().trim().to_owned();
        ConfigError::invalid(self.name, value, expected)
    }

    /// The value as text, without surrounding blanks.
    fn text(&self) -> Result<String, ConfigError> {
        let text = self
            .value
            .to_str()
            .ok_or_else(|| self.invalid("UTF-8 text"))?;
        Ok(text.trim().to_owned())
    }

    /// The text parsed by `parse`, whose error says what it may be.
    fn with<T>(&self, parse: fn(&str) -> Result<T, String>) -> Result<T, ConfigError> {
        parse(&self.text()?).map_err(|expected| self.invalid(expected))
    }

    /// The value as is, as a path.
    fn path(&self) -> PathBuf {
        self.value.into()
    }

    /// Paths separated as in `PATH` (by `:`), without empty ones.
    fn paths(&self) -> Vec<PathBuf> {
        let paths = std::env::split_paths(self.value);
        paths.filter(|path| !path.as_os_str().is_empty()).collect()
    }

    /// Names separated by `,`, without surrounding blanks or empty ones.
    fn names(&self) -> Result<Vec<String>, ConfigError> {
        let text = self.text()?;
        let names = text
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty());
        Ok(names.map(str::to_owned).collect())
    }

    /// A value of a type whose parse error says what it may be.
    fn parse<T: FromStr>(&self) -> Result<T, ConfigError>
    where
        T::Err: fmt::Display,
    {
        self.text()?
            .parse()
            .map_err(|error: T::Err| self.invalid(error.to_string()))
    }

    /// A whole number in `range` (one past it, or too large for any
    /// number, is refused with the range).
    fn number_in<T: TryFrom<u64>>(&self, range: &ranges::Range) -> Result<T, ConfigError> {
        let text = self.text()?;
        let value = text.parse::<u64>().map_err(|error| {
            if !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) {
                self.invalid(range.expected())
            } else {
                self.invalid(format!("{} ({error})", range.expected()))
            }
        })?;
        self.in_range(value, range)
    }

    /// `value` as a `T`, when it is in `range`.
    fn in_range<T: TryFrom<u64>>(
        &self,
        value: u64,
        range: &ranges::Range,
    ) -> Result<T, ConfigError> {
        if !range.contains(value) {
            return Err(self.invalid(range.expected()));
        }
        T::try_from(value).map_err(|_| self.invalid(range.expected()))
    }

    /// A number of milliseconds in `range`.
    fn millis_in(&self, range: &ranges::Range) -> Result<Duration, ConfigError> {
        self.number_in(range).map(Duration::from_millis)
    }

    /// A size in bytes (`512M` style) in `range`.
    fn size_in<T: TryFrom<u64>>(&self, range: &ranges::Range) -> Result<T, ConfigError> {
        let ByteSize(bytes) = self
            .text()?
            .parse()
            .map_err(|_| self.invalid(format!("{} ({})", range.expected(), ByteSize::SYNTAX)))?;
        self.in_range(bytes, range)
    }

    /// An on/off switch.
    fn switch(&self) -> Result<bool, ConfigError> {
        match self.text()?.to_ascii_lowercase().as_str() {
            "1" | "on" | "true" | "yes" => Ok(true),
            "0" | "off" | "false" | "no" => Ok(false),
            _ => Err(self.invalid("`on` or `off` (or 1/0, true/false, yes/no)")),
        }
    }

    /// A namespace of the remote cache's keys.
    #[cfg(feature = "remote-cache")]
    fn namespace(&self) -> Result<jit_store::Namespace, ConfigError> {
        self.text()?
            .parse()
            .map_err(|error: jit_store::NamespaceError| self.invalid(error.reason))
    }

    /// A compiler preference.
    fn compiler(&self) -> Result<CompilerPreference, ConfigError> {
        match self.text()?.as_str() {
            "auto" => Ok(CompilerPreference::Auto),
            "in-process" if cfg!(feature = "in-process-compiler") => {
                Ok(CompilerPreference::InProcess)
            }
            "in-process" => {
                Err(self.left_out(super::compile::IN_PROCESS_COMPILER, "in-process-compiler"))
            }
            "subprocess" => Ok(CompilerPreference::Subprocess),
            "none" => Ok(CompilerPreference::Disabled),
            _ => Err(self.invalid("`auto`, `in-process`, `subprocess` or `none`")),
        }
    }
}

// Every variable applies here; without the caches' features, those of
// theirs are errors, which `tests/no_default_features.rs` checks (and,
// for TLS alone, the test below).
#[cfg(all(
    test,
    feature = "disk-cache",
    feature = "remote-cache",
    feature = "remote-cache-tls"
))]
mod tests;
mod values;

#[cfg(all(test, feature = "remote-cache", not(feature = "remote-cache-tls")))]
#[test]
fn a_ca_file_without_tls_names_the_feature() {
    let vars = |name: &str| (name == "SHEAF_JIT_REMOTE_CA").then(|| "/etc/ca.pem".into());
    let error = JitConfig::builder().apply_vars(vars).unwrap_err();
    assert_eq!(
        error,
        ConfigError::FeatureDisabled {
            setting: "SHEAF_JIT_REMOTE_CA",
            part: "remote cache TLS",
            feature: "remote-cache-tls",
        }
    );
}
