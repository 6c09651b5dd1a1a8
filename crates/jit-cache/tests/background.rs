//! Background compiles (`JitCache::get_or_queue`): the queueing call runs
//! the interpreter, later calls run compiled; the queue is bounded;
//! forgotten functions are not compiled; dropping the cache stops the pool
//! without leaking executables. Compiles here wait on a gate, so every state
//! of the pool is observed, not raced.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use jit_cache::{
    CacheConfig, CompileFailure, Dispatch, FallbackReason, FunctionId, JitCache, Origin, Prepared,
    Signature,
};
use test_support::mock_cache::{expected, f32_sig, Behaviour, MockCompiler, MockExe};

/// A compile prepared for the pool.
type Work = Box<dyn FnOnce() -> Result<MockExe, CompileFailure> + Send>;

/// A mock compiler whose compiles start only when the test opens the gate,
/// and which reports each compile as it starts.
struct Gated {
    compiler: Arc<MockCompiler>,
    gate: Arc<Mutex<Receiver<()>>>,
    open: Sender<()>,
    started: Receiver<Signature>,
    report: Sender<Signature>,
}

impl Gated {
    fn new(compiler: MockCompiler) -> Self {
        let (open, gate) = channel();
        let (report, started) = channel();
        Gated {
            compiler: Arc::new(compiler),
            gate: Arc::new(Mutex::new(gate)),
            open,
            started,
            report,
        }
    }

    /// A `prepare` callback for `get_or_queue`: the compile it returns runs
    /// on the pool.
    fn compile(
        &self,
    ) -> impl FnOnce(&Signature) -> Result<Prepared<MockExe, Work>, CompileFailure> {
        let (compiler, gate, report) = (
            Arc::clone(&self.compiler),
            Arc::clone(&self.gate),
            self.report.clone(),
        );
        move |sig: &Signature| {
            let sig = sig.clone();
            Ok(Prepared::Queue(Box::new(move || {
                report.send(sig.clone()).unwrap();
                gate.lock().unwrap().recv().unwrap();
                compiler.compile(&sig)
            }) as Work))
        }
    }

    /// Lets one compile run.
    fn release_one(&self) {
        self.open.send(()).unwrap();
    }
}

fn cache(threads: usize, queue: usize) -> JitCache<MockExe> {
    JitCache::new({
        let mut config = CacheConfig::default();
        config.compile_threads = threads;
        config.compile_queue = queue;
        config
    })
    .unwrap()
}

fn reason(dispatch: Dispatch<MockExe>) -> FallbackReason {
    match dispatch {
        Dispatch::Interpret { reason } => reason,
        Dispatch::Compiled { origin, .. } => panic!("expected the interpreter, ran {origin:?}"),
    }
}

/// Calls until the signature runs compiled; returns that executable's
/// result.
fn until_compiled(
    cache: &JitCache<MockExe>,
    f: &FunctionId,
    sig: &Signature,
    gated: &Gated,
) -> i64 {
    for _ in 0..10_000 {
        match cache.get_or_queue(f, sig, gated.compile()) {
            Dispatch::Compiled { exe, origin } => {
                assert_eq!(origin, Origin::Hit);
                return exe.result;
            }
            Dispatch::Interpret { .. } => thread::sleep(Duration::from_millis(1)),
        }
    }
    panic!("{sig} never ran compiled");
}

#[test]
fn the_queueing_call_interprets_and_later_calls_run_compiled() {
    let gated = Gated::new(MockCompiler::new());
    let cache = cache(1, 8);
    let f = FunctionId::new("sigmoid", 1);
    let sig = f32_sig(&[1, 5]);
    assert_eq!(
        reason(cache.get_or_queue(&f, &sig, gated.compile())),
        FallbackReason::CompileQueued
    );
    assert_eq!(gated.started.recv().unwrap(), sig);
    // While it compiles, calls interpret without queueing it again.
    assert_eq!(
        reason(cache.get_or_queue(&f, &sig, gated.compile())),
        FallbackReason::CompileInFlight
    );
    gated.release_one();
    assert_eq!(until_compiled(&cache, &f, &sig, &gated), expected(&sig));
    assert_eq!(gated.compiler.compiles_of(&sig), 1);
    let stats = cache.stats();
    let c = &stats.function(&f).unwrap().counters;
    assert_eq!((c.compiles, c.compiles_queued, c.live_entries), (1, 1, 1));
    assert_eq!(
        c.fallback_calls, c.misses,
        "every miss ran in the interpreter"
    );
}

