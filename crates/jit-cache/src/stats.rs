//! Counters, per function and global.

use std::time::Duration;

use crate::admission::Refusal;
use crate::explain::MissReason;
use crate::function_id::FunctionId;
use crate::generalize::Generalization;
use crate::thrash::FunctionMode;

/// Event counters and live totals, for one function or for the whole cache.
///
/// `calls = hits + misses`. A miss either compiled (`compiles`, of which
/// `failed_compiles` failed), was refused by the lowering (`refusals`: no
/// compiler ran), queued a compile, waited for a compile, or did none of
/// these. `fallback_calls` counts the calls that ran in the interpreter:
/// misses that did not compile (not admitted, thrashing, remembered failure,
/// compile in flight), queueing misses that did not wait for their compile,
/// and calls whose compile (their own or the one they waited for) failed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Counters {
    /// Calls seen.
    pub calls: u64,
    /// Calls whose signature was cached.
    pub hits: u64,
    /// Calls whose signature was not cached.
    pub misses: u64,
    /// Compile callbacks run (failed ones included, refusals not) that
    /// compiled: a callback whose executable was fetched ready-made
    /// ([`Executable::fetched`](crate::Executable::fetched)) is a fetch.
    pub compiles: u64,
    /// Compile callbacks whose executable was fetched ready-made (a disk or
    /// remote store, an artifact bundle) rather than compiled.
    pub fetches: u64,
    /// Compile callbacks that returned an error or panicked (refusals not
    /// included).
    pub failed_compiles: u64,
    /// Time spent in compile callbacks that compiled (refusals and fetches
    /// not included).
    pub compile_time: Duration,
    /// Signatures the lowering refused
    /// ([`CompileFailure::Refused`](crate::CompileFailure::Refused)): no
    /// compiler ran. Remembered like failed compiles, counted apart from
    /// them.
    pub refusals: u64,
    /// Entries evicted, whatever the cause.
    pub evictions: u64,
    /// Calls sent to the interpreter.
    pub fallback_calls: u64,
    /// Misses at capacity that admission refused (part of
    /// `fallback_calls`).
    pub admissions_refused: u64,
    /// Entries admitted at capacity that did not serve their share of calls
    /// in time: compiles that did not pay off.
    pub wasted_compiles: u64,
    /// Compiles queued on the background pool
    /// ([`JitCache::get_or_queue`](crate::JitCache::get_or_queue)); a miss
    /// whose `prepare` failed, or that found the queue full, queued
    /// nothing. The queueing call runs in the interpreter meanwhile (and is
    /// part of `fallback_calls`) unless it waits for the compile.
    pub compiles_queued: u64,
    /// Queued compiles dropped before they ran: their function was
    /// forgotten, or the cache was dropped.
    pub compiles_withdrawn: u64,
    /// Misses that found the background queue full: interpreted, not
    /// queued (a later miss queues them again).
    pub queue_full: u64,
    /// Misses that compiled (or queued) a signature with dynamic dims
    /// because some dims varied ([`CacheConfig::dynamic_dims`](crate::CacheConfig::dynamic_dims));
    /// a call refused as itself before its generalization compiled
    /// ([`CompileFailure::CallRefused`](crate::CompileFailure::CallRefused))
    /// is not one.
    pub generalizations: u64,
    /// Hits served by a signature with dynamic dims (part of `hits`).
    pub dynamic_hits: u64,
    /// Hot sizes that a signature with dynamic dims served, whose own
    /// signature was then compiled in the background beside it
    /// ([`CacheConfig::specialize_hot_sizes`](crate::CacheConfig::specialize_hot_sizes));
    /// once queued, part of `compiles_queued`.
    pub specializations: u64,
    /// Entries cached now.
    pub live_entries: usize,
    /// Bytes of the executables cached now.
    pub live_bytes: usize,
}

