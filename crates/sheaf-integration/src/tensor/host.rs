//! Host tensors: shared `ndarray` arrays, copied to a device (converted
//! for tagged storage) or imported without a copy, and known by their
//! allocation for the upload cache.

use std::sync::{Arc, Weak};

use half::{bf16, f16};
use iree_safe::{Device, Element, ElementType};
use jit_cache::{DType, ScalarValue};
use ndarray::{ArrayD, IxDyn};

use crate::error::JitError;

use super::{element_type, DeviceTensor};

/// A host tensor: a shared (`Arc`) `ndarray` array of one of the element
/// types Sheaf uses. Cloning shares the array; handing one to a call never
/// copies it on the Rust side.
///
/// [`HostTensor::Tagged`] is Sheaf's own representation: `f32` storage
/// holding values of another dtype (a bf16 tensor kept as f32), converted
/// when it is copied to the device (floats rounded to nearest-even).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HostTensor {
    /// `f32`.
    F32(Arc<ArrayD<f32>>),
    /// `f64`.
    F64(Arc<ArrayD<f64>>),
    /// IEEE half precision.
    F16(Arc<ArrayD<f16>>),
    /// bfloat16.
    BF16(Arc<ArrayD<bf16>>),
    /// `i32`.
    I32(Arc<ArrayD<i32>>),
    /// `i64`.
    I64(Arc<ArrayD<i64>>),
    /// `bool` (`i1` in MLIR).
    Bool(Arc<ArrayD<bool>>),
    /// `f32` storage holding values of `dtype`.
    Tagged {
        /// The values, widened to f32.
        data: Arc<ArrayD<f32>>,
        /// What they are: the dtype the device sees.
        dtype: DType,
    },
}

/// Applies `$body` to the shared array inside a [`HostTensor`], whatever its
/// element type.
macro_rules! with_array {
    ($tensor:expr, $array:ident => $body:expr) => {
        match $tensor {
            HostTensor::F32($array) => $body,
            HostTensor::F64($array) => $body,
            HostTensor::F16($array) => $body,
            HostTensor::BF16($array) => $body,
            HostTensor::I32($array) => $body,
            HostTensor::I64($array) => $body,
            HostTensor::Bool($array) => $body,
            HostTensor::Tagged { data: $array, .. } => $body,
        }
    };
}

impl HostTensor {
    /// `f32` storage holding values of `dtype` (Sheaf's tensors): no copy
    /// now; converted when copied to the device. `dtype` must be a float,
    /// integer or bool type the runtime has.
    ///
    /// # Errors
    ///
    /// [`JitError::Unsupported`] for another `dtype` (`u8`, say).
    pub fn tagged(data: Arc<ArrayD<f32>>, dtype: DType) -> Result<HostTensor, JitError> {
        match dtype {
            DType::F32 => Ok(HostTensor::F32(data)),
            DType::F64 | DType::F16 | DType::BF16 | DType::I32 | DType::I64 | DType::Bool => {
                Ok(HostTensor::Tagged { data, dtype })
            }
            other => Err(JitError::Unsupported(format!(
                "f32 storage tagged {other}: tag it f64, f16, bf16, i32, i64 or bool"
            ))),
        }
    }

    /// Element type, as the device sees it.
    pub fn dtype(&self) -> DType {
        match self {
            HostTensor::F32(_) => DType::F32,
            HostTensor::F64(_) => DType::F64,
            HostTensor::F16(_) => DType::F16,
            HostTensor::BF16(_) => DType::BF16,
            HostTensor::I32(_) => DType::I32,
            HostTensor::I64(_) => DType::I64,
            HostTensor::Bool(_) => DType::Bool,
            HostTensor::Tagged { dtype, .. } => *dtype,
        }
    }

    /// Dimensions.
    pub fn shape(&self) -> &[usize] {
        with_array!(self, a => a.shape())
    }

