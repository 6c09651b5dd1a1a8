//! `cargo xtask bindgen [--check]`: the committed raw bindings of `iree-sys`.
//!
//! The bindings are generated once from the installed headers and committed,
//! so building `iree-sys` needs neither libclang nor the IREE headers, and
//! miri and docs.rs builds get the same declarations. They are generated for
//! each target the crate supports (x86_64 and aarch64 Linux, macOS on Apple
//! Silicon, all LP64). For Linux, what both architectures declare alike goes
//! into `crates/iree-sys/src/bindings.rs`; the few items whose C definition
//! differs ([`ARCH_ITEMS`]: `va_list`, glibc's mutex, IREE's architecture
//! name) go into `bindings_<arch>.rs`, which `iree-sys` includes for its
//! target. Generating checks that the shared part really is the same for
//! both.
//!
//! The aarch64 part is generated against the C library headers of Debian's
//! cross toolchain (`/usr/aarch64-linux-gnu/include`), which the command
//! installs when missing. macOS's bindings are a file of their own,
//! `bindings_aarch64_apple_darwin.rs` (`darwin.rs`), generated on Linux from
//! the macOS libc headers that zig ships (`zig.rs`, installed into the venv
//! when missing). `--check` (also run by the test below and by `cargo xtask
//! test`) fails when a committed file, Linux's or macOS's, no longer matches
//! what the headers produce; `--target aarch64-apple-darwin` limits the
//! command to macOS's file.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};

use crate::manifest::{self, Manifest};

mod darwin;
use crate::{cross, process};

/// Items whose C definition differs between x86_64 and aarch64 Linux (as
/// bindgen regexes): left out of the shared bindings and generated per
/// architecture.
const ARCH_ITEMS: &[&str] = &[
    // The architecture's name (`"x86_64"`, `"arm_64"`) and flag.
    "IREE_ARCH.*",
    // `va_list`: an array of one `__va_list_tag` on x86_64, an opaque
    // 32-byte struct passed by value on aarch64; and what takes one.
    "__builtin_va_list",
    "__va_list_tag",
    "__gnuc_va_list",
    "va_list",
    "iree_status_allocate_vf",
    "iree_vsnprintf",
    "iree_vfctprintf",
    // glibc's `pthread_mutex_t` (inside `iree_mutex_t`): 40 bytes on
    // x86_64, 48 on aarch64; and the types only it refers to.
    "pthread_mutex_t",
    "__pthread_mutex_s",
    "__pthread_internal_list",
    "__pthread_list_t",
];

/// An architecture the bindings are generated for.
struct Arch {
    /// Rust's `target_arch`, which names its file (`bindings_<name>.rs`).
    name: &'static str,
    /// clang's `--target`.
    clang_target: &'static str,
    /// The C compiler whose freestanding headers (stddef.h, stdbool.h)
    /// stand in for libclang's, which the venv's libclang lacks.
    gcc: String,
    /// The target's C library headers, when they are not the system's.
    libc_include: Option<PathBuf>,
}

/// The architectures, the host's (x86_64) first.
fn arches() -> [Arch; 2] {
    let aarch64 = &cross::AARCH64_GNU;
    [
        Arch {
            name: "x86_64",
            clang_target: "x86_64-linux-gnu",
            gcc: "gcc".to_owned(),
            libc_include: None,
        },
        Arch {
            name: "aarch64",
            clang_target: "aarch64-linux-gnu",
            gcc: aarch64.gcc(),
            libc_include: Some(aarch64.sysroot().join("include")),
        },
    ]
}

/// The wrapper header listing every IREE header the bindings cover.
fn wrapper_header() -> PathBuf {
    process::workspace_root().join("crates/iree-sys/wrapper.h")
}

/// The committed bindings of `file` (`bindings.rs`, `bindings_<arch>.rs`).
fn committed(file: &str) -> PathBuf {
    process::workspace_root()
        .join("crates/iree-sys/src")
        .join(file)
}

/// The generated files: (file name, contents).
type Files = Vec<(String, String)>;

/// What `bindgen` was asked for.
#[derive(Debug, PartialEq)]
pub(crate) struct Request {
    /// Only check the committed files.
    pub check: bool,
    /// macOS's bindings alone (`--target aarch64-apple-darwin`).
    pub darwin: bool,
}

