//! [`Value`]: a call's arguments and results as a tree of tensors and
//! scalars in tuples, lists and dicts, and how a tree is flattened into the
//! cache key and the compiled code's flat argument list (and results back).
//!
//! This file holds the tree and its accessors; `deep.rs` drops, clones and
//! formats a tree of any depth without recursing; `flatten.rs` flattens a
//! call's arguments into the key and the code's arguments, and restores
//! results into their declared structure.

mod deep;
mod flatten;

use std::sync::Arc;

use jit_cache::{CapturedScalar, DType, ScalarValue, Signature};

use crate::error::JitError;
use crate::tensor::{DeviceTensor, HostTensor, Tensor};

use deep::check_depth;
pub(crate) use flatten::{flatten_call, restore, FlatArg};

/// An argument or result of a JIT call.
///
/// Arguments are flattened depth first into the compiled code's arguments:
/// tensors and [`Value::Scalar`]s (passed as 0-d tensors) in order, dict
/// entries in key order. Their structure (containers, dict keys, where the
/// static scalars sit) is part of the cache key, so two dicts with the same
/// leaves and other keys never share code.
///
/// Results come back in the structure the lowering declared
/// ([`Lowered::outputs`](crate::compile::lowering::Lowered::outputs)), or side by side.
///
/// Containers may nest at most [`Value::MAX_DEPTH`] deep in a call's
/// arguments: a deeper tree is an error of the call, not a stack overflow.
/// Cloning, dropping and formatting (`{:?}`, elided past that depth) never
/// recurse on the tree's depth, so a value of any depth is safe to hold.
#[non_exhaustive]
pub enum Value {
    /// A tensor, on the host or on the device.
    Tensor(Tensor),
    /// A scalar passed at run time, as a 0-d tensor: only its dtype is part
    /// of the key, so new values reuse the compiled code.
    Scalar(ScalarValue),
    /// A scalar baked into the compiled code as a constant (a shape, a
    /// top-k `k`): its exact value is part of the key. Never passed to the
    /// compiled code.
    Static(ScalarValue),
    /// A tuple.
    Tuple(Vec<Value>),
    /// A list.
    List(Vec<Value>),
    /// A dict. Entries are flattened in key order, whatever order they are
    /// given in; keys must be distinct.
    Dict(Vec<(Arc<str>, Value)>),
}

impl Value {
    /// How deep containers (tuples, lists, dicts) may nest in a call's
    /// arguments: `[[x]]` is 2 deep. Sheaf's pytrees are a few levels deep;
    /// the bound keeps every walk of a tree on a thread's stack.
    pub const MAX_DEPTH: usize = 128;

    /// The cache key of a call with `args` and the `captured` scalars: what
    /// [`JitRuntime::dispatch`](crate::JitRuntime::dispatch) looks up (to
    /// log it, or to explain a miss with
    /// [`Signature::explain_difference`]).
    ///
    /// ```
    /// use sheaf_integration::{ScalarValue, Value};
    ///
    /// let x = Value::host(ndarray::ArrayD::<f32>::zeros(ndarray::IxDyn(&[2, 3])));
    /// let k = Value::Static(ScalarValue::I64(4));
    /// let signature = Value::call_signature(&[x, k], &[]).unwrap();
    /// assert_eq!(signature.to_string(), "(f32[2,3], 4_i64)");
    /// ```
    ///
    /// # Errors
    ///
    /// [`JitError::Unsupported`] for a dict with a key twice, containers
    /// nested deeper than [`MAX_DEPTH`](Self::MAX_DEPTH), or a device
    /// tensor of an element type the cache has no dtype for.
    pub fn call_signature(
        args: &[Value],
        captured: &[CapturedScalar],
    ) -> Result<Signature, JitError> {
        flatten_call(args, captured).map(|(signature, _)| signature)
    }

