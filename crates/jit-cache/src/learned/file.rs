//! The text of a [`LearnedPolicy`]: what a policy file holds.
//!
//! Lines of tab-separated fields (a signature is the four fields of
//! `signature/text.rs`):
//!
//! ```text
//! sheaf-jit policy 2
//! function  <name: its UTF-8 in hex>  <definition hash: 16 hex digits>
//! compiler  <stable hash of the compiler build: 16 hex digits>
//! target    <stable hash of the target: 16 hex digits>
//! dynamic   <dims: arg.dim,...>  <signature of the shape class>     (one per class)
//! hot       <recent calls>       <signature>                        (one per signature)
//! end       <stable hash of every line above: 16 hex digits>
//! ```
//!
//! Reading trusts nothing: a file that is not whole (no `end` line, or a
//! hash that does not match), of another format version, over
//! [`MAX_TEXT_BYTES`](LearnedPolicy::MAX_TEXT_BYTES), with more records
//! than the bounds or a line that does not parse is
//! [damaged](PolicyFileError::Damaged); one written for another function,
//! definition, compiler build or target, or whose dims are not dims of
//! their class, is [stale](PolicyFileError::Stale). Either way nothing of
//! it is used.

use std::fmt::Write;

use super::LearnedPolicy;
use crate::function_id::FunctionId;
use crate::hashing::stable_hash;
use crate::hex;
use crate::signature::text as signature_text;

/// The first line of every policy file of this version.
const FORMAT: &str = "sheaf-jit policy 2";

/// Whose policy a file holds, and for what it was learned: the function
/// (name and definition hash) and the compiler build and target its
/// variants are compiled by and for (as an `ArtifactKey`'s parts name
/// them). A file is read back only for the same four.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[expect(
    clippy::exhaustive_structs,
    reason = "every field names the policy file and is written into it: a new part is a new file \
        format anyway, and callers must supply every part"
)]
pub struct PolicyScope<'a> {
    /// The function's name.
    pub function: &'a str,
    /// The hash of its definition.
    pub definition_hash: u64,
    /// The compiler build.
    pub compiler: &'a str,
    /// The target: the compiler flags, with `host` resolved.
    pub target: &'a str,
}

impl<'a> PolicyScope<'a> {
    /// The scope of `func` compiled by `compiler` for `target`.
    pub fn new(func: &'a FunctionId, compiler: &'a str, target: &'a str) -> Self {
        PolicyScope {
            function: func.name(),
            definition_hash: func.definition_hash(),
            compiler,
            target,
        }
    }
}

/// Why the text of a policy file was not used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyFileError {
    /// It is not a whole policy file of this version: what is wrong.
    #[error("it is damaged: {0}")]
    Damaged(String),
    /// It is over [`LearnedPolicy::MAX_TEXT_BYTES`].
    #[error(
        "it has {bytes} bytes, over the {} a policy file may have",
        LearnedPolicy::MAX_TEXT_BYTES
    )]
    TooLarge {
        /// Its size.
        bytes: u64,
    },
    /// It was written for another function, definition, compiler build or
    /// target, or records dims its class does not have: what differs.
    #[error("it is stale: {0}")]
    Stale(String),
}

impl LearnedPolicy {
    /// The largest text a policy file may have: 64 KiB, room for the
    /// bounds' worth of ordinary signatures. [`to_text`](Self::to_text)
    /// leaves out the last hot signatures rather than write more.
    pub const MAX_TEXT_BYTES: usize = 64 << 10;

    /// The policy as the text of a policy file for `scope` (see the module
    /// docs), at most [`MAX_TEXT_BYTES`](Self::MAX_TEXT_BYTES) long.
    pub fn to_text(&self, scope: &PolicyScope<'_>) -> String {
        let mut text = format!("{FORMAT}\nfunction\t");
        hex::encode_into(&mut text, scope.function.as_bytes());
        let _ = write!(
            text,
            "\t{:016x}\ncompiler\t{:016x}\ntarget\t{:016x}\n",
            scope.definition_hash,
            stable_hash(scope.compiler.as_bytes()),
            stable_hash(scope.target.as_bytes()),
        );
        let mut line = String::new();
        let records = self.dynamic.iter().map(|(class, dims)| {
            let dims: Vec<String> = dims.iter().map(|(a, d)| format!("{a}.{d}")).collect();
            (format!("dynamic\t{}", dims.join(",")), class)
        });
        let hot = self
            .hot
            .iter()
            .map(|(sig, count)| (format!("hot\t{count}"), sig));
        // Room for the end line: `end`, a tab, 16 digits and a newline.
        let room = Self::MAX_TEXT_BYTES - 21;
        for (head, sig) in records.chain(hot) {
            line.clear();
            line.push_str(&head);
            line.push('\t');
            signature_text::encode_into(&mut line, sig);
            line.push('\n');
            if text.len() + line.len() > room {
                break;
            }
            text.push_str(&line);
        }
        let _ = writeln!(text, "end\t{:016x}", stable_hash(text.as_bytes()));
        text
    }