#[test]
fn a_full_queue_interprets_without_queueing_and_a_later_miss_queues_again() {
    let gated = Gated::new(MockCompiler::new());
    let cache = cache(1, 1);
    let f = FunctionId::new("softmax", 2);
    let [a, b, c] = [1, 2, 3].map(|n| f32_sig(&[n]));
    assert_eq!(
        reason(cache.get_or_queue(&f, &a, gated.compile())),
        FallbackReason::CompileQueued
    );
    assert_eq!(
        gated.started.recv().unwrap(),
        a,
        "a runs, the queue is empty"
    );
    assert_eq!(
        reason(cache.get_or_queue(&f, &b, gated.compile())),
        FallbackReason::CompileQueued
    );
    assert_eq!(
        reason(cache.get_or_queue(&f, &c, gated.compile())),
        FallbackReason::CompileQueueFull
    );
    let stats = cache.stats();
    assert_eq!(stats.total.queue_full, 1, "{stats}");
    assert!(
        stats.to_string().contains("1 misses found the queue full"),
        "{stats}"
    );
    gated.release_one();
    gated.release_one();
    gated.release_one();
    for sig in [&a, &b, &c] {
        assert_eq!(until_compiled(&cache, &f, sig, &gated), expected(sig));
    }
    assert_eq!(gated.compiler.compiles(), 3);
}

#[test]
fn a_function_forgotten_while_queued_is_not_compiled() {
    let gated = Gated::new(MockCompiler::new());
    let cache = cache(1, 8);
    let f = FunctionId::new("gelu", 3);
    let (a, b) = (f32_sig(&[1]), f32_sig(&[2]));
    assert_eq!(
        reason(cache.get_or_queue(&f, &a, gated.compile())),
        FallbackReason::CompileQueued
    );
    assert_eq!(gated.started.recv().unwrap(), a);
    assert_eq!(
        reason(cache.get_or_queue(&f, &b, gated.compile())),
        FallbackReason::CompileQueued
    );
    // Redefined (a new id) and the old one forgotten, while a compiles and
    // b waits.
    assert_eq!(cache.evict_function(&f), 0);
    gated.release_one();
    let redefined = FunctionId::new("gelu", 4);
    // The pool is free again once b was withdrawn: the new function's
    // compile is the next one to start.
    assert_eq!(
        reason(cache.get_or_queue(&redefined, &a, gated.compile())),
        FallbackReason::CompileQueued
    );
    assert_eq!(gated.started.recv().unwrap(), a);
    gated.release_one();
    assert_eq!(until_compiled(&cache, &redefined, &a, &gated), expected(&a));
    assert_eq!(gated.compiler.compiles_of(&b), 0, "b was not compiled");
    let stats = cache.stats();
    assert_eq!(stats.total.compiles_withdrawn, 1, "{stats}");
    assert_eq!(stats.total.live_entries, 1, "the old a was not cached");
    assert_eq!(gated.compiler.tracker.live(), 1);
}

