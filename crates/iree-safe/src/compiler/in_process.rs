//! [`InProcessCompiler`]: the compiler library loaded into this process,
//! driven through its C embedding API.
//!
//! Rules of the embedding API and how they are kept:
//!
//! - `ireeCompilerGlobalInitialize` is not thread-safe and must precede
//!   everything else: it runs once per process, under the lock that guards
//!   loading. `ireeCompilerGlobalShutdown` is never called and the library
//!   is never unloaded (its handle is leaked on purpose): a shutdown while
//!   another thread still has a session would be undefined, and a final
//!   shutdown disables the compiler for the rest of the process anyway.
//!   Only one compiler library can be loaded per process.
//! - A session (an MLIR context plus options) must not be used by two
//!   threads at once; creating one takes well under a millisecond, so every
//!   compilation creates its own and destroys it at the end. Sessions share
//!   the library's global thread pool (at most 12 tasks, or
//!   `IREE_COMPILER_TASK_COUNT`).
//! - Creating a session is itself not thread-safe: it registers LLVM's CPU
//!   targets, and concurrent registration corrupts LLVM's target list (hangs
//!   and crashes were observed). Session creation is therefore serialized
//!   process-wide (`Session::new`). The pipeline initializes more of LLVM
//!   lazily on its first run (the host target machine, looked up in that
//!   same list): two first compiles at once left two threads spinning in
//!   `TargetRegistry::lookupTarget` over a cyclic list. So the process's
//!   first run of the pipeline is exclusive too (`FirstPipeline`); after
//!   it, parsing, compiling and serializing run concurrently.
//! - The diagnostic callback may run on any compiler thread; it appends to a
//!   mutex-guarded list that outlives the invocation.
//! - The library's static destructors run at process exit: exit waits for
//!   the loading and the compiles in flight first, and refuses new ones
//!   (`exit_gate`).
//! - Every returned `iree_compiler_error_t` is read and destroyed exactly
//!   once; a source or output stored through an out-parameter is owned even
//!   when the call also returns an error.

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::arch::foreign_arch;
use super::diagnostics::{Diagnostic, Severity};
use super::embedding_api::Api;
use super::error::CompileError;
use super::exit_gate::{self, Pass};
use super::locate::locate_compiler_library;
use super::options::CompileOptions;
use super::session::{DiagnosticSink, Output, Session};
use super::version::{ApiVersion, CompilerVersion};
use super::{Artifact, Compiler, CompilerChoice, CompilerKind, TrustedCompilerLibrary};
use std::sync::Arc;

/// The name the MLIR text has in diagnostics. `iree-compile` reads it from
/// standard input under this name, so both compilers report the same
/// locations (and produce byte-identical artifacts).
const SOURCE_NAME: &CStr = c"<stdin>";

/// The library loaded into this process, initialized, never unloaded.
#[derive(Debug)]
struct Loaded {
    path: PathBuf,
    api: &'static Api,
    version: CompilerVersion,
}

/// The process's compiler library, once loaded. Held while loading, so that
/// global initialization runs exactly once.
static LOADED: Mutex<Option<&'static Loaded>> = Mutex::new(None);

/// The IREE compiler running inside this process, through the C embedding
/// API of `libIREECompiler.so` loaded at run time.
///
/// Cheap to clone and share: every [`compile`](Compiler::compile) uses its
/// own compiler session, so any number of threads may compile at once.
///
/// A process that exits while this compiler runs must wait for it before
/// `exit` destroys the library's C++ statics: the exit gate does, from the
/// main thread's exit guard (glibc's Linux: before every `atexit`
/// handler, so also before the destructors of statics a running compile
/// constructs for the first time) and from an `atexit` handler registered
/// again after each compile (elsewhere, and for `exit` on another thread,
/// where a process's first compiles are not covered). See
/// `process_exit.rs`; the integration layer's `exit_during_compile` test
/// ends processes during their first compiles with this compiler.
#[derive(Debug, Clone)]
pub struct InProcessCompiler {
    loaded: &'static Loaded,
}

impl InProcessCompiler {
    /// Loads the library named by `IREE_COMPILER_LIB`, else by the install
    /// manifest of `cargo xtask build-iree` (see [`locate_compiler_library`]).
    ///
    /// The first successful load in a process initializes the compiler
    /// (about 20 ms); later calls return the same library at once.
    ///
    /// # Errors
    ///
    /// [`CompileError::NotFound`] when no library is named or installed, and
    /// the errors of [`load_from`](Self::load_from).
    pub fn load() -> Result<Self, CompileError> {
        let path = locate_compiler_library()?;
        // SAFETY: `IREE_COMPILER_LIB` and the manifest name IREE's compiler
        // library by contract; like the dynamic linker's own search
        // variables, the process environment and the install written by
        // `cargo xtask build-iree` are trusted to tell the truth.
        unsafe { Self::load_from(&path) }
    }

