//! Benchmark (not a test): the data path of a training step. A
//! GPT-2-124M-shaped parameter dict (token and position embeddings, 12
//! layers of attention, MLP and layer-norm weights, the final layer norm: in
//! Sheaf's nesting, ~124 M f32) is passed as host arrays to one compiled
//! value-and-grad-shaped function per step: the parameters in, a loss and a
//! gradient of each parameter's shape out, all read back to the host as
//! Sheaf's interpreter needs them. The compiled compute is cheap on purpose
//! (loss = Σ sums of the parameters, gradient = 2·p): the step is the data
//! path.
//!
//! Four ways to run the same step, each printing the median per-step time
//! over the timed steps (after warm-up steps), bytes copied to and imported
//! by the device per step (`UploadStats`), minor page faults per step
//! (`/proc/self/stat`, field 10) and RSS after the run:
//!
//! - (a) host arguments every step, default settings (the arrays as the
//!   allocator placed them: large ones are not 64-byte aligned with glibc,
//!   so they are copied, and cached);
//! - (a') the same with the parameters made 64-byte aligned once
//!   (`aligned_copy`), which CPU devices import without a copy;
//! - (b) device-resident parameters (uploaded once, passed as device tensors);
//! - (c) host arguments with the upload cache and imports off;
//! - (d) the floor: the same artifact through iree-safe directly, one
//!   `Tensor::from_slice` (`iree_hal_buffer_view_allocate_buffer_copy`) per
//!   argument per step;
//! - (e) parameters that are new arrays every step, as in a real training
//!   loop: each step's results, read back, are the next step's parameters;
//! - (a0) row (a) with the buffer pool off (`device.buffer_pool_bytes = 0`):
//!   every call's results in fresh memory, as before the pool;
//! - (f) row (a) in a process that tells glibc to keep freed memory in its
//!   heap (`mallopt`): what is left of the page faults with the pool on is
//!   the host arrays the results are read back into (glibc maps the 154 MB
//!   `wte` gradient afresh each step; iree-safe asks for huge pages there,
//!   so that costs one fault per 2 MiB where the kernel offers them).
//!
//! Each row runs in a fresh process of its own (the benchmark runs itself
//! with `--only ROW`), so rows do not inherit each other's heap.
//!
//! ```sh
//! cargo bench -p sheaf-integration --bench training_step            # 12 layers
//! cargo bench -p sheaf-integration --bench training_step -- --layers 2 --steps 5
//! cargo bench -p sheaf-integration --bench training_step -- --only "(a')"
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    lowering::{Lowered, LoweringContext, LoweringError},
    settings::{CompileMode, DiskCacheFolder},
    tuning::aligned_copy,
    Dispatched, HostTensor, JitConfig, JitFunction, JitRuntime, Tensor, Value,
};

const D_MODEL: usize = 768;
const VOCAB: usize = 50257;
const CONTEXT: usize = 1024;
const WARM_UP: usize = 3;

/// GPT-2's parameter dict (Sheaf's nesting: `wte`, `wpe`, `h` a list of
/// layers, `ln_f`), each array filled by `fill`.
fn gpt2_params(layers: usize, fill: &mut impl FnMut(&[usize]) -> Value) -> Value {
    let ln = |fill: &mut dyn FnMut(&[usize]) -> Value| {
        Value::dict([("g", fill(&[D_MODEL])), ("b", fill(&[D_MODEL]))])
    };
    let linear = |fill: &mut dyn FnMut(&[usize]) -> Value, n: usize, m: usize| {
        Value::dict([("w", fill(&[n, m])), ("b", fill(&[m]))])
    };
    let h = (0..layers)
        .map(|_| {
            Value::dict([
                ("ln_1", ln(fill)),
                (
                    "attn",
                    Value::dict([
                        ("c_attn", linear(fill, D_MODEL, 3 * D_MODEL)),
                        ("c_proj", linear(fill, D_MODEL, D_MODEL)),
                    ]),
                ),
                ("ln_2", ln(fill)),
                (
                    "mlp",
                    Value::dict([
                        ("c_fc", linear(fill, D_MODEL, 4 * D_MODEL)),
                        ("c_proj", linear(fill, 4 * D_MODEL, D_MODEL)),
                    ]),
                ),
            ])
        })
        .collect();
    Value::dict([
        ("wte", fill(&[VOCAB, D_MODEL])),
        ("wpe", fill(&[CONTEXT, D_MODEL])),
        ("h", Value::List(h)),
        ("ln_f", ln(fill)),
    ])
}

