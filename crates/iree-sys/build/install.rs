//! An installed IREE runtime: where its libraries are and what to link.

use std::path::{Path, PathBuf};

/// The link recipe, shared with `cargo xtask build-iree`.
const RUNTIME_LIBS: &str = include_str!("runtime-libs.txt");

/// Entries of `runtime-libs.txt` of one `kind` (`static` or `system`), as
/// (link name, path inside the CMake build folder).
pub fn runtime_libs(kind: &str) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
    RUNTIME_LIBS.lines().filter_map(move |line| {
        let mut words = line.split_whitespace();
        (words.next() == Some(kind)).then(|| {
            (
                words.next().unwrap_or_default(),
                words.next().unwrap_or_default(),
            )
        })
    })
}

/// Static libraries of the runtime, in link order (`lib<name>.a`).
pub fn default_static_libs() -> Vec<String> {
    runtime_libs("static")
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// System libraries the runtime needs.
pub fn default_system_libs() -> Vec<String> {
    runtime_libs("system")
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// What the build script links against.
#[derive(Debug)]
pub struct Install {
    pub prefix: PathBuf,
    pub lib_dirs: Vec<PathBuf>,
    pub static_libs: Vec<String>,
    pub system_libs: Vec<String>,
    /// The `manifest.json` written by `cargo xtask build-iree`, if any.
    pub manifest: Option<PathBuf>,
    /// What identifies this build (`build_info::RUNTIME_BUILD`): the
    /// manifest's key, else the folder it came from.
    pub build_id: String,
}

impl Install {
    /// An install prefix holding `lib/` (and `include/`), such as the one
    /// `cargo xtask build-iree` writes; its `manifest.json` is used if present.
    pub fn from_prefix(prefix: &Path) -> Result<Self, String> {
        if !prefix.is_dir() {
            return Err(format!(
                "iree-sys: IREE_DIR={} does not exist; run `cargo xtask build-iree` and unset IREE_DIR, or point it at an IREE install",
                prefix.display()
            ));
        }
        let manifest = prefix.join("manifest.json");
        if manifest.is_file() {
            return Self::from_manifest(&manifest);
        }
        let install = Install {
            prefix: prefix.to_path_buf(),
            lib_dirs: vec![prefix.join("lib")],
            static_libs: default_static_libs(),
            system_libs: default_system_libs(),
            manifest: None,
            build_id: format!("install {}", prefix.display()),
        };
        install.check(&format!("IREE_DIR={}", prefix.display()))?;
        Ok(install)
    }

    /// The install recorded by `cargo xtask build-iree` for this workspace.
    pub fn from_workspace_manifest() -> Result<Self, String> {
        let crate_dir = PathBuf::from(
            std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
        );
        let manifest = crate_dir.join("../../target/iree/manifest.json");
        if !manifest.is_file() {
            return Err(
                "iree-sys: no IREE runtime found; run `cargo xtask build-iree` (or set IREE_DIR to an install, or IREE_SOURCE_DIR to an IREE checkout)"
                    .into(),
            );
        }
        Self::from_manifest(&manifest)
    }

    fn from_manifest(path: &Path) -> Result<Self, String> {
        println!("cargo:rerun-if-changed={}", path.display());
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("iree-sys: cannot read {}: {e}", path.display()))?;
        let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            format!(
                "iree-sys: {} is not a valid manifest ({e}); run `cargo xtask build-iree`",
                path.display()
            )
        })?;
        let strings = |key: &str| -> Vec<String> {
            json[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        };
        let prefix = PathBuf::from(json["prefix"].as_str().unwrap_or_default());
        let install = Install {
            lib_dirs: vec![PathBuf::from(json["lib_dir"].as_str().unwrap_or_default())],
            prefix,
            static_libs: strings("static_libs"),
            system_libs: strings("system_libs"),
            manifest: Some(path.canonicalize().unwrap_or_else(|_| path.to_path_buf())),
            build_id: json["key"].as_str().unwrap_or_default().to_owned(),
        };
        install.check(&format!("the manifest {}", path.display()))?;
        Ok(install)
    }

    /// Fails with one line naming `origin` and the fix when a library is missing.
    pub fn check(&self, origin: &str) -> Result<(), String> {
        if self.static_libs.is_empty() {
            return Err(format!(
                "iree-sys: {origin} names no IREE libraries; run `cargo xtask build-iree`"
            ));
        }
        for lib in &self.static_libs {
            let file = format!("lib{lib}.a");
            if !self.lib_dirs.iter().any(|dir| dir.join(&file).is_file()) {
                return Err(format!(
                    "iree-sys: {origin} has no {file}; run `cargo xtask build-iree` and point IREE_DIR at its install (or unset IREE_DIR)"
                ));
            }
        }
        Ok(())
    }

    /// Prints the `cargo:` lines that link the runtime and describe it to
    /// dependent build scripts (`DEP_IREE_ROOT`, `DEP_IREE_INCLUDE`).
    pub fn emit_link_instructions(&self) {
        for dir in &self.lib_dirs {
            println!("cargo:rustc-link-search=native={}", dir.display());
        }
        for lib in &self.static_libs {
            println!(
                "cargo:rerun-if-changed={}",
                self.lib_dirs
                    .iter()
                    .map(|d| d.join(format!("lib{lib}.a")))
                    .find(|p| p.is_file())
                    .unwrap_or_default()
                    .display()
            );
            println!("cargo:rustc-link-lib=static={lib}");
        }
        for lib in &self.system_libs {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
        println!("cargo:root={}", self.prefix.display());
        println!("cargo:include={}", self.prefix.join("include").display());
        println!("cargo:rustc-env=IREE_SYS_RUNTIME_BUILD={}", self.build_id);
        if let Some(manifest) = &self.manifest {
            println!("cargo:manifest={}", manifest.display());
            println!("cargo:rustc-env=IREE_SYS_MANIFEST={}", manifest.display());
        }
    }
}
