//! The upload cache: device copies of host arrays that calls pass again and
//! again (weights), found by the array's identity so that each is uploaded
//! once, not on every call. On a CPU device an array the device can read in
//! place is imported instead (no copy, nothing cached:
//! [`HostTensor::import_to`]); the cache holds copies of the others.
//!
//! An array is known by its allocation (the `Arc`'s address) and dtype, with
//! a weak reference that proves the allocation is still that array: while
//! the weak reference exists the allocation cannot be reused, and a shared
//! array cannot be mutated (`Arc::get_mut` and `Arc::make_mut` see the weak
//! reference), so a hit is always the same values. An array is cached on
//! its second use (the first only marks it as seen), so activations that
//! are new on every call never push weights out. The cache is bounded in
//! entries and bytes, least recently used first, and holds device memory
//! only: it never keeps a host array alive, and the copy of an array that
//! is gone is dropped at the next upload that misses (or read of the
//! statistics), not kept until the cache fills. A full cache evicts only entries
//! not in use — whose array is gone, or not used within the last cycle (as
//! many uploads as it remembers arrays, 4096 by default): a working set
//! larger than the bound (a model's parameters passed every step) keeps the
//! part that fits cached instead of evicting each array before its next
//! use.

use std::sync::{Mutex, PoisonError};

use iree_safe::Device;
use jit_cache::DType;
use lru::LruCache;

use crate::config::UploadSettings;
use crate::error::JitError;
use crate::tensor::{DeviceTensor, HostTensor, Identity};

/// Arrays smaller than this are copied, never imported: the copy costs
/// about what wrapping the array as a buffer does, and whether a small
/// array is 64-byte aligned is chance (the allocator's), so a program's
/// small arguments behave the same on every run.
pub const IMPORT_MIN_BYTES: usize = 64 << 10;

/// Arrays seen once, remembered to recognise their second use.
const SEEN_REMEMBERED: usize = 256;

/// Counters of the upload cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct UploadStats {
    /// Host arguments served from a cached device copy.
    pub hits: u64,
    /// Host arguments copied to the device.
    pub uploads: u64,
    /// Bytes copied to the device.
    pub bytes_uploaded: u64,
    /// Host arguments handed to the device without a copy (imported).
    pub imports: u64,
    /// Their bytes.
    pub bytes_imported: u64,
    /// Arrays seen twice that were not cached: the cache was full of
    /// entries used within the last cycle.
    pub not_cached: u64,
    /// Device copies dropped to stay within the bounds.
    pub evictions: u64,
    /// Device copies dropped because their host array was gone (found at
    /// the next upload that is not a hit, or the next read of these
    /// statistics).
    pub released: u64,
    /// Device copies cached now.
    pub entries: usize,
    /// Their bytes.
    pub bytes: usize,
    /// The byte bound (resolved for the device: `UploadSettings::bytes_for`).
    pub max_bytes: usize,
}

/// The counters of two upload caches together (a runtime's, with its CPU
/// fallback's): every field is summed, the byte bound too.
impl std::ops::AddAssign for UploadStats {
    fn add_assign(&mut self, other: UploadStats) {
        let UploadStats {
            hits,
            uploads,
            bytes_uploaded,
            imports,
            bytes_imported,
            not_cached,
            evictions,
            released,
            entries,
            bytes,
            max_bytes,
        } = other;
        self.hits += hits;
        self.uploads += uploads;
        self.bytes_uploaded += bytes_uploaded;
        self.imports += imports;
        self.bytes_imported += bytes_imported;
        self.not_cached += not_cached;
        self.evictions += evictions;
        self.released += released;
        self.entries += entries;
        self.bytes += bytes;
        self.max_bytes += max_bytes;
    }
}

impl std::ops::Add for UploadStats {
    type Output = UploadStats;

    fn add(mut self, other: UploadStats) -> UploadStats {
        self += other;
        self
    }
}

impl std::iter::Sum for UploadStats {
    fn sum<I: Iterator<Item = UploadStats>>(stats: I) -> UploadStats {
        stats.fold(UploadStats::default(), |sum, stats| sum + stats)
    }
}

type Key = (usize, DType);

struct Entry {
    identity: Identity,
    tensor: DeviceTensor,
    bytes: usize,
    /// The upload (`State::tick`) that last used it.
    used: u64,
}

struct State {
    entries: LruCache<Key, Entry>,
    seen: LruCache<Key, Identity>,
    bytes: usize,
    /// Uploads through the cache so far: the clock of `Entry::used`.
    tick: u64,
    stats: UploadStats,
}

impl State {
    /// Takes out the entries whose host array is gone (no call can hit
    /// them again), for the caller to drop outside the lock.
    fn release_dead(&mut self) -> Vec<Entry> {
        let dead: Vec<Key> = (self.entries.iter())
            .filter(|(_, entry)| !entry.identity.alive())
            .map(|(&key, _)| key)
            .collect();
        let released: Vec<Entry> = dead
            .iter()
            .filter_map(|key| self.entries.pop(key))
            .collect();
        for entry in &released {
            self.bytes -= entry.bytes;
        }
        self.stats.released += released.len() as u64;
        released
    }
}

/// Device copies of reused host arrays, for one device.
pub(crate) struct UploadCache {
    device: Device,
    max_entries: usize,
    max_bytes: usize,
    import: bool,
    state: Mutex<State>,
}

