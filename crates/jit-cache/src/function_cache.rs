//! The bounded LRU of one function's compiled signatures.

use std::collections::VecDeque;
use std::sync::Arc;

use lru::LruCache;

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
    pub exe: Arc<E>,
    pub bytes: usize,
    /// Global use counter at the last use: the global LRU order.
    pub tick: u64,
}

/// An entry that left the cache. Dropping it releases the cache's reference
/// to the executable.
#[derive(Debug)]
pub(crate) struct Evicted<E> {
    pub sig: Signature,
    pub exe: Arc<E>,
    pub bytes: usize,
    pub cause: EvictionCause,
}

/// One function's entries, most recently used first.
#[derive(Debug)]
pub(crate) struct FunctionCache<E> {
    entries: LruCache<Signature, Entry<E>, PrecomputedState>,
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
            capacity,
            bytes: 0,
            evicted: VecDeque::new(),
        }
    }

    /// Looks `sig` up, marking it most recently used at `tick`.
    #[inline]
    pub(crate) fn hit(&mut self, sig: &Signature, tick: u64) -> Option<Arc<E>> {
        let entry = self.entries.get_mut(sig)?;
        entry.tick = tick;
        Some(Arc::clone(&entry.exe))
    }

    /// Inserts a new entry; returns the least recently used one if the
    /// function's capacity overflowed.
    pub(crate) fn insert(&mut self, sig: Signature, entry: Entry<E>) -> Option<Evicted<E>> {
        self.bytes += entry.bytes;
        // `push` hands back a replaced entry too; one compile per signature
        // at a time makes that impossible, and accounting stays right anyway.
        let replaced = self.entries.push(sig, entry).map(|(sig, old)| {
            self.removed(
                sig,
                old,
                EvictionCause::FunctionCapacity {
                    capacity: self.capacity,
                },
            )
        });
        if replaced.is_some() {
            return replaced;
        }
        if self.entries.len() > self.capacity {
            return self.pop_lru(EvictionCause::FunctionCapacity {
                capacity: self.capacity,
            });
        }
        None
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

    /// Every entry's signature and executable, most recently used first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Signature, &Arc<E>)> {
        self.entries.iter().map(|(sig, entry)| (sig, &entry.exe))
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
        }
    }

    #[test]
    fn lru_eviction_at_capacity_is_handed_back_and_explained() {
        let mut c = FunctionCache::new(2);
        assert!(c.insert(sig(1), entry(1)).is_none());
        assert!(c.insert(sig(2), entry(2)).is_none());
        assert!(c.hit(&sig(1), 3).is_some());
        assert_eq!(c.lru_tick(), Some(2));
        let out = c.insert(sig(3), entry(4)).expect("evicts");
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
}
