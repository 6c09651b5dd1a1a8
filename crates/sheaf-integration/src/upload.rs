//! The upload cache: device copies of host arrays that calls pass again and
//! again (weights), found by the array's identity so that each is uploaded
//! once, not on every call.
//!
//! An array is known by its allocation (the `Arc`'s address) and dtype, with
//! a weak reference that proves the allocation is still that array: while
//! the weak reference exists the allocation cannot be reused, and a shared
//! array cannot be mutated (`Arc::get_mut` and `Arc::make_mut` see the weak
//! reference), so a hit is always the same values. An array is cached on
//! its second use (the first only marks it as seen), so activations that
//! are new on every call never push weights out. The cache is bounded in
//! entries and bytes, least recently used first, and holds device memory
//! only: it never keeps a host array alive.

use std::sync::{Mutex, PoisonError};

use iree_safe::Device;
use jit_cache::DType;
use lru::LruCache;

use crate::config::UploadSettings;
use crate::error::JitError;
use crate::tensor::{DeviceTensor, HostTensor, Identity};

/// Arrays seen once, remembered to recognise their second use.
const SEEN_REMEMBERED: usize = 256;

/// Counters of the upload cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UploadStats {
    /// Host arguments served from a cached device copy.
    pub hits: u64,
    /// Host arguments copied to the device.
    pub uploads: u64,
    /// Bytes copied to the device.
    pub bytes_uploaded: u64,
    /// Device copies dropped to stay within the bounds.
    pub evictions: u64,
    /// Device copies cached now.
    pub entries: usize,
    /// Their bytes.
    pub bytes: usize,
}

type Key = (usize, DType);

struct Entry {
    identity: Identity,
    tensor: DeviceTensor,
    bytes: usize,
}

struct State {
    entries: LruCache<Key, Entry>,
    seen: LruCache<Key, Identity>,
    bytes: usize,
    stats: UploadStats,
}

/// Device copies of reused host arrays, for one device.
pub(crate) struct UploadCache {
    device: Device,
    max_entries: usize,
    max_bytes: usize,
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
            device,
            max_entries: bounds.entries,
            max_bytes: bounds.bytes,
            state: Mutex::new(State {
                entries: LruCache::unbounded(),
                seen: LruCache::unbounded(),
                bytes: 0,
                stats: UploadStats::default(),
            }),
        }
    }

    /// The device copy of `host`: cached, or uploaded now (and cached when
    /// the array was seen before and fits).
    pub(crate) fn upload(&self, host: &HostTensor) -> Result<DeviceTensor, JitError> {
        let enabled = self.max_entries > 0 && self.max_bytes > 0;
        let bytes = host.device_bytes();
        if !enabled || bytes > self.max_bytes {
            return self.copy(host, bytes);
        }
        let identity = host.identity();
        let key = identity.key();
        let second_use = {
            let mut state = self.lock();
            if let Some(entry) = state.entries.get(&key) {
                if entry.identity.is(host) {
                    let tensor = entry.tensor.clone();
                    state.stats.hits += 1;
                    return Ok(tensor);
                }
                // The address names another array now: forget the old copy.
                if let Some(stale) = state.entries.pop(&key) {
                    state.bytes -= stale.bytes;
                }
            }
            match state.seen.pop(&key) {
                Some(seen) if seen.is(host) => true,
                _ => {
                    state.seen.push(key, identity.clone());
                    while state.seen.len() > SEEN_REMEMBERED {
                        state.seen.pop_lru();
                    }
                    false
                }
            }
        };
        // Upload outside the lock: copies of large arrays take a while.
        let tensor = self.copy(host, bytes)?;
        if second_use {
            let evicted = self.insert(
                key,
                Entry {
                    identity,
                    tensor: tensor.clone(),
                    bytes,
                },
            );
            // Dropped outside the lock: releasing device memory.
            drop(evicted);
        }
        Ok(tensor)
    }

    pub(crate) fn stats(&self) -> UploadStats {
        let state = self.lock();
        UploadStats {
            entries: state.entries.len(),
            bytes: state.bytes,
            ..state.stats
        }
    }

    fn copy(&self, host: &HostTensor, bytes: usize) -> Result<DeviceTensor, JitError> {
        let tensor = host.to_device(&self.device)?;
        let mut state = self.lock();
        state.stats.uploads += 1;
        state.stats.bytes_uploaded += bytes as u64;
        Ok(tensor)
    }

    /// Inserts a copy and evicts the least recently used beyond the bounds;
    /// returns what was evicted, for the caller to drop outside the lock.
    fn insert(&self, key: Key, entry: Entry) -> Vec<Entry> {
        let mut state = self.lock();
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
            let Some((_, old)) = state.entries.pop_lru() else {
                break;
            };
            state.bytes -= old.bytes;
            state.stats.evictions += 1;
            evicted.push(old);
        }
        evicted
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
