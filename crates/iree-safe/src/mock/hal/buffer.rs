//! Buffers: device memory (the device's bytes, or host memory imported
//! without a copy) and the device-to-host transfer that reads it.

use std::ffi::c_void;
use std::sync::Arc;

use super::device::{AllocatorStatistics, Device};
use crate::mock::allocator::HostBytes;
use crate::mock::api::*;
use crate::mock::registry::{self, Kind, Object, Owned};
use crate::mock::status::{return_object, to_status, Failure};

/// Device memory: immutable bytes, and the device they were allocated on.
#[derive(Debug)]
pub(crate) struct Buffer {
    /// Address of the device (unretained, as in IREE).
    pub(super) device: usize,
    /// Whether the device is a local one (the buffer is heap memory).
    pub(super) in_host_memory: bool,
    pub(super) storage: Storage,
    /// The statistics of the allocator the bytes came from, which the
    /// buffer updates when it is freed (IREE's heap buffers keep a pointer
    /// to theirs, `iree/hal/buffer_heap.c`; imported ones have none).
    pub(super) statistics: Arc<AllocatorStatistics>,
}

/// Where a buffer's bytes are.
#[derive(Debug)]
pub(super) enum Storage {
    /// Allocated by the device, in the mock's own memory.
    Allocated(Box<[u8]>),
    /// Allocated by a local device from its host allocator.
    Host(HostBytes),
    /// The caller's memory, imported (`iree_hal_allocator_import_buffer`):
    /// read in place, and `release` called once when the buffer is destroyed
    /// (as `iree_hal_heap_buffer_destroy` does).
    Imported {
        data: *const u8,
        length: usize,
        release: iree_hal_buffer_release_callback_t,
    },
}

// SAFETY: imported memory is only read, and the importer promised it stays
// valid and unchanged until the release callback runs, which may happen on
// any thread (as in IREE, whose buffers are released from any thread).
unsafe impl Send for Storage {}
// SAFETY: as above; nothing mutates a buffer's bytes.
unsafe impl Sync for Storage {}

impl Buffer {
    /// Whether `device` can read the buffer (see
    /// [`BufferView::is_readable_on`]).
    pub(super) fn is_readable_on(&self, device: &Device) -> bool {
        self.device == std::ptr::from_ref(device).addr()
            || (self.in_host_memory && device.is_local())
    }

