//! A call's argument tree flattened depth first (dict entries by key) into
//! the cache key and the compiled code's arguments, and results restored
//! into the structure the lowering declared.

use std::sync::Arc;

use jit_cache::{
    CapturedScalar, Container, Layout, LayoutVisitor, Leaf, ScalarValue, Signature,
    SignatureBuilder,
};
use smallvec::SmallVec;

use crate::error::JitError;
use crate::tensor::{scalar_dtype, Tensor};

use super::{check_depth, Value};

/// The compiled code's arguments, flattened (inline up to four).
pub(crate) type FlatArgs<'a> = smallvec::SmallVec<[FlatArg<'a>; 4]>;

/// What the compiled code receives for one flattened argument.
#[derive(Debug)]
pub(crate) enum FlatArg<'a> {
    Tensor(&'a Tensor),
    Scalar(ScalarValue),
}

/// The signature a call with `args` and `captured` has, and its flat
/// arguments.
pub(crate) fn flatten_call<'a>(
    args: &'a [Value],
    captured: &[CapturedScalar],
) -> Result<(Signature, FlatArgs<'a>), JitError> {
    let mut builder = Signature::builder();
    let mut flat = FlatArgs::new();
    flatten(args, &mut builder, &mut flat)?;
    for scalar in captured {
        builder.captured(scalar.clone());
    }
    Ok((builder.build(), flat))
}

/// Flattens `args` into the signature (`builder`) and the compiled code's
/// arguments (`flat`), depth first, dict entries in key order.
fn flatten<'a>(
    args: &'a [Value],
    builder: &mut SignatureBuilder,
    flat: &mut FlatArgs<'a>,
) -> Result<(), JitError> {
    for arg in args {
        flatten_one(arg, 1, builder, flat)?;
    }
    Ok(())
}

/// Flattens `value`, a container of which would be `depth` deep.
fn flatten_one<'a>(
    value: &'a Value,
    depth: usize,
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
            check_depth(depth)?;
            builder.open(container);
            for value in values {
                flatten_one(value, depth + 1, builder, flat)?;
            }
            builder.close();
        }
        Value::Dict(entries) => {
            check_depth(depth)?;
            builder.open(Container::Dict);
            // Entries given in key order (a `BTreeMap`'s, say) are walked as
            // they are; others through a sorted index.
            let sorted = entries.windows(2).all(|w| w[0].0 < w[1].0);
            let mut order: SmallVec<[usize; 8]> = SmallVec::new();
            if !sorted {
                order.extend(0..entries.len());
                order.sort_by(|&a, &b| entries[a].0.cmp(&entries[b].0));
                if order.windows(2).any(|w| entries[w[0]].0 == entries[w[1]].0) {
                    return Err(JitError::Unsupported(
                        "a dict argument has the same key twice".into(),
                    ));
                }
            }
            let mut walk = |(key, value): &'a (Arc<str>, Value)| {
                builder.key(Arc::clone(key));
                flatten_one(value, depth + 1, builder, flat)
            };
            if sorted {
                entries.iter().try_for_each(&mut walk)?;
            } else {
                order.iter().try_for_each(|&index| walk(&entries[index]))?;
            }
            builder.close();
        }
    }
    Ok(())
}

/// Puts flat results (tensor values, in order) back into the structure of
/// `layout` (whose leaves are all tensors), or leaves them side by side,
/// as they are, without one.
pub(crate) fn restore(
    results: Vec<Value>,
    layout: Option<&Layout>,
) -> Result<Vec<Value>, JitError> {
    let Some(layout) = layout else {
        return Ok(results);
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
    results: std::vec::IntoIter<Value>,
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
                self.push(tensor);
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
        let results = || vec![tensor(1), tensor(2)];
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