    /// Bytes the device copy takes.
    pub fn device_bytes(&self) -> usize {
        let elements: usize = self.shape().iter().product();
        elements.saturating_mul(element_type(self.dtype()).map_or(4, ElementType::byte_size))
    }

    /// The values widened (or for f64 and 64-bit integers, rounded) to
    /// `f32`, for callers that hold every tensor as `f32`: the array itself
    /// for f32 and tagged storage (no copy), a converted copy otherwise
    /// (bools as 0 and 1).
    pub fn to_f32(&self) -> Arc<ArrayD<f32>> {
        match self {
            HostTensor::F32(a) | HostTensor::Tagged { data: a, .. } => Arc::clone(a),
            HostTensor::F64(a) => Arc::new(a.mapv(|v| v as f32)),
            HostTensor::F16(a) => Arc::new(a.mapv(f16::to_f32)),
            HostTensor::BF16(a) => Arc::new(a.mapv(bf16::to_f32)),
            HostTensor::I32(a) => Arc::new(a.mapv(|v| v as f32)),
            HostTensor::I64(a) => Arc::new(a.mapv(|v| v as f32)),
            HostTensor::Bool(a) => Arc::new(a.mapv(|v| f32::from(u8::from(v)))),
        }
    }

    /// The `f32` array, if this is one.
    pub fn as_f32(&self) -> Option<&ArrayD<f32>> {
        match self {
            HostTensor::F32(a) => Some(a),
            _ => None,
        }
    }

    /// The value of a tensor of one element, as a scalar (f16 and bf16
    /// widened to f32).
    pub fn to_scalar(&self) -> Option<ScalarValue> {
        let one = |len: usize| len == 1;
        Some(match self {
            HostTensor::F32(a) if one(a.len()) => ScalarValue::F32(*a.first()?),
            HostTensor::F64(a) if one(a.len()) => ScalarValue::F64(*a.first()?),
            HostTensor::F16(a) if one(a.len()) => ScalarValue::F32(a.first()?.to_f32()),
            HostTensor::BF16(a) if one(a.len()) => ScalarValue::F32(a.first()?.to_f32()),
            HostTensor::I32(a) if one(a.len()) => ScalarValue::I32(*a.first()?),
            HostTensor::I64(a) if one(a.len()) => ScalarValue::I64(*a.first()?),
            HostTensor::Bool(a) if one(a.len()) => ScalarValue::Bool(*a.first()?),
            HostTensor::Tagged { data, .. } if one(data.len()) => ScalarValue::F32(*data.first()?),
            _ => return None,
        })
    }

    /// Copies the array to `device` (row-major, whatever the array's memory
    /// layout): a standard-layout array straight from its memory; a strided
    /// one, or tagged storage converted to its dtype, through one host copy.
    ///
    /// # Errors
    ///
    /// [`iree_safe::Error::HostAllocation`] (as [`JitError::Runtime`]) when
    /// that host copy cannot be allocated, and the runtime's error when the
    /// device buffer cannot: never an abort.
    pub fn to_device(&self, device: &Device) -> Result<DeviceTensor, JitError> {
        match self {
            HostTensor::F32(a) => upload(device, a),
            HostTensor::F64(a) => upload(device, a),
            HostTensor::F16(a) => upload(device, a),
            HostTensor::BF16(a) => upload(device, a),
            HostTensor::I32(a) => upload(device, a),
            HostTensor::I64(a) => upload(device, a),
            HostTensor::Bool(a) => upload(device, a),
            HostTensor::Tagged { data, dtype } => match dtype {
                DType::F64 => upload_converted(device, data, f64::from),
                DType::F16 => upload_converted(device, data, f16::from_f32),
                DType::BF16 => upload_converted(device, data, bf16::from_f32),
                DType::I32 => upload_converted(device, data, |v| v as i32),
                DType::I64 => upload_converted(device, data, |v| v as i64),
                DType::Bool => upload_converted(device, data, |v| v != 0.0),
                _ => upload(device, data),
            },
        }
    }