    /// The policy in `text`, the text of a policy file, if it is whole and
    /// was written for `scope`.
    ///
    /// # Errors
    ///
    /// [`PolicyFileError::TooLarge`] for a text over
    /// [`MAX_TEXT_BYTES`](Self::MAX_TEXT_BYTES),
    /// [`PolicyFileError::Damaged`] for one that is not a whole policy
    /// file of this version, with records within the bounds, and
    /// [`PolicyFileError::Stale`] for one written for another scope, or
    /// with dims that are not dims of their class.
    pub fn from_text(
        text: &str,
        scope: &PolicyScope<'_>,
    ) -> Result<LearnedPolicy, PolicyFileError> {
        let (owner, learned) = Self::read_text(text)?;
        owner.check(scope)?;
        Ok(learned)
    }

    /// The policy in `text`, the text of a policy file, and whose it is,
    /// if it is whole, whoever it was written for: what a tool that lists
    /// a cache's policy files reads (a process recalls a policy with
    /// [`from_text`](Self::from_text), which checks its scope too).
    ///
    /// # Errors
    ///
    /// [`PolicyFileError::TooLarge`] for a text over
    /// [`MAX_TEXT_BYTES`](Self::MAX_TEXT_BYTES),
    /// [`PolicyFileError::Damaged`] for one that is not a whole policy
    /// file of this version, with records within the bounds, and
    /// [`PolicyFileError::Stale`] for one with dims that are not dims of
    /// their class.
    pub fn read_text(text: &str) -> Result<(PolicyOwner, LearnedPolicy), PolicyFileError> {
        let damaged = PolicyFileError::Damaged;
        if text.len() > Self::MAX_TEXT_BYTES {
            return Err(PolicyFileError::TooLarge {
                bytes: text.len() as u64,
            });
        }
        let first = text.lines().next().unwrap_or_default();
        if first != FORMAT {
            return Err(damaged(if first.starts_with("sheaf-jit policy ") {
                format!("its format is `{first}`, and this version reads `{FORMAT}`")
            } else {
                "it is not a policy file (its first line is not `sheaf-jit policy 2`)".to_owned()
            }));
        }
        let body = whole_body(text).ok_or_else(|| {
            damaged(
                "it is truncated or changed (its end line is missing or does not match)".to_owned(),
            )
        })?;
        let mut lines = body
            .lines()
            .enumerate()
            .skip(1)
            .map(|(i, line)| (i + 1, line));
        let owner = read_owner(&mut lines)?;
        let mut learned = LearnedPolicy::new(Vec::new(), Vec::new(), 0);
        for (number, line) in lines {
            let fields: Vec<&str> = line.split('\t').collect();
            let at = |why: &str| format!("line {number} ({why}): `{line}`");
            let (kind, value, sig) = match fields[..] {
                [kind, value, a, s, l, c] => (kind, value, [a, s, l, c]),
                _ => return Err(damaged(at("not a record"))),
            };
            let sig = signature_text::decode(sig)
                .ok_or_else(|| damaged(at("not a signature this version writes")))?;
            match kind {
                "dynamic" => {
                    if sig != sig.shape_class() {
                        return Err(damaged(at("a class has every dim dynamic")));
                    }
                    let dims = parse_dims(value).ok_or_else(|| damaged(at("bad dims")))?;
                    let fits = dims.iter().all(|&(arg, dim)| {
                        sig.args().get(arg).is_some_and(|spec| dim < spec.rank())
                    });
                    if !fits {
                        return Err(PolicyFileError::Stale(at(
                            "dims that the class does not have: its arguments and ranks changed",
                        )));
                    }
                    learned.dynamic.push((sig, dims));
                }
                "hot" => {
                    let count = match value.parse::<u32>() {
                        Ok(count) if count > 0 && !value.starts_with('+') => count,
                        _ => return Err(damaged(at("bad count"))),
                    };
                    learned.hot.push((sig, count));
                }
                _ => return Err(damaged(at("unknown record"))),
            }
        }
        if learned.dynamic.len() > Self::MAX_DYNAMIC_CLASSES || learned.hot.len() > Self::MAX_HOT {
            return Err(damaged(format!(
                "it has {} classes and {} hot signatures, over the {} and {} kept",
                learned.dynamic.len(),
                learned.hot.len(),
                Self::MAX_DYNAMIC_CLASSES,
                Self::MAX_HOT
            )));
        }
        Ok((owner, learned))
    }
}

