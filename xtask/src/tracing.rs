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
//!   sources (the crates.io package eerie-sys 0.5.0) do not carry: it needs
//!   an IREE checkout with that submodule (`--source`, `IREE_SOURCE_DIR`).
//! - `console`: IREE's own provider, which prints zones to stderr; it builds
//!   from the pinned sources.

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::build_iree::{self, Options};
use crate::process::{self, step};

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

    /// Fails, saying where to get them, when the IREE sources at `source`
    /// lack what the provider builds from.
    pub(crate) fn check_source(self, source: &Path) -> Result<()> {
        if self == Tracing::Tracy && !source.join("third_party/tracy/CMakeLists.txt").is_file() {
            bail!(
                "--tracing=tracy builds Tracy's client from IREE's third_party/tracy submodule, \
                 which {} lacks (the pinned crates.io sources, eerie-sys 0.5.0, do not carry \
                 it); pass --source (or IREE_SOURCE_DIR) an IREE 3.13 checkout after `git \
                 submodule update --init third_party/tracy`, or use --tracing=console, which \
                 builds from the pinned sources",
                source.display()
            );
        }
        Ok(())
    }

    /// The static libraries, beyond the runtime's, that a program linking
    /// this build needs, as (link name, path inside the CMake build folder),
    /// and the system libraries.
    pub(crate) fn extra_libs(self) -> (Vec<(&'static str, &'static str)>, Vec<&'static str>) {
        match self {
            // Tracy's client is C++: IREE builds it as a library of its own.
            Tracing::Tracy => (
                vec![("TracyClient", "third_party/tracy/libTracyClient.a")],
                vec!["stdc++"],
            ),
            Tracing::Console => (Vec::new(), Vec::new()),
        }
    }
}

/// What `cargo xtask test` checks: a console tracing runtime (CPU drivers
/// only) builds and links, and iree-safe's `load_call_drop` example runs
/// on it, with the provider's zones on stderr (the provider started by
/// `iree_trace_app_enter`). Its own target folder: the IREE_DIR differs.
pub(crate) fn check() -> Result<()> {
    let options = Options::from_args(&["--tracing=console", "--drivers", "local-sync,local-task"])?;
    let manifest = build_iree::run(&options)?;
    step(
        "iree-safe's load_call_drop example on the console tracing runtime",
        || {
            let mut cargo = process::cargo_with_iree(&manifest.prefix);
            cargo
                .args([
                    "run",
                    "--quiet",
                    "-p",
                    "iree-safe",
                    "--example",
                    "load_call_drop",
                ])
                .env(
                    "CARGO_TARGET_DIR",
                    process::workspace_root().join("target/tracing-check"),
                );
            let out = cargo
                .output()
                .with_context(|| format!("cannot start {}", process::describe(&cargo)))?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            let zones = stderr.lines().filter(|line| line.contains('►')).count();
            if !out.status.success() {
                bail!(
                    "{} failed with {}; the last lines:\n{}",
                    process::describe(&cargo),
                    out.status,
                    last_lines(&stderr, 20)
                );
            }
            if !stderr.contains("► iree_vm_instance_create") {
                bail!(
                    "the example ran on the tracing runtime but traced no instance creation \
                     ({zones} zones); the last lines:\n{}",
                    last_lines(&stderr, 20)
                );
            }
            eprintln!("[xtask]   {zones} zones traced");
            Ok(())
        },
    )
}

/// The last `count` lines of `text`.
fn last_lines(text: &str, count: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(count)..].join("\n")
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
    fn tracy_needs_the_submodule_the_pinned_sources_lack() {
        let empty = tempfile::tempdir().unwrap();
        let error = Tracing::Tracy
            .check_source(empty.path())
            .unwrap_err()
            .to_string();
        assert!(error.contains("third_party/tracy"), "{error}");
        assert!(Tracing::Console.check_source(empty.path()).is_ok());
    }
}
