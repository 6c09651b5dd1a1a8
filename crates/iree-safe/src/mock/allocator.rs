//! Host memory that IREE allocates with the caller's allocator.
//!
//! What the caller gives back with `iree_allocator_free` (the device lists
//! of `iree_hal_driver_query_available_devices`, the storage of string
//! builders) the mock allocates from Rust without calling the allocator
//! (the crate passes `iree_allocator_system()`, whose `ctl` is C), and
//! remembers each block with the allocator it was made for, so that freeing
//! a block twice, freeing a pointer it never returned or freeing with
//! another allocator panics, and [`live_blocks`] counts what was not freed.
//!
//! A local device's buffers ([`HostAllocator`], [`HostBytes`]) come from
//! the host allocator the device was created with, through its `ctl`, as
//! IREE's heap allocator takes them: the crate creates devices with its
//! buffer pool, whose `ctl` is Rust.

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::api::*;
use super::status::{iree_status_free, Failure, MockResult};

/// The alignment of every block (IREE's allocators return at least
/// `iree_max_align_t`, 16 bytes on the platforms it supports).
const ALIGNMENT: usize = 16;

/// An allocator told apart from others by its `self` and `ctl` addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AllocatorId {
    self_: usize,
    ctl: usize,
}

impl AllocatorId {
    fn of(allocator: iree_allocator_t) -> AllocatorId {
        AllocatorId {
            self_: allocator.self_.addr(),
            ctl: allocator.ctl.map_or(0, |ctl| ctl as usize),
        }
    }
}

struct Block {
    size: usize,
    allocator: AllocatorId,
}

static BLOCKS: Mutex<BTreeMap<usize, Block>> = Mutex::new(BTreeMap::new());

fn blocks() -> MutexGuard<'static, BTreeMap<usize, Block>> {
    // Entries change only after the checks that may panic have passed.
    BLOCKS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn layout(size: usize) -> Layout {
    // A block of 0 bytes is still a distinct allocation.
    Layout::from_size_align(size.max(1), ALIGNMENT).expect("a block size fits a layout")
}

/// Allocates `size` uninitialized bytes "with" `allocator`, as
/// `iree_allocator_malloc_uninitialized` would. Panics for the null
/// allocator, which fails every request in IREE: the mock's callers check
/// for it first and fail as IREE does.
pub(crate) fn malloc(allocator: iree_allocator_t, size: usize) -> *mut u8 {
    assert!(
        allocator.ctl.is_some(),
        "mock IREE: an allocation with iree_allocator_null()"
    );
    let layout = layout(size);
    // SAFETY: the layout has a non-zero size.
    let ptr = unsafe { std::alloc::alloc(layout) };
    if ptr.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    let block = Block {
        size,
        allocator: AllocatorId::of(allocator),
    };
    let previous = blocks().insert(ptr.addr(), block);
    assert!(previous.is_none(), "a fresh allocation was already live");
    ptr
}

/// Grows (or shrinks) a block of `allocator` to `size` bytes, keeping its
/// contents, as `iree_allocator_realloc`; null allocates a new block.
///
/// # Safety
/// `ptr` is null or a live block of `allocator` that nobody uses after this
/// returns (the returned pointer replaces it).
pub(crate) unsafe fn realloc(allocator: iree_allocator_t, ptr: *mut u8, size: usize) -> *mut u8 {
    if ptr.is_null() {
        return malloc(allocator, size);
    }
    let mut blocks = blocks();
    let old_size = checked_block(&blocks, allocator, ptr, "iree_allocator_realloc").size;
    // SAFETY: `ptr` is live and was allocated with `layout(old_size)` (the
    // table says so); the new size is non-zero and fits a layout.
    let new = unsafe { std::alloc::realloc(ptr, layout(old_size), size.max(1)) };
    if new.is_null() {
        std::alloc::handle_alloc_error(layout(size));
    }
    blocks.remove(&ptr.addr());
    blocks.insert(
        new.addr(),
        Block {
            size,
            allocator: AllocatorId::of(allocator),
        },
    );
    new
}

/// The live block at `ptr`, checked to belong to `allocator`.
fn checked_block<'t>(
    blocks: &'t BTreeMap<usize, Block>,
    allocator: iree_allocator_t,
    ptr: *mut u8,
    action: &str,
) -> &'t Block {
    let Some(block) = blocks.get(&ptr.addr()) else {
        panic!(
            "mock IREE: {action} of {ptr:p}, which is not a live block (freed twice, or never allocated by IREE)"
        );
    };
    assert!(
        block.allocator == AllocatorId::of(allocator),
        "mock IREE: {action} of {ptr:p} with another allocator than the one it was allocated with"
    );
    block
}

/// `iree_allocator_free`: frees a block the mock allocated with
/// `allocator`; null is a no-op, as in IREE.
///
/// # Safety
/// `ptr` is null or a live block of `allocator` that nobody uses after this.
pub(crate) unsafe fn iree_allocator_free(allocator: iree_allocator_t, ptr: *mut c_void) {
    if ptr.is_null() {
        return;
    }
    let ptr = ptr.cast::<u8>();
    let size = {
        let mut blocks = blocks();
        let size = checked_block(&blocks, allocator, ptr, "iree_allocator_free").size;
        blocks.remove(&ptr.addr());
        size
    };
    // SAFETY: the block was allocated with this layout (the table said so)
    // and is no longer in the table, so it is freed once.
    unsafe { std::alloc::dealloc(ptr, layout(size)) };
}

/// An allocator a device was created with, kept by the device: IREE's
/// allocators may be called from any thread (devices call theirs from
/// their worker threads), so the mock's devices may keep one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostAllocator(iree_allocator_t);

