//! The inputs both sides of the benchmark read: arrays of f32 from a
//! fixed-seed generator, written once as raw little-endian files with a
//! JSON index (`index.json`), so that this binary and the JAX script
//! (`jax_side.py`, with `numpy.fromfile`) compute on the same bits.

use anyhow::{anyhow, bail, Context as _};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use ndarray::{ArrayD, IxDyn};
use serde::{Deserialize, Serialize};
use sheaf_integration::reference;

/// The index file in the inputs folder.
pub(crate) const INDEX: &str = "index.json";
/// The index format this binary writes and reads.
const VERSION: u32 = 2;

/// The width of `mlp_layer`'s x, W and bias.
pub(crate) const WIDTH: usize = 256;
/// The largest batch of the ragged and eight-batch scenarios.
pub(crate) const MAX_BATCH: usize = 128;
/// Rows of the pool of x rows that the batches are cut from.
pub(crate) const POOL_ROWS: usize = 256;
/// The most calls a ragged scenario makes (the index lists their sizes).
pub(crate) const MAX_RAGGED_CALLS: usize = 2000;

/// Every array: its name (and file stem) and its shape.
const ARRAYS: &[(&str, &[usize])] = &[
    ("sigmoid_x", &[1, 5]),
    ("softmax_small", &[1, 5]),
    ("mlp_x", &[POOL_ROWS, WIDTH]),
    ("mlp_w", &[WIDTH, WIDTH]),
    ("mlp_b", &[WIDTH]),
    ("matmul_a", &[512, 512]),
    ("matmul_b", &[512, 512]),
    ("matmul_large_a", &[1024, 1024]),
    ("matmul_large_b", &[1024, 1024]),
    ("bmm_a", &[8, 256, 256]),
    ("bmm_b", &[8, 256, 256]),
    ("softmax_x", &[128, 1024]),
];

/// How many calls each scenario makes; in the index, so that both sides
/// make the same calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Counts {
    /// Untimed calls before a warm p50.
    pub warm_up: usize,
    /// Timed calls of the `sigmoid` rows.
    pub sigmoid_calls: usize,
    /// Timed calls of the `softmax` and `mlp_layer` rows.
    pub compute_calls: usize,
    /// Timed calls of the `matmul` row.
    pub matmul_calls: usize,
    /// Rounds over the eight batch sizes, and calls per size per round.
    pub batch_rounds: usize,
    pub batch_calls_per_round: usize,
    /// New functions per compile mode (the row is their median).
    pub fresh_functions: usize,
    pub pingpong_iterations: usize,
    pub ragged_calls: usize,
}

impl Counts {
    /// The counts of a measurement.
    pub(crate) fn full() -> Counts {
        Counts {
            warm_up: 200,
            sigmoid_calls: 10_000,
            compute_calls: 2_000,
            matmul_calls: 200,
            batch_rounds: 5,
            batch_calls_per_round: 200,
            fresh_functions: 3,
            pingpong_iterations: 5_000,
            ragged_calls: MAX_RAGGED_CALLS,
        }
    }

    /// The counts of a smoke test.
    pub(crate) fn quick() -> Counts {
        Counts {
            warm_up: 20,
            sigmoid_calls: 500,
            compute_calls: 100,
            matmul_calls: 20,
            batch_rounds: 2,
            batch_calls_per_round: 20,
            fresh_functions: 1,
            pingpong_iterations: 300,
            ragged_calls: 200,
        }
    }
}

/// What `index.json` holds.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Index {
    version: u32,
    /// Name → shape, file and the f64 sum of the elements (a check that a
    /// reader read what was written).
    arrays: BTreeMap<String, Entry>,
    /// The batch size of each call of the ragged scenario, in order.
    ragged_sizes: Vec<usize>,
    /// The calls of a measurement, and of a smoke test (`--quick`).
    full: Counts,
    quick: Counts,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Entry {
    shape: Vec<usize>,
    file: String,
    sum: f64,
}

/// The inputs, read back.
#[derive(Debug)]
pub(crate) struct Inputs {
    arrays: BTreeMap<String, Arc<ArrayD<f32>>>,
    /// The batch size of each call of the ragged scenario, in order.
    pub ragged_sizes: Vec<usize>,
    full: Counts,
    quick: Counts,
}

impl Inputs {
    /// The array called `name` (shared, not copied).
    pub(crate) fn array(&self, name: &str) -> anyhow::Result<Arc<ArrayD<f32>>> {
        self.arrays
            .get(name)
            .cloned()
            .with_context(|| format!("the inputs have no array `{name}`"))
    }

    /// The calls to make: a smoke test's when `quick`.
    pub(crate) fn counts(&self, quick: bool) -> &Counts {
        if quick {
            &self.quick
        } else {
            &self.full
        }
    }
}