    /// The array handed to `device` **without a copy**, when it can be:
    /// `None` when it cannot, and the caller copies it
    /// ([`to_device`](Self::to_device)). It can be on a CPU device
    /// (`local-sync`, `local-task`) for an array in standard (row-major,
    /// contiguous) layout whose data is 64-byte aligned and not empty, of a
    /// dtype stored as the device reads it — every variant but
    /// [`Tagged`](Self::Tagged), which needs converting. The device tensor
    /// shares the array (an `Arc` clone, dropped when IREE releases the
    /// buffer: after the call, or after the last result or clone that uses
    /// it), and the array cannot change meanwhile. See
    /// [`iree_safe::Tensor::import_shared`].
    ///
    /// # Errors
    ///
    /// [`JitError::Runtime`] when IREE refuses the import.
    pub fn import_to(&self, device: &Device) -> Result<Option<DeviceTensor>, JitError> {
        fn import<T: Element + Send + Sync>(
            device: &Device,
            array: &Arc<ArrayD<T>>,
        ) -> Result<Option<DeviceTensor>, JitError> {
            if array.as_slice().is_none() {
                return Ok(None);
            }
            Ok(DeviceTensor::import_shared(
                device,
                array.shape(),
                Arc::clone(array),
                |array| array.as_slice().unwrap_or_default(),
            )?)
        }
        match self {
            HostTensor::F32(a) => import(device, a),
            HostTensor::F64(a) => import(device, a),
            HostTensor::F16(a) => import(device, a),
            HostTensor::BF16(a) => import(device, a),
            HostTensor::I32(a) => import(device, a),
            HostTensor::I64(a) => import(device, a),
            HostTensor::Bool(a) => import(device, a),
            HostTensor::Tagged { .. } => Ok(None),
        }
    }

    /// Copies a device tensor back to the host: one copy, straight into the
    /// array's storage, which starts on a 64-byte boundary (64 bytes more
    /// at most): an array read back and passed again is imported by CPU
    /// devices, not copied ([`import_to`](Self::import_to)).
    ///
    /// # Errors
    ///
    /// [`JitError::Runtime`] when the copy fails or the host cannot allocate
    /// it, and [`JitError::Unsupported`] for an element type this crate does
    /// not hold.
    pub fn from_device(tensor: &DeviceTensor) -> Result<HostTensor, JitError> {
        fn read<T: Element>(tensor: &DeviceTensor) -> Result<Arc<ArrayD<T>>, JitError> {
            let (data, offset) = tensor.to_vec_aligned::<T>()?;
            let count = tensor.element_count();
            let end = offset + count;
            if data.len() < end {
                return Err(JitError::Internal(format!(
                    "device tensor {}: {} elements read back, {count} at {offset} expected",
                    tensor.describe(),
                    data.len()
                )));
            }
            let flat = ndarray::Array1::from_vec(data).slice_move(ndarray::s![offset..end]);
            flat.into_shape_with_order(IxDyn(tensor.shape()))
                .map(Arc::new)
                .map_err(|e| {
                    JitError::Internal(format!("device tensor {}: {e}", tensor.describe()))
                })
        }
        use ElementType as E;
        Ok(match tensor.element_type() {
            E::F32 => HostTensor::F32(read(tensor)?),
            E::F64 => HostTensor::F64(read(tensor)?),
            E::F16 => HostTensor::F16(read(tensor)?),
            E::BF16 => HostTensor::BF16(read(tensor)?),
            E::I32 => HostTensor::I32(read(tensor)?),
            E::I64 => HostTensor::I64(read(tensor)?),
            E::Bool => HostTensor::Bool(read(tensor)?),
            other => {
                return Err(JitError::Unsupported(format!(
                    "a device tensor of {other} has no host counterpart here; read it with \
                     DeviceTensor::to_bytes"
                )))
            }
        })
    }

