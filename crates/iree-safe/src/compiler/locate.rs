//! Finding the compiler: an environment variable, else the install manifest
//! written by `cargo xtask build-iree`, else (for `iree-compile` only) `PATH`.

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
    manifest_key: "libiree_compiler",
    beside_library: false,
    search_path: false,
};

const EXECUTABLE: Tool = Tool {
    name: "iree-compile",
    env_var: IREE_COMPILE_ENV,
    manifest_key: "iree_compile",
    beside_library: true,
    search_path: true,
};

/// The path of `libIREECompiler.so`: `$IREE_COMPILER_LIB`, else the
/// `libiree_compiler` entry of the manifest of the runtime `iree-sys` was
/// built against (`iree_sys::build_info::MANIFEST`).
pub fn locate_compiler_library() -> Result<PathBuf, CompileError> {
    LIBRARY.locate(&Environment::process())
}

/// The path of `iree-compile`: `$IREE_COMPILE`; else, from the install
/// manifest, the native `iree-compile` next to `libIREECompiler.so`, then the
/// manifest's `iree_compile` entry; else the first `iree-compile` on `PATH`.
///
/// The native executable comes first because the manifest's entry is pip's
/// Python launcher (`venv/bin/iree-compile`), which starts a Python
/// interpreter before the compiler: about 0.25 s more per compilation.
pub fn locate_iree_compile() -> Result<PathBuf, CompileError> {
    EXECUTABLE.locate(&Environment::process())
}

/// Where a tool may be found.
struct Tool {
    name: &'static str,
    env_var: &'static str,
    manifest_key: &'static str,
    /// Look for `name` in the folder of the manifest's compiler library
    /// before using `manifest_key`.
    beside_library: bool,
    search_path: bool,
}

/// The inputs of a search, separate from the process so tests can vary them.
struct Environment {
    var: fn(&str) -> Option<OsString>,
    manifest: Option<PathBuf>,
}

impl Environment {
    fn process() -> Self {
        Environment {
            var: |name| std::env::var_os(name),
            manifest: iree_sys::build_info::MANIFEST.map(PathBuf::from),
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
        if let (true, Some(manifest)) = (self.beside_library, &env.manifest) {
            let beside = manifest_entry(manifest, LIBRARY.manifest_key)
                .ok()
                .and_then(|library| Some(library.parent()?.join(self.name)))
                .filter(|path| path.is_file());
            match beside {
                Some(path) => return Ok(path),
                None => tried.push(format!(
                    "no {} next to the compiler library of {}",
                    self.name,
                    manifest.display()
                )),
            }
        }
        match &env.manifest {
            Some(manifest) => match manifest_entry(manifest, self.manifest_key) {
                Ok(path) if path.is_file() => return Ok(path),
                Ok(path) => tried.push(format!(
                    "{} names {}, which does not exist",
                    manifest.display(),
                    path.display()
                )),
                Err(message) => tried.push(message),
            },
            None => tried.push(
                "iree-sys was not built from a `cargo xtask build-iree` install, so \
                                there is no manifest"
                    .to_owned(),
            ),
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

/// The path stored under `key` in the JSON manifest at `manifest`.
fn manifest_entry(manifest: &Path, key: &str) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(manifest)
        .map_err(|e| format!("cannot read the manifest {}: {e}", manifest.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not valid JSON: {e}", manifest.display()))?;
    json.get(key)
        .and_then(serde_json::Value::as_str)
        .map(PathBuf::from)
        .ok_or_else(|| format!("{} has no string entry `{key}`", manifest.display()))
}

fn find_on_path(paths: &OsString, name: &str) -> Option<PathBuf> {
    std::env::split_paths(paths)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(var: fn(&str) -> Option<OsString>, manifest: Option<&Path>) -> Environment {
        Environment {
            var,
            manifest: manifest.map(Path::to_path_buf),
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn a_missing_explicit_path_is_an_error_naming_the_variable() {
        let env = env(
            |name| (name == "IREE_COMPILE").then(|| "/nonexistent/iree-compile".into()),
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
    fn the_manifest_entry_is_used_when_no_variable_is_set() {
        let dir = tempfile::tempdir().unwrap();
        let library = dir.path().join("libIREECompiler.so");
        std::fs::write(&library, b"").unwrap();
        let manifest = dir.path().join("manifest.json");
        std::fs::write(
            &manifest,
            serde_json::json!({ "libiree_compiler": library, "iree_compile": "/missing" })
                .to_string(),
        )
        .unwrap();
        // "0" means unset, like every variable of this workspace.
        let env = env(
            |name| (name == "IREE_COMPILER_LIB").then(|| "0".into()),
            Some(&manifest),
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
        let manifest = dir.path().join("manifest.json");
        let json = serde_json::json!({
            "libiree_compiler": libs.join("libIREECompiler.so"),
            "iree_compile": launcher,
        });
        std::fs::write(&manifest, json.to_string()).unwrap();
        let found = EXECUTABLE.locate(&env(|_| None, Some(&manifest))).unwrap();
        assert_eq!(found, libs.join("iree-compile"));

        std::fs::remove_file(libs.join("iree-compile")).unwrap();
        let found = EXECUTABLE.locate(&env(|_| None, Some(&manifest))).unwrap();
        assert_eq!(found, launcher);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn path_is_searched_for_the_executable_only() {
        let env = env(|_| None, None);
        let library = LIBRARY.locate(&env).unwrap_err().to_string();
        assert!(!library.contains("PATH"), "{library}");
        assert!(library.contains("IREE_COMPILER_LIB"), "{library}");
    }
}