/// The arguments of `bindgen`; `None` for `--help`.
pub(crate) fn parse(parser: &mut lexopt::Parser) -> Result<Option<Request>> {
    let mut request = Request {
        check: false,
        darwin: false,
    };
    while let Some(arg) = parser.next()? {
        match arg {
            arg if crate::cli::is_help(&arg) => return Ok(None),
            lexopt::Arg::Long("check") => request.check = true,
            lexopt::Arg::Long("target") => {
                let triple = crate::cli::text(parser.value().context("--target needs a triple")?)?;
                if triple != darwin::TARGET {
                    bail!(
                        "bindgen --target: `{triple}` is not a target of its own; the Linux \
                         bindings (x86_64 and aarch64) are generated without --target, macOS's \
                         with --target {}",
                        darwin::TARGET
                    );
                }
                request.darwin = true;
            }
            arg => return Err(crate::cli::unexpected("bindgen", arg)),
        }
    }
    Ok(Some(request))
}

/// Runs a [`Request`].
pub(crate) fn run_request(request: Request) -> Result<()> {
    let manifest = Manifest::read(&manifest::current_path())
        .map_err(anyhow::Error::msg)
        .context("no IREE install to read the headers of: run `cargo xtask build-iree` first")?;
    if request.darwin {
        let file = darwin::generate(&manifest)?;
        return write_or_check(&[file], request.check);
    }
    run(request.check)
}

/// Writes the bindings of every target, or with `check` fails if a
/// committed file is stale.
pub(crate) fn run(check: bool) -> Result<()> {
    if std::env::consts::ARCH != "x86_64" || std::env::consts::OS != "linux" {
        bail!("the bindings are generated on x86_64 Linux (the aarch64 and macOS headers are cross headers there)");
    }
    let manifest = Manifest::read(&manifest::current_path())
        .map_err(anyhow::Error::msg)
        .context("no IREE install to read the headers of: run `cargo xtask build-iree` first")?;
    process::step(
        "the aarch64 C library headers (installing the cross toolchain if missing)",
        || cross::AARCH64.ensure_toolchain(),
    )?;
    let mut files = generate(&manifest)?;
    files.push(darwin::generate(&manifest)?);
    write_or_check(&files, check)
}

/// Writes `files`, or with `check` fails if a committed one differs.
fn write_or_check(files: &[(String, String)], check: bool) -> Result<()> {
    if check {
        let stale = stale(files);
        if !stale.is_empty() {
            return Err(anyhow!(
                "{} stale; run `cargo xtask bindgen` and commit the result",
                stale.join(", ")
            ));
        }
        eprintln!("[xtask] the bindings of crates/iree-sys/src are up to date");
    } else {
        for (file, text) in files {
            let path = committed(file);
            std::fs::write(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("[xtask] wrote {}", path.display());
        }
    }
    Ok(())
}

/// The committed files that differ from `files`, as `crates/…` paths.
fn stale(files: &[(String, String)]) -> Vec<String> {
    files
        .iter()
        .filter(|(file, text)| std::fs::read_to_string(committed(file)).ok().as_ref() != Some(text))
        .map(|(file, _)| format!("crates/iree-sys/src/{file}"))
        .collect()
}

/// Runs bindgen over `wrapper.h` with the installed headers for every
/// architecture: the shared `bindings.rs` (checked to be the same for all),
/// then one `bindings_<arch>.rs` each.
pub(crate) fn generate(manifest: &Manifest) -> Result<Files> {
    // clang-sys finds the libclang that `build-iree` installed into the venv.
    std::env::set_var("LIBCLANG_PATH", &manifest.libclang_dir);
    let mut shared: Option<(&str, String)> = None;
    let mut files = Vec::new();
    for arch in &arches() {
        let text = bindgen(manifest, arch, Part::Shared)?;
        match &shared {
            None => shared = Some((arch.name, text)),
            Some((first, expected)) => {
                if let Some(line) = first_difference(expected, &text) {
                    return Err(anyhow!(
                        "the bindings of {first} and {} differ beyond ARCH_ITEMS (first at \
                         `{line}`); add the item to ARCH_ITEMS in xtask/src/bindings.rs",
                        arch.name
                    ));
                }
            }
        }
        files.push((
            format!("bindings_{}.rs", arch.name),
            bindgen(manifest, arch, Part::Arch)?,
        ));
    }
    let (_, shared) = shared.expect("at least one architecture");
    let header = format!(
        "// Generated by `cargo xtask bindgen` from the IREE {} headers listed in\n\
         // crates/iree-sys/wrapper.h, the same for x86_64 and aarch64 Linux (what\n\
         // differs is in bindings_<arch>.rs). Do not edit by hand.\n\n",
        manifest.iree_version
    );
    files.insert(0, ("bindings.rs".to_owned(), header + &shared));
    Ok(files)
}

/// Which part of the bindings to generate.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    /// Everything but [`ARCH_ITEMS`].
    Shared,
    /// [`ARCH_ITEMS`] alone (the shared part declares what they refer to).
    Arch,
}