    /// A handle that tells whether a tensor is this very array (the same
    /// allocation, still alive), without keeping its memory alive.
    pub(crate) fn identity(&self) -> Identity {
        Identity {
            dtype: self.dtype(),
            array: with_array!(self, a => WeakArray::from(a)),
        }
    }
}

/// The identity of a shared host array: its address and dtype, with a weak
/// reference that proves the address still names the same array (while the
/// weak reference exists, the allocation cannot be reused for another).
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    dtype: DType,
    array: WeakArray,
}

impl Identity {
    /// The address and dtype, for hashing.
    pub(crate) fn key(&self) -> (usize, DType) {
        (self.array.address(), self.dtype)
    }

    /// True while the array lives.
    pub(crate) fn alive(&self) -> bool {
        self.array.alive()
    }

    /// True when `tensor` is the array this identity was taken from.
    pub(crate) fn is(&self, tensor: &HostTensor) -> bool {
        let other = tensor.identity();
        self.key() == other.key() && self.array.alive()
    }
}

macro_rules! weak_arrays {
    ($($variant:ident($ty:ty)),*) => {
        /// A weak reference to a shared array of any element type.
        #[derive(Debug, Clone)]
        pub(crate) enum WeakArray {
            $($variant(Weak<ArrayD<$ty>>),)*
        }

        impl WeakArray {
            fn address(&self) -> usize {
                match self {
                    $(WeakArray::$variant(weak) => weak.as_ptr().addr(),)*
                }
            }

            /// True while the array is alive (and therefore unchanged: a
            /// shared array cannot be mutated while it is shared).
            fn alive(&self) -> bool {
                match self {
                    $(WeakArray::$variant(weak) => weak.strong_count() > 0,)*
                }
            }
        }

        $(
            impl From<&Arc<ArrayD<$ty>>> for WeakArray {
                fn from(array: &Arc<ArrayD<$ty>>) -> Self {
                    WeakArray::$variant(Arc::downgrade(array))
                }
            }
        )*
    };
}

weak_arrays!(
    F32(f32),
    F64(f64),
    F16(f16),
    BF16(bf16),
    I32(i32),
    I64(i64),
    Bool(bool)
);

macro_rules! host_from {
    ($($ty:ty => $variant:ident),*) => {$(
        impl From<ArrayD<$ty>> for HostTensor {
            fn from(array: ArrayD<$ty>) -> Self {
                HostTensor::$variant(Arc::new(array))
            }
        }
        impl From<Arc<ArrayD<$ty>>> for HostTensor {
            fn from(array: Arc<ArrayD<$ty>>) -> Self {
                HostTensor::$variant(array)
            }
        }
    )*};
}

host_from!(f32 => F32, f64 => F64, f16 => F16, bf16 => BF16, i32 => I32, i64 => I64, bool => Bool);

/// The alignment a host array needs to be imported (IREE's
/// `IREE_HAL_HEAP_BUFFER_ALIGNMENT`).
pub const IMPORT_ALIGNMENT: usize = 64;