    /// Loads the compiler library at `path`, checks that its embedding API
    /// is 1.x with x ≥ 4 and initializes it.
    ///
    /// Only one compiler library can be loaded per process: loading the same
    /// file again returns it, another file is an error.
    ///
    /// # Errors
    ///
    /// [`CompileError::Load`] when the library cannot be loaded or
    /// initialized (or another library is loaded already, or it is built for
    /// another architecture than this process's),
    /// [`CompileError::ApiVersion`] when its embedding API is not 1.x, x ≥ 4,
    /// and [`CompileError::Exiting`] when the process's exit has begun.
    ///
    /// # Safety
    ///
    /// `path` must be a build of IREE's `libIREECompiler` (of any version:
    /// the API version is checked). Loading runs the library's initializers,
    /// and its `ireeCompiler*` symbols are called with the signatures of
    /// `embedding_api.h`; any other library could do anything.
    pub unsafe fn load_from(path: impl AsRef<Path>) -> Result<Self, CompileError> {
        let path = path.as_ref();
        let load_error = |message: String| CompileError::Load {
            path: path.to_path_buf(),
            message,
        };
        let canonical = path.canonicalize().map_err(|e| {
            load_error(match e.kind() {
                std::io::ErrorKind::NotFound => "no such file".to_owned(),
                _ => e.to_string(),
            })
        })?;
        // The dynamic loader would refuse it too, but as a file it cannot
        // find (glibc skips objects of another machine), which says nothing.
        if let Some(arch) = foreign_arch(&canonical) {
            return Err(load_error(format!(
                "it holds {arch} code and this process runs {} code; the in-process compiler \
                 must be built for the process's architecture (the subprocess compiler, \
                 iree-compile, may run on another)",
                std::env::consts::ARCH
            )));
        }
        let mut loaded = LOADED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(loaded) = *loaded {
            return if loaded.path == canonical {
                Ok(InProcessCompiler { loaded })
            } else {
                Err(load_error(format!(
                    "this process already loaded the compiler library {}, and only one can be \
                     loaded per process",
                    loaded.path.display()
                )))
            };
        }
        // Loading is held through the exit gate like a compile: the
        // library's initializers construct statics and register their
        // destructors, and `ireeCompilerGlobalInitialize` reads them; an
        // exit that began meanwhile would destroy them under this thread.
        let _loading = Pass::enter()?;
        // SAFETY: the caller guarantees this is IREE's compiler library,
        // whose initializers only register LLVM/MLIR components and may run
        // at any time on any thread.
        let library = unsafe { libloading::Library::new(&canonical) }
            .map_err(|e| load_error(e.to_string()))?;
        // Never unloaded: resolved function pointers, and the compiler's
        // global state, must stay valid for the rest of the process.
        let library: &'static libloading::Library = Box::leak(Box::new(library));
        // SAFETY: IREE's compiler library (the caller's guarantee) exports
        // these symbols with the declared signatures.
        let api: &'static Api = Box::leak(Box::new(
            unsafe { Api::resolve(library) }.map_err(load_error)?,
        ));
        // SAFETY: `ireeCompilerGetAPIVersion` has no precondition.
        let api_version = ApiVersion::from_packed(unsafe { (api.get_api_version)() });
        if !api_version.is_supported() {
            return Err(CompileError::ApiVersion {
                path: path.to_path_buf(),
                major: api_version.major,
                minor: api_version.minor,
            });
        }
        // SAFETY: this is the library's first and only initialization in the
        // process: we hold the lock that publishes it, nothing was published
        // yet, and it is never shut down.
        unsafe { (api.global_initialize)() };
        // Before any compile: exit waits for the compiles in flight.
        exit_gate::register_exit_handler().map_err(|error| load_error(error.to_string()))?;
        // SAFETY: the compiler is initialized; the revision string lives as
        // long as the initialization (forever) and is copied here.
        let revision = unsafe {
            let revision = (api.get_revision)();
            if revision.is_null() {
                String::new()
            } else {
                CStr::from_ptr(revision).to_string_lossy().into_owned()
            }
        };
        let version = CompilerVersion::new(&revision, Some(api_version));
        let published: &'static Loaded = Box::leak(Box::new(Loaded {
            path: canonical,
            api,
            version,
        }));
        *loaded = Some(published);
        Ok(InProcessCompiler { loaded: published })
    }

    /// The loaded library's path (canonical).
    pub fn library_path(&self) -> &Path {
        &self.loaded.path
    }
}

