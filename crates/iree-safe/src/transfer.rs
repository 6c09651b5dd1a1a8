//! Copies between host memory and device buffers: the one place where tensor
//! data crosses between Rust and IREE, used by [`Tensor`](crate::Tensor).
//!
//! A copy to the host allocates its destination fallibly and transfers into
//! it directly: one host copy, and an error (never an abort) when the host
//! cannot hold it. A large destination is fresh memory on every copy; it
//! asks for huge pages ([`huge_pages`](crate::huge_pages)) so that the copy
//! faults once per 2 MiB rather than once per page.

use crate::element::sealed::Pod;
use crate::error::{check, Error, Result};
use crate::handle::Handle;
use crate::sys;

/// Allocates a device-local buffer view holding a copy of `bytes` (dense,
/// row-major).
///
/// # Safety
/// `device` is live and `allocator` is its allocator (or one compatible with
/// it, such as a runtime session's).
pub(crate) unsafe fn to_device(
    device: *mut sys::iree_hal_device_t,
    allocator: *mut sys::iree_hal_allocator_t,
    shape: &[usize],
    element_type: sys::iree_hal_element_type_t,
    bytes: &[u8],
) -> Result<Handle<sys::iree_hal_buffer_view_t>> {
    let params = sys::iree_hal_buffer_params_t {
        usage: sys::IREE_HAL_BUFFER_USAGE_DEFAULT,
        type_: sys::IREE_HAL_MEMORY_TYPE_DEVICE_LOCAL,
        ..Default::default()
    };
    // SAFETY: the caller guarantees the device and allocator; `shape` and
    // `bytes` outlive the call (IREE copies the data); on success one view
    // reference is ours. `iree_hal_dim_t` is `usize` on 64-bit hosts (the
    // pointer cast is type-checked).
    unsafe {
        Handle::create(|out| {
            sys::iree_hal_buffer_view_allocate_buffer_copy(
                device,
                allocator,
                shape.len(),
                shape.as_ptr(),
                element_type,
                sys::IREE_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
                params,
                sys::iree_make_const_byte_span(bytes.as_ptr(), bytes.len()),
                out,
            )
        })
    }
}

/// Copies a buffer view's contents into a new vector of `T`, which must
/// hold exactly the view's bytes.
///
/// # Safety
/// `view` is live and its buffer belongs to the live `device`.
pub(crate) unsafe fn to_host<T: Pod>(
    device: *mut sys::iree_hal_device_t,
    view: *mut sys::iree_hal_buffer_view_t,
) -> Result<Vec<T>> {
    // SAFETY: forwarded from this function's contract.
    let (host, _) = unsafe { to_host_aligned(device, view, 1) }?;
    Ok(host)
}

/// Copies a buffer view's contents into a new vector of `T` whose elements
/// from the returned offset on are the view's, placed so that they start on
/// an `align`-byte boundary (a power of two); the elements around them are
/// zero. With `align` 1 the vector is exactly the view's elements, at 0.
///
/// # Safety
/// `view` is live and its buffer belongs to the live `device`.
pub(crate) unsafe fn to_host_aligned<T: Pod>(
    device: *mut sys::iree_hal_device_t,
    view: *mut sys::iree_hal_buffer_view_t,
    align: usize,
) -> Result<(Vec<T>, usize)> {
    // SAFETY: the view is live (caller's contract).
    let length = unsafe { sys::iree_hal_buffer_view_byte_length(view) };
    let size = std::mem::size_of::<T>();
    if length % size != 0 {
        return Err(Error::internal(format!(
            "a buffer of {length} bytes does not hold whole {size}-byte elements"
        )));
    }
    let count = length / size;
    // Elements before the data, at most, to reach the boundary.
    let pad = if align > size { align / size } else { 0 };
    let total = count + pad;
    let mut host: Vec<T> = Vec::new();
    host.try_reserve_exact(total)
        .map_err(|_| Error::HostAllocation {
            bytes: total * size,
        })?;
    let base = host.as_mut_ptr();
    crate::huge_pages::advise(base.cast(), total * size);
    // `T` is aligned to `size` (plain numbers), so some offset below `pad`
    // lands on the boundary whenever `size` divides `align`.
    let offset = (0..pad)
        .find(|&i| base.wrapping_add(i).addr().is_multiple_of(align))
        .unwrap_or(0);
    if length > 0 {
        // SAFETY: the buffer lives on `device` (caller's contract); `host`
        // has room for `total` elements, and `offset + count <= total`; the
        // transfer writes all `length` bytes from `offset` on.
        unsafe {
            check(sys::iree_hal_device_transfer_d2h(
                device,
                sys::iree_hal_buffer_view_buffer(view),
                0,
                base.add(offset).cast(),
                length,
                sys::IREE_HAL_TRANSFER_BUFFER_FLAG_DEFAULT,
                sys::iree_infinite_timeout(),
            ))
        }?;
    }
    // SAFETY: within the reserved `total` elements: zero the ones before
    // and after the data (all-zero bytes are a valid `T`: plain data).
    unsafe {
        std::ptr::write_bytes(base, 0, offset);
        std::ptr::write_bytes(base.add(offset + count), 0, total - offset - count);
    }
    // SAFETY: all `total` elements are initialized (the transfer and the
    // zeroing above), and `T` is plain data, valid for any bytes.
    unsafe { host.set_len(total) };
    Ok((host, offset))
}
