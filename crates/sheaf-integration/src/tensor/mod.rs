//! Tensors as Sheaf holds them: shared `ndarray` arrays on the host, or IREE
//! tensors left on the device by an earlier compiled call.
//!
//! This file holds [`Tensor`], either of the two, and the dtype mapping
//! between the cache and IREE; `host.rs` holds [`HostTensor`]: its copies
//! to the device, its import without a copy, and its identity for the
//! upload cache.

mod host;

use std::sync::Arc;

use iree_safe::{Device, ElementType};
use jit_cache::{ArgSpec, DType, ScalarValue};
use ndarray::{ArrayD, IxDyn};

use crate::error::JitError;

pub(crate) use host::Identity;
pub use host::{aligned_copy, HostTensor, IMPORT_ALIGNMENT};

/// Device tensors, as compiled calls return them (IREE buffer views).
pub type DeviceTensor = iree_safe::Tensor;

/// What this crate adds to [`DeviceTensor`] (iree-safe's tensor type): its
/// dtype as the cache names it, and a read-back widened to `f32`.
///
/// ```no_run
/// use sheaf_integration::{DType, DeviceTensorExt, JitConfig, JitRuntime, Value};
///
/// let jit = JitRuntime::new(JitConfig::from_env()?)?;
/// let x = ndarray::ArrayD::<f32>::ones(ndarray::IxDyn(&[2]));
/// let on_device = jit.upload(&x.into())?;
/// assert_eq!(on_device.dtype()?, DType::F32);
/// let back: std::sync::Arc<ndarray::ArrayD<f32>> = on_device.to_f32()?;
/// let value = Value::from(on_device);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait DeviceTensorExt {
    /// The element type, as the cache names it.
    ///
    /// # Errors
    ///
    /// [`JitError::Unsupported`] for an element type the cache has no dtype
    /// for (e.g. `i8` tensors of quantized code are fine, `f8` are not).
    fn dtype(&self) -> Result<DType, JitError>;

    /// The values copied to the host and widened to `f32` (see
    /// [`HostTensor::to_f32`]; the same type as every `to_f32`: an f32
    /// tensor's read-back array is returned as it is, not copied again).
    ///
    /// # Errors
    ///
    /// As [`HostTensor::from_device`].
    fn to_f32(&self) -> Result<Arc<ArrayD<f32>>, JitError>;
}

impl DeviceTensorExt for DeviceTensor {
    fn dtype(&self) -> Result<DType, JitError> {
        dtype_of(self.element_type())
    }

    fn to_f32(&self) -> Result<Arc<ArrayD<f32>>, JitError> {
        Ok(HostTensor::from_device(self)?.to_f32())
    }
}

/// A tensor argument or result: on the host, or on the device.
#[derive(Debug, Clone)]
#[expect(
    clippy::exhaustive_enums,
    reason = "a tensor is on the host or on the device: callers match both to read it, and another \
        place would need every caller to handle it"
)]
pub enum Tensor {
    /// On the host, as Sheaf's interpreter holds it.
    Host(HostTensor),
    /// On the device, as a compiled call left it; passing it to another
    /// compiled call costs no copy.
    Device(DeviceTensor),
}

impl Tensor {
    /// A shared empty host tensor that takes the place of one moved out of
    /// a [`Value`](crate::Value) (which has a `Drop`, so its fields cannot
    /// be moved out): a reference count, no allocation.
    pub(crate) fn placeholder() -> Tensor {
        static EMPTY: std::sync::LazyLock<Arc<ArrayD<f32>>> =
            std::sync::LazyLock::new(|| Arc::new(ArrayD::zeros(IxDyn(&[0]))));
        Tensor::Host(HostTensor::F32(Arc::clone(&EMPTY)))
    }

    /// Element type and dimensions, as the cache key needs them.
    ///
    /// # Errors
    ///
    /// [`JitError::Unsupported`] for a device tensor of an element type the
    /// cache has no dtype for.
    pub fn arg_spec(&self) -> Result<ArgSpec, JitError> {
        let (dtype, shape) = match self {
            Tensor::Host(host) => (host.dtype(), host.shape()),
            Tensor::Device(tensor) => (dtype_of(tensor.element_type())?, tensor.shape()),
        };
        // The key stores dims as i64; convert on the stack for common ranks
        // (this runs on every call, hits included).
        let mut buffer = [0i64; 8];
        if let Some(dims) = buffer.get_mut(..shape.len()) {
            for (dim, &size) in dims.iter_mut().zip(shape) {
                *dim = size as i64;
            }
            Ok(ArgSpec::new(dtype, dims))
        } else {
            let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
            Ok(ArgSpec::new(dtype, &dims))
        }
    }

