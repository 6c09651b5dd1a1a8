//! What admission decides and settles: why a miss compiles at capacity
//! ([`Admit`]) or does not ([`Refusal`]), what an admitted entry owes
//! ([`PayOff`]) and how it settled ([`Settled`]), and the changes of the
//! compile budget worth a warning ([`BudgetChange`]).

use std::fmt;

use crate::explain::MissReason;
use crate::function_id::FunctionId;

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
                target: crate::log_targets::POLICY,
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
                target: crate::log_targets::POLICY,
                function = %func,
                last_miss = %last_miss,
                "{func}: an admitted signature paid off; signatures called more often than the \
                 least frequent cached one compile again. Last miss: {last_miss}"
            ),
        }
    }
}
