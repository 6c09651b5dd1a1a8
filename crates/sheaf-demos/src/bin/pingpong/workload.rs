//! The workload both modes run, and what they report.

use anyhow::Context as _;
use std::time::Instant;

use ndarray::{ArrayD, IxDyn};
use serde::{Deserialize, Serialize};

/// Shapes `sigmoid` alternates between.
pub(crate) const SIGMOID_SHAPES: [&[usize]; 2] = [&[1, 5], &[1, 5, 1]];
/// Temperatures `softmax` alternates between.
pub(crate) const TEMPERATURES: [f32; 2] = [0.5, 1.0];
/// The `softmax` input shape.
pub(crate) const SOFTMAX_SHAPE: &[usize] = &[1, 5];
const DATA: [f32; 5] = [-2.0, -0.5, 0.0, 0.75, 3.0];

/// The sigmoid input of iteration `i`.
pub(crate) fn sigmoid_input(i: usize) -> ArrayD<f32> {
    ArrayD::from_shape_vec(IxDyn(SIGMOID_SHAPES[i % 2]), DATA.to_vec()).expect("5 elements")
}

/// The softmax input and temperature of iteration `i`.
pub(crate) fn softmax_input(i: usize) -> (ArrayD<f32>, f32) {
    (
        ArrayD::from_shape_vec(IxDyn(SOFTMAX_SHAPE), DATA.to_vec()).expect("5 elements"),
        TEMPERATURES[i % 2],
    )
}

/// The elements of `x`, which is in standard layout.
pub(crate) fn data(x: &ArrayD<f32>) -> &[f32] {
    x.as_slice()
        .expect("arrays made here are in standard layout")
}

/// The interpreter's sigmoid of `x`.
pub(crate) fn expected_sigmoid(x: ArrayD<f32>) -> anyhow::Result<ArrayD<f32>> {
    first_f32(sheaf_integration::reference::interpret_sigmoid(&[x.into()]))
}

/// The interpreter's softmax of `x` at temperature `t`.
pub(crate) fn expected_softmax(x: ArrayD<f32>, t: f32) -> anyhow::Result<ArrayD<f32>> {
    first_f32(sheaf_integration::reference::interpret_softmax(
        &[x.into()],
        t,
    ))
}

fn first_f32(
    outputs: Result<Vec<sheaf_integration::Value>, sheaf_integration::reference::ReferenceError>,
) -> anyhow::Result<ArrayD<f32>> {
    let outputs = outputs?;
    let host = outputs.first().context("no output")?.to_host()?;
    host.as_f32().cloned().context("not an f32 output")
}

/// True when `actual` matches the interpreter's `expected` within 1e-5.
pub(crate) fn matches(actual: &[f32], expected: &ArrayD<f32>) -> bool {
    actual.len() == expected.len()
        && actual
            .iter()
            .zip(expected.iter())
            .all(|(a, e)| (a - e).abs() <= 1e-5)
}

/// One line of a child's output.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Record {
    /// `legacy`, `shared` or `background`; `legacy`, `static`, `dynamic`
    /// or `restart` in the ragged scenario.
    pub mode: String,
    /// `checkpoint`, `sample` (for the plot), `first_result` (the first
    /// call returned), `interpreter` (the interpreter alone on the first
    /// call), `drained` (background compiles all done), `stopped` (ceiling
    /// reached), `ragged` (the ragged scenario's summary) or
    /// `first_compiled` (the first result of compiled code, in the ragged
    /// scenario).
    pub kind: String,
    /// Iterations done.
    pub iters: usize,
    /// Compiles so far (legacy: runtimes built on a mismatch).
    pub compiles: u64,
    /// Loaded modules alive (legacy: runtimes alive, one module each).
    pub live_modules: u64,
    /// Resident set size of the mode's process.
    pub rss_bytes: u64,
    /// Seconds since the mode started.
    pub wall_s: f64,
    /// Calls whose result differed from the interpreter's.
    pub stale_results: u64,
    /// The ragged scenario's summary only: calls that ran compiled code.
    #[serde(default)]
    pub compiled_calls: u64,
    /// The ragged scenario's summary only: per-call p50 in µs after the
    /// warm-up calls.
    #[serde(default)]
    pub p50_call_us: f64,
    /// The ragged scenario's summary only: RSS growth after the warm-up.
    #[serde(default)]
    pub rss_growth_bytes: u64,
    /// The ragged scenario's summary only: variants loaded from the disk
    /// cache.
    #[serde(default)]
    pub disk_loads: u64,
}

