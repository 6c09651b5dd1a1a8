//! The ragged-batch scenario (`--ragged`): `mlp_layer` (`x: f32[b,256]` ·
//! `W: f32[256,256]` + bias, relu) with the batch size b drawn uniformly from
//! 1..=128 by a fixed-seed generator, run three ways, each in its own
//! process:
//!
//! - `legacy`: Sheaf's original JIT: one slot, a new runtime on every shape
//!   mismatch, one compile per distinct shape (bytes reused);
//! - `static`: `JitRuntime` with dynamic dims off: one variant per shape up
//!   to the function's capacity, then admission decides (most calls
//!   interpreted);
//! - `dynamic`: `JitRuntime` as configured by default: the first shape, then
//!   one variant with a dynamic batch dim for every later size, with a disk
//!   cache of its own (the parent's folder);
//! - `restart`: `dynamic` again, in a new process on the first one's disk
//!   cache, for the generator's next calls: the policy file makes the
//!   batch dim dynamic from the first call, and the variants load from
//!   disk.
//!
//! Misses wait for their compile in every mode, as the legacy design did.
//! A call is timed from the call to its result on the host.

use anyhow::{bail, Context as _};
use std::time::Instant;

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::artifacts::ArtifactSource;
use sheaf_integration::settings::{CompileMode, DiskCacheFolder};
use sheaf_integration::{reference, JitConfig, JitRuntime, Value};

use crate::args::{Args, Mode};
use crate::legacy::Legacy;
use crate::workload::{self, Counts, Record, Recorder};

/// The largest batch size.
pub(crate) const MAX_BATCH: usize = 128;
/// The width of x, W and the bias.
const WIDTH: usize = 256;
/// Calls before the per-call figures and the RSS growth are measured.
pub(crate) const WARM_UP: usize = 100;

/// Deterministic values in [-1, 1) of `shape`, varying with `seed`.
fn array(shape: &[usize], seed: usize) -> ArrayD<f32> {
    let mut i = seed;
    ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        i = i.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        ((i >> 8) % 2000) as f32 / 1000.0 - 1.0
    })
}

/// Per-call latencies and the records of one mode's run.
struct Run<'a> {
    recorder: Recorder<'a>,
    calls: usize,
    compiled: u64,
    stale: u64,
    latencies: Vec<u64>,
    rss_after_warm_up: u64,
}

impl Run<'_> {
    /// Accounts for call `i` (0-based), which took `nanos` and ran compiled
    /// or not, then emits the records due.
    fn after(&mut self, i: usize, nanos: u64, compiled: bool, correct: bool, counts: Counts) {
        if compiled && self.compiled == 0 {
            self.recorder.first_compiled(i + 1, counts.compiles);
        }
        self.compiled += u64::from(compiled);
        self.stale += u64::from(!correct);
        if i >= WARM_UP {
            self.latencies.push(nanos);
        }
        if i + 1 == WARM_UP {
            self.rss_after_warm_up = workload::rss_bytes();
        }
        self.recorder
            .after(i + 1, counts.compiles, counts.live_modules, self.stale);
        if i + 1 == self.calls {
            let latencies = &mut self.latencies;
            latencies.sort_unstable();
            let p50 = latencies.get(latencies.len() / 2).copied().unwrap_or(0);
            self.recorder.ragged_summary(
                self.calls,
                counts,
                self.compiled,
                p50 as f64 / 1e3,
                workload::rss_bytes().saturating_sub(self.rss_after_warm_up),
            );
        }
    }
}

