//! [`Escaped`]: a file name, path or other name read from disk, printed so
//! that it cannot forge output or drive the terminal, as `ls` and `git`
//! print names.
//!
//! A name that is plain text (valid UTF-8 with no control character, no
//! bidirectional-text control, no `"` and no `\`) is printed as it is, so
//! ordinary paths read the same as with `Path::display`. Any other name is
//! printed between double quotes with C escapes: `\n`, `\t`, `\r`, `\"`,
//! `\\`, `\xNN` for another ASCII control character (ESC is `\x1b`) and
//! for each byte that is not UTF-8, `\u{NNNN}` for a Unicode control or
//! bidirectional control. An escaped name is one line, and nothing in it
//! reaches the terminal as a control.

use std::ffi::OsStr;
use std::fmt::{self, Write};
use std::os::unix::ffi::OsStrExt;

/// `name` as the store's messages and `sheaf-jit-cache` print it (see the
/// module docs): as it is when it is plain text, else quoted and escaped.
///
/// ```
/// use jit_store::Escaped;
///
/// assert_eq!(Escaped::new("/tmp/cache/vmfb").to_string(), "/tmp/cache/vmfb");
/// assert_eq!(
///     Escaped::new("a\n  ok  b\x1b[2J").to_string(),
///     r#""a\n  ok  b\x1b[2J""#
/// );
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Escaped<'a>(&'a OsStr);

impl<'a> Escaped<'a> {
    /// `name` (a `Path`, `OsStr`, `str` or `String`), to print.
    pub fn new(name: &'a (impl AsRef<OsStr> + ?Sized)) -> Self {
        Escaped(name.as_ref())
    }
}

/// Whether `c` is printed escaped: a control character (C0, DEL, C1), a
/// bidirectional-text control, or a line or paragraph separator.
fn is_special(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
                | '\u{2028}' | '\u{2029}'
        )
}

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.0.as_bytes();
        if let Ok(text) = std::str::from_utf8(bytes) {
            if !text.chars().any(|c| is_special(c) || c == '"' || c == '\\') {
                return f.write_str(text);
            }
        }
        f.write_char('"')?;
        for chunk in bytes.utf8_chunks() {
            for c in chunk.valid().chars() {
                match c {
                    '\n' => f.write_str("\\n")?,
                    '\t' => f.write_str("\\t")?,
                    '\r' => f.write_str("\\r")?,
                    '"' => f.write_str("\\\"")?,
                    '\\' => f.write_str("\\\\")?,
                    c if c.is_ascii_control() => write!(f, "\\x{:02x}", c as u32)?,
                    c if is_special(c) => write!(f, "\\u{{{:04x}}}", c as u32)?,
                    c => f.write_char(c)?,
                }
            }
            for byte in chunk.invalid() {
                write!(f, "\\x{byte:02x}")?;
            }
        }
        f.write_char('"')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(name: &[u8]) -> String {
        Escaped::new(OsStr::from_bytes(name)).to_string()
    }

    #[test]
    fn plain_names_read_as_they_are() {
        for name in ["/tmp/cache/vmfb", "a b.policy", "café/ünï", "x#1 (2)", ""] {
            assert_eq!(shown(name.as_bytes()), name);
        }
    }

    #[test]
    fn other_names_are_one_quoted_line_without_controls() {
        let forged = b"x\n  ok       0123  authentic (1-byte artifact, tag verified)";
        assert_eq!(
            shown(forged),
            r#""x\n  ok       0123  authentic (1-byte artifact, tag verified)""#
        );
        assert_eq!(shown(b"\x1b[31mred\x07\x7f"), r#""\x1b[31mred\x07\x7f""#);
        assert_eq!(shown(b"a\tb\rc"), r#""a\tb\rc""#);
        assert_eq!(shown(b"not \xff\xfe utf-8"), r#""not \xff\xfe utf-8""#);
        assert_eq!(shown(b"say \"hi\" \\"), r#""say \"hi\" \\""#);
        assert_eq!(
            shown("\u{202e}txt.exe\u{9b}".as_bytes()),
            r#""\u{202e}txt.exe\u{009b}""#
        );
        for name in [&forged[..], b"\x1b]0;title\x07", b"\xc3", b"\r\n"] {
            let text = shown(name);
            assert!(!text.chars().any(is_special), "{text:?}");
        }
    }
}
