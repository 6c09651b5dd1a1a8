//! The dump folder (`SHEAF_JIT_DUMP_DIR`, [`CompileSettings::dump_dir`]):
//! what each compile of this process was given and gave, in a folder per
//! compile, so that a compile can be read, and rerun, outside the runtime.
//!
//! Each compile that runs the compiler (not a hit of a bundle, the disk
//! cache or the remote cache) writes `<dir>/<NNNN>-<function>-<signature>/`
//! (`NNNN` counts this process's dumps; unusual characters of the names
//! become `_`):
//!
//! | file | what it holds |
//! | --- | --- |
//! | `input.mlir` | the module as lowered, exactly as the compiler read it |
//! | `flags.txt` | the compiler's flags, one per line, exactly as it got them (target, input type, the runtime's and your extra flags, in order) |
//! | `target.txt` | the target identity the artifact key names (flags and float semantics) |
//! | `command.sh` | a runnable `iree-compile` command line: those flags, the input on stdin as the runtime gives it, the output to `recompiled.vmfb` beside it (the compiler found as the runtime finds it; `IREE_COMPILE` overrides it) |
//! | `artifact.vmfb`, `key.txt` | after a compile that succeeded: the artifact, and its disk-cache key (hex) when it has one |
//! | `diagnostics.txt` | after a compile that failed: the compiler's error, diagnostics included |
//!
//! The folder is bounded: at most [`MAX_DUMPS`] compiles per process; later
//! ones are not dumped (one warning says so). A dump that cannot be
//! written is logged (target `sheaf_jit::compile`) and never fails the
//! compile.
//!
//! [`CompileSettings::dump_dir`]: crate::settings::CompileSettings::dump_dir

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use iree_safe::compiler::{self, Artifact, CompileError, CompilerPreference};
use jit_cache::store::ArtifactKey;
use jit_cache::ErrorChain;

/// The most compiles one process dumps; later ones are skipped.
pub const MAX_DUMPS: usize = 256;

/// The longest name part (function or signature) of a dump's folder name.
const MAX_NAME: usize = 80;

/// The dump folder of one runtime.
#[derive(Debug)]
pub(crate) struct Dumps {
    dir: PathBuf,
    /// The `iree-compile` the recorded commands run.
    executable: PathBuf,
    /// Dumps started (written or not).
    next: AtomicUsize,
}

/// One compile to dump: what the compiler was given.
pub(crate) struct Compile<'a> {
    pub(crate) function: &'a str,
    pub(crate) signature: &'a str,
    pub(crate) mlir: &'a str,
    pub(crate) flags: &'a [String],
    pub(crate) target: &'a str,
}

impl Dumps {
    /// Dumps into `dir`, with commands that run the `iree-compile` of
    /// `preference` (the one named, else the one the runtime would find).
    pub(crate) fn new(dir: PathBuf, preference: &CompilerPreference) -> Self {
        let executable = match preference {
            CompilerPreference::Executable(path) => path.clone(),
            _ => compiler::locate_iree_compile().unwrap_or_else(|_| "iree-compile".into()),
        };
        Dumps {
            dir,
            executable,
            next: AtomicUsize::new(0),
        }
    }

    /// Records `compile` and its `result` (with the artifact's `key`).
    pub(crate) fn record(
        &self,
        compile: &Compile<'_>,
        result: &Result<Artifact, CompileError>,
        key: Option<&ArtifactKey>,
    ) {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        if number >= MAX_DUMPS {
            if number == MAX_DUMPS {
                tracing::warn!(
                    target: jit_cache::log_targets::COMPILE,
                    dir = %self.dir.display(),
                    "{MAX_DUMPS} compiles dumped in {}: later compiles of this process are not \
                     dumped (move the folder away and restart to dump more)",
                    self.dir.display()
                );
            }
            return;
        }
        let name = format!(
            "{number:04}-{}-{}",
            file_name(compile.function),
            file_name(compile.signature)
        );
        let folder = self.dir.join(name);
        match self.write(&folder, compile, result, key) {
            Ok(()) => tracing::debug!(
                target: jit_cache::log_targets::COMPILE,
                dump = %folder.display(),
                "dumped the compile of {}{} to {}",
                compile.function,
                compile.signature,
                folder.display()
            ),
            Err(error) => tracing::warn!(
                target: jit_cache::log_targets::COMPILE,
                dump = %folder.display(),
                %error,
                "cannot dump the compile of {}{} to {} ({error}); the compile is not affected",
                compile.function,
                compile.signature,
                folder.display()
            ),
        }
    }

