//! [`Value`]: a call's arguments and results as a tree of tensors and
//! scalars in tuples, lists and dicts, and how a tree is flattened into the
//! cache key and the compiled code's flat argument list (and results back).

use std::sync::Arc;

use jit_cache::{Container, Layout, LayoutVisitor, Leaf, ScalarValue, SignatureBuilder};

use crate::error::JitError;
use crate::tensor::{scalar_dtype, HostTensor, Tensor};

/// An argument or result of a JIT call.
///
/// Arguments are flattened depth first into the compiled code's arguments:
/// tensors and [`Value::Scalar`]s (passed as 0-d tensors) in order, dict
/// entries in key order. Their structure (containers, dict keys, where the
/// static scalars sit) is part of the cache key, so two dicts with the same
/// leaves and other keys never share code.
///
/// Results come back in the structure the lowering declared
/// ([`Lowered::outputs`](crate::Lowered::outputs)), or side by side.
#[derive(Debug, Clone)]
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

    /// The tensor on the host (copied back from the device if needed).
    pub fn to_host(&self) -> Result<HostTensor, JitError> {
        self.as_tensor()
            .ok_or_else(|| JitError::Unsupported(format!("{} is not a tensor", self.kind())))?
            .to_host()
    }

    /// The value as a scalar: a scalar, or a tensor of one element (a 0-d
    /// result) read to the host.
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
    pub fn into_host(self) -> Result<Value, JitError> {
        Ok(match self {
            Value::Tensor(Tensor::Device(tensor)) => {
                Value::Tensor(Tensor::Host(HostTensor::from_device(&tensor)?))
            }
            Value::Tuple(values) => Value::Tuple(into_host_all(values)?),
            Value::List(values) => Value::List(into_host_all(values)?),
            Value::Dict(entries) => Value::Dict(
                entries
                    .into_iter()
                    .map(|(key, value)| Ok((key, value.into_host()?)))
                    .collect::<Result<_, JitError>>()?,
            ),
            other => other,
        })
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

fn into_host_all(values: Vec<Value>) -> Result<Vec<Value>, JitError> {
    values.into_iter().map(Value::into_host).collect()
}

impl From<Tensor> for Value {
    fn from(tensor: Tensor) -> Self {
        Value::Tensor(tensor)
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

/// The compiled code's arguments, flattened (inline up to four).
pub(crate) type FlatArgs<'a> = smallvec::SmallVec<[FlatArg<'a>; 4]>;

/// What the compiled code receives for one flattened argument.
#[derive(Debug)]
pub(crate) enum FlatArg<'a> {
    Tensor(&'a Tensor),
    Scalar(ScalarValue),
}

/// Flattens `args` into the signature (`builder`) and the compiled code's
/// arguments (`flat`), depth first, dict entries in key order.
pub(crate) fn flatten<'a>(
    args: &'a [Value],
    builder: &mut SignatureBuilder,
    flat: &mut FlatArgs<'a>,
) -> Result<(), JitError> {
    for arg in args {
        flatten_one(arg, builder, flat)?;
    }
    Ok(())
}

fn flatten_one<'a>(
    value: &'a Value,
    builder: &mut SignatureBuilder,
    flat: &mut FlatArgs<'a>,
) -> Result<(), JitError> {
    match value {
        Value::Tensor(tensor) => {
            builder.arg_spec(tensor.arg_spec()?);
            flat.push(FlatArg::Tensor(tensor));
        }
        Value::Scalar(scalar) => {
            builder.arg(scalar_dtype(*scalar), &[]);
            flat.push(FlatArg::Scalar(*scalar));
        }
        Value::Static(scalar) => {
            builder.static_scalar(*scalar);
        }
        Value::Tuple(values) | Value::List(values) => {
            let container = match value {
                Value::Tuple(_) => Container::Tuple,
                _ => Container::List,
            };
            builder.open(container);
            for value in values {
                flatten_one(value, builder, flat)?;
            }
            builder.close();
        }
        Value::Dict(entries) => {
            builder.open(Container::Dict);
            let mut order: Vec<usize> = (0..entries.len()).collect();
            order.sort_by(|&a, &b| entries[a].0.cmp(&entries[b].0));
            if order.windows(2).any(|w| entries[w[0]].0 == entries[w[1]].0) {
                return Err(JitError::Unsupported(
                    "a dict argument has the same key twice".into(),
                ));
            }
            for index in order {
                let (key, value) = &entries[index];
                builder.key(Arc::clone(key));
                flatten_one(value, builder, flat)?;
            }
            builder.close();
        }
    }
    Ok(())
}

/// Puts flat results back into the structure of `layout` (whose leaves are
/// all tensors), or side by side without one.
pub(crate) fn restore(
    results: Vec<Tensor>,
    layout: Option<&Layout>,
) -> Result<Vec<Value>, JitError> {
    let Some(layout) = layout else {
        return Ok(results.into_iter().map(Value::Tensor).collect());
    };
    let expected = layout.leaf_counts();
    if expected != (results.len(), 0) {
        return Err(JitError::Unsupported(format!(
            "the compiled code returned {} results, but its lowering declared the structure {layout} \
             ({} tensors{})",
            results.len(),
            expected.0,
            if expected.1 > 0 { ", and static leaves, which results cannot have" } else { "" }
        )));
    }
    let mut builder = Restorer {
        results: results.into_iter(),
        levels: vec![Level::top()],
    };
    layout.visit(&mut builder);
    let top = builder.levels.pop().filter(|_| builder.levels.is_empty());
    top.map(|level| level.values)
        .ok_or_else(|| JitError::Internal(format!("unbalanced output structure {layout}")))
}

