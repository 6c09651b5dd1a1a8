//! `serde::Serialize` for what has no derive (cargo feature `serde`): a
//! function as its name and definition hash, and the types that read best
//! as the text they display (a signature, a miss reason, a refusal, a
//! generalization).

use std::fmt::Display;

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::function_id::FunctionId;
use crate::signature::Signature;

impl Serialize for FunctionId {
    /// `{"name": "sigmoid", "definition_hash": 3735928559}`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut function = serializer.serialize_struct("FunctionId", 2)?;
        function.serialize_field("name", self.name())?;
        function.serialize_field("definition_hash", &self.definition_hash())?;
        function.end()
    }
}

impl Serialize for Signature {
    /// Its text: `(f32[1,5], f32[?,256])`, as `Display` writes it.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// `value`'s `Display` text, when there is one; for `serialize_with`.
pub(crate) fn display_option<T: Display, S: Serializer>(
    value: &Option<T>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => serializer.collect_str(value),
        None => serializer.serialize_none(),
    }
}
