//! The value syntaxes of the compile variables: a compile target
//! (`SHEAF_JIT_TARGET`), compiler flags with shell-like quoting
//! (`SHEAF_JIT_COMPILER_FLAGS`), capacities per function
//! (`SHEAF_JIT_FUNCTION_CAPACITY`), and trusted keys
//! (`SHEAF_JIT_TRUSTED_KEYS`). Each parser says, on error, what the value
//! may be; the caller names the variable.

use std::collections::HashMap;

use iree_safe::compiler::CompileTarget;

/// What `SHEAF_JIT_TARGET` may be.
pub(super) const TARGET_SYNTAX: &str = "`cpu:<llvm cpu>[:<triple>]` (`cpu:host`, `cpu:x86-64-v3`, `cpu:generic`), `cuda:<sm_XY>`, `vulkan:<target>`, `hip:<gfx...>` or `metal`";

/// A compile target: `cpu:NAME[:TRIPLE]`, `cuda:ARCH`, `vulkan:TARGET`,
/// `hip:ARCH` or `metal`.
pub(super) fn target(text: &str) -> Result<CompileTarget, String> {
    let mut parts = text.splitn(3, ':');
    let kind = parts.next().unwrap_or_default();
    let name = parts.next().filter(|name| !name.is_empty());
    let rest = parts.next().filter(|rest| !rest.is_empty());
    let target = match (kind, name, rest) {
        ("cpu", Some(cpu), triple) => CompileTarget::Cpu {
            cpu: cpu.to_owned(),
            triple: triple.map(str::to_owned),
        },
        ("cuda", Some(arch), None) => CompileTarget::Cuda {
            arch: arch.to_owned(),
        },
        ("vulkan", Some(target), None) => CompileTarget::Vulkan {
            target: target.to_owned(),
            features: Vec::new(),
        },
        ("hip", Some(arch), None) => CompileTarget::Hip {
            arch: arch.to_owned(),
        },
        ("metal", None, None) => CompileTarget::Metal,
        _ => return Err(TARGET_SYNTAX.to_owned()),
    };
    Ok(target)
}

/// Flags separated by blanks; `'...'` and `"..."` keep blanks in a flag
/// (no escapes, no expansion: a quote of the other kind is an ordinary
/// character inside them). Each flag must start with `-`.
pub(super) fn flags(text: &str) -> Result<Vec<String>, String> {
    let mut flags = Vec::new();
    let mut word: Option<String> = None;
    let mut quote = None;
    for c in text.chars() {
        match (quote, c) {
            (Some(open), c) if c == open => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, c) if c.is_whitespace() => flags.extend(word.take()),
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    if let Some(open) = quote {
        return Err(format!(
            "flags separated by blanks, quoted with ' or \" (a {open} is not closed)"
        ));
    }
    flags.extend(word);
    if let Some(bad) = flags.iter().find(|flag| !flag.starts_with('-')) {
        return Err(format!(
            "flags separated by blanks, each starting with `-` (`{bad}` does not)"
        ));
    }
    Ok(flags)
}

/// `name=N` pairs separated by `,`, each name once, each capacity in
/// [`FUNCTION_CAPACITY`](crate::config::ranges::FUNCTION_CAPACITY). A
/// function never defined cannot be told from one defined later, so names
/// are taken as they are.
pub(super) fn capacities(text: &str) -> Result<HashMap<String, usize>, String> {
    let range = crate::config::ranges::FUNCTION_CAPACITY;
    let syntax = format!(
        "`function=capacity` pairs separated by `,` (`softmax=2,mlp_layer=16`), each function \
         once, each capacity {}",
        range.describe()
    );
    let mut capacities = HashMap::new();
    for pair in text
        .split(',')
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
    {
        let (name, number) = pair.split_once('=').ok_or_else(|| syntax.clone())?;
        let name = name.trim();
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '=') {
            return Err(format!("{syntax}: `{pair}` names no function"));
        }
        let number: u64 = number
            .trim()
            .parse()
            .map_err(|error| format!("{syntax}: `{pair}` ({error})"))?;
        if !range.contains(number) {
            return Err(format!("{syntax}: `{pair}` is out of range"));
        }
        let number = usize::try_from(number).map_err(|_| format!("{syntax}: `{pair}`"))?;
        if capacities.insert(name.to_owned(), number).is_some() {
            return Err(format!("{syntax}: `{name}` is named twice"));
        }
    }
    Ok(capacities)
}

/// Public keys (`ed25519:...`) and files of them, separated by blanks or
/// commas.
pub(super) fn trusted_keys(text: &str) -> Result<Vec<crate::config::TrustedKey>, String> {
    use crate::config::TrustedKey;
    use jit_store::PublicKey;

    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|item| !item.is_empty())
        .map(|item| match item.starts_with(PublicKey::PREFIX) {
            true => item.parse().map(TrustedKey::Key).map_err(|_| {
                format!(
                    "public keys (`ed25519:` and 64 lower-case hex digits) or paths of files of \
                     them, separated by blanks or commas (`{item}` is not a key)"
                )
            }),
            false => Ok(TrustedKey::File(item.into())),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_by_kind() {
        assert_eq!(
            target("cpu:x86-64-v3").unwrap(),
            CompileTarget::Cpu {
                cpu: "x86-64-v3".into(),
                triple: None
            }
        );
        assert_eq!(
            target("cpu:generic:aarch64-unknown-linux-gnu").unwrap(),
            CompileTarget::Cpu {
                cpu: "generic".into(),
                triple: Some("aarch64-unknown-linux-gnu".into())
            }
        );
        assert_eq!(
            target("cuda:sm_80").unwrap(),
            CompileTarget::Cuda {
                arch: "sm_80".into()
            }
        );
        assert_eq!(target("metal").unwrap(), CompileTarget::Metal);
        for bad in ["cpu", "cpu:", "gpu:x", "metal:x", "cuda:sm_80:x", ""] {
            assert_eq!(target(bad).unwrap_err(), TARGET_SYNTAX, "{bad}");
        }
    }

    #[test]
    fn flags_split_on_blanks_and_keep_quoted_ones_whole() {
        assert_eq!(
            flags(" --a=1\t--b='x y'  \"--c=it's\" ").unwrap(),
            ["--a=1", "--b=x y", "--c=it's"]
        );
        assert_eq!(flags("").unwrap(), Vec::<String>::new());
        assert!(flags("--a='open").unwrap_err().contains("is not closed"));
        assert!(flags("--a b").unwrap_err().contains("`b` does not"));
    }

    #[test]
    fn capacities_are_name_number_pairs() {
        let parsed = capacities("softmax=2, mlp_layer = 16,").unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!((parsed["softmax"], parsed["mlp_layer"]), (2, 16));
        assert!(capacities("softmax").is_err());
        assert!(capacities("softmax=two")
            .unwrap_err()
            .contains("`softmax=two`"));
        assert!(capacities("=2").is_err());
        // Failed before ranges and duplicates were checked: the second
        // `softmax` won silently, and 0 or 2^64 reached the cache.
        let twice = capacities("softmax=2,softmax=3").unwrap_err();
        assert!(twice.contains("`softmax` is named twice"), "{twice}");
        for bad in ["softmax=0", "softmax=65537", "softmax=18446744073709551616"] {
            assert!(capacities(bad).is_err(), "{bad}");
        }
        assert!(capacities("soft max=2")
            .unwrap_err()
            .contains("names no function"));
        assert_eq!(capacities("softmax=65536").unwrap()["softmax"], 65_536);
    }
}
