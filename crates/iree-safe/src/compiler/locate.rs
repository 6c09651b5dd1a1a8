//! Finding the compiler: an environment variable, else the install made by
//! `cargo xtask build-iree` (as recorded in `iree_sys::build_info`), else
//! (for `iree-compile` only) `PATH`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::error::CompileError;

/// Environment variable naming `libIREECompiler.so` (empty or `0`: unset).
pub const COMPILER_LIB_ENV: &str = "IREE_COMPILER_LIB";

/// Environment variable naming the `iree-compile` executable (empty or `0`:
/// unset).
pub const IREE_COMPILE_ENV: &str = "IREE_COMPILE";

const LIBRARY: Tool = Tool {
    name: "libIREECompiler.so",
    env_var: COMPILER_LIB_ENV,
    installed: |install| install.library.clone(),
    beside_library: false,
    search_path: false,
};

const EXECUTABLE: Tool = Tool {
    name: "iree-compile",
    env_var: IREE_COMPILE_ENV,
    installed: |install| install.executable.clone(),
    beside_library: true,
    search_path: true,
};

/// The path of `libIREECompiler.so`: `$IREE_COMPILER_LIB`, else the library
/// of the install the runtime was built from
/// (`iree_sys::build_info::COMPILER_LIBRARY`).
///
/// # Errors
///
/// [`CompileError::NotFound`] when the variable is unset and no install
/// names a library, or the path named does not exist (the error lists what
/// was tried).
pub fn locate_compiler_library() -> Result<PathBuf, CompileError> {
    LIBRARY.locate(&Environment::process())
}

/// True when `IREE_COMPILER_LIB` names the library explicitly: then a
/// library that does not load is an error, never a reason to use another
/// compiler.
pub fn compiler_library_is_explicit() -> bool {
    Environment::process().get(COMPILER_LIB_ENV).is_some()
}

/// Whether `IREE_COMPILE` names the `iree-compile` to use.
pub(crate) fn iree_compile_is_explicit() -> bool {
    Environment::process().get(IREE_COMPILE_ENV).is_some()
}

/// The path of `iree-compile`: `$IREE_COMPILE`; else, from the install, the
/// native `iree-compile` next to `libIREECompiler.so`, then the install's
/// launcher; else the first `iree-compile` on `PATH`.
///
/// The native executable comes first because the install's launcher is pip's
/// Python launcher (`venv/bin/iree-compile`), which starts a Python
/// interpreter before the compiler: about 0.25 s more per compilation.
///
/// # Errors
///
/// [`CompileError::NotFound`] when neither the variable, the install nor
/// `PATH` leads to an existing `iree-compile` (the error lists what was
/// tried).
pub fn locate_iree_compile() -> Result<PathBuf, CompileError> {
    EXECUTABLE.locate(&Environment::process())
}

/// Text that identifies the build of the compiler that
/// [`choose_compiler`](super::choose_compiler) would pick for `preference`,
/// for keys of artifact caches, found without loading the compiler library
/// into this process:
///
/// - the compiler of the install made by `cargo xtask build-iree` is known by
///   the build string recorded at install time (`3.13.0rc… @ <revision>`),
///   so caches shared between machines with the same release agree;
/// - an `iree-compile` elsewhere is asked (`--version`, a child process, at
///   most once per executable in a process: the answer is shared with
///   [`SubprocessCompiler::new`](super::SubprocessCompiler::new));
/// - a library elsewhere (`IREE_COMPILER_LIB`, or
///   [`CompilerPreference::Library`](super::CompilerPreference::Library)) is
///   known by its canonical path, size and modification time: a rebuilt
///   library is a new key.
///
/// # Errors
///
/// [`CompileError::NotFound`] when the compiler `preference` picks cannot
/// be found, [`CompileError::Load`] when the library a program names does
/// not exist, and [`CompileError::BadExecutable`] when an `iree-compile`
/// outside the install does not answer `--version` as IREE's does;
/// [`CompileError::Disabled`] for
/// [`CompilerPreference::Disabled`](super::CompilerPreference::Disabled).
pub fn compiler_identity(preference: super::CompilerPreference) -> Result<String, CompileError> {
    use super::CompilerPreference;
    let env = Environment::process();
    let install = &env.install;
    match preference {
        CompilerPreference::Subprocess => identify_executable(&EXECUTABLE.locate(&env)?, install),
        CompilerPreference::InProcess => identify_library(&LIBRARY.locate(&env)?, install),
        // As `choose_compiler`: a library named by the variable, else
        // `iree-compile`, else the install's library.
        CompilerPreference::Auto if env.get(COMPILER_LIB_ENV).is_some() => {
            identify_library(&LIBRARY.locate(&env)?, install)
        }
        CompilerPreference::Auto => match EXECUTABLE.locate(&env) {
            Ok(executable) => identify_executable(&executable, install),
            Err(error) => match LIBRARY.locate(&env) {
                Ok(library) => identify_library(&library, install),
                Err(_) => Err(error),
            },
        },
        CompilerPreference::Library(library) => {
            let path = library.path();
            if !path.is_file() {
                return Err(CompileError::Load {
                    path: path.to_path_buf(),
                    message: if path.exists() {
                        "not a file"
                    } else {
                        "no such file"
                    }
                    .to_owned(),
                });
            }
            identify_library(path, install)
        }
        CompilerPreference::Executable(path) => identify_executable(&path, install),
        CompilerPreference::Disabled => Err(CompileError::Disabled),
    }
}

