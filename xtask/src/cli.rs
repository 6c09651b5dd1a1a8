//! Command-line parsing with `lexopt`: each command's usage text, `--help`
//! (answered before any setup work), and the helpers the commands' parsers
//! share. A parser returns `Ok(None)` when `--help` was asked.

use std::ffi::OsString;

use anyhow::{anyhow, Context, Result};
use lexopt::prelude::*;

/// A command: its name and its usage text (the first line its synopsis,
/// the others indented by 6).
pub(crate) struct Command {
    pub name: &'static str,
    pub usage: &'static str,
}

/// Every command, in the order `cargo xtask --help` lists them.
pub(crate) const COMMANDS: &[Command] = &[
    Command {
        name: "build-iree",
        usage: "\
  build-iree [--source DIR] [--drivers LIST] [--target TRIPLE]
             [--tracing[=tracy|console]] [--force]
      Install the tools (CMake, Ninja, libclang, iree-base-compiler) into
      target/venv, build the IREE runtime from source in Release and install
      it under target/iree/. LIST is comma separated, default
      `local-sync,local-task,vulkan,cuda` on Linux (no GPU needed to build:
      the CUDA headers come from a toolkit, else from NVIDIA's wheels in the
      venv) and `local-sync,local-task,metal` on macOS (Apple Silicon;
      never run there yet). --tracing builds with IREE's runtime tracing
      into an install of its own, used through IREE_DIR (printed), never
      the current one. Tracy (the default) streams to Tracy 0.11.1's
      profiler GUI; its client comes from the crates.io package
      tracy-client-sys 0.24.3 (xtask's pinned dependency) unless the IREE
      sources have their third_party/tracy submodule. `console` prints
      zones to stderr (docs/profiling.md).
      IREE_SOURCE_DIR is the same as --source. `--target
      aarch64-unknown-linux-gnu` cross-builds the runtime (CPU drivers only,
      `local-sync,local-task` by default) with Debian's
      gcc-aarch64-linux-gnu (installed if missing); `--target
      aarch64-apple-darwin` with zig (the pinned ziglang, installed into
      target/venv if missing; no `metal`: it needs Apple's SDK). Either goes
      into a folder of its own recorded in target/iree/manifest-<TRIPLE>.json;
      the host's target/iree/manifest.json is left as it is.
",
    },
    Command {
        name: "bindgen",
        usage: "\
  bindgen [--check] [--target aarch64-apple-darwin]
      Regenerate crates/iree-sys/src/bindings.rs (what x86_64 and aarch64
      Linux declare alike), bindings_<arch>.rs (what differs) and
      bindings_aarch64_apple_darwin.rs (macOS on Apple Silicon, with layout
      tests) from the installed headers, on x86_64 Linux (installs the
      aarch64 C library headers and the pinned ziglang, whose macOS libc
      headers stand in for Apple's SDK, if missing); with --check, fail if a
      committed file is stale. With --target aarch64-apple-darwin, macOS's
      file alone.
",
    },
    Command {
        name: "test",
        usage: "\
  test [--aarch64]
      Ensure IREE is built, check the bindings, check the workspace with the
      declared rust-version, install redis-server and Mesa's lavapipe (a
      software Vulkan device) if missing, run the workspace tests (the
      device suite on the CPU and on Vulkan), sheaf-integration without
      default features, darwin-link, a Tracy tracing runtime (built, and
      iree-safe's example run on it, connected to as Tracy's profiler),
      package-check, a 30 s soak, the Linux-aarch64 tests, the miri tests,
      each fuzz target for 10 s, and semver (cargo-semver-checks, whose
      install, when missing, runs in the background at the lowest CPU
      priority from the start). With --aarch64, only the Linux-aarch64 tests: install the cross
      toolchain, qemu-user and the Rust target if missing, cross-build IREE,
      cross-compile the tests of iree-sys, iree-safe, sheaf-integration and
      sheaf-demos and run them under qemu-user (about a minute once built; the first
      run 3-5 minutes). What is left out, and why, is printed.
",
    },
    Command {
        name: "miri",
        usage: "\
  miri
      Ensure IREE is built and the nightly toolchain's miri installed, then
      run the miri tests (jit-cache's policy, iree-safe against its mock of
      the C API, sheaf-integration's unit tests), each test target a
      `cargo miri test` of its own, on as many workers as there are cores.
      `cargo xtask test` runs this.
",
    },
    Command {
        name: "package-check",
        usage: "\
  package-check
      Use IREE_DIR's install, else ensure IREE is built; check with `cargo
      info` that the library crates' names are free on crates.io or ours,
      `cargo publish --dry-run` them (verified) in dependency order (no
      registry patch); then put their .crate files and `cargo vendor`'s copy
      of their dependencies into a directory source, and build offline from
      it alone a crate outside the workspace that depends on
      sheaf-integration 0.2 with default features
      (xtask/package-check/; IREE built from the packaged sources, no
      IREE_DIR): one compiled sigmoid call on local-sync and one on Vulkan
      (lavapipe), then the same crate vendored and built --offline --frozen
      from its own vendor folder.
",
    },
    Command {
        name: "semver",
        usage: "\
  semver [--baseline-rev REV]
      Check the library crates' public API against REV's (default HEAD~1)
      with cargo-semver-checks, installed with `cargo install --locked` if
      missing: a breaking change fails unless the crate's version allows
      it. A package REV does not have under its current name is skipped.
      `cargo xtask test` runs this.
",
    },
    Command {
        name: "darwin-link",
        usage: "\
  darwin-link
      Link sheaf-integration's library test executable for macOS on Apple
      Silicon (aarch64-apple-darwin) from Linux, never run: `rustup target
      add` it, install the pinned ziglang and cargo-zigbuild into
      target/venv, cross-build IREE's CPU drivers with zig (`build-iree
      --target aarch64-apple-darwin`), `cargo zigbuild test --no-run --lib`
      with every feature but remote-cache-tls (Apple's Security framework,
      which zig lacks) into target/darwin-link, and print `file`'s line for
      the executable. `cargo xtask test` runs this.
",
    },
    Command {
        name: "fuzz",
        usage: "\
  fuzz [SECONDS]
      Run each cargo-fuzz target of fuzz/ for SECONDS (default 20) from its
      committed seeds (installs cargo-fuzz, PyPI's prebuilt wheel, into
      target/venv if missing).
",
    },
    Command {
        name: "soak",
        usage: "\
  soak [SECONDS]
      Ensure IREE is built and redis-server installed, then call the JIT
      from 8 threads for SECONDS (default 30) with every cache tier on and
      bad calls mixed in; prints calls, wrong results, panics, RSS and
      descriptors, and fails on a wrong result, a panic or a descriptor leak.
",
    },
    Command {
        name: "pingpong",
        usage: "\
  pingpong [ARGS...] [-- DEMO-ARGS...]
      Ensure IREE is built, then run the shape ping-pong demo (release build)
      with ARGS and the DEMO-ARGS after `--` (the demo's own options: `cargo
      xtask pingpong -- --help`); writes target/pingpong/rss.svg.
",
    },
    Command {
        name: "fleet",
        usage: "\
  fleet [--backend redis|folder] [--workers N] [--leases both|on|off]
      Ensure IREE is built (and redis-server installed), build the
      fleet_worker demo, then run N workers (default 6; each six signatures
      in Blocking mode, a fresh disk cache, results checked against the
      interpreter) against a fresh shared store (a redis-server on loopback,
      or a temporary folder): all at once, one after another, and at once
      with the first lease owner killed mid-compile; with compile leases and
      without (`--leases`, default both). Prints a table (compiles in all,
      each worker's wall time, remote hits, lease waits, wrong results) and
      checks the targets: one compile per signature at once, the slowest
      worker within 1.5 x the lone first one, a killed owner costing at most
      a lease's time to live and one compile.
",
    },
    Command {
        name: "bench-vs-jax",
        usage: "\
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
",
    },
    Command {
        name: "measurements",
        usage: "\
  measurements [--only ID]... [--render] [--list]
      Ensure IREE is built, run the command of each section of
      docs/measurements.md (a bench or an xtask command; the sections are
      defined in xtask/src/measurements/sections.rs) and rewrite the file:
      each section's text, its command, the run's date, commit, CPU, cores
      and load average, and the command's standard output. --only ID
      reruns that section (repeatable) and keeps the others' records;
      --render runs nothing and rewrites the file from its records; --list
      prints the ids. Every section takes from seconds to minutes; all of
      them need lavapipe and redis-server (`cargo xtask test` installs them).
",
    },
];

/// `cargo xtask --help`: every command's usage.
pub(crate) fn usage() -> String {
    let mut text = "usage: cargo xtask <command> [options]\n\
                    (`cargo xtask <command> --help` shows one)\n\ncommands:\n"
        .to_owned();
    for command in COMMANDS {
        text.push_str("  ");
        text.push_str(command.usage);
    }
    text
}

/// `cargo xtask <name> --help`.
pub(crate) fn usage_of(name: &str) -> String {
    let command = COMMANDS
        .iter()
        .find(|command| command.name == name)
        .expect("every command has a usage text");
    format!("usage: cargo xtask {}", command.usage)
}

/// True for `--help` and `-h`.
pub(crate) fn is_help(arg: &lexopt::Arg<'_>) -> bool {
    matches!(arg, Long("help") | Short('h'))
}

/// The error for an argument `command` does not take.
pub(crate) fn unexpected(command: &str, arg: lexopt::Arg<'_>) -> anyhow::Error {
    anyhow!(
        "{command}: {} (see `cargo xtask {command} --help`)",
        arg.unexpected()
    )
}

/// The arguments of a command that takes none: `Ok(None)` for `--help`.
pub(crate) fn no_arguments(command: &str, parser: &mut lexopt::Parser) -> Result<Option<()>> {
    match parser.next()? {
        None => Ok(Some(())),
        Some(arg) if is_help(&arg) => Ok(None),
        Some(arg) => Err(unexpected(command, arg)),
    }
}

/// The arguments `[SECONDS]` of `command` (`default` when absent), a
/// positive whole number: `Ok(None)` for `--help`.
pub(crate) fn seconds(
    command: &str,
    default: u64,
    parser: &mut lexopt::Parser,
) -> Result<Option<u64>> {
    let mut seconds = None;
    while let Some(arg) = parser.next()? {
        match arg {
            arg if is_help(&arg) => return Ok(None),
            Value(value) if seconds.is_none() => {
                let text = value.string()?;
                let parsed = text.parse().ok().filter(|&s: &u64| s > 0);
                seconds = Some(parsed.with_context(|| {
                    format!("{command}: `{text}` is not a number of seconds (a whole number > 0)")
                })?);
            }
            arg => return Err(unexpected(command, arg)),
        }
    }
    Ok(Some(seconds.unwrap_or(default)))
}

/// The value of an option as UTF-8 text.
pub(crate) fn text(value: OsString) -> Result<String> {
    value
        .into_string()
        .map_err(|value| anyhow!("`{}` is not UTF-8", value.to_string_lossy()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parser(args: &[&str]) -> lexopt::Parser {
        lexopt::Parser::from_args(args.iter().copied())
    }

    #[test]
    fn seconds_are_positive_whole_numbers_or_help() {
        assert_eq!(seconds("soak", 30, &mut parser(&[])).unwrap(), Some(30));
        assert_eq!(seconds("soak", 30, &mut parser(&["5"])).unwrap(), Some(5));
        assert_eq!(seconds("soak", 30, &mut parser(&["--help"])).unwrap(), None);
        assert_eq!(
            seconds("soak", 30, &mut parser(&["5", "-h"])).unwrap(),
            None
        );
        for bad in [&["0"][..], &["x"], &["5", "6"], &["--fast"]] {
            let error = format!("{:#}", seconds("soak", 30, &mut parser(bad)).unwrap_err());
            assert!(error.starts_with("soak: "), "{error}");
        }
    }

    #[test]
    fn commands_without_arguments_take_only_help() {
        assert_eq!(no_arguments("miri", &mut parser(&[])).unwrap(), Some(()));
        assert_eq!(
            no_arguments("miri", &mut parser(&["--help"])).unwrap(),
            None
        );
        let error = format!(
            "{:#}",
            no_arguments("miri", &mut parser(&["x"])).unwrap_err()
        );
        assert!(error.contains("cargo xtask miri --help"), "{error}");
    }

    #[test]
    fn every_command_has_one_usage_starting_with_its_name() {
        for command in COMMANDS {
            assert!(command.usage.starts_with(command.name), "{}", command.name);
            assert!(usage_of(command.name).starts_with("usage: cargo xtask "));
        }
        assert!(usage().contains("\n  bench-vs-jax [--driver"));
    }
}
