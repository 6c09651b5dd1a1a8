//! The range of every numeric setting: one [`Range`] per setting, naming
//! its `SHEAF_JIT_*` variable and its [`JitConfig`] field, so that a value
//! read from the environment and one set in code are refused alike, the
//! first naming the variable, the second the field.
//!
//! A value past its range would overflow on its way to a syscall, a clock
//! or a server (`SHEAF_JIT_REMOTE_LEASE=18446744073709551615` was taken,
//! then every lease request failed at the server; an exit wait of
//! `u64::MAX` ms overflows `Instant + Duration`), or asks for more than the
//! runtime could ever use (a million compile threads). The bounds are
//! generous: far past any setting that works, well short of any overflow.
//! The README's Configuration table states each (its meaning text holds
//! [`Range::describe`]; `env/tests.rs` checks it).

use std::time::Duration;

use jit_cache::ByteSize;

use super::JitConfig;
use crate::error::ConfigError;

/// What a range counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// A count (signatures, threads, calls).
    Count,
    /// Milliseconds.
    Millis,
    /// Bytes, printed with binary units.
    Bytes,
}

/// The values a numeric setting takes, inclusive, and its names.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Range {
    /// The `SHEAF_JIT_*` variable.
    pub(crate) variable: &'static str,
    /// The configuration field, as `JitConfig` spells its path.
    pub(crate) field: &'static str,
    pub(crate) min: u64,
    pub(crate) max: u64,
    pub(crate) unit: Unit,
}

const fn range(variable: &'static str, field: &'static str, min: u64, max: u64) -> Range {
    Range {
        variable,
        field,
        min,
        max,
        unit: Unit::Count,
    }
}

const fn millis(variable: &'static str, field: &'static str, min: u64, max: u64) -> Range {
    Range {
        unit: Unit::Millis,
        ..range(variable, field, min, max)
    }
}

const fn bytes(variable: &'static str, field: &'static str, min: u64, max: u64) -> Range {
    Range {
        unit: Unit::Bytes,
        ..range(variable, field, min, max)
    }
}

const K: u64 = 1 << 10;
const M: u64 = 1 << 20;
const G: u64 = 1 << 30;
const T: u64 = 1 << 40;
/// Ten minutes, in milliseconds: the longest any wait or timeout may be.
const TEN_MINUTES: u64 = 600_000;

pub(crate) const CAPACITY: Range =
    range("SHEAF_JIT_CAPACITY", "cache.function_capacity", 1, 65_536);
pub(crate) const MAX_ENTRIES: Range =
    range("SHEAF_JIT_MAX_ENTRIES", "cache.max_total_entries", 1, M);
pub(crate) const MAX_BYTES: Range = bytes("SHEAF_JIT_MAX_BYTES", "cache.max_total_bytes", 1, T);
pub(crate) const THRASH_WINDOW: Range =
    range("SHEAF_JIT_THRASH_WINDOW", "cache.thrash_window", 1, M);
pub(crate) const THRASH_THRESHOLD: Range =
    range("SHEAF_JIT_THRASH_THRESHOLD", "cache.thrash_threshold", 1, M);
pub(crate) const THRASH_COOL_DOWN: Range =
    range("SHEAF_JIT_THRASH_COOL_DOWN", "cache.thrash_cool_down", 1, G);
pub(crate) const THRASH_COOL_DOWN_CAP: Range = range(
    "SHEAF_JIT_THRASH_COOL_DOWN_CAP",
    "cache.thrash_cool_down_cap",
    1,
    G,
);
pub(crate) const COMPILE_THREADS: Range =
    range("SHEAF_JIT_COMPILE_THREADS", "cache.compile_threads", 1, 256);
pub(crate) const FAILED_RETRY: Range = range(
    "SHEAF_JIT_FAILED_RETRY",
    "cache.failed_compile_retry_after",
    1,
    G,
);
pub(crate) const DYNAMIC_DIMS_AFTER: Range = range(
    "SHEAF_JIT_DYNAMIC_DIMS_AFTER",
    "cache.dynamic_dims_after",
    1,
    1024,
);
pub(crate) const EXIT_WAIT: Range =
    millis("SHEAF_JIT_EXIT_WAIT", "compile.exit_wait", 0, TEN_MINUTES);
pub(crate) const FUNCTION_CAPACITY: Range = range(
    "SHEAF_JIT_FUNCTION_CAPACITY",
    "cache.function_capacity_overrides",
    1,
    65_536,
);
pub(crate) const CACHE_MAX_BYTES: Range =
    bytes("SHEAF_JIT_CACHE_MAX_BYTES", "disk.max_bytes", 1, 64 * T);
