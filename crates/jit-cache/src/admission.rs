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

use std::collections::{HashMap, VecDeque};
use std::fmt;

use crate::explain::MissReason;
use crate::function_id::FunctionId;
use crate::hashing::PrecomputedState;

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

/// Why a miss at capacity does not compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The signature was not called recently: one-off signatures never
    /// compile at capacity.
    FirstSeen,
    /// The least frequent cached signature was called at least as often
    /// recently.
    LessFrequent {
        /// This signature's recent call count (before this call).
        candidate: u32,
        /// The least frequent cached signature's.
        victim: u32,
    },
    /// Recent admissions did not pay off (their entries were evicted before
    /// serving `capacity` calls), and this signature is not hot enough to
    /// compile anyway.
    BudgetSpent {
        /// This signature's recent call count (before this call).
        candidate: u32,
        /// The count that compiles anyway.
        hot: u32,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::FirstSeen => f.write_str("not called recently"),
            Refusal::LessFrequent { candidate, victim } => write!(
                f,
                "recent frequency {candidate} does not beat the least frequent cached \
                 signature's {victim}"
            ),
            Refusal::BudgetSpent { candidate, hot } => write!(
                f,
                "recent admissions did not pay off, and recent frequency {candidate} is below \
                 the hot threshold {hot}"
            ),
        }
    }
}

/// Why a miss at capacity compiles, and which entry it replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Its recent frequency beats the least frequent entry's, which goes.
    Frequency { candidate: u32, victim: u32 },
    /// It beats the least frequent entry and is hot, though the budget is
    /// spent.
    Hot { candidate: u32, hot: u32 },
    /// The working set moved to `signatures` signatures, which fit; the
    /// least recently used entry goes.
    WorkingSetMoved { signatures: usize },
    /// Compiled ahead on request ([`JitCache::insert`](crate::JitCache::insert));
    /// the least recently used entry goes, and nothing is owed.
    Requested,
    /// An earlier process had it cached ([`LearnedPolicy`](crate::LearnedPolicy)):
    /// admitted on its first miss, whatever its count, in place of the
    /// least frequent entry.
    Recalled,
}

impl Admit {
    /// Whether it replaces the least recently used entry rather than the
    /// least frequent one.
    pub(crate) fn evicts_least_recent(self) -> bool {
        matches!(self, Admit::WorkingSetMoved { .. } | Admit::Requested)
    }

    /// Whether its entry must pay off (serve its share of calls in time):
    /// compiles the policy chose must, requested ones need not.
    pub(crate) fn owes_pay_off(self) -> bool {
        !matches!(self, Admit::Requested)
    }
}

impl fmt::Display for Admit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Admit::Frequency { candidate, victim } => write!(
                f,
                "recent frequency {candidate} beats the least frequent cached signature's {victim}"
            ),
            Admit::Hot { candidate, hot } => write!(
                f,
                "recent frequency {candidate} reaches the hot threshold {hot}"
            ),
            Admit::WorkingSetMoved { signatures: 1 } => {
                f.write_str("the working set moved to 1 signature, which fits")
            }
            Admit::WorkingSetMoved { signatures } => write!(
                f,
                "the working set moved to {signatures} signatures, which fit"
            ),
            Admit::Requested => f.write_str("compiled ahead on request"),
            Admit::Recalled => f.write_str("an earlier process had it cached"),
        }
    }
}

/// Whether a cached entry has yet to pay for its compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PayOff {
    /// Compiled below capacity, or settled already.
    Nothing,
    /// Admitted at capacity: must serve its pay-off calls by call `by`.
    Due { by: u64 },
}

/// How an admission turned out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settled {
    /// Its entry served the pay-off calls in time.
    Paid,
    /// It did not.
    Wasted,
}

impl PayOff {
    /// Accounts for the entry's `hits`-th call, at per-function call `call`.
    #[inline]
    pub(crate) fn on_hit(&mut self, hits: u64, call: u64, needed: u64) -> Option<Settled> {
        let PayOff::Due { by } = *self else {
            return None;
        };
        let settled = if call > by {
            Settled::Wasted
        } else if hits >= needed {
            Settled::Paid
        } else {
            return None;
        };
        *self = PayOff::Nothing;
        Some(settled)
    }

    /// Accounts for the entry leaving the cache: a pay-off still due is
    /// wasted.
    pub(crate) fn on_leave(self) -> Option<Settled> {
        matches!(self, PayOff::Due { .. }).then_some(Settled::Wasted)
    }
}

/// A change of the function's budget worth a warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BudgetChange {
    /// The budget is spent: only hot signatures compile at capacity.
    Spent { wasted: u64, every: u64 },
    /// An admission paid off: admission by frequency alone again.
    Restored,
}