/// Whose policy a policy file holds, as its text names it
/// ([`LearnedPolicy::read_text`]): the function, and hashes
/// ([`stable_hash`]) of the compiler build and target it was learned for.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PolicyOwner {
    /// The function's name.
    pub function: String,
    /// The hash of its definition.
    pub definition_hash: u64,
    /// The [`stable_hash`] of the compiler build.
    pub compiler_hash: u64,
    /// The [`stable_hash`] of the target.
    pub target_hash: u64,
}

impl PolicyOwner {
    /// `Ok` when this is `scope`'s policy.
    fn check(&self, scope: &PolicyScope<'_>) -> Result<(), PolicyFileError> {
        let stale = |why: String| Err(PolicyFileError::Stale(why));
        let name = &self.function;
        if *name != scope.function {
            return stale(format!(
                "it is the policy of `{name}`, not of `{}`",
                scope.function
            ));
        }
        if self.definition_hash != scope.definition_hash {
            return stale(format!(
                "it was learned for another definition of `{name}` ({:016x}; this one is \
                 {:016x})",
                self.definition_hash, scope.definition_hash
            ));
        }
        for (what, recorded, current) in [
            ("compiler", self.compiler_hash, scope.compiler),
            ("target", self.target_hash, scope.target),
        ] {
            if recorded != stable_hash(current.as_bytes()) {
                return stale(format!(
                    "it was learned with another {what} than this process's `{current}`"
                ));
            }
        }
        Ok(())
    }
}

/// The lines of `text` before its end line, if the end line is there and
/// its hash matches them (newline included).
fn whole_body(text: &str) -> Option<&str> {
    let without_newline = text.strip_suffix('\n')?;
    let at = without_newline.rfind('\n')? + 1;
    let (body, end) = text.split_at(at);
    let hash = hex::parse_u64(end.strip_prefix("end\t")?.strip_suffix('\n')?, 16..=16)?;
    (hash == stable_hash(body.as_bytes())).then_some(body)
}

/// Reads the `function`, `compiler` and `target` lines.
fn read_owner<'t>(
    lines: &mut impl Iterator<Item = (usize, &'t str)>,
) -> Result<PolicyOwner, PolicyFileError> {
    let mut field = |name: &str| -> Result<Vec<&'t str>, PolicyFileError> {
        let line = lines.next().map(|(_, line)| line).unwrap_or_default();
        let mut fields = line.split('\t');
        match fields.next() {
            Some(first) if first == name => Ok(fields.collect()),
            _ => Err(PolicyFileError::Damaged(format!(
                "it has no `{name}` line where one belongs"
            ))),
        }
    };
    let function = field("function")?;
    let (name, definition) = match function[..] {
        [name, definition] => (
            hex::decode(name).and_then(|bytes| String::from_utf8(bytes).ok()),
            hex::parse_u64(definition, 16..=16),
        ),
        _ => (None, None),
    };
    let (Some(function), Some(definition_hash)) = (name, definition) else {
        return Err(PolicyFileError::Damaged("a bad `function` line".to_owned()));
    };
    let mut hash = |what: &str| {
        let recorded = match field(what)?[..] {
            [hash] => hex::parse_u64(hash, 16..=16),
            _ => None,
        };
        recorded.ok_or_else(|| PolicyFileError::Damaged(format!("a bad `{what}` line")))
    };
    let compiler_hash = hash("compiler")?;
    let target_hash = hash("target")?;
    Ok(PolicyOwner {
        function,
        definition_hash,
        compiler_hash,
        target_hash,
    })
}

