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

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};

use crate::cross::Compilers;

use crate::tools;

/// The pinned zig (0.15.2: clang 20, macOS 15 libc headers).
pub(crate) const ZIGLANG_REQUIREMENT: &str = "ziglang==0.15.2";

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

    /// The venv's `cargo-zigbuild`.
    pub(crate) fn cargo_zigbuild() -> PathBuf {
        tools::venv_dir().join("bin/cargo-zigbuild")
    }

    /// Writes `zig-cc`, `zig-c++`, `zig-ar` and `zig-ranlib` into `dir`:
    /// one executable each for CMake, running `zig cc` or `zig c++` for
    /// `target` (`aarch64-macos.11.0`), or zig's `ar` or `ranlib`.
    pub(crate) fn write_tools(&self, dir: &Path, target: &str) -> Result<Compilers> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let write = |name: &str, command: &str| -> Result<PathBuf> {
            let path = dir.join(name);
            std::fs::write(&path, wrapper_script(&self.exe, command))
                .with_context(|| format!("cannot write {}", path.display()))?;
            make_executable(&path)?;
            Ok(path)
        };
        Ok(Compilers {
            cc: write("zig-cc", &format!("cc -target {target}"))?,
            cxx: write("zig-c++", &format!("c++ -target {target}"))?,
            archiver: Some((write("zig-ar", "ar")?, write("zig-ranlib", "ranlib")?)),
        })
    }
}

/// The shell script that runs `zig COMMAND "$@"`.
///
/// zig reads `-march` as a CPU's name, so CMake's checks for IREE's arm64
/// ukernel variants (`-march=armv8.2-a+fp16`, `+dotprod`, `+i8mm`, ...)
/// fail and those variants are configured off. Nothing is lost: the
/// runtime library has no ukernel in it (they are compiled into the
/// executables `iree-compile` emits), on Linux either.
fn wrapper_script(zig: &Path, command: &str) -> String {
    format!(
        "#!/bin/sh\n# Written by xtask (zig.rs): one of zig's tools as CMake's.\nexec '{}' \
         {command} \"$@\"\n",
        zig.display()
    )
}

fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrappers_run_zig_for_the_target_with_every_argument() {
        let dir = tempfile::tempdir().unwrap();
        // A stand-in for zig that prints its arguments, one a line.
        let fake = dir.path().join("zig");
        std::fs::write(&fake, "#!/bin/sh\nprintf '%s\\n' \"$@\"\n").unwrap();
        make_executable(&fake).unwrap();
        let zig = Zig {
            exe: fake,
            lib: dir.path().join("lib"),
        };
        let tools = zig.write_tools(dir.path(), "aarch64-macos.11.0").unwrap();
        let run = |tool: &Path, args: &[&str]| {
            let output = std::process::Command::new(tool)
                .args(args)
                .output()
                .unwrap();
            assert!(output.status.success(), "{output:?}");
            String::from_utf8(output.stdout).unwrap()
        };
        assert_eq!(
            run(&tools.cxx, &["-O3", "a b.cc"]),
            "c++\n-target\naarch64-macos.11.0\n-O3\na b.cc\n"
        );
        assert_eq!(
            run(&tools.cc, &["-c"]),
            "cc\n-target\naarch64-macos.11.0\n-c\n"
        );
        let (ar, _) = tools.archiver.unwrap();
        assert_eq!(run(&ar, &["qc", "x.a"]), "ar\nqc\nx.a\n");
    }
}
