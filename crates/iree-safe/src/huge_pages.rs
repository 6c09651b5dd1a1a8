//! Huge pages for large copies to the host: a hint that makes writing a
//! fresh destination fault once per 2 MiB instead of once per 4 KiB page.
//!
//! glibc serves every allocation of [`HUGE_COPY_BYTES`] or more with a
//! mapping of its own, given back to the kernel when it is freed, so a
//! program that reads a large result back on every call (a training step's
//! embedding gradient) pays for each page of it anew on every call. Where
//! the kernel has transparent huge pages in `madvise` mode (the default of
//! most distributions: `/sys/kernel/mm/transparent_hugepage/enabled`),
//! `madvise(MADV_HUGEPAGE)` on the fresh destination lets it back the
//! destination with 2 MiB pages as the copy writes it. The advice is only a
//! hint on memory this crate has just allocated: the contents and the
//! allocation are the same either way, the mapping (and its advice) goes
//! when the vector is freed, and where the kernel has no transparent huge
//! pages (`never`, another OS) nothing changes.

/// From how many bytes a copy to the host asks for huge pages: 32 MiB,
/// glibc's largest mmap threshold on 64-bit hosts (`DEFAULT_MMAP_THRESHOLD_MAX`),
/// from which every allocation is a fresh mapping. Smaller blocks come from
/// the heap once it has grown, whose pages are already there.
pub(crate) const HUGE_COPY_BYTES: usize = 32 << 20;

/// Advises huge pages for the `len` bytes at `start`, a destination this
/// crate has just allocated and not yet written, when `len` is at least
/// [`HUGE_COPY_BYTES`].
pub(crate) fn advise(start: *mut u8, len: usize) {
    if len >= HUGE_COPY_BYTES {
        advise_huge_pages(start, len);
    }
}

/// `madvise(MADV_HUGEPAGE)` on the whole 2 MiB pages of the `len` bytes at
/// `start`: 2 MiB is x86-64's and 4 KiB-page aarch64's huge page, and a
/// multiple of every base page size, so the rounded start is always an
/// address madvise(2) takes.
#[cfg(all(target_os = "linux", not(miri)))]
fn advise_huge_pages(start: *mut u8, len: usize) {
    const HUGE_PAGE: usize = 2 << 20;
    let first = start.addr().next_multiple_of(HUGE_PAGE);
    let end = (start.addr() + len) / HUGE_PAGE * HUGE_PAGE;
    if end > first {
        // SAFETY: `[first, end)` lies within the caller's live allocation
        // (both bounds are rounded inwards) and starts on a page boundary,
        // as madvise(2) requires; MADV_HUGEPAGE changes neither the
        // contents nor the mapping's protection. Its result is ignored on
        // purpose: EINVAL where the kernel has no transparent huge pages
        // means the copy goes on 4 KiB pages, as without the hint.
        unsafe {
            libc::madvise(
                start.with_addr(first).cast(),
                end - first,
                libc::MADV_HUGEPAGE,
            );
        }
    }
}

/// No transparent huge pages to ask for (another OS), or Miri, which runs
/// no system calls: the copy goes on base pages.
#[cfg(not(all(target_os = "linux", not(miri))))]
fn advise_huge_pages(_start: *mut u8, _len: usize) {}
