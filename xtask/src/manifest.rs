//! The install manifest: what `cargo xtask build-iree` built and where.
//!
//! Written as `manifest.json` in the install prefix, and copied to
//! `target/iree/manifest.json`, where `iree-sys` looks when neither
//! `IREE_DIR` nor `IREE_SOURCE_DIR` is set. The format is defined once, in
//! `crates/iree-sys/build/manifest.rs`, which the iree-sys build script
//! reads with; this module includes that same file and adds the writer.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::process;

#[path = "../../crates/iree-sys/build/manifest.rs"]
mod format;

pub(crate) use format::Manifest;

/// `target/iree/manifest.json`: the current install.
pub(crate) fn current_path() -> PathBuf {
    process::workspace_root().join("target/iree/manifest.json")
}

impl Manifest {
    pub(crate) fn write(&self, path: &std::path::Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).expect("a manifest always serializes");
        let temporary = path.with_extension("json.tmp");
        std::fs::write(&temporary, text + "\n")
            .and_then(|()| std::fs::rename(&temporary, path))
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// True when every file this manifest names still exists.
    pub(crate) fn is_complete(&self) -> bool {
        self.static_libs
            .iter()
            .all(|lib| self.lib_dir.join(format!("lib{lib}.a")).is_file())
            && self.include_dir.join("iree/runtime/api.h").is_file()
            && self.iree_compile.is_file()
            && self.libiree_compiler.is_file()
    }
}
