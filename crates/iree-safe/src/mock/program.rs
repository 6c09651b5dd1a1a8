//! The mock's module format: what [`program`] writes and the mock
//! `iree_vm_bytecode_module_create` parses and verifies.
//!
//! ```text
//! MOCKVMFB1 <payload length in bytes>\n
//! module <name>\n
//! func <name> <calling convention> <op>\n      (any number of times)
//! end\n
//! ```
//!
//! Names are `[A-Za-z0-9_]+`; the calling convention must be the op's own
//! (`func add 0rr_r add`); the ops are those of [`Op`]. Like a compiled
//! `.vmfb`, every program exports `__init` (`func __init 0v_v nop`), after
//! the user functions. Anything else (another magic, a length field that
//! does not match the bytes given, an unknown line or op, non-UTF-8) is
//! rejected with INVALID_ARGUMENT, as IREE rejects a corrupt archive.

use std::ops::Range;

use super::api::*;
use super::ops::Op;
use super::status::{Failure, MockResult};

/// The first bytes of every mock artifact, with the space that follows.
const MAGIC: &[u8] = b"MOCKVMFB1 ";

/// Digits a length field may have.
const MAX_LENGTH_DIGITS: usize = 20;

/// The mock artifact for one of the test programs of `tests/data`: `add`
/// (`add`: f32 tensor + f32 tensor) or `scalars` (`scale`: f32 tensor × f32,
/// `add_i32`, `mul_i64`, `half_f64`). `None` for other names.
pub fn program(name: &str) -> Option<crate::compiler::Artifact> {
    let functions: &[(&str, Op)] = match name {
        "add" => &[("add", Op::Add)],
        "scalars" => &[
            ("scale", Op::Scale),
            ("add_i32", Op::AddI32),
            ("mul_i64", Op::MulI64),
            ("half_f64", Op::HalfF64),
        ],
        _ => return None,
    };
    Some(crate::compiler::Artifact::compiled(build(name, functions)))
}

/// Writes a module named `module` exporting `functions` and `__init`.
pub(crate) fn build(module: &str, functions: &[(&str, Op)]) -> Vec<u8> {
    let mut payload = format!("module {module}\n");
    for &(name, op) in functions.iter().chain(&[("__init", Op::Nop)]) {
        payload += &format!("func {name} {} {}\n", op.calling_convention(), op.name());
    }
    payload += "end\n";
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(format!("{}\n", payload.len()).as_bytes());
    bytes.extend_from_slice(payload.as_bytes());
    bytes
}

/// A verified program. Names are byte ranges of the archive, so the views
/// IREE hands out point into the archive, as they do into a real `.vmfb`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Program {
    pub(crate) name: Range<usize>,
    pub(crate) functions: Vec<Function>,
}

/// One exported function of a [`Program`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Function {
    pub(crate) name: Range<usize>,
    pub(crate) calling_convention: Range<usize>,
    pub(crate) op: Op,
}

fn invalid(message: impl Into<String>) -> Failure {
    Failure::new(IREE_STATUS_INVALID_ARGUMENT, message)
}

/// Parses and verifies an archive.
pub(crate) fn parse(archive: &[u8]) -> MockResult<Program> {
    if !archive.starts_with(MAGIC) {
        return Err(if MAGIC.starts_with(archive) {
            invalid(format!(
                "archive truncated inside its header ({} bytes)",
                archive.len()
            ))
        } else {
            invalid(
                "not a mock module: no MOCKVMFB1 magic (the mock runtime loads \
                 `iree_safe::mock::program` artifacts, not real .vmfb files)",
            )
        });
    }
    let digits = &archive[MAGIC.len()..];
    let digits = &digits[..digits.len().min(MAX_LENGTH_DIGITS + 1)];
    let Some(newline) = digits.iter().position(|&b| b == b'\n') else {
        return Err(invalid("archive header has no complete length field"));
    };
    let declared = std::str::from_utf8(&digits[..newline])
        .ok()
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse::<usize>().ok())
        .ok_or_else(|| invalid("archive header has a malformed length field"))?;
    let start = MAGIC.len() + newline + 1;
    let payload = &archive[start..];
    if payload.len() != declared {
        return Err(invalid(format!(
            "archive length field says {declared} payload bytes but {} follow (truncated or padded archive)",
            payload.len()
        )));
    }
    let text = std::str::from_utf8(payload)
        .map_err(|e| invalid(format!("archive payload is not UTF-8 (corrupted): {e}")))?;
    let mut lines = Vec::new();
    let mut offset = start;
    for raw in text.split_inclusive('\n') {
        let Some(line) = raw.strip_suffix('\n') else {
            return Err(invalid("archive payload does not end with a newline"));
        };
        lines.push(fields(line, offset));
        offset += raw.len();
    }
    // Line 1 is the header.
    let error = |index: usize, what: &str| invalid(format!("archive line {}: {what}", index + 2));
    let mut lines = lines.iter().map(Vec::as_slice).enumerate();
    let name = match lines.next() {
        Some((index, [("module", _), name])) => checked_name(index, name)?,
        _ => return Err(error(0, "expected `module <name>`")),
    };
    let mut functions: Vec<Function> = Vec::new();
    loop {
        match lines.next() {
            Some((_, [("end", _)])) => break,
            Some((index, [("func", _), name, (convention, cc), (op, _)])) => {
                let op =
                    Op::from_name(op).ok_or_else(|| error(index, &format!("unknown op `{op}`")))?;
                if *convention != op.calling_convention() {
                    return Err(error(
                        index,
                        &format!(
                            "op `{}` has calling convention {}, not {convention}",
                            op.name(),
                            op.calling_convention()
                        ),
                    ));
                }
                let name = checked_name(index, name)?;
                if functions
                    .iter()
                    .any(|f| archive[f.name.clone()] == archive[name.clone()])
                {
                    return Err(error(index, "duplicate function name"));
                }
                functions.push(Function {
                    name,
                    calling_convention: cc.clone(),
                    op,
                });
            }
            Some((index, _)) => {
                return Err(error(index, "expected `func <name> <cc> <op>` or `end`"))
            }
            None => return Err(invalid("archive payload has no `end` line")),
        }
    }
    if let Some((index, _)) = lines.next() {
        return Err(error(index, "unexpected line after `end`"));
    }
    if functions.len() > usize::from(u16::MAX) {
        return Err(invalid("too many functions for 16-bit ordinals"));
    }
    Ok(Program { name, functions })
}

