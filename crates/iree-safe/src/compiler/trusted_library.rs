//! [`TrustedCompilerLibrary`]: a compiler library the program vouches for,
//! named whether or not the `in-process-compiler` feature is on (without
//! it, asking for one is [`CompileError::InProcessDisabled`]).

use std::path::{Path, PathBuf};

#[cfg(doc)]
use super::CompileError;

/// The path of a `libIREECompiler.so` that may be loaded into this process,
/// for [`CompilerPreference::Library`](super::CompilerPreference::Library).
///
/// Loading a library runs its initializers, and the compiler then calls
/// its `ireeCompiler*` symbols with the embedding API's signatures: like
/// `dlopen` (and `libloading::Library::new`), that is sound only for a
/// library that really is IREE's compiler. This type marks that trust; only
/// the `unsafe` [`new_unchecked`](Self::new_unchecked) makes one. (The
/// `IREE_COMPILER_LIB` variable and the install are trusted as the dynamic
/// linker trusts `LD_LIBRARY_PATH`: see `InProcessCompiler::load`.)
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TrustedCompilerLibrary {
    path: PathBuf,
}

impl TrustedCompilerLibrary {
    /// Marks the library at `path` as one that may be loaded. Nothing is
    /// checked or loaded here: a path that does not exist, or a library
    /// that does not load, is an error of
    /// [`choose_compiler`](super::choose_compiler).
    ///
    /// # Safety
    ///
    /// As `InProcessCompiler::load_from`: whenever it is loaded, the file
    /// at `path`, if there is one, must be a build of IREE's
    /// `libIREECompiler` (of any version: the embedding API's version is
    /// checked at load). A missing file is an error, not a hazard.
    pub unsafe fn new_unchecked(path: impl Into<PathBuf>) -> Self {
        TrustedCompilerLibrary { path: path.into() }
    }

    /// The library's path, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