/// `(params) -> (loss, grads...)`: loss = Σ of every parameter's sum,
/// gradient = p + p, one per parameter in flattening order.
fn lower(ctx: &LoweringContext<'_>) -> Result<Lowered, LoweringError> {
    let mut args = Vec::new();
    let mut body = String::from("  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n");
    let mut results = vec!["tensor<f32>".to_owned()];
    let mut returned = vec!["%loss".to_owned()];
    let mut loss = "%zero".to_owned();
    for (i, spec) in ctx.args().iter().enumerate() {
        let ty = sheaf_integration::mlir::arg_type(spec)?;
        let dims: Vec<String> = (0..spec.dims().len()).map(|d| d.to_string()).collect();
        args.push(format!("%p{i}: {ty}"));
        body.push_str(&format!(
            "  %g{i} = stablehlo.add %p{i}, %p{i} : {ty}\n  %s{i} = stablehlo.reduce(%p{i} init: %zero) applies stablehlo.add across dimensions = [{}] : ({ty}, tensor<f32>) -> tensor<f32>\n  %l{i} = stablehlo.add {loss}, %s{i} : tensor<f32>\n",
            dims.join(", ")
        ));
        loss = format!("%l{i}");
        results.push(ty);
        returned.push(format!("%g{i}"));
    }
    body.push_str(&format!(
        "  %loss = stablehlo.add {loss}, %zero : tensor<f32>\n"
    ));
    Ok(Lowered::new(format!(
        "func.func @{entry}({args}) -> ({results}) {{\n{body}  return {returned} : {results}\n}}",
        entry = ctx.entry_symbol(),
        args = args.join(", "),
        results = results.join(", "),
        returned = returned.join(", "),
    )))
}

/// Minor page faults of this process so far (`/proc/self/stat` field 10).
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name, which is in parentheses and may hold spaces.
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    after
        .split(' ')
        .nth(7)
        .expect("minflt")
        .parse()
        .expect("a number")
}

/// CPU time this thread ran so far, in ns (`/proc/thread-self/schedstat`,
/// field 1): on a shared machine, less disturbed than wall time by other
/// processes (local-sync runs the compiled code on the calling thread).
fn cpu_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    stat.split(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .expect("a number")
}

struct Row {
    label: &'static str,
    median: Duration,
    cpu: Duration,
    copied: f64,
    imported: f64,
    faults: f64,
    rss: f64,
}

impl Row {
    /// A row of `measured`, with RSS now; `copied` overrides the MiB copied
    /// per step (the floor counts its own).
    fn new(label: &'static str, measured: &Measured, copied: Option<f64>) -> Row {
        Row {
            label,
            median: measured.median,
            cpu: measured.cpu,
            copied: copied.unwrap_or(measured.bytes.0),
            imported: measured.bytes.1,
            faults: measured.faults,
            rss: test_support::proc_status::rss_mib(),
        }
    }
}

/// What [`measure`] measured over the timed steps.
struct Measured {
    median: Duration,
    /// Mean CPU time of this thread per step.
    cpu: Duration,
    faults: f64,
    /// MiB copied and imported per step.
    bytes: (f64, f64),
}