/// IREE's cap on a `local-task` device's workers.
pub(crate) const CPU_WORKERS: Range = range("SHEAF_JIT_CPU_WORKERS", "device.cpu_workers", 1, 64);
pub(crate) const PARALLEL_WORKERS: Range = range(
    "SHEAF_JIT_PARALLEL_WORKERS",
    "device.parallel_workers",
    1,
    64,
);
pub(crate) const UPLOAD_CACHE_MAX_BYTES: Range = bytes(
    "SHEAF_JIT_UPLOAD_CACHE_MAX_BYTES",
    "uploads.bytes",
    0,
    64 * T,
);
pub(crate) const BUFFER_POOL_MAX_BYTES: Range = bytes(
    "SHEAF_JIT_BUFFER_POOL_MAX_BYTES",
    "device.buffer_pool_bytes",
    0,
    64 * T,
);
pub(crate) const REMOTE_TIMEOUT: Range = millis(
    "SHEAF_JIT_REMOTE_TIMEOUT",
    "remote.timeouts.request",
    1,
    TEN_MINUTES,
);
pub(crate) const REMOTE_CONNECT_TIMEOUT: Range = millis(
    "SHEAF_JIT_REMOTE_CONNECT_TIMEOUT",
    "remote.timeouts.connect",
    1,
    TEN_MINUTES,
);
/// Redis refuses a value over 512 MiB (`proto-max-bulk-len`); a shared
/// folder takes more, up to this.
pub(crate) const REMOTE_MAX_ENTRY: Range = bytes(
    "SHEAF_JIT_REMOTE_MAX_ENTRY",
    "remote.options.max_entry_bytes",
    K,
    4 * G,
);
pub(crate) const REMOTE_COOL_DOWN: Range = millis(
    "SHEAF_JIT_REMOTE_COOL_DOWN",
    "remote.options.cool_down",
    0,
    3_600_000,
);
/// A lease is renewed while its owner compiles, so it needs to outlive a
/// renewal only; a dead owner's lease holds its waiters this long.
pub(crate) const REMOTE_LEASE: Range = millis(
    "SHEAF_JIT_REMOTE_LEASE",
    "remote.options.lease_ttl",
    0,
    60_000,
);

/// Every range, in the order of the variables' table.
pub(crate) const ALL: &[Range] = &[
    CAPACITY,
    MAX_ENTRIES,
    MAX_BYTES,
    THRASH_WINDOW,
    THRASH_THRESHOLD,
    THRASH_COOL_DOWN,
    THRASH_COOL_DOWN_CAP,
    COMPILE_THREADS,
    FAILED_RETRY,
    DYNAMIC_DIMS_AFTER,
    EXIT_WAIT,
    FUNCTION_CAPACITY,
    CACHE_MAX_BYTES,
    CPU_WORKERS,
    PARALLEL_WORKERS,
    UPLOAD_CACHE_MAX_BYTES,
    REMOTE_TIMEOUT,
    REMOTE_CONNECT_TIMEOUT,
    REMOTE_MAX_ENTRY,
    REMOTE_COOL_DOWN,
    REMOTE_LEASE,
];

impl Range {
    /// The range in words, as the README's table states it: `1 to 65536`,
    /// `1 KiB to 4 GiB`.
    pub(crate) fn describe(&self) -> String {
        match self.unit {
            Unit::Count | Unit::Millis => format!("{} to {}", self.min, self.max),
            Unit::Bytes => format!("{} to {}", ByteSize(self.min), ByteSize(self.max)),
        }
    }

    /// What a value of this setting may be, for an error.
    pub(crate) fn expected(&self) -> String {
        let unit = match self.unit {
            Unit::Count => "a whole number",
            Unit::Millis => "a whole number of milliseconds",
            Unit::Bytes => "a size",
        };
        format!("{unit} from {}", self.describe())
    }

    pub(crate) fn contains(&self, value: u64) -> bool {
        (self.min..=self.max).contains(&value)
    }

    /// Checks a field's value, naming the field.
    fn check(&self, value: u64) -> Result<(), ConfigError> {
        if self.contains(value) {
            return Ok(());
        }
        let shown = match self.unit {
            Unit::Count => value.to_string(),
            Unit::Millis => format!("{value} ms"),
            Unit::Bytes => ByteSize(value).to_string(),
        };
        Err(ConfigError::invalid(self.field, shown, self.expected()))
    }
}

