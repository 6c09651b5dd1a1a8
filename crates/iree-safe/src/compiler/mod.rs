//! The IREE compiler driver: MLIR text (StableHLO or linalg) and
//! [`CompileOptions`] in, `.vmfb` bytes ([`Artifact`]) out, or a
//! [`CompileError`] carrying the compiler's [`Diagnostic`]s.
//!
//! One interface, [`Compiler`], with two implementations of the same IREE
//! compiler:
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
//! [`default_compiler`] prefers the in-process compiler and falls back to
//! the subprocess; [`choose_compiler`] also says which it took and why.
//!
//! [`DiskCache`] sits in front of either (and is a [`Compiler`] itself): a
//! persistent, size-bounded, multi-process-safe artifact cache keyed by the
//! MLIR, the compiler build, the runtime build, the flags and the host CPU.
//!
//! # Environment variables
//!
//! For the path variables, an empty value or `0` means unset.
//!
//! | variable | meaning |
//! | --- | --- |
//! | `IREE_COMPILER_LIB` | path of `libIREECompiler.so` (default: from the manifest of `cargo xtask build-iree`) |
//! | `IREE_COMPILE` | path of `iree-compile` (default: the native tool next to the manifest's library, the manifest's entry, then `PATH`) |
//! | `SHEAF_JIT_COMPILER` | `in-process` or `subprocess`: what [`default_compiler`] uses (default: in-process if it loads) |
//! | `SHEAF_JIT_CACHE_DIR` | disk cache folder (default `$XDG_CACHE_HOME/sheaf-jit`, else `$HOME/.cache/sheaf-jit`) |
//! | `SHEAF_JIT_DISK_CACHE` | `0`, `off`, `false` or `no` disables the disk cache |
//! | `SHEAF_JIT_CACHE_MAX_BYTES` | disk cache size bound, e.g. `512M` (default 1 GiB) |
//! | `IREE_COMPILER_TASK_COUNT` | read by IREE itself: tasks of the in-process compiler's thread pool (default 12) |
//!
//! When no compiler is found, the error says to run `cargo xtask build-iree`
//! or to set `IREE_COMPILER_LIB` / `IREE_COMPILE`.
//!
//! # Example
//!
//! ```no_run
//! use iree_safe::compiler::{default_compiler, CompileOptions, Compiler, DiskCache};
//!
//! let compiler = DiskCache::from_env(default_compiler()?);
//! let vmfb = compiler.compile(
//!     r#"func.func @sigmoid(%x: tensor<4xf32>) -> tensor<4xf32> {
//!          %y = stablehlo.logistic %x : tensor<4xf32>
//!          return %y : tensor<4xf32>
//!        }"#,
//!     &CompileOptions::stablehlo(),
//! )?;
//! println!("{} bytes from {}; cache: {:?}", vmfb.len(), compiler.version(), compiler.stats());
//! # Ok::<(), iree_safe::compiler::CompileError>(())
//! ```

mod cache_entry;
mod cache_key;
mod diagnostics;
mod disk_cache;
mod embedding_api;
mod error;
mod in_process;
mod locate;
mod options;
mod session;
mod subprocess;
mod version;

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

pub use diagnostics::{Diagnostic, Location, Severity};
pub use disk_cache::{
    DiskCache, DiskCacheConfig, DiskCacheStats, CACHE_DIR_ENV, CACHE_MAX_BYTES_ENV,
    DEFAULT_MAX_BYTES, DISK_CACHE_ENV,
};
pub use error::CompileError;
pub use in_process::InProcessCompiler;
pub use locate::{
    locate_compiler_library, locate_iree_compile, COMPILER_LIB_ENV, IREE_COMPILE_ENV,
};
pub use options::{CompileOptions, InputType};
pub use subprocess::SubprocessCompiler;
pub use version::{ApiVersion, CompilerVersion};

/// Environment variable: `in-process` or `subprocess` forces the compiler
/// [`default_compiler`] returns.
pub const COMPILER_ENV: &str = "SHEAF_JIT_COMPILER";