/// `len` values uniform in [-1, 1) from a splitmix64 stream seeded with
/// `seed`. Each value is a multiple of 2^-23, so exact in f32.
pub(crate) fn generate(seed: u64, len: usize) -> Vec<f32> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            (z >> 40) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// Writes every array and the index into `dir` (created if missing).
pub(crate) fn write(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut arrays = BTreeMap::new();
    for (seed, (name, shape)) in (1u64..).zip(ARRAYS) {
        let values = generate(seed, shape.iter().product());
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let file = format!("{name}.f32");
        let path = dir.join(&file);
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        let sum = values.iter().map(|&v| f64::from(v)).sum();
        let shape = shape.to_vec();
        arrays.insert((*name).to_owned(), Entry { shape, file, sum });
    }
    let index = Index {
        version: VERSION,
        arrays,
        ragged_sizes: reference::ragged_batch_sizes(MAX_RAGGED_CALLS, MAX_BATCH),
        full: Counts::full(),
        quick: Counts::quick(),
    };
    let path = dir.join(INDEX);
    let text = serde_json::to_string_pretty(&index).expect("the index serializes");
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Reads the inputs that [`write()`] left in `dir`.
pub(crate) fn read(dir: &Path) -> anyhow::Result<Inputs> {
    let rerun = "run `bench_vs_jax write-inputs DIR` (or `cargo xtask bench-vs-jax`) again";
    let path = dir.join(INDEX);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| anyhow!("cannot read {} ({e}); {rerun}", path.display()))?;
    let index: Index = serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "{} is not an index of inputs ({e}); {rerun}",
            path.display()
        )
    })?;
    if index.version != VERSION {
        bail!(
            "{} is of version {}, not {VERSION}; {rerun}",
            path.display(),
            index.version
        );
    }
    let mut arrays = BTreeMap::new();
    for (name, entry) in index.arrays {
        let path = dir.join(&entry.file);
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let len: usize = entry.shape.iter().product();
        if bytes.len() != len * 4 {
            bail!(
                "{} has {} bytes, not the {} of f32{:?}; {rerun}",
                path.display(),
                bytes.len(),
                len * 4,
                entry.shape
            );
        }
        let values: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        // The sum is exact (every value is a multiple of 2^-23), but JSON's
        // decimal may come back one ulp off.
        let sum: f64 = values.iter().map(|&v| f64::from(v)).sum();
        if (sum - entry.sum).abs() > 1e-9 * (1.0 + sum.abs()) {
            bail!(
                "{} sums to {sum}, not the index's {}; {rerun}",
                path.display(),
                entry.sum
            );
        }
        let array = ArrayD::from_shape_vec(IxDyn(&entry.shape), values)
            .expect("the length was checked against the shape");
        arrays.insert(name, Arc::new(array));
    }
    if index.full.ragged_calls.max(index.quick.ragged_calls) > index.ragged_sizes.len() {
        bail!(
            "{} lists fewer ragged sizes than calls; {rerun}",
            path.display()
        );
    }
    Ok(Inputs {
        arrays,
        ragged_sizes: index.ragged_sizes,
        full: index.full,
        quick: index.quick,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_is_fixed_and_in_range() {
        let values = generate(7, 10_000);
        assert_eq!(values, generate(7, 10_000));
        assert_ne!(values, generate(8, 10_000));
        assert!(values.iter().all(|v| (-1.0..1.0).contains(v)));
        let mean = values.iter().map(|&v| f64::from(v)).sum::<f64>() / 10_000.0;
        assert!(mean.abs() < 0.05, "mean {mean}");
    }

    #[test]
    fn written_inputs_read_back_bit_for_bit() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        write(dir.path()).expect("the inputs are written");
        let inputs = read(dir.path()).expect("the inputs read back");
        for (seed, (name, shape)) in (1u64..).zip(ARRAYS) {
            let array = inputs.array(name).expect("every array is there");
            assert_eq!(array.shape(), *shape);
            let expected = generate(seed, shape.iter().product());
            assert!(array
                .iter()
                .zip(&expected)
                .all(|(a, e)| a.to_bits() == e.to_bits()));
        }
        assert_eq!(
            inputs.ragged_sizes,
            reference::ragged_batch_sizes(MAX_RAGGED_CALLS, MAX_BATCH)
        );
    }

    #[test]
    fn a_damaged_file_is_refused() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        write(dir.path()).expect("the inputs are written");
        std::fs::write(dir.path().join("mlp_b.f32"), [0u8; 12]).expect("overwrite");
        let error = read(dir.path()).expect_err("a short file is refused");
        assert!(
            error.to_string().contains("mlp_b.f32 has 12 bytes"),
            "{error}"
        );
    }
}
