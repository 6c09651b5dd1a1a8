//! The warm rows: per-call p50 of code that is already compiled.

use anyhow::bail;
use std::time::{Duration, Instant};

use ndarray::s;
use sheaf_integration::{
    reference, settings::CompileMode, CapturedScalar, Compiled, Dispatched, HostTensor,
    JitFunction, JitRuntime, Value,
};

use crate::inputs::{MAX_BATCH, WIDTH};
use crate::row::{self, warm_p50_us, Checksum, Row};
use crate::{compiled, Bench};

/// The batch sizes of the eight-batch rows.
const BATCH_SIZES: [usize; 8] = [1, 2, 4, 8, 16, 32, 64, 128];
/// The temperature of the `softmax` row.
const TEMPERATURE: f32 = 0.5;

/// `host` on the device of `jit`, as an argument.
fn device(jit: &JitRuntime, host: HostTensor) -> anyhow::Result<Value> {
    Ok(Value::from(jit.upload(&host)?))
}

/// `sigmoid` `f32[1,5]`, host array in and out; then chained on the device.
pub(crate) fn sigmoid(bench: &Bench) -> anyhow::Result<Vec<Row>> {
    let counts = &bench.counts;
    let jit = bench.runtime(CompileMode::Blocking)?;
    let f = reference::sigmoid();
    let x = bench.inputs.array("sigmoid_x")?;
    // The same host array every call, as the JAX side passes the same
    // NumPy array: the upload cache serves it after its second call.
    let host = [Value::from(HostTensor::from(x.clone()))];
    let first = compiled(&jit, &f, &host, &[])?;
    let device_name = first.device().to_owned();
    let mut last = first.outputs[0].to_host()?;
    let p50 = warm_p50_us(counts.warm_up, counts.sigmoid_calls, || {
        let y = compiled(&jit, &f, &host, &[])?;
        last = y.outputs[0].to_host()?;
        Ok(())
    })?;
    let mut rows = vec![Row::new(
        "sigmoid_host",
        "sigmoid f32[1,5], host → host: warm p50",
        "us",
        p50,
        Checksum::of(&[Value::from(last)])?,
        &device_name,
    )];

    // Each output is the next call's input: warm-up and timed calls
    // together apply sigmoid warm_up + calls times to x.
    let mut y = device(&jit, HostTensor::from(x))?;
    let p50 = warm_p50_us(counts.warm_up, counts.sigmoid_calls, || {
        let out = compiled(&jit, &f, std::slice::from_ref(&y), &[])?;
        y = out.into_parts().0.swap_remove(0);
        Ok(())
    })?;
    rows.push(Row::new(
        "sigmoid_device",
        "sigmoid f32[1,5], device → device, chained: warm p50",
        "us",
        p50,
        Checksum::of(&[y])?,
        &device_name,
    ));
    Ok(rows)
}

/// `mlp_layer` at eight batch sizes in one runtime, device tensors in
/// and out. The runtime is configured by default (compiles in the
/// background): sizes 1 and 2 get static variants, the batch dim then goes
/// dynamic (one variant for every size), and the sizes called often get
/// their own static variants beside it while the function's cache has room
/// (5 of the 6 others at capacity 8), where JAX compiles each size. Timed
/// once those compiles are done.
pub(crate) fn batch_sizes(bench: &Bench) -> anyhow::Result<Vec<Row>> {
    let counts = &bench.counts;
    let jit = bench.runtime(CompileMode::Background)?;
    let f = reference::mlp_layer();
    let pool = bench.inputs.array("mlp_x")?;
    let w = device(&jit, bench.inputs.array("mlp_w")?.into())?;
    let b = device(&jit, bench.inputs.array("mlp_b")?.into())?;
    let mut calls = Vec::new();
    for batch in BATCH_SIZES {
        let x = pool.slice(s![..batch, ..]).to_owned().into_dyn();
        calls.push([device(&jit, x.into())?, w.clone(), b.clone()]);
    }
    let mut device_name = String::new();
    for _ in 0..2 {
        for args in &calls {
            for _ in 0..counts.warm_up {
                device_name = settled(&jit, &f, args)?.device().to_owned();
            }
        }
        if !jit.wait_for_compiles(Duration::from_secs(600)) {
            bail!("the background compiles did not finish in 10 minutes");
        }
    }
    // Rounds over the sizes, so that the machine's drift hits each alike.
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); calls.len()];
    for _ in 0..counts.batch_rounds {
        for (args, samples) in calls.iter().zip(&mut samples) {
            for _ in 0..counts.batch_calls_per_round {
                let start = Instant::now();
                compiled(&jit, &f, args, &[])?;
                samples.push(start.elapsed());
            }
        }
    }
    let mut rows = Vec::new();
    for ((batch, args), samples) in BATCH_SIZES.iter().zip(&calls).zip(&mut samples) {
        let y = compiled(&jit, &f, args, &[])?;
        rows.push(Row::new(
            format!("mlp_b{batch}"),
            format!("mlp_layer f32[{batch},{WIDTH}], 8 sizes in one runtime: warm p50"),
            "us",
            row::p50_us(samples),
            Checksum::of(&y.outputs)?,
            &device_name,
        ));
    }
    Ok(rows)
}

