//! `bench_vs_jax`: this workspace's JIT (`JitRuntime::dispatch`) on the
//! workloads that `jax_side.py` runs with JAX, one JSON object per row on
//! stdout. `cargo xtask bench-vs-jax` runs both sides three times each and
//! prints the table; run by hand:
//!
//! ```sh
//! bench_vs_jax write-inputs target/bench-vs-jax/inputs
//! bench_vs_jax run --inputs target/bench-vs-jax/inputs [--quick]
//! ```
//!
//! Every runtime here is built from `JitConfig`'s defaults (not from the
//! `SHEAF_JIT_*` variables, so that a run is reproducible) with the disk
//! cache off, on the device `--driver` names (default `auto`: the CPU,
//! `local-sync`, on a machine without a GPU). The rows:
//!
//! - `sigmoid` `f32[1,5]` warm, host array in and host array out, and chained
//!   on the device (each output is the next input);
//! - a new function's first result: blocking, and in background mode the
//!   first (interpreted) result and the first compiled one;
//! - the ping-pong (`sigmoid` on `f32[1,5]` and `f32[1,5,1]` alternately,
//!   `softmax` `f32[1,5]` at temperatures 0.5 and 1.0 alternately) and the
//!   ragged batch (`mlp_layer` at the batch sizes of
//!   `reference::ragged_batch_sizes`): totals, compiles included;
//! - `mlp_layer` warm at eight batch sizes in one runtime (dynamic dims on,
//!   as by default), and `matmul` `f32[512,512]`² and `f32[1024,1024]`², a
//!   batched `matmul` `f32[8,256,256]`², `softmax` `f32[128,1024]` and
//!   `mlp_layer` `f32[128,256]` warm (`--rows compute`: only these five).

mod fresh;
mod inputs;
mod row;
mod warm;
mod workloads;

use anyhow::{anyhow, Context as _};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use sheaf_integration::settings::{CompileMode, DiskCacheFolder};
use sheaf_integration::{
    CapturedScalar, Compiled, Dispatched, JitConfig, JitFunction, JitRuntime, Value,
};

use inputs::{Counts, Inputs};
use row::Row;

const USAGE: &str = "\
usage: bench_vs_jax write-inputs DIR
       bench_vs_jax run --inputs DIR [--driver DRIVER] [--quick] [--rows all|compute]

  write-inputs  write the inputs (raw little-endian f32 files and
                index.json) into DIR
  run           measure every row; print one JSON object per row
  --inputs      the folder write-inputs wrote
  --driver      IREE driver or device URI (default: JitConfig's, `auto`)
  --quick       fewer calls: a smoke test, not a measurement
  --rows        `compute`: only the matmul, softmax and mlp_layer rows";

/// What every scenario needs.
pub(crate) struct Bench {
    pub inputs: Inputs,
    pub counts: Counts,
    driver: Option<String>,
}

impl Bench {
    /// A new runtime in `mode`, with the disk cache off.
    pub(crate) fn runtime(&self, mode: CompileMode) -> anyhow::Result<JitRuntime> {
        let config = JitConfig::builder()
            .device(|device| {
                if let Some(driver) = &self.driver {
                    device.driver.clone_from(driver);
                }
            })
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
            .compile(|compile| compile.mode = mode)
            .build()?;
        Ok(JitRuntime::new(config)?)
    }
}

/// `function` on `args`, which must run compiled.
pub(crate) fn compiled(
    jit: &JitRuntime,
    function: &JitFunction,
    args: &[Value],
    captured: &[CapturedScalar],
) -> anyhow::Result<Compiled> {
    match jit.dispatch(function, args, captured)? {
        Dispatched::Compiled(compiled) => Ok(compiled),
        Dispatched::Interpret(why) => Err(anyhow!(
            "`{}` was not run compiled ({why}); the benchmark needs a working compiler \
             (try `cargo xtask build-iree`)",
            function.name()
        )),
    }
}

/// The options of `run`.
struct RunOptions {
    inputs: PathBuf,
    driver: Option<String>,
    quick: bool,
    compute_only: bool,
}

/// What the command line asks for.
enum Command {
    WriteInputs(PathBuf),
    Run(RunOptions),
    Help,
}

impl Command {
    fn parse() -> Result<Command, lexopt::Error> {
        use lexopt::Arg::{Long, Short};
        use lexopt::ValueExt as _;
        let mut parser = lexopt::Parser::from_env();
        let command = match parser.next()? {
            Some(Short('h') | Long("help")) => return Ok(Command::Help),
            Some(lexopt::Arg::Value(command)) => command.string()?,
            Some(other) => return Err(other.unexpected()),
            None => return Err("name a command".into()),
        };
        match command.as_str() {
            "write-inputs" => {
                let dir = match parser.next()? {
                    Some(lexopt::Arg::Value(dir)) => PathBuf::from(dir),
                    Some(other) => return Err(other.unexpected()),
                    None => return Err("write-inputs takes one folder".into()),
                };
                match parser.next()? {
                    Some(other) => Err(other.unexpected()),
                    None => Ok(Command::WriteInputs(dir)),
                }
            }
            "run" => {
                let mut options = RunOptions {
                    inputs: PathBuf::new(),
                    driver: None,
                    quick: false,
                    compute_only: false,
                };
                let mut inputs = None;
                while let Some(arg) = parser.next()? {
                    match arg {
                        Long("inputs") => inputs = Some(PathBuf::from(parser.value()?)),
                        Long("driver") => options.driver = Some(parser.value()?.string()?),
                        Long("quick") => options.quick = true,
                        Long("rows") => {
                            options.compute_only = match parser.value()?.string()?.as_str() {
                                "all" => false,
                                "compute" => true,
                                other => {
                                    return Err(format!("--rows {other}: `all` or `compute`").into())
                                }
                            }
                        }
                        _ => return Err(arg.unexpected()),
                    }
                }
                options.inputs = inputs.ok_or("run needs --inputs DIR")?;
                Ok(Command::Run(options))
            }
            other => Err(format!("unknown command `{other}`").into()),
        }
    }
}

fn main() -> ExitCode {
    let result = match Command::parse() {
        Ok(Command::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::WriteInputs(dir)) => inputs::write(&dir),
        Ok(Command::Run(options)) => run(&options),
        Err(error) => {
            eprintln!("bench_vs_jax: {error}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bench_vs_jax: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Measures the rows and prints each as it is done.
fn run(options: &RunOptions) -> anyhow::Result<()> {
    let inputs = inputs::read(&options.inputs)?;
    let bench = Bench {
        counts: inputs.counts(options.quick).clone(),
        inputs,
        driver: options.driver.clone(),
    };
    let print = |rows: Vec<Row>| {
        let mut out = std::io::stdout().lock();
        for row in rows {
            let line = serde_json::to_string(&row).expect("rows serialize");
            writeln!(out, "{line}").context("cannot write to stdout")?;
        }
        out.flush().context("cannot write to stdout")
    };
    if !options.compute_only {
        print(warm::sigmoid(&bench)?)?;
        print(warm::batch_sizes(&bench)?)?;
    }
    print(warm::compute(&bench)?)?;
    if !options.compute_only {
        print(fresh::first_results(&bench)?)?;
        let modes = [CompileMode::Blocking, CompileMode::Background];
        for mode in modes {
            print(vec![workloads::pingpong(&bench, mode)?])?;
        }
        for mode in modes {
            print(vec![workloads::ragged(&bench, mode)?])?;
        }
    }
    Ok(())
}
