//! Lower-case hex, for the bytes of names and keys, and the numbers, in
//! the JIT's text formats (signature text, policy files; jit-store's
//! artifact keys and file names): the workspace's one hex codec.
//!
//! ```
//! use jit_cache::hex;
//!
//! let text = hex::encode(b"k\x00");
//! assert_eq!(text, "6b00");
//! assert_eq!(hex::decode(&text).as_deref(), Some(&b"k\x00"[..]));
//! assert_eq!(hex::parse_u64("ff", 1..=16), Some(255));
//! assert_eq!(hex::decode("6B"), None); // upper case is not what encode writes
//! ```

use std::fmt::Write;

/// Appends `bytes` to `out` as lower-case hex, two digits a byte.
pub fn encode_into(out: &mut String, bytes: &[u8]) {
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
}

/// `bytes` as lower-case hex, two digits a byte.
#[must_use]
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(2 * bytes.len());
    encode_into(&mut out, bytes);
    out
}

/// The bytes written by [`encode_into`]; `None` for anything else (an odd
/// length, a character that is not a lower-case hex digit).
#[must_use]
pub fn decode(text: &str) -> Option<Vec<u8>> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    let text = text.as_bytes();
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.chunks_exact(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

/// The number written in `text` in lower-case hex, with a number of digits
/// in `digits` (a sign, which `from_str_radix` would take, is refused).
pub fn parse_u64(text: &str, digits: impl std::ops::RangeBounds<usize>) -> Option<u64> {
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    (digits.contains(&text.len()) && text.bytes().all(hex))
        .then(|| u64::from_str_radix(text, 16).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_nothing_else_decodes() {
        let mut text = String::new();
        encode_into(&mut text, b"k\x00\xff");
        assert_eq!(text, "6b00ff");
        assert_eq!(decode(&text).as_deref(), Some(&b"k\x00\xff"[..]));
        assert_eq!(decode("").as_deref(), Some(&[][..]));
        for bad in ["6", "6B", "6g", "+6", "é1"] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
