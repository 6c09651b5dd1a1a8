//! One worker of `cargo xtask fleet`: a process of a cluster that runs six
//! signatures of three reference functions (sigmoid on three shapes,
//! softmax on two, mlp_layer on one) in Blocking mode against the remote
//! cache, checks each result against the reference interpreter, and prints
//! one JSON line: its compiles, remote hits, lease waits, wall time and
//! wrong results.
//!
//! With `--rows N,N,...` it runs `mlp_layer` on `f32[N,16]` for each batch
//! size instead (dims dynamic unless the variables say otherwise): the
//! fleet's waves, where a first worker learns that the batch dim goes
//! dynamic and the next ones start from that learned policy.
//!
//! Configured by the `SHEAF_JIT_*` variables (`JitConfig::from_env`), as a
//! deployed process would be: the fleet sets the remote cache
//! (`SHEAF_JIT_REMOTE_CACHE`, `SHEAF_JIT_REMOTE_SECRET_FILE`, and
//! `SHEAF_JIT_REMOTE_LEASE=0` to run without leases), a fresh disk cache
//! per worker (`SHEAF_JIT_CACHE_DIR`), Blocking mode and static shapes.
//!
//! ```text
//! {"pid":4242,"compiles":2,"remote_hits":4,"lease_waits":3,"waits_found":3,"waits_compiled":0,"leases_taken":2,"wall_ms":1510,"wrong":0}
//! ```

use std::process::ExitCode;
use std::time::Instant;

use ndarray::{ArrayD, IxDyn};
use serde::Serialize;
use sheaf_integration::artifacts::ArtifactSource;
use sheaf_integration::reference::{self, ReferenceError};
use sheaf_integration::{
    CapturedScalar, ErrorChain, HostTensor, JitConfig, JitFunction, JitRuntime, Value,
};

const HELP: &str = "\
fleet_worker: one worker of `cargo xtask fleet`. Runs six signatures of the
reference functions in Blocking mode, checks them against the interpreter,
prints one JSON line (compiles, remote hits, lease waits, wall time, wrong
results). Configured by the SHEAF_JIT_* variables (the remote cache, a fresh
SHEAF_JIT_CACHE_DIR, SHEAF_JIT_COMPILE_MODE=blocking, SHEAF_JIT_DYNAMIC_DIMS=off).

  --rows N,N,...   run mlp_layer on f32[N,16] for each batch size N instead";

/// What a worker prints, one JSON line.
#[derive(Debug, Serialize)]
struct Report {
    pid: u32,
    /// Signatures this worker compiled.
    compiles: u64,
    /// Signatures it loaded from the remote cache.
    remote_hits: u64,
    /// Misses that waited for another worker's compile.
    lease_waits: u64,
    /// Waits that ended with the artifact.
    waits_found: u64,
    /// Waits that ended compiling here.
    waits_compiled: u64,
    /// Compile leases it took.
    leases_taken: u64,
    /// From the start of the process to the last result.
    wall_ms: u128,
    /// Results that differ from the interpreter's, or calls that failed.
    wrong: u64,
}

/// A signature: a function, its arguments and captures, and the
/// interpreter's result.
struct Signature {
    what: String,
    function: JitFunction,
    args: Vec<Value>,
    captured: Vec<CapturedScalar>,
    interpret: Box<Interpreter>,
}

/// A reference interpreter, its captures bound.
type Interpreter = dyn Fn(&[Value]) -> Result<Vec<Value>, ReferenceError>;

fn signatures() -> Vec<Signature> {
    let mut out = Vec::new();
    for (seed, shape) in [[1, 5], [2, 3], [3, 4]].into_iter().enumerate() {
        out.push(Signature {
            what: format!("sigmoid f32{shape:?}"),
            function: reference::sigmoid(),
            args: vec![Value::from(array(&shape, seed as u32 + 1))],
            captured: Vec::new(),
            interpret: Box::new(reference::interpret_sigmoid),
        });
    }
    for (seed, batch) in [(11, 2), (12, 8)] {
        let temperature = 0.5;
        out.push(Signature {
            what: format!("softmax f32[{batch},64]"),
            function: reference::softmax(),
            args: vec![Value::from(array(&[batch, 64], seed))],
            captured: vec![reference::temperature(temperature)],
            interpret: Box::new(move |args| reference::interpret_softmax(args, temperature)),
        });
    }
    out.push(Signature {
        what: "mlp_layer f32[8,16]·[16,8]".to_owned(),
        function: reference::mlp_layer(),
        args: vec![
            Value::from(array(&[8, 16], 21)),
            Value::from(array(&[16, 8], 22)),
            Value::from(array(&[8], 23)),
        ],
        captured: Vec::new(),
        interpret: Box::new(reference::interpret_mlp_layer),
    });
    out
}

