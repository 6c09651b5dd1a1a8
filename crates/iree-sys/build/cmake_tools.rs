//! CMake (>= 3.26, which IREE requires) and Ninja for a build from source:
//! `CMAKE` if set (the variable the `cmake` crate runs), else `cmake` on
//! `PATH`; Ninja next to that CMake (a Python venv with `pip install cmake
//! ninja` holds both), else on `PATH`, else CMake's default generator.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::env;

/// The oldest CMake IREE 3.13 configures with.
const CMAKE_MINIMUM: (u32, u32) = (3, 26);

/// What to install when CMake is missing or too old.
const INSTALL_HINT: &str = "install CMake >= 3.26 and Ninja (`python3 -m venv tools && \
    tools/bin/pip install cmake ninja`, then set CMAKE=$PWD/tools/bin/cmake), or set IREE_DIR to \
    an IREE runtime install (in a checkout of this crate's repository: `cargo xtask build-iree`)";

/// The tools a build from source runs.
#[derive(Debug)]
pub(crate) struct CmakeTools {
    /// The `cmake` executable.
    pub(crate) cmake: PathBuf,
    /// The `ninja` executable, when one was found.
    pub(crate) ninja: Option<PathBuf>,
}

/// Finds CMake and Ninja, failing with what to install.
pub(crate) fn find() -> Result<CmakeTools, String> {
    let search_path = env::os("PATH");
    let cmake = match env::path("CMAKE") {
        Some(cmake) => cmake,
        None => on_path(search_path.as_deref(), "cmake")
            .ok_or_else(|| format!("no `cmake` on PATH and CMAKE is unset; {INSTALL_HINT}"))?,
    };
    let version = version(&cmake)?;
    if version < CMAKE_MINIMUM {
        return Err(format!(
            "{} is CMake {}.{}, older than {}.{}; {INSTALL_HINT}",
            cmake.display(),
            version.0,
            version.1,
            CMAKE_MINIMUM.0,
            CMAKE_MINIMUM.1
        ));
    }
    let ninja = cmake
        .parent()
        .map(|dir| dir.join("ninja"))
        .filter(|ninja| ninja.is_file())
        .or_else(|| on_path(search_path.as_deref(), "ninja"));
    Ok(CmakeTools { cmake, ninja })
}

/// `cmake --version`'s major and minor number.
fn version(cmake: &Path) -> Result<(u32, u32), String> {
    let output = Command::new(cmake)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run {}: {e}; {INSTALL_HINT}", cmake.display()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let number = text
        .lines()
        .next()
        .and_then(|line| line.rsplit(' ').next())
        .unwrap_or_default();
    let mut parts = number.split('.').map(|part| part.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => Ok((major, minor)),
        _ => Err(format!(
            "{} --version printed no version ({:?}); {INSTALL_HINT}",
            cmake.display(),
            text.trim()
        )),
    }
}

/// The first `program` in the folders of `search_path`.
fn on_path(search_path: Option<&std::ffi::OsStr>, program: &str) -> Option<PathBuf> {
    std::env::split_paths(search_path?)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}
