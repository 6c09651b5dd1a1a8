//! The remote tier's circuit breaker: after repeated failures, stop asking a
//! store that is down, and ask again now and then.
//!
//! Closed (requests go out) → open after `threshold` consecutive failures
//! of one kind of request (requests are skipped) → after `cool_down`, one
//! request goes out as a probe (half-open; the others are still skipped) →
//! closed when it succeeds, open for another `cool_down` when it fails.
//! Opening is logged once at warn level, closing once at info level; probes
//! that fail are debug events only, so a store that stays down costs one
//! warning.
//!
//! Failures are counted per [kind of request](Request): a fetch that
//! succeeds resets the count of fetches, a publish that succeeds that of
//! publishes. A store whose every `GET` fails while its `SET`s succeed (a
//! value type it cannot read, a proxy that drops large replies, an ACL
//! that denies reads) opens the breaker after `threshold` fetches, however
//! many publishes succeed in between; an open breaker skips both kinds, and
//! a probe of either kind that succeeds closes it.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What the breaker of a remote tier lets through, in
/// [`RemoteStats`](super::RemoteStats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
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

/// A kind of request, whose consecutive failures are counted apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    /// A `get` on a disk miss.
    Fetch,
    /// A `put` by the publisher thread.
    Publish,
}

impl Request {
    fn index(self) -> usize {
        match self {
            Request::Fetch => 0,
            Request::Publish => 1,
        }
    }

    fn plural(self) -> &'static str {
        match self {
            Request::Fetch => "fetches",
            Request::Publish => "publishes",
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum State {
    /// The consecutive failures of each kind of request
    /// ([`Request::index`]).
    Closed {
        failures: [u32; 2],
    },
    Open {
        retry_at: Instant,
    },
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
    /// Opens after `threshold` (at least 1) consecutive failures of one
    /// kind of request, for `cool_down` at a time.
    pub(crate) fn new(threshold: u32, cool_down: Duration) -> Self {
        Breaker {
            threshold: threshold.max(1),
            cool_down,
            state: Mutex::new(State::Closed { failures: [0; 2] }),
            opened: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a request (of either kind) may go out at `now`. A request
    /// let through must be followed by [`succeeded`](Self::succeeded) or
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

    /// The store answered a request of kind `request`: the count of that
    /// kind starts again (the other kind's stays); a probe that answered,
    /// or a request let through before the breaker opened, closes it.
    pub(crate) fn succeeded(&self, request: Request) {
        let mut state = self.lock();
        match &mut *state {
            State::Closed { failures } => failures[request.index()] = 0,
            State::Probing | State::Open { .. } => {
                tracing::info!(
                    target: crate::log_targets::REMOTE,
                    "the remote artifact store answers again; using it"
                );
                *state = State::Closed { failures: [0; 2] };
            }
        }
    }

    /// A request of kind `request` failed at `now` with `error`.
    pub(crate) fn failed(&self, request: Request, now: Instant, error: &dyn fmt::Display) {
        let mut state = self.lock();
        let retry_at = now + self.cool_down;
        match &mut *state {
            State::Closed { failures } if failures[request.index()] + 1 >= self.threshold => {
                let failed = failures[request.index()] + 1;
                *state = State::Open { retry_at };
                self.opened.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    target: crate::log_targets::REMOTE,
                    %error,
                    failures = failed,
                    cool_down = ?self.cool_down,
                    "the remote artifact store failed {failed} {} in a row ({error}); the JIT \
                     works locally (disk cache and compiler) and asks it again in {:?}",
                    request.plural(),
                    self.cool_down
                );
            }
            State::Closed { failures } => failures[request.index()] += 1,
            State::Probing => {
                *state = State::Open { retry_at };
                tracing::debug!(
                    target: crate::log_targets::REMOTE,
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
        fail_one(breaker, Request::Fetch, now);
    }

    fn fail_one(breaker: &Breaker, request: Request, now: Instant) {
        assert!(breaker.admit(now));
        breaker.failed(request, now, &"refused");
    }

    fn succeed(breaker: &Breaker, request: Request, now: Instant) {
        assert!(breaker.admit(now));
        breaker.succeeded(request);
    }

    #[test]
    fn opens_after_consecutive_failures_only() {
        let breaker = Breaker::new(3, COOL_DOWN);
        let now = Instant::now();
        fail(&breaker, now);
        fail(&breaker, now);
        // A success in between starts the count again.
        succeed(&breaker, Request::Fetch, now);
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
        breaker.failed(Request::Fetch, later, &"still refused");
        assert_eq!(breaker.state(), BreakerState::Open);
        assert_eq!(breaker.opened(), 1);
        assert!(!breaker.admit(later + COOL_DOWN / 2));

        let again = later + COOL_DOWN;
        succeed(&breaker, Request::Fetch, again);
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
        breaker.failed(Request::Fetch, now, &"refused");
        breaker.failed(Request::Publish, now + COOL_DOWN, &"refused");
        assert_eq!(breaker.opened(), 1);
        assert!(
            !breaker.admit(now + COOL_DOWN / 2),
            "the late failure left the retry time as it was"
        );
        assert!(breaker.admit(now + COOL_DOWN));
    }

    #[test]
    fn successes_of_one_kind_do_not_hide_failures_of_the_other() {
        let breaker = Breaker::new(3, COOL_DOWN);
        let now = Instant::now();
        // Every fetch fails, every publish between them succeeds: the
        // fetches' count goes on.
        for _ in 0..2 {
            fail_one(&breaker, Request::Fetch, now);
            succeed(&breaker, Request::Publish, now);
        }
        assert_eq!(breaker.state(), BreakerState::Closed);
        fail_one(&breaker, Request::Fetch, now);
        assert_eq!(breaker.state(), BreakerState::Open);
        assert!(!breaker.admit(now), "both kinds are skipped while open");

        // And the other way round.
        let breaker = Breaker::new(3, COOL_DOWN);
        for _ in 0..2 {
            fail_one(&breaker, Request::Publish, now);
            succeed(&breaker, Request::Fetch, now);
        }
        fail_one(&breaker, Request::Publish, now);
        assert_eq!(breaker.state(), BreakerState::Open);
    }

    #[test]
    fn a_success_resets_its_own_kind_only_and_a_probe_of_either_kind_closes_it() {
        let breaker = Breaker::new(2, COOL_DOWN);
        let now = Instant::now();
        fail_one(&breaker, Request::Fetch, now);
        fail_one(&breaker, Request::Publish, now);
        // One failure of each kind: neither reached the threshold.
        assert_eq!(breaker.state(), BreakerState::Closed);
        succeed(&breaker, Request::Publish, now);
        fail_one(&breaker, Request::Publish, now);
        assert_eq!(breaker.state(), BreakerState::Closed, "publishes: 1");
        fail_one(&breaker, Request::Fetch, now);
        assert_eq!(breaker.state(), BreakerState::Open, "fetches: 2");

        // A publish probes and answers: closed, both counts from zero.
        let later = now + COOL_DOWN;
        succeed(&breaker, Request::Publish, later);
        assert_eq!(breaker.state(), BreakerState::Closed);
        fail_one(&breaker, Request::Fetch, later);
        fail_one(&breaker, Request::Publish, later);
        assert_eq!(breaker.state(), BreakerState::Closed);
        assert_eq!(breaker.opened(), 1);
    }
}
