//! The main job's workloads, timed whole (compiles included): the shape
//! ping-pong and the ragged batch. Host arrays in, results read to the
//! host, in a new runtime per row; in background mode the calls that miss
//! run in the reference interpreters while their compile runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ndarray::{s, ArrayD, IxDyn};
use sheaf_integration::{reference, settings::CompileMode, HostTensor, Value};

use crate::inputs::{MAX_BATCH, POOL_ROWS};
use crate::row::{first_f32, ms, Checksum, Row};
use crate::Bench;

/// The temperatures `softmax` alternates between.
const TEMPERATURES: [f32; 2] = [0.5, 1.0];

fn mode_name(mode: CompileMode) -> &'static str {
    match mode {
        CompileMode::Background => "background",
        _ => "blocking",
    }
}

/// Each iteration: `sigmoid` on `f32[1,5]` and `f32[1,5,1]` alternately, then
/// `softmax` on `f32[1,5]` at temperatures 0.5 and 1.0 alternately (four
/// signatures in all).
pub(crate) fn pingpong(bench: &Bench, mode: CompileMode) -> anyhow::Result<Row> {
    let iterations = bench.counts.pingpong_iterations;
    let x = bench.inputs.array("sigmoid_x")?;
    let column = ArrayD::from_shape_vec(IxDyn(&[1, 5, 1]), x.iter().copied().collect())
        .expect("five elements");
    let xs = [
        Value::from(HostTensor::from(x)),
        Value::from(HostTensor::from(Arc::new(column))),
    ];
    let s = Value::from(HostTensor::from(bench.inputs.array("softmax_small")?));
    let (sigmoid, softmax) = (reference::sigmoid(), reference::softmax());
    let jit = bench.runtime(mode)?;
    let mut outputs = Vec::with_capacity(2 * iterations);
    let start = Instant::now();
    for i in 0..iterations {
        let y = jit.call(&sigmoid, &xs[i % 2..][..1], &[], |args, _, _| {
            reference::interpret_sigmoid(args)
        })?;
        outputs.push(first_f32(&y.outputs)?);
        let t = TEMPERATURES[i % 2];
        let y = jit.call(
            &softmax,
            std::slice::from_ref(&s),
            &[reference::temperature(t)],
            |args, _, _| reference::interpret_softmax(args, t),
        )?;
        outputs.push(first_f32(&y.outputs)?);
    }
    let total = start.elapsed();
    let mut checksum = Checksum::default();
    for output in &outputs {
        checksum.add(output.iter().copied());
    }
    Ok(Row::new(
        format!("pingpong_{}", mode_name(mode)),
        format!(
            "ping-pong, {iterations} iterations (4 signatures), {}: total",
            mode_name(mode)
        ),
        "ms",
        ms(total),
        checksum,
        "",
    ))
}

/// `mlp_layer` with x: `f32[b,256]` for the batch sizes b of the index, each
/// x cut from the pool of rows at offset `i % 129` (outside the timing),
/// with W and the bias the same host arrays every call (the upload cache
/// keeps them on the device; the JAX side keeps them as device arrays).
pub(crate) fn ragged(bench: &Bench, mode: CompileMode) -> anyhow::Result<Row> {
    let calls = bench.counts.ragged_calls;
    let pool = bench.inputs.array("mlp_x")?;
    let w = Value::from(HostTensor::from(bench.inputs.array("mlp_w")?));
    let b = Value::from(HostTensor::from(bench.inputs.array("mlp_b")?));
    let mlp = reference::mlp_layer();
    let jit = bench.runtime(mode)?;
    let (mut total, mut checksum) = (Duration::ZERO, Checksum::default());
    for (i, &batch) in bench.inputs.ragged_sizes[..calls].iter().enumerate() {
        let offset = i % (POOL_ROWS - MAX_BATCH + 1);
        let x = pool.slice(s![offset..offset + batch, ..]).to_owned();
        let args = [
            Value::from(HostTensor::from(x.into_dyn())),
            w.clone(),
            b.clone(),
        ];
        let start = Instant::now();
        let y = jit.call(&mlp, &args, &[], |args, _, _| {
            reference::interpret_mlp_layer(args)
        })?;
        let host = first_f32(&y.outputs)?;
        total += start.elapsed();
        checksum.add(host.iter().copied());
    }
    Ok(Row::new(
        format!("ragged_{}", mode_name(mode)),
        format!(
            "ragged mlp_layer, {calls} calls, b in 1..={MAX_BATCH}, {}: total",
            mode_name(mode)
        ),
        "ms",
        ms(total),
        checksum,
        "",
    ))
}
