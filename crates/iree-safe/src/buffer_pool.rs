//! The host memory behind the CPU devices' buffers, kept for reuse
//! ([`BufferPool`]).

use std::alloc::{self, Layout};
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::sys;

/// The smallest block the pool keeps when freed: 256 KiB, above glibc's
/// default mmap threshold (128 KiB), where allocation starts to cost fresh
/// pages; smaller blocks are cheap for the global allocator to recycle.
pub const POOLED_BLOCK_MIN: usize = 256 * 1024;

/// The pool's capacity until [`BufferPool::set_capacity`] changes it: 1 GiB
/// of freed blocks kept for reuse (bytes in use by live buffers do not
/// count).
pub const DEFAULT_BUFFER_POOL_CAPACITY: u64 = 1 << 30;

/// The bytes in front of each block holding its size: `iree_max_align_t`
/// (16 on every platform IREE supports), so that what IREE gets keeps the
/// alignment the system allocator gives.
const HEADER: usize = 16;

/// Pooled blocks are whole pages (their size in the header includes it).
const PAGE: usize = 4096;

/// Freed host memory of the CPU devices' buffers, kept for reuse: a call's
/// results (and the transient buffers inside it) come from blocks the
/// previous call gave back, not from fresh pages the kernel must fault in.
///
/// IREE's local devices (`local-sync`, `local-task`) allocate each buffer
/// from the host allocator the device was created with: the driver modules
/// pass it to `iree_hal_allocator_create_heap` as the data allocator
/// (`iree/hal/drivers/local_*/registration/driver_module.c`), and a heap
/// buffer takes its bytes from it (`iree_hal_heap_buffer_create`,
/// `iree/hal/buffer_heap.c`). With the system allocator, a block of more than
/// glibc's mmap threshold is a fresh mapping each time: a training step that
/// returns half a gigabyte of gradients faults in half a gigabyte of pages
/// per call, and gives it back to the kernel when the results drop.
///
/// Every device this crate opens is created with [`BufferPool::global`]'s
/// allocator instead. Blocks of at least [`POOLED_BLOCK_MIN`] bytes are
/// rounded up to whole pages and, when freed, kept by size, the oldest
/// released first once the kept bytes would pass the pool's
/// [capacity](BufferPool::set_capacity); an allocation of a size the pool
/// holds takes the most recently kept block of that size. Smaller blocks go
/// straight to the global allocator and back. Kept memory is given back when
/// an allocation fails (then the allocation is tried again), when the
/// capacity is lowered, and on [`BufferPool::trim`]. GPU devices allocate
/// their buffers from the GPU's own memory; only their small host objects
/// pass through here.
///
/// Each block carries a 16-byte header in front of what IREE sees: its size,
/// which `FREE` (given only a pointer) needs. So a block must be freed with
/// the allocator that made it, which is IREE's rule for every allocator
/// (`iree_allocator_t`, `iree/base/allocator.h`: an object keeps the
/// allocator it was made with and frees through it).
///
/// One per process: [`BufferPool::global`].
#[derive(Debug)]
pub struct BufferPool {
    kept: Mutex<Kept>,
    hits: AtomicU64,
    misses: AtomicU64,
    reused_bytes: AtomicU64,
}

/// What the pool's counters and its kept blocks say now. Read with
/// [`BufferPool::statistics`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct BufferPoolStatistics {
    /// Pooled-size allocations served by a kept block.
    pub hits: u64,
    /// Pooled-size allocations that found no kept block of their size and
    /// took fresh memory.
    pub misses: u64,
    /// Bytes served by kept blocks, summed over the hits.
    pub reused_bytes: u64,
    /// Bytes of freed blocks kept now.
    pub kept_bytes: u64,
    /// Freed blocks kept now.
    pub kept_blocks: u64,
    /// The most bytes the pool keeps ([`BufferPool::set_capacity`]).
    pub capacity: u64,
}

