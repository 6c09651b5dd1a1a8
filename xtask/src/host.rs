//! What differs between the hosts `cargo xtask build-iree` runs on: Linux
//! (x86_64, the project's machines) and macOS on Apple Silicon (Sheaf's
//! other platform; this code has been type-checked only, never run on a
//! Mac: README.md, "Platforms").
//!
//! On macOS the default HAL drivers are the two CPU drivers and Metal (IREE
//! builds its Metal driver only for Apple Silicon); Vulkan and CUDA are
//! Linux's. The tools come from Homebrew instead of Debian's packages
//! (`debian.rs` says which), and shared libraries end in `.dylib`.

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
    fn metal_links_the_frameworks_iree_links_it_with() {
        assert_eq!(
            frameworks(&names(&["local-task", "metal"])),
            ["CoreGraphics", "Foundation", "Metal"]
        );
        assert!(frameworks(&names(&["local-task", "vulkan"])).is_empty());
    }
}
