//! The dump folder (`SHEAF_JIT_DUMP_DIR`, [`CompileSettings::dump_dir`]):
//! what each compile of this process was given and gave, in a folder per
//! compile, so that a compile can be read, and rerun, outside the runtime.
//!
//! Each compile that runs the compiler (not a hit of a bundle, the disk
//! cache or the remote cache) writes
//! `<dir>/<pid>-<random>/<NNNN>-<function>-<signature>/` (a folder of this
//! process's own, made fresh at its first dump and never reused by
//! another; `NNNN` counts this process's dumps; unusual characters of the
//! names become `_`):
//!
//! | file | what it holds |
//! | --- | --- |
//! | `input.mlir` | the module as lowered, exactly as the compiler read it |
//! | `flags.txt` | the compiler's flags, one per line, exactly as it got them (target, input type, the runtime's and your extra flags, in order) |
//! | `target.txt` | the target identity the artifact key names (flags and float semantics) |
//! | `command.sh` | a runnable `iree-compile` command line: those flags, the input on stdin as the runtime gives it, the output to `recompiled.vmfb` beside it (the compiler found as the runtime finds it; `IREE_COMPILE` overrides it) |
//! | `tuning_spec.mlir` | when the runtime gave the compiler a tuning spec of its own (a large f32 matmul on AVX-512: `tuning::AVX512_MATMUL_SPEC`): that spec, which `command.sh` names instead of the runtime's file (removed after the compile) |
//! | `artifact.vmfb`, `key.txt` | after a compile that succeeded: the artifact, and its disk-cache key (hex) when it has one |
//! | `diagnostics.txt` | after a compile that failed: the compiler's error, diagnostics included |
//!
//! The folder is bounded: at most [`MAX_DUMPS`] compiles per process; later
//! ones are not dumped (one warning says so). A dump that cannot be
//! written is logged (target `sheaf_jit::compile`), said once per process
//! on stderr, and never fails the compile.
//!
//! The folder is owned and written like the cache folders, since a dump
//! holds a script its user runs: `<dir>` is made with mode 0700 when
//! missing and refused when it is a link, another user's, or writable by
//! group or others (jit-cache's [`create_private_folder`], the cache
//! folders' own check); the process's folder and each dump's are made new
//! (mode 0700, failing if the name exists), and every file is written as
//! [`file_io`] says (a temporary file renamed into place: nothing planted
//! at a name, a link or a FIFO, is followed or waited on).
//!
//! [`create_private_folder`]: jit_store::create_private_folder
//!
//! [`CompileSettings::dump_dir`]: crate::settings::CompileSettings::dump_dir

use std::fmt::Write as _;
use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

use iree_safe::compiler::{self, Artifact, CompileError, CompilerPreference};
use jit_cache::ErrorChain;
use jit_store::{create_private_folder, file_io, ArtifactKey};

use crate::placement::TUNING_SPEC_FLAG;

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
    /// This process's own folder in `dir`, made at the first dump (or why
    /// it could not be).
    own: OnceLock<Result<PathBuf, String>>,
}

/// Whether a dump that could not be written was said on stderr (once per
/// process).
static SAID_ON_STDERR: AtomicBool = AtomicBool::new(false);

/// One compile to dump: what the compiler was given.
pub(crate) struct Compile<'a> {
    pub(crate) function: &'a str,
    pub(crate) signature: &'a str,
    pub(crate) mlir: &'a str,
    pub(crate) flags: &'a [String],
    pub(crate) target: &'a str,
    /// The tuning spec of the runtime's own that a flag names
    /// ([`TUNING_SPEC_FLAG`]), if any.
    pub(crate) tuning_spec: Option<&'a str>,
}

