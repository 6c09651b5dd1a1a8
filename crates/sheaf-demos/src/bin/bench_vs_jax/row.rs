//! One measured row, as printed (one JSON object per line, the shape
//! `jax_side.py` prints too), its output checksum, and the timing helpers.

use anyhow::Context as _;
use std::time::{Duration, Instant};

use serde::Serialize;
use sheaf_integration::Value;

/// One row of the table, from one side.
#[derive(Debug, Serialize)]
pub(crate) struct Row {
    /// What xtask matches the two sides' rows by.
    pub key: String,
    /// What the table calls the row.
    pub label: String,
    /// `us` (per call) or `ms` (a total, or a first result).
    pub unit: &'static str,
    pub value: f64,
    /// f64 sums of the outputs the row checks: plain, of absolute values,
    /// of squares.
    pub sum: f64,
    pub abs: f64,
    pub sq: f64,
    /// Where the code ran; empty when the row does not say.
    pub device: String,
}

impl Row {
    /// A row of `value` in `unit` whose outputs summed to `checksum`.
    pub(crate) fn new(
        key: impl Into<String>,
        label: impl Into<String>,
        unit: &'static str,
        value: f64,
        checksum: Checksum,
        device: &str,
    ) -> Row {
        Row {
            key: key.into(),
            label: label.into(),
            unit,
            value,
            sum: checksum.sum,
            abs: checksum.abs,
            sq: checksum.sq,
            device: device.to_owned(),
        }
    }
}

/// f64 sums of outputs: plain, of absolute values, of squares (which a
/// softmax at the wrong temperature changes, where its plain sum does not).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Checksum {
    sum: f64,
    abs: f64,
    sq: f64,
}

impl Checksum {
    /// Adds `values`.
    pub(crate) fn add(&mut self, values: impl IntoIterator<Item = f32>) {
        for v in values {
            let v = f64::from(v);
            self.sum += v;
            self.abs += v.abs();
            self.sq += v * v;
        }
    }

    /// The checksum of `values`.
    pub(crate) fn of_values(values: impl IntoIterator<Item = f32>) -> Checksum {
        let mut checksum = Checksum::default();
        checksum.add(values);
        checksum
    }

    /// The checksum of the first output of `outputs`, read to the host.
    pub(crate) fn of(outputs: &[Value]) -> anyhow::Result<Checksum> {
        Ok(Checksum::of_values(first_f32(outputs)?.iter().copied()))
    }
}

/// The first output of `outputs` on the host, as f32.
pub(crate) fn first_f32(outputs: &[Value]) -> anyhow::Result<std::sync::Arc<ndarray::ArrayD<f32>>> {
    outputs
        .first()
        .context("the call returned no output")?
        .to_f32()
        .context("the output is not an f32 tensor")
}

/// The median of `samples` in µs (they are sorted in place).
pub(crate) fn p50_us(samples: &mut [Duration]) -> f64 {
    samples.sort_unstable();
    samples
        .get(samples.len() / 2)
        .map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

/// Runs `call` `warm_up` times untimed, then `calls` times timed: the
/// per-call p50 in µs.
pub(crate) fn warm_p50_us(
    warm_up: usize,
    calls: usize,
    mut call: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<f64> {
    for _ in 0..warm_up {
        call()?;
    }
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        call()?;
        samples.push(start.elapsed());
    }
    Ok(p50_us(&mut samples))
}

/// Milliseconds in `d`.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