#[test]
fn failed_background_compiles_are_remembered() {
    let gated = Gated::new(MockCompiler::with(|_| 1000, |_| Behaviour::Fail));
    let cache = cache(1, 8);
    let f = FunctionId::new("conv", 5);
    let sig = f32_sig(&[7]);
    assert_eq!(
        reason(cache.get_or_queue(&f, &sig, gated.compile())),
        FallbackReason::CompileQueued
    );
    gated.started.recv().unwrap();
    gated.release_one();
    let reason = (0..10_000)
        .map(|_| reason(cache.get_or_queue(&f, &sig, gated.compile())))
        .find(|reason| {
            let in_flight = *reason == FallbackReason::CompileInFlight;
            if in_flight {
                thread::sleep(Duration::from_millis(1));
            }
            !in_flight
        })
        .expect("the failed compile never finished");
    assert!(
        matches!(reason, FallbackReason::CompileFailed(_)),
        "{reason:?}"
    );
    assert_eq!(gated.compiler.compiles_of(&sig), 1);
    let c = cache.stats().total;
    assert_eq!(c.failed_compiles, 1);
    assert_eq!(c.fallback_calls, c.calls, "each call interpreted once");
}

#[test]
fn dropping_the_cache_waits_for_the_running_compile_only_and_leaks_nothing() {
    let gated = Gated::new(MockCompiler::new());
    let cache = cache(1, 8);
    let f = FunctionId::new("attention", 6);
    let sigs: Vec<Signature> = (1..=4).map(|n| f32_sig(&[n])).collect();
    for sig in &sigs {
        assert_eq!(
            reason(cache.get_or_queue(&f, sig, gated.compile())),
            FallbackReason::CompileQueued
        );
    }
    assert_eq!(gated.started.recv().unwrap(), sigs[0]);
    let opener = {
        let open = gated.open.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            let _ = open.send(());
        })
    };
    // Returns once the running compile is done; the three queued ones are
    // withdrawn, never compiled.
    drop(cache);
    opener.join().unwrap();
    assert_eq!(gated.compiler.compiles(), 1);
    assert!(gated.started.try_recv().is_err());
    let tracker = &gated.compiler.tracker;
    assert_eq!((tracker.created(), tracker.live()), (1, 0));
}

/// The executable's result, or the interpreter's reason.
fn compiled(dispatch: Dispatch<MockExe>) -> (i64, Origin) {
    match dispatch {
        Dispatch::Compiled { exe, origin } => (exe.result, origin),
        Dispatch::Interpret { reason } => panic!("expected compiled code, got {reason:?}"),
    }
}

/// Waits (boundedly) until the cache has counted `misses` misses in all:
/// a call on another thread has taken its decision.
fn until_misses(cache: &JitCache<MockExe>, misses: u64) {
    for _ in 0..10_000 {
        if cache.stats().total.misses >= misses {
            return;
        }
        thread::sleep(Duration::from_millis(1));
    }
    panic!("the cache never counted {misses} misses");
}

const AN_HOUR: Duration = Duration::from_secs(3600);

#[test]
fn prepare_runs_on_the_calling_thread_only_for_a_miss_that_compiles() {
    let gated = Gated::new(MockCompiler::new());
    let cache = cache(1, 8);
    let f = FunctionId::new("sigmoid", 7).with_dynamic_dims();
    // Not `Send`: it stays on this thread, as a caller's own IR does.
    let prepared_for = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let me = thread::current().id();
    let prepare = |sig: &Signature| {
        assert_eq!(thread::current().id(), me);
        prepared_for.borrow_mut().push(sig.clone());
        gated.compile()(sig)
    };
    let a = f32_sig(&[1, 5]);
    assert_eq!(
        reason(cache.get_or_queue(&f, &a, prepare)),
        FallbackReason::CompileQueued
    );
    assert_eq!(gated.started.recv().unwrap(), a);
    // In flight: nothing is prepared again.
    assert_eq!(
        reason(cache.get_or_queue(&f, &a, prepare)),
        FallbackReason::CompileInFlight
    );
    gated.release_one();
    assert!(cache.wait_for_compiles(Duration::from_secs(600)));
    // A hit prepares nothing.
    assert_eq!(compiled(cache.get_or_queue(&f, &a, prepare)).1, Origin::Hit);
    // With a second row count, `prepare` gets the signature to compile:
    // the call's with its rows dynamic.
    assert_eq!(
        reason(cache.get_or_queue(&f, &f32_sig(&[2, 5]), prepare)),
        FallbackReason::CompileQueued
    );
    assert_eq!(gated.started.recv().unwrap(), f32_sig(&[-1, 5]));
    gated.release_one();
    assert!(cache.wait_for_compiles(Duration::from_secs(600)));
    assert_eq!(*prepared_for.borrow(), [a, f32_sig(&[-1, 5])]);
    for rows in [3, 4] {
        let (result, origin) = compiled(cache.get_or_queue(&f, &f32_sig(&[rows, 5]), prepare));
        assert_eq!(
            (result, origin),
            (expected(&f32_sig(&[-1, 5])), Origin::Hit)
        );
    }
    assert_eq!(prepared_for.borrow().len(), 2);
}

