//! The `SHEAF_JIT_*` environment variables: one table, [`ENV_VARIABLES`],
//! of their names, meanings, defaults and how each applies to a
//! [`JitConfig`], and the parser it drives.
//!
//! The same table is the source of the README's (`cargo test -p xtask`
//! checks that they agree, in `xtask/src/tidy.rs`) and of the variables the
//! `config` fuzz target sets.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::num::ParseIntError;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use iree_safe::compiler::CompilerPreference;
use jit_cache::ByteSize;

use super::{
    DeviceSettings, DiskCacheFolder, JitConfig, JitConfigBuilder, RemoteCacheUrl, RemoteSecret,
};
use crate::error::ConfigError;

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
    apply: fn(&mut JitConfig, &Var<'_>) -> Result<(), ConfigError>,
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
        meaning: "signatures cached per function",
        default: "8",
        apply: |config, var| set(&mut config.cache.function_capacity, var.number()),
    },
    EnvVariable {
        name: "SHEAF_JIT_MAX_ENTRIES",
        meaning: "entries cached across functions",
        default: "4096",
        apply: |config, var| set(&mut config.cache.max_total_entries, var.number()),
    },
    EnvVariable {
        name: "SHEAF_JIT_MAX_BYTES",
        meaning: "artifact bytes cached across functions (`512M` style)",
        default: "256M",
        apply: |config, var| set(&mut config.cache.max_total_bytes, var.size()),
    },
    EnvVariable {
        name: "SHEAF_JIT_CACHE_POLICY",
        meaning: "`adaptive` (frequency-aware admission) or `lru-cool-down` (the first version's); see `jit-cache`'s README",
        default: "`adaptive`",
        apply: |config, var| set(&mut config.cache.policy, var.parse()),
    },
    EnvVariable {
        name: "SHEAF_JIT_THRASH_WINDOW",
        meaning: "calls in the thrash window (`lru-cool-down` only)",
        default: "64",
        apply: |config, var| set(&mut config.cache.thrash_window, var.number()),
    },
    EnvVariable {
        name: "SHEAF_JIT_THRASH_THRESHOLD",
        meaning: "compiles per window before fallback (`lru-cool-down` only)",
        default: "16",
        apply: |config, var| set(&mut config.cache.thrash_threshold, var.number()),
    },
    EnvVariable {
        name: "SHEAF_JIT_THRASH_COOL_DOWN",
        meaning: "fallback calls before compiling is probed again (`lru-cool-down` only)",
        default: "256",
        apply: |config, var| set(&mut config.cache.thrash_cool_down, var.number()),
    },
    EnvVariable {
        name: "SHEAF_JIT_THRASH_COOL_DOWN_CAP",
        meaning: "the cool-down doubles on each relapse, up to this (`lru-cool-down` only)",
        default: "16384",
        apply: |config, var| set(&mut config.cache.thrash_cool_down_cap, var.number()),
    },
    EnvVariable {
        name: "SHEAF_JIT_COMPILE_MODE",
        meaning: "`background` (a miss runs in the interpreter while it compiles) or `blocking` (a miss waits for its compile)",
        default: "`background`",
        apply: |config, var| set(&mut config.compile.mode, var.parse()),
    },
    EnvVariable {
        name: "SHEAF_JIT_COMPILE_THREADS",
        meaning: "background compile threads",
        default: "2",
        apply: |config, var| set(&mut config.cache.compile_threads, var.number()),
    },
    EnvVariable {
        name: "SHEAF_JIT_FAILED_RETRY",
        meaning: "calls of a failed signature before it compiles again",
        default: "1000",
        apply: |config, var| set(&mut config.cache.failed_compile_retry_after, var.number()),
    },
    EnvVariable {
        name: "SHEAF_JIT_DYNAMIC_DIMS",
        meaning: "`on`: a function whose lowering accepts dynamic dims gets one variant for a dim that varies; `off`: every shape is its own variant",
        default: "`on`",
        apply: |config, var| set(&mut config.cache.dynamic_dims, var.switch()),
    },
    EnvVariable {
        name: "SHEAF_JIT_DYNAMIC_DIMS_AFTER",
        meaning: "distinct values of a dim (the missing call's included) at which it is compiled dynamic",
        default: "2",
        apply: |config, var| set(&mut config.cache.dynamic_dims_after, var.number()),
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
        meaning: "milliseconds the process's exit waits for queued background compiles to reach the disk or remote cache (`0`: never waits)",
        default: "10000",
        apply: |config, var| set(&mut config.compile.exit_wait, var.millis()),
    },
    EnvVariable {
        name: "SHEAF_JIT_COMPILER",
        meaning: "`auto`, `in-process`, `subprocess`, or `none` (serve bundles and the disk cache only)",
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
        name: "SHEAF_JIT_CACHE_DIR",
        meaning: "artifact disk cache folder",
        default: "`$XDG_CACHE_HOME/sheaf-jit`, else `$HOME/.cache/sheaf-jit`",
        apply: |config, var| {
            config.disk.folder = DiskCacheFolder::Dir(var.path());
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_DISK_CACHE",
        meaning: "`on` or `off` (also `1`/`0`, `true`/`false`, `yes`/`no`)",
        default: "`on`",
        apply: |config, var| {
            if !var.switch()? {
                config.disk.folder = DiskCacheFolder::Disabled;
            }
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_CACHE_MAX_BYTES",
        meaning: "disk cache size bound (`512M` style)",
        default: "1G",
        apply: |config, var| set(&mut config.disk.max_bytes, var.size()),
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
        meaning: "the most worker threads of a `local-task` device (one per physical core, each pinned); `all` for IREE's cap of 64",
        default: "`all`",
        apply: |config, var| {
            config.device.cpu_workers = match var.text()?.as_str() {
                "all" => None,
                _ => Some(var.number()?),
            };
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_PARALLEL_WORKERS",
        meaning: "the most workers of the `local-task` device that runs large contractions beside `local-sync`; `cores` for as many as this process may use (`off` on one core); `off` runs them on `local-sync`",
        default: "`cores`",
        apply: |config, var| {
            config.device.parallel_workers = match var.text()?.as_str() {
                "cores" => DeviceSettings::default().parallel_workers,
                "off" => None,
                _ => Some(var.number()?),
            };
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_UPLOAD_CACHE_MAX_BYTES",
        meaning: "bytes of device copies of reused host arrays (`0` disables; `auto`: 1/4 of RAM on CPU devices, else 256M)",
        default: "`auto`",
        apply: |config, var| {
            if var.text()? == "auto" {
                config.uploads.bytes = crate::config::UploadSettings::DEVICE_SIZED;
                Ok(())
            } else {
                set(&mut config.uploads.bytes, var.size())
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
        name: "SHEAF_JIT_TRACE",
        meaning: "`1`: one line per miss, compile, eviction, fallback",
        default: "off",
        // Read by `trace::init_from_env`; checked here so that a typo is an
        // error like any other.
        apply: |_, var| var.switch().map(drop),
    },
    EnvVariable {
        name: "SHEAF_JIT_PROFILE",
        meaning: "`1`: print the JIT profile to stderr when the runtime is dropped or the process exits",
        default: "off",
        apply: |config, var| set(&mut config.profile_at_exit, var.switch()),
    },
    EnvVariable {
        name: "SHEAF_JIT_REMOTE_CACHE",
        meaning: "remote artifact cache shared by a cluster, `redis://[:password@]host[:port][/db]` (no TLS)",
        default: "none",
        apply: |config, var| {
            config.remote.url = Some(RemoteCacheUrl::new(var.text()?));
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_REMOTE_SECRET_FILE",
        meaning: "the cluster's shared secret: 32 random bytes, owner-only file (required with a remote cache)",
        default: "none",
        apply: |config, var| {
            config.remote.secret = Some(RemoteSecret::File(var.path()));
            Ok(())
        },
    },
    EnvVariable {
        name: "SHEAF_JIT_REMOTE_TIMEOUT",
        meaning: "milliseconds a remote request may take, all its reads and writes together",
        default: "500",
        apply: |config, var| set(&mut config.remote.timeouts.request, var.millis()),
    },
    EnvVariable {
        name: "SHEAF_JIT_REMOTE_CONNECT_TIMEOUT",
        meaning: "milliseconds to connect to the remote cache",
        default: "200",
        apply: |config, var| set(&mut config.remote.timeouts.connect, var.millis()),
    },
    EnvVariable {
        name: "SHEAF_JIT_REMOTE_MAX_ENTRY",
        meaning: "largest artifact published or fetched (`512M` style)",
        default: "64M",
        apply: |config, var| set(&mut config.remote.options.max_entry_bytes, var.size()),
    },
    EnvVariable {
        name: "SHEAF_JIT_REMOTE_COOL_DOWN",
        meaning: "milliseconds the remote cache is left alone after 3 failures in a row",
        default: "30000",
        apply: |config, var| set(&mut config.remote.options.cool_down, var.millis()),
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
            }
        }
        Ok(self)
    }
}

/// `SHEAF_JIT_TRACE` from the environment: `Some(true)` for `1`/`on`/...,
/// `Some(false)` for `0`/`off`/..., `None` when unset or empty; any other
/// value is an error naming the variable.
#[cfg(feature = "trace-subscriber")]
pub(crate) fn trace_switch() -> Result<Option<bool>, ConfigError> {
    let name = crate::settings::TRACE_ENV;
    let Some(value) = std::env::var_os(name).filter(|value| !value.is_empty()) else {
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

    /// A whole number.
    fn number<T: FromStr<Err = ParseIntError>>(&self) -> Result<T, ConfigError> {
        self.text()?
            .parse()
            .map_err(|error| self.invalid(format!("a whole number ({error})")))
    }

    /// A number of milliseconds.
    fn millis(&self) -> Result<Duration, ConfigError> {
        let millis = self
            .text()?
            .parse()
            .map_err(|error| self.invalid(format!("a whole number of milliseconds ({error})")))?;
        Ok(Duration::from_millis(millis))
    }

    /// A size in bytes (`512M` style), as a `u64` or `usize`.
    fn size<T: TryFrom<u64>>(&self) -> Result<T, ConfigError> {
        let ByteSize(bytes) = self
            .text()?
            .parse()
            .map_err(|_| self.invalid(ByteSize::SYNTAX))?;
        T::try_from(bytes).map_err(|_| self.invalid("a size this machine can address"))
    }

    /// An on/off switch.
    fn switch(&self) -> Result<bool, ConfigError> {
        match self.text()?.to_ascii_lowercase().as_str() {
            "1" | "on" | "true" | "yes" => Ok(true),
            "0" | "off" | "false" | "no" => Ok(false),
            _ => Err(self.invalid("`on` or `off` (or 1/0, true/false, yes/no)")),
        }
    }

    /// A compiler preference.
    fn compiler(&self) -> Result<CompilerPreference, ConfigError> {
        match self.text()?.as_str() {
            "auto" => Ok(CompilerPreference::Auto),
            "in-process" => Ok(CompilerPreference::InProcess),
            "subprocess" => Ok(CompilerPreference::Subprocess),
            "none" => Ok(CompilerPreference::Disabled),
            _ => Err(self.invalid("`auto`, `in-process`, `subprocess` or `none`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::os::unix::ffi::OsStringExt;
    use std::path::Path;

    use jit_cache::CachePolicy;

    use super::*;
    use crate::config::{CompileMode, FloatSemantics};

    fn from_os(vars: &[(&str, OsString)]) -> Result<JitConfig, ConfigError> {
        let vars: HashMap<&str, OsString> = vars.iter().cloned().collect();
        JitConfig::builder()
            .apply_vars(|name| vars.get(name).cloned())?
            .build()
    }

    fn from(vars: &[(&str, &str)]) -> Result<JitConfig, ConfigError> {
        let vars: Vec<(&str, OsString)> = vars.iter().map(|&(k, v)| (k, v.into())).collect();
        from_os(&vars)
    }

    /// A valid value of each variable that is not its default, and one it
    /// refuses (`None`: any value is a valid path).
    const SAMPLES: &[(&str, &str, Option<&[u8]>)] = &[
        ("SHEAF_JIT_DRIVER", "local-task", Some(b"\xff")),
        ("SHEAF_JIT_CAPACITY", "3", Some(b"eight")),
        ("SHEAF_JIT_MAX_ENTRIES", "100", Some(b"-1")),
        ("SHEAF_JIT_MAX_BYTES", "512M", Some(b"lots")),
        ("SHEAF_JIT_CACHE_POLICY", "lru-cool-down", Some(b"lru")),
        ("SHEAF_JIT_THRASH_WINDOW", "50", Some(b"1e3")),
        ("SHEAF_JIT_THRASH_THRESHOLD", "6", Some(b"six")),
        ("SHEAF_JIT_THRASH_COOL_DOWN", "9", Some(b"9.5")),
        ("SHEAF_JIT_THRASH_COOL_DOWN_CAP", "90", Some(b"lots")),
        ("SHEAF_JIT_COMPILE_MODE", "blocking", Some(b"async")),
        ("SHEAF_JIT_COMPILE_THREADS", "3", Some(b"many")),
        ("SHEAF_JIT_FAILED_RETRY", "7", Some(b"never")),
        ("SHEAF_JIT_DYNAMIC_DIMS", "off", Some(b"maybe")),
        ("SHEAF_JIT_DYNAMIC_DIMS_AFTER", "3", Some(b"x")),
        ("SHEAF_JIT_SPECIALIZE_HOT_SIZES", "off", Some(b"sometimes")),
        ("SHEAF_JIT_STATIC_SHAPES", "softmax", Some(b"soft\xffmax")),
        ("SHEAF_JIT_EXIT_WAIT", "0", Some(b"10s")),
        ("SHEAF_JIT_COMPILER", "in-process", Some(b"gpu")),
        ("SHEAF_JIT_FLOAT_SEMANTICS", "reassociate", Some(b"fast")),
        ("SHEAF_JIT_CACHE_DIR", "/c", None),
        ("SHEAF_JIT_DISK_CACHE", "off", Some(b"bogus")),
        ("SHEAF_JIT_CACHE_MAX_BYTES", "64M", Some(b"1.5G")),
        ("SHEAF_JIT_CPU_FALLBACK", "off", Some(b"\xff")),
        ("SHEAF_JIT_CPU_WORKERS", "2", Some(b"0")),
        ("SHEAF_JIT_PARALLEL_WORKERS", "61", Some(b"0")),
        ("SHEAF_JIT_UPLOAD_CACHE_MAX_BYTES", "1M", Some(b"big")),
        ("SHEAF_JIT_BUNDLES", "/a:/b", None),
        (crate::settings::TRACE_ENV, "1", Some(b"verbose")),
        ("SHEAF_JIT_PROFILE", "on", Some(b"loud")),
        ("SHEAF_JIT_REMOTE_CACHE", "redis://cache", Some(b"\xff")),
        ("SHEAF_JIT_REMOTE_SECRET_FILE", "/etc/secret", None),
        ("SHEAF_JIT_REMOTE_TIMEOUT", "50", Some(b"1s")),
        ("SHEAF_JIT_REMOTE_CONNECT_TIMEOUT", "20", Some(b"-5")),
        ("SHEAF_JIT_REMOTE_MAX_ENTRY", "8M", Some(b"big")),
        ("SHEAF_JIT_REMOTE_COOL_DOWN", "1500", Some(b"30s")),
    ];

    /// The variable's value applied to the defaults, unvalidated (a remote
    /// cache alone lacks its secret).
    fn applied(name: &str, value: OsString) -> Result<JitConfig, ConfigError> {
        let var = |wanted: &str| (wanted == name).then(|| value.clone());
        Ok(JitConfig::builder().apply_vars(var)?.config)
    }

    #[test]
    fn every_variable_in_the_table_is_parsed_and_a_bad_value_names_it() {
        let names: Vec<&str> = ENV_VARIABLES.iter().map(|v| v.name).collect();
        let sampled: Vec<&str> = SAMPLES.iter().map(|(name, ..)| *name).collect();
        assert_eq!(
            names, sampled,
            "a sample per variable, in the table's order"
        );
        let defaults = format!("{:?}", JitConfig::default());
        for &(name, good, bad) in SAMPLES {
            let config = applied(name, good.into()).unwrap();
            // The trace switch is read by `trace::init_from_env`.
            if name != crate::settings::TRACE_ENV {
                assert_ne!(
                    format!("{config:?}"),
                    defaults,
                    "{name}={good} changes nothing"
                );
            }
            if let Some(bad) = bad {
                let bad = OsString::from_vec(bad.to_vec());
                let error = applied(name, bad.clone()).unwrap_err().to_string();
                let shown = bad.to_string_lossy();
                assert!(error.contains(&format!("{name}={shown} ")), "{error}");
                assert!(error.contains("expected"), "{error}");
            }
        }
    }

    #[test]
    fn the_documented_defaults_are_the_defaults() {
        let defaults = format!("{:?}", JitConfig::default());
        for variable in ENV_VARIABLES {
            // `none`: unset; the cache folder's default is a description.
            if variable.default == "none" || variable.name == "SHEAF_JIT_CACHE_DIR" {
                continue;
            }
            let value = variable.default.trim_matches('`');
            let config = applied(variable.name, value.into()).unwrap();
            assert_eq!(format!("{config:?}"), defaults, "{}={value}", variable.name);
        }
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
            ("SHEAF_JIT_SPECIALIZE_HOT_SIZES", "off"),
            ("SHEAF_JIT_STATIC_SHAPES", "softmax, mlp_layer,"),
            ("SHEAF_JIT_COMPILER", "subprocess"),
            ("SHEAF_JIT_FLOAT_SEMANTICS", "reassociate"),
            ("SHEAF_JIT_CACHE_DIR", "/c"),
            ("SHEAF_JIT_CACHE_MAX_BYTES", "64M"),
            ("SHEAF_JIT_TRACE", "1"),
            ("SHEAF_JIT_CPU_FALLBACK", "off"),
            ("SHEAF_JIT_CPU_WORKERS", "2"),
            ("SHEAF_JIT_PARALLEL_WORKERS", "off"),
            ("SHEAF_JIT_UPLOAD_CACHE_MAX_BYTES", "1M"),
            ("SHEAF_JIT_BUNDLES", "/a:/b"),
            ("SHEAF_JIT_PROFILE", "1"),
        ])
        .unwrap();
        assert!(config.profile_at_exit);
        assert_eq!(config.device.cpu_fallback, None);
        assert_eq!(config.device.cpu_workers, std::num::NonZeroUsize::new(2));
        assert_eq!(config.device.parallel_workers, None);
        assert_eq!(config.uploads.bytes, 1 << 20);
        let auto = from(&[("SHEAF_JIT_UPLOAD_CACHE_MAX_BYTES", "auto")]).unwrap();
        assert_eq!(
            auto.uploads.bytes,
            crate::config::UploadSettings::DEVICE_SIZED
        );
        assert_eq!(config.bundles, [PathBuf::from("/a"), PathBuf::from("/b")]);
        assert_eq!(config.device.driver, "local-task");
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
        assert!(!cache.specialize_hot_sizes);
        let mut static_shapes: Vec<_> = cache.static_shape_functions.iter().collect();
        static_shapes.sort();
        assert_eq!(static_shapes, ["mlp_layer", "softmax"]);
        assert_eq!(
            (config.compile.mode, cache.compile_threads),
            (CompileMode::Blocking, 3)
        );
        assert_eq!(config.compile.compiler, CompilerPreference::Subprocess);
        assert_eq!(config.compile.float_semantics, FloatSemantics::Reassociate);
        assert_eq!(config.disk.folder, DiskCacheFolder::Dir("/c".into()));
        assert_eq!(config.disk.max_bytes, 64 << 20);
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
        let remote = &config.remote;
        let url = remote.url.as_ref().map(RemoteCacheUrl::as_str);
        assert_eq!(url, Some("redis://cache:6379"));
        assert!(matches!(
            &remote.secret,
            Some(RemoteSecret::File(path)) if path == Path::new("/etc/sheaf/secret")
        ));
        assert_eq!(
            (remote.timeouts.request, remote.timeouts.connect),
            (Duration::from_millis(50), Duration::from_millis(20))
        );
        assert_eq!(remote.options.max_entry_bytes, 8 << 20);
        assert_eq!(remote.options.cool_down, Duration::from_millis(1500));
        assert!(from(&[]).unwrap().remote.url.is_none(), "off by default");
    }

    #[test]
    fn unset_and_empty_variables_keep_the_defaults() {
        let config = from(&[("SHEAF_JIT_CAPACITY", ""), ("SHEAF_JIT_DISK_CACHE", "")]).unwrap();
        assert_eq!(format!("{config:?}"), format!("{:?}", JitConfig::default()));
    }

    #[test]
    fn the_disk_cache_switch_wins_over_the_folder() {
        for off in ["0", "off", "OFF", "false", "no"] {
            let config =
                from(&[("SHEAF_JIT_DISK_CACHE", off), ("SHEAF_JIT_CACHE_DIR", "/c")]).unwrap();
            assert_eq!(config.disk.store_config(), None, "{off}");
        }
        let on = from(&[
            ("SHEAF_JIT_DISK_CACHE", "on"),
            ("SHEAF_JIT_CACHE_DIR", "/c"),
        ])
        .unwrap();
        let store = on.disk.store_config().unwrap();
        assert_eq!(
            (store.directory, store.max_bytes),
            (PathBuf::from("/c"), 1 << 30)
        );
    }

    #[test]
    fn a_bad_value_names_the_variable_and_what_it_may_be() {
        for (name, value, expected) in [
            (
                "SHEAF_JIT_CAPACITY",
                "eight",
                "a whole number (invalid digit",
            ),
            ("SHEAF_JIT_MAX_BYTES", "lots", "binary units"),
            ("SHEAF_JIT_CACHE_MAX_BYTES", "1.5G", "binary units"),
            ("SHEAF_JIT_DISK_CACHE", "bogus", "`on` or `off`"),
            (
                "SHEAF_JIT_REMOTE_TIMEOUT",
                "1s",
                "a whole number of milliseconds (invalid digit",
            ),
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
                "SHEAF_JIT_FLOAT_SEMANTICS",
                "fast",
                "`strict` or `reassociate`",
            ),
            (
                "SHEAF_JIT_COMPILER",
                "gpu",
                "`auto`, `in-process`, `subprocess` or `none`",
            ),
        ] {
            let error = from(&[(name, value)]).unwrap_err().to_string();
            assert!(error.contains(&format!("{name}={value}")), "{error}");
            assert!(error.contains(expected), "{error}");
        }
        let utf8 = from_os(&[("SHEAF_JIT_DRIVER", OsString::from_vec(b"\xff".to_vec()))]);
        let utf8 = utf8.unwrap_err().to_string();
        assert!(utf8.contains("SHEAF_JIT_DRIVER=\u{fffd}"), "{utf8}");
        assert!(utf8.contains("UTF-8 text"), "{utf8}");
        let error = from(&[("SHEAF_JIT_CAPACITY", "0")]).unwrap_err();
        assert!(error.to_string().contains("function_capacity"), "{error}");
    }
}
