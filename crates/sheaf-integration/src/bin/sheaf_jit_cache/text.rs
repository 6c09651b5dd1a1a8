//! Durations on the command line (`--older-than 7d`) and ages in the
//! output (`3h ago`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The units a duration may have, in seconds.
const UNITS: [(&str, u64); 5] = [
    ("w", 7 * 86_400),
    ("d", 86_400),
    ("h", 3600),
    ("m", 60),
    ("s", 1),
];

/// `90s`, `30m`, `12h`, `7d`, `2w`: a whole number and one unit.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let expected = || "expected a whole number and a unit: s, m, h, d or w (`7d`)".to_owned();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(expected)?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| expected())?;
    let (_, seconds) = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .ok_or_else(expected)?;
    number
        .checked_mul(*seconds)
        .map(Duration::from_secs)
        .ok_or_else(|| "too long".to_owned())
}

/// How long ago `then` was, in its largest whole unit: `42s ago`, `3h
/// ago`; `in the future` for a clock that went back.
pub(crate) fn age(then: SystemTime) -> String {
    let Ok(age) = SystemTime::now().duration_since(then) else {
        return "in the future".to_owned();
    };
    let seconds = age.as_secs();
    let (unit, size) = UNITS
        .iter()
        .find(|(_, size)| seconds >= *size)
        .unwrap_or(&("s", 1));
    format!("{}{unit} ago", seconds / size)
}

/// [`age`] of a time given in seconds since the Unix epoch.
pub(crate) fn age_of(seconds: u64) -> String {
    age(UNIX_EPOCH + Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_one_unit() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2w"), Ok(Duration::from_secs(14 * 86_400)));
        for bad in ["", "7", "d", "7 d", "7days", "-1d", "1.5h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(parse_duration("99999999999999999999w").is_err());
    }

    #[test]
    fn ages_read_in_their_largest_unit() {
        let ago = |seconds| age(SystemTime::now() - Duration::from_secs(seconds));
        assert_eq!(ago(5), "5s ago");
        assert_eq!(ago(7200 + 59), "2h ago");
        assert_eq!(ago(3 * 86_400), "3d ago");
    }
}
