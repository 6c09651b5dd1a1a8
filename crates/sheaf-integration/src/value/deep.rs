//! A tree of any depth, dropped, cloned and formatted without recursing
//! (a work list instead), so that holding one is always safe.

use std::fmt;
use std::sync::Arc;

use crate::error::JitError;

use super::Value;

/// The error for a container `depth` deep, past [`Value::MAX_DEPTH`].
pub(super) fn check_depth(depth: usize) -> Result<(), JitError> {
    if depth > Value::MAX_DEPTH {
        return Err(JitError::Unsupported(format!(
            "the arguments nest tuples, lists or dicts more than {} deep; pass the deep part \
             flattened, or keep it in the interpreter",
            Value::MAX_DEPTH
        )));
    }
    Ok(())
}

impl Drop for Value {
    /// Takes a deep tree apart with a work list instead of recursing, so
    /// dropping never overflows the stack.
    fn drop(&mut self) {
        let deep = match self {
            Value::Tuple(values) | Value::List(values) => values.iter().any(Value::is_container),
            Value::Dict(entries) => entries.iter().any(|(_, value)| value.is_container()),
            Value::Tensor(_) | Value::Scalar(_) | Value::Static(_) => false,
        };
        if !deep {
            return;
        }
        let mut pending = Vec::new();
        self.move_children(&mut pending);
        while let Some(mut value) = pending.pop() {
            value.move_children(&mut pending);
        }
    }
}

impl Clone for Value {
    /// Copies the tree with a work list instead of recursing (tensors are
    /// shared, not copied).
    fn clone(&self) -> Self {
        let mut open = vec![Copying::new(self)];
        loop {
            let Some(top) = open.last_mut() else {
                unreachable!("the root is returned when it is complete");
            };
            match top.next_child() {
                Some(child) if child.is_container() => open.push(Copying::new(child)),
                Some(child) => top.push(child.shallow_clone()),
                None => {
                    let Some(done) = open.pop().map(|copying| copying.copy) else {
                        unreachable!("a container is open");
                    };
                    match open.last_mut() {
                        Some(parent) => parent.push(done),
                        None => return done,
                    }
                }
            }
        }
    }
}

/// A container being copied by [`Value::clone`]: its source, and its copy
/// with the children copied so far.
struct Copying<'a> {
    source: &'a Value,
    copy: Value,
    /// How many children of `source` were handed out.
    next: usize,
}

impl<'a> Copying<'a> {
    fn new(source: &'a Value) -> Self {
        Copying {
            source,
            copy: source.shallow_clone(),
            next: 0,
        }
    }

    /// The next child of the source to copy, if any is left.
    fn next_child(&mut self) -> Option<&'a Value> {
        let child = match self.source {
            Value::Tuple(values) | Value::List(values) => values.get(self.next),
            Value::Dict(entries) => entries.get(self.next).map(|(_, value)| value),
            Value::Tensor(_) | Value::Scalar(_) | Value::Static(_) => None,
        };
        self.next += 1;
        child
    }

    /// Appends the copy of the child last handed out.
    fn push(&mut self, child: Value) {
        match (&mut self.copy, self.source) {
            (Value::Tuple(values) | Value::List(values), _) => values.push(child),
            (Value::Dict(copied), Value::Dict(entries)) => {
                let key = &entries[self.next - 1].0;
                copied.push((Arc::clone(key), child));
            }
            _ => unreachable!("only containers have children"),
        }
    }
}

impl fmt::Debug for Value {
    /// As `#[derive(Debug)]` would print it, with containers deeper than
    /// [`Value::MAX_DEPTH`] shown as `..`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Nested(self, 1).fmt(f)
    }
}

/// A value at some depth of the tree being formatted.
struct Nested<'a>(&'a Value, usize);

impl fmt::Debug for Nested<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Nested(value, depth) = *self;
        let elided = depth > Value::MAX_DEPTH && value.is_container();
        match value {
            Value::Tensor(tensor) => f.debug_tuple("Tensor").field(tensor).finish(),
            Value::Scalar(scalar) => f.debug_tuple("Scalar").field(scalar).finish(),
            Value::Static(scalar) => f.debug_tuple("Static").field(scalar).finish(),
            _ if elided => f.write_str(".."),
            Value::Tuple(values) => f
                .debug_tuple("Tuple")
                .field(&Elements(values, depth))
                .finish(),
            Value::List(values) => f
                .debug_tuple("List")
                .field(&Elements(values, depth))
                .finish(),
            Value::Dict(entries) => f
                .debug_tuple("Dict")
                .field(&Entries(entries, depth))
                .finish(),
        }
    }
}

/// The elements of a container at `depth`, as a list.
struct Elements<'a>(&'a [Value], usize);

impl fmt::Debug for Elements<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Elements(values, depth) = *self;
        f.debug_list()
            .entries(values.iter().map(|value| Nested(value, depth + 1)))
            .finish()
    }
}

/// The entries of a dict at `depth`, as a list of pairs.
struct Entries<'a>(&'a [(Arc<str>, Value)], usize);

impl fmt::Debug for Entries<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Entries(entries, depth) = *self;
        f.debug_list()
            .entries(
                entries
                    .iter()
                    .map(|(key, value)| (key, Nested(value, depth + 1))),
            )
            .finish()
    }
}
