//! The build tools and the IREE compiler, installed into a project-local
//! Python virtual environment under `target/venv` when the system lacks them.
//!
//! Installed there: `cmake` and `ninja` (only when the system's are missing or
//! CMake is older than 3.26, which IREE requires), `libclang` (bindgen needs a
//! `libclang.so`, which a fresh machine does not have) and
//! `iree-base-compiler==3.13.0` (`iree-compile` and `libIREECompiler.so`).

use std::path::PathBuf;
use std::process::Command;

use anyhow::{anyhow, Context, Result};

use crate::host::Os;
use crate::process::{self, step};

/// The IREE compiler release whose artifacts the runtime built here loads.
pub(crate) const IREE_COMPILER_REQUIREMENT: &str = "iree-base-compiler==3.13.0";
const CMAKE_MINIMUM: (u32, u32) = (3, 26);

/// Paths of every tool the build and the tests use.
#[derive(Debug, Clone)]
pub(crate) struct Tools {
    pub cmake: PathBuf,
    pub ninja: PathBuf,
    pub libclang_dir: PathBuf,
    pub iree_compile: PathBuf,
    pub libiree_compiler: PathBuf,
    pub compiler_version: String,
}

/// The project-local virtual environment.
pub(crate) fn venv_dir() -> PathBuf {
    process::workspace_root().join("target/venv")
}

/// `PATH` with the venv's `bin/` first: where a dependent's build finds
/// CMake, Ninja and `iree-compile` once it has pip-installed them.
pub(crate) fn path_with_venv() -> std::ffi::OsString {
    let venv_bin = venv_dir().join("bin");
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(venv_bin).chain(std::env::split_paths(&rest)))
        .unwrap_or(rest)
}

/// Makes sure every tool exists, installing what is missing; fast when
/// nothing is.
pub(crate) fn ensure() -> Result<Tools> {
    let venv = venv_dir();
    let system_cmake = find_system_cmake();
    let system_ninja = which("ninja");
    let mut requirements = vec!["libclang".to_owned(), IREE_COMPILER_REQUIREMENT.to_owned()];
    if system_cmake.is_none() {
        requirements.push("cmake".to_owned());
    }
    if system_ninja.is_none() {
        requirements.push("ninja".to_owned());
    }
    install_once(&requirements, ".xtask-requirements")?;

    let site_packages = site_packages()?;
    let dylib = Os::current().dylib_extension();
    let libiree_compiler =
        site_packages.join(format!("iree/compiler/_mlir_libs/libIREECompiler.{dylib}"));
    let libclang_dir = site_packages.join("clang/native");
    for required in [
        &libiree_compiler,
        &libclang_dir.join(format!("libclang.{dylib}")),
    ] {
        if !required.exists() {
            // A half-finished install: forget the stamp so the next run repairs it.
            let _ = std::fs::remove_file(venv.join(".xtask-requirements"));
            return Err(anyhow!(
                "{} is missing; run `cargo xtask build-iree` again",
                required.display()
            ));
        }
    }
    let iree_compile = venv.join("bin/iree-compile");
    let compiler_version = process::output(Command::new(&iree_compile).arg("--version"))?
        .lines()
        .find_map(|line| line.trim().strip_prefix("IREE compiler version "))
        .unwrap_or("unknown")
        .to_owned();
    Ok(Tools {
        cmake: system_cmake.unwrap_or_else(|| venv.join("bin/cmake")),
        ninja: system_ninja.unwrap_or_else(|| venv.join("bin/ninja")),
        libclang_dir,
        iree_compile,
        libiree_compiler,
        compiler_version,
    })
}

/// Installs further pip requirements into the venv (once: a second call
/// with the same list only reads a stamp file).
pub(crate) fn ensure_requirements(requirements: &[&str]) -> Result<()> {
    let stamp = format!(".xtask-requirements-{}", process::short_hash(requirements));
    let requirements: Vec<String> = requirements.iter().map(|r| (*r).to_owned()).collect();
    install_once(&requirements, &stamp)
}

/// `pip install`s `requirements` (sorted) into the venv, creating it first,
/// unless the stamp file `stamp` in the venv already lists them.
fn install_once(requirements: &[String], stamp: &str) -> Result<()> {
    let venv = venv_dir();
    let mut requirements = requirements.to_vec();
    requirements.sort();
    let stamp = venv.join(stamp);
    let wanted = requirements.join("\n");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        return Ok(());
    }
    if !venv.join("bin/python").exists() {
        step("creating the Python venv target/venv", || {
            process::run(Command::new("python3").args(["-m", "venv"]).arg(&venv)).context(
                "install Python 3 with venv support (`apt-get install python3 python3-venv`; \
                 on macOS `brew install python`)",
            )
        })?;
    }
    step(
        &format!("installing {} into target/venv", requirements.join(", ")),
        || {
            process::run(
                Command::new(venv.join("bin/python"))
                    .args([
                        "-m",
                        "pip",
                        "install",
                        "--quiet",
                        "--disable-pip-version-check",
                    ])
                    .args(&requirements),
            )
        },
    )?;
    std::fs::write(&stamp, &wanted).with_context(|| format!("cannot write {}", stamp.display()))
}

/// The venv's `site-packages` folder.
pub(crate) fn site_packages() -> Result<PathBuf> {
    let lib = venv_dir().join("lib");
    std::fs::read_dir(&lib)
        .with_context(|| format!("cannot read {}", lib.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("site-packages"))
        .find(|path| path.is_dir())
        .with_context(|| format!("no site-packages under {}", lib.display()))
}

/// The system's `cmake`, if it is recent enough for IREE.
fn find_system_cmake() -> Option<PathBuf> {
    let cmake = which("cmake")?;
    let version = process::output(Command::new(&cmake).arg("--version")).ok()?;
    let number = version.lines().next()?.rsplit(' ').next()?;
    let mut parts = number.split('.').map(|p| p.parse::<u32>().ok());
    let (major, minor) = (parts.next()??, parts.next()??);
    ((major, minor) >= CMAKE_MINIMUM).then_some(cmake)
}

/// Looks `program` up in `PATH`, ignoring the project venv (whose tools are
/// handled explicitly).
fn which(program: &str) -> Option<PathBuf> {
    let venv = venv_dir();
    std::env::split_paths(&std::env::var_os("PATH")?)
        .filter(|dir| !dir.starts_with(&venv))
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}
