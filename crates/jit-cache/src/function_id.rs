//! Identity of a compiled function.

use std::any::TypeId;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rustc_hash::FxHasher;

use crate::hashing::{finalize, stable_hash};

/// Which function a signature belongs to: its name plus a hash of its
/// definition (and, for callers that need one, a type:
/// [`with_type_tag`](Self::with_type_tag)).
///
/// A redefined function (same name, new body) has a different
/// `definition_hash` and is therefore a different function: it never reuses
/// code compiled for the old definition. Cloning is cheap (the name is shared).
///
/// It also says whether the function's compile accepts signatures with
/// dynamic dims ([`with_dynamic_dims`](Self::with_dynamic_dims)); that is a
/// property of the function, not part of its identity.
#[derive(Clone)]
pub struct FunctionId {
    name: Arc<str>,
    definition_hash: u64,
    /// `()`'s unless tagged.
    type_tag: TypeId,
    hash: u64,
    dynamic_dims: bool,
}

impl FunctionId {
    /// A function called `name` whose definition hashes to `definition_hash`.
    pub fn new(name: impl Into<Arc<str>>, definition_hash: u64) -> Self {
        let name = name.into();
        let type_tag = TypeId::of::<()>();
        FunctionId {
            hash: Self::hash_of(&name, definition_hash, type_tag),
            name,
            definition_hash,
            type_tag,
            dynamic_dims: false,
        }
    }

    /// The same function, told apart from every function of the same name
    /// and definition tagged with another type than `T`: ids are equal only
    /// when their types are the same, compared exactly (by [`TypeId`], not
    /// by a hash). A caller whose executables carry a value of a type the
    /// cache erases (the per-variant metadata of `sheaf-integration`'s
    /// functions) tags its ids with that type, so that a lookup never
    /// returns an executable made for another. Untagged ids are tagged with
    /// `()`.
    pub fn with_type_tag<T: ?Sized + 'static>(mut self) -> Self {
        self.type_tag = TypeId::of::<T>();
        self.hash = Self::hash_of(&self.name, self.definition_hash, self.type_tag);
        self
    }

    fn hash_of(name: &str, definition_hash: u64, type_tag: TypeId) -> u64 {
        let mut h = FxHasher::default();
        name.hash(&mut h);
        h.write_u64(definition_hash);
        type_tag.hash(&mut h);
        finalize(h.finish())
    }

    /// Declares that the function's compile callback accepts signatures with
    /// dynamic dims ([`ArgSpec::DYNAMIC`](crate::ArgSpec::DYNAMIC)) and
    /// returns code correct for every size of them, 0 and 1 included. The
    /// cache then compiles such a signature once a dim of the function's
    /// calls has taken [`CacheConfig::dynamic_dims_after`](crate::CacheConfig::dynamic_dims_after)
    /// distinct values (see [`CacheConfig::dynamic_dims`](crate::CacheConfig::dynamic_dims)).
    pub fn with_dynamic_dims(mut self) -> Self {
        self.dynamic_dims = true;
        self
    }

    /// Whether the function's compile accepts dynamic dims.
    pub fn accepts_dynamic_dims(&self) -> bool {
        self.dynamic_dims
    }

    /// A function called `name` whose definition is the text `definition`
    /// (source text, or any canonical form): the definition hash is the
    /// [`stable_hash`](crate::stable_hash) of the text.
    pub fn for_definition(name: impl Into<Arc<str>>, definition: &str) -> Self {
        Self::new(name, stable_hash(definition.as_bytes()))
    }

    /// The function's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The hash of the function's definition given at construction.
    pub fn definition_hash(&self) -> u64 {
        self.definition_hash
    }
}

impl PartialEq for FunctionId {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash
            && self.definition_hash == other.definition_hash
            && self.type_tag == other.type_tag
            && (Arc::ptr_eq(&self.name, &other.name) || self.name == other.name)
    }
}

impl Eq for FunctionId {}

impl Hash for FunctionId {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl PartialOrd for FunctionId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for FunctionId {
    /// Orders by name, then definition hash (used to sort reports), then
    /// type tag.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (&*self.name, self.definition_hash, self.type_tag).cmp(&(
            &*other.name,
            other.definition_hash,
            other.type_tag,
        ))
    }
}

impl fmt::Debug for FunctionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FunctionId({}#{:016x})", self.name, self.definition_hash)
    }
}

impl fmt::Display for FunctionId {
    /// The name alone; `{:#}` appends the definition hash: `sigmoid#00000000deadbeef`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            write!(f, "{}#{:016x}", self.name, self.definition_hash)
        } else {
            f.write_str(&self.name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redefinition_is_a_different_function() {
        let a = FunctionId::new("sigmoid", 1);
        assert_eq!(a, FunctionId::new(String::from("sigmoid"), 1));
        assert_ne!(a, FunctionId::new("sigmoid", 2));
        assert_ne!(a, FunctionId::new("tanh", 1));
        assert_eq!(format!("{a}"), "sigmoid");
        assert_eq!(format!("{a:#}"), "sigmoid#0000000000000001");
        let dynamic = a.clone().with_dynamic_dims();
        assert!(dynamic.accepts_dynamic_dims() && !a.accepts_dynamic_dims());
        assert_eq!(dynamic, a, "a capability, not an identity");
    }

    #[test]
    fn a_type_tag_is_part_of_the_identity() {
        let plain = FunctionId::new("f", 1);
        assert_eq!(plain, plain.clone().with_type_tag::<()>());
        let a = plain.clone().with_type_tag::<u32>();
        let b = plain.clone().with_type_tag::<String>();
        assert_ne!(a, b);
        assert_ne!(a, plain);
        assert_eq!(a, FunctionId::new("f", 1).with_type_tag::<u32>());
        assert_ne!(a.cmp(&b), std::cmp::Ordering::Equal);
        assert_eq!(a.definition_hash(), 1, "the tag is not hashed into it");
    }
}
