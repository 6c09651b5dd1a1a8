//! Background compiles (`JitCache::get_or_queue`): the queueing call runs
//! the interpreter, later calls run compiled; the queue is bounded;
//! forgotten functions are not compiled; dropping the cache stops the pool
//! without leaking executables. Compiles here wait on a gate, so every state
//! of the pool is observed, not raced.

mod common;

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{expected, f32_sig, Behaviour, MockCompiler, MockExe};
use jit_cache::{
    CacheConfig, CompileFailure, Dispatch, FallbackReason, FunctionId, JitCache, Origin, Signature,
};

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

    /// A compile callback for the pool.
    fn compile(
        &self,
    ) -> impl FnOnce(&Signature) -> Result<MockExe, CompileFailure> + Send + 'static {
        let (compiler, gate, report) = (
            Arc::clone(&self.compiler),
            Arc::clone(&self.gate),
            self.report.clone(),
        );
        move |sig| {
            report.send(sig.clone()).unwrap();
            gate.lock().unwrap().recv().unwrap();
            compiler.compile(sig)
        }
    }

    /// Lets one compile run.
    fn release_one(&self) {
        self.open.send(()).unwrap();
    }
}

fn cache(threads: usize, queue: usize) -> JitCache<MockExe> {
    JitCache::new(CacheConfig {
        compile_threads: threads,
        compile_queue: queue,
        ..CacheConfig::default()
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
