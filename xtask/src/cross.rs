//! Cross builds of the IREE runtime for another target
//! (`cargo xtask build-iree --target aarch64-unknown-linux-gnu` or
//! `--target aarch64-apple-darwin`).
//!
//! The runtime is built with a cross toolchain through a CMake toolchain
//! file written into the build's folder. Each [`Target`] names its kind of
//! [`Toolchain`]: for Linux-aarch64 Debian's GNU cross toolchain
//! (`gcc-aarch64-linux-gnu`, `g++-aarch64-linux-gnu`, installed when
//! missing); for macOS on Apple Silicon zig (`zig.rs`: PyPI's `ziglang`,
//! pinned, in `target/venv`), whose `zig cc -target aarch64-macos.11.0`
//! brings macOS's libc headers and libSystem's stubs, called through small
//! wrapper scripts (`zig-cc`, `zig-c++`, `zig-ar`, `zig-ranlib` in
//! `target/zig/<triple>/`) since CMake wants one executable per tool.
//! zig has none of Apple's frameworks, so that build carries the CPU
//! drivers only: the Metal driver needs `Metal/Metal.h` and the Metal,
//! Foundation and CoreGraphics frameworks of Apple's SDK ([`METAL_MISSING`]).
//!
//! IREE's build runs two of its own tools while it builds (`iree-flatcc-cli`,
//! which generates the bytecode module's flatbuffer code, and
//! `iree-c-embed-data`); a cross build cannot run what it compiles, so, as
//! IREE's own cross builds do (`build_tools/cmake/build_riscv.sh`), they
//! are built natively first, in `target/iree/host-tools-<hash>/`, and named
//! by `IREE_HOST_BIN_DIR`.
//!
//! A cross install gets its own key folder like any other, and its manifest
//! is recorded as `target/iree/manifest-<triple>.json`: the host's
//! `target/iree/manifest.json` is never touched. Its system libraries are
//! `runtime-libs.txt`'s (`m`, `pthread`, `dl`) for macOS too: there they
//! are names of libSystem (Apple's SDK has `libm.tbd`, `libpthread.tbd` and
//! `libdl.tbd` as its aliases; zig's linker resolves them to its
//! `libSystem.tbd`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, Context, Result};

use crate::build_log::BuildLog;
use crate::process::{self, step};
use crate::zig::Zig;
use crate::{debian, host, source, tools};

/// A target the runtime can be cross-built for.
#[derive(Debug)]
pub(crate) struct Target {
    /// Rust's target triple, which is also LLVM's (`aarch64-unknown-linux-gnu`).
    pub(crate) triple: &'static str,
    /// `CMAKE_SYSTEM_NAME`.
    system: &'static str,
    /// `CMAKE_SYSTEM_PROCESSOR`.
    processor: &'static str,
    /// The cross toolchain that builds for it.
    toolchain: Toolchain,
}

/// The kinds of cross toolchain.
#[derive(Debug)]
enum Toolchain {
    /// Debian's GNU cross toolchain.
    Gnu(&'static Gnu),
    /// zig (`zig.rs`), for this zig target (`aarch64-macos.11.0`).
    Zig(&'static str),
}

/// A GNU cross toolchain of Debian's.
#[derive(Debug)]
pub(crate) struct Gnu {
    /// Its prefix (`aarch64-linux-gnu`): its programs are `<prefix>-gcc`
    /// and `<prefix>-g++`, its C library is in `/usr/<prefix>`.
    prefix: &'static str,
    /// Debian's packages of it.
    packages: &'static [&'static str],
}

/// Debian's toolchain for Linux on 64-bit ARM.
pub(crate) const AARCH64_GNU: Gnu = Gnu {
    prefix: "aarch64-linux-gnu",
    packages: &["gcc-aarch64-linux-gnu", "g++-aarch64-linux-gnu"],
};

/// Linux on 64-bit ARM.
pub(crate) const AARCH64: Target = Target {
    triple: "aarch64-unknown-linux-gnu",
    system: "Linux",
    processor: "aarch64",
    toolchain: Toolchain::Gnu(&AARCH64_GNU),
};

/// macOS on Apple Silicon (11.0, the first there, as Rust's target).
pub(crate) const DARWIN: Target = Target {
    triple: "aarch64-apple-darwin",
    system: "Darwin",
    processor: "arm64",
    toolchain: Toolchain::Zig("aarch64-macos.11.0"),
};

/// Every target `--target` accepts.
const TARGETS: &[&Target] = &[&AARCH64, &DARWIN];

/// The HAL drivers a cross build may carry: the CPU's. The GPU drivers need
/// the GPU vendor's headers and libraries for the target.
const CPU_DRIVERS: [&str; 2] = host::CPU_DRIVERS;

/// Why the macOS cross build has no Metal driver (what
/// `cargo xtask build-iree --target aarch64-apple-darwin --drivers metal`
/// stopped at when allowed: README.md, "Platforms").
pub(crate) const METAL_MISSING: &str = "the Metal driver needs Apple's SDK (`Metal/Metal.h`, \
    the Metal, Foundation and CoreGraphics frameworks), which zig does not ship: build it on a \
    Mac";

/// The tools IREE's build runs, built natively for a cross build.
const HOST_TOOLS: &[&str] = &["iree-flatcc-cli", "iree-c-embed-data"];

/// The runtime's CMake options (shared with `build_iree.rs` and the iree-sys
/// build script), which keep the host tools' configure step short: no
/// compiler, tests or samples.
const RUNTIME_OPTIONS: &str = include_str!("../../crates/iree-sys/build/runtime-options.txt");

impl Target {
    /// The target named by `triple`.
    pub(crate) fn parse(triple: &str) -> Result<&'static Target> {
        TARGETS
            .iter()
            .copied()
            .find(|target| target.triple == triple)
            .ok_or_else(|| {
                let known: Vec<&str> = TARGETS.iter().map(|t| t.triple).collect();
                anyhow!(
                    "cannot cross-build for `{triple}`; choose from {}",
                    known.join(", ")
                )
            })
    }