/// The options every target's bindings share: the wrapper header, the
/// installed headers, clang's `--target`.
fn base_builder(manifest: &Manifest, clang_target: &str) -> bindgen::Builder {
    bindgen::Builder::default()
        .header(wrapper_header().to_string_lossy())
        .clang_arg(format!("--target={clang_target}"))
        .clang_arg(format!("-I{}", manifest.include_dir.display()))
        // Declares the system allocator's control function, which the
        // static-inline `iree_allocator_system()` refers to.
        .clang_arg("-DIREE_ALLOCATOR_SYSTEM_CTL=iree_allocator_libc_ctl")
        .prepend_enum_name(false)
        .size_t_is_usize(true)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
}

/// One part of the bindings for `arch`.
fn bindgen(manifest: &Manifest, arch: &Arch, part: Part) -> Result<String> {
    let compiler_headers =
        process::output(std::process::Command::new(&arch.gcc).arg("-print-file-name=include"))
            .with_context(|| {
                format!(
                    "the {} bindings need {}'s headers (`cargo xtask bindgen` installs them)",
                    arch.name, arch.gcc
                )
            })?;
    let mut builder = base_builder(manifest, arch.clang_target)
        .clang_arg(format!("-isystem{}", compiler_headers.trim()));
    if let Some(include) = &arch.libc_include {
        if !include.join("stdio.h").is_file() {
            return Err(anyhow!(
                "no C library headers in {}; run `cargo xtask bindgen`, which installs them",
                include.display()
            ));
        }
        // The target's headers only, never the host's /usr/include.
        builder = builder
            .clang_arg("-nostdinc")
            .clang_arg(format!("-isystem{}", include.display()));
    }
    builder = match part {
        Part::Shared => ARCH_ITEMS.iter().fold(
            builder
                .allowlist_function("iree_.*")
                .allowlist_type("iree_.*")
                .allowlist_var("(iree|IREE)_.*"),
            |builder, item| builder.blocklist_item(item),
        ),
        Part::Arch => ARCH_ITEMS
            .iter()
            .fold(builder.allowlist_recursively(false), |builder, item| {
                builder.allowlist_item(item)
            }),
    };
    let bindings = builder
        .generate()
        .with_context(|| format!("bindgen failed for {}", arch.name))?
        .to_string();
    Ok(match part {
        Part::Shared => bindings,
        Part::Arch => format!(
            "// Generated by `cargo xtask bindgen` from the IREE {} headers listed in\n\
             // crates/iree-sys/wrapper.h: the items whose definition differs on {} Linux\n\
             // (ARCH_ITEMS in xtask/src/bindings.rs). Do not edit by hand.\n\n{bindings}",
            manifest.iree_version, arch.name
        ),
    })
}

/// The first line where `a` and `b` differ, if they do.
fn first_difference<'a>(a: &'a str, b: &'a str) -> Option<&'a str> {
    let mut lines = a.lines().zip(b.lines());
    match lines.find(|(x, y)| x != y) {
        Some((x, _)) => Some(x),
        None if a.lines().count() != b.lines().count() => Some("(the end of the file)"),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fails when the committed bindings differ from what the installed
    /// headers generate.
    #[test]
    fn committed_bindings_are_fresh() {
        let manifest = Manifest::read(&manifest::current_path())
            .unwrap_or_else(|e| panic!("{e}\nrun `cargo xtask build-iree` first"));
        let mut files = generate(&manifest).expect("bindgen runs over the installed headers");
        assert_eq!(
            files.len(),
            3,
            "the shared bindings and one per architecture"
        );
        files.push(darwin::generate(&manifest).expect("bindgen runs over zig's macOS headers"));
        let stale = stale(&files);
        assert!(
            stale.is_empty(),
            "{} stale: run `cargo xtask bindgen`",
            stale.join(", ")
        );
    }

    #[test]
    fn the_first_difference_is_named() {
        assert_eq!(first_difference("a\nb\n", "a\nb\n"), None);
        assert_eq!(first_difference("a\nb\n", "a\nc\n"), Some("b"));
        assert_eq!(
            first_difference("a\n", "a\nb\n"),
            Some("(the end of the file)")
        );
    }
}