#[test]
fn a_failed_or_panicking_prepare_is_the_signature_s_failure_and_queues_nothing() {
    let cache = cache(1, 8);
    let f = FunctionId::new("mlp_layer", 8);
    let bad = f32_sig(&[5, 32]);
    let refuse = |_: &Signature| -> Result<Prepared<MockExe, Work>, CompileFailure> {
        Err(CompileFailure::refused(std::io::Error::other(
            "x is f32[5,32] but W is f32[64,8]",
        )))
    };
    let FallbackReason::CompileFailed(failure) = reason(cache.get_or_queue(&f, &bad, refuse))
    else {
        panic!("the refusal is the signature's failure");
    };
    assert!(failure.is_refusal());
    // Remembered: the next call prepares nothing.
    let unreachable = |_: &Signature| -> Result<Prepared<MockExe, Work>, CompileFailure> {
        panic!("a remembered failure prepares nothing")
    };
    assert!(matches!(
        reason(cache.get_or_queue(&f, &bad, unreachable)),
        FallbackReason::CompileFailed(_)
    ));
    let boom = f32_sig(&[6]);
    let panics = |_: &Signature| -> Result<Prepared<MockExe, Work>, CompileFailure> {
        panic!("lowering crashed")
    };
    let FallbackReason::CompileFailed(failure) = reason(cache.get_or_queue(&f, &boom, panics))
    else {
        panic!("the panic is the signature's failure");
    };
    assert!(failure.is_panic() && failure.to_string().contains("lowering crashed"));
    assert!(cache.wait_for_compiles(Duration::ZERO), "nothing queued");
    let c = cache.stats().total;
    assert_eq!((c.compiles_queued, c.refusals), (0, 1));
    assert_eq!((c.compiles, c.failed_compiles), (1, 1), "the panic");
    assert_eq!(c.fallback_calls, 3);
}

#[test]
fn a_miss_waits_for_its_compile_when_interpreting_takes_longer() {
    let gated = Gated::new(MockCompiler::new());
    let cache = cache(1, 8);
    let f = FunctionId::new("attention", 9);
    let (a, b) = (f32_sig(&[1]), f32_sig(&[2]));
    // Nothing reported yet: the miss interprets.
    assert_eq!(
        reason(cache.get_or_queue(&f, &a, gated.compile())),
        FallbackReason::CompileQueued
    );
    gated.started.recv().unwrap();
    gated.release_one();
    assert!(cache.wait_for_compiles(Duration::from_secs(600)));
    cache.report_interpreted(&f, AN_HOUR);
    // The first miss after the report waits for the compile it queues.
    let waiting = {
        let (cache, f, b, prepare) = (cache.clone(), f.clone(), b.clone(), gated.compile());
        thread::spawn(move || compiled(cache.get_or_queue(&f, &b, prepare)))
    };
    assert_eq!(gated.started.recv().unwrap(), b);
    gated.release_one();
    let (result, origin) = waiting.join().unwrap();
    assert_eq!(result, expected(&b));
    assert!(matches!(origin, Origin::CompiledNow { .. }), "{origin:?}");
    // Two calls of a third signature: one queues its compile, the other
    // finds it in flight; both wait and run compiled.
    let c = f32_sig(&[3]);
    let call = |cache: &JitCache<MockExe>| {
        let (cache, f, c, prepare) = (cache.clone(), f.clone(), c.clone(), gated.compile());
        thread::spawn(move || compiled(cache.get_or_queue(&f, &c, prepare)))
    };
    let queueing = call(&cache);
    assert_eq!(gated.started.recv().unwrap(), c);
    let other = call(&cache);
    until_misses(&cache, 4);
    gated.release_one();
    assert!(matches!(
        queueing.join().unwrap(),
        (r, Origin::CompiledNow { .. }) if r == expected(&c)
    ));
    assert_eq!(
        other.join().unwrap(),
        (expected(&c), Origin::CompiledByOtherCall)
    );
    let stats = cache.stats();
    let counters = &stats.function(&f).unwrap().counters;
    assert_eq!(
        counters.fallback_calls, 1,
        "only the call before the report"
    );
    assert_eq!((counters.compiles, counters.compiles_queued), (3, 3));
    assert_eq!(gated.compiler.compiles(), 3);
}

