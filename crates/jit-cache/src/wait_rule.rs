//! When a queueing call waits for its compile instead of interpreting: the
//! estimates it compares and their arithmetic.
//!
//! [`JitCache::get_or_queue`](crate::JitCache::get_or_queue) sends a miss
//! to the interpreter while its compile is queued. That is only a gain when
//! interpreting the call is cheaper than waiting for the compile: a call
//! that takes a minute in the interpreter should rather wait a second for
//! compiled code. So a miss whose compile is queued or running waits for it
//! when its function's interpreted time
//! ([`JitCache::report_interpreted`](crate::JitCache::report_interpreted))
//! exceeds the compile's expected remaining time:
//!
//! ```text
//! expected = mean compile time × (jobs queued ahead of it / compile_threads + 1)
//!            − the time it has compiled already, if it is running
//! ```
//!
//! A running compile is never expected to end in less than an eighth of
//! the mean, and one that has run longer than the mean (overdue: a larger
//! module than usual) is expected to take as long again as it has run, so
//! that no compile ever looks free.
//!
//! The mean compile time is the function's own mean over its successful
//! compiles, else the cache's, else [`PRIOR_COMPILE_TIME`]. A function with
//! no interpreted time reported interprets, as if waiting never paid.

use std::fmt;
use std::time::Duration;

/// The compile time assumed before any compile was measured: 1 s, the
/// order of an IREE compile of a small function (about 0.3 s for a one-op
/// module, seconds for a layer), so that a call waits only when
/// interpreting it is known to take longer than that.
pub const PRIOR_COMPILE_TIME: Duration = Duration::from_secs(1);

/// The weight of the newest sample in [`Ewma`], as a divisor: 1/8, the
/// weight TCP gives a new round-trip time (RFC 6298's smoothed RTT), so
/// that one outlier moves the estimate by an eighth of its distance.
const EWMA_DIVISOR: u128 = 8;

/// A running compile is expected to need at least this fraction (as a
/// divisor) of the mean compile time more: 1/8.
const RUNNING_FLOOR_DIVISOR: u32 = 8;

/// An exponentially weighted moving average of durations: the first sample
/// sets it, each later one moves it by 1/8 of the difference. Integer
/// arithmetic in nanoseconds, saturating, so that no sample can panic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ewma(Option<Duration>);

impl Ewma {
    /// Adds a sample.
    pub(crate) fn record(&mut self, sample: Duration) {
        self.0 = Some(match self.0 {
            None => sample,
            Some(mean) => {
                let (mean, sample) = (mean.as_nanos(), sample.as_nanos());
                from_nanos((mean * (EWMA_DIVISOR - 1) + sample) / EWMA_DIVISOR)
            }
        });
    }

    /// The average, once there is a sample.
    pub(crate) fn get(self) -> Option<Duration> {
        self.0
    }
}

/// An arithmetic mean of durations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mean {
    total: Duration,
    samples: u64,
}

impl Mean {
    /// Adds a sample.
    pub(crate) fn record(&mut self, sample: Duration) {
        self.total = self.total.saturating_add(sample);
        self.samples += 1;
    }

    /// The mean, once there is a sample.
    pub(crate) fn get(self) -> Option<Duration> {
        (self.samples > 0).then(|| from_nanos(self.total.as_nanos() / u128::from(self.samples)))
    }
}

/// Where a compile is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Position {
    /// Waiting for a thread, behind `ahead` other jobs.
    Queued { ahead: usize },
    /// Compiling, for `elapsed` so far.
    Running { elapsed: Duration },
}

impl fmt::Display for Position {
    /// `queued behind 3 compiles`, `compiling for 1.2s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Queued { ahead: 1 } => f.write_str("queued behind 1 compile"),
            Position::Queued { ahead } => write!(f, "queued behind {ahead} compiles"),
            Position::Running { elapsed } => write!(f, "compiling for {elapsed:.1?}"),
        }
    }
}

/// What a queueing call knows when its compile is queued or running: how
/// long its function takes in the interpreter and how long a compile takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Estimates {
    /// The function's interpreted time ([`Ewma`] of the reports).
    pub(crate) interpreted: Duration,
    /// The mean compile time: the function's, the cache's, or
    /// [`PRIOR_COMPILE_TIME`].
    pub(crate) compile: Duration,
}

impl Estimates {
    /// The estimates of a function whose interpreted time is `interpreted`
    /// (none: no estimates), with the function's and the cache's mean
    /// compile times where they are known.
    pub(crate) fn new(
        interpreted: Option<Duration>,
        function_compile: Option<Duration>,
        cache_compile: Option<Duration>,
    ) -> Option<Self> {
        Some(Estimates {
            interpreted: interpreted?,
            compile: function_compile
                .or(cache_compile)
                .unwrap_or(PRIOR_COMPILE_TIME),
        })
    }

