//! Benchmark (not a test): the instructions of a cache hit, to read with
//! callgrind. Runs `--calls N` (default 2000) cache hits of sigmoid
//! `f32[1,5]` through `JitRuntime::dispatch` in each compile mode, and as
//! many raw `iree_safe::Function::call`s of the same artifact, the hits in
//! `hits` (called once per mode) and the raw calls in `raw_calls`, so that
//! callgrind's inclusive count of `raw_calls` divided by N, and of `hits`
//! divided by 2N, is the instructions of one call. The artifacts are compiled by `iree-compile`
//! in a child process, which valgrind does not trace.
//!
//! ```sh
//! cargo bench -p sheaf-integration --bench hit_path --no-run
//! valgrind --tool=callgrind --callgrind-out-file=target/hit_path.callgrind \
//!     target/release/deps/hit_path-<hash> --calls 2000
//! callgrind_annotate --inclusive=yes target/hit_path.callgrind | grep -E "::hits|raw_calls"
//! ```
//!
//! valgrind does not decode AVX-512: on a CPU that has it, add `--cpu
//! x86-64-v3` (any LLVM CPU name), which compiles both artifacts for that
//! CPU instead of the host's.
//!
//! Without valgrind it prints the time of each loop.

use std::time::Instant;

use iree_safe::compiler::{choose_compiler, CompileTarget, CompilerPreference};
use sheaf_integration::{
    lowering::Signature,
    reference,
    settings::{CompileMode, DiskCacheFolder},
    DType, Dispatched, JitConfig, JitFunction, JitRuntime, Tensor, Value,
};

fn runtime(mode: CompileMode, target: &Option<CompileTarget>) -> JitRuntime {
    let config = JitConfig::builder()
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .compile(|compile| {
            compile.mode = mode;
            compile.compiler = CompilerPreference::Subprocess;
            compile.target = target.clone();
        })
        .build()
        .unwrap();
    JitRuntime::new(config).unwrap()
}

fn hit(jit: &JitRuntime, function: &JitFunction, args: &[Value]) {
    match jit.dispatch(function, args, &[]).unwrap() {
        Dispatched::Compiled(compiled) => {
            std::hint::black_box(compiled);
        }
        Dispatched::Interpret(why) => panic!("the signature is compiled: {why}"),
    }
}

/// `calls` hits of `function` on `jit`: one loop for both compile modes
/// (the machine code would be the same; callgrind counts it once per mode
/// called).
#[inline(never)]
fn hits(calls: usize, jit: &JitRuntime, function: &JitFunction, args: &[Value]) {
    for _ in 0..calls {
        hit(jit, function, args);
    }
}

#[inline(never)]
fn raw_calls(calls: usize, function: &iree_safe::Function, args: &[iree_safe::VmValue]) {
    for _ in 0..calls {
        std::hint::black_box(function.call(args).unwrap());
    }
}

fn main() {
    let mut calls = 2000;
    let mut target = None;
    let mut argv = std::env::args().skip(1);
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--calls" => calls = argv.next().and_then(|n| n.parse().ok()).expect("--calls N"),
            "--cpu" => {
                target = Some(CompileTarget::Cpu {
                    cpu: argv.next().expect("--cpu NAME"),
                    triple: None,
                })
            }
            _ => {}
        }
    }
    let sigmoid = reference::sigmoid();
    let blocking = runtime(CompileMode::Blocking, &target);
    let background = runtime(CompileMode::Background, &target);
    let host = [-2.0f32, -0.5, 0.0, 0.75, 3.0];
    let device = |jit: &JitRuntime| {
        iree_safe::Tensor::from_slice(jit.runtime().device(), &[1, 5], &host).unwrap()
    };
    let blocking_args = [Value::Tensor(Tensor::Device(device(&blocking)))];
    let background_args = [Value::Tensor(Tensor::Device(device(&background)))];
    hit(&blocking, &sigmoid, &blocking_args);
    while let Dispatched::Interpret(_) = background
        .dispatch(&sigmoid, &background_args, &[])
        .unwrap()
    {
        assert!(background.wait_for_compiles(std::time::Duration::from_secs(600)));
    }

    let mut builder = Signature::builder();
    builder.arg(DType::F32, &[1, 5]);
    let module = sigmoid.module_text(&builder.build()).unwrap();
    let compiler = choose_compiler(CompilerPreference::Subprocess)
        .unwrap()
        .compiler;
    let artifact = compiler
        .compile(&module, blocking.compile_options())
        .unwrap();
    let raw = blocking
        .runtime()
        .load(artifact.vmfb())
        .unwrap()
        .function(sigmoid.entry_symbol())
        .unwrap();
    let raw_args = [iree_safe::VmValue::Tensor(device(&blocking))];

    let timed = |label: &str, run: &dyn Fn()| {
        let start = Instant::now();
        run();
        let each = start.elapsed().as_secs_f64() * 1e6 / calls as f64;
        println!("{label:<16} {calls} calls, {each:.2} us each");
    };
    timed("blocking hits", &|| {
        hits(calls, &blocking, &sigmoid, &blocking_args)
    });
    timed("background hits", &|| {
        hits(calls, &background, &sigmoid, &background_args)
    });
    timed("raw calls", &|| raw_calls(calls, &raw, &raw_args));
}
