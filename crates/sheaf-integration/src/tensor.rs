//! Tensors as Sheaf sees them: `ndarray` arrays on the host, or IREE
//! tensors left on the device by an earlier compiled call.

use iree_safe::{Runtime, Tensor};
use jit_cache::{ArgSpec, DType};
use ndarray::{ArrayD, IxDyn};

use crate::error::JitError;

/// A host tensor: one of the `ndarray` element types Sheaf uses.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HostTensor {
    /// `f32` array.
    F32(ArrayD<f32>),
    /// `f64` array.
    F64(ArrayD<f64>),
    /// `i32` array.
    I32(ArrayD<i32>),
    /// `i64` array.
    I64(ArrayD<i64>),
    /// `bool` array (`i1` in MLIR).
    Bool(ArrayD<bool>),
}

/// Applies `$body` to the array inside a [`HostTensor`], whatever its type.
macro_rules! with_array {
    ($tensor:expr, $array:ident => $body:expr) => {
        match $tensor {
            HostTensor::F32($array) => $body,
            HostTensor::F64($array) => $body,
            HostTensor::I32($array) => $body,
            HostTensor::I64($array) => $body,
            HostTensor::Bool($array) => $body,
        }
    };
}

impl HostTensor {
    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            HostTensor::F32(_) => DType::F32,
            HostTensor::F64(_) => DType::F64,
            HostTensor::I32(_) => DType::I32,
            HostTensor::I64(_) => DType::I64,
            HostTensor::Bool(_) => DType::Bool,
        }
    }

    /// Dimensions.
    pub fn shape(&self) -> &[usize] {
        with_array!(self, a => a.shape())
    }

    /// The `f32` array, if this is one.
    pub fn as_f32(&self) -> Option<&ArrayD<f32>> {
        match self {
            HostTensor::F32(a) => Some(a),
            _ => None,
        }
    }

    /// Copies the array to `runtime`'s device (row-major, whatever the
    /// array's memory layout).
    pub fn to_device(&self, runtime: &Runtime) -> Result<Tensor, JitError> {
        let tensor = with_array!(self, a => {
            let standard = a.as_standard_layout();
            let data = standard.as_slice().expect("a standard-layout array is contiguous");
            Tensor::from_slice(runtime.device(), a.shape(), data)
        });
        Ok(tensor?)
    }

    /// Copies a device tensor back to the host.
    pub fn from_device(tensor: &Tensor) -> Result<HostTensor, JitError> {
        use iree_safe::ElementType as E;
        let shape = IxDyn(tensor.shape());
        let array = |e: ndarray::ShapeError| {
            JitError::Internal(format!("device tensor {}: {e}", tensor.describe()))
        };
        Ok(match tensor.element_type() {
            E::F32 => HostTensor::F32(ArrayD::from_shape_vec(shape, tensor.to_vec()?).map_err(array)?),
            E::F64 => HostTensor::F64(ArrayD::from_shape_vec(shape, tensor.to_vec()?).map_err(array)?),
            E::I32 => HostTensor::I32(ArrayD::from_shape_vec(shape, tensor.to_vec()?).map_err(array)?),
            E::I64 => HostTensor::I64(ArrayD::from_shape_vec(shape, tensor.to_vec()?).map_err(array)?),
            E::Bool => HostTensor::Bool(ArrayD::from_shape_vec(shape, tensor.to_vec()?).map_err(array)?),
            other => {
                return Err(JitError::Unsupported(format!(
                    "device tensor of {other} has no ndarray counterpart here; read it with Tensor::to_bytes"
                )))
            }
        })
    }
}

macro_rules! host_from {
    ($($ty:ty => $variant:ident),*) => {$(
        impl From<ArrayD<$ty>> for HostTensor {
            fn from(array: ArrayD<$ty>) -> Self {
                HostTensor::$variant(array)
            }
        }
    )*};
}

host_from!(f32 => F32, f64 => F64, i32 => I32, i64 => I64, bool => Bool);

/// An argument or result of a JIT call.
#[derive(Debug, Clone)]
pub enum Value {
    /// On the host, as Sheaf's interpreter holds it.
    Host(HostTensor),
    /// On the device, as a compiled call left it; passing it to another
    /// compiled call costs no copy.
    Device(Tensor),
}

impl Value {
    /// Element type and dimensions, as the cache key needs them.
    pub fn arg_spec(&self) -> Result<ArgSpec, JitError> {
        let (dtype, shape) = match self {
            Value::Host(host) => (host.dtype(), host.shape()),
            Value::Device(tensor) => (dtype_of(tensor.element_type())?, tensor.shape()),
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

    /// The value on the host, copying it back from the device if needed.
    pub fn to_host(&self) -> Result<HostTensor, JitError> {
        match self {
            Value::Host(host) => Ok(host.clone()),
            Value::Device(tensor) => HostTensor::from_device(tensor),
        }
    }

    /// The value as an iree-safe call argument, copying host arrays to the
    /// device.
    pub(crate) fn to_device_value(&self, runtime: &Runtime) -> Result<iree_safe::Value, JitError> {
        Ok(match self {
            Value::Host(host) => host.to_device(runtime)?.into(),
            Value::Device(tensor) => tensor.clone().into(),
        })
    }

    /// True when the value lives on the device.
    pub fn is_device(&self) -> bool {
        matches!(self, Value::Device(_))
    }
}

impl<T> From<T> for Value
where
    HostTensor: From<T>,
{
    fn from(value: T) -> Self {
        Value::Host(HostTensor::from(value))
    }
}

/// The cache's dtype for an IREE element type.
fn dtype_of(element_type: iree_safe::ElementType) -> Result<DType, JitError> {
    use iree_safe::ElementType as E;
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
