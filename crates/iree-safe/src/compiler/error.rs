//! [`CompileError`]: everything that can stop MLIR from becoming a `.vmfb`.

use std::io;
use std::path::PathBuf;

use super::diagnostics::{self, Diagnostic};

/// Why a compiler could not be set up or a compilation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// Neither an environment variable nor the install manifest (nor, for
    /// `iree-compile`, `PATH`) names the tool.
    #[error(
        "cannot find {tool} (tried: {}). Run `cargo xtask build-iree` to install the IREE \
         compiler, or set {env_var} to its path",
        tried.join("; ")
    )]
    NotFound {
        /// `libIREECompiler.so` or `iree-compile`.
        tool: &'static str,
        /// The variable that overrides the search.
        env_var: &'static str,
        /// Each place looked at, and why it did not do.
        tried: Vec<String>,
    },

    /// The program runs without a compiler
    /// ([`CompilerPreference::Disabled`](super::CompilerPreference::Disabled)).
    #[error(
        "this program runs without a compiler (CompilerPreference::Disabled): only artifacts \
         compiled ahead can be loaded; choose another CompilerPreference (Auto finds one) to \
         compile"
    )]
    Disabled,

    /// The compiler library could not be loaded or initialized (a library
    /// the program named may also not exist).
    #[error(
        "cannot load the IREE compiler library {}: {message}. Name a working \
         libIREECompiler.so (IREE_COMPILER_LIB, or CompilerPreference::Library), or reinstall \
         it with `cargo xtask build-iree`",
        path.display()
    )]
    Load {
        /// The library.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },

    /// The compiler library speaks an embedding API this driver does not
    /// know (it needs major version 1, minor version 4 or later).
    #[error(
        "{} exports IREE compiler embedding API {major}.{minor}, but this driver needs 1.4 or a \
         later 1.x; install a matching compiler with `cargo xtask build-iree`",
        path.display()
    )]
    ApiVersion {
        /// The library.
        path: PathBuf,
        /// Major API version it exports.
        major: u32,
        /// Minor API version it exports.
        minor: u32,
    },

    /// `iree-compile` exists but does not behave like the IREE compiler.
    #[error("{} is not a usable iree-compile: {message}", path.display())]
    BadExecutable {
        /// The executable.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },

    /// The compiler refused a flag of the [`CompileOptions`].
    ///
    /// [`CompileOptions`]: super::CompileOptions
    #[error("the IREE compiler refused the flags {flags:?}: {message}")]
    InvalidFlags {
        /// Every flag of the compilation.
        flags: Vec<String>,
        /// The compiler's (or this driver's) complaint.
        message: String,
    },

    /// The compiler ran and reported errors in the program.
    #[error("IREE compilation failed:\n{}", diagnostics::render(diagnostics))]
    Compilation {
        /// What the compiler said, in order.
        diagnostics: Vec<Diagnostic>,
    },

    /// The process is exiting: the in-process compiler starts no compile,
    /// and its library is not loaded, once `exit` has begun (exit waits
    /// for those running, so that the library's static destructors do not
    /// run under them).
    #[error(
        "the process is exiting: the in-process IREE compiler starts no new compile (and is not \
         loaded) once exit has begun"
    )]
    Exiting,

    /// An I/O operation of the driver itself failed (spawning
    /// `iree-compile`, talking to it through pipes).
    #[error("{context}")]
    Io {
        /// What the driver was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// The in-process compiler was asked for (`CompilerPreference::InProcess`
    /// or `Library`, or `IREE_COMPILER_LIB`), but this build of iree-safe
    /// leaves it out (its cargo feature `in-process-compiler` is off).
    #[error(
        "the in-process compiler was asked for, but this build leaves it out: enable the cargo \
         feature `in-process-compiler` (of iree-safe, or the feature of the crate above it that \
         forwards it), or use the subprocess compiler (CompilerPreference::Subprocess or Auto, with \
         IREE_COMPILER_LIB unset)"
    )]
    InProcessDisabled,

    /// The compiler is of another IREE release than the linked runtime,
    /// whose VM and HAL would refuse or misread its artifacts
    /// ([`choose_compiler`](super::choose_compiler) checks it before
    /// anything is compiled or loaded).
    #[error(
        "the {compiler} is of IREE release {found}, but this program links the IREE {runtime} \
         runtime, which cannot load its artifacts; use an IREE {runtime} compiler (`pip install \
         iree-base-compiler=={runtime}.0`, then name its iree-compile with IREE_COMPILE or \
         CompilerPreference::Executable)"
    )]
    ReleaseMismatch {
        /// The compiler, as [`CompilerVersion`](super::CompilerVersion)
        /// displays it.
        compiler: String,
        /// Its release (`major.minor`).
        found: String,
        /// The runtime's release (`major.minor` of
        /// [`IREE_RUNTIME_VERSION`](crate::IREE_RUNTIME_VERSION)).
        runtime: String,
    },
}

impl CompileError {
    /// The compiler's diagnostics, when this is a [`CompileError::Compilation`];
    /// empty otherwise.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            CompileError::Compilation { diagnostics } => diagnostics,
            _ => &[],
        }
    }

    /// The same error, with the compiled text called `name` instead of
    /// `<stdin>` (the name both compilers give it) in every location and
    /// message, e.g. the function and signature it was lowered from.
    pub fn with_source_name(mut self, name: &str) -> Self {
        if let CompileError::Compilation { diagnostics } = &mut self {
            for diagnostic in diagnostics {
                if let Some(location) = &mut diagnostic.location {
                    if location.file == "<stdin>" {
                        location.file = name.to_owned();
                    }
                }
                diagnostic.message = diagnostic.message.replace("<stdin>:", &format!("{name}:"));
            }
        }
        self
    }

    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        CompileError::Io {
            context: context.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::diagnostics::Severity;

    #[test]
    fn not_found_says_what_to_run() {
        let error = CompileError::NotFound {
            tool: "iree-compile",
            env_var: "IREE_COMPILE",
            tried: vec![
                "IREE_COMPILE: unset".to_owned(),
                "PATH: not found".to_owned(),
            ],
        };
        let text = error.to_string();
        assert!(text.contains("cargo xtask build-iree"), "{text}");
        assert!(text.contains("IREE_COMPILE"), "{text}");
        assert!(text.contains("PATH: not found"), "{text}");
    }

    #[test]
    fn the_source_can_be_renamed_in_every_diagnostic() {
        let error = CompileError::Compilation {
            diagnostics: vec![Diagnostic::from_callback(
                Severity::Error,
                "<stdin>:2:7: bad type\n<stdin>:2:7: see current operation",
            )],
        }
        .with_source_name("sigmoid(f32[4])");
        assert_eq!(
            error.to_string(),
            "IREE compilation failed:\nsigmoid(f32[4]):2:7: error: bad type\nsigmoid(f32[4]):2:7: see current operation"
        );
    }

    #[test]
    fn compilation_errors_show_every_diagnostic() {
        let error = CompileError::Compilation {
            diagnostics: vec![Diagnostic::from_callback(
                Severity::Error,
                "<stdin>:2:7: bad type",
            )],
        };
        assert_eq!(error.diagnostics().len(), 1);
        assert_eq!(
            error.to_string(),
            "IREE compilation failed:\n<stdin>:2:7: error: bad type"
        );
    }
}
