//! Debian packages the tests need (a real `redis-server`, Mesa's software
//! Vulkan device), installed with `apt-get` when missing: CI runs on a
//! fresh Debian machine as root. macOS has no `apt-get`: there the error
//! names the Homebrew formula to install instead ([`BREW`]), or says that
//! the step is Linux's; what Homebrew installed is found in
//! `/opt/homebrew/bin` even when that is not on the `PATH` (`host.rs`).

use std::process::Command;

use anyhow::{anyhow, Context, Result};

use crate::host::Os;
use crate::process;

/// Homebrew's formula for each Debian package that has one; the others
/// (Mesa's lavapipe, the aarch64 cross toolchain, qemu-user) serve
/// Linux-only steps.
const BREW: &[(&str, &str)] = &[("redis-server", "redis")];

/// What to run on macOS instead of installing `packages` with `apt-get`.
fn macos_instead(packages: &[&str]) -> String {
    let formulas: Vec<&str> = packages
        .iter()
        .filter_map(|package| BREW.iter().find(|(debian, _)| debian == package))
        .map(|(_, formula)| *formula)
        .collect();
    if formulas.len() == packages.len() {
        format!("on macOS, `brew install {}`", formulas.join(" "))
    } else {
        format!(
            "Debian's {} serve a Linux-only step, which does not run on macOS",
            packages.join(", ")
        )
    }
}

/// Installs `packages` unless `present` says they are there already
/// (`apt-get update` first only if the install fails); `hint` says how to
/// do without, for the error when installing fails.
pub(crate) fn ensure(packages: &[&str], present: impl Fn() -> bool, hint: &str) -> Result<()> {
    if present() {
        return Ok(());
    }
    if Os::current() == Os::Macos {
        return Err(anyhow!("{}; {hint}", macos_instead(packages)));
    }
    let install = || {
        process::run(
            Command::new("apt-get")
                .args(["install", "-y", "--no-install-recommends"])
                .args(packages)
                .env("DEBIAN_FRONTEND", "noninteractive"),
        )
    };
    install()
        .or_else(|_| -> Result<()> {
            process::run(Command::new("apt-get").arg("update"))?;
            install()
        })
        .with_context(|| format!("installing Debian's {} failed; {hint}", packages.join(", ")))?;
    if present() {
        Ok(())
    } else {
        Err(anyhow!(
            "apt-get installed {}, but they are still not found; {hint}",
            packages.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macos_is_told_the_homebrew_formula_or_that_the_step_is_linux_only() {
        assert_eq!(
            macos_instead(&["redis-server"]),
            "on macOS, `brew install redis`"
        );
        assert!(macos_instead(&["qemu-user"]).contains("Linux-only"));
    }
}
