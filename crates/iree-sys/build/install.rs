//! An installed IREE runtime: where its libraries are and what to link.

use std::path::{Path, PathBuf};

use crate::manifest::Manifest;
use crate::{features, release, target};

/// The link recipe, shared with `cargo xtask build-iree`.
const RUNTIME_LIBS: &str = include_str!("runtime-libs.txt");

/// Entries of `runtime-libs.txt` of one `kind` (`static` or `system`), as
/// (link name, path inside the CMake build folder).
pub(crate) fn runtime_libs(kind: &str) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
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
pub(crate) fn default_static_libs() -> Vec<String> {
    runtime_libs("static")
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// System libraries the runtime needs.
pub(crate) fn default_system_libs() -> Vec<String> {
    runtime_libs("system")
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// What the build script links against.
#[derive(Debug)]
pub(crate) struct Install {
    pub(crate) prefix: PathBuf,
    pub(crate) lib_dirs: Vec<PathBuf>,
    pub(crate) static_libs: Vec<String>,
    pub(crate) system_libs: Vec<String>,
    /// Apple frameworks (the Metal driver's), from the manifest.
    pub(crate) frameworks: Vec<String>,
    /// The `manifest.json` written by `cargo xtask build-iree`, if any, and
    /// its contents.
    pub(crate) manifest: Option<(PathBuf, Manifest)>,
    /// What identifies this build (`build_info::RUNTIME_BUILD`): the
    /// manifest's key, else the folder it came from.
    pub(crate) build_id: String,
    /// The HAL drivers compiled in, when known (an install without a
    /// manifest does not say).
    pub(crate) drivers: Option<Vec<String>>,
    /// Where it came from, in words, for errors (`IREE_DIR=…`).
    pub(crate) origin: String,
}

impl Install {
    /// An install prefix holding `lib/` (and `include/`), such as the one
    /// `cargo xtask build-iree` writes; its `manifest.json` is used if present.
    pub(crate) fn from_prefix(prefix: &Path) -> Result<Self, String> {
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
        let origin = format!("IREE_DIR={}", prefix.display());
        let version_json = prefix.join("version.json");
        if !version_json.is_file() {
            return Err(format!(
                "iree-sys: {origin} has neither a manifest.json (`cargo xtask build-iree`) nor a \
                 version.json, so its IREE release is unknown; copy runtime/version.json of the \
                 IREE {} sources it was built from into it",
                release::RELEASE
            ));
        }
        println!("cargo:rerun-if-changed={}", version_json.display());
        release::check(&release::read_version_json(&version_json)?, &origin)?;
        let install = Install {
            prefix: prefix.to_path_buf(),
            lib_dirs: vec![prefix.join("lib")],
            static_libs: default_static_libs(),
            system_libs: default_system_libs(),
            frameworks: Vec::new(),
            manifest: None,
            build_id: format!("install {}", prefix.display()),
            drivers: None,
            origin,
        };
        install.check(&install.origin)?;
        Ok(install)
    }

    /// The manifest of the install `cargo xtask build-iree` recorded for
    /// this workspace and the target being built, if there is one (only a
    /// checkout of this crate's repository has it):
    /// `<workspace>/target/iree/manifest.json` for the host,
    /// `manifest-<triple>.json` for a cross build
    /// (`cargo xtask build-iree --target <triple>`).
    pub(crate) fn workspace_manifest() -> Option<PathBuf> {
        let crate_dir = PathBuf::from(
            std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
        );
        let name = match target::cross() {
            Some(triple) => format!("manifest-{triple}.json"),
            None => "manifest.json".to_owned(),
        };
        let manifest = crate_dir.join("../../target/iree").join(name);
        // Not `rerun-if-changed` while missing: Cargo would rerun the build
        // script on every build.
        manifest.is_file().then_some(manifest)
    }

    /// The install a `manifest.json` of `cargo xtask build-iree` describes.
    pub(crate) fn from_manifest(path: &Path) -> Result<Self, String> {
        println!("cargo:rerun-if-changed={}", path.display());
        let manifest = Manifest::read(path).map_err(|e| format!("iree-sys: {e}"))?;
        let origin = format!("the install of {}", path.display());
        release::check(&manifest.iree_version, &origin)?;
        target::check(manifest.target.as_deref(), path)?;
        let install = Install {
            prefix: manifest.prefix.clone(),
            lib_dirs: vec![manifest.lib_dir.clone()],
            static_libs: manifest.static_libs.clone(),
            system_libs: manifest.system_libs.clone(),
            frameworks: manifest.frameworks.clone(),
            build_id: manifest.key.clone(),
            drivers: Some(manifest.drivers.clone()),
            origin,
            manifest: Some((
                path.canonicalize().unwrap_or_else(|_| path.to_path_buf()),
                manifest,
            )),
        };
        install.check(&install.origin)?;
        Ok(install)
    }

    /// Fails with one line naming `origin` and the fix when a library is missing.
    pub(crate) fn check(&self, origin: &str) -> Result<(), String> {
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
    /// dependent build scripts (`DEP_IREE_ROOT`, and `DEP_IREE_INCLUDE` for
    /// an install).
    pub(crate) fn emit_link_instructions(&self) {
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
        for framework in &self.frameworks {
            println!("cargo:rustc-link-lib=framework={framework}");
        }
        println!("cargo:root={}", self.prefix.display());
        // A build from source links from its build folder: no headers
        // were installed.
        let include = self.prefix.join("include");
        if include.is_dir() {
            println!("cargo:include={}", include.display());
        }
        println!("cargo:rustc-env=IREE_SYS_RUNTIME_BUILD={}", self.build_id);
        if let Some(drivers) = &self.drivers {
            features::emit(drivers);
        }
        if let Some((path, manifest)) = &self.manifest {
            if let Some(provider) = manifest.tracing_provider() {
                // `iree_trace_app_enter` starts it (`src/inline.rs`).
                println!("cargo:rustc-cfg=iree_sys_tracing=\"{provider}\"");
            }
            println!("cargo:manifest={}", path.display());
            println!("cargo:rustc-env=IREE_SYS_MANIFEST={}", path.display());
            println!(
                "cargo:rustc-env=IREE_SYS_COMPILER_LIBRARY={}",
                manifest.libiree_compiler.display()
            );
            println!(
                "cargo:rustc-env=IREE_SYS_IREE_COMPILE={}",
                manifest.iree_compile.display()
            );
            println!(
                "cargo:rustc-env=IREE_SYS_COMPILER_VERSION={}",
                manifest.compiler_version
            );
        }
    }
}