    /// Dimensions.
    pub fn shape(&self) -> &[usize] {
        match self {
            Tensor::Host(host) => host.shape(),
            Tensor::Device(tensor) => tensor.shape(),
        }
    }

    /// The tensor on the host, copying it back from the device if needed
    /// (a host tensor is shared, not copied).
    ///
    /// # Errors
    ///
    /// As [`HostTensor::from_device`].
    pub fn to_host(&self) -> Result<HostTensor, JitError> {
        match self {
            Tensor::Host(host) => Ok(host.clone()),
            Tensor::Device(tensor) => HostTensor::from_device(tensor),
        }
    }

    /// The element type, as the cache names it.
    ///
    /// # Errors
    ///
    /// [`JitError::Unsupported`] for a device tensor of an element type the
    /// cache has no dtype for.
    pub fn dtype(&self) -> Result<DType, JitError> {
        match self {
            Tensor::Host(host) => Ok(host.dtype()),
            Tensor::Device(tensor) => tensor.dtype(),
        }
    }

    /// The value of a tensor of one element (a 0-d result, say), read to
    /// the host.
    ///
    /// # Errors
    ///
    /// [`JitError::Unsupported`] for a tensor of more than one element, and
    /// the errors of [`to_host`](Self::to_host).
    pub fn to_scalar(&self) -> Result<ScalarValue, JitError> {
        let host = self.to_host()?;
        host.to_scalar().ok_or_else(|| {
            JitError::Unsupported(format!(
                "a {}{:?} tensor is not a scalar",
                host.dtype(),
                host.shape()
            ))
        })
    }

    /// True when the tensor lives on the device.
    pub fn is_device(&self) -> bool {
        matches!(self, Tensor::Device(_))
    }
}

impl From<HostTensor> for Tensor {
    fn from(host: HostTensor) -> Self {
        Tensor::Host(host)
    }
}

impl From<DeviceTensor> for Tensor {
    fn from(tensor: DeviceTensor) -> Self {
        Tensor::Device(tensor)
    }
}

/// The cache's dtype for an IREE element type.
pub(crate) fn dtype_of(element_type: ElementType) -> Result<DType, JitError> {
    use ElementType as E;
    Ok(match element_type {
        E::F16 => DType::F16,
        E::BF16 => DType::BF16,
        E::F32 => DType::F32,
        E::F64 => DType::F64,
        E::I8 => DType::I8,
        E::I32 => DType::I32,
        E::I64 => DType::I64,
        E::Bool => DType::Bool,
        other => return Err(JitError::Unsupported(format!("element type {other}"))),
    })
}

/// The IREE element type of a dtype, when the runtime has one.
pub(crate) fn element_type(dtype: DType) -> Option<ElementType> {
    use ElementType as E;
    Some(match dtype {
        DType::F16 => E::F16,
        DType::BF16 => E::BF16,
        DType::F32 => E::F32,
        DType::F64 => E::F64,
        DType::I8 => E::I8,
        DType::I32 => E::I32,
        DType::I64 => E::I64,
        DType::Bool => E::Bool,
        _ => return None,
    })
}

/// A 0-d device tensor holding a scalar passed at run time.
pub(crate) fn scalar_to_device(
    device: &Device,
    value: ScalarValue,
) -> Result<DeviceTensor, JitError> {
    Ok(match value {
        ScalarValue::F32(v) => DeviceTensor::from_slice(device, &[], &[v])?,
        ScalarValue::F64(v) => DeviceTensor::from_slice(device, &[], &[v])?,
        ScalarValue::I32(v) => DeviceTensor::from_slice(device, &[], &[v])?,
        ScalarValue::I64(v) => DeviceTensor::from_slice(device, &[], &[v])?,
        ScalarValue::Bool(v) => DeviceTensor::from_slice(device, &[], &[v])?,
    })
}

/// The dtype of a scalar.
pub(crate) fn scalar_dtype(value: ScalarValue) -> DType {
    match value {
        ScalarValue::F32(_) => DType::F32,
        ScalarValue::F64(_) => DType::F64,
        ScalarValue::I32(_) => DType::I32,
        ScalarValue::I64(_) => DType::I64,
        ScalarValue::Bool(_) => DType::Bool,
    }
}