    pub(super) fn bytes(&self) -> &[u8] {
        match &self.storage {
            Storage::Allocated(bytes) => bytes,
            Storage::Host(bytes) => bytes.bytes(),
            // SAFETY: the importer keeps `length` bytes at `data` valid and
            // unchanged until the release callback, which runs only when the
            // buffer is dropped: after every borrow of `self`. Under miri, a
            // release too early (memory freed while imported) is reported
            // here as a use after free.
            Storage::Imported { data, length, .. } => unsafe {
                std::slice::from_raw_parts(*data, *length)
            },
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        match &self.storage {
            Storage::Allocated(bytes) => self.statistics.record_free(bytes.len()),
            Storage::Host(bytes) => self.statistics.record_free(bytes.bytes().len()),
            Storage::Imported { release, .. } => {
                if let Some(callback) = release.fn_ {
                    // SAFETY: the importer's callback, called once (the buffer
                    // is dropped once), with its user data and the buffer.
                    unsafe {
                        callback(
                            release.user_data,
                            std::ptr::from_mut(self).cast::<iree_hal_buffer_t>(),
                        )
                    };
                }
            }
        }
    }
}

impl Object for Buffer {
    fn kind(&self) -> Kind {
        Kind::Buffer
    }
}

/// `IREE_HAL_HEAP_BUFFER_ALIGNMENT` (`iree/base/config.h`): what IREE's heap
/// allocator requires of imported memory unless access allows unaligned.
const HEAP_BUFFER_ALIGNMENT: usize = 64;

/// `iree_hal_allocator_import_buffer` as a local device's heap allocator does
/// it (`iree_hal_heap_allocator_import_buffer`, `iree/hal/allocator_heap.c`):
/// wraps a host allocation, no copy; OUT_OF_RANGE for memory not 64-byte
/// aligned (unless the access allows unaligned), UNAVAILABLE for another kind
/// of external buffer or a device that is not local. `release_callback` is
/// kept only on success.
///
/// # Safety
/// `allocator` is a live device's allocator; `external_buffer` is valid and,
/// for a host allocation, names `size` bytes that stay valid and unchanged
/// until the release callback runs; `out_buffer` is valid for writes.
pub(crate) unsafe fn iree_hal_allocator_import_buffer(
    allocator: *mut iree_hal_allocator_t,
    params: iree_hal_buffer_params_t,
    external_buffer: *mut iree_hal_external_buffer_t,
    release_callback: iree_hal_buffer_release_callback_t,
    out_buffer: *mut *mut iree_hal_buffer_t,
) -> iree_status_t {
    // SAFETY: the mock's allocator is its device (caller's contract); `get`
    // checks it is live.
    let device = unsafe { registry::get(allocator.cast_const().cast::<Device>()) };
    // SAFETY: the caller passes a valid external buffer.
    let external = unsafe { *external_buffer };
    let result = if external.type_ != IREE_HAL_EXTERNAL_BUFFER_TYPE_HOST_ALLOCATION
        || !device.is_local()
    {
        Err(Failure::new(
            IREE_STATUS_UNAVAILABLE,
            "external buffer type not supported",
        ))
    } else {
        // SAFETY: a host allocation's handle is the `host_allocation` member.
        let data = unsafe { external.handle.host_allocation.ptr }
            .cast_const()
            .cast::<u8>();
        let unaligned =
            params.access & IREE_HAL_MEMORY_ACCESS_UNALIGNED as iree_hal_memory_access_t != 0;
        if !unaligned && !data.addr().is_multiple_of(HEAP_BUFFER_ALIGNMENT) {
            Err(Failure::new(
                IREE_STATUS_OUT_OF_RANGE,
                format!("imported heap buffer data must be aligned to {HEAP_BUFFER_ALIGNMENT}; got {data:p}"),
            ))
        } else {
            Ok(Owned::new(Buffer {
                device: std::ptr::from_ref(device).addr(),
                in_host_memory: true,
                storage: Storage::Imported {
                    data,
                    length: external.size,
                    release: release_callback,
                },
                statistics: Arc::clone(&device.statistics),
            }))
        }
    };
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { return_object(out_buffer, result) }
}

/// `iree_hal_device_transfer_d2h`: copies `data_length` bytes of `source`
/// from `source_offset` to `target`. INVALID_ARGUMENT when the buffer was
/// allocated on another device, OUT_OF_RANGE past its end.
///
/// # Safety
/// `device` and `source` are live; `target` has room for `data_length` bytes.
pub(crate) unsafe fn iree_hal_device_transfer_d2h(
    device: *mut iree_hal_device_t,
    source: *mut iree_hal_buffer_t,
    source_offset: iree_device_size_t,
    target: *mut c_void,
    data_length: iree_device_size_t,
    _flags: iree_hal_transfer_buffer_flags_t,
    _timeout: iree_timeout_t,
) -> iree_status_t {
    // SAFETY: the caller guarantees both are live; `get` checks their types.
    let (device, buffer) = unsafe {
        (
            registry::get(device.cast_const().cast::<Device>()),
            registry::get(source.cast_const().cast::<Buffer>()),
        )
    };
    let result = if !buffer.is_readable_on(device) {
        Err(Failure::new(
            IREE_STATUS_INVALID_ARGUMENT,
            format!("the buffer was not allocated on device `{}`", device.uri),
        ))
    } else {
        match source_offset
            .checked_add(data_length)
            .and_then(|end| buffer.bytes().get(source_offset..end))
        {
            Some(bytes) => {
                // SAFETY: `target` has room for `data_length` bytes (caller's
                // contract) and does not overlap the mock's buffer.
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), target.cast::<u8>(), bytes.len())
                };
                Ok(())
            }
            None => Err(Failure::new(
                IREE_STATUS_OUT_OF_RANGE,
                format!(
                    "transfer of {data_length} bytes at offset {source_offset} overruns a buffer of {}",
                    buffer.bytes().len()
                ),
            )),
        }
    };
    to_status(result)
}
