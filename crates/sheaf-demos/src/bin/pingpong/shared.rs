//! The `shared` and `background` modes: this project's `JitRuntime`, with
//! misses that wait for their compile or that run in the interpreter while
//! the compile runs in the background.

use anyhow::Context as _;
use std::time::{Duration, Instant};

use ndarray::ArrayD;
use sheaf_integration::settings::{CompileMode, DiskCacheFolder};
use sheaf_integration::{reference, JitConfig, JitRuntime, Value};

use crate::args::Args;
use crate::workload::{self, Record, Recorder};

pub(crate) fn run(
    args: &Args,
    mode: CompileMode,
    emit: &mut dyn FnMut(&Record),
) -> anyhow::Result<()> {
    // No disk cache unless one is given (to the shared mode only): every
    // signature is compiled for real, once.
    let folder = match (&args.cache_dir, mode) {
        (Some(dir), CompileMode::Blocking) => DiskCacheFolder::Dir(dir.clone()),
        _ => DiskCacheFolder::Disabled,
    };
    let config = JitConfig::builder()
        .device(|device| device.driver.clone_from(&args.driver))
        .disk(|disk| disk.folder = folder)
        .compile(|compile| compile.mode = mode)
        .build()?;
    let jit = JitRuntime::new(config)?;
    let (sigmoid, softmax) = (reference::sigmoid(), reference::softmax());
    let name = match mode {
        CompileMode::Background => "background",
        _ => "shared",
    };
    let mut recorder = Recorder::new(name, &args.checkpoints, emit);
    let mut stale = 0;
    for i in 0..args.max_iters() {
        let x = workload::sigmoid_input(i);
        let y = jit.call(&sigmoid, &[Value::from(x.clone())], &[], |args, _, _| {
            reference::interpret_sigmoid(args)
        })?;
        if i == 0 {
            recorder.first_result(jit.stats().total.compiles);
            let start = Instant::now();
            reference::interpret_sigmoid(&[Value::from(x.clone())])?;
            recorder.interpreter_alone(start.elapsed().as_secs_f64());
        }
        stale += u64::from(!check(&y.outputs, &workload::expected_sigmoid(x)?)?);

        let (x, t) = workload::softmax_input(i);
        let captured = [reference::temperature(t)];
        let y = jit.call(
            &softmax,
            &[Value::from(x.clone())],
            &captured,
            |args, _, _| reference::interpret_softmax(args, t),
        )?;
        stale += u64::from(!check(&y.outputs, &workload::expected_softmax(x, t)?)?);

        let stats = jit.stats();
        recorder.after(
            i + 1,
            stats.total.compiles,
            stats.total.live_entries as u64,
            stale,
        );
    }
    // Background compiles may still run: wait for them, for the record.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let t = jit.stats().total;
        if t.compiles + t.compiles_withdrawn >= t.compiles_queued || Instant::now() > deadline {
            recorder.drained(args.max_iters(), t.compiles, t.live_entries as u64);
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    if std::env::var_os("SHEAF_JIT_TRACE").is_some() {
        eprintln!("{}", jit.profile());
    }
    Ok(())
}

/// True when the first output matches `expected` within 1e-5.
fn check(outputs: &[Value], expected: &ArrayD<f32>) -> anyhow::Result<bool> {
    let host = outputs.first().context("no output")?.to_host()?;
    let actual = host.as_f32().context("not an f32 output")?;
    Ok(actual.shape() == expected.shape()
        && workload::matches(actual.as_slice().unwrap_or(&[]), expected))
}
