//! Memory statistics of a device's allocator: bytes in use now, and the
//! most in use at once since the device was opened.

use crate::sys;

/// What a device's allocator holds, from IREE's own bookkeeping
/// (`iree_hal_allocator_statistics_t`): the bytes of buffers allocated and
/// not yet freed, and the most that were in use at once since the device
/// was opened. Read with [`Device::memory_statistics`](crate::Device::memory_statistics).
///
/// IREE counts a buffer as host memory when its memory type is host-local
/// and as device memory otherwise: tensors and call results are
/// device-local, also on the CPU drivers, whose "device memory" is host
/// memory the allocator took from the heap. Only buffers are counted, not
/// the runtime's own objects (modules, contexts, executables).
///
/// The figures are IREE's, kept when the runtime is built with
/// `IREE_STATISTICS_ENABLE` (IREE's default in `iree/base/config.h`, and so
/// in the runtime `cargo xtask build-iree` and `iree-sys` build: they leave
/// `IREE_RUNTIME_OPTIMIZATION_PROFILE` empty). A runtime built with IREE's
/// `size` profile compiles them out, and then every figure is 0.
#[doc(alias = "iree_hal_allocator_statistics_t")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct MemoryStatistics {
    /// Bytes of device-local buffers in use now (allocated minus freed).
    pub device_bytes_in_use: u64,
    /// The most bytes of device-local buffers in use at once since the
    /// device was opened; never decreases.
    pub device_bytes_peak: u64,
    /// Bytes of host-local buffers in use now (allocated minus freed).
    pub host_bytes_in_use: u64,
    /// The most bytes of host-local buffers in use at once since the
    /// device was opened; never decreases.
    pub host_bytes_peak: u64,
}

impl MemoryStatistics {
    /// From IREE's running totals; "in use" saturates at 0 should the
    /// totals ever disagree.
    pub(crate) fn from_raw(raw: &sys::iree_hal_allocator_statistics_t) -> Self {
        let bytes = |size: sys::iree_device_size_t| u64::try_from(size).unwrap_or(u64::MAX);
        MemoryStatistics {
            device_bytes_in_use: bytes(raw.device_bytes_allocated)
                .saturating_sub(bytes(raw.device_bytes_freed)),
            device_bytes_peak: bytes(raw.device_bytes_peak),
            host_bytes_in_use: bytes(raw.host_bytes_allocated)
                .saturating_sub(bytes(raw.host_bytes_freed)),
            host_bytes_peak: bytes(raw.host_bytes_peak),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_use_is_allocated_minus_freed_and_saturates() {
        let raw = sys::iree_hal_allocator_statistics_t {
            host_bytes_peak: 9,
            host_bytes_allocated: 3,
            host_bytes_freed: 5,
            device_bytes_peak: 100,
            device_bytes_allocated: 160,
            device_bytes_freed: 96,
        };
        assert_eq!(
            MemoryStatistics::from_raw(&raw),
            MemoryStatistics {
                device_bytes_in_use: 64,
                device_bytes_peak: 100,
                host_bytes_in_use: 0,
                host_bytes_peak: 9,
            }
        );
    }
}