pub(crate) fn run(mode: Mode, args: &Args, emit: &mut dyn FnMut(&Record)) -> anyhow::Result<()> {
    let checkpoints = [args.ragged_calls];
    let mut run = Run {
        recorder: Recorder::new(mode.name(), &checkpoints, emit),
        calls: args.ragged_calls,
        compiled: 0,
        stale: 0,
        latencies: Vec::with_capacity(args.ragged_calls),
        rss_after_warm_up: workload::rss_bytes(),
    };
    let (w, bias) = (array(&[WIDTH, WIDTH], 1), array(&[WIDTH], 2));
    let mlp = reference::mlp_layer();
    match mode {
        Mode::Legacy => {
            let mut legacy = Legacy::new(&args.driver)?;
            for (i, &batch) in reference::ragged_batch_sizes(args.ragged_calls, MAX_BATCH)
                .iter()
                .enumerate()
            {
                let x = array(&[batch, WIDTH], i + 3);
                let expected = expected(&x, &w, &bias)?;
                let start = Instant::now();
                let y = legacy.call(
                    &mlp,
                    &[
                        (x.shape(), workload::data(&x)),
                        (w.shape(), workload::data(&w)),
                        (bias.shape(), workload::data(&bias)),
                    ],
                    &[],
                )?;
                let nanos = start.elapsed().as_nanos() as u64;
                let correct = workload::matches(&y, &expected);
                let counts = Counts {
                    compiles: legacy.compiles(),
                    live_modules: legacy.runtimes(),
                    disk_loads: 0,
                };
                run.after(i, nanos, true, correct, counts);
            }
        }
        Mode::Static | Mode::Dynamic | Mode::Restart => {
            // The static run keeps nothing on disk; the dynamic run fills
            // the parent's folder, and the restart starts on it.
            let folder = match (mode, &args.cache_dir) {
                (Mode::Static, _) => DiskCacheFolder::Disabled,
                (_, Some(dir)) => DiskCacheFolder::Dir(dir.clone()),
                (_, None) => {
                    bail!("the {} mode needs --cache-dir", mode.name());
                }
            };
            let config = JitConfig::builder()
                .device(|device| device.driver.clone_from(&args.driver))
                .disk(|disk| disk.folder = folder)
                .compile(|compile| compile.mode = CompileMode::Blocking)
                .cache(|cache| cache.dynamic_dims = mode != Mode::Static)
                .build()?;
            let jit = JitRuntime::new(config)?;
            let (w_value, bias_value) = (Value::from(w.clone()), Value::from(bias.clone()));
            // The restart runs the generator's next calls: sizes in another
            // order than the run that learned.
            let skip = if mode == Mode::Restart {
                args.ragged_calls
            } else {
                0
            };
            let sizes = reference::ragged_batch_sizes(skip + args.ragged_calls, MAX_BATCH);
            for (i, &batch) in sizes[skip..].iter().enumerate() {
                let x = array(&[batch, WIDTH], i + 3);
                let expected = expected(&x, &w, &bias)?;
                let args = [Value::from(x), w_value.clone(), bias_value.clone()];
                let start = Instant::now();
                let result = jit.call(&mlp, &args, &[], |args, _, _| {
                    reference::interpret_mlp_layer(args)
                })?;
                let y = result.outputs[0].to_host()?;
                let nanos = start.elapsed().as_nanos() as u64;
                let correct = workload::matches(workload::data(f32s(&y)?), &expected);
                let profile = jit.profile();
                let counts = Counts {
                    compiles: profile.loaded_from(ArtifactSource::Compiler),
                    live_modules: profile.cache.total.live_entries as u64,
                    disk_loads: profile.loaded_from(ArtifactSource::DiskCache),
                };
                run.after(i, nanos, result.provenance.is_compiled(), correct, counts);
            }
            if std::env::var_os("SHEAF_JIT_TRACE").is_some() {
                eprintln!("{}", jit.stats());
            }
        }
        Mode::Shared | Mode::Background => {
            bail!("the ragged scenario has no `{}` mode", mode.name())
        }
    }
    Ok(())
}

/// The interpreter's result.
fn expected(x: &ArrayD<f32>, w: &ArrayD<f32>, bias: &ArrayD<f32>) -> anyhow::Result<ArrayD<f32>> {
    let args = [
        Value::from(x.clone()),
        Value::from(w.clone()),
        Value::from(bias.clone()),
    ];
    let outputs = reference::interpret_mlp_layer(&args)?;
    let host = outputs[0].to_host()?;
    Ok(f32s(&host)?.clone())
}

fn f32s(tensor: &sheaf_integration::HostTensor) -> anyhow::Result<&ArrayD<f32>> {
    tensor.as_f32().context("not an f32 result")
}
