//! The install manifest: what `cargo xtask build-iree` built and where.
//!
//! Written as `manifest.json` in the install prefix, and copied to
//! `target/iree/manifest.json`, where `iree-sys` looks when neither
//! `IREE_DIR` nor `IREE_SOURCE_DIR` is set. Its keys are the contract with
//! `crates/iree-sys/build/install.rs` and `iree_safe::compiler`'s locator.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::process;

/// Everything a consumer of the installed runtime and compiler needs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// Key of the build folder: a hash of the source version and options.
    pub key: String,
    pub iree_version: String,
    pub source_origin: String,
    pub source_dir: PathBuf,
    /// CMake options the runtime was configured with.
    pub cmake_options: Vec<String>,
    pub drivers: Vec<String>,
    pub prefix: PathBuf,
    pub include_dir: PathBuf,
    pub lib_dir: PathBuf,
    /// Static libraries to link, in order, without `lib` and `.a`.
    pub static_libs: Vec<String>,
    /// System libraries they need.
    pub system_libs: Vec<String>,
    pub compiler_version: String,
    pub iree_compile: PathBuf,
    pub libiree_compiler: PathBuf,
    pub libclang_dir: PathBuf,
    /// Wall time of the build that produced this install, in seconds.
    pub build_seconds: f64,
}

/// `target/iree/manifest.json`: the current install.
pub fn current_path() -> PathBuf {
    process::workspace_root().join("target/iree/manifest.json")
}

impl Manifest {
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a valid manifest: {e}", path.display()))
    }

    pub fn write(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).expect("a manifest always serializes");
        let temporary = path.with_extension("json.tmp");
        std::fs::write(&temporary, text + "\n")
            .and_then(|()| std::fs::rename(&temporary, path))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// True when every file this manifest names still exists.
    pub fn is_complete(&self) -> bool {
        self.static_libs
            .iter()
            .all(|lib| self.lib_dir.join(format!("lib{lib}.a")).is_file())
            && self.include_dir.join("iree/runtime/api.h").is_file()
            && self.iree_compile.is_file()
            && self.libiree_compiler.is_file()
    }
}
