//! Cross builds of the IREE runtime for another Linux architecture
//! (`cargo xtask build-iree --target aarch64-unknown-linux-gnu`).
//!
//! The runtime is built with Debian's GNU cross toolchain
//! (`gcc-aarch64-linux-gnu`, `g++-aarch64-linux-gnu`, installed when
//! missing) through a CMake toolchain file written into the build's folder.
//! IREE's build runs two of its own tools while it builds (`iree-flatcc-cli`,
//! which generates the bytecode module's flatbuffer code, and
//! `iree-c-embed-data`); a cross build cannot run what it compiles, so, as
//! IREE's own cross builds do (`build_tools/cmake/build_riscv.sh`), they
//! are built natively first, in `target/iree/host-tools-<hash>/`, and named
//! by `IREE_HOST_BIN_DIR`.
//!
//! A cross install gets its own key folder like any other, and its manifest
//! is recorded as `target/iree/manifest-<triple>.json`: the host's
//! `target/iree/manifest.json` is never touched.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, Context, Result};

use crate::build_log::BuildLog;
use crate::process::{self, step};
use crate::{debian, source, tools};

/// A Linux architecture the runtime can be cross-built for.
#[derive(Debug)]
pub(crate) struct Target {
    /// Rust's target triple, which is also LLVM's (`aarch64-unknown-linux-gnu`).
    pub(crate) triple: &'static str,
    /// `CMAKE_SYSTEM_PROCESSOR`.
    processor: &'static str,
    /// The GNU toolchain's prefix (`aarch64-linux-gnu`): its programs are
    /// `<prefix>-gcc` and `<prefix>-g++`, its C library is in `/usr/<prefix>`.
    pub(crate) gnu_prefix: &'static str,
    /// Debian's packages of that toolchain.
    toolchain_packages: &'static [&'static str],
}

/// Linux on 64-bit ARM.
pub(crate) const AARCH64: Target = Target {
    triple: "aarch64-unknown-linux-gnu",
    processor: "aarch64",
    gnu_prefix: "aarch64-linux-gnu",
    toolchain_packages: &["gcc-aarch64-linux-gnu", "g++-aarch64-linux-gnu"],
};

/// Every target `--target` accepts.
const TARGETS: &[&Target] = &[&AARCH64];

/// The HAL drivers a cross build may carry: the CPU's. The GPU drivers need
/// the GPU vendor's headers and libraries for the target.
const CPU_DRIVERS: &[&str] = &["local-sync", "local-task"];

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
            Some(driver) => Err(anyhow!(
                "a build for {} carries the CPU drivers only ({}), not `{driver}`",
                self.triple,
                CPU_DRIVERS.join(", ")
            )),
            None => Ok(named),
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

    /// The C compiler of the cross toolchain.
    pub(crate) fn gcc(&self) -> String {
        format!("{}-gcc", self.gnu_prefix)
    }

    /// The target's C library and headers (`/usr/aarch64-linux-gnu`).
    pub(crate) fn sysroot(&self) -> PathBuf {
        Path::new("/usr").join(self.gnu_prefix)
    }

    /// Makes sure the cross compilers are installed (Debian's packages,
    /// installed when missing); returns the C and C++ compilers.
    pub(crate) fn ensure_toolchain(&self) -> Result<(PathBuf, PathBuf)> {
        let gxx = format!("{}-g++", self.gnu_prefix);
        let found = || Some((on_path(&self.gcc())?, on_path(&gxx)?));
        debian::ensure(
            self.toolchain_packages,
            || found().is_some(),
            &format!(
                "building for {} needs its cross compilers: install them as root (`apt-get \
                 install {}`)",
                self.triple,
                self.toolchain_packages.join(" ")
            ),
        )?;
        found().with_context(|| format!("{} or {gxx} is not on the PATH", self.gcc()))
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
        let (gcc, gxx) = step(
            &format!(
                "the {} cross compilers (installing {} if missing)",
                self.triple,
                self.toolchain_packages.join(", ")
            ),
            || self.ensure_toolchain(),
        )?;
        let host_bin = step(
            &format!("building IREE's host tools ({})", HOST_TOOLS.join(", ")),
            || host_tools(source, tools, log),
        )?;
        let toolchain_file = root.join("toolchain.cmake");
        std::fs::create_dir_all(root)
            .and_then(|()| std::fs::write(&toolchain_file, self.toolchain_file(&gcc, &gxx)))
            .with_context(|| format!("cannot write {}", toolchain_file.display()))?;
        Ok(vec![
            format!("-DCMAKE_TOOLCHAIN_FILE={}", toolchain_file.display()),
            format!("-DIREE_HOST_BIN_DIR={}", host_bin.display()),
        ])
    }

    /// The CMake toolchain file: the target system, its compilers, and its
    /// C library as the only place to find libraries and headers.
    fn toolchain_file(&self, gcc: &Path, gxx: &Path) -> String {
        format!(
            "# Written by `cargo xtask build-iree --target {triple}`.\n\
             set(CMAKE_SYSTEM_NAME Linux)\n\
             set(CMAKE_SYSTEM_PROCESSOR {processor})\n\
             set(CMAKE_C_COMPILER {gcc})\n\
             set(CMAKE_CXX_COMPILER {gxx})\n\
             set(CMAKE_FIND_ROOT_PATH {sysroot})\n\
             set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)\n\
             set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)\n\
             set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)\n\
             set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)\n",
            triple = self.triple,
            processor = self.processor,
            gcc = gcc.display(),
            gxx = gxx.display(),
            sysroot = self.sysroot().display(),
        )
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
        assert_eq!(target.gcc(), "aarch64-linux-gnu-gcc");
        assert_eq!(
            target.cargo_env("RUNNER"),
            "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER"
        );
        let unknown = Target::parse("riscv64gc-unknown-linux-gnu")
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("aarch64-unknown-linux-gnu"), "{unknown}");
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
    fn the_toolchain_file_names_the_system_and_compilers() {
        let file = AARCH64.toolchain_file(
            Path::new("/usr/bin/aarch64-linux-gnu-gcc"),
            Path::new("/usr/bin/aarch64-linux-gnu-g++"),
        );
        for line in [
            "set(CMAKE_SYSTEM_NAME Linux)",
            "set(CMAKE_SYSTEM_PROCESSOR aarch64)",
            "set(CMAKE_C_COMPILER /usr/bin/aarch64-linux-gnu-gcc)",
            "set(CMAKE_CXX_COMPILER /usr/bin/aarch64-linux-gnu-g++)",
            "set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)",
        ] {
            assert!(file.lines().any(|l| l == line), "{line} in\n{file}");
        }
    }
}
