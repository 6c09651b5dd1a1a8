//! `cargo xtask build-iree --tracing[=PROVIDER]`: a runtime built with IREE's
//! instrumented tracing (`IREE_ENABLE_RUNTIME_TRACING=ON`), for profiling
//! (docs/profiling.md).
//!
//! Its CMake options differ, so it gets an install key, and folder, of its
//! own; it never becomes the current install (`target/iree/manifest.json`):
//! a build selects it with `IREE_DIR=<its install>`, which `build-iree`
//! prints. Two providers (IREE's `IREE_TRACING_PROVIDER`):
//!
//! - `tracy` (the default): Tracy's client, streaming to the Tracy GUI. IREE
//!   builds it from its `third_party/tracy` submodule, which the pinned
//!   sources (the crates.io package eerie-sys 0.5.0) do not carry: then the
//!   client comes from the pinned crates.io package tracy-client-sys, put
//!   where IREE's CMake looks by an overlay of the sources
//!   (`tracy_client.rs`). An IREE checkout with the submodule (`--source`,
//!   `IREE_SOURCE_DIR`) is used as it is.
//! - `console`: IREE's own provider, which prints zones to stderr.

use anyhow::{bail, Result};

use crate::build_iree::{self, Options};
use crate::process::{self, step};
use crate::source::Source;
use crate::{tracy_capture, tracy_client};

/// The tracing provider a runtime is built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tracing {
    /// Tracy's client (`IREE_TRACING_PROVIDER=tracy`).
    Tracy,
    /// IREE's console provider (`IREE_TRACING_PROVIDER=console`).
    Console,
}

impl Tracing {
    /// The provider `--tracing[=NAME]` names (`None`: the default, Tracy).
    pub(crate) fn parse(name: Option<&str>) -> Result<Self> {
        match name {
            None | Some("tracy") => Ok(Tracing::Tracy),
            Some("console") => Ok(Tracing::Console),
            Some(other) => bail!("unknown tracing provider `{other}`; choose tracy or console"),
        }
    }

    /// IREE's name of the provider.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Tracing::Tracy => "tracy",
            Tracing::Console => "console",
        }
    }

    /// The CMake options (`NAME=VALUE`) that replace
    /// `IREE_ENABLE_RUNTIME_TRACING=OFF`. IREE's `-Werror` is off: with
    /// tracing on, GCC 12 and later flag the trace of a `realloc`ed pointer
    /// in `allocator_libc.c` (`IREE_TRACE_FREE` after `realloc`, which only
    /// records the old address) as `-Wuse-after-free`, and the build stops.
    pub(crate) fn cmake_options(self) -> Vec<String> {
        vec![
            "IREE_ENABLE_RUNTIME_TRACING=ON".to_owned(),
            format!("IREE_TRACING_PROVIDER={}", self.name()),
            // Mode 2 (zones, device zones, allocations, log messages; IREE's
            // default), named so that the key and the manifest say it. No
            // mode turns on lock tracking (`IREE_TRACING_FEATURE_*_LOCKS`,
            // only through `IREE_TRACING_FEATURES`), which would add a field
            // to `iree_mutex_t` that iree-sys's bindings do not declare.
            "IREE_TRACING_MODE=2".to_owned(),
            "IREE_ENABLE_WERROR_FLAG=OFF".to_owned(),
        ]
    }

    /// The IREE source tree to configure: `source` itself, unless the
    /// provider is Tracy and `source` lacks IREE's `third_party/tracy`
    /// submodule (the pinned sources do), then an overlay of it under
    /// `target/iree/` with Tracy's client from the pinned crates.io package
    /// tracy-client-sys (`tracy_client.rs`).
    pub(crate) fn prepare_source(self, mut source: Source) -> Result<Source> {
        if self == Tracing::Console
            || source
                .dir
                .join("third_party/tracy/CMakeLists.txt")
                .is_file()
        {
            return Ok(source);
        }
        let dir = source.dir.to_str().unwrap_or_default();
        let root = process::workspace_root()
            .join("target/iree/tracy-overlay")
            .join(process::short_hash(&[dir, tracy_client::VERSION]));
        source.dir = step(
            &format!(
                "adding Tracy {}'s client ({} {}) to the IREE sources",
                tracy_client::TRACY_VERSION,
                tracy_client::PACKAGE,
                tracy_client::VERSION
            ),
            || tracy_client::overlay(&source.dir, &root),
        )?;
        source.origin = format!(
            "{}, with Tracy {}'s client from crates.io package {} {} (checksum in Cargo.lock)",
            source.origin,
            tracy_client::TRACY_VERSION,
            tracy_client::PACKAGE,
            tracy_client::VERSION
        );
        Ok(source)
    }

    /// The system libraries, beyond the runtime's, that a program linking
    /// this build needs. Tracy's client is C++ (IREE compiles it into the
    /// runtime library, `tracy.cc`).
    pub(crate) fn system_libs(self) -> &'static [&'static str] {
        match self {
            Tracing::Tracy if cfg!(target_os = "macos") => &["c++"],
            Tracing::Tracy => &["stdc++"],
            Tracing::Console => &[],
        }
    }
}