    /// The drivers of a cross build: those `named` (by `--drivers`), which
    /// must be CPU drivers, else the CPU drivers.
    pub(crate) fn drivers(&self, named: Option<Vec<String>>) -> Result<Vec<String>> {
        let Some(named) = named else {
            return Ok(CPU_DRIVERS.iter().map(|d| (*d).to_owned()).collect());
        };
        match named.iter().find(|d| !CPU_DRIVERS.contains(&d.as_str())) {
            Some(driver) if driver == "metal" && matches!(self.toolchain, Toolchain::Zig(_)) => {
                Err(anyhow!(
                    "no `metal` in a build for {} from Linux: {METAL_MISSING}",
                    self.triple
                ))
            }
            Some(driver) => Err(anyhow!(
                "a build for {} carries the CPU drivers only ({}), not `{driver}`",
                self.triple,
                CPU_DRIVERS.join(", ")
            )),
            None => Ok(named),
        }
    }

    /// What identifies the target's build in an install's key: its triple,
    /// and for zig the pinned ziglang (another zig, another build).
    pub(crate) fn key(&self) -> String {
        match self.toolchain {
            Toolchain::Gnu(_) => self.triple.to_owned(),
            Toolchain::Zig(_) => format!("{} {}", self.triple, crate::zig::ZIGLANG_REQUIREMENT),
        }
    }

    /// Cargo's variable `CARGO_TARGET_<TRIPLE>_<KEY>` for this target
    /// (`KEY` is `LINKER`, `RUNNER`, ...).
    pub(crate) fn cargo_env(&self, key: &str) -> String {
        format!(
            "CARGO_TARGET_{}_{key}",
            self.triple.to_uppercase().replace('-', "_")
        )
    }

    /// Makes sure the cross toolchain is installed (Debian's packages, or
    /// zig into the venv, when missing); returns the C and C++ compilers
    /// and, for zig, its `ar` and `ranlib`.
    pub(crate) fn ensure_toolchain(&self) -> Result<Compilers> {
        match self.toolchain {
            Toolchain::Gnu(gnu) => gnu.ensure(self.triple),
            Toolchain::Zig(zig_target) => {
                let dir = process::workspace_root()
                    .join("target/zig")
                    .join(self.triple);
                Zig::ensure()?.write_tools(&dir, zig_target)
            }
        }
    }

    /// Where the manifest of this target's install is recorded:
    /// `target/iree/manifest-<triple>.json`.
    pub(crate) fn manifest_path(&self) -> PathBuf {
        process::workspace_root()
            .join("target/iree")
            .join(format!("manifest-{}.json", self.triple))
    }

    /// Prepares the cross build in `root` (the install's key folder): the
    /// toolchain, IREE's host tools and the toolchain file. Returns the
    /// CMake options that make the runtime's build a cross build.
    pub(crate) fn prepare(
        &self,
        source: &source::Source,
        tools: &tools::Tools,
        root: &Path,
        log: &mut BuildLog,
    ) -> Result<Vec<String>> {
        let compilers = step(
            &format!(
                "the {} cross compilers (installing {} if missing)",
                self.triple,
                self.toolchain.packages()
            ),
            || self.ensure_toolchain(),
        )?;
        let host_bin = step(
            &format!("building IREE's host tools ({})", HOST_TOOLS.join(", ")),
            || host_tools(source, tools, log),
        )?;
        let toolchain_file = root.join("toolchain.cmake");
        std::fs::create_dir_all(root)
            .and_then(|()| std::fs::write(&toolchain_file, self.toolchain_file(&compilers)))
            .with_context(|| format!("cannot write {}", toolchain_file.display()))?;
        Ok(vec![
            format!("-DCMAKE_TOOLCHAIN_FILE={}", toolchain_file.display()),
            format!("-DIREE_HOST_BIN_DIR={}", host_bin.display()),
        ])
    }

