//! Configuration of a [`JitCache`](crate::JitCache).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;

use crate::error::ConfigError;

/// What a call does when another call is already compiling its signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum InFlightPolicy {
    /// Wait for that compile and use its executable (the default: the compile
    /// happens once and the wait is at most one compile).
    #[default]
    Wait,
    /// Run the interpreter meanwhile (never blocks; best when the interpreter
    /// is fast relative to a compile).
    Interpret,
}

/// How a function's cache chooses what to compile once it is full, and when
/// it stops compiling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CachePolicy {
    /// Read off the workload (the default). At capacity a miss compiles
    /// only if its signature was called more often recently than the least
    /// frequent cached one (one-off signatures never compile), or if the
    /// recent misses show that the working set moved and fits; compiles
    /// that did not pay off spend a budget, and with none left only hot
    /// signatures compile. The `thrash_*` settings do not apply.
    #[default]
    Adaptive,
    /// The first version's policy: every miss compiles and evicts the least
    /// recently used entry; more than `thrash_threshold` compiles in
    /// `thrash_window` calls send new signatures to the interpreter for
    /// `thrash_cool_down` calls, doubling up to `thrash_cool_down_cap` on
    /// each relapse. Kept to compare against and for workloads that rely on
    /// it.
    LruCoolDown,
}

impl CachePolicy {
    /// The policy's name in settings: `adaptive` or `lru-cool-down`.
    pub fn name(self) -> &'static str {
        match self {
            CachePolicy::Adaptive => "adaptive",
            CachePolicy::LruCoolDown => "lru-cool-down",
        }
    }
}

impl fmt::Display for CachePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CachePolicy {
    type Err = String;

    /// Parses a policy's [`name`](CachePolicy::name).
    ///
    /// ```
    /// use jit_cache::CachePolicy;
    /// assert_eq!("lru-cool-down".parse(), Ok(CachePolicy::LruCoolDown));
    /// assert!("lru".parse::<CachePolicy>().is_err());
    /// ```
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        [CachePolicy::Adaptive, CachePolicy::LruCoolDown]
            .into_iter()
            .find(|policy| policy.name() == text)
            .ok_or_else(|| "`adaptive` or `lru-cool-down`".to_owned())
    }
}

