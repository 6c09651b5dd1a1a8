//! Fixtures shared by the end-to-end test files: a runtime, deterministic
//! arrays, a comparison of results. What other crates' tests, the
//! benchmarks or the examples use too (a real Redis server, child
//! processes) is in the `test-support` crate.

#![allow(dead_code, reason = "each test file uses a different subset")]

pub(crate) mod structured;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    compiler::{Artifact, CompileOptions, CompileTarget},
    reference,
    settings::{CompileMode, DiskCacheFolder},
    HostTensor, JitConfig, JitConfigBuilder, JitRuntime, Provenance, Value,
};

/// A runtime with no disk cache, so every compile is a real one, whose
/// misses wait for their compile (the first call of a signature runs
/// compiled).
pub(crate) fn jit() -> JitRuntime {
    let config = blocking().disk(|disk| disk.folder = DiskCacheFolder::Disabled);
    JitRuntime::new(config.build().unwrap()).unwrap()
}

/// Settings whose misses wait for their compile.
pub(crate) fn blocking() -> JitConfigBuilder {
    JitConfig::builder().compile(|compile| compile.mode = CompileMode::Blocking)
}

/// Deterministic pseudo-random f32 values in [-3, 3).
pub(crate) fn array(shape: &[usize], seed: u32) -> ArrayD<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).max(1);
    ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        (state % 6000) as f32 / 1000.0 - 3.0
    })
}

/// Calls the reference sigmoid on an array of `shape` (values from `seed`),
/// checks the result against the interpreter's; how the call ran.
pub(crate) fn checked_sigmoid(jit: &JitRuntime, shape: &[usize], seed: u32) -> Provenance {
    let x = [Value::from(array(shape, seed))];
    let result = jit
        .call(&reference::sigmoid(), &x, &[], |args, _, _| {
            reference::interpret_sigmoid(args)
        })
        .unwrap();
    let expected = reference::interpret_sigmoid(&x).unwrap();
    assert_close(&result.outputs[0], &expected[0], "sigmoid");
    result.provenance
}

/// Asserts that two f32 tensor values are equal within 1e-5 (relative to
/// the larger of 1 and the expected value's magnitude).
pub(crate) fn assert_close(actual: &Value, expected: &Value, what: &str) {
    let (actual, expected) = (actual.to_host().unwrap(), expected.to_host().unwrap());
    let (HostTensor::F32(a), HostTensor::F32(e)) = (&actual, &expected) else {
        panic!("{what}: expected f32 tensors, got {actual:?} and {expected:?}");
    };
    assert_eq!(a.shape(), e.shape(), "{what}: shapes differ");
    for (x, y) in a.iter().zip(e.iter()) {
        assert!(
            (x - y).abs() <= 1e-5 * y.abs().max(1.0),
            "{what}: {x} vs {y}"
        );
    }
}

/// The one entry file of the store or bundle at `dir`.
pub(crate) fn the_entry(dir: &Path) -> PathBuf {
    let entries: Vec<PathBuf> = fs::read_dir(dir.join("vmfb"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sjit"))
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    entries.into_iter().next().unwrap()
}

/// Asserts that `y` is the product of the matrices `a` and `b`: a dot
/// product of length k is exact to k·ε of Σ|a||b| (compiled code adds the
/// sums in another order than `ndarray`).
pub(crate) fn assert_matmul_close(a: &ArrayD<f32>, b: &ArrayD<f32>, y: &Value, what: &str) {
    let matrix = |t: &ArrayD<f32>| t.clone().into_dimensionality::<ndarray::Ix2>().unwrap();
    let (a, b) = (matrix(a), matrix(b));
    let HostTensor::F32(y) = y.to_host().unwrap() else {
        panic!("{what}: an f32 result");
    };
    let expected = a.dot(&b);
    let magnitude = a.mapv(f32::abs).dot(&b.mapv(f32::abs));
    assert_eq!(y.shape(), expected.shape(), "{what}");
    let k = a.ncols() as f32;
    for ((y, e), bound) in y.iter().zip(&expected).zip(&magnitude) {
        let tolerance = 2.0 * k * f32::EPSILON * bound.max(1.0);
        assert!((y - e).abs() <= tolerance, "{what}: {y} vs {e}");
    }
}

/// `module` (StableHLO text) compiled for `target` by `iree-compile` into
/// files in `dir`, as an application's build would, outside the library.
pub(crate) fn compiled_outside(dir: &Path, module: &str, target: &CompileTarget) -> Artifact {
    let (input, output) = (dir.join("outside.mlir"), dir.join("outside.vmfb"));
    fs::write(&input, module).unwrap();
    let flags = {
        let mut options = CompileOptions::stablehlo();
        options.target = target.clone();
        options
    }
    .flags();
    let iree_compile = iree_safe::compiler::locate_iree_compile().unwrap();
    let status = Command::new(iree_compile)
        .args(&flags)
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .status()
        .unwrap();
    assert!(status.success(), "iree-compile {flags:?}: {status}");
    let bytes = fs::read(&output).unwrap();
    // SAFETY: the bytes are what the IREE compiler just wrote for a
    // program of the caller's test, in a folder of its own, unmodified
    // since.
    unsafe { Artifact::from_trusted_bytes(bytes) }
}
