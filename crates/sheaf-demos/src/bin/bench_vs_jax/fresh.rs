//! A new function's first result: from the first call of a function the
//! runtime has never seen (a new definition, so nothing is cached; the disk
//! cache is off) to its result on the host. The compiler is loaded first,
//! on another function, as JAX's backend is on the JAX side: the row is the
//! function's cost, not the process's start.

use anyhow::bail;
use std::time::{Duration, Instant};

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    artifacts::Precompile, lowering::Lowered, mlir, reference, settings::CompileMode, DType,
    HostTensor, JitFunction, JitRuntime, Provenance, Value,
};

use crate::row::{first_f32, ms, Checksum, Row};
use crate::{compiled, Bench};

/// How long a background compile may take before the row fails.
const COMPILE_TIMEOUT: Duration = Duration::from_secs(120);
/// How often the background row calls again until the call runs compiled.
const POLL: Duration = Duration::from_micros(100);

/// `sigmoid` under a definition no runtime has seen before: `nonce` is
/// part of its text, hence of its identity.
fn new_sigmoid(nonce: usize) -> JitFunction {
    let definition = format!("(defn sigmoid [x] (/ 1 (+ 1 (exp (- x))))) ; {nonce}");
    JitFunction::new("sigmoid", &definition, |ctx| {
        let [x] = ctx.args() else {
            return Err("sigmoid takes one tensor".into());
        };
        if x.dtype() != DType::F32 {
            return Err(format!("sigmoid needs an f32 tensor, got {x}").into());
        }
        let ty = mlir::arg_type(x)?;
        Ok(Lowered::new(format!(
            "func.func @{entry}(%x: {ty}) -> {ty} {{
  %y = stablehlo.logistic %x : {ty}
  return %y : {ty}
}}",
            entry = ctx.entry_symbol()
        )))
    })
}

/// A runtime in `mode` whose compiler is loaded.
fn loaded_runtime(bench: &Bench, mode: CompileMode) -> anyhow::Result<JitRuntime> {
    let jit = bench.runtime(mode)?;
    let other = [Value::from(ArrayD::<f32>::zeros(IxDyn(&[1, 3])))];
    jit.precompile(&[Precompile::new(&reference::sigmoid(), &other)])?;
    Ok(jit)
}

/// The median of `values`.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_unstable_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// The blocking row, and the background rows: the first (interpreted)
/// result and the first compiled one. Each is the median over
/// `fresh_functions` new functions.
pub(crate) fn first_results(bench: &Bench) -> anyhow::Result<Vec<Row>> {
    let n = bench.counts.fresh_functions;
    let x = [Value::from(HostTensor::from(
        bench.inputs.array("sigmoid_x")?,
    ))];
    let interpret = |args: &[Value], _: &_, _: &_| reference::interpret_sigmoid(args);

    let blocking = loaded_runtime(bench, CompileMode::Blocking)?;
    let (mut times, mut checksum, mut device) = (Vec::new(), Checksum::default(), String::new());
    for nonce in 0..n {
        let f = new_sigmoid(nonce);
        let start = Instant::now();
        let y = compiled(&blocking, &f, &x, &[])?;
        let host = first_f32(&y.outputs)?;
        times.push(ms(start.elapsed()));
        checksum = Checksum::of_values(host.iter().copied());
        device = y.device().to_owned();
    }
    let mut rows = vec![Row::new(
        "fresh_blocking",
        "new function, first result: blocking",
        "ms",
        median(times),
        checksum,
        &device,
    )];

    let background = loaded_runtime(bench, CompileMode::Background)?;
    let (mut first, mut first_sum) = (Vec::new(), Checksum::default());
    let (mut compiled_times, mut compiled_sum) = (Vec::new(), Checksum::default());
    for nonce in n..2 * n {
        let f = new_sigmoid(nonce);
        let start = Instant::now();
        let mut y = background.call(&f, &x, &[], interpret)?;
        let host = first_f32(&y.outputs)?;
        first.push(ms(start.elapsed()));
        first_sum = Checksum::of_values(host.iter().copied());
        while !matches!(y.provenance, Provenance::Compiled(_)) {
            if start.elapsed() > COMPILE_TIMEOUT {
                bail!("a background compile of sigmoid took over {COMPILE_TIMEOUT:?}");
            }
            std::thread::sleep(POLL);
            y = background.call(&f, &x, &[], interpret)?;
        }
        let host = first_f32(&y.outputs)?;
        compiled_times.push(ms(start.elapsed()));
        compiled_sum = Checksum::of_values(host.iter().copied());
    }
    rows.push(Row::new(
        "fresh_background_first",
        "new function, first result: background (interpreted)",
        "ms",
        median(first),
        first_sum,
        &device,
    ));
    rows.push(Row::new(
        "fresh_background_compiled",
        "new function, first compiled result: background",
        "ms",
        median(compiled_times),
        compiled_sum,
        &device,
    ));
    Ok(rows)
}