/// A ragged run's counts after a call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counts {
    /// Signatures the compiler compiled (legacy: runtimes built).
    pub compiles: u64,
    /// Loaded modules alive (legacy: runtimes alive).
    pub live_modules: u64,
    /// Variants loaded from the disk cache.
    pub disk_loads: u64,
}

/// Tracks a mode's run and emits its records.
pub(crate) struct Recorder<'a> {
    mode: &'static str,
    checkpoints: &'a [usize],
    sample_every: usize,
    start: Instant,
    emit: &'a mut dyn FnMut(&Record),
}

impl<'a> Recorder<'a> {
    pub(crate) fn new(
        mode: &'static str,
        checkpoints: &'a [usize],
        emit: &'a mut dyn FnMut(&Record),
    ) -> Self {
        let last = *checkpoints.last().expect("at least one checkpoint");
        Recorder {
            mode,
            checkpoints,
            sample_every: (last / 250).max(1),
            start: Instant::now(),
            emit,
        }
    }

    /// Called after iteration `iters`: emits a sample and/or a checkpoint.
    pub(crate) fn after(
        &mut self,
        iters: usize,
        compiles: u64,
        live_modules: u64,
        stale_results: u64,
    ) {
        let checkpoint = self.checkpoints.contains(&iters);
        if checkpoint || iters.is_multiple_of(self.sample_every) || iters == 1 {
            let kind = if checkpoint { "checkpoint" } else { "sample" };
            self.emit(kind, iters, compiles, live_modules, stale_results);
        }
    }

    /// Emits the time to the first call's result (call it once, after the
    /// first call).
    pub(crate) fn first_result(&mut self, compiles: u64) {
        self.emit("first_result", 0, compiles, 0, 0);
    }

    /// Emits how long the interpreter alone takes for the first call
    /// (`wall_s` is that time, not the time since the start).
    pub(crate) fn interpreter_alone(&mut self, seconds: f64) {
        let record = Record {
            wall_s: seconds,
            ..self.record("interpreter", 0, 0, 0, 0)
        };
        (self.emit)(&record);
    }

    /// Emits the time when every queued compile had finished.
    pub(crate) fn drained(&mut self, iters: usize, compiles: u64, live_modules: u64) {
        self.emit("drained", iters, compiles, live_modules, 0);
    }

    /// Emits the time to the first result of compiled code, after call
    /// `iters` (call it once).
    pub(crate) fn first_compiled(&mut self, iters: usize, compiles: u64) {
        self.emit("first_compiled", iters, compiles, 0, 0);
    }

    /// Emits the ragged scenario's summary after `iters` calls.
    pub(crate) fn ragged_summary(
        &mut self,
        iters: usize,
        counts: Counts,
        compiled_calls: u64,
        p50_call_us: f64,
        rss_growth_bytes: u64,
    ) {
        let record = Record {
            compiled_calls,
            p50_call_us,
            rss_growth_bytes,
            disk_loads: counts.disk_loads,
            ..self.record("ragged", iters, counts.compiles, counts.live_modules, 0)
        };
        (self.emit)(&record);
    }

    /// Emits the record of a run stopped early.
    pub(crate) fn stopped(
        &mut self,
        iters: usize,
        compiles: u64,
        live_modules: u64,
        stale_results: u64,
    ) {
        self.emit("stopped", iters, compiles, live_modules, stale_results);
    }

    fn emit(
        &mut self,
        kind: &str,
        iters: usize,
        compiles: u64,
        live_modules: u64,
        stale_results: u64,
    ) {
        let record = self.record(kind, iters, compiles, live_modules, stale_results);
        (self.emit)(&record);
    }

    fn record(
        &self,
        kind: &str,
        iters: usize,
        compiles: u64,
        live_modules: u64,
        stale_results: u64,
    ) -> Record {
        Record {
            mode: self.mode.into(),
            kind: kind.into(),
            iters,
            compiles,
            live_modules,
            rss_bytes: rss_bytes(),
            wall_s: self.start.elapsed().as_secs_f64(),
            stale_results,
            compiled_calls: 0,
            p50_call_us: 0.0,
            rss_growth_bytes: 0,
            disk_loads: 0,
        }
    }
}

pub(crate) use sheaf_demos::process_stats::rss_bytes;