    /// A host tensor value from any array type [`HostTensor`] takes.
    pub fn host(array: impl Into<HostTensor>) -> Value {
        Value::Tensor(Tensor::Host(array.into()))
    }

    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(tensor) => Some(tensor),
            _ => None,
        }
    }

    /// The entry `key` of a dict.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Dict(entries) => entries.iter().find(|(k, _)| &**k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The elements of a tuple or list.
    pub fn elements(&self) -> Option<&[Value]> {
        match self {
            Value::Tuple(values) | Value::List(values) => Some(values),
            _ => None,
        }
    }

    /// The tensor, moved out of the value (no copy, no reference count
    /// taken); the value itself back when it is not a tensor.
    ///
    /// ```
    /// use sheaf_integration::{ScalarValue, Value};
    ///
    /// let x = Value::host(ndarray::ArrayD::<f32>::zeros(ndarray::IxDyn(&[2])));
    /// assert_eq!(x.into_tensor().unwrap().shape(), &[2]);
    /// let s = Value::Scalar(ScalarValue::F32(1.0));
    /// assert!(s.into_tensor().is_err());
    /// ```
    ///
    /// # Errors
    ///
    /// The value, unchanged, when it is not a [`Value::Tensor`].
    pub fn into_tensor(mut self) -> Result<Tensor, Value> {
        if let Value::Tensor(tensor) = &mut self {
            // `Value` has a `Drop` (an iterative one), so its fields cannot
            // be moved out; a shared empty tensor takes the tensor's place.
            return Ok(std::mem::replace(tensor, Tensor::placeholder()));
        }
        Err(self)
    }

    /// The elements of a tuple, moved out; the value back when it is not a
    /// tuple.
    ///
    /// # Errors
    ///
    /// The value, unchanged, when it is not a [`Value::Tuple`].
    pub fn into_tuple(mut self) -> Result<Vec<Value>, Value> {
        match &mut self {
            Value::Tuple(values) => Ok(std::mem::take(values)),
            _ => Err(self),
        }
    }

    /// The elements of a list, moved out; the value back when it is not a
    /// list.
    ///
    /// # Errors
    ///
    /// The value, unchanged, when it is not a [`Value::List`].
    pub fn into_list(mut self) -> Result<Vec<Value>, Value> {
        match &mut self {
            Value::List(values) => Ok(std::mem::take(values)),
            _ => Err(self),
        }
    }

    /// The elements of a tuple or a list, moved out; the value back when
    /// it is neither.
    ///
    /// # Errors
    ///
    /// The value, unchanged, when it is not a [`Value::Tuple`] or a
    /// [`Value::List`].
    pub fn into_elements(mut self) -> Result<Vec<Value>, Value> {
        match &mut self {
            Value::Tuple(values) | Value::List(values) => Ok(std::mem::take(values)),
            _ => Err(self),
        }
    }

    /// The entries of a dict, moved out, in the dict's order (a result's
    /// dict is in key order); the value back when it is not a dict.
    ///
    /// ```
    /// use sheaf_integration::{ScalarValue, Value};
    ///
    /// let grads = Value::dict([("b", Value::Scalar(ScalarValue::F32(0.5)))]);
    /// for (key, value) in grads.into_dict().unwrap() {
    ///     assert_eq!((&*key, value.to_scalar().unwrap()), ("b", ScalarValue::F32(0.5)));
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// The value, unchanged, when it is not a [`Value::Dict`].
    pub fn into_dict(mut self) -> Result<Vec<(Arc<str>, Value)>, Value> {
        match &mut self {
            Value::Dict(entries) => Ok(std::mem::take(entries)),
            _ => Err(self),
        }
    }

    /// Every tensor of the tree, moved out, depth first and in order (a
    /// dict's entries in the dict's order); scalars ([`Value::Scalar`],
    /// [`Value::Static`]) are not tensors and are left out. It walks the
    /// tree with a work list, so a tree of any depth comes apart without
    /// recursion, and no tensor is copied.
    ///
    /// ```
    /// use sheaf_integration::Value;
    ///
    /// let t = |n| Value::host(ndarray::ArrayD::<f32>::zeros(ndarray::IxDyn(&[n])));
    /// let tree = Value::Tuple(vec![t(1), Value::dict([("w", t(2)), ("b", t(3))])]);
    /// let shapes: Vec<usize> = tree.into_tensors().iter().map(|t| t.shape()[0]).collect();
    /// assert_eq!(shapes, [1, 2, 3]);
    /// ```
    pub fn into_tensors(self) -> Vec<Tensor> {
        let mut tensors = Vec::new();
        // Values still to take apart, the next one last.
        let mut pending = vec![self];
        let mut children = Vec::new();
        while let Some(mut value) = pending.pop() {
            if let Value::Tensor(tensor) = &mut value {
                tensors.push(std::mem::replace(tensor, Tensor::placeholder()));
                continue;
            }
            value.move_children(&mut children);
            pending.extend(children.drain(..).rev());
        }
        tensors
    }

    /// The tensor's element type.
    ///
    /// # Errors
    ///
    /// [`JitError::Unsupported`] for a value that is not a tensor, and the
    /// errors of [`Tensor::dtype`].
    pub fn dtype(&self) -> Result<DType, JitError> {
        self.as_tensor()
            .ok_or_else(|| JitError::Unsupported(format!("{} is not a tensor", self.kind())))?
            .dtype()
    }

    /// The tensor's values on the host, widened to `f32` (see
    /// [`HostTensor::to_f32`]): for callers that hold every tensor as
    /// `f32`.
    ///
    /// # Errors
    ///
    /// As [`to_host`](Self::to_host).
    pub fn to_f32(&self) -> Result<Arc<ndarray::ArrayD<f32>>, JitError> {
        Ok(self.to_host()?.to_f32())
    }

    /// A dict from borrowed keys, in any order: each key is interned
    /// ([`intern_key`]), so a key a program passes again costs a reference
    /// count, not an allocation.
    ///
    /// ```
    /// use sheaf_integration::{ScalarValue, Value};
    ///
    /// let keys = ["w".to_owned(), "b".to_owned()];
    /// let dict = Value::dict(keys.iter().map(|k| (k.as_str(), Value::Scalar(ScalarValue::F32(1.0)))));
    /// assert!(dict.get("w").is_some());
    /// ```
    pub fn dict<'k>(entries: impl IntoIterator<Item = (&'k str, Value)>) -> Value {
        Value::Dict(
            entries
                .into_iter()
                .map(|(key, value)| (intern_key(key), value))
                .collect(),
        )
    }

    /// The tensor on the host (copied back from the device if needed).
    ///
    /// # Errors
    ///
    /// [`JitError::Unsupported`] for a value that is not a tensor, and the
    /// errors of [`Tensor::to_host`].
    pub fn to_host(&self) -> Result<HostTensor, JitError> {
        self.as_tensor()
            .ok_or_else(|| JitError::Unsupported(format!("{} is not a tensor", self.kind())))?
            .to_host()
    }

    /// The value as a scalar: a scalar, or a tensor of one element (a 0-d
    /// result) read to the host.
    ///
    /// # Errors
    ///
    /// [`JitError::Unsupported`] for a container, and the errors of
    /// [`Tensor::to_scalar`].
    pub fn to_scalar(&self) -> Result<ScalarValue, JitError> {
        match self {
            Value::Scalar(value) | Value::Static(value) => Ok(*value),
            Value::Tensor(tensor) => tensor.to_scalar(),
            other => Err(JitError::Unsupported(format!(
                "{} is not a scalar",
                other.kind()
            ))),
        }
    }

    /// The same tree with every device tensor copied to the host (what an
    /// interpreter needs).
    ///
    /// # Errors
    ///
    /// [`JitError::Unsupported`] when containers nest deeper than
    /// [`MAX_DEPTH`](Self::MAX_DEPTH); a runtime error when a device tensor
    /// cannot be read back.
    pub fn into_host_value(self) -> Result<Value, JitError> {
        self.into_host_at(1)
    }

    fn into_host_at(mut self, depth: usize) -> Result<Value, JitError> {
        let host = |values: Vec<Value>| -> Result<Vec<Value>, JitError> {
            check_depth(depth)?;
            values
                .into_iter()
                .map(|value| value.into_host_at(depth + 1))
                .collect()
        };
        Ok(match &mut self {
            Value::Tensor(Tensor::Device(tensor)) => {
                Value::Tensor(Tensor::Host(HostTensor::from_device(tensor)?))
            }
            Value::Tuple(values) => Value::Tuple(host(std::mem::take(values))?),
            Value::List(values) => Value::List(host(std::mem::take(values))?),
            Value::Dict(entries) => {
                let (keys, values): (Vec<_>, Vec<_>) = std::mem::take(entries).into_iter().unzip();
                Value::Dict(keys.into_iter().zip(host(values)?).collect())
            }
            Value::Tensor(Tensor::Host(_)) | Value::Scalar(_) | Value::Static(_) => self,
        })
    }

    /// The children of a container (dict entries' values), moved out into
    /// `into`; a leaf has none.
    fn move_children(&mut self, into: &mut Vec<Value>) {
        match self {
            Value::Tuple(values) | Value::List(values) => into.append(values),
            Value::Dict(entries) => {
                into.extend(std::mem::take(entries).into_iter().map(|(_, v)| v))
            }
            Value::Tensor(_) | Value::Scalar(_) | Value::Static(_) => {}
        }
    }

    fn is_container(&self) -> bool {
        matches!(self, Value::Tuple(_) | Value::List(_) | Value::Dict(_))
    }

    /// A leaf, or a container with its children left out.
    fn shallow_clone(&self) -> Value {
        match self {
            Value::Tensor(tensor) => Value::Tensor(tensor.clone()),
            Value::Scalar(scalar) => Value::Scalar(*scalar),
            Value::Static(scalar) => Value::Static(*scalar),
            Value::Tuple(values) => Value::Tuple(Vec::with_capacity(values.len())),
            Value::List(values) => Value::List(Vec::with_capacity(values.len())),
            Value::Dict(entries) => Value::Dict(Vec::with_capacity(entries.len())),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Value::Tensor(_) => "a tensor",
            Value::Scalar(_) => "a scalar",
            Value::Static(_) => "a static scalar",
            Value::Tuple(_) => "a tuple",
            Value::List(_) => "a list",
            Value::Dict(_) => "a dict",
        }
    }
}

