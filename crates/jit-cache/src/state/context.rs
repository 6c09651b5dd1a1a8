//! [`CallContext`]: what one call of the cache hands a function's state
//! besides the call itself: the cache-wide parts the state's decisions
//! read or change, taken as one argument.

use std::time::Instant;

use crate::budget::Budget;
use crate::config::CacheConfig;
use crate::wait_rule::Mean;

use super::step::Caller;

/// The cache-wide inputs of one call's decisions on a function's state.
#[derive(Debug)]
pub(super) struct CallContext<'a> {
    /// The call's place in the global recency order (all functions).
    pub(super) tick: u64,
    /// The global budgets: a hot size's specialization reserves room in it.
    pub(super) budget: &'a mut Budget,
    /// Successful compiles' times, over all functions (the wait rule's
    /// fallback for a function with none of its own).
    pub(super) compiled: &'a Mean,
    pub(super) config: &'a CacheConfig,
    /// Whether the calling thread compiles or queues.
    pub(super) caller: Caller,
    /// When the call began, if it was read already (tests drive it);
    /// otherwise read only when a compile starts running on this thread,
    /// so that a hit never reads the clock.
    pub(super) now: Option<Instant>,
}

impl CallContext<'_> {
    /// When the call began (read now, if nobody gave it).
    pub(super) fn now(&self) -> Instant {
        self.now.unwrap_or_else(Instant::now)
    }
}
