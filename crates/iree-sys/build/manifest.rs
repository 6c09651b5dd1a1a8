//! The install manifest `manifest.json` that `cargo xtask build-iree` writes
//! into an install prefix and copies to `target/iree/manifest.json`.
//!
//! This file is the one definition of its format: the iree-sys build script
//! includes it as a module, and so does xtask (`#[path]`), so the writer and
//! the reader cannot drift apart. Code that runs later (iree-safe's compiler
//! locator, the smoke test) reads the few values it needs from
//! `iree_sys::build_info`, which the build script fills from this struct.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Everything a consumer of the installed runtime and compiler needs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Manifest {
    /// Key of the build folder: the source version, then a hash of the
    /// source and the options.
    pub(crate) key: String,
    /// `package-version` of the IREE source (`runtime/version.json`).
    pub(crate) iree_version: String,
    /// Where the source came from, in words.
    pub(crate) source_origin: String,
    /// The IREE source tree that was built.
    pub(crate) source_dir: PathBuf,
    /// CMake options the runtime was configured with.
    pub(crate) cmake_options: Vec<String>,
    /// HAL drivers compiled in.
    pub(crate) drivers: Vec<String>,
    /// The install prefix.
    pub(crate) prefix: PathBuf,
    /// Headers (runtime, generated, flatcc and the compiler embedding API).
    pub(crate) include_dir: PathBuf,
    /// Static libraries.
    pub(crate) lib_dir: PathBuf,
    /// Static libraries to link, in order, without `lib` and `.a`.
    pub(crate) static_libs: Vec<String>,
    /// System libraries they need.
    pub(crate) system_libs: Vec<String>,
    /// Apple frameworks they need (the Metal driver's, on macOS); none
    /// elsewhere, and in manifests written before macOS builds existed.
    #[serde(default)]
    pub(crate) frameworks: Vec<String>,
    /// `iree-compile --version`'s build string (`3.13.0rc… @ <revision>`).
    pub(crate) compiler_version: String,
    /// The `iree-compile` launcher installed by pip.
    pub(crate) iree_compile: PathBuf,
    /// `libIREECompiler.so` (`.dylib` on macOS), for the in-process compiler.
    pub(crate) libiree_compiler: PathBuf,
    /// The folder holding the `libclang.so` (`.dylib`) bindgen uses.
    pub(crate) libclang_dir: PathBuf,
    /// Wall time of the build that produced this install, in seconds.
    pub(crate) build_seconds: f64,
    /// The Rust target triple the runtime was built for
    /// (`x86_64-unknown-linux-gnu`, or the `--target` of a cross build).
    /// Manifests written before cross builds existed have none: their
    /// runtime was built for the machine that built it.
    #[serde(default)]
    pub(crate) target: Option<String>,
}

impl Manifest {
    /// The tracing provider the runtime was built with
    /// (`cargo xtask build-iree --tracing`: `console` or `tracy`), if any.
    pub(crate) fn tracing_provider(&self) -> Option<&str> {
        let option = |name: &str| {
            self.cmake_options
                .iter()
                .find_map(|option| option.strip_prefix(&format!("-D{name}=")))
        };
        (option("IREE_ENABLE_RUNTIME_TRACING") == Some("ON"))
            .then(|| option("IREE_TRACING_PROVIDER"))
            .flatten()
    }

    /// Reads and parses the manifest at `path`.
    pub(crate) fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| {
            format!(
                "{} is not a valid manifest ({e}); run `cargo xtask build-iree`",
                path.display()
            )
        })
    }
}