/// [`choose_compiler`](super::choose_compiler)'s answer with the library
/// of `IREE_COMPILER_LIB` or the install, `reason` saying why.
pub(super) fn choose(reason: &str) -> Result<CompilerChoice, CompileError> {
    Ok(chosen(InProcessCompiler::load()?, reason))
}

/// [`choose_compiler`](super::choose_compiler)'s answer with the library
/// the program named.
pub(super) fn choose_library(
    library: TrustedCompilerLibrary,
) -> Result<CompilerChoice, CompileError> {
    // SAFETY: a `TrustedCompilerLibrary` names a build of IREE's compiler
    // library; whoever made it vouched for that (its `new_unchecked`
    // contract is `load_from`'s).
    let compiler = unsafe { InProcessCompiler::load_from(library.path()) }?;
    Ok(chosen(compiler, "in-process compiler named by the program"))
}

fn chosen(compiler: InProcessCompiler, reason: &str) -> CompilerChoice {
    CompilerChoice {
        reason: format!("{reason}: {}", compiler.library_path().display()),
        compiler: Arc::new(compiler),
        kind: CompilerKind::InProcess,
    }
}

/// The process's first run of the compilation pipeline, which nothing else
/// may overlap (see the module docs); later runs pass straight through.
struct FirstPipeline(Option<MutexGuard<'static, bool>>);

impl FirstPipeline {
    /// Waits while another thread runs the first pipeline; holds the lock
    /// if this is the first.
    fn enter() -> FirstPipeline {
        static RAN: AtomicBool = AtomicBool::new(false);
        static FIRST: Mutex<bool> = Mutex::new(false);
        if RAN.load(Ordering::Acquire) {
            return FirstPipeline(None);
        }
        let ran = FIRST.lock().unwrap_or_else(PoisonError::into_inner);
        if *ran {
            RAN.store(true, Ordering::Release);
            return FirstPipeline(None);
        }
        FirstPipeline(Some(ran))
    }

    /// The pipeline ran (successfully or not): the lazy initialization is
    /// done, the next compiles may overlap.
    fn done(self) {
        if let Some(mut ran) = self.0 {
            *ran = true;
        }
    }
}

impl Compiler for InProcessCompiler {
    fn compile(&self, mlir: &str, options: &CompileOptions) -> Result<Artifact, CompileError> {
        // Declared first, so dropped last: held while any of the library's
        // objects of this compile lives.
        let _in_flight = Pass::enter()?;
        let flags = options.checked_flags()?;
        let c_flags: Vec<CString> = flags
            .iter()
            .map(|flag| CString::new(flag.as_str()).expect("checked_flags refuses NUL bytes"))
            .collect();
        let api = self.loaded.api;
        // Declared before the objects that refer to them, so dropped after.
        let sink = DiagnosticSink::default();
        let mut text = Vec::with_capacity(mlir.len() + 1);
        text.extend_from_slice(mlir.as_bytes());
        text.push(0);

        // SAFETY: a `Loaded` is published only after global initialization.
        let mut session = unsafe { Session::new(api) }.map_err(|m| failure(&sink, m))?;
        session
            .set_flags(&c_flags)
            .map_err(|message| CompileError::InvalidFlags { flags, message })?;
        let source = session
            .wrap_source(SOURCE_NAME, &text)
            .map_err(|m| failure(&sink, m))?;
        let mut invocation = session.invocation(&sink).map_err(|m| failure(&sink, m))?;
        if !invocation.parse_source(&source) {
            return Err(failure(&sink, "the compiler could not parse the input"));
        }
        let first = FirstPipeline::enter();
        let compiled = invocation.run_std_pipeline();
        first.done();
        if !compiled {
            return Err(failure(&sink, "the compilation pipeline failed"));
        }
        let mut output = Output::membuffer(api).map_err(|m| failure(&sink, m))?;
        invocation
            .output_vm_bytecode(&mut output)
            .map_err(|m| failure(&sink, m))?;
        let bytes = output.contents().map_err(|m| failure(&sink, m))?;
        Ok(Artifact::compiled(bytes))
    }

    fn version(&self) -> &CompilerVersion {
        &self.loaded.version
    }
}

/// A failed compilation: what the compiler reported, or `fallback` when it
/// reported nothing.
#[cold]
fn failure(sink: &DiagnosticSink, fallback: impl Into<String>) -> CompileError {
    let mut diagnostics = sink.take();
    if !diagnostics.iter().any(|d| d.severity == Severity::Error) {
        diagnostics.push(Diagnostic::unlocated(Severity::Error, fallback));
    }
    CompileError::Compilation { diagnostics }
}
