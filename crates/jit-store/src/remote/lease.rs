//! Compile leases: when several processes of a cluster miss one artifact
//! at once, one compiles it and the others wait for its publish.
//!
//! A process that finds nothing in the store asks the backend for the
//! artifact's lease ([`RemoteStore::take_lease`]) under a name unique to
//! this try ([`owner_name`]: host, process, random). The one that takes it
//! compiles; a [`HeldLease`] renews it every third of its time to live on a
//! thread of its own, and releases it once the artifact is published (or
//! the compile failed), so a lease outlives its owner by at most one time
//! to live. The others [poll](Polls) the lease with back-off (one request
//! each), and once they take it (its owner released it after publishing,
//! or it expired) look for the artifact: found, they release the lease and
//! use it; missing (the owner's build failed, or it died), they compile
//! holding the lease. They wait at most the wait bound in all, the time
//! compiling it themselves would take as estimated by [`wait_bound`] and
//! never more than [`RemoteOptions::MAX_LEASE_WAIT`], counted from the first time they
//! found the lease held: a lease that changes owner (renewed, taken over,
//! or rewritten by anyone who can write the store's keys) never starts it
//! again. Then they compile, as without leases.
//!
//! A lease is an optimisation, never a lock anything depends on: a lost
//! lease (expired while its owner was stopped) or two owners (a backend's
//! race) cost a second compile of the same artifact, whose publish is as
//! good as the first.

use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::super::counters::bump;
use super::{RemoteOptions, Shared};
use jit_cache::ErrorChain;

/// The first pause of a waiter between two looks at the store.
const FIRST_POLL: Duration = Duration::from_millis(10);

/// The longest pause between two looks (each pause doubles until then):
/// a waiter finds a published artifact at most this late.
const MAX_POLL: Duration = Duration::from_millis(100);

/// See [`RemoteOptions::MAX_TTL_WAIT`].
const MAX_TTL_WAIT: Duration = RemoteOptions::MAX_TTL_WAIT;

/// See [`RemoteOptions::MAX_LEASE_WAIT`].
const MAX_LEASE_WAIT: Duration = RemoteOptions::MAX_LEASE_WAIT;

/// The name of a lease unique to this try: `host:pid:random`, so that a
/// lease is renewed and released only by the try that took it (another
/// thread of the same process included).
pub(super) fn owner_name() -> String {
    let host = host_name();
    let mut random = [0u8; 8];
    // Without randomness the host and process still tell owners apart; two
    // threads of one process would share a name, and could renew each
    // other's lease: a second compile at worst.
    let _ = getrandom::fill(&mut random);
    format!(
        "{host}:{}:{:016x}",
        std::process::id(),
        u64::from_le_bytes(random)
    )
}

/// This machine's name (`uname`'s node name).
#[cfg(not(miri))]
fn host_name() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// Under miri, whose `uname` leaves fields uninitialised: a fixed name
/// (the process id and the random part still tell owners apart).
#[cfg(miri)]
fn host_name() -> String {
    "miri".to_owned()
}

/// The longest a waiter waits, in all, before it compiles itself: the time
/// its own compile would take, estimated as the longest build this process
/// measured, and at least `floor` (the estimate before any build,
/// [`RemoteOptions::compile_estimate`]), so that a process that compiled
/// only small functions does not give up on a larger one; and at least the
/// lease's time to live `ttl` (counted up to [`RemoteOptions::MAX_TTL_WAIT`]) and one
/// poll, so that a dead owner's lease expires (and is taken over by one
/// waiter) before the waiters give up. Never more than
/// [`RemoteOptions::MAX_LEASE_WAIT`].
/// The bound is set when the wait starts and never started again (see the
/// module docs).
///
/// [`RemoteOptions::compile_estimate`]: super::RemoteOptions::compile_estimate
pub(super) fn wait_bound(
    longest_build: Option<Duration>,
    floor: Duration,
    ttl: Duration,
) -> Duration {
    let estimate = longest_build.map_or(floor, |longest| longest.max(floor));
    let expiry = ttl.min(MAX_TTL_WAIT).saturating_add(MAX_POLL);
    estimate.max(expiry).min(MAX_LEASE_WAIT)
}

/// A waiter's looks at the store: after [`FIRST_POLL`], each pause twice
/// the last up to [`MAX_POLL`], none past the deadline.
#[derive(Debug, Clone, Copy)]
pub(super) struct Polls {
    deadline: Instant,
    pause: Duration,
}

impl Polls {
    /// Polls from `now` for at most `bound`.
    pub(super) fn new(now: Instant, bound: Duration) -> Self {
        Polls {
            deadline: now.checked_add(bound).unwrap_or(now),
            pause: FIRST_POLL,
        }
    }

    /// The pause before the next look at `now`; `None` once the deadline
    /// has passed (the waiter compiles).
    pub(super) fn next(&mut self, now: Instant) -> Option<Duration> {
        let left = self.deadline.checked_duration_since(now)?;
        if left.is_zero() {
            return None;
        }
        let pause = self.pause.min(left);
        self.pause = (self.pause * 2).min(MAX_POLL);
        Some(pause)
    }
}

