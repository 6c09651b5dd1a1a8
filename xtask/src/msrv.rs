//! The oldest Rust the crates declare (`rust-version` in the workspace's
//! `Cargo.toml`) builds them: `cargo +<rust-version> check` of every target
//! and feature, installing that toolchain with rustup when it is missing.

use anyhow::{Context, Result};

use crate::process::{self, step};

pub(crate) fn check(prefix: &std::path::Path) -> Result<()> {
    let manifest = process::workspace_root().join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("cannot read {}", manifest.display()))?;
    let version = rust_version(&text)
        .with_context(|| format!("{} declares no rust-version", manifest.display()))?;
    let toolchain = format!("+{version}");
    step(
        &format!("installing the Rust {version} toolchain (if missing)"),
        || process::ensure_toolchain(version, &["--version"], &[]),
    )?;
    step(
        &format!("cargo {toolchain} check --workspace --all-targets --all-features (rust-version)"),
        || {
            process::run(process::cargo_with_iree(prefix).args([
                &toolchain,
                "check",
                "--workspace",
                "--all-targets",
                "--all-features",
            ]))
        },
    )
}

/// The value of the first `rust-version = "…"` line.
fn rust_version(manifest: &str) -> Option<&str> {
    manifest.lines().find_map(|line| {
        let value = line.trim().strip_prefix("rust-version")?.trim_start();
        value
            .strip_prefix('=')?
            .trim()
            .strip_prefix('"')?
            .strip_suffix('"')
    })
}

#[cfg(test)]
mod tests {
    use super::rust_version;

    #[test]
    fn the_workspace_declares_a_rust_version() {
        let text =
            std::fs::read_to_string(crate::process::workspace_root().join("Cargo.toml")).unwrap();
        let version = rust_version(&text).expect("rust-version in the workspace manifest");
        assert!(version.starts_with("1."), "{version}");
        assert_eq!(rust_version("rust-version.workspace = true"), None);
    }
}