/// One warm row of [`compute`].
struct Case {
    key: &'static str,
    label: String,
    function: JitFunction,
    args: Vec<Value>,
    captured: Vec<CapturedScalar>,
    warm_up: usize,
    calls: usize,
}

/// `matmul` `f32[512,512]`·`f32[512,512]`, `softmax` `f32[128,1024]` and
/// `mlp_layer` `f32[128,256]` (static variants), device tensors in and out.
pub(crate) fn compute(bench: &Bench) -> anyhow::Result<Vec<Row>> {
    let counts = &bench.counts;
    let inputs = &bench.inputs;
    let jit = bench.runtime(CompileMode::Blocking)?;
    let x = inputs.array("mlp_x")?.slice(s![..MAX_BATCH, ..]).to_owned();
    let cases = [
        Case {
            key: "matmul",
            label: "matmul f32[512,512]·f32[512,512]: warm p50".to_owned(),
            function: reference::matmul(),
            args: vec![
                device(&jit, inputs.array("matmul_a")?.into())?,
                device(&jit, inputs.array("matmul_b")?.into())?,
            ],
            captured: vec![],
            // A tenth of the warm-up: a matmul call is slow.
            warm_up: counts.warm_up / 10,
            calls: counts.matmul_calls,
        },
        Case {
            key: "matmul_large",
            label: "matmul f32[1024,1024]·f32[1024,1024]: warm p50".to_owned(),
            function: reference::matmul(),
            args: vec![
                device(&jit, inputs.array("matmul_large_a")?.into())?,
                device(&jit, inputs.array("matmul_large_b")?.into())?,
            ],
            captured: vec![],
            // Eight times the 512² matmul's work: an eighth of its calls.
            warm_up: (counts.warm_up / 80).max(1),
            calls: counts.matmul_calls / 8,
        },
        Case {
            key: "bmm",
            label: "batched matmul f32[8,256,256]·f32[8,256,256]: warm p50".to_owned(),
            function: reference::matmul(),
            args: vec![
                device(&jit, inputs.array("bmm_a")?.into())?,
                device(&jit, inputs.array("bmm_b")?.into())?,
            ],
            captured: vec![],
            // As many multiply-adds as the 512² matmul.
            warm_up: counts.warm_up / 10,
            calls: counts.matmul_calls,
        },
        Case {
            key: "softmax",
            label: format!("softmax f32[128,1024] / {TEMPERATURE}: warm p50"),
            function: reference::softmax(),
            args: vec![device(&jit, inputs.array("softmax_x")?.into())?],
            captured: vec![reference::temperature(TEMPERATURE)],
            warm_up: counts.warm_up,
            calls: counts.compute_calls,
        },
        Case {
            key: "mlp",
            label: format!("mlp_layer f32[{MAX_BATCH},{WIDTH}]: warm p50"),
            function: reference::mlp_layer(),
            args: vec![
                device(&jit, x.into_dyn().into())?,
                device(&jit, inputs.array("mlp_w")?.into())?,
                device(&jit, inputs.array("mlp_b")?.into())?,
            ],
            captured: vec![],
            warm_up: counts.warm_up,
            calls: counts.compute_calls,
        },
    ];
    let mut rows = Vec::new();
    for case in cases {
        let call = || compiled(&jit, &case.function, &case.args, &case.captured);
        let p50 = warm_p50_us(case.warm_up, case.calls, || call().map(drop))?;
        let y = call()?;
        rows.push(Row::new(
            case.key,
            case.label,
            "us",
            p50,
            Checksum::of(&y.outputs)?,
            y.device(),
        ));
    }
    Ok(rows)
}

/// `function` on `args`, run compiled once its background compile is done
/// (a miss is interpreted meanwhile).
fn settled(jit: &JitRuntime, function: &JitFunction, args: &[Value]) -> anyhow::Result<Compiled> {
    loop {
        if let Dispatched::Compiled(compiled) = jit.dispatch(function, args, &[])? {
            return Ok(compiled);
        }
        if !jit.wait_for_compiles(Duration::from_secs(600)) {
            bail!("`{}` did not compile in 10 minutes", function.name());
        }
    }
}
