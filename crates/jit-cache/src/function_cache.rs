//! One function's compiled signatures, in recency order, with what the
//! eviction and admission decisions read: recent frequency, last use,
//! calls served.
//!
//! A call finds its exact signature first; failing that, the most specific
//! cached signature with dynamic dims that [generalizes](Signature::generalizes)
//! it (fewest dynamic dims, then the one cached first).

use std::collections::VecDeque;
use std::sync::Arc;

use lru::LruCache;

use crate::admission::{Frequency, PayOff, Settled};
use crate::explain::{Difference, EvictionCause, MissReason};
use crate::hashing::PrecomputedState;
use crate::signature::Signature;

/// How many evictions a function remembers (as signature hashes) to explain
/// a later miss as "compiled before, evicted". A hash collision can only
/// mislabel an explanation, never change what is compiled.
const EVICTIONS_REMEMBERED: usize = 32;

/// A cached executable.
#[derive(Debug)]
pub(crate) struct Entry<E> {
    pub(crate) exe: Arc<E>,
    pub(crate) bytes: usize,
    /// Global use counter at the last use: the global LRU order.
    pub(crate) tick: u64,
    /// The signature's recent call count.
    pub(crate) frequency: Frequency,
    /// The function's call number at the last use.
    pub(crate) last_call: u64,
    /// Calls served.
    pub(crate) hits: u64,
    /// Whether it paid for its compile.
    pub(crate) pay_off: PayOff,
}

/// An entry that left the cache. Dropping it releases the cache's reference
/// to the executable.
#[derive(Debug)]
pub(crate) struct Evicted<E> {
    pub(crate) sig: Signature,
    pub(crate) exe: Arc<E>,
    pub(crate) bytes: usize,
    pub(crate) cause: EvictionCause,
    pub(crate) frequency: Frequency,
    pub(crate) pay_off: PayOff,
}

/// Which entry makes room for a new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Eviction {
    /// The least recently used.
    LeastRecent,
    /// The least frequent as of `epoch`, the least recently used among
    /// equals.
    LeastFrequent { epoch: u64 },
}

/// A cache hit: the executable, and the admission this call settled, if
/// any.
#[derive(Debug)]
pub(crate) struct Hit<E> {
    pub(crate) exe: Arc<E>,
    pub(crate) settled: Option<Settled>,
    /// Served by a signature with dynamic dims.
    pub(crate) dynamic: bool,
}

/// One function's entries, most recently used first.
#[derive(Debug)]
pub(crate) struct FunctionCache<E> {
    entries: LruCache<Signature, Entry<E>, PrecomputedState>,
    /// The cached signatures with dynamic dims, most specific first.
    dynamic: Vec<Signature>,
    capacity: usize,
    bytes: usize,
    evicted: VecDeque<(u64, EvictionCause)>,
}

impl<E> FunctionCache<E> {
    pub(crate) fn new(capacity: usize) -> Self {
        FunctionCache {
            // Unbounded: capacity is enforced here so evictions are handed back
            // and nothing is preallocated for large capacities.
            entries: LruCache::unbounded_with_hasher(PrecomputedState),
            dynamic: Vec::new(),
            capacity,
            bytes: 0,
            evicted: VecDeque::new(),
        }
    }

    /// Looks `sig` up, marking it used at global `tick` and per-function
    /// call `call` (in frequency `epoch`).
    #[inline]
    pub(crate) fn hit(
        &mut self,
        sig: &Signature,
        tick: u64,
        call: u64,
        epoch: u64,
        pay_off: u64,
    ) -> Option<Hit<E>> {
        let used = |entry: &mut Entry<E>, dynamic| {
            entry.tick = tick;
            entry.last_call = call;
            entry.frequency.record(epoch);
            entry.hits += 1;
            Hit {
                exe: Arc::clone(&entry.exe),
                settled: entry.pay_off.on_hit(entry.hits, call, pay_off),
                dynamic,
            }
        };
        if let Some(entry) = self.entries.get_mut(sig) {
            return Some(used(entry, false));
        }
        let general = self
            .dynamic
            .iter()
            .find(|general| general.generalizes(sig))?;
        self.entries.get_mut(general).map(|entry| used(entry, true))
    }

    /// The cached signature with dynamic dims that serves `sig` (as
    /// [`hit`](Self::hit) finds it, without touching it), and its bytes.
    pub(crate) fn serving(&self, sig: &Signature) -> Option<(&Signature, usize)> {
        let general = self
            .dynamic
            .iter()
            .find(|general| general.generalizes(sig))?;
        self.entries
            .peek(general)
            .map(|entry| (general, entry.bytes))
    }

    /// The recent count of the least frequent entry (the least recently
    /// used among equals).
    pub(crate) fn least_frequent(&self, epoch: u64) -> Option<u32> {
        self.least_frequent_entry(epoch).map(|(_, count)| count)
    }

