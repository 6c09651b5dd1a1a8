//! Settings of a [`JitRuntime`](crate::JitRuntime): a builder, and the
//! environment variables that override it.
//!
//! | variable | setting | default |
//! | --- | --- | --- |
//! | `SHEAF_JIT_DRIVER` | IREE driver or device URI | `local-sync` |
//! | `SHEAF_JIT_CAPACITY` | signatures cached per function | 8 |
//! | `SHEAF_JIT_MAX_ENTRIES` | entries cached across functions | 4096 |
//! | `SHEAF_JIT_MAX_BYTES` | artifact bytes cached across functions | 256 MiB |
//! | `SHEAF_JIT_THRASH_WINDOW` | calls in the thrash window | 64 |
//! | `SHEAF_JIT_THRASH_THRESHOLD` | compiles per window before fallback | 16 |
//! | `SHEAF_JIT_THRASH_COOL_DOWN` | fallback calls before a probe | 256 |
//! | `SHEAF_JIT_TRACE` | `1`: one line per miss/compile/evict/fallback | off |
//!
//! The defaults and their reasons are documented on
//! [`jit_cache::CacheConfig`]. With the default [`CompilerPreference::Auto`]
//! and [`DiskCacheSetting::Default`], `iree_safe::compiler` also reads
//! `SHEAF_JIT_COMPILER` (`auto`, `in-process`, `subprocess`),
//! `SHEAF_JIT_CACHE_DIR`, `SHEAF_JIT_DISK_CACHE` (`off` disables) and
//! `SHEAF_JIT_CACHE_MAX_BYTES`, plus `IREE_COMPILER_LIB` / `IREE_COMPILE` to
//! locate the compiler.

use std::path::PathBuf;
use std::str::FromStr;

use iree_safe::compiler::CompileOptions;
use jit_cache::CacheConfig;

use crate::error::JitError;

/// Which compiler implementation to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CompilerPreference {
    /// In-process (`libIREECompiler.so`) when it loads, else `iree-compile`;
    /// `SHEAF_JIT_COMPILER` may force either
    /// (`iree_safe::compiler::choose_compiler`).
    #[default]
    Auto,
    /// In-process only.
    InProcess,
    /// `iree-compile` subprocesses only.
    Subprocess,
}

/// Where compiled artifacts are kept between processes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DiskCacheSetting {
    /// As the environment says (`SHEAF_JIT_CACHE_DIR`, else the user's cache
    /// directory; `SHEAF_JIT_DISK_CACHE=off` disables it).
    #[default]
    Default,
    /// This folder.
    Dir(PathBuf),
    /// No disk cache.
    Disabled,
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
    /// Compiler implementation.
    pub compiler: CompilerPreference,
    /// Compiler options (target backend, CPU, extra flags).
    pub compile_options: CompileOptions,
    /// Artifact disk cache.
    pub disk_cache: DiskCacheSetting,
}