    /// The compile's expected remaining time at `position`, with `threads`
    /// compiling: `compile × (ahead / threads + 1)` while queued,
    /// `compile − elapsed` (at least `compile / 8`) while running, and
    /// `elapsed` once overdue (running longer than `compile`).
    pub(crate) fn remaining(&self, position: Position, threads: usize) -> Duration {
        let mean = self.compile.as_nanos();
        match position {
            Position::Queued { ahead } => {
                let (ahead, threads) = (ahead as u128, threads.max(1) as u128);
                // mean × (ahead + threads) / threads, rounded down.
                from_nanos(mean.saturating_mul(ahead + threads) / threads)
            }
            Position::Running { elapsed } if elapsed > self.compile => elapsed,
            Position::Running { elapsed } => self
                .compile
                .saturating_sub(elapsed)
                .max(self.compile / RUNNING_FLOOR_DIVISOR),
        }
    }

    /// Whether waiting for the compile at `position` is expected to cost
    /// less than interpreting the call.
    pub(crate) fn waits(&self, position: Position, threads: usize) -> bool {
        self.interpreted > self.remaining(position, threads)
    }
}

/// `nanos` as a duration, saturating at [`Duration::MAX`].
fn from_nanos(nanos: u128) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    match u64::try_from(nanos / NANOS_PER_SEC) {
        // The remainder is below 10^9: it fits a u32.
        Ok(secs) => Duration::new(secs, (nanos % NANOS_PER_SEC) as u32),
        Err(_) => Duration::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_ewma_starts_at_the_first_sample_and_moves_an_eighth() {
        let mut e = Ewma::default();
        assert_eq!(e.get(), None);
        e.record(800 * MS);
        assert_eq!(e.get(), Some(800 * MS));
        e.record(1600 * MS);
        assert_eq!(e.get(), Some(900 * MS));
        e.record(100 * MS);
        assert_eq!(e.get(), Some(800 * MS));
        e.record(Duration::MAX);
        e.record(Duration::MAX);
        assert!(
            e.get().unwrap() > Duration::from_secs(1 << 60),
            "no overflow"
        );
    }

    #[test]
    fn the_mean_is_arithmetic() {
        let mut m = Mean::default();
        assert_eq!(m.get(), None);
        for ms in [100, 200, 600] {
            m.record(ms * MS);
        }
        assert_eq!(m.get(), Some(300 * MS));
        m.record(Duration::MAX);
        assert!(m.get().is_some(), "saturates, no panic");
    }

    #[test]
    fn the_compile_time_falls_back_from_function_to_cache_to_prior() {
        let s = Duration::from_secs;
        assert_eq!(Estimates::new(None, Some(s(2)), Some(s(3))), None);
        let compile = |f, c| Estimates::new(Some(s(9)), f, c).unwrap().compile;
        assert_eq!(compile(Some(s(2)), Some(s(3))), s(2));
        assert_eq!(compile(None, Some(s(3))), s(3));
        assert_eq!(compile(None, None), PRIOR_COMPILE_TIME);
    }

    #[test]
    fn remaining_counts_the_jobs_ahead_by_thread_and_subtracts_the_time_run() {
        let e = Estimates {
            interpreted: 1000 * MS,
            compile: 400 * MS,
        };
        let queued = |ahead, threads| e.remaining(Position::Queued { ahead }, threads);
        assert_eq!(queued(0, 2), 400 * MS, "its own compile");
        assert_eq!(queued(1, 2), 600 * MS);
        assert_eq!(queued(4, 2), 1200 * MS);
        assert_eq!(queued(3, 1), 1600 * MS);
        assert_eq!(queued(3, 0), 1600 * MS, "at least one thread");
        let running = |ms| e.remaining(Position::Running { elapsed: ms * MS }, 2);
        assert_eq!(running(100), 300 * MS);
        assert_eq!(running(380), 50 * MS, "never less than an eighth");
        assert_eq!(running(700), 700 * MS, "overdue: as long again");
        assert!(
            !e.waits(Position::Running { elapsed: 5000 * MS }, 2),
            "an overdue compile is not free"
        );
        // Interpreting takes 1 s: waiting pays until 1 s of compiling is
        // ahead.
        assert!(e.waits(Position::Queued { ahead: 2 }, 2));
        assert!(
            !e.waits(Position::Queued { ahead: 3 }, 2),
            "1 s is not less"
        );
        assert!(!e.waits(Position::Queued { ahead: 9 }, 2));
        assert!(e.waits(Position::Running { elapsed: MS }, 2));
        let huge = Estimates {
            interpreted: Duration::MAX,
            compile: Duration::MAX,
        };
        assert_eq!(
            huge.remaining(Position::Queued { ahead: 9 }, 1),
            Duration::MAX
        );
    }
}