/// A row-major copy of `array` whose data is [`IMPORT_ALIGNMENT`]-aligned,
/// so that CPU devices import it on every call instead of copying it
/// ([`HostTensor::import_to`]). Make it once for arrays passed on many
/// calls (parameters, when they are loaded): it costs one copy and at most
/// 64 bytes more. The array owns a slightly larger buffer and starts inside
/// it; it is an ordinary `ArrayD` (an operation that makes a new array
/// makes an ordinary, not necessarily aligned, one).
///
/// ```
/// let x = ndarray::ArrayD::<f32>::ones(ndarray::IxDyn(&[3, 5]));
/// let aligned = sheaf_integration::tuning::aligned_copy(&x);
/// assert_eq!(aligned, x);
/// assert_eq!(aligned.as_ptr().addr() % sheaf_integration::tuning::IMPORT_ALIGNMENT, 0);
/// ```
pub fn aligned_copy<T: Clone>(array: &ArrayD<T>) -> ArrayD<T> {
    let Some(first) = array.first() else {
        return array.clone();
    };
    let pad = IMPORT_ALIGNMENT.div_ceil(std::mem::size_of::<T>().max(1));
    let mut data = Vec::with_capacity(array.len() + pad);
    data.extend(std::iter::repeat_n(first.clone(), pad));
    data.extend(array.iter().cloned());
    // Elements are `size_of::<T>()` apart, so one of the first `pad` starts
    // on the boundary when the element size divides it (all of Sheaf's
    // dtypes); else the copy is simply unaligned.
    let offset = (0..pad)
        .find(|&i| data[i..].as_ptr().addr().is_multiple_of(IMPORT_ALIGNMENT))
        .unwrap_or(0);
    let len = array.len();
    let flat = ndarray::Array1::from_vec(data).slice_move(ndarray::s![offset..offset + len]);
    flat.into_shape_with_order(IxDyn(array.shape()))
        .unwrap_or_else(|_| array.clone())
}

/// Copies `array` to `device`: straight from its memory when it is in
/// standard layout, else through a row-major host copy.
fn upload<T: Element>(device: &Device, array: &ArrayD<T>) -> Result<DeviceTensor, JitError> {
    match array.as_slice() {
        Some(data) => Ok(DeviceTensor::from_slice(device, array.shape(), data)?),
        None => upload_converted(device, array, |value| value),
    }
}

/// Copies `array` to `device` with each element converted by `convert`,
/// through a row-major host copy that is an error, not an abort, when it
/// cannot be allocated.
fn upload_converted<S: Copy, T: Element>(
    device: &Device,
    array: &ArrayD<S>,
    convert: impl Fn(S) -> T,
) -> Result<DeviceTensor, JitError> {
    let mut data = Vec::new();
    data.try_reserve_exact(array.len())
        .map_err(|_| iree_safe::Error::HostAllocation {
            bytes: array.len().saturating_mul(std::mem::size_of::<T>()),
        })?;
    data.extend(array.iter().map(|&value| convert(value)));
    Ok(DeviceTensor::from_slice(device, array.shape(), &data)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_storage_reports_the_tag() {
        let data = Arc::new(ArrayD::from_shape_vec(IxDyn(&[2]), vec![1.5f32, -2.0]).unwrap());
        let bf = HostTensor::tagged(data.clone(), DType::BF16).unwrap();
        assert_eq!((bf.dtype(), bf.shape()), (DType::BF16, &[2][..]));
        assert_eq!(bf.device_bytes(), 4);
        assert!(matches!(
            HostTensor::tagged(data.clone(), DType::F32),
            Ok(HostTensor::F32(_))
        ));
        assert!(HostTensor::tagged(data, DType::U8).is_err());
    }

    #[test]
    fn identity_is_the_allocation_while_it_lives() {
        let a = HostTensor::from(ArrayD::<f32>::zeros(IxDyn(&[3])));
        let same = a.clone();
        let equal = HostTensor::from(ArrayD::<f32>::zeros(IxDyn(&[3])));
        let id = a.identity();
        assert!(id.is(&same));
        assert!(!id.is(&equal), "equal contents, another array");
        drop((a, same));
        assert!(!id.is(&equal));
        assert!(!id.array.alive());
    }

    #[test]
    fn one_element_tensors_read_as_scalars() {
        let t = HostTensor::from(ArrayD::from_elem(IxDyn(&[]), 7i64));
        assert_eq!(t.to_scalar(), Some(ScalarValue::I64(7)));
        let v = HostTensor::from(ArrayD::from_elem(IxDyn(&[2]), 1.0f32));
        assert_eq!(v.to_scalar(), None);
    }
}