#[test]
fn a_miss_interprets_when_interpreting_is_cheaper() {
    let gated = Gated::new(MockCompiler::new());
    let cache = cache(1, 8);
    let f = FunctionId::new("relu", 10);
    cache.report_interpreted(&f, Duration::from_nanos(1));
    let (a, b) = (f32_sig(&[1]), f32_sig(&[2]));
    assert_eq!(
        reason(cache.get_or_queue(&f, &a, gated.compile())),
        FallbackReason::CompileQueued
    );
    assert_eq!(gated.started.recv().unwrap(), a);
    assert_eq!(
        reason(cache.get_or_queue(&f, &b, gated.compile())),
        FallbackReason::CompileQueued
    );
    // b's compile waits for the thread: a miss of it interprets.
    assert_eq!(
        reason(cache.get_or_queue(&f, &b, gated.compile())),
        FallbackReason::CompileInFlight
    );
    gated.release_one();
    gated.release_one();
    assert!(cache.wait_for_compiles(Duration::from_secs(600)));
    let c = cache.stats().total;
    assert_eq!((c.fallback_calls, c.misses, c.compiles), (3, 3, 2));
}

#[test]
fn a_waiting_miss_interprets_when_the_compile_fails_or_is_withdrawn() {
    let gated = Gated::new(MockCompiler::with(
        |_| 1000,
        |sig| {
            if sig.args()[0].dims()[0] == 13 {
                Behaviour::Fail
            } else {
                Behaviour::Succeed
            }
        },
    ));
    let cache = cache(1, 8);
    let f = FunctionId::new("conv", 11);
    cache.report_interpreted(&f, AN_HOUR);
    let call = |sig: Signature| {
        let (cache, f, prepare) = (cache.clone(), f.clone(), gated.compile());
        thread::spawn(move || match cache.get_or_queue(&f, &sig, prepare) {
            Dispatch::Compiled { exe, origin } => Ok((exe.result, origin)),
            Dispatch::Interpret { reason } => Err(reason),
        })
    };
    let failing = call(f32_sig(&[13]));
    gated.started.recv().unwrap();
    gated.release_one();
    let Err(FallbackReason::CompileFailed(failure)) = failing.join().unwrap() else {
        panic!("the compile it waited for failed");
    };
    assert_eq!(failure.to_string(), "the compile failed");
    // One compile runs; a second call waits for its own, queued behind it,
    // and the function is evicted meanwhile: the queued compile is
    // withdrawn and the call is released.
    let running = call(f32_sig(&[1]));
    gated.started.recv().unwrap();
    let withdrawn = call(f32_sig(&[2]));
    until_misses(&cache, 3);
    cache.evict_function(&f);
    gated.release_one();
    // The running compile is delivered to its caller, not cached.
    assert!(matches!(
        running.join().unwrap(),
        Ok((1, Origin::CompiledNow { .. }))
    ));
    assert_eq!(
        withdrawn.join().unwrap(),
        Err(FallbackReason::CompileFailed(Arc::new(
            CompileFailure::Abandoned
        )))
    );
    assert!(cache.wait_for_compiles(Duration::from_secs(600)));
    let c = cache.stats().total;
    assert_eq!((c.failed_compiles, c.compiles_withdrawn), (1, 1));
}

