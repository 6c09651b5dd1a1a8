//! Argument trees of any shape and depth through the signature builder, as
//! `dispatch` sees them: a tree nested deeper than `Value::MAX_DEPTH` is an
//! error and any other is a signature (unless a dict repeats a key), and
//! cloning, printing and dropping a tree of any depth never overflows the
//! stack.
#![no_main]

use std::sync::Arc;

use jit_cache::ScalarValue;
use libfuzzer_sys::fuzz_target;
use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{JitError, Value};

/// A container being built.
enum Open {
    Tuple(Vec<Value>),
    List(Vec<Value>),
    Dict(Vec<(Arc<str>, Value)>),
}

/// A tree built from fuzz bytes, and what the builder knows of it.
struct Tree {
    args: Vec<Value>,
    depth: usize,
    repeated_key: bool,
}

fn build(data: &[u8]) -> Tree {
    let mut bytes = data.iter().copied();
    let mut next = move || bytes.next();
    let mut open: Vec<Open> = Vec::new();
    let mut tree = Tree {
        args: Vec::new(),
        depth: 0,
        repeated_key: false,
    };
    while let Some(op) = next() {
        let arg = next().unwrap_or(0);
        match op % 6 {
            0 => {
                let dims: Vec<usize> = (0..arg % 4).map(|i| usize::from(arg >> i & 3)).collect();
                add(&mut open, &mut tree, Value::host(ArrayD::<f32>::zeros(IxDyn(&dims))));
            }
            1 => add(&mut open, &mut tree, Value::Scalar(ScalarValue::I32(i32::from(arg)))),
            2 => add(&mut open, &mut tree, Value::Static(ScalarValue::I64(i64::from(arg)))),
            3 => {
                open.push(match arg % 3 {
                    0 => Open::Tuple(Vec::new()),
                    1 => Open::List(Vec::new()),
                    _ => Open::Dict(Vec::new()),
                });
                tree.depth = tree.depth.max(open.len());
            }
            4 => {
                // Deep quickly: up to 65,025 tuples in one step.
                let count = usize::from(arg) * usize::from(next().unwrap_or(0));
                open.extend((0..count).map(|_| Open::Tuple(Vec::new())));
                tree.depth = tree.depth.max(open.len());
            }
            _ => close(&mut open, &mut tree),
        }
    }
    while !open.is_empty() {
        close(&mut open, &mut tree);
    }
    tree
}

/// Adds `value` to the innermost open container, or to the arguments.
fn add(open: &mut [Open], tree: &mut Tree, value: Value) {
    match open.last_mut() {
        Some(Open::Tuple(values) | Open::List(values)) => values.push(value),
        Some(Open::Dict(entries)) => {
            let key: Arc<str> = format!("k{}", entries.len() % 3).into();
            tree.repeated_key |= entries.iter().any(|(k, _)| *k == key);
            entries.push((key, value));
        }
        None => tree.args.push(value),
    }
}

fn close(open: &mut Vec<Open>, tree: &mut Tree) {
    let value = match open.pop() {
        Some(Open::Tuple(values)) => Value::Tuple(values),
        Some(Open::List(values)) => Value::List(values),
        Some(Open::Dict(entries)) => Value::Dict(entries),
        None => return,
    };
    add(open, tree, value);
}

fuzz_target!(|data: &[u8]| {
    let tree = build(data);
    let signature = Value::call_signature(&tree.args, &[]);
    let too_deep = tree.depth > Value::MAX_DEPTH;
    match &signature {
        Ok(signature) => {
            assert!(!too_deep && !tree.repeated_key, "{signature}");
            let again = Value::call_signature(&tree.args.clone(), &[]).unwrap();
            assert_eq!(*signature, again);
            let _ = signature.to_string();
        }
        Err(JitError::Unsupported(message)) => {
            assert!(too_deep || tree.repeated_key, "{message}");
        }
        Err(other) => panic!("unexpected error: {other}"),
    }
    let copy = tree.args.clone();
    let _ = format!("{copy:?}");
    drop(copy);
});
