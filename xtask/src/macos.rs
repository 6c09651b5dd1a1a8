//! `cargo xtask macos-check`: the library crates type-check for macOS on
//! Apple Silicon (`aarch64-apple-darwin`), from Linux, with every feature
//! but TLS for the remote cache.
//!
//! Nothing is built for or run on a Mac here: there is no macOS SDK or
//! linker on Linux, so iree-sys runs in its bindings-only mode
//! (`IREE_SYS_BINDINGS_ONLY=1`: no IREE runtime built or linked,
//! `crates/iree-sys/build/main.rs`) and `cargo check` stops before code
//! generation. It catches what `cfg(target_os = "macos")` code and the
//! Linux-only assumptions of the others break; it cannot catch a link or
//! run failure (README.md, "Platforms"). TLS (jit-cache's `remote-tls`,
//! sheaf-integration's `remote-cache-tls`) is left out: its `ring`
//! compiles C and assembly in its build script even for `cargo check`,
//! which needs Apple's C toolchain; the Rust of the TLS path has no
//! platform-specific code of its own.

use anyhow::Result;

use crate::process::{self, step};

/// The Rust target of Apple Silicon Macs.
pub(crate) const TARGET: &str = "aarch64-apple-darwin";

/// Every feature of the library crates but TLS (see the module docs).
const FEATURES: &str = "iree-safe/in-process-compiler,jit-cache/store,jit-cache/remote,\
                        jit-cache/serde,sheaf-integration/disk-cache,\
                        sheaf-integration/remote-cache,sheaf-integration/in-process-compiler,\
                        sheaf-integration/serde,sheaf-integration/cli";

/// `cargo check`'s arguments for the type-check.
pub(crate) fn check_args() -> Vec<&'static str> {
    let mut args = vec![
        "check",
        "--target",
        TARGET,
        "--no-default-features",
        "--features",
        FEATURES,
        "--lib",
    ];
    // The published crates, which an application on a Mac links.
    for package in crate::package::LIBRARY_CRATES {
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
    fn every_library_crate_is_checked_for_the_mac_target_with_every_feature_but_tls() {
        let args = check_args().join(" ");
        assert!(args.starts_with("check --target aarch64-apple-darwin --no-default-features"));
        for feature in [
            "sheaf-integration/remote-cache",
            "jit-cache/serde",
            "sheaf-integration/cli",
        ] {
            assert!(args.contains(feature), "{args}");
        }
        assert!(!args.contains("tls"), "{args}");
        for package in [
            "iree-runtime-sys",
            "iree-safe",
            "jit-cache",
            "sheaf-integration",
        ] {
            assert!(args.contains(&format!("--package {package}")), "{args}");
        }
    }
}
