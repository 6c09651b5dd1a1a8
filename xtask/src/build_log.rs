//! A long native build on a few terminal lines: every output line of the
//! child processes goes to a log file, the terminal gets Ninja's compile
//! counter (`[412/1033]`), and a failure shows the log's last lines and
//! where the rest is.

use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{anyhow, Context, Result};

use crate::process::describe;

/// Lines of the log shown when a command fails.
const TAIL_LINES: usize = 40;

/// Without a terminal to redraw, the counter is printed at every this many
/// percent.
const PERCENT_STEP: usize = 25;

/// The log file of one build.
#[derive(Debug)]
pub(crate) struct BuildLog {
    path: PathBuf,
    file: File,
}

impl BuildLog {
    /// Creates (or truncates) the log at `path`.
    pub(crate) fn create(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let file =
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(BuildLog {
            path: path.to_path_buf(),
            file,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `command` with its output in the log only.
    pub(crate) fn run(&mut self, command: &mut Command) -> Result<()> {
        self.start(command)?;
        let (stdout, stderr) = (self.handle()?, self.handle()?);
        let status = command
            .stdout(stdout)
            .stderr(stderr)
            .status()
            .with_context(|| format!("cannot start {}", describe(command)))?;
        self.finish(command, status)
    }

    /// Runs a Ninja build (`cmake --build`) with its output in the log, and
    /// its `[finished/total]` counter on the terminal after `label`: redrawn
    /// in place on a terminal, else printed every `PERCENT_STEP` percent.
    pub(crate) fn run_with_counter(&mut self, label: &str, command: &mut Command) -> Result<()> {
        self.start(command)?;
        let stderr = self.handle()?;
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("cannot start {}", describe(command)))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut counter = Counter::new(label);
        for line in BufReader::new(stdout).lines() {
            let line = line.context("cannot read the build's output")?;
            writeln!(self.file, "{line}").map_err(|e| self.write_error(e))?;
            if let Some((done, total)) = ninja_progress(&line) {
                counter.show(done, total);
            }
        }
        counter.end();
        let status = child
            .wait()
            .with_context(|| format!("cannot wait for {}", describe(command)))?;
        self.finish(command, status)
    }

    /// Starts `command` with its output in the log only, and returns it
    /// running; [`BuildLog::finish`] takes its status.
    pub(crate) fn spawn(&mut self, command: &mut Command) -> Result<Child> {
        self.start(command)?;
        let (stdout, stderr) = (self.handle()?, self.handle()?);
        command
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("cannot start {}", describe(command)))
    }

    fn start(&mut self, command: &Command) -> Result<()> {
        writeln!(self.file, "\n$ {}", describe(command)).map_err(|e| self.write_error(e))
    }

    fn handle(&self) -> Result<File> {
        self.file
            .try_clone()
            .with_context(|| format!("cannot share {}", self.path.display()))
    }

    /// `Ok` if `command` ended with `status` success, else its log's last
    /// lines printed and an error naming the log.
    pub(crate) fn finish(&self, command: &Command, status: std::process::ExitStatus) -> Result<()> {
        if status.success() {
            return Ok(());
        }
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        eprintln!("[xtask] the last lines of {}:", self.path.display());
        for line in &lines[lines.len().saturating_sub(TAIL_LINES)..] {
            eprintln!("    {line}");
        }
        Err(anyhow!(
            "{} failed with {status}; its full output is in {}",
            describe(command),
            self.path.display()
        ))
    }

    fn write_error(&self, e: std::io::Error) -> anyhow::Error {
        anyhow::Error::new(e).context(format!("cannot write {}", self.path.display()))
    }
}

/// The terminal side of `run_with_counter`.
struct Counter<'a> {
    label: &'a str,
    redraw: bool,
    shown: Option<(usize, usize)>,
}

impl<'a> Counter<'a> {
    fn new(label: &'a str) -> Self {
        Counter {
            label,
            redraw: std::io::stderr().is_terminal(),
            shown: None,
        }
    }

    fn show(&mut self, done: usize, total: usize) {
        if self.redraw {
            eprint!("\r[xtask]   {} [{done}/{total}]", self.label);
        } else {
            let step = |done: usize| done * 100 / total.max(1) / PERCENT_STEP;
            let last = self.shown.map_or(usize::MAX, |(shown, _)| step(shown));
            if step(done) == last {
                return;
            }
            eprintln!("[xtask]   {} [{done}/{total}]", self.label);
        }
        self.shown = Some((done, total));
    }

    fn end(self) {
        match self.shown {
            Some(_) if self.redraw => eprintln!(),
            None => eprintln!("[xtask]   {}: nothing to build", self.label),
            Some(_) => {}
        }
    }
}

/// Ninja's status prefix `[finished/total]`, if `line` starts with one.
fn ninja_progress(line: &str) -> Option<(usize, usize)> {
    let (counter, _) = line.strip_prefix('[')?.split_once(']')?;
    let (done, total) = counter.split_once('/')?;
    Some((done.trim().parse().ok()?, total.trim().parse().ok()?))
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::{ninja_progress, BuildLog};

    fn shell(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        command
    }

    #[test]
    fn output_goes_to_the_log_and_a_failure_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = BuildLog::create(&dir.path().join("build.log")).unwrap();
        log.run(&mut shell("echo configured; echo warned >&2"))
            .unwrap();
        log.run_with_counter(
            "compiling",
            &mut shell("for i in 1 2 3 4; do echo \"[$i/4] cc $i.c\"; done"),
        )
        .unwrap();
        let error = format!(
            "{:#}",
            log.run(&mut shell("echo boom; exit 3")).unwrap_err()
        );
        assert!(error.contains(&log.path().display().to_string()), "{error}");
        let text = std::fs::read_to_string(log.path()).unwrap();
        for line in ["configured", "warned", "[4/4] cc 4.c", "boom"] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }

    #[test]
    fn ninja_status_lines_give_the_counter() {
        assert_eq!(
            ninja_progress("[412/1033] Building C object runtime/src/iree/base/x.c.o"),
            Some((412, 1033))
        );
        assert_eq!(ninja_progress("ninja: no work to do."), None);
        assert_eq!(ninja_progress("[ 50%] Built target flatcc"), None);
    }
}
