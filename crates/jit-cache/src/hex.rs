//! Lower-case hex, for the bytes of names and keys in text formats.

use std::fmt::Write;

/// Appends `bytes` to `out` as lower-case hex, two digits a byte.
pub(crate) fn encode_into(out: &mut String, bytes: &[u8]) {
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
}

/// The bytes written by [`encode_into`]; `None` for anything else (an odd
/// length, a character that is not a lower-case hex digit).
pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
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