    fn least_frequent_entry(&self, epoch: u64) -> Option<(&Signature, u32)> {
        // From the least recently used: `min_by_key` keeps the first minimum.
        self.entries
            .iter()
            .rev()
            .map(|(sig, entry)| (sig, entry.frequency.at(epoch)))
            .min_by_key(|&(_, count)| count)
    }

    /// The signature hashes of the entries used at or after per-function
    /// call `call`.
    pub(crate) fn used_since(&self, call: u64) -> impl Iterator<Item = u64> + '_ {
        self.entries
            .iter()
            .filter(move |(_, entry)| entry.last_call >= call)
            .map(|(sig, _)| sig.precomputed_hash())
    }

    /// Whether `sig` is cached (without touching its recency).
    pub(crate) fn contains(&self, sig: &Signature) -> bool {
        self.entries.contains(sig)
    }

    /// Inserts a new entry, first evicting one by `eviction` if the function
    /// is at capacity; returns the evicted entry.
    ///
    /// A signature with dynamic dims leaves the entries it generalizes in
    /// place: they keep serving their exact calls (static code is as fast or
    /// faster, much faster at size 1) until they are evicted like any other.
    pub(crate) fn insert(
        &mut self,
        sig: Signature,
        entry: Entry<E>,
        eviction: Eviction,
    ) -> Option<Evicted<E>> {
        let cause = EvictionCause::FunctionCapacity {
            capacity: self.capacity,
        };
        // One compile per signature at a time: `sig` is not cached. Were it,
        // its old entry would be the one replaced.
        let evicted = match self.entries.pop_entry(&sig) {
            Some((old_sig, old)) => Some(self.removed(old_sig, old, cause)),
            None if self.entries.len() >= self.capacity => self.evict(eviction, cause),
            None => None,
        };
        if sig.has_dynamic_dims() {
            let specificity = sig.dynamic_dim_count();
            let at = self
                .dynamic
                .partition_point(|cached| cached.dynamic_dim_count() <= specificity);
            self.dynamic.insert(at, sig.clone());
        }
        self.bytes += entry.bytes;
        self.entries.put(sig, entry);
        evicted
    }

    fn evict(&mut self, eviction: Eviction, cause: EvictionCause) -> Option<Evicted<E>> {
        let victim = match eviction {
            Eviction::LeastRecent => return self.pop_lru(cause),
            Eviction::LeastFrequent { epoch } => self.least_frequent_entry(epoch)?.0.clone(),
        };
        let (sig, entry) = self.entries.pop_entry(&victim)?;
        Some(self.removed(sig, entry, cause))
    }

    /// The tick of the least recently used entry.
    pub(crate) fn lru_tick(&self) -> Option<u64> {
        self.entries.peek_lru().map(|(_, e)| e.tick)
    }

    /// Removes the least recently used entry.
    pub(crate) fn pop_lru(&mut self, cause: EvictionCause) -> Option<Evicted<E>> {
        let (sig, entry) = self.entries.pop_lru()?;
        Some(self.removed(sig, entry, cause))
    }

    /// Removes every entry.
    pub(crate) fn drain(&mut self) -> Vec<Evicted<E>> {
        let mut out = Vec::with_capacity(self.entries.len());
        while let Some(e) = self.pop_lru(EvictionCause::Requested) {
            out.push(e);
        }
        out
    }

    fn removed(&mut self, sig: Signature, entry: Entry<E>, cause: EvictionCause) -> Evicted<E> {
        self.bytes -= entry.bytes;
        if sig.has_dynamic_dims() {
            self.dynamic.retain(|cached| *cached != sig);
        }
        if cause != EvictionCause::Requested {
            if self.evicted.len() == EVICTIONS_REMEMBERED {
                self.evicted.pop_front();
            }
            self.evicted.push_back((sig.precomputed_hash(), cause));
        }
        Evicted {
            sig,
            exe: entry.exe,
            bytes: entry.bytes,
            cause,
            frequency: entry.frequency,
            pay_off: entry.pay_off,
        }
    }

    /// Why `sig` (which missed) is not cached, `first` if the function had
    /// no miss before.
    pub(crate) fn explain_miss(&self, sig: &Signature, first: bool) -> MissReason {
        // Closest cached signature: fewest differences, most recent on a tie
        // (iteration runs from the most recently used).
        let mut closest: Option<Vec<Difference>> = None;
        for (cached, _) in self.entries.iter() {
            let diffs = cached.differences(sig);
            if closest.as_ref().is_none_or(|c| diffs.len() < c.len()) {
                closest = Some(diffs);
            }
        }
        let hash = sig.precomputed_hash();
        if let Some(&(_, cause)) = self.evicted.iter().rev().find(|(h, _)| *h == hash) {
            return MissReason::Evicted {
                cause,
                differences: closest.unwrap_or_default(),
            };
        }
        match closest {
            Some(differences) => MissReason::Changed { differences },
            None if first => MissReason::FirstCall,
            None => MissReason::NothingCached,
        }
    }

    /// Every entry's signature and recent call count as of `epoch`.
    pub(crate) fn counts(&self, epoch: u64) -> impl Iterator<Item = (&Signature, u32)> {
        self.entries
            .iter()
            .map(move |(sig, entry)| (sig, entry.frequency.at(epoch)))
    }

    /// Every entry's signature and executable, most recently used first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Signature, &Arc<E>)> {
        self.entries.iter().map(|(sig, entry)| (sig, &entry.exe))
    }

    /// Every entry with its signature, most recently used first.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&Signature, &Entry<E>)> {
        self.entries.iter()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    fn sig(n: i64) -> Signature {
        Signature::builder().arg(DType::F32, &[n]).build()
    }

    fn entry(tick: u64) -> Entry<u8> {
        Entry {
            exe: Arc::new(0),
            bytes: 10,
            tick,
            frequency: Frequency::default(),
            last_call: tick,
            hits: 0,
            pay_off: PayOff::Nothing,
        }
    }

    #[test]
    fn lru_eviction_at_capacity_is_handed_back_and_explained() {
        let mut c = FunctionCache::new(2);
        assert!(c.insert(sig(1), entry(1), Eviction::LeastRecent).is_none());
        assert!(c.insert(sig(2), entry(2), Eviction::LeastRecent).is_none());
        assert!(c.hit(&sig(1), 3, 3, 0, 8).is_some());
        assert_eq!(c.lru_tick(), Some(2));
        let out = c
            .insert(sig(3), entry(4), Eviction::LeastRecent)
            .expect("evicts");
        assert_eq!(out.sig, sig(2));
        assert_eq!((c.len(), c.bytes()), (2, 20));
        assert_eq!(
            c.explain_miss(&sig(2), false).to_string(),
            "arg 0: dim 0: 3 → 2 (f32[3] vs f32[2]); evicted earlier: function capacity 2 reached"
        );
        assert_eq!(
            c.explain_miss(&sig(9), false).to_string(),
            "arg 0: dim 0: 3 → 9 (f32[3] vs f32[9])"
        );
        assert_eq!(c.drain().len(), 2);
        assert_eq!(c.explain_miss(&sig(9), true), MissReason::FirstCall);
        assert_eq!(c.explain_miss(&sig(9), false), MissReason::NothingCached);
    }

    #[test]
    fn the_least_frequent_entry_goes_even_if_used_more_recently() {
        let mut c = FunctionCache::new(2);
        c.insert(sig(1), entry(1), Eviction::LeastRecent);
        c.insert(sig(2), entry(2), Eviction::LeastRecent);
        for call in 3..6 {
            c.hit(&sig(1), call, call, 0, 8);
        }
        c.hit(&sig(2), 6, 6, 0, 8);
        assert_eq!(c.least_frequent(0), Some(1));
        let used = |call| c.used_since(call).collect::<Vec<_>>();
        assert_eq!(used(6), [sig(2).precomputed_hash()]);
        assert_eq!((used(5).len(), used(1).len()), (2, 2));
        let out = c
            .insert(sig(3), entry(7), Eviction::LeastFrequent { epoch: 0 })
            .expect("evicts");
        assert_eq!(out.sig, sig(2));
        // Counts age: two epochs later sig(1)'s 3 calls count 0, as does the
        // new entry; the least recently used of the two goes.
        let out = c
            .insert(sig(4), entry(8), Eviction::LeastFrequent { epoch: 2 })
            .expect("evicts");
        assert_eq!(out.sig, sig(1));
    }

    #[test]
    fn admitted_entries_settle_once() {
        let mut c = FunctionCache::new(2);
        let admitted = |tick| Entry {
            pay_off: PayOff::Due { by: 100 },
            ..entry(tick)
        };
        c.insert(sig(1), admitted(1), Eviction::LeastRecent);
        let settled: Vec<_> = (2..6)
            .map(|call| c.hit(&sig(1), call, call, 0, 2).unwrap().settled)
            .collect();
        assert_eq!(settled, [None, Some(Settled::Paid), None, None]);
        c.insert(sig(2), admitted(6), Eviction::LeastRecent);
        assert_eq!(
            c.hit(&sig(2), 101, 101, 0, 2).unwrap().settled,
            Some(Settled::Wasted),
            "too late"
        );
        let out = c
            .insert(sig(3), admitted(102), Eviction::LeastRecent)
            .expect("evicts");
        assert_eq!(out.pay_off.on_leave(), None, "sig(1) settled already");
        let left: Vec<_> = c.drain().iter().map(|e| e.pay_off.on_leave()).collect();
        assert_eq!(left, [None, Some(Settled::Wasted)], "sig(3) leaves unpaid");
    }
}
