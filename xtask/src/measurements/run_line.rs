//! The run line of a section's record: when, at which commit and on what
//! machine, under what load, the command ran (taken as it starts).

use std::process::Command;
use std::time::SystemTime;

use anyhow::{Context, Result};

use crate::process::{output, workspace_root};

/// `Run on DATE (UTC) at commit SHA[-dirty], CPU, N cores, load L1 L5 L15
/// (from /proc/loadavg at start).`, for a run starting now.
pub(super) fn now() -> Result<String> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    Ok(format!(
        "Run on {} (UTC) at commit {}, {}, {cores} cores, load {} (from /proc/loadavg at start).",
        utc_date(SystemTime::now())?,
        commit()?,
        cpu_model()?,
        load()?,
    ))
}

/// `YYYY-MM-DD` of `time` in UTC.
fn utc_date(time: SystemTime) -> Result<String> {
    let seconds = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .context("the system clock is before 1970: set it, then rerun")?
        .as_secs();
    let days = i64::try_from(seconds / 86_400).context("the system clock is far in the future")?;
    let (year, month, day) = civil_date(days);
    Ok(format!("{year:04}-{month:02}-{day:02}"))
}

/// The proleptic Gregorian (year, month, day) of `days` after 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
fn civil_date(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `git`, in the workspace root, never taking the index's lock (others may
/// be editing the tree).
fn git(args: &[&str]) -> Result<String> {
    output(
        Command::new("git")
            .current_dir(workspace_root())
            .arg("--no-optional-locks")
            .args(args),
    )
    .context("the run line names the commit: run this in a git checkout, with git installed")
}

/// HEAD's short hash, `-dirty` when the tree differs from it.
fn commit() -> Result<String> {
    let sha = git(&["rev-parse", "--short", "HEAD"])?;
    let dirty = !git(&["status", "--porcelain"])?.trim().is_empty();
    Ok(format!(
        "{}{}",
        sha.trim(),
        if dirty { "-dirty" } else { "" }
    ))
}

/// The CPU's model name from /proc/cpuinfo (the architecture where it has
/// none).
fn cpu_model() -> Result<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo")
        .context("cannot read /proc/cpuinfo: `cargo xtask measurements` runs on Linux")?;
    let model = cpuinfo
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(key, _)| key.trim() == "model name")
        .map(|(_, value)| value.trim().to_owned());
    Ok(model.unwrap_or_else(|| format!("an {} CPU", std::env::consts::ARCH)))
}

/// The 1, 5 and 15 minute load averages, as /proc/loadavg writes them.
fn load() -> Result<String> {
    let loadavg = std::fs::read_to_string("/proc/loadavg")
        .context("cannot read /proc/loadavg: `cargo xtask measurements` runs on Linux")?;
    let averages: Vec<&str> = loadavg.split_whitespace().take(3).collect();
    anyhow::ensure!(
        averages.len() == 3,
        "/proc/loadavg has no three load averages: `{}`",
        loadavg.trim()
    );
    Ok(averages.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_civil_dates() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(20_000), (2024, 10, 4));
        assert_eq!(civil_date(20_793), (2026, 12, 6));
        assert_eq!(civil_date(-1), (1969, 12, 31));
    }

    #[test]
    fn a_run_line_is_what_the_document_reads() {
        let line = now().unwrap();
        assert!(super::super::document::is_run_line(&line), "{line}");
        assert!(line.ends_with(" (from /proc/loadavg at start)."), "{line}");
    }
}
