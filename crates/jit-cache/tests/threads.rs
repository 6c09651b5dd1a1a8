//! Concurrency: one compile per signature, parallel compiles of different
//! signatures, no lock held while compiling, waiters released on failure.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use jit_cache::{
    CacheConfig, CompileFailure, DType, Dispatch, FallbackReason, FunctionId, InFlightPolicy,
    JitCache, Origin, Provenance, Signature,
};
use test_support::mock_cache::{expected, f32_sig, run, Behaviour, MockCompiler, MockExe, Ran};

static_assertions::assert_impl_all!(JitCache<MockExe>: Send, Sync, Clone);
static_assertions::assert_impl_all!(Signature: Send, Sync);
static_assertions::assert_impl_all!(Dispatch<MockExe>: Send, Sync);

/// Spins (yielding) until `cond` holds; fails the test if it has not after
/// a bound far past any real wait, so a broken wake-up fails instead of
/// hanging.
fn wait_until(cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !cond() {
        assert!(Instant::now() < deadline, "the condition never held");
        thread::yield_now();
    }
}

#[test]
fn eight_threads_compile_each_signature_once() {
    let per_thread = if cfg!(miri) { 12 } else { 2_000 };
    let compiler = Arc::new(MockCompiler::new());
    let cache: JitCache<MockExe> = JitCache::default();
    let funcs = [FunctionId::new("relu", 1), FunctionId::new("matmul", 2)];
    // 2 functions × 6 signatures: within the capacity, so nothing is evicted.
    let sigs: Vec<Signature> = (0..6)
        .map(|n| {
            Signature::builder()
                .arg(DType::F32, &[n, 4])
                .arg(DType::F32, &[4, n])
                .arg(DType::I64, &[])
                .build()
        })
        .collect();
    let sigs = Arc::new(sigs);
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let (cache, compiler, sigs, funcs) = (
                cache.clone(),
                Arc::clone(&compiler),
                Arc::clone(&sigs),
                funcs.clone(),
            );
            thread::spawn(move || {
                for i in 0..per_thread {
                    let k = (i * 7 + t * 5) % 12;
                    let (func, sig) = (&funcs[k % 2], &sigs[k / 2]);
                    let (ran, outcome) = cache.call(
                        func,
                        sig,
                        |s| {
                            thread::yield_now(); // widen the window for races
                            compiler.compile(s)
                        },
                        |exe| Ran::Compiled(exe.result),
                        |_| Ran::Interpreted(expected(sig)),
                    );
                    assert_eq!(ran, Ran::Compiled(expected(sig)), "{outcome:?}");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    // Each (function, signature) pair compiled exactly once.
    assert_eq!(compiler.compiles(), 12);
    for sig in sigs.iter() {
        assert_eq!(compiler.compiles_of(sig), 2, "once per function for {sig}");
    }
    let stats = cache.stats();
    let t = &stats.total;
    assert_eq!(t.calls, 8 * per_thread as u64);
    assert_eq!(t.hits + t.misses, t.calls);
    assert_eq!(
        (t.compiles, t.live_entries, t.evictions, t.fallback_calls),
        (12, 12, 0, 0)
    );
    drop(cache);
    assert_eq!(compiler.tracker.live(), 0);
}

#[test]
fn a_concurrent_miss_on_the_same_signature_waits_for_the_compile() {
    let compiler = Arc::new(MockCompiler::new());
    let cache: JitCache<MockExe> = JitCache::default();
    let f = FunctionId::new("sigmoid", 1);
    let sig = f32_sig(&[1, 5]);
    let first = {
        let (cache, compiler, f, sig) =
            (cache.clone(), Arc::clone(&compiler), f.clone(), sig.clone());
        thread::spawn(move || {
            let probe = cache.clone();
            run_with(&cache, &f, &sig, |s| {
                // Hold the compile until the second call has missed too.
                wait_until(|| probe.stats().total.misses >= 2);
                compiler.compile(s)
            })
        })
    };
    wait_until(|| cache.stats().total.misses >= 1);
    let (ran, outcome) = run(&cache, &f, &sig, &compiler);
    assert_eq!(ran, Ran::Compiled(expected(&sig)));
    assert_eq!(outcome, Provenance::Compiled(Origin::CompiledByOtherCall));
    let (ran, outcome) = first.join().unwrap();
    assert_eq!(ran, Ran::Compiled(expected(&sig)));
    assert!(matches!(
        outcome,
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    assert_eq!(compiler.compiles(), 1);
    assert_eq!(cache.stats().total.compiles, 1);
}

#[test]
fn with_interpret_policy_a_concurrent_miss_runs_the_interpreter() {
    let compiler = Arc::new(MockCompiler::new());
    let cache: JitCache<MockExe> = JitCache::new({
        let mut config = CacheConfig::default();
        config.in_flight = InFlightPolicy::Interpret;
        config
    })
    .unwrap();
    let f = FunctionId::new("sigmoid", 1);
    let sig = f32_sig(&[1, 5]);
    let second_done = Arc::new(AtomicBool::new(false));
    let first = {
        let (cache, compiler, f, sig, done) = (
            cache.clone(),
            Arc::clone(&compiler),
            f.clone(),
            sig.clone(),
            Arc::clone(&second_done),
        );
        thread::spawn(move || {
            run_with(&cache, &f, &sig, |s| {
                wait_until(|| done.load(Ordering::SeqCst));
                compiler.compile(s)
            })
        })
    };
    wait_until(|| cache.stats().total.misses >= 1);
    let (ran, outcome) = run(&cache, &f, &sig, &compiler);
    second_done.store(true, Ordering::SeqCst);
    assert_eq!(ran, Ran::Interpreted(expected(&sig)));
    assert_eq!(
        outcome,
        Provenance::Interpreted(FallbackReason::CompileInFlight)
    );
    first.join().unwrap();
    assert_eq!(compiler.compiles(), 1);
    assert_eq!(
        run(&cache, &f, &sig, &compiler).1,
        Provenance::Compiled(Origin::Hit)
    );
}

#[test]
fn different_signatures_compile_in_parallel_without_the_lock() {
    let compiler = Arc::new(MockCompiler::new());
    let cache: JitCache<MockExe> = JitCache::default();
    let f = FunctionId::new("sigmoid", 1);
    let cached = f32_sig(&[9]);
    run(&cache, &f, &cached, &compiler);
    // Both compiles must be inside their callbacks at once to pass the barrier.
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = [f32_sig(&[1]), f32_sig(&[2])]
        .into_iter()
        .map(|sig| {
            let (cache, compiler, f, barrier, cached) = (
                cache.clone(),
                Arc::clone(&compiler),
                f.clone(),
                Arc::clone(&barrier),
                cached.clone(),
            );
            thread::spawn(move || {
                let probe = cache.clone();
                run_with(&cache, &f, &sig, |s| {
                    barrier.wait();
                    // The cache answers from inside a compile: no lock is held.
                    let hit = probe
                        .get_or_compile(&f, &cached, |_| Err(CompileFailure::message("unused")));
                    assert!(matches!(
                        hit,
                        Dispatch::Compiled {
                            origin: Origin::Hit,
                            ..
                        }
                    ));
                    compiler.compile(s)
                })
            })
        })
        .collect();
    for h in handles {
        let (ran, _) = h.join().unwrap();
        assert!(matches!(ran, Ran::Compiled(_)));
    }
    assert_eq!(compiler.compiles(), 3);
}

#[test]
fn waiters_are_released_when_the_compile_panics() {
    let compiler = Arc::new(MockCompiler::with(|_| 10, |_| Behaviour::Panic));
    let cache: JitCache<MockExe> = JitCache::default();
    let f = FunctionId::new("sigmoid", 1);
    let sig = f32_sig(&[1, 5]);
    let first = {
        let (cache, compiler, f, sig) =
            (cache.clone(), Arc::clone(&compiler), f.clone(), sig.clone());
        thread::spawn(move || {
            let probe = cache.clone();
            run_with(&cache, &f, &sig, |s| {
                wait_until(|| probe.stats().total.misses >= 2);
                compiler.compile(s)
            })
        })
    };
    wait_until(|| cache.stats().total.misses >= 1);
    let (ran, outcome) = run(&cache, &f, &sig, &compiler);
    assert_eq!(ran, Ran::Interpreted(expected(&sig)));
    match outcome {
        Provenance::Interpreted(FallbackReason::CompileFailed(e)) => assert!(e.is_panic(), "{e}"),
        other => panic!("expected a failed compile, got {other:?}"),
    }
    let (_, outcome) = first.join().unwrap();
    assert!(matches!(
        outcome,
        Provenance::Interpreted(FallbackReason::CompileFailed(_))
    ));
    assert_eq!(compiler.compiles(), 1);
    let stats = cache.stats();
    assert_eq!(
        (stats.total.failed_compiles, stats.total.fallback_calls),
        (1, 2)
    );
}

#[test]
fn a_compile_that_outlives_its_function_is_delivered_but_not_cached() {
    let compiler = Arc::new(MockCompiler::new());
    let cache: JitCache<MockExe> = JitCache::default();
    let f = FunctionId::new("sigmoid", 1);
    let sig = f32_sig(&[1, 5]);
    let evicted = Arc::new(AtomicBool::new(false));
    let first = {
        let (cache, compiler, f, sig, evicted) = (
            cache.clone(),
            Arc::clone(&compiler),
            f.clone(),
            sig.clone(),
            Arc::clone(&evicted),
        );
        thread::spawn(move || {
            run_with(&cache, &f, &sig, |s| {
                wait_until(|| evicted.load(Ordering::SeqCst));
                compiler.compile(s)
            })
        })
    };
    wait_until(|| cache.stats().total.misses >= 1);
    assert_eq!(cache.evict_function(&f), 0);
    evicted.store(true, Ordering::SeqCst);
    let (ran, outcome) = first.join().unwrap();
    assert_eq!(ran, Ran::Compiled(expected(&sig)));
    assert!(matches!(
        outcome,
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    assert_eq!(cache.stats().total.live_entries, 0);
    assert_eq!(compiler.tracker.live(), 0, "dropped after its call");
    // The function starts afresh and compiles again.
    let (_, outcome) = run(&cache, &f, &sig, &compiler);
    assert!(matches!(
        outcome,
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
}

fn run_with(
    cache: &JitCache<MockExe>,
    f: &FunctionId,
    sig: &Signature,
    compile: impl FnOnce(&Signature) -> Result<MockExe, CompileFailure>,
) -> (Ran, Provenance) {
    cache.call(
        f,
        sig,
        compile,
        |exe| Ran::Compiled(exe.result),
        |_| Ran::Interpreted(expected(sig)),
    )
}
