//! This process's memory figures, from `/proc/self/status` (Linux).

/// The field `field` of `/proc/self/status` in KiB (`VmRSS`, `VmHWM`,
/// `RssAnon`, `RssFile`).
///
/// # Panics
///
/// When the file cannot be read or has no such field.
pub fn kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc/self/status");
    parse_kib(&status, field).unwrap_or_else(|| panic!("{field} in /proc/self/status"))
}

/// This process's resident set size in bytes (`VmRSS`).
///
/// # Panics
///
/// As [`kib`].
pub fn rss_bytes() -> u64 {
    kib("VmRSS") * 1024
}

/// This process's resident set size in MiB (`VmRSS`).
///
/// # Panics
///
/// As [`kib`].
pub fn rss_mib() -> f64 {
    kib("VmRSS") as f64 / 1024.0
}

/// The value in KiB of `field` in the text of a `/proc/PID/status`.
fn parse_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::parse_kib;

    #[test]
    fn fields_are_read_by_their_whole_name() {
        let status = "VmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nRssAnon:\t 512 kB\n";
        assert_eq!(parse_kib(status, "VmRSS"), Some(1024));
        assert_eq!(parse_kib(status, "VmHWM"), Some(2048));
        assert_eq!(parse_kib(status, "Rss"), None);
    }
}
