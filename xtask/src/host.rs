//! What differs between the hosts `cargo xtask build-iree` runs on: Linux
//! (x86_64, the project's machines) and macOS on Apple Silicon (Sheaf's
//! other platform; xtask has never run on a Mac, its macOS branches are
//! unit-tested on Linux through [`Os::Macos`]: README.md, "Platforms").
//!
//! On macOS the default HAL drivers are the two CPU drivers and Metal (IREE
//! builds its Metal driver only for Apple Silicon); Vulkan and CUDA are
//! Linux's. The tools come from Homebrew instead of Debian's packages
//! (`debian.rs` says which), and Homebrew's folders of programs are
//! searched after the `PATH` ([`path_with_tool_dirs`]); shared libraries
//! end in `.dylib`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Result};

/// The operating system xtask runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Os {
    Linux,
    Macos,
}

impl Os {
    /// The host's (any other system is treated as Linux, whose commands
    /// then say what is missing).
    pub(crate) fn current() -> Self {
        Self::of(std::env::consts::OS)
    }

    /// The system Rust's `target_os` (or `std::env::consts::OS`) names.
    pub(crate) fn of(target_os: &str) -> Self {
        match target_os {
            "macos" => Os::Macos,
            _ => Os::Linux,
        }
    }

    /// The suffix of a shared library's file name (`so`, `dylib`).
    pub(crate) fn dylib_extension(self) -> &'static str {
        match self {
            Os::Linux => "so",
            Os::Macos => "dylib",
        }
    }

    /// Rust's `target_os` of the system.
    fn target_os(self) -> &'static str {
        match self {
            Os::Linux => "linux",
            Os::Macos => "macos",
        }
    }

    /// The HAL drivers `build-iree` builds when `--drivers` is not given:
    /// the CPU drivers and every GPU driver Sheaf ships on the system (on
    /// Linux Vulkan and CUDA, whose headers `build-iree` installs when
    /// missing; on macOS Metal). The list is the iree-sys build script's
    /// (`crates/iree-sys/build/drivers.rs`), whose `platform-gpu` feature
    /// builds the same.
    pub(crate) fn default_drivers(self) -> Vec<&'static str> {
        let mut list = drivers::CPU.to_vec();
        list.extend(drivers::platform_gpu(self.target_os()));
        list
    }

    /// The drivers IREE builds on this system.
    pub(crate) fn buildable_drivers(self) -> &'static [&'static str] {
        drivers::buildable(self.target_os())
    }

    /// The CMake definitions that build exactly `drivers` on this system.
    pub(crate) fn driver_defines(self, drivers: &[String]) -> Vec<String> {
        drivers::cmake_defines(self.target_os(), drivers)
    }
}

/// Every driver `--drivers` may name.
pub(crate) const ALL_DRIVERS: [&str; 5] = drivers::ALL;

/// The CPU drivers, which every build has.
pub(crate) const CPU_DRIVERS: [&str; 2] = drivers::CPU;

/// Homebrew's folders of programs, on Apple Silicon and on Intel Macs: a
/// shell that has not run `brew shellenv` (a CI job, an IDE's terminal)
/// lacks them.
const HOMEBREW_BIN: &[&str] = &["/opt/homebrew/bin", "/usr/local/bin"];

/// `path` (the `PATH`) with the folders where `os`'s package manager puts
/// programs appended, those it lacks (on Linux it is left as it is).
/// xtask sets its own `PATH` to this at start-up, so that its lookups and
/// the programs it starts (tests that look for `redis-server`) agree.
pub(crate) fn path_with_tool_dirs(os: Os, path: Option<OsString>) -> OsString {
    let mut dirs: Vec<PathBuf> = path
        .as_deref()
        .map(|path| std::env::split_paths(path).collect())
        .unwrap_or_default();
    if os == Os::Macos {
        for dir in HOMEBREW_BIN.iter().map(PathBuf::from) {
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    std::env::join_paths(dirs).unwrap_or_else(|_| path.unwrap_or_default())
}

/// The host's default drivers.
pub(crate) fn default_drivers() -> Vec<&'static str> {
    Os::current().default_drivers()
}

/// Fails for a driver the host cannot build.
pub(crate) fn check_drivers(drivers: &[String]) -> Result<()> {
    check_drivers_on(Os::current(), drivers)
}

fn check_drivers_on(os: Os, drivers: &[String]) -> Result<()> {
    for driver in drivers {
        if !os.buildable_drivers().contains(&driver.as_str()) {
            bail!(
                "the {driver} driver does not build on {os:?}; choose from {}",
                os.buildable_drivers().join(", ")
            );
        }
    }
    Ok(())
}

/// The Apple frameworks the runtime with `drivers` links.
pub(crate) fn frameworks(drivers: &[String]) -> Vec<String> {
    drivers::frameworks(drivers)
}

/// The driver list and CMake driver options, shared with the iree-sys build
/// script.
#[path = "../../crates/iree-sys/build/drivers.rs"]
mod drivers;

/// The CPU's model name from /proc/cpuinfo, for the caption of a
/// measured figure (`an <arch> CPU` where it names none).
pub(crate) fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|cpuinfo| {
            cpuinfo
                .lines()
                .filter_map(|line| line.split_once(':'))
                .find(|(key, _)| key.trim() == "model name")
                .map(|(_, value)| value.trim().to_owned())
        })
        .unwrap_or_else(|| format!("an {} CPU", std::env::consts::ARCH))
}

/// Today's date in UTC, `YYYY-MM-DD` (`date -u`), for the caption of a
/// measured figure.
pub(crate) fn utc_date() -> Result<String> {
    let date = crate::process::output(Command::new("date").args(["-u", "+%Y-%m-%d"]))?;
    Ok(date.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|d| d.to_string()).collect()
    }

    #[test]
    fn macos_builds_metal_and_linux_the_gpu_drivers_it_ships() {
        assert!(Os::of("macos").default_drivers().contains(&"metal"));
        assert!(!Os::of("linux").default_drivers().contains(&"metal"));
        assert!(check_drivers_on(Os::Macos, &names(&["local-task", "metal"])).is_ok());
        let error = check_drivers_on(Os::Linux, &names(&["metal"])).unwrap_err();
        assert!(
            error.to_string().contains("does not build on Linux"),
            "{error}"
        );
        assert!(check_drivers_on(Os::Macos, &names(&["cuda"])).is_err());
        assert_eq!(Os::of("macos").dylib_extension(), "dylib");
    }

    #[test]
    fn homebrew_is_searched_after_the_path_on_macos_only() {
        let path = Some(OsString::from("/usr/bin:/opt/homebrew/bin"));
        assert_eq!(
            path_with_tool_dirs(Os::Macos, path.clone()),
            "/usr/bin:/opt/homebrew/bin:/usr/local/bin"
        );
        assert_eq!(
            path_with_tool_dirs(Os::Linux, path),
            "/usr/bin:/opt/homebrew/bin"
        );
        assert_eq!(
            path_with_tool_dirs(Os::Macos, None),
            "/opt/homebrew/bin:/usr/local/bin"
        );
    }

    #[test]
    fn metal_links_the_frameworks_iree_links_it_with() {
        assert_eq!(
            frameworks(&names(&["local-task", "metal"])),
            ["CoreGraphics", "Foundation", "Metal"]
        );
        assert!(frameworks(&names(&["local-task", "vulkan"])).is_empty());
    }
}
