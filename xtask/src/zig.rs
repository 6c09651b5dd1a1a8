//! Zig as macOS's C toolchain on Linux: PyPI's `ziglang` wheel (zig, its
//! clang, the macOS libc headers of `lib/libc/include/any-macos-any` and a
//! `libSystem.tbd` stub) and `cargo-zigbuild` (Cargo with zig as the
//! linker), both pinned and installed into `target/venv` like the other
//! tools (`tools.rs`).
//!
//! What zig has of Apple's SDK is the C library (libSystem: libc, libm,
//! pthreads, dyld) and nothing of the frameworks: no `Metal/Metal.h`, no
//! `Foundation`, no `Security`. So the runtime's CPU drivers cross-compile
//! for `aarch64-apple-darwin` and a binary links, but neither the Metal
//! driver nor anything that links an Apple framework does.

use std::path::PathBuf;

use anyhow::{anyhow, Result};

use crate::tools;

/// The pinned zig (0.15.2: clang 20, macOS 15 libc headers).
const ZIGLANG_REQUIREMENT: &str = "ziglang==0.15.2";

/// The pinned `cargo zigbuild` (a prebuilt wheel: no `cargo install`).
const CARGO_ZIGBUILD_REQUIREMENT: &str = "cargo-zigbuild==0.24.1";

/// The installed zig.
#[derive(Debug)]
pub(crate) struct Zig {
    /// The `zig` executable of the wheel.
    pub(crate) exe: PathBuf,
    /// Its `lib/` folder (headers, libc stubs).
    lib: PathBuf,
}

impl Zig {
    /// Installs the pinned zig and cargo-zigbuild into the venv if missing.
    pub(crate) fn ensure() -> Result<Self> {
        tools::ensure_requirements(&[ZIGLANG_REQUIREMENT, CARGO_ZIGBUILD_REQUIREMENT])?;
        let root = tools::site_packages()?.join("ziglang");
        let zig = Zig {
            exe: root.join("zig"),
            lib: root.join("lib"),
        };
        let missing = [zig.exe.clone(), zig.macos_headers(), zig.builtin_headers()]
            .into_iter()
            .find(|path| !path.exists());
        match missing {
            Some(missing) => Err(anyhow!(
                "{} is missing from {ZIGLANG_REQUIREMENT}; remove target/venv and run the command \
                 again",
                missing.display()
            )),
            None => Ok(zig),
        }
    }

    /// macOS's C library headers (`<pthread.h>`, `<os/lock.h>`, ...).
    pub(crate) fn macos_headers(&self) -> PathBuf {
        self.lib.join("libc/include/any-macos-any")
    }

    /// clang's builtin headers (`<stddef.h>`, `<stdarg.h>`, ...).
    pub(crate) fn builtin_headers(&self) -> PathBuf {
        self.lib.join("include")
    }
}
