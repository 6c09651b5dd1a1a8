//! Which misses compile once a function's cache is full
//! ([`CachePolicy::Adaptive`](crate::CachePolicy::Adaptive)): admission by
//! recent frequency, in the manner of TinyLFU, a test that the working set
//! moved, and a compile budget that stops compiles which do not pay off.
//!
//! **Frequency.** Each function counts the calls of each signature in epochs
//! of `H` calls (`H` = [`EPOCH_PER_SLOT`] × capacity, at least
//! [`MIN_EPOCH`], rounded up to a power of two); a count halves at every
//! epoch boundary, lazily, when it is next read. Cached signatures keep
//! their count in their entry (a hit updates it with a shift and an add);
//! other signatures in a bounded exact map ([`OTHERS_PER_SLOT`] × capacity
//! signatures; the least frequent, then least recently called, forgotten
//! first). An exact map rather than a count-min sketch: a function sees tens
//! to hundreds of signatures, so exact counts cost little and never
//! over-count.
//!
//! **Admission.** Below capacity every miss compiles. At capacity a miss
//! compiles if its signature
//! - was seen before (the doorkeeper: one-off signatures never compile), and
//! - either the working set moved: within the last `w` misses (`w` = 8, 16,
//!   … up to 4 × capacity) at most `w / 4` signatures missed, this one at
//!   least twice, and they fit beside the cached signatures called since the
//!   first of those misses; it then replaces the least recently used entry,
//!   which that window never used. A cyclic scan over capacity + 1
//!   signatures never passes: every cached signature is called between two
//!   misses;
//! - or it was called clearly more often recently than the least frequent
//!   cached signature (more than 1.5 × its count + 1: counts are noisy, and
//!   each swap costs a compile), which it replaces (the least recently used
//!   among equals), and the function has compile budget left or the
//!   signature is *hot*: called more than once every capacity + 1 calls
//!   recently. No more than capacity signatures can be that frequent, so a
//!   hot signature belongs in the cache whatever the others do.
//!
//! **Budget.** An admitted entry pays off when it serves `H / capacity`
//! calls (at least 2), a fair share of an epoch, within `H` calls of its
//! admission. The function starts with a budget of `capacity`; each admitted
//! entry that does not pay off in time halves it, each one that does adds
//! one back. Both ways in and out are read off the workload: there is no
//! timer, and the back-off decays as soon as admissions pay.
//!
//! The constants were chosen with the policy simulator
//! (`cargo bench -p jit-cache --bench policy -- CALLS CAPACITY`) over Zipf,
//! uniform, cyclic and phase-change workloads and capacities 1 to 64.

mod outcome;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};

use crate::hashing::PrecomputedState;

pub use outcome::Refusal;
pub(crate) use outcome::{Admit, BudgetChange, PayOff, Settled};

/// Frequency epoch length per cache slot: an epoch of `H` calls gives each
/// slot `EPOCH_PER_SLOT` calls to tell frequent signatures from rare ones.
const EPOCH_PER_SLOT: usize = 16;

/// The shortest epoch: small caches still need enough calls for counts to
/// rise above noise.
const MIN_EPOCH: usize = 256;

/// The shortest window of misses read for a moved working set.
const MIN_WINDOW: usize = 8;

/// The longest window of misses, per cache slot.
const WINDOW_PER_SLOT: usize = 4;

/// In a window of `w` misses, a moved working set has at most
/// `w / MISSES_PER_SIGNATURE` signatures.
const MISSES_PER_SIGNATURE: usize = 4;

/// Signatures outside the cache whose counts are kept, per cache slot.
const OTHERS_PER_SLOT: usize = 16;

/// A signature's recent call count: halved once per epoch passed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Frequency {
    count: u32,
    epoch: u64,
}

impl Frequency {
    /// The count as of `epoch`.
    #[inline]
    pub(crate) fn at(self, epoch: u64) -> u32 {
        match epoch.saturating_sub(self.epoch) {
            0 => self.count,
            passed if passed < 32 => self.count >> passed,
            _ => 0,
        }
    }

    /// Counts one call in `epoch`; returns the count before it.
    #[inline]
    pub(crate) fn record(&mut self, epoch: u64) -> u32 {
        let before = self.at(epoch);
        self.count = before.saturating_add(1);
        self.epoch = epoch;
        before
    }
}

/// A signature outside the cache: its recent count, and when it was last
/// called.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    frequency: Frequency,
    last_call: u64,
}

