//! Project automation, run as `cargo xtask <command>`.
//!
//! One module per command; shared plumbing (paths, tools, the IREE source,
//! the install manifest) lives in its own module. Every long step prints what
//! it does and how long it took.

mod bindings;
mod build_iree;
mod build_log;
mod cross;
mod cuda;
mod debian;
mod fuzz;
mod manifest;
mod msrv;
mod package;
mod pingpong;
mod process;
mod redis;
mod soak;
mod source;
mod test;
mod tidy;
mod tools;
mod vulkan;

use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <command> [options]

commands:
  build-iree [--source DIR] [--drivers LIST] [--force]
      Install the tools (CMake, Ninja, libclang, iree-base-compiler) into
      target/venv, build the IREE runtime from source in Release and install
      it under target/iree/. LIST is comma separated, default
      `local-sync,local-task,vulkan,cuda` (no GPU needed to build: the CUDA
      headers come from a toolkit, else from NVIDIA's wheels in the venv).
      IREE_SOURCE_DIR is the same as --source.
  bindgen [--check]
      Regenerate crates/iree-sys/src/bindings.rs from the installed headers;
      with --check, fail if the committed file is stale.
  test
      Ensure IREE is built, check the bindings, check the workspace with the
      declared rust-version, install redis-server and Mesa's lavapipe (a
      software Vulkan device) if missing, run the workspace tests (the
      device suite on the CPU and on Vulkan), package-check, a 30 s
      soak, the miri tests and each fuzz target for 20 s.
  package-check
      Ensure IREE is built, `cargo package` the library crates, then build
      and run a crate outside the workspace that depends on the packaged
      sheaf-integration (xtask/package-check/): one compiled sigmoid call.
  fuzz [SECONDS]
      Run each cargo-fuzz target of fuzz/ for SECONDS (default 20) from its
      committed seeds (installs cargo-fuzz if missing).
  soak [SECONDS]
      Ensure IREE is built and redis-server installed, then call the JIT
      from 8 threads for SECONDS (default 30) with every cache tier on and
      bad calls mixed in; prints calls, wrong results, panics, RSS and
      descriptors, and fails on a wrong result, a panic or a descriptor leak.
  pingpong [ARGS...]
      Ensure IREE is built, then run the shape ping-pong demo (release build)
      with ARGS (try `--help`); writes target/pingpong/rss.svg.
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        eprint!("{USAGE}");
        return ExitCode::FAILURE;
    };
    let result = match command.as_str() {
        "build-iree" => {
            build_iree::Options::parse(rest).and_then(|o| build_iree::run(&o).map(drop))
        }
        "bindgen" => bindings::run(rest),
        "test" => test::run(rest),
        "package-check" => package::run(rest),
        "fuzz" => fuzz::run(rest),
        "soak" => soak::run(rest),
        "pingpong" => pingpong::run(rest),
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command `{other}`\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: error: {message}");
            ExitCode::FAILURE
        }
    }
}