impl BudgetChange {
    /// Logs the change once, at warn level, with the last miss.
    pub(crate) fn log(self, func: &FunctionId, last_miss: Option<&MissReason>) {
        let last_miss = last_miss.map_or_else(|| "none".to_owned(), ToString::to_string);
        match self {
            BudgetChange::Spent { wasted, every } => tracing::warn!(
                target: "jit_cache",
                function = %func,
                last_miss = %last_miss,
                wasted_compiles = wasted,
                hot_every_calls = every,
                setting = "CacheConfig::function_capacity",
                "{func}: compiled signatures keep being evicted before they pay off ({wasted} \
                 so far); at capacity only signatures called more than once every {every} \
                 calls compile now, the others run in the interpreter. Last miss: {last_miss}. \
                 If these signatures are all needed, raise CacheConfig::function_capacity (or \
                 function_capacity_overrides[\"{func}\"])"
            ),
            BudgetChange::Restored => tracing::warn!(
                target: "jit_cache",
                function = %func,
                last_miss = %last_miss,
                "{func}: an admitted signature paid off; signatures called more often than the \
                 least frequent cached one compile again. Last miss: {last_miss}"
            ),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const NOTHING_USED: fn(u64) -> Vec<u64> = |_| Vec::new();
    /// Four cached signatures (hashes 100..104), all in use.
    const ALL_USED: fn(u64) -> Vec<u64> = |_| (100..104).collect();

    #[test]
    fn counts_halve_once_per_epoch() {
        let mut f = Frequency::default();
        for _ in 0..8 {
            f.record(3);
        }
        assert_eq!((f.at(3), f.at(4), f.at(6), f.at(100)), (8, 4, 1, 0));
        assert_eq!(f.record(4), 4);
        assert_eq!(f.at(4), 5);
    }

    #[test]
    fn epochs_pay_off_and_hot_threshold_follow_the_capacity() {
        let a = Admission::new(4); // 64 rounds up to the minimum, 256
        assert_eq!((a.epoch(255), a.epoch(256), a.pay_off_calls()), (0, 1, 64));
        // Once every 5 calls over the 256 calls remembered at an epoch's
        // start, over 511 at its end.
        assert_eq!((a.hot(256), a.hot(511)), (51, 102));
        let a = Admission::new(24); // 384 rounds up to 512
        assert_eq!((a.epoch(511), a.epoch(512), a.pay_off_calls()), (0, 1, 21));
        assert_eq!(a.hot(0), 20);
        let a = Admission::new(usize::MAX);
        assert_eq!(a.epoch(u64::MAX), u64::MAX >> (usize::BITS - 1));
        assert_eq!((a.pay_off_calls(), a.hot(u64::MAX)), (2, 2));
    }

    #[test]
    fn one_off_and_less_frequent_signatures_are_refused() {
        let a = Admission::new(4);
        assert_eq!(a.decide(1, 9, 0, 2, ALL_USED), Err(Refusal::FirstSeen));
        assert_eq!(
            a.decide(1, 9, 4, 2, ALL_USED),
            Err(Refusal::LessFrequent {
                candidate: 4,
                victim: 2
            }),
            "within the margin: 1.5 × 2 + 1"
        );
        assert_eq!(
            a.decide(1, 9, 5, 2, ALL_USED),
            Ok(Admit::Frequency {
                candidate: 5,
                victim: 2
            })
        );
        assert_eq!(
            a.decide(1, 9, 2, 0, ALL_USED)
                .map(Admit::evicts_least_recent),
            Ok(false)
        );
    }

    #[test]
    fn wasted_admissions_spend_the_budget_and_paid_off_ones_restore_it() {
        let mut a = Admission::new(4);
        assert_eq!(a.settle(Settled::Wasted), None);
        assert_eq!(a.settle(Settled::Wasted), None);
        assert_eq!(
            a.settle(Settled::Wasted),
            Some(BudgetChange::Spent {
                wasted: 3,
                every: 5
            })
        );
        assert!(a.spent());
        assert_eq!(a.settle(Settled::Wasted), None, "warned once");
        // Only hot signatures that beat the victim compile now.
        assert_eq!(
            a.decide(1, 256, 49, 3, ALL_USED),
            Err(Refusal::BudgetSpent {
                candidate: 49,
                hot: 51
            })
        );
        assert_eq!(
            a.decide(1, 256, 50, 3, ALL_USED),
            Ok(Admit::Hot {
                candidate: 50,
                hot: 51
            })
        );
        assert!(matches!(
            a.decide(1, 256, 50, 40, ALL_USED),
            Err(Refusal::LessFrequent { .. })
        ));
        assert_eq!(a.settle(Settled::Paid), Some(BudgetChange::Restored));
        assert_eq!(a.settle(Settled::Paid), None);
        assert!(matches!(
            a.decide(1, 256, 6, 3, ALL_USED),
            Ok(Admit::Frequency { .. })
        ));
        assert_eq!(a.wasted(), 4);
        for _ in 0..10 {
            a.settle(Settled::Paid);
        }
        assert_eq!(a.budget, 4, "the budget never exceeds the capacity");
    }

    #[test]
    fn an_admitted_entry_pays_off_by_serving_enough_calls_in_time() {
        let a = Admission::new(4); // an epoch of 256 calls, 64 calls to pay
        let mut on_time = a.due(100);
        assert_eq!(on_time, PayOff::Due { by: 356 });
        assert_eq!(on_time.on_hit(63, 300, 64), None);
        assert_eq!(on_time.on_hit(64, 301, 64), Some(Settled::Paid));
        assert_eq!(on_time, PayOff::Nothing);
        assert_eq!(on_time.on_hit(65, 302, 64), None, "settled once");
        assert_eq!(on_time.on_leave(), None);
        let mut late = a.due(100);
        assert_eq!(
            late.on_hit(64, 357, 64),
            Some(Settled::Wasted),
            "one call late"
        );
        let evicted = a.due(100);
        assert_eq!(evicted.on_leave(), Some(Settled::Wasted));
        assert_eq!(PayOff::Nothing.on_hit(64, 1, 64), None);
    }

    #[test]
    fn recurring_misses_that_fit_mean_the_working_set_moved() {
        let mut a = Admission::new(4);
        // Eight misses on two signatures, nothing cached in use: moved.
        for call in 1..=8 {
            a.record_miss(20 + call % 2, call);
        }
        assert_eq!(
            a.decide(21, 8, 1, 9, NOTHING_USED),
            Ok(Admit::WorkingSetMoved { signatures: 2 })
        );
        assert!(Admit::WorkingSetMoved { signatures: 2 }.evicts_least_recent());
        // Cached signatures among the misses are not counted twice.
        let used = |_| vec![20, 21, 100];
        assert_eq!(
            a.decide(21, 8, 1, 9, used),
            Ok(Admit::WorkingSetMoved { signatures: 3 })
        );
        // Recurring, but the cached signatures in use leave no room.
        let three_used = |since| {
            if since <= 1 {
                vec![100, 101, 102]
            } else {
                vec![]
            }
        };
        assert!(a.decide(21, 8, 1, 9, three_used).is_err());
        // A signature that does not recur in the window is not part of it.
        a.record_miss(22, 9);
        assert!(a.decide(22, 9, 1, 9, NOTHING_USED).is_err());
    }

    #[test]
    fn a_cyclic_scan_one_over_capacity_never_moves_the_working_set() {
        let mut a = Admission::new(4);
        // Signatures 0..=4 in a cycle with 0..4 cached: 4 misses every
        // round, and every cached signature is called between two misses.
        for round in 0..32u64 {
            let call = 5 * round + 5;
            a.record_miss(4, call);
            assert!(
                a.working_set_moved(4, |_| vec![0, 1, 2, 3]).is_none(),
                "round {round}"
            );
        }
    }

    #[test]
    fn spread_misses_do_not_move_the_working_set() {
        let mut a = Admission::new(4);
        for call in 0..16u64 {
            a.record_miss(10 + call % 5, call);
        }
        assert_eq!(a.working_set_moved(10, NOTHING_USED), None, "5 > 16 / 4");
    }

    #[test]
    fn a_recalled_signature_is_no_first_sight_and_keeps_its_count() {
        let mut a = Admission::new(4); // an epoch of 256 calls
        a.recall(7, 40);
        a.recall(8, u32::MAX);
        assert_eq!(a.record_miss(7, 1), 40);
        assert_eq!(a.take(8).at(0), 256, "at most an epoch's worth");
        assert_eq!(a.decide(9, 2, 0, 0, ALL_USED), Err(Refusal::FirstSeen));
        assert!(a.decide(7, 2, 41, 3, ALL_USED).is_ok());
        for hash in 100..200 {
            a.recall(hash, 1);
        }
        assert!(a.others.len() <= 4 * OTHERS_PER_SLOT, "bounded");
    }

    #[test]
    fn the_map_of_other_signatures_is_bounded_and_keeps_newcomers() {
        let mut a = Admission::new(2);
        for hash in 0..1000u64 {
            a.record_miss(hash, hash);
        }
        assert!(a.others.len() <= 2 * OTHERS_PER_SLOT);
        assert!(a.recent_misses.len() <= MIN_WINDOW);
        // A full map of equal counts forgets the least recently called, so
        // that two alternating newcomers build up a count.
        assert_eq!(a.record_miss(2000, 1000), 0);
        assert_eq!(a.record_miss(2001, 1001), 0);
        assert_eq!(a.record_miss(2000, 1002), 1);
        assert_eq!(a.record_miss(2001, 1003), 1);
        let f = a.take(999);
        assert_eq!(f.at(a.epoch(999)), 1);
        a.keep(999, f, 999);
        assert!(a.others.contains_key(&999));
        a.keep(5, Frequency::default(), 999);
        assert!(!a.others.contains_key(&5), "zero counts are not kept");
    }
}