/// Turns MLIR text into a `.vmfb` module.
///
/// Implementations are thread-safe: one instance may compile on several
/// threads at once.
pub trait Compiler: Send + Sync + fmt::Debug {
    /// Compiles `mlir` (a whole MLIR module, StableHLO or linalg) with
    /// `options`. On failure the error carries the compiler's diagnostics.
    fn compile(&self, mlir: &str, options: &CompileOptions) -> Result<Artifact, CompileError>;

    /// Which compiler build this is.
    fn version(&self) -> &CompilerVersion;
}

/// A compiled `.vmfb` module: bytes to load with
/// [`Runtime::load`](crate::Runtime::load).
#[derive(Clone, PartialEq, Eq)]
pub struct Artifact {
    bytes: Vec<u8>,
}

impl Artifact {
    /// Wraps `.vmfb` bytes.
    pub fn new(bytes: Vec<u8>) -> Self {
        Artifact { bytes }
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

impl From<Vec<u8>> for Artifact {
    fn from(bytes: Vec<u8>) -> Self {
        Artifact::new(bytes)
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

/// Which implementation [`choose_compiler`] picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CompilerKind {
    /// [`InProcessCompiler`].
    InProcess,
    /// [`SubprocessCompiler`].
    Subprocess,
}

/// The outcome of [`choose_compiler`].
#[derive(Debug)]
#[non_exhaustive]
pub struct CompilerChoice {
    /// The compiler to use.
    pub compiler: Arc<dyn Compiler>,
    /// Which implementation it is.
    pub kind: CompilerKind,
    /// Why the in-process compiler could not be loaded, when the subprocess
    /// compiler was chosen as a fallback (`None` when in-process was chosen,
    /// or when `SHEAF_JIT_COMPILER=subprocess` asked for the subprocess).
    pub in_process_unavailable: Option<CompileError>,
}

/// The compiler to use: [`InProcessCompiler::load`] if it succeeds, else
/// [`SubprocessCompiler::locate`]. `SHEAF_JIT_COMPILER=in-process` or
/// `=subprocess` forces one.
pub fn default_compiler() -> Result<Arc<dyn Compiler>, CompileError> {
    choose_compiler().map(|choice| choice.compiler)
}

/// Like [`default_compiler`], and says which implementation was chosen and
/// why the in-process one was not.
pub fn choose_compiler() -> Result<CompilerChoice, CompileError> {
    let setting = std::env::var(COMPILER_ENV).unwrap_or_default();
    let in_process_unavailable = match setting.trim() {
        "" | "0" | "auto" => match InProcessCompiler::load() {
            Ok(compiler) => return Ok(CompilerChoice::in_process(compiler)),
            Err(error) => Some(error),
        },
        "in-process" => return InProcessCompiler::load().map(CompilerChoice::in_process),
        "subprocess" => None,
        other => {
            return Err(CompileError::InvalidSetting {
                variable: COMPILER_ENV,
                value: other.to_owned(),
                expected: "`in-process`, `subprocess` or `auto`",
            })
        }
    };
    let compiler = SubprocessCompiler::locate()?;
    if let Some(reason) = &in_process_unavailable {
        tracing::info!(
            %reason,
            iree_compile = %compiler.path().display(),
            "cannot compile in-process; running iree-compile per compilation"
        );
    }
    Ok(CompilerChoice {
        compiler: Arc::new(compiler),
        kind: CompilerKind::Subprocess,
        in_process_unavailable,
    })
}

impl CompilerChoice {
    fn in_process(compiler: InProcessCompiler) -> Self {
        CompilerChoice {
            compiler: Arc::new(compiler),
            kind: CompilerKind::InProcess,
            in_process_unavailable: None,
        }
    }
}

mod thread_safety {
    use super::*;
    use static_assertions::{assert_impl_all, assert_not_impl_any};

    assert_impl_all!(InProcessCompiler: Send, Sync, Clone);
    assert_impl_all!(SubprocessCompiler: Send, Sync, Clone);
    assert_impl_all!(DiskCache: Send, Sync);
    assert_impl_all!(Artifact: Send, Sync);
    assert_impl_all!(CompileError: Send, Sync, std::error::Error);
    // A compilation's embedding-API objects stay on the compiling thread.
    assert_not_impl_any!(session::Session: Send, Sync);
    assert_not_impl_any!(session::Invocation<'static>: Send, Sync);
    assert_not_impl_any!(session::Output: Send, Sync);
}
