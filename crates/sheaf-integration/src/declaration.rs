//! Whether a loaded entry function declares what a variant claims to
//! serve, from IREE's `iree.abi.declaration` reflection attribute:
//!
//! ```text
//! sync func @f(%input0: tensor<?x5xf32>, %input1: tensor<f32>) -> (%output0: tensor<?x5xf32>)
//! ```
//!
//! Checked for artifacts whose signature is recorded apart from their code
//! (a bundle's manifest), so that a stale or edited record is refused
//! before a call, never failing every call with a shape error.

use iree_safe::Function;
use jit_cache::{Layout, Signature};

use crate::mlir;

/// The reflection attribute IREE's compiler gives each exported function.
const DECLARATION: &str = "iree.abi.declaration";

/// Why `entry` cannot serve `signature` with results in `outputs` (one per
/// tensor leaf, or any number without a structure); `None` when it can.
pub(crate) fn mismatch(
    entry: &Function,
    signature: &Signature,
    outputs: Option<&Layout>,
) -> Option<String> {
    let Some(declaration) = entry.reflection_attr(DECLARATION) else {
        return Some(format!(
            "its entry `{}` declares no signature",
            entry.name()
        ));
    };
    let Some((inputs, results)) = parse(&declaration) else {
        return Some(format!("cannot read its declaration `{declaration}`"));
    };
    let expected: Vec<String> = signature
        .args()
        .iter()
        .map(|arg| mlir::arg_type(arg).unwrap_or_else(|_| arg.to_string()))
        .collect();
    if inputs != expected {
        return Some(format!(
            "it takes ({}), not the ({}) of {signature}",
            inputs.join(", "),
            expected.join(", ")
        ));
    }
    match outputs.map(Layout::leaf_counts) {
        Some((tensors, 0)) if tensors == results.len() => None,
        Some(_) => Some(format!(
            "it returns {} results, not the structure {}",
            results.len(),
            outputs.map(ToString::to_string).unwrap_or_default()
        )),
        None => None,
    }
}

/// The argument and result types of a declaration; `None` for text of
/// another shape.
fn parse(declaration: &str) -> Option<(Vec<String>, Vec<String>)> {
    let open = declaration.find('(')?;
    let close = open + matching_paren(&declaration[open..])?;
    let inputs = types(&declaration[open + 1..close])?;
    let rest = declaration[close + 1..].trim_start();
    let results = match rest.strip_prefix("->") {
        None if rest.is_empty() => Vec::new(),
        None => return None,
        Some(results) => {
            let results = results.trim();
            match results.strip_prefix('(') {
                Some(inner) => types(inner.strip_suffix(')')?)?,
                None => types(results)?,
            }
        }
    };
    Some((inputs, results))
}

/// The offset of the parenthesis that closes the one `text` starts with.
fn matching_paren(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, c) in text.char_indices() {
        match c {
            '(' | '<' | '[' | '{' => depth += 1,
            ')' | '>' | ']' | '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 && c == ')' {
                    return Some(offset);
                }
            }
            _ => {}
        }
    }
    None
}

/// The types of `%name: type` items separated by top-level commas.
fn types(list: &str) -> Option<Vec<String>> {
    if list.trim().is_empty() {
        return Some(Vec::new());
    }
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (offset, c) in list.char_indices() {
        match c {
            '(' | '<' | '[' | '{' => depth += 1,
            ')' | '>' | ']' | '}' => depth = depth.checked_sub(1)?,
            ',' if depth == 0 => {
                items.push(&list[start..offset]);
                start = offset + 1;
            }
            _ => {}
        }
    }
    items.push(&list[start..]);
    items
        .into_iter()
        .map(|item| {
            let (_, ty) = item.split_once(':')?;
            Some(ty.trim().to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_are_read_with_one_result_or_several() {
        let several = "sync func @f(%input0: tensor<?x5xf32>, %input1: tensor<f32>, \
                       %input2: tensor<2xi1>) -> (%output0: tensor<?x5xf32>, %output1: tensor<f32>)";
        let (inputs, results) = parse(several).unwrap();
        assert_eq!(inputs, ["tensor<?x5xf32>", "tensor<f32>", "tensor<2xi1>"]);
        assert_eq!(results, ["tensor<?x5xf32>", "tensor<f32>"]);
        let one = "sync func @g(%input0: tensor<4xf32, #enc<a, b>>) -> %output0: tensor<4xf32>";
        let (inputs, results) = parse(one).unwrap();
        assert_eq!(inputs, ["tensor<4xf32, #enc<a, b>>"]);
        assert_eq!(results, ["tensor<4xf32>"]);
        assert_eq!(parse("sync func @h()").unwrap(), (vec![], vec![]));
        for broken in [
            "",
            "func @f",
            "func @f(%a tensor<f32>)",
            "func @f(%a: x) -> (",
            "f(>",
        ] {
            assert_eq!(parse(broken), None, "{broken}");
        }
    }
}