/// Runs `step` `WARM_UP + steps` times; the median, CPU time, page faults
/// and `bytes()` (copied, imported) per step in MiB, of the last `steps`.
fn measure(steps: usize, bytes: impl Fn() -> (u64, u64), mut step: impl FnMut()) -> Measured {
    for _ in 0..WARM_UP {
        step();
    }
    let before = bytes();
    let cpu = cpu_ns();
    let faults = minor_faults();
    let mut samples: Vec<Duration> = (0..steps)
        .map(|_| {
            let start = Instant::now();
            step();
            start.elapsed()
        })
        .collect();
    let faults = (minor_faults() - faults) as f64 / steps as f64;
    let cpu = Duration::from_nanos((cpu_ns() - cpu) / steps as u64);
    let after = bytes();
    let mib = |a: u64, b: u64| (a - b) as f64 / steps as f64 / 1048576.0;
    samples.sort();
    Measured {
        median: samples[steps / 2],
        cpu,
        faults,
        bytes: (mib(after.0, before.0), mib(after.1, before.1)),
    }
}

/// Row (f): the program tells glibc to serve every allocation from its
/// heap and keep what is freed there (`M_MMAP_MAX` 0, `M_TRIM_THRESHOLD`
/// 2 GiB), so that the host arrays read back each step reuse the last
/// step's pages. Without it glibc maps every block over 32 MiB (its
/// largest mmap threshold) afresh: the arrays the results are read into
/// are the page faults the buffer pool leaves (a program's choice, not a
/// library's: it changes the whole process's allocator).
fn keep_freed_memory_in_the_heap() {
    const M_TRIM_THRESHOLD: std::ffi::c_int = -1;
    const M_MMAP_MAX: std::ffi::c_int = -4;
    extern "C" {
        fn mallopt(param: std::ffi::c_int, value: std::ffi::c_int) -> std::ffi::c_int;
    }
    // SAFETY: glibc's `mallopt` (malloc.h), called before this process
    // allocates its parameters; both settings are documented parameters.
    let set = unsafe { mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, i32::MAX) == 1 };
    assert!(set, "glibc refused the settings");
}

/// Reads every result back to the host, as Sheaf's interpreter does.
fn read_back(outputs: &[Value]) {
    for output in outputs {
        std::hint::black_box(output.to_host().unwrap());
    }
}

