//! `cargo xtask macos-check`: the library crates type-check for macOS on
//! Apple Silicon (`aarch64-apple-darwin`), from Linux, with every feature.
//!
//! Nothing is built for or run on a Mac here: there is no macOS SDK or
//! linker on Linux, so iree-sys runs in its bindings-only mode
//! (`IREE_SYS_BINDINGS_ONLY=1`: no IREE runtime built or linked,
//! `crates/iree-sys/build/main.rs`) and `cargo check` stops before code
//! generation. It catches what `cfg(target_os = "macos")` code and the
//! Linux-only assumptions of the others break; it cannot catch a link or
//! run failure (README.md, "Platforms").

use anyhow::Result;

use crate::process::{self, step};

/// The Rust target of Apple Silicon Macs.
pub(crate) const TARGET: &str = "aarch64-apple-darwin";

/// The library crates (packages), which an application on a Mac links.
pub(crate) const LIBRARY_PACKAGES: &[&str] = &[
    "iree-runtime-sys",
    "iree-safe",
    "jit-cache",
    "sheaf-integration",
];

/// `cargo check`'s arguments for the type-check.
pub(crate) fn check_args() -> Vec<&'static str> {
    let mut args = vec!["check", "--target", TARGET, "--all-features", "--lib"];
    for package in LIBRARY_PACKAGES {
        args.extend(["--package", package]);
    }
    args
}

pub(crate) fn run() -> Result<()> {
    step(
        &format!("the Rust standard library for {TARGET} (rustup target add, if missing)"),
        || process::run(std::process::Command::new("rustup").args(["target", "add", TARGET])),
    )?;
    step(
        &format!(
            "IREE_SYS_BINDINGS_ONLY=1 cargo {} (type-check only: never linked or run)",
            check_args().join(" ")
        ),
        || {
            process::run(
                std::process::Command::new("cargo")
                    .current_dir(process::workspace_root())
                    .args(check_args())
                    .env("IREE_SYS_BINDINGS_ONLY", "1")
                    // Its own folder: the host's builds keep theirs.
                    .env(
                        "CARGO_TARGET_DIR",
                        process::workspace_root().join("target/macos-check"),
                    ),
            )
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_library_crate_is_checked_for_the_mac_target_with_every_feature() {
        let args = check_args().join(" ");
        assert!(args.starts_with("check --target aarch64-apple-darwin --all-features"));
        let manifest =
            std::fs::read_to_string(process::workspace_root().join("Cargo.toml")).unwrap();
        for member in ["crates/iree-sys", "crates/iree-safe", "crates/jit-cache"] {
            assert!(manifest.contains(member), "{member}");
        }
        assert_eq!(LIBRARY_PACKAGES.len(), 4, "{args}");
    }
}