    /// The CMake toolchain file: the target system, its compilers, and for
    /// a GNU toolchain its C library as the only place to find libraries
    /// and headers (zig finds its own).
    fn toolchain_file(&self, compilers: &Compilers) -> String {
        let mut file = format!(
            "# Written by `cargo xtask build-iree --target {triple}`.\n\
             set(CMAKE_SYSTEM_NAME {system})\n\
             set(CMAKE_SYSTEM_PROCESSOR {processor})\n\
             set(CMAKE_C_COMPILER {cc})\n\
             set(CMAKE_CXX_COMPILER {cxx})\n",
            triple = self.triple,
            system = self.system,
            processor = self.processor,
            cc = compilers.cc.display(),
            cxx = compilers.cxx.display(),
        );
        if let Some((ar, ranlib)) = &compilers.archiver {
            file += &format!(
                "set(CMAKE_AR {})\nset(CMAKE_RANLIB {})\n",
                ar.display(),
                ranlib.display()
            );
        }
        if let Toolchain::Gnu(gnu) = self.toolchain {
            file += &format!(
                "set(CMAKE_FIND_ROOT_PATH {})\n\
                 set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)\n\
                 set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)\n\
                 set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)\n\
                 set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)\n",
                gnu.sysroot().display()
            );
        }
        file
    }
}

impl Toolchain {
    /// What is installed for it when missing, for the terminal.
    fn packages(&self) -> String {
        match self {
            Toolchain::Gnu(gnu) => gnu.packages.join(", "),
            Toolchain::Zig(_) => "ziglang into target/venv".to_owned(),
        }
    }
}

/// A cross toolchain's programs.
#[derive(Debug)]
pub(crate) struct Compilers {
    /// The C compiler (also the Rust linker of a GNU toolchain).
    pub(crate) cc: PathBuf,
    /// The C++ compiler.
    pub(crate) cxx: PathBuf,
    /// `ar` and `ranlib`, when not the host's (zig's, whose archives
    /// macOS's linker reads).
    pub(crate) archiver: Option<(PathBuf, PathBuf)>,
}

impl Gnu {
    /// The C compiler.
    pub(crate) fn gcc(&self) -> String {
        format!("{}-gcc", self.prefix)
    }

    /// The target's C library and headers (`/usr/aarch64-linux-gnu`).
    pub(crate) fn sysroot(&self) -> PathBuf {
        Path::new("/usr").join(self.prefix)
    }

    /// Makes sure the compilers for `triple` are installed (Debian's
    /// packages, installed when missing).
    fn ensure(&self, triple: &str) -> Result<Compilers> {
        let gxx = format!("{}-g++", self.prefix);
        let found = || Some((on_path(&self.gcc())?, on_path(&gxx)?));
        debian::ensure(
            self.packages,
            || found().is_some(),
            &format!(
                "building for {triple} needs its cross compilers: install them as root (`apt-get \
                 install {}`)",
                self.packages.join(" ")
            ),
        )?;
        let (cc, cxx) =
            found().with_context(|| format!("{} or {gxx} is not on the PATH", self.gcc()))?;
        Ok(Compilers {
            cc,
            cxx,
            archiver: None,
        })
    }
}