/// One open container while restoring results.
struct Level {
    container: Option<Container>,
    values: Vec<Value>,
    keys: Vec<Arc<str>>,
}

impl Level {
    fn top() -> Self {
        Level {
            container: None,
            values: Vec::new(),
            keys: Vec::new(),
        }
    }
}

struct Restorer {
    results: std::vec::IntoIter<Tensor>,
    levels: Vec<Level>,
}

impl Restorer {
    fn push(&mut self, value: Value) {
        if let Some(level) = self.levels.last_mut() {
            level.values.push(value);
        }
    }
}

impl LayoutVisitor for Restorer {
    fn open(&mut self, container: Container) {
        self.levels.push(Level {
            container: Some(container),
            ..Level::top()
        });
    }

    fn key(&mut self, key: &Arc<str>) {
        if let Some(level) = self.levels.last_mut() {
            level.keys.push(Arc::clone(key));
        }
    }

    fn leaf(&mut self, leaf: Leaf) {
        if leaf == Leaf::Tensor {
            if let Some(tensor) = self.results.next() {
                self.push(Value::Tensor(tensor));
            }
        }
    }

    fn close(&mut self) {
        if self.levels.len() < 2 {
            return;
        }
        let Some(level) = self.levels.pop() else {
            return;
        };
        let value = match level.container {
            Some(Container::Dict) => {
                Value::Dict(level.keys.into_iter().zip(level.values).collect())
            }
            Some(Container::List) => Value::List(level.values),
            _ => Value::Tuple(level.values),
        };
        self.push(value);
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{ArrayD, IxDyn};

    use super::*;
    use jit_cache::{LayoutBuilder, Signature};

    fn tensor(n: usize) -> Value {
        Value::host(ArrayD::<f32>::zeros(IxDyn(&[n])))
    }

    fn key(args: &[Value]) -> (Signature, usize) {
        let mut builder = Signature::builder();
        let mut flat = FlatArgs::new();
        flatten(args, &mut builder, &mut flat).unwrap();
        (builder.build(), flat.len())
    }

    #[test]
    fn dicts_flatten_in_key_order_and_keys_are_in_the_key() {
        let dict = |keys: [&str; 2]| {
            Value::Dict(vec![
                (keys[0].into(), tensor(3)),
                (keys[1].into(), tensor(2)),
            ])
        };
        let (ab, flat) = key(&[dict(["b", "a"])]);
        assert_eq!(flat, 2);
        assert_eq!(ab.to_string(), "({a: f32[2], b: f32[3]})");
        let (ac, _) = key(&[dict(["c", "a"])]);
        assert_ne!(ab, ac, "same leaves, other keys");
        let duplicate = Value::Dict(vec![("a".into(), tensor(1)), ("a".into(), tensor(1))]);
        let args = [duplicate];
        let mut flat = FlatArgs::new();
        assert!(flatten(&args, &mut Signature::builder(), &mut flat).is_err());
    }

    #[test]
    fn runtime_scalars_key_by_dtype_and_static_scalars_by_value() {
        let (two, flat) = key(&[tensor(2), Value::Scalar(ScalarValue::F32(2.0))]);
        let (three, _) = key(&[tensor(2), Value::Scalar(ScalarValue::F32(3.0))]);
        assert_eq!((two == three, flat), (true, 2));
        let (k2, flat) = key(&[tensor(2), Value::Static(ScalarValue::I64(2))]);
        let (k3, _) = key(&[tensor(2), Value::Static(ScalarValue::I64(3))]);
        assert_eq!((k2 == k3, flat), (false, 1));
        assert_eq!(k3.to_string(), "(f32[2], 3_i64)");
    }

    #[test]
    fn results_come_back_in_the_declared_structure() {
        let results = || {
            vec![
                Tensor::Host(tensor(1).to_host().unwrap()),
                Tensor::Host(tensor(2).to_host().unwrap()),
            ]
        };
        let flat = restore(results(), None).unwrap();
        assert_eq!(flat.len(), 2);
        let mut layout = LayoutBuilder::new();
        layout
            .open(Container::Dict)
            .key("loss")
            .leaf(Leaf::Tensor)
            .key("grads")
            .open(Container::List)
            .leaf(Leaf::Tensor)
            .close()
            .close();
        let layout = layout.build().unwrap();
        let restored = restore(results(), Some(&layout)).unwrap();
        let [dict] = &restored[..] else {
            panic!("{restored:?}")
        };
        assert_eq!(dict.get("loss").unwrap().as_tensor().unwrap().shape(), &[1]);
        assert_eq!(dict.get("grads").unwrap().elements().unwrap().len(), 1);
        assert!(restore(results()[..1].to_vec(), Some(&layout)).is_err());
    }
}
