//! Starting an executable of the test's own architecture, such as the test
//! binary itself in a child process: directly, or through the program named
//! by `SHEAF_JIT_TEST_RUNNER`. `cargo xtask test --aarch64` sets it to
//! qemu-user, since the kernel of the x86_64 machine the aarch64 tests run
//! on cannot start an aarch64 executable by itself.

use std::ffi::OsStr;
use std::process::Command;

/// The variable naming the runner and its arguments, separated by spaces.
pub const RUNNER_ENV: &str = "SHEAF_JIT_TEST_RUNNER";

/// A command that runs `program`, built for this test's architecture.
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let runner = std::env::var(RUNNER_ENV).unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(runner) => {
            let mut command = Command::new(runner);
            command.args(words).arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// A command that runs this executable again (through the runner, as
/// [`command`]), with no arguments yet: a benchmark or an example that
/// runs itself as a child.
///
/// # Panics
///
/// When the path of this executable cannot be read.
pub fn this_executable() -> Command {
    command(std::env::current_exe().expect("the path of this executable"))
}

/// A command that runs the test `test` of this test binary alone, in a
/// child process (`--exact TEST --include-ignored --nocapture
/// --test-threads=1`, through the runner as [`command`]: an ignored test
/// run with `--ignored` starts children that run it too). The test tells
/// it is the child by a variable the caller sets on the command.
///
/// # Panics
///
/// When the path of this executable cannot be read.
pub fn rerun(test: &str) -> Command {
    let mut command = this_executable();
    command.args([
        "--exact",
        test,
        "--include-ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    command
}
