//! Background compilation on the real runtime and compiler: the first call
//! of a signature runs the interpreter without waiting, later calls hit;
//! failures are remembered; a forgotten function is not compiled; dropping
//! the runtime with compiles queued ends.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use sheaf_integration::reference::{self, ReferenceError};
use sheaf_integration::{
    CallResult, CompileMode, DiskCacheFolder, ErrorChain, FallbackReason, JitConfig, JitFunction,
    JitRuntime, Origin, Provenance, Value, VariantError,
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
