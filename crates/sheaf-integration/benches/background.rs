//! Benchmark (not a test): what a new signature costs its caller in
//! blocking and background mode, and what a batch of signatures costs
//! compiled in one module (`precompile`) against one compile each. Every
//! runtime here has no disk cache, so every compile is a real one.
//!
//! ```sh
//! cargo bench -p sheaf-integration --bench background
//! ```

use std::thread;
use std::time::{Duration, Instant};

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    artifacts::Precompile,
    reference,
    settings::{CompileMode, DiskCacheFolder},
    stats::Origin,
    JitConfig, JitFunction, JitRuntime, Provenance, Value,
};

type Interpreter = fn(&[Value]) -> Result<Vec<Value>, reference::ReferenceError>;

fn runtime(mode: CompileMode) -> JitRuntime {
    runtime_with(mode, 1, 1)
}

/// A runtime whose background compiles run on `threads` threads and take
/// up to `batch_limit` queued signatures together.
fn runtime_with(mode: CompileMode, threads: usize, batch_limit: usize) -> JitRuntime {
    // Every shape is its own compile here: dynamic dims would serve the
    // batch sizes below with one variant.
    let config = JitConfig::builder()
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .cache(|cache| {
            cache.function_capacity = 16;
            cache.dynamic_dims = false;
            cache.compile_threads = threads;
        })
        .compile(|compile| {
            compile.mode = mode;
            compile.batch_limit = batch_limit;
        })
        .build()
        .expect("valid settings");
    JitRuntime::new(config).expect("the local-sync runtime opens")
}

/// `count` new signatures queued at once on `threads` compile threads,
/// compiled up to `batch_limit` together: the time until every one runs
/// compiled, and the mean latency of the calls made meanwhile (each
/// interpreted).
fn pool(count: usize, threads: usize, batch_limit: usize) {
    let jit = runtime_with(CompileMode::Background, threads, batch_limit);
    let sigmoid = reference::sigmoid();
    let warm = [Value::from(ArrayD::<f32>::zeros(IxDyn(&[1, 3])))];
    jit.precompile(&[Precompile::new(&sigmoid, &warm)])
        .expect("sigmoid compiles");
    let inputs: Vec<[Value; 1]> = (1..=count)
        .map(|n| [Value::from(ArrayD::<f32>::ones(IxDyn(&[n, 64])))])
        .collect();
    let start = Instant::now();
    let (mut calls, mut interpreted_time) = (0u32, Duration::ZERO);
    loop {
        let mut all_hits = true;
        for x in &inputs {
            let call = Instant::now();
            let result = jit
                .call(&sigmoid, x, &[], |args, _, _| {
                    reference::interpret_sigmoid(args)
                })
                .expect("the call runs");
            if result.provenance != Provenance::Compiled(Origin::Hit) {
                all_hits = false;
                calls += 1;
                interpreted_time += call.elapsed();
            }
        }
        if all_hits {
            break;
        }
        thread::sleep(Duration::from_millis(1));
    }
    let runs = jit
        .profile()
        .loaded_from(sheaf_integration::artifacts::ArtifactSource::Compiler);
    println!(
        "{count} signatures queued at once, {threads} compile thread(s), batches of up to \
         {batch_limit}: all compiled after {:>6.0} ms ({runs} compiler runs); {calls} calls \
         meanwhile, {:.3} ms each",
        ms(start.elapsed()),
        ms(interpreted_time) / f64::from(calls.max(1))
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The first call of a new signature in each mode, the interpreter alone
/// on it, and the calls until compiled code runs in background mode.
fn first_result(name: &str, function: &JitFunction, args: &[Value], interpret: Interpreter) {
    let start = Instant::now();
    interpret(args).expect("the interpreter runs");
    let alone = start.elapsed();
    let mut row = format!("{name:<28} interpreter alone {:>8.3} ms", ms(alone));
    for mode in [CompileMode::Blocking, CompileMode::Background] {
        let jit = runtime(mode);
        // Load the compiler first: its one-off start is not the signature's.
        let warm = [Value::from(ArrayD::<f32>::zeros(IxDyn(&[1, 3])))];
        jit.precompile(&[Precompile::new(&reference::sigmoid(), &warm)])
            .expect("sigmoid compiles");
        let start = Instant::now();
        jit.call(function, args, &[], |args, _, _| interpret(args))
            .expect("the call runs");
        let latency = start.elapsed();
        let label = match mode {
            CompileMode::Background => "background",
            _ => "blocking",
        };
        row += &format!(" | {label} {:>8.3} ms", ms(latency));
        if mode == CompileMode::Background {
            let start = Instant::now();
            jit.call(function, args, &[], |args, _, _| interpret(args))
                .expect("the call runs");
            row += &format!(" (second call {:.3} ms)", ms(start.elapsed()));
            let mut calls = 1;
            loop {
                let result = jit
                    .call(function, args, &[], |args, _, _| interpret(args))
                    .expect("the call runs");
                calls += 1;
                if result.provenance == Provenance::Compiled(Origin::Hit) {
                    break;
                }
                thread::sleep(Duration::from_micros(200));
            }
            row += &format!(
                " (compiled from call {calls}, {:.0} ms after the first)",
                ms(start.elapsed())
            );
        }
    }
    println!("{row}");
}

/// `count` sigmoid signatures compiled one by one, then in one batch.
fn batch(count: usize) {
    let sigmoid = reference::sigmoid();
    let inputs: Vec<[Value; 1]> = (1..=count)
        .map(|n| [Value::from(ArrayD::<f32>::zeros(IxDyn(&[n, 32])))])
        .collect();
    let separate = runtime(CompileMode::Blocking);
    let start = Instant::now();
    for x in &inputs {
        separate
            .call(&sigmoid, x, &[], |args, _, _| {
                reference::interpret_sigmoid(args)
            })
            .expect("the call runs");
    }
    let separate_wall = start.elapsed();

    let batched = runtime(CompileMode::Blocking);
    let calls: Vec<_> = inputs
        .iter()
        .map(|x| Precompile::new(&sigmoid, x))
        .collect();
    let summary = batched.precompile(&calls).expect("the batch compiles");
    let n = count as f64;
    println!(
        "{count} sigmoid signatures: separately {:>7.1} ms ({:>6.1} ms each) | one precompile \
         {:>7.1} ms ({:>6.1} ms each, {} cached)",
        ms(separate_wall),
        ms(separate_wall) / n,
        ms(summary.compile_time),
        ms(summary.compile_time) / n,
        summary.cached
    );
}

fn main() {
    println!("new signatures: time to the first result (the compiler already loaded)");
    let x = [Value::from(ArrayD::<f32>::ones(IxDyn(&[4, 5])))];
    first_result(
        "sigmoid f32[4,5]",
        &reference::sigmoid(),
        &x,
        reference::interpret_sigmoid,
    );
    let mlp = [
        Value::from(ArrayD::<f32>::ones(IxDyn(&[128, 256]))),
        Value::from(ArrayD::<f32>::ones(IxDyn(&[256, 256]))),
        Value::from(ArrayD::<f32>::ones(IxDyn(&[256]))),
    ];
    first_result(
        "mlp_layer f32[128,256]",
        &reference::mlp_layer(),
        &mlp,
        reference::interpret_mlp_layer,
    );
    println!();
    for threads in [1, 2] {
        for batch_limit in [1, 8] {
            pool(8, threads, batch_limit);
        }
    }
    println!();
    for count in [1, 8] {
        batch(count);
    }
}
