//! `cargo xtask build-iree`: build the IREE runtime from source and install it.
//!
//! The runtime is configured for the host only (no compiler, tests, samples,
//! Python bindings, tracing or cpuinfo), with the HAL drivers asked for and the
//! embedded-ELF and system-library executable loaders, always in Release
//! whatever Cargo's profile. Each combination of source version and options
//! gets its own folder `target/iree/<version>-<hash>/` holding `build/`,
//! `install/` and `build.log` (CMake's and Ninja's output; the terminal gets
//! one line per phase and the compile counter); a second run with nothing
//! changed only checks the manifest. `--target` cross-builds for another
//! Linux architecture (`cross.rs`); `--tracing` builds a profiling runtime
//! beside the normal one (`tracing.rs`). On macOS the default drivers are
//! the CPU ones and Metal (`host.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use lexopt::prelude::*;

use crate::build_log::BuildLog;
use crate::cuda::CudaHeaders;
use crate::manifest::{self, Manifest};
use crate::process::{self, step};
use crate::tracing::Tracing;
use crate::{cli, cross, host, source, tools};

/// Command-line options of `build-iree`.
#[derive(Debug, Default)]
pub(crate) struct Options {
    pub source: Option<PathBuf>,
    pub drivers: Vec<String>,
    pub force: bool,
    /// Cross-build for this target instead of the host.
    pub target: Option<&'static cross::Target>,
    /// Build with IREE's runtime tracing, into an install of its own.
    pub tracing: Option<Tracing>,
}

impl Options {
    /// The options `parser` gives; `None` for `--help`.
    pub(crate) fn parse(parser: &mut lexopt::Parser) -> Result<Option<Self>> {
        let mut options = Options {
            drivers: host::default_drivers()
                .iter()
                .map(|d| d.to_string())
                .collect(),
            ..Options::default()
        };
        let mut drivers_named = false;
        while let Some(arg) = parser.next()? {
            match arg {
                arg if cli::is_help(&arg) => return Ok(None),
                Long("source") => {
                    options.source = Some(parser.value().context("--source needs a folder")?.into())
                }
                Long("drivers") => {
                    let list = parser
                        .value()
                        .context("--drivers needs a comma-separated list")?;
                    options.drivers = cli::text(list)?
                        .split(',')
                        .map(|d| d.trim().to_owned())
                        .filter(|d| !d.is_empty())
                        .collect();
                    drivers_named = true;
                }
                Long("force") => options.force = true,
                Long("tracing") => {
                    let provider = parser.optional_value().map(cli::text).transpose()?;
                    options.tracing = Some(Tracing::parse(provider.as_deref())?);
                }
                Long("target") => {
                    let triple = parser.value().context("--target needs a target triple")?;
                    options.target = Some(cross::Target::parse(&cli::text(triple)?)?);
                }
                arg => return Err(cli::unexpected("build-iree", arg)),
            }
        }
        for driver in &options.drivers {
            if !host::ALL_DRIVERS.contains(&driver.as_str()) {
                return Err(anyhow!(
                    "unknown driver `{driver}`; choose from {}",
                    host::ALL_DRIVERS.join(", ")
                ));
            }
        }
        if let Some(target) = options.target {
            let named = std::mem::take(&mut options.drivers);
            options.drivers = target.drivers(drivers_named.then_some(named))?;
        } else {
            host::check_drivers(&options.drivers)?;
        }
        options.drivers.sort();
        options.drivers.dedup();
        Ok(Some(options))
    }

    /// The options `args` give (with no `--help` among them).
    pub(crate) fn from_args(args: &[&str]) -> Result<Self> {
        let parser = &mut lexopt::Parser::from_args(args.iter().copied());
        Self::parse(parser)?.context("--help is no option to build with")
    }
}

/// The host's install with the default options (what every command but
/// `build-iree` itself needs), built first if needed.
pub(crate) fn ensure() -> Result<Manifest> {
    run(&Options::from_args(&[])?)
}