/// The name of the tuning spec's copy in a dump.
const TUNING_SPEC: &str = "tuning_spec.mlir";

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
            own: OnceLock::new(),
        }
    }

    /// This process's folder in `dir`: `<pid>-<random>`, made new (see the
    /// module docs) at the first call.
    fn own_folder(&self) -> Result<&Path, &str> {
        let made = self.own.get_or_init(|| {
            create_private_folder(&self.dir).map_err(|error| ErrorChain(&error).to_string())?;
            tempfile::Builder::new()
                .prefix(&format!("{}-", std::process::id()))
                .rand_bytes(8)
                .permissions(fs::Permissions::from_mode(0o700))
                .tempdir_in(&self.dir)
                .map(tempfile::TempDir::keep)
                .map_err(|error| {
                    format!(
                        "cannot make this process's folder in {} ({error}); check that it is \
                         yours and writable",
                        self.dir.display()
                    )
                })
        });
        made.as_deref().map_err(String::as_str)
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
                    target: crate::log_targets::COMPILE,
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
        let written = self.own_folder().map_err(str::to_owned).and_then(|own| {
            let folder = own.join(name);
            self.write(&folder, compile, result, key)
                .map(|()| folder.clone())
                .map_err(|error| format!("cannot write {} ({error})", folder.display()))
        });
        match written {
            Ok(folder) => tracing::debug!(
                target: crate::log_targets::COMPILE,
                dump = %folder.display(),
                "dumped the compile of {}{} to {}",
                compile.function,
                compile.signature,
                folder.display()
            ),
            Err(error) => {
                tracing::warn!(
                    target: crate::log_targets::COMPILE,
                    dir = %self.dir.display(),
                    %error,
                    "cannot dump the compile of {}{}: {error}; the compile is not affected",
                    compile.function,
                    compile.signature,
                );
                if !SAID_ON_STDERR.swap(true, Ordering::Relaxed) {
                    eprintln!(
                        "sheaf-jit: SHEAF_JIT_DUMP_DIR: cannot dump the compile of {}{}: {error}; \
                         compiles are not affected, later failures to dump are only logged \
                         (target sheaf_jit::compile)",
                        compile.function, compile.signature
                    );
                }
            }
        }
    }

    fn write(
        &self,
        folder: &Path,
        compile: &Compile<'_>,
        result: &Result<Artifact, CompileError>,
        key: Option<&ArtifactKey>,
    ) -> io::Result<()> {
        // New, never an existing folder (not recursive: the process's
        // folder is there).
        DirBuilder::new().mode(0o700).create(folder)?;
        let write = |name: &str, bytes: &[u8]| file_io::write_whole(&folder.join(name), bytes);
        write("input.mlir", compile.mlir.as_bytes())?;
        let mut flags = compile.flags.join("\n");
        flags.push('\n');
        write("flags.txt", flags.as_bytes())?;
        write("target.txt", format!("{}\n", compile.target).as_bytes())?;
        // The runtime's spec file goes with the compile: the command names
        // the dump's copy.
        let command = match compile.tuning_spec {
            Some(spec) => {
                write(TUNING_SPEC, spec.as_bytes())?;
                let flags: Vec<String> = compile
                    .flags
                    .iter()
                    .map(|flag| {
                        if flag.starts_with(TUNING_SPEC_FLAG) {
                            format!("{TUNING_SPEC_FLAG}{TUNING_SPEC}")
                        } else {
                            flag.clone()
                        }
                    })
                    .collect();
                self.command(&flags)
            }
            None => self.command(compile.flags),
        };
        file_io::write_whole_with_mode(&folder.join("command.sh"), command.as_bytes(), 0o755)?;
        match result {
            Ok(artifact) => {
                write("artifact.vmfb", artifact.as_bytes())?;
                if let Some(key) = key {
                    write("key.txt", format!("{}\n", key.hex()).as_bytes())?;
                }
            }
            Err(error) => {
                write(
                    "diagnostics.txt",
                    format!("{}\n", ErrorChain(error)).as_bytes(),
                )?;
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
    use std::os::unix::fs::{symlink, MetadataExt};
    use std::process::Command;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// Set in the child of [`a_dump_that_cannot_be_written_says_so_once_on_stderr`]:
    /// the folder to dump into.
    const CHILD_DIR: &str = "SHEAF_JIT_DUMP_TEST_CHILD_DIR";

    fn compile() -> Compile<'static> {
        Compile {
            function: "f",
            signature: "(f32[1])",
            mlir: "module {}",
            flags: &[],
            target: "t",
            tuning_spec: None,
        }
    }

    fn failed() -> Result<Artifact, CompileError> {
        Err(CompileError::Compilation {
            diagnostics: Vec::new(),
        })
    }

    /// Records one failed compile into `dir`, on a thread: fails if that
    /// takes over 10 s (a FIFO waited on).
    fn record_within_bound(dumps: Dumps) -> Dumps {
        let (done, finished) = mpsc::channel();
        std::thread::spawn(move || {
            dumps.record(&compile(), &failed(), None);
            let _ = done.send(dumps);
        });
        finished
            .recv_timeout(Duration::from_secs(10))
            .expect("a dump returns promptly")
    }

    /// The folders in `dir`.
    fn folders(dir: &Path) -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        found.sort();
        found
    }

    fn mkfifo(path: &Path) {
        let made = Command::new("mkfifo").arg(path).status().unwrap();
        assert!(made.success(), "mkfifo {}", path.display());
    }

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn the_runtimes_tuning_spec_is_copied_and_the_command_names_the_copy() {
        let dir = tempfile::tempdir().unwrap();
        let flags = [
            "--a".to_owned(),
            format!("{TUNING_SPEC_FLAG}/tmp/sheaf-jit-matmul-spec-x.mlir"),
        ];
        let compile = Compile {
            flags: &flags,
            tuning_spec: Some("module @spec {}"),
            ..compile()
        };
        let dumps = Dumps::new(dir.path().to_owned(), &CompilerPreference::Disabled);
        dumps.record(&compile, &failed(), None);
        let dump = &folders(dumps.own_folder().unwrap())[0];
        let read = |name: &str| fs::read_to_string(dump.join(name)).unwrap();
        assert_eq!(read(TUNING_SPEC), "module @spec {}");
        // flags.txt says what the compiler got; the command, what reruns it.
        assert!(read("flags.txt").contains("sheaf-jit-matmul-spec-x.mlir"));
        let command = read("command.sh");
        assert!(
            command.contains(&format!("'{TUNING_SPEC_FLAG}{TUNING_SPEC}'")),
            "{command}"
        );
        assert!(!command.contains("sheaf-jit-matmul-spec-x"), "{command}");
    }

    #[test]
    fn names_keep_to_safe_characters_and_a_bound() {
        assert_eq!(file_name("f32[1,5]"), "f32[1,5]");
        assert_eq!(file_name("../x y/$z"), ".._x_y__z");
        assert_eq!(file_name(&"a".repeat(500)).len(), MAX_NAME);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn at_most_max_dumps_are_written_in_a_folder_of_this_process() {
        let dir = tempfile::tempdir().unwrap();
        let compile = Compile {
            flags: &["--a".to_owned()],
            ..compile()
        };
        let mut made = Vec::new();
        for _ in 0..2 {
            let dumps = Dumps::new(dir.path().to_owned(), &CompilerPreference::Disabled);
            for _ in 0..MAX_DUMPS + 2 {
                dumps.record(&compile, &failed(), None);
            }
            made.push(dumps.own_folder().unwrap().to_owned());
        }
        assert_ne!(made[0], made[1], "a fresh folder each time, never reused");
        assert_eq!(folders(dir.path()), {
            let mut sorted = made.clone();
            sorted.sort();
            sorted
        });
        let own = &made[0];
        let name = own.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with(&format!("{}-", std::process::id())),
            "{name}"
        );
        assert_eq!(fs::metadata(own).unwrap().mode() & 0o777, 0o700);
        assert_eq!(folders(own).len(), MAX_DUMPS);
        let last = own.join(format!("{:04}-f-_f32[1]_", MAX_DUMPS - 1));
        assert!(last.join("diagnostics.txt").is_file(), "{}", last.display());
        let command = last.join("command.sh");
        assert_eq!(fs::metadata(&command).unwrap().mode() & 0o777, 0o755);
        let command = fs::read_to_string(command).unwrap();
        assert!(
            command.contains("  '--a' \\\n  - -o recompiled.vmfb < input.mlir"),
            "{command}"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn another_users_planted_folder_is_refused_and_its_links_never_followed() {
        let victim_dir = tempfile::tempdir().unwrap();
        let victim = victim_dir.path().join("victim");
        fs::write(&victim, "the victim's own\n").unwrap();
        fs::set_permissions(&victim, fs::Permissions::from_mode(0o600)).unwrap();
        let plant = |dir: &Path| {
            // What the issue's attacker left: the first dump's name, with
            // `command.sh` a link to the victim's file.
            let planted = dir.join("0000-f-_f32[1]_");
            fs::create_dir(&planted).unwrap();
            fs::set_permissions(&planted, fs::Permissions::from_mode(0o777)).unwrap();
            symlink(&victim, planted.join("command.sh")).unwrap();
        };
        let open = tempfile::tempdir().unwrap();
        fs::set_permissions(open.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let others = tempfile::tempdir().unwrap();
        std::os::unix::fs::chown(others.path(), Some(65534), Some(65534)).unwrap();
        let own = tempfile::tempdir().unwrap();
        for dir in [open.path(), others.path(), own.path()] {
            plant(dir);
            let dumps =
                record_within_bound(Dumps::new(dir.to_owned(), &CompilerPreference::Disabled));
            let refused = dir != own.path();
            assert_eq!(dumps.own_folder().is_err(), refused, "{}", dir.display());
            assert_eq!(folders(dir).len(), if refused { 1 } else { 2 });
            assert_eq!(fs::read_to_string(&victim).unwrap(), "the victim's own\n");
            assert_eq!(fs::metadata(&victim).unwrap().mode() & 0o777, 0o600);
        }
        let link = victim_dir.path().join("link");
        symlink(own.path(), &link).unwrap();
        let dumps = Dumps::new(link, &CompilerPreference::Disabled);
        let error = dumps.own_folder().unwrap_err();
        assert!(error.contains("symbolic link"), "{error}");
    }

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn a_fifo_planted_at_a_dump_file_is_never_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let dumps = Dumps::new(dir.path().to_owned(), &CompilerPreference::Disabled);
        let own = dumps.own_folder().unwrap().to_owned();
        // Planted where the first dump goes (as one who could write there
        // would), and in a folder written by `file_io`.
        let first = own.join("0000-f-_f32[1]_");
        fs::create_dir(&first).unwrap();
        mkfifo(&first.join("input.mlir"));
        let dumps = record_within_bound(dumps);
        assert!(first.join("input.mlir").exists());
        assert_eq!(folders(&first).len(), 1, "an existing folder is not used");
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        let (done, finished) = mpsc::channel();
        let written = fifo.clone();
        std::thread::spawn(move || {
            let _ = done.send(file_io::write_whole(&written, b"module {}").is_ok());
        });
        let replaced = finished.recv_timeout(Duration::from_secs(10));
        assert_eq!(replaced, Ok(true), "written promptly, over the FIFO");
        assert!(fs::metadata(&fifo).unwrap().is_file());
        drop(dumps);
    }

    /// The child of [`a_dump_that_cannot_be_written_says_so_once_on_stderr`].
    #[test]
    fn child_dumps_into_a_refused_folder() {
        let Some(dir) = std::env::var_os(CHILD_DIR) else {
            return;
        };
        let dumps = Dumps::new(dir.into(), &CompilerPreference::Disabled);
        for _ in 0..3 {
            dumps.record(&compile(), &failed(), None);
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn a_dump_that_cannot_be_written_says_so_once_on_stderr() {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
        // Through the test runner: under `cargo xtask test --aarch64` this
        // binary starts only under qemu-user.
        let output = test_support::child::rerun("dump::tests::child_dumps_into_a_refused_folder")
            .env(CHILD_DIR, dir.path())
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let said = stderr.matches("SHEAF_JIT_DUMP_DIR: cannot dump").count();
        assert_eq!(said, 1, "{stderr}");
        assert!(stderr.contains("chmod"), "says what to do: {stderr}");
    }

    #[test]
    fn flags_are_quoted_as_one_shell_word_each() {
        assert_eq!(quoted("--a=b c"), "'--a=b c'");
        assert_eq!(quoted("--it's"), r"'--it'\''s'");
    }
}