fn main() {
    let mut layers = 12;
    let mut steps = 7;
    let mut only: Option<String> = None;
    let mut argv = std::env::args().skip(1);
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--layers" => {
                layers = argv
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--layers N")
            }
            "--steps" => steps = argv.next().and_then(|v| v.parse().ok()).expect("--steps N"),
            "--only" => only = argv.next(),
            // `cargo bench` passes `--bench`.
            _ => {}
        }
    }
    let Some(only) = only else {
        return each_row_in_its_own_process(layers, steps);
    };
    if only.starts_with("(f)") {
        keep_freed_memory_in_the_heap();
    }
    let only = Some(only);
    let mut seed = 0usize;
    let params = gpt2_params(layers, &mut |shape| {
        seed += 1;
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|i| ((i * 7 + seed) % 13) as f32 / 1e3).collect();
        Value::from(HostTensor::F32(Arc::new(
            ArrayD::from_shape_vec(IxDyn(shape), data).unwrap(),
        )))
    });
    let signature = Value::call_signature(std::slice::from_ref(&params), &[]).unwrap();
    let leaves = signature.to_string().matches("f32[").count();
    let bytes: usize = {
        let mut total = 0;
        let mut stack = vec![&params];
        while let Some(v) = stack.pop() {
            match v {
                Value::Tensor(t) => total += t.shape().iter().product::<usize>() * 4,
                Value::Dict(entries) => stack.extend(entries.iter().map(|(_, v)| v)),
                Value::List(items) | Value::Tuple(items) => stack.extend(items),
                _ => {}
            }
        }
        total
    };
    println!(
        "training step, GPT-2 shapes with {layers} layers: {leaves} parameters, {:.1} M f32 ({:.0} MiB); local-sync; median of {steps} steps after {WARM_UP}",
        bytes as f64 / 4e6,
        bytes as f64 / 1048576.0
    );
    let step_fn = JitFunction::new("train-step", "(value-and-grad loss params)", lower);
    let config = |cache_off: bool, pool_off: bool| {
        let mut builder = JitConfig::builder()
            .compile(|compile| compile.mode = CompileMode::Blocking)
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled);
        if pool_off {
            builder = builder.device(|device| device.buffer_pool_bytes = 0);
        }
        if cache_off {
            builder = builder.uploads(|uploads| {
                uploads.entries = 0;
                uploads.import = false;
            });
        }
        JitRuntime::new(builder.build().unwrap()).unwrap()
    };
    let dispatch = |jit: &JitRuntime, args: &[Value]| -> Vec<Value> {
        match jit.dispatch(&step_fn, args, &[]).unwrap() {
            Dispatched::Compiled(compiled) => compiled.outputs,
            Dispatched::Interpret(why) => panic!("interpreted: {why}"),
        }
    };
    let wanted = |label: &str| only.as_deref().is_none_or(|o| label.starts_with(o));
    let mut rows = Vec::new();
    for (label, cache_off, pool_off) in [
        ("(a) host args, defaults", false, false),
        ("(a0) same, buffer pool off", false, true),
        ("(a') same, 64-byte-aligned arrays", false, false),
        ("(c) host args, cache off", true, false),
        ("(f) host args, glibc keeping freed memory", false, false),
    ] {
        if !wanted(label) {
            continue;
        }
        // Aligned once, as a program would when it loads its parameters.
        let args = if label.starts_with("(a')") {
            map_tensors(&params, &mut |host| match host {
                HostTensor::F32(a) => Value::from(HostTensor::F32(Arc::new(aligned_copy(a)))),
                other => Value::from(other.clone()),
            })
        } else {
            params.clone()
        };
        let host_args = [args];
        let jit = config(cache_off, pool_off);
        let measured = measure(
            steps,
            || upload_bytes(&jit),
            || read_back(&dispatch(&jit, &host_args)),
        );
        rows.push(Row::new(label, &measured, None));
    }
    if wanted("(e)") {
        // A training loop whose parameters are new arrays every step: the
        // next step's parameters are this step's results read back (the
        // gradients stand in for updated parameters; 2·p stays finite).
        let jit = config(false, false);
        let mut current = params.clone();
        let measured = measure(
            steps,
            || upload_bytes(&jit),
            || {
                let outputs = dispatch(&jit, std::slice::from_ref(&current));
                let mut read: Vec<Value> = outputs[1..]
                    .iter()
                    .map(|output| Value::from(output.to_host().unwrap()))
                    .collect::<Vec<_>>();
                read.reverse();
                current = rebuild(&params, &mut read);
            },
        );
        rows.push(Row::new(
            "(e) parameters new every step (read back)",
            &measured,
            None,
        ));
    }
    if wanted("(b)") {
        let jit = config(false, false);
        let on_device = map_tensors(&params, &mut |host| {
            Value::Tensor(Tensor::Device(jit.upload(host).unwrap()))
        });
        let args = [on_device];
        let measured = measure(
            steps,
            || upload_bytes(&jit),
            || read_back(&dispatch(&jit, &args)),
        );
        rows.push(Row::new("(b) device-resident params", &measured, None));
    }
    if wanted("(d)") {
        let jit = config(true, false);
        let module = step_fn.module_text(&signature).unwrap();
        let compiler = iree_safe::compiler::choose_compiler(Default::default()).unwrap();
        let artifact = compiler
            .compiler
            .compile(&module, jit.compile_options())
            .unwrap();
        let raw = jit
            .runtime()
            .load(artifact.vmfb())
            .unwrap()
            .function(step_fn.entry_symbol())
            .unwrap();
        let mut leaves = Vec::new();
        flatten(&params, &mut leaves);
        let device = jit.runtime().device().clone();
        let measured = measure(
            steps,
            || (0, 0),
            || {
                let args: Vec<iree_safe::VmValue> = leaves
                    .iter()
                    .map(|a| {
                        iree_safe::Tensor::from_slice(&device, a.shape(), a.as_slice().unwrap())
                            .unwrap()
                            .into()
                    })
                    .collect();
                for result in raw.call(&args).unwrap() {
                    match result {
                        iree_safe::VmValue::Tensor(t) => {
                            std::hint::black_box(t.to_vec::<f32>().unwrap());
                        }
                        other => panic!("{}", other.describe()),
                    }
                }
            },
        );
        let copied = bytes as f64 / 1048576.0;
        rows.push(Row::new(
            "(d) floor: iree-safe, 1 copy/arg",
            &measured,
            Some(copied),
        ));
    }
    println!("{TABLE_HEADER}");
    for row in &rows {
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} |",
            row.label,
            row.median.as_secs_f64() * 1e3,
            row.cpu.as_secs_f64() * 1e3,
            row.copied,
            row.imported,
            row.faults,
            row.rss
        );
    }
}