/// The first `program` in the folders of `PATH`.
pub(crate) fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// Builds IREE's host tools natively, in a folder of their own keyed by the
/// source (`target/iree/host-tools-<hash>/`), and returns the folder
/// holding them. Quick when they are built already.
fn host_tools(
    source: &source::Source,
    tools: &tools::Tools,
    log: &mut BuildLog,
) -> Result<PathBuf> {
    let source_dir = source.dir.to_str().unwrap_or("");
    let key = process::short_hash(&[source.version.as_str(), source_dir]);
    let build_dir = process::workspace_root()
        .join("target/iree")
        .join(format!("host-tools-{key}"));
    if !build_dir.join("CMakeCache.txt").exists() {
        let mut cmake = Command::new(&tools.cmake);
        cmake
            .args(["-G", "Ninja", "-S"])
            .arg(&source.dir)
            .arg("-B")
            .arg(&build_dir)
            .arg(format!("-DCMAKE_MAKE_PROGRAM={}", tools.ninja.display()))
            .args(
                RUNTIME_OPTIONS
                    .lines()
                    .filter(|line| !line.is_empty() && !line.starts_with('#'))
                    .map(|option| format!("-D{option}")),
            );
        log.run(&mut cmake)?;
    }
    log.run(
        Command::new(&tools.cmake)
            .arg("--build")
            .arg(&build_dir)
            .arg("--target")
            .args(HOST_TOOLS),
    )?;
    // IREE puts its tools in `<build>/tools` (RUNTIME_OUTPUT_DIRECTORY).
    let bin = build_dir.join("tools");
    match HOST_TOOLS.iter().find(|tool| !bin.join(tool).is_file()) {
        Some(missing) => Err(anyhow!(
            "IREE's build did not produce {}; see {}",
            bin.join(missing).display(),
            log.path().display()
        )),
        None => Ok(bin),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_targets_and_cpu_drivers_are_accepted() {
        let target = Target::parse("aarch64-unknown-linux-gnu").unwrap();
        assert_eq!(AARCH64_GNU.gcc(), "aarch64-linux-gnu-gcc");
        assert_eq!(
            target.cargo_env("RUNNER"),
            "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER"
        );
        let unknown = Target::parse("riscv64gc-unknown-linux-gnu")
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("aarch64-unknown-linux-gnu"), "{unknown}");
        assert!(unknown.contains("aarch64-apple-darwin"), "{unknown}");
        assert_eq!(target.drivers(None).unwrap(), ["local-sync", "local-task"]);
        assert_eq!(
            target.drivers(Some(vec!["local-sync".into()])).unwrap(),
            ["local-sync"]
        );
        let cuda = target
            .drivers(Some(vec!["cuda".into()]))
            .unwrap_err()
            .to_string();
        assert!(cuda.contains("CPU drivers only"), "{cuda}");
    }

    #[test]
    fn metal_is_refused_for_the_mac_saying_what_is_missing() {
        let darwin = Target::parse("aarch64-apple-darwin").unwrap();
        assert_eq!(darwin.drivers(None).unwrap(), ["local-sync", "local-task"]);
        // Linux-aarch64's install keys are what they were; zig's name its
        // version.
        assert_eq!(AARCH64.key(), "aarch64-unknown-linux-gnu");
        assert!(darwin.key().contains("ziglang=="), "{}", darwin.key());
        let metal = darwin
            .drivers(Some(vec!["local-task".into(), "metal".into()]))
            .unwrap_err()
            .to_string();
        assert!(metal.contains("Metal/Metal.h"), "{metal}");
        let linux_metal = AARCH64
            .drivers(Some(vec!["metal".into()]))
            .unwrap_err()
            .to_string();
        assert!(linux_metal.contains("CPU drivers only"), "{linux_metal}");
    }

    #[test]
    fn the_toolchain_file_names_the_system_and_compilers() {
        let gnu = Compilers {
            cc: "/usr/bin/aarch64-linux-gnu-gcc".into(),
            cxx: "/usr/bin/aarch64-linux-gnu-g++".into(),
            archiver: None,
        };
        let file = AARCH64.toolchain_file(&gnu);
        for line in [
            "set(CMAKE_SYSTEM_NAME Linux)",
            "set(CMAKE_SYSTEM_PROCESSOR aarch64)",
            "set(CMAKE_C_COMPILER /usr/bin/aarch64-linux-gnu-gcc)",
            "set(CMAKE_CXX_COMPILER /usr/bin/aarch64-linux-gnu-g++)",
            "set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)",
        ] {
            assert!(file.lines().any(|l| l == line), "{line} in\n{file}");
        }
        assert!(!file.contains("CMAKE_AR"), "{file}");
        let zig = Compilers {
            cc: "/z/zig-cc".into(),
            cxx: "/z/zig-c++".into(),
            archiver: Some(("/z/zig-ar".into(), "/z/zig-ranlib".into())),
        };
        let file = DARWIN.toolchain_file(&zig);
        for line in [
            "set(CMAKE_SYSTEM_NAME Darwin)",
            "set(CMAKE_SYSTEM_PROCESSOR arm64)",
            "set(CMAKE_C_COMPILER /z/zig-cc)",
            "set(CMAKE_AR /z/zig-ar)",
            "set(CMAKE_RANLIB /z/zig-ranlib)",
        ] {
            assert!(file.lines().any(|l| l == line), "{line} in\n{file}");
        }
        assert!(!file.contains("CMAKE_FIND_ROOT_PATH"), "{file}");
    }
}