/// Splits `line` (at archive offset `offset`) into space-separated fields
/// with their archive byte ranges.
fn fields(line: &str, mut offset: usize) -> Vec<(&str, Range<usize>)> {
    line.split(' ')
        .map(|field| {
            let range = offset..offset + field.len();
            offset = range.end + 1;
            (field, range)
        })
        .collect()
}

/// The range of a name field, if it is a valid name (`[A-Za-z0-9_]+`).
fn checked_name(index: usize, (name, range): &(&str, Range<usize>)) -> MockResult<Range<usize>> {
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        Ok(range.clone())
    } else {
        Err(invalid(format!(
            "archive line {}: `{name}` is not a valid name",
            index + 2
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text<'a>(archive: &'a [u8], range: &Range<usize>) -> &'a str {
        std::str::from_utf8(&archive[range.clone()]).unwrap()
    }

    fn error(archive: &[u8]) -> String {
        let failure = parse(archive).unwrap_err();
        assert_eq!(failure.code, IREE_STATUS_INVALID_ARGUMENT);
        failure.message
    }

    #[test]
    fn programs_parse_back_with_init_last() {
        let archive = program("scalars").unwrap();
        let parsed = parse(&archive).unwrap();
        assert_eq!(text(&archive, &parsed.name), "scalars");
        let names: Vec<&str> = parsed
            .functions
            .iter()
            .map(|f| text(&archive, &f.name))
            .collect();
        assert_eq!(names, ["scale", "add_i32", "mul_i64", "half_f64", "__init"]);
        let scale = &parsed.functions[0];
        assert_eq!(text(&archive, &scale.calling_convention), "0rf_r");
        assert_eq!(scale.op, Op::Scale);
        assert_eq!(parsed.functions[4].op, Op::Nop);
        assert!(program("sigmoid").is_none());
    }

    #[test]
    fn every_truncation_is_rejected() {
        let archive = program("add").unwrap();
        for cut in 0..archive.len() {
            error(&archive[..cut]);
        }
    }

    #[test]
    fn corrupt_archives_are_rejected_with_a_reason() {
        let with_payload =
            |payload: &str| format!("MOCKVMFB1 {}\n{payload}", payload.len()).into_bytes();
        let cases = [
            (b"\x7fELF\x02\x01\x01".to_vec(), "no MOCKVMFB1 magic"),
            (b"MOCKVMFB1 12".to_vec(), "no complete length field"),
            (b"MOCKVMFB1 x1\n".to_vec(), "malformed length field"),
            (
                b"MOCKVMFB1 3\nab".to_vec(),
                "says 3 payload bytes but 2 follow",
            ),
            (
                [b"MOCKVMFB1 2\n".as_slice(), b"\xff\n"].concat(),
                "not UTF-8",
            ),
            (with_payload("module m\nend"), "does not end with a newline"),
            (
                with_payload("func f 0rr_r add\nend\n"),
                "expected `module <name>`",
            ),
            (
                with_payload("module m-1\nend\n"),
                "`m-1` is not a valid name",
            ),
            (
                with_payload("module m\nfunc f 0rr_r mul\nend\n"),
                "unknown op `mul`",
            ),
            (
                with_payload("module m\nfunc f 0r_r add\nend\n"),
                "calling convention 0rr_r, not 0r_r",
            ),
            (
                with_payload("module m\nfunc f 0ii_i add_i32\nfunc f 0v_v nop\nend\n"),
                "line 4: duplicate function name",
            ),
            (with_payload("module m\nfunc f\nend\n"), "expected `func"),
            (with_payload("module m\n"), "no `end` line"),
            (with_payload("module m\nend\nend\n"), "after `end`"),
        ];
        for (archive, expected) in cases {
            let message = error(&archive);
            assert!(message.contains(expected), "{message:?} lacks {expected:?}");
        }
    }
}