/// Builds and installs IREE if needed; returns the manifest of the install.
pub(crate) fn run(options: &Options) -> Result<Manifest> {
    let started = Instant::now();
    let tools = step(
        "checking tools (CMake, Ninja, libclang, IREE compiler)",
        tools::ensure,
    )?;
    let mut source = source::resolve(options.source.as_deref())?;
    if let Some(tracing) = options.tracing {
        source = tracing.prepare_source(source)?;
    }
    let cuda = options
        .drivers
        .iter()
        .any(|d| d == "cuda")
        .then(|| step("finding the CUDA headers", crate::cuda::locate))
        .transpose()?;
    let mut cmake_options = cmake_options(&options.drivers, cuda.as_ref(), options.tracing);
    let mut key_parts = vec![source.version.as_str(), source.dir.to_str().unwrap_or("")];
    key_parts.extend(cmake_options.iter().map(String::as_str));
    if let Some(cuda) = &cuda {
        key_parts.push(cuda.root().to_str().unwrap_or(""));
    }
    let target_key = options.target.map(cross::Target::key);
    key_parts.extend(target_key.as_deref());
    let key = format!("{}-{}", source.version, process::short_hash(&key_parts));
    let root = process::workspace_root().join("target/iree").join(&key);
    let (build_dir, prefix) = (root.join("build"), root.join("install"));
    // A cross build records its manifest apart: the host's stays current.
    // A tracing build records none: it is selected by IREE_DIR alone.
    let current = options
        .target
        .map_or_else(manifest::current_path, |target| target.manifest_path());
    let current = options.tracing.is_none().then_some(current);

    if !options.force {
        if let Ok(existing) = Manifest::read(&prefix.join("manifest.json")) {
            if existing.key == key
                && existing.is_complete()
                && existing.compiler_version == tools.compiler_version
            {
                if let Some(current) = &current {
                    existing.write(current)?;
                }
                eprintln!(
                    "[xtask] IREE {} is up to date in {} ({:.1}s)",
                    existing.iree_version,
                    prefix.display(),
                    started.elapsed().as_secs_f64()
                );
                announce_tracing(&existing);
                return Ok(existing);
            }
        }
    }

    eprintln!(
        "[xtask] IREE source: {} ({})",
        source.dir.display(),
        source.origin
    );
    let mut log = BuildLog::create(&root.join("build.log"))?;
    eprintln!(
        "[xtask] CMake's and Ninja's output goes to {}",
        log.path().display()
    );
    let build_started = Instant::now();
    if let Some(target) = options.target {
        cmake_options.extend(target.prepare(&source, &tools, &root, &mut log)?);
    }
    if options.force || !build_dir.join("CMakeCache.txt").exists() {
        step("configuring the IREE runtime with CMake", || {
            let mut cmake = Command::new(&tools.cmake);
            cmake
                .args(["-G", "Ninja", "-S"])
                .arg(&source.dir)
                .arg("-B")
                .arg(&build_dir);
            cmake.arg(format!("-DCMAKE_MAKE_PROGRAM={}", tools.ninja.display()));
            cmake.args(&cmake_options);
            if let Some((name, value)) = cuda.as_ref().and_then(CudaHeaders::configure_env) {
                cmake.env(name, value);
            }
            log.run(&mut cmake)
        })?;
    }
    let tracing_system_libs = options
        .tracing
        .map(Tracing::system_libs)
        .unwrap_or_default();
    step(
        "building iree_runtime_unified (Release; ~20-40 s on 2 cores)",
        || {
            log.run_with_counter(
                "compiling",
                Command::new(&tools.cmake)
                    .arg("--build")
                    .arg(&build_dir)
                    .args(["--target", "iree_runtime_unified"]),
            )
        },
    )?;
    let static_libs: Vec<(&str, &str)> = runtime_libs("static").collect();
    let manifest = step("installing headers, libraries and the manifest", || {
        install(&source, &build_dir, &prefix, &static_libs)?;
        let manifest = Manifest {
            key,
            iree_version: source.version.clone(),
            source_origin: source.origin.clone(),
            source_dir: source.dir.clone(),
            cmake_options,
            drivers: options.drivers.clone(),
            include_dir: prefix.join("include"),
            lib_dir: prefix.join("lib"),
            prefix: prefix.clone(),
            static_libs: static_libs
                .iter()
                .map(|(name, _)| (*name).to_owned())
                .collect(),
            system_libs: runtime_libs("system")
                .map(|(name, _)| name)
                .chain(tracing_system_libs.iter().copied())
                .map(str::to_owned)
                .collect(),
            frameworks: host::frameworks(&options.drivers),
            compiler_version: tools.compiler_version.clone(),
            iree_compile: tools.iree_compile.clone(),
            libiree_compiler: tools.libiree_compiler.clone(),
            libclang_dir: tools.libclang_dir.clone(),
            build_seconds: build_started.elapsed().as_secs_f64(),
            target: Some(match options.target {
                Some(target) => target.triple.to_owned(),
                None => process::host_triple()?,
            }),
        };
        manifest.write(&prefix.join("manifest.json"))?;
        if let Some(current) = &current {
            manifest.write(current)?;
        }
        Ok(manifest)
    })?;
    eprintln!(
        "[xtask] IREE {} installed in {} ({:.1}s in all)",
        manifest.iree_version,
        prefix.display(),
        started.elapsed().as_secs_f64()
    );
    announce_tracing(&manifest);
    Ok(manifest)
}