    fn write(
        &self,
        folder: &Path,
        compile: &Compile<'_>,
        result: &Result<Artifact, CompileError>,
        key: Option<&ArtifactKey>,
    ) -> io::Result<()> {
        fs::create_dir_all(folder)?;
        fs::write(folder.join("input.mlir"), compile.mlir)?;
        let mut flags = compile.flags.join("\n");
        flags.push('\n');
        fs::write(folder.join("flags.txt"), flags)?;
        fs::write(folder.join("target.txt"), format!("{}\n", compile.target))?;
        let command = folder.join("command.sh");
        fs::write(&command, self.command(compile.flags))?;
        fs::set_permissions(&command, fs::Permissions::from_mode(0o755))?;
        match result {
            Ok(artifact) => {
                fs::write(folder.join("artifact.vmfb"), artifact.as_bytes())?;
                if let Some(key) = key {
                    fs::write(folder.join("key.txt"), format!("{}\n", key.hex()))?;
                }
            }
            Err(error) => {
                let text = format!("{}\n", ErrorChain(error));
                fs::write(folder.join("diagnostics.txt"), text)?;
            }
        }
        Ok(())
    }

    /// The shell script that recompiles `input.mlir` with `flags`.
    fn command(&self, flags: &[String]) -> String {
        let mut script = String::from(
            "#!/bin/sh\n# Recompiles input.mlir with the flags the runtime gave the compiler,\n\
             # the input on stdin as the runtime gives it; writes recompiled.vmfb here.\n\
             # IREE_COMPILE names another iree-compile.\nset -e\ncd \"$(dirname \"$0\")\"\n",
        );
        let executable = quoted(&self.executable.to_string_lossy());
        let _ = writeln!(script, "compiler=${{IREE_COMPILE:-{executable}}}");
        script.push_str("exec \"$compiler\" \\\n");
        for flag in flags {
            let _ = writeln!(script, "  {} \\", quoted(flag));
        }
        script.push_str("  - -o recompiled.vmfb < input.mlir\n");
        script
    }
}

/// `text` as one single-quoted shell word.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `name` as part of a file name: letters, digits, `.`, `_`, `-` and
/// brackets kept, anything else `_`, at most [`MAX_NAME`] characters.
fn file_name(name: &str) -> String {
    name.chars()
        .take(MAX_NAME)
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' | '[' | ']' | ',' => c,
            _ => '_',
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_to_safe_characters_and_a_bound() {
        assert_eq!(file_name("f32[1,5]"), "f32[1,5]");
        assert_eq!(file_name("../x y/$z"), ".._x_y__z");
        assert_eq!(file_name(&"a".repeat(500)).len(), MAX_NAME);
    }

    #[test]
    fn at_most_max_dumps_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let dumps = Dumps::new(dir.path().to_owned(), &CompilerPreference::Disabled);
        let compile = Compile {
            function: "f",
            signature: "(f32[1])",
            mlir: "module {}",
            flags: &["--a".to_owned()],
            target: "t",
        };
        let failed = Err(CompileError::Compilation {
            diagnostics: Vec::new(),
        });
        for _ in 0..MAX_DUMPS + 2 {
            dumps.record(&compile, &failed, None);
        }
        let written = fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(written, MAX_DUMPS);
        let last = dir.path().join(format!("{:04}-f-_f32[1]_", MAX_DUMPS - 1));
        assert!(last.join("diagnostics.txt").is_file(), "{}", last.display());
        let command = fs::read_to_string(last.join("command.sh")).unwrap();
        assert!(
            command.contains("  '--a' \\\n  - -o recompiled.vmfb < input.mlir"),
            "{command}"
        );
    }

    #[test]
    fn flags_are_quoted_as_one_shell_word_each() {
        assert_eq!(quoted("--a=b c"), "'--a=b c'");
        assert_eq!(quoted("--it's"), r"'--it'\''s'");
    }
}
