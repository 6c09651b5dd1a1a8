//! Background compilation on the real runtime and compiler: the first call
//! of a signature runs the interpreter without waiting, later calls hit;
//! failures are remembered; a forgotten function is not compiled; dropping
//! the runtime with compiles queued ends; misses queued together compile as
//! one module, a member that does not compile fails alone, and a batch on
//! disk serves each member alone.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use sheaf_integration::reference::{self, ReferenceError};
use sheaf_integration::{
    artifacts::ArtifactSource,
    lowering::{Lowered, LoweringContext, VariantError},
    mlir,
    settings::{CompileMode, DiskCacheFolder},
    stats::Origin,
    CallResult, ErrorChain, FallbackReason, JitConfig, JitFunction, JitRuntime, Provenance, Value,
};
use support::{array, assert_close};

fn background() -> JitRuntime {
    let config = JitConfig::builder()
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .compile(|compile| compile.mode = CompileMode::Background)
        .cache(|cache| cache.compile_threads = 1)
        .build()
        .unwrap();
    JitRuntime::new(config).unwrap()
}

fn sigmoid_call(jit: &JitRuntime, f: &JitFunction, x: &[Value]) -> CallResult {
    jit.call(f, x, &[], |args, _, _| reference::interpret_sigmoid(args))
        .unwrap()
}

/// Calls until the call hits; each result must match the interpreter's.
fn until_hit(jit: &JitRuntime, f: &JitFunction, x: &[Value]) -> CallResult {
    let expected = reference::interpret_sigmoid(x).unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let result = sigmoid_call(jit, f, x);
        assert_close(&result.outputs[0], &expected[0], "a call while compiling");
        if result.provenance == Provenance::Compiled(Origin::Hit) {
            return result;
        }
        thread::sleep(Duration::from_millis(5));
    }
    panic!("never compiled: {}", jit.stats());
}

#[test]
fn the_first_call_interprets_at_once_and_later_calls_hit() {
    let jit = background();
    let sigmoid = reference::sigmoid();
    let x = [Value::from(array(&[4, 5], 1))];
    let start = Instant::now();
    let first = sigmoid_call(&jit, &sigmoid, &x);
    let first_latency = start.elapsed();
    assert_eq!(
        first.provenance,
        Provenance::Interpreted(FallbackReason::CompileQueued)
    );
    let expected = reference::interpret_sigmoid(&x).unwrap();
    assert_close(&first.outputs[0], &expected[0], "first call");
    let hit = until_hit(&jit, &sigmoid, &x);
    assert_close(
        &hit.outputs[0],
        &first.outputs[0],
        "compiled vs interpreted",
    );
    let stats = jit.stats();
    assert_eq!((stats.total.compiles, stats.total.compiles_queued), (1, 1));
    println!(
        "first call {first_latency:.1?} (interpreted), compile {:.1?} in the background",
        stats.total.compile_time
    );
}

#[test]
fn a_lowering_refusal_is_known_at_once_in_the_background_and_remembered() {
    let jit = background();
    let broken: JitFunction = JitFunction::new("broken", "(defn broken [x] ?)", |_| {
        Err("this lowering always fails".into())
    });
    let x = [Value::from(array(&[2], 2))];
    for _ in 0..3 {
        let result = jit
            .call(&broken, &x, &[], |args, _, _| {
                Ok::<_, ReferenceError>(args.to_vec())
            })
            .unwrap();
        // Lowered on this thread: the refusal needs no compile thread.
        let Provenance::Interpreted(why) = result.provenance else {
            panic!("a failing lowering ran compiled");
        };
        let error = VariantError::of_fallback(&why).expect("the lowering's error");
        let message = ErrorChain(error).to_string();
        assert!(message.contains("always fails"), "{message}");
    }
    let stats = jit.stats().total;
    assert_eq!(
        (stats.refusals, stats.failed_compiles, stats.compiles_queued),
        (1, 0, 0)
    );
}