/// The identity of the `iree-compile` at `path`: the install's recorded
/// build string when it is the install's (the native tool next to its
/// library, or its launcher), else its answer to `--version`.
fn identify_executable(path: &Path, install: &Install) -> Result<String, CompileError> {
    let beside_library = install
        .library
        .as_ref()
        .and_then(|library| library.parent())
        .is_some_and(|dir| path.parent() == Some(dir));
    match iree_sys::build_info::COMPILER_VERSION {
        Some(version) if beside_library || same_file(path, &install.executable) => {
            Ok(version.to_owned())
        }
        _ => Ok(super::subprocess::version_of(path)?.build().to_owned()),
    }
}

/// The identity of the library at `path`: the install's recorded build
/// string when it is the install's, else the file's fingerprint.
fn identify_library(path: &Path, install: &Install) -> Result<String, CompileError> {
    match iree_sys::build_info::COMPILER_VERSION {
        Some(version) if same_file(path, &install.library) => Ok(version.to_owned()),
        _ => Ok(file_fingerprint(path)),
    }
}

/// Whether `a` and `b` are the same file (after resolving links).
fn same_file(a: &Path, b: &Option<PathBuf>) -> bool {
    b.as_ref()
        .is_some_and(|b| a.canonicalize().ok() == b.canonicalize().ok())
}

/// `library <canonical path> (<size> bytes, modified <seconds.nanos>)`.
fn file_fingerprint(path: &Path) -> String {
    let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let metadata = std::fs::metadata(&canonical).ok();
    let modified = metadata
        .as_ref()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or_else(String::new, |d| {
            format!("{}.{:09}", d.as_secs(), d.subsec_nanos())
        });
    format!(
        "library {} ({} bytes, modified {modified})",
        canonical.display(),
        metadata.map_or(0, |m| m.len())
    )
}

/// Where a tool may be found.
struct Tool {
    name: &'static str,
    env_var: &'static str,
    /// The tool's path in the install, if there is one.
    installed: fn(&Install) -> Option<PathBuf>,
    /// Look for `name` in the folder of the installed compiler library
    /// before using `installed`.
    beside_library: bool,
    search_path: bool,
}

/// The compiler of the install `cargo xtask build-iree` made for the linked
/// runtime.
struct Install {
    library: Option<PathBuf>,
    executable: Option<PathBuf>,
}

/// The inputs of a search, separate from the process so tests can vary them.
struct Environment {
    var: fn(&str) -> Option<OsString>,
    install: Install,
}

impl Environment {
    fn process() -> Self {
        use iree_sys::build_info;
        Environment {
            var: |name| std::env::var_os(name),
            install: Install {
                library: build_info::COMPILER_LIBRARY.map(PathBuf::from),
                executable: build_info::IREE_COMPILE.map(PathBuf::from),
            },
        }
    }

    /// A variable's value, with empty and `0` meaning unset.
    fn get(&self, name: &str) -> Option<OsString> {
        (self.var)(name).filter(|value| !value.is_empty() && value != "0")
    }
}