/// What `cargo xtask test` checks: a Tracy tracing runtime (CPU drivers
/// only) builds from the pinned sources and links, and iree-safe's
/// `load_call_drop` example, built on it, runs and streams its trace to a
/// Tracy 0.11.1 profiler's handshake (`tracy_capture.rs`). Its own target
/// folder: the IREE_DIR differs.
pub(crate) fn check() -> Result<()> {
    let options = Options::from_args(&["--tracing=tracy", "--drivers", "local-sync,local-task"])?;
    let manifest = build_iree::run(&options)?;
    let target_dir = process::workspace_root().join("target/tracing-check");
    step(
        "building iree-safe's load_call_drop example on the Tracy runtime",
        || {
            process::run(
                process::cargo_with_iree(&manifest.prefix)
                    .args([
                        "build",
                        "--quiet",
                        "-p",
                        "iree-safe",
                        "--example",
                        "load_call_drop",
                    ])
                    .env("CARGO_TARGET_DIR", &target_dir),
            )
        },
    )?;
    step("running it, connected to as Tracy's profiler", || {
        let bytes = tracy_capture::capture(&target_dir.join("debug/examples/load_call_drop"))?;
        eprintln!("[xtask]   {bytes} bytes of trace received");
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_are_named_and_tracy_is_the_default() {
        assert_eq!(Tracing::parse(None).unwrap(), Tracing::Tracy);
        assert_eq!(Tracing::parse(Some("console")).unwrap(), Tracing::Console);
        let error = Tracing::parse(Some("perfetto")).unwrap_err().to_string();
        assert!(error.contains("choose tracy or console"), "{error}");
        assert_eq!(
            Tracing::Console.cmake_options(),
            [
                "IREE_ENABLE_RUNTIME_TRACING=ON",
                "IREE_TRACING_PROVIDER=console",
                "IREE_TRACING_MODE=2",
                "IREE_ENABLE_WERROR_FLAG=OFF"
            ]
        );
    }

    #[test]
    fn a_checkout_with_the_tracy_submodule_is_used_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("third_party/tracy")).unwrap();
        std::fs::write(dir.path().join("third_party/tracy/CMakeLists.txt"), "").unwrap();
        let source = Source {
            dir: dir.path().to_path_buf(),
            version: "3.13.0".to_owned(),
            origin: "user checkout".to_owned(),
        };
        for tracing in [Tracing::Tracy, Tracing::Console] {
            let prepared = tracing.prepare_source(source.clone()).unwrap();
            assert_eq!(prepared.dir, source.dir);
            assert_eq!(prepared.origin, source.origin);
        }
        assert_eq!(Tracing::Tracy.system_libs().len(), 1);
        assert!(Tracing::Console.system_libs().is_empty());
    }
}
