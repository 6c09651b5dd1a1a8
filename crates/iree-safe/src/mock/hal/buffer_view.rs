//! Buffer views: a shape and an element type over a buffer, their VM refs,
//! and the buffer-copy allocation tensors are made with.

use std::ptr::NonNull;
use std::sync::Arc;

use super::buffer::{Buffer, Storage};
use super::device::Device;
use crate::mock::api::*;
use crate::mock::registry::{self, Kind, Object, Owned};
use crate::mock::status::{return_object, Failure, MockResult};

/// `iree_hal_buffer_view_create`: a view of `buffer` (retained) with a
/// shape and element type; INVALID_ARGUMENT when the buffer is smaller
/// than the dense row-major size of the shape.
///
/// # Safety
/// `buffer` is live, `shape` holds `shape_rank` dims, `out_buffer_view` is
/// valid for writes.
pub(crate) unsafe fn iree_hal_buffer_view_create(
    buffer: *mut iree_hal_buffer_t,
    shape_rank: iree_host_size_t,
    shape: *const iree_hal_dim_t,
    element_type: iree_hal_element_type_t,
    encoding_type: iree_hal_encoding_type_t,
    _host_allocator: iree_allocator_t,
    out_buffer_view: *mut *mut iree_hal_buffer_view_t,
) -> iree_status_t {
    let shape: &[iree_hal_dim_t] = if shape_rank == 0 {
        &[]
    } else {
        // SAFETY: the caller passes `shape_rank` readable dims.
        unsafe { std::slice::from_raw_parts(shape, shape_rank) }
    };
    let result = (|| {
        if encoding_type != IREE_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR {
            return Err(Failure::new(
                IREE_STATUS_UNIMPLEMENTED,
                format!("encoding 0x{encoding_type:08x} is not dense row-major"),
            ));
        }
        let length = dense_byte_length(shape, element_type)?;
        let buffer = NonNull::new(buffer.cast::<Buffer>())
            .ok_or_else(|| Failure::new(IREE_STATUS_INVALID_ARGUMENT, "a null buffer"))?;
        // SAFETY: the caller guarantees the buffer is live; `retain` checks it.
        let buffer = unsafe { Owned::retain(buffer) };
        if buffer_ref(&buffer).bytes().len() < length {
            return Err(Failure::new(
                IREE_STATUS_INVALID_ARGUMENT,
                format!("the buffer is smaller than the {length} bytes of the shape"),
            ));
        }
        Ok(Owned::new(BufferView {
            buffer,
            shape: shape.into(),
            element_type,
        }))
    })();
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { return_object(out_buffer_view, result) }
}

/// The buffer an owned reference holds.
fn buffer_ref(buffer: &Owned<Buffer>) -> &Buffer {
    // SAFETY: the reference keeps the buffer alive while it is borrowed.
    unsafe { registry::get(buffer.as_ptr()) }
}

/// A shaped, typed view of a buffer.
#[derive(Debug)]
pub(crate) struct BufferView {
    buffer: Owned<Buffer>,
    shape: Box<[iree_hal_dim_t]>,
    element_type: iree_hal_element_type_t,
}

impl Object for BufferView {
    fn kind(&self) -> Kind {
        Kind::BufferView
    }
}

impl BufferView {
    /// A buffer view over a new buffer of `device` holding `bytes`: a
    /// local device's buffer in a block of its host allocator.
    pub(crate) fn new(
        device: &Device,
        shape: &[iree_hal_dim_t],
        element_type: iree_hal_element_type_t,
        bytes: Vec<u8>,
    ) -> MockResult<Owned<BufferView>> {
        let host = if device.is_local() {
            device.host_allocator.copy(&bytes)?
        } else {
            None
        };
        device.statistics.record_alloc(bytes.len());
        let storage = match host {
            Some(host) => Storage::Host(host),
            None => Storage::Allocated(bytes.into()),
        };
        let buffer = Owned::new(Buffer {
            device: std::ptr::from_ref(device).addr(),
            in_host_memory: device.is_local(),
            storage,
            statistics: Arc::clone(&device.statistics),
        });
        Ok(Owned::new(BufferView {
            buffer,
            shape: shape.into(),
            element_type,
        }))
    }

    pub(crate) fn shape(&self) -> &[iree_hal_dim_t] {
        &self.shape
    }

    pub(crate) fn element_type(&self) -> iree_hal_element_type_t {
        self.element_type
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        self.buffer.bytes()
    }