impl Tool {
    fn locate(&self, env: &Environment) -> Result<PathBuf, CompileError> {
        let mut tried = Vec::new();
        if let Some(value) = env.get(self.env_var) {
            let path = PathBuf::from(value);
            if path.is_file() {
                return Ok(path);
            }
            // An explicit choice that does not work is an error, never a
            // reason to silently use another compiler.
            tried.push(format!("{}={}: no such file", self.env_var, path.display()));
            return Err(self.not_found(tried));
        }
        tried.push(format!("{} is unset", self.env_var));
        let install = &env.install;
        if self.beside_library {
            let beside = install
                .library
                .as_ref()
                .and_then(|library| Some(library.parent()?.join(self.name)))
                .filter(|path| path.is_file());
            match beside {
                Some(path) => return Ok(path),
                None => tried.push(format!(
                    "no {} next to the installed compiler library",
                    self.name
                )),
            }
        }
        match (self.installed)(install) {
            Some(path) if path.is_file() => return Ok(path),
            Some(path) => tried.push(format!(
                "the install names {}, which does not exist",
                path.display()
            )),
            None => tried
                .push("iree-sys was not built from a `cargo xtask build-iree` install".to_owned()),
        }
        if self.search_path {
            match (env.var)("PATH").and_then(|paths| find_on_path(&paths, self.name)) {
                Some(path) => return Ok(path),
                None => tried.push(format!("no {} on PATH", self.name)),
            }
        }
        Err(self.not_found(tried))
    }

    fn not_found(&self, tried: Vec<String>) -> CompileError {
        CompileError::NotFound {
            tool: self.name,
            env_var: self.env_var,
            tried,
        }
    }
}

fn find_on_path(paths: &OsString, name: &str) -> Option<PathBuf> {
    std::env::split_paths(paths)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(
        var: fn(&str) -> Option<OsString>,
        library: Option<&Path>,
        executable: Option<&Path>,
    ) -> Environment {
        Environment {
            var,
            install: Install {
                library: library.map(Path::to_path_buf),
                executable: executable.map(Path::to_path_buf),
            },
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn a_missing_explicit_path_is_an_error_naming_the_variable() {
        let env = env(
            |name| (name == "IREE_COMPILE").then(|| "/nonexistent/iree-compile".into()),
            None,
            None,
        );
        let error = EXECUTABLE.locate(&env).unwrap_err().to_string();
        assert!(
            error.contains("IREE_COMPILE=/nonexistent/iree-compile: no such file"),
            "{error}"
        );
        assert!(error.contains("cargo xtask build-iree"), "{error}");
    }

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn the_install_is_used_when_no_variable_is_set() {
        let dir = tempfile::tempdir().unwrap();
        let library = dir.path().join("libIREECompiler.so");
        std::fs::write(&library, b"").unwrap();
        // "0" means unset, like every variable of this workspace.
        let env = env(
            |name| (name == "IREE_COMPILER_LIB").then(|| "0".into()),
            Some(&library),
            Some(Path::new("/missing")),
        );
        assert_eq!(LIBRARY.locate(&env).unwrap(), library);

        let error = EXECUTABLE.locate(&env).unwrap_err().to_string();
        assert!(
            error.contains("names /missing, which does not exist"),
            "{error}"
        );
        assert!(error.contains("no iree-compile on PATH"), "{error}");
    }

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn the_native_executable_next_to_the_library_comes_before_the_launcher() {
        let dir = tempfile::tempdir().unwrap();
        let libs = dir.path().join("_mlir_libs");
        std::fs::create_dir(&libs).unwrap();
        for file in ["libIREECompiler.so", "iree-compile"] {
            std::fs::write(libs.join(file), b"").unwrap();
        }
        let launcher = dir.path().join("iree-compile-launcher");
        std::fs::write(&launcher, b"").unwrap();
        let library = libs.join("libIREECompiler.so");
        let found = EXECUTABLE
            .locate(&env(|_| None, Some(&library), Some(&launcher)))
            .unwrap();
        assert_eq!(found, libs.join("iree-compile"));

        std::fs::remove_file(libs.join("iree-compile")).unwrap();
        let found = EXECUTABLE
            .locate(&env(|_| None, Some(&library), Some(&launcher)))
            .unwrap();
        assert_eq!(found, launcher);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn path_is_searched_for_the_executable_only() {
        let env = env(|_| None, None, None);
        let library = LIBRARY.locate(&env).unwrap_err().to_string();
        assert!(!library.contains("PATH"), "{library}");
        assert!(library.contains("IREE_COMPILER_LIB"), "{library}");
    }
}
