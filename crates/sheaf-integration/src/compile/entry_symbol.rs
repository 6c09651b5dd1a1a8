//! A lowering's own entry name, mapped to the runtime's: MLIR generated
//! before the call (Sheaf's value-and-grad code, say) names its entry
//! function with a fixed symbol, which [`Lowered::with_entry`] declares;
//! the runtime renames that symbol, where it is defined and wherever it is
//! referenced, to the per-signature entry
//! ([`LoweringContext::entry_symbol`]), after checking that the MLIR defines
//! it as a public function.
//!
//! The text is read as MLIR tokens, not searched as a string: a symbol
//! reference is `@` and a bare identifier (`[A-Za-z_][A-Za-z0-9_$.]*`), so
//! `@step` is not part of `@step_inner`, and string literals and `//`
//! comments are left as they are.
//!
//! [`Lowered::with_entry`]: crate::compile::lowering::Lowered::with_entry
//! [`LoweringContext::entry_symbol`]: crate::compile::lowering::LoweringContext::entry_symbol

use crate::mlir::MlirError;

/// A lowering's functions with the entry named `entry`: `mlir` as it is
/// when the lowering named none of its own (`own`), else with `@own`
/// renamed (see [`rename_entry`]).
///
/// # Errors
///
/// Those of [`rename_entry`].
pub(crate) fn named(mlir: String, own: Option<&str>, entry: &str) -> Result<String, MlirError> {
    match own {
        None => Ok(mlir),
        Some(own) => rename_entry(&mlir, own, entry),
    }
}

/// `mlir` with the symbol `@from` (the lowering's entry function) renamed
/// `@to`.
///
/// # Errors
///
/// [`MlirError::NoEntry`] when no `func.func @from` is defined,
/// [`MlirError::PrivateEntry`] when it is private (it would not be
/// exported), and [`MlirError::EntryNameTaken`] when `@to` is a symbol of
/// `mlir` already.
pub(crate) fn rename_entry(mlir: &str, from: &str, to: &str) -> Result<String, MlirError> {
    if from == to {
        // Still checked: the runtime looks the entry up by this name.
        return definition(mlir, from).map(|()| mlir.to_owned());
    }
    definition(mlir, from)?;
    if symbols(mlir).any(|(_, symbol)| symbol == to) {
        return Err(MlirError::EntryNameTaken {
            entry: from.to_owned(),
            name: to.to_owned(),
        });
    }
    let mut renamed = String::with_capacity(mlir.len() + to.len());
    let mut copied = 0;
    for (at, symbol) in symbols(mlir).filter(|(_, symbol)| *symbol == from) {
        renamed.push_str(&mlir[copied..at]);
        renamed.push('@');
        renamed.push_str(to);
        copied = at + 1 + symbol.len();
    }
    renamed.push_str(&mlir[copied..]);
    Ok(renamed)
}

/// Checks that `mlir` defines `func.func @name` (not private).
fn definition(mlir: &str, name: &str) -> Result<(), MlirError> {
    for (at, symbol) in symbols(mlir) {
        if symbol != name {
            continue;
        }
        // `func.func @name`, `func.func public @name`, `func.func private @name`.
        let mut words = mlir[..at].split_whitespace().rev();
        let (last, before) = (words.next(), words.next());
        match (last, before) {
            (Some("func.func"), _) | (Some("public"), Some("func.func")) => return Ok(()),
            (Some("private"), Some("func.func")) => {
                return Err(MlirError::PrivateEntry {
                    entry: name.to_owned(),
                })
            }
            _ => {}
        }
    }
    Err(MlirError::NoEntry {
        entry: name.to_owned(),
    })
}

/// Whether `c` continues a bare identifier.
fn continues_identifier(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.')
}

