//! Starting an executable of the test's own architecture, such as the test
//! binary itself in a child process: directly, or through the program named
//! by `SHEAF_JIT_TEST_RUNNER`. `cargo xtask test --aarch64` sets it to
//! qemu-user, since the kernel of the x86_64 machine the aarch64 tests run
//! on cannot start an aarch64 executable by itself.

use std::ffi::OsStr;
use std::process::Command;

/// The variable naming the runner and its arguments, separated by spaces.
pub(crate) const RUNNER_ENV: &str = "SHEAF_JIT_TEST_RUNNER";

/// A command that runs `program`, built for this test's architecture.
pub(crate) fn command(program: impl AsRef<OsStr>) -> Command {
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