/// One function's admission state.
#[derive(Debug)]
pub(crate) struct Admission {
    capacity: usize,
    epoch_shift: u32,
    /// Calls an admitted entry must serve to pay off (read on every hit).
    pay_off_calls: u64,
    /// Recent counts of signatures not cached, by signature hash.
    others: HashMap<u64, Seen, PrecomputedState>,
    max_others: usize,
    /// The last misses (the longest window's worth): signature hash and
    /// call number.
    recent_misses: VecDeque<(u64, u64)>,
    budget: u32,
    /// Admitted entries evicted before they paid off, in all.
    wasted: u64,
}

impl Admission {
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        let horizon = EPOCH_PER_SLOT
            .saturating_mul(capacity)
            .max(MIN_EPOCH)
            .checked_next_power_of_two()
            .unwrap_or(1 << (usize::BITS - 1));
        Admission {
            capacity,
            epoch_shift: horizon.trailing_zeros(),
            pay_off_calls: (horizon as u64 / capacity as u64).max(2),
            others: HashMap::with_hasher(PrecomputedState),
            max_others: OTHERS_PER_SLOT.saturating_mul(capacity),
            recent_misses: VecDeque::new(),
            budget: Self::full_budget(capacity),
            wasted: 0,
        }
    }

    fn full_budget(capacity: usize) -> u32 {
        u32::try_from(capacity).unwrap_or(u32::MAX)
    }

    /// The frequency epoch of per-function call `call`.
    #[inline]
    pub(crate) fn epoch(&self, call: u64) -> u64 {
        call >> self.epoch_shift
    }

    /// Records a miss of the signature with hash `hash` at call `call`;
    /// returns its count before this call.
    pub(crate) fn record_miss(&mut self, hash: u64, call: u64) -> u32 {
        if self.recent_misses.len() >= self.longest_window() {
            self.recent_misses.pop_front();
        }
        self.recent_misses.push_back((hash, call));
        self.record_served(hash, call)
    }

    /// Records a call of the signature with hash `hash` at call `call` that
    /// a variant with dynamic dims served: it counts towards the
    /// signature's frequency as a miss does, but not towards a moved working
    /// set (it missed nothing). Returns its count before this call.
    pub(crate) fn record_served(&mut self, hash: u64, call: u64) -> u32 {
        let epoch = self.epoch(call);
        if !self.others.contains_key(&hash) && self.others.len() >= self.max_others {
            self.forget_one(epoch);
        }
        let seen = self.others.entry(hash).or_default();
        seen.last_call = call;
        seen.frequency.record(epoch)
    }

    /// Takes the count of a signature that enters the cache (it lives in
    /// its entry from now on).
    pub(crate) fn take(&mut self, hash: u64) -> Frequency {
        self.others
            .remove(&hash)
            .map(|seen| seen.frequency)
            .unwrap_or_default()
    }

    /// Keeps the count of a signature that left the cache.
    pub(crate) fn keep(&mut self, hash: u64, frequency: Frequency, call: u64) {
        let epoch = self.epoch(call);
        if frequency.at(epoch) == 0 {
            return;
        }
        if self.others.len() >= self.max_others {
            self.forget_one(epoch);
        }
        self.others.insert(
            hash,
            Seen {
                frequency,
                last_call: call,
            },
        );
    }

    /// Counts `count` recent calls (at most an epoch's worth) of the
    /// signature with hash `hash`, which an earlier process had cached
    /// ([`LearnedPolicy`](crate::LearnedPolicy)): at capacity it is never
    /// refused as a first sight, and weighs as often as it was called.
    pub(crate) fn recall(&mut self, hash: u64, count: u32) {
        let epoch_calls = u32::try_from(self.horizon()).unwrap_or(u32::MAX);
        if !self.others.contains_key(&hash) && self.others.len() >= self.max_others {
            self.forget_one(0);
        }
        self.others.insert(
            hash,
            Seen {
                frequency: Frequency {
                    count: count.min(epoch_calls),
                    epoch: 0,
                },
                last_call: 0,
            },
        );
    }

    /// Forgets the counts that aged to zero, or else the smallest one (the
    /// least recently called among equals, so that a signature that just
    /// arrived is not forgotten before it can recur).
    fn forget_one(&mut self, epoch: u64) {
        let before = self.others.len();
        self.others.retain(|_, seen| seen.frequency.at(epoch) > 0);
        if self.others.len() < before {
            return;
        }
        let least = self
            .others
            .iter()
            .min_by_key(|(_, seen)| (seen.frequency.at(epoch), seen.last_call))
            .map(|(hash, _)| *hash);
        if let Some(hash) = least {
            self.others.remove(&hash);
        }
    }

    /// Decides whether a miss at capacity compiles. `hash` is its
    /// signature's, already recorded by [`record_miss`](Self::record_miss);
    /// `candidate` its count before this call; `victim` the least frequent
    /// cached signature's count; `used_since(call)` the hashes of the cached
    /// signatures called at or after `call`.
    pub(crate) fn decide<I>(
        &self,
        hash: u64,
        call: u64,
        candidate: u32,
        victim: u32,
        used_since: impl Fn(u64) -> I,
    ) -> Result<Admit, Refusal>
    where
        I: IntoIterator<Item = u64>,
    {
        if candidate == 0 {
            return Err(Refusal::FirstSeen);
        }
        if let Some(signatures) = self.working_set_moved(hash, used_since) {
            return Ok(Admit::WorkingSetMoved { signatures });
        }
        if candidate <= victim.saturating_add(victim / 2).saturating_add(1) {
            return Err(Refusal::LessFrequent { candidate, victim });
        }
        let hot = self.hot(call);
        if self.budget > 0 {
            Ok(Admit::Frequency { candidate, victim })
        } else if candidate.saturating_add(1) >= hot {
            Ok(Admit::Hot { candidate, hot })
        } else {
            Err(Refusal::BudgetSpent { candidate, hot })
        }
    }

    /// The size of the moved working set, if the last `w` misses (for `w` =
    /// [`MIN_WINDOW`], doubling up to the longest window) recur and fit
    /// beside the cached signatures still in use.
    fn working_set_moved<I>(&self, hash: u64, used_since: impl Fn(u64) -> I) -> Option<usize>
    where
        I: IntoIterator<Item = u64>,
    {
        let mut window: Vec<u64> = Vec::with_capacity(self.recent_misses.len());
        let mut w = MIN_WINDOW;
        while w <= self.longest_window() {
            let first = self.recent_misses.len().checked_sub(w)?;
            window.clear();
            window.extend(self.recent_misses.range(first..).map(|&(h, _)| h));
            let recurs = window.iter().filter(|&&h| h == hash).count() >= 2;
            window.sort_unstable();
            window.dedup();
            if recurs && window.len() <= w / MISSES_PER_SIGNATURE {
                let since = self.recent_misses[first].1;
                let in_use = used_since(since)
                    .into_iter()
                    .filter(|h| window.binary_search(h).is_err())
                    .count();
                let signatures = window.len() + in_use;
                if signatures <= self.capacity {
                    return Some(signatures);
                }
            }
            w *= 2;
        }
        None
    }

    fn longest_window(&self) -> usize {
        MIN_WINDOW.max(self.capacity.saturating_mul(WINDOW_PER_SLOT))
    }

    /// The pay-off due from an entry admitted at call `call`.
    pub(crate) fn due(&self, call: u64) -> PayOff {
        PayOff::Due {
            by: call.saturating_add(self.horizon()),
        }
    }

    /// Accounts for a settled admission: a wasted one halves the budget, a
    /// paid one adds one back. Returns the change worth a warning, if any.
    pub(crate) fn settle(&mut self, settled: Settled) -> Option<BudgetChange> {
        let before = self.budget;
        match settled {
            Settled::Wasted => {
                self.wasted += 1;
                self.budget /= 2;
                (before > 0 && self.budget == 0).then_some(BudgetChange::Spent {
                    wasted: self.wasted,
                    every: (self.capacity as u64).saturating_add(1),
                })
            }
            Settled::Paid => {
                self.budget = self
                    .budget
                    .saturating_add(1)
                    .min(Self::full_budget(self.capacity));
                (before == 0).then_some(BudgetChange::Restored)
            }
        }
    }

    /// Calls an admitted entry must serve to pay off.
    #[inline]
    pub(crate) fn pay_off_calls(&self) -> u64 {
        self.pay_off_calls
    }

    /// `H`: the epoch length in calls.
    fn horizon(&self) -> u64 {
        1 << self.epoch_shift
    }

    /// Whether the budget is spent.
    pub(crate) fn spent(&self) -> bool {
        self.budget == 0
    }

    /// Admitted entries evicted before they paid off, in all.
    pub(crate) fn wasted(&self) -> u64 {
        self.wasted
    }

    /// The count at call `call` from which a signature compiles though the
    /// budget is spent: a call every capacity + 1 calls over the calls that
    /// its count still remembers (`H` plus the calls into this epoch).
    pub(crate) fn hot(&self, call: u64) -> u32 {
        let remembered = self.horizon().saturating_add(call & (self.horizon() - 1));
        let every = (self.capacity as u64).saturating_add(1);
        u32::try_from((remembered / every).max(2)).unwrap_or(u32::MAX)
    }
}
