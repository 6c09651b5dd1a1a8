//! The IREE compiler driver: MLIR text (StableHLO or linalg) and
//! [`CompileOptions`] in, `.vmfb` bytes ([`Artifact`]) out, or a
//! [`CompileError`] carrying the compiler's [`Diagnostic`]s.
//!
//! One interface, [`Compiler`], with two implementations of the same IREE
//! compiler, both IREE's own interfaces:
//!
//! - [`InProcessCompiler`] loads `libIREECompiler.so` at run time
//!   (`libloading`) and drives its C embedding API: the library is loaded
//!   and initialized once per process, and each compilation runs in its own
//!   compiler session, so threads may compile concurrently. See
//!   `in_process.rs` for the API's rules and how they are kept.
//! - [`SubprocessCompiler`] runs `iree-compile` per compilation, feeding the
//!   MLIR through standard input. Slower to start, but needs no library and
//!   survives compiler crashes.
//!
//! Both take exactly the flags of [`CompileOptions::flags`], name the input
//! `<stdin>` in diagnostics, and produce byte-identical artifacts.
//! [`choose_compiler`] picks one for a [`CompilerPreference`] and says which
//! and why. Caching compiled artifacts (in memory, on disk) is not this
//! crate's business: see `jit-cache`.
//!
//! # Environment variables
//!
//! An empty value or `0` means unset.
//!
//! | variable | meaning |
//! | --- | --- |
//! | `IREE_COMPILER_LIB` | path of `libIREECompiler.so` (default: the library of the install made by `cargo xtask build-iree`) |
//! | `IREE_COMPILE` | path of `iree-compile` (default: the native tool next to that library, the install's launcher, then `PATH`) |
//! | `IREE_COMPILER_TASK_COUNT` | read by IREE itself: tasks of the in-process compiler's thread pool (default 12) |
//!
//! When no compiler is found, the error says to run `cargo xtask build-iree`
//! or to set `IREE_COMPILER_LIB` / `IREE_COMPILE`.
//!
//! A program can name the compiler instead, ignoring the variables:
//! [`CompilerPreference::Executable`] (an `iree-compile`) or
//! [`CompilerPreference::Library`] (a `libIREECompiler.so`, as a
//! [`TrustedCompilerLibrary`], since loading it runs its code). Either is
//! used or is an error naming it.
//!
//! `iree-compile --version` runs at most once per executable in a process:
//! [`SubprocessCompiler::new`] and [`compiler_identity`] share its answer.
//! With [`remember_versions_with`] (a [`VersionMemory`] that keeps records
//! where only this user can write, such as an artifact cache's folder), the
//! answer is kept between processes too, by the executable's canonical
//! path, size and modification time, and a later process with the same
//! executable runs no `--version` at all.
//!
//! # Example
//!
//! ```no_run
//! use iree_safe::compiler::{choose_compiler, CompileOptions, CompilerPreference};
//!
//! let choice = choose_compiler(CompilerPreference::Auto)?;
//! let vmfb = choice.compiler.compile(
//!     r#"func.func @sigmoid(%x: tensor<4xf32>) -> tensor<4xf32> {
//!          %y = stablehlo.logistic %x : tensor<4xf32>
//!          return %y : tensor<4xf32>
//!        }"#,
//!     &CompileOptions::stablehlo(),
//! )?;
//! println!("{} bytes from {} ({})", vmfb.len(), choice.compiler.version(), choice.reason);
//! # Ok::<(), iree_safe::compiler::CompileError>(())
//! ```

mod arch;
mod cpus;
mod diagnostics;
#[cfg(feature = "in-process-compiler")]
mod embedding_api;
mod error;
#[cfg(feature = "in-process-compiler")]
mod exit_gate;
#[cfg(feature = "in-process-compiler")]
mod in_process;
mod locate;
mod options;
#[cfg(feature = "in-process-compiler")]
mod session;
mod subprocess;
mod target;
mod trusted_library;
mod version;
mod version_memo;

use crate::vmfb::TrustedVmfb;
use std::fmt;
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::Arc;

