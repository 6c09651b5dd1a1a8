//! Where the time of JIT calls goes, in the spirit of Sheaf's
//! `--jit-profile` table.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use jit_cache::CacheStats;
#[cfg(feature = "remote-cache")]
use jit_store::RemoteStats;

use crate::compile::pipeline::Pipeline;
use crate::compile::variant::ArtifactSource;

/// A phase of a JIT call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum Phase {
    /// Building the signature and asking the cache, up to a miss's
    /// lowering (a wait for another call's compile included).
    KeyLookup,
    /// Lowering a new signature (on the calling thread); its count is the
    /// number of lowerings.
    Lower,
    /// Fetching or compiling and loading a new signature (on a compile
    /// thread in the background).
    Compile,
    /// Copying host arguments to the device.
    InputTransfer,
    /// Running compiled code.
    Call,
    /// Copying results back to the host.
    OutputTransfer,
    /// Running the interpreter (fallback calls).
    Interpret,
}

const PHASES: [(Phase, &str); 7] = [
    (Phase::KeyLookup, "key + lookup"),
    (Phase::Lower, "lowering"),
    (Phase::Compile, "compile + load"),
    (Phase::InputTransfer, "input transfer"),
    (Phase::Call, "call"),
    (Phase::OutputTransfer, "output transfer"),
    (Phase::Interpret, "interpreter"),
];

impl Phase {
    /// A phase every compiled call goes through: timed only when the
    /// runtime [times calls](crate::JitConfig::time_calls).
    fn of_every_call(self) -> bool {
        matches!(self, Phase::KeyLookup | Phase::InputTransfer | Phase::Call)
    }
}

/// Accumulated time and count per phase, and variants loaded per artifact
/// source; lock-free.
#[derive(Debug, Default)]
pub(crate) struct Profile {
    nanos: [AtomicU64; 7],
    counts: [AtomicU64; 7],
    sources: [AtomicU64; ArtifactSource::ALL.len()],
    /// Whether the phases of every call are timed, not just counted.
    times_calls: bool,
}

impl Profile {
    /// A profile that times the phases of every call when `times_calls`
    /// (three clock reads a call), and counts them either way.
    pub(crate) fn new(times_calls: bool) -> Self {
        Profile {
            times_calls,
            ..Profile::default()
        }
    }

    /// The time now, for a phase of a call: `None`, without reading the
    /// clock, when this profile does not time calls.
    pub(crate) fn call_clock(&self) -> Option<Instant> {
        self.times_calls.then(Instant::now)
    }

    /// Counts `phase` of a call, and adds its time from `start` to `end`
    /// when both were read ([`call_clock`](Self::call_clock)).
    pub(crate) fn record_call_phase(
        &self,
        phase: Phase,
        start: Option<Instant>,
        end: Option<Instant>,
    ) {
        match start.zip(end) {
            Some((start, end)) => self.record(phase, end - start),
            None => self.count(phase),
        }
    }

    /// Counts `phase` and adds `elapsed` to its time.
    pub(crate) fn record(&self, phase: Phase, elapsed: Duration) {
        self.nanos[phase as usize].fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
        self.count(phase);
    }

    fn count(&self, phase: Phase) {
        self.counts[phase as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a variant loaded from `source`.
    pub(crate) fn count_source(&self, source: ArtifactSource) {
        self.sources[source as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The profile, with `cache`'s counters and the remote cache's of
    /// `pipeline`.
    pub(crate) fn snapshot(&self, cache: CacheStats, pipeline: &Pipeline) -> ProfileReport {
        #[cfg(not(feature = "remote-cache"))]
        let _ = pipeline;
        let phases = PHASES
            .iter()
            .map(|&(phase, _)| {
                let index = phase as usize;
                PhaseTotals {
                    phase,
                    total: Duration::from_nanos(self.nanos[index].load(Ordering::Relaxed)),
                    count: self.counts[index].load(Ordering::Relaxed),
                    timed: self.times_calls || !phase.of_every_call(),
                }
            })
            .collect();
        let sources = ArtifactSource::ALL.map(|source| {
            (
                source,
                self.sources[source as usize].load(Ordering::Relaxed),
            )
        });
        ProfileReport {
            phases,
            sources,
            cache,
            #[cfg(feature = "remote-cache")]
            remote: pipeline.remote_stats(),
        }
    }
}

/// Time spent in one phase.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct PhaseTotals {
    /// The phase.
    pub phase: Phase,
    /// Total time.
    pub total: Duration,
    /// How many times it ran.
    pub count: u64,
    /// Whether `total` is its time: false for the phases of every call
    /// (key + lookup, input transfer, call) of a runtime that does not
    /// [time calls](crate::JitConfig::time_calls), which only counts them.
    pub timed: bool,
}

/// A snapshot of the profile and the cache statistics; `Display` prints the
/// `--jit-profile` table.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ProfileReport {
    /// Time per phase.
    pub phases: Vec<PhaseTotals>,
    /// Variants loaded, per artifact source: compiler runs, disk cache,
    /// remote cache and bundle hits (a precompile batch counts once).
    pub sources: [(ArtifactSource, u64); ArtifactSource::ALL.len()],
    /// The cache's counters (hits, misses, compiles, evictions, fallback
    /// calls, live entries and bytes), per function and in total.
    pub cache: CacheStats,
    /// The remote artifact cache's counters (hits, misses, publishes,
    /// rejected entries, errors, bytes, fetch times, compile leases and
    /// waits, breaker state); `None` without a remote cache.
    #[cfg(feature = "remote-cache")]
    pub remote: Option<RemoteStats>,
}

impl ProfileReport {
    /// Totals for `phase`.
    pub fn phase(&self, phase: Phase) -> &PhaseTotals {
        self.phases
            .iter()
            .find(|p| p.phase == phase)
            .expect("every phase is reported")
    }

    /// Variants loaded from `source`.
    pub fn loaded_from(&self, source: ArtifactSource) -> u64 {
        self.sources[source as usize].1
    }
}

impl fmt::Display for ProfileReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "JIT profile")?;
        writeln!(
            f,
            "  {:<18} {:>12} {:>10} {:>12}",
            "phase", "total", "count", "mean"
        )?;
        for (totals, (_, label)) in self.phases.iter().zip(PHASES) {
            if !totals.timed {
                writeln!(
                    f,
                    "  {label:<18} {:>12} {:>10} {:>12}",
                    "untimed", totals.count, "-"
                )?;
                continue;
            }
            let mean = Duration::from_nanos(
                (totals.total.as_nanos() / u128::from(totals.count.max(1))) as u64,
            );
            writeln!(
                f,
                "  {label:<18} {:>12.3?} {:>10} {:>12.3?}",
                totals.total, totals.count, mean
            )?;
        }
        write!(f, "  artifacts loaded from:")?;
        for (source, count) in self.sources {
            write!(f, " {source} {count};")?;
        }
        writeln!(f)?;
        write!(f, "{}", self.cache)?;
        #[cfg(feature = "remote-cache")]
        if let Some(remote) = &self.remote {
            writeln!(f, "{remote}")?;
        }
        Ok(())
    }
}