/// `mlp_layer` on `f32[rows,16]·[16,8]` for each of `rows`.
fn batches(rows: &[usize]) -> Vec<Signature> {
    rows.iter()
        .map(|&rows| Signature {
            what: format!("mlp_layer f32[{rows},16]·[16,8]"),
            function: reference::mlp_layer(),
            args: vec![
                Value::from(array(&[rows, 16], 31)),
                Value::from(array(&[16, 8], 32)),
                Value::from(array(&[8], 33)),
            ],
            captured: Vec::new(),
            interpret: Box::new(reference::interpret_mlp_layer),
        })
        .collect()
}

/// The batch sizes of `--rows N,N,...`, if given; an error for a bad list
/// or another argument.
fn rows_argument() -> Result<Option<Vec<usize>>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let list = match &args[..] {
        [] => return Ok(None),
        [flag, list] if flag == "--rows" => list,
        _ => {
            return Err(format!(
                "expected no argument or --rows N,N,... (see --help), not {args:?}"
            ))
        }
    };
    list.split(',')
        .map(|n| n.parse().ok().filter(|&n| n > 0))
        .collect::<Option<Vec<usize>>>()
        .map(Some)
        .ok_or_else(|| format!("--rows `{list}`: batch sizes of at least 1, by commas"))
}

/// Runs `signature` on `jit`; whether its result is the interpreter's.
fn right(jit: &JitRuntime, signature: &Signature) -> bool {
    let expected = (signature.interpret)(&signature.args)
        .ok()
        .and_then(|outputs| outputs.into_iter().next())
        .and_then(|output| output.to_host().ok());
    let result = jit.call(
        &signature.function,
        &signature.args,
        &signature.captured,
        |args, _, _| (signature.interpret)(args),
    );
    let actual = match result {
        Ok(result) => result.outputs.first().map(Value::to_host),
        Err(error) => {
            eprintln!("{}: {}", signature.what, ErrorChain(&error));
            return false;
        }
    };
    match (actual, expected) {
        (Some(Ok(actual)), Some(expected)) if close(&actual, &expected) => true,
        (actual, expected) => {
            eprintln!("{}: expected {expected:?}, got {actual:?}", signature.what);
            false
        }
    }
}

/// Equal within 1e-4, relative to the larger of 1 and the expected value.
fn close(actual: &HostTensor, expected: &HostTensor) -> bool {
    match (actual, expected) {
        (HostTensor::F32(a), HostTensor::F32(e)) => {
            a.shape() == e.shape()
                && a.iter()
                    .zip(e.iter())
                    .all(|(&a, &e)| (a - e).abs() <= 1e-4 * e.abs().max(1.0))
        }
        _ => false,
    }
}

/// Deterministic values in [-3, 3).
fn array(shape: &[usize], seed: u32) -> ArrayD<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).max(1);
    ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        (state % 6000) as f32 / 1000.0 - 3.0
    })
}

fn main() -> ExitCode {
    let start = Instant::now();
    if std::env::args().any(|arg| arg == "--help" || arg == "-h") {
        println!("{HELP}");
        return ExitCode::SUCCESS;
    }
    let jit = match JitConfig::from_env()
        .map_err(|error| error.to_string())
        .and_then(|config| JitRuntime::new(config).map_err(|e| ErrorChain(&e).to_string()))
    {
        Ok(jit) => jit,
        Err(error) => {
            eprintln!("fleet_worker: {error}");
            return ExitCode::FAILURE;
        }
    };
    let signatures = match rows_argument() {
        Ok(Some(rows)) => batches(&rows),
        Ok(None) => signatures(),
        Err(error) => {
            eprintln!("fleet_worker: {error}");
            return ExitCode::FAILURE;
        }
    };
    let wrong = signatures
        .iter()
        .filter(|signature| !right(&jit, signature))
        .count() as u64;
    let wall_ms = start.elapsed().as_millis();
    let profile = jit.profile();
    let remote = jit.remote_cache_stats().unwrap_or_default();
    let report = Report {
        pid: std::process::id(),
        compiles: profile.loaded_from(ArtifactSource::Compiler),
        remote_hits: profile.loaded_from(ArtifactSource::RemoteCache),
        lease_waits: remote.lease_waits,
        waits_found: remote.waits_found,
        waits_compiled: remote.waits_compiled,
        leases_taken: remote.leases_taken,
        wall_ms,
        wrong,
    };
    // Publishes what is still queued, and releases the leases.
    drop(jit);
    match serde_json::to_string(&report) {
        Ok(line) => println!("{line}"),
        Err(error) => {
            eprintln!("fleet_worker: {error}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
