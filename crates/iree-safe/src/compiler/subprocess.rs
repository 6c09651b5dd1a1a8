//! [`SubprocessCompiler`]: one `iree-compile` process per compilation.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::SystemTime;

use super::diagnostics::{self, Diagnostic, Severity};
use super::error::CompileError;
use super::locate::locate_iree_compile;
use super::options::CompileOptions;
use super::version::CompilerVersion;
use super::version_memo;
use super::{Artifact, Compiler};

/// The IREE compiler run as a child process: `iree-compile <flags> - -o -`,
/// with the MLIR on standard input, the `.vmfb` on standard output and the
/// diagnostics on standard error.
///
/// Needs no library loading and isolates crashes of the compiler, at the
/// price of starting the compiler for every compilation. Thread-safe: each
/// compilation is its own process.
#[derive(Debug, Clone)]
pub struct SubprocessCompiler {
    path: PathBuf,
    version: CompilerVersion,
}

impl SubprocessCompiler {
    /// Uses the `iree-compile` named by `IREE_COMPILE`, else by the install
    /// manifest, else found on `PATH` (see [`locate_iree_compile`]).
    ///
    /// # Errors
    ///
    /// [`CompileError::NotFound`] when no `iree-compile` is found, and the
    /// errors of [`new`](Self::new).
    pub fn locate() -> Result<Self, CompileError> {
        Self::new(locate_iree_compile()?)
    }

    /// Uses the `iree-compile` at `path`, after asking it for its version.
    /// `--version` runs at most once per executable in a process: its
    /// answer is kept (and shared with
    /// [`compiler_identity`](super::compiler_identity)); a run that could
    /// not start is not, so a later call tries again.
    ///
    /// # Errors
    ///
    /// [`CompileError::BadExecutable`] when `path` cannot be run, or does not
    /// answer `--version` with an IREE compiler version.
    pub fn new(path: impl Into<PathBuf>) -> Result<Self, CompileError> {
        let path = path.into();
        let version = version_of(&path)?;
        Ok(SubprocessCompiler { path, version })
    }

    /// The executable this compiler runs.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Compiler for SubprocessCompiler {
    fn compile(&self, mlir: &str, options: &CompileOptions) -> Result<Artifact, CompileError> {
        let flags = options.checked_flags()?;
        let mut child = Command::new(&self.path)
            .args(&flags)
            .args(["-", "-o", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| CompileError::io(format!("cannot run {}", self.path.display()), e))?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        // Feed the input while collecting both outputs, so that no pipe can
        // fill up and stall the child.
        let (written, output) = std::thread::scope(|scope| {
            let writer = scope.spawn(move || stdin.write_all(mlir.as_bytes()));
            let output = child.wait_with_output();
            (writer.join(), output)
        });
        let output = output.map_err(|e| {
            CompileError::io(
                format!("cannot read the output of {}", self.path.display()),
                e,
            )
        })?;
        match written {
            Ok(Ok(())) => {}
            // The child exited without reading everything (a refused flag,
            // say): its exit status and standard error tell why.
            Ok(Err(e)) if e.kind() == io::ErrorKind::BrokenPipe => {}
            Ok(Err(e)) => {
                return Err(CompileError::io(
                    format!("cannot write the MLIR to {}", self.path.display()),
                    e,
                ))
            }
            Err(panic) => std::panic::resume_unwind(panic),
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            return Err(self.failure(&flags, output.status, &stderr));
        }
        if output.stdout.is_empty() {
            return Err(CompileError::Compilation {
                diagnostics: vec![Diagnostic::unlocated(
                    Severity::Error,
                    format!(
                        "{} succeeded but wrote no module; stderr: {stderr}",
                        self.path.display()
                    ),
                )],
            });
        }
        Ok(Artifact::compiled(output.stdout))
    }

    fn version(&self) -> &CompilerVersion {
        &self.version
    }
}

impl SubprocessCompiler {
    /// The error for a failed run: LLVM's command-line parser reports a
    /// refused flag as `iree-compile: ...` before reading any input;
    /// everything else is a compilation failure.
    #[cold]
    fn failure(&self, flags: &[String], status: ExitStatus, stderr: &str) -> CompileError {
        let first_line = stderr
            .lines()
            .find(|line| !line.trim().is_empty())
            .unwrap_or("");
        if first_line.starts_with("iree-compile: ") {
            return CompileError::InvalidFlags {
                flags: flags.to_vec(),
                message: stderr.trim().to_owned(),
            };
        }
        let mut diagnostics = diagnostics::parse_stderr(stderr);
        let crashed = status.code().is_none();
        if crashed || !diagnostics.iter().any(|d| d.severity == Severity::Error) {
            diagnostics.push(Diagnostic::unlocated(
                Severity::Error,
                format!("{} {}", self.path.display(), describe(status)),
            ));
        }
        CompileError::Compilation { diagnostics }
    }
}

/// What `iree-compile --version` answered: its version, or why it is not
/// one (a message for [`CompileError::BadExecutable`]).
type Answer = Result<CompilerVersion, String>;

/// Which file was asked: its canonical path (the path as given when it
/// cannot be resolved), size and modification time, so that an executable
/// replaced at the same path is asked again.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Executable {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
}