#[test]
fn a_call_waiting_on_a_compile_being_prepared_gets_its_failure() {
    let cache = cache(1, 8);
    let f = FunctionId::new("mlp_layer", 12);
    cache.report_interpreted(&f, AN_HOUR);
    let bad = f32_sig(&[5, 32]);
    let (go, proceed) = channel::<()>();
    let preparing = {
        let (cache, f, bad) = (cache.clone(), f.clone(), bad.clone());
        thread::spawn(move || {
            let prepare = |_: &Signature| -> Result<Prepared<MockExe, Work>, CompileFailure> {
                proceed.recv().unwrap();
                Err(CompileFailure::refused(std::io::Error::other(
                    "K does not fit",
                )))
            };
            reason(cache.get_or_queue(&f, &bad, prepare))
        })
    };
    until_misses(&cache, 1);
    let waiting = {
        let (cache, f, bad) = (cache.clone(), f.clone(), bad.clone());
        thread::spawn(move || {
            let unreachable = |_: &Signature| -> Result<Prepared<MockExe, Work>, CompileFailure> {
                panic!("the compile is in flight")
            };
            reason(cache.get_or_queue(&f, &bad, unreachable))
        })
    };
    until_misses(&cache, 2);
    go.send(()).unwrap();
    for outcome in [preparing.join().unwrap(), waiting.join().unwrap()] {
        let FallbackReason::CompileFailed(failure) = outcome else {
            panic!("both calls get the refusal");
        };
        assert!(failure.is_refusal());
    }
    let c = cache.stats().total;
    assert_eq!((c.refusals, c.fallback_calls, c.compiles_queued), (1, 2, 0));
}

#[test]
fn wait_for_compiles_returns_once_the_queue_is_done() {
    let gated = Gated::new(MockCompiler::new());
    let cache = cache(1, 8);
    let f = FunctionId::new("gelu", 13);
    let sigs: Vec<Signature> = (1..=3).map(|n| f32_sig(&[n])).collect();
    for sig in &sigs {
        assert_eq!(
            reason(cache.get_or_queue(&f, sig, gated.compile())),
            FallbackReason::CompileQueued
        );
    }
    gated.started.recv().unwrap();
    // The gate holds the first compile: the queue cannot be done.
    assert!(!cache.wait_for_compiles(Duration::from_millis(1)));
    for _ in &sigs {
        gated.release_one();
    }
    assert!(cache.wait_for_compiles(Duration::from_secs(600)));
    for sig in &sigs {
        assert!(cache.contains(&f, sig), "{sig} is cached once it returns");
    }
    assert_eq!(cache.stats().total.compiles, 3);
}

#[test]
fn an_executable_prepared_without_compiling_runs_at_once_and_is_cached() {
    let compiler = MockCompiler::new();
    let cache = cache(1, 8);
    let f = FunctionId::new("sigmoid", 8);
    let sig = f32_sig(&[2, 5]);
    let ready = |target: &Signature| -> Result<Prepared<MockExe, Work>, CompileFailure> {
        Ok(Prepared::Ready(compiler.compile(target)?))
    };
    let Dispatch::Compiled { exe, origin } = cache.get_or_queue(&f, &sig, ready) else {
        panic!("a ready executable is not interpreted")
    };
    assert!(matches!(origin, Origin::CompiledNow { .. }), "{origin:?}");
    assert_eq!(exe.result, expected(&sig));
    let never = |_: &Signature| -> Result<Prepared<MockExe, Work>, CompileFailure> {
        unreachable!("a hit prepares nothing")
    };
    assert_eq!(compiled(cache.get_or_queue(&f, &sig, never)).1, Origin::Hit);
    let stats = cache.stats().total;
    assert_eq!(
        (stats.compiles, stats.compiles_queued, stats.fallback_calls),
        (1, 0, 0)
    );
}
