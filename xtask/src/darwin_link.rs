//! `cargo xtask darwin-link`: a test executable of sheaf-integration for
//! macOS on Apple Silicon (`aarch64-apple-darwin`), compiled and linked on
//! Linux, never run.
//!
//! 1. Rust's standard library for the target (`rustup target add`);
//! 2. zig and cargo-zigbuild (PyPI's wheels, pinned in `zig.rs`, into
//!    `target/venv`);
//! 3. `build-iree --target aarch64-apple-darwin`: the runtime's CPU drivers
//!    cross-compiled with zig (`cross.rs`; a no-op when current);
//! 4. `cargo zigbuild test --no-run --lib` of sheaf-integration against
//!    that install, zig as the linker, in its own folder
//!    (`target/darwin-link`), and `file` on the executable (`Mach-O 64-bit
//!    arm64 executable`).
//!
//! The library's test executable is the one linked: one link (each
//! integration test is another of the same size), and it holds the whole
//! library, every crate below it (iree-sys with its bindgen layout tests,
//! which rustc evaluates for the target: clang's sizes, alignments and
//! offsets checked against rustc's) and the IREE runtime, whose every
//! symbol it references must resolve against zig's libSystem. Every feature
//! is on but the remote cache's TLS ([`FEATURES`]): `remote-cache-tls`
//! brings rustls-native-certs, whose macOS side is security-framework,
//! which links Apple's Security and CoreFoundation frameworks, and zig
//! ships no frameworks (the link fails with `unable to find framework
//! 'Security'`; ring itself, C and assembly, compiles with zig).
//!
//! What it cannot catch: anything at run time (README.md, "Platforms").

use std::process::Command;

use anyhow::{anyhow, Context, Result};

use crate::cross::DARWIN;
use crate::process::{self, step};
use crate::zig::Zig;
use crate::{build_iree, debian};

/// sheaf-integration's features but TLS (see the module docs).
const FEATURES: &str = "disk-cache,remote-cache,in-process-compiler,serde,cli";

/// Its own target folder: the host's builds keep theirs.
const TARGET_DIR: &str = "target/darwin-link";

/// `cargo zigbuild`'s arguments.
fn zigbuild_args() -> Vec<&'static str> {
    vec![
        "test",
        "--no-run",
        "--target",
        DARWIN.triple,
        "--package",
        "sheaf-integration",
        "--lib",
        "--no-default-features",
        "--features",
        FEATURES,
        "--message-format=json-render-diagnostics",
    ]
}

pub(crate) fn run() -> Result<()> {
    let started = std::time::Instant::now();
    let triple = DARWIN.triple;
    step(
        &format!("the Rust standard library for {triple} (rustup target add, if missing)"),
        || process::run(Command::new("rustup").args(["target", "add", triple])),
    )?;
    let zig = step(
        "zig and cargo-zigbuild (installing PyPI's wheels if missing)",
        Zig::ensure,
    )?;
    let manifest = build_iree::run(&build_iree::Options::from_args(&["--target", triple])?)?;
    let executable = step(
        &format!(
            "cargo zigbuild {} (linked with zig, never run)",
            zigbuild_args().join(" ")
        ),
        || {
            let messages = process::output(
                Command::new(Zig::cargo_zigbuild())
                    .current_dir(process::workspace_root())
                    .args(zigbuild_args())
                    .env("CARGO_ZIGBUILD_ZIG_PATH", &zig.exe)
                    .env("IREE_DIR", &manifest.prefix)
                    .env_remove("IREE_SOURCE_DIR")
                    .env(
                        "CARGO_TARGET_DIR",
                        process::workspace_root().join(TARGET_DIR),
                    )
                    .stderr(std::process::Stdio::inherit()),
            )?;
            test_executable(&messages).ok_or_else(|| {
                anyhow!("cargo zigbuild named no test executable of sheaf-integration's library")
            })
        },
    )?;
    debian::ensure(
        &["file"],
        || crate::cross::on_path("file").is_some(),
        "install `file` (`apt-get install file`) to see what was linked",
    )?;
    let described = process::output(Command::new("file").arg("-b").arg(&executable))
        .context("`file` failed on the test executable")?;
    let described = described.trim();
    eprintln!("[xtask] {}: {described}", executable);
    if !described.starts_with("Mach-O 64-bit arm64 executable") {
        return Err(anyhow!(
            "{executable} is not a Mach-O arm64 executable ({described}); see the link above"
        ));
    }
    eprintln!(
        "[xtask] darwin-link: done in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The test executable of sheaf-integration's library among Cargo's JSON
/// `messages`.
fn test_executable(messages: &str) -> Option<String> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .filter(|message| message["profile"]["test"] == true)
        .filter(|message| message["target"]["name"] == "sheaf_integration")
        .find_map(|message| message["executable"].as_str().map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_test_is_linked_with_every_feature_but_tls() {
        let args = zigbuild_args().join(" ");
        assert!(args.starts_with("test --no-run --target aarch64-apple-darwin"));
        for feature in ["disk-cache", "remote-cache", "in-process-compiler", "cli"] {
            assert!(FEATURES.split(',').any(|f| f == feature), "{FEATURES}");
        }
        assert!(!args.contains("tls"), "{args}");
        assert!(args.contains("--package sheaf-integration --lib"), "{args}");
    }

    #[test]
    fn the_executable_is_the_library_test_of_sheaf_integration() {
        let messages = [
            r#"{"reason":"compiler-artifact","target":{"name":"sheaf_integration"},"profile":{"test":false},"executable":null}"#,
            r#"{"reason":"compiler-artifact","target":{"name":"jit_cache"},"profile":{"test":true},"executable":"/t/jit"}"#,
            r#"{"reason":"compiler-artifact","target":{"name":"sheaf_integration"},"profile":{"test":true},"executable":"/t/sheaf_integration-1"}"#,
            r#"{"reason":"build-finished","success":true}"#,
        ]
        .join("\n");
        assert_eq!(
            test_executable(&messages).as_deref(),
            Some("/t/sheaf_integration-1")
        );
        assert_eq!(test_executable(&messages[..messages.len() / 3]), None);
    }
}