/// Settings of a [`JitCache`](crate::JitCache). Start from
/// [`CacheConfig::default`] and change fields:
///
/// ```
/// let mut config = jit_cache::CacheConfig::default();
/// config.function_capacity = 4;
/// assert!(config.validate().is_ok());
/// ```
///
/// Call counts below are per function (every call of that function counts,
/// hits included), except `failed_compile_retry_after`, which counts calls
/// with the failed signature.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheConfig {
    /// Signatures kept per function; [`CachePolicy`] decides what a miss
    /// beyond it does.
    /// Default 8: the number of recompiles PyTorch Dynamo allows per code
    /// object, and more distinct shapes than a Sheaf function sees in a loop.
    pub function_capacity: usize,
    /// Per-function capacity by function name, overriding `function_capacity`.
    pub function_capacity_overrides: HashMap<String, usize>,
    /// Entries kept across all functions; beyond it the least recently used
    /// entry of any function is evicted. Default 4096 (JAX's C++ default).
    pub max_total_entries: usize,
    /// Bytes kept across all functions, as reported by
    /// [`Executable::size_bytes`](crate::Executable::size_bytes); beyond it
    /// the least recently used entry of any function is evicted. An executable
    /// larger than this is run once and not cached. Default 256 MiB: far more
    /// than 4096 small IREE modules (tens of KiB each) need, and a hard stop
    /// well before the multi-GB growth this cache exists to prevent.
    pub max_total_bytes: usize,
    /// [`CachePolicy::LruCoolDown`] only: length, in calls, of the sliding
    /// window in which compiles are counted. Default 64.
    pub thrash_window: u64,
    /// [`CachePolicy::LruCoolDown`] only: compiles allowed within
    /// `thrash_window` calls; the miss that would exceed it switches the
    /// function to fallback instead of compiling. The effective threshold is
    /// never below the function's capacity, so a function can always fill its
    /// own cache. Default 16 (twice the default
    /// capacity: a legitimate warm-up of 8 shapes never trips it, a function
    /// cycling through more shapes than it can keep trips it within 64 calls).
    /// Set `usize::MAX` to disable fallback.
    pub thrash_threshold: usize,
    /// [`CachePolicy::LruCoolDown`] only: calls spent in fallback before
    /// compiling is probed again. Default 256: long enough that a probe costs
    /// a small fraction of the calls, short enough to recover within a
    /// training epoch.
    pub thrash_cool_down: u64,
    /// [`CachePolicy::LruCoolDown`] only: upper bound of the cool-down, which
    /// doubles on every relapse (a probe that trips the threshold again).
    /// Default 16384 (6 doublings).
    pub thrash_cool_down_cap: u64,
    /// Calls with a failed signature that run in the interpreter before its
    /// compile is retried. Default 1000: compile errors are usually
    /// deterministic, but a transient failure should not last forever.
    /// `u64::MAX` never retries: only
    /// [`JitCache::clear_failures`](crate::JitCache::clear_failures) does.
    pub failed_compile_retry_after: u64,
    /// Failed signatures remembered per function (least recently used beyond
    /// it are forgotten and retried). Default 64.
    pub max_failures_per_function: usize,
    /// What a blocking call ([`JitCache::get_or_compile`](crate::JitCache::get_or_compile))
    /// does while its signature is being compiled by another. Default
    /// [`InFlightPolicy::Wait`]; a queueing call
    /// ([`JitCache::get_or_queue`](crate::JitCache::get_or_queue)) waits
    /// only by its own rule (when interpreting takes longer than the
    /// compile's remaining time).
    pub in_flight: InFlightPolicy,
    /// Threads that run queued compiles (started on the first queued
    /// compile). Default 2, measured on 2 cores: 8 signatures queued at once
    /// were all compiled after 1.5 s with 2 threads against 2.6 s with 1,
    /// while the calls interpreted meanwhile took 3 µs instead of 2
    /// (`cargo bench -p sheaf-integration --bench background`).
    pub compile_threads: usize,
    /// Compiles that may wait for a thread; a miss beyond it runs in the
    /// interpreter without queueing. Default 64.
    pub compile_queue: usize,
    /// What compiles once a function's cache is full. Default
    /// [`CachePolicy::Adaptive`].
    pub policy: CachePolicy,
    /// Whether functions whose compile accepts dynamic dims
    /// ([`FunctionId::with_dynamic_dims`](crate::FunctionId::with_dynamic_dims))
    /// get a variant with a dim dynamic once that dim has taken
    /// `dynamic_dims_after` distinct values: the global switch. Default
    /// true. The variant serves every call that differs only in its dynamic
    /// dims (a rank change is another variant); the cached entries it
    /// covers stay, and serve their exact calls first.
    pub dynamic_dims: bool,
    /// Distinct values a dim takes, over the calls of one function with one
    /// dtype, rank, structure and set of static and captured scalars that
    /// compiled and the missed call itself (a call its lowering refuses
    /// never counts: [`CompileFailure::CallRefused`](crate::CompileFailure::CallRefused)),
    /// at which the miss compiles it dynamic. Default 2 (PyTorch Dynamo's
    /// choice: the second value shows the dim varies, and its call compiles
    /// the dynamic variant); 1 compiles every dim dynamic from the first
    /// miss.
    pub dynamic_dims_after: usize,
    /// Whether a size served by a variant with dynamic dims gets its own
    /// static variant once it is *hot* (called more than once every
    /// capacity + 1 calls recently, as admission counts it), compiled in
    /// the background beside the dynamic one, which keeps serving the other
    /// sizes; static code is faster (1.8× at a batch of 1 for `mlp_layer`).
    /// Only when the function's cache has room and the global budgets hold
    /// one more entry of the dynamic variant's size: a specialization never
    /// evicts. Only [`JitCache::get_or_queue`](crate::JitCache::get_or_queue)
    /// calls specialize (a blocking call would stall a hit for a compile).
    /// Default true.
    pub specialize_hot_sizes: bool,
    /// Functions (by name) that never get dynamic dims, whatever their
    /// compile accepts: the per-function opt-out.
    pub static_shape_functions: HashSet<String>,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            function_capacity: 8,
            function_capacity_overrides: HashMap::new(),
            max_total_entries: 4096,
            max_total_bytes: 256 << 20,
            thrash_window: 64,
            thrash_threshold: 16,
            thrash_cool_down: 256,
            thrash_cool_down_cap: 16384,
            failed_compile_retry_after: 1000,
            max_failures_per_function: 64,
            in_flight: InFlightPolicy::Wait,
            compile_threads: 2,
            compile_queue: 64,
            policy: CachePolicy::Adaptive,
            dynamic_dims: true,
            dynamic_dims_after: 2,
            specialize_hot_sizes: true,
            static_shape_functions: HashSet::new(),
        }
    }
}