impl From<Tensor> for Value {
    fn from(tensor: Tensor) -> Self {
        Value::Tensor(tensor)
    }
}

impl From<DeviceTensor> for Value {
    fn from(tensor: DeviceTensor) -> Self {
        Value::Tensor(Tensor::Device(tensor))
    }
}

impl From<HostTensor> for Value {
    fn from(host: HostTensor) -> Self {
        Value::Tensor(Tensor::Host(host))
    }
}

impl<T> From<ndarray::ArrayD<T>> for Value
where
    HostTensor: From<ndarray::ArrayD<T>>,
{
    fn from(array: ndarray::ArrayD<T>) -> Self {
        Value::host(array)
    }
}

/// Dict keys interned, so a key passed again is shared, not allocated: at
/// most [`INTERNED_KEYS`] keys (beyond, keys are allocated per call).
static KEYS: std::sync::Mutex<Option<std::collections::HashSet<Arc<str>>>> =
    std::sync::Mutex::new(None);

/// How many distinct dict keys [`intern_key`] keeps.
pub const INTERNED_KEYS: usize = 4096;

/// `key` as a dict key: the interned `Arc<str>` when the key was seen
/// before (a reference count, no allocation), else a new one (kept for next
/// time while fewer than [`INTERNED_KEYS`] are).
pub fn intern_key(key: &str) -> Arc<str> {
    let mut keys = KEYS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let keys = keys.get_or_insert_with(Default::default);
    if let Some(interned) = keys.get(key) {
        return Arc::clone(interned);
    }
    let key: Arc<str> = Arc::from(key);
    if keys.len() < INTERNED_KEYS {
        keys.insert(Arc::clone(&key));
    }
    key
}