impl Counters {
    /// Adds `other`'s event counts to these (the live totals are not
    /// events: they stay).
    pub(crate) fn add(&mut self, other: &Counters) {
        let Counters {
            calls,
            hits,
            misses,
            compiles,
            fetches,
            failed_compiles,
            compile_time,
            refusals,
            evictions,
            fallback_calls,
            admissions_refused,
            wasted_compiles,
            compiles_queued,
            compiles_withdrawn,
            queue_full,
            generalizations,
            dynamic_hits,
            specializations,
            live_entries: _,
            live_bytes: _,
        } = other;
        self.calls += calls;
        self.hits += hits;
        self.misses += misses;
        self.compiles += compiles;
        self.fetches += fetches;
        self.failed_compiles += failed_compiles;
        self.compile_time += *compile_time;
        self.refusals += refusals;
        self.evictions += evictions;
        self.fallback_calls += fallback_calls;
        self.admissions_refused += admissions_refused;
        self.wasted_compiles += wasted_compiles;
        self.compiles_queued += compiles_queued;
        self.compiles_withdrawn += compiles_withdrawn;
        self.queue_full += queue_full;
        self.generalizations += generalizations;
        self.dynamic_hits += dynamic_hits;
        self.specializations += specializations;
    }
}

/// A snapshot of one function's state.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct FunctionStats {
    /// The function.
    pub function: FunctionId,
    /// Its capacity (signatures kept).
    pub capacity: usize,
    /// Its counters.
    pub counters: Counters,
    /// Whether it compiles new signatures.
    pub mode: FunctionMode,
    /// Why its last miss missed.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serialize::display_option")
    )]
    pub last_miss: Option<MissReason>,
    /// Why admission refused its last miss, if it did (with the recent
    /// frequencies compared).
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serialize::display_option")
    )]
    pub last_refusal: Option<Refusal>,
    /// The last miss that compiled a signature with dynamic dims: which
    /// dims varied, and the signature.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serialize::display_option")
    )]
    pub last_generalization: Option<Generalization>,
}

/// A snapshot of the whole cache; `Display` prints a report table.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct CacheStats {
    /// Counters over all functions, including functions evicted since.
    pub total: Counters,
    /// One row per known function, sorted by name.
    pub functions: Vec<FunctionStats>,
    /// `CacheConfig::max_total_entries`.
    pub max_total_entries: usize,
    /// `CacheConfig::max_total_bytes`.
    pub max_total_bytes: usize,
}

impl CacheStats {
    /// The row of `function`, if the cache knows it.
    pub fn function(&self, function: &FunctionId) -> Option<&FunctionStats> {
        self.functions.iter().find(|f| f.function == *function)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_counters_sums_every_event_and_leaves_the_live_totals() {
        let one = Counters {
            calls: 1,
            hits: 2,
            misses: 3,
            compiles: 4,
            fetches: 20,
            failed_compiles: 5,
            compile_time: Duration::from_millis(6),
            refusals: 7,
            evictions: 8,
            fallback_calls: 9,
            admissions_refused: 10,
            wasted_compiles: 11,
            compiles_queued: 12,
            compiles_withdrawn: 13,
            queue_full: 14,
            generalizations: 15,
            dynamic_hits: 16,
            specializations: 17,
            live_entries: 18,
            live_bytes: 19,
        };
        let mut sum = one.clone();
        sum.add(&one);
        let doubled = Counters {
            calls: 2,
            hits: 4,
            misses: 6,
            compiles: 8,
            fetches: 40,
            failed_compiles: 10,
            compile_time: Duration::from_millis(12),
            refusals: 14,
            evictions: 16,
            fallback_calls: 18,
            admissions_refused: 20,
            wasted_compiles: 22,
            compiles_queued: 24,
            compiles_withdrawn: 26,
            queue_full: 28,
            generalizations: 30,
            dynamic_hits: 32,
            specializations: 34,
            live_entries: 18,
            live_bytes: 19,
        };
        assert_eq!(sum, doubled);
    }
}