/// A compile lease this process holds: renewed on its own thread until
/// dropped, then released (the drop waits for that, one request at most).
#[derive(Debug)]
pub(crate) struct HeldLease {
    stop: Option<SyncSender<()>>,
    renewer: Option<JoinHandle<()>>,
}

impl HeldLease {
    /// Starts renewing `lease`, taken by `owner` for `ttl`, every third of
    /// `ttl`.
    ///
    /// # Errors
    ///
    /// The operating system's error when the thread cannot be started (the
    /// lease is then released, and the caller compiles without it).
    pub(super) fn start(
        shared: &Arc<Shared>,
        lease: String,
        owner: String,
        ttl: Duration,
    ) -> std::io::Result<HeldLease> {
        let (stop, stopped) = mpsc::sync_channel::<()>(1);
        let renewing = Arc::clone(shared);
        let spawned = thread::Builder::new()
            .name("sheaf-jit-lease".to_owned())
            .spawn(move || {
                let mut held = true;
                loop {
                    match stopped.recv_timeout(ttl / 3) {
                        Err(RecvTimeoutError::Timeout) if held => {
                            held = renewing.renew(&lease, &owner, ttl);
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
                if held {
                    renewing.release(&lease, &owner);
                }
            });
        match spawned {
            Ok(renewer) => Ok(HeldLease {
                stop: Some(stop),
                renewer: Some(renewer),
            }),
            Err(error) => Err(error),
        }
    }
}

impl Drop for HeldLease {
    fn drop(&mut self) {
        // Closing the channel wakes the renewer, which releases the lease.
        self.stop = None;
        if let Some(renewer) = self.renewer.take() {
            let _ = renewer.join();
        }
    }
}

impl Shared {
    /// Renews `lease` for `owner`; false once it is lost (counted) or the
    /// store fails (logged: the lease then expires by itself).
    pub(super) fn renew(&self, lease: &str, owner: &str, ttl: Duration) -> bool {
        match self.backend.renew_lease(lease, owner, ttl) {
            Ok(true) => true,
            Ok(false) => {
                bump(&self.counters.leases_lost, 1);
                tracing::debug!(
                    target: crate::log_targets::REMOTE,
                    %lease,
                    "lost a compile lease (it expired, and perhaps another process compiles \
                     too)"
                );
                false
            }
            Err(error) => {
                bump(&self.counters.errors, 1);
                bump(&self.counters.leases_lost, 1);
                let error = ErrorChain(&error);
                tracing::debug!(target: crate::log_targets::REMOTE, %lease, %error, "cannot renew a compile lease: {error}");
                false
            }
        }
    }

    /// Releases `lease` if `owner` still holds it.
    pub(super) fn release(&self, lease: &str, owner: &str) {
        if let Err(error) = self.backend.release_lease(lease, owner) {
            bump(&self.counters.errors, 1);
            let error = ErrorChain(&error);
            tracing::debug!(
                target: crate::log_targets::REMOTE,
                %lease,
                %error,
                "cannot release a compile lease (it expires by itself): {error}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_double_up_to_their_ceiling_and_end_at_the_deadline() {
        let start = Instant::now();
        let mut polls = Polls::new(start, Duration::from_millis(500));
        let mut now = start;
        let mut pauses = Vec::new();
        while let Some(pause) = polls.next(now) {
            pauses.push(pause.as_millis());
            now += pause;
        }
        assert_eq!(pauses, [10, 20, 40, 80, 100, 100, 100, 50]);
        assert_eq!(now, start + Duration::from_millis(500));
        assert_eq!(Polls::new(start, Duration::ZERO).next(start), None);
    }

    #[test]
    fn the_wait_bound_is_the_longest_build_at_least_the_estimate_and_a_lease() {
        let (floor, long) = (Duration::from_secs(2), Duration::from_secs(5));
        let ttl = Duration::from_secs(1);
        assert_eq!(wait_bound(None, floor, ttl), floor);
        assert_eq!(
            wait_bound(Some(Duration::from_millis(300)), floor, ttl),
            floor
        );
        assert_eq!(wait_bound(Some(long), floor, ttl), long);
        let long_lease = Duration::from_secs(10);
        assert_eq!(
            wait_bound(Some(long), floor, long_lease),
            long_lease + MAX_POLL
        );
        let hour = Duration::from_secs(3600);
        assert_eq!(
            wait_bound(None, floor, hour),
            MAX_TTL_WAIT + MAX_POLL,
            "a huge lease is not waited out"
        );
        assert_eq!(
            wait_bound(Some(hour), hour, hour),
            MAX_LEASE_WAIT,
            "never above the maximum"
        );
    }

    #[test]
    fn owner_names_differ_between_tries() {
        let (a, b) = (owner_name(), owner_name());
        assert_ne!(a, b);
        assert!(a.contains(&format!(":{}:", std::process::id())), "{a}");
    }
}
