//! Project automation, run as `cargo xtask <command>`.
//!
//! One module per command; shared plumbing (paths, tools, the IREE source,
//! the install manifest) lives in its own module. Every long step prints what
//! it does and how long it took.

mod aarch64;
mod background;
mod bench_vs_jax;
mod bindings;
mod build_iree;
mod build_log;
mod cli;
mod cross;
mod cuda;
mod darwin_link;
mod debian;
mod fleet;
mod fuzz;
mod host;
mod manifest;
mod measurements;
mod miri;
mod msrv;
mod package;
mod pingpong;
mod process;
mod redis;
mod semver;
mod soak;
mod source;
mod test;
mod tidy;
mod tools;
mod tracing;
mod tracy_capture;
mod tracy_client;
mod vulkan;
mod zig;

use std::process::ExitCode;

use anyhow::{bail, Result};
use lexopt::prelude::*;

fn main() -> ExitCode {
    // Before any thread starts: Homebrew's programs on macOS (`host.rs`).
    std::env::set_var(
        "PATH",
        host::path_with_tool_dirs(host::Os::current(), std::env::var_os("PATH")),
    );
    let mut parser = lexopt::Parser::from_env();
    match run(&mut parser) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("xtask: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the command `parser` names; `Ok(false)` when it names none.
fn run(parser: &mut lexopt::Parser) -> Result<bool> {
    let command = match parser.next()? {
        None => {
            eprint!("{}", cli::usage());
            return Ok(false);
        }
        Some(arg) if cli::is_help(&arg) => {
            print!("{}", cli::usage());
            return Ok(true);
        }
        Some(Value(command)) => cli::text(command)?,
        Some(arg) => return Err(arg.unexpected().into()),
    };
    // Each command's arguments are parsed whole before it starts, so that
    // `--help` (and a wrong argument) answers at once.
    let ran = match command.as_str() {
        "build-iree" => {
            build_iree::Options::parse(parser)?.map(|options| build_iree::run(&options).map(drop))
        }
        "bindgen" => bindings::parse(parser)?.map(bindings::run_request),
        "test" => test::parse(parser)?.map(test::run),
        "miri" => cli::no_arguments("miri", parser)?.map(|()| miri::run()),
        "package-check" => cli::no_arguments("package-check", parser)?.map(|()| package::run()),
        "semver" => semver::parse(parser)?.map(semver::run),
        "darwin-link" => cli::no_arguments("darwin-link", parser)?.map(|()| darwin_link::run()),
        "fuzz" => cli::seconds("fuzz", fuzz::TEST_SECONDS, parser)?.map(fuzz::run),
        "soak" => cli::seconds("soak", soak::TEST_SECONDS, parser)?.map(soak::run),
        "pingpong" => pingpong::parse(parser)?.map(pingpong::run),
        "fleet" => fleet::Options::parse(parser)?.map(fleet::run),
        "measurements" => measurements::parse(parser)?.map(measurements::run),
        "bench-vs-jax" => bench_vs_jax::Options::parse(parser)?.map(bench_vs_jax::run),
        "help" => {
            print!("{}", cli::usage());
            return Ok(true);
        }
        other => bail!("unknown command `{other}`\n\n{}", cli::usage()),
    };
    match ran {
        Some(result) => result.map(|()| true),
        None => {
            print!("{}", cli::usage_of(&command));
            Ok(true)
        }
    }
}