/// The symbol references of `mlir` outside string literals and comments:
/// the byte offset of each `@` and the identifier after it (quoted
/// symbols, `@"..."`, are skipped).
fn symbols(mlir: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut chars = mlir.char_indices().peekable();
    std::iter::from_fn(move || {
        while let Some((at, c)) = chars.next() {
            match c {
                '"' => {
                    // A string literal, with `\` escapes.
                    while let Some((_, c)) = chars.next() {
                        match c {
                            '\\' => {
                                chars.next();
                            }
                            '"' => break,
                            _ => {}
                        }
                    }
                }
                '/' if chars.peek().is_some_and(|&(_, c)| c == '/') => {
                    for (_, c) in chars.by_ref() {
                        if c == '\n' {
                            break;
                        }
                    }
                }
                '@' => {
                    let start = at + 1;
                    let starts = mlir[start..]
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
                    if !starts {
                        continue;
                    }
                    let len = mlir[start..]
                        .find(|c: char| !continues_identifier(c))
                        .unwrap_or(mlir.len() - start);
                    while chars.peek().is_some_and(|&(i, _)| i < start + len) {
                        chars.next();
                    }
                    return Some((at, &mlir[start..start + len]));
                }
                _ => {}
            }
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALUE_AND_GRAD: &str = r#"func.func private @step_inner(%x: tensor<f32>) -> tensor<f32> {
  return %x : tensor<f32>
}
// @step is the entry; "@step" in this comment stays.
func.func @step(%x: tensor<f32>) -> tensor<f32> {
  %y = func.call @step_inner(%x) : (tensor<f32>) -> tensor<f32>
  %ok = stablehlo.constant dense<true> : tensor<i1>
  cf.assert %ok, "@step: \"@step\" is fine"
  return %y : tensor<f32>
}
func.func private @again(%x: tensor<f32>) -> tensor<f32> {
  %y = func.call @step(%x) : (tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}"#;

    #[test]
    fn the_entry_is_renamed_where_defined_and_referenced_only() {
        let renamed = rename_entry(VALUE_AND_GRAD, "step", "step_0123").unwrap();
        assert!(renamed.contains("func.func @step_0123(%x"), "{renamed}");
        assert!(renamed.contains("func.call @step_0123(%x)"), "{renamed}");
        assert!(
            renamed.contains("func.func private @step_inner("),
            "{renamed}"
        );
        assert!(renamed.contains("func.call @step_inner(%x)"), "{renamed}");
        assert!(
            renamed.contains("// @step is the entry; \"@step\""),
            "{renamed}"
        );
        assert!(
            renamed.contains(r#""@step: \"@step\" is fine""#),
            "{renamed}"
        );
        assert_eq!(
            renamed.matches("@step_0123").count(),
            2,
            "the definition and the one call"
        );
    }

    #[test]
    fn an_entry_that_is_not_defined_or_not_public_or_a_taken_name_is_an_error() {
        let missing = rename_entry(VALUE_AND_GRAD, "value_and_grad", "f_1").unwrap_err();
        assert_eq!(
            missing,
            MlirError::NoEntry {
                entry: "value_and_grad".into()
            }
        );
        // Referenced, never defined: still missing.
        let called_only = "func.func @f() { func.call @g() : () -> () return }";
        assert!(matches!(
            rename_entry(called_only, "g", "h"),
            Err(MlirError::NoEntry { .. })
        ));
        // A prefix of a defined name is not that name.
        assert!(matches!(
            rename_entry(VALUE_AND_GRAD, "step_in", "f_1"),
            Err(MlirError::NoEntry { .. })
        ));
        assert_eq!(
            rename_entry(VALUE_AND_GRAD, "step_inner", "f_1").unwrap_err(),
            MlirError::PrivateEntry {
                entry: "step_inner".into()
            }
        );
        assert_eq!(
            rename_entry(VALUE_AND_GRAD, "step", "again").unwrap_err(),
            MlirError::EntryNameTaken {
                entry: "step".into(),
                name: "again".into()
            }
        );
        let public =
            "func.func public @f(%x: tensor<f32>) -> tensor<f32> { return %x : tensor<f32> }";
        assert!(rename_entry(public, "f", "g")
            .unwrap()
            .contains("public @g("));
        assert_eq!(rename_entry(public, "f", "f").unwrap(), public);
    }
}