    /// Whether a call on `device` can read the buffer: it was allocated
    /// there, or it is heap memory and `device` a local one (IREE's local
    /// devices map any heap buffer, `iree/hal/buffer_heap.c`).
    pub(crate) fn is_readable_on(&self, device: &Device) -> bool {
        self.buffer.is_readable_on(device)
    }
}

/// The ref type of buffer views in VM lists (IREE registers a descriptor
/// per type; the mock knows only this one).
pub(crate) const BUFFER_VIEW_TYPE: iree_vm_ref_type_t = 0x6276_0000;

/// Bytes of a dense tensor, or why it cannot be allocated.
fn dense_byte_length(shape: &[usize], element_type: iree_hal_element_type_t) -> MockResult<usize> {
    let bits = iree_hal_element_bit_count(element_type);
    if bits == 0 || !bits.is_multiple_of(8) {
        return Err(Failure::new(
            IREE_STATUS_UNIMPLEMENTED,
            format!("the mock only allocates whole-byte element types, not 0x{element_type:08x}"),
        ));
    }
    shape
        .iter()
        .try_fold(bits / 8, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| Failure::new(IREE_STATUS_OUT_OF_RANGE, "buffer size overflows"))
}

/// `iree_hal_buffer_view_allocate_buffer_copy`: a new buffer view over a
/// new buffer holding a copy of `initial_data`, which must be exactly the
/// dense row-major size of the shape.
///
/// # Safety
/// `device` is live, `allocator` is its allocator, `shape` holds
/// `shape_rank` dims, `initial_data` is readable, `out_buffer_view` valid.
#[allow(clippy::too_many_arguments, reason = "IREE's signature")]
pub(crate) unsafe fn iree_hal_buffer_view_allocate_buffer_copy(
    device: *mut iree_hal_device_t,
    allocator: *mut iree_hal_allocator_t,
    shape_rank: iree_host_size_t,
    shape: *const iree_hal_dim_t,
    element_type: iree_hal_element_type_t,
    encoding_type: iree_hal_encoding_type_t,
    _buffer_params: iree_hal_buffer_params_t,
    initial_data: iree_const_byte_span_t,
    out_buffer_view: *mut *mut iree_hal_buffer_view_t,
) -> iree_status_t {
    // SAFETY: forwarded from this function's contract.
    let result = unsafe {
        allocate_buffer_copy(
            device,
            allocator,
            shape_rank,
            shape,
            element_type,
            encoding_type,
            initial_data,
        )
    };
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { return_object(out_buffer_view, result) }
}

/// The checks and the copy of [`iree_hal_buffer_view_allocate_buffer_copy`].
///
/// # Safety
/// As for [`iree_hal_buffer_view_allocate_buffer_copy`].
unsafe fn allocate_buffer_copy(
    device: *mut iree_hal_device_t,
    allocator: *mut iree_hal_allocator_t,
    shape_rank: iree_host_size_t,
    shape: *const iree_hal_dim_t,
    element_type: iree_hal_element_type_t,
    encoding_type: iree_hal_encoding_type_t,
    initial_data: iree_const_byte_span_t,
) -> MockResult<Owned<BufferView>> {
    // SAFETY: the caller guarantees the device is live; `get` checks it.
    let device_ref = unsafe { registry::get(device.cast_const().cast::<Device>()) };
    if allocator.cast() != device {
        return Err(Failure::new(
            IREE_STATUS_INVALID_ARGUMENT,
            "the allocator is not the device's (iree_hal_device_allocator)",
        ));
    }
    if encoding_type != IREE_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR {
        return Err(Failure::new(
            IREE_STATUS_UNIMPLEMENTED,
            format!("encoding 0x{encoding_type:08x} is not dense row-major"),
        ));
    }
    let shape: &[iree_hal_dim_t] = if shape_rank == 0 {
        &[]
    } else {
        // SAFETY: the caller passes `shape_rank` readable dims.
        unsafe { std::slice::from_raw_parts(shape, shape_rank) }
    };
    let length = dense_byte_length(shape, element_type)?;
    if initial_data.data_length != length {
        return Err(Failure::new(
            IREE_STATUS_INVALID_ARGUMENT,
            format!(
                "initial data is {} bytes but the buffer is {length}",
                initial_data.data_length
            ),
        ));
    }
    let bytes = if length == 0 {
        Vec::new()
    } else {
        // SAFETY: the caller passes `data_length` readable bytes.
        unsafe { std::slice::from_raw_parts(initial_data.data, length) }.to_vec()
    };
    BufferView::new(device_ref, shape, element_type, bytes)
}