/// The kept blocks: by size (the most recent last) and by age (the oldest
/// first), the two maps holding the same blocks.
#[derive(Debug)]
struct Kept {
    by_size: BTreeMap<(usize, u64), Block>,
    by_age: BTreeMap<u64, usize>,
    bytes: u64,
    capacity: u64,
    next_age: u64,
}

/// A freed pooled block (its header's address) that no one else holds.
#[derive(Debug)]
struct Block(NonNull<u8>);

// SAFETY: a kept block is memory the pool alone owns (IREE freed it); it is
// handed out or deallocated under the pool's lock, from any thread, as the
// global allocator allows.
unsafe impl Send for Block {}

static GLOBAL: BufferPool = BufferPool::new(DEFAULT_BUFFER_POOL_CAPACITY);

impl BufferPool {
    const fn new(capacity: u64) -> BufferPool {
        BufferPool {
            kept: Mutex::new(Kept {
                by_size: BTreeMap::new(),
                by_age: BTreeMap::new(),
                bytes: 0,
                capacity,
                next_age: 0,
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            reused_bytes: AtomicU64::new(0),
        }
    }

    /// The process's pool, the host allocator of every device this crate
    /// opens ([`Device::open`](crate::Device::open) and its siblings).
    ///
    /// ```
    /// let pool = iree_safe::BufferPool::global();
    /// pool.set_capacity(256 << 20); // keep at most 256 MiB of freed blocks
    /// assert_eq!(pool.statistics().capacity, 256 << 20);
    /// ```
    pub fn global() -> &'static BufferPool {
        &GLOBAL
    }

    /// Sets the most bytes of freed blocks the pool keeps, releasing the
    /// oldest kept blocks until it holds no more. `0` keeps nothing: every
    /// block goes back to the global allocator when freed.
    pub fn set_capacity(&self, bytes: u64) {
        let mut kept = self.lock();
        kept.capacity = bytes;
        kept.release_down_to(bytes);
    }

    /// Gives every kept block back to the global allocator; returns the
    /// bytes released. The capacity stays: later frees are kept again.
    pub fn trim(&self) -> u64 {
        let mut kept = self.lock();
        let before = kept.bytes;
        kept.release_down_to(0);
        before
    }

    /// The pool's counters since the process started, and what it keeps
    /// now.
    pub fn statistics(&self) -> BufferPoolStatistics {
        let kept = self.lock();
        BufferPoolStatistics {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            reused_bytes: self.reused_bytes.load(Relaxed),
            kept_bytes: kept.bytes,
            kept_blocks: kept.by_age.len() as u64,
            capacity: kept.capacity,
        }
    }

    /// The pool as an IREE host allocator.
    pub(crate) fn allocator(&'static self) -> sys::iree_allocator_t {
        sys::iree_allocator_t {
            self_: std::ptr::from_ref(self).cast_mut().cast::<c_void>(),
            ctl: Some(ctl),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Kept> {
        // The maps change together after every call that may panic.
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A block of `size` bytes (the header included), zeroed if `zeroed`:
    /// kept or fresh, or `None` when the global allocator has no memory even
    /// after the pool gave back what it kept.
    fn allocate(&self, size: usize, zeroed: bool) -> Option<NonNull<u8>> {
        if size >= POOLED_BLOCK_MIN {
            let reused = self.lock().take(size);
            if let Some(block) = reused {
                self.hits.fetch_add(1, Relaxed);
                self.reused_bytes.fetch_add(size as u64, Relaxed);
                if zeroed {
                    // SAFETY: the block is `size` bytes the pool alone held.
                    unsafe { block.as_ptr().write_bytes(0, size) };
                }
                return Some(block);
            }
            self.misses.fetch_add(1, Relaxed);
        }
        fresh(size, zeroed).or_else(|| {
            self.trim();
            fresh(size, zeroed)
        })
    }

    /// Takes back a block of `size` bytes (the header included): kept when
    /// pooled and within the capacity, else deallocated.
    ///
    /// # Safety
    /// `block` came from [`allocate`](Self::allocate) with `size` and is
    /// freed once.
    unsafe fn release(&self, block: NonNull<u8>, size: usize) {
        if size >= POOLED_BLOCK_MIN {
            let mut kept = self.lock();
            if size as u64 <= kept.capacity {
                kept.keep(Block(block), size);
                return;
            }
        }
        // SAFETY: forwarded from this function's contract.
        unsafe { deallocate(block, size) }
    }
}

impl Kept {
    /// The most recently kept block of `size` bytes.
    fn take(&mut self, size: usize) -> Option<NonNull<u8>> {
        let (&(_, age), _) = self
            .by_size
            .range((size, 0)..=(size, u64::MAX))
            .next_back()?;
        let block = self.by_size.remove(&(size, age))?;
        self.by_age.remove(&age);
        self.bytes -= size as u64;
        Some(block.0)
    }

    /// Keeps `block` of `size` bytes, first releasing the oldest kept blocks
    /// it would not fit beside.
    fn keep(&mut self, block: Block, size: usize) {
        self.release_down_to(self.capacity.saturating_sub(size as u64));
        let age = self.next_age;
        self.next_age += 1;
        self.by_size.insert((size, age), block);
        self.by_age.insert(age, size);
        self.bytes += size as u64;
    }

    /// Deallocates the oldest kept blocks until at most `bytes` are kept.
    fn release_down_to(&mut self, bytes: u64) {
        while self.bytes > bytes {
            let Some((age, size)) = self.by_age.pop_first() else {
                break;
            };
            if let Some(block) = self.by_size.remove(&(size, age)) {
                self.bytes -= size as u64;
                // SAFETY: kept blocks came from `allocate` with their size
                // and left both maps here, so this is their one release.
                unsafe { deallocate(block.0, size) }
            }
        }
    }
}

/// The size of the block that holds `length` bytes for IREE: the header in
/// front, and whole pages when pooled; `None` on overflow.
fn block_size(length: usize) -> Option<usize> {
    let size = length.checked_add(HEADER)?;
    if size < POOLED_BLOCK_MIN {
        return Some(size);
    }
    size.checked_next_multiple_of(PAGE)
}

fn layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size, HEADER).ok()
}

/// A fresh block of `size` bytes from the global allocator.
fn fresh(size: usize, zeroed: bool) -> Option<NonNull<u8>> {
    let layout = layout(size)?;
    // SAFETY: `size` includes the header, so the layout is not zero-sized.
    let block = unsafe {
        if zeroed {
            alloc::alloc_zeroed(layout)
        } else {
            alloc::alloc(layout)
        }
    };
    NonNull::new(block)
}

/// # Safety
/// `block` came from [`fresh`] with `size` and is deallocated once.
unsafe fn deallocate(block: NonNull<u8>, size: usize) {
    let layout = layout(size).expect("a block's size made a layout when it was allocated");
    // SAFETY: forwarded from this function's contract.
    unsafe { alloc::dealloc(block.as_ptr(), layout) }
}

/// What IREE sees of `block`: the bytes after its header, whose first
/// word records `size`.
///
/// # Safety
/// `block` is a live block of `size >= HEADER` bytes.
unsafe fn hand_out(block: NonNull<u8>, size: usize) -> *mut c_void {
    // SAFETY: the header is HEADER bytes at the block's start, aligned to
    // HEADER (>= the alignment of usize), within the block.
    unsafe {
        block.as_ptr().cast::<usize>().write(size);
        block.as_ptr().add(HEADER).cast::<c_void>()
    }
}

/// The block behind a pointer [`hand_out`] returned, and its size.
///
/// # Safety
/// `data` came from `hand_out` and its block is live.
unsafe fn take_back(data: NonNull<c_void>) -> (NonNull<u8>, usize) {
    // SAFETY: `data` is HEADER bytes into its block, whose first word is
    // its size (`hand_out`).
    unsafe {
        let block = data.cast::<u8>().sub(HEADER);
        (block, block.cast::<usize>().read())
    }
}

fn status(code: sys::iree_status_code_t) -> sys::iree_status_t {
    // A status that is a bare code, without storage, is a valid status
    // (`iree_status_from_code`, iree/base/status.h).
    code as usize as sys::iree_status_t
}

/// The pool's `iree_allocator_ctl_fn_t` (`iree/base/allocator.h`), with the
/// libc allocator's answers (`allocator_libc.c`): INVALID_ARGUMENT for 0
/// bytes, RESOURCE_EXHAUSTED when no memory is left (a failed REALLOC
/// leaves the old block as it was), UNIMPLEMENTED for other commands.
///
/// # Safety
/// IREE's contract for allocator control functions: `self_` is this
/// allocator's (a `&'static BufferPool`); `params` points to an
/// `iree_allocator_alloc_params_t` for MALLOC, CALLOC and REALLOC;
/// `inout_ptr` is valid, and for REALLOC and FREE holds null or a pointer
/// this allocator returned and has not freed.
unsafe extern "C" fn ctl(
    self_: *mut c_void,
    command: sys::iree_allocator_command_t,
    params: *const c_void,
    inout_ptr: *mut *mut c_void,
) -> sys::iree_status_t {
    // SAFETY: `self_` is the static pool (`BufferPool::allocator`).
    let pool = unsafe { &*self_.cast_const().cast::<BufferPool>() };
    // SAFETY: `inout_ptr` is valid (the caller's contract).
    let existing = NonNull::new(unsafe { *inout_ptr });
    match command {
        sys::IREE_ALLOCATOR_COMMAND_FREE => {
            if let Some(data) = existing {
                // SAFETY: `data` is ours and live (the caller's contract).
                unsafe {
                    let (block, size) = take_back(data);
                    pool.release(block, size);
                    *inout_ptr = std::ptr::null_mut();
                }
            }
            std::ptr::null_mut()
        }
        sys::IREE_ALLOCATOR_COMMAND_MALLOC
        | sys::IREE_ALLOCATOR_COMMAND_CALLOC
        | sys::IREE_ALLOCATOR_COMMAND_REALLOC => {
            // SAFETY: these commands come with their params (the contract).
            let length =
                unsafe { (*params.cast::<sys::iree_allocator_alloc_params_t>()).byte_length };
            if length == 0 {
                return status(sys::IREE_STATUS_INVALID_ARGUMENT);
            }
            let Some(size) = block_size(length) else {
                return status(sys::IREE_STATUS_RESOURCE_EXHAUSTED);
            };
            let old = existing.filter(|_| command == sys::IREE_ALLOCATOR_COMMAND_REALLOC);
            // SAFETY: a REALLOC's pointer is ours and live (the contract).
            let old = old.map(|data| unsafe { take_back(data) });
            if let Some((_, old_size)) = old {
                if size >= POOLED_BLOCK_MIN && (size..=2 * size).contains(&old_size) {
                    // A pooled block that holds the new length, and not
                    // twice over, stays where it is.
                    return std::ptr::null_mut();
                }
            }
            let zeroed = command == sys::IREE_ALLOCATOR_COMMAND_CALLOC;
            let Some(block) = pool.allocate(size, zeroed) else {
                return status(sys::IREE_STATUS_RESOURCE_EXHAUSTED);
            };
            // SAFETY: `block` is a new block of `size` bytes; a REALLOC's old
            // block is live with `old_size` bytes, copied from (what both
            // hold after the headers) and released once, after the copy.
            unsafe {
                let data = hand_out(block, size);
                if let Some((old_block, old_size)) = old {
                    let kept = old_size.min(size) - HEADER;
                    std::ptr::copy_nonoverlapping(
                        old_block.as_ptr().add(HEADER),
                        data.cast::<u8>(),
                        kept,
                    );
                    pool.release(old_block, old_size);
                }
                *inout_ptr = data;
            }
            std::ptr::null_mut()
        }
        _ => status(sys::IREE_STATUS_UNIMPLEMENTED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Allocates `length` bytes through the pool's `ctl`, as IREE does.
    fn allocate(
        pool: &'static BufferPool,
        command: sys::iree_allocator_command_t,
        existing: *mut c_void,
        length: usize,
    ) -> Result<*mut u8, sys::iree_status_code_t> {
        let allocator = pool.allocator();
        let params = sys::iree_allocator_alloc_params_t {
            byte_length: length,
        };
        let mut data = existing;
        // SAFETY: the pool's own allocator, valid params and out-pointer;
        // `existing` is null or this pool's live block.
        let status = unsafe {
            (allocator.ctl.unwrap())(
                allocator.self_,
                command,
                std::ptr::from_ref(&params).cast(),
                &raw mut data,
            )
        };
        if status.is_null() {
            Ok(data.cast())
        } else {
            Err(sys::iree_status_code(status))
        }
    }

    fn malloc(pool: &'static BufferPool, length: usize) -> *mut u8 {
        let data = allocate(
            pool,
            sys::IREE_ALLOCATOR_COMMAND_MALLOC,
            std::ptr::null_mut(),
            length,
        )
        .unwrap();
        // SAFETY: MALLOC gave `length` writable bytes.
        unsafe { data.write_bytes(0xAB, length) };
        data
    }

    fn free(pool: &'static BufferPool, data: *mut u8) {
        let allocator = pool.allocator();
        let mut data = data.cast::<c_void>();
        // SAFETY: a live block of this pool, freed once.
        let status = unsafe {
            (allocator.ctl.unwrap())(
                allocator.self_,
                sys::IREE_ALLOCATOR_COMMAND_FREE,
                std::ptr::null(),
                &raw mut data,
            )
        };
        assert!(status.is_null());
        assert!(
            data.is_null(),
            "FREE clears the pointer, as libc's allocator does"
        );
    }

    const LARGE: usize = POOLED_BLOCK_MIN;

    #[test]
    fn a_freed_large_block_serves_the_next_allocation_of_its_size() {
        static POOL: BufferPool = BufferPool::new(DEFAULT_BUFFER_POOL_CAPACITY);
        let first = malloc(&POOL, LARGE);
        free(&POOL, first);
        let kept = POOL.statistics();
        assert_eq!((kept.kept_blocks, kept.misses, kept.hits), (1, 1, 0));
        // A size rounding up to the same pages takes the same block.
        let second = malloc(&POOL, LARGE + 100);
        assert_eq!(second, first);
        let after = POOL.statistics();
        assert_eq!((after.kept_blocks, after.hits), (0, 1));
        assert_eq!(
            after.reused_bytes,
            (LARGE + HEADER).next_multiple_of(PAGE) as u64
        );
        // Another size misses.
        let other = malloc(&POOL, 2 * LARGE);
        assert_eq!(POOL.statistics().misses, 2);
        free(&POOL, second);
        free(&POOL, other);
        assert_eq!(POOL.trim(), 3 * LARGE as u64 + 2 * PAGE as u64);
        assert_eq!(POOL.statistics().kept_bytes, 0);
    }

    #[test]
    fn small_blocks_are_never_kept() {
        static POOL: BufferPool = BufferPool::new(DEFAULT_BUFFER_POOL_CAPACITY);
        let small = malloc(&POOL, 100);
        free(&POOL, small);
        assert_eq!(
            POOL.statistics(),
            BufferPoolStatistics {
                capacity: DEFAULT_BUFFER_POOL_CAPACITY,
                ..BufferPoolStatistics::default()
            }
        );
    }

    #[test]
    fn the_oldest_kept_blocks_go_first_when_the_capacity_is_reached() {
        let block = (LARGE + HEADER).next_multiple_of(PAGE) as u64;
        static POOL: BufferPool = BufferPool::new(0);
        POOL.set_capacity(2 * block);
        let blocks: Vec<*mut u8> = (0..3).map(|_| malloc(&POOL, LARGE)).collect();
        for &data in &blocks {
            free(&POOL, data);
        }
        let kept = POOL.statistics();
        assert_eq!((kept.kept_blocks, kept.kept_bytes), (2, 2 * block));
        // The newest kept block is handed out first.
        let again = malloc(&POOL, LARGE);
        assert_eq!(again, blocks[2]);
        free(&POOL, again);
        // Lowering the capacity releases at once; 0 keeps nothing.
        POOL.set_capacity(block);
        assert_eq!(POOL.statistics().kept_blocks, 1);
        POOL.set_capacity(0);
        let fresh = malloc(&POOL, LARGE);
        free(&POOL, fresh);
        assert_eq!(POOL.statistics().kept_bytes, 0);
    }

    #[test]
    fn calloc_zeroes_a_reused_block_and_realloc_keeps_the_contents() {
        static POOL: BufferPool = BufferPool::new(DEFAULT_BUFFER_POOL_CAPACITY);
        let dirty = malloc(&POOL, LARGE);
        free(&POOL, dirty);
        let zeroed = allocate(
            &POOL,
            sys::IREE_ALLOCATOR_COMMAND_CALLOC,
            std::ptr::null_mut(),
            LARGE,
        )
        .unwrap();
        assert_eq!(zeroed, dirty, "the kept block is reused");
        // SAFETY: CALLOC gave LARGE readable bytes.
        assert!(unsafe { std::slice::from_raw_parts(zeroed, LARGE) }
            .iter()
            .all(|&b| b == 0));
        // SAFETY: as above, writable.
        unsafe { zeroed.write_bytes(7, 16) };

        // Growing past the block moves it and keeps the bytes; a small
        // block grows into a pooled one the same way.
        let grown = allocate(
            &POOL,
            sys::IREE_ALLOCATOR_COMMAND_REALLOC,
            zeroed.cast(),
            3 * LARGE,
        )
        .unwrap();
        // SAFETY: the first 16 bytes were copied over.
        assert_eq!(unsafe { std::slice::from_raw_parts(grown, 16) }, [7; 16]);
        // Shrinking by less than half stays in place.
        let shrunk = allocate(
            &POOL,
            sys::IREE_ALLOCATOR_COMMAND_REALLOC,
            grown.cast(),
            2 * LARGE,
        )
        .unwrap();
        assert_eq!(shrunk, grown);
        let small = malloc(&POOL, 8);
        let small = allocate(
            &POOL,
            sys::IREE_ALLOCATOR_COMMAND_REALLOC,
            small.cast(),
            LARGE,
        )
        .unwrap();
        // SAFETY: the 8 bytes MALLOC filled were copied over.
        assert_eq!(unsafe { std::slice::from_raw_parts(small, 8) }, [0xAB; 8]);
        free(&POOL, shrunk);
        free(&POOL, small);
        POOL.trim();
    }

    #[test]
    fn requests_the_libc_allocator_refuses_are_refused_alike() {
        static POOL: BufferPool = BufferPool::new(DEFAULT_BUFFER_POOL_CAPACITY);
        let null = std::ptr::null_mut();
        assert_eq!(
            allocate(&POOL, sys::IREE_ALLOCATOR_COMMAND_MALLOC, null, 0),
            Err(sys::IREE_STATUS_INVALID_ARGUMENT)
        );
        assert_eq!(
            allocate(
                &POOL,
                sys::IREE_ALLOCATOR_COMMAND_MALLOC,
                null,
                usize::MAX - 8
            ),
            Err(sys::IREE_STATUS_RESOURCE_EXHAUSTED)
        );
        assert_eq!(
            allocate(&POOL, 99, null, 8),
            Err(sys::IREE_STATUS_UNIMPLEMENTED)
        );
        // Freeing null is a no-op.
        free(&POOL, std::ptr::null_mut());
    }
}
