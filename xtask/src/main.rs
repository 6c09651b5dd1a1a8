//! Project automation, run as `cargo xtask <command>`.
//!
//! One module per command; shared plumbing (paths, tools, the IREE source,
//! the install manifest) lives in its own module. Every long step prints what
//! it does and how long it took.

mod aarch64;
mod bench_vs_jax;
mod bindings;
mod build_iree;
mod build_log;
mod cross;
mod cuda;
mod debian;
mod fuzz;
mod manifest;
mod miri;
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
  build-iree [--source DIR] [--drivers LIST] [--target TRIPLE] [--force]
      Install the tools (CMake, Ninja, libclang, iree-base-compiler) into
      target/venv, build the IREE runtime from source in Release and install
      it under target/iree/. LIST is comma separated, default
      `local-sync,local-task,vulkan,cuda` (no GPU needed to build: the CUDA
      headers come from a toolkit, else from NVIDIA's wheels in the venv).
      IREE_SOURCE_DIR is the same as --source. `--target
      aarch64-unknown-linux-gnu` cross-builds the runtime (CPU drivers only,
      `local-sync,local-task` by default) with Debian's
      gcc-aarch64-linux-gnu (installed if missing), into a folder of its own
      recorded in target/iree/manifest-<TRIPLE>.json; the host's
      target/iree/manifest.json is left as it is.
  bindgen [--check]
      Regenerate crates/iree-sys/src/bindings.rs (what x86_64 and aarch64
      Linux declare alike) and bindings_<arch>.rs (what differs) from the
      installed headers (installs the aarch64 C library headers if missing);
      with --check, fail if a committed file is stale.
  test [--aarch64]
      Ensure IREE is built, check the bindings, check the workspace with the
      declared rust-version, install redis-server and Mesa's lavapipe (a
      software Vulkan device) if missing, run the workspace tests (the
      device suite on the CPU and on Vulkan), package-check, a 30 s
      soak, the Linux-aarch64 tests, the miri tests and each fuzz target for
      20 s. With --aarch64, only the Linux-aarch64 tests: install the cross
      toolchain, qemu-user and the Rust target if missing, cross-build IREE,
      cross-compile the tests of iree-sys, iree-safe, sheaf-integration and
      sheaf-demos and run them under qemu-user (about a minute once built; the first
      run 3-5 minutes). What is left out, and why, is printed.
  miri
      Ensure IREE is built and the nightly toolchain's miri installed, then
      run the miri tests (jit-cache's policy core, iree-safe against its
      mock of the C API), each test target a `cargo miri test` of its own,
      on as many workers as there are cores. `cargo xtask test` runs this.
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
  bench-vs-jax [--driver local-sync|local-task] [--quick] [--out FILE]
      Ensure IREE is built and jax[cpu]==0.10.2 installed into target/venv,
      then run the same workloads with this JIT (release build) and with
      JAX on the CPU, float32, no persistent compile cache on either side,
      each side 3 times in processes of its own (the compute rows again
      pinned to one core), and print a Markdown table: medians, the ratio,
      and whether the outputs' checksums agree (a mismatch fails). Inputs
      and the table go to target/bench-vs-jax/ (and FILE); --driver: our
      device (default JitConfig's, `auto`); --quick: fewer calls, a smoke
      test. 2-3 minutes on 2 cores once built.
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
        "miri" => miri::run(rest),
        "package-check" => package::run(rest),
        "fuzz" => fuzz::run(rest),
        "soak" => soak::run(rest),
        "pingpong" => pingpong::run(rest),
        "bench-vs-jax" => bench_vs_jax::run(rest),
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