impl Executable {
    fn of(path: &Path) -> Self {
        let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let metadata = std::fs::metadata(&path).ok();
        Executable {
            len: metadata.as_ref().map_or(0, std::fs::Metadata::len),
            modified: metadata.and_then(|m| m.modified().ok()),
            path,
        }
    }
}

/// The version of the `iree-compile` at `path`, from `--version`, which
/// runs at most once per executable in the process: the answer (a version,
/// or a run that did not give one) is kept for the life of the process and
/// shared by [`SubprocessCompiler::new`] and
/// [`compiler_identity`](super::compiler_identity). With a memory named by
/// [`remember_versions_with`](super::remember_versions_with), a version is
/// also kept there, and read from there by later processes instead of
/// running `--version` (`version_memo.rs`). Callers asking about
/// the same executable at once wait for one run; others do not wait. A
/// run that could not start (a missing file, say) is not kept, so the next
/// call tries again.
pub(crate) fn version_of(path: &Path) -> Result<CompilerVersion, CompileError> {
    /// One slot per executable: `None` until a run answered.
    type Slot = Arc<Mutex<Option<Answer>>>;
    static ANSWERS: OnceLock<Mutex<HashMap<Executable, Slot>>> = OnceLock::new();
    let bad = |message: String| CompileError::BadExecutable {
        path: path.to_path_buf(),
        message,
    };
    let slot = Arc::clone(
        ANSWERS
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(Executable::of(path))
            .or_default(),
    );
    // Held while `--version` runs, so a second caller for this executable
    // waits for the first's answer; the map's lock is not held.
    let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(answer) = &*slot {
        return answer.clone().map_err(bad);
    }
    // An earlier process's answer (`remember_versions_with`).
    let executable = Executable::of(path);
    let identity =
        version_memo::Identity::of(&executable.path, executable.len, executable.modified);
    if let Some(version) = identity.as_ref().and_then(version_memo::recall) {
        *slot = Some(Ok(version.clone()));
        return Ok(version);
    }
    let answer = ask_version(path).map_err(|e| bad(format!("cannot run it: {e}")))?;
    if let (Ok(version), Some(identity)) = (&answer, &identity) {
        version_memo::keep(identity, version);
    }
    *slot = Some(answer.clone());
    answer.map_err(bad)
}

/// Runs `path --version`: `Err` when it cannot start, else its answer.
fn ask_version(path: &Path) -> io::Result<Answer> {
    let output = Command::new(path)
        .arg("--version")
        .stdin(Stdio::null())
        .output()?;
    if !output.status.success() {
        return Ok(Err(format!(
            "`--version` {}: {}",
            describe(output.status),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(
        CompilerVersion::from_version_output(&String::from_utf8_lossy(&output.stdout))
            .ok_or_else(|| "`--version` does not print an IREE compiler version".to_owned()),
    )
}

/// "exited with status 1", "was killed by signal 11".
fn describe(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("was killed by signal {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => format!("failed ({status})"),
    }
}
