//! Tensors: HAL buffer views on a device.

use std::ptr::NonNull;

use crate::device::Device;
use crate::element::{Element, ElementType};
use crate::error::{Error, Result};
use crate::handle::Handle;
use crate::{import, sys, transfer};

/// A dense row-major tensor in device memory (a HAL buffer view). Cheap to
/// clone (clones share the buffer). It keeps its device alive, and can be
/// passed back as an argument without a host round trip.
///
/// Corresponds to `iree_hal_buffer_view_allocate_buffer_copy` (host →
/// device) and `iree_hal_device_transfer_d2h` (device → host).
#[doc(alias = "iree_hal_buffer_view_t")]
#[derive(Debug, Clone)]
pub struct Tensor {
    // Field order is drop order: the view before the device it lives on.
    view: Handle<sys::iree_hal_buffer_view_t>,
    device: Device,
    shape: Box<[usize]>,
    element_type: ElementType,
}

// SAFETY: buffer views are immutable after creation and refcounted
// atomically; reading them back goes through the thread-safe device.
unsafe impl Send for Tensor {}
// SAFETY: as above; no method mutates the view.
unsafe impl Sync for Tensor {}

impl Tensor {
    /// Copies `data` (row-major) into a new tensor of `shape` on `device`.
    ///
    /// ```no_run
    /// # let runtime = iree_safe::Runtime::new("local-sync")?;
    /// let x = iree_safe::Tensor::from_slice(runtime.device(), &[2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    /// assert_eq!(x.shape(), &[2, 3]);
    /// # Ok::<(), iree_safe::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`from_bytes`](Self::from_bytes).
    pub fn from_slice<T: Element>(device: &Device, shape: &[usize], data: &[T]) -> Result<Tensor> {
        // SAFETY: `Element` is sealed and only implemented for primitive
        // numbers, `half`'s floats and `bool`: no padding, every byte
        // initialized, and the in-memory layout is the little-endian layout
        // IREE expects on this (little-endian, see `element.rs`) host. The
        // view covers exactly `data`.
        let bytes = unsafe {
            std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data))
        };
        Tensor::from_bytes(device, shape, T::TYPE, bytes)
    }

    /// Copies raw little-endian element bytes into a new tensor on `device`.
    /// `bytes` must hold exactly `product(shape) * element_type.byte_size()`
    /// bytes.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `bytes` is not as long as `shape` and
    /// `element_type` need (or that size overflows), and [`Error::Iree`] when
    /// the device cannot allocate the tensor.
    #[doc(alias = "iree_hal_buffer_view_allocate_buffer_copy")]
    pub fn from_bytes(
        device: &Device,
        shape: &[usize],
        element_type: ElementType,
        bytes: &[u8],
    ) -> Result<Tensor> {
        let expected = byte_length(shape, element_type)?;
        if bytes.len() != expected {
            return Err(Error::InvalidArgument(format!(
                "{} needs {expected} bytes, got {}",
                describe(shape, element_type),
                bytes.len()
            )));
        }
        let device = device.clone();
        // SAFETY: the device is live and the allocator is its own.
        let view = unsafe {
            transfer::to_device(
                device.as_ptr(),
                sys::iree_hal_device_allocator(device.as_ptr()),
                shape,
                element_type.to_raw(),
                bytes,
            )
        }?;
        Ok(Tensor {
            view,
            device,
            shape: shape.into(),
            element_type,
        })
    }

    /// Hands `data` (row-major), which `owner` holds, to `device` **without a
    /// copy** when the device can read it where it is: `Ok(None)` says it
    /// cannot, and the caller copies (e.g. with
    /// [`from_slice`](Self::from_slice)).
    ///
    /// It imports when all of these hold:
    /// - the device is a CPU device ([`Device::is_local`]: `local-sync`,
    ///   `local-task`), whose memory is host memory;
    /// - `data` is not empty and its address is a multiple of 64 bytes (the
    ///   alignment IREE's heap allocator requires, `IREE_HAL_HEAP_BUFFER_ALIGNMENT`,
    ///   and that compiled code may assume of its buffers).
    ///
    /// The tensor keeps `owner` alive (a clone of the `Arc`) until IREE
    /// releases the buffer: after the last call that reads it returns and
    /// the last clone of the tensor is dropped. `owner` cannot be mutated
    /// meanwhile (`Arc::get_mut` and `Arc::make_mut` see that clone), so the
    /// compiled code reads the values `data` had. Compiled code only reads
    /// the tensor (it is imported read-only): IREE writes into an argument
    /// only when the function ties a result to it (`iree.abi.output`), and
    /// such a function must not be given an imported tensor.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # let runtime = iree_safe::Runtime::new("local-sync")?;
    /// let weights: Arc<Vec<f32>> = Arc::new(vec![0.5; 1 << 20]);
    /// let x = iree_safe::Tensor::import_shared(runtime.device(), &[1 << 20], weights.clone(), |w| w.as_slice())?;
    /// let x = match x {
    ///     Some(imported) => imported,
    ///     None => iree_safe::Tensor::from_slice(runtime.device(), &[1 << 20], &weights)?,
    /// };
    /// # Ok::<(), iree_safe::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `data` is not as long as `shape`
    /// needs, and [`Error::Iree`] when IREE refuses the import.
    #[doc(alias = "iree_hal_allocator_import_buffer")]
    pub fn import_shared<T: Element, O: Send + Sync + 'static>(
        device: &Device,
        shape: &[usize],
        owner: std::sync::Arc<O>,
        data: impl FnOnce(&O) -> &[T],
    ) -> Result<Option<Tensor>> {
        let slice = data(&owner);
        let expected = byte_length(shape, T::TYPE)?;
        let length = std::mem::size_of_val(slice);
        if length != expected {
            return Err(Error::InvalidArgument(format!(
                "{} needs {expected} bytes, got {length}",
                describe(shape, T::TYPE)
            )));
        }
        if !device.is_local()
            || length == 0
            || !slice
                .as_ptr()
                .addr()
                .is_multiple_of(import::IMPORT_ALIGNMENT)
        {
            return Ok(None);
        }
        // SAFETY: as in `from_slice`, `Element` types are plain little-endian
        // data; the byte view covers exactly `slice`.
        let bytes = unsafe { std::slice::from_raw_parts(slice.as_ptr().cast::<u8>(), length) };
        // Raw parts outlive the borrow of `owner`, which moves into the buffer.
        let bytes: *const [u8] = bytes;
        let device = device.clone();
        // SAFETY: the device is live and local, so its allocator is IREE's
        // heap allocator; `bytes` points into memory `owner` keeps valid:
        // `data` borrowed it from `&O`, and while the buffer's `Arc` lives no
        // one holds `O` mutably, so it stays where it is, unchanged; it is
        // aligned (checked above).
        let buffer = unsafe {
            import::import_host(
                sys::iree_hal_device_allocator(device.as_ptr()),
                owner,
                &*bytes,
            )
        }?;
        // SAFETY: the buffer is live and holds exactly the shape's bytes; on
        // success the view retains the buffer and one view reference is ours
        // (`iree_hal_buffer_view_create`, `iree/hal/buffer_view.h`).
        let view = unsafe {
            Handle::create(|out| {
                sys::iree_hal_buffer_view_create(
                    buffer.as_ptr(),
                    shape.len(),
                    shape.as_ptr(),
                    T::TYPE.to_raw(),
                    sys::IREE_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
                    sys::iree_allocator_system(),
                    out,
                )
            })
        }?;
        Ok(Some(Tensor {
            view,
            device,
            shape: shape.into(),
            element_type: T::TYPE,
        }))
    }

    /// Takes a reference on a buffer view produced on `device` (a call
    /// result).
    ///
    /// # Safety
    /// `view` is a live buffer view whose buffer belongs to `device`.
    pub(crate) unsafe fn retain_borrowed(
        view: NonNull<sys::iree_hal_buffer_view_t>,
        device: Device,
    ) -> Result<Tensor> {
        // SAFETY: forwarded from this function's contract.
        let view = unsafe { Handle::retain_borrowed(view) };
        // SAFETY: the view is live; the dims array has `rank` entries.
        let (raw_type, shape) = unsafe {
            let rank = sys::iree_hal_buffer_view_shape_rank(view.as_ptr());
            let dims = sys::iree_hal_buffer_view_shape_dims(view.as_ptr());
            let shape: Box<[usize]> = if rank == 0 {
                Box::new([])
            } else {
                std::slice::from_raw_parts(dims, rank).into()
            };
            (sys::iree_hal_buffer_view_element_type(view.as_ptr()), shape)
        };
        let element_type = ElementType::from_raw(raw_type).ok_or_else(|| {
            Error::Unsupported(format!(
                "tensor element type 0x{raw_type:08x} is not supported"
            ))
        })?;
        Ok(Tensor {
            view,
            device,
            shape,
            element_type,
        })
    }

    /// Dimensions, outermost first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Element type.
    pub fn element_type(&self) -> ElementType {
        self.element_type
    }

    /// Number of elements.
    pub fn element_count(&self) -> usize {
        self.shape.iter().product()
    }

    /// The device the tensor lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// `f32[1,5]`-style description.
    pub fn describe(&self) -> String {
        describe(&self.shape, self.element_type)
    }

    /// Copies the tensor back to the host as raw little-endian bytes (one
    /// copy; an error if the host cannot allocate it). A copy of 32 MiB or
    /// more asks Linux for transparent huge pages on its fresh destination
    /// (`madvise(MADV_HUGEPAGE)`), so writing it faults once per 2 MiB
    /// rather than once per 4 KiB page; the same holds for
    /// [`to_vec`](Self::to_vec) and [`to_vec_aligned`](Self::to_vec_aligned).
    ///
    /// # Errors
    ///
    /// [`Error::HostAllocation`] when the host cannot allocate the copy, and
    /// [`Error::Iree`] when the transfer fails.
    #[doc(alias = "iree_hal_device_transfer_d2h")]
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        // SAFETY: the view's buffer lives on `self.device`, and `self` keeps
        // both alive.
        unsafe { transfer::to_host(self.device.as_ptr(), self.view.as_ptr()) }
    }

    /// Copies the tensor back to the host as elements of `T`, which must be
    /// the tensor's element type (one copy; an error if the host cannot
    /// allocate it).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `T` is not the tensor's element type,
    /// and the errors of [`to_bytes`](Self::to_bytes).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.check_element::<T>()?;
        // SAFETY: as in `to_bytes`; the element type matches, so the buffer
        // holds whole `T::Storage` elements.
        let stored =
            unsafe { transfer::to_host::<T::Storage>(self.device.as_ptr(), self.view.as_ptr()) }?;
        Ok(T::from_storage(stored))
    }

    /// An error unless the tensor's elements are `T`s.
    fn check_element<T: Element>(&self) -> Result<()> {
        if T::TYPE == self.element_type {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "cannot read {} as {}: read it as {} (or use to_bytes)",
            self.describe(),
            T::TYPE,
            self.element_type
        )))
    }

    /// Copies the tensor back to the host as elements of `T` (as
    /// [`to_vec`](Self::to_vec), one copy) placed so that a CPU device can
    /// later take them without a copy ([`import_shared`](Self::import_shared)):
    /// the tensor's elements are `vec[offset..offset + element_count()]`,
    /// starting on a 64-byte boundary, and the at most 64 bytes around them
    /// are zero.
    ///
    /// ```no_run
    /// # let runtime = iree_safe::Runtime::new("local-sync")?;
    /// let x = iree_safe::Tensor::from_slice(runtime.device(), &[3], &[1.0f32, 2.0, 3.0])?;
    /// let (host, offset) = x.to_vec_aligned::<f32>()?;
    /// assert_eq!(host[offset..offset + 3], [1.0, 2.0, 3.0]);
    /// assert_eq!(host[offset..].as_ptr().addr() % 64, 0);
    /// # Ok::<(), iree_safe::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`to_vec`](Self::to_vec).
    pub fn to_vec_aligned<T: Element>(&self) -> Result<(Vec<T>, usize)> {
        self.check_element::<T>()?;
        // SAFETY: as in `to_vec`.
        let (stored, offset) = unsafe {
            transfer::to_host_aligned::<T::Storage>(
                self.device.as_ptr(),
                self.view.as_ptr(),
                import::IMPORT_ALIGNMENT,
            )
        }?;
        // `from_storage` reuses the allocation: the offset still holds.
        Ok((T::from_storage(stored), offset))
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::iree_hal_buffer_view_t {
        self.view.as_ptr()
    }
}

/// `f32[1,5]`-style description of a shape and type.
pub(crate) fn describe(shape: &[usize], element_type: ElementType) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("{element_type}[{}]", dims.join(","))
}

fn byte_length(shape: &[usize], element_type: ElementType) -> Result<usize> {
    shape
        .iter()
        .try_fold(element_type.byte_size(), |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{} is too large to address",
                describe(shape, element_type)
            ))
        })
}