pub use arch::{process_triple, GENERIC_CPU};
pub use cpus::known_cpus;
pub use diagnostics::{Diagnostic, Location, Severity};
pub use error::CompileError;
#[cfg(feature = "in-process-compiler")]
pub use in_process::InProcessCompiler;
pub use locate::{
    compiler_identity, compiler_library_is_explicit, locate_compiler_library, locate_iree_compile,
    COMPILER_LIB_ENV, IREE_COMPILE_ENV,
};
pub use options::{CompileOptions, CompileTarget, InputType};
pub use subprocess::SubprocessCompiler;
pub use target::host_cpu;
pub use trusted_library::TrustedCompilerLibrary;
pub use version::{ApiVersion, CompilerVersion};
pub use version_memo::{remember_versions_with, VersionMemory, MAX_VERSION_RECORD};

/// Turns MLIR text into a `.vmfb` module.
///
/// Implementations are thread-safe: one instance may compile on several
/// threads at once.
pub trait Compiler: Send + Sync + fmt::Debug {
    /// Compiles `mlir` (a whole MLIR module, StableHLO or linalg) with
    /// `options`. On failure the error carries the compiler's diagnostics.
    ///
    /// # Errors
    ///
    /// [`CompileError::Compilation`] with the compiler's diagnostics when the
    /// program is refused, [`CompileError::InvalidFlags`] when a flag of
    /// `options` is, and [`CompileError::Io`] when the driver cannot talk to
    /// the compiler (the subprocess).
    fn compile(&self, mlir: &str, options: &CompileOptions) -> Result<Artifact, CompileError>;

    /// Which compiler build this is.
    fn version(&self) -> &CompilerVersion;
}

/// A compiled `.vmfb` module, as IREE's compiler produced it: bytes to load
/// with [`Runtime::load`](crate::Runtime::load) through [`vmfb`](Self::vmfb).
/// Only a compile (or the `unsafe` [`from_trusted_bytes`](Self::from_trusted_bytes))
/// makes one, so holding one means the bytes may be loaded.
#[derive(Clone, PartialEq, Eq)]
pub struct Artifact {
    bytes: Vec<u8>,
}

impl Artifact {
    /// Wraps bytes a compiler of this crate returned.
    pub(crate) fn compiled(bytes: Vec<u8>) -> Self {
        Artifact { bytes }
    }

    /// Wraps bytes from elsewhere.
    ///
    /// # Safety
    ///
    /// As [`TrustedVmfb::new_unchecked`]: `bytes` must be a `.vmfb` an IREE
    /// compiler produced from a trusted program, unmodified since.
    pub unsafe fn from_trusted_bytes(bytes: Vec<u8>) -> Self {
        Artifact { bytes }
    }

    /// The bytes, to load.
    pub fn vmfb(&self) -> TrustedVmfb<'_> {
        TrustedVmfb::compiled(&self.bytes)
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes, by value.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

impl Deref for Artifact {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl AsRef<[u8]> for Artifact {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl From<Artifact> for Vec<u8> {
    fn from(artifact: Artifact) -> Self {
        artifact.bytes
    }
}

impl fmt::Debug for Artifact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Artifact({} bytes)", self.bytes.len())
    }
}

/// Which compiler implementation to use, and where it is.
///
/// `Auto`, `InProcess` and `Subprocess` find the compiler through the
/// environment variables and the install (see the module docs); `Library`
/// and `Executable` name it, and ignore both.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum CompilerPreference {
    /// `iree-compile` per compilation when one is found, else the
    /// in-process library; a library named explicitly by
    /// `IREE_COMPILER_LIB` is loaded (one that does not load is an error,
    /// never a silent switch to the subprocess). The subprocess is the
    /// default because a compiler run in a child process cannot take the
    /// caller's process down: not when the process exits while it compiles
    /// (the in-process library's static destructors then run under the
    /// compile, see [`InProcessCompiler`]), not when the compiler aborts on
    /// a program. It costs 3–18% more per compile and saves the ~144 MiB
    /// the library keeps resident (`crates/iree-safe/README.md`, "In-process
    /// or subprocess").
    #[default]
    Auto,
    /// [`InProcessCompiler`] only, from `IREE_COMPILER_LIB` or the install.
    ///
    /// For programs that end from their main thread (returning from
    /// `main`, `exit` on the main thread, a panic that ends `main`): exit
    /// then waits for the load and the compiles in flight. A program that
    /// calls `exit` on **another** thread while the library loads or the
    /// process's first compiles run can crash in LLVM (7 of 80 such
    /// processes did), and no library can prevent it (this crate's
    /// README, "In-process or subprocess", says why): use the subprocess
    /// compiler there.
    InProcess,
    /// [`SubprocessCompiler`] only, from `IREE_COMPILE`, the install or
    /// `PATH`.
    Subprocess,
    /// [`InProcessCompiler`] from this `libIREECompiler.so`. A library that
    /// does not load is an error naming it, never a switch to another
    /// compiler. Loading a library runs its code, so the path is a
    /// [`TrustedCompilerLibrary`], vouched for by whoever made it.
    Library(TrustedCompilerLibrary),
    /// [`SubprocessCompiler`] running this `iree-compile`. One that does
    /// not answer `--version` as IREE's does is an error naming it.
    Executable(PathBuf),
    /// No compiler: a process that only serves artifacts compiled ahead
    /// (bundles, a disk cache). [`choose_compiler`] and
    /// [`compiler_identity`] answer [`CompileError::Disabled`].
    Disabled,
}