/// Runs each row in a fresh process (`--only`), so that no row inherits
/// another's heap (freed memory the allocator reuses, or returns to the
/// kernel) and RSS is the row's own; prints one table.
fn each_row_in_its_own_process(layers: usize, steps: usize) {
    let mut header_printed = false;
    let mut rows = Vec::new();
    for row in ["(a)", "(a0)", "(a')", "(b)", "(c)", "(d)", "(e)", "(f)"] {
        let output = test_support::child::this_executable()
            .args([
                "--layers",
                &layers.to_string(),
                "--steps",
                &steps.to_string(),
            ])
            .args(["--only", row])
            .output()
            .expect("the benchmark runs itself");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{row}: {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        for line in stdout.lines() {
            if line.starts_with("| (") {
                rows.push(line.to_owned());
            } else if !header_printed && line.starts_with("training step") {
                println!("{line}; each row a fresh process");
                header_printed = true;
            }
        }
    }
    println!("{TABLE_HEADER}");
    for row in rows {
        println!("{row}");
    }
}

const TABLE_HEADER: &str = "| | ms/step (median) | CPU ms/step (mean) | MiB copied/step | MiB imported/step | minor faults/step | RSS after (MiB) |\n| --- | --- | --- | --- | --- | --- | --- |";

/// Bytes copied to the device and imported without a copy so far.
fn upload_bytes(jit: &JitRuntime) -> (u64, u64) {
    let stats = jit.upload_stats();
    (stats.bytes_uploaded, stats.bytes_imported)
}

/// The same structure with every host tensor replaced by `f(tensor)`.
fn map_tensors(value: &Value, f: &mut impl FnMut(&HostTensor) -> Value) -> Value {
    match value {
        Value::Tensor(Tensor::Host(host)) => f(host),
        Value::Dict(entries) => Value::Dict(
            entries
                .iter()
                .map(|(k, v)| (Arc::clone(k), map_tensors(v, f)))
                .collect(),
        ),
        Value::List(items) => Value::List(items.iter().map(|v| map_tensors(v, f)).collect()),
        other => other.clone(),
    }
}

/// `value`'s structure with its tensors replaced, in flattening order (dict
/// entries by key), by values popped from `leaves` (last = first).
fn rebuild(value: &Value, leaves: &mut Vec<Value>) -> Value {
    match value {
        Value::Tensor(_) => leaves.pop().expect("one leaf per tensor"),
        Value::Dict(entries) => {
            let mut sorted: Vec<_> = entries.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Dict(
                sorted
                    .into_iter()
                    .map(|(k, v)| (Arc::clone(k), rebuild(v, leaves)))
                    .collect(),
            )
        }
        Value::List(items) => Value::List(items.iter().map(|v| rebuild(v, leaves)).collect()),
        other => other.clone(),
    }
}

/// The f32 arrays in flattening order (dict entries by key).
fn flatten(value: &Value, out: &mut Vec<Arc<ArrayD<f32>>>) {
    match value {
        Value::Tensor(Tensor::Host(HostTensor::F32(a))) => out.push(Arc::clone(a)),
        Value::Dict(entries) => {
            let mut sorted: Vec<_> = entries.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            for (_, v) in sorted {
                flatten(v, out);
            }
        }
        Value::List(items) | Value::Tuple(items) => {
            for v in items {
                flatten(v, out);
            }
        }
        _ => panic!("unexpected leaf"),
    }
}