impl CacheConfig {
    /// The capacity of the function called `name`.
    pub fn capacity_for(&self, name: &str) -> usize {
        self.function_capacity_overrides
            .get(name)
            .copied()
            .unwrap_or(self.function_capacity)
    }

    /// Whether the function called `name` may get dynamic dims (if its
    /// compile accepts them).
    pub fn dynamic_dims_for(&self, name: &str) -> bool {
        self.dynamic_dims && !self.static_shape_functions.contains(name)
    }

    /// Checks that every setting can work.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a setting (or capacity override) that is 0
    /// and must be at least 1, and [`ConfigError::CoolDownCap`] when the
    /// cool-down cap is below the cool-down.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let zero = |setting: &str| ConfigError::Zero {
            setting: setting.to_owned(),
        };
        let checks = [
            ("function_capacity", self.function_capacity as u64),
            ("max_total_entries", self.max_total_entries as u64),
            ("max_total_bytes", self.max_total_bytes as u64),
            ("thrash_window", self.thrash_window),
            ("thrash_threshold", self.thrash_threshold as u64),
            ("thrash_cool_down", self.thrash_cool_down),
            (
                "failed_compile_retry_after",
                self.failed_compile_retry_after,
            ),
            (
                "max_failures_per_function",
                self.max_failures_per_function as u64,
            ),
            ("compile_threads", self.compile_threads as u64),
            ("compile_queue", self.compile_queue as u64),
            ("dynamic_dims_after", self.dynamic_dims_after as u64),
        ];
        if let Some((setting, _)) = checks.iter().find(|(_, v)| *v == 0) {
            return Err(zero(setting));
        }
        if let Some((name, _)) = self
            .function_capacity_overrides
            .iter()
            .find(|(_, &c)| c == 0)
        {
            return Err(zero(&format!("function_capacity_overrides[{name:?}]")));
        }
        if self.thrash_cool_down_cap < self.thrash_cool_down {
            return Err(ConfigError::CoolDownCap {
                cool_down: self.thrash_cool_down,
                cap: self.thrash_cool_down_cap,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_overrides_apply() {
        let mut c = CacheConfig::default();
        assert_eq!(c.validate(), Ok(()));
        c.function_capacity_overrides.insert("softmax".into(), 2);
        assert_eq!(c.capacity_for("softmax"), 2);
        assert_eq!(c.capacity_for("sigmoid"), 8);
        c.static_shape_functions.insert("softmax".into());
        assert!(!c.dynamic_dims_for("softmax") && c.dynamic_dims_for("sigmoid"));
        c.dynamic_dims = false;
        assert!(!c.dynamic_dims_for("sigmoid"));
    }

    #[test]
    fn invalid_settings_name_the_setting() {
        let c = CacheConfig {
            thrash_window: 0,
            ..Default::default()
        };
        let e = c.validate().unwrap_err();
        assert!(
            e.to_string().contains("CacheConfig::thrash_window is 0"),
            "{e}"
        );
        let mut c = CacheConfig::default();
        c.function_capacity_overrides.insert("f".into(), 0);
        assert!(c.validate().unwrap_err().to_string().contains("[\"f\"]"));
        let c = CacheConfig {
            thrash_cool_down_cap: 1,
            ..Default::default()
        };
        assert!(matches!(c.validate(), Err(ConfigError::CoolDownCap { .. })));
    }
}