/// Which implementation [`choose_compiler`] picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CompilerKind {
    /// [`InProcessCompiler`].
    InProcess,
    /// [`SubprocessCompiler`].
    Subprocess,
}

impl fmt::Display for CompilerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CompilerKind::InProcess => "in-process",
            CompilerKind::Subprocess => "subprocess",
        })
    }
}

/// The outcome of [`choose_compiler`]: the compiler, which it is, and why.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CompilerChoice {
    /// The compiler to use.
    pub compiler: Arc<dyn Compiler>,
    /// Which implementation it is.
    pub kind: CompilerKind,
    /// Why this one, in words (e.g. "asked for", or why the in-process
    /// compiler could not be loaded).
    pub reason: String,
}

/// The compiler for `preference`, and why it was chosen. With
/// [`CompilerPreference::Auto`], `iree-compile` when one is found, else the
/// in-process compiler of the install (said in [`CompilerChoice::reason`]);
/// a library named by `IREE_COMPILER_LIB` is loaded, an executable named by
/// `IREE_COMPILE` is run, and either that cannot be is an error.
///
/// # Errors
///
/// The errors of [`InProcessCompiler::load`] when the in-process compiler is
/// asked for, named by `IREE_COMPILER_LIB` or taken as the fallback, and of
/// [`SubprocessCompiler::locate`] when the subprocess is asked for; for a compiler the program names, the errors of
/// [`InProcessCompiler::load_from`] ([`CompileError::Load`] naming a
/// library that does not exist or does not load) and of
/// [`SubprocessCompiler::new`] ([`CompileError::BadExecutable`]);
/// [`CompileError::Disabled`] for [`CompilerPreference::Disabled`];
/// [`CompileError::ReleaseMismatch`] for a compiler of another IREE release
/// than the linked runtime's (a development build that records no version
/// is taken as it is).
pub fn choose_compiler(preference: CompilerPreference) -> Result<CompilerChoice, CompileError> {
    let choice = choose_any_release(preference)?;
    check_release(choice.compiler.version())?;
    Ok(choice)
}

/// Fails when `compiler` is of another IREE release than the linked
/// runtime ([`IREE_RUNTIME_VERSION`](crate::IREE_RUNTIME_VERSION)), whose
/// artifacts that runtime could not load; a development build that records
/// no version passes.
///
/// # Errors
///
/// [`CompileError::ReleaseMismatch`], naming both releases.
pub fn check_release(compiler: &CompilerVersion) -> Result<(), CompileError> {
    check_release_against(compiler, crate::IREE_RUNTIME_VERSION)
}