impl std::fmt::Debug for UploadCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadCache")
            .field("device", &self.device.uri())
            .field("max_entries", &self.max_entries)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl UploadCache {
    /// A cache for `device` within `bounds` (0 for either disables it).
    pub(crate) fn new(device: Device, bounds: UploadSettings) -> Self {
        UploadCache {
            max_entries: bounds.entries,
            max_bytes: bounds.bytes_for(device.is_local()),
            import: bounds.import && device.is_local(),
            device,
            state: Mutex::new(State {
                entries: LruCache::unbounded(),
                seen: LruCache::unbounded(),
                bytes: 0,
                tick: 0,
                stats: UploadStats::default(),
            }),
        }
    }

    /// `host` on the device: imported (no copy) where the device can read it
    /// in place, else the cached copy, or a copy made now (and cached when
    /// the array was seen before and fits).
    pub(crate) fn upload(&self, host: &HostTensor) -> Result<DeviceTensor, JitError> {
        let bytes = host.device_bytes();
        if self.import && bytes >= IMPORT_MIN_BYTES {
            if let Some(tensor) = host.import_to(&self.device)? {
                let mut state = self.lock();
                state.stats.imports += 1;
                state.stats.bytes_imported += bytes as u64;
                return Ok(tensor);
            }
        }
        let enabled = self.max_entries > 0 && self.max_bytes > 0;
        if !enabled || bytes > self.max_bytes {
            return self.copy(host, bytes);
        }
        let identity = host.identity();
        let key = identity.key();
        let released;
        let second_use = {
            let mut state = self.lock();
            state.tick += 1;
            let tick = state.tick;
            if let Some(entry) = state.entries.get_mut(&key) {
                if entry.identity.is(host) {
                    entry.used = tick;
                    let tensor = entry.tensor.clone();
                    state.stats.hits += 1;
                    return Ok(tensor);
                }
                // The address names another array now: forget the old copy.
                if let Some(stale) = state.entries.pop(&key) {
                    state.bytes -= stale.bytes;
                }
            }
            // A miss (it copies anyway): drop the copies of arrays that
            // are gone, which the cache would otherwise keep until it
            // fills. Dropped outside the lock, below.
            released = state.release_dead();
            match state.seen.pop(&key) {
                Some(seen) if seen.is(host) => true,
                _ => {
                    state.seen.push(key, identity.clone());
                    while state.seen.len() as u64 > self.cycle() {
                        state.seen.pop_lru();
                    }
                    false
                }
            }
        };
        drop(released);
        // Upload outside the lock: copies of large arrays take a while.
        let tensor = self.copy(host, bytes)?;
        if second_use {
            let evicted = self.insert(
                key,
                Entry {
                    identity,
                    tensor: tensor.clone(),
                    bytes,
                    used: 0,
                },
            );
            // Dropped outside the lock: releasing device memory.
            drop(evicted);
        }
        Ok(tensor)
    }

    /// The counters, after dropping the copies of arrays that are gone.
    pub(crate) fn stats(&self) -> UploadStats {
        let mut state = self.lock();
        let released = state.release_dead();
        let stats = UploadStats {
            entries: state.entries.len(),
            bytes: state.bytes,
            max_bytes: self.max_bytes,
            ..state.stats
        };
        drop(state);
        drop(released);
        stats
    }

    fn copy(&self, host: &HostTensor, bytes: usize) -> Result<DeviceTensor, JitError> {
        let tensor = host.to_device(&self.device)?;
        let mut state = self.lock();
        state.stats.uploads += 1;
        state.stats.bytes_uploaded += bytes as u64;
        Ok(tensor)
    }

    /// How many uploads back an entry counts as in use: as many as arrays
    /// the cache remembers (at least 256).
    fn cycle(&self) -> u64 {
        SEEN_REMEMBERED.max(self.max_entries) as u64
    }

    /// Inserts a copy and evicts the least recently used beyond the bounds,
    /// but only entries not in use: whose array is gone, or not used within
    /// the last [`cycle`](Self::cycle) uploads. When an entry in use would
    /// have to go, the new copy is not cached instead. Returns what was dropped, for the caller to
    /// drop outside the lock.
    fn insert(&self, key: Key, mut entry: Entry) -> Vec<Entry> {
        let mut state = self.lock();
        entry.used = state.tick;
        state.bytes += entry.bytes;
        let mut evicted: Vec<Entry> = state
            .entries
            .push(key, entry)
            .map(|(_, old)| old)
            .into_iter()
            .collect();
        if let Some(old) = evicted.first() {
            state.bytes -= old.bytes;
        }
        while state.entries.len() > self.max_entries || state.bytes > self.max_bytes {
            let Some((&lru_key, lru)) = state.entries.peek_lru() else {
                break;
            };
            let recent = lru_key != key
                && lru.identity.alive()
                && lru.used.saturating_add(self.cycle()) > state.tick;
            let dropped_key = if recent { key } else { lru_key };
            let Some(old) = state.entries.pop(&dropped_key) else {
                break;
            };
            state.bytes -= old.bytes;
            if recent {
                state.stats.not_cached += 1;
            } else {
                state.stats.evictions += 1;
            }
            evicted.push(old);
            if recent {
                break;
            }
        }
        evicted
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
