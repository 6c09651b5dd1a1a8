//! The remote tier's circuit breaker: after repeated failures, stop asking a
//! store that is down, and ask again now and then.
//!
//! Closed (requests go out) → open after `threshold` consecutive failures
//! (requests are skipped) → after `cool_down`, one request goes out as a
//! probe (half-open; the others are still skipped) → closed when it
//! succeeds, open for another `cool_down` when it fails. Opening is logged
//! once at warn level, closing once at info level; probes that fail are
//! debug events only, so a store that stays down costs one warning.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What the breaker of a remote tier lets through, in
/// [`RemoteStats`](super::RemoteStats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum BreakerState {
    /// Requests go out.
    #[default]
    Closed,
    /// The store failed repeatedly: requests are skipped until the
    /// cool-down ends.
    Open,
    /// The cool-down ended: one probe request is out; the others are
    /// skipped until it answers.
    HalfOpen,
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half-open",
        })
    }
}

#[derive(Debug, Clone, Copy)]
enum State {
    Closed { failures: u32 },
    Open { retry_at: Instant },
    Probing,
}

/// A circuit breaker (see the module docs). Shared by the threads that
/// fetch and the one that publishes.
#[derive(Debug)]
pub(crate) struct Breaker {
    threshold: u32,
    cool_down: Duration,
    state: Mutex<State>,
    opened: AtomicU64,
}

impl Breaker {
    /// Opens after `threshold` (at least 1) consecutive failures, for
    /// `cool_down` at a time.
    pub(crate) fn new(threshold: u32, cool_down: Duration) -> Self {
        Breaker {
            threshold: threshold.max(1),
            cool_down,
            state: Mutex::new(State::Closed { failures: 0 }),
            opened: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a request may go out at `now`. A request let through must be
    /// followed by [`succeeded`](Self::succeeded) or
    /// [`failed`](Self::failed).
    pub(crate) fn admit(&self, now: Instant) -> bool {
        let mut state = self.lock();
        match *state {
            State::Closed { .. } => true,
            State::Open { retry_at } if now >= retry_at => {
                *state = State::Probing;
                true
            }
            State::Open { .. } | State::Probing => false,
        }
    }

    /// The store answered.
    pub(crate) fn succeeded(&self) {
        let mut state = self.lock();
        if matches!(*state, State::Probing | State::Open { .. }) {
            tracing::info!(
                target: "jit_cache",
                "the remote artifact store answers again; using it"
            );
        }
        *state = State::Closed { failures: 0 };
    }

    /// The store failed at `now` with `error`.
    pub(crate) fn failed(&self, now: Instant, error: &dyn fmt::Display) {
        let mut state = self.lock();
        let retry_at = now + self.cool_down;
        match *state {
            State::Closed { failures } if failures + 1 >= self.threshold => {
                *state = State::Open { retry_at };
                self.opened.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    target: "jit_cache",
                    %error,
                    failures = failures + 1,
                    cool_down = ?self.cool_down,
                    "the remote artifact store failed {} times in a row ({error}); the JIT \
                     works locally (disk cache and compiler) and asks it again in {:?}",
                    failures + 1,
                    self.cool_down
                );
            }
            State::Closed { failures } => {
                *state = State::Closed {
                    failures: failures + 1,
                }
            }
            State::Probing => {
                *state = State::Open { retry_at };
                tracing::debug!(
                    target: "jit_cache",
                    %error,
                    "the remote artifact store is still failing ({error})"
                );
            }
            // A request let through before the breaker opened: it stays open.
            State::Open { .. } => {}
        }
    }

    /// The state now.
    pub(crate) fn state(&self) -> BreakerState {
        match *self.lock() {
            State::Closed { .. } => BreakerState::Closed,
            State::Open { .. } => BreakerState::Open,
            State::Probing => BreakerState::HalfOpen,
        }
    }

    /// How many times it opened.
    pub(crate) fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COOL_DOWN: Duration = Duration::from_secs(30);

    fn fail(breaker: &Breaker, now: Instant) {
        assert!(breaker.admit(now));
        breaker.failed(now, &"refused");
    }

    #[test]
    fn opens_after_consecutive_failures_only() {
        let breaker = Breaker::new(3, COOL_DOWN);
        let now = Instant::now();
        fail(&breaker, now);
        fail(&breaker, now);
        // A success in between starts the count again.
        assert!(breaker.admit(now));
        breaker.succeeded();
        fail(&breaker, now);
        fail(&breaker, now);
        assert_eq!(breaker.state(), BreakerState::Closed);
        fail(&breaker, now);
        assert_eq!(breaker.state(), BreakerState::Open);
        assert_eq!(breaker.opened(), 1);
        assert!(!breaker.admit(now), "requests are skipped while open");
        assert!(!breaker.admit(now + COOL_DOWN / 2));
    }

    #[test]
    fn one_probe_after_the_cool_down_closes_or_reopens_it() {
        let breaker = Breaker::new(1, COOL_DOWN);
        let start = Instant::now();
        fail(&breaker, start);
        assert_eq!(breaker.state(), BreakerState::Open);

        // The cool-down is over: one probe, the others wait for its answer.
        let later = start + COOL_DOWN;
        assert!(breaker.admit(later));
        assert_eq!(breaker.state(), BreakerState::HalfOpen);
        assert!(!breaker.admit(later));
        // It fails: open for another cool-down, not counted as a new opening.
        breaker.failed(later, &"still refused");
        assert_eq!(breaker.state(), BreakerState::Open);
        assert_eq!(breaker.opened(), 1);
        assert!(!breaker.admit(later + COOL_DOWN / 2));

        let again = later + COOL_DOWN;
        assert!(breaker.admit(again));
        breaker.succeeded();
        assert_eq!(breaker.state(), BreakerState::Closed);
        assert!(breaker.admit(again));
    }

    #[test]
    fn late_failures_keep_it_open_and_a_zero_threshold_means_one() {
        let breaker = Breaker::new(0, COOL_DOWN);
        let now = Instant::now();
        // Two requests let through together; both fail.
        assert!(breaker.admit(now));
        assert!(breaker.admit(now));
        breaker.failed(now, &"refused");
        breaker.failed(now + COOL_DOWN, &"refused");
        assert_eq!(breaker.opened(), 1);
        assert!(
            !breaker.admit(now + COOL_DOWN / 2),
            "the late failure left the retry time as it was"
        );
        assert!(breaker.admit(now + COOL_DOWN));
    }
}
