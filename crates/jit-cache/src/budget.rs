//! Global budgets: total entries and total bytes across all functions.

use crate::explain::EvictionCause;

/// Totals across all functions and their limits.
#[derive(Debug)]
pub(crate) struct Budget {
    max_entries: usize,
    max_bytes: usize,
    entries: usize,
    bytes: usize,
    /// Entries (and their bytes) held for compiles that must not evict
    /// when they are cached: hot-size specializations in flight.
    reserved_entries: usize,
    reserved_bytes: usize,
}

impl Budget {
    pub(crate) fn new(max_entries: usize, max_bytes: usize) -> Self {
        Budget {
            max_entries,
            max_bytes,
            entries: 0,
            bytes: 0,
            reserved_entries: 0,
            reserved_bytes: 0,
        }
    }

    /// Whether an executable of `bytes` can be cached at all (it could not
    /// fit even in an empty cache otherwise).
    pub(crate) fn admits(&self, bytes: usize) -> bool {
        bytes <= self.max_bytes
    }

    /// Holds room for one more entry of `bytes`, if it fits beside the
    /// entries cached and the room held already without evicting anything;
    /// returns whether it did. [`release`](Self::release) gives it back.
    pub(crate) fn reserve(&mut self, bytes: usize) -> bool {
        let fits = self.entries + self.reserved_entries < self.max_entries
            && self
                .bytes
                .saturating_add(self.reserved_bytes)
                .saturating_add(bytes)
                <= self.max_bytes;
        if fits {
            self.reserved_entries += 1;
            self.reserved_bytes += bytes;
        }
        fits
    }

    /// Gives back room held by [`reserve`](Self::reserve).
    pub(crate) fn release(&mut self, bytes: usize) {
        self.reserved_entries -= 1;
        self.reserved_bytes -= bytes;
    }

    pub(crate) fn add(&mut self, bytes: usize) {
        self.entries += 1;
        self.bytes += bytes;
    }

    pub(crate) fn remove(&mut self, bytes: usize) {
        self.entries -= 1;
        self.bytes -= bytes;
    }

    /// Which limit is exceeded, if any: then the least recently used entry of
    /// all functions must go.
    pub(crate) fn overflow(&self) -> Option<EvictionCause> {
        if self.entries > self.max_entries {
            Some(EvictionCause::EntryBudget {
                max_entries: self.max_entries,
            })
        } else if self.bytes > self.max_bytes {
            Some(EvictionCause::ByteBudget {
                max_bytes: self.max_bytes,
            })
        } else {
            None
        }
    }

    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The key whose least recently used entry is the oldest of all, given each
/// candidate's oldest tick. Linear in the number of functions, which is paid
/// only when a budget overflows (after a compile), never on a hit.
pub(crate) fn least_recent<K>(candidates: impl Iterator<Item = (K, u64)>) -> Option<K> {
    candidates.min_by_key(|&(_, tick)| tick).map(|(k, _)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_names_the_limit() {
        let mut b = Budget::new(2, 100);
        assert!(b.admits(100) && !b.admits(101));
        b.add(60);
        b.add(30);
        assert_eq!(b.overflow(), None);
        b.add(20);
        assert_eq!(
            b.overflow(),
            Some(EvictionCause::EntryBudget { max_entries: 2 })
        );
        b.remove(30);
        assert_eq!(b.overflow(), None);
        b.remove(20);
        b.add(50);
        assert_eq!(
            b.overflow(),
            Some(EvictionCause::ByteBudget { max_bytes: 100 })
        );
        assert_eq!((b.entries(), b.bytes()), (2, 110));
        assert!(!b.reserve(0), "no entry left");
        b.remove(50);
        assert!(!b.reserve(41), "60 of 100 bytes in use");
        assert!(b.reserve(40));
        assert!(!b.reserve(0), "the last entry is held");
        b.release(40);
        assert!(b.reserve(40));
        assert_eq!((b.entries(), b.bytes()), (1, 60), "held room is no entry");
        assert_eq!(
            least_recent([("a", 5), ("b", 2), ("c", 9)].into_iter()),
            Some("b")
        );
    }
}