// SAFETY: see the type's docs; the mock only calls the allocator's `ctl`
// with its own `self`, as IREE does.
unsafe impl Send for HostAllocator {}
// SAFETY: as above.
unsafe impl Sync for HostAllocator {}

impl HostAllocator {
    pub(crate) fn new(allocator: iree_allocator_t) -> HostAllocator {
        HostAllocator(allocator)
    }

    /// A copy of `bytes` in a block of this allocator, as a local device's
    /// heap buffer takes its bytes from the device's data allocator
    /// (`iree_hal_heap_buffer_create`, `iree/hal/buffer_heap.c`), through
    /// the allocator's `ctl`. `None` for no bytes, and for an allocator
    /// without a `self`, the system allocator (whose `ctl` is C that miri
    /// cannot call) or the null one: the mock keeps those bytes itself.
    pub(crate) fn copy(self, bytes: &[u8]) -> MockResult<Option<HostBytes>> {
        if bytes.is_empty() || self.0.self_.is_null() {
            return Ok(None);
        }
        let ctl = self.0.ctl.ok_or_else(|| {
            Failure::new(
                IREE_STATUS_RESOURCE_EXHAUSTED,
                "the null allocator allocates nothing",
            )
        })?;
        let params = iree_allocator_alloc_params_t {
            byte_length: bytes.len(),
        };
        let mut data = std::ptr::null_mut();
        // SAFETY: the allocator's own `self`, MALLOC's params, a valid
        // out-pointer: IREE's contract for `ctl`.
        let status = unsafe {
            ctl(
                self.0.self_,
                IREE_ALLOCATOR_COMMAND_MALLOC,
                std::ptr::from_ref(&params).cast(),
                &raw mut data,
            )
        };
        if !iree_status_is_ok(status) {
            let code = iree_status_code(status);
            // SAFETY: a status the allocator returned, freed once.
            unsafe { iree_status_free(status) };
            return Err(Failure::new(code, "the device's host allocator failed"));
        }
        let data = NonNull::new(data.cast::<u8>()).ok_or_else(|| {
            Failure::new(IREE_STATUS_INTERNAL, "an allocator returned OK and null")
        })?;
        // SAFETY: MALLOC gave `bytes.len()` writable bytes at `data`.
        unsafe {
            data.as_ptr()
                .copy_from_nonoverlapping(bytes.as_ptr(), bytes.len())
        };
        Ok(Some(HostBytes {
            data,
            length: bytes.len(),
            allocator: self,
        }))
    }
}

/// Bytes in a block of a device's host allocator, freed through it when
/// dropped.
#[derive(Debug)]
pub(crate) struct HostBytes {
    data: NonNull<u8>,
    length: usize,
    allocator: HostAllocator,
}

// SAFETY: the block is this value's alone and only read after it is
// filled; the allocator may be called from any thread (`HostAllocator`).
unsafe impl Send for HostBytes {}
// SAFETY: as above.
unsafe impl Sync for HostBytes {}

impl HostBytes {
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `length` bytes at `data`, filled in `copy`, live until drop.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr(), self.length) }
    }
}

impl Drop for HostBytes {
    fn drop(&mut self) {
        let allocator = self.allocator.0;
        let mut data = self.data.as_ptr().cast::<c_void>();
        if let Some(ctl) = allocator.ctl {
            // SAFETY: the block came from this allocator and is freed once;
            // FREE takes no params.
            let status = unsafe {
                ctl(
                    allocator.self_,
                    IREE_ALLOCATOR_COMMAND_FREE,
                    std::ptr::null(),
                    &raw mut data,
                )
            };
            assert!(
                iree_status_is_ok(status),
                "mock IREE: an allocator failed to free"
            );
        }
    }
}

/// How many blocks are allocated and not yet freed.
pub(crate) fn live_blocks() -> usize {
    blocks().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_counted_until_freed() {
        let _serial = crate::mock::serial();
        let before = live_blocks();
        let allocator = iree_allocator_system();
        let ptr = malloc(allocator, 4);
        // SAFETY: the block has room for 4 bytes.
        unsafe { ptr.copy_from_nonoverlapping(b"abcd".as_ptr(), 4) };
        // SAFETY: `ptr` is a live block of `allocator`, not used after.
        let ptr = unsafe { realloc(allocator, ptr, 300) };
        // SAFETY: realloc kept the first 4 bytes.
        assert_eq!(unsafe { std::slice::from_raw_parts(ptr, 4) }, b"abcd");
        assert_eq!(live_blocks(), before + 1);
        // SAFETY: freed once, with its allocator.
        unsafe { iree_allocator_free(allocator, ptr.cast()) };
        assert_eq!(live_blocks(), before);
        // SAFETY: freeing null does nothing.
        unsafe { iree_allocator_free(allocator, std::ptr::null_mut()) };
    }

    #[test]
    fn a_block_is_freed_with_its_own_allocator() {
        let _serial = crate::mock::serial();
        let allocator = iree_allocator_system();
        let ptr = malloc(allocator, 8);
        let other = iree_allocator_t {
            self_: std::ptr::without_provenance_mut(8),
            ..allocator
        };
        let wrong = std::panic::catch_unwind(|| {
            // SAFETY: the mock checks the allocator before touching the
            // block, and panics.
            unsafe { iree_allocator_free(other, ptr.cast()) }
        });
        let message = *wrong.unwrap_err().downcast::<String>().unwrap();
        assert!(message.contains("another allocator"), "{message}");
        // SAFETY: the block is still live; freed once, with its allocator.
        unsafe { iree_allocator_free(allocator, ptr.cast()) };
    }
}