/// Tells how to use a tracing build, which never becomes the current install.
fn announce_tracing(manifest: &Manifest) {
    if let Some(provider) = manifest.tracing_provider() {
        eprintln!(
            "[xtask] a {provider} tracing runtime; build against it with IREE_DIR={} \
             (docs/profiling.md)",
            manifest.prefix.display()
        );
    }
}

/// The link recipe, shared with the iree-sys build script: `static NAME
/// PATH` and `system NAME` lines.
const RUNTIME_LIBS: &str = include_str!("../../crates/iree-sys/build/runtime-libs.txt");

/// Entries of `RUNTIME_LIBS` of one `kind`, as (link name, path in the build).
fn runtime_libs(kind: &str) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
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

/// The driver-independent CMake options, shared with the iree-sys build script.
const RUNTIME_OPTIONS: &str = include_str!("../../crates/iree-sys/build/runtime-options.txt");

fn cmake_options(
    drivers: &[String],
    cuda: Option<&CudaHeaders>,
    tracing: Option<Tracing>,
) -> Vec<String> {
    let mut options: Vec<String> = RUNTIME_OPTIONS
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter(|line| tracing.is_none() || !line.starts_with("IREE_ENABLE_RUNTIME_TRACING="))
        .map(String::from)
        .collect();
    options.extend(tracing.map(Tracing::cmake_options).unwrap_or_default());
    // The host's drivers only (IREE_HAL_DRIVER_DEFAULTS=OFF leaves the
    // others out), so that Linux's options, and so its install keys, are
    // what they were before macOS's `metal`.
    options.extend(host::Os::current().driver_defines(drivers));
    options.extend(cuda.and_then(CudaHeaders::cmake_define));
    options.into_iter().map(|o| format!("-D{o}")).collect()
}

/// Copies the public headers (source, generated, flatcc's and the compiler's
/// embedding API) and the `static_libs` (link name, path in the build)
/// into `prefix`.
fn install(
    source: &source::Source,
    build_dir: &Path,
    prefix: &Path,
    static_libs: &[(&str, &str)],
) -> Result<()> {
    let include = prefix.join("include");
    let _ = std::fs::remove_dir_all(prefix);
    copy_headers(&source.dir.join("runtime/src"), &include)?;
    copy_headers(&build_dir.join("runtime/src"), &include)?;
    copy_headers(&source.dir.join("compiler/bindings/c"), &include)?;
    // The bytecode module's headers include flatcc's.
    copy_headers(&source.dir.join("third_party/flatcc/include"), &include)?;
    let lib = prefix.join("lib");
    std::fs::create_dir_all(&lib).with_context(|| format!("cannot create {}", lib.display()))?;
    for (name, relative) in static_libs {
        let from = build_dir.join(relative);
        std::fs::copy(&from, lib.join(format!("lib{name}.a")))
            .with_context(|| format!("cannot copy {}", from.display()))?;
    }
    Ok(())
}

/// Copies every `*.h` and `*.inc` below `from` to the same relative path below `to`,
/// skipping CMake's own folders.
fn copy_headers(from: &Path, to: &Path) -> Result<()> {
    let entries =
        std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read {}", from.display()))?;
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "CMakeFiles" {
                copy_headers(&path, &to.join(&name))?;
            }
        } else if path
            .extension()
            .is_some_and(|ext| ext == "h" || ext == "inc")
        {
            std::fs::create_dir_all(to)
                .with_context(|| format!("cannot create {}", to.display()))?;
            std::fs::copy(&path, to.join(&name))
                .with_context(|| format!("cannot copy {}", path.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracing_replaces_the_off_switch_and_changes_the_options() {
        let drivers = ["local-task".to_owned()];
        let plain = cmake_options(&drivers, None, None);
        let traced = cmake_options(&drivers, None, Some(Tracing::Console));
        assert!(plain.contains(&"-DIREE_ENABLE_RUNTIME_TRACING=OFF".to_owned()));
        assert!(!traced.contains(&"-DIREE_ENABLE_RUNTIME_TRACING=OFF".to_owned()));
        for option in [
            "-DIREE_ENABLE_RUNTIME_TRACING=ON",
            "-DIREE_TRACING_PROVIDER=console",
        ] {
            assert!(traced.contains(&option.to_owned()), "{traced:?}");
        }
    }

    #[test]
    fn macos_drivers_parse_only_on_macos() {
        let parsed = Options::from_args(&["--drivers", "local-task,metal"]);
        assert_eq!(parsed.is_ok(), cfg!(target_os = "macos"), "{parsed:?}");
        let error = Options::from_args(&["--tracing=perfetto"]).unwrap_err();
        assert!(
            format!("{error:#}").contains("tracy or console"),
            "{error:#}"
        );
    }
}