/// A duration in whole milliseconds, saturated.
fn ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Checks every numeric field of `config` against its range, naming the
/// first field out of it.
pub(crate) fn check(config: &JitConfig) -> Result<(), ConfigError> {
    let cache = &config.cache;
    let mut checks = vec![
        (CAPACITY, cache.function_capacity as u64),
        (MAX_ENTRIES, cache.max_total_entries as u64),
        (MAX_BYTES, cache.max_total_bytes as u64),
        (THRASH_WINDOW, cache.thrash_window),
        (THRASH_THRESHOLD, cache.thrash_threshold as u64),
        (THRASH_COOL_DOWN, cache.thrash_cool_down),
        (THRASH_COOL_DOWN_CAP, cache.thrash_cool_down_cap),
        (COMPILE_THREADS, cache.compile_threads as u64),
        (FAILED_RETRY, cache.failed_compile_retry_after),
        (DYNAMIC_DIMS_AFTER, cache.dynamic_dims_after as u64),
        (EXIT_WAIT, ms(config.compile.exit_wait)),
        (CACHE_MAX_BYTES, config.disk.max_bytes),
    ];
    checks.extend(
        cache
            .function_capacity_overrides
            .values()
            .map(|&capacity| (FUNCTION_CAPACITY, capacity as u64)),
    );
    checks.extend(
        (config.device.cpu_workers.iter()).map(|workers| (CPU_WORKERS, workers.get() as u64)),
    );
    checks.extend(
        (config.device.parallel_workers.iter())
            .map(|workers| (PARALLEL_WORKERS, workers.get() as u64)),
    );
    // `DEVICE_SIZED` is the one value past the range: sized when the
    // device opens.
    if config.uploads.bytes != super::UploadSettings::DEVICE_SIZED {
        checks.push((UPLOAD_CACHE_MAX_BYTES, config.uploads.bytes as u64));
    }
    #[cfg(feature = "remote-cache")]
    {
        let remote = &config.remote;
        checks.extend([
            (REMOTE_TIMEOUT, ms(remote.timeouts.request)),
            (REMOTE_CONNECT_TIMEOUT, ms(remote.timeouts.connect)),
            (REMOTE_MAX_ENTRY, remote.options.max_entry_bytes),
            (REMOTE_COOL_DOWN, ms(remote.options.cool_down)),
        ]);
        checks.extend(remote.options.lease_ttl.map(|ttl| (REMOTE_LEASE, ms(ttl))));
    }
    for (range, value) in checks {
        range.check(value)?;
    }
    Ok(())
}

/// The variables of the fields that have one but no [`Range`].
const VARIABLES: &[(&str, &str)] = &[
    ("device.driver", "SHEAF_JIT_DRIVER"),
    ("device.cpu_fallback", "SHEAF_JIT_CPU_FALLBACK"),
    ("compile.compiler", "SHEAF_JIT_COMPILER"),
    ("compile.target", "SHEAF_JIT_TARGET"),
    ("compile.options.extra_flags", "SHEAF_JIT_COMPILER_FLAGS"),
    ("disk.folder", "SHEAF_JIT_CACHE_DIR"),
    ("remote.ca_file", "SHEAF_JIT_REMOTE_CA"),
];

/// The variable that sets `field`, if any.
fn variable_of(field: &str) -> Option<&'static str> {
    let ranged = ALL.iter().find(|range| range.field == field);
    ranged.map(|range| range.variable).or_else(|| {
        let named = VARIABLES.iter().find(|(name, _)| *name == field);
        named.map(|(_, variable)| *variable)
    })
}

/// `error` of a setting, naming the variable instead of the field when
/// one of the variables `applied` set it: errors of
/// `JitConfig::from_env` name what the user wrote.
pub(crate) fn name_variables(error: ConfigError, applied: &[&'static str]) -> ConfigError {
    let applied_to = |field: &str| variable_of(field).filter(|var| applied.contains(var));
    match error {
        ConfigError::Invalid {
            setting,
            value,
            expected,
        } => ConfigError::Invalid {
            setting: applied_to(setting).unwrap_or(setting),
            value,
            expected,
        },
        ConfigError::FeatureDisabled {
            setting,
            part,
            feature,
        } => ConfigError::FeatureDisabled {
            setting: applied_to(setting).unwrap_or(setting),
            part,
            feature,
        },
        ConfigError::Cache(jit_cache::ConfigError::CoolDownCap { cool_down, cap })
            if applied.contains(&THRASH_COOL_DOWN.variable)
                || applied.contains(&THRASH_COOL_DOWN_CAP.variable) =>
        {
            ConfigError::invalid(
                THRASH_COOL_DOWN_CAP.variable,
                cap.to_string(),
                format!(
                    "at least the cool-down, {cool_down} ({} or its default): raise {} or lower {}",
                    THRASH_COOL_DOWN.variable,
                    THRASH_COOL_DOWN_CAP.variable,
                    THRASH_COOL_DOWN.variable
                ),
            )
        }
        error => error,
    }
}