#[test]
fn a_function_forgotten_while_queued_is_not_compiled() {
    let jit = background();
    let sigmoid = reference::sigmoid();
    // Four ranks: four shape classes, four compiles (no dynamic dims).
    let shapes: [&[usize]; 4] = [&[3], &[1, 4], &[1, 1, 6], &[1, 1, 1, 7]];
    for (i, shape) in shapes.iter().enumerate() {
        let x = [Value::from(array(shape, i as u32))];
        sigmoid_call(&jit, &sigmoid, &x);
    }
    jit.forget(&sigmoid);
    // At most the compile already running finishes; it is not cached.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = jit.stats().total;
        if t.compiles + t.compiles_withdrawn == shapes.len() as u64 {
            assert!(t.compiles_withdrawn >= shapes.len() as u64 - 1, "{t:?}");
            assert_eq!(t.live_entries, 0);
            break;
        }
        assert!(Instant::now() < deadline, "{}", jit.stats());
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn dropping_the_runtime_with_compiles_queued_ends() {
    let jit = background();
    let sigmoid = reference::sigmoid();
    for n in 1..=6 {
        let x = [Value::from(array(&[2, n], n as u32))];
        sigmoid_call(&jit, &sigmoid, &x);
    }
    let start = Instant::now();
    drop(jit);
    // The queued compiles are withdrawn; the one running (if any) finishes
    // on its thread, which ends after it.
    println!("dropped in {:.1?}", start.elapsed());
}

/// A background runtime (with `folder` as its disk cache) whose compiles
/// run on one thread, up to 8 queued signatures together; every shape is
/// its own signature.
fn batching(folder: DiskCacheFolder) -> JitRuntime {
    let config = JitConfig::builder()
        .disk(|disk| disk.folder = folder)
        .compile(|compile| compile.mode = CompileMode::Background)
        .cache(|cache| {
            cache.compile_threads = 1;
            cache.dynamic_dims = false;
            cache.function_capacity = 16;
        })
        .build()
        .unwrap();
    JitRuntime::new(config).unwrap()
}

/// Interprets `sigmoid` on each of `inputs` (queuing their compiles), then
/// waits for every compile.
fn queue_all(jit: &JitRuntime, function: &JitFunction, inputs: &[[Value; 1]]) {
    for x in inputs {
        let result = jit
            .call(function, x, &[], |args, _, _| {
                reference::interpret_sigmoid(args)
            })
            .unwrap();
        assert!(matches!(result.provenance, Provenance::Interpreted(_)));
    }
    assert!(jit.wait_for_compiles(Duration::from_secs(120)));
}

#[test]
fn misses_queued_together_compile_as_one_module() {
    let jit = batching(DiskCacheFolder::Disabled);
    let sigmoid = reference::sigmoid();
    let inputs: Vec<[Value; 1]> = (1..=8)
        .map(|n| [Value::from(array(&[n, 3], n as u32))])
        .collect();
    queue_all(&jit, &sigmoid, &inputs);
    for x in &inputs {
        let result = sigmoid_call(&jit, &sigmoid, x);
        assert_eq!(result.provenance, Provenance::Compiled(Origin::Hit));
        let expected = reference::interpret_sigmoid(x).unwrap();
        assert_close(&result.outputs[0], &expected[0], "a batched variant");
    }
    assert_eq!(jit.stats().total.compiles, 8);
    // One thread: the first miss's compile starts alone, the others queue
    // behind it and compile together.
    let runs = jit.profile().loaded_from(ArtifactSource::Compiler);
    assert!(
        (1..=3).contains(&runs),
        "{runs} compiler runs for 8 signatures"
    );
}

/// `sigmoid`, whose lowering emits an op no dialect has for width 3.
fn sigmoid_but_width_3() -> JitFunction {
    JitFunction::new(
        "picky_sigmoid",
        "(defn picky-sigmoid [x] ...)",
        |ctx: &LoweringContext<'_>| {
            let x = &ctx.args()[0];
            let ty = mlir::arg_type(x)?;
            let op = if x.dims()[1] == 3 {
                "stablehlo.no_such_op"
            } else {
                "stablehlo.logistic"
            };
            Ok(Lowered::new(format!(
                "func.func @{entry}(%x: {ty}) -> {ty} {{
                   %y = {op} %x : {ty}
                   return %y : {ty}
                 }}",
                entry = ctx.entry_symbol()
            )))
        },
    )
}

#[test]
fn a_signature_that_does_not_compile_fails_alone_in_its_batch() {
    let jit = batching(DiskCacheFolder::Disabled);
    let picky = sigmoid_but_width_3();
    let inputs: Vec<[Value; 1]> = (1..=4)
        .map(|n| [Value::from(array(&[2, n], n as u32))])
        .collect();
    queue_all(&jit, &picky, &inputs);
    for (n, x) in (1..=4).zip(&inputs) {
        let result = sigmoid_call(&jit, &picky, x);
        let expected = reference::interpret_sigmoid(x).unwrap();
        assert_close(&result.outputs[0], &expected[0], "every call");
        match result.provenance {
            Provenance::Interpreted(FallbackReason::CompileFailed(failure)) if n == 3 => {
                let error = ErrorChain(&*failure).to_string();
                assert!(error.contains("picky_sigmoid(f32[2,3])"), "{error}");
            }
            Provenance::Compiled(Origin::Hit) if n != 3 => {}
            other => panic!("width {n}: {other:?}"),
        }
    }
}

#[test]
fn a_batch_on_disk_serves_each_member_alone() {
    let dir = tempfile::tempdir().unwrap();
    let folder = || DiskCacheFolder::Dir(dir.path().into());
    let sigmoid = reference::sigmoid();
    let inputs: Vec<[Value; 1]> = (1..=4)
        .map(|n| [Value::from(array(&[n, 5], n as u32))])
        .collect();
    let first = batching(folder());
    queue_all(&first, &sigmoid, &inputs);
    let runs = first.profile().loaded_from(ArtifactSource::Compiler);
    assert!(runs < 4, "{runs} compiler runs: nothing was batched");
    drop(first);
    // Another process: each signature alone, blocking, from the disk.
    let second = JitRuntime::new(
        support::blocking()
            .disk(|disk| disk.folder = folder())
            .cache(|cache| cache.dynamic_dims = false)
            .build()
            .unwrap(),
    )
    .unwrap();
    for x in &inputs {
        let sheaf_integration::Dispatched::Compiled(compiled) =
            second.dispatch(&sigmoid, x, &[]).unwrap()
        else {
            panic!("interpreted");
        };
        assert_eq!(compiled.source(), ArtifactSource::DiskCache);
        let expected = reference::interpret_sigmoid(x).unwrap();
        assert_close(&compiled.outputs[0], &expected[0], "a member served alone");
    }
    assert!(second.compiler().is_none(), "nothing was compiled again");
}