/// [`check_release`] against the runtime version `runtime_version`.
fn check_release_against(
    compiler: &CompilerVersion,
    runtime_version: &str,
) -> Result<(), CompileError> {
    let runtime = version::release_of(runtime_version).unwrap_or(runtime_version);
    match compiler.release() {
        Some(found) if found != runtime => Err(CompileError::ReleaseMismatch {
            compiler: compiler.to_string(),
            found: found.to_owned(),
            runtime: runtime.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// [`choose_compiler`] before the release check.
fn choose_any_release(preference: CompilerPreference) -> Result<CompilerChoice, CompileError> {
    let started = |compiler: SubprocessCompiler, reason: &str| CompilerChoice {
        reason: format!("{reason}: {}", compiler.path().display()),
        compiler: Arc::new(compiler),
        kind: CompilerKind::Subprocess,
    };
    let subprocess =
        |reason: &str| Ok::<_, CompileError>(started(SubprocessCompiler::locate()?, reason));
    match preference {
        CompilerPreference::InProcess => in_process::choose("in-process compiler asked for"),
        CompilerPreference::Subprocess => subprocess("subprocess compiler asked for"),
        CompilerPreference::Library(library) => in_process::choose_library(library),
        CompilerPreference::Executable(path) => Ok(started(
            SubprocessCompiler::new(path)?,
            "iree-compile named by the program",
        )),
        CompilerPreference::Disabled => Err(CompileError::Disabled),
        CompilerPreference::Auto if compiler_library_is_explicit() => {
            in_process::choose("in-process compiler named by IREE_COMPILER_LIB")
        }
        CompilerPreference::Auto if locate::iree_compile_is_explicit() => {
            subprocess("iree-compile named by IREE_COMPILE")
        }
        CompilerPreference::Auto => match subprocess("iree-compile of the install") {
            Ok(choice) => Ok(choice),
            // Without the in-process compiler there is nothing to fall
            // back on: the subprocess's error says what to install.
            Err(error) if !cfg!(feature = "in-process-compiler") => Err(error),
            Err(error) => {
                tracing::info!(
                    %error,
                    "no iree-compile ({error}); compiling in-process instead"
                );
                in_process::choose(&format!("no iree-compile ({error})"))
            }
        },
    }
}

/// Without the `in-process-compiler` feature: every way to the in-process
/// compiler is [`CompileError::InProcessDisabled`].
#[cfg(not(feature = "in-process-compiler"))]
mod in_process {
    use super::{CompileError, CompilerChoice, TrustedCompilerLibrary};

    pub(super) fn choose(_reason: &str) -> Result<CompilerChoice, CompileError> {
        Err(CompileError::InProcessDisabled)
    }

    pub(super) fn choose_library(
        _library: TrustedCompilerLibrary,
    ) -> Result<CompilerChoice, CompileError> {
        Err(CompileError::InProcessDisabled)
    }
}

mod thread_safety {
    use super::*;
    use static_assertions::assert_impl_all;

    #[cfg(feature = "in-process-compiler")]
    assert_impl_all!(InProcessCompiler: Send, Sync, Clone);
    assert_impl_all!(SubprocessCompiler: Send, Sync, Clone);
    assert_impl_all!(Artifact: Send, Sync);
    assert_impl_all!(CompileError: Send, Sync, std::error::Error);
    // A compilation's embedding-API objects stay on the compiling thread.
    #[cfg(feature = "in-process-compiler")]
    mod in_process {
        use super::super::session;
        use static_assertions::assert_not_impl_any;

        assert_not_impl_any!(session::Session: Send, Sync);
        assert_not_impl_any!(session::Invocation<'static>: Send, Sync);
        assert_not_impl_any!(session::Output: Send, Sync);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compiler_of_another_release_is_refused_naming_both() {
        let old = CompilerVersion::new("3.10.0rc20251104 @ 0123abcd", None);
        let error = check_release_against(&old, "3.13.0.dev")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("IREE release 3.10")
                && error.contains("links the IREE 3.13 runtime")
                && error.contains("iree-base-compiler==3.13.0"),
            "{error}"
        );
        let same = CompilerVersion::new("3.13.0rc20261016 @ 89ece87b", None);
        assert!(check_release_against(&same, "3.13.0.dev").is_ok());
        // A development build records no version: nothing to compare.
        assert!(check_release_against(&CompilerVersion::new("", None), "3.13.0.dev").is_ok());
    }
}
