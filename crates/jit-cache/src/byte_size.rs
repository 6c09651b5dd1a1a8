//! [`ByteSize`]: the one parser and printer of byte counts in the
//! workspace (configuration values, reports, log lines).

use std::fmt;
use std::str::FromStr;

/// A number of bytes. Parsed from `4096`, `64K`, `512M`, `2G`, `1T` or the
/// same with `B`/`iB` (`512MiB`, `2 GB`), case-insensitive, always in binary
/// units (K = 1024); printed as `512 B`, `2 KiB`, `256 MiB`, `1.3 MiB`:
/// whole multiples of the unit print exactly (and parse back), others with
/// one decimal.
///
/// ```
/// use jit_cache::ByteSize;
///
/// let size: ByteSize = "512M".parse().unwrap();
/// assert_eq!(size.0, 512 << 20);
/// assert_eq!(size.to_string(), "512 MiB");
/// assert_eq!(size.to_string().parse(), Ok(size));
/// assert_eq!(ByteSize(1_400_000).to_string(), "1.3 MiB");
/// assert!("lots".parse::<ByteSize>().is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[expect(
    clippy::exhaustive_structs,
    reason = "a transparent newtype over a byte count: callers read and build the `u64` directly, \
        and it will never hold more"
)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// What a size may be, for messages about one that is not.
    pub const SYNTAX: &'static str =
        "a number of bytes, or one with K, M, G or T (binary units, e.g. `512M`)";
}

impl From<usize> for ByteSize {
    fn from(bytes: usize) -> Self {
        ByteSize(bytes as u64)
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
        if self.0 < 1024 {
            return f.pad(&format!("{} B", self.0));
        }
        let mut unit = 0;
        while self.0 >> (10 * (unit + 2)) != 0 && unit + 1 < UNITS.len() {
            unit += 1;
        }
        let scale = 1u64 << (10 * (unit + 1));
        if self.0.is_multiple_of(scale) {
            f.pad(&format!("{} {}", self.0 / scale, UNITS[unit]))
        } else {
            f.pad(&format!(
                "{:.1} {}",
                self.0 as f64 / scale as f64,
                UNITS[unit]
            ))
        }
    }
}

/// A text that is not a [`ByteSize`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a size: write {}", ByteSize::SYNTAX)]
pub struct ParseByteSizeError {
    text: String,
}

impl FromStr for ByteSize {
    type Err = ParseByteSizeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = || ParseByteSizeError {
            text: text.to_owned(),
        };
        let upper = text.trim().to_ascii_uppercase();
        let number = upper
            .strip_suffix("IB")
            .or_else(|| upper.strip_suffix('B'))
            .unwrap_or(&upper)
            .trim_end();
        let (digits, shift) = match number.as_bytes().last() {
            Some(b'K') => (&number[..number.len() - 1], 10),
            Some(b'M') => (&number[..number.len() - 1], 20),
            Some(b'G') => (&number[..number.len() - 1], 30),
            Some(b'T') => (&number[..number.len() - 1], 40),
            _ => (number, 0),
        };
        let digits = digits.trim_end();
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(error());
        }
        let value: u64 = digits.parse().map_err(|_| error())?;
        value
            .checked_mul(1 << shift)
            .map(ByteSize)
            .ok_or_else(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes() {
        let parse = |text: &str| text.parse::<ByteSize>().ok().map(|size| size.0);
        assert_eq!(parse("123"), Some(123));
        assert_eq!(parse("4k"), Some(4096));
        assert_eq!(parse("2 MiB"), Some(2 << 20));
        assert_eq!(parse("512M"), Some(512 << 20));
        assert_eq!(parse("1G"), Some(1 << 30));
        assert_eq!(parse("1GB"), Some(1 << 30));
        assert_eq!(parse(" 3T "), Some(3 << 40));
        for bad in ["lots", "", "M", "-1", "1.5G", "99999999999G", "1 2", "0x10"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn sizes_print_with_binary_units() {
        assert_eq!(ByteSize(512).to_string(), "512 B");
        assert_eq!(ByteSize(2048).to_string(), "2 KiB");
        assert_eq!(ByteSize(1536).to_string(), "1.5 KiB");
        assert_eq!(ByteSize(256 << 20).to_string(), "256 MiB");
        assert_eq!(ByteSize(3 << 30).to_string(), "3 GiB");
        assert_eq!(ByteSize((1 << 20) - 1).to_string(), "1024.0 KiB");
        assert_eq!(ByteSize(5 << 40).to_string(), "5 TiB");
        assert_eq!(ByteSize(u64::MAX).to_string(), "16777216.0 TiB");
        assert_eq!(format!("{:>8}", ByteSize(1)), "     1 B");
    }
}