/// Borrows a live buffer view.
///
/// # Safety
/// `view` came from the mock and the caller holds a reference for `'a`.
unsafe fn view<'a>(buffer_view: *const iree_hal_buffer_view_t) -> &'a BufferView {
    // SAFETY: forwarded from this function's contract.
    unsafe { registry::get(buffer_view.cast::<BufferView>()) }
}

/// `iree_hal_buffer_view_retain_ref`: a new reference, as a VM ref.
///
/// # Safety
/// `value` is null or a live buffer view.
pub(crate) unsafe fn iree_hal_buffer_view_retain_ref(
    value: *mut iree_hal_buffer_view_t,
) -> iree_vm_ref_t {
    if value.is_null() {
        return iree_vm_ref_t::default();
    }
    registry::retain(value.cast::<BufferView>());
    iree_vm_ref_t {
        ptr: value.cast(),
        type_: BUFFER_VIEW_TYPE,
    }
}

/// `iree_vm_ref_release`: gives back the reference a VM ref owns (the mock
/// only makes buffer view refs) and resets the ref to null.
///
/// # Safety
/// `ref_` is valid, and null or owning a reference to a live buffer view.
pub(crate) unsafe fn iree_vm_ref_release(ref_: *mut iree_vm_ref_t) {
    // SAFETY: the caller passes a valid ref.
    let reference = unsafe { *ref_ };
    if !reference.ptr.is_null() {
        assert_eq!(
            reference.type_, BUFFER_VIEW_TYPE,
            "mock IREE: iree_vm_ref_release of a ref that is not a buffer view"
        );
        // SAFETY: the caller gives back the reference the ref owns.
        unsafe { registry::release(reference.ptr.cast::<BufferView>().cast_const()) };
    }
    // SAFETY: as above.
    unsafe { *ref_ = iree_vm_ref_t::default() };
}

/// `iree_hal_buffer_view_check_deref`: the buffer view a ref holds, not
/// retained; INVALID_ARGUMENT for a ref of another type (or a null ref).
///
/// # Safety
/// `ref_` is a ref from the mock that is still owned by someone; `out_ptr`
/// is valid for writes.
pub(crate) unsafe fn iree_hal_buffer_view_check_deref(
    ref_: iree_vm_ref_t,
    out_ptr: *mut *mut iree_hal_buffer_view_t,
) -> iree_status_t {
    if ref_.type_ != BUFFER_VIEW_TYPE {
        return Failure::new(
            IREE_STATUS_INVALID_ARGUMENT,
            format!(
                "ref type mismatch; expected hal.buffer_view, have type {:#x}",
                ref_.type_
            ),
        )
        .into_status();
    }
    if !ref_.ptr.is_null() {
        // SAFETY: forwarded from this function's contract; checks liveness.
        unsafe { view(ref_.ptr.cast()) };
    }
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { *out_ptr = ref_.ptr.cast() };
    std::ptr::null_mut()
}

/// `iree_hal_buffer_view_buffer`: the view's buffer, borrowed.
///
/// # Safety
/// `buffer_view` is live.
pub(crate) unsafe fn iree_hal_buffer_view_buffer(
    buffer_view: *const iree_hal_buffer_view_t,
) -> *mut iree_hal_buffer_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { view(buffer_view) }.buffer.as_ptr().cast()
}

/// `iree_hal_buffer_view_byte_length`.
///
/// # Safety
/// `buffer_view` is live.
pub(crate) unsafe fn iree_hal_buffer_view_byte_length(
    buffer_view: *const iree_hal_buffer_view_t,
) -> iree_device_size_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { view(buffer_view) }.bytes().len()
}

/// `iree_hal_buffer_view_shape_rank`.
///
/// # Safety
/// `buffer_view` is live.
pub(crate) unsafe fn iree_hal_buffer_view_shape_rank(
    buffer_view: *const iree_hal_buffer_view_t,
) -> iree_host_size_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { view(buffer_view) }.shape.len()
}

/// `iree_hal_buffer_view_shape_dims`: points into the view.
///
/// # Safety
/// `buffer_view` is live.
pub(crate) unsafe fn iree_hal_buffer_view_shape_dims(
    buffer_view: *const iree_hal_buffer_view_t,
) -> *const iree_hal_dim_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { view(buffer_view) }.shape.as_ptr()
}

/// `iree_hal_buffer_view_element_type`.
///
/// # Safety
/// `buffer_view` is live.
pub(crate) unsafe fn iree_hal_buffer_view_element_type(
    buffer_view: *const iree_hal_buffer_view_t,
) -> iree_hal_element_type_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { view(buffer_view) }.element_type
}
