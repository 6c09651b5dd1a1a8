//! [`ArtifactKey`]: SHA-256 over everything that determines an artifact's
//! bytes.

use std::fmt;

use sha2::{Digest, Sha256};

use jit_cache::hex;

/// Bumped whenever what goes into the key changes meaning.
const DOMAIN: &str = "sheaf-jit/artifact-key-v2";

/// What determines a compiled artifact: the inputs of an [`ArtifactKey`].
///
/// The store does not interpret them; the caller supplies each as text
/// (see `sheaf-integration`'s runtime for the real values).
#[derive(Clone, Copy, Debug)]
#[expect(
    clippy::exhaustive_structs,
    reason = "every field is hashed into the artifact key: a new part is a new key format anyway \
        (bump `DOMAIN`), and callers must supply every part"
)]
pub struct KeyParts<'a> {
    /// The program: the MLIR text that is compiled.
    pub program: &'a str,
    /// The compiler build that compiles it (version and revision).
    pub compiler: &'a str,
    /// The runtime build that loads it.
    pub runtime: &'a str,
    /// The target: every compiler flag, with `host` resolved to this
    /// machine's CPU (an artifact for one CPU must not serve another).
    pub target: &'a str,
}

/// The key of one stored artifact: SHA-256 of its [`KeyParts`], each
/// length-prefixed so that field boundaries cannot shift.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArtifactKey([u8; 32]);

impl ArtifactKey {
    /// The key of `parts`.
    pub fn new(parts: &KeyParts<'_>) -> Self {
        let mut hasher = Sha256::new();
        for field in [
            DOMAIN,
            parts.compiler,
            parts.runtime,
            parts.target,
            parts.program,
        ] {
            hasher.update((field.len() as u64).to_le_bytes());
            hasher.update(field.as_bytes());
        }
        ArtifactKey(hasher.finalize().into())
    }

    /// The key of these 32 bytes (a hash made elsewhere in the crate).
    pub(crate) fn from_bytes(bytes: [u8; 32]) -> Self {
        ArtifactKey(bytes)
    }

    /// The 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lower-case hex: the entry's file name.
    pub fn hex(&self) -> String {
        hex::encode(&self.0)
    }

    /// The key whose [`hex`](Self::hex) is `text` (64 lower-case hex
    /// digits, as a bundle's manifest lists keys); `None` for any other
    /// text.
    pub fn from_hex(text: &str) -> Option<Self> {
        // The length first: no allocation for a long text.
        if text.len() != 64 {
            return None;
        }
        hex::decode(text)?.try_into().ok().map(ArtifactKey)
    }
}

impl fmt::Debug for ArtifactKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ArtifactKey({})", self.hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(program: &str, compiler: &str, target: &str) -> ArtifactKey {
        ArtifactKey::new(&KeyParts {
            program,
            compiler,
            runtime: "3.13.0.dev-abc",
            target,
        })
    }

    #[test]
    fn every_part_changes_the_key() {
        let base = key("module {}", "3.13 @ abc", "--a\n--b");
        assert_eq!(base, key("module {}", "3.13 @ abc", "--a\n--b"));
        assert_ne!(base, key("module { }", "3.13 @ abc", "--a\n--b"));
        assert_ne!(base, key("module {}", "3.13 @ abd", "--a\n--b"));
        assert_ne!(base, key("module {}", "3.13 @ abc", "--b\n--a"));
        // Length prefixes keep field boundaries apart.
        assert_ne!(
            key("ab", "c", "--t"),
            key("b", "ac", "--t"),
            "moving bytes between parts changes the key"
        );
        assert_eq!(base.hex().len(), 64);
        assert_eq!(ArtifactKey::from_hex(&base.hex()), Some(base));
        assert!(base
            .hex()
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    }

    #[test]
    fn only_a_keys_own_hex_parses_back() {
        let hex = key("module {}", "3.13 @ abc", "--a").hex();
        assert_eq!(
            ArtifactKey::from_hex(&hex).map(|k| k.hex()),
            Some(hex.clone())
        );
        for bad in [
            &hex[1..],
            &format!("{hex}0"),
            &hex.to_uppercase(),
            &format!("+{}", &hex[1..]),
            &format!("../{}", &hex[3..]),
            "",
        ] {
            assert_eq!(ArtifactKey::from_hex(bad), None, "{bad}");
        }
    }
}
