//! A command that runs beside the steps: started early at the lowest CPU
//! priority, its output in a log file, and waited for by the step that
//! needs what it makes.
//!
//! For a tool that must be compiled on a new machine (`cargo install
//! cargo-semver-checks`: about 4 minutes of both cores): the moments when
//! the steps before leave a core idle (downloads, tests waiting on a child
//! process or a timeout) do its work, and whenever a step wants the CPU the
//! kernel gives it to the step first. On Linux it runs under `SCHED_IDLE`
//! (`chrt --idle 0`), which a waking task of the steps preempts at once:
//! under `nice -n 19` alone, the workspace tests of `.ci/run`, which wait
//! and wake often, took 352 s instead of 295 s (2026-12-06, with other
//! niced builds beside it). Elsewhere it runs under `nice -n 19`. Dropped without being waited for (a
//! step before it failed), the command is killed with every process it
//! started (it runs in a process group of its own: `cargo install` starts
//! rustc processes that would otherwise go on).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::SystemTime;

use anyhow::{Context, Result};

use crate::build_log::BuildLog;
use crate::process::step;

/// The command line that runs `program` at the lowest CPU priority.
pub(crate) fn at_lowest_priority(program: &str) -> Command {
    let mut command;
    if cfg!(target_os = "linux") {
        command = Command::new("chrt");
        command.args(["--idle", "0", program]);
    } else {
        command = Command::new("nice");
        command.args(["-n", "19", program]);
    }
    command
}

/// A command running in the background.
#[derive(Debug)]
pub(crate) struct Background {
    what: String,
    command: Command,
    child: Child,
    log: BuildLog,
    started: SystemTime,
}

impl Background {
    /// Starts `command` (built with [`at_lowest_priority`]) with its output
    /// in the log at `log`; `what` says what it makes.
    pub(crate) fn start(what: &str, mut command: Command, log: &Path) -> Result<Self> {
        let mut log = BuildLog::create(log)?;
        let child = log.spawn(command.process_group(0))?;
        eprintln!(
            "[xtask] {what}: started in the background at the lowest CPU priority (output: {})",
            log.path().display()
        );
        Ok(Background {
            what: what.to_owned(),
            command,
            child,
            log,
            started: SystemTime::now(),
        })
    }

    /// Waits for the command to end; fails, showing its log's last lines,
    /// unless it succeeded.
    pub(crate) fn wait(mut self) -> Result<()> {
        let status = step(&format!("waiting for {}", self.what), || {
            self.child
                .wait()
                .with_context(|| format!("cannot wait for {}", self.what))
        })?;
        // Its last output is when it ended (it may have ended long before
        // this wait).
        let ended = std::fs::metadata(self.log.path())
            .and_then(|log| log.modified())
            .ok()
            .and_then(|modified| modified.duration_since(self.started).ok());
        if let Some(ended) = ended {
            eprintln!(
                "[xtask] {}: ended {:.0}s after it started",
                self.what,
                ended.as_secs_f64()
            );
        }
        self.log.finish(&self.command, status)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // Waited for or not, nothing of it may outlive the run: its process
        // group (whose id is its pid) is killed. An error means that the
        // group has ended already.
        if let Ok(None) = self.child.try_wait() {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", self.child.id())])
                .status();
        }
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_runs_at_the_lowest_priority_and_its_failure_names_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("job.log");
        let mut ok = at_lowest_priority("sh");
        ok.args(["-c", "chrt -p $$; echo niceness $(nice)"]);
        Background::start("a job", ok, &log)
            .unwrap()
            .wait()
            .unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        if cfg!(target_os = "linux") {
            assert!(text.contains("policy: SCHED_IDLE"), "{text}");
        } else {
            assert!(text.contains("niceness 19"), "{text}");
        }

        let mut failing = at_lowest_priority("sh");
        failing.args(["-c", "echo broke; exit 4"]);
        let error = Background::start("a failing job", failing, &log)
            .unwrap()
            .wait()
            .unwrap_err();
        assert!(format!("{error:#}").contains("job.log"), "{error:#}");
    }

    #[test]
    fn dropped_unwaited_it_is_killed_with_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let (started, finished) = (dir.path().join("started"), dir.path().join("finished"));
        // A grandchild that writes `finished` a second after `started`.
        let mut slow = at_lowest_priority("sh");
        slow.arg("-c").arg(format!(
            "(sleep 1; touch '{}') & touch '{}'; wait",
            finished.display(),
            started.display()
        ));
        let job = Background::start("a slow job", slow, &dir.path().join("slow.log")).unwrap();
        for _ in 0..200 {
            if started.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(started.exists(), "the job did not start within 10 s");
        drop(job);
        std::thread::sleep(std::time::Duration::from_secs(2));
        assert!(!finished.exists(), "the job's child went on after its drop");
    }
}
