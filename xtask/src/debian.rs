//! Debian packages the tests need (a real `redis-server`, Mesa's software
//! Vulkan device), installed with `apt-get` when missing: CI runs on a
//! fresh Debian machine as root.

use std::process::Command;

use anyhow::{anyhow, Context, Result};

use crate::process;

/// Installs `packages` unless `present` says they are there already
/// (`apt-get update` first only if the install fails); `hint` says how to
/// do without, for the error when installing fails.
pub(crate) fn ensure(packages: &[&str], present: impl Fn() -> bool, hint: &str) -> Result<()> {
    if present() {
        return Ok(());
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