impl Default for JitConfig {
    fn default() -> Self {
        JitConfig {
            driver: "local-sync".into(),
            cache: CacheConfig::default(),
            compiler: CompilerPreference::Auto,
            compile_options: default_compile_options(),
            disk_cache: DiskCacheSetting::Default,
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
    pub fn from_env() -> Result<JitConfig, JitError> {
        JitConfig::builder().apply_env()?.build()
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

    /// Thrash detection: `threshold` compiles within `window` calls switch a
    /// function to fallback for `cool_down` calls.
    pub fn thrash(mut self, window: u64, threshold: usize, cool_down: u64) -> Self {
        self.config.cache.thrash_window = window;
        self.config.cache.thrash_threshold = threshold;
        self.config.cache.thrash_cool_down = cool_down;
        self
    }

    /// The whole cache policy at once.
    pub fn cache_config(mut self, cache: CacheConfig) -> Self {
        self.config.cache = cache;
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

    /// Keep compiled artifacts in `dir` between processes.
    pub fn disk_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.config.disk_cache = DiskCacheSetting::Dir(dir.into());
        self
    }

    /// No disk cache.
    pub fn no_disk_cache(mut self) -> Self {
        self.config.disk_cache = DiskCacheSetting::Disabled;
        self
    }

    /// Applies the `SHEAF_JIT_*` environment variables (see the module
    /// docs); fails naming the variable whose value does not parse.
    pub fn apply_env(self) -> Result<Self, JitError> {
        self.apply_vars(|name| std::env::var(name).ok())
    }

    /// [`apply_env`](Self::apply_env) over any variable lookup.
    fn apply_vars(mut self, var: impl Fn(&str) -> Option<String>) -> Result<Self, JitError> {
        let var = |name: &str| var(name).filter(|value| !value.is_empty());
        let cache = &mut self.config.cache;
        if let Some(driver) = var("SHEAF_JIT_DRIVER") {
            self.config.driver = driver;
        }
        parse(&var, "SHEAF_JIT_CAPACITY", &mut cache.function_capacity)?;
        parse(&var, "SHEAF_JIT_MAX_ENTRIES", &mut cache.max_total_entries)?;
        parse(&var, "SHEAF_JIT_MAX_BYTES", &mut cache.max_total_bytes)?;
        parse(&var, "SHEAF_JIT_THRASH_WINDOW", &mut cache.thrash_window)?;
        parse(
            &var,
            "SHEAF_JIT_THRASH_THRESHOLD",
            &mut cache.thrash_threshold,
        )?;
        parse(
            &var,
            "SHEAF_JIT_THRASH_COOL_DOWN",
            &mut cache.thrash_cool_down,
        )?;
        Ok(self)
    }

    /// Validates and returns the configuration.
    pub fn build(self) -> Result<JitConfig, JitError> {
        self.config
            .cache
            .validate()
            .map_err(|e| JitError::Config(e.to_string()))?;
        if self.config.driver.is_empty() {
            return Err(JitError::Config(
                "the driver name is empty; use `local-sync`, `local-task` or a device URI".into(),
            ));
        }
        Ok(self.config)
    }
}

/// Parses variable `name` into `target` when it is set.
fn parse<T: FromStr>(
    var: &impl Fn(&str) -> Option<String>,
    name: &str,
    target: &mut T,
) -> Result<(), JitError>
where
    T::Err: std::fmt::Display,
{
    if let Some(text) = var(name) {
        *target = text
            .parse()
            .map_err(|e| JitError::Config(format!("{name}={text}: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn from(vars: &[(&str, &str)]) -> Result<JitConfig, JitError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
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
            ("SHEAF_JIT_MAX_BYTES", "1048576"),
            ("SHEAF_JIT_THRASH_WINDOW", "50"),
            ("SHEAF_JIT_THRASH_THRESHOLD", "6"),
            ("SHEAF_JIT_THRASH_COOL_DOWN", "9"),
        ])
        .unwrap();
        assert_eq!(config.driver, "local-task");
        let cache = &config.cache;
        assert_eq!(
            (
                cache.function_capacity,
                cache.max_total_entries,
                cache.max_total_bytes
            ),
            (3, 100, 1 << 20)
        );
        assert_eq!(
            (
                cache.thrash_window,
                cache.thrash_threshold,
                cache.thrash_cool_down
            ),
            (50, 6, 9)
        );
    }

    #[test]
    fn unset_and_empty_variables_keep_the_defaults() {
        let config = from(&[("SHEAF_JIT_CAPACITY", "")]).unwrap();
        assert_eq!(config.driver, "local-sync");
        assert_eq!(
            config.cache.function_capacity,
            CacheConfig::default().function_capacity
        );
        assert!(config
            .compile_options
            .extra_flags
            .iter()
            .any(|f| f == "--iree-input-demote-f64-to-f32=false"));
    }

    #[test]
    fn a_bad_value_names_the_variable() {
        let error = from(&[("SHEAF_JIT_CAPACITY", "eight")]).unwrap_err();
        assert!(
            error.to_string().contains("SHEAF_JIT_CAPACITY=eight"),
            "{error}"
        );
        let error = from(&[("SHEAF_JIT_CAPACITY", "0")]).unwrap_err();
        assert!(matches!(error, JitError::Config(_)), "{error}");
    }
}