/// `0.0,1.2`: (argument, dim) positions, at least one, none twice.
fn parse_dims(text: &str) -> Option<Vec<(usize, usize)>> {
    let number = |digits: &str| {
        (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse::<usize>().ok())
            .flatten()
    };
    let dims: Vec<(usize, usize)> = text
        .split(',')
        .map(|position| {
            let (arg, dim) = position.split_once('.')?;
            Some((number(arg)?, number(dim)?))
        })
        .collect::<Option<_>>()?;
    let mut sorted = dims.clone();
    sorted.sort_unstable();
    sorted.dedup();
    (sorted.len() == dims.len()).then_some(dims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CapturedScalar, DType, Signature};

    const SCOPE: PolicyScope<'static> = PolicyScope {
        function: "mlp-layer",
        definition_hash: 0x5eaf,
        compiler: "3.13.0 @ abc",
        target: "--iree-hal-target-device=local\n--iree-llvmcpu-target-cpu=znver3",
    };

    fn mlp(batch: i64) -> Signature {
        Signature::builder()
            .arg(DType::F32, &[batch, 256])
            .arg(DType::F32, &[256, 256])
            .arg(DType::F32, &[256])
            .build()
    }

    fn learned() -> LearnedPolicy {
        let scaled = Signature::builder()
            .arg(DType::F32, &[-1])
            .captured(CapturedScalar::f32("t", 0.5))
            .build();
        LearnedPolicy::new(
            vec![
                (mlp(7).shape_class(), vec![(0, 0)]),
                (scaled.shape_class(), vec![(0, 0)]),
            ],
            vec![(mlp(-1), 40), (mlp(3), 2), (mlp(5), 1)],
            7,
        )
    }

    /// `text` with its end line made to match its other lines again, as a
    /// writer would have: damage the checksum does not catch.
    fn resealed(text: &str) -> String {
        let body = whole_body_unchecked(text);
        format!("{body}end\t{:016x}\n", stable_hash(body.as_bytes()))
    }

    fn whole_body_unchecked(text: &str) -> &str {
        let at = text.trim_end_matches('\n').rfind('\n').unwrap() + 1;
        &text[..at]
    }

    #[test]
    fn a_policy_round_trips_through_its_text() {
        let learned = learned();
        let text = learned.to_text(&SCOPE);
        assert!(text.starts_with(
            "sheaf-jit policy 2\nfunction\t6d6c702d6c61796572\t0000000000005eaf\ncompiler\t"
        ));
        assert!(
            text.contains("\ndynamic\t0.0\tf32[?,?];f32[?,?];f32[?]\t-\t-\t-\n"),
            "{text}"
        );
        assert!(
            text.contains("\nhot\t40\tf32[?,256];f32[256,256];f32[256]\t-\t-\t-\n"),
            "{text}"
        );
        let read = LearnedPolicy::from_text(&text, &SCOPE).unwrap();
        assert_eq!(read.sequence(), 0, "a sequence is the writer's");
        assert_eq!(
            read,
            LearnedPolicy {
                sequence: 0,
                ..learned
            }
        );
        let empty = LearnedPolicy::new(vec![], vec![], 1);
        assert_eq!(
            LearnedPolicy::from_text(&empty.to_text(&SCOPE), &SCOPE),
            Ok(LearnedPolicy::new(vec![], vec![], 0))
        );
    }

    #[test]
    fn damaged_text_is_refused_whole() {
        let text = learned().to_text(&SCOPE);
        let damaged = |text: &str| match LearnedPolicy::from_text(text, &SCOPE) {
            Err(PolicyFileError::Damaged(why)) => why,
            other => panic!("{other:?} for {text:?}"),
        };
        assert!(damaged("").contains("not a policy file"));
        assert!(damaged("garbage\x00\u{1F600}").contains("not a policy file"));
        let older = text.replacen("policy 2", "policy 1", 1);
        assert!(damaged(&older).contains("format is `sheaf-jit policy 1`"));
        // Cut anywhere, it lacks its end line or the hash does not match.
        for at in [text.len() - 1, text.len() / 2, FORMAT.len() + 1] {
            assert!(damaged(&text[..at]).contains("truncated"), "cut at {at}");
        }
        let flipped = text.replacen("hot\t40", "hot\t41", 1);
        assert!(damaged(&flipped).contains("truncated or changed"));
        // Lines that do not parse, their end line made to match.
        for (from, to, why) in [
            ("hot\t40", "hot\t0", "bad count"),
            ("hot\t40", "hot\t+4", "bad count"),
            ("hot\t40", "cold\t40", "unknown record"),
            ("dynamic\t0.0", "dynamic\t0.0,0.0", "bad dims"),
            ("dynamic\t0.0", "dynamic\t", "bad dims"),
            (
                "dynamic\t0.0\tf32[?,?]",
                "dynamic\t0.0\tf32[7,?]",
                "every dim dynamic",
            ),
            ("f32[?,256]", "f32[?,256", "not a signature"),
            ("\ncompiler\t", "\ncompiler\tx", "bad `compiler` line"),
            ("\ntarget\t", "\nthe target\t", "no `target` line"),
            ("\t-\t-\t-\n", "\t-\t-\n", "not a record"),
        ] {
            let changed = resealed(&text.replacen(from, to, 1));
            assert!(damaged(&changed).contains(why), "{from} -> {to}: {changed}");
        }
        let too_many: String = (0..=LearnedPolicy::MAX_HOT)
            .map(|n| format!("hot\t1\tf32[{n}]\t-\t-\t-\n"))
            .collect();
        let text = resealed(&text.replacen("hot\t40", &format!("{too_many}hot\t40"), 1));
        assert!(damaged(&text).contains("over the 64 and 64 kept"));
    }

    #[test]
    fn text_over_the_bound_is_refused() {
        let text = "x".repeat(LearnedPolicy::MAX_TEXT_BYTES + 1);
        assert_eq!(
            LearnedPolicy::from_text(&text, &SCOPE),
            Err(PolicyFileError::TooLarge {
                bytes: text.len() as u64
            })
        );
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "64 KiB of text written and read: over 3 minutes under miri, and \
                  only safe code of this crate on the way"
    )]
    fn text_over_the_bound_is_never_written() {
        // Signatures of 400 arguments: the text keeps what fits.
        let huge = |n: i64| {
            let mut builder = Signature::builder();
            for _ in 0..400 {
                builder.arg(DType::F32, &[n, 1 << 40]);
            }
            builder.build()
        };
        let hot = (0..64).map(|n| (huge(n), 1)).collect();
        let text = LearnedPolicy::new(vec![], hot, 1).to_text(&SCOPE);
        assert!(text.len() <= LearnedPolicy::MAX_TEXT_BYTES);
        let read = LearnedPolicy::from_text(&text, &SCOPE).unwrap();
        assert!((1..64).contains(&read.hot().len()), "{}", read.hot().len());
        assert_eq!(read.hot()[0].0, huge(0), "the most called stay");
    }

    #[test]
    fn a_policy_for_another_scope_is_stale() {
        let text = learned().to_text(&SCOPE);
        let stale = |scope: PolicyScope<'_>| match LearnedPolicy::from_text(&text, &scope) {
            Err(PolicyFileError::Stale(why)) => why,
            other => panic!("{other:?} for {scope:?}"),
        };
        let why = stale(PolicyScope {
            definition_hash: 0x5eb0,
            ..SCOPE
        });
        assert!(why.contains("another definition of `mlp-layer`"), "{why}");
        assert!(stale(PolicyScope {
            function: "mlp",
            ..SCOPE
        })
        .contains("of `mlp-layer`, not"));
        let why = stale(PolicyScope {
            compiler: "3.14.0 @ def",
            ..SCOPE
        });
        assert!(
            why.contains("another compiler than this process's `3.14.0 @ def`"),
            "{why}"
        );
        let why = stale(PolicyScope {
            target: "--iree-hal-target-device=local",
            ..SCOPE
        });
        assert!(why.contains("another target"), "{why}");
        // Dims the class does not have: another argument, a dim beyond the
        // rank.
        for dims in ["3.0", "0.2"] {
            let changed = resealed(&text.replacen("dynamic\t0.0", &format!("dynamic\t{dims}"), 1));
            let error = LearnedPolicy::from_text(&changed, &SCOPE).unwrap_err();
            assert!(
                matches!(&error, PolicyFileError::Stale(why) if why.contains("does not have")),
                "{dims}: {error}"
            );
        }
    }
}
